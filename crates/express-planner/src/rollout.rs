//! Rollout safety (DESIGN sections 4 and 5), pure. From a snapshot and `now`:
//! - which abort and retry requests are new (each request id is acted on once);
//! - which changes in progress have failed: the pod on the new revision crash-loops, ended, or
//!   is not Ready within `progressDeadlineSeconds` of its creation;
//! - whether the cluster is *halted*: a node's desired revision is known to fail on it, or an
//!   abort holds the current desired revisions. Halted, no node moves toward a desired revision;
//! - when halted with rollback, which nodes return to which revision, in reverse order of the
//!   changes that moved them.
//!
//! A *rollout* is identified by the set of desired revisions of the cluster's up nodes
//! ([`rollout_id`]); every change record carries the id current when it started. The changes
//! of the current rollout are the run of records, newest first, that carry the current id.

use std::collections::BTreeSet;
use std::fmt;

use express_api::{ChangeKind, ChangeState, Work};

use crate::snapshot::{Abort, Change, ClusterSnapshot, NodeIndex, NodeObservation};
use crate::state::{NodeState, classify};
use crate::text::digest;

/// Restarts of the pod on a new revision, during its change, that count as a crash loop.
pub const CRASH_LOOP_RESTARTS: i32 = 3;

/// A change in progress found to have failed in this plan (not yet recorded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub node: NodeIndex,
    pub name: String,
    pub revision: String,
    pub reason: String,
}

/// Why the cluster's rollout is halted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HaltCause {
    /// A node's desired revision is known to fail on it.
    Failed {
        node: String,
        revision: String,
        reason: String,
    },
    Aborted {
        request_id: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Halt {
    pub cause: HaltCause,
    /// Nodes changed by this rollout return to their previous revision.
    pub rollback: bool,
}

impl fmt::Display for Halt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cause {
            HaltCause::Failed {
                node,
                revision,
                reason,
            } => write!(f, "rollout failed: {node} on revision {revision}: {reason}"),
            HaltCause::Aborted { request_id } => {
                write!(f, "rollout aborted (request {request_id})")
            }
        }
    }
}

/// What became of a new abort request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AbortOutcome {
    /// A rollout was in progress: its desired revisions are now held.
    Recorded,
    /// Every node was already on its desired revision: nothing to stop.
    NothingToAbort,
}

/// The rollout-safety verdict for one cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assessment {
    /// The id of the current rollout.
    pub rollout_id: String,
    /// A new retry request, acted on in this plan: known-invalid revisions and the abort are
    /// cleared.
    pub retry: Option<String>,
    /// A new abort request and what became of it.
    pub abort_request: Option<(String, AbortOutcome)>,
    /// The abort in force after this plan (to be kept in status).
    pub abort: Option<Abort>,
    /// Changes found failed now.
    pub failures: Vec<Failure>,
    pub halt: Option<Halt>,
    /// When the earliest pending progress deadline passes (milliseconds since the Unix
    /// epoch): nothing may change in the cluster by then, so the caller must look again.
    pub deadline_at_ms: Option<i64>,
}

impl Assessment {
    /// The failure found on a node in this plan, if any.
    pub fn failure_of(&self, node: NodeIndex) -> Option<&Failure> {
        self.failures.iter().find(|f| f.node == node)
    }

    /// The revisions known to fail on a node, as they stand after this plan.
    pub fn invalid_revisions<'a>(
        &'a self,
        node: NodeIndex,
        observation: &'a NodeObservation,
    ) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        let recorded = observation
            .invalid_revisions
            .iter()
            .filter(|_| self.retry.is_none())
            .map(|r| (r.revision.as_str(), r.reason.as_str()));
        let new = self
            .failures
            .iter()
            .filter(move |f| f.node == node)
            .map(|f| (f.revision.as_str(), f.reason.as_str()));
        recorded.chain(new)
    }
}

