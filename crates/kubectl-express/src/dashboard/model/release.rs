//! An OperatorRelease's page, pure: where it stands in words (phase, why, what happens next and
//! when), its waves as a strip, the sample verdicts, and a chart per signal of the canary ring
//! against the stable ring over time.
//!
//! The release's status keeps counts, the last samples' verdicts and the latest analysed
//! figures, not a series; the series is the dashboard's [`Trail`], one point per signal each
//! time it reads the release (the doctor's share of unhealthy tenants of each ring, as the
//! judge compares them, and, when the release has analysis, each Prometheus signal as the
//! judge last read it).

use std::collections::VecDeque;

use express_api::release::{OperatorRelease, ReleasePhase};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use serde::Serialize;

use super::shown::seconds_since;
use crate::show::release::wave_state;

/// The signal the doctor gives every release (what the judge compares without analysis).
pub const UNHEALTHY_SIGNAL: &str = "unhealthy tenants (%)";
/// Points kept per signal: at one point each doctor run (15 s), an hour.
pub const TRAIL_POINTS: usize = 240;

/// One reading of one signal on both rings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrailPoint {
    #[serde(serialize_with = "as_text")]
    pub at: Timestamp,
    pub signal: String,
    /// `toRing` (the build under test).
    pub canary: Option<f64>,
    /// `fromRing`, or the analysis' baseline.
    pub stable: Option<f64>,
}

fn as_text<S: serde::Serializer>(at: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&at.to_string())
}

/// What the dashboard has read of one release over time, newest last. A release of the same
/// name created again (another uid) starts a new trail.
#[derive(Clone, Debug, Default)]
pub struct Trail {
    pub uid: String,
    pub points: VecDeque<TrailPoint>,
}

impl Trail {
    /// Adds `point` unless the signal already has a point at that instant (an analysis read
    /// twice), keeping at most [`TRAIL_POINTS`] per signal.
    pub fn record(&mut self, point: TrailPoint) {
        let same_signal = |p: &&TrailPoint| p.signal == point.signal;
        if self
            .points
            .iter()
            .rev()
            .find(same_signal)
            .is_some_and(|last| last.at >= point.at)
        {
            return;
        }
        if self.points.iter().filter(same_signal).count() >= TRAIL_POINTS
            && let Some(oldest) = self.points.iter().position(|p| p.signal == point.signal)
        {
            self.points.remove(oldest);
        }
        self.points.push_back(point);
    }

    /// The points `release`'s analysis gives at its last sample (none without analysis).
    pub fn analysis_points(release: &OperatorRelease) -> Vec<TrailPoint> {
        let Some(analysis) = release.status.as_ref().and_then(|s| s.analysis.as_ref()) else {
            return Vec::new();
        };
        let Some(at) = analysis.at.as_ref() else {
            return Vec::new();
        };
        analysis
            .signals
            .iter()
            .map(|s| TrailPoint {
                at: at.0,
                signal: s.signal.clone(),
                canary: s.canary,
                stable: s.baseline,
            })
            .collect()
    }
}

/// One wave of the strip.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaveCell {
    /// 1-based, as people count them.
    pub number: usize,
    /// "1 tenant(s)", "50%".
    pub size: String,
    /// Tenants it moves (None before it started).
    pub tenants: Option<u32>,
    /// `wave_state`'s words: "waiting", "moving", "baking, 1m left", "baked", "promoted"...
    pub state: String,
    /// The state's first word, for the page's colours.
    pub class: String,
}

/// One sample's verdict, newest last.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SampleRow {
    pub ago: String,
    pub verdict: String,
    pub reason: String,
}

/// One reading on a chart: seconds before now, the canary's figure, the stable ring's.
pub type ChartPoint = (i64, Option<f64>, Option<f64>);

