//! Property tests over random clusters of 1 to 200 nodes in random states.
//!
//! The prerequisite checks here use a deliberately naive oracle of DESIGN section 3 (list
//! scans, recursion), written separately from the planner's resolver, so that the planner is
//! checked against the rules rather than against itself.

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use std::cmp::Ordering;

use express_api::natural::natural_cmp;
use express_api::{DeploymentDependencies, NodeKind, Prerequisite};
use express_planner::simulate::simulate;
use express_planner::{
    ClusterSettings, ClusterSnapshot, DesiredState, NodeObservation, Operation, Pause, PauseScope,
    Phase, plan,
};
use proptest::prelude::*;
use support::*;

// ---------------------------------------------------------------------------------------------
// Generators

fn arb_pod_state() -> impl Strategy<Value = Pod> {
    prop_oneof![
        3 => Just(Pod::Missing),
        4 => Just(Pod::Old),
        4 => Just(Pod::New),
        1 => Just(Pod::OldNotReady),
        1 => Just(Pod::NewNotReady),
        1 => Just(Pod::Terminating),
        1 => Just(Pod::Ended),
        1 => Just(Pod::Down),
        1 => Just(Pod::DownStillRunning),
    ]
}

fn arb_size() -> impl Strategy<Value = (usize, usize)> {
    prop_oneof![
        4 => (0..=2usize, 1..=12usize),
        1 => (1..=3usize, 1..=197usize),
    ]
}

fn arb_prerequisite(names: Vec<String>) -> impl Strategy<Value = Prerequisite> {
    let count = names.len();
    (
        0..count + 1,
        any::<bool>(),
        prop_oneof![4 => Just(None), 1 => Just(Some("ContainersReady".to_owned()))],
        prop_oneof![4 => Just(None), 1 => Just(Some("False".to_owned()))],
        prop_oneof![4 => Just(None), 1 => Just(Some(OLD.to_owned())), 1 => Just(Some(NEW.to_owned()))],
        prop_oneof![6 => Just(None), 1 => Just(Some(NEW.to_owned()))],
    )
        .prop_map(move |(target, with_kind, condition, status, revision, version)| {
            let short = names.get(target).cloned().unwrap_or_else(|| "fe-missing".to_owned());
            Prerequisite {
                express_node: full(&short),
                kind: with_kind.then(|| kind_of(&short)),
                pod_condition_type: condition,
                condition_status: status,
                deployment_revision: revision,
                express_version: version,
            }
        })
}

fn arb_dependencies(names: Vec<String>) -> impl Strategy<Value = Option<DeploymentDependencies>> {
    let list = move || {
        prop_oneof![
            2 => Just(None),
            1 => prop::collection::vec(arb_prerequisite(names.clone()), 0..3).prop_map(Some),
        ]
    };
    prop_oneof![
        6 => Just(None),
        1 => Just(Some(DeploymentDependencies { disabled: true, ..Default::default() })),
        2 => (list(), list()).prop_map(|(provisioning, upgrade)| Some(DeploymentDependencies {
            disabled: false,
            provisioning_prerequisites: provisioning,
            upgrade_prerequisites: upgrade,
        })),
    ]
}

fn arb_pause() -> impl Strategy<Value = Option<Pause>> {
    prop_oneof![
        4 => Just(None),
        1 => prop_oneof![Just(PauseScope::Operator), Just(PauseScope::Namespace), Just(PauseScope::Cluster)]
            .prop_map(|scope| Some(Pause { scope, reason: None })),
    ]
}

