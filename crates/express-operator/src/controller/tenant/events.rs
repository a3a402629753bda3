//! The events of a tenant's reconcile: every reason and note it publishes, built from the
//! planner's outputs, and where each is published (the node, or the ExpressCluster).

use express_api::BouncePhase;
use express_api::bounce::{APP_STATE_CATCHUP, SHUTDOWN_PROTECTION_DISABLED};
use express_api::keys::{ANNOTATION_APP_STATE, ANNOTATION_SHUTDOWN_PROTECTION};
use express_planner::rollout::{AbortOutcome, Failure};
use express_planner::settle::{SETTLE_STALLED, SETTLE_WAIT};
use express_planner::{Action, BouncePlan, NodeIndex, NodeObservation, Operation};
use kube::Resource;

use super::env::Env;
use crate::controller::error::Error;
pub(super) use crate::controller::events::{Notice, publish};

/// The label of a pod operation, in events (`action`), logs and the actions metric.
pub(crate) fn action_label(operation: Operation) -> &'static str {
    match operation {
        Operation::CreatePod => "create_pod",
        Operation::ReplacePod => "replace_pod",
        Operation::ResumeReplacement => "resume_replacement",
        Operation::FinishReplacement => "finish_replacement",
        Operation::RemovePod => "remove_pod",
        Operation::DeleteEndedPod => "delete_ended_pod",
        Operation::DeleteForBounce => "bounce_delete_pod",
        Operation::CreateForBounce => "bounce_create_pod",
    }
}

/// Whether a pod operation gets an event of its own. One event per node change: a
/// replacement is told when it starts (which pod, from which revision to which, after what),
/// and its second half, creating the new pod once the old one is gone, has none. At fleet scale
/// an event is a write to the API server like any other; the node's status records when the
/// change finished, and the log and `express_operator_actions_total{action="finish_replacement"}`
/// count the creation.
pub(crate) fn has_own_event(operation: Operation, created: Option<&str>) -> bool {
    !(operation == Operation::FinishReplacement && created.is_some())
}

/// A pod operation done. `created` is the revision of a pod just created; `waited_for` the
/// prerequisites the change waited for. Every step of a rollback is RollingBack, whichever
/// operation it is.
pub(crate) fn pod_operation(
    action: &Action,
    observation: &NodeObservation,
    waited_for: &[String],
    created: Option<&str>,
) -> Notice {
    let rollback = action.source.kept_revision().is_some();
    let waited = if waited_for.is_empty() || rollback {
        String::new()
    } else {
        format!(" (after {})", waited_for.join(", "))
    };
    let name = &action.name;
    let upgrading = if rollback { "RollingBack" } else { "Upgrading" };
    let recovery = action
        .record
        .as_ref()
        .is_some_and(|r| r.work() == express_api::Work::Recovery);
    let (reason, note) = match (action.operation, created) {
        (Operation::CreatePod, Some(revision)) if recovery => (
            "Recovering",
            format!(
                "created pod {name} on revision {revision}, the one it ran: it had lost its pod (a recovery, not a rollout){waited}"
            ),
        ),
        (Operation::CreatePod, Some(revision)) if !rollback => (
            "Provisioning",
            format!("created pod {name} on revision {revision}{waited}"),
        ),
        (Operation::CreatePod | Operation::FinishReplacement, Some(revision)) => (
            upgrading,
            format!("created pod {name} on revision {revision}{waited}"),
        ),
        (Operation::ReplacePod, _) => {
            let from = observation
                .pod
                .as_ref()
                .and_then(|p| p.revision.as_deref())
                .unwrap_or("none");
            let to = action.pod_revision(observation).unwrap_or_default();
            (
                upgrading,
                format!(
                    "replacing pod {name} (revision {from} -> {to}){waited}: deleting it, then creating it on {to} once it is gone"
                ),
            )
        }
        (Operation::ResumeReplacement, _) => (
            upgrading,
            format!("deleting old pod {name} to finish its replacement"),
        ),
        (Operation::RemovePod, _) => (
            "Removing",
            format!("deleting pod {name}: the node is set down"),
        ),
        (Operation::DeleteEndedPod, _) => (
            "Recreating",
            format!("deleting ended pod {name} so it can be provisioned again"),
        ),
        (Operation::CreatePod | Operation::FinishReplacement, None) => {
            (upgrading, format!("created pod {name}"))
        }
        (Operation::DeleteForBounce, _) => (
            "Bouncing",
            format!("bounce: deleting pod {name} gracefully (not forced)"),
        ),
        (Operation::CreateForBounce, revision) => (
            "Bouncing",
            format!(
                "bounce: created pod {name} on revision {}, the one it ran",
                revision.unwrap_or("?")
            ),
        ),
    };
    Notice::normal(reason, action_label(action.operation), note)
}

