//! The status of an ExpressCluster (DESIGN section 7): phase and message, node counts, the
//! rollout, abort and handled requests, conditions, pure.

use express_api::Work;
use express_api::conditions::{self, reason};
use express_api::{
    AbortRecord, ClusterPhase, ExpressClusterStatus, HandledRequests, NodeCounts, RolloutState,
    RolloutStatus,
};
use express_planner::rollout::{Halt, HaltCause, node_work};
use express_planner::settle::SettleState;
use express_planner::{Blocked, ClusterSnapshot, NodeState, Plan};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::conditions::condition;
use super::settle_mark::observed_desired;

/// "; bouncing acme-fe1, acme-fe2" while bounces hold pods, else nothing.
fn bouncing(snapshot: &ClusterSnapshot, plan: &Plan) -> String {
    let names: Vec<&str> = snapshot
        .indices()
        .filter(|&i| plan.node(i).state == NodeState::Bouncing)
        .map(|i| snapshot.node(i).name.as_str())
        .collect();
    if names.is_empty() {
        String::new()
    } else {
        format!("; bouncing {}", names.join(", "))
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
    let facts = Facts::of(snapshot, plan);
    let (phase, message) = phase_and_message(snapshot, plan, &facts);
    let halt = plan
        .rollout
        .halt
        .as_ref()
        .filter(|_| plan.blocked.is_none() || matches!(plan.blocked, Some(Blocked::Paused(_))));
    let rollout = rollout_status(
        snapshot,
        plan,
        RolloutInputs {
            phase,
            delivering: facts.delivering,
            work: &facts.work,
        },
        halt,
        facts.rolling_back,
        previous,
        now,
    );
    let abort = abort_record(plan, previous, now);
    let requests = handled_requests(plan, previous);
    let stamp = Stamp {
        previous: previous.map(|p| p.conditions.as_slice()).unwrap_or(&[]),
        generation,
        now,
    };
    let conditions = cluster_conditions(snapshot, plan, &facts, halt, &message, &stamp);
    ExpressClusterStatus {
        observed_generation: generation,
        phase: Some(phase),
        nodes: Some(facts.counts),
        rollout: Some(rollout),
        abort,
        requests,
        message: Some(message),
        // Whose it is: the owning operator sets this, not the pure status.
        operator: previous.and_then(|p| p.operator.clone()),
        conditions,
        observed_desired: plan.settle.cluster_mark.as_ref().map(observed_desired),
    }
}

/// What the snapshot and plan say of the cluster as a whole, which its phase, message,
/// rollout and conditions are drawn from.
struct Facts<'a> {
    counts: NodeCounts,
    /// How many nodes are up.
    up: usize,
    work: Vec<Option<Work>>,
    delivering: bool,
    recovering: Vec<&'a str>,
    bouncing: Vec<&'a str>,
    invalid: Option<String>,
    node_failed: bool,
    rolling_back: bool,
}

impl<'a> Facts<'a> {
    fn of(snapshot: &'a ClusterSnapshot, plan: &Plan) -> Self {
        let up = snapshot.nodes.iter().filter(|n| n.up).count();
        let counts = NodeCounts {
            total: snapshot.nodes.len() as u32,
            ready: plan
                .nodes
                .iter()
                .zip(&snapshot.nodes)
                .filter(|(_, n)| n.pod.as_ref().is_some_and(|p| p.is_serving()))
                .count() as u32,
            up_to_date: plan
                .nodes
                .iter()
                .filter(|p| p.state == NodeState::UpToDate)
                .count() as u32,
            down: (snapshot.nodes.len() - up) as u32,
        };
        // What moves the nodes: only a delivery is a rollout; a recovery or a bounce leaves the
        // rollout block describing the last delivery (`express_api::delivery`).
        let work: Vec<Option<Work>> = snapshot
            .nodes
            .iter()
            .zip(&plan.nodes)
            .map(|(node, node_plan)| node_work(node, &node_plan.state))
            .collect();
        let names_doing = |wanted: Work| -> Vec<&'a str> {
            work.iter()
                .zip(&snapshot.nodes)
                .filter(|(w, _)| **w == Some(wanted))
                .map(|(_, n)| n.name.as_str())
                .collect()
        };
        let delivering = work.contains(&Some(Work::Delivery))
            || plan.actions.iter().any(|a| {
                a.record
                    .as_ref()
                    .is_some_and(|r| r.work() == Work::Delivery)
            });
        let recovering = names_doing(Work::Recovery);
        let bouncing = names_doing(Work::Bounce);
        Facts {
            counts,
            up,
            delivering,
            recovering,
            bouncing,
            invalid: match &plan.blocked {
                Some(Blocked::InvalidSpec(why)) => Some(why.clone()),
                _ => None,
            },
            node_failed: plan
                .nodes
                .iter()
                .any(|p| matches!(p.state, NodeState::InvalidSpec(_) | NodeState::PodNotOwned)),
            rolling_back: plan
                .actions
                .iter()
                .any(|a| a.source.kept_revision().is_some())
                || snapshot
                    .nodes
                    .iter()
                    .any(express_planner::rollout::rollback_in_flight),
            work,
        }
    }
}