/// Anything goes: explicit prerequisites (unknown names, pins, odd conditions, cycles), invalid
/// specs, foreign pods, recorded replacements, pauses, every setting.
fn arb_any_cluster() -> impl Strategy<Value = ClusterSnapshot> {
    arb_size()
        .prop_flat_map(|(backends, frontends)| {
            let names = node_names(backends, frontends);
            let count = names.len();
            let node = (
                arb_pod_state(),
                arb_dependencies(names.clone()),
                prop_oneof![19 => Just(true), 1 => Just(false)], // valid spec
                prop_oneof![19 => Just(true), 1 => Just(false)], // pod owned
                prop_oneof![9 => Just(false), 1 => Just(true)],  // replacing recorded
            );
            (
                Just(names),
                prop::collection::vec(node, count),
                prop_oneof![9 => Just(false), 1 => Just(true)],
                0..5u32,
                0..5u32,
                arb_pause(),
                prop_oneof![19 => Just(false), 1 => Just(true)],
            )
        })
        .prop_map(
            |(names, nodes, disabled, position, max_concurrent, pause, spec_error)| {
                let rows: Vec<(&str, Pod)> = names
                    .iter()
                    .zip(&nodes)
                    .map(|(n, (s, ..))| (n.as_str(), *s))
                    .collect();
                let mut snapshot = cluster(&rows);
                for (observation, (_, dependencies, valid, owned, replacing)) in
                    snapshot.nodes.iter_mut().zip(nodes)
                {
                    observation.dependencies = dependencies;
                    if !valid {
                        observation.desired = Err("invalid".into());
                    }
                    if let Some(pod) = &mut observation.pod {
                        pod.owned = owned;
                    }
                    observation.replacing = replacing;
                }
                snapshot.settings = ClusterSettings {
                    dependencies_disabled: disabled,
                    backend_upgrade_position: position,
                    max_concurrent,
                    ..settled_settings()
                };
                snapshot.pause = pause;
                if spec_error {
                    snapshot.spec_errors.push("conflict".into());
                }
                snapshot
            },
        )
}

/// Clusters that must always converge: valid, owned, unpaused, and either default ordering
/// (with random per-node and global `disabled`) or explicit prerequisites that all point
/// earlier in one random permutation (so no combination of phases can wait in a circle).
fn arb_convergent_cluster() -> impl Strategy<Value = (ClusterSnapshot, Vec<bool>)> {
    // A cluster without a Backend object never provisions its frontends (rule 9): not
    // convergent by design, and covered by the invariants over any cluster.
    arb_size()
        .prop_map(|(backends, frontends)| (backends.max(1), frontends))
        .prop_flat_map(|(backends, frontends)| {
            let names = node_names(backends, frontends);
            let count = names.len();
            (
                Just(names),
                prop::collection::vec(
                    prop_oneof![
                        3 => Just(Pod::Missing), 4 => Just(Pod::Old), 4 => Just(Pod::New),
                        1 => Just(Pod::OldNotReady), 1 => Just(Pod::NewNotReady),
                        1 => Just(Pod::Terminating), 1 => Just(Pod::Ended),
                        1 => Just(Pod::Down), 1 => Just(Pod::DownStillRunning),
                    ],
                    count,
                ),
                prop::collection::vec(prop_oneof![9 => Just(false), 1 => Just(true)], count),
                Just((0..count).collect::<Vec<usize>>()).prop_shuffle(),
                prop::collection::vec((0..count, 0..count), count),
                any::<bool>(),
                prop_oneof![9 => Just(false), 1 => Just(true)],
                0..5u32,
                1..5u32,
                prop::collection::vec(any::<bool>(), 1..16),
            )
        })
        .prop_map(
            |(
                names,
                states,
                node_disabled,
                permutation,
                picks,
                explicit,
                disabled,
                position,
                max,
                ticks,
            )| {
                let rows: Vec<(&str, Pod)> = names.iter().map(String::as_str).zip(states).collect();
                let mut snapshot = cluster(&rows);
                let mut rank = vec![0; names.len()];
                for (r, &i) in permutation.iter().enumerate() {
                    rank[i] = r;
                }
                for i in 0..names.len() {
                    let earlier = |pick: usize| -> Vec<Prerequisite> {
                        let candidates: Vec<usize> =
                            (0..names.len()).filter(|&j| rank[j] < rank[i]).collect();
                        if candidates.is_empty() {
                            Vec::new()
                        } else {
                            vec![prerequisite(&names[candidates[pick % candidates.len()]])]
                        }
                    };
                    snapshot.nodes[i].dependencies = if node_disabled[i] {
                        Some(DeploymentDependencies {
                            disabled: true,
                            ..Default::default()
                        })
                    } else if explicit {
                        Some(DeploymentDependencies {
                            disabled: false,
                            provisioning_prerequisites: Some(earlier(picks[i].0)),
                            upgrade_prerequisites: Some(earlier(picks[i].1)),
                        })
                    } else {
                        None
                    };
                }
                snapshot.settings = ClusterSettings {
                    dependencies_disabled: disabled,
                    backend_upgrade_position: position,
                    max_concurrent: max,
                    ..settled_settings()
                };
                (snapshot, ticks)
            },
        )
}

