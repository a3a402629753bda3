//! An OperatorRelease as people see it: one release in full, or a table of the fleet's.

use express_api::release::{OperatorRelease, ReleasePhase};
use express_notify::Ledger;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::text::{NONE, ago, table};

/// The columns of the list of releases.
pub const LIST_HEADER: [&str; 8] = [
    "NAME", "PHASE", "FROM", "TO", "WAVE", "MOVED", "PINNED", "AGE",
];

/// One row per release, in the order given.
pub fn list_rows(releases: &[OperatorRelease], now: Timestamp) -> Vec<Vec<String>> {
    releases
        .iter()
        .map(|r| {
            let status = r.status.clone().unwrap_or_default();
            vec![
                r.name_any(),
                status.phase().to_string(),
                r.spec.from_ring.clone(),
                r.spec.to_ring.clone(),
                format!("{}/{}", status.wave + 1, r.spec.waves.len()),
                format!("{}/{}", status.moved_tenants, status.movable_tenants),
                status.pinned_tenants.to_string(),
                ago(r.creation_timestamp().map(|t| t.0), now).replace(" ago", ""),
            ]
        })
        .collect()
}

/// One line per release: the fleet's releases, oldest first.
pub fn render_list(releases: &[OperatorRelease], now: Timestamp) -> String {
    if releases.is_empty() {
        return "No OperatorReleases.\n".into();
    }
    table(&LIST_HEADER, &list_rows(releases, now))
}

/// What the release's notifications told, to whom, and each destination that fails (from
/// `fromRing`'s ledger), a line each; none when notifications are not set up. The CLI and the
/// dashboard's release page say the same lines.
pub fn notification_lines(
    release: &OperatorRelease,
    ledger: Option<&Ledger>,
    now: Timestamp,
) -> Vec<String> {
    let Some(ledger) = ledger else {
        return Vec::new();
    };
    let occurrences = express_notify::observe::release(release);
    let mut lines: Vec<String> = ledger
        .told(&occurrences)
        .iter()
        .map(|(destination, occurrence)| {
            format!(
                "{destination}: {} ({}, {})",
                occurrence.title,
                occurrence.trigger,
                ago(Some(occurrence.at), now)
            )
        })
        .collect();
    if lines.is_empty() {
        lines.push("none sent yet".into());
    }
    for (destination, health) in ledger.health.iter().filter(|(_, h)| h.failures > 0) {
        let state = if health.is_failing() {
            "FAILING"
        } else {
            "retrying"
        };
        lines.push(format!(
            "{destination}: {state}, {} deliveries refused or unanswered in a row: {}",
            health.failures,
            health.last_error.as_deref().unwrap_or("?")
        ));
    }
    lines
}

/// [`notification_lines`] under a heading naming the ledger; nothing without one.
pub fn render_notifications(
    release: &OperatorRelease,
    ledger: Option<&Ledger>,
    now: Timestamp,
) -> String {
    let lines = notification_lines(release, ledger, now);
    if lines.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "  notifications (ConfigMap {}):\n",
        express_notify::ledger::configmap_name(&release.spec.from_ring)
    );
    for line in lines {
        out.push_str(&format!("    {line}\n"));
    }
    out
}

/// One release: where it stands and why, its waves, its last samples.
pub fn render(release: &OperatorRelease, now: Timestamp) -> String {
    render_in_dc(release, now, None)
}

