//! Table tests: every scenario of DESIGN section 3 (rule 7 and the rules before it), each
//! asserting the exact order in which nodes are started.

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use express_api::NodeKind;
use express_planner::simulate::{StepAction, simulate};
use express_planner::{Blocked, NodeState, Operation, Pause, PauseScope, UnmetReason, plan};
use support::*;

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The order from the fine-grained driver and from the CLI's simulation must agree.
fn assert_order(snapshot: express_planner::ClusterSnapshot, expected: &[&str]) {
    let simulated: Vec<String> = simulate(&snapshot, Some(1))
        .steps
        .iter()
        .map(|s| s.node.trim_start_matches("acme-").to_owned())
        .collect();
    assert_eq!(simulated, names(expected), "simulate()");
    assert_eq!(rollout_order(snapshot), names(expected), "driver");
}

const FIVE: [&str; 5] = ["be", "fe1", "fe2", "fe3", "fe4"];

fn five(state: Pod) -> express_planner::ClusterSnapshot {
    cluster(&FIVE.map(|n| (n, state)))
}

#[test]
fn all_up_to_date_does_nothing() {
    let snapshot = five(Pod::New);
    let p = plan(&snapshot, 0);
    assert!(p.actions.is_empty());
    assert!(p.nodes.iter().all(|n| n.state == NodeState::UpToDate));
    assert_order(snapshot, &[]);
}

#[test]
fn provisioning_from_nothing_is_backend_then_frontends_in_order() {
    assert_order(five(Pod::Missing), &["be", "fe1", "fe2", "fe3", "fe4"]);
}

#[test]
fn full_upgrade_runs_fe1_fe2_be_fe3_fe4() {
    assert_order(five(Pod::Old), &["fe1", "fe2", "be", "fe3", "fe4"]);
}

#[test]
fn frontend_only_change_runs_frontends_in_order() {
    let snapshot = cluster(&[
        ("be", Pod::New),
        ("fe1", Pod::Old),
        ("fe2", Pod::Old),
        ("fe3", Pod::Old),
        ("fe4", Pod::Old),
    ]);
    assert_order(snapshot, &["fe1", "fe2", "fe3", "fe4"]);
}

#[test]
fn backend_only_change_touches_only_the_backend() {
    let snapshot = cluster(&[
        ("be", Pod::Old),
        ("fe1", Pod::New),
        ("fe2", Pod::New),
        ("fe3", Pod::New),
    ]);
    assert_order(snapshot, &["be"]);
}

#[test]
fn backend_pod_missing_is_recreated_first_and_alone() {
    let snapshot = cluster(&[
        ("be", Pod::Missing),
        ("fe1", Pod::New),
        ("fe2", Pod::New),
        ("fe3", Pod::New),
    ]);
    assert_order(snapshot, &["be"]);
}

#[test]
fn missing_frontend_pods_are_recreated_in_order() {
    let snapshot = cluster(&[
        ("be", Pod::New),
        ("fe1", Pod::New),
        ("fe2", Pod::Missing),
        ("fe3", Pod::Missing),
        ("fe4", Pod::New),
    ]);
    let first = plan(&snapshot, 0);
    assert_eq!(first.actions.len(), 1);
    assert_eq!(first.actions[0].name, "acme-fe2");
    let fe3 = &first.nodes[3];
    assert_eq!(fe3.prerequisites, names(&["acme-fe2"]));
    assert_eq!(fe3.waiting_for[0].reason, UnmetReason::PodMissing);
    assert_order(snapshot, &["fe2", "fe3"]);
}

#[test]
fn ended_pod_is_cleared_and_provisioned_again() {
    let snapshot = cluster(&[("be", Pod::New), ("fe1", Pod::Ended)]);
    let first = plan(&snapshot, 0);
    assert_eq!(first.actions[0].operation, Operation::DeleteEndedPod);
    assert_order(snapshot, &["fe1"]);
}

#[test]
fn per_node_version_override_changes_only_that_node() {
    let mut snapshot = five(Pod::New);
    node_mut(&mut snapshot, "fe3")
        .desired
        .as_mut()
        .map(|d| d.revision = "rev-fe3-pinned".into())
        .ok();
    assert_order(snapshot, &["fe3"]);
}

