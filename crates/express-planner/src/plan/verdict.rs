//! What a plan says: the verdict for the cluster and for each node, and why a node that
//! could act waits.

use crate::action::{Action, Operation};
use crate::bounce::BouncePlan;
use crate::prerequisites::Unmet;
use crate::rollout::Assessment;
use crate::settle::Settle;
use crate::snapshot::{NodeIndex, Pause};
use crate::state::NodeState;

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
