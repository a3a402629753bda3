//! The status of a Backend or Frontend (DESIGN section 7): phase and message, revisions, what
//! it waits for, conditions, the change record and known-invalid revisions, pure.

use express_api::conditions::{self, reason};
use express_api::{
    BouncePhase, BounceStatus, ChangeState, InvalidRevision, NodeChange, NodePhase, NodeStatus,
    WaitingFor, Work,
};
use express_planner::BouncePlan;
use express_planner::UnmetReason;
use express_planner::plan::Deferred;
use express_planner::rollout::node_work;
use express_planner::{Blocked, NodeIndex, NodeObservation, NodePlan, NodeState, Plan};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};

use super::conditions::condition;
use super::settle_mark::observed_desired;

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

/// Revisions kept in `invalidRevisions` per node (the newest).
const INVALID_REVISIONS_KEPT: usize = 10;

/// The node's change record after this plan: a change about to start, a failure found, or a
/// change whose pod became Ready; otherwise what was recorded.
fn next_change(
    node: &NodeObservation,
    index: NodeIndex,
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
            recovery: record.recovery,
            reason: None,
            started_at: Some(now.clone()),
            finished_at: None,
        });
    }
    let mut change = previous?.clone();
    if change.state != ChangeState::InProgress {
        return Some(change);
    }
    if let Some(failure) = cluster.rollout.failure_of(index) {
        change.state = ChangeState::Failed;
        change.reason = Some(failure.reason.clone());
        change.finished_at = Some(now.clone());
    } else if node.pod.as_ref().is_some_and(|p| {
        p.is_serving() && p.revision.as_deref() == Some(change.to_revision.as_str())
    }) {
        change.state = ChangeState::Succeeded;
        change.finished_at = Some(now.clone());
    }
    Some(change)
}

fn next_invalid_revisions(
    index: NodeIndex,
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
    index: NodeIndex,
    plan: &NodePlan,
    cluster: &Plan,
    previous: Option<&NodeStatus>,
    generation: Option<i64>,
    now: &Time,
) -> NodeStatus {
    let previous_conditions = previous.map(|p| p.conditions.as_slice()).unwrap_or(&[]);
    let pod = node.pod.as_ref();
    let desired = node.desired.as_ref().ok();
    let ready = pod.is_some_and(|p| p.is_serving());
    let up_to_date = match (pod, desired) {
        (Some(p), Some(d)) => p.owned && p.revision.as_deref() == Some(d.revision.as_str()),
        _ => false,
    };
    let (phase, message) = phase_and_message(node, index, plan, cluster, previous);
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
        bounce: bounce_status(
            plan.bounce.as_deref(),
            previous.and_then(|p| p.bounce.as_deref()),
            now,
        )
        .map(Box::new),
        observed_desired: cluster.settle.marks.get(index.0).map(observed_desired),
    }
}

/// `status.bounce` after this plan: the bounce the plan took up or moved on, or the one
/// recorded. `finishedAt` is set when it ends and kept after.
fn bounce_status(
    plan: Option<&BouncePlan>,
    previous: Option<&BounceStatus>,
    now: &Time,
) -> Option<BounceStatus> {
    let Some(plan) = plan else {
        return previous.cloned();
    };
    let same_request = previous.filter(|p| p.request_id == plan.request_id);
    let at = |ms: i64| k8s_openapi::jiff::Timestamp::from_millisecond(ms).ok();
    let finished_at = match (plan.phase.is_final(), plan.is_transition()) {
        (true, true) => Some(now.clone()),
        (true, false) => same_request
            .and_then(|p| p.finished_at.clone())
            .or_else(|| Some(now.clone())),
        (false, _) => None,
    };
    Some(BounceStatus {
        request_id: plan.request_id.clone(),
        phase: Some(plan.phase),
        message: Some(plan.message.clone()),
        started_at: at(plan.started_at_ms).map(Time),
        finished_at,
        force: plan.force,
        timeout_seconds: Some(plan.timeout_seconds),
        pod_uid: plan.pod_uid.clone(),
        revision: plan.revision.clone(),
        phase_since: at(plan.phase_since_ms).map(MicroTime),
    })
}

