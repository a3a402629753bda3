//! What the planner finds a node to be before deciding anything ([`NodeState`], from
//! [`classify`]). The bottom of the planner: every rule module reads it, none is imported here.

use crate::prerequisites::Phase;
use crate::snapshot::NodeObservation;

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
    /// A bounce holds its pod (restarting it on the revision it runs); nothing else touches
    /// the node until the bounce ends. Set by [`plan`](crate::plan::plan) from the bounce rules, never by
    /// [`classify`].
    Bouncing,
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
                | NodeState::Bouncing
        )
    }

    /// The node still needs a change (a provision, upgrade, removal, or the rest of a recorded
    /// replacement).
    pub fn needs_change(&self) -> bool {
        self.phase().is_some() || matches!(self, NodeState::NeedsRemoval | NodeState::Replacing)
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
