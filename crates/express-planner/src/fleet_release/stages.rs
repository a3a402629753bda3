//! The stages in order: the stage under way derived from the DCs, started behind its approval
//! (the last stage's verdicts recorded first), its releases created and followed within its
//! deadline, a release rolled back failing the plan, and the plan's success.

use std::ops::ControlFlow;

use express_api::fleet_release::{DcState, FleetPhase};
use express_api::release::ReleasePhase;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::model::FleetAction;
use super::model::reason;
use super::stepper::Stepper;
use crate::gates::Gate;
use crate::gates::after;

impl Stepper<'_> {
    /// A DC whose own judge rolled its release back fails the plan.
    pub(super) fn fail_on_rolled_back_release(&mut self) -> Gate {
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
        self.notice(true, reason::FAILED, format!("failed: {why}"));
        self.phase(FleetPhase::Failed, why);
        ControlFlow::Break(None)
    }

    /// Asks every release still in flight back.
    pub(super) fn roll_back_in_flight(&mut self, reason: &str) {
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

    /// The first stage not soaked yet; None when every stage is.
    pub(super) fn stage_under_way(&self) -> Option<usize> {
        let stages = self.s.spec.stages.len();
        (0..stages).find(|&i| !self.soaked(i))
    }

    /// Every DC of the stage succeeded and passed its soak: recorded so, or a later stage was
    /// started (which only a passed soak allows).
    pub(super) fn soaked(&self, stage: usize) -> bool {
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
    pub(super) fn enter_stage(&mut self, stage: usize) -> Gate {
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
                        let verdict = self.status.dc(context).and_then(|d| d.verdict);
                        self.dc_mut(context).baseline = verdict;
                    }
                }
                self.notice(
                    false,
                    reason::STAGE_STARTED,
                    format!(
                        "stage {} ({}) starts: {}",
                        stage,
                        gate.name,
                        gate.contexts.join(", ")
                    ),
                );
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
    pub(super) fn follow_releases(&mut self, stage: usize) -> Gate {
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
                    waiting.push(format!("{context} {} wave {}", r.phase, r.wave + 1));
                }
                // Its release was seen done: the soak's samples hold while it cannot be read.
                None if self.status.dc(context).is_some_and(|d| {
                    d.release
                        .as_ref()
                        .is_some_and(|r| r.phase == ReleasePhase::Succeeded)
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
            self.notice(true, reason::FAILED, format!("failed: {why}"));
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

    pub(super) fn succeed(&mut self) {
        if self.status.phase() != FleetPhase::Succeeded {
            self.notice(
                false,
                reason::SUCCEEDED,
                "succeeded: every stage released and soaked".into(),
            );
        }
        self.status.stage = self.s.spec.stages.len().saturating_sub(1) as u32;
        self.phase(
            FleetPhase::Succeeded,
            "every stage released and soaked".into(),
        );
    }
}
