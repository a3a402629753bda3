//! A person's requests and the plan's own end: an abort (wins over everything), the newer of a
//! pause and a resume, holding while paused (and resuming what the plan paused), an approval
//! made before its gate; and an invalid copy refused.

use std::ops::ControlFlow;

use express_api::fleet_release::{DcState, FleetPhase, Request, spec_problems};
use express_api::release::ReleasePhase;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::model::FleetAction;
use super::model::reason;
use super::stepper::Stepper;
use crate::gates::Gate;
use crate::gates::seconds_between;

/// A request not acted on yet (its id differs from the one recorded).
fn new_request<'r>(request: &'r Option<Request>, handled: &Option<String>) -> Option<&'r Request> {
    request
        .as_ref()
        .filter(|r| handled.as_deref() != Some(r.id.as_str()))
}

impl Stepper<'_> {
    /// An invalid plan (a copy edited by hand) changes nothing until it is fixed.
    pub(super) fn refuse_invalid_plan(&mut self) -> Gate {
        let problems = spec_problems(self.s.spec);
        if problems.is_empty() {
            return ControlFlow::Continue(());
        }
        self.message = Some(format!("invalid plan: {}", problems.join("; ")));
        ControlFlow::Break(None)
    }

    /// An abort wins over everything: in-flight releases roll back; with rollback, every
    /// release of the plan, even after it succeeded.
    pub(super) fn take_abort(&mut self) -> Gate {
        let Some(request) = new_request(&self.s.requests.abort, &self.status.requests.abort) else {
            return ControlFlow::Continue(());
        };
        self.status.requests.abort = Some(request.id.clone());
        let everything = self.s.requests.abort_rollback;
        let phase = self.status.phase();
        if phase.is_final() && !everything {
            self.notice(
                false,
                reason::REQUEST_IGNORED,
                format!(
                    "abort: the plan is already {phase}; nothing to stop (--rollback undoes it)"
                ),
            );
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
        self.notice(true, reason::ABORTED, format!("{what} ({})", request.id));
        self.phase(phase, what.into());
        ControlFlow::Break(None)
    }

    /// Over: nothing starts again. What the DCs show is still followed (a rollback finishing).
    pub(super) fn stop_when_over(&mut self) -> Gate {
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
    pub(super) fn take_pause_or_resume(&mut self) {
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
                self.notice(false, reason::PAUSED, "paused".into());
            }
            return;
        }
        if let Some(since) = self.status.paused_since.take() {
            let paused = seconds_between(since.0, self.now());
            self.status.stage_paused_seconds += paused;
            if let Some(soak) = &mut self.status.soak {
                soak.held_seconds += paused;
            }
            self.notice(false, reason::RESUMED, "resumed".into());
        }
    }

    pub(super) fn hold_while_paused(&mut self) -> Gate {
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

    /// An approve made before any gate is reached passes the next gate not passed yet.
    pub(super) fn take_early_approval(&mut self) {
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
                self.notice(
                    false,
                    reason::APPROVED,
                    format!("approved stage {}", stage.name),
                );
                self.status.approved.push(stage.name.clone());
            }
            None => self.notice(
                false,
                reason::REQUEST_IGNORED,
                format!("approve {}: no approval gate left", request.id),
            ),
        }
    }
}
