//! The decision: from one [`ClusterSnapshot`], which pods to create or delete now.
//!
//! A node's change is a short sequence of pod operations: provisioning creates the pod;
//! an upgrade deletes the old pod (gracefully) and creates the new one once the old is gone.
//! `rollout.maxConcurrent` bounds how many nodes are *in flight*: their pod is terminating,
//! a recorded replacement is unfinished, or their pod runs the desired revision but is not yet
//! Ready. Finishing a change already in flight never needs a free slot, starting one does.

use express_api::NodeKind;
use express_api::natural::natural_cmp;

use crate::prerequisites::{self, Checker, Graph, Phase, ReachCache, Target, Unmet};
use crate::snapshot::{ClusterSnapshot, NodeObservation, Pause};

/// What the planner found a node to be, before deciding anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeState {
    /// Its effective spec cannot be computed; the message says why. Nothing is done to it.
    InvalidSpec(String),
    /// A pod with the node's name exists but is not controlled by the node: never touched.
    PodNotOwned,
    /// Intentionally down and without a pod.
    Down,
    /// Intentionally down, but its pod still runs.
    NeedsRemoval,
    /// Intentionally down and its pod is terminating.
    Removing,
    /// Pod runs the desired revision and is Ready.
    UpToDate,
    /// Pod runs the desired revision and is not Ready yet.
    Starting,
    /// Up, and its pod is terminating.
    Terminating,
    /// Up, and it has no pod.
    NeedsProvision,
    /// Up, and its pod has ended (phase Succeeded or Failed).
    NeedsRecreate,
    /// Up, and its pod runs another revision.
    NeedsUpgrade,
    /// A replacement the operator recorded is unfinished: the old pod is still there (not
    /// terminating) or the new one has not been created.
    Replacing,
}

impl NodeState {
    /// Counts against `rollout.maxConcurrent`.
    pub fn in_flight(&self) -> bool {
        matches!(
            self,
            NodeState::Removing
                | NodeState::Starting
                | NodeState::Terminating
                | NodeState::Replacing
        )
    }

    /// The prerequisite list that gates this node's next change, if it needs one.
    pub fn phase(&self) -> Option<Phase> {
        match self {
            NodeState::NeedsProvision | NodeState::NeedsRecreate => Some(Phase::Provisioning),
            NodeState::NeedsUpgrade => Some(Phase::Upgrade),
            _ => None,
        }
    }
}

/// One pod operation the actuator performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Create the missing pod.
    CreatePod,
    /// Record the replacement in the node's status, then delete the old pod.
    ReplacePod,
    /// A recorded replacement whose old pod is still present: delete it (again).
    ResumeReplacement,
    /// A recorded replacement whose old pod is gone: create the new pod.
    FinishReplacement,
    /// Delete the pod of a node set down.
    RemovePod,
    /// Delete a pod whose containers ended so that the node can be provisioned again.
    DeleteEndedPod,
}

impl Operation {
    pub fn creates_pod(self) -> bool {
        matches!(self, Operation::CreatePod | Operation::FinishReplacement)
    }
}

/// An operation on one node's pod, allowed now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    /// Index into [`ClusterSnapshot::nodes`].
    pub node: usize,
    pub name: String,
    pub kind: NodeKind,
    pub operation: Operation,
}

/// Why the cluster as a whole may not act.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blocked {
    Paused(Pause),
    /// The cluster's spec cannot be acted on (a prerequisite cycle, conflicting objects...).
    InvalidSpec(String),
}

/// Why a node that could act does not act in this plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deferred {
    /// The cluster is blocked (paused or invalid).
    Blocked,
    /// `rollout.maxConcurrent` nodes are already in flight.
    NoFreeSlot {
        in_flight: usize,
        max_concurrent: u32,
    },
}

/// The verdict for one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePlan {
    pub state: NodeState,
    /// The nodes gating this node's next change (for the phase its state needs).
    pub prerequisites: Vec<String>,
    /// Those prerequisites that are not met now; non-empty means the node waits.
    pub waiting_for: Vec<Unmet>,
    pub action: Option<Operation>,
    pub deferred: Option<Deferred>,
}

/// The planner's answer for one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub blocked: Option<Blocked>,
    /// Operations allowed now: unfinished replacements first, then new changes in order.
    pub actions: Vec<Action>,
    /// One entry per snapshot node, same index.
    pub nodes: Vec<NodePlan>,
    /// Nodes in flight before any of `actions` is taken.
    pub in_flight: usize,
    /// Up nodes in default upgrade order (the rollout order shown in status).
    pub upgrade_order: Vec<String>,
    /// Up nodes in default provisioning order.
    pub provisioning_order: Vec<String>,
}

impl Plan {
    pub fn is_idle(&self) -> bool {
        self.actions.is_empty()
    }
}

