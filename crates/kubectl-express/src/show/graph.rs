//! `plan -o mermaid|dot`: a cluster's provisioning and upgrade prerequisite graphs as the
//! planner resolves them. An edge points from the prerequisite to the node that waits for it;
//! default, explicit and substituted (around a down node) edges are drawn differently, down
//! and dependency-disabled nodes are marked, and an edge holding a node back now is labelled
//! with the reason.

use std::fmt::Write as _;

use express_planner::prerequisites::{self, Origin, Phase, Target};
use express_planner::{ClusterSnapshot, Plan, plan};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Mermaid,
    Dot,
}

/// One edge of one phase: the prerequisite's name (a node of the snapshot, or a name it does
/// not have), the index of the node that waits, and why it waits now, if it does. The
/// dashboard draws the same edges.
pub(crate) struct Edge {
    pub from: String,
    pub to: usize,
    pub origin: Origin,
    /// Why the node waits on it now, if it does.
    pub unmet: Option<String>,
}

pub(crate) fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Provisioning => "provisioning",
        Phase::Upgrade => "upgrade",
    }
}

/// Every edge of `phase`, with what waits now as `planned` (the snapshot's plan) says; Err
/// (naming the cycle) when the prerequisites form one.
pub(crate) fn edges(
    snapshot: &ClusterSnapshot,
    planned: &Plan,
    phase: Phase,
) -> Result<Vec<Edge>, String> {
    let graph = prerequisites::resolve(snapshot).map_err(|cycle| cycle.to_string())?;
    let mut edges = Vec::new();
    for (node, observation) in snapshot.nodes.iter().enumerate() {
        if !observation.up {
            continue;
        }
        let node_plan = &planned.nodes[node];
        for requirement in graph.requirements(phase, node) {
            let from = match requirement.target {
                Target::Node(i) => snapshot.nodes[i].name.clone(),
                Target::Unknown { name, .. } | Target::Ambiguous { name } => name.to_owned(),
                Target::MissingBackend => prerequisites::MISSING_BACKEND.to_owned(),
            };
            let unmet = (node_plan.state.phase() == Some(phase))
                .then(|| {
                    node_plan
                        .waiting_for
                        .iter()
                        .find(|w| w.node == from)
                        .map(|w| w.stable_reason())
                })
                .flatten();
            edges.push(Edge {
                from,
                to: node,
                origin: requirement.origin,
                unmet,
            });
        }
    }
    Ok(edges)
}

fn node_label(snapshot: &ClusterSnapshot, index: usize) -> String {
    let node = &snapshot.nodes[index];
    let mut marks = vec![node.kind.to_string()];
    if !node.up {
        marks.push("down".into());
    }
    if snapshot.settings.dependencies_disabled
        || node.dependencies.as_ref().is_some_and(|d| d.disabled)
    {
        marks.push("dependencies disabled".into());
    }
    format!("{} ({})", node.name, marks.join(", "))
}