// ---------------------------------------------------------------------------------------------
// The oracle: DESIGN section 3 written as plainly as possible.

struct OracleRequirement {
    target: Option<usize>,
    condition: String,
    status: String,
    revision: Option<String>,
    version: Option<String>,
}

fn ordered(s: &ClusterSnapshot, kind: NodeKind) -> Vec<usize> {
    let mut list: Vec<usize> = (0..s.nodes.len())
        .filter(|&i| s.nodes[i].kind == kind)
        .collect();
    list.sort_by(|&a, &b| natural_cmp(&s.nodes[a].name, &s.nodes[b].name));
    list
}

/// A default order list; `None` is the place of the Backend a cluster without one must get
/// (rule 9).
fn default_list(s: &ClusterSnapshot, phase: Phase) -> Vec<Option<usize>> {
    let backends: Vec<Option<usize>> = match ordered(s, NodeKind::Backend) {
        list if list.is_empty() => vec![None],
        list => list.into_iter().map(Some).collect(),
    };
    let frontends: Vec<Option<usize>> = ordered(s, NodeKind::Frontend)
        .into_iter()
        .map(Some)
        .collect();
    match phase {
        Phase::Provisioning => backends.into_iter().chain(frontends).collect(),
        Phase::Upgrade => {
            let k = (s.settings.backend_upgrade_position as usize).min(frontends.len());
            frontends[..k]
                .iter()
                .chain(&backends)
                .chain(&frontends[k..])
                .copied()
                .collect()
        }
    }
}

fn find(s: &ClusterSnapshot, p: &Prerequisite) -> Option<usize> {
    let matches: Vec<usize> = (0..s.nodes.len())
        .filter(|&i| {
            s.nodes[i].name == p.express_node && p.kind.is_none_or(|k| k == s.nodes[i].kind)
        })
        .collect();
    (matches.len() == 1).then(|| matches[0])
}

fn oracle_requirements(
    s: &ClusterSnapshot,
    node: usize,
    phase: Phase,
    depth: usize,
) -> Vec<OracleRequirement> {
    assert!(
        depth < 1000,
        "the planner acted although down nodes substitute in a circle"
    );
    let deps = s.nodes[node].dependencies.as_ref();
    if s.settings.dependencies_disabled || deps.is_some_and(|d| d.disabled) {
        return Vec::new();
    }
    let explicit = deps.and_then(|d| match phase {
        Phase::Provisioning => d.provisioning_prerequisites.clone(),
        Phase::Upgrade => d.upgrade_prerequisites.clone(),
    });
    match explicit {
        None => {
            let list = default_list(s, phase);
            let position = list
                .iter()
                .position(|&i| i == Some(node))
                .expect("node is in its list");
            // A missing Backend is required, so it is never skipped like a down node; it
            // stands as a target that can never be met.
            list[..position]
                .iter()
                .rev()
                .find(|i| i.is_none_or(|i| s.nodes[i].up))
                .map(|&target| OracleRequirement {
                    target,
                    condition: "Ready".into(),
                    status: "True".into(),
                    revision: None,
                    version: None,
                })
                .into_iter()
                .collect()
        }
        Some(list) => list
            .iter()
            .flat_map(|p| match find(s, p) {
                Some(t) if !s.nodes[t].up => oracle_requirements(s, t, phase, depth + 1),
                target => vec![OracleRequirement {
                    target,
                    condition: p.pod_condition_type.clone().unwrap_or("Ready".into()),
                    status: p.condition_status.clone().unwrap_or("True".into()),
                    revision: p.deployment_revision.clone(),
                    version: p.express_version.clone(),
                }],
            })
            .collect(),
    }
}

/// The phase of the gated change a node needs now, classified independently of the planner.
fn oracle_pending(s: &ClusterSnapshot, n: usize) -> Option<Phase> {
    let node = &s.nodes[n];
    let desired = node.desired.as_ref().ok()?;
    if !node.up || node.replacing {
        return None;
    }
    match &node.pod {
        None => Some(Phase::Provisioning),
        Some(pod) if !pod.owned || pod.terminating => None,
        Some(pod) if pod.has_ended() => Some(Phase::Provisioning),
        Some(pod) if pod.revision.as_ref() != Some(&desired.revision) => Some(Phase::Upgrade),
        Some(_) => None,
    }
}

