//! The decision: from one [`ClusterSnapshot`], which pods to create or delete now.
//!
//! A node's change is a short sequence of pod operations: provisioning creates the pod;
//! an upgrade deletes the old pod (gracefully) and creates the new one once the old is gone.
//! `rollout.maxConcurrent` bounds how many nodes are *in flight*: their pod is terminating,
//! a recorded replacement is unfinished, or their pod runs the desired revision but is not yet
//! Ready. Finishing a change already in flight never needs a free slot, starting one does.

use express_api::natural::natural_cmp;
use express_api::{ChangeKind, ChangeState};

use crate::action::{Action, Operation, PodSource};
use crate::state::{NodeState, classify};

use crate::bounce::{self, BouncePlan, Bounces};
use crate::prerequisites::{self, Checker, Graph, Phase, ReachCache, Target, Unmet};
use crate::rollout::{self, Assessment, Halt};
use crate::settle::{self, Settle};
use crate::snapshot::{Change, ClusterSnapshot, NodeIndex, NodeObservation, Pause};

/// Why the cluster as a whole may not act.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blocked {
    Paused(Pause),
    /// The cluster's spec cannot be acted on (a prerequisite cycle, conflicting objects...).
    InvalidSpec(String),
}

impl std::fmt::Display for Blocked {
    /// Why a blocked cluster may not act, as a bounce waiting for it says.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Blocked::Paused(pause) => pause.fmt(f),
            Blocked::InvalidSpec(why) => write!(f, "the cluster spec is invalid ({why})"),
        }
    }
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
    /// The rollout is halted (failed or aborted): no node moves to its desired revision.
    Halted,
    /// A rollback goes one node at a time, newest change first: this one waits its turn.
    RollbackTurn,
    /// The node should return to this revision, but no ControllerRevision keeps its spec.
    NoHistory { revision: String },
    /// The cluster's desired state is still being written: no new change starts
    /// ([`Plan::settle`] says why).
    Settling,
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
    /// The node's bounce request after this plan, when one is taken up or under way (None:
    /// whatever the status recorded stands).
    pub bounce: Option<Box<BouncePlan>>,
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
    /// Requests, failures and the halt (DESIGN sections 4 and 5).
    pub rollout: Assessment,
    /// Whether the desired state has settled, and what to record of it (DESIGN section 3,
    /// rule 8).
    pub settle: Settle,
    /// When a bounce's wait times out next.
    pub bounce_wake_at_ms: Option<i64>,
}

impl Plan {
    /// The verdict for one node of the planned snapshot.
    pub fn node(&self, index: NodeIndex) -> &NodePlan {
        &self.nodes[index.0]
    }

    /// The operation allowed on a node now, if any.
    pub fn action_on(&self, index: NodeIndex) -> Option<&Action> {
        self.actions.iter().find(|a| a.node == index)
    }