/// One release, with where the DC's API versions stand (DESIGN section 18), as read from its
/// CRDs: `v1beta1: served`, `v1beta1: storage moved, migrated 3/7`...
pub fn render_in_dc(release: &OperatorRelease, now: Timestamp, versions: Option<&str>) -> String {
    let spec = &release.spec;
    let status = release.status.clone().unwrap_or_default();
    let mut out = format!(
        "OperatorRelease {}/{}: {}\n",
        release.namespace().unwrap_or_default(),
        release.name_any(),
        status.phase()
    );
    out.push_str(&format!(
        "  ring {} -> ring {}{}\n",
        spec.from_ring,
        spec.to_ring,
        spec.version
            .as_ref()
            .map(|v| format!(" (build {v})"))
            .unwrap_or_default()
    ));
    if let Some(message) = &status.message {
        out.push_str(&format!("  {message}\n"));
    }
    out.push_str(&format!(
        "  tenants: {} moved ({} adopted) of {} movable, {} pinned\n",
        status.moved_tenants, status.adopted_tenants, status.movable_tenants, status.pinned_tenants
    ));
    out.push_str(&format!(
        "  samples: {} ok, {} failed (limit {}), {} inconclusive{}\n",
        status.samples.ok,
        status.samples.failed,
        spec.failure_limit,
        status.samples.inconclusive,
        if status.promoted_full {
            "; promoted in full: no more judging"
        } else {
            ""
        }
    ));
    if let Some(api) = &status.api {
        out.push_str(&format!(
            "  API: {}: {}\n",
            api.outcome.as_str(),
            api.summary()
        ));
    }
    // The DC's CRDs as read now; else what the newest release last recorded (a reader who may
    // not read CRDs), with when.
    match (versions, &status.api_versions) {
        (Some(versions), _) => out.push_str(&format!("  API versions: {versions}\n")),
        (None, Some(seen)) => out.push_str(&format!(
            "  API versions: {} (recorded {})\n",
            seen.step,
            ago(Some(seen.seen_at.0), now)
        )),
        (None, None) => {}
    }
    let step = versions.or(status.api_versions.as_ref().map(|seen| seen.step.as_str()));
    if step.is_some_and(|step| express_planner::api_versions::renames_ahead(step, true)) {
        out.push_str(&format!(
            "  for people: {}\n",
            express_api::v1beta1::old_names::WHAT_CHANGES
        ));
    }
    let rows: Vec<Vec<String>> = spec
        .waves
        .iter()
        .enumerate()
        .map(|(i, wave)| {
            let seen = status.waves.get(i);
            let state = wave_state(spec, &status, i, now);
            vec![
                (i + 1).to_string(),
                wave.to_string(),
                seen.map_or_else(|| NONE.into(), |w| w.target.to_string()),
                ago(seen.and_then(|w| w.started_at.as_ref()).map(|t| t.0), now),
                ago(seen.and_then(|w| w.finished_at.as_ref()).map(|t| t.0), now),
                state,
            ]
        })
        .collect();
    out.push('\n');
    out.push_str(&table(
        &["WAVE", "SIZE", "TENANTS", "STARTED", "FINISHED", "STATE"],
        &rows,
    ));
    if !status.last_samples.is_empty() {
        out.push_str("\nLast samples:\n");
        for sample in &status.last_samples {
            out.push_str(&format!(
                "  {} {:<12} {}\n",
                ago(Some(sample.at.0), now),
                sample.verdict.as_str(),
                sample.reason
            ));
        }
    }
    out.push_str(&vital_signs(&status, now));
    if let Some(reason) = &status.rollback_reason {
        out.push_str(&format!("\nRolled back: {reason}\n"));
    }
    out
}

/// Where wave `index` stands, in the words the CLI and the dashboard share: "waiting",
/// "moving", "baking, 1m left", "baked", "promoted", "stopped" (a rolled-back release's last
/// wave), "-".
pub fn wave_state(
    spec: &express_api::OperatorReleaseSpec,
    status: &express_api::OperatorReleaseStatus,
    index: usize,
    now: Timestamp,
) -> String {
    match status.waves.get(index) {
        Some(w) if w.finished_at.is_some() => {
            if w.promoted { "promoted" } else { "baked" }.to_owned()
        }
        // A rolled-back release's last wave neither moves nor bakes any more.
        Some(_) if status.phase() == ReleasePhase::RolledBack => "stopped".into(),
        Some(w) => match &w.bake_since {
            Some(since) => {
                let left = spec.bake_seconds as i64 - (now.as_second() - since.0.as_second());
                format!(
                    "baking, {} left",
                    express_api::bounce::format_duration(u64::try_from(left).unwrap_or(0))
                )
            }
            None if index == status.wave as usize && !status.phase().is_final() => "moving".into(),
            None => NONE.into(),
        },
        None => "waiting".into(),
    }
}