/// The application's shutdown protection was disabled before a bounce deleted its pod.
pub(crate) fn shutdown_protection_disabled(pod: &str) -> Notice {
    Notice::normal(
        "ShutdownProtectionDisabled",
        "Bounce",
        format!(
            "pod {pod} annotated {ANNOTATION_SHUTDOWN_PROTECTION}: {SHUTDOWN_PROTECTION_DISABLED} before its deletion"
        ),
    )
}

/// The shutdown protection could not be disabled; the bounce proceeds.
pub(crate) fn shutdown_protection_kept(pod: &str, error: &kube::Error) -> Notice {
    Notice::warning(
        "ShutdownProtectionNotDisabled",
        "Bounce",
        format!(
            "cannot annotate pod {pod} {ANNOTATION_SHUTDOWN_PROTECTION}: {SHUTDOWN_PROTECTION_DISABLED} ({error}); bouncing anyway"
        ),
    )
}

/// A bounce request taken up, moved to another phase, or ended (DESIGN section 6). None when
/// the phase did not change.
pub(crate) fn bounce_transition(node: &str, bounce: &BouncePlan) -> Vec<Notice> {
    if !bounce.is_transition() {
        return Vec::new();
    }
    let id = &bounce.request_id;
    let message = &bounce.message;
    let mut notices = Vec::new();
    if bounce.catchup && bounce.previous.is_none_or(|p| p == BouncePhase::Pending) {
        notices.push(Notice::warning(
            "BounceDuringCatchup",
            "Bounce",
            format!("bounce {id}: the application on {node} is catching up ({ANNOTATION_APP_STATE}: {APP_STATE_CATCHUP}); bouncing anyway"),
        ));
    }
    notices.push(match bounce.phase {
        BouncePhase::Pending => Notice::normal(
            "BouncePending",
            "Bounce",
            format!("bounce {id} accepted: {message}"),
        ),
        BouncePhase::Terminating => Notice::normal(
            "BounceStarted",
            "Bounce",
            format!(
                "bounce {id} started on revision {}: {message}",
                bounce.revision.as_deref().unwrap_or("?")
            ),
        ),
        BouncePhase::Starting => Notice::normal(
            "BounceOldPodGone",
            "Bounce",
            format!("bounce {id}: the old pod of {node} is gone; {message}"),
        ),
        BouncePhase::Succeeded => Notice::normal(
            "Bounced",
            "Bounce",
            format!("bounce {id} succeeded: {message}"),
        ),
        BouncePhase::Failed => Notice::warning(
            "BounceFailed",
            "Bounce",
            format!("bounce {id} failed: {message}"),
        ),
        BouncePhase::Refused => Notice::warning(
            "BounceRefused",
            "Bounce",
            format!("bounce {id} refused: {message}"),
        ),
    });
    notices
}

/// A pod operation that failed.
pub(crate) fn action_failed(action: &Action, error: &Error) -> Notice {
    Notice::warning(
        "ActionFailed",
        action_label(action.operation),
        error.to_string(),
    )
}

/// A change found failed (published on the node and on the ExpressCluster).
pub(crate) fn rollout_failed(failure: &Failure, rolling_back: bool) -> Notice {
    Notice::warning(
        "RolloutFailed",
        "Assess",
        format!(
            "revision {} failed on {}: {}; no further node is changed{}",
            failure.revision,
            failure.name,
            failure.reason,
            if rolling_back {
                "; rolling back the nodes this rollout changed"
            } else {
                ""
            }
        ),
    )
}

