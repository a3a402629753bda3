//! Table tests for DESIGN section 3 rules 8 and 9: a new change starts only once the desired
//! state has settled (rollout barrier or settle window), never delaying what is already under
//! way, a rollback or a lost pod; and a cluster's Backend is required.

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use express_api::{ChangeKind, ChangeState};
use express_planner::plan::Deferred;
use express_planner::rollout::rollout_id;
use express_planner::settle::SettleState;
use express_planner::{
    Abort, Change, ClusterSnapshot, DesiredMark, ExpressClusterObservation, Operation, Pause,
    PauseScope, Plan, UnmetReason, plan,
};
use support::*;

/// Milliseconds since the epoch at which the tables' desired state last changed.
const CHANGED: i64 = 1_700_000_000_000;
const SETTLE_MS: i64 = 3_000;

/// be and fe1..fe4 all on the old revision, the new one desired since CHANGED, settle 3 s.
fn upgrade_recorded_at(changed: i64) -> ClusterSnapshot {
    let mut s = cluster(&[
        ("be", Pod::Old),
        ("fe1", Pod::Old),
        ("fe2", Pod::Old),
        ("fe3", Pod::Old),
        ("fe4", Pod::Old),
    ]);
    s.settings.settle_seconds = 3;
    for node in &mut s.nodes {
        node.recorded_desired = Some(recorded(node.up, Some(NEW), None, changed));
    }
    s
}

fn recorded(up: bool, revision: Option<&str>, id: Option<&str>, since_ms: i64) -> DesiredMark {
    DesiredMark {
        revision: revision.map(str::to_owned),
        up,
        rollout_id: id.map(str::to_owned),
        ordering: None,
        since_ms,
    }
}

/// Every node carries `id`, recorded long ago.
fn stamp(s: &mut ClusterSnapshot, id: &str) {
    for node in &mut s.nodes {
        node.rollout_id = Some(id.into());
        let revision = node.up.then_some(NEW);
        node.recorded_desired = Some(recorded(node.up, revision, Some(id), CHANGED));
    }
}

fn started(p: &Plan) -> Vec<(String, Operation)> {
    p.actions
        .iter()
        .map(|a| (a.name.trim_start_matches("acme-").to_owned(), a.operation))
        .collect()
}

fn deferred(p: &Plan, s: &ClusterSnapshot, short: &str) -> Option<Deferred> {
    let i = s.nodes.iter().position(|n| n.name == full(short)).unwrap();
    p.nodes[i].deferred.clone()
}

#[test]
fn within_the_window_nothing_new_starts_and_the_plan_says_when_to_look_again() {
    let s = upgrade_recorded_at(CHANGED);
    let p = plan(&s, CHANGED + 1_200);
    assert!(p.actions.is_empty(), "{:?}", started(&p));
    assert_eq!(deferred(&p, &s, "fe1"), Some(Deferred::Settling));
    assert_eq!(
        p.settle.state,
        SettleState::Window {
            changed_at_ms: CHANGED,
            until_ms: CHANGED + SETTLE_MS,
            settle_seconds: 3
        }
    );
    assert_eq!(p.wake_at_ms(), Some(CHANGED + SETTLE_MS));
    let message = p.settle.message().unwrap();
    assert!(
        message.contains("waiting for the desired state to settle"),
        "{message}"
    );
    assert!(message.contains("rollout.settleSeconds 3 s"), "{message}");
}

#[test]
fn once_the_window_has_passed_the_order_is_the_default_one() {
    let s = upgrade_recorded_at(CHANGED);
    let p = plan(&s, CHANGED + SETTLE_MS);
    assert!(p.settle.is_settled());
    assert_eq!(started(&p), [("fe1".into(), Operation::ReplacePod)]);
    assert_eq!(p.wake_at_ms(), None);
}

#[test]
fn a_desired_state_not_recorded_yet_changed_now() {
    let mut s = upgrade_recorded_at(CHANGED);
    // fe3's spec changed again: its record names another revision.
    node_mut(&mut s, "fe3").recorded_desired = Some(recorded(true, Some(OLD), None, CHANGED));
    // fe4 is new to the operator: no record at all.
    node_mut(&mut s, "fe4").recorded_desired = None;
    let now = CHANGED + 10_000;
    let p = plan(&s, now);
    assert!(p.actions.is_empty());
    assert_eq!(p.wake_at_ms(), Some(now + SETTLE_MS));
    let marks: Vec<i64> = p.settle.marks.iter().map(|m| m.since_ms).collect();
    assert_eq!(marks, [CHANGED, CHANGED, CHANGED, now, now]);
    assert_eq!(p.settle.marks[3].revision.as_deref(), Some(NEW));
}