#[test]
fn down_frontend_is_skipped_and_prerequisites_pass_through_it() {
    let snapshot = cluster(&[
        ("be", Pod::Old),
        ("fe1", Pod::Old),
        ("fe2", Pod::Down),
        ("fe3", Pod::Old),
        ("fe4", Pod::Old),
    ]);
    let first = plan(&snapshot, 0);
    assert_eq!(
        first.upgrade_order,
        names(&["acme-fe1", "acme-be", "acme-fe3", "acme-fe4"])
    );
    assert_eq!(
        first.nodes[0].prerequisites,
        names(&["acme-fe1"]),
        "be waits for fe1"
    );
    assert_order(snapshot, &["fe1", "be", "fe3", "fe4"]);

    // Provisioning: fe3 waits for fe1 once fe2 is out of the list.
    let provisioning = cluster(&[
        ("be", Pod::Missing),
        ("fe1", Pod::Missing),
        ("fe2", Pod::Down),
        ("fe3", Pod::Missing),
    ]);
    let p = plan(&provisioning, 0);
    assert_eq!(p.nodes[3].prerequisites, names(&["acme-fe1"]));
    assert_order(provisioning, &["be", "fe1", "fe3"]);
}

#[test]
fn first_node_of_the_reduced_list_has_no_prerequisite() {
    let snapshot = cluster(&[
        ("be", Pod::Down),
        ("fe1", Pod::Missing),
        ("fe2", Pod::Missing),
    ]);
    let p = plan(&snapshot, 0);
    assert_eq!(p.actions[0].name, "acme-fe1");
    assert!(p.nodes[1].prerequisites.is_empty());
    assert_order(snapshot, &["fe1", "fe2"]);
}

#[test]
fn explicit_prerequisite_on_down_node_is_replaced_transitively() {
    // fe4 waits explicitly for fe3; fe3 and fe2 are down, so fe4 waits for what fe2 waits for.
    let mut snapshot = cluster(&[
        ("be", Pod::Old),
        ("fe1", Pod::Old),
        ("fe2", Pod::Down),
        ("fe3", Pod::Down),
        ("fe4", Pod::Old),
    ]);
    set_upgrade_prerequisites(&mut snapshot, "fe4", &[prerequisite("fe3")]);
    set_upgrade_prerequisites(&mut snapshot, "fe3", &[prerequisite("fe2")]);
    let p = plan(&snapshot, 0);
    // fe2's default upgrade prerequisite is fe1.
    assert_eq!(p.nodes[4].prerequisites, names(&["acme-fe1"]));
}

#[test]
fn node_set_down_mid_rollout_is_removed_and_the_rollout_goes_on() {
    let mut driver = Driver::new(five(Pod::Old));
    driver.act(); // fe1 starts
    driver.tick(|_| true);
    node_mut(&mut driver.snapshot, "fe3").up = false;
    assert!(driver.run_to_end());
    let started: Vec<(String, &str)> = driver
        .started
        .iter()
        .map(|s| (s.node.trim_start_matches("acme-").to_owned(), s.action))
        .collect();
    assert_eq!(
        started,
        vec![
            ("fe1".into(), "Upgrade"),
            ("fe3".into(), "Delete"),
            ("fe2".into(), "Upgrade"),
            ("be".into(), "Upgrade"),
            ("fe4".into(), "Upgrade"),
        ]
    );
    assert!(driver.all_converged());
}

#[test]
fn node_brought_back_mid_rollout_is_provisioned_without_deadlock() {
    let mut driver = Driver::new(cluster(&[
        ("be", Pod::Old),
        ("fe1", Pod::Old),
        ("fe2", Pod::Down),
        ("fe3", Pod::Old),
    ]));
    driver.act(); // fe1
    node_mut(&mut driver.snapshot, "fe2").up = true;
    assert!(driver.run_to_end());
    assert_eq!(driver.order(), names(&["fe1", "fe2", "be", "fe3"]));
    assert!(driver.all_converged());
}

#[test]
fn frontend_pod_lost_mid_upgrade_does_not_deadlock() {
    // fe1 waits (provisioning) for be, whose upgrade waits for fe2, whose upgrade waits for
    // fe1: be on its old revision must satisfy fe1.
    let snapshot = cluster(&[
        ("be", Pod::Old),
        ("fe1", Pod::Missing),
        ("fe2", Pod::Old),
        ("fe3", Pod::Old),
    ]);
    assert_order(snapshot, &["fe1", "fe2", "be", "fe3"]);
}

