//! An OperatorRelease's occurrences: waiting, a wave promoted, rolled back (with the deciding
//! signal and both rings' figures), done.

use express_api::release::{OperatorRelease, ReleasePhase};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::base::{Base, fact, rings, subscribed};
use crate::config::ANNOTATION_NOTIFY;
use crate::occurrence::{Fact, Occurrence, Subject, Trigger};

/// What an OperatorRelease's status shows: waiting, a wave promoted, rolled back, done.
pub fn release(release: &OperatorRelease) -> Vec<Occurrence> {
    let Some(status) = &release.status else {
        return Vec::new();
    };
    let spec = &release.spec;
    let seen = Release {
        release,
        status,
        name: release.name_any(),
        base: Base {
            subject: Subject {
                kind: "OperatorRelease".into(),
                namespace: release.metadata.namespace.clone(),
                name: release.name_any(),
            },
            uid: release.uid().unwrap_or_default(),
            subscribed: subscribed(release.annotations().get(ANNOTATION_NOTIFY)),
        },
        rings: rings(&spec.from_ring, &spec.to_ring, spec.version.as_deref()),
        moved: fact(
            "tenants",
            format!(
                "{} of {} moved, {} adopted",
                status.moved_tenants, status.movable_tenants, status.adopted_tenants
            ),
        ),
        waves: spec.waves.len(),
    };
    let mut found: Vec<Occurrence> = seen.waiting().into_iter().collect();
    found.extend(seen.promoted());
    found.extend(seen.rolled_back());
    found.extend(seen.done());
    found
}

/// One release as its occurrences read it.
struct Release<'a> {
    release: &'a OperatorRelease,
    status: &'a express_api::OperatorReleaseStatus,
    name: String,
    base: Base,
    rings: Fact,
    moved: Fact,
    waves: usize,
}

impl Release<'_> {
    fn phase(&self) -> ReleasePhase {
        self.status.phase.unwrap_or_default()
    }

    /// Paused by a person, or held (both rings in trouble alike).
    fn waiting(&self) -> Option<Occurrence> {
        let (status, name, phase) = (self.status, &self.name, self.phase());
        if !matches!(phase, ReleasePhase::Paused | ReleasePhase::Inconclusive) {
            return None;
        }
        // The phase's condition says since when; a release without one waits since the wave
        // it is on started.
        let since = status
            .conditions
            .iter()
            .filter(|c| c.reason == phase.as_str() || c.type_ == phase.as_str())
            .map(|c| c.last_transition_time.0)
            .max()
            .or_else(|| {
                status
                    .waves
                    .get(status.wave as usize)
                    .and_then(|w| w.started_at.as_ref())
                    .map(|t| t.0)
            })
            .unwrap_or(Timestamp::UNIX_EPOCH);
        let why = match phase {
            ReleasePhase::Paused => "paused (spec.paused): nothing moves, nothing is judged".into(),
            _ => status.message.clone().unwrap_or_else(|| {
                "both rings in trouble alike: held, neither promoted nor rolled back".into()
            }),
        };
        Some(self.base.occurrence(
            Trigger::ReleaseWaiting,
            format!("{phase} {since}"),
            since,
            format!(
                "OperatorRelease {name} waits at wave {} of {}: {phase}",
                status.wave + 1,
                self.waves
            ),
            vec![self.rings.clone(), self.moved.clone(), fact("why", why)],
            Some(match phase {
                ReleasePhase::Paused => format!("kubectl express release resume {name}"),
                _ => format!("kubectl express doctor; kubectl express release {name}"),
            }),
        ))
    }

    /// Every wave before the last that finished.
    fn promoted(&self) -> Vec<Occurrence> {
        let (status, name, waves) = (self.status, &self.name, self.waves);
        let to_ring = &self.release.spec.to_ring;
        let samples = &status.samples;
        let mut found = Vec::new();
        for (index, wave) in status
            .waves
            .iter()
            .enumerate()
            .take(waves.saturating_sub(1))
        {
            let Some(finished) = &wave.finished_at else {
                continue;
            };
            let how = if wave.promoted {
                "promoted by a person"
            } else {
                "baked"
            };
            found.push(self.base.occurrence(
                Trigger::ReleasePromoted,
                format!("wave {index}"),
                finished.0,
                format!(
                    "OperatorRelease {name}: wave {} of {waves} {how}, wave {} starts",
                    index + 1,
                    index + 2
                ),
                vec![
                    self.rings.clone(),
                    fact("wave", format!("{} tenants on {to_ring}", wave.target)),
                    self.moved.clone(),
                    fact(
                        "samples",
                        format!(
                            "{} ok, {} failed, {} inconclusive",
                            samples.ok, samples.failed, samples.inconclusive
                        ),
                    ),
                ],
                None,
            ));
        }
        found
    }

    fn rolled_back(&self) -> Option<Occurrence> {
        let (status, name) = (self.status, &self.name);
        if self.phase() != ReleasePhase::RolledBack {
            return None;
        }
        let at = status
            .rolled_back_at
            .as_ref()
            .map(|t| t.0)
            .unwrap_or(Timestamp::UNIX_EPOCH);
        let mut facts = vec![
            self.rings.clone(),
            self.moved.clone(),
            fact(
                "why",
                status
                    .rollback_reason
                    .clone()
                    .unwrap_or_else(|| "rolled back".into()),
            ),
        ];
        facts.extend(deciding_figures(self.release));
        Some(self.base.occurrence(
            Trigger::ReleaseRolledBack,
            at.to_string(),
            at,
            format!(
                "OperatorRelease {name} rolled back: tenants return to {}",
                self.release.spec.from_ring
            ),
            facts,
            Some(format!("kubectl express release {name}")),
        ))
    }

    fn done(&self) -> Option<Occurrence> {
        if self.phase() != ReleasePhase::Succeeded {
            return None;
        }
        let at = self
            .status
            .waves
            .iter()
            .filter_map(|w| w.finished_at.as_ref().map(|t| t.0))
            .max()
            .unwrap_or(Timestamp::UNIX_EPOCH);
        Some(self.base.occurrence(
            Trigger::ReleaseDone,
            "succeeded".into(),
            at,
            format!(
                "OperatorRelease {} succeeded: {} leads its tenants",
                self.name, self.release.spec.to_ring
            ),
            vec![self.rings.clone(), self.moved.clone()],
            None,
        ))
    }
}

/// The signals that decided a rollback and both rings' figures (the latest analysed sample),
/// and the last failed sample's reason: "it failed" is not enough to act on.
fn deciding_figures(release: &OperatorRelease) -> Vec<Fact> {
    let Some(status) = &release.status else {
        return Vec::new();
    };
    let mut facts = Vec::new();
    if let Some(sample) = status
        .last_samples
        .iter()
        .rev()
        .find(|s| s.verdict == express_api::release::SampleVerdict::Failed)
    {
        facts.push(fact("failed sample", sample.reason.clone()));
    }
    if let Some(analysis) = &status.analysis {
        for reading in analysis
            .signals
            .iter()
            .filter(|r| r.verdict != express_api::analysis::SignalVerdict::Ok)
        {
            facts.push(fact(
                &format!("signal {}", reading.signal),
                format!(
                    "{} {} against {} {} ({})",
                    release.spec.to_ring,
                    figure(reading.canary),
                    analysis.baseline,
                    figure(reading.baseline),
                    reading.reason
                ),
            ));
        }
    }
    facts
}

fn figure(value: Option<f64>) -> String {
    match value {
        Some(v) if v.is_finite() => format!("{v:.3}"),
        Some(_) | None => "no data".into(),
    }
}