fn change_waits_for(s: &ClusterSnapshot, from: usize, to: usize) -> bool {
    let mut seen = vec![false; s.nodes.len()];
    let mut stack = vec![from];
    while let Some(n) = stack.pop() {
        let Some(phase) = oracle_pending(s, n) else {
            continue;
        };
        for r in oracle_requirements(s, n, phase, 0) {
            if let Some(t) = r.target {
                if t == to {
                    return true;
                }
                if !seen[t] {
                    seen[t] = true;
                    stack.push(t);
                }
            }
        }
    }
    false
}

fn oracle_met(s: &ClusterSnapshot, waiting: usize, phase: Phase, r: &OracleRequirement) -> bool {
    let Some(t) = r.target else { return false };
    let target: &NodeObservation = &s.nodes[t];
    let Some(pod) = &target.pod else { return false };
    if !pod.owned || pod.terminating {
        return false;
    }
    let revision_ok = match (&r.revision, &r.version) {
        (None, None) => match &target.desired {
            Ok(DesiredState { revision, .. }) => {
                pod.revision.as_ref() == Some(revision)
                    || (phase == Phase::Provisioning
                        && oracle_pending(s, t) == Some(Phase::Upgrade)
                        && change_waits_for(s, t, waiting))
            }
            Err(_) => false,
        },
        (revision, version) => {
            revision
                .as_ref()
                .is_none_or(|r| pod.revision.as_ref() == Some(r))
                && version
                    .as_ref()
                    .is_none_or(|v| pod.version.as_ref() == Some(v))
        }
    };
    revision_ok && pod.condition(&r.condition) == Some(r.status.as_str())
}

// ---------------------------------------------------------------------------------------------
// Properties

