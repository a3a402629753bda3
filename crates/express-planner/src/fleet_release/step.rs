//! The step: what each DC shows first, then the requests (an abort, then the newer of a pause
//! and a resume), then the failures (a release rolled back, a stage past its deadline), then the
//! stage under way: started behind its approval, its releases followed, soaked, and on to the
//! next stage in the same step.

use std::ops::ControlFlow;

use express_api::fleet_release::{
    DcRelease, DcState, DcStatus, FleetPhase, FleetReleaseStatus, Request, SAMPLES_KEPT,
    SoakSample, SoakStatus, spec_problems,
};
use express_api::release::{ReleasePhase, SampleVerdict};
use express_triage::Verdict;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::soak::judge;
use super::{DcSeen, FleetAction, FleetSnapshot, FleetStep, ReleaseSeen};

type Gate<T = ()> = ControlFlow<Option<Timestamp>, T>;

/// Decides one step.
pub fn step(s: &FleetSnapshot<'_>) -> FleetStep {
    let mut st = Stepper::new(s);
    let wake_at = match gates(&mut st) {
        ControlFlow::Break(wake_at) | ControlFlow::Continue(wake_at) => wake_at,
    };
    st.status.message = st.message.take().or(st.status.message.take());
    FleetStep {
        status: st.status,
        actions: st.actions,
        notices: st.notices,
        wake_at,
    }
}

/// Whether the next step wants the DCs' doctor verdicts: a soak sample is due, or the last
/// stage is about to start and its DCs' verdicts before it are not known yet.
pub fn verdicts_due(s: &FleetSnapshot<'_>) -> bool {
    let status = s.status;
    let phase = status.phase();
    if phase.is_final() || status.paused_since.is_some() {
        return false;
    }
    if let Some(soak) = &status.soak
        && matches!(phase, FleetPhase::Soaking | FleetPhase::Inconclusive)
    {
        return soak
            .last_sample_at
            .as_ref()
            .is_none_or(|at| after(at.0, s.spec.release.interval_seconds) <= s.now);
    }
    let last = s.spec.stages.len().saturating_sub(1);
    let last_started = s.spec.stages.get(last).is_some_and(|stage| {
        stage
            .contexts
            .iter()
            .any(|c| status.dc(c).is_some_and(|d| d.state != DcState::Waiting))
    });
    !last_started
        && status.stage as usize + 1 >= s.spec.stages.len()
        && s.spec.stages.get(last).is_some_and(|stage| {
            stage
                .contexts
                .iter()
                .any(|c| status.dc(c).is_none_or(|d| d.verdict.is_none()))
        })
}

/// The gates in order; any may end the step.
fn gates(st: &mut Stepper<'_>) -> Gate<Option<Timestamp>> {
    st.observe();
    st.refuse_invalid_plan()?;
    st.take_abort()?;
    st.stop_when_over()?;
    st.take_pause_or_resume();
    st.hold_while_paused()?;
    st.fail_on_rolled_back_release()?;
    st.take_early_approval();
    loop {
        let Some(stage) = st.stage_under_way() else {
            st.succeed();
            return ControlFlow::Break(None);
        };
        st.enter_stage(stage)?;
        st.follow_releases(stage)?;
        st.soak(stage)?;
    }
}

/// `seconds` after `at`, saturating.
fn after(at: Timestamp, seconds: u64) -> Timestamp {
    at.saturating_add(SignedDuration::from_secs(
        i64::try_from(seconds).unwrap_or(i64::MAX),
    ))
    .unwrap_or(Timestamp::MAX)
}

fn seconds_between(from: Timestamp, to: Timestamp) -> u64 {
    u64::try_from(to.as_second().saturating_sub(from.as_second())).unwrap_or(0)
}

fn earlier(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A request not acted on yet (its id differs from the one recorded).
fn new_request<'r>(request: &'r Option<Request>, handled: &Option<String>) -> Option<&'r Request> {
    request
        .as_ref()
        .filter(|r| handled.as_deref() != Some(r.id.as_str()))
}

