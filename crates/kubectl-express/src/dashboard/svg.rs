//! The order graph drawn as SVG on the server, from a laid-out [`GraphView`]: a box per node
//! coloured by phase, an arrow per prerequisite (solid default, bold explicit, dashed when
//! substituted around a down node), and every edge a node waits on now drawn red and numbered,
//! its reason in a legend under the graph (a label on the edge itself would not fit between
//! the columns at 30 nodes).

use maud::{Markup, html};

use super::layout::{BOX_HEIGHT, BOX_WIDTH};
use super::model::graph::GraphView;

/// Height of one legend line under the graph.
const LEGEND_LINE: f64 = 18.0;

/// The CSS class of a phase's box (the stylesheet colours them).
pub fn phase_class(phase: &str) -> &'static str {
    match phase {
        "Ready" => "ready",
        "Waiting" => "waiting",
        "Provisioning" | "Upgrading" => "changing",
        "Bouncing" => "bouncing",
        "NotReady" => "notready",
        "Failed" => "failed",
        "Paused" => "paused",
        "Down" => "down",
        _ => "unknown",
    }
}

fn path(route: &[[f64; 2]]) -> String {
    let mut d = String::new();
    for (i, [x, y]) in route.iter().enumerate() {
        d.push_str(if i == 0 { "M" } else { " L" });
        d.push_str(&format!("{x:.1} {y:.1}"));
    }
    d
}