/// The cluster's phase, and a message that says why.
fn phase_and_message(
    snapshot: &ClusterSnapshot,
    plan: &Plan,
    facts: &Facts<'_>,
) -> (ClusterPhase, String) {
    let (counts, up) = (&facts.counts, facts.up);
    match (&plan.blocked, facts.delivering) {
        (Some(Blocked::Paused(pause)), _) => (ClusterPhase::Paused, pause.to_string()),
        (Some(Blocked::InvalidSpec(why)), _) => {
            (ClusterPhase::Failed, format!("invalid spec: {why}"))
        }
        (None, _) if plan.rollout.halt.is_some() => halted_phase(plan, facts.rolling_back),
        // Helm, Argo CD and kubectl write a tenant's objects one at a time, the ExpressCluster
        // often first: a cluster none of whose nodes has arrived is not healthy yet.
        (None, _) if snapshot.nodes.is_empty() => (
            ClusterPhase::Progressing,
            format!(
                "no Backend or Frontend names cluster {} yet",
                snapshot.cluster_name
            ),
        ),
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
                    counts.up_to_date, up
                ),
                None => format!(
                    "{} of {} up nodes on their desired revision{}",
                    counts.up_to_date,
                    up,
                    bouncing(snapshot, plan)
                ),
            },
        ),
        (None, false) if !facts.recovering.is_empty() => (
            ClusterPhase::Degraded,
            format!(
                "recovering {}: lost its pod, which is re-created on the revision it ran (no rollout); {} of {} up nodes Ready{}",
                facts.recovering.join(", "),
                counts.ready,
                up,
                bouncing(snapshot, plan)
            ),
        ),
        (None, false) if !facts.bouncing.is_empty() => (
            ClusterPhase::Progressing,
            format!(
                "bouncing {}; {} of {} up nodes Ready",
                facts.bouncing.join(", "),
                counts.ready,
                up
            ),
        ),
        (None, false) if facts.node_failed || counts.ready < up as u32 => (
            ClusterPhase::Degraded,
            format!("{} of {} up nodes Ready", counts.ready, up),
        ),
        (None, false) => (
            ClusterPhase::Healthy,
            format!("all {up} up nodes Ready on their desired revision"),
        ),
    }
}

/// A halted rollout: Failed for a failure, Degraded for an abort, with what happens next.
fn halted_phase(plan: &Plan, rolling_back: bool) -> (ClusterPhase, String) {
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

/// The abort acted on, stamped with when it was first recorded.
fn abort_record(
    plan: &Plan,
    previous: Option<&ExpressClusterStatus>,
    now: &Time,
) -> Option<AbortRecord> {
    plan.rollout.abort.as_ref().map(|abort| AbortRecord {
        request_id: abort.request_id.clone(),
        rollback: abort.rollback,
        revisions: abort.revisions.clone(),
        at: previous
            .and_then(|p| p.abort.as_ref())
            .filter(|a| a.request_id == abort.request_id)
            .and_then(|a| a.at.clone())
            .or_else(|| Some(now.clone())),
    })
}

/// What every condition of one status write shares: the conditions before it (whose
/// transition times are kept), the generation observed and the time.
struct Stamp<'a> {
    previous: &'a [Condition],
    generation: Option<i64>,
    now: &'a Time,
}

impl Stamp<'_> {
    fn condition(&self, type_: &str, status: bool, reason: &str, message: String) -> Condition {
        condition(
            self.previous,
            type_,
            status,
            reason,
            message,
            self.generation,
            self.now,
        )
    }
}

