//! The metrics of `OperatorRelease`s (DESIGN section 12), published by the leader of each
//! release's `fromRing` (the one that judges it) from the release's status, so that a restart
//! neither resets nor doubles them.

use std::collections::BTreeSet;
use std::sync::Mutex;

use express_api::analysis::SignalVerdict;
use express_api::release::{OperatorReleaseStatus, ReleasePhase};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReleaseLabel {
    pub release: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReleasePhaseLabel {
    pub release: String,
    pub phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReleaseVerdictLabel {
    pub release: String,
    pub verdict: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ReleaseSignalLabel {
    pub release: String,
    pub signal: String,
}

#[derive(Default)]
pub struct ReleaseGauges {
    /// Per analysed signal of the latest sample: 1 when worse, 0 otherwise (ok, quiet, no
    /// data).
    pub signal: Family<ReleaseSignalLabel, Gauge>,
    /// The signal series published, so that those no longer read go.
    signals_published: Mutex<BTreeSet<ReleaseSignalLabel>>,
    /// The wave being moved or baked, counted from 1.
    pub wave: Family<ReleaseLabel, Gauge>,
    /// 1 for the release's phase, 0 for the others.
    pub phase: Family<ReleasePhaseLabel, Gauge>,
    /// Samples taken over the release, by verdict.
    pub samples: Family<ReleaseVerdictLabel, Gauge>,
    /// Tenants the release moved that are on `toRing` now.
    pub tenants_moved: Family<ReleaseLabel, Gauge>,
    /// Releases published, so that a deleted one's series go.
    published: Mutex<BTreeSet<String>>,
}

impl ReleaseGauges {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "release_wave",
            "The wave of an OperatorRelease being moved or baked, counted from 1",
            self.wave.clone(),
        );
        registry.register(
            "release_phase",
            "1 for an OperatorRelease's phase (Pending, Progressing, Paused, Inconclusive, Succeeded, RolledBack), 0 for the others",
            self.phase.clone(),
        );
        registry.register(
            "release_samples",
            "Samples an OperatorRelease took, by verdict (Ok, Failed, Inconclusive)",
            self.samples.clone(),
        );
        registry.register(
            "release_signal",
            "1 when an OperatorRelease's analysis found this vital sign of toRing worse than the baseline in its latest sample, 0 otherwise",
            self.signal.clone(),
        );
        registry.register(
            "release_tenants_moved",
            "Tenants an OperatorRelease moved that are on its toRing now",
            self.tenants_moved.clone(),
        );
    }

    /// Publishes the releases this instance judges, dropping the series of the others.
    pub fn set(&self, releases: &[(String, OperatorReleaseStatus)]) {
        self.set_signals(releases);
        let Ok(mut published) = self.published.lock() else {
            return;
        };
        let now: BTreeSet<String> = releases.iter().map(|(name, _)| name.clone()).collect();
        for gone in published.difference(&now) {
            self.forget(gone);
        }
        *published = now;
        for (name, status) in releases {
            let release = || ReleaseLabel {
                release: name.clone(),
            };
            self.wave
                .get_or_create(&release())
                .set(i64::from(status.wave) + 1);
            self.tenants_moved
                .get_or_create(&release())
                .set(i64::from(status.moved_tenants));
            for phase in ReleasePhase::ALL {
                self.phase
                    .get_or_create(&ReleasePhaseLabel {
                        release: name.clone(),
                        phase: phase.as_str().into(),
                    })
                    .set(i64::from(status.phase == Some(phase)));
            }
            for (verdict, count) in [
                ("Ok", status.samples.ok),
                ("Failed", status.samples.failed),
                ("Inconclusive", status.samples.inconclusive),
            ] {
                self.samples
                    .get_or_create(&ReleaseVerdictLabel {
                        release: name.clone(),
                        verdict: verdict.into(),
                    })
                    .set(i64::from(count));
            }
        }
    }

    /// The latest analysed sample's signals, each 1 when worse; the others' series dropped.
    fn set_signals(&self, releases: &[(String, OperatorReleaseStatus)]) {
        let Ok(mut published) = self.signals_published.lock() else {
            return;
        };
        let mut now = BTreeSet::new();
        for (name, status) in releases {
            for reading in status.analysis.iter().flat_map(|a| &a.signals) {
                let label = ReleaseSignalLabel {
                    release: name.clone(),
                    signal: reading.signal.clone(),
                };
                self.signal
                    .get_or_create(&label)
                    .set(i64::from(reading.verdict == SignalVerdict::Worse));
                now.insert(label);
            }
        }
        for gone in published.difference(&now) {
            self.signal.remove(gone);
        }
        *published = now;
    }

    fn forget(&self, name: &str) {
        let release = ReleaseLabel {
            release: name.to_owned(),
        };
        self.wave.remove(&release);
        self.tenants_moved.remove(&release);
        for phase in ReleasePhase::ALL {
            self.phase.remove(&ReleasePhaseLabel {
                release: name.to_owned(),
                phase: phase.as_str().into(),
            });
        }
        for verdict in ["Ok", "Failed", "Inconclusive"] {
            self.samples.remove(&ReleaseVerdictLabel {
                release: name.to_owned(),
                verdict: verdict.into(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_is_published_from_its_status_and_forgotten_when_gone() {
        let gauges = ReleaseGauges::default();
        let mut registry = Registry::with_prefix("express_operator");
        gauges.register(&mut registry);
        let status = OperatorReleaseStatus {
            phase: Some(ReleasePhase::RolledBack),
            wave: 1,
            moved_tenants: 3,
            ..OperatorReleaseStatus::default()
        };
        gauges.set(&[("to-0-2-0".into(), status)]);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap_or_default();
        assert!(
            text.contains("express_operator_release_wave{release=\"to-0-2-0\"} 2"),
            "{text}"
        );
        assert!(text.contains(
            "express_operator_release_phase{release=\"to-0-2-0\",phase=\"RolledBack\"} 1"
        ));
        assert!(text.contains(
            "express_operator_release_phase{release=\"to-0-2-0\",phase=\"Progressing\"} 0"
        ));
        assert!(text.contains("express_operator_release_tenants_moved{release=\"to-0-2-0\"} 3"));
        let analysed = OperatorReleaseStatus {
            analysis: Some(express_api::analysis::AnalysisStatus {
                signals: vec![express_api::analysis::SignalReading {
                    signal: "reconcileErrorRatio".into(),
                    canary: Some(0.2),
                    baseline: Some(0.0),
                    verdict: SignalVerdict::Worse,
                    reason: String::new(),
                }],
                ..Default::default()
            }),
            ..OperatorReleaseStatus::default()
        };
        gauges.set(&[("to-0-2-0".into(), analysed)]);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap_or_default();
        assert!(
            text.contains("express_operator_release_signal{release=\"to-0-2-0\",signal=\"reconcileErrorRatio\"} 1"),
            "{text}"
        );
        gauges.set(&[]);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap_or_default();
        assert!(!text.contains("to-0-2-0"), "{text}");
    }
}