/// One signal over time, both rings.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Chart {
    pub signal: String,
    /// Seconds before now of each point, oldest first, with both rings' figures.
    pub points: Vec<ChartPoint>,
    /// The latest figures in words ("canary 12.5, stable 0").
    pub latest: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseView {
    /// The DC's context ("" for the single DC).
    pub context: String,
    pub name: String,
    pub from_ring: String,
    pub to_ring: String,
    pub phase: String,
    /// The release's own message: why it stands where it does.
    pub why: String,
    /// What happens next, and when.
    pub next: String,
    pub tenants: String,
    pub samples: String,
    pub waves: Vec<WaveCell>,
    pub last_samples: Vec<SampleRow>,
    /// What the canary is compared with ("ring default", or the analysis' baseline).
    pub baseline: String,
    pub charts: Vec<Chart>,
    /// The requests the release has handled ("promote 7f3a…").
    pub requests: Vec<String>,
    pub paused: bool,
    /// Succeeded or rolled back: only an abort of a success is left.
    pub over: bool,
    pub rolled_back: bool,
    /// What its notifications told, to whom, and a failing destination (`kubectl express
    /// release NAME`'s lines); empty when notifications are not set up or cannot be read.
    pub notifications: Vec<String>,
}

impl ReleaseView {
    pub fn of(
        context: &str,
        release: &OperatorRelease,
        trail: &Trail,
        now: Timestamp,
    ) -> ReleaseView {
        let spec = &release.spec;
        let status = release.status.clone().unwrap_or_default();
        let phase = status.phase();
        let waves = spec
            .waves
            .iter()
            .enumerate()
            .map(|(i, wave)| {
                let state = wave_state(spec, &status, i, now);
                WaveCell {
                    number: i + 1,
                    size: wave.to_string(),
                    tenants: status.waves.get(i).map(|w| w.target),
                    class: state
                        .split([',', ' '])
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                    state,
                }
            })
            .collect();
        let last_samples = status
            .last_samples
            .iter()
            .map(|s| SampleRow {
                ago: express_triage::age(seconds_since(now, s.at.0)),
                verdict: s.verdict.as_str().to_owned(),
                reason: s.reason.clone(),
            })
            .collect();
        let baseline = status
            .analysis
            .as_ref()
            .map(|a| a.baseline.clone())
            .filter(|b| !b.is_empty())
            .unwrap_or_else(|| format!("ring {}", spec.from_ring));
        let requests = status
            .requests
            .iter()
            .flat_map(|r| {
                [("promote", &r.promote), ("abort", &r.rollback)]
                    .into_iter()
                    .filter_map(|(what, id)| id.as_ref().map(|id| format!("{what} {id}")))
            })
            .collect();
        ReleaseView {
            context: context.to_owned(),
            name: release.name_any(),
            from_ring: spec.from_ring.clone(),
            to_ring: spec.to_ring.clone(),
            phase: phase.as_str().to_owned(),
            why: status.message.clone().unwrap_or_default(),
            next: next_step(release, now),
            tenants: format!(
                "{} moved ({} adopted) of {} movable, {} pinned",
                status.moved_tenants,
                status.adopted_tenants,
                status.movable_tenants,
                status.pinned_tenants
            ),
            samples: format!(
                "{} ok, {} failed (limit {}), {} inconclusive",
                status.samples.ok,
                status.samples.failed,
                spec.failure_limit,
                status.samples.inconclusive
            ),
            waves,
            last_samples,
            baseline,
            charts: charts(trail, now),
            requests,
            paused: phase == ReleasePhase::Paused,
            over: phase.is_final(),
            rolled_back: phase == ReleasePhase::RolledBack,
            notifications: Vec::new(),
        }
    }
}

/// What happens next and when, from the phase and the current wave.
pub fn next_step(release: &OperatorRelease, now: Timestamp) -> String {
    let spec = &release.spec;
    let status = release.status.clone().unwrap_or_default();
    let wave = status.wave as usize;
    let last = wave + 1 >= spec.waves.len();
    let after_bake = if last {
        "the release succeeds".to_owned()
    } else {
        format!("wave {} moves ({})", wave + 2, spec.waves[wave + 1])
    };
    match status.phase() {
        ReleasePhase::Pending => format!(
            "waits for ring {}'s build (a live leader, the build asked for, its CRDs checked) \
             before wave 1 moves",
            spec.to_ring
        ),
        ReleasePhase::Paused => {
            "nothing moves, nothing is judged and no bake time passes until it is resumed".into()
        }
        ReleasePhase::Inconclusive => format!(
            "held: both rings are in trouble alike; it goes on once a sample is clean again \
             (failed samples {} of {} allowed)",
            status.samples.failed, spec.failure_limit
        ),
        ReleasePhase::Succeeded => format!(
            "nothing: every movable tenant is on ring {} (an abort would still move them back)",
            spec.to_ring
        ),
        ReleasePhase::RolledBack => format!(
            "nothing: every moved tenant went back to ring {}",
            spec.from_ring
        ),
        ReleasePhase::Progressing => match status.waves.get(wave) {
            Some(w) => match &w.bake_since {
                Some(since) => {
                    let left = (spec.bake_seconds as i64 - seconds_since(now, since.0)).max(0);
                    format!(
                        "wave {} bakes {} more, sampled every {}s; then {after_bake}",
                        wave + 1,
                        express_triage::age(left),
                        spec.interval_seconds
                    )
                }
                None => format!(
                    "wave {} is moving {} tenant(s) to ring {}; its bake starts once ring {} \
                     has adopted them (within {}s)",
                    wave + 1,
                    w.target,
                    spec.to_ring,
                    spec.to_ring,
                    spec.adoption_deadline_seconds
                ),
            },
            None => format!("wave {} moves next", wave + 1),
        },
    }
}