#[test]
fn setting_a_node_down_is_a_change_and_its_removal_waits_too() {
    let mut s = upgrade_recorded_at(CHANGED);
    for node in &mut s.nodes {
        node.pod = Some(pod(NEW, true));
    }
    let fe2 = node_mut(&mut s, "fe2");
    fe2.up = false;
    let p = plan(&s, CHANGED + 10_000);
    assert!(p.actions.is_empty());
    assert_eq!(deferred(&p, &s, "fe2"), Some(Deferred::Settling));
    // The mark of a down node ignores its revision: changing it is no change.
    assert_eq!(p.settle.marks[2].revision, None);
    record_marks(&mut s, &p);
    let p = plan(&s, CHANGED + 10_000 + SETTLE_MS);
    assert_eq!(started(&p), [("fe2".into(), Operation::RemovePod)]);
}

#[test]
fn a_window_of_zero_is_off() {
    let mut s = upgrade_recorded_at(CHANGED);
    s.settings.settle_seconds = 0;
    let p = plan(&s, CHANGED);
    assert_eq!(started(&p), [("fe1".into(), Operation::ReplacePod)]);
}

#[test]
fn disagreeing_rollout_ids_hold_every_new_change_however_long_it_lasts() {
    let mut s = upgrade_recorded_at(CHANGED);
    stamp(&mut s, "r1");
    for short in ["be", "fe1", "fe2"] {
        let node = node_mut(&mut s, short);
        node.rollout_id = Some("r2".into());
        node.recorded_desired = Some(recorded(true, Some(NEW), Some("r2"), CHANGED + 500));
    }
    let p = plan(&s, CHANGED + 60_000);
    assert!(p.actions.is_empty());
    assert_eq!(deferred(&p, &s, "fe1"), Some(Deferred::Settling));
    let SettleState::Disagree {
        groups, stalled, ..
    } = &p.settle.state
    else {
        panic!("{:?}", p.settle.state)
    };
    assert!(!stalled);
    assert_eq!(groups[0].rollout_id, "r2");
    assert_eq!(groups[0].nodes, [full("be"), full("fe1"), full("fe2")]);
    assert_eq!(groups[1].nodes, [full("fe3"), full("fe4")]);
    let message = p.settle.message().unwrap();
    assert!(
        message.contains(
            "rollout-id r2 on acme-be, acme-fe1, acme-fe2 (3 of 5 nodes); r1 on acme-fe3, acme-fe4 (2 of 5 nodes)"
        ),
        "{message}"
    );
    // Nothing written for settleTimeoutSeconds (300 s): stalled, reported, still not acted on.
    let timeout = CHANGED + 500 + 300_000;
    assert_eq!(p.wake_at_ms(), Some(timeout));
    let p = plan(&s, timeout);
    assert!(p.actions.is_empty());
    assert!(matches!(
        p.settle.state,
        SettleState::Disagree { stalled: true, .. }
    ));
    assert!(
        p.settle
            .message()
            .unwrap()
            .contains("stalled: nothing written since")
    );
    assert!(p.settle.node_message().unwrap().starts_with("stalled: "));
    assert_eq!(p.wake_at_ms(), None);
}

#[test]
fn agreeing_rollout_ids_on_every_up_node_start_at_once() {
    let mut s = upgrade_recorded_at(CHANGED);
    stamp(&mut s, "r2");
    // Just written, yet agreed: no window.
    let p = plan(&s, CHANGED + 1);
    assert!(p.settle.is_settled());
    assert_eq!(started(&p), [("fe1".into(), Operation::ReplacePod)]);
}

#[test]
fn the_express_cluster_is_a_carrier_too() {
    let mut s = upgrade_recorded_at(CHANGED);
    stamp(&mut s, "r2");
    s.express_cluster = Some(ExpressClusterObservation {
        rollout_id: Some("r3".into()),
        recorded: None,
    });
    let p = plan(&s, CHANGED + 1);
    assert!(p.actions.is_empty());
    let SettleState::Disagree { groups, .. } = &p.settle.state else {
        panic!("{:?}", p.settle.state)
    };
    assert!(groups.iter().any(|g| g.rollout_id == "r3" && g.cluster));
    // The ExpressCluster's mark is kept for its status.
    assert_eq!(
        p.settle
            .cluster_mark
            .as_ref()
            .unwrap()
            .rollout_id
            .as_deref(),
        Some("r3")
    );
}