#[test]
fn nodes_added_and_removed_mid_rollout() {
    let mut driver = Driver::new(five(Pod::Old));
    driver.act();
    driver.tick(|_| true);
    driver.act(); // fe1 recreated
    driver.tick(|_| true);
    // fe5 added (no pod yet), fe3 deleted from the cluster.
    driver.snapshot.nodes.push(node("fe5", Pod::Missing));
    driver.snapshot.nodes.retain(|n| n.name != "acme-fe3");
    assert!(driver.run_to_end());
    assert_eq!(driver.order(), names(&["fe1", "fe2", "be", "fe4", "fe5"]));
    assert!(driver.all_converged());
}

#[test]
fn own_health_never_blocks_own_reconciliation() {
    let snapshot = cluster(&[
        ("be", Pod::Old),
        ("fe1", Pod::OldNotReady),
        ("fe2", Pod::Old),
    ]);
    let p = plan(&snapshot, 0);
    assert_eq!(p.actions[0].name, "acme-fe1");
    assert_eq!(p.actions[0].operation, Operation::ReplacePod);
}

#[test]
fn explicit_prerequisites_replace_defaults() {
    // fe3 is the canary: it has no prerequisite (an empty list is not "default") and fe1
    // waits for it. Among nodes free to go, the default upgrade list still sets priority.
    let mut snapshot = five(Pod::Old);
    set_upgrade_prerequisites(&mut snapshot, "fe3", &[]);
    set_upgrade_prerequisites(&mut snapshot, "fe1", &[prerequisite("fe3")]);
    let p = plan(&snapshot, 0);
    assert_eq!(p.nodes[1].prerequisites, names(&["acme-fe3"]));
    assert!(p.nodes[3].prerequisites.is_empty());
    assert_order(snapshot.clone(), &["fe3", "fe1", "fe2", "be", "fe4"]);

    // With two slots the canary and the next free node (fe4 waits for fe3 by default) don't
    // both go: fe4's prerequisite is being changed in the same step.
    snapshot.settings.max_concurrent = 2;
    let p = plan(&snapshot, 0);
    let started: Vec<&str> = p.actions.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(started, ["acme-fe3"]);
    assert_eq!(
        p.nodes[4].waiting_for[0].reason,
        UnmetReason::Revision {
            required: NEW.into(),
            running: Some(OLD.into())
        }
    );
}

#[test]
fn pinned_revision_and_version_are_checked() {
    // be may upgrade only once fe2 runs revision rev-old (already true), not the desired one.
    let mut snapshot = cluster(&[("be", Pod::Old), ("fe1", Pod::Old), ("fe2", Pod::Old)]);
    let mut pinned = prerequisite("fe2");
    pinned.deployment_revision = Some(OLD.into());
    set_upgrade_prerequisites(&mut snapshot, "be", &[pinned]);
    let p = plan(&snapshot, 0);
    let started: Vec<&str> = p.actions.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(started, ["acme-fe1"], "maxConcurrent 1 leaves be for later");
    assert!(
        p.nodes[0].waiting_for.is_empty(),
        "be's pinned prerequisite is met"
    );

    let mut version_pin = prerequisite("fe2");
    version_pin.express_version = Some("v-other".into());
    set_upgrade_prerequisites(&mut snapshot, "be", &[version_pin]);
    let p = plan(&snapshot, 0);
    assert_eq!(
        p.nodes[0].waiting_for[0].reason,
        UnmetReason::Version {
            required: "v-other".into(),
            running: Some(OLD.into())
        }
    );
    assert!(
        p.nodes[0].waiting_for[0]
            .to_string()
            .contains("needs v-other")
    );
}

#[test]
fn prerequisite_on_a_non_ready_condition() {
    let mut snapshot = cluster(&[("be", Pod::New), ("fe1", Pod::Missing)]);
    let mut synced = prerequisite("be");
    synced.pod_condition_type = Some("express.dev/Synced".into());
    synced.condition_status = Some("True".into());
    set_provisioning_prerequisites(&mut snapshot, "fe1", &[synced]);
    let p = plan(&snapshot, 0);
    assert!(p.actions.is_empty());
    assert_eq!(
        p.nodes[1].waiting_for[0].reason,
        UnmetReason::Condition {
            type_: "express.dev/Synced".into(),
            required: "True".into(),
            actual: None
        }
    );
    node_mut(&mut snapshot, "be")
        .pod
        .as_mut()
        .expect("pod")
        .conditions
        .push(express_planner::PodCondition {
            type_: "express.dev/Synced".into(),
            status: "True".into(),
        });
    assert_eq!(plan(&snapshot, 0).actions[0].name, "acme-fe1");
}

