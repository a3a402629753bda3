//! The forward plan: bounces first, then unfinished replacements, then new changes in
//! provisioning, removal and upgrade order, each once its prerequisites are met and a slot is
//! free. A halted rollout hands over to `halted`.

use express_api::natural::natural_cmp;
use express_api::{ChangeKind, ChangeState};

use super::halted::plan_halted;
use super::verdict::{Blocked, Deferred, NodePlan, Plan};
use crate::action::{Action, Operation, PodSource};
use crate::bounce::{self, Bounces};
use crate::prerequisites::{self, Checker, Graph, Phase, ReachCache, Target};
use crate::rollout::{self, Assessment};
use crate::settle::{self, Settle};
use crate::snapshot::{Change, ClusterSnapshot, NodeIndex, NodeObservation};
use crate::state::{NodeState, classify};

/// Decides what may be done now in one Express cluster (DESIGN sections 3, 4 and 5), at
/// `now_ms` (milliseconds since the Unix epoch; only progress deadlines depend on it).
pub fn plan(snapshot: &ClusterSnapshot, now_ms: i64) -> Plan {
    let nodes = &snapshot.nodes;
    let mut node_plans: Vec<NodePlan> = nodes.iter().map(unplanned).collect();
    let settle = settle::assess(snapshot, now_ms);
    let resolved = prerequisites::resolve(snapshot);
    let blocked = match &resolved {
        Ok(_) => cluster_block(snapshot),
        Err(cycle) => Some(Blocked::InvalidSpec(cycle.to_string())),
    };
    let bounce_block = blocked.as_ref().map(ToString::to_string);
    let bounced = plan_bounces(snapshot, &mut node_plans, bounce_block.as_deref(), now_ms);
    let in_flight = bounced.in_flight;
    let graph = match resolved {
        Ok(graph) => graph,
        Err(_) => {
            return Plan {
                blocked,
                actions: bounced.actions,
                nodes: node_plans,
                in_flight,
                upgrade_order: Vec::new(),
                rollout: Assessment::default(),
                settle,
                bounce_wake_at_ms: bounced.wake_at_ms,
            };
        }
    };
    let assessment = rollout::assess(snapshot, now_ms);
    let mut choices = Choices {
        snapshot,
        halted: assessment.halt.is_some(),
        chosen: vec![false; nodes.len()],
        plan: Plan {
            blocked,
            actions: Vec::new(),
            nodes: Vec::new(),
            in_flight,
            upgrade_order: graph
                .upgrade_order
                .iter()
                .map(|&i| nodes[i].name.clone())
                .collect(),
            rollout: Assessment::default(),
            settle: Settle::default(),
            bounce_wake_at_ms: bounced.wake_at_ms,
        },
    };
    choose_replacements(&mut choices, &mut node_plans);
    let mut free_slots = bounced.free_slots;
    choose_new_changes(
        &mut choices,
        &graph,
        &mut node_plans,
        &settle,
        in_flight,
        &mut free_slots,
    );
    let mut plan = choices.plan;
    if let (Some(halt), None) = (&assessment.halt, &plan.blocked) {
        plan_halted(snapshot, &assessment, halt, &mut plan, &mut node_plans);
    }
    number_records(snapshot, &mut plan.actions, &assessment.rollout_id);
    plan.actions.extend(bounced.actions);
    plan.rollout = assessment;
    plan.settle = settle;
    plan.nodes = node_plans;
    plan
}

/// A node's plan before anything is decided for it: its state and nothing else.
fn unplanned(node: &NodeObservation) -> NodePlan {
    NodePlan {
        state: classify(node),
        prerequisites: Vec::new(),
        waiting_for: Vec::new(),
        action: None,
        deferred: None,
        bounce: None,
    }
}

/// What the bounces leave to the rollout: their pod operations (taken after the rollout's),
/// the nodes in flight, the slots still free and when a bounce's wait times out.
struct Bounced {
    actions: Vec<Action>,
    in_flight: usize,
    free_slots: usize,
    wake_at_ms: Option<i64>,
}