#[test]
fn down_nodes_do_not_take_part_in_the_barrier() {
    let mut s = upgrade_recorded_at(CHANGED);
    stamp(&mut s, "r2");
    let fe4 = node_mut(&mut s, "fe4");
    fe4.up = false;
    fe4.pod = None;
    fe4.rollout_id = Some("r1".into());
    fe4.recorded_desired = Some(recorded(false, None, Some("r1"), CHANGED));
    let p = plan(&s, CHANGED + 1);
    assert!(p.settle.is_settled(), "{:?}", p.settle.state);
}

#[test]
fn with_some_up_nodes_unstamped_the_window_applies() {
    let mut s = upgrade_recorded_at(CHANGED);
    stamp(&mut s, "r2");
    node_mut(&mut s, "fe4").rollout_id = None;
    let p = plan(&s, CHANGED + 1);
    assert!(p.actions.is_empty());
    assert!(matches!(p.settle.state, SettleState::Window { .. }));
}

#[test]
fn a_first_delivery_waits_for_the_window_even_when_its_ids_agree() {
    let mut s = cluster(&[("be", Pod::Missing), ("fe1", Pod::Missing)]);
    s.settings.settle_seconds = 3;
    for node in &mut s.nodes {
        node.rollout_id = Some("r1".into());
    }
    let p = plan(&s, CHANGED);
    assert!(p.actions.is_empty());
    assert!(matches!(p.settle.state, SettleState::Window { .. }));
    for node in &mut s.nodes {
        node.recorded_desired = Some(recorded(true, Some(NEW), Some("r1"), CHANGED));
    }
    let p = plan(&s, CHANGED + SETTLE_MS);
    assert_eq!(started(&p), [("be".into(), Operation::CreatePod)]);
}

#[test]
fn a_lost_pod_is_recreated_at_once_while_the_state_settles() {
    let mut s = upgrade_recorded_at(CHANGED);
    for node in &mut s.nodes {
        node.pod = Some(pod(NEW, true));
    }
    let fe3 = node_mut(&mut s, "fe3");
    fe3.pod = None;
    fe3.change = Some(Change {
        kind: ChangeKind::Upgrade,
        state: ChangeState::Succeeded,
        from: Some(OLD.into()),
        to: NEW.into(),
        sequence: 3,
        rollout: "r".into(),
        recovery: false,
    });
    let p = plan(&s, CHANGED + 1);
    assert!(!p.settle.is_settled());
    assert_eq!(started(&p), [("fe3".into(), Operation::CreatePod)]);
}

#[test]
fn a_pod_ended_on_its_desired_revision_is_restored_at_once() {
    let mut s = upgrade_recorded_at(CHANGED);
    for node in &mut s.nodes {
        node.pod = Some(pod(NEW, true));
    }
    node_mut(&mut s, "fe2").pod.as_mut().unwrap().phase = express_planner::PodPhase::Failed;
    let p = plan(&s, CHANGED + 1);
    assert_eq!(started(&p), [("fe2".into(), Operation::DeleteEndedPod)]);
}

#[test]
fn a_pod_lost_whose_desired_revision_changed_waits() {
    let mut s = upgrade_recorded_at(CHANGED);
    let be = node_mut(&mut s, "be");
    be.pod = None;
    be.change = Some(Change {
        kind: ChangeKind::Provision,
        state: ChangeState::Succeeded,
        from: None,
        to: OLD.into(),
        sequence: 1,
        rollout: "r".into(),
        recovery: false,
    });
    let p = plan(&s, CHANGED + 1);
    assert!(p.actions.is_empty());
    assert_eq!(deferred(&p, &s, "be"), Some(Deferred::Settling));
}

#[test]
fn a_change_in_flight_finishes_while_the_state_settles() {
    let mut s = upgrade_recorded_at(CHANGED);
    let fe1 = node_mut(&mut s, "fe1");
    fe1.pod = None;
    fe1.replacing = true;
    fe1.change = Some(Change {
        kind: ChangeKind::Upgrade,
        state: ChangeState::InProgress,
        from: Some(OLD.into()),
        to: NEW.into(),
        sequence: 1,
        rollout: "r".into(),
        recovery: false,
    });
    let p = plan(&s, CHANGED + 1);
    assert!(!p.settle.is_settled());
    assert_eq!(started(&p), [("fe1".into(), Operation::FinishReplacement)]);
}

