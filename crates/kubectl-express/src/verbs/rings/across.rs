//! `rings` across contexts: each context's survey, a table with a CONTEXT column first, the
//! warnings and unserved tenants on stderr named by context, and the fleet's exit code (each
//! context 0 or 1 as alone; 4 when some context could not be read).

use std::process::ExitCode;

use serde_json::{Map, Value, json};

use crate::contexts::tail;
use crate::read::rings::survey::Survey;
use crate::read::rings::{Read, read};
use crate::show::rings::{RING_HEADER, ring_rows, unserved_lines, with_release_column};
use crate::verbs::args::Output;
use express_client::contexts::across::{ContextError, PerContext, Plan, Scope};
use express_client::exit::Exit;

pub async fn run(output: Output, operator_namespace: &str, plan: Plan) -> Result<ExitCode, Exit> {
    let focus = plan.namespace.clone();
    let scope = if focus.is_some() {
        Scope::Namespace
    } else {
        Scope::All
    };
    let operator_namespace = operator_namespace.to_owned();
    let results = plan
        .read_all(scope, move |target| {
            let (focus, operator_namespace) = (focus.clone(), operator_namespace.clone());
            async move {
                read(&target.client, focus.as_deref(), &operator_namespace)
                    .await
                    .map_err(ContextError::Failed)
            }
        })
        .await;
    let surveys: Vec<PerContext<Survey>> = results
        .into_iter()
        .map(|r| {
            if let Ok(read) = &r.outcome {
                for line in &read.warnings {
                    eprintln!("kubectl-express rings: context {}: {line}", r.context);
                }
            }
            PerContext {
                context: r.context,
                elapsed: r.elapsed,
                outcome: r.outcome.map(|Read { survey, .. }| survey),
            }
        })
        .collect();
    let mut codes = Vec::new();
    let mut unserved = Vec::new();
    for r in &surveys {
        let Ok(survey) = &r.outcome else { continue };
        for line in unserved_lines(survey) {
            eprintln!("kubectl-express rings: context {}: {line}", r.context);
        }
        unserved.extend(
            survey
                .unserved
                .iter()
                .map(|tenant| json!({"context": r.context, "tenant": tenant})),
        );
        codes.push(u8::from(!survey.unserved.is_empty()));
    }
    let unread: Vec<&str> = surveys
        .iter()
        .filter(|r| r.outcome.is_err())
        .map(|r| r.context.as_str())
        .collect();
    match output {
        Output::Json => tail::print_json(&json!({
            "contexts": tail::entries(&surveys, |_| Map::from_iter([
                ("rings".to_owned(), Value::Null),
                ("unserved".to_owned(), Value::Null),
                ("leadersKnown".to_owned(), json!(false)),
            ]))?,
            "unserved": unserved,
            "unread": unread,
        }))?,
        _ => print!("{}", render(&surveys)),
    }
    Ok(ExitCode::from(tail::exit_code(
        &codes,
        unread.len(),
        plan.require_all,
    )))
}

/// One line per ring of each context read, CONTEXT first, then a line per context not read.
fn render(results: &[PerContext<Survey>]) -> String {
    let rows = tail::context_rows(results, ring_rows);
    let mut header = RING_HEADER.to_vec();
    let releases = results
        .iter()
        .filter_map(|r| r.outcome.as_ref().ok())
        .flat_map(|survey| survey.rings.iter().map(|ring| &ring.release));
    let rows = with_release_column(&mut header, rows, releases);
    tail::context_table(
        results,
        &header,
        &rows,
        "No operator rings found (no ExpressClusters, no ring Leases).\n",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::rings::survey::RingRow;
    use std::time::Duration;

    fn ring(name: &str, leader: Option<&str>, version: &str, tenants: usize) -> RingRow {
        RingRow {
            ring: name.into(),
            leader: leader.map(Into::into),
            lease_expires: None,
            versions: vec![version.into()],
            tenants,
            rolling_out: 0,
            tenants_without_leader: Vec::new(),
            driven_without_lease: false,
            release: None,
        }
    }

    #[test]
    fn each_ring_under_its_context() {
        let results = vec![
            PerContext {
                context: "dc-a".into(),
                elapsed: Duration::ZERO,
                outcome: Ok(Survey {
                    rings: vec![
                        ring("default", Some("op-a"), "0.5.0", 3),
                        ring("canary", None, "0.6.0", 1),
                    ],
                    unserved: vec![],
                    leaders_known: true,
                }),
            },
            PerContext {
                context: "dc-b".into(),
                elapsed: Duration::ZERO,
                outcome: Err(ContextError::TimedOut(10)),
            },
        ];
        assert_eq!(
            render(&results),
            "CONTEXT  RING     LEADER  VERSION  TENANTS  ROLLING OUT\n\
             dc-a     default  op-a    0.5.0    3        0\n\
             dc-a     canary   <none>  0.6.0    1        0\n\
             context dc-b: unreachable (timeout after 10s)\n"
        );
    }
}