fn check_plan_invariants(s: &ClusterSnapshot) -> Result<(), TestCaseError> {
    let p = plan(s, 0);
    prop_assert_eq!(p.nodes.len(), s.nodes.len());
    if s.pause.is_some() || !s.spec_errors.is_empty() || s.settings.max_concurrent == 0 {
        prop_assert!(
            p.actions.is_empty(),
            "acted while paused or invalid: {:?}",
            p.actions
        );
    }
    let mut touched = vec![false; s.nodes.len()];
    let mut starts = 0usize;
    for (position, action) in p.actions.iter().enumerate() {
        prop_assert!(!touched[action.node.0], "two actions on one node");
        touched[action.node.0] = true;
        let node = s.node(action.node);
        prop_assert!(node.desired.is_ok(), "acted on an invalid node");
        prop_assert!(
            node.pod.as_ref().is_none_or(|pod| pod.owned),
            "touched a foreign pod"
        );
        let phase = match action.operation {
            Operation::CreatePod | Operation::DeleteEndedPod => Some(Phase::Provisioning),
            Operation::ReplacePod => Some(Phase::Upgrade),
            Operation::RemovePod => None,
            Operation::ResumeReplacement | Operation::FinishReplacement => {
                prop_assert!(
                    node.replacing && node.up,
                    "continued a replacement never recorded"
                );
                continue;
            }
            Operation::DeleteForBounce | Operation::CreateForBounce => {
                prop_assert!(false, "a bounce step on {} nobody requested", node.name);
                continue;
            }
        };
        starts += 1;
        match action.operation {
            Operation::CreatePod => prop_assert!(node.up && node.pod.is_none()),
            Operation::RemovePod => prop_assert!(!node.up),
            _ => prop_assert!(node.up && node.pod.is_some()),
        }
        if let Some(phase) = phase {
            for r in oracle_requirements(s, action.node.0, phase, 0) {
                prop_assert!(
                    oracle_met(s, action.node.0, phase, &r),
                    "{} started with an unmet {phase} prerequisite on {:?}",
                    node.name,
                    r.target.map(|t| &s.nodes[t].name)
                );
                let disrupted_earlier = p.actions[..position].iter().any(|a| {
                    Some(a.node.0) == r.target
                        && !matches!(a.operation, Operation::FinishReplacement)
                });
                prop_assert!(
                    !disrupted_earlier,
                    "{} started together with its prerequisite",
                    node.name
                );
            }
        }
    }
    let free = (s.settings.max_concurrent as usize).saturating_sub(p.in_flight);
    prop_assert!(
        starts <= free,
        "{starts} new changes with {} in flight and maxConcurrent {}",
        p.in_flight,
        s.settings.max_concurrent
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Any input: no panic, nothing while paused or invalid, no unmet prerequisite, never
    /// more than maxConcurrent changes, never a foreign pod.
    #[test]
    fn plan_invariants_hold_on_any_cluster(s in arb_any_cluster()) {
        check_plan_invariants(&s)?;
        let _ = simulate(&s, Some(1));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// With no pod ever failing, a rollout always ends with every up node on its desired
    /// revision and every down node without a pod, whatever the order in which pods become
    /// Ready or go away, and the invariants hold at every intermediate step.
    #[test]
    fn rollouts_always_converge((s, ticks) in arb_convergent_cluster()) {
        let mut driver = Driver::new(s);
        let mut tick_index = 0;
        let bound = 8 * driver.snapshot.nodes.len() + 64;
        for round in 0..bound {
            check_plan_invariants(&driver.snapshot)?;
            driver.act();
            // Random subsets of pods progress early on; later everything does, like real time.
            let all = round > bound / 2;
            let pattern = &ticks;
            driver.tick(|i| {
                tick_index += 1;
                all || pattern[(i + tick_index) % pattern.len()]
            });
        }
        prop_assert!(driver.run_to_end(), "did not settle");
        prop_assert!(driver.all_converged(), "stuck: {:?}", plan(&driver.snapshot, 0).nodes.iter().zip(&driver.snapshot.nodes).filter(|(p, _)| !p.waiting_for.is_empty()).map(|(p, n)| (n.name.clone(), p.waiting_for.iter().map(|w| w.to_string()).collect::<Vec<_>>())).collect::<Vec<_>>());
        // The CLI's atomic simulation must agree that it completes.
        let simulation = simulate(&driver.snapshot, Some(1));
        prop_assert!(simulation.pending.is_empty());
    }

    /// Every node is started at most once per rollout when nothing fails.
    #[test]
    fn no_node_is_changed_twice((s, _) in arb_convergent_cluster()) {
        let mut driver = Driver::new(s);
        prop_assert!(driver.run_to_end());
        let mut seen = std::collections::HashSet::new();
        for started in &driver.started {
            prop_assert!(seen.insert(started.node.clone()), "{} started twice", started.node);
        }
    }
}

#[test]
fn natural_sort_oracle_matches_known_order() {
    assert_eq!(natural_cmp("acme-fe2", "acme-fe10"), Ordering::Less);
}

// ---------------------------------------------------------------------------------------------
// Rollout safety: any recorded changes, known-invalid revisions, history, restarts, ages,
// abort and retry state on top of any cluster.

fn arb_revision() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(OLD.to_owned()),
        Just(NEW.to_owned()),
        Just("rev-x".to_owned())
    ]
}

fn arb_change() -> impl Strategy<Value = Option<express_planner::Change>> {
    use express_api::{ChangeKind, ChangeState};
    let kind = prop_oneof![
        Just(ChangeKind::Provision),
        Just(ChangeKind::Upgrade),
        Just(ChangeKind::Rollback)
    ];
    let state = prop_oneof![
        Just(ChangeState::InProgress),
        Just(ChangeState::Succeeded),
        Just(ChangeState::Failed)
    ];
    prop_oneof![
        1 => Just(None),
        3 => (kind, state, prop::option::of(arb_revision()), arb_revision(), 0..12u64, any::<bool>(), any::<bool>()).prop_map(
            |(kind, state, from, to, sequence, current, recovery)| Some(express_planner::Change {
                kind,
                state,
                from,
                to,
                sequence,
                // Patched to the snapshot's rollout id when `current`.
                rollout: if current { "current".into() } else { "other".into() },
                recovery,
            })
        ),
    ]
}

type RolloutRow = (
    Option<express_planner::Change>,
    bool,
    Vec<String>,
    i32,
    Option<i64>,
);

fn arb_rollout_row() -> impl Strategy<Value = RolloutRow> {
    (
        arb_change(),
        prop_oneof![3 => Just(false), 1 => Just(true)], // desired revision known-invalid
        prop::collection::vec(arb_revision(), 0..3),    // history
        0..5i32,                                        // restarts
        prop::option::of(0..200_000i64),                // pod created at
    )
}