/// The node's phase, and a message that says why, in words that stay the same while nothing
/// changes (a status write costs an API call).
fn phase_and_message(
    node: &NodeObservation,
    index: NodeIndex,
    plan: &NodePlan,
    cluster: &Plan,
    previous: Option<&NodeStatus>,
) -> (NodePhase, String) {
    if plan.state == NodeState::Bouncing {
        return bounce_phase(plan);
    }
    let (phase, message) = turned_back(node, index, plan, cluster)
        .unwrap_or_else(|| state_phase(node, plan, cluster, previous));
    // A bounce waiting to start is told after what the node is doing.
    match plan
        .bounce
        .as_ref()
        .filter(|b| b.phase == BouncePhase::Pending)
    {
        Some(bounce) => (
            phase,
            format!("{message}; bounce {} {}", bounce.request_id, bounce.message),
        ),
        None => (phase, message),
    }
}

fn bounce_phase(plan: &NodePlan) -> (NodePhase, String) {
    let bounce = plan.bounce.as_ref();
    (
        NodePhase::Bouncing,
        format!(
            "bounce {}: {}",
            bounce.map_or("?", |b| b.request_id.as_str()),
            bounce.map_or("", |b| b.message.as_str())
        ),
    )
}

/// What outranks the node's state: a rollback of it under way, its desired revision known to
/// fail on it, or a revision it cannot return to.
fn turned_back(
    node: &NodeObservation,
    index: NodeIndex,
    plan: &NodePlan,
    cluster: &Plan,
) -> Option<(NodePhase, String)> {
    let action = cluster.action_on(index);
    if let Some(revision) = action.and_then(|a| a.source.kept_revision()) {
        return Some((
            NodePhase::Upgrading,
            format!("rolling back to revision {revision}"),
        ));
    }
    let invalid_here = node.desired.as_ref().ok().and_then(|d| {
        cluster
            .rollout
            .invalid_revisions(index, node)
            .find(|(revision, _)| *revision == d.revision)
    });
    if let Some((revision, reason)) = invalid_here.filter(|_| node.up) {
        return Some((
            NodePhase::Failed,
            format!(
                "revision {revision} failed on this node ({reason}); it is refused until the spec changes or a retry is requested"
            ),
        ));
    }
    if let Some(Deferred::NoHistory { revision }) = &plan.deferred {
        return Some((
            NodePhase::Failed,
            format!("cannot return to revision {revision}: no ControllerRevision keeps its spec"),
        ));
    }
    None
}

/// The phase the node's state gives it.
fn state_phase(
    node: &NodeObservation,
    plan: &NodePlan,
    cluster: &Plan,
    previous: Option<&NodeStatus>,
) -> (NodePhase, String) {
    let recovering = node_work(node, &plan.state) == Some(Work::Recovery);
    match &plan.state {
        NodeState::Bouncing => bounce_phase(plan),
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
        NodeState::Starting if recovering => (
            NodePhase::NotReady,
            "recovering: its pod, re-created on the revision it ran, is not Ready yet".into(),
        ),
        NodeState::Terminating if recovering => (
            NodePhase::NotReady,
            "its pod is terminating (no rollout deleted it); it is re-created on the revision it ran once gone".into(),
        ),
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
            change_phase(node, plan, cluster, recovering)
        }
    }
}

