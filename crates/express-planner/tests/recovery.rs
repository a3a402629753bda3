//! Table tests for DESIGN section 12's first rule: a node change is part of a rollout (a
//! delivery) only when it moves the node to a revision it did not run. For each kind of node
//! change (a new node provisioned, a revision change, a rollback, a lost pod at the node's
//! revision, a bounce) the change record the planner writes, what moves the node
//! (`rollout::node_work`), and whether a failing pod fails the rollout.

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use express_api::{BouncePhase, ChangeKind, ChangeState, Work};
use express_planner::rollout::{CRASH_LOOP_RESTARTS, node_work, rollout_id};
use express_planner::{BounceRecord, Change, ClusterSnapshot, Operation, plan};
use support::*;

const NOW: i64 = 1_000_000_000;

fn change(
    s: &ClusterSnapshot,
    kind: ChangeKind,
    state: ChangeState,
    from: Option<&str>,
    to: &str,
) -> Change {
    Change {
        kind,
        state,
        from: from.map(str::to_owned),
        to: to.into(),
        sequence: 1,
        rollout: rollout_id(s),
        recovery: false,
    }
}

/// A one-node cluster (the backend) whose pod is `pod` and whose last change record is made by
/// `last` from the snapshot.
fn backend(pod: Pod, last: Option<fn(&ClusterSnapshot) -> Change>) -> ClusterSnapshot {
    let mut s = cluster(&[("be", pod)]);
    let record = last.map(|make| make(&s));
    node_mut(&mut s, "be").change = record;
    s
}

fn provisioned(s: &ClusterSnapshot) -> Change {
    change(s, ChangeKind::Provision, ChangeState::Succeeded, None, NEW)
}
fn upgraded(s: &ClusterSnapshot) -> Change {
    change(
        s,
        ChangeKind::Upgrade,
        ChangeState::Succeeded,
        Some(OLD),
        NEW,
    )
}
fn upgraded_before(s: &ClusterSnapshot) -> Change {
    Change {
        rollout: "an-earlier-rollout".into(),
        ..upgraded(s)
    }
}
fn provisioning(s: &ClusterSnapshot) -> Change {
    change(s, ChangeKind::Provision, ChangeState::InProgress, None, NEW)
}
fn upgrading(s: &ClusterSnapshot) -> Change {
    change(
        s,
        ChangeKind::Upgrade,
        ChangeState::InProgress,
        Some(OLD),
        NEW,
    )
}
fn recovering(s: &ClusterSnapshot) -> Change {
    Change {
        recovery: true,
        ..change(s, ChangeKind::Provision, ChangeState::InProgress, None, NEW)
    }
}
fn recovered(s: &ClusterSnapshot) -> Change {
    Change {
        recovery: true,
        ..change(s, ChangeKind::Provision, ChangeState::Succeeded, None, NEW)
    }
}
fn ran_old(s: &ClusterSnapshot) -> Change {
    change(s, ChangeKind::Upgrade, ChangeState::Succeeded, None, OLD)
}

#[test]
fn the_record_written_for_each_kind_of_node_change() {
    // (what, the node's pod, its last record, the operation planned, the record written:
    // kind, from, and what it is).
    type Row = (
        &'static str,
        Pod,
        Option<fn(&ClusterSnapshot) -> Change>,
        Operation,
        ChangeKind,
        Option<&'static str>,
        Work,
    );
    let rows: [Row; 8] = [
        (
            "a new node: provisioned",
            Pod::Missing,
            None,
            Operation::CreatePod,
            ChangeKind::Provision,
            None,
            Work::Delivery,
        ),
        (
            "provisioning lost its pod before Ready: provisioned again",
            Pod::Missing,
            Some(provisioning),
            Operation::CreatePod,
            ChangeKind::Provision,
            None,
            Work::Delivery,
        ),
        (
            "a revision change: upgraded",
            Pod::Old,
            Some(ran_old),
            Operation::ReplacePod,
            ChangeKind::Upgrade,
            Some(OLD),
            Work::Delivery,
        ),
        (
            "a pod lost mid-upgrade: still the upgrade",
            Pod::Missing,
            Some(upgrading),
            Operation::CreatePod,
            ChangeKind::Upgrade,
            Some(OLD),
            Work::Delivery,
        ),
        (
            "a lost pod after provisioning: a recovery",
            Pod::Missing,
            Some(provisioned),
            Operation::CreatePod,
            ChangeKind::Provision,
            None,
            Work::Recovery,
        ),
        // The upgrade's origin is kept, so that a rollback of its rollout still returns it.
        (
            "a lost pod after this rollout's upgrade: a recovery",
            Pod::Missing,
            Some(upgraded),
            Operation::CreatePod,
            ChangeKind::Upgrade,
            Some(OLD),
            Work::Recovery,
        ),
        (
            "a lost pod after an earlier rollout's upgrade: a recovery",
            Pod::Missing,
            Some(upgraded_before),
            Operation::CreatePod,
            ChangeKind::Provision,
            None,
            Work::Recovery,
        ),
        (
            "lost again while recovering: a recovery",
            Pod::Missing,
            Some(recovering),
            Operation::CreatePod,
            ChangeKind::Provision,
            None,
            Work::Recovery,
        ),
    ];
    for (what, pod, last, operation, kind, from, work) in rows {
        let s = backend(pod, last);
        let p = plan(&s, NOW);
        let action = p
            .actions
            .first()
            .unwrap_or_else(|| panic!("{what}: no action"));
        assert_eq!(action.operation, operation, "{what}");
        let record = action
            .record
            .as_ref()
            .unwrap_or_else(|| panic!("{what}: no record"));
        assert_eq!(
            (record.kind, record.from.as_deref(), record.to.as_str()),
            (kind, from, NEW),
            "{what}"
        );
        assert_eq!(record.work(), work, "{what}");
    }
}