/// The cluster's conditions: Halted, Ready, Progressing, Paused, InvalidSpec, ObjectsReadable
/// and DesiredStateSettled, in that order.
fn cluster_conditions(
    snapshot: &ClusterSnapshot,
    plan: &Plan,
    facts: &Facts<'_>,
    halt: Option<&Halt>,
    message: &str,
    stamp: &Stamp<'_>,
) -> Vec<Condition> {
    let halted_reason = match halt.map(|h| &h.cause) {
        Some(HaltCause::Failed { .. }) => reason::ROLLOUT_FAILED,
        Some(HaltCause::Aborted { .. }) => reason::ABORTED,
        None => reason::NOT_HALTED,
    };
    let paused = matches!(plan.blocked, Some(Blocked::Paused(_)));
    let no_nodes = snapshot.nodes.is_empty();
    let all_ready = facts.counts.ready == facts.up as u32 && !no_nodes;
    let bouncing = !facts.bouncing.is_empty();
    let readable = snapshot.unreadable.is_empty();
    vec![
        stamp.condition(
            conditions::HALTED,
            halt.is_some(),
            halted_reason,
            halt.map_or_else(|| "rollout not halted".into(), ToString::to_string),
        ),
        stamp.condition(
            conditions::READY,
            all_ready,
            if all_ready {
                reason::ALL_NODES_READY
            } else if no_nodes {
                reason::NO_NODES
            } else if !facts.recovering.is_empty() {
                reason::NODE_RECOVERING
            } else if bouncing {
                reason::NODE_BOUNCING
            } else {
                reason::NODES_NOT_READY
            },
            message.to_owned(),
        ),
        stamp.condition(
            conditions::PROGRESSING,
            facts.delivering || bouncing,
            if facts.delivering {
                reason::ROLLOUT_IN_PROGRESS
            } else if bouncing {
                reason::NODE_BOUNCING
            } else {
                reason::ROLLOUT_COMPLETE
            },
            message.to_owned(),
        ),
        stamp.condition(
            conditions::PAUSED,
            paused,
            if paused {
                reason::PAUSED
            } else {
                reason::NOT_PAUSED
            },
            if paused {
                message.to_owned()
            } else {
                "not paused".into()
            },
        ),
        stamp.condition(
            conditions::INVALID_SPEC,
            facts.invalid.is_some(),
            if facts.invalid.is_some() {
                reason::INVALID_SPEC
            } else {
                reason::VALID
            },
            facts
                .invalid
                .clone()
                .unwrap_or_else(|| "spec is valid".into()),
        ),
        stamp.condition(
            conditions::OBJECTS_READABLE,
            readable,
            if readable {
                reason::READABLE
            } else {
                reason::UNDECODABLE
            },
            if readable {
                "every object can be read".into()
            } else {
                format!("cannot read {}", snapshot.unreadable.join("; "))
            },
        ),
        stamp.condition(
            conditions::DESIRED_STATE_SETTLED,
            plan.settle.is_settled(),
            settle_reason(&plan.settle.state),
            plan.settle
                .message()
                .unwrap_or_else(|| "desired state settled".into()),
        ),
    ]
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

/// What the rollout record is drawn from besides the plan: the cluster's phase, whether a
/// delivery moves its nodes, and what moves each node.
struct RolloutInputs<'a> {
    phase: ClusterPhase,
    delivering: bool,
    work: &'a [Option<Work>],
}

