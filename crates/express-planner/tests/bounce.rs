//! Table and property tests for DESIGN section 6: when a bounce is refused, waits, starts,
//! moves on and ends, and that it never changes a revision, never acts while paused and never
//! takes more than `maxConcurrent` slots.

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use express_api::BouncePhase;
use express_api::bounce::{APP_STATE_CATCHUP, APP_STATE_REBUILDING};
use express_planner::plan::Deferred;
use express_planner::{
    BouncePlan, BounceRequest, ClusterSnapshot, NodeState, Operation, Pause, PauseScope, Plan, plan,
};
use proptest::prelude::*;
use support::*;

const NOW: i64 = 1_700_000_000_000;

/// A cluster whose pods carry uids (`uid-<node>`), as pods in a cluster do.
fn tenant(rows: &[(&str, Pod)]) -> ClusterSnapshot {
    let mut s = cluster(rows);
    for node in &mut s.nodes {
        let uid = format!("uid-{}", node.name);
        if let Some(pod) = &mut node.pod {
            pod.uid = Some(uid);
        }
        node.history = vec![OLD.into(), NEW.into()];
    }
    s
}

fn request(s: &mut ClusterSnapshot, short: &str, id: &str, force: bool) {
    node_mut(s, short).bounce_request = Some(Box::new(BounceRequest {
        id: id.into(),
        force,
        timeout_seconds: Ok(90),
    }));
}

fn index(s: &ClusterSnapshot, short: &str) -> usize {
    s.nodes.iter().position(|n| n.name == full(short)).unwrap()
}

fn bounce_of<'a>(p: &'a Plan, s: &ClusterSnapshot, short: &str) -> &'a BouncePlan {
    p.nodes[index(s, short)]
        .bounce
        .as_ref()
        .unwrap_or_else(|| panic!("no bounce on {short}"))
}

fn operations(p: &Plan) -> Vec<(String, Operation)> {
    p.actions
        .iter()
        .map(|a| (a.name.trim_start_matches("acme-").to_owned(), a.operation))
        .collect()
}

fn op(short: &str, operation: Operation) -> (String, Operation) {
    (short.to_owned(), operation)
}

/// Plans at `now`, then writes the bounce records back as the operator's report does.
fn step(s: &mut ClusterSnapshot, now: i64) -> Plan {
    let p = plan(s, now);
    record_bounces(s, &p);
    p
}

fn set_app_state(s: &mut ClusterSnapshot, short: &str, state: &str) {
    node_mut(s, short).pod.as_mut().unwrap().app_state = Some(state.into());
}

#[test]
fn a_bounce_deletes_once_recreates_on_the_same_revision_and_succeeds() {
    let mut s = tenant(&[("be", Pod::New), ("fe1", Pod::New)]);
    request(&mut s, "fe1", "b1", false);

    let p = step(&mut s, NOW);
    assert_eq!(operations(&p), vec![op("fe1", Operation::DeleteForBounce)]);
    let b = bounce_of(&p, &s, "fe1");
    assert_eq!(
        (
            b.phase,
            b.previous,
            b.pod_uid.as_deref(),
            b.revision.as_deref()
        ),
        (
            BouncePhase::Terminating,
            None,
            Some("uid-acme-fe1"),
            Some(NEW)
        )
    );
    assert_eq!(p.nodes[index(&s, "fe1")].state, NodeState::Bouncing);

    // The deletion landed: the pod terminates; the bounce waits, with a wake-up at its timeout.
    node_mut(&mut s, "fe1").pod.as_mut().unwrap().terminating = true;
    let p = step(&mut s, NOW + 1_000);
    assert!(p.actions.is_empty(), "{:?}", operations(&p));
    assert_eq!(bounce_of(&p, &s, "fe1").phase, BouncePhase::Terminating);
    assert!(!bounce_of(&p, &s, "fe1").is_transition());
    assert_eq!(p.wake_at_ms(), Some(NOW + 90_000));

    // The old pod is gone: create the new one, from the node's spec (same revision).
    node_mut(&mut s, "fe1").pod = None;
    let p = step(&mut s, NOW + 2_000);
    assert_eq!(operations(&p), vec![op("fe1", Operation::CreateForBounce)]);
    let create = &p.actions[0];
    assert_eq!(
        (
            create.pod_revision(s.node(create.node)),
            create.source.kept_revision().is_some(),
            &create.record
        ),
        (Some(NEW), false, &None)
    );
    assert_eq!(bounce_of(&p, &s, "fe1").phase, BouncePhase::Starting);

    // Created, not Ready yet: wait; Ready: Succeeded, and the node is the rollout's again.
    node_mut(&mut s, "fe1").pod = Some(express_planner::PodObservation {
        uid: Some("uid-new".into()),
        created_at_ms: Some(NOW + 2_500),
        ..pod(NEW, false)
    });
    let p = step(&mut s, NOW + 3_000);
    assert!(p.actions.is_empty());
    assert_eq!(bounce_of(&p, &s, "fe1").phase, BouncePhase::Starting);
    node_mut(&mut s, "fe1").pod.as_mut().unwrap().conditions = pod(NEW, true).conditions;
    let p = step(&mut s, NOW + 4_000);
    let b = bounce_of(&p, &s, "fe1");
    assert_eq!((b.phase, b.is_transition()), (BouncePhase::Succeeded, true));
    assert!(
        b.message.contains("Ready again on revision rev-new"),
        "{}",
        b.message
    );

    // The same id again changes nothing.
    let p = step(&mut s, NOW + 5_000);
    assert!(p.actions.is_empty());
    assert_eq!(p.nodes[index(&s, "fe1")].bounce, None);
    assert_eq!(p.nodes[index(&s, "fe1")].state, NodeState::UpToDate);
}

