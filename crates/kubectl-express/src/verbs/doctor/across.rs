//! `doctor` across contexts (DESIGN section 13): each context's own report and verdict, then
//! one fleet verdict that names where the trouble is (`express_triage::across`, pure). The text leads
//! with the fleet verdict (the runbook starts there), a line per context, then each context's
//! report as `doctor` prints it alone. A context that could not be read is `unknown`, never
//! `healthy`.

use std::collections::BTreeSet;
use std::fmt::Display;
use std::process::ExitCode;

use express_triage::Report;
use express_triage::across::{ContextRead, FleetVerdict, fleet_verdict};
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::{Args, code, focus_section, read_fleet, render};
use crate::contexts::across::{ContextError, PerContext, Plan, Scope};
use crate::contexts::tail;
use crate::exit::Exit;
use crate::show::text::table;

/// One context's doctor: its report, and the operator builds its tenants report.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DcReport {
    #[serde(flatten)]
    pub report: Report,
    /// The versions in `status.operator` of its tenants (the operator builds driving them).
    pub operator_versions: Vec<String>,
    /// With `-n NS`: that namespace's clusters, as `list` shows them (text only).
    #[serde(skip)]
    pub focus: Option<String>,
}

pub async fn run(args: &Args, plan: Plan) -> Result<ExitCode, Exit> {
    let focus = plan.namespace.clone();
    let thresholds = args.thresholds();
    let scope = if focus.is_some() {
        Scope::Namespace
    } else {
        Scope::All
    };
    let operator_namespace = args.operator_namespace.clone();
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
        .filter_map(|r| Some(code(r.outcome.as_ref().ok()?.report.verdict)))
        .collect();
    let unread: Vec<&str> = results
        .iter()
        .filter(|r| r.outcome.is_err())
        .map(|r| r.context.as_str())
        .collect();
    match args.output.as_str() {
        "json" => tail::print_json(&json!({
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
            render_fleet(&verdict, &results, thresholds.stuck_recovery_seconds)
        ),
    }
    Ok(ExitCode::from(tail::exit_code(
        &codes,
        unread.len(),
        plan.require_all,
    )))
}

/// The fleet verdict and why, one line per context, then each context's report.
pub fn render_fleet(
    verdict: &FleetVerdict,
    results: &[PerContext<DcReport>],
    stuck_after_seconds: i64,
) -> String {
    let mut out = format!(
        "FLEET VERDICT: {}\n  {}\n\n",
        verdict.headline, verdict.reason
    );
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| match &r.outcome {
            Ok(dc) => vec![
                r.context.clone(),
                dc.report.verdict.as_str().to_owned(),
                if dc.operator_versions.is_empty() {
                    "-".into()
                } else {
                    dc.operator_versions.join(",")
                },
                dc.report.reason.clone(),
            ],
            Err(error) => vec![
                r.context.clone(),
                "unknown".into(),
                "-".into(),
                format!("{} ({error})", error.status()),
            ],
        })
        .collect();
    out.push_str(&table(&["CONTEXT", "VERDICT", "OPERATOR", "WHY"], &rows));
    for r in results {
        out.push_str(&format!("\n=== CONTEXT {}\n", r.context));
        match &r.outcome {
            Ok(dc) => {
                out.push_str(&render(&dc.report, stuck_after_seconds));
                if let Some(section) = &dc.focus {
                    out.push_str(section);
                }
            }
            Err(error) => out.push_str(&format!(
                "VERDICT: unknown\n  could not be read: {} ({error})\n",
                error.status()
            )),
        }
    }
    out
}