/// The rollout record: its state, order, nodes changing and done, the failed node, and when it
/// started and finished (kept from the previous status while the state allows).
fn rollout_status(
    snapshot: &ClusterSnapshot,
    plan: &Plan,
    inputs: RolloutInputs<'_>,
    halt: Option<&Halt>,
    rolling_back: bool,
    previous: Option<&ExpressClusterStatus>,
    now: &Time,
) -> RolloutStatus {
    let RolloutInputs {
        phase,
        delivering,
        work,
    } = inputs;
    let state = match (phase, halt.map(|h| &h.cause)) {
        (ClusterPhase::Paused, _) => RolloutState::Paused,
        (_, Some(_)) if rolling_back => RolloutState::RollingBack,
        (_, Some(HaltCause::Failed { .. })) => RolloutState::Failed,
        (_, Some(HaltCause::Aborted { .. })) => RolloutState::Aborted,
        (ClusterPhase::Failed, None) => RolloutState::Blocked,
        (ClusterPhase::Progressing, None) if delivering => RolloutState::Progressing,
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
    let names = |filter: &dyn Fn(usize) -> bool| -> Vec<String> {
        plan.upgrade_order
            .iter()
            .filter(|name| {
                snapshot
                    .nodes
                    .iter()
                    .position(|n| &n.name == *name)
                    .is_some_and(filter)
            })
            .cloned()
            .collect()
    };
    let delivered_to = |i: usize| work.get(i).copied().flatten() == Some(Work::Delivery);
    RolloutStatus {
        state: Some(state),
        order: plan.upgrade_order.clone(),
        // The nodes this rollout changes now: a node recovering or bouncing is not one.
        current: names(&|i| {
            let p = &plan.nodes[i];
            (p.state.in_flight() || p.action.is_some()) && (delivered_to(i) || halt.is_some())
        }),
        completed: names(&|i| plan.nodes[i].state == NodeState::UpToDate),
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
    }
}

/// The abort and retry request ids acted on: the ones acted on in this plan, else those kept.
fn handled_requests(
    plan: &Plan,
    previous: Option<&ExpressClusterStatus>,
) -> Option<HandledRequests> {
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
    (requests != HandledRequests::default()).then_some(requests)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]
    use express_api::conditions;
    use express_api::{
        ChangeKind, ChangeState, ClusterPhase, ExpressClusterStatus, RolloutState, RolloutStatus,
    };
    use express_planner::{
        Change, ClusterSnapshot, ExpressClusterObservation, InvalidRevision, Pause, PauseScope,
        plan,
    };

    use super::super::fixtures::{self, NOW_MS, cluster, node, now, pod};
    use super::cluster_status;

    fn status(
        snapshot: &ClusterSnapshot,
        previous: Option<&ExpressClusterStatus>,
    ) -> ExpressClusterStatus {
        cluster_status(snapshot, &plan(snapshot, NOW_MS), previous, Some(3), &now())
    }

    fn condition<'a>(status: &'a ExpressClusterStatus, type_: &str) -> (&'a str, &'a str) {
        fixtures::condition(&status.conditions, type_)
    }

    fn state(status: &ExpressClusterStatus) -> Option<RolloutState> {
        status.rollout.as_ref().and_then(|r| r.state)
    }

    fn failed_fe1() -> ClusterSnapshot {
        let mut fe1 = node("fe1", Some(pod("r2", false)));
        fe1.invalid_revisions = vec![InvalidRevision {
            revision: "r2".into(),
            reason: "crash-looping".into(),
        }];
        fe1.change = Some(Change {
            kind: ChangeKind::Provision,
            state: ChangeState::Failed,
            from: None,
            to: "r2".into(),
            sequence: 2,
            rollout: "x".into(),
            recovery: false,
        });
        cluster(vec![node("be", Some(pod("r2", true))), fe1])
    }

    #[test]
    fn phase_state_and_message_for_each_situation() {
        let healthy = cluster(vec![
            node("be", Some(pod("r2", true))),
            node("fe1", Some(pod("r2", true))),
        ]);
        let progressing = cluster(vec![
            node("be", Some(pod("r1", true))),
            node("fe1", Some(pod("r2", true))),
        ]);
        let mut paused = progressing.clone();
        paused.pause = Some(Pause {
            scope: PauseScope::Namespace,
            reason: Some("maintenance".into()),
        });
        let mut invalid = healthy.clone();
        invalid.spec_errors = vec!["two ExpressClusters claim acme".into()];
        let not_ready = cluster(vec![
            node("be", Some(pod("r2", true))),
            node("fe1", Some(pod("r2", false))),
        ]);
        let rows: [(&str, ClusterSnapshot, ClusterPhase, RolloutState, &str); 7] = [
            (
                "no node yet (a tenant's objects arrive one at a time)",
                cluster(vec![]),
                ClusterPhase::Progressing,
                RolloutState::Complete,
                "no Backend or Frontend names cluster acme yet",
            ),
            (
                "healthy",
                healthy,
                ClusterPhase::Healthy,
                RolloutState::Complete,
                "all 2 up nodes Ready on their desired revision",
            ),
            (
                "progressing",
                progressing,
                ClusterPhase::Progressing,
                RolloutState::Progressing,
                "1 of 2 up nodes on their desired revision",
            ),
            (
                "paused",
                paused,
                ClusterPhase::Paused,
                RolloutState::Paused,
                "paused (namespace (ConfigMap express-control)): maintenance",
            ),
            (
                "invalid",
                invalid,
                ClusterPhase::Failed,
                RolloutState::Blocked,
                "invalid spec: two ExpressClusters claim acme",
            ),
            (
                "a new pod not Ready yet: counted as changing",
                not_ready,
                ClusterPhase::Progressing,
                RolloutState::Progressing,
                "1 of 2 up nodes on their desired revision",
            ),
            (
                "failed rollout",
                failed_fe1(),
                ClusterPhase::Failed,
                RolloutState::Failed,
                "rollout failed: acme-fe1 on revision r2: crash-looping; held until the spec changes or a retry is requested",
            ),
        ];
        let no_nodes = status(&cluster(vec![]), None);
        assert_eq!(
            condition(&no_nodes, conditions::READY),
            ("False", "NoNodes")
        );
        for (what, snapshot, phase, rollout, message) in rows {
            let s = status(&snapshot, None);
            assert_eq!(
                (s.phase, state(&s), s.message.as_deref()),
                (Some(phase), Some(rollout), Some(message)),
                "{what}"
            );
            assert_eq!(s.observed_generation, Some(3), "{what}");
        }
    }

    #[test]
    fn conditions_of_a_failed_rollout() {
        let s = status(&failed_fe1(), None);
        assert_eq!(condition(&s, conditions::HALTED), ("True", "RolloutFailed"));
        assert_eq!(condition(&s, conditions::READY), ("False", "NodesNotReady"));
        assert_eq!(condition(&s, conditions::PAUSED), ("False", "NotPaused"));
        assert_eq!(condition(&s, conditions::INVALID_SPEC), ("False", "Valid"));
        assert_eq!(
            s.rollout.as_ref().unwrap().failed_node.as_deref(),
            Some("acme-fe1")
        );
    }

    #[test]
    fn the_rollout_starts_and_finishes_once() {
        let progressing = cluster(vec![node("be", Some(pod("r1", true)))]);
        let first = status(&progressing, None);
        let started = first.rollout.as_ref().unwrap().started_at.clone();
        assert_eq!(started, Some(now()));
        // Still progressing later: the start is kept.
        let earlier = ExpressClusterStatus {
            rollout: Some(RolloutStatus {
                state: Some(RolloutState::Progressing),
                started_at: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::from_second(1).unwrap(),
                )),
                ..RolloutStatus::default()
            }),
            ..ExpressClusterStatus::default()
        };
        let again = status(&progressing, Some(&earlier));
        assert_eq!(
            again.rollout.as_ref().unwrap().started_at,
            earlier.rollout.as_ref().unwrap().started_at
        );
        // Complete after progressing: finished now.
        let done = cluster(vec![node("be", Some(pod("r2", true)))]);
        let finished = status(&done, Some(&earlier));
        assert_eq!(state(&finished), Some(RolloutState::Complete));
        assert_eq!(finished.rollout.unwrap().finished_at, Some(now()));
    }

    #[test]
    fn the_settle_condition_and_message() {
        let mut snapshot = cluster(vec![node("be", Some(pod("r1", true)))]);
        snapshot.settings.settle_seconds = 10;
        snapshot.express_cluster = Some(ExpressClusterObservation::default());
        let s = status(&snapshot, None);
        assert_eq!(
            condition(&s, conditions::DESIRED_STATE_SETTLED),
            ("False", "SettleWindow")
        );
        let message = s.message.unwrap();
        assert!(
            message.starts_with(
                "0 of 1 up nodes on their desired revision; waiting for the desired state to settle"
            ),
            "{message}"
        );
        assert!(s.observed_desired.is_some());

        let mut stamped = cluster(vec![
            node("be", Some(pod("r1", true))),
            node("fe1", Some(pod("r1", true))),
        ]);
        stamped.nodes[0].rollout_id = Some("r2".into());
        stamped.nodes[1].rollout_id = Some("r1".into());
        let s = status(&stamped, None);
        assert_eq!(
            condition(&s, conditions::DESIRED_STATE_SETTLED),
            ("False", "RolloutIdMismatch")
        );
    }
}