#[test]
fn a_rollback_still_returns_a_node_recovered_during_its_rollout() {
    // fe1 upgraded (sequence 1), lost its pod and recovered on the new revision (sequence 2,
    // keeping the upgrade's origin); then be's upgrade crash-loops: fe1 goes back too.
    let mut s = cluster(&[("be", Pod::NewNotReady), ("fe1", Pod::New)]);
    let mut recovered_upgrade = upgraded(&s);
    recovered_upgrade.recovery = true;
    recovered_upgrade.sequence = 2;
    node_mut(&mut s, "fe1").change = Some(recovered_upgrade);
    let mut be = upgrading(&s);
    be.sequence = 3;
    node_mut(&mut s, "be").change = Some(be);
    node_mut(&mut s, "be").pod.as_mut().unwrap().restarts = CRASH_LOOP_RESTARTS;
    for node in &mut s.nodes {
        node.history = vec![OLD.into(), NEW.into()];
    }
    let candidates = express_planner::rollout::rollback_candidates(&s, &rollout_id(&s));
    let names: Vec<&str> = candidates
        .iter()
        .map(|(i, _)| s.nodes[*i].name.as_str())
        .collect();
    assert_eq!(names, ["acme-be", "acme-fe1"]);
}

#[test]
fn what_moves_each_node() {
    type Row = (
        &'static str,
        Pod,
        Option<fn(&ClusterSnapshot) -> Change>,
        Option<Work>,
    );
    let rows: [Row; 10] = [
        (
            "never provisioned",
            Pod::Missing,
            None,
            Some(Work::Delivery),
        ),
        (
            "provisioning, pod starting",
            Pod::NewNotReady,
            Some(provisioning),
            Some(Work::Delivery),
        ),
        (
            "on an old revision",
            Pod::Old,
            Some(ran_old),
            Some(Work::Delivery),
        ),
        (
            "its old pod deleted by the upgrade",
            Pod::Terminating,
            Some(upgrading),
            Some(Work::Delivery),
        ),
        (
            "lost its pod after provisioning",
            Pod::Missing,
            Some(provisioned),
            Some(Work::Recovery),
        ),
        (
            "re-created pod starting",
            Pod::NewNotReady,
            Some(recovering),
            Some(Work::Recovery),
        ),
        (
            "an old pod terminating, nothing recorded: its replacement",
            Pod::Terminating,
            None,
            Some(Work::Delivery),
        ),
        ("up to date", Pod::New, Some(upgraded), None),
        (
            "not Ready on its own, nothing changing",
            Pod::NewNotReady,
            Some(upgraded),
            None,
        ),
        ("recovered", Pod::New, Some(recovered), None),
    ];
    for (what, pod, last, work) in rows {
        let s = backend(pod, last);
        let p = plan(&s, NOW);
        assert_eq!(node_work(&s.nodes[0], &p.nodes[0].state), work, "{what}");
    }
}

#[test]
fn a_pod_evicted_on_the_revision_the_node_runs_comes_back_as_a_recovery() {
    let mut s = backend(Pod::Terminating, Some(provisioned));
    node_mut(&mut s, "be").pod.as_mut().unwrap().revision = Some(NEW.into());
    let p = plan(&s, NOW);
    assert_eq!(
        node_work(&s.nodes[0], &p.nodes[0].state),
        Some(Work::Recovery)
    );
}