#[test]
fn refusals_end_at_once_and_touch_nothing() {
    type Tweak = Box<dyn Fn(&mut ClusterSnapshot)>;
    let cases: Vec<(&str, Tweak, &str)> = vec![
        ("down", Box::new(|_| {}), "intentionally down"),
        ("nopod", Box::new(|_| {}), "has no pod"),
        (
            "rebuilding",
            Box::new(|s| set_app_state(s, "fe1", APP_STATE_REBUILDING)),
            "Rebuilding",
        ),
        (
            "pending-change",
            Box::new(|_| {}),
            "pending change out of order",
        ),
        (
            "foreign",
            Box::new(|s| node_mut(s, "fe1").pod.as_mut().unwrap().owned = false),
            "not controlled by this node",
        ),
        (
            "bad-timeout",
            Box::new(|s| {
                node_mut(s, "fe1")
                    .bounce_request
                    .as_mut()
                    .unwrap()
                    .timeout_seconds =
                    Err("annotation express.dev/bounce-timeout: invalid duration \"soon\"".into())
            }),
            "bounce-timeout",
        ),
        (
            "invalid-spec",
            Box::new(|s| node_mut(s, "fe1").desired = Err("bad pod template".into())),
            "spec is invalid (bad pod template)",
        ),
    ];
    for (case, tweak, expected) in cases {
        let fe1 = match case {
            "down" => Pod::DownStillRunning,
            "nopod" => Pod::Missing,
            "pending-change" => Pod::Old,
            _ => Pod::New,
        };
        let mut s = tenant(&[("be", Pod::New), ("fe1", fe1)]);
        request(&mut s, "fe1", "b1", false);
        tweak(&mut s);
        let p = plan(&s, NOW);
        assert!(
            !p.actions.iter().any(|a| matches!(
                a.operation,
                Operation::DeleteForBounce | Operation::CreateForBounce
            )),
            "{case}: {:?}",
            operations(&p)
        );
        let b = bounce_of(&p, &s, "fe1");
        assert_eq!(b.phase, BouncePhase::Refused, "{case}");
        assert!(b.message.contains(expected), "{case}: {}", b.message);
    }
}