pub(crate) fn edge_label(snapshot: &ClusterSnapshot, edge: &Edge) -> Option<String> {
    let via = match edge.origin {
        Origin::Substituted { down } => Some(format!("via {} (down)", snapshot.nodes[down].name)),
        _ => None,
    };
    let parts: Vec<String> = via
        .into_iter()
        .chain(edge.unmet.as_ref().map(|why| format!("waiting: {why}")))
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn mermaid_id(phase: Phase, name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("{}_{safe}", &phase_name(phase)[..1])
}

/// Both graphs of one cluster.
pub fn render(snapshot: &ClusterSnapshot, format: Format) -> String {
    let planned = plan(snapshot, 0);
    let mut out = String::new();
    write_header(&mut out, snapshot, format);
    for phase in [Phase::Provisioning, Phase::Upgrade] {
        let name = phase_name(phase);
        match format {
            Format::Mermaid => {
                let _ = writeln!(out, "  subgraph {name} [{name} order]");
            }
            Format::Dot => {
                let _ = writeln!(
                    out,
                    "  subgraph \"cluster_{name}\" {{\n    label=\"{name} order\";"
                );
            }
        }
        for index in 0..snapshot.nodes.len() {
            write_node(&mut out, snapshot, phase, index, format);
        }
        match edges(snapshot, &planned, phase) {
            Err(cycle) => write_cycle(&mut out, phase, &cycle, format),
            Ok(edges) => {
                for edge in &edges {
                    write_edge(&mut out, snapshot, phase, edge, format);
                }
            }
        }
        match format {
            Format::Mermaid => out.push_str("  end\n"),
            Format::Dot => out.push_str("  }\n"),
        }
    }
    if format == Format::Dot {
        out.push_str("}\n");
    }
    out
}

/// The title, and for Mermaid the classes its nodes use.
fn write_header(out: &mut String, snapshot: &ClusterSnapshot, format: Format) {
    let title = format!("{}/{}", snapshot.namespace, snapshot.cluster_name);
    match format {
        Format::Mermaid => {
            let _ = writeln!(out, "---\ntitle: {title}\n---\nflowchart LR");
            let _ = writeln!(out, "  classDef down stroke-dasharray: 5 5,color:#888");
            let _ = writeln!(out, "  classDef disabled fill:#eee");
        }
        Format::Dot => {
            let _ = writeln!(
                out,
                "digraph \"{title}\" {{\n  rankdir=LR;\n  node [shape=box];"
            );
        }
    }
}

/// One node of one phase's graph, marked when down or when its dependencies are disabled.
fn write_node(
    out: &mut String,
    snapshot: &ClusterSnapshot,
    phase: Phase,
    index: usize,
    format: Format,
) {
    let node = &snapshot.nodes[index];
    let name = phase_name(phase);
    let label = node_label(snapshot, index);
    let disabled = snapshot.settings.dependencies_disabled
        || node.dependencies.as_ref().is_some_and(|d| d.disabled);
    match format {
        Format::Mermaid => {
            let class = if !node.up {
                ":::down"
            } else if disabled {
                ":::disabled"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "    {}[\"{label}\"]{class}",
                mermaid_id(phase, &node.name)
            );
        }
        Format::Dot => {
            let style = if !node.up {
                ", style=dashed, fontcolor=gray"
            } else if disabled {
                ", style=filled, fillcolor=lightgray"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "    \"{name}:{}\" [label=\"{label}\"{style}];",
                node.name
            );
        }
    }
}

/// In place of a phase's edges: the cycle its prerequisites form.
fn write_cycle(out: &mut String, phase: Phase, cycle: &str, format: Format) {
    let name = phase_name(phase);
    match format {
        Format::Mermaid => {
            let _ = writeln!(out, "    cycle_{name}[\"{}\"]", cycle.replace('"', "'"));
        }
        Format::Dot => {
            let _ = writeln!(
                out,
                "    \"cycle_{name}\" [label=\"{}\", color=red];",
                cycle.replace('"', "'")
            );
        }
    }
}

/// One edge, drawn by its origin and labelled with what it goes around and why it holds its
/// node back now; a prerequisite the snapshot does not have gets a node of its own.
fn write_edge(
    out: &mut String,
    snapshot: &ClusterSnapshot,
    phase: Phase,
    edge: &Edge,
    format: Format,
) {
    let name = phase_name(phase);
    let to = &snapshot.nodes[edge.to].name;
    let label = edge_label(snapshot, edge);
    match format {
        Format::Mermaid => {
            let arrow = match edge.origin {
                Origin::Default => "-->",
                Origin::Explicit => "==>",
                Origin::Substituted { .. } => "-.->",
            };
            let from_known = snapshot.nodes.iter().any(|n| n.name == edge.from);
            if !from_known {
                let _ = writeln!(
                    out,
                    "    {}[\"{}\"]:::down",
                    mermaid_id(phase, &edge.from),
                    edge.from
                );
            }
            let label = label.map(|l| format!("|\"{l}\"|")).unwrap_or_default();
            let _ = writeln!(
                out,
                "    {} {arrow}{label} {}",
                mermaid_id(phase, &edge.from),
                mermaid_id(phase, to)
            );
        }
        Format::Dot => {
            let mut attributes = vec![match edge.origin {
                Origin::Default => "style=solid".to_owned(),
                Origin::Explicit => "style=bold".to_owned(),
                Origin::Substituted { .. } => "style=dashed".to_owned(),
            }];
            if let Some(label) = label {
                attributes.push(format!("label=\"{label}\""));
            }
            if edge.unmet.is_some() {
                attributes.push("color=red".into());
            }
            let _ = writeln!(
                out,
                "    \"{name}:{}\" -> \"{name}:{to}\" [{}];",
                edge.from,
                attributes.join(", ")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use express_api::objects::shared;
    use express_api::{Backend, ExpressCluster, Frontend};
    use express_planner::observe::{Inventory, PodOwnership, snapshots};
    use serde_json::json;

    /// be, fe1, fe2 (down), fe3; fe4 waits explicitly for fe2 (down), so for fe2's own
    /// predecessor instead; fe5 has dependencies disabled. Nothing runs yet.
    fn snapshot() -> ClusterSnapshot {
        let node = |kind: &str, name: &str, spec: serde_json::Value| {
            let mut spec_value =
                json!({"clusterConfig": {"clusterName": "acme"}, "expressVersion": "v1"});
            spec_value
                .as_object_mut()
                .unwrap()
                .extend(spec.as_object().unwrap().clone());
            json!({"apiVersion": "express.dev/v1alpha1", "kind": kind,
                   "metadata": {"name": name, "namespace": "tenant"}, "spec": spec_value})
        };
        let backends: Vec<Backend> =
            vec![serde_json::from_value(node("Backend", "acme-be", json!({}))).unwrap()];
        let frontends: Vec<Frontend> = [
            ("acme-fe1", json!({})),
            ("acme-fe2", json!({"up": false})),
            ("acme-fe3", json!({})),
            ("acme-fe4", json!({"deploymentDependencies": {"provisioningPrerequisites": [{"expressNode": "acme-fe2"}]}})),
            ("acme-fe5", json!({"deploymentDependencies": {"disabled": true}})),
        ]
        .into_iter()
        .map(|(name, spec)| serde_json::from_value(node("Frontend", name, spec)).unwrap())
        .collect();
        let clusters: Vec<ExpressCluster> = vec![serde_json::from_value(json!({
            "apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
            "metadata": {"name": "acme", "namespace": "tenant"}, "spec": {"rollout": {"settleSeconds": 0}}
        })).unwrap()];
        let objects = express_api::Objects {
            clusters: shared(clusters),
            backends: shared(backends),
            frontends: shared(frontends),
            ..express_api::Objects::default()
        };
        let inventory = Inventory {
            objects: &objects,
            operator_namespace: "express-system",
            ownership: PodOwnership::Name,
        };
        snapshots(&inventory).remove(0)
    }

    #[test]
    fn mermaid_tells_edges_apart_and_labels_what_waits() {
        insta::assert_snapshot!("graph_mermaid", render(&snapshot(), Format::Mermaid));
    }

    #[test]
    fn dot_tells_edges_apart_and_labels_what_waits() {
        insta::assert_snapshot!("graph_dot", render(&snapshot(), Format::Dot));
    }
}