/// How a figure reads on a chart and in its caption: whole numbers whole, others to two
/// significant places (12.5, 0.012).
pub fn figure(value: f64) -> String {
    if value == value.trunc() || value.abs() >= 100.0 {
        format!("{value:.0}")
    } else if value.abs() >= 1.0 {
        format!("{value:.1}")
    } else {
        let places = (-value.abs().log10().floor()) as usize + 1;
        format!("{value:.places$}")
    }
}

/// A chart per signal of the trail, the doctor's first, each signal in the order it first came.
fn charts(trail: &Trail, now: Timestamp) -> Vec<Chart> {
    let mut signals: Vec<&str> = Vec::new();
    for point in &trail.points {
        if !signals.contains(&point.signal.as_str()) {
            signals.push(&point.signal);
        }
    }
    signals.sort_by_key(|s| *s != UNHEALTHY_SIGNAL);
    let shown = |v: Option<f64>| v.map_or_else(|| "no data".to_owned(), figure);
    signals
        .into_iter()
        .map(|signal| {
            let points: Vec<ChartPoint> = trail
                .points
                .iter()
                .filter(|p| p.signal == signal)
                .map(|p| (seconds_since(now, p.at), p.canary, p.stable))
                .collect();
            let latest = points.last().map_or_else(String::new, |(_, c, s)| {
                format!("canary {}, stable {}", shown(*c), shown(*s))
            });
            Chart {
                signal: signal.to_owned(),
                points,
                latest,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn release(status: serde_json::Value) -> OperatorRelease {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "express.dev/v1alpha1", "kind": "OperatorRelease",
            "metadata": {"name": "to-canary", "namespace": "express-system", "uid": "u1"},
            "spec": {"fromRing": "default", "toRing": "canary",
                     "waves": [{"tenants": 1}, {"percent": 100}],
                     "bakeSeconds": 120, "intervalSeconds": 10, "failureLimit": 2,
                     "adoptionDeadlineSeconds": 60},
            "status": status,
        }))
        .unwrap()
    }

    fn point(at_text: &str, signal: &str, canary: f64) -> TrailPoint {
        TrailPoint {
            at: at(at_text),
            signal: signal.into(),
            canary: Some(canary),
            stable: Some(0.0),
        }
    }

    #[test]
    fn each_phase_says_what_happens_next_and_when() {
        let now = at("2026-11-27T12:00:30Z");
        let baking = release(serde_json::json!({
            "phase": "Progressing", "wave": 0, "movedTenants": 1, "adoptedTenants": 1,
            "movableTenants": 2,
            "waves": [{"target": 1, "startedAt": "2026-11-27T11:59:00Z",
                       "bakeSince": "2026-11-27T12:00:00Z"}],
        }));
        let moving = release(serde_json::json!({
            "phase": "Progressing", "wave": 1,
            "waves": [{"target": 1, "finishedAt": "2026-11-27T12:00:00Z"}, {"target": 1}],
        }));
        let cases: [(&OperatorRelease, &str); 6] = [
            (
                &baking,
                "wave 1 bakes 1m30s more, sampled every 10s; then wave 2 moves (100%)",
            ),
            (
                &moving,
                "wave 2 is moving 1 tenant(s) to ring canary; its bake starts once ring canary has adopted them (within 60s)",
            ),
            (
                &release(serde_json::json!({"phase": "Paused"})),
                "nothing moves, nothing is judged and no bake time passes until it is resumed",
            ),
            (
                &release(serde_json::json!({"phase": "Pending"})),
                "waits for ring canary's build (a live leader, the build asked for, its CRDs checked) before wave 1 moves",
            ),
            (
                &release(serde_json::json!({"phase": "Succeeded"})),
                "nothing: every movable tenant is on ring canary (an abort would still move them back)",
            ),
            (
                &release(serde_json::json!({"phase": "RolledBack"})),
                "nothing: every moved tenant went back to ring default",
            ),
        ];
        for (release, next) in cases {
            assert_eq!(next_step(release, now), next);
        }
        let view = ReleaseView::of("dc-a", &baking, &Trail::default(), now);
        let strip: Vec<(&str, &str)> = view
            .waves
            .iter()
            .map(|w| (w.state.as_str(), w.class.as_str()))
            .collect();
        assert_eq!(
            strip,
            [("baking, 1m30s left", "baking"), ("waiting", "waiting")]
        );
        assert_eq!(view.waves[0].tenants, Some(1));
        assert_eq!(view.baseline, "ring default");
        assert!(!view.paused && !view.over);
        assert!(view.charts.is_empty());
    }

    #[test]
    fn the_trail_keeps_one_point_per_instant_and_signal_and_at_most_its_length() {
        let mut trail = Trail::default();
        trail.record(point("2026-11-27T12:00:00Z", UNHEALTHY_SIGNAL, 0.0));
        trail.record(point("2026-11-27T12:00:00Z", "reconcileErrorRatio", 0.1));
        // The analysis read twice at the same sample, and an older reading: both ignored.
        trail.record(point("2026-11-27T12:00:00Z", "reconcileErrorRatio", 0.9));
        trail.record(point("2026-11-27T11:59:00Z", UNHEALTHY_SIGNAL, 50.0));
        assert_eq!(trail.points.len(), 2);
        for i in 0..(TRAIL_POINTS as i64 + 5) {
            let at =
                at("2026-11-27T12:00:00Z") + k8s_openapi::jiff::SignedDuration::from_secs(i + 1);
            trail.record(TrailPoint {
                at,
                signal: UNHEALTHY_SIGNAL.into(),
                canary: Some(i as f64),
                stable: None,
            });
        }
        let doctor = trail
            .points
            .iter()
            .filter(|p| p.signal == UNHEALTHY_SIGNAL)
            .count();
        assert_eq!(doctor, TRAIL_POINTS);
        // The other signal's point is not pushed out by the doctor's.
        assert_eq!(trail.points.len(), TRAIL_POINTS + 1);
        let now = at("2026-11-27T12:10:00Z");
        let charts = charts(&trail, now);
        let signals: Vec<&str> = charts.iter().map(|c| c.signal.as_str()).collect();
        assert_eq!(signals, [UNHEALTHY_SIGNAL, "reconcileErrorRatio"]);
        assert_eq!(charts[1].latest, "canary 0.10, stable 0");
        assert_eq!(
            charts[0].latest,
            format!("canary {}, stable no data", TRAIL_POINTS + 4)
        );
        let figures: Vec<String> = [12.5, 0.0123, 250.4, 3.0].into_iter().map(figure).collect();
        assert_eq!(figures, ["12.5", "0.012", "250", "3"]);
        assert_eq!(charts[1].points, [(600, Some(0.1), Some(0.0))]);
    }

    #[test]
    fn the_analysis_gives_a_point_per_signal_at_its_sample_and_names_the_baseline() {
        let analysed = release(serde_json::json!({
            "phase": "Progressing",
            "analysis": {"at": "2026-11-27T12:00:00Z", "baseline": "ring canary before wave 2",
                         "signals": [{"signal": "reconcileErrorRatio", "canary": 0.2,
                                      "verdict": "NoData"}]},
        }));
        let points = Trail::analysis_points(&analysed);
        assert_eq!(points.len(), 1);
        assert_eq!((points[0].canary, points[0].stable), (Some(0.2), None));
        let view = ReleaseView::of("", &analysed, &Trail::default(), at("2026-11-27T12:00:00Z"));
        assert_eq!(view.baseline, "ring canary before wave 2");
        assert!(Trail::analysis_points(&release(serde_json::json!({}))).is_empty());
    }
}