#[test]
fn forced_bounces_restart_rebuilding_nodes_and_pending_changes_on_the_revision_they_run() {
    let mut s = tenant(&[("be", Pod::New), ("fe1", Pod::New)]);
    set_app_state(&mut s, "fe1", APP_STATE_REBUILDING);
    request(&mut s, "fe1", "b1", true);
    let p = plan(&s, NOW);
    assert_eq!(operations(&p), vec![op("fe1", Operation::DeleteForBounce)]);

    // fe1 runs the old revision and waits for be (upgrade order): forced, it restarts on the
    // old one, from the spec its ControllerRevision kept; its upgrade comes later.
    let mut s = tenant(&[("be", Pod::Old), ("fe1", Pod::Old)]);
    s.settings.max_concurrent = 2;
    request(&mut s, "fe1", "b1", true);
    let p = step(&mut s, NOW);
    assert_eq!(bounce_of(&p, &s, "fe1").revision.as_deref(), Some(OLD));
    assert!(operations(&p).contains(&op("fe1", Operation::DeleteForBounce)));
    node_mut(&mut s, "fe1").pod = None;
    let p = step(&mut s, NOW + 1_000);
    let create = p
        .action_on(express_planner::NodeIndex(index(&s, "fe1")))
        .unwrap();
    assert_eq!(
        (
            create.operation,
            create.pod_revision(s.node(create.node)),
            create.source.kept_revision().is_some()
        ),
        (Operation::CreateForBounce, Some(OLD), true)
    );

    // Forced, but nothing keeps the revision it runs: refused, never rebuilt from the new spec.
    let mut s = tenant(&[("be", Pod::New), ("fe1", Pod::Old)]);
    node_mut(&mut s, "fe1").history = vec![NEW.into()];
    request(&mut s, "fe1", "b1", true);
    let p = plan(&s, NOW);
    let b = bounce_of(&p, &s, "fe1");
    assert_eq!(b.phase, BouncePhase::Refused);
    assert!(
        b.message
            .contains("no ControllerRevision keeps revision rev-old"),
        "{}",
        b.message
    );
}

#[test]
fn catchup_warns_and_proceeds() {
    let mut s = tenant(&[("be", Pod::New), ("fe1", Pod::New)]);
    set_app_state(&mut s, "fe1", APP_STATE_CATCHUP);
    request(&mut s, "fe1", "b1", false);
    let p = plan(&s, NOW);
    assert_eq!(operations(&p), vec![op("fe1", Operation::DeleteForBounce)]);
    let b = bounce_of(&p, &s, "fe1");
    assert!(b.catchup);
    assert!(b.message.contains("catching up"), "{}", b.message);
}

#[test]
fn while_paused_a_bounce_waits_and_runs_after_resume() {
    let mut s = tenant(&[("be", Pod::New), ("fe1", Pod::New)]);
    s.pause = Some(Pause {
        scope: PauseScope::Namespace,
        reason: Some("maintenance".into()),
    });
    request(&mut s, "fe1", "b1", false);
    let p = step(&mut s, NOW);
    assert!(p.actions.is_empty());
    let b = bounce_of(&p, &s, "fe1");
    assert_eq!(b.phase, BouncePhase::Pending);
    assert!(b.message.contains("maintenance"), "{}", b.message);
    // Still waiting a while later: nothing rewritten.
    let p = step(&mut s, NOW + 60_000);
    assert!(!bounce_of(&p, &s, "fe1").is_transition());

    s.pause = None;
    let p = step(&mut s, NOW + 120_000);
    assert_eq!(operations(&p), vec![op("fe1", Operation::DeleteForBounce)]);
    assert_eq!(
        bounce_of(&p, &s, "fe1").previous,
        Some(BouncePhase::Pending)
    );

    // Paused again between the record and the deletion (an operator restart): nothing is
    // deleted, nor created, until resumed.
    s.pause = Some(Pause {
        scope: PauseScope::Cluster,
        reason: None,
    });
    let p = step(&mut s, NOW + 121_000);
    assert!(p.actions.is_empty(), "{:?}", operations(&p));
    node_mut(&mut s, "fe1").pod = None;
    let p = step(&mut s, NOW + 122_000);
    assert!(p.actions.is_empty(), "{:?}", operations(&p));
    assert_eq!(bounce_of(&p, &s, "fe1").phase, BouncePhase::Starting);
    s.pause = None;
    let p = step(&mut s, NOW + 123_000);
    assert_eq!(operations(&p), vec![op("fe1", Operation::CreateForBounce)]);
}

