//! The soak's judge, DC against DC: the DCs of the stage just released against the DCs not yet
//! released, read at the same time, so that trouble everywhere (the infrastructure) is told
//! from trouble where the build went. A DC is in trouble when its doctor's verdict is not
//! `healthy` (warnings do not count: they are in the checks, not the verdict). The soak gate
//! takes a sample when one is due, holds its clock while inconclusive, fails the plan past the
//! failure limit, and passes the stage once the soak has run.

use std::ops::ControlFlow;

use express_api::fleet_release::{DcState, FleetPhase, SAMPLES_KEPT, SoakSample, SoakStatus};
use express_api::release::SampleVerdict;
use express_triage::Verdict;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::model::FleetAction;
use super::model::reason;
use super::stepper::Stepper;
use crate::gates::Gate;
use crate::gates::{after, earlier, seconds_between};

/// One sample's verdict and why, naming the DCs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SoakVerdict {
    pub verdict: express_api::release::SampleVerdict,
    pub reason: String,
    /// The DCs of the stage in trouble (a failed sample rolls them back once the soak fails).
    pub in_trouble: Vec<String>,
}

/// Judges one sample.
/// - `stage`: each DC of the stage and its verdict (`Err`: it could not be read);
/// - `unreleased`: each DC not yet released that could be read, and its verdict;
/// - `baseline`: for the last stage (no DC left unreleased), each DC's verdict when its stage
///   started (None: not known).
///
/// Failed when a DC of the stage is in trouble while every unreleased DC is healthy (or, with
/// none left, while it was healthy when its stage started); inconclusive when an unreleased DC
/// is in trouble too, when one of the stage cannot be read, or when nothing can be compared;
/// ok otherwise.
pub fn judge(
    stage: &[(&str, Result<Verdict, &str>)],
    unreleased: &[(&str, Verdict)],
    baseline: &[(&str, Option<Verdict>)],
) -> SoakVerdict {
    use express_api::release::SampleVerdict::{Failed, Inconclusive, Ok};
    let verdict = |verdict, reason: String, in_trouble: Vec<String>| SoakVerdict {
        verdict,
        reason,
        in_trouble,
    };
    let unread: Vec<String> = stage
        .iter()
        .filter_map(|(dc, v)| v.as_ref().err().map(|why| format!("{dc} ({why})")))
        .collect();
    if !unread.is_empty() {
        return verdict(
            Inconclusive,
            format!("cannot read {}: held", unread.join(", ")),
            Vec::new(),
        );
    }
    let in_trouble: Vec<(&str, Verdict)> = stage
        .iter()
        .filter_map(|(dc, v)| match v {
            Result::Ok(v) if *v != Verdict::Healthy => Some((*dc, *v)),
            _ => None,
        })
        .collect();
    let named = |list: &[(&str, Verdict)]| {
        list.iter()
            .map(|(dc, v)| format!("{dc} {}", v.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let troubled: Vec<String> = in_trouble.iter().map(|(dc, _)| (*dc).to_owned()).collect();
    if !unreleased.is_empty() {
        let others: Vec<(&str, Verdict)> = unreleased
            .iter()
            .filter(|(_, v)| *v != Verdict::Healthy)
            .copied()
            .collect();
        return match (in_trouble.is_empty(), others.is_empty()) {
            (true, _) => verdict(
                Ok,
                format!(
                    "every DC of the stage healthy (unreleased: {} read)",
                    unreleased.len()
                ),
                Vec::new(),
            ),
            (false, true) => verdict(
                Failed,
                format!(
                    "{} in trouble while every DC not yet released is healthy",
                    named(&in_trouble)
                ),
                troubled,
            ),
            (false, false) => verdict(
                Inconclusive,
                format!(
                    "{} in trouble, and so is {} not yet released: the infrastructure, held",
                    named(&in_trouble),
                    named(&others)
                ),
                Vec::new(),
            ),
        };
    }
    if in_trouble.is_empty() {
        return verdict(Ok, "every DC of the stage healthy".into(), Vec::new());
    }
    // The last stage: each DC against itself when its stage started.
    let was = |dc: &str| {
        baseline
            .iter()
            .find(|(b, _)| *b == dc)
            .and_then(|(_, v)| *v)
    };
    let worse: Vec<(&str, Verdict)> = in_trouble
        .iter()
        .filter(|(dc, _)| was(dc) == Some(Verdict::Healthy))
        .copied()
        .collect();
    if worse.is_empty() {
        return verdict(
            Inconclusive,
            format!(
                "{} in trouble, as before its stage started (or not known then): held",
                named(&in_trouble)
            ),
            Vec::new(),
        );
    }
    verdict(
        Failed,
        format!(
            "{} in trouble, healthy when its stage started (no DC left unreleased to compare)",
            named(&worse)
        ),
        worse.iter().map(|(dc, _)| (*dc).to_owned()).collect(),
    )
}

impl Stepper<'_> {
    /// Soaks a done stage against the DCs not yet released; passed, on to the next stage.
    pub(super) fn soak(&mut self, stage: usize) -> Gate {
        let spec = self.s.spec;
        let mut soak = self.soak_of(stage);
        let interval = spec.release.interval_seconds.max(1);
        if let Some(sample) = self.due_sample(stage, &soak, interval) {
            self.record_sample(stage, &mut soak, &sample);
            if soak.failed > spec.release.failure_limit {
                return self.fail_soak(stage, soak, &sample);
            }
        }
        let end = after(
            soak.started_at.0,
            spec.soak_seconds.saturating_add(soak.held_seconds),
        );
        // A soak passes on a sample, never on time alone: a driver that first sees the stage
        // done after its soak time (it stepped less often than the soak lasts, or was not
        // running) samples once before it goes on.
        let sampled = soak.ok + soak.failed + soak.inconclusive > 0;
        if !soak.holding && self.now() >= end && (sampled || spec.soak_seconds == 0) {
            return self.pass_soak(stage);
        }
        self.keep_soaking(stage, soak, interval, end)
    }

    /// The stage's soak so far, or a new one counted from when its last DC finished.
    fn soak_of(&mut self, stage: usize) -> SoakStatus {
        let finished = self
            .stage_contexts(stage)
            .iter()
            .filter_map(|c| self.release(c).and_then(|r| r.finished_at))
            .max()
            .unwrap_or(self.now());
        match self.status.soak.take() {
            Some(soak) if soak.stage as usize == stage => soak,
            _ => SoakStatus {
                stage: stage as u32,
                started_at: Time(finished),
                held_seconds: 0,
                last_sample_at: None,
                ok: 0,
                failed: 0,
                inconclusive: 0,
                holding: false,
            },
        }
    }

    /// A sample, when the soak takes samples, one is due and the driver read the verdicts.
    fn due_sample(&self, stage: usize, soak: &SoakStatus, interval: u64) -> Option<SoakVerdict> {
        let due = soak
            .last_sample_at
            .as_ref()
            .is_none_or(|at| after(at.0, interval) <= self.now());
        if self.s.spec.soak_seconds > 0 && due {
            self.sample(stage)
        } else {
            None
        }
    }

    /// Counts the sample (its inconclusive time added to the held time), says it, and keeps it
    /// among the last samples.
    fn record_sample(&mut self, stage: usize, soak: &mut SoakStatus, sample: &SoakVerdict) {
        let since = soak
            .last_sample_at
            .as_ref()
            .map_or(soak.started_at.0, |t| t.0);
        let inconclusive = sample.verdict == SampleVerdict::Inconclusive;
        if inconclusive || soak.holding {
            soak.held_seconds += seconds_between(since, self.now());
        }
        soak.holding = inconclusive;
        soak.last_sample_at = Some(Time(self.now()));
        match sample.verdict {
            SampleVerdict::Ok => soak.ok += 1,
            SampleVerdict::Failed => soak.failed += 1,
            SampleVerdict::Inconclusive => soak.inconclusive += 1,
        }
        self.notice(
            sample.verdict != SampleVerdict::Ok,
            reason::SAMPLE,
            format!(
                "soak of stage {stage}: {} ({})",
                sample.verdict.as_str(),
                sample.reason
            ),
        );
        self.status.samples.push(SoakSample {
            at: Time(self.now()),
            stage: stage as u32,
            verdict: sample.verdict,
            reason: sample.reason.clone(),
        });
        let extra = self.status.samples.len().saturating_sub(SAMPLES_KEPT);
        self.status.samples.drain(..extra);
    }

    /// Past the failure limit: the stage's DCs in trouble roll back and the plan fails.
    fn fail_soak(&mut self, stage: usize, soak: SoakStatus, sample: &SoakVerdict) -> Gate {
        let spec = self.s.spec;
        let why = format!(
            "the soak of stage {stage} ({}) failed {} samples (limit {}): {}",
            spec.stages[stage].name, soak.failed, spec.release.failure_limit, sample.reason
        );
        for context in &sample.in_trouble {
            if self.release(context).is_some_and(|r| !r.rollback_asked) {
                self.actions.push(FleetAction::RollBack {
                    context: context.clone(),
                    reason: format!("failed its soak: {}", sample.reason),
                });
            }
            self.set_state(
                context,
                DcState::Failed,
                Some("failed its soak: rolling back".into()),
            );
        }
        self.status.soak = Some(soak);
        self.notice(true, reason::FAILED, format!("failed: {why}"));
        self.phase(FleetPhase::Failed, why);
        ControlFlow::Break(None)
    }

    /// The soak ran its time: the stage's DCs succeeded, on to the next stage.
    fn pass_soak(&mut self, stage: usize) -> Gate {
        let spec = self.s.spec;
        for context in self.stage_contexts(stage) {
            let message = Some(format!("soaked {}s", spec.soak_seconds));
            self.set_state(context, DcState::Succeeded, message);
        }
        self.notice(
            false,
            reason::SOAKED,
            format!(
                "stage {stage} ({}) passed its soak",
                spec.stages[stage].name
            ),
        );
        self.status.soak = None;
        ControlFlow::Continue(())
    }

    /// Still soaking (or held): says so, and wakes for the next sample or the soak's end.
    fn keep_soaking(
        &mut self,
        stage: usize,
        soak: SoakStatus,
        interval: u64,
        end: Timestamp,
    ) -> Gate {
        let next_sample = soak
            .last_sample_at
            .as_ref()
            .map(|t| after(t.0, interval))
            .unwrap_or(self.now());
        let (phase, message) = self.soaking_phase(stage, &soak, end);
        self.status.soak = Some(soak);
        self.phase(phase, message);
        let wake = if self.status.phase() == FleetPhase::Inconclusive {
            Some(next_sample)
        } else {
            earlier(Some(next_sample), Some(end))
        };
        ControlFlow::Break(wake)
    }

    /// Inconclusive while held on the last sample's reason, else soaking with the time left.
    fn soaking_phase(
        &self,
        stage: usize,
        soak: &SoakStatus,
        end: Timestamp,
    ) -> (FleetPhase, String) {
        let spec = self.s.spec;
        if soak.holding {
            (
                FleetPhase::Inconclusive,
                format!(
                    "soak of stage {stage} held: {}",
                    self.status.samples.last().map_or("", |s| s.reason.as_str())
                ),
            )
        } else {
            (
                FleetPhase::Soaking,
                format!(
                    "soaking stage {stage} ({}): {}s left, {} failed sample(s) of {} allowed",
                    spec.stages[stage].name,
                    seconds_between(self.now(), end),
                    soak.failed,
                    spec.release.failure_limit
                ),
            )
        }
    }

    /// One sample of the stage against the DCs not yet released, when the driver read their
    /// verdicts (None: not read this step).
    pub(super) fn sample(&self, stage: usize) -> Option<SoakVerdict> {
        let verdict_of = |context: &str| -> Option<Result<Verdict, String>> {
            match &self.seen(context)?.read {
                Err(why) => Some(Err(why.clone())),
                Ok(read) => read.verdict.clone(),
            }
        };
        let mut of_stage = Vec::new();
        for context in self.stage_contexts(stage) {
            of_stage.push((context.as_str(), verdict_of(context)?));
        }
        let later: Vec<&str> = self
            .s
            .spec
            .contexts()
            .filter(|(i, _)| *i > stage)
            .map(|(_, c)| c)
            .collect();
        let unreleased: Vec<(&str, Verdict)> = later
            .iter()
            .filter_map(|c| Some((*c, verdict_of(c)?.ok()?)))
            .collect();
        let stage_read: Vec<(&str, Result<Verdict, &str>)> = of_stage
            .iter()
            .map(|(c, v)| (*c, v.as_ref().map(|v| *v).map_err(String::as_str)))
            .collect();
        if !later.is_empty() && unreleased.is_empty() {
            return Some(SoakVerdict {
                verdict: SampleVerdict::Inconclusive,
                reason: format!(
                    "no DC not yet released could be read ({}): held",
                    later.join(", ")
                ),
                in_trouble: Vec::new(),
            });
        }
        let baseline: Vec<(&str, Option<Verdict>)> = self
            .stage_contexts(stage)
            .iter()
            .map(|c| {
                let was = self.status.dc(c).and_then(|d| d.baseline);
                (c.as_str(), was)
            })
            .collect();
        Some(judge(&stage_read, &unreleased, &baseline))
    }
}
