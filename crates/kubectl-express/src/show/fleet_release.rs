//! A release across DCs as people see it: the phase and its reason first, then a line per DC in
//! stage order (its stage, state, its own release's phase and wave, its doctor's verdict and
//! since when), the last soak samples; or a line per plan.

use std::fmt::Write as _;

use express_api::fleet_release::{FleetRelease, FleetReleaseStatus};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::text::{NONE, ago, table};

/// One plan in full.
pub fn render(plan: &FleetRelease, status: &FleetReleaseStatus, now: Timestamp) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "FleetRelease {}: {} (stage {} of {}), ring {} → ring {}{}",
        plan.name_any(),
        status.phase(),
        status.stage + 1,
        plan.spec.stages.len(),
        plan.spec.from_ring,
        plan.spec.to_ring,
        plan.spec
            .version
            .as_deref()
            .map(|v| format!(", build {v}"))
            .unwrap_or_default()
    );
    if let Some(message) = &status.message {
        let _ = writeln!(out, "  {message}");
    }
    out.push('\n');
    let rows: Vec<Vec<String>> = plan
        .spec
        .contexts()
        .map(|(stage, context)| {
            let dc = status.dc(context);
            let release = dc.and_then(|d| d.release.as_ref());
            let since = dc.and_then(|d| {
                d.succeeded_at
                    .as_ref()
                    .or(d.started_at.as_ref())
                    .map(|t| t.0)
            });
            vec![
                format!("{stage} {}", plan.spec.stages[stage].name),
                context.to_owned(),
                dc.map_or("Waiting", |d| d.state.as_str()).to_owned(),
                release.map_or_else(|| NONE.to_owned(), |r| r.phase.to_string()),
                release.map_or_else(|| NONE.to_owned(), |r| (r.wave + 1).to_string()),
                dc.and_then(|d| d.verdict)
                    .map_or_else(|| NONE.to_owned(), |v| v.to_string()),
                ago(since, now),
                dc.and_then(|d| d.message.clone()).unwrap_or_default(),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "STAGE", "DC", "STATE", "RELEASE", "WAVE", "VERDICT", "SINCE", "WHY",
        ],
        &rows,
    ));
    if !status.samples.is_empty() {
        out.push_str("\nSOAK SAMPLES (newest last)\n");
        for sample in status.samples.iter().rev().take(5).rev() {
            let _ = writeln!(
                out,
                "  {} stage {}: {} ({})",
                sample.at.0.strftime("%H:%M:%S"),
                sample.stage,
                sample.verdict.as_str(),
                sample.reason
            );
        }
    }
    out
}

/// A line per plan.
pub fn render_list(plans: &[FleetRelease]) -> String {
    if plans.is_empty() {
        return "No FleetReleases.\n".into();
    }
    let rows: Vec<Vec<String>> = plans
        .iter()
        .map(|p| {
            let status = p.status.clone().unwrap_or_default();
            vec![
                p.name_any(),
                status.phase().as_str().to_owned(),
                format!("{}/{}", status.stage + 1, p.spec.stages.len()),
                format!("{} → {}", p.spec.from_ring, p.spec.to_ring),
                status.message.unwrap_or_default(),
            ]
        })
        .collect();
    table(&["NAME", "PHASE", "STAGE", "RINGS", "MESSAGE"], &rows)
}
