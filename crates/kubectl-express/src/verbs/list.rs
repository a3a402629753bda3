//! `kubectl express list [-A] [-o text|json] [--context ...|--all-contexts]`: one line per
//! Express cluster: phase, rollout, progress, ready nodes and the pause in force. Across
//! contexts, a CONTEXT column first, and a line per context that could not be read.

use std::process::ExitCode;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::contexts::tail;
use crate::show::cluster;
use crate::verbs::args::{OperatorNamespace, Output};
use express_client::contexts::across;
use express_client::contexts::across::{PerContext, Plan, Scope};
use express_client::contexts::select::{FleetArgs, Mode};
use express_client::exit::{Code, Exit};
use express_client::read::live;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Every namespace.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// Output: text (a table) or json (`clusters`; across contexts, one entry per context).
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    output: Output,
    #[command(flatten)]
    operator: OperatorNamespace,
    #[command(flatten)]
    connect: FleetArgs,
}

/// One context's clusters, as its JSON entry carries them.
#[derive(Serialize)]
struct Clusters {
    clusters: Vec<cluster::ListRow>,
}

/// `list -o json` of one context: its rows, serialized as they are written, each an object of
/// sorted keys as `list` has always written them (a row at a time, never the whole answer as
/// one JSON value).
struct Listed<'a> {
    clusters: &'a [cluster::ListRow],
}

impl serde::Serialize for Listed<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        struct Rows<'a>(&'a [cluster::ListRow]);
        impl serde::Serialize for Rows<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_seq(
                    self.0
                        .iter()
                        .map(|row| serde_json::to_value(row).unwrap_or_default()),
                )
            }
        }
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry("clusters", &Rows(self.clusters))?;
        map.end()
    }
}

pub fn run(args: Args) -> ExitCode {
    match args.connect.mode() {
        Err(error) => Exit::usage(error.to_string()).report("list"),
        Ok(Mode::Single(connect)) => super::live("list", &connect, |c| async move {
            let namespace = (!args.all_namespaces).then_some(c.namespace.as_str());
            let objects = live::load(
                &c.client,
                namespace,
                &args.operator.namespace,
                live::Reading::Listing,
            )
            .await
            .map_err(Exit::failure)?;
            let rows = cluster::list_rows(&objects, &args.operator.namespace);
            // The rows are all the answer needs: the objects go before it is written.
            drop(objects);
            match args.output {
                Output::Json => tail::print_json(&Listed { clusters: &rows })?,
                _ => print!("{}", cluster::render_list(&rows)),
            }
            Ok(Code::Done.into())
        }),
        Ok(Mode::Fleet(selection)) => {
            across::run("list", &args.connect, selection, |plan| across(&args, plan))
        }
    }
}

async fn across(args: &Args, plan: Plan) -> Result<ExitCode, Exit> {
    let scope = if args.all_namespaces {
        Scope::All
    } else {
        Scope::Namespace
    };
    let (all_namespaces, operator_namespace) =
        (args.all_namespaces, args.operator.namespace.clone());
    let results = plan
        .read_all(scope, move |target| {
            let operator_namespace = operator_namespace.clone();
            async move {
                let namespace = (!all_namespaces).then_some(target.namespace.as_str());
                let objects = live::load(
                    &target.client,
                    namespace,
                    &operator_namespace,
                    live::Reading::Listing,
                )
                .await
                .map_err(across::ContextError::Failed)?;
                Ok(Clusters {
                    clusters: cluster::list_rows(&objects, &operator_namespace),
                })
            }
        })
        .await;
    let unread: Vec<&str> = results
        .iter()
        .filter(|r| r.outcome.is_err())
        .map(|r| r.context.as_str())
        .collect();
    match args.output {
        Output::Json => {
            let entries = tail::entries(&results, |_| {
                Map::from_iter([("clusters".to_owned(), Value::Null)])
            })?;
            let total: usize = results
                .iter()
                .filter_map(|r| r.outcome.as_ref().ok())
                .map(|c| c.clusters.len())
                .sum();
            tail::print_json(&json!({
                "contexts": entries,
                "total": total,
                "unread": unread,
            }))?;
        }
        _ => print!("{}", render(&results)),
    }
    let read = vec![0; results.len() - unread.len()];
    Ok(ExitCode::from(tail::exit_code(
        &read,
        unread.len(),
        plan.require_all,
    )))
}

/// The table with a CONTEXT column first, rows in context order (each context's rows in its
/// own order), then a line per context not read.
fn render(results: &[PerContext<Clusters>]) -> String {
    let rows = tail::context_rows(results, |read| {
        read.clusters.iter().map(cluster::list_cells).collect()
    });
    tail::context_table(
        results,
        &cluster::LIST_HEADER,
        &rows,
        "No Express clusters found.\n",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use express_client::contexts::across::ContextError;
    use std::time::Duration;

    fn row(namespace: &str) -> cluster::ListRow {
        cluster::ListRow {
            namespace: namespace.into(),
            cluster: "shop".into(),
            phase: "Healthy".into(),
            rollout: "Complete".into(),
            progress: "2/2".into(),
            current: "v1".into(),
            ready: "2/2".into(),
            paused: "-".into(),
            ring: "default".into(),
            operator_version: "0.5.0".into(),
        }
    }

    #[test]
    fn the_context_column_and_a_line_per_context_not_read() {
        let results = vec![
            PerContext {
                context: "dc-a".into(),
                elapsed: Duration::ZERO,
                outcome: Ok(Clusters {
                    clusters: vec![row("team-a"), row("team-b")],
                }),
            },
            PerContext {
                context: "dc-b".into(),
                elapsed: Duration::ZERO,
                outcome: Err(ContextError::Unauthorized),
            },
            PerContext {
                context: "dc-c".into(),
                elapsed: Duration::ZERO,
                outcome: Ok(Clusters {
                    clusters: vec![row("team-a")],
                }),
            },
        ];
        assert_eq!(
            render(&results),
            "CONTEXT  NAMESPACE  CLUSTER  PHASE    ROLLOUT   PROGRESS  CURRENT  READY  PAUSED  RING     OPERATOR VERSION\n\
             dc-a     team-a     shop     Healthy  Complete  2/2       v1       2/2    -       default  0.5.0\n\
             dc-a     team-b     shop     Healthy  Complete  2/2       v1       2/2    -       default  0.5.0\n\
             dc-c     team-a     shop     Healthy  Complete  2/2       v1       2/2    -       default  0.5.0\n\
             context dc-b: forbidden (Unauthorized)\n"
        );
        let none_read = &results[1..2];
        assert_eq!(
            render(none_read),
            "No Express clusters found.\ncontext dc-b: forbidden (Unauthorized)\n"
        );
    }
}