#[test]
fn a_bounce_waits_for_a_slot_and_holds_one_while_it_runs() {
    // fe1 is upgrading (its new pod not Ready): with maxConcurrent 1, the bounce of fe2 waits.
    let mut s = tenant(&[
        ("be", Pod::New),
        ("fe1", Pod::NewNotReady),
        ("fe2", Pod::New),
    ]);
    request(&mut s, "fe2", "b1", false);
    let p = step(&mut s, NOW);
    assert!(p.actions.is_empty());
    let b = bounce_of(&p, &s, "fe2");
    assert_eq!(b.phase, BouncePhase::Pending);
    assert!(
        b.message.contains("free slot: 1 of maxConcurrent 1"),
        "{}",
        b.message
    );

    // fe1 Ready, fe3 now needs an upgrade: the bounce takes the slot first, fe3 waits for it.
    node_mut(&mut s, "fe1").pod = Some(pod(NEW, true));
    s.nodes.push(node("fe3", Pod::Old));
    let p = step(&mut s, NOW + 1_000);
    assert_eq!(operations(&p), vec![op("fe2", Operation::DeleteForBounce)]);
    assert!(matches!(
        p.nodes[index(&s, "fe3")].deferred,
        Some(Deferred::NoFreeSlot { .. })
    ));
    // Its old pod gone and the new one not created yet, the bounce still holds the slot.
    node_mut(&mut s, "fe2").pod = None;
    let p = step(&mut s, NOW + 2_000);
    assert_eq!(operations(&p), vec![op("fe2", Operation::CreateForBounce)]);
    assert_eq!(p.in_flight, 1);
    assert!(matches!(
        p.nodes[index(&s, "fe3")].deferred,
        Some(Deferred::NoFreeSlot { .. })
    ));
}

#[test]
fn a_node_already_changing_needs_no_second_slot() {
    let mut s = tenant(&[("be", Pod::New), ("fe1", Pod::NewNotReady)]);
    request(&mut s, "fe1", "b1", false);
    let p = plan(&s, NOW);
    assert_eq!(operations(&p), vec![op("fe1", Operation::DeleteForBounce)]);

    // A pod already being replaced: the bounce waits for that to end.
    let mut s = tenant(&[("be", Pod::New), ("fe1", Pod::Terminating)]);
    node_mut(&mut s, "fe1").pod.as_mut().unwrap().revision = Some(NEW.into());
    request(&mut s, "fe1", "b1", false);
    let p = plan(&s, NOW);
    assert!(p.actions.is_empty());
    assert!(
        bounce_of(&p, &s, "fe1")
            .message
            .contains("replacement of its pod")
    );
}

#[test]
fn a_pod_stuck_terminating_fails_the_bounce_at_the_timeout_and_is_never_forced() {
    let mut s = tenant(&[("be", Pod::New), ("fe1", Pod::New)]);
    request(&mut s, "fe1", "b1", false);
    step(&mut s, NOW);
    node_mut(&mut s, "fe1").pod.as_mut().unwrap().terminating = true;
    let p = step(&mut s, NOW + 89_000);
    assert_eq!(bounce_of(&p, &s, "fe1").phase, BouncePhase::Terminating);
    let p = step(&mut s, NOW + 90_000);
    assert!(p.actions.is_empty(), "{:?}", operations(&p));
    let b = bounce_of(&p, &s, "fe1");
    assert_eq!(b.phase, BouncePhase::Failed);
    assert_eq!(
        b.message,
        "pod acme-fe1 stuck terminating for 1m30s; not forced (it is replaced when it goes)"
    );
    // Released: when the pod finally goes, the rollout's rules recreate it.
    node_mut(&mut s, "fe1").pod = None;
    let p = step(&mut s, NOW + 200_000);
    assert_eq!(operations(&p), vec![op("fe1", Operation::CreatePod)]);
}

#[test]
fn a_new_pod_not_ready_in_time_fails_the_bounce() {
    let mut s = tenant(&[("be", Pod::New), ("fe1", Pod::New)]);
    request(&mut s, "fe1", "b1", false);
    step(&mut s, NOW);
    node_mut(&mut s, "fe1").pod = None;
    step(&mut s, NOW + 1_000);
    node_mut(&mut s, "fe1").pod = Some(express_planner::PodObservation {
        uid: Some("uid-new".into()),
        created_at_ms: Some(NOW + 1_500),
        ..pod(NEW, false)
    });
    let p = step(&mut s, NOW + 91_000);
    assert_eq!(bounce_of(&p, &s, "fe1").phase, BouncePhase::Starting);
    assert_eq!(p.wake_at_ms(), Some(NOW + 91_500));
    let p = step(&mut s, NOW + 91_500);
    let b = bounce_of(&p, &s, "fe1");
    assert_eq!(b.phase, BouncePhase::Failed);
    assert!(
        b.message.contains("not Ready within 1m30s"),
        "{}",
        b.message
    );
}

