//! `kubectl express release [NAME]` and `release pause|resume|promote [--full]|abort NAME`: the
//! operator's own releases (DESIGN section 12), read and steered in the operator's namespace
//! (`--operator-namespace`, default `express-system`), like `rings` and `doctor`. Exit 0 while a
//! release is pending, progressing, paused or succeeded, 1 when it rolled back or holds
//! inconclusive (without NAME: the newest release's), 2 when it cannot run. Reading (not the
//! requests) takes the fleet selection (`--context`, `--all-contexts`...): a CONTEXT column, or
//! a section per context, and the fleet's exit code (4 when a context could not be read).

use std::process::ExitCode;

use k8s_openapi::jiff::Timestamp;

use express_api::OperatorRelease;
use express_api::release::ReleasePhase;
use serde_json::{Map, Value, json};

use crate::contexts::tail;
use crate::read::release as read;
use crate::show::release as show;
use crate::verbs::args::{OperatorNamespace, Output};
use crate::write::release::{self as write, Request};
use express_client::connect::ConnectArgs;
use express_client::contexts::across;
use express_client::contexts::across::{PerContext, Plan, Scope};
use express_client::contexts::select::{FleetArgs, Mode};
use express_client::exit::{Code, Exit};

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    /// The release to show (default: every release of the operator's namespace).
    name: Option<String>,
    /// Output: text or json (the OperatorRelease objects as the API serves them).
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    output: Output,
    #[command(flatten)]
    operator: OperatorNamespace,
    #[command(flatten)]
    fleet: FleetArgs,
}

#[derive(clap::Args, Debug)]
struct Target {
    #[command(flatten)]
    operator: OperatorNamespace,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Pause a release: nothing moves, nothing is judged, no bake time passes
    Pause(Named),
    /// Resume a paused release
    Resume(Named),
    /// End the current wave's bake now (--full: every remaining wave now, no more baking)
    Promote(Promote),
    /// Roll the release back now: every tenant it moved returns to its fromRing
    Abort(Named),
}

#[derive(clap::Args, Debug)]
struct Named {
    name: String,
    #[command(flatten)]
    target: Target,
}

#[derive(clap::Args, Debug)]
struct Promote {
    name: String,
    /// Every remaining wave now, without baking or judging: Succeeded once every movable tenant
    /// is adopted.
    #[arg(long)]
    full: bool,
    #[command(flatten)]
    target: Target,
}

pub fn run(args: Args) -> ExitCode {
    let (name, target, request) = match args.action {
        None => {
            return match args.fleet.mode() {
                Err(error) => Exit::usage(error.to_string()).report("release"),
                Ok(Mode::Single(connect)) => {
                    show(args.name, args.output, args.operator.namespace, connect)
                }
                Ok(Mode::Fleet(selection)) => {
                    across::run("release", &args.fleet, selection, |plan| {
                        across(args.name, args.output, args.operator.namespace, plan)
                    })
                }
            };
        }
        Some(Action::Pause(n)) => (n.name, n.target, Request::Pause),
        Some(Action::Resume(n)) => (n.name, n.target, Request::Resume),
        Some(Action::Promote(p)) => (p.name, p.target, Request::Promote { full: p.full }),
        Some(Action::Abort(n)) => (n.name, n.target, Request::Abort),
    };
    super::live("release", &target.connect, |c| async move {
        let done = write::request(&c.client, &target.operator.namespace, &name, request).await?;
        done.print();
        Ok(Code::Done.into())
    })
}

fn show(
    name: Option<String>,
    output: Output,
    operator_namespace: String,
    connect: ConnectArgs,
) -> ExitCode {
    super::checked("release", &connect, true, |client, _| async move {
        let client = client.ok_or_else(|| Exit::usage("no cluster to read"))?;
        let namespace = &operator_namespace;
        let now = Timestamp::now();
        let releases = match &name {
            Some(name) => vec![read::get(&client, namespace, name).await?],
            None => read::list(&client, namespace).await?,
        };
        match output {
            Output::Json => {
                let value = match (&name, releases.first()) {
                    (Some(_), Some(one)) => serde_json::to_value(one),
                    _ => serde_json::to_value(&releases),
                }
                .map_err(|e| Exit::failure(format!("cannot render JSON: {e}")))?;
                println!(
                    "{}",
                    serde_json::to_string_pretty(&value).unwrap_or_default()
                );
            }
            _ => match &name {
                Some(_) => {
                    let versions = read::api_versions(&client).await;
                    for r in &releases {
                        print!("{}", show::render_in_dc(r, now, versions.as_deref()));
                        let ledger =
                            read::notifications(&client, namespace, &r.spec.from_ring).await;
                        print!("{}", show::render_notifications(r, ledger.as_ref(), now));
                    }
                }
                None => print!("{}", show::render_list(&releases, now)),
            },
        }
        Ok(newest_code(&releases).into())
    })
}

/// The exit code a release's phase gives: 0 pending, progressing, paused or succeeded; 1 rolled
/// back or inconclusive.
fn code(phase: ReleasePhase) -> Code {
    match phase {
        ReleasePhase::RolledBack | ReleasePhase::Inconclusive => Code::Failed,
        _ => Code::Done,
    }
}

