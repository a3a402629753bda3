//! The doctor's report as text (DESIGN section 10): one DC in the runbook's order (the
//! verdict and why, each check with its evidence, then the tenants), or the fleet verdict across
//! DCs, a line per context, then each context's report; and what a verdict means to a pipeline.

use serde::Serialize;

use express_triage::across::FleetVerdict;
use express_triage::{Report, Status, Verdict};

use crate::contexts::across::PerContext;
use crate::show::cluster;
use crate::show::text::table;

/// The exit code of a verdict: 0 healthy, 1 tenant or deployment, 3 infrastructure.
pub fn verdict_code(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Healthy => 0,
        Verdict::Tenant | Verdict::Deployment => 1,
        Verdict::Infrastructure => 3,
    }
}

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

/// With `-n NS`, the namespace's clusters as `list` shows them.
pub fn focus_section(
    objects: &express_api::Objects,
    operator_namespace: &str,
    namespace: &str,
) -> String {
    let rows: Vec<cluster::ListRow> = cluster::list_rows(objects, operator_namespace)
        .into_iter()
        .filter(|r| r.namespace == namespace)
        .collect();
    format!("\nNAMESPACE {namespace}\n{}", cluster::render_list(&rows))
}

/// The runbook's order: the verdict and why, each check with its evidence, then the tenants.
pub fn render(report: &Report, stuck_after_seconds: i64) -> String {
    let mut out = format!(
        "VERDICT: {}\n  {}\n\nCHECKS\n",
        report.verdict.as_str(),
        report.reason
    );
    let width = report
        .checks
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    for check in &report.checks {
        let mark = match check.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        out.push_str(&format!(
            "  [{mark}] {:width$}  {}\n",
            check.name, check.summary
        ));
        for line in &check.evidence {
            out.push_str(&format!("         {:width$}  - {line}\n", ""));
        }
    }
    if report.tenants.is_empty() {
        out.push_str("\nTENANTS\n  none to report\n");
        return out;
    }
    let rows: Vec<[String; 6]> = report
        .tenants
        .iter()
        .map(|t| {
            let rollout = t.rollout.as_ref();
            [
                t.namespace.clone(),
                t.cluster.clone(),
                if t.symptoms.is_empty() {
                    "-".into()
                } else {
                    t.symptoms
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                },
                rollout
                    .and_then(|r| r.state.clone())
                    .unwrap_or_else(|| "-".into()),
                rollout
                    .and_then(|r| r.version.clone())
                    .unwrap_or_else(|| "-".into()),
                {
                    let why = match (t.explained_by_rollout, t.behind_seconds) {
                        (_, Some(s)) => format!("operator behind {}", express_triage::age(s)),
                        (true, None) => "follows the rollout".into(),
                        (false, None)
                            if t.symptoms.is_empty()
                                && t.rollout.as_ref().is_some_and(|r| r.active()) =>
                        {
                            "rolling out".into()
                        }
                        (false, None) if t.symptoms.is_empty() => "-".into(),
                        (false, None) => "no rollout explains it".into(),
                    };
                    // The nodes down no delivery moves (and bounces): what L2 looks at next.
                    let nodes: Vec<String> = t
                        .nodes_down
                        .iter()
                        .filter(|n| n.work != Some(express_triage::Work::Delivery))
                        .map(|n| n.describe(stuck_after_seconds))
                        .collect();
                    if nodes.is_empty() {
                        why
                    } else {
                        format!("{why}: {}", nodes.join("; "))
                    }
                },
            ]
        })
        .collect();
    let header = [
        "NAMESPACE",
        "CLUSTER",
        "SYMPTOMS",
        "ROLLOUT",
        "VERSION",
        "WHY",
    ];
    let widths: Vec<usize> = (0..6)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[&str]| {
        let mut text = String::from(" ");
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                text.push_str(&format!(" {cell}"));
            } else {
                text.push_str(&format!(" {cell:w$}", w = widths[i]));
            }
        }
        text.push('\n');
        text
    };
    out.push_str("\nTENANTS\n");
    out.push_str(&line(&header));
    for row in &rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        out.push_str(&line(&cells));
    }
    out
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
