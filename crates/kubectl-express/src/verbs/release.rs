//! `kubectl express release [NAME]` and `release pause|resume|promote [--full]|abort NAME`: the
//! operator's own releases (DESIGN section 12), read and steered in the operator's namespace
//! (`--operator-namespace`, default `express-system`), like `rings` and `doctor`. Exit 0 while a
//! release is pending, progressing, paused or succeeded, 1 when it rolled back or holds
//! inconclusive (without NAME: the newest release's), 2 when it cannot run.

use std::process::ExitCode;

use k8s_openapi::jiff::Timestamp;

use crate::connect::ConnectArgs;
use crate::exit::{Code, Exit};
use crate::release::{self, Request};

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    /// The release to show (default: every release of the operator's namespace).
    name: Option<String>,
    /// Output: text or json (the OperatorRelease objects as the API serves them).
    #[arg(short = 'o', long, default_value = "text", value_parser = ["text", "json"])]
    output: String,
    #[command(flatten)]
    target: Target,
}

#[derive(clap::Args, Debug)]
struct Target {
    /// The operator's namespace, where releases live.
    #[arg(long, default_value = super::DEFAULT_OPERATOR_NAMESPACE, value_name = "NS")]
    operator_namespace: String,
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
        None => return show(args.name, args.output, args.target),
        Some(Action::Pause(n)) => (n.name, n.target, Request::Pause),
        Some(Action::Resume(n)) => (n.name, n.target, Request::Resume),
        Some(Action::Promote(p)) => (p.name, p.target, Request::Promote { full: p.full }),
        Some(Action::Abort(n)) => (n.name, n.target, Request::Abort),
    };
    super::live("release", &target.connect, |c| async move {
        let done = release::request(&c.client, &target.operator_namespace, &name, request).await?;
        done.print();
        Ok(Code::Done.into())
    })
}

fn show(name: Option<String>, output: String, target: Target) -> ExitCode {
    super::checked("release", &target.connect, true, |client, _| async move {
        let client = client.ok_or_else(|| Exit::usage("no cluster to read"))?;
        let namespace = &target.operator_namespace;
        let now = Timestamp::now();
        let releases = match &name {
            Some(name) => vec![release::get(&client, namespace, name).await?],
            None => release::list(&client, namespace).await?,
        };
        match output.as_str() {
            "json" => {
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
                Some(_) => releases
                    .iter()
                    .for_each(|r| print!("{}", release::render(r, now))),
                None => print!("{}", release::render_list(&releases, now)),
            },
        }
        // The newest release says where the fleet stands; older ones are its history.
        let phase = releases
            .last()
            .and_then(|r| r.status.as_ref())
            .map(|s| s.phase())
            .unwrap_or_default();
        Ok(release::code(phase).into())
    })
}
