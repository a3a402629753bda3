//! Events: every reason and note the operator publishes, built from the planner's outputs, and
//! where each is published (the node, or the ExpressCluster). A new event is a new builder here.

use express_api::BouncePhase;
use express_api::bounce::{APP_STATE_CATCHUP, SHUTDOWN_PROTECTION_DISABLED};
use express_api::keys::{ANNOTATION_APP_STATE, ANNOTATION_SHUTDOWN_PROTECTION};
use express_planner::rollout::{AbortOutcome, Failure};
use express_planner::settle::{SETTLE_STALLED, SETTLE_WAIT};
use express_planner::{Action, BouncePlan, NodeIndex, NodeObservation, Operation};
use kube::Resource;
use kube::runtime::events::EventType;
use tracing::warn;

use super::context::Context;
use super::env::Env;
use super::recorders::Occurrence;

/// One event, before it is published.
pub(super) struct Notice {
    pub(super) type_: EventType,
    pub(super) reason: &'static str,
    /// What the operator did or checked (the event's `action`).
    pub(super) action: &'static str,
    pub(super) note: String,
}

impl Notice {
    fn normal(reason: &'static str, action: &'static str, note: String) -> Self {
        Notice {
            type_: EventType::Normal,
            reason,
            action,
            note,
        }
    }

    fn warning(reason: &'static str, action: &'static str, note: String) -> Self {
        Notice {
            type_: EventType::Warning,
            reason,
            action,
            note,
        }
    }
}

/// The label of a pod operation, in events (`action`), logs and the actions metric.
pub(super) fn action_label(operation: Operation) -> &'static str {
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
pub(super) fn has_own_event(operation: Operation, created: Option<&str>) -> bool {
    !(operation == Operation::FinishReplacement && created.is_some())
}