#[test]
fn unknown_prerequisite_waits_with_a_clear_message() {
    let mut snapshot = cluster(&[
        ("be", Pod::New),
        ("fe1", Pod::Missing),
        ("fe2", Pod::Missing),
    ]);
    set_provisioning_prerequisites(&mut snapshot, "fe1", &[prerequisite("be9")]);
    let p = plan(&snapshot, 0);
    assert!(p.actions.is_empty());
    let message = p.nodes[1].waiting_for[0].to_string();
    assert_eq!(
        message,
        "Backend acme-be9: no such node in Express cluster acme"
    );
}

#[test]
fn cycle_blocks_the_cluster_and_names_the_cycle() {
    let mut snapshot = five(Pod::Old);
    set_upgrade_prerequisites(&mut snapshot, "fe1", &[prerequisite("fe3")]);
    let p = plan(&snapshot, 0);
    assert!(p.actions.is_empty());
    let Some(Blocked::InvalidSpec(message)) = p.blocked else {
        panic!("expected InvalidSpec, got {:?}", p.blocked)
    };
    assert_eq!(
        message,
        "upgrade prerequisites form a cycle: Backend acme-be -> Frontend acme-fe2 -> Frontend acme-fe1 -> Frontend acme-fe3 -> Backend acme-be"
    );
}

#[test]
fn cycle_through_down_nodes_is_detected() {
    let mut snapshot = cluster(&[
        ("be", Pod::Old),
        ("fe1", Pod::Down),
        ("fe2", Pod::Down),
        ("fe3", Pod::Old),
    ]);
    set_upgrade_prerequisites(&mut snapshot, "fe3", &[prerequisite("fe1")]);
    set_upgrade_prerequisites(&mut snapshot, "fe1", &[prerequisite("fe2")]);
    set_upgrade_prerequisites(&mut snapshot, "fe2", &[prerequisite("fe1")]);
    let p = plan(&snapshot, 0);
    assert!(
        matches!(&p.blocked, Some(Blocked::InvalidSpec(m)) if m.contains("acme-fe1 -> Frontend acme-fe2 -> Frontend acme-fe1")),
        "{:?}",
        p.blocked
    );
    assert!(p.actions.is_empty());
}

#[test]
fn self_prerequisite_is_a_cycle() {
    let mut snapshot = cluster(&[("be", Pod::Missing)]);
    set_provisioning_prerequisites(&mut snapshot, "be", &[prerequisite("be")]);
    let p = plan(&snapshot, 0);
    assert_eq!(
        p.blocked,
        Some(Blocked::InvalidSpec(
            "provisioning prerequisites form a cycle: Backend acme-be -> Backend acme-be".into()
        ))
    );
}

#[test]
fn global_disabled_lifts_ordering_but_not_max_concurrent() {
    let mut snapshot = five(Pod::Missing);
    snapshot.settings.dependencies_disabled = true;
    snapshot.settings.max_concurrent = 3;
    let p = plan(&snapshot, 0);
    let started: Vec<&str> = p.actions.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(started, ["acme-be", "acme-fe1", "acme-fe2"]);
    assert!(matches!(
        p.nodes[3].deferred,
        Some(express_planner::plan::Deferred::NoFreeSlot { .. })
    ));
    snapshot.settings.max_concurrent = 10;
    assert_eq!(plan(&snapshot, 0).actions.len(), 5);
}

#[test]
fn per_node_disabled_lifts_ordering_for_that_node_only() {
    let mut snapshot = five(Pod::Missing);
    snapshot.settings.max_concurrent = 5;
    node_mut(&mut snapshot, "fe4").dependencies = Some(express_api::DeploymentDependencies {
        disabled: true,
        ..Default::default()
    });
    let started: Vec<String> = plan(&snapshot, 0)
        .actions
        .iter()
        .map(|a| a.name.clone())
        .collect();
    assert_eq!(started, names(&["acme-be", "acme-fe4"]));
}

