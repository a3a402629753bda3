//! `kubectl express plan --offline`: the order in which the operator would change nodes, from
//! manifests alone (DESIGN section 9).

use std::fmt::Write as _;
use std::path::PathBuf;

use express_planner::observe::{Inventory, PodOwnership, snapshots};
use express_planner::prerequisites::dangling_prerequisites;
use express_planner::simulate::{Simulation, simulate};
use express_planner::{Blocked, ClusterSnapshot};
use serde::Serialize;

use crate::read::manifests::{self, Manifests};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
    /// The prerequisite graphs as a Mermaid flowchart.
    Mermaid,
    /// The prerequisite graphs in Graphviz DOT.
    Dot,
}

pub struct OfflinePlan {
    pub files: Vec<PathBuf>,
    pub namespace: String,
    pub operator_namespace: String,
}

/// A cluster's simulated rollout, ready to print.
pub struct ClusterPlan {
    pub snapshot: ClusterSnapshot,
    pub simulation: Simulation,
}

/// The result of planning: one entry per Express cluster, plus warnings for stderr.
pub struct Report {
    pub clusters: Vec<ClusterPlan>,
    pub warnings: Vec<String>,
}

/// Loads the manifests and simulates every cluster. Any problem that would keep the operator
/// from acting (unreadable input, invalid specs, unknown prerequisites, cycles) is an error.
pub fn offline(request: &OfflinePlan) -> Result<Report, Vec<String>> {
    let manifests = manifests::load(&request.files, &request.namespace)
        .map_err(|errors| errors.iter().map(ToString::to_string).collect::<Vec<_>>())?;
    let inventory = Inventory {
        objects: &manifests.objects,
        operator_namespace: &request.operator_namespace,
        ownership: PodOwnership::Name,
    };
    let snapshots = snapshots(&inventory);
    let mut errors = Vec::new();
    let mut warnings = unmatched_pods(&manifests, &snapshots);
    let mut clusters = Vec::new();
    for snapshot in snapshots {
        let namespace = snapshot.namespace.clone();
        let located = |kind: &str, name: &str| {
            manifests
                .origin(kind, &namespace, name)
                .map(|origin| format!("{origin}: "))
                .unwrap_or_default()
        };
        let (cluster, problems, notes) = assess(snapshot, &located);
        errors.extend(problems);
        warnings.extend(notes);
        clusters.push(cluster);
    }
    if errors.is_empty() {
        Ok(Report { clusters, warnings })
    } else {
        Err(errors)
    }
}

/// Simulates one cluster and says what would keep the operator from acting (errors) and what
/// would still wait at the end (warnings). `located` prefixes where an object came from.
fn assess(
    snapshot: ClusterSnapshot,
    located: &dyn Fn(&str, &str) -> String,
) -> (ClusterPlan, Vec<String>, Vec<String>) {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();

    let cluster = format!(
        "Express cluster {}/{}",
        snapshot.namespace, snapshot.cluster_name
    );
    for message in &snapshot.spec_errors {
        errors.push(format!("{cluster}: {message}"));
    }
    for node in &snapshot.nodes {
        if let Err(message) = &node.desired {
            errors.push(format!(
                "{}{} {}/{}: {message}",
                located(&node.kind.to_string(), &node.name),
                node.kind,
                snapshot.namespace,
                node.name
            ));
        }
    }
    for dangling in dangling_prerequisites(&snapshot) {
        errors.push(format!(
            "{}{dangling}",
            located(&dangling.kind.to_string(), &dangling.node)
        ));
    }
    if snapshot.nodes.is_empty() {
        warnings.push(format!(
            "{cluster}: the ExpressCluster has no Backend or Frontend nodes"
        ));
    }
    let simulation = simulate(&snapshot, Some(1));
    match &simulation.blocked {
        Some(Blocked::InvalidSpec(message)) => errors.push(format!("{cluster}: {message}")),
        Some(Blocked::Paused(_)) | None => {}
    }
    if let Some(why) = &simulation.unsettled {
        warnings.push(format!("{cluster}: nothing new starts: {why}"));
    }
    for pending in &simulation.pending {
        let why: Vec<String> = pending
            .waiting_for
            .iter()
            .map(ToString::to_string)
            .collect();
        warnings.push(format!(
            "{cluster}: {} {} would still wait: {}",
            pending.kind,
            pending.node,
            if why.is_empty() {
                format!("{:?}", pending.state)
            } else {
                why.join("; ")
            }
        ));
    }
    (
        ClusterPlan {
            snapshot,
            simulation,
        },
        errors,
        warnings,
    )
}

