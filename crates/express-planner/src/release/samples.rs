//! The samples: one taken when due (the rings' health judged by [`super::judge`], the moved
//! tenants adopted late named), kept and counted, failed samples over the limit rolling the
//! release back, and an inconclusive one holding the release.

use std::ops::ControlFlow;

use express_api::analysis::{
    AnalysisSample, AnalysisStatus, HISTORY_KEPT, SignalReading, SignalVerdict,
};
use express_api::release::{ReleasePhase, Sample, SampleCounts, SampleVerdict};
use express_triage::rings::RingHealth;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::judge::judge;
use super::model::{SAMPLES_KEPT, reason};
use super::schedule::next_sample;
use super::stepper::{Stepper, Wave};
use crate::analysis::{analyse, evidence};
use crate::gates::{Gate, after};

impl Stepper<'_> {
    /// A sample, when due: judged and kept; failed samples over the limit roll the release
    /// back. Goes on with the latest verdict, taken now or before.
    pub(super) fn sample(&mut self, wave: Wave) -> Gate<Option<SampleVerdict>> {
        let s = self.s;
        let spec = s.spec;
        let last = self.status.last_samples.last().map(|x| x.verdict);
        let due = next_sample(spec, &self.status).is_none_or(|at| at <= s.now);
        if wave.full || !due {
            return ControlFlow::Continue(last);
        }
        let Some(health) = &s.health else {
            return ControlFlow::Continue(last);
        };
        let (verdict, why) = self.judge_sample(health, wave);
        let (verdict, why) = self.with_vital_signs(verdict, why);
        self.keep_sample(verdict, &why);
        let evidence = self.evidence();
        match verdict {
            SampleVerdict::Failed => {
                let failed = self.status.samples.failed;
                self.notice(
                    true,
                    reason::SAMPLE_FAILED,
                    format!(
                        "failed sample {failed} (limit {}): {why}{evidence}",
                        spec.failure_limit
                    ),
                );
                if failed > spec.failure_limit {
                    self.begin_rollback(format!(
                        "{failed} failed samples, over the limit of {}; the last: {why}",
                        spec.failure_limit
                    ));
                    self.roll_back();
                    return ControlFlow::Break(None);
                }
            }
            SampleVerdict::Inconclusive if self.phase_before != ReleasePhase::Inconclusive => {
                self.notice(
                    true,
                    reason::INCONCLUSIVE,
                    format!("holding: {why}{evidence}"),
                );
            }
            // Every sample leaves its verdict and figures in an event, so that a verdict the
            // status no longer keeps can still be explained from the API.
            SampleVerdict::Ok | SampleVerdict::Inconclusive => {
                let taken = &self.status.samples;
                let n = taken.ok + taken.failed + taken.inconclusive;
                self.notice(
                    false,
                    reason::SAMPLED,
                    format!("sample {n} {}: {why}{evidence}", verdict.as_str()),
                );
            }
        }
        if verdict != SampleVerdict::Ok {
            self.status.waves[wave.index].bake_since = None;
        }
        ControlFlow::Continue(Some(verdict))
    }

    /// One sample's verdict from the rings' health, with the moved tenants adopted late.
    fn judge_sample(
        &self,
        health: &Result<(RingHealth, RingHealth), String>,
        wave: Wave,
    ) -> (SampleVerdict, String) {
        let spec = self.s.spec;
        let now = self.s.now;
        match health {
            Err(why) => (SampleVerdict::Inconclusive, format!("no data: {why}")),
            Ok((from, to)) => {
                let late: Vec<String> = self
                    .census
                    .moved
                    .iter()
                    .filter(|t| t.driven_by.as_deref() != Some(spec.to_ring.as_str()))
                    .filter(|t| {
                        let since = t.moved_at.or(self.status.waves[wave.index]
                            .started_at
                            .as_ref()
                            .map(|w| w.0));
                        since.is_some_and(|at| after(at, spec.adoption_deadline_seconds) < now)
                    })
                    .map(|t| format!("{}/{}", t.namespace, t.name))
                    .collect();
                judge(
                    from,
                    to,
                    &late,
                    spec.adoption_deadline_seconds,
                    spec.unhealthy_margin_percent,
                )
            }
        }
    }

    /// The tenants' verdict joined with the operator's vital signs, when they were read: a
    /// failure on either side fails the sample, else no data on either holds it.
    fn with_vital_signs(&mut self, verdict: SampleVerdict, why: String) -> (SampleVerdict, String) {
        let Some(analysis) = &self.s.analysis else {
            return (verdict, why);
        };
        let (readings, signals, said) = analyse(analysis);
        let status = self
            .status
            .analysis
            .get_or_insert_with(AnalysisStatus::default);
        status.at = Some(Time(self.s.now));
        status.baseline.clone_from(&analysis.baseline);
        status.history.push(AnalysisSample {
            at: Time(self.s.now),
            worse: named(&readings, SignalVerdict::Worse),
            no_data: named(&readings, SignalVerdict::NoData),
        });
        let excess = status.history.len().saturating_sub(HISTORY_KEPT);
        status.history.drain(..excess);
        status.signals = readings;
        let rank = |v: SampleVerdict| match v {
            SampleVerdict::Failed => 2,
            SampleVerdict::Inconclusive => 1,
            SampleVerdict::Ok => 0,
        };
        match rank(signals).cmp(&rank(verdict)) {
            std::cmp::Ordering::Greater => (signals, said),
            std::cmp::Ordering::Less => (verdict, why),
            std::cmp::Ordering::Equal => (verdict, format!("{why}; {said}")),
        }
    }

    /// The vital signs' figures read for this sample, if any were (`; signals: ...`).
    fn evidence(&self) -> String {
        let read_now = self.s.analysis.is_some();
        match self.status.analysis.as_ref() {
            Some(analysis) if read_now && !analysis.signals.is_empty() => {
                format!(
                    "; signals (canary vs baseline): {}",
                    evidence(&analysis.signals)
                )
            }
            _ => String::new(),
        }
    }

    /// Counts the sample and keeps the last [`SAMPLES_KEPT`].
    fn keep_sample(&mut self, verdict: SampleVerdict, why: &str) {
        let counts: &mut SampleCounts = &mut self.status.samples;
        match verdict {
            SampleVerdict::Ok => counts.ok += 1,
            SampleVerdict::Failed => counts.failed += 1,
            SampleVerdict::Inconclusive => counts.inconclusive += 1,
        }
        self.status.last_samples.push(Sample {
            at: Time(self.s.now),
            verdict,
            reason: why.to_owned(),
        });
        let excess = self.status.last_samples.len().saturating_sub(SAMPLES_KEPT);
        self.status.last_samples.drain(..excess);
    }

    /// Inconclusive holds (unless promoted in full): the phase says whether the release holds.
    pub(super) fn hold_when_inconclusive(
        &mut self,
        wave: Wave,
        last: Option<SampleVerdict>,
    ) -> bool {
        let holding = last == Some(SampleVerdict::Inconclusive) && !wave.full;
        self.status.phase = Some(if holding {
            ReleasePhase::Inconclusive
        } else {
            ReleasePhase::Progressing
        });
        holding
    }
}

/// The names of the signals with this verdict.
fn named(readings: &[SignalReading], verdict: SignalVerdict) -> Vec<String> {
    readings
        .iter()
        .filter(|r| r.verdict == verdict)
        .map(|r| r.signal.clone())
        .collect()
}