#[test]
fn max_concurrent_above_one_starts_independent_nodes_together() {
    // Frontend-only change: fe3 waits for be, which is already up to date, so it can go with fe1.
    let mut snapshot = cluster(&[
        ("be", Pod::New),
        ("fe1", Pod::Old),
        ("fe2", Pod::Old),
        ("fe3", Pod::Old),
        ("fe4", Pod::Old),
    ]);
    snapshot.settings.max_concurrent = 2;
    let started: Vec<String> = plan(&snapshot, 0)
        .actions
        .iter()
        .map(|a| a.name.clone())
        .collect();
    assert_eq!(started, names(&["acme-fe1", "acme-fe3"]));
    let mut driver = Driver::new(snapshot);
    assert!(driver.run_to_end());
    assert_eq!(driver.order(), names(&["fe1", "fe3", "fe2", "fe4"]));
}

#[test]
fn in_flight_nodes_use_up_the_slots() {
    let mut snapshot = five(Pod::Old);
    snapshot.settings.dependencies_disabled = true;
    node_mut(&mut snapshot, "fe1").pod = Some(pod(NEW, false)); // starting
    let p = plan(&snapshot, 0);
    assert_eq!(p.in_flight, 1);
    assert!(p.actions.is_empty(), "maxConcurrent 1 is taken by fe1");
}

#[test]
fn backend_upgrade_position_zero_and_beyond_the_frontends() {
    let mut first = five(Pod::Old);
    first.settings.backend_upgrade_position = 0;
    assert_order(first, &["be", "fe1", "fe2", "fe3", "fe4"]);

    let mut last = five(Pod::Old);
    last.settings.backend_upgrade_position = 10;
    assert_order(last, &["fe1", "fe2", "fe3", "fe4", "be"]);
}

#[test]
fn several_backends_keep_their_own_order() {
    let snapshot = cluster(&[
        ("be2", Pod::Old),
        ("be", Pod::Old),
        ("fe1", Pod::Old),
        ("fe2", Pod::Old),
        ("fe3", Pod::Old),
    ]);
    assert_order(snapshot, &["fe1", "fe2", "be", "be2", "fe3"]);
    let provisioning = cluster(&[
        ("fe1", Pod::Missing),
        ("be2", Pod::Missing),
        ("be", Pod::Missing),
    ]);
    assert_order(provisioning, &["be", "be2", "fe1"]);
}

#[test]
fn natural_order_puts_fe10_after_fe9() {
    let rows: Vec<(String, Pod)> = (1..=11).map(|i| (format!("fe{i}"), Pod::Missing)).collect();
    let mut snapshot = cluster(&[("be", Pod::New)]);
    snapshot
        .nodes
        .extend(rows.iter().rev().map(|(n, s)| node(n, *s)));
    let expected: Vec<String> = (1..=11).map(|i| format!("fe{i}")).collect();
    assert_eq!(rollout_order(snapshot), expected);
}

#[test]
fn paused_cluster_does_nothing_but_still_explains() {
    for scope in [
        PauseScope::Operator,
        PauseScope::Namespace,
        PauseScope::Cluster,
    ] {
        let mut snapshot = five(Pod::Old);
        snapshot.pause = Some(Pause {
            scope,
            reason: Some("change freeze".into()),
        });
        let p = plan(&snapshot, 0);
        assert!(p.actions.is_empty());
        assert!(matches!(p.blocked, Some(Blocked::Paused(ref pause)) if pause.scope == scope));
        assert_eq!(
            p.nodes[1].deferred,
            Some(express_planner::plan::Deferred::Blocked)
        );
        assert_eq!(
            p.nodes[2].waiting_for[0].node, "acme-fe1",
            "waiting is still reported"
        );
    }
}

#[test]
fn paused_cluster_does_not_even_finish_a_replacement() {
    let mut snapshot = five(Pod::Old);
    let fe1 = node_mut(&mut snapshot, "fe1");
    fe1.pod = None;
    fe1.replacing = true;
    snapshot.pause = Some(Pause {
        scope: PauseScope::Cluster,
        reason: None,
    });
    assert!(plan(&snapshot, 0).actions.is_empty());
}

