//! `kubectl express status CLUSTER`: one line each time the cluster's state or message
//! changes, and an exit code a pipeline can use (DESIGN section 9): 0 the rollout is Complete
//! and the cluster Healthy, 1 Failed, Aborted, RollingBack or InvalidSpec, 3 timeout (or, with
//! `--watch=false`, not done yet), 4 paused with `--fail-on-paused`, 2 no such cluster.

use std::process::ExitCode;
use std::time::Duration;

use express_api::conditions;
use express_api::{ClusterPhase, ExpressCluster, NodePhase, RolloutState};

use crate::exit::Exit;
use crate::live::{self, Watched};
use express_api::{NodeRef, Objects};

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

pub struct StatusArgs {
    pub cluster: String,
    pub namespace: String,
    pub timeout: Option<Duration>,
    pub watch: bool,
    pub fail_on_paused: bool,
}

fn assess_objects(objects: &Objects, args: &StatusArgs) -> Result<StatusLine, Exit> {
    let express_cluster = objects.express_cluster(&args.namespace, &args.cluster);
    let nodes = objects.nodes_of(&args.namespace, &args.cluster);
    if express_cluster.is_none() && nodes.is_empty() {
        return Err(Exit::usage(format!(
            "no Express cluster {} in namespace {} (no ExpressCluster and no node names it)",
            args.cluster, args.namespace
        )));
    }
    Ok(assess(express_cluster, &nodes))
}

fn exit_for(line: &StatusLine, args: &StatusArgs) -> Option<ExitCode> {
    match line.outcome {
        Outcome::Done => Some(ExitCode::SUCCESS),
        Outcome::Failed => {
            eprintln!("kubectl-express status: {line}");
            Some(ExitCode::from(1))
        }
        Outcome::Paused if args.fail_on_paused => {
            eprintln!("kubectl-express status: {line}");
            Some(ExitCode::from(4))
        }
        Outcome::Paused | Outcome::Waiting => None,
    }
}

pub async fn run(client: &kube::Client, args: &StatusArgs) -> Result<ExitCode, Exit> {
    if !args.watch {
        let objects = live::load(client, Some(&args.namespace), "")
            .await
            .map_err(Exit::failure)?;
        let line = assess_objects(&objects, args)?;
        println!("{line}");
        return Ok(exit_for(&line, args).unwrap_or_else(|| ExitCode::from(3)));
    }
    let mut watched = Watched::start(client, &args.namespace);
    let mut last: Option<StatusLine> = None;
    let follow = async {
        watched.ready().await.map_err(Exit::failure)?;
        loop {
            let line = assess_objects(&watched.objects(), args)?;
            if last.as_ref() != Some(&line) {
                println!("{line}");
                last = Some(line.clone());
            }
            if let Some(code) = exit_for(&line, args) {
                return Ok(code);
            }
            watched.changed().await.map_err(Exit::failure)?;
        }
    };
    match args.timeout {
        None => follow.await,
        Some(timeout) => {
            let result = tokio::time::timeout(timeout, follow).await;
            match result {
                Ok(result) => result,
                Err(_) => Err(Exit::new(
                    3,
                    format!(
                        "timed out after {}; last: {}",
                        express_api::bounce::format_duration(timeout.as_secs()),
                        last.map_or_else(|| "nothing read".to_owned(), |l| l.to_string())
                    ),
                )),
            }
        }
    }
}