#[test]
fn a_rollback_is_never_delayed_by_the_settle_rules() {
    let mut s = cluster(&[("be", Pod::Old), ("fe1", Pod::New), ("fe2", Pod::Old)]);
    s.settings.settle_seconds = 3;
    let id = rollout_id(&s);
    let fe1 = node_mut(&mut s, "fe1");
    fe1.change = Some(Change {
        kind: ChangeKind::Upgrade,
        state: ChangeState::Succeeded,
        from: Some(OLD.into()),
        to: NEW.into(),
        sequence: 1,
        rollout: id,
        recovery: false,
    });
    for node in &mut s.nodes {
        node.history = vec![OLD.into(), NEW.into()];
    }
    s.control.abort = Some(Abort {
        request_id: "a1".into(),
        rollback: true,
        revisions: s
            .nodes
            .iter()
            .map(|n| (n.name.clone(), NEW.to_owned()))
            .collect(),
    });
    // No record: every desired state changed just now.
    let p = plan(&s, CHANGED);
    assert!(!p.settle.is_settled());
    assert_eq!(started(&p), [("fe1".into(), Operation::ReplacePod)]);
    assert!(p.actions[0].source.kept_revision().is_some());
    assert_eq!(p.actions[0].source.kept_revision(), Some(OLD));
}

#[test]
fn a_pause_is_reported_before_the_settle_wait() {
    let mut s = upgrade_recorded_at(CHANGED);
    s.pause = Some(Pause {
        scope: PauseScope::Cluster,
        reason: None,
    });
    let p = plan(&s, CHANGED + 1);
    assert!(p.actions.is_empty());
    assert_eq!(deferred(&p, &s, "fe1"), Some(Deferred::Blocked));
}

// Rule 9: a cluster's Backend is required.

#[test]
fn frontends_do_not_provision_while_the_cluster_has_no_backend_object() {
    let s = cluster(&[("fe1", Pod::Missing), ("fe2", Pod::Missing)]);
    let p = plan(&s, CHANGED);
    assert!(p.actions.is_empty());
    let fe1 = &p.nodes[0];
    assert_eq!(fe1.waiting_for.len(), 1);
    assert_eq!(
        fe1.waiting_for[0].reason,
        UnmetReason::NoBackend {
            cluster: "acme".into()
        }
    );
    assert_eq!(
        fe1.waiting_for[0].stable_reason(),
        "cluster acme has no Backend object"
    );
    // fe2 still waits for fe1, as the default order says.
    assert_eq!(p.nodes[1].waiting_for[0].node, full("fe1"));
}

#[test]
fn frontends_arriving_before_the_backend_provision_after_it() {
    let s = cluster(&[
        ("fe2", Pod::Missing),
        ("fe1", Pod::Missing),
        ("be", Pod::Missing),
    ]);
    assert_eq!(rollout_order(s), ["be", "fe1", "fe2"]);
}

#[test]
fn a_backend_set_down_is_not_missing() {
    let s = cluster(&[
        ("be", Pod::Down),
        ("fe1", Pod::Missing),
        ("fe2", Pod::Missing),
    ]);
    assert_eq!(rollout_order(s), ["fe1", "fe2"]);
}

#[test]
fn explicit_prerequisites_and_disabled_dependencies_keep_their_meaning_without_a_backend() {
    let mut s = cluster(&[("fe1", Pod::Missing), ("fe2", Pod::Missing)]);
    set_provisioning_prerequisites(&mut s, "fe1", &[]);
    assert_eq!(rollout_order(s), ["fe1", "fe2"]);

    let mut s = cluster(&[("fe1", Pod::Missing), ("fe2", Pod::Missing)]);
    s.settings.dependencies_disabled = true;
    assert_eq!(rollout_order(s), ["fe1", "fe2"]);
}

#[test]
fn an_upgrade_without_a_backend_stops_where_the_backend_belongs() {
    let s = cluster(&[
        ("fe1", Pod::Old),
        ("fe2", Pod::Old),
        ("fe3", Pod::Old),
        ("fe4", Pod::Old),
    ]);
    let mut driver = Driver::new(s);
    assert!(driver.run_to_end());
    assert_eq!(driver.order(), ["fe1", "fe2"]);
    let p = plan(&driver.snapshot, CHANGED);
    assert!(matches!(
        p.nodes[2].waiting_for[0].reason,
        UnmetReason::NoBackend { .. }
    ));
}
