//! Table tests for rollout safety (DESIGN sections 4 and 5): failure detection, the halt,
//! rollback in reverse order, abort and retry requests.

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use express_api::{ChangeKind, ChangeState};
use express_planner::plan::Deferred;
use express_planner::rollout::{AbortOutcome, CRASH_LOOP_RESTARTS, HaltCause, rollout_id};
use express_planner::{
    Abort, AbortRequest, Change, ClusterSnapshot, InvalidRevision, Operation, Pause, PauseScope,
    plan,
};
use support::*;

const NOW: i64 = 1_000_000_000;

fn record(
    snapshot: &ClusterSnapshot,
    kind: ChangeKind,
    state: ChangeState,
    sequence: u64,
) -> Change {
    Change {
        kind,
        state,
        from: (kind != ChangeKind::Provision).then(|| OLD.to_owned()),
        to: NEW.into(),
        sequence,
        rollout: rollout_id(snapshot),
        recovery: false,
    }
}

/// be and fe1..fe4 mid-upgrade: fe1 and fe2 done (sequences 1, 2), be changing (3) with its new
/// pod in `be_pod`, fe3 and fe4 still old; every node keeps both revisions in history.
fn mid_rollout(be_pod: Pod) -> ClusterSnapshot {
    let mut s = cluster(&[
        ("be", be_pod),
        ("fe1", Pod::New),
        ("fe2", Pod::New),
        ("fe3", Pod::Old),
        ("fe4", Pod::Old),
    ]);
    for (short, sequence, state) in [
        ("fe1", 1, ChangeState::Succeeded),
        ("fe2", 2, ChangeState::Succeeded),
        ("be", 3, ChangeState::InProgress),
    ] {
        let change = record(&s, ChangeKind::Upgrade, state, sequence);
        node_mut(&mut s, short).change = Some(change);
    }
    for node in &mut s.nodes {
        node.history = vec![OLD.into(), NEW.into()];
    }
    s
}

fn crash_loop(s: &mut ClusterSnapshot, short: &str) {
    node_mut(s, short).pod.as_mut().unwrap().restarts = CRASH_LOOP_RESTARTS;
}