/// The latest analysed sample's signals as a table (nothing without analysis).
fn vital_signs(status: &express_api::OperatorReleaseStatus, now: Timestamp) -> String {
    let mut out = String::new();
    let Some(analysis) = status.analysis.as_ref().filter(|a| !a.signals.is_empty()) else {
        return out;
    };
    out.push_str(&format!(
        "\nVital signs ({} against {}):\n",
        ago(analysis.at.as_ref().map(|t| t.0), now),
        analysis.baseline
    ));
    let figure = |value: Option<f64>| value.map_or_else(|| NONE.to_owned(), |v| format!("{v:.4}"));
    let rows: Vec<Vec<String>> = analysis
        .signals
        .iter()
        .map(|s| {
            vec![
                s.signal.clone(),
                figure(s.canary),
                figure(s.baseline),
                s.verdict.as_str().to_owned(),
                s.reason.clone(),
            ]
        })
        .collect();
    out.push_str(&table(
        &["SIGNAL", "CANARY", "BASELINE", "VERDICT", "WHY"],
        &rows,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(status: serde_json::Value) -> OperatorRelease {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "express.dev/v1alpha1", "kind": "OperatorRelease",
            "metadata": {"name": "to-canary", "namespace": "express-system"},
            "spec": {"fromRing": "default", "toRing": "canary", "waves": [{"percent": 100}]},
            "status": status,
        }))
        .unwrap_or_else(|error| panic!("a release: {error}"))
    }

    #[test]
    fn the_api_versions_line_is_the_crds_as_read_else_what_the_release_recorded() {
        let now: Timestamp = "2026-11-29T12:00:00Z"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        let recorded = release(serde_json::json!({"phase": "Succeeded", "apiVersions": {
            "step": "v1beta1: storage moved, migrated 3/7", "seenAt": "2026-11-29T11:58:00Z"}}));
        let live = render_in_dc(&recorded, now, Some("v1beta1: trimmed"));
        assert!(
            live.contains("  API versions: v1beta1: trimmed\n"),
            "{live}"
        );
        let fallback = render_in_dc(&recorded, now, None);
        assert!(
            fallback.contains(
                "  API versions: v1beta1: storage moved, migrated 3/7 (recorded 2m ago)\n"
            ),
            "{fallback}"
        );
        let neither = render_in_dc(
            &release(serde_json::json!({"phase": "Succeeded"})),
            now,
            None,
        );
        assert!(!neither.contains("API versions"), "{neither}");
    }

    #[test]
    fn what_changes_for_people_is_said_while_v1beta1_is_listed_or_newly_served() {
        let now: Timestamp = "2026-11-29T12:00:00Z"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        let running = release(serde_json::json!({"phase": "Progressing"}));
        for (step, said) in [
            ("v1beta1: listed, not served", true),
            ("v1beta1: served", true),
            ("v1beta1: storage moved, migrated 3/7", false),
            ("v1beta1: trimmed", false),
        ] {
            let shown = render_in_dc(&running, now, Some(step));
            assert_eq!(
                shown.contains("  for people: once v1beta1 is served, kubectl's plain"),
                said,
                "{step}: {shown}"
            );
        }
        // From the release's record too, for a reader who cannot read CRDs.
        let recorded = release(serde_json::json!({"phase": "Progressing", "apiVersions": {
            "step": "v1beta1: listed, not served", "seenAt": "2026-11-29T11:58:00Z"}}));
        assert!(render_in_dc(&recorded, now, None).contains("expressVersion is version"));
    }

    #[test]
    fn what_was_told_to_whom_and_a_failing_destination_are_said() {
        let now: Timestamp = "2026-11-29T12:00:00Z"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        let done = release(serde_json::json!({"phase": "Succeeded", "waves": [
            {"target": 3, "startedAt": "2026-11-29T11:50:00Z", "finishedAt": "2026-11-29T11:58:00Z"}]}));
        let told = express_notify::observe::release(&done);
        let mut ledger = Ledger::starting(0);
        ledger.accepted(
            "sre",
            told.iter().map(|o| (o.digest(), o.at.as_second())),
            None,
            1,
        );
        for _ in 0..3 {
            ledger.refused("chat", "https://hooks.example answered 503", 2);
        }
        let shown = render_notifications(&done, Some(&ledger), now);
        assert_eq!(
            shown,
            "  notifications (ConfigMap express-notified-default):\n\
             \x20   sre: OperatorRelease to-canary succeeded: canary leads its tenants (release-done, 2m ago)\n\
             \x20   chat: FAILING, 3 deliveries refused or unanswered in a row: https://hooks.example answered 503\n"
        );
        assert_eq!(render_notifications(&done, None, now), "");
        let nothing = render_notifications(&done, Some(&Ledger::starting(0)), now);
        assert!(nothing.ends_with("    none sent yet\n"), "{nothing}");
    }
}
