//! A tenant's prerequisite graph as the page draws it: the planner's edges (as `plan -o dot`
//! has them) with the layout's boxes and routes.

use express_api::Objects;
use express_planner::prerequisites::{Origin, Phase};
use serde::Serialize;

use super::shown::phase_of;
use crate::dashboard::layout::{self, Layout};
use crate::show::graph;
use crate::text::short;

/// One box of the drawn graph.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphNode {
    pub name: String,
    /// `Backend`, `Frontend`, or `missing` for a prerequisite that names no node.
    pub kind: String,
    pub phase: String,
    pub up: bool,
    pub dependencies_disabled: bool,
    /// "running→desired", shortened.
    pub revision: String,
    pub x: f64,
    pub y: f64,
    pub rank: usize,
}

/// One prerequisite edge: from the prerequisite to the node that waits for it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphEdge {
    pub from: String,
    pub to: String,
    /// `default`, `explicit` or `substituted` (around a down node).
    pub origin: String,
    /// The down node it goes around, for a substituted edge.
    pub via: Option<String>,
    /// Why the node waits on it now, if it does.
    pub waiting: Option<String>,
    /// Its drawn route, `[x, y]` points.
    pub route: Vec<[f64; 2]>,
}

/// One phase's prerequisite graph, laid out.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphView {
    /// `upgrade` or `provisioning`.
    pub phase: String,
    pub nodes: Vec<GraphNode>,
    pub edges: Vec<GraphEdge>,
    /// The cycle that blocks the cluster, when there is one (then there are no edges).
    pub cycle: Option<String>,
    pub width: f64,
    pub height: f64,
}

/// The prerequisite graph of one phase, with the planner's edges (as `plan -o dot` draws them)
/// and the layout's boxes and routes.
pub(super) fn graph_view(
    snapshot: &express_planner::ClusterSnapshot,
    planned: &express_planner::Plan,
    group: &Objects,
    phase: Phase,
    upgrade_order: &[String],
) -> GraphView {
    let (edges, cycle) = match graph::edges(snapshot, planned, phase) {
        Ok(edges) => (edges, None),
        Err(cycle) => (Vec::new(), Some(cycle)),
    };
    let mut names: Vec<String> = snapshot.nodes.iter().map(|n| n.name.clone()).collect();
    // A prerequisite naming no node of the cluster gets a box of its own, marked missing.
    for edge in &edges {
        if !names.contains(&edge.from) {
            names.push(edge.from.clone());
        }
    }
    let index = |name: &str| names.iter().position(|n| n == name).unwrap_or(0);
    let pairs: Vec<(usize, usize)> = edges.iter().map(|e| (index(&e.from), e.to)).collect();
    // Up nodes in upgrade order, then down nodes, then missing ones.
    let hint: Vec<usize> = names
        .iter()
        .map(|name| {
            upgrade_order
                .iter()
                .position(|n| n == name)
                .unwrap_or(upgrade_order.len() + index(name))
        })
        .collect();
    let Layout {
        ranks,
        boxes,
        routes,
        width,
        height,
    } = layout::layout(names.len(), &pairs, &hint);
    let namespace = snapshot.namespace.as_str();
    let nodes = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let observed = snapshot.nodes.get(i);
            let node = observed.and_then(|o| group.node(namespace, o.kind, &o.name));
            let status = node.as_ref().and_then(|n| n.status());
            GraphNode {
                name: name.clone(),
                kind: observed.map_or_else(|| "missing".into(), |o| o.kind.to_string()),
                phase: node.as_ref().map_or_else(|| "-".into(), phase_of),
                up: observed.is_some_and(|o| o.up),
                dependencies_disabled: observed.is_some_and(|o| {
                    snapshot.settings.dependencies_disabled
                        || o.dependencies.as_ref().is_some_and(|d| d.disabled)
                }),
                revision: format!(
                    "{}→{}",
                    short(status.and_then(|s| s.running_revision.as_deref())),
                    short(status.and_then(|s| s.desired_revision.as_deref()))
                ),
                x: boxes[i].x,
                y: boxes[i].y,
                rank: ranks[i],
            }
        })
        .collect();
    let edges = edges
        .iter()
        .zip(routes)
        .map(|(edge, route)| GraphEdge {
            from: edge.from.clone(),
            to: names[edge.to].clone(),
            origin: match edge.origin {
                Origin::Default => "default",
                Origin::Explicit => "explicit",
                Origin::Substituted { .. } => "substituted",
            }
            .to_owned(),
            via: match edge.origin {
                Origin::Substituted { down } => snapshot.nodes.get(down).map(|n| n.name.clone()),
                _ => None,
            },
            waiting: edge.unmet.clone(),
            route: route.iter().map(|p| [p.x, p.y]).collect(),
        })
        .collect();
    GraphView {
        phase: graph::phase_name(phase).to_owned(),
        nodes,
        edges,
        cycle,
        width,
        height,
    }
}