fn actions(p: &express_planner::Plan) -> Vec<(String, Operation, Option<String>)> {
    p.actions
        .iter()
        .map(|a| {
            (
                a.name.trim_start_matches("acme-").to_owned(),
                a.operation,
                a.source.kept_revision().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn a_crash_loop_fails_the_rollout_and_rolls_back_the_failed_node_first() {
    let mut s = mid_rollout(Pod::NewNotReady);
    crash_loop(&mut s, "be");
    let p = plan(&s, NOW);
    assert_eq!(p.rollout.failures.len(), 1);
    assert_eq!(p.rollout.failures[0].name, "acme-be");
    assert!(
        p.rollout.failures[0].reason.contains("crash-looping"),
        "{}",
        p.rollout.failures[0].reason
    );
    let halt = p.rollout.halt.clone().expect("halted");
    assert!(halt.rollback);
    assert!(matches!(halt.cause, HaltCause::Failed { ref node, .. } if node == "acme-be"));
    // Nothing moves forward; be returns to the old revision, built from history.
    assert_eq!(
        actions(&p),
        vec![("be".into(), Operation::ReplacePod, Some(OLD.into()))]
    );
    let action = &p.actions[0];
    assert!(action.source.kept_revision().is_some());
    let rollback = action.record.as_ref().unwrap();
    assert_eq!(
        (
            rollback.kind,
            rollback.from.as_deref(),
            rollback.to.as_str()
        ),
        (ChangeKind::Rollback, Some(NEW), OLD)
    );
    assert_eq!(rollback.sequence, 4, "one more than the highest recorded");
    for short in ["fe3", "fe4"] {
        let i = s.nodes.iter().position(|n| n.name == full(short)).unwrap();
        assert_eq!(
            p.nodes[i].deferred,
            Some(Deferred::Halted),
            "{short} is held"
        );
    }
}

#[test]
fn rollback_goes_newest_change_first_one_node_at_a_time() {
    let mut s = mid_rollout(Pod::NewNotReady);
    crash_loop(&mut s, "be");
    let mut driver = Driver::new(s);
    // Record the failure as the operator would, then let the rollback run to its end.
    let failure = plan(&driver.snapshot, NOW).rollout.failures[0].clone();
    let be = &mut driver.snapshot.nodes[failure.node.0];
    be.invalid_revisions.push(InvalidRevision {
        revision: failure.revision,
        reason: failure.reason,
    });
    be.change.as_mut().unwrap().state = ChangeState::Failed;
    let mut order = Vec::new();
    for _ in 0..40 {
        let p = plan(&driver.snapshot, NOW);
        assert!(
            p.actions.len() <= 1,
            "one node at a time: {:?}",
            actions(&p)
        );
        for (name, operation, revision) in actions(&p) {
            assert_eq!(
                revision.as_deref(),
                Some(OLD),
                "{name} returns to the old revision"
            );
            if operation == Operation::ReplacePod {
                order.push(name);
            }
        }
        driver.act();
        driver.tick(|_| true);
    }
    assert_eq!(order, vec!["be", "fe2", "fe1"]);
    for node in &driver.snapshot.nodes {
        let pod = node.pod.as_ref().unwrap();
        assert_eq!(pod.revision.as_deref(), Some(OLD), "{}", node.name);
        assert!(pod.is_ready());
    }
    // Halted for good: the spec still asks for the revision that failed on be.
    let p = plan(&driver.snapshot, NOW);
    assert!(p.actions.is_empty());
    assert!(p.rollout.halt.is_some());
}

#[test]
fn a_slow_node_inside_the_deadline_does_not_fail_but_past_it_does() {
    let mut s = mid_rollout(Pod::NewNotReady);
    s.settings.progress_deadline_seconds = 60;
    node_mut(&mut s, "be").pod.as_mut().unwrap().created_at_ms = Some(NOW - 59_000);
    let p = plan(&s, NOW);
    assert!(p.rollout.failures.is_empty());
    assert!(p.rollout.halt.is_none());
    assert!(p.actions.is_empty(), "waits for be to be Ready");
    assert_eq!(
        p.rollout.deadline_at_ms,
        Some(NOW + 1_000 + 1),
        "look again when it passes"
    );

    let p = plan(&s, NOW + 2_000);
    assert_eq!(p.rollout.failures.len(), 1);
    assert!(
        p.rollout.failures[0]
            .reason
            .contains("progressDeadlineSeconds (60 s)")
    );
}

#[test]
fn a_pod_not_being_changed_is_never_a_rollout_failure() {
    let mut s = cluster(&[("be", Pod::NewNotReady), ("fe1", Pod::New)]);
    crash_loop(&mut s, "be");
    node_mut(&mut s, "be").pod.as_mut().unwrap().created_at_ms = Some(0);
    let p = plan(&s, NOW);
    assert!(p.rollout.failures.is_empty());
    assert!(p.rollout.halt.is_none());
}

#[test]
fn without_auto_rollback_the_failed_node_is_left_as_it_is() {
    let mut s = mid_rollout(Pod::NewNotReady);
    s.settings.auto_rollback = false;
    crash_loop(&mut s, "be");
    let p = plan(&s, NOW);
    let halt = p.rollout.halt.expect("halted");
    assert!(!halt.rollback);
    assert!(p.actions.is_empty());
}

#[test]
fn a_known_invalid_revision_is_refused_until_a_retry() {
    let mut s = cluster(&[("be", Pod::Old), ("fe1", Pod::Old)]);
    node_mut(&mut s, "fe1").invalid_revisions = vec![InvalidRevision {
        revision: NEW.into(),
        reason: "crash-looping".into(),
    }];
    let p = plan(&s, NOW);
    assert!(p.actions.is_empty());
    assert!(
        matches!(p.rollout.halt.as_ref().unwrap().cause, HaltCause::Failed { ref node, .. } if node == "acme-fe1")
    );

    s.control.retry_request = Some("r1".into());
    let p = plan(&s, NOW);
    assert_eq!(p.rollout.retry.as_deref(), Some("r1"));
    assert!(p.rollout.halt.is_none());
    assert_eq!(
        actions(&p),
        vec![("fe1".into(), Operation::ReplacePod, None)]
    );

    // The same request id, already handled, is not acted on again.
    s.control.handled_retry = Some("r1".into());
    let p = plan(&s, NOW);
    assert_eq!(p.rollout.retry, None);
    assert!(p.actions.is_empty());

    // A spec that moves fe1 to another revision is not refused.
    node_mut(&mut s, "fe1").desired.as_mut().unwrap().revision = "rev-fixed".into();
    let p = plan(&s, NOW);
    assert!(p.rollout.halt.is_none());
    assert_eq!(p.actions.len(), 1);
}

#[test]
fn a_node_without_kept_history_is_skipped_and_does_not_block_the_others() {
    let mut s = mid_rollout(Pod::NewNotReady);
    crash_loop(&mut s, "be");
    node_mut(&mut s, "be").history.clear();
    let p = plan(&s, NOW);
    assert_eq!(
        actions(&p),
        vec![("fe2".into(), Operation::ReplacePod, Some(OLD.into()))]
    );
    let be = s.nodes.iter().position(|n| n.name == "acme-be").unwrap();
    assert_eq!(
        p.nodes[be].deferred,
        Some(Deferred::NoHistory {
            revision: OLD.into()
        })
    );
}

#[test]
fn changes_of_an_earlier_rollout_are_not_rolled_back() {
    let mut s = mid_rollout(Pod::NewNotReady);
    crash_loop(&mut s, "be");
    // fe1's record is from another rollout (another set of desired revisions).
    node_mut(&mut s, "fe1").change.as_mut().unwrap().rollout = "earlier".into();
    node_mut(&mut s, "fe1").change.as_mut().unwrap().sequence = 0;
    let candidates = express_planner::rollout::rollback_candidates(&s, &rollout_id(&s));
    let names: Vec<&str> = candidates
        .iter()
        .map(|(i, _)| s.nodes[*i].name.as_str())
        .collect();
    assert_eq!(names, vec!["acme-be", "acme-fe2"]);
}

#[test]
fn abort_holds_the_rollout_and_rolls_back_only_when_asked() {
    let s = mid_rollout(Pod::NewNotReady);
    for rollback in [false, true] {
        let mut s = s.clone();
        s.control.abort_request = Some(AbortRequest {
            id: "a1".into(),
            rollback,
        });
        let p = plan(&s, NOW);
        assert_eq!(
            p.rollout.abort_request,
            Some(("a1".into(), AbortOutcome::Recorded))
        );
        let abort = p.rollout.abort.clone().unwrap();
        assert_eq!(abort.revisions.len(), 5);
        assert!(matches!(
            p.rollout.halt.as_ref().unwrap().cause,
            HaltCause::Aborted { .. }
        ));
        if rollback {
            assert_eq!(
                actions(&p),
                vec![("be".into(), Operation::ReplacePod, Some(OLD.into()))]
            );
        } else {
            assert!(p.actions.is_empty(), "{:?}", actions(&p));
        }
        // Recorded and handled: it keeps holding, and is not acted on again.
        s.control.handled_abort = Some("a1".into());
        s.control.abort = Some(abort);
        let p = plan(&s, NOW);
        assert_eq!(p.rollout.abort_request, None);
        assert!(p.rollout.halt.is_some());
        // A spec change lifts it.
        node_mut(&mut s, "fe3").desired.as_mut().unwrap().revision = "rev-3".into();
        let p = plan(&s, NOW);
        assert!(p.rollout.halt.is_none());
        assert_eq!(p.rollout.abort, None);
    }
}

#[test]
fn abort_with_nothing_in_progress_records_nothing() {
    let mut s = cluster(&[("be", Pod::New), ("fe1", Pod::New)]);
    s.control.abort_request = Some(AbortRequest {
        id: "a1".into(),
        rollback: true,
    });
    let p = plan(&s, NOW);
    assert_eq!(
        p.rollout.abort_request,
        Some(("a1".into(), AbortOutcome::NothingToAbort))
    );
    assert_eq!(p.rollout.abort, None);
    assert!(p.rollout.halt.is_none());
}

#[test]
fn retry_clears_an_abort() {
    let mut s = mid_rollout(Pod::New);
    s.control.abort = Some(Abort {
        request_id: "a1".into(),
        rollback: false,
        revisions: s
            .nodes
            .iter()
            .map(|n| (n.name.clone(), NEW.to_owned()))
            .collect(),
    });
    assert!(plan(&s, NOW).rollout.halt.is_some());
    s.control.retry_request = Some("r1".into());
    let p = plan(&s, NOW);
    assert!(p.rollout.halt.is_none());
    assert_eq!(p.rollout.abort, None);
    assert_eq!(
        actions(&p),
        vec![("fe3".into(), Operation::ReplacePod, None)]
    );
}

#[test]
fn paused_records_the_failure_but_changes_nothing() {
    let mut s = mid_rollout(Pod::NewNotReady);
    crash_loop(&mut s, "be");
    s.pause = Some(Pause {
        scope: PauseScope::Namespace,
        reason: None,
    });
    let p = plan(&s, NOW);
    assert_eq!(p.rollout.failures.len(), 1);
    assert!(p.actions.is_empty());
}

#[test]
fn a_node_caught_mid_replacement_gets_its_old_revision_back_when_halted_without_rollback() {
    let mut s = mid_rollout(Pod::Missing);
    s.settings.auto_rollback = false;
    node_mut(&mut s, "be").replacing = true;
    // fe2 failed earlier; be was mid-replacement (old pod gone, new not created).
    let fe2 = node_mut(&mut s, "fe2");
    fe2.invalid_revisions = vec![InvalidRevision {
        revision: NEW.into(),
        reason: "x".into(),
    }];
    let p = plan(&s, NOW);
    assert_eq!(
        actions(&p),
        vec![("be".into(), Operation::FinishReplacement, Some(OLD.into()))]
    );
    assert!(p.actions[0].source.kept_revision().is_some());
}

#[test]
fn changes_are_recorded_before_they_start() {
    let s = cluster(&[("be", Pod::Missing), ("fe1", Pod::Old)]);
    let p = plan(&s, NOW);
    let be = &p.actions[0];
    assert_eq!(be.operation, Operation::CreatePod);
    let change = be.record.as_ref().unwrap();
    assert_eq!(
        (
            change.kind,
            change.from.as_deref(),
            change.to.as_str(),
            change.sequence
        ),
        (ChangeKind::Provision, None, NEW, 1)
    );
    assert_eq!(change.rollout, rollout_id(&s));

    let s = cluster(&[("be", Pod::New), ("fe1", Pod::Old)]);
    let p = plan(&s, NOW);
    let change = p.actions[0].record.as_ref().unwrap();
    assert_eq!(
        (change.kind, change.from.as_deref(), change.to.as_str()),
        (ChangeKind::Upgrade, Some(OLD), NEW)
    );
}

/// The operator writes a status with a deletion as the snapshot shows the cluster after it:
/// that snapshot's pods are the ones the deletion's watch event brings (the deleted pod
/// terminating, nothing else touched), so the next reconcile finds nothing new to write.
#[test]
fn a_deleted_pod_is_reported_as_its_watch_event_will_show_it() {
    let snapshot = cluster(&[("fe1", Pod::Old), ("fe2", Pod::Old), ("be", Pod::Old)]);
    let plan = plan(&snapshot, NOW);
    let deleted: Vec<_> = plan
        .actions
        .iter()
        .filter(|a| a.operation.retires_pod())
        .map(|a| a.node)
        .collect();
    assert_eq!(deleted.len(), 1, "{:?}", plan.actions);
    let after = snapshot.with_pods_terminating(deleted);
    let watched = cluster(&[
        ("fe1", Pod::Terminating),
        ("fe2", Pod::Old),
        ("be", Pod::Old),
    ]);
    let pods = |s: &ClusterSnapshot| s.nodes.iter().map(|n| n.pod.clone()).collect::<Vec<_>>();
    assert_eq!(pods(&after), pods(&watched));
    // A node without a pod, or an index past the end, is left as it is.
    let missing = cluster(&[("be", Pod::Missing)]);
    assert_eq!(
        missing
            .with_pods_terminating([express_planner::NodeIndex(0), express_planner::NodeIndex(7)]),
        missing
    );
}

#[test]
fn only_a_change_or_a_removal_takes_a_node_out_at_once() {
    use Operation::*;
    let deletes: Vec<_> = [
        CreatePod,
        ReplacePod,
        ResumeReplacement,
        FinishReplacement,
        RemovePod,
        DeleteEndedPod,
        DeleteForBounce,
        CreateForBounce,
    ]
    .into_iter()
    .filter(|o| o.retires_pod())
    .collect();
    assert_eq!(deletes, [ReplacePod, ResumeReplacement, RemovePod]);
}
