//! Where an Express cluster stands, read from its ExpressCluster's status (or, without one, its
//! nodes' phases): a state, a message and the [`Outcome`] a pipeline acts on. Shared by the
//! `status`, `get` and `list` verbs.

use express_api::conditions;
use express_api::{ClusterPhase, ExpressCluster, NodePhase, RolloutState};

use express_api::NodeRef;

/// Where a cluster stands for a pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The rollout is complete and every node Ready (or intentionally down).
    Done,
    /// The rollout failed, was aborted (or is rolling back), or the spec is invalid.
    Failed,
    /// A pause is in force: not final.
    Paused,
    /// Still changing, or the operator has not observed the latest spec.
    Waiting,
}

/// One status line: the state and the message, and what they mean for the exit code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusLine {
    pub state: String,
    pub message: String,
    pub outcome: Outcome,
}

impl std::fmt::Display for StatusLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.state, self.message)
    }
}

fn line(state: &str, message: impl Into<String>, outcome: Outcome) -> StatusLine {
    StatusLine {
        state: state.to_owned(),
        message: message.into(),
        outcome,
    }
}

/// The cluster's state from its ExpressCluster (or, without one, from its nodes alone).
pub fn assess(cluster: Option<&ExpressCluster>, nodes: &[NodeRef<'_>]) -> StatusLine {
    // A spec the operator has not seen yet is never reported as done.
    if let Some(cluster) = cluster {
        let generation = cluster.metadata.generation.unwrap_or(0);
        let observed = cluster.status.as_ref().and_then(|s| s.observed_generation);
        if cluster.status.is_none() || observed < Some(generation) {
            return line(
                "Waiting",
                format!("waiting for the operator to observe generation {generation}"),
                Outcome::Waiting,
            );
        }
    }
    if let Some(node) = nodes.iter().find(|n| n.unobserved()) {
        return line(
            "Waiting",
            format!(
                "waiting for the operator to observe {} {} generation {}",
                node.kind(),
                node.name(),
                node.meta().generation.unwrap_or(0)
            ),
            Outcome::Waiting,
        );
    }
    match cluster.and_then(|c| c.status.as_ref()) {
        Some(status) => {
            let message = status.message.clone().unwrap_or_default();
            let invalid = status
                .conditions
                .iter()
                .any(|c| c.type_ == conditions::INVALID_SPEC && c.status == "True");
            if invalid {
                return line("InvalidSpec", message, Outcome::Failed);
            }
            let state = status.rollout.as_ref().and_then(|r| r.state);
            let phase = status.phase;
            match state {
                Some(RolloutState::Failed | RolloutState::Aborted | RolloutState::RollingBack) => {
                    line(
                        state.map_or("", RolloutState::as_str),
                        message,
                        Outcome::Failed,
                    )
                }
                Some(RolloutState::Paused) => line("Paused", message, Outcome::Paused),
                _ if phase == Some(ClusterPhase::Paused) => {
                    line("Paused", message, Outcome::Paused)
                }
                Some(RolloutState::Complete) if phase == Some(ClusterPhase::Healthy) => {
                    line("Complete", message, Outcome::Done)
                }
                Some(state) => line(state.as_str(), message, Outcome::Waiting),
                None => line(
                    &phase.map_or_else(|| "Waiting".to_owned(), |p| format!("{p:?}")),
                    message,
                    Outcome::Waiting,
                ),
            }
        }
        None => from_nodes(nodes),
    }
}

/// Without an ExpressCluster: the nodes' phases say it all.
fn from_nodes(nodes: &[NodeRef<'_>]) -> StatusLine {
    let phase = |n: &NodeRef<'_>| n.status().and_then(|s| s.phase);
    let message = |n: &NodeRef<'_>| {
        n.status()
            .and_then(|s| s.message.clone())
            .unwrap_or_default()
    };
    if let Some(failed) = nodes.iter().find(|n| phase(n) == Some(NodePhase::Failed)) {
        return line(
            "Failed",
            format!("{}: {}", failed.name(), message(failed)),
            Outcome::Failed,
        );
    }
    if let Some(paused) = nodes.iter().find(|n| phase(n) == Some(NodePhase::Paused)) {
        return line("Paused", message(paused), Outcome::Paused);
    }
    let settled = |n: &&NodeRef<'_>| matches!(phase(n), Some(NodePhase::Ready | NodePhase::Down));
    let ready = nodes.iter().filter(settled).count();
    match nodes.iter().find(|n| !settled(n)) {
        None => line(
            "Complete",
            format!(
                "all {} nodes Ready or intentionally down (no ExpressCluster)",
                nodes.len()
            ),
            Outcome::Done,
        ),
        Some(node) => line(
            "Progressing",
            format!(
                "{ready} of {} nodes settled; {}: {}",
                nodes.len(),
                node.name(),
                message(node)
            ),
            Outcome::Waiting,
        ),
    }
}
