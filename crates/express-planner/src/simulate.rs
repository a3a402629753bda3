//! Replays plans one after another to show the whole order a rollout will take, assuming every
//! changed node becomes Ready on its new revision at once and every pod already starting becomes
//! Ready when nothing else can happen. Bounce requests are left out: they restart a pod on the
//! revision it runs and change nothing in the order. Used by `kubectl express plan` and the
//! property tests.

use express_api::NodeKind;

use crate::action::Operation;
use crate::plan::{Blocked, plan};
use crate::prerequisites::Unmet;
use crate::snapshot::{ClusterSnapshot, PodCondition, PodObservation, PodPhase};
use crate::state::NodeState;

/// What a step does to a node, as `kubectl express plan` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepAction {
    Provision,
    Upgrade,
    Delete,
}

impl StepAction {
    pub fn as_str(self) -> &'static str {
        match self {
            StepAction::Provision => "Provision",
            StepAction::Upgrade => "Upgrade",
            StepAction::Delete => "Delete",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub node: String,
    pub kind: NodeKind,
    pub action: StepAction,
    /// The nodes this step waited for (its prerequisites for that change).
    pub waits_for: Vec<String>,
}

/// A node that still needs a change when the simulation can go no further.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub node: String,
    pub kind: NodeKind,
    pub state: NodeState,
    pub waiting_for: Vec<Unmet>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Simulation {
    pub steps: Vec<Step>,
    pub blocked: Option<Blocked>,
    /// Nodes left needing a change: empty when the rollout would complete.
    pub pending: Vec<Pending>,
    /// Why no new change could start at the end, when the desired state has not settled
    /// (disagreeing `express.dev/rollout-id`s).
    pub unsettled: Option<String>,
    /// The cluster as the simulation leaves it.
    pub end_state: ClusterSnapshot,
}

/// Simulates the rollout. `max_concurrent` overrides the cluster's setting (the CLI shows the
/// order for 1); steps that start together are listed in planner order. The snapshot's desired
/// state is taken as complete, so the settle window does not apply; disagreeing
/// `express.dev/rollout-id`s still hold every new change, as they would in the cluster.
pub fn simulate(snapshot: &ClusterSnapshot, max_concurrent: Option<u32>) -> Simulation {
    let mut state = snapshot.clone();
    state.settings.settle_seconds = 0;
    // A bounce restarts a pod on the revision it runs: nothing the rollout order depends on.
    for node in &mut state.nodes {
        node.bounce_request = None;
        node.bounce = None;
    }
    if let Some(max) = max_concurrent {
        state.settings.max_concurrent = max;
    }
    let mut steps = Vec::new();
    let mut blocked = None;
    // Each node needs at most a removal or a replacement plus one settling round; the bound
    // only guards against a planner bug turning into an endless loop.
    let limit = 4 * state.nodes.len() + 16;
    for _ in 0..limit {
        let current = plan(&state, 0);
        if current.blocked.is_some() {
            blocked = current.blocked;
            break;
        }
        if current.actions.is_empty() {
            if settle(&mut state) {
                continue;
            }
            break;
        }
        for action in &current.actions {
            let step_action = match action.operation {
                Operation::CreatePod | Operation::DeleteEndedPod => StepAction::Provision,
                Operation::ReplacePod
                | Operation::ResumeReplacement
                | Operation::FinishReplacement => StepAction::Upgrade,
                Operation::RemovePod => StepAction::Delete,
                // Bounce requests were cleared above.
                Operation::DeleteForBounce | Operation::CreateForBounce => continue,
            };
            steps.push(Step {
                node: action.name.clone(),
                kind: action.kind,
                action: step_action,
                waits_for: current.node(action.node).prerequisites.clone(),
            });
            let node = &mut state.nodes[action.node.0];
            node.replacing = false;
            node.pod = match (step_action, &node.desired) {
                (StepAction::Delete, _) | (_, Err(_)) => None,
                (_, Ok(desired)) => Some(ready_pod(&desired.revision, &desired.version)),
            };
        }
    }
    let last = plan(&state, 0);
    let pending = last
        .nodes
        .iter()
        .zip(&state.nodes)
        .filter(|(p, _)| {
            !matches!(
                p.state,
                NodeState::UpToDate
                    | NodeState::Down
                    | NodeState::PodNotOwned
                    | NodeState::InvalidSpec(_)
            )
        })
        .map(|(p, n)| Pending {
            node: n.name.clone(),
            kind: n.kind,
            state: p.state.clone(),
            waiting_for: p.waiting_for.clone(),
        })
        .collect();
    Simulation {
        steps,
        blocked,
        pending,
        unsettled: last.settle.message(),
        end_state: state,
    }
}

/// Lets time pass: terminating pods go away, owned pods still starting become Ready. Returns
/// whether anything changed.
fn settle(state: &mut ClusterSnapshot) -> bool {
    let mut changed = false;
    for node in &mut state.nodes {
        let Some(pod) = &node.pod else { continue };
        if pod.terminating {
            node.pod = None;
            changed = true;
        } else if pod.owned && !pod.has_ended() && !pod.is_ready() {
            node.pod = Some(PodObservation {
                conditions: vec![ready_condition()],
                phase: PodPhase::Running,
                ..pod.clone()
            });
            changed = true;
        }
    }
    changed
}

fn ready_condition() -> PodCondition {
    PodCondition {
        type_: "Ready".into(),
        status: "True".into(),
    }
}

/// A pod running `revision`, Ready.
pub fn ready_pod(revision: &str, version: &str) -> PodObservation {
    PodObservation {
        owned: true,
        uid: None,
        app_state: None,
        shutdown_protection: None,
        revision: Some(revision.to_owned()),
        version: Some(version.to_owned()),
        phase: PodPhase::Running,
        conditions: vec![ready_condition()],
        terminating: false,
        restarts: 0,
        created_at_ms: None,
    }
}