/// A short digest of the set of desired revisions of the cluster's up nodes: stable while the
/// specs are, whatever nodes are added or removed with revisions already in the set.
pub fn rollout_id(snapshot: &ClusterSnapshot) -> String {
    let revisions: BTreeSet<&str> = snapshot
        .nodes
        .iter()
        .filter(|n| n.up)
        .filter_map(|n| n.desired.as_ref().ok())
        .map(|d| d.revision.as_str())
        .collect();
    digest(revisions)
}

/// Decides requests, failures and the halt.
pub fn assess(snapshot: &ClusterSnapshot, now_ms: i64) -> Assessment {
    let control = &snapshot.control;
    let retry = control
        .retry_request
        .clone()
        .filter(|id| !id.is_empty() && control.handled_retry.as_ref() != Some(id));
    let mut assessment = Assessment {
        rollout_id: rollout_id(snapshot),
        retry,
        ..Assessment::default()
    };
    assessment.abort = control
        .abort
        .clone()
        .filter(|_| assessment.retry.is_none())
        .filter(|abort| still_holds(snapshot, abort));
    let (failures, deadline_at_ms) = detect_failures(snapshot, &assessment, now_ms);
    assessment.failures = failures;
    assessment.deadline_at_ms = deadline_at_ms;
    let failed = failed_halt(snapshot, &assessment);

    if let Some(request) = control
        .abort_request
        .as_ref()
        .filter(|r| !r.id.is_empty() && control.handled_abort.as_ref() != Some(&r.id))
    {
        let outcome = if failed.is_some() || rollout_in_progress(snapshot) {
            assessment.abort = Some(Abort {
                request_id: request.id.clone(),
                rollback: request.rollback,
                revisions: snapshot
                    .nodes
                    .iter()
                    .filter_map(|n| {
                        Some((n.name.clone(), n.desired.as_ref().ok()?.revision.clone()))
                    })
                    .collect(),
            });
            AbortOutcome::Recorded
        } else {
            AbortOutcome::NothingToAbort
        };
        assessment.abort_request = Some((request.id.clone(), outcome));
    }

    let abort_rollback = assessment.abort.as_ref().is_some_and(|a| a.rollback);
    assessment.halt = match (failed, &assessment.abort) {
        (Some((cause, can_roll_back)), _) => Some(Halt {
            cause,
            rollback: can_roll_back && (snapshot.settings.auto_rollback || abort_rollback),
        }),
        (None, Some(abort)) => Some(Halt {
            cause: HaltCause::Aborted {
                request_id: abort.request_id.clone(),
            },
            rollback: abort.rollback,
        }),
        (None, None) => None,
    };
    assessment
}

/// An abort holds until one of the nodes it recorded has another desired revision.
fn still_holds(snapshot: &ClusterSnapshot, abort: &Abort) -> bool {
    snapshot.nodes.iter().all(|node| {
        match (abort.revisions.get(&node.name), node.desired.as_ref()) {
            (Some(held), Ok(desired)) => *held == desired.revision,
            _ => true,
        }
    })
}

/// Some node is on its way to its desired revision (or away from a pod it should not have).
fn rollout_in_progress(snapshot: &ClusterSnapshot) -> bool {
    snapshot.nodes.iter().any(|node| match classify(node) {
        // A bounce restarts the pod on the revision it ran: the rollout is in progress only if
        // that is not the desired one.
        _ if crate::bounce::in_progress(node).is_some_and(|b| b.phase.holds_pod()) => {
            let desired = node.desired.as_ref().ok().map(|d| d.revision.as_str());
            node.bounce.as_ref().and_then(|b| b.revision.as_deref()) != desired
        }
        NodeState::NeedsProvision
        | NodeState::NeedsRecreate
        | NodeState::NeedsUpgrade
        | NodeState::Replacing
        | NodeState::Terminating
        | NodeState::NeedsRemoval
        | NodeState::Removing => true,
        NodeState::Starting => node.change.as_ref().is_some_and(Change::in_progress),
        _ => false,
    })
}

