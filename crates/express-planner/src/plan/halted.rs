//! The halted plan: once a rollout failed or was aborted, nothing moves forward; unfinished
//! rollbacks finish, and with rollback the nodes the rollout changed return, one at a time.

use express_api::{ChangeKind, ChangeState};

use super::verdict::{Deferred, NodePlan, Plan};
use crate::action::{Action, Operation, PodSource};
use crate::rollout::{self, Assessment, Halt};
use crate::snapshot::{Change, ClusterSnapshot, NodeIndex, NodeObservation};
use crate::state::NodeState;

/// Halted: no node moves toward its desired revision. Unfinished rollbacks finish; with
/// rollback, the nodes this rollout changed return to their previous revision one at a time,
/// newest change first (all at once within `maxConcurrent` when dependencies are disabled); a
/// node caught between deleting its old pod and creating the new one gets its old revision back.
pub(super) fn plan_halted(
    snapshot: &ClusterSnapshot,
    assessment: &Assessment,
    halt: &Halt,
    plan: &mut Plan,
    node_plans: &mut [NodePlan],
) {
    for node_plan in node_plans.iter_mut() {
        if node_plan.state.needs_change() && node_plan.action.is_none() {
            node_plan.deferred = Some(Deferred::Halted);
        }
    }
    let in_flight = in_flight(snapshot, node_plans);
    let candidates = if halt.rollback {
        rollout::rollback_candidates(snapshot, &assessment.rollout_id)
    } else {
        Vec::new()
    };
    let mut returns = Returns {
        snapshot,
        rollout_id: &assessment.rollout_id,
        plan,
    };
    finish_unfinished(&mut returns, node_plans, &candidates);
    roll_back(&mut returns, node_plans, candidates, in_flight);
}

/// Nodes in flight for a halted rollout: bouncing, with their pod terminating, or mid-rollback.
fn in_flight(snapshot: &ClusterSnapshot, node_plans: &[NodePlan]) -> usize {
    snapshot
        .nodes
        .iter()
        .enumerate()
        .filter(|&(index, n)| {
            node_plans[index].state == NodeState::Bouncing
                || n.pod.as_ref().is_some_and(|p| p.owned && p.terminating)
                || rollout::rollback_in_flight(n)
        })
        .count()
}

/// The halted plan's pod operations, each returning a node to a revision it kept.
struct Returns<'a> {
    snapshot: &'a ClusterSnapshot,
    rollout_id: &'a str,
    plan: &'a mut Plan,
}

impl Returns<'_> {
    fn push(
        &mut self,
        node_plan: &mut NodePlan,
        index: usize,
        operation: Operation,
        revision: &str,
        record: Option<Change>,
    ) {
        node_plan.action = Some(operation);
        node_plan.deferred = None;
        self.plan.actions.push(
            Action::new(
                NodeIndex(index),
                &self.snapshot.nodes[index],
                operation,
                PodSource::Kept(revision.to_owned()),
            )
            .recording(record),
        );
    }

    /// The record of a rollback of `node` to `to`, from the revision it runs or was going to.
    fn rollback_record(&self, node: &NodeObservation, to: &str) -> Change {
        Change {
            kind: ChangeKind::Rollback,
            state: ChangeState::InProgress,
            from: node
                .pod
                .as_ref()
                .and_then(|p| p.revision.clone())
                .or_else(|| node.change.as_ref().map(|c| c.to.clone())),
            to: to.to_owned(),
            sequence: 0,
            rollout: self.rollout_id.to_owned(),
            recovery: false,
        }
    }
}

/// Whether the node's ControllerRevisions still hold `revision`.
fn kept(node: &NodeObservation, revision: &str) -> bool {
    node.history.iter().any(|r| r == revision)
}

/// Changes left half done: unfinished rollbacks finish, whatever the order, and a node caught
/// mid-replacement that is not to roll back gets back what it ran.
fn finish_unfinished(
    returns: &mut Returns<'_>,
    node_plans: &mut [NodePlan],
    candidates: &[(usize, String)],
) {
    let snapshot = returns.snapshot;
    for (index, node) in snapshot.nodes.iter().enumerate() {
        // Like everywhere else, a node whose spec is invalid is left alone; a bounce holding
        // its pod finishes first.
        if !node.up || node.desired.is_err() || node_plans[index].state == NodeState::Bouncing {
            continue;
        }
        let Some(change) = &node.change else { continue };
        let node_plan = &mut node_plans[index];
        if change.kind == ChangeKind::Rollback && change.in_progress() {
            finish_rollback(returns, node_plan, index, node, change);
        } else if node.pod.is_none()
            && change.in_progress()
            && !candidates.iter().any(|(i, _)| *i == index)
            && let Some(from) = &change.from
        {
            // Caught mid-replacement without rollback: restore what it ran rather than leave
            // it without a pod or move it to the held revision.
            if kept(node, from) {
                let record = returns.rollback_record(node, from);
                returns.push(
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
}

fn finish_rollback(
    returns: &mut Returns<'_>,
    node_plan: &mut NodePlan,
    index: usize,
    node: &NodeObservation,
    change: &Change,
) {
    match &node.pod {
        None if kept(node, &change.to) => returns.push(
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
            returns.push(
                node_plan,
                index,
                Operation::ResumeReplacement,
                &change.to,
                None,
            )
        }
        Some(_) => {}
    }
}

/// With rollback, the nodes the rollout changed return, newest change first: one at a time
/// while anything is in flight, unless dependencies are disabled, and within the free slots.
fn roll_back(
    returns: &mut Returns<'_>,
    node_plans: &mut [NodePlan],
    candidates: Vec<(usize, String)>,
    in_flight: usize,
) {
    let snapshot = returns.snapshot;
    let settings = &snapshot.settings;
    let mut free_slots = (settings.max_concurrent as usize).saturating_sub(in_flight);
    let mut started = false;
    for (index, from) in candidates {
        let node = &snapshot.nodes[index];
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
        let record = returns.rollback_record(node, &from);
        returns.push(node_plan, index, operation, &from, Some(record));
        free_slots -= 1;
        started = true;
    }
}