/// Bounces under way hold their pod and their slot; new ones get the first free slots (an
/// SRE asked for them), before any new change of the rollout.
fn plan_bounces(
    snapshot: &ClusterSnapshot,
    node_plans: &mut [NodePlan],
    bounce_block: Option<&str>,
    now_ms: i64,
) -> Bounced {
    let mut bounces = Bounces::new();
    bounce::progress(snapshot, bounce_block, now_ms, &mut bounces);
    for (index, node_plan) in node_plans.iter_mut().enumerate() {
        if bounces.holds_pod(index) {
            node_plan.state = NodeState::Bouncing;
        }
    }
    let in_flight = node_plans.iter().filter(|p| p.state.in_flight()).count();
    let mut free_slots = (snapshot.settings.max_concurrent as usize).saturating_sub(in_flight);
    let any_bounce = snapshot
        .nodes
        .iter()
        .any(|n| n.bounce_request.is_some() || n.bounce.is_some());
    if any_bounce {
        let mut states: Vec<NodeState> = node_plans.iter().map(|p| p.state.clone()).collect();
        bounce::admit(
            snapshot,
            &mut states,
            bounce_block,
            in_flight,
            &mut free_slots,
            now_ms,
            &mut bounces,
        );
        for (node_plan, state) in node_plans.iter_mut().zip(states) {
            node_plan.state = state;
        }
    }
    let Bounces {
        plans,
        operations,
        wake_at_ms,
    } = bounces;
    for (node_plan, bounce) in node_plans.iter_mut().zip(plans) {
        // Shorter than the nodes when the last ones have no bounce.
        node_plan.bounce = bounce.map(Box::new);
    }
    let actions: Vec<Action> = operations
        .into_iter()
        .map(|(index, operation)| bounce_action(snapshot, node_plans, index, operation))
        .collect();
    for action in &actions {
        node_plans[action.node.0].action = Some(action.operation);
    }
    Bounced {
        actions,
        in_flight,
        free_slots,
        wake_at_ms,
    }
}

/// The rollout's plan as it is being built, and which nodes it changes now.
struct Choices<'s> {
    snapshot: &'s ClusterSnapshot,
    halted: bool,
    plan: Plan,
    chosen: Vec<bool>,
}

impl Choices<'_> {
    /// Takes `operation` on `node` unless the cluster is blocked or the rollout halted, which
    /// the node's plan then says instead.
    fn allow(&mut self, node_plan: &mut NodePlan, node: usize, operation: Operation) -> bool {
        if self.plan.blocked.is_some() {
            node_plan.deferred = Some(Deferred::Blocked);
            return false;
        }
        if self.halted {
            node_plan.deferred = Some(Deferred::Halted);
            return false;
        }
        node_plan.action = Some(operation);
        self.plan.actions.push(Action::new(
            NodeIndex(node),
            &self.snapshot.nodes[node],
            operation,
            PodSource::Desired,
        ));
        true
    }
}

/// Unfinished replacements go first and need no free slot: they are already counted.
fn choose_replacements(choices: &mut Choices<'_>, node_plans: &mut [NodePlan]) {
    for (node, node_plan) in node_plans.iter_mut().enumerate() {
        if node_plan.state == NodeState::Replacing {
            let operation = if choices.snapshot.nodes[node].pod.is_some() {
                Operation::ResumeReplacement
            } else {
                Operation::FinishReplacement
            };
            choices.chosen[node] = choices.allow(node_plan, node, operation);
        }
    }
}