/// A pod operation done. `created` is the revision of a pod just created; `waited_for` the
/// prerequisites the change waited for. Every step of a rollback is RollingBack, whichever
/// operation it is.
pub(super) fn pod_operation(
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
pub(super) fn shutdown_protection_disabled(pod: &str) -> Notice {
    Notice::normal(
        "ShutdownProtectionDisabled",
        "Bounce",
        format!(
            "pod {pod} annotated {ANNOTATION_SHUTDOWN_PROTECTION}: {SHUTDOWN_PROTECTION_DISABLED} before its deletion"
        ),
    )
}

/// The shutdown protection could not be disabled; the bounce proceeds.
pub(super) fn shutdown_protection_kept(pod: &str, error: &kube::Error) -> Notice {
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
pub(super) fn bounce_transition(node: &str, bounce: &BouncePlan) -> Vec<Notice> {
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
pub(super) fn action_failed(action: &Action, error: &super::error::Error) -> Notice {
    Notice::warning(
        "ActionFailed",
        action_label(action.operation),
        error.to_string(),
    )
}

/// A change found failed (published on the node and on the ExpressCluster).
pub(super) fn rollout_failed(failure: &Failure, rolling_back: bool) -> Notice {
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
pub(super) fn abort_request(id: &str, outcome: &AbortOutcome, rollback: bool) -> Notice {
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
pub(super) fn retry_request(id: &str) -> Notice {
    Notice::normal(
        "Retried",
        "Retry",
        format!("retry request {id}: known-invalid revisions and any abort cleared"),
    )
}

/// A pause came into force.
pub(super) fn paused(message: String) -> Notice {
    Notice::normal("Paused", "Pause", message)
}

/// The cluster's spec cannot be acted on.
pub(super) fn invalid_spec(why: String) -> Notice {
    Notice::warning("InvalidSpec", "Validate", why)
}

/// Objects of the cluster cannot be decoded by this build (a new set of them each time).
pub(super) fn undecodable(message: String) -> Notice {
    Notice::warning("UndecodableObject", "Decode", message)
}

/// A settle wait started holding a change.
pub(super) fn settling(message: String) -> Notice {
    Notice::normal("Settling", "Settle", message)
}

/// A rollout-id disagreement turned stalled.
pub(super) fn settle_stalled(message: String) -> Notice {
    Notice::warning("SettleStalled", "Settle", message)
}

/// This ring's operator let a tenant go: its ring label names another ring.
pub(super) fn released(ring: &str, to: &str) -> Notice {
    Notice::normal(
        "Released",
        "HandOver",
        format!(
            "operator ring {ring} released the tenant to ring {to} (its express.dev/operator-ring label); it no longer acts on it"
        ),
    )
}

/// This ring's operator took a tenant over; `how` says from whom.
pub(super) fn adopted(ring: &str, how: &str) -> Notice {
    Notice::normal(
        "Adopted",
        "HandOver",
        format!("operator ring {ring} adopted the tenant {how}"),
    )
}

/// Whether a status message says that nothing starts until the desired state settles.
pub(super) fn waits_to_settle(message: Option<&str>) -> bool {
    message.is_some_and(|m| m.contains(SETTLE_WAIT))
}

impl Env<'_> {
    pub(super) async fn publish_on_node(&self, index: NodeIndex, notice: Notice) {
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

    pub(super) async fn publish_on_cluster(&self, notice: Notice) {
        if let Some(cluster) = self.governing {
            publish(self.ctx, Some(cluster.object_ref(&())), notice).await;
        }
    }

    /// Publishes, on a node of a cluster without ExpressCluster, the start of a settle wait
    /// (or of its stall) that holds the node's change.
    pub(super) async fn publish_settle_wait(
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

/// What a release step decided to tell, on the OperatorRelease (action `release`).
pub(super) fn release_notice(notice: &express_planner::release::Notice) -> Notice {
    if notice.warning {
        Notice::warning(notice.reason, "release", notice.message.clone())
    } else {
        Notice::normal(notice.reason, "release", notice.message.clone())
    }
}

/// The build applied its own CRDs before a release's first move, on the OperatorRelease.
pub(super) fn crds_applied(summary: String) -> Notice {
    Notice::normal("CRDsApplied", "apply_crds", summary)
}

/// A listed version served: the pods behind the webhook all know it (DESIGN section 18).
pub(super) fn api_version_served(crd: &str, versions: &[String]) -> Notice {
    Notice::normal(
        "APIVersionServed",
        "serve_api_version",
        format!(
            "{crd} serves {} now: every pod behind the conversion webhook knows every listed version",
            versions.join(", ")
        ),
    )
}

/// The storage version moved: every ring's build knows the new one.
pub(super) fn storage_version_moved(crd: &str, from: &str, to: &str) -> Notice {
    Notice::normal(
        "StorageVersionMoved",
        "move_storage_version",
        format!(
            "{crd} stores new writes at {to} (was {from}): every ring's build knows it; the stored objects are rewritten next"
        ),
    )
}

/// Every stored object rewritten at the storage version.
pub(super) fn stored_objects_rewritten(crd: &str, to: &str, rewritten: u64) -> Notice {
    Notice::normal(
        "StoredObjectsMigrated",
        "migrate_stored_objects",
        format!("{crd}: {rewritten} stored objects rewritten at {to}"),
    )
}

/// `status.storedVersions` trimmed to the storage version.
pub(super) fn stored_versions_trimmed(crd: &str, to: &str, dropped: &[String]) -> Notice {
    Notice::normal(
        "StoredVersionsTrimmed",
        "trim_stored_versions",
        format!(
            "{crd}: nothing is stored at {} any more; storedVersions is {to} alone",
            dropped.join(", ")
        ),
    )
}

/// The installed CRDs lack fields this build writes (the API server drops them), on the
/// ring's Lease; and when they no longer do.
pub(super) fn api_behind(behind: Option<&str>) -> Notice {
    match behind {
        Some(fields) => Notice::warning(
            "APIBehind",
            "check_crds",
            format!(
                "the installed CRDs lack fields this build writes, which the API server drops: {fields}; a release to this ring applies them"
            ),
        ),
        None => Notice::normal(
            "APICaughtUp",
            "check_crds",
            "the installed CRDs declare every field this build writes".into(),
        ),
    }
}

/// A release moved a tenant (forward to the build under test, or back), on its ExpressCluster.
pub(super) fn tenant_moved(release: &str, ring: &str, back: bool) -> Notice {
    // A reason of its own each way: kube's Recorder counts a repeat of one reason on one object
    // as a series of the first note, which would hide the return behind the move.
    if back {
        Notice::normal(
            "ReturnedByRelease",
            "return_ring",
            format!(
                "OperatorRelease {release} rolled back: moved back to ring {ring}, whose operator adopts it"
            ),
        )
    } else {
        Notice::normal(
            "MovedByRelease",
            "move_ring",
            format!("OperatorRelease {release} moved it to ring {ring}, whose operator adopts it"),
        )
    }
}

pub(super) async fn publish(
    ctx: &Context,
    reference: Option<k8s_openapi::api::core::v1::ObjectReference>,
    notice: Notice,
) {
    let Some(reference) = reference else { return };
    let occurrence = Occurrence {
        warning: notice.type_ == EventType::Warning,
        reason: notice.reason,
        action: notice.action,
        note: &notice.note,
    };
    if let Err(err) = ctx.recorders.publish(&occurrence, &reference).await {
        warn!(error = %err, reason = notice.reason, "cannot publish event");
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