/// An abort request acted on.
pub(crate) fn abort_request(id: &str, outcome: &AbortOutcome, rollback: bool) -> Notice {
    let note = match outcome {
        AbortOutcome::Recorded => format!(
            "abort request {id}: the rollout stops{}",
            if rollback {
                "; the nodes it changed return to their previous revision"
            } else {
                ""
            }
        ),
        AbortOutcome::NothingToAbort => {
            format!("abort request {id}: no rollout in progress, nothing to stop")
        }
    };
    Notice::normal("Aborted", "Abort", note)
}

/// A retry request acted on.
pub(crate) fn retry_request(id: &str) -> Notice {
    Notice::normal(
        "Retried",
        "Retry",
        format!("retry request {id}: known-invalid revisions and any abort cleared"),
    )
}

/// A pause came into force.
pub(crate) fn paused(message: String) -> Notice {
    Notice::normal("Paused", "Pause", message)
}

/// The cluster's spec cannot be acted on.
pub(crate) fn invalid_spec(why: String) -> Notice {
    Notice::warning("InvalidSpec", "Validate", why)
}

/// Objects of the cluster cannot be decoded by this build (a new set of them each time).
pub(crate) fn undecodable(message: String) -> Notice {
    Notice::warning("UndecodableObject", "Decode", message)
}

/// A settle wait started holding a change.
pub(crate) fn settling(message: String) -> Notice {
    Notice::normal("Settling", "Settle", message)
}

/// A rollout-id disagreement turned stalled.
pub(crate) fn settle_stalled(message: String) -> Notice {
    Notice::warning("SettleStalled", "Settle", message)
}

/// This ring's operator let a tenant go: its ring label names another ring.
pub(crate) fn released(ring: &str, to: &str) -> Notice {
    Notice::normal(
        "Released",
        "HandOver",
        format!(
            "operator ring {ring} released the tenant to ring {to} (its express.dev/operator-ring label); it no longer acts on it"
        ),
    )
}

/// This ring's operator took a tenant over; `how` says from whom.
pub(crate) fn adopted(ring: &str, how: &str) -> Notice {
    Notice::normal(
        "Adopted",
        "HandOver",
        format!("operator ring {ring} adopted the tenant {how}"),
    )
}

/// Whether a status message says that nothing starts until the desired state settles.
pub(crate) fn waits_to_settle(message: Option<&str>) -> bool {
    message.is_some_and(|m| m.contains(SETTLE_WAIT))
}

impl Env<'_> {
    pub(crate) async fn publish_on_node(&self, index: NodeIndex, notice: Notice) {
        let observation = self.snapshot.node(index);
        publish(
            self.ctx,
            self.observed
                .node(observation.kind, &observation.name)
                .map(|n| n.object_ref()),
            notice,
        )
        .await;
    }

    pub(crate) async fn publish_on_cluster(&self, notice: Notice) {
        if let Some(cluster) = self.governing {
            publish(self.ctx, Some(cluster.object_ref(&())), notice).await;
        }
    }

    /// Publishes, on a node of a cluster without ExpressCluster, the start of a settle wait
    /// (or of its stall) that holds the node's change.
    pub(crate) async fn publish_settle_wait(
        &self,
        index: NodeIndex,
        previous: Option<&str>,
        message: Option<&str>,
    ) {
        let stalled = |m: Option<&str>| m.is_some_and(|m| m.starts_with(SETTLE_STALLED));
        let note = || self.plan.settle.message().unwrap_or_default();
        if stalled(message) && !stalled(previous) {
            self.publish_on_node(index, settle_stalled(note())).await;
        } else if waits_to_settle(message) && !waits_to_settle(previous) {
            self.publish_on_node(index, settling(note())).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_change_is_one_event_and_every_other_operation_has_its_own() {
        // The replacement's new pod: told with the replacement that started it.
        assert!(!has_own_event(Operation::FinishReplacement, Some("r2")));
        // Without a created revision it is not a finished creation: say it.
        assert!(has_own_event(Operation::FinishReplacement, None));
        for operation in [
            Operation::CreatePod,
            Operation::ReplacePod,
            Operation::ResumeReplacement,
            Operation::RemovePod,
            Operation::DeleteEndedPod,
            Operation::DeleteForBounce,
            Operation::CreateForBounce,
        ] {
            assert!(has_own_event(operation, Some("r2")), "{operation:?}");
        }
    }
}