#[test]
fn recorded_replacement_is_finished_without_gating() {
    // fe1's old pod is gone; its provisioning prerequisite (be on the new revision) is unmet, but
    // the replacement was already decided under the upgrade rules: finish it.
    let mut snapshot = five(Pod::Old);
    let fe1 = node_mut(&mut snapshot, "fe1");
    fe1.pod = None;
    fe1.replacing = true;
    let p = plan(&snapshot, 0);
    assert_eq!(p.in_flight, 1);
    assert_eq!(p.actions.len(), 1);
    assert_eq!(p.actions[0].operation, Operation::FinishReplacement);

    // Old pod still there (operator died between recording and deleting): delete it again.
    let fe1 = node_mut(&mut snapshot, "fe1");
    fe1.pod = Some(pod(OLD, true));
    let p = plan(&snapshot, 0);
    assert_eq!(p.actions[0].operation, Operation::ResumeReplacement);
}

#[test]
fn pods_not_owned_by_the_node_are_never_touched() {
    let mut snapshot = cluster(&[("be", Pod::Old), ("fe1", Pod::DownStillRunning)]);
    for name in ["be", "fe1"] {
        node_mut(&mut snapshot, name)
            .pod
            .as_mut()
            .expect("pod")
            .owned = false;
    }
    let p = plan(&snapshot, 0);
    assert!(p.actions.is_empty());
    assert_eq!(p.nodes[0].state, NodeState::PodNotOwned);
    assert_eq!(p.nodes[1].state, NodeState::PodNotOwned);
}

#[test]
fn invalid_node_is_left_alone_and_its_dependents_wait() {
    let mut snapshot = cluster(&[("be", Pod::Missing), ("fe1", Pod::Missing)]);
    node_mut(&mut snapshot, "be").desired = Err("no expressVersion".into());
    let p = plan(&snapshot, 0);
    assert!(p.actions.is_empty());
    assert_eq!(
        p.nodes[0].state,
        NodeState::InvalidSpec("no expressVersion".into())
    );
    assert_eq!(
        p.nodes[1].waiting_for[0].to_string(),
        "Backend acme-be: pod does not exist"
    );
}

#[test]
fn spec_errors_and_zero_max_concurrent_block_everything() {
    let mut snapshot = five(Pod::Missing);
    snapshot.spec_errors.push("two ExpressClusters".into());
    assert!(matches!(
        plan(&snapshot, 0).blocked,
        Some(Blocked::InvalidSpec(_))
    ));
    let mut zero = five(Pod::Missing);
    zero.settings.max_concurrent = 0;
    let p = plan(&zero, 0);
    assert_eq!(
        p.blocked,
        Some(Blocked::InvalidSpec(
            "rollout.maxConcurrent must be at least 1".into()
        ))
    );
    assert!(p.actions.is_empty());
}

#[test]
fn removal_of_a_down_node_is_a_delete_step() {
    let snapshot = cluster(&[
        ("be", Pod::New),
        ("fe1", Pod::New),
        ("fe2", Pod::DownStillRunning),
    ]);
    let simulation = simulate(&snapshot, Some(1));
    assert_eq!(simulation.steps.len(), 1);
    assert_eq!(simulation.steps[0].action, StepAction::Delete);
    assert_eq!(simulation.steps[0].kind, NodeKind::Frontend);
    assert!(simulation.pending.is_empty());
}

#[test]
fn dangling_prerequisites_are_listed_for_both_phases() {
    let mut snapshot = cluster(&[("be", Pod::New), ("fe1", Pod::New)]);
    set_upgrade_prerequisites(
        &mut snapshot,
        "fe1",
        &[prerequisite("fe7"), prerequisite("be")],
    );
    set_provisioning_prerequisites(&mut snapshot, "be", &[prerequisite("be2")]);
    let found: Vec<String> = express_planner::prerequisites::dangling_prerequisites(&snapshot)
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert_eq!(
        found,
        [
            "Backend acme-be: provisioning prerequisite Backend acme-be2: no such node in Express cluster acme",
            "Frontend acme-fe1: upgrade prerequisite Frontend acme-fe7: no such node in Express cluster acme",
        ]
    );
    // All pods are up to date, so the planner itself has nothing to wait for.
    assert!(
        plan(&snapshot, 0)
            .nodes
            .iter()
            .all(|n| n.waiting_for.is_empty())
    );
}