/// The graph as an `<svg>` element; `id` names it in the page.
pub fn render(graph: &GraphView, id: &str) -> Markup {
    // Numbered left to right, as the rollout meets them.
    let rank = |name: &str| {
        graph
            .nodes
            .iter()
            .find(|n| n.name == name)
            .map(|n| (n.rank, n.y as i64))
    };
    let mut waiting: Vec<usize> = (0..graph.edges.len())
        .filter(|&i| graph.edges[i].waiting.is_some())
        .collect();
    waiting.sort_by_key(|&i| (rank(&graph.edges[i].to), rank(&graph.edges[i].from)));
    let legend_lines = waiting.len() + usize::from(graph.cycle.is_some());
    let height = graph.height + legend_lines as f64 * LEGEND_LINE + 8.0;
    let width = graph.width.max(360.0);
    html! {
        svg id=(id) class="order-graph" xmlns="http://www.w3.org/2000/svg"
            width=(format!("{width:.0}")) height=(format!("{height:.0}"))
            viewBox=(format!("0 0 {width:.0} {height:.0}"))
            role="img" aria-label=(format!("{} order of the nodes", graph.phase))
            data-phase=(graph.phase) {
            defs {
                marker id=(format!("{id}-arrow")) viewBox="0 0 10 10" refX="9" refY="5"
                    markerWidth="7" markerHeight="7" orient="auto-start-reverse" {
                    path d="M0 0 L10 5 L0 10 z" class="arrowhead" {}
                }
                marker id=(format!("{id}-arrow-waiting")) viewBox="0 0 10 10" refX="9" refY="5"
                    markerWidth="7" markerHeight="7" orient="auto-start-reverse" {
                    path d="M0 0 L10 5 L0 10 z" class="arrowhead waiting" {}
                }
            }
            @for (i, edge) in graph.edges.iter().enumerate() {
                @let number = waiting.iter().position(|&w| w == i).map(|n| n + 1);
                @let marker = if number.is_some() { format!("url(#{id}-arrow-waiting)") } else { format!("url(#{id}-arrow)") };
                @if edge.route.len() >= 2 {
                    g class=(format!("edge {}{}", edge.origin, if number.is_some() { " waiting" } else { "" }))
                        data-from=(edge.from) data-to=(edge.to) data-origin=(edge.origin) {
                        title {
                            (edge.from) " → " (edge.to) " (" (edge.origin)
                            @if let Some(via) = &edge.via { ", via " (via) " (down)" }
                            ")"
                            @if let Some(why) = &edge.waiting { ": waiting: " (why) }
                        }
                        path d=(path(&edge.route)) fill="none" marker-end=(marker) {}
                        @if let Some(number) = number {
                            @let [x, y] = edge.route[edge.route.len() / 2];
                            circle cx=(format!("{x:.1}")) cy=(format!("{y:.1}")) r="8" class="badge" {}
                            text x=(format!("{x:.1}")) y=(format!("{:.1}", y + 4.0)) class="badge-text" text-anchor="middle" { (number) }
                        }
                    }
                }
            }
            @for node in &graph.nodes {
                @let class = if node.kind == "missing" { "missing".to_owned() } else if !node.up { "down".to_owned() } else { phase_class(&node.phase).to_owned() };
                g class=(format!("node {class}")) data-node=(node.name) data-phase=(node.phase) data-rank=(node.rank) {
                    title { (node.name) " (" (node.kind) "): " (node.phase) }
                    rect x=(format!("{:.1}", node.x)) y=(format!("{:.1}", node.y))
                        width=(BOX_WIDTH) height=(BOX_HEIGHT) rx="6" {}
                    text x=(format!("{:.1}", node.x + 8.0)) y=(format!("{:.1}", node.y + 18.0)) class="name" { (node.name) }
                    text x=(format!("{:.1}", node.x + 8.0)) y=(format!("{:.1}", node.y + 34.0)) class="phase" {
                        (node.phase)
                        @if node.kind == "missing" { " (no such node)" }
                        @else if !node.up { " (down)" }
                        @else if node.dependencies_disabled { " (no ordering)" }
                    }
                    text x=(format!("{:.1}", node.x + 8.0)) y=(format!("{:.1}", node.y + 49.0)) class="revision" { (node.revision) }
                }
            }
            @if let Some(cycle) = &graph.cycle {
                text x="16" y=(format!("{:.1}", graph.height + 12.0)) class="legend cycle" { "Blocked: " (cycle) }
            }
            @let line = graph.height + if graph.cycle.is_some() { LEGEND_LINE } else { 0.0 };
            @for (n, &i) in waiting.iter().enumerate() {
                @let edge = &graph.edges[i];
                text x="16" y=(format!("{:.1}", line + 12.0 + n as f64 * LEGEND_LINE)) class="legend" {
                    tspan class="badge-ref" { (n + 1) } " "
                    (edge.to) " waits for " (edge.from) ": "
                    (edge.waiting.as_deref().unwrap_or_default())
                    @if let Some(via) = &edge.via { " (via " (via) ", down)" }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::dashboard::layout;
    use crate::dashboard::model::graph::{GraphEdge, GraphNode};

    fn graph() -> GraphView {
        let names = ["acme-fe1", "acme-fe2", "acme-be"];
        let laid = layout::layout(3, &[(0, 1), (1, 2)], &[0, 1, 2]);
        GraphView {
            phase: "upgrade".into(),
            nodes: names
                .iter()
                .enumerate()
                .map(|(i, name)| GraphNode {
                    name: (*name).into(),
                    kind: "Frontend".into(),
                    phase: ["Ready", "Upgrading", "Waiting"][i].into(),
                    up: true,
                    dependencies_disabled: false,
                    revision: "a→b".into(),
                    x: laid.boxes[i].x,
                    y: laid.boxes[i].y,
                    rank: laid.ranks[i],
                })
                .collect(),
            edges: vec![
                GraphEdge {
                    from: "acme-fe1".into(),
                    to: "acme-fe2".into(),
                    origin: "default".into(),
                    via: None,
                    waiting: None,
                    route: laid.routes[0].iter().map(|p| [p.x, p.y]).collect(),
                },
                GraphEdge {
                    from: "acme-fe2".into(),
                    to: "acme-be".into(),
                    origin: "explicit".into(),
                    via: None,
                    waiting: Some("not yet Ready <now>".into()),
                    route: laid.routes[1].iter().map(|p| [p.x, p.y]).collect(),
                },
            ],
            cycle: None,
            width: laid.width,
            height: laid.height,
        }
    }

    #[test]
    fn every_node_is_a_box_and_every_edge_an_arrow() {
        let svg = render(&graph(), "upgrade").into_string();
        assert_eq!(svg.matches("<rect ").count(), 3);
        assert_eq!(svg.matches("class=\"edge ").count(), 2);
        assert!(svg.contains("data-from=\"acme-fe1\" data-to=\"acme-fe2\""));
        assert!(svg.contains("class=\"node changing\""));
    }

    #[test]
    fn a_waiting_edge_is_numbered_and_its_reason_escaped_in_the_legend() {
        let svg = render(&graph(), "upgrade").into_string();
        assert!(svg.contains("class=\"edge explicit waiting\""));
        assert!(svg.contains("acme-be waits for acme-fe2: not yet Ready &lt;now&gt;"));
        assert!(!svg.contains("<now>"));
    }
}