/// New changes, in the order they get free slots, each once its prerequisites are met, the
/// desired state has settled and a slot is free.
fn choose_new_changes(
    choices: &mut Choices<'_>,
    graph: &Graph<'_>,
    node_plans: &mut [NodePlan],
    settle: &Settle,
    in_flight: usize,
    free_slots: &mut usize,
) {
    let snapshot = choices.snapshot;
    let mut cache = ReachCache::default();
    let pending: Vec<Option<Phase>> = node_plans.iter().map(|p| p.state.phase()).collect();
    for node in start_candidates(snapshot, graph, node_plans) {
        let node_plan = &mut node_plans[node];
        let (operation, phase) = match node_plan.state {
            NodeState::NeedsProvision => (Operation::CreatePod, Some(Phase::Provisioning)),
            NodeState::NeedsRecreate => (Operation::DeleteEndedPod, Some(Phase::Provisioning)),
            NodeState::NeedsUpgrade => (Operation::ReplacePod, Some(Phase::Upgrade)),
            NodeState::NeedsRemoval => (Operation::RemovePod, None),
            _ => continue,
        };
        if let Some(phase) = phase {
            let checker = Checker {
                snapshot,
                graph,
                changing_now: &choices.chosen,
                pending: &pending,
            };
            if waits_for_prerequisites(&checker, node_plan, node, phase, &mut cache) {
                continue;
            }
        }
        let moving = choices.plan.blocked.is_none() && !choices.halted;
        // A new change waits for the desired state to settle; restoring a lost pod on the
        // revision it ran does not (rule 8).
        if moving && !settle.is_settled() && !settle::restores_lost_pod(&snapshot.nodes[node]) {
            node_plan.deferred = Some(Deferred::Settling);
            continue;
        }
        if moving && *free_slots == 0 {
            node_plan.deferred = Some(Deferred::NoFreeSlot {
                in_flight,
                max_concurrent: snapshot.settings.max_concurrent,
            });
            continue;
        }
        if choices.allow(node_plan, node, operation) {
            choices.chosen[node] = true;
            *free_slots -= 1;
        }
    }
}

/// Notes a node's prerequisites for `phase` in its plan, and which of them are not met yet;
/// true while any is not.
fn waits_for_prerequisites(
    checker: &Checker<'_, '_>,
    node_plan: &mut NodePlan,
    node: usize,
    phase: Phase,
    cache: &mut ReachCache,
) -> bool {
    let requirements = checker.graph.requirements(phase, node);
    node_plan.prerequisites = requirements
        .iter()
        .map(|r| target_name(checker.snapshot, r.target))
        .collect();
    node_plan.waiting_for = requirements
        .iter()
        .filter_map(|r| checker.check(node, phase, r, cache))
        .collect();
    !node_plan.waiting_for.is_empty()
}

/// Records the change each normal operation starts, numbered after the newest change seen.
fn number_records(snapshot: &ClusterSnapshot, actions: &mut [Action], rollout_id: &str) {
    let mut sequence = snapshot
        .nodes
        .iter()
        .filter_map(|n| n.change.as_ref().map(|c| c.sequence))
        .max()
        .unwrap_or(0);
    for action in actions {
        let node = snapshot.node(action.node);
        if action.record.is_none() && action.source == PodSource::Desired {
            action.record = record_for(node, action.operation, rollout_id);
        }
        if let Some(record) = &mut action.record {
            sequence += 1;
            record.sequence = sequence;
        }
    }
}

/// The pod operation of a bounce step. The new pod runs the revision the old one ran: built
/// from the node's spec when that is still its desired revision, otherwise from the spec its
/// ControllerRevision kept (a forced bounce of a node with a pending change).
fn bounce_action(
    snapshot: &ClusterSnapshot,
    node_plans: &[NodePlan],
    index: NodeIndex,
    operation: Operation,
) -> Action {
    let node = snapshot.node(index);
    let revision = node_plans[index.0]
        .bounce
        .as_ref()
        .and_then(|b| b.revision.clone());
    let source = match (revision, &node.desired) {
        (Some(revision), Ok(desired)) if revision == desired.revision => PodSource::Desired,
        (Some(revision), _) => PodSource::Kept(revision),
        (None, _) => PodSource::Desired,
    };
    Action::new(index, node, operation, source)
}

