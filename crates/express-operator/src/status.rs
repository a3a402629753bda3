//! The report step, pure: node and ExpressCluster status from the snapshot and the plan
//! (DESIGN section 7). Conditions keep their lastTransitionTime unless their status changes;
//! [`same_ignoring_time`] tells whether a write is needed at all.

use express_api::conditions::{self, reason};
use express_api::{
    AbortRecord, ChangeState, ClusterPhase, ExpressClusterStatus, HandledRequests, InvalidRevision,
    NodeChange, NodeCounts, NodePhase, NodeStatus, ObservedDesired, RolloutState, RolloutStatus,
    WaitingFor,
};
use express_planner::UnmetReason;
use express_planner::plan::Deferred;
use express_planner::rollout::HaltCause;
use express_planner::settle::{Mark, SettleState};
use express_planner::{Blocked, ClusterSnapshot, NodeObservation, NodePlan, NodeState, Plan};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};

/// A condition, reusing the previous lastTransitionTime when the status did not change.
pub fn condition(
    previous: &[Condition],
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let status = if status { "True" } else { "False" }.to_owned();
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
    Condition {
        type_: type_.into(),
        status,
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time,
    }
}

/// What a node waits for, in words that change only when the requirements do.
fn waiting_message(plan: &NodePlan) -> String {
    plan.waiting_for
        .iter()
        .map(|w| match w.reason {
            // There is no node to name: the reason says it all.
            UnmetReason::NoBackend { .. } => w.stable_reason(),
            _ => format!("{} ({})", w.node, w.stable_reason()),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A settle mark as written to status. Marks carry the instant they were first seen, so a
/// mark kept from the previous status keeps its instant.
fn observed_desired(mark: &Mark) -> ObservedDesired {
    ObservedDesired {
        revision: mark.revision.clone(),
        up: mark.up,
        rollout_id: mark.rollout_id.clone(),
        ordering: mark.ordering.clone(),
        since: k8s_openapi::jiff::Timestamp::from_millisecond(mark.since_ms)
            .ok()
            .map(MicroTime),
    }
}

/// Revisions kept in `invalidRevisions` per node (the newest).
const INVALID_REVISIONS_KEPT: usize = 10;

/// The node's change record after this plan: a change about to start, a failure found, or a
/// change whose pod became Ready; otherwise what was recorded.
fn next_change(
    node: &NodeObservation,
    index: usize,
    cluster: &Plan,
    previous: Option<&NodeChange>,
    now: &Time,
) -> Option<NodeChange> {
    if let Some(record) = cluster
        .actions
        .iter()
        .find(|a| a.node == index)
        .and_then(|a| a.record.as_ref())
    {
        return Some(NodeChange {
            kind: record.kind,
            state: ChangeState::InProgress,
            from_revision: record.from.clone(),
            to_revision: record.to.clone(),
            sequence: record.sequence,
            rollout: record.rollout.clone(),
            reason: None,
            started_at: Some(now.clone()),
            finished_at: None,
        });
    }
    let mut change = previous?.clone();
    if change.state != ChangeState::InProgress {
        return Some(change);
    }
    if let Some(failure) = cluster.rollout.failures.iter().find(|f| f.node == index) {
        change.state = ChangeState::Failed;
        change.reason = Some(failure.reason.clone());
        change.finished_at = Some(now.clone());
    } else if node.pod.as_ref().is_some_and(|p| {
        p.owned
            && !p.terminating
            && p.is_ready()
            && p.revision.as_deref() == Some(change.to_revision.as_str())
    }) {
        change.state = ChangeState::Succeeded;
        change.finished_at = Some(now.clone());
    }
    Some(change)
}

fn next_invalid_revisions(
    index: usize,
    cluster: &Plan,
    previous: Option<&NodeStatus>,
    now: &Time,
) -> Vec<InvalidRevision> {
    let mut list: Vec<InvalidRevision> = match (&cluster.rollout.retry, previous) {
        (None, Some(previous)) => previous.invalid_revisions.clone(),
        _ => Vec::new(),
    };
    for failure in cluster.rollout.failures.iter().filter(|f| f.node == index) {
        list.retain(|r| r.revision != failure.revision);
        list.push(InvalidRevision {
            revision: failure.revision.clone(),
            reason: failure.reason.clone(),
            at: Some(now.clone()),
        });
    }
    let excess = list.len().saturating_sub(INVALID_REVISIONS_KEPT);
    list.drain(..excess);
    list
}

/// The status of one node (`index` into the snapshot's nodes).
pub fn node_status(
    node: &NodeObservation,
    index: usize,
    plan: &NodePlan,
    cluster: &Plan,
    previous: Option<&NodeStatus>,
    generation: Option<i64>,
    now: &Time,
) -> NodeStatus {
    let previous_conditions = previous.map(|p| p.conditions.as_slice()).unwrap_or(&[]);
    let pod = node.pod.as_ref();
    let desired = node.desired.as_ref().ok();
    let ready = pod.is_some_and(|p| p.owned && !p.terminating && p.is_ready());
    let up_to_date = match (pod, desired) {
        (Some(p), Some(d)) => p.owned && p.revision.as_deref() == Some(d.revision.as_str()),
        _ => false,
    };
    let paused = matches!(cluster.blocked, Some(Blocked::Paused(_)));
    let halt = cluster.rollout.halt.as_ref();
    let invalid_here = desired.and_then(|d| {
        cluster
            .rollout
            .invalid_revisions(index, node)
            .find(|(revision, _)| *revision == d.revision)
            .map(|(revision, reason)| (revision.to_owned(), reason.to_owned()))
    });
    let action = cluster.actions.iter().find(|a| a.node == index);
    let (phase, message) = match &plan.state {
        _ if action.is_some_and(|a| a.from_history) => (
            NodePhase::Upgrading,
            format!(
                "rolling back to revision {}",
                action.and_then(|a| a.revision.as_deref()).unwrap_or("?")
            ),
        ),
        _ if invalid_here.is_some() && node.up => {
            let (revision, reason) = invalid_here.clone().unwrap_or_default();
            (
                NodePhase::Failed,
                format!(
                    "revision {revision} failed on this node ({reason}); it is refused until the spec changes or a retry is requested"
                ),
            )
        }
        _ if matches!(plan.deferred, Some(Deferred::NoHistory { .. })) => {
            let revision = match &plan.deferred {
                Some(Deferred::NoHistory { revision }) => revision.as_str(),
                _ => "",
            };
            (
                NodePhase::Failed,
                format!(
                    "cannot return to revision {revision}: no ControllerRevision keeps its spec"
                ),
            )
        }
        NodeState::InvalidSpec(why) => (NodePhase::Failed, format!("invalid spec: {why}")),
        NodeState::PodNotOwned => (
            NodePhase::Failed,
            format!(
                "pod {} exists but is not controlled by this node; it is left alone",
                node.name
            ),
        ),
        NodeState::Down => (NodePhase::Down, "intentionally down (up: false)".into()),
        NodeState::NeedsRemoval if plan.deferred == Some(Deferred::Settling) => (
            NodePhase::Down,
            format!(
                "intentionally down; its pod is removed once the desired state settles ({})",
                cluster.settle.state
            ),
        ),
        NodeState::NeedsRemoval | NodeState::Removing => (
            NodePhase::Down,
            "intentionally down; removing its pod".into(),
        ),
        NodeState::UpToDate => (NodePhase::Ready, "running its desired revision".into()),
        NodeState::Starting => {
            let was = previous.and_then(|p| p.phase);
            match was {
                Some(NodePhase::Upgrading) => (NodePhase::Upgrading, "new pod starting".into()),
                Some(NodePhase::Provisioning | NodePhase::Waiting) | None => {
                    (NodePhase::Provisioning, "pod starting".into())
                }
                _ => (NodePhase::NotReady, "pod is not Ready".into()),
            }
        }
        NodeState::Terminating | NodeState::Replacing => {
            (NodePhase::Upgrading, "replacing its pod".into())
        }
        NodeState::NeedsProvision | NodeState::NeedsRecreate | NodeState::NeedsUpgrade => {
            let upgrading = plan.state == NodeState::NeedsUpgrade;
            if paused {
                (
                    NodePhase::Paused,
                    "paused: nothing is changed until resumed".into(),
                )
            } else if !plan.waiting_for.is_empty() {
                (
                    NodePhase::Waiting,
                    format!("waiting for {}", waiting_message(plan)),
                )
            } else if let Some(Deferred::NoFreeSlot {
                in_flight,
                max_concurrent,
            }) = &plan.deferred
            {
                (
                    NodePhase::Waiting,
                    format!(
                        "waiting for a free slot: {in_flight} of maxConcurrent {max_concurrent} nodes changing"
                    ),
                )
            } else if let (Some(Deferred::Settling), Some(why)) =
                (&plan.deferred, cluster.settle.node_message())
            {
                (NodePhase::Waiting, why)
            } else if matches!(plan.deferred, Some(Deferred::Blocked)) {
                (
                    NodePhase::Waiting,
                    "the cluster spec is invalid; nothing is changed".into(),
                )
            } else if let Some(halt) = halt.filter(|_| plan.deferred == Some(Deferred::Halted)) {
                (NodePhase::Waiting, format!("held: {halt}"))
            } else if plan.deferred == Some(Deferred::RollbackTurn) {
                (
                    NodePhase::Waiting,
                    "rolling back: waiting for the nodes changed after it to be rolled back".into(),
                )
            } else if upgrading {
                (NodePhase::Upgrading, "replacing its pod".into())
            } else {
                (NodePhase::Provisioning, "creating its pod".into())
            }
        }
    };
    let prerequisites_met = plan.waiting_for.is_empty();
    NodeStatus {
        observed_generation: generation,
        phase: Some(phase),
        desired_revision: desired.map(|d| d.revision.clone()),
        running_revision: pod.and_then(|p| p.revision.clone()),
        running_version: pod.and_then(|p| p.version.clone()),
        pod_name: pod.map(|_| node.name.clone()),
        ready: Some(ready),
        restarts: pod.map(|p| p.restarts),
        waiting_for: plan
            .waiting_for
            .iter()
            .map(|w| WaitingFor {
                node: w.node.clone(),
                kind: w.kind,
                reason: w.stable_reason(),
            })
            .collect(),
        message: Some(message),
        conditions: vec![
            condition(
                previous_conditions,
                conditions::READY,
                ready,
                if ready {
                    reason::POD_READY
                } else {
                    reason::POD_NOT_READY
                },
                if ready {
                    "pod is Ready".into()
                } else {
                    "pod is missing or not Ready".into()
                },
                generation,
                now,
            ),
            condition(
                previous_conditions,
                conditions::UP_TO_DATE,
                up_to_date,
                if up_to_date {
                    reason::DESIRED_REVISION
                } else {
                    reason::OLD_REVISION
                },
                match desired {
                    Some(d) => format!("desired revision {}", d.revision),
                    None => "no desired revision (invalid spec)".into(),
                },
                generation,
                now,
            ),
            condition(
                previous_conditions,
                conditions::PREREQUISITES_MET,
                prerequisites_met,
                if prerequisites_met {
                    reason::MET
                } else {
                    reason::WAITING
                },
                if prerequisites_met {
                    "no unmet prerequisite".into()
                } else {
                    waiting_message(plan)
                },
                generation,
                now,
            ),
        ],
        change: next_change(
            node,
            index,
            cluster,
            previous.and_then(|p| p.change.as_ref()),
            now,
        ),
        invalid_revisions: next_invalid_revisions(index, cluster, previous, now),
        bounce: previous.and_then(|p| p.bounce.clone()),
        observed_desired: cluster.settle.marks.get(index).map(observed_desired),
    }
}

/// The status of the ExpressCluster governing a snapshot.
pub fn cluster_status(
    snapshot: &ClusterSnapshot,
    plan: &Plan,
    previous: Option<&ExpressClusterStatus>,
    generation: Option<i64>,
    now: &Time,
) -> ExpressClusterStatus {
    let previous_conditions = previous.map(|p| p.conditions.as_slice()).unwrap_or(&[]);
    let up: Vec<usize> = (0..snapshot.nodes.len())
        .filter(|&i| snapshot.nodes[i].up)
        .collect();
    let counts = NodeCounts {
        total: snapshot.nodes.len() as u32,
        ready: plan
            .nodes
            .iter()
            .zip(&snapshot.nodes)
            .filter(|(_, n)| {
                n.pod
                    .as_ref()
                    .is_some_and(|p| p.owned && !p.terminating && p.is_ready())
            })
            .count() as u32,
        up_to_date: plan
            .nodes
            .iter()
            .filter(|p| p.state == NodeState::UpToDate)
            .count() as u32,
        down: (snapshot.nodes.len() - up.len()) as u32,
    };
    let changing = plan.in_flight > 0 || !plan.actions.is_empty();
    let pending = plan.nodes.iter().any(|p| {
        p.state.phase().is_some()
            || matches!(p.state, NodeState::NeedsRemoval | NodeState::Replacing)
    });
    let invalid = match &plan.blocked {
        Some(Blocked::InvalidSpec(why)) => Some(why.clone()),
        _ => None,
    };
    let node_failed = plan
        .nodes
        .iter()
        .any(|p| matches!(p.state, NodeState::InvalidSpec(_) | NodeState::PodNotOwned));
    let rolling_back = plan.actions.iter().any(|a| a.from_history)
        || snapshot
            .nodes
            .iter()
            .any(express_planner::rollout::rollback_in_flight);
    let (phase, message) = match (&plan.blocked, changing || pending) {
        (Some(Blocked::Paused(pause)), _) => (ClusterPhase::Paused, pause.to_string()),
        (Some(Blocked::InvalidSpec(why)), _) => {
            (ClusterPhase::Failed, format!("invalid spec: {why}"))
        }
        (None, _) if plan.rollout.halt.is_some() => {
            let halt = plan
                .rollout
                .halt
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default();
            let tail = if rolling_back {
                "; rolling back the nodes it changed, newest first"
            } else {
                "; held until the spec changes or a retry is requested"
            };
            let phase = match plan.rollout.halt.as_ref().map(|h| &h.cause) {
                Some(HaltCause::Failed { .. }) => ClusterPhase::Failed,
                _ => ClusterPhase::Degraded,
            };
            (phase, format!("{halt}{tail}"))
        }
        (None, true) => (
            ClusterPhase::Progressing,
            match plan
                .settle
                .message()
                .filter(|_| plan.in_flight == 0 && plan.actions.is_empty())
            {
                // Nothing moves until the desired state settles: say so, not only counts.
                Some(why) => format!(
                    "{} of {} up nodes on their desired revision; {why}",
                    counts.up_to_date,
                    up.len()
                ),
                None => format!(
                    "{} of {} up nodes on their desired revision",
                    counts.up_to_date,
                    up.len()
                ),
            },
        ),
        (None, false) if node_failed || counts.ready < up.len() as u32 => (
            ClusterPhase::Degraded,
            format!("{} of {} up nodes Ready", counts.ready, up.len()),
        ),
        (None, false) => (
            ClusterPhase::Healthy,
            format!("all {} up nodes Ready on their desired revision", up.len()),
        ),
    };
    let halt = plan
        .rollout
        .halt
        .as_ref()
        .filter(|_| plan.blocked.is_none() || matches!(plan.blocked, Some(Blocked::Paused(_))));
    let state = match (phase, halt.map(|h| &h.cause)) {
        (ClusterPhase::Paused, _) => RolloutState::Paused,
        (_, Some(_)) if rolling_back => RolloutState::RollingBack,
        (_, Some(HaltCause::Failed { .. })) => RolloutState::Failed,
        (_, Some(HaltCause::Aborted { .. })) => RolloutState::Aborted,
        (ClusterPhase::Failed, None) => RolloutState::Blocked,
        (ClusterPhase::Progressing, None) => RolloutState::Progressing,
        _ => RolloutState::Complete,
    };
    let failed_node = match halt.map(|h| &h.cause) {
        Some(HaltCause::Failed { node, .. }) => Some(node.clone()),
        _ => None,
    };
    let previous_rollout = previous.and_then(|p| p.rollout.as_ref());
    let was_progressing = previous_rollout.and_then(|r| r.state) == Some(RolloutState::Progressing);
    let was_active = previous_rollout
        .and_then(|r| r.state)
        .is_some_and(RolloutState::is_active);
    let names = |filter: &dyn Fn(&NodePlan) -> bool| -> Vec<String> {
        plan.upgrade_order
            .iter()
            .filter(|name| {
                snapshot
                    .nodes
                    .iter()
                    .position(|n| &n.name == *name)
                    .is_some_and(|i| filter(&plan.nodes[i]))
            })
            .cloned()
            .collect()
    };
    let rollout = RolloutStatus {
        state: Some(state),
        order: plan.upgrade_order.clone(),
        current: names(&|p| p.state.in_flight() || p.action.is_some()),
        completed: names(&|p| p.state == NodeState::UpToDate),
        failed_node,
        started_at: match (state, was_progressing) {
            (RolloutState::Progressing, false) => Some(now.clone()),
            _ => previous_rollout.and_then(|r| r.started_at.clone()),
        },
        finished_at: match state {
            RolloutState::Progressing | RolloutState::RollingBack => None,
            RolloutState::Paused => previous_rollout.and_then(|r| r.finished_at.clone()),
            _ if was_active => Some(now.clone()),
            _ => previous_rollout.and_then(|r| r.finished_at.clone()),
        },
    };
    let abort = plan.rollout.abort.as_ref().map(|abort| AbortRecord {
        request_id: abort.request_id.clone(),
        rollback: abort.rollback,
        revisions: abort.revisions.clone(),
        at: previous
            .and_then(|p| p.abort.as_ref())
            .filter(|a| a.request_id == abort.request_id)
            .and_then(|a| a.at.clone())
            .or_else(|| Some(now.clone())),
    });
    let handled = previous
        .and_then(|p| p.requests.clone())
        .unwrap_or_default();
    let requests = HandledRequests {
        abort: plan
            .rollout
            .abort_request
            .as_ref()
            .map(|(id, _)| id.clone())
            .or(handled.abort),
        retry: plan.rollout.retry.clone().or(handled.retry),
    };
    let requests = (requests != HandledRequests::default()).then_some(requests);
    let halted_reason = match halt.map(|h| &h.cause) {
        Some(HaltCause::Failed { .. }) => reason::ROLLOUT_FAILED,
        Some(HaltCause::Aborted { .. }) => reason::ABORTED,
        None => reason::NOT_HALTED,
    };
    let paused = matches!(plan.blocked, Some(Blocked::Paused(_)));
    let all_ready = counts.ready == up.len() as u32;
    let settled = plan.settle.is_settled();
    let settle_reason = settle_reason(&plan.settle.state);
    ExpressClusterStatus {
        observed_generation: generation,
        phase: Some(phase),
        nodes: Some(counts),
        rollout: Some(rollout),
        abort,
        requests,
        message: Some(message.clone()),
        conditions: vec![
            condition(
                previous_conditions,
                conditions::HALTED,
                halt.is_some(),
                halted_reason,
                halt.map_or_else(|| "rollout not halted".into(), ToString::to_string),
                generation,
                now,
            ),
            condition(
                previous_conditions,
                conditions::READY,
                all_ready,
                if all_ready {
                    reason::ALL_NODES_READY
                } else {
                    reason::NODES_NOT_READY
                },
                message.clone(),
                generation,
                now,
            ),
            condition(
                previous_conditions,
                conditions::PROGRESSING,
                changing || pending,
                if changing || pending {
                    reason::ROLLOUT_IN_PROGRESS
                } else {
                    reason::ROLLOUT_COMPLETE
                },
                message.clone(),
                generation,
                now,
            ),
            condition(
                previous_conditions,
                conditions::PAUSED,
                paused,
                if paused {
                    reason::PAUSED
                } else {
                    reason::NOT_PAUSED
                },
                if paused {
                    message.clone()
                } else {
                    "not paused".into()
                },
                generation,
                now,
            ),
            condition(
                previous_conditions,
                conditions::INVALID_SPEC,
                invalid.is_some(),
                if invalid.is_some() {
                    reason::INVALID_SPEC
                } else {
                    reason::VALID
                },
                invalid.unwrap_or_else(|| "spec is valid".into()),
                generation,
                now,
            ),
            condition(
                previous_conditions,
                conditions::DESIRED_STATE_SETTLED,
                settled,
                settle_reason,
                plan.settle
                    .message()
                    .unwrap_or_else(|| "desired state settled".into()),
                generation,
                now,
            ),
        ],
        observed_desired: plan.settle.cluster_mark.as_ref().map(observed_desired),
    }
}

/// The reason of the `DesiredStateSettled` condition.
pub fn settle_reason(state: &SettleState) -> &'static str {
    match state {
        SettleState::Settled => reason::SETTLED,
        SettleState::Window { .. } => reason::SETTLE_WINDOW,
        SettleState::Disagree { stalled: false, .. } => reason::ROLLOUT_ID_MISMATCH,
        SettleState::Disagree { stalled: true, .. } => reason::STALLED,
    }
}

/// Whether two statuses differ only in timestamps (then no write is needed).
pub fn same_ignoring_time<T: serde::Serialize>(a: &T, b: &T) -> bool {
    fn strip(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                for key in ["lastTransitionTime", "startedAt", "finishedAt"] {
                    map.remove(key);
                }
                map.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let (Ok(mut a), Ok(mut b)) = (serde_json::to_value(a), serde_json::to_value(b)) else {
        return false;
    };
    strip(&mut a);
    strip(&mut b);
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("time"))
    }

    #[test]
    fn transition_time_moves_only_on_a_transition() {
        let first = condition(
            &[],
            "Ready",
            true,
            "PodReady",
            "ok".into(),
            Some(1),
            &time(100),
        );
        let same = condition(
            std::slice::from_ref(&first),
            "Ready",
            true,
            "PodReady",
            "still ok".into(),
            Some(2),
            &time(200),
        );
        assert_eq!(same.last_transition_time, time(100));
        let flipped = condition(
            std::slice::from_ref(&same),
            "Ready",
            false,
            "PodNotReady",
            "down".into(),
            Some(2),
            &time(300),
        );
        assert_eq!(flipped.last_transition_time, time(300));
    }

    #[test]
    fn comparison_ignores_timestamps_only() {
        let a = condition(&[], "Ready", true, "R", "m".into(), None, &time(1));
        let b = condition(&[], "Ready", true, "R", "m".into(), None, &time(2));
        assert!(same_ignoring_time(&a, &b));
        let c = condition(&[], "Ready", false, "R", "m".into(), None, &time(1));
        assert!(!same_ignoring_time(&a, &c));
    }
}