/// Changes found failed, and the earliest deadline still pending.
fn detect_failures(
    snapshot: &ClusterSnapshot,
    assessment: &Assessment,
    now_ms: i64,
) -> (Vec<Failure>, Option<i64>) {
    let deadline_ms = i64::from(snapshot.settings.progress_deadline_seconds) * 1000;
    let mut failures = Vec::new();
    let mut next_deadline: Option<i64> = None;
    for (index, node) in snapshot.nodes.iter().enumerate() {
        let (true, Ok(desired), Some(change), Some(pod)) =
            (node.up, &node.desired, &node.change, &node.pod)
        else {
            continue;
        };
        // A recovery brings back a revision the node ran: its pod failing now says nothing
        // about the revision, so it neither fails the rollout nor refuses the revision (the
        // cluster shows the node down, and triage counts it as a symptom).
        // Except while the rollout that upgraded the node is still under way elsewhere: a new
        // revision Ready for a moment and lost right after must still fail that rollout (and
        // be rolled back), not hold a slot for ever as a recovery.
        let judged = change.work() == Work::Delivery
            || (change.kind == ChangeKind::Upgrade
                && change.rollout == assessment.rollout_id
                && others_delivering(snapshot, index));
        let changing_to_desired = change.in_progress()
            && change.kind != ChangeKind::Rollback
            && judged
            && change.to == desired.revision;
        let new_pod = pod.owned
            && !pod.terminating
            && pod.revision.as_deref() == Some(desired.revision.as_str())
            && !pod.is_ready();
        let known = assessment
            .invalid_revisions(NodeIndex(index), node)
            .any(|(revision, _)| revision == desired.revision);
        if !changing_to_desired || !new_pod || known {
            continue;
        }
        let reason = if pod.restarts >= CRASH_LOOP_RESTARTS {
            format!(
                "crash-looping: {} restarts (threshold {CRASH_LOOP_RESTARTS})",
                pod.restarts
            )
        } else if pod.has_ended() {
            "its pod ended before becoming Ready".to_owned()
        } else if pod
            .created_at_ms
            .is_some_and(|created| now_ms.saturating_sub(created) > deadline_ms)
        {
            format!(
                "not Ready within progressDeadlineSeconds ({} s)",
                snapshot.settings.progress_deadline_seconds
            )
        } else {
            if let Some(created) = pod.created_at_ms {
                let at = created.saturating_add(deadline_ms).saturating_add(1);
                next_deadline = Some(next_deadline.map_or(at, |n| n.min(at)));
            }
            continue;
        };
        failures.push(Failure {
            node: NodeIndex(index),
            name: node.name.clone(),
            revision: desired.revision.clone(),
            reason,
        });
    }
    (failures, next_deadline)
}

/// Some node other than `index` still needs, or is under, a delivery.
fn others_delivering(snapshot: &ClusterSnapshot, index: usize) -> bool {
    snapshot
        .nodes
        .iter()
        .enumerate()
        .any(|(j, node)| j != index && node_work(node, &classify(node)) == Some(Work::Delivery))
}

/// The failed node that halts the rollout (the most recently changed one when several have),
/// and whether its failure allows a rollback (a failed provisioning has nothing to return to).
fn failed_halt(snapshot: &ClusterSnapshot, assessment: &Assessment) -> Option<(HaltCause, bool)> {
    snapshot
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, node)| node.up)
        .filter_map(|(index, node)| {
            let desired = node.desired.as_ref().ok()?;
            let (_, reason) = assessment
                .invalid_revisions(NodeIndex(index), node)
                .find(|(revision, _)| *revision == desired.revision)?;
            let sequence = node.change.as_ref().map_or(0, |c| c.sequence);
            let can_roll_back = node
                .change
                .as_ref()
                .is_some_and(|c| c.kind != ChangeKind::Provision);
            Some((
                sequence,
                HaltCause::Failed {
                    node: node.name.clone(),
                    revision: desired.revision.clone(),
                    reason: reason.to_owned(),
                },
                can_roll_back,
            ))
        })
        .max_by_key(|(sequence, _, _)| *sequence)
        .map(|(_, cause, can_roll_back)| (cause, can_roll_back))
}