/// Classifies a node from its spec and its pod.
pub fn classify(node: &NodeObservation) -> NodeState {
    let desired = match &node.desired {
        Ok(desired) => desired,
        Err(message) => return NodeState::InvalidSpec(message.clone()),
    };
    let Some(pod) = &node.pod else {
        return match (node.up, node.replacing) {
            (false, _) => NodeState::Down,
            (true, true) => NodeState::Replacing,
            (true, false) => NodeState::NeedsProvision,
        };
    };
    if !pod.owned {
        return NodeState::PodNotOwned;
    }
    match (node.up, pod.terminating) {
        (false, true) => NodeState::Removing,
        (false, false) => NodeState::NeedsRemoval,
        (true, true) => NodeState::Terminating,
        (true, false) if pod.revision.as_deref() == Some(desired.revision.as_str()) => {
            if pod.has_ended() {
                NodeState::NeedsRecreate
            } else if pod.is_ready() {
                NodeState::UpToDate
            } else {
                NodeState::Starting
            }
        }
        (true, false) if node.replacing => NodeState::Replacing,
        (true, false) if pod.has_ended() => NodeState::NeedsRecreate,
        (true, false) => NodeState::NeedsUpgrade,
    }
}

/// Decides what may be done now in one Express cluster (DESIGN sections 3 and 4).
pub fn plan(snapshot: &ClusterSnapshot) -> Plan {
    let nodes = &snapshot.nodes;
    let mut node_plans: Vec<NodePlan> = nodes
        .iter()
        .map(|node| NodePlan {
            state: classify(node),
            prerequisites: Vec::new(),
            waiting_for: Vec::new(),
            action: None,
            deferred: None,
        })
        .collect();
    let in_flight = node_plans.iter().filter(|p| p.state.in_flight()).count();

    let graph = match prerequisites::resolve(snapshot) {
        Ok(graph) => graph,
        Err(cycle) => {
            return Plan {
                blocked: Some(Blocked::InvalidSpec(cycle.to_string())),
                actions: Vec::new(),
                nodes: node_plans,
                in_flight,
                upgrade_order: Vec::new(),
                provisioning_order: Vec::new(),
            };
        }
    };
    let blocked = cluster_block(snapshot);
    let names = |order: &[usize]| order.iter().map(|&i| nodes[i].name.clone()).collect();
    let mut plan = Plan {
        blocked,
        actions: Vec::new(),
        nodes: Vec::new(),
        in_flight,
        upgrade_order: names(&graph.upgrade_order),
        provisioning_order: names(&graph.provisioning_order),
    };

    let mut chosen = vec![false; nodes.len()];
    let allow = |plan: &mut Plan, node_plan: &mut NodePlan, node: usize, operation| {
        if plan.blocked.is_some() {
            node_plan.deferred = Some(Deferred::Blocked);
            return false;
        }
        node_plan.action = Some(operation);
        plan.actions.push(Action {
            node,
            name: nodes[node].name.clone(),
            kind: nodes[node].kind,
            operation,
        });
        true
    };

    // Unfinished replacements go first and need no free slot: they are already counted.
    for (node, node_plan) in node_plans.iter_mut().enumerate() {
        if node_plan.state == NodeState::Replacing {
            let operation = if nodes[node].pod.is_some() {
                Operation::ResumeReplacement
            } else {
                Operation::FinishReplacement
            };
            chosen[node] = allow(&mut plan, node_plan, node, operation);
        }
    }

    let mut free_slots = (snapshot.settings.max_concurrent as usize).saturating_sub(in_flight);
    let mut cache = ReachCache::default();
    let pending: Vec<Option<Phase>> = node_plans.iter().map(|p| p.state.phase()).collect();
    for node in start_candidates(snapshot, &graph, &node_plans) {
        let node_plan = &mut node_plans[node];
        let (operation, phase) = match node_plan.state {
            NodeState::NeedsProvision => (Operation::CreatePod, Some(Phase::Provisioning)),
            NodeState::NeedsRecreate => (Operation::DeleteEndedPod, Some(Phase::Provisioning)),
            NodeState::NeedsUpgrade => (Operation::ReplacePod, Some(Phase::Upgrade)),
            NodeState::NeedsRemoval => (Operation::RemovePod, None),
            _ => continue,
        };
        if let Some(phase) = phase {
            let requirements = graph.requirements(phase, node);
            node_plan.prerequisites = requirements
                .iter()
                .map(|r| target_name(snapshot, r.target))
                .collect();
            let checker = Checker {
                snapshot,
                graph: &graph,
                changing_now: &chosen,
                pending: &pending,
            };
            node_plan.waiting_for = requirements
                .iter()
                .filter_map(|r| checker.check(node, phase, r, &mut cache))
                .collect();
            if !node_plan.waiting_for.is_empty() {
                continue;
            }
        }
        if plan.blocked.is_none() && free_slots == 0 {
            node_plan.deferred = Some(Deferred::NoFreeSlot {
                in_flight,
                max_concurrent: snapshot.settings.max_concurrent,
            });
            continue;
        }
        if allow(&mut plan, node_plan, node, operation) {
            chosen[node] = true;
            free_slots -= 1;
        }
    }
    plan.nodes = node_plans;
    plan
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