fn arb_rollout_cluster() -> impl Strategy<Value = (ClusterSnapshot, i64)> {
    arb_any_cluster()
        .prop_flat_map(|s| {
            let count = s.nodes.len();
            (
                Just(s),
                prop::collection::vec(arb_rollout_row(), count),
                any::<bool>(),                                    // auto rollback
                prop::option::of((any::<bool>(), any::<bool>())), // abort request (new?, rollback)
                prop::option::of(any::<bool>()),                  // retry request (new?)
                any::<bool>(),                                    // abort recorded
                1..30u32,                                         // progress deadline seconds
                0..300_000i64,                                    // now
            )
        })
        .prop_map(
            |(mut s, rows, auto_rollback, abort, retry, recorded, deadline, now)| {
                let id = express_planner::rollout::rollout_id(&s);
                for (node, (change, invalid, history, restarts, created)) in
                    s.nodes.iter_mut().zip(rows)
                {
                    node.change = change.map(|mut c| {
                        if c.rollout == "current" {
                            c.rollout = id.clone();
                        }
                        c
                    });
                    if invalid && let Ok(d) = &node.desired {
                        node.invalid_revisions = vec![express_planner::InvalidRevision {
                            revision: d.revision.clone(),
                            reason: "x".into(),
                        }];
                    }
                    node.history = history;
                    if let Some(pod) = &mut node.pod {
                        pod.restarts = restarts;
                        pod.created_at_ms = created;
                    }
                }
                s.settings.auto_rollback = auto_rollback;
                s.settings.progress_deadline_seconds = deadline;
                if let Some((new, rollback)) = abort {
                    s.control.abort_request = Some(express_planner::AbortRequest {
                        id: "a".into(),
                        rollback,
                    });
                    if !new {
                        s.control.handled_abort = Some("a".into());
                    }
                }
                if let Some(new) = retry {
                    s.control.retry_request = Some("r".into());
                    if !new {
                        s.control.handled_retry = Some("r".into());
                    }
                }
                if recorded {
                    s.control.abort = Some(express_planner::Abort {
                        request_id: "a0".into(),
                        rollback: auto_rollback,
                        revisions: s
                            .nodes
                            .iter()
                            .filter_map(|n| {
                                Some((n.name.clone(), n.desired.as_ref().ok()?.revision.clone()))
                            })
                            .collect(),
                    });
                }
                (s, now)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// Any rollout state: no panic; nothing while paused or invalid; halted, nothing moves to
    /// a desired revision (only rollbacks, from kept history, and never more new ones than
    /// maxConcurrent allows); never two operations on one node or a foreign pod touched.
    #[test]
    fn rollout_safety_invariants_hold_on_any_state((s, now) in arb_rollout_cluster()) {
        let p = plan(&s, now);
        if s.pause.is_some() || !s.spec_errors.is_empty() || s.settings.max_concurrent == 0 {
            prop_assert!(p.actions.is_empty(), "acted while paused or invalid: {:?}", p.actions);
        }
        let mut touched = vec![false; s.nodes.len()];
        let mut new_changes = 0usize;
        for action in &p.actions {
            prop_assert!(!touched[action.node.0], "two actions on one node");
            touched[action.node.0] = true;
            let node = s.node(action.node);
            prop_assert!(node.desired.is_ok(), "acted on an invalid node");
            prop_assert!(node.pod.as_ref().is_none_or(|pod| pod.owned), "touched a foreign pod");
            if action.record.is_some() && !matches!(action.operation, Operation::FinishReplacement) {
                new_changes += 1;
            }
            if p.rollout.halt.is_some() {
                prop_assert!(action.source.kept_revision().is_some(), "halted, yet {:?} on {} is not a rollback", action.operation, node.name);
                let revision = action.source.kept_revision().unwrap_or_default().to_owned();
                prop_assert!(node.history.contains(&revision), "rollback to {revision}, which is not kept");
                if let Some(record) = &action.record {
                    prop_assert_eq!(record.kind, express_api::ChangeKind::Rollback);
                }
            }
            for failure in &p.rollout.failures {
                prop_assert!(failure.node != action.node || p.rollout.halt.is_some());
            }
        }
        prop_assert!(
            new_changes <= s.settings.max_concurrent as usize,
            "{new_changes} new changes with maxConcurrent {}",
            s.settings.max_concurrent
        );
        if !p.rollout.failures.is_empty() {
            prop_assert!(p.rollout.halt.is_some(), "a failure always halts");
        }
    }
}
