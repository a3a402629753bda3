//! Delivery or recovery (DESIGN section 12): the one rule every reader applies to a node change.
//!
//! A node change is part of a rollout (a *delivery*) only when it moves the node to a revision
//! it did not run: a change of the desired state, or a rollback. Re-creating a lost pod on the
//! revision the node already ran is a *recovery*; so is a bounce. A recovery is recorded like
//! any change, with `recovery: true`: a lost pod of a node whose upgrade in the current rollout
//! had succeeded keeps that upgrade's `fromRevision`, so that a rollback of the rollout still
//! returns the node; a build that predates the flag reads the record as it always did. The
//! rollout block of the ExpressCluster keeps describing the last delivery
//! while a recovery runs, and triage counts a node under recovery as a symptom, never as a
//! deployment that explains trouble.

use serde::Serialize;

use crate::v1alpha1::{ChangeState, NodeChange, NodeStatus};

/// What a node change is, by [`classify_change`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Work {
    /// Moves the node to a revision it did not run: part of a rollout.
    Delivery,
    /// Brings back the revision the node ran (a lost pod re-created): no rollout.
    Recovery,
    /// Restarts the node's pod on the revision it runs, on request (DESIGN section 6).
    Bounce,
}

/// A change recorded with `recovery` set: a recovery; any other: a delivery.
pub fn classify_change(recovery: bool) -> Work {
    if recovery {
        Work::Recovery
    } else {
        Work::Delivery
    }
}

/// Whether the node, by its last change record, ran `revision`: its change to that revision
/// succeeded (its pod became Ready on it), or that change was itself a recovery of it. A pod
/// the node then loses is re-created as a recovery.
pub fn ran(state: ChangeState, recovery: bool, to: &str, revision: &str) -> bool {
    to == revision && (state == ChangeState::Succeeded || recovery)
}

/// What moves a node that is down, as its status tells (for readers of status: triage, the
/// CLI): a bounce in progress; the change it records when that has not succeeded (a delivery
/// under way or failed, a recovery); a delivery still to come when the node never ran its
/// desired revision; `None` when nothing does: the node is down on a revision it ran (its pod
/// was lost and not re-created yet, or is not Ready on its own).
pub fn down_node_work(status: &NodeStatus) -> Option<Work> {
    if status
        .bounce
        .as_ref()
        .and_then(|b| b.phase)
        .is_some_and(|phase| !phase.is_final())
    {
        return Some(Work::Bounce);
    }
    let change = status.change.as_ref();
    if let Some(change) = change.filter(|c| c.state != ChangeState::Succeeded) {
        return Some(change.work());
    }
    let desired = status.desired_revision.as_deref()?;
    if change.is_some_and(|c| ran(c.state, c.recovery, &c.to_revision, desired)) {
        None
    } else {
        Some(Work::Delivery)
    }
}

impl NodeChange {
    /// Delivery or recovery, by [`classify_change`].
    pub fn work(&self) -> Work {
        classify_change(self.recovery)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BouncePhase, BounceStatus, ChangeKind};

    fn change(kind: ChangeKind, state: ChangeState, from: Option<&str>, to: &str) -> NodeChange {
        NodeChange {
            kind,
            state,
            from_revision: from.map(Into::into),
            to_revision: to.into(),
            sequence: 1,
            rollout: "x".into(),
            recovery: kind == ChangeKind::Provision && from == Some(to),
            reason: None,
            started_at: None,
            finished_at: None,
        }
    }

    #[test]
    fn what_moves_a_down_node_by_its_status() {
        use ChangeKind::*;
        use ChangeState::*;
        let bounce = |phase| BounceStatus {
            request_id: "b1".into(),
            phase: Some(phase),
            ..BounceStatus::default()
        };
        type Row = (
            &'static str,
            Option<NodeChange>,
            Option<BounceStatus>,
            Option<Work>,
        );
        let rows: [Row; 9] = [
            (
                "never changed: provisioning to come",
                None,
                None,
                Some(Work::Delivery),
            ),
            (
                "provisioning under way",
                Some(change(Provision, InProgress, None, "r1")),
                None,
                Some(Work::Delivery),
            ),
            (
                "an upgrade that failed",
                Some(change(Upgrade, Failed, Some("r0"), "r1")),
                None,
                Some(Work::Delivery),
            ),
            (
                "ran r0, r1 still to come",
                Some(change(Upgrade, Succeeded, None, "r0")),
                None,
                Some(Work::Delivery),
            ),
            (
                "a recovery under way",
                Some(change(Provision, InProgress, Some("r1"), "r1")),
                None,
                Some(Work::Recovery),
            ),
            (
                "ran r1 and went down: nothing moves it",
                Some(change(Upgrade, Succeeded, Some("r0"), "r1")),
                None,
                None,
            ),
            (
                "recovered, then down again",
                Some(change(Provision, Succeeded, Some("r1"), "r1")),
                None,
                None,
            ),
            (
                "a bounce under way",
                Some(change(Upgrade, Succeeded, Some("r0"), "r1")),
                Some(bounce(BouncePhase::Terminating)),
                Some(Work::Bounce),
            ),
            (
                "a bounce that failed",
                Some(change(Upgrade, Succeeded, Some("r0"), "r1")),
                Some(bounce(BouncePhase::Failed)),
                None,
            ),
        ];
        for (what, change, bounce, work) in rows {
            let status = NodeStatus {
                desired_revision: Some("r1".into()),
                change,
                bounce: bounce.map(Box::new),
                ..NodeStatus::default()
            };
            assert_eq!(down_node_work(&status), work, "{what}");
        }
    }

    #[test]
    fn a_node_ran_a_revision_its_change_reached_or_recovered() {
        use ChangeState::*;
        let rows: [(&str, ChangeState, bool, &str, bool); 6] = [
            (
                "provisioned or upgraded, and Ready",
                Succeeded,
                false,
                "r1",
                true,
            ),
            (
                "provisioning never became Ready",
                InProgress,
                false,
                "r1",
                false,
            ),
            ("a change that failed", Failed, false, "r1", false),
            ("a recovery still starting", InProgress, true, "r1", true),
            ("recovered", Succeeded, true, "r1", true),
            ("ran another revision", Succeeded, false, "r2", false),
        ];
        for (what, state, recovery, to, expected) in rows {
            assert_eq!(ran(state, recovery, to, "r1"), expected, "{what}");
        }
    }
}
