//! A person's requests and the release's own end: an invalid spec refused, a rollback request
//! (obeyed unless the release is over), a release over (a rollback goes on returning tenants),
//! `spec.paused` holding everything, a promote request (this wave, or every wave).

use std::ops::ControlFlow;

use express_api::release::{ReleasePhase, spec_problems};

use super::model::{CONDITION_VALID, reason};
use super::stepper::{Stepper, set_condition};
use crate::gates::Gate;

impl Stepper<'_> {
    /// Refused: nothing moves until the spec is fixed (a rollback under way goes on).
    pub(super) fn refuse_invalid_spec(&mut self) -> Gate {
        let now = self.s.now;
        let problems = spec_problems(self.s.spec);
        if problems.is_empty() {
            set_condition(
                &mut self.status,
                CONDITION_VALID,
                "True",
                "Valid",
                "the spec can be acted on".into(),
                now,
            );
            return ControlFlow::Continue(());
        }
        let was_refused = self
            .status
            .conditions
            .iter()
            .any(|c| c.type_ == CONDITION_VALID && c.status == "False");
        let message = format!("refused: {}", problems.join("; "));
        set_condition(
            &mut self.status,
            CONDITION_VALID,
            "False",
            reason::INVALID_SPEC,
            message.clone(),
            now,
        );
        if self.status.phase.is_none() {
            self.status.phase = Some(ReleasePhase::Pending);
        }
        self.status.message = Some(format!("{message}; nothing moves until the spec is fixed"));
        if !was_refused {
            self.notice(true, reason::INVALID_SPEC, message);
        }
        ControlFlow::Break(None)
    }

    /// A rollback request not acted on yet: recorded, and obeyed unless the release is over.
    pub(super) fn take_rollback_request(&mut self) {
        let phase = self.phase_before;
        let Some(id) = self.s.requests.rollback.clone().filter(|id| {
            self.status
                .requests
                .as_ref()
                .and_then(|r| r.rollback.as_ref())
                != Some(id)
        }) else {
            return;
        };
        self.requests().rollback = Some(id.clone());
        match phase {
            ReleasePhase::RolledBack => self.notice(
                false,
                reason::REQUEST_IGNORED,
                format!("rollback request {id} ignored: the release is already {phase}"),
            ),
            // A release that succeeded can still be undone (a release across DCs that failed
            // later, or a person): every tenant it moved goes back, as mid-release.
            ReleasePhase::Succeeded => {
                self.begin_rollback(format!("rolled back after it succeeded, by request {id}"))
            }
            _ => self.begin_rollback(format!("aborted by request {id}")),
        }
    }

    /// A rolled-back release goes on returning the tenants it moved; a succeeded one is done.
    pub(super) fn stop_when_over(&mut self) -> Gate {
        match self.status.phase() {
            ReleasePhase::RolledBack => {
                self.roll_back();
                ControlFlow::Break(None)
            }
            ReleasePhase::Succeeded => ControlFlow::Break(None),
            _ => ControlFlow::Continue(()),
        }
    }

    /// `spec.paused`: nothing moves, nothing is judged, and the bake starts again after.
    pub(super) fn hold_while_paused(&mut self) -> Gate {
        let spec = self.s.spec;
        if !spec.paused {
            return ControlFlow::Continue(());
        }
        if self.phase_before != ReleasePhase::Paused {
            self.notice(false, reason::PAUSED, "paused by spec.paused".into());
        }
        self.status.phase = Some(ReleasePhase::Paused);
        self.status.message = Some(format!(
            "paused by spec.paused at wave {} of {}: nothing moves, nothing is judged, no bake time passes",
            self.status.wave + 1,
            spec.waves.len()
        ));
        if let Some(wave) = self.status.waves.get_mut(self.status.wave as usize) {
            wave.bake_since = None;
        }
        ControlFlow::Break(None)
    }

    /// A promote request not acted on yet: the current wave ends its bake, or (`full`) every
    /// remaining wave goes at once.
    pub(super) fn take_promote_request(&mut self) {
        let s = self.s;
        let Some(id) = s.requests.promote.clone().filter(|id| {
            self.status
                .requests
                .as_ref()
                .and_then(|r| r.promote.as_ref())
                != Some(id)
        }) else {
            return;
        };
        self.requests().promote = Some(id.clone());
        if s.requests.promote_full {
            self.status.promoted_full = true;
            self.notice(
                false,
                reason::PROMOTED,
                format!(
                    "promote request {id}: every remaining wave now, no more baking or judging"
                ),
            );
        } else {
            let wave = self.status.wave as usize;
            self.start_wave(wave);
            self.status.waves[wave].promoted = true;
            self.notice(
                false,
                reason::PROMOTED,
                format!(
                    "promote request {id}: wave {} ends its bake once its tenants are adopted",
                    wave + 1
                ),
            );
        }
    }
}