#[test]
fn an_ended_pod_on_the_revision_the_node_ran_comes_back_as_a_recovery() {
    // The support's ended pod runs the old revision; here it ran the desired one.
    let mut s = backend(Pod::Ended, Some(upgraded));
    node_mut(&mut s, "be").pod.as_mut().unwrap().revision = Some(NEW.into());
    let p = plan(&s, NOW);
    assert_eq!(
        node_work(&s.nodes[0], &p.nodes[0].state),
        Some(Work::Recovery)
    );
    assert_eq!(p.actions[0].operation, Operation::DeleteEndedPod);
}

#[test]
fn a_bounce_is_no_delivery() {
    let mut s = backend(Pod::New, Some(upgraded));
    node_mut(&mut s, "be").bounce = Some(Box::new(BounceRecord {
        request_id: "b1".into(),
        phase: BouncePhase::Terminating,
        message: None,
        force: false,
        timeout_seconds: 600,
        pod_uid: None,
        revision: Some(NEW.into()),
        started_at_ms: Some(NOW - 1_000),
        phase_since_ms: Some(NOW - 1_000),
    }));
    node_mut(&mut s, "be").pod.as_mut().unwrap().terminating = true;
    let p = plan(&s, NOW);
    assert_eq!(
        node_work(&s.nodes[0], &p.nodes[0].state),
        Some(Work::Bounce)
    );
}

#[test]
fn a_failing_recovery_neither_fails_the_rollout_nor_refuses_the_revision() {
    for (what, crash_looping, age_ms) in [
        ("crash-looping", true, 1_000),
        ("not Ready past the progress deadline", false, 3_600_000),
    ] {
        let mut s = backend(Pod::NewNotReady, Some(recovering));
        let pod = node_mut(&mut s, "be").pod.as_mut().unwrap();
        if crash_looping {
            pod.restarts = CRASH_LOOP_RESTARTS + 2;
        }
        pod.created_at_ms = Some(NOW - age_ms);
        let p = plan(&s, NOW);
        assert!(
            p.rollout.failures.is_empty(),
            "{what}: {:?}",
            p.rollout.failures
        );
        assert!(p.rollout.halt.is_none(), "{what}");
        assert_eq!(
            node_work(&s.nodes[0], &p.nodes[0].state),
            Some(Work::Recovery),
            "{what}"
        );
    }
    // The same pod on a delivery fails it (the rule the recovery is exempt from).
    let mut s = backend(Pod::NewNotReady, Some(upgrading));
    node_mut(&mut s, "be").pod.as_mut().unwrap().restarts = CRASH_LOOP_RESTARTS;
    let p = plan(&s, NOW);
    assert_eq!(p.rollout.failures.len(), 1);
    assert!(p.rollout.halt.is_some());
}

#[test]
fn a_new_revision_lost_right_after_ready_still_fails_its_rollout_while_it_runs() {
    // fe1 upgraded (Ready once), then lost its pod: re-created as a recovery of the upgrade.
    // While be still waits for the same rollout, the re-created pod crash-looping fails the
    // rollout as any upgrade would; once nothing else is delivered, it is a plain recovery.
    let recovered_upgrade = |s: &ClusterSnapshot| Change {
        recovery: true,
        ..upgrading(s)
    };
    let mut mid = cluster(&[("fe1", Pod::NewNotReady), ("be", Pod::Old)]);
    let record = recovered_upgrade(&mid);
    node_mut(&mut mid, "fe1").change = Some(record);
    node_mut(&mut mid, "fe1").pod.as_mut().unwrap().restarts = CRASH_LOOP_RESTARTS;
    let p = plan(&mid, NOW);
    assert_eq!(p.rollout.failures.len(), 1, "{:?}", p.rollout.failures);
    assert!(p.rollout.halt.is_some());

    let mut done = cluster(&[("fe1", Pod::NewNotReady), ("be", Pod::New)]);
    let record = recovered_upgrade(&done);
    node_mut(&mut done, "fe1").change = Some(record);
    node_mut(&mut done, "fe1").pod.as_mut().unwrap().restarts = CRASH_LOOP_RESTARTS;
    let p = plan(&done, NOW);
    assert!(p.rollout.failures.is_empty(), "{:?}", p.rollout.failures);
    assert!(p.rollout.halt.is_none());
}