struct Stepper<'a> {
    s: &'a FleetSnapshot<'a>,
    status: FleetReleaseStatus,
    actions: Vec<FleetAction>,
    notices: Vec<String>,
    /// The phase's reason, set by the gate that decides the phase.
    message: Option<String>,
}

impl<'a> Stepper<'a> {
    fn new(s: &'a FleetSnapshot<'a>) -> Stepper<'a> {
        Stepper {
            s,
            status: s.status.clone(),
            actions: Vec::new(),
            notices: Vec::new(),
            message: None,
        }
    }

    fn now(&self) -> Timestamp {
        self.s.now
    }

    fn seen(&self, context: &str) -> Option<&'a DcSeen> {
        self.s.dcs.iter().find(|d| d.context == context)
    }

    /// Its release, when it could be read.
    fn release(&self, context: &str) -> Option<&'a ReleaseSeen> {
        self.seen(context)?.read.as_ref().ok()?.release.as_ref()
    }

    fn unreadable(&self, context: &str) -> Option<&'a str> {
        match self.seen(context).map(|d| &d.read) {
            Some(Ok(_)) => None,
            Some(Err(why)) => Some(why),
            None => Some("not read"),
        }
    }

    fn dc_mut(&mut self, context: &str) -> &mut DcStatus {
        let index = match self
            .status
            .data_centers
            .iter()
            .position(|d| d.context == context)
        {
            Some(index) => index,
            None => {
                self.status.data_centers.push(DcStatus {
                    context: context.to_owned(),
                    stage: self.s.spec.stage_of(context).unwrap_or(0) as u32,
                    ..DcStatus::default()
                });
                self.status.data_centers.len() - 1
            }
        };
        &mut self.status.data_centers[index]
    }

    fn set_state(&mut self, context: &str, state: DcState, message: Option<String>) {
        let dc = self.dc_mut(context);
        dc.state = state;
        dc.message = message;
    }

    fn phase(&mut self, phase: FleetPhase, message: String) {
        self.status.phase = Some(phase);
        self.message = Some(message);
    }

    fn stage_contexts(&self, stage: usize) -> &'a [String] {
        self.s
            .spec
            .stages
            .get(stage)
            .map_or(&[][..], |s| s.contexts.as_slice())
    }

    /// Every DC in the status, in stage order, with what its release shows; unreadable ones
    /// keep what was last known and say why.
    fn observe(&mut self) {
        let contexts: Vec<&str> = self.s.spec.contexts().map(|(_, c)| c).collect();
        self.status
            .data_centers
            .retain(|d| contexts.contains(&d.context.as_str()));
        for context in contexts {
            let seen = self.release(context).map(|r| DcRelease {
                phase: r.phase.as_str().to_owned(),
                wave: r.wave,
                moved_tenants: r.moved,
            });
            let succeeded_at = self.release(context).and_then(|r| r.finished_at);
            let unreadable = self.unreadable(context);
            let verdict = self
                .seen(context)
                .and_then(|d| d.read.as_ref().ok())
                .and_then(|r| r.verdict.as_ref())
                .and_then(|v| v.as_ref().ok())
                .map(|v| v.as_str().to_owned());
            let dc = self.dc_mut(context);
            if let Some(release) = seen {
                dc.release = Some(release);
            }
            if let Some(at) = succeeded_at {
                dc.succeeded_at = Some(Time(at));
            }
            if verdict.is_some() {
                dc.verdict = verdict;
            }
            if let Some(why) = unreadable {
                // A DC whose stage passed its soak is not needed again.
                if dc.state != DcState::Succeeded {
                    dc.state = DcState::Unknown;
                }
                dc.message = Some(format!("cannot be read: {why}"));
            }
        }
        let order = |d: &DcStatus| self.s.spec.contexts().position(|(_, c)| c == d.context);
        let mut dcs = std::mem::take(&mut self.status.data_centers);
        dcs.sort_by_key(order);
        self.status.data_centers = dcs;
        self.status.updated_at = Some(Time(self.now()));
    }

    /// An invalid plan (a copy edited by hand) changes nothing until it is fixed.
    fn refuse_invalid_plan(&mut self) -> Gate {
        let problems = spec_problems(self.s.spec);
        if problems.is_empty() {
            return ControlFlow::Continue(());
        }
        self.message = Some(format!("invalid plan: {}", problems.join("; ")));
        ControlFlow::Break(None)
    }

    /// An abort wins over everything: in-flight releases roll back; with rollback, every
    /// release of the plan, even after it succeeded.
    fn take_abort(&mut self) -> Gate {
        let Some(request) = new_request(&self.s.requests.abort, &self.status.requests.abort) else {
            return ControlFlow::Continue(());
        };
        self.status.requests.abort = Some(request.id.clone());
        let everything = self.s.requests.abort_rollback;
        let phase = self.status.phase();
        if phase.is_final() && !everything {
            self.notices.push(format!(
                "abort: the plan is already {phase}; nothing to stop (--rollback undoes it)"
            ));
            return ControlFlow::Continue(());
        }
        let contexts: Vec<&str> = self.s.spec.contexts().map(|(_, c)| c).collect();
        for context in contexts {
            let Some(release) = self.release(context) else {
                continue;
            };
            let in_flight = !release.phase.is_final();
            let back = release.phase != ReleasePhase::RolledBack
                && (in_flight || everything || release.rollback_asked);
            if back && !release.rollback_asked {
                self.actions.push(FleetAction::RollBack {
                    context: context.to_owned(),
                    reason: format!("FleetRelease aborted ({})", request.id),
                });
            }
            if back {
                self.set_state(
                    context,
                    DcState::Failed,
                    Some("rolling back: aborted".into()),
                );
            }
        }
        let (phase, what) = if everything {
            (
                FleetPhase::RolledBack,
                "aborted with rollback: every DC released goes back",
            )
        } else {
            (
                FleetPhase::Aborted,
                "aborted: the DCs in flight go back, no stage starts",
            )
        };
        self.notices.push(format!("{what} ({})", request.id));
        self.phase(phase, what.into());
        ControlFlow::Break(None)
    }

    /// Over: nothing starts again. What the DCs show is still followed (a rollback finishing).
    fn stop_when_over(&mut self) -> Gate {
        if !self.status.phase().is_final() {
            return ControlFlow::Continue(());
        }
        let contexts: Vec<&str> = self.s.spec.contexts().map(|(_, c)| c).collect();
        for context in contexts {
            if self.release(context).map(|r| r.phase) == Some(ReleasePhase::RolledBack) {
                self.set_state(context, DcState::RolledBack, None);
            }
        }
        ControlFlow::Break(None)
    }

    /// Between a pause and a resume the newer wins (handled or not); each is acted on once.
    fn take_pause_or_resume(&mut self) {
        let requests = &self.s.requests;
        let pause = new_request(&requests.pause, &self.status.requests.pause);
        let resume = new_request(&requests.resume, &self.status.requests.resume);
        if pause.is_none() && resume.is_none() {
            return;
        }
        if let Some(p) = pause {
            self.status.requests.pause = Some(p.id.clone());
        }
        if let Some(r) = resume {
            self.status.requests.resume = Some(r.id.clone());
        }
        let pause_wins = match (&requests.pause, &requests.resume) {
            (Some(p), Some(r)) => p.at > r.at,
            (Some(_), None) => true,
            _ => false,
        };
        if pause_wins {
            if self.status.paused_since.is_none() {
                self.status.paused_since = Some(Time(self.now()));
                self.notices.push("paused".into());
            }
            return;
        }
        if let Some(since) = self.status.paused_since.take() {
            let paused = seconds_between(since.0, self.now());
            self.status.stage_paused_seconds += paused;
            if let Some(soak) = &mut self.status.soak {
                soak.held_seconds += paused;
            }
            self.notices.push("resumed".into());
        }
    }

    /// DCs whose release exists and is not over.
    fn in_flight(&self) -> Vec<&'a str> {
        self.s
            .spec
            .contexts()
            .map(|(_, c)| c)
            .filter(|c| self.release(c).is_some_and(|r| !r.phase.is_final()))
            .collect()
    }

    fn hold_while_paused(&mut self) -> Gate {
        if self.status.paused_since.is_none() {
            // What this plan paused goes on, also in a DC that could not be read when the
            // plan was resumed; what a person paused stays paused.
            for context in self.in_flight() {
                if self
                    .release(context)
                    .is_some_and(|r| r.paused && r.paused_by_plan)
                {
                    self.actions.push(FleetAction::Resume {
                        context: context.to_owned(),
                    });
                }
            }
            return ControlFlow::Continue(());
        }
        for context in self.in_flight() {
            if self.release(context).is_some_and(|r| !r.paused) {
                self.actions.push(FleetAction::Pause {
                    context: context.to_owned(),
                });
            }
        }
        self.phase(
            FleetPhase::Paused,
            "paused: no stage starts, the releases in flight are paused, no clock runs".into(),
        );
        ControlFlow::Break(None)
    }

    /// A DC whose own judge rolled its release back fails the plan.
    fn fail_on_rolled_back_release(&mut self) -> Gate {
        let rolled: Vec<&str> = self
            .s
            .spec
            .contexts()
            .map(|(_, c)| c)
            .filter(|c| {
                self.release(c)
                    .is_some_and(|r| r.phase == ReleasePhase::RolledBack)
            })
            .collect();
        if rolled.is_empty() {
            return ControlFlow::Continue(());
        }
        for context in &rolled {
            self.set_state(
                context,
                DcState::RolledBack,
                Some("its release rolled back".into()),
            );
        }
        self.roll_back_in_flight("the plan failed");
        let why = format!(
            "{}: its release rolled back; no later stage starts",
            rolled.join(", ")
        );
        self.notices.push(format!("failed: {why}"));
        self.phase(FleetPhase::Failed, why);
        ControlFlow::Break(None)
    }

    /// Asks every release still in flight back.
    fn roll_back_in_flight(&mut self, reason: &str) {
        for context in self.in_flight() {
            if self.release(context).is_some_and(|r| !r.rollback_asked) {
                self.actions.push(FleetAction::RollBack {
                    context: context.to_owned(),
                    reason: reason.to_owned(),
                });
            }
            self.set_state(
                context,
                DcState::Failed,
                Some(format!("rolling back: {reason}")),
            );
        }
    }

    /// An approve made before any gate is reached passes the next gate not passed yet.
    fn take_early_approval(&mut self) {
        let Some(request) = new_request(&self.s.requests.approve, &self.status.requests.approve)
        else {
            return;
        };
        let next_gate = self
            .s
            .spec
            .stages
            .iter()
            .enumerate()
            .skip(self.status.stage as usize)
            .find(|(_, s)| s.approval && !self.status.approved.contains(&s.name));
        self.status.requests.approve = Some(request.id.clone());
        match next_gate {
            Some((_, stage)) => {
                self.notices.push(format!("approved stage {}", stage.name));
                self.status.approved.push(stage.name.clone());
            }
            None => self
                .notices
                .push(format!("approve {}: no approval gate left", request.id)),
        }
    }

    /// The first stage not soaked yet; None when every stage is.
    fn stage_under_way(&self) -> Option<usize> {
        let stages = self.s.spec.stages.len();
        (0..stages).find(|&i| !self.soaked(i))
    }

    /// Every DC of the stage succeeded and passed its soak: recorded so, or a later stage was
    /// started (which only a passed soak allows).
    fn soaked(&self, stage: usize) -> bool {
        let recorded = self.stage_contexts(stage).iter().all(|c| {
            self.status
                .dc(c)
                .is_some_and(|d| d.state == DcState::Succeeded)
        });
        let later_started = self
            .s
            .spec
            .contexts()
            .any(|(i, c)| i > stage && self.release(c).is_some());
        let all_succeeded = self.stage_contexts(stage).iter().all(|c| {
            self.release(c)
                .is_some_and(|r| r.phase == ReleasePhase::Succeeded)
                || (self.unreadable(c).is_some()
                    && self
                        .status
                        .dc(c)
                        .is_some_and(|d| d.state == DcState::Succeeded))
        });
        all_succeeded && (recorded || later_started)
    }

    /// Starts the stage when none of its DCs has a release yet: behind its approval, with the
    /// verdicts of the last stage recorded first.
    fn enter_stage(&mut self, stage: usize) -> Gate {
        let spec = self.s.spec;
        let started = self
            .stage_contexts(stage)
            .iter()
            .any(|c| self.release(c).is_some());
        if self.status.stage as usize != stage || self.status.stage_started_at.is_none() {
            if !started {
                let gate = &spec.stages[stage];
                if gate.approval && !self.status.approved.contains(&gate.name) {
                    self.status.stage = stage as u32;
                    // Waiting for a person does not count against the stage's deadline.
                    self.status.stage_started_at = None;
                    self.phase(
                        FleetPhase::WaitingApproval,
                        format!(
                            "stage {} ({}) waits for approval: kubectl express fleet-release approve",
                            gate.name,
                            gate.contexts.join(", ")
                        ),
                    );
                    return ControlFlow::Break(None);
                }
                if stage + 1 == spec.stages.len() {
                    for context in self.stage_contexts(stage) {
                        let verdict = self.status.dc(context).and_then(|d| d.verdict.clone());
                        self.dc_mut(context).baseline = verdict;
                    }
                }
                self.notices.push(format!(
                    "stage {} ({}) starts: {}",
                    stage,
                    gate.name,
                    gate.contexts.join(", ")
                ));
            }
            self.status.stage = stage as u32;
            self.status.stage_started_at = Some(Time(self.now()));
            self.status.stage_paused_seconds = 0;
        }
        for context in self.stage_contexts(stage) {
            if self.unreadable(context).is_some() || self.release(context).is_some() {
                continue;
            }
            self.actions.push(FleetAction::Create {
                context: context.clone(),
            });
            let now = Time(self.now());
            let dc = self.dc_mut(context);
            dc.state = DcState::Releasing;
            dc.started_at.get_or_insert(now);
            dc.message = None;
        }
        ControlFlow::Continue(())
    }

    /// Follows the stage's releases to their end, within its deadline.
    fn follow_releases(&mut self, stage: usize) -> Gate {
        let contexts = self.stage_contexts(stage);
        let mut waiting = Vec::new();
        for context in contexts {
            match self.release(context) {
                Some(r) if r.phase == ReleasePhase::Succeeded => {
                    if self.status.dc(context).map(|d| d.state) != Some(DcState::Succeeded) {
                        self.set_state(context, DcState::Soaking, None);
                    }
                }
                Some(r) => {
                    self.set_state(context, DcState::Releasing, None);
                    waiting.push(format!("{context} {} wave {}", r.phase, r.wave));
                }
                // Its release was seen done: the soak's samples hold while it cannot be read.
                None if self.status.dc(context).is_some_and(|d| {
                    d.release.as_ref().is_some_and(|r| r.phase == "Succeeded")
                }) => {}
                None => waiting.push(match self.unreadable(context) {
                    Some(why) => format!("{context} cannot be read ({why})"),
                    None => format!("{context} release being created"),
                }),
            }
        }
        if waiting.is_empty() {
            return ControlFlow::Continue(());
        }
        let started = self
            .status
            .stage_started_at
            .as_ref()
            .map_or(self.now(), |t| t.0);
        let deadline = after(
            started,
            self.s
                .spec
                .stage_deadline_seconds
                .saturating_add(self.status.stage_paused_seconds),
        );
        if self.now() >= deadline {
            let why = format!(
                "stage {} ({}) not done {}s after it started: {}",
                stage,
                self.s.spec.stages[stage].name,
                self.s.spec.stage_deadline_seconds,
                waiting.join(", ")
            );
            self.roll_back_in_flight("the stage passed its deadline");
            for context in contexts {
                if self.unreadable(context).is_some() {
                    self.set_state(context, DcState::Unknown, Some("past the deadline".into()));
                }
            }
            self.notices.push(format!("failed: {why}"));
            self.phase(FleetPhase::Failed, why);
            return ControlFlow::Break(None);
        }
        let stage_name = &self.s.spec.stages[stage].name;
        self.phase(
            FleetPhase::Progressing,
            format!("stage {stage} ({stage_name}): {}", waiting.join(", ")),
        );
        ControlFlow::Break(Some(deadline))
    }

    /// Soaks a done stage against the DCs not yet released; passed, on to the next stage.
    fn soak(&mut self, stage: usize) -> Gate {
        let spec = self.s.spec;
        let contexts = self.stage_contexts(stage);
        let finished = contexts
            .iter()
            .filter_map(|c| self.release(c).and_then(|r| r.finished_at))
            .max()
            .unwrap_or(self.now());
        let mut soak = match self.status.soak.take() {
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
        };
        let interval = spec.release.interval_seconds.max(1);
        let due = soak
            .last_sample_at
            .as_ref()
            .is_none_or(|at| after(at.0, interval) <= self.now());
        if spec.soak_seconds > 0
            && due
            && let Some(sample) = self.sample(stage)
        {
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
            self.notices.push(format!(
                "soak of stage {stage}: {} ({})",
                sample.verdict.as_str(),
                sample.reason
            ));
            self.status.samples.push(SoakSample {
                at: Time(self.now()),
                stage: stage as u32,
                verdict: sample.verdict.as_str().to_owned(),
                reason: sample.reason.clone(),
            });
            let extra = self.status.samples.len().saturating_sub(SAMPLES_KEPT);
            self.status.samples.drain(..extra);
            if soak.failed > spec.release.failure_limit {
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
                self.notices.push(format!("failed: {why}"));
                self.phase(FleetPhase::Failed, why);
                return ControlFlow::Break(None);
            }
        }
        let end = after(
            soak.started_at.0,
            spec.soak_seconds.saturating_add(soak.held_seconds),
        );
        if !soak.holding && self.now() >= end {
            for context in contexts {
                let message = Some(format!("soaked {}s", spec.soak_seconds));
                self.set_state(context, DcState::Succeeded, message);
            }
            self.notices.push(format!(
                "stage {stage} ({}) passed its soak",
                spec.stages[stage].name
            ));
            self.status.soak = None;
            return ControlFlow::Continue(());
        }
        let next_sample = soak
            .last_sample_at
            .as_ref()
            .map(|t| after(t.0, interval))
            .unwrap_or(self.now());
        let (phase, message) = if soak.holding {
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
        };
        self.status.soak = Some(soak);
        self.phase(phase, message);
        let wake = if self.status.phase() == FleetPhase::Inconclusive {
            Some(next_sample)
        } else {
            earlier(Some(next_sample), Some(end))
        };
        ControlFlow::Break(wake)
    }

    /// One sample of the stage against the DCs not yet released, when the driver read their
    /// verdicts (None: not read this step).
    fn sample(&self, stage: usize) -> Option<super::SoakVerdict> {
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
            return Some(super::SoakVerdict {
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
                let was = self
                    .status
                    .dc(c)
                    .and_then(|d| d.baseline.as_deref())
                    .and_then(verdict_named);
                (c.as_str(), was)
            })
            .collect();
        Some(judge(&stage_read, &unreleased, &baseline))
    }

    fn succeed(&mut self) {
        if self.status.phase() != FleetPhase::Succeeded {
            self.notices
                .push("succeeded: every stage released and soaked".into());
        }
        self.status.stage = self.s.spec.stages.len().saturating_sub(1) as u32;
        self.phase(
            FleetPhase::Succeeded,
            "every stage released and soaked".into(),
        );
    }
}

fn verdict_named(name: &str) -> Option<Verdict> {
    [
        Verdict::Healthy,
        Verdict::Tenant,
        Verdict::Deployment,
        Verdict::Infrastructure,
    ]
    .into_iter()
    .find(|v| v.as_str() == name)
}