/// The change to record before a normal (not rollback) operation.
fn record_for(node: &NodeObservation, operation: Operation, rollout_id: &str) -> Option<Change> {
    let desired = node.desired.as_ref().ok()?;
    let previous = node.change.as_ref();
    // A pod lost during this rollout's upgrade of the node is part of that upgrade: keep what
    // it upgraded from, so that a rollback still returns it.
    let continued_upgrade = previous.filter(|c| {
        c.kind == ChangeKind::Upgrade && c.to == desired.revision && c.rollout == rollout_id
    });
    let (kind, from) = match operation {
        Operation::ReplacePod => (
            ChangeKind::Upgrade,
            node.pod.as_ref().and_then(|p| p.revision.clone()),
        ),
        Operation::CreatePod => match continued_upgrade {
            Some(c) => (ChangeKind::Upgrade, c.from.clone()),
            None => (ChangeKind::Provision, None),
        },
        Operation::FinishReplacement => {
            if previous.is_some_and(|c| c.to == desired.revision) {
                return None;
            }
            (ChangeKind::Upgrade, previous.and_then(|c| c.from.clone()))
        }
        Operation::ResumeReplacement
        | Operation::RemovePod
        | Operation::DeleteEndedPod
        | Operation::DeleteForBounce
        | Operation::CreateForBounce => {
            return None;
        }
    };
    // A pod created for a node that ran its desired revision brings that revision back: a
    // recovery, no rollout (`express_api::delivery`); an upgrade's record keeps its `from`,
    // so that a rollback of its rollout still returns the node.
    let recovery =
        operation == Operation::CreatePod && previous.is_some_and(|c| c.ran(&desired.revision));
    Some(Change {
        kind,
        state: ChangeState::InProgress,
        from,
        to: desired.revision.clone(),
        sequence: 0,
        rollout: rollout_id.to_owned(),
        recovery,
    })
}

/// Nodes that need a new change, in the order they get free slots: missing pods first (in
/// provisioning order: they restore capacity), then removals of nodes set down (explicitly
/// requested), then upgrades (in upgrade order).
fn start_candidates(
    snapshot: &ClusterSnapshot,
    graph: &Graph<'_>,
    node_plans: &[NodePlan],
) -> Vec<usize> {
    let state = |i: usize| &node_plans[i].state;
    let mut removals: Vec<usize> = (0..node_plans.len())
        .filter(|&i| *state(i) == NodeState::NeedsRemoval)
        .collect();
    removals.sort_by(|&a, &b| natural_cmp(&snapshot.nodes[a].name, &snapshot.nodes[b].name));
    graph
        .provisioning_order
        .iter()
        .copied()
        .filter(|&i| {
            matches!(
                state(i),
                NodeState::NeedsProvision | NodeState::NeedsRecreate
            )
        })
        .chain(removals)
        .chain(
            graph
                .upgrade_order
                .iter()
                .copied()
                .filter(|&i| *state(i) == NodeState::NeedsUpgrade),
        )
        .collect()
}

fn target_name(snapshot: &ClusterSnapshot, target: Target<'_>) -> String {
    match target {
        Target::Node(i) => snapshot.nodes[i].name.clone(),
        Target::Unknown { name, .. } | Target::Ambiguous { name } => name.to_owned(),
        Target::MissingBackend => prerequisites::MISSING_BACKEND.to_owned(),
    }
}

fn cluster_block(snapshot: &ClusterSnapshot) -> Option<Blocked> {
    if !snapshot.spec_errors.is_empty() {
        return Some(Blocked::InvalidSpec(snapshot.spec_errors.join("; ")));
    }
    if snapshot.settings.max_concurrent == 0 {
        return Some(Blocked::InvalidSpec(
            "rollout.maxConcurrent must be at least 1".into(),
        ));
    }
    snapshot.pause.clone().map(Blocked::Paused)
}
