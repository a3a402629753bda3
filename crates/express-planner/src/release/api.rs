//! The API before the first move (DESIGN section 15): `toRing`'s build checks its own CRDs
//! against this DC and what it stores, applies them when compatible and records what it did on
//! its ring's Lease. The release waits for that record (from the build it waits for), copies it
//! into `status.api`, and says it in condition `APICompatible`: True (applied, current, or the
//! DC's are newer and compatible) lets the first move happen; False (breaking) moves nothing
//! until a check finds it fixed. No record past `adoptionDeadlineSeconds` (a build that cannot
//! write, or does not check) fails the release, nothing moved.

use std::ops::ControlFlow;

use express_api::api_record::{ApiRecord, CONDITION_API_COMPATIBLE};
use express_api::release::ReleasePhase;

use super::model::reason;
use super::stepper::{Stepper, set_condition};
use crate::gates::{Gate, after, seconds_between};

impl Stepper<'_> {
    /// A build that began to be waited for and never checked (it cannot write, or it stopped
    /// leading) must not hold the release for ever: past `adoptionDeadlineSeconds` since the
    /// wait began, the release fails, nothing moved. A release waiting for a ring nobody leads
    /// yet has not begun this wait.
    pub(super) fn fail_when_api_overdue(&mut self) -> Gate {
        let spec = self.s.spec;
        let now = self.s.now;
        let waiting_since = self
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_API_COMPATIBLE && c.status == "Unknown")
            .map(|c| c.last_transition_time.0);
        match waiting_since {
            Some(since) if seconds_between(since, now) > spec.adoption_deadline_seconds => {
                self.begin_rollback(format!(
                    "ring {}'s build did not check its CRDs against this DC within {}s (adoptionDeadlineSeconds); nothing moved",
                    spec.to_ring, spec.adoption_deadline_seconds
                ));
                self.roll_back();
                ControlFlow::Break(None)
            }
            _ => ControlFlow::Continue(()),
        }
    }

    /// Continues once `toRing`'s build has recorded compatible CRDs in this DC.
    pub(super) fn api_settled(&mut self) -> Gate {
        let now = self.s.now;
        let spec = self.s.spec;
        let wait = ControlFlow::Break(Some(after(now, spec.interval_seconds)));
        let Some(record) = self.current_record() else {
            let message = format!(
                "waiting for ring {}'s build to check its CRDs against this DC and apply them; nothing moves before",
                spec.to_ring
            );
            set_condition(
                &mut self.status,
                CONDITION_API_COMPATIBLE,
                "Unknown",
                reason::API_CHECKING,
                message.clone(),
                now,
            );
            self.status.phase = Some(ReleasePhase::Pending);
            self.status.message = Some(message);
            return wait;
        };
        let was_breaking = self
            .status
            .conditions
            .iter()
            .any(|c| c.type_ == CONDITION_API_COMPATIBLE && c.status == "False");
        let summary = record.summary();
        let compatible = record.outcome.compatible();
        set_condition(
            &mut self.status,
            CONDITION_API_COMPATIBLE,
            if compatible { "True" } else { "False" },
            record.outcome.as_str(),
            summary.clone(),
            now,
        );
        let changed = self.status.api.as_ref() != Some(&record);
        self.status.api = Some(record);
        if compatible {
            if changed {
                self.notice(false, reason::API_READY, summary);
            }
            return ControlFlow::Continue(());
        }
        self.status.phase = Some(ReleasePhase::Pending);
        self.status.message = Some(format!("nothing moves: {summary}"));
        if !was_breaking {
            self.notice(true, reason::API_BREAKING, summary);
        }
        wait
    }

    /// The record the build this release waits for made for this release (any build's when
    /// that build reports no version).
    fn current_record(&self) -> Option<ApiRecord> {
        let leader = self.s.to_leader.as_ref()?;
        let record = leader.api.as_ref()?;
        if self.s.uid.is_some() && record.release_uid.as_deref() != self.s.uid {
            return None;
        }
        match &leader.version {
            Some(version) if *version != record.build => None,
            _ => Some(record.clone()),
        }
    }
}