#[test]
fn a_new_request_during_a_bounce_runs_after_it() {
    let mut s = tenant(&[("be", Pod::New), ("fe1", Pod::New)]);
    request(&mut s, "fe1", "b1", false);
    step(&mut s, NOW);
    request(&mut s, "fe1", "b2", false);
    node_mut(&mut s, "fe1").pod.as_mut().unwrap().terminating = true;
    let p = step(&mut s, NOW + 1_000);
    let b = bounce_of(&p, &s, "fe1");
    assert_eq!(
        (b.request_id.as_str(), b.phase),
        ("b1", BouncePhase::Terminating)
    );
    assert!(
        b.message.contains("request b2 runs after this one"),
        "{}",
        b.message
    );
    node_mut(&mut s, "fe1").pod = Some(express_planner::PodObservation {
        uid: Some("uid-new".into()),
        ..pod(NEW, true)
    });
    let p = step(&mut s, NOW + 2_000);
    assert_eq!(bounce_of(&p, &s, "fe1").phase, BouncePhase::Succeeded);
    let p = step(&mut s, NOW + 3_000);
    let b = bounce_of(&p, &s, "fe1");
    assert_eq!(
        (b.request_id.as_str(), b.phase, b.pod_uid.as_deref()),
        ("b2", BouncePhase::Terminating, Some("uid-new"))
    );
    assert_eq!(operations(&p), vec![op("fe1", Operation::DeleteForBounce)]);
}

#[test]
fn after_a_restart_each_step_resumes_from_the_recorded_phase() {
    // Terminating recorded, the deletion never sent: it is sent (the first time).
    let mut s = tenant(&[("be", Pod::New), ("fe1", Pod::New)]);
    request(&mut s, "fe1", "b1", false);
    step(&mut s, NOW);
    let p = step(&mut s, NOW + 1_000);
    assert_eq!(operations(&p), vec![op("fe1", Operation::DeleteForBounce)]);

    // Terminating recorded, and the new pod already created by a create whose answer was
    // lost: no second create, no deletion of the new pod.
    node_mut(&mut s, "fe1").pod = Some(express_planner::PodObservation {
        uid: Some("uid-new".into()),
        ..pod(NEW, false)
    });
    let p = step(&mut s, NOW + 2_000);
    assert!(p.actions.is_empty(), "{:?}", operations(&p));
    assert_eq!(bounce_of(&p, &s, "fe1").phase, BouncePhase::Starting);
}

#[test]
fn a_halted_rollout_does_not_hold_a_bounce() {
    let mut s = tenant(&[("be", Pod::New), ("fe1", Pod::New), ("fe2", Pod::Old)]);
    s.control.abort = Some(express_planner::Abort {
        request_id: "a1".into(),
        rollback: false,
        revisions: [(full("fe2"), NEW.to_owned())].into_iter().collect(),
    });
    request(&mut s, "fe1", "b1", false);
    let p = plan(&s, NOW);
    assert!(p.rollout.halt.is_some());
    assert_eq!(operations(&p), vec![op("fe1", Operation::DeleteForBounce)]);
}

// ---------------------------------------------------------------------------------------------
// Property: random clusters, random bounce requests, random pauses and random progress.

