//! `doctor` across contexts (DESIGN section 13): each context's own report and verdict, then
//! one fleet verdict that names where the trouble is (`express_triage::across`, pure). The text leads
//! with the fleet verdict (the runbook starts there), a line per context, then each context's
//! report as `doctor` prints it alone. A context that could not be read is `unknown`, never
//! `healthy`.

use std::collections::BTreeSet;
use std::fmt::Display;
use std::process::ExitCode;

use express_triage::Thresholds;
use express_triage::across::{ContextRead, fleet_verdict};
use serde_json::{Map, Value, json};

use crate::contexts::tail;
use crate::show::doctor::{DcReport, focus_section, render_fleet, verdict_code};
use crate::verbs::args::Output;
use express_client::contexts::across::{ContextError, PerContext, Plan, Scope};
use express_client::exit::Exit;
use express_client::read::triage::read_fleet;

pub async fn run(
    output: Output,
    details: bool,
    thresholds: Thresholds,
    operator_namespace: &str,
    plan: Plan,
) -> Result<ExitCode, Exit> {
    let focus = plan.namespace.clone();
    let scope = if focus.is_some() {
        Scope::Namespace
    } else {
        Scope::All
    };
    let operator_namespace = operator_namespace.to_owned();
    let read_thresholds = thresholds.clone();
    let results: Vec<PerContext<DcReport>> = plan
        .read_all(scope, move |target| {
            let (focus, thresholds, operator_namespace) = (
                focus.clone(),
                read_thresholds.clone(),
                operator_namespace.clone(),
            );
            async move {
                let (seen, objects) =
                    read_fleet(&target.client, &operator_namespace, focus.as_deref())
                        .await
                        .map_err(ContextError::Failed)?;
                let operator_versions: BTreeSet<String> = objects
                    .clusters
                    .iter()
                    .filter_map(|c| c.status.as_ref()?.operator.as_ref())
                    .filter(|o| o.released.is_none() && !o.version.is_empty())
                    .map(|o| o.version.clone())
                    .collect();
                Ok(DcReport {
                    report: express_triage::triage(&seen, &thresholds),
                    operator_versions: operator_versions.into_iter().collect(),
                    focus: focus
                        .as_deref()
                        .map(|namespace| focus_section(&objects, &operator_namespace, namespace)),
                })
            }
        })
        .await;
    let dcs: Vec<ContextRead<'_>> = results
        .iter()
        .map(|r| ContextRead {
            context: &r.context,
            read: r.outcome.as_ref().map_err(|e| e as &dyn Display).map(|d| {
                (
                    d.report.verdict,
                    d.report.reason.as_str(),
                    d.operator_versions.as_slice(),
                )
            }),
        })
        .collect();
    let verdict = fleet_verdict(&dcs);
    let codes: Vec<u8> = results
        .iter()
        .filter_map(|r| Some(verdict_code(r.outcome.as_ref().ok()?.report.verdict)))
        .collect();
    let unread: Vec<&str> = results
        .iter()
        .filter(|r| r.outcome.is_err())
        .map(|r| r.context.as_str())
        .collect();
    match output {
        Output::Json => tail::print_json(&json!({
            "verdict": verdict.as_str(),
            "headline": verdict.headline,
            "reason": verdict.reason,
            "build": verdict.build,
            "contexts": tail::entries(&results, |_| Map::from_iter([
                ("verdict".to_owned(), json!("unknown")),
                ("checks".to_owned(), Value::Array(Vec::new())),
                ("tenants".to_owned(), Value::Array(Vec::new())),
            ]))?,
            "unread": unread,
        }))?,
        _ => print!(
            "{}",
            render_fleet(
                &verdict,
                &results,
                thresholds.stuck_recovery_seconds,
                details
            )
        ),
    }
    Ok(ExitCode::from(tail::exit_code(
        &codes,
        unread.len(),
        plan.require_all,
    )))
}