/// The nodes the current rollout moved to their desired revision, newest change first, with
/// the revision each returns to.
pub fn rollback_candidates(snapshot: &ClusterSnapshot, rollout_id: &str) -> Vec<(usize, String)> {
    let mut records: Vec<(usize, &Change)> = snapshot
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| Some((i, n.change.as_ref()?)))
        .collect();
    records.sort_by_key(|(_, change)| std::cmp::Reverse(change.sequence));
    records
        .into_iter()
        .take_while(|(_, change)| change.rollout == rollout_id)
        .filter_map(|(index, change)| {
            let node = &snapshot.nodes[index];
            let desired = node.desired.as_ref().ok()?;
            let from = change.from.clone()?;
            (node.up
                && change.kind == ChangeKind::Upgrade
                && change.to == desired.revision
                && from != desired.revision)
                .then_some((index, from))
        })
        .collect()
}

/// Whether a rollback change recorded on a node is still under way (its pod is not Ready on
/// the revision it returns to).
pub fn rollback_in_flight(node: &NodeObservation) -> bool {
    let Some(change) = &node.change else {
        return false;
    };
    if change.kind != ChangeKind::Rollback || change.state != ChangeState::InProgress {
        return false;
    }
    !node.pod.as_ref().is_some_and(|p| {
        !p.terminating && p.revision.as_deref() == Some(change.to.as_str()) && p.is_ready()
    })
}

/// What moves a node, if anything does (`express_api::delivery`): a delivery (a provision, an
/// upgrade, a removal or a rollback: the node goes to a revision or a state it did not have), a
/// recovery (the node lost its pod and gets it back on the revision it ran) or a bounce. `state`
/// is the node's state in the plan (a bounce is known only there).
pub fn node_work(node: &NodeObservation, state: &NodeState) -> Option<Work> {
    let desired = node.desired.as_ref().ok().map(|d| d.revision.as_str());
    let change = node.change.as_ref();
    let ran_desired = || desired.is_some_and(|d| change.is_some_and(|c| c.ran(d)));
    let changing = change.filter(|c| c.in_progress()).map(Change::work);
    match state {
        NodeState::Bouncing => Some(Work::Bounce),
        NodeState::NeedsProvision | NodeState::NeedsRecreate if ran_desired() => {
            Some(Work::Recovery)
        }
        NodeState::NeedsProvision
        | NodeState::NeedsRecreate
        | NodeState::NeedsUpgrade
        | NodeState::NeedsRemoval
        | NodeState::Removing => Some(Work::Delivery),
        // Recorded, its pod not created yet: what the record says.
        NodeState::Replacing => Some(changing.unwrap_or(Work::Delivery)),
        // A pod on its desired revision going away that no change deletes (an eviction, a
        // person): it comes back on the revision the node runs. On another revision, its
        // replacement is a delivery.
        NodeState::Terminating => Some(changing.unwrap_or_else(|| {
            let pod_revision = node.pod.as_ref().and_then(|p| p.revision.as_deref());
            if pod_revision.is_some() && pod_revision == desired {
                Work::Recovery
            } else {
                Work::Delivery
            }
        })),
        // Not Ready on its desired revision with no change under way: a node that ran it went
        // unready on its own (nothing moves it); one that never ran it is being provisioned.
        NodeState::Starting => changing.or_else(|| (!ran_desired()).then_some(Work::Delivery)),
        NodeState::UpToDate
        | NodeState::Down
        | NodeState::InvalidSpec(_)
        | NodeState::PodNotOwned => None,
    }
}