fn arb_bounce_cluster() -> impl Strategy<Value = (ClusterSnapshot, Vec<(bool, bool, u8)>)> {
    let pod_state = prop_oneof![
        1 => Just(Pod::Missing),
        2 => Just(Pod::Old),
        4 => Just(Pod::New),
        1 => Just(Pod::NewNotReady),
        1 => Just(Pod::Terminating),
        1 => Just(Pod::DownStillRunning),
    ];
    let row = (
        pod_state,
        prop_oneof![2 => Just(None), 1 => Just(Some(false)), 1 => Just(Some(true))],
        prop_oneof![4 => Just(None), 1 => Just(Some(APP_STATE_REBUILDING)), 1 => Just(Some(APP_STATE_CATCHUP))],
    );
    (1..=8usize, 1..=3u32, any::<bool>())
        .prop_flat_map(move |(frontends, max_concurrent, disabled)| {
            (
                prop::collection::vec(row.clone(), frontends + 1),
                Just(max_concurrent),
                Just(disabled),
                prop::collection::vec((any::<bool>(), any::<bool>(), 0..4u8), 40),
            )
        })
        .prop_map(|(rows, max_concurrent, disabled, script)| {
            let names = node_names(1, rows.len() - 1);
            let table: Vec<(&str, Pod)> = names
                .iter()
                .zip(&rows)
                .map(|(n, (p, ..))| (n.as_str(), *p))
                .collect();
            let mut s = tenant(&table);
            s.settings.max_concurrent = max_concurrent;
            s.settings.dependencies_disabled = disabled;
            s.settings.progress_deadline_seconds = 3_600;
            for (i, (_, bounce, app_state)) in rows.iter().enumerate() {
                if let Some(force) = bounce {
                    s.nodes[i].bounce_request = Some(Box::new(BounceRequest {
                        id: format!("b-{i}"),
                        force: *force,
                        timeout_seconds: Ok(30),
                    }));
                }
                if let (Some(state), Some(pod)) = (app_state, &mut s.nodes[i].pod) {
                    pod.app_state = Some((*state).to_owned());
                }
            }
            (s, script)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// No bounce step while paused; never more new changes and bounces than free slots; a
    /// bounce's new pod always runs the revision its old pod ran; each request deletes at most
    /// one pod; and every bounce ends.
    #[test]
    fn bounces_never_exceed_slots_act_while_paused_or_change_a_revision((start, script) in arb_bounce_cluster()) {
        let mut driver = Driver::new(start);
        let mut ran_on: std::collections::HashMap<String, (String, Option<String>)> = Default::default();
        let mut deletes: std::collections::HashMap<String, usize> = Default::default();
        for (round, &(paused, advance, seed)) in script.iter().enumerate() {
            driver.snapshot.pause = paused.then_some(Pause { scope: PauseScope::Cluster, reason: None });
            driver.now_ms = NOW + round as i64 * 5_000;
            let before = driver.snapshot.clone();
            let p = plan(&before, driver.now_ms);
            let free = (before.settings.max_concurrent as usize).saturating_sub(p.in_flight);
            let mut starts = 0;
            for action in &p.actions {
                let node = before.node(action.node);
                let bouncing_before = node.bounce.as_ref().is_some_and(|b| b.phase.holds_pod());
                match action.operation {
                    Operation::DeleteForBounce | Operation::CreateForBounce => {
                        prop_assert!(!paused, "bounce step while paused");
                        let b = p.nodes[action.node.0].bounce.as_ref().unwrap();
                        if action.operation == Operation::DeleteForBounce {
                            *deletes.entry(b.request_id.clone()).or_default() += 1;
                            let pod = node.pod.as_ref().unwrap();
                            ran_on.insert(b.request_id.clone(), (node.name.clone(), pod.revision.clone()));
                            // A bounce starting on a node not in flight takes a slot.
                            if !bouncing_before && !express_planner::classify(node).in_flight() {
                                starts += 1;
                            }
                        } else {
                            let (name, revision) = ran_on.get(&b.request_id).cloned().unwrap_or_default();
                            prop_assert_eq!(&name, &node.name);
                            prop_assert_eq!(action.pod_revision(node).map(str::to_owned), revision, "revision changed by a bounce");
                        }
                    }
                    _ => {
                        if action.record.is_some() && !matches!(action.operation, Operation::FinishReplacement) {
                            starts += 1;
                        }
                    }
                }
            }
            prop_assert!(starts <= free, "{starts} starts with {free} free slots");
            driver.act();
            // Random progress: some pods terminate or become Ready; a random node's request id
            // changes now and then.
            driver.tick(|i| advance || (i as u8 % 4) == seed);
            if seed == 3 && round % 7 == 0 {
                let i = round % driver.snapshot.nodes.len();
                if let Some(r) = &mut driver.snapshot.nodes[i].bounce_request {
                    r.id = format!("{}-again", r.id);
                }
            }
        }
        for (id, count) in &deletes {
            prop_assert!(*count <= 1, "request {id} deleted {count} pods");
        }
        // Unpaused, with time passing, every bounce ends.
        driver.snapshot.pause = None;
        for round in 0..40 {
            driver.now_ms += 40_000 + round;
            driver.act();
            driver.tick(|_| true);
        }
        for node in &driver.snapshot.nodes {
            if let Some(b) = &node.bounce {
                prop_assert!(b.phase.is_final(), "{} left in {:?}", node.name, b.phase);
            }
        }
    }
}