    /// When the plan changes with no event to say so (a progress deadline passing, the settle
    /// window ending, a disagreement turning stalled, a bounce's wait timing out): the caller
    /// must plan again then.
    pub fn wake_at_ms(&self) -> Option<i64> {
        [
            self.rollout.deadline_at_ms,
            self.settle.wake_at_ms,
            self.bounce_wake_at_ms,
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

/// Decides what may be done now in one Express cluster (DESIGN sections 3, 4 and 5), at
/// `now_ms` (milliseconds since the Unix epoch; only progress deadlines depend on it).
pub fn plan(snapshot: &ClusterSnapshot, now_ms: i64) -> Plan {
    let nodes = &snapshot.nodes;
    let mut node_plans: Vec<NodePlan> = nodes
        .iter()
        .map(|node| NodePlan {
            state: classify(node),
            prerequisites: Vec::new(),
            waiting_for: Vec::new(),
            action: None,
            deferred: None,
            bounce: None,
        })
        .collect();
    let settle = settle::assess(snapshot, now_ms);
    let resolved = prerequisites::resolve(snapshot);
    let blocked = match &resolved {
        Ok(_) => cluster_block(snapshot),
        Err(cycle) => Some(Blocked::InvalidSpec(cycle.to_string())),
    };

    // Bounces under way hold their pod and their slot; new ones get the first free slots
    // (an SRE asked for them), before any new change of the rollout.
    let mut bounces = Bounces::new();
    let bounce_block = blocked.as_ref().map(ToString::to_string);
    bounce::progress(snapshot, bounce_block.as_deref(), now_ms, &mut bounces);
    for (index, node_plan) in node_plans.iter_mut().enumerate() {
        if bounces.holds_pod(index) {
            node_plan.state = NodeState::Bouncing;
        }
    }
    let in_flight = node_plans.iter().filter(|p| p.state.in_flight()).count();
    let mut free_slots = (snapshot.settings.max_concurrent as usize).saturating_sub(in_flight);
    let any_bounce = nodes
        .iter()
        .any(|n| n.bounce_request.is_some() || n.bounce.is_some());
    if any_bounce {
        let mut states: Vec<NodeState> = node_plans.iter().map(|p| p.state.clone()).collect();
        bounce::admit(
            snapshot,
            &mut states,
            bounce_block.as_deref(),
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
        plans: bounce_plans,
        operations: bounce_operations,
        wake_at_ms: bounce_wake_at_ms,
    } = bounces;
    for (node_plan, bounce) in node_plans.iter_mut().zip(bounce_plans) {
        // Shorter than the nodes when the last ones have no bounce.
        node_plan.bounce = bounce.map(Box::new);
    }
    let bounce_actions: Vec<Action> = bounce_operations
        .into_iter()
        .map(|(index, operation)| bounce_action(snapshot, &node_plans, index, operation))
        .collect();
    for action in &bounce_actions {
        node_plans[action.node.0].action = Some(action.operation);
    }

    let graph = match resolved {
        Ok(graph) => graph,
        Err(_) => {
            return Plan {
                blocked,
                actions: bounce_actions,
                nodes: node_plans,
                in_flight,
                upgrade_order: Vec::new(),
                rollout: Assessment::default(),
                settle,
                bounce_wake_at_ms,
            };
        }
    };
    let assessment = rollout::assess(snapshot, now_ms);
    let halted = assessment.halt.is_some();
    let names = |order: &[usize]| order.iter().map(|&i| nodes[i].name.clone()).collect();
    let mut plan = Plan {
        blocked,
        actions: Vec::new(),
        nodes: Vec::new(),
        in_flight,
        upgrade_order: names(&graph.upgrade_order),
        rollout: Assessment::default(),
        settle: Settle::default(),
        bounce_wake_at_ms,
    };

    let mut chosen = vec![false; nodes.len()];
    let allow = |plan: &mut Plan, node_plan: &mut NodePlan, node: usize, operation| {
        if plan.blocked.is_some() {
            node_plan.deferred = Some(Deferred::Blocked);
            return false;
        }
        if halted {
            node_plan.deferred = Some(Deferred::Halted);
            return false;
        }
        node_plan.action = Some(operation);
        plan.actions.push(Action::new(
            NodeIndex(node),
            &nodes[node],
            operation,
            PodSource::Desired,
        ));
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
        // A new change waits for the desired state to settle; restoring a lost pod on the
        // revision it ran does not (rule 8).
        if plan.blocked.is_none()
            && !halted
            && !settle.is_settled()
            && !settle::restores_lost_pod(&nodes[node])
        {
            node_plan.deferred = Some(Deferred::Settling);
            continue;
        }
        if plan.blocked.is_none() && !halted && free_slots == 0 {
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
    let mut sequence = nodes
        .iter()
        .filter_map(|n| n.change.as_ref().map(|c| c.sequence))
        .max()
        .unwrap_or(0);
    if let (Some(halt), None) = (&assessment.halt, &plan.blocked) {
        plan_halted(snapshot, &assessment, halt, &mut plan, &mut node_plans);
    }
    for action in &mut plan.actions {
        let node = snapshot.node(action.node);
        if action.record.is_none() && action.source == PodSource::Desired {
            action.record = record_for(node, action.operation, &assessment.rollout_id);
        }
        if let Some(record) = &mut action.record {
            sequence += 1;
            record.sequence = sequence;
        }
    }
    plan.actions.extend(bounce_actions);
    plan.rollout = assessment;
    plan.settle = settle;
    plan.nodes = node_plans;
    plan
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

/// Halted: no node moves toward its desired revision. Unfinished rollbacks finish; with
/// rollback, the nodes this rollout changed return to their previous revision one at a time,
/// newest change first (all at once within `maxConcurrent` when dependencies are disabled); a
/// node caught between deleting its old pod and creating the new one gets its old revision back.
fn plan_halted(
    snapshot: &ClusterSnapshot,
    assessment: &Assessment,
    halt: &Halt,
    plan: &mut Plan,
    node_plans: &mut [NodePlan],
) {
    let nodes = &snapshot.nodes;
    let settings = &snapshot.settings;
    for node_plan in node_plans.iter_mut() {
        if node_plan.state.needs_change() && node_plan.action.is_none() {
            node_plan.deferred = Some(Deferred::Halted);
        }
    }
    let bouncing = |index: usize| node_plans[index].state == NodeState::Bouncing;
    let in_flight = nodes
        .iter()
        .enumerate()
        .filter(|&(index, n)| {
            bouncing(index)
                || n.pod.as_ref().is_some_and(|p| p.owned && p.terminating)
                || rollout::rollback_in_flight(n)
        })
        .count();
    let mut free_slots = (settings.max_concurrent as usize).saturating_sub(in_flight);
    let push = |plan: &mut Plan,
                node_plan: &mut NodePlan,
                index: usize,
                operation: Operation,
                revision: &str,
                record: Option<Change>| {
        node_plan.action = Some(operation);
        node_plan.deferred = None;
        plan.actions.push(
            Action::new(
                NodeIndex(index),
                &nodes[index],
                operation,
                PodSource::Kept(revision.to_owned()),
            )
            .recording(record),
        );
    };
    let rollback_record = |node: &NodeObservation, to: &str| Change {
        kind: ChangeKind::Rollback,
        state: ChangeState::InProgress,
        from: node
            .pod
            .as_ref()
            .and_then(|p| p.revision.clone())
            .or_else(|| node.change.as_ref().map(|c| c.to.clone())),
        to: to.to_owned(),
        sequence: 0,
        rollout: assessment.rollout_id.clone(),
        recovery: false,
    };
    let kept = |node: &NodeObservation, revision: &str| node.history.iter().any(|r| r == revision);

    let candidates = if halt.rollback {
        rollout::rollback_candidates(snapshot, &assessment.rollout_id)
    } else {
        Vec::new()
    };
    for (index, node) in nodes.iter().enumerate() {
        // Like everywhere else, a node whose spec is invalid is left alone; a bounce holding
        // its pod finishes first.
        if !node.up || node.desired.is_err() || node_plans[index].state == NodeState::Bouncing {
            continue;
        }
        let Some(change) = &node.change else { continue };
        let node_plan = &mut node_plans[index];
        if change.kind == ChangeKind::Rollback && change.in_progress() {
            // An unfinished rollback: finish it, whatever the order.
            match &node.pod {
                None if kept(node, &change.to) => push(
                    plan,
                    node_plan,
                    index,
                    Operation::FinishReplacement,
                    &change.to,
                    None,
                ),
                None => {
                    node_plan.deferred = Some(Deferred::NoHistory {
                        revision: change.to.clone(),
                    })
                }
                Some(p)
                    if p.owned
                        && !p.terminating
                        && p.revision.as_deref() != Some(change.to.as_str())
                        && kept(node, &change.to) =>
                {
                    push(
                        plan,
                        node_plan,
                        index,
                        Operation::ResumeReplacement,
                        &change.to,
                        None,
                    )
                }
                Some(_) => {}
            }
        } else if node.pod.is_none()
            && change.in_progress()
            && !candidates.iter().any(|(i, _)| *i == index)
            && let Some(from) = &change.from
        {
            // Caught mid-replacement without rollback: restore what it ran rather than leave
            // it without a pod or move it to the held revision.
            if kept(node, from) {
                let record = rollback_record(node, from);
                push(
                    plan,
                    node_plan,
                    index,
                    Operation::FinishReplacement,
                    from,
                    Some(record),
                );
            } else {
                node_plan.deferred = Some(Deferred::NoHistory {
                    revision: from.clone(),
                });
            }
        }
    }

    let mut started = false;
    for (index, from) in candidates {
        let node = &nodes[index];
        let node_plan = &mut node_plans[index];
        if node_plan.state == NodeState::Bouncing {
            node_plan.deferred = Some(Deferred::RollbackTurn);
            continue;
        }
        let operation = match &node.pod {
            None if node.replacing => Operation::FinishReplacement,
            None => Operation::CreatePod,
            Some(p) if !p.owned || p.terminating => continue,
            Some(p) if p.revision.as_deref() == Some(from.as_str()) => continue,
            Some(_) => Operation::ReplacePod,
        };
        if !kept(node, &from) {
            node_plan.deferred = Some(Deferred::NoHistory { revision: from });
            continue;
        }
        if !settings.dependencies_disabled && (in_flight > 0 || started) {
            node_plan.deferred = Some(Deferred::RollbackTurn);
            continue;
        }
        if free_slots == 0 {
            node_plan.deferred = Some(Deferred::NoFreeSlot {
                in_flight,
                max_concurrent: settings.max_concurrent,
            });
            continue;
        }
        let record = rollback_record(node, &from);
        push(plan, node_plan, index, operation, &from, Some(record));
        free_slots -= 1;
        started = true;
    }
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
