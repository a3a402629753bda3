//! The doctor's report as text (DESIGN section 10): one DC in the runbook's order (the
//! verdict and why, each check with its evidence, then the tenants), or the fleet verdict across
//! DCs, a line per context, then each context's report; and what a verdict means to a pipeline.

use serde::Serialize;

use express_triage::across::FleetVerdict;
use express_triage::{Check, Report, Status, TenantReport, Verdict};

use crate::show::cluster;
use crate::text::table;
use express_client::contexts::across::PerContext;
use express_client::exit::Code;

/// The exit code of a verdict: 0 healthy, 1 tenant or deployment, 3 infrastructure.
pub fn verdict_code(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Healthy => Code::Done,
        Verdict::Tenant | Verdict::Deployment => Code::Failed,
        Verdict::Infrastructure => Code::Infrastructure,
    }
    .number()
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
    out.push_str(&render_checks(&report.checks));
    if report.tenants.is_empty() {
        out.push_str("\nTENANTS\n  none to report\n");
        return out;
    }
    let rows: Vec<[String; 6]> = report
        .tenants
        .iter()
        .map(|t| tenant_row(t, stuck_after_seconds))
        .collect();
    out.push_str("\nTENANTS\n");
    out.push_str(&render_tenants(&rows));
    out
}

/// Each check's mark, name and summary, then its evidence beneath.
fn render_checks(checks: &[Check]) -> String {
    let mut out = String::new();
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for check in checks {
        let mark = match check.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        out.push_str(&format!(
            "  [{mark}] {:width$}  {}\n",
            check.name, check.summary
        ));
        // A single evidence line that only repeats the summary says nothing more.
        if check.evidence != [check.summary.as_str()] {
            for line in &check.evidence {
                out.push_str(&format!("         {:width$}  - {line}\n", ""));
            }
        }
    }
    out
}

/// A tenant's cells: namespace, cluster, symptoms, rollout state and version, why.
fn tenant_row(t: &TenantReport, stuck_after_seconds: i64) -> [String; 6] {
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
        tenant_why(t, stuck_after_seconds),
    ]
}

/// What explains the tenant's symptoms (or what it is doing), then the nodes down that no
/// delivery moves.
fn tenant_why(t: &TenantReport, stuck_after_seconds: i64) -> String {
    let why = match (t.explained_by_rollout, t.behind_seconds) {
        (_, Some(s)) => format!("operator behind {}", express_triage::age(s)),
        (true, None) => "follows the rollout".into(),
        (false, None)
            if t.symptoms.is_empty() && t.rollout.as_ref().is_some_and(|r| r.active()) =>
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
}

/// The tenants' table: each column as wide as its widest cell, the last one unpadded.
fn render_tenants(rows: &[[String; 6]]) -> String {
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
    let mut out = line(&header);
    for row in rows {
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
    details: bool,
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
    // One screen across many DCs: the detail of a healthy DC is its table line.
    let healthy = |r: &PerContext<DcReport>| {
        r.outcome
            .as_ref()
            .is_ok_and(|dc| dc.report.verdict == Verdict::Healthy)
    };
    let quiet = results.iter().filter(|r| !details && healthy(r)).count();
    for r in results.iter().filter(|r| details || !healthy(r)) {
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
    if quiet > 0 {
        out.push_str(&format!(
            "\n{quiet} healthy context(s) shown by their line only: --details prints every context's checks\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use express_triage::{Check, Report, Status, Verdict};

    use super::*;
    use express_client::contexts::across::ContextError;

    fn report(verdict: Verdict, summary: &str, evidence: &[&str]) -> DcReport {
        DcReport {
            report: Report {
                verdict,
                reason: format!("{} reason", verdict.as_str()),
                checks: vec![Check {
                    name: "operator",
                    status: if verdict == Verdict::Healthy {
                        Status::Ok
                    } else {
                        Status::Fail
                    },
                    summary: summary.into(),
                    evidence: evidence.iter().map(|e| (*e).to_owned()).collect(),
                }],
                tenants: Vec::new(),
            },
            operator_versions: vec!["0.1.0".into()],
            focus: None,
        }
    }

    fn read(context: &str, outcome: Result<DcReport, ContextError>) -> PerContext<DcReport> {
        PerContext {
            context: context.into(),
            outcome,
            elapsed: Duration::from_millis(5),
        }
    }

    #[test]
    fn across_dcs_only_the_dcs_not_healthy_get_their_checks_unless_asked() {
        let verdict = FleetVerdict {
            verdict: Some(Verdict::Infrastructure),
            headline: "infrastructure in dc-b".into(),
            reason: "dc-b: no leader".into(),
            build: None,
        };
        let results: Vec<PerContext<DcReport>> = (0..20)
            .map(|i| {
                let context = format!("dc-{i:02}");
                match i {
                    1 => read(
                        &context,
                        Ok(report(
                            Verdict::Infrastructure,
                            "no leader",
                            &["Lease expired"],
                        )),
                    ),
                    2 => read(&context, Err(ContextError::TimedOut(10))),
                    _ => read(
                        &context,
                        Ok(report(Verdict::Healthy, "leader live", &["leader live"])),
                    ),
                }
            })
            .collect();
        let short = render_fleet(&verdict, &results, 120, false);
        assert!(
            short.starts_with("FLEET VERDICT: infrastructure in dc-b"),
            "{short}"
        );
        assert_eq!(short.matches("=== CONTEXT").count(), 2, "{short}");
        assert!(short.contains("=== CONTEXT dc-01\nVERDICT: infrastructure"));
        assert!(short.contains("=== CONTEXT dc-02\nVERDICT: unknown"));
        assert!(short.contains("18 healthy context(s) shown by their line only: --details"));
        // The table has a line for every DC, the 20 of them on one screen with the verdict.
        assert_eq!(short.lines().filter(|l| l.starts_with("dc-")).count(), 20);
        let all = render_fleet(&verdict, &results, 120, true);
        assert_eq!(all.matches("=== CONTEXT").count(), 20);
        assert!(!all.contains("--details prints"));
    }

    #[test]
    fn a_check_whose_only_evidence_is_its_summary_says_it_once() {
        let once = render(
            &report(Verdict::Healthy, "leader live", &["leader live"]).report,
            120,
        );
        assert_eq!(once.matches("leader live").count(), 1, "{once}");
        let more = render(
            &report(
                Verdict::Infrastructure,
                "no leader",
                &["Lease expired", "no pod"],
            )
            .report,
            120,
        );
        assert!(
            more.contains("- Lease expired") && more.contains("- no pod"),
            "{more}"
        );
    }
}