/// Plans every Express cluster of a live cluster's objects (one, when `cluster` names it).
/// Problems are warnings here: the operator reports them in status and keeps going.
pub fn live(
    objects: &express_api::Objects,
    operator_namespace: &str,
    cluster: Option<&str>,
) -> Report {
    let inventory = express_client::read::live::inventory(objects, operator_namespace);
    let mut warnings = Vec::new();
    let mut clusters = Vec::new();
    for snapshot in snapshots(&inventory) {
        if cluster.is_some_and(|c| c != snapshot.cluster_name) {
            continue;
        }
        let (plan, problems, notes) = assess(snapshot, &|_, _| String::new());
        warnings.extend(problems);
        warnings.extend(notes);
        clusters.push(plan);
    }
    Report { clusters, warnings }
}

fn unmatched_pods(manifests: &Manifests, snapshots: &[ClusterSnapshot]) -> Vec<String> {
    manifests
        .objects
        .pods
        .iter()
        .filter_map(|pod| {
            let name = &*pod.name;
            let namespace = pod.namespace()?;
            let matched = snapshots
                .iter()
                .any(|s| s.namespace == namespace && s.nodes.iter().any(|n| n.name == name));
            (!matched).then(|| format!("Pod {namespace}/{name} is named after no node; ignored"))
        })
        .collect()
}

#[derive(Serialize)]
struct PlanJson<'a> {
    clusters: Vec<ClusterJson<'a>>,
}

#[derive(Serialize)]
struct ClusterJson<'a> {
    namespace: &'a str,
    name: &'a str,
    steps: Vec<StepJson<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StepJson<'a> {
    node: &'a str,
    action: &'static str,
    waits_for: &'a [String],
}

pub fn render_json(report: &Report) -> Result<String, serde_json::Error> {
    let plan = PlanJson {
        clusters: report
            .clusters
            .iter()
            .map(|c| ClusterJson {
                namespace: &c.snapshot.namespace,
                name: &c.snapshot.cluster_name,
                steps: c
                    .simulation
                    .steps
                    .iter()
                    .map(|s| StepJson {
                        node: &s.node,
                        action: s.action.as_str(),
                        waits_for: &s.waits_for,
                    })
                    .collect(),
            })
            .collect(),
    };
    serde_json::to_string_pretty(&plan)
}

pub fn render_table(report: &Report) -> String {
    let mut out = String::new();
    for (i, cluster) in report.clusters.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let snapshot = &cluster.snapshot;
        let _ = writeln!(
            out,
            "Express cluster {}/{} ({} nodes, {} up)",
            snapshot.namespace,
            snapshot.cluster_name,
            snapshot.nodes.len(),
            snapshot.nodes.iter().filter(|n| n.up).count()
        );
        let changing: Vec<&str> = express_planner::plan(snapshot, 0)
            .nodes
            .iter()
            .zip(&snapshot.nodes)
            .filter(|(p, _)| p.state.in_flight())
            .map(|(_, n)| n.name.as_str())
            .collect();
        if !changing.is_empty() {
            let _ = writeln!(out, "  changing now: {}", changing.join(", "));
        }
        if let Some(Blocked::Paused(pause)) = &cluster.simulation.blocked {
            let _ = writeln!(out, "  {pause}; nothing changes until it is resumed");
            continue;
        }
        if let Some(Blocked::InvalidSpec(why)) = &cluster.simulation.blocked {
            let _ = writeln!(
                out,
                "  invalid spec: {why}; nothing changes until it is fixed"
            );
            continue;
        }
        if cluster.simulation.steps.is_empty() {
            let text = match &cluster.simulation.unsettled {
                Some(why) => format!("  nothing starts: {why}"),
                None => "  nothing to do: every up node runs its desired revision".to_owned(),
            };
            let _ = writeln!(out, "{text}");
            continue;
        }
        let rows: Vec<[String; 5]> = cluster
            .simulation
            .steps
            .iter()
            .enumerate()
            .map(|(n, step)| {
                [
                    (n + 1).to_string(),
                    step.node.clone(),
                    step.kind.to_string(),
                    step.action.as_str().to_owned(),
                    if step.waits_for.is_empty() {
                        "-".to_owned()
                    } else {
                        step.waits_for.join(", ")
                    },
                ]
            })
            .collect();
        let header = ["STEP", "NODE", "KIND", "ACTION", "WAITS FOR"].map(str::to_owned);
        let widths: Vec<usize> = (0..5)
            .map(|c| {
                rows.iter()
                    .chain([&header])
                    .map(|r| r[c].len())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for row in std::iter::once(&header).chain(&rows) {
            let line: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            let _ = writeln!(out, "  {}", line.join("  ").trim_end());
        }
    }
    if report.clusters.is_empty() {
        out.push_str("no Express cluster found in the input\n");
    }
    out
}