/// A node that needs a change: why it waits, or the change it is getting.
fn change_phase(
    node: &NodeObservation,
    plan: &NodePlan,
    cluster: &Plan,
    recovering: bool,
) -> (NodePhase, String) {
    let paused = matches!(cluster.blocked, Some(Blocked::Paused(_)));
    let halt = cluster.rollout.halt.as_ref();
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
    } else if recovering {
        (
            NodePhase::NotReady,
            format!(
                "lost its pod: re-creating it on revision {}, the one it ran (a recovery, not a rollout)",
                node.desired.as_ref().map_or("?", |d| d.revision.as_str())
            ),
        )
    } else {
        (NodePhase::Provisioning, "creating its pod".into())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]
    use express_api::conditions;
    use express_api::{ChangeKind, ChangeState, NodePhase, NodeStatus};
    use express_planner::{
        Change, ClusterSnapshot, InvalidRevision, NodeIndex, Pause, PauseScope, plan,
    };

    use super::super::fixtures::{self, NOW_MS, cluster, node, now, pod};
    use super::node_status;

    /// The status of every node of `snapshot`, planned at NOW_MS, without a previous status.
    fn statuses(snapshot: &ClusterSnapshot) -> Vec<NodeStatus> {
        let plan = plan(snapshot, NOW_MS);
        snapshot
            .indices()
            .map(|i| {
                node_status(
                    snapshot.node(i),
                    i,
                    plan.node(i),
                    &plan,
                    None,
                    Some(1),
                    &now(),
                )
            })
            .collect()
    }

    fn condition<'a>(status: &'a NodeStatus, type_: &str) -> (&'a str, &'a str) {
        fixtures::condition(&status.conditions, type_)
    }

    fn phase_and_message(status: &NodeStatus) -> (NodePhase, &str) {
        (status.phase.unwrap(), status.message.as_deref().unwrap())
    }

    #[test]
    fn every_node_phase_from_a_planned_cluster() {
        struct Row {
            what: &'static str,
            snapshot: ClusterSnapshot,
            node: usize,
            phase: NodePhase,
            message: &'static str,
        }
        let up_to_date = || node("fe1", Some(pod("r2", true)));
        let mut down = node("fe2", None);
        down.up = false;
        let mut removing = node("fe2", Some(pod("r1", true)));
        removing.up = false;
        let mut invalid = node("fe1", None);
        invalid.desired = Err("no expressVersion".into());
        let mut failed = node("fe1", Some(pod("r2", false)));
        failed.invalid_revisions = vec![InvalidRevision {
            revision: "r2".into(),
            reason: "crash-looping".into(),
        }];
        let mut paused = cluster(vec![node("be", None)]);
        paused.pause = Some(Pause {
            scope: PauseScope::Cluster,
            reason: None,
        });
        let mut terminating = pod("r1", true);
        terminating.terminating = true;
        let rows = [
            Row {
                what: "up to date",
                snapshot: cluster(vec![node("be", Some(pod("r2", true))), up_to_date()]),
                node: 1,
                phase: NodePhase::Ready,
                message: "running its desired revision",
            },
            Row {
                what: "waits for its predecessor",
                snapshot: cluster(vec![node("be", None), node("fe1", None)]),
                node: 1,
                phase: NodePhase::Waiting,
                message: "waiting for acme-be (not yet Ready=True on revision r2)",
            },
            Row {
                what: "no Backend object",
                snapshot: cluster(vec![node("fe1", None)]),
                node: 0,
                phase: NodePhase::Waiting,
                message: "waiting for cluster acme has no Backend object",
            },
            Row {
                what: "first to provision",
                snapshot: cluster(vec![node("be", None)]),
                node: 0,
                phase: NodePhase::Provisioning,
                message: "creating its pod",
            },
            Row {
                what: "first to upgrade",
                snapshot: cluster(vec![
                    node("be", Some(pod("r1", true))),
                    node("fe1", Some(pod("r1", true))),
                ]),
                node: 1,
                phase: NodePhase::Upgrading,
                message: "replacing its pod",
            },
            Row {
                what: "old pod terminating",
                snapshot: cluster(vec![node("be", Some(terminating))]),
                node: 0,
                phase: NodePhase::Upgrading,
                message: "replacing its pod",
            },
            Row {
                what: "pod starting, nothing known before",
                snapshot: cluster(vec![node("be", Some(pod("r2", false)))]),
                node: 0,
                phase: NodePhase::Provisioning,
                message: "pod starting",
            },
            Row {
                what: "paused",
                snapshot: paused,
                node: 0,
                phase: NodePhase::Paused,
                message: "paused: nothing is changed until resumed",
            },
            Row {
                what: "intentionally down",
                snapshot: cluster(vec![node("be", Some(pod("r2", true))), down]),
                node: 1,
                phase: NodePhase::Down,
                message: "intentionally down (up: false)",
            },
            Row {
                what: "set down, pod still there",
                snapshot: cluster(vec![node("be", Some(pod("r2", true))), removing]),
                node: 1,
                phase: NodePhase::Down,
                message: "intentionally down; removing its pod",
            },
            Row {
                what: "invalid spec",
                snapshot: cluster(vec![node("be", Some(pod("r2", true))), invalid]),
                node: 1,
                phase: NodePhase::Failed,
                message: "invalid spec: no expressVersion",
            },
            Row {
                what: "known-invalid revision",
                snapshot: cluster(vec![node("be", Some(pod("r2", true))), failed]),
                node: 1,
                phase: NodePhase::Failed,
                message: "revision r2 failed on this node (crash-looping); it is refused until the spec changes or a retry is requested",
            },
        ];
        for row in rows {
            let status = &statuses(&row.snapshot)[row.node];
            assert_eq!(
                phase_and_message(status),
                (row.phase, row.message),
                "{}",
                row.what
            );
        }
    }

    #[test]
    fn conditions_follow_the_pod_and_the_prerequisites() {
        let snapshot = cluster(vec![
            node("be", Some(pod("r1", true))),
            node("fe1", Some(pod("r2", true))),
            node("fe2", None),
        ]);
        let s = statuses(&snapshot);
        assert_eq!(
            condition(&s[0], conditions::UP_TO_DATE),
            ("False", "OldRevision")
        );
        assert_eq!(condition(&s[0], conditions::READY), ("True", "PodReady"));
        assert_eq!(
            condition(&s[1], conditions::UP_TO_DATE),
            ("True", "DesiredRevision")
        );
        // fe2 waits for fe1 on r2, which is Ready: its provisioning prerequisite is met.
        assert_eq!(
            condition(&s[2], conditions::PREREQUISITES_MET),
            ("True", "Met")
        );
        assert_eq!(
            condition(&s[2], conditions::READY),
            ("False", "PodNotReady")
        );
        assert_eq!(s[0].running_revision.as_deref(), Some("r1"));
        assert_eq!(s[0].desired_revision.as_deref(), Some("r2"));
        assert_eq!(s[2].pod_name, None);
    }

    #[test]
    fn a_change_about_to_start_is_recorded_and_a_ready_one_succeeds() {
        let snapshot = cluster(vec![node("be", None)]);
        let change = statuses(&snapshot)[0].change.clone().unwrap();
        assert_eq!(
            (change.kind, change.state, change.to_revision.as_str()),
            (ChangeKind::Provision, ChangeState::InProgress, "r2")
        );

        let mut started = node("be", Some(pod("r2", true)));
        started.change = Some(Change {
            kind: ChangeKind::Provision,
            state: ChangeState::InProgress,
            from: None,
            to: "r2".into(),
            sequence: 1,
            rollout: "x".into(),
            recovery: false,
        });
        let snapshot = cluster(vec![started]);
        let plan = plan(&snapshot, NOW_MS);
        let previous = NodeStatus {
            change: Some(express_api::NodeChange {
                kind: ChangeKind::Provision,
                state: ChangeState::InProgress,
                from_revision: None,
                to_revision: "r2".into(),
                sequence: 1,
                rollout: "x".into(),
                recovery: false,
                reason: None,
                started_at: None,
                finished_at: None,
            }),
            ..NodeStatus::default()
        };
        let first = NodeIndex(0);
        let status = node_status(
            snapshot.node(first),
            first,
            plan.node(first),
            &plan,
            Some(&previous),
            Some(1),
            &now(),
        );
        let change = status.change.unwrap();
        assert_eq!(change.state, ChangeState::Succeeded);
        assert_eq!(change.finished_at, Some(now()));
    }

    #[test]
    fn a_settle_wait_is_said_and_the_mark_is_kept() {
        let mut snapshot = cluster(vec![node("be", None)]);
        snapshot.settings.settle_seconds = 10;
        let status = &statuses(&snapshot)[0];
        assert_eq!(
            phase_and_message(status),
            (
                NodePhase::Waiting,
                "waiting for the desired state to settle: no change for rollout.settleSeconds (10 s)"
            )
        );
        let mark = status.observed_desired.as_ref().unwrap();
        assert_eq!(mark.revision.as_deref(), Some("r2"));
        assert_eq!(
            mark.since.as_ref().map(|t| t.0.as_millisecond()),
            Some(NOW_MS)
        );
    }

    #[test]
    fn a_bounce_is_told_in_the_phase_and_in_status_bounce() {
        let request = |snapshot: &mut ClusterSnapshot| {
            snapshot.nodes[0].bounce_request = Some(Box::new(express_planner::BounceRequest {
                id: "b1".into(),
                force: false,
                timeout_seconds: Ok(90),
            }));
        };
        // Started: the node is Bouncing; the record carries what a restart needs.
        let mut snapshot = cluster(vec![node("be", Some(pod("r2", true)))]);
        snapshot.nodes[0].pod.as_mut().unwrap().uid = Some("old-uid".into());
        request(&mut snapshot);
        let status = &statuses(&snapshot)[0];
        assert_eq!(
            phase_and_message(status),
            (
                NodePhase::Bouncing,
                "bounce b1: deleting pod acme-be gracefully"
            )
        );
        let bounce = status.bounce.clone().unwrap();
        assert_eq!(
            (
                bounce.phase,
                bounce.pod_uid.as_deref(),
                bounce.revision.as_deref(),
                bounce.timeout_seconds,
                bounce.finished_at.is_some(),
            ),
            (
                Some(express_api::BouncePhase::Terminating),
                Some("old-uid"),
                Some("r2"),
                Some(90),
                false
            )
        );

        // Paused: it waits, and the node says so after what it is doing.
        let mut snapshot = cluster(vec![node("be", Some(pod("r2", true)))]);
        request(&mut snapshot);
        snapshot.pause = Some(Pause {
            scope: PauseScope::Cluster,
            reason: None,
        });
        let status = &statuses(&snapshot)[0];
        assert_eq!(
            phase_and_message(status),
            (
                NodePhase::Ready,
                "running its desired revision; bounce b1 waits: paused (cluster (ExpressCluster spec.paused))"
            )
        );

        // Refused: ends at once with finishedAt; a later plan keeps the record as it was.
        let mut snapshot = cluster(vec![node("be", None)]);
        request(&mut snapshot);
        let refused = statuses(&snapshot)[0].bounce.clone().unwrap();
        assert_eq!(refused.phase, Some(express_api::BouncePhase::Refused));
        assert_eq!(refused.finished_at, Some(now()));
        let previous = NodeStatus {
            bounce: Some(refused.clone()),
            ..NodeStatus::default()
        };
        snapshot.nodes[0].bounce = Some(Box::new(express_planner::BounceRecord {
            request_id: "b1".into(),
            phase: express_api::BouncePhase::Refused,
            message: refused.message.clone(),
            force: false,
            timeout_seconds: 90,
            pod_uid: None,
            revision: None,
            started_at_ms: Some(NOW_MS),
            phase_since_ms: Some(NOW_MS),
        }));
        let plan = plan(&snapshot, NOW_MS + 60_000);
        assert_eq!(plan.node(NodeIndex(0)).bounce, None);
        let again = node_status(
            snapshot.node(NodeIndex(0)),
            NodeIndex(0),
            plan.node(NodeIndex(0)),
            &plan,
            Some(&previous),
            Some(1),
            &now(),
        );
        assert_eq!(again.bounce, Some(refused));
    }
}