/// The newest release says where the fleet stands; older ones are its history.
fn newest_code(releases: &[OperatorRelease]) -> Code {
    let phase = releases
        .last()
        .and_then(|r| r.status.as_ref())
        .map(|s| s.phase())
        .unwrap_or_default();
    code(phase)
}

/// One context's releases (the one named, or all).
#[derive(serde::Serialize)]
struct Releases {
    releases: Vec<OperatorRelease>,
}

/// The releases of every context selected: a CONTEXT column (or a section per context for
/// NAME), a line per context not read, and the fleet's exit code.
async fn across(
    name: Option<String>,
    output: Output,
    operator_namespace: String,
    plan: Plan,
) -> Result<ExitCode, Exit> {
    let wanted = name.clone();
    let results = plan
        .read_all(Scope::All, move |target| {
            let (name, namespace) = (wanted.clone(), operator_namespace.clone());
            async move {
                let read = match &name {
                    Some(name) => read::get(&target.client, &namespace, name)
                        .await
                        .map(|one| vec![one]),
                    None => read::list(&target.client, &namespace).await,
                };
                let releases = read.map_err(|exit| across::ContextError::Failed(exit.message))?;
                Ok(Releases { releases })
            }
        })
        .await;
    let now = Timestamp::now();
    let unread = results.iter().filter(|r| r.outcome.is_err()).count();
    let codes: Vec<u8> = results
        .iter()
        .filter_map(|r| r.outcome.as_ref().ok())
        .map(|r| newest_code(&r.releases).number())
        .collect();
    match output {
        Output::Json => tail::print_json(&json!({
            "contexts": tail::entries(&results, |_| {
                Map::from_iter([("releases".to_owned(), Value::Null)])
            })?,
        }))?,
        _ => print!("{}", render_across(&results, name.is_some(), now)),
    }
    Ok(ExitCode::from(tail::exit_code(
        &codes,
        unread,
        plan.require_all,
    )))
}

fn render_across(results: &[PerContext<Releases>], named: bool, now: Timestamp) -> String {
    if !named {
        let rows = tail::context_rows(results, |read| show::list_rows(&read.releases, now));
        return tail::context_table(results, &show::LIST_HEADER, &rows, "No OperatorReleases.\n");
    }
    let mut out = String::new();
    for r in results {
        let Ok(read) = &r.outcome else { continue };
        out.push_str(&format!("== context {}\n", r.context));
        for one in &read.releases {
            out.push_str(&show::render(one, now));
        }
        out.push('\n');
    }
    tail::push_unread_lines(&mut out, results);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn release(name: &str, phase: &str) -> OperatorRelease {
        serde_json::from_value(json!({
            "apiVersion": "express.dev/v1alpha1", "kind": "OperatorRelease",
            "metadata": {"name": name, "namespace": "express-system"},
            "spec": {"fromRing": "default", "toRing": "canary", "waves": [{"percent": 100}]},
            "status": {"phase": phase, "movedTenants": 3, "movableTenants": 4}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn results() -> Vec<PerContext<Releases>> {
        vec![
            PerContext {
                context: "dc-a".into(),
                elapsed: Duration::ZERO,
                outcome: Ok(Releases {
                    releases: vec![release("to-0-6-0", "Progressing")],
                }),
            },
            PerContext {
                context: "dc-b".into(),
                elapsed: Duration::ZERO,
                outcome: Ok(Releases {
                    releases: vec![release("to-0-6-0", "RolledBack")],
                }),
            },
            PerContext {
                context: "dc-c".into(),
                elapsed: Duration::ZERO,
                outcome: Err(across::ContextError::Unreachable(
                    "connection refused".into(),
                )),
            },
        ]
    }

    #[test]
    fn each_release_under_its_context_and_each_context_not_read_named() {
        let text = render_across(&results(), false, Timestamp::now());
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(lines[0][..3], ["CONTEXT", "NAME", "PHASE"], "{text}");
        assert_eq!(lines[1][..3], ["dc-a", "to-0-6-0", "Progressing"], "{text}");
        assert_eq!(lines[2][..3], ["dc-b", "to-0-6-0", "RolledBack"], "{text}");
        assert!(text.contains("context dc-c"), "{text}");
        let named = render_across(&results(), true, Timestamp::now());
        assert!(
            named.contains("== context dc-b\nOperatorRelease express-system/to-0-6-0: RolledBack"),
            "{named}"
        );
    }

    #[test]
    fn the_exit_code_is_the_worst_release_and_incomplete_when_a_context_was_not_read() {
        let codes: Vec<u8> = results()
            .iter()
            .filter_map(|r| r.outcome.as_ref().ok())
            .map(|r| newest_code(&r.releases).number())
            .collect();
        assert_eq!(codes, [0, 1]);
        assert_eq!(tail::exit_code(&codes, 1, false), 4);
        assert_eq!(tail::exit_code(&codes, 0, false), 1);
    }
}
