//! The tenant page: its summary and actions, the upgrade and provisioning graphs, the node
//! table with each node's bounce, the rollout's history and the events; and its parts for the
//! live updates.

use maud::{Markup, html};

use super::{Chrome, action, cluster_class, page, progress};
use crate::dashboard::links::Acting;
use crate::dashboard::model::tenant::{NodeRow, TenantView};
use crate::dashboard::svg;

pub fn tenant_page(chrome: &Chrome<'_>, view: &TenantView) -> Markup {
    let (namespace, cluster) = (&view.namespace, &view.cluster);
    let acting = chrome.acting;
    let body = html! {
        h1 {
            (cluster) span class="namespace" { " in namespace " (namespace) }
            @if let Some(context) = acting.context { span class="namespace context" data-context=(context) { " in context " (context) } }
        }
        section id="summary" class="summary" { (summary(view)) }
        @if !chrome.read_only { section id="actions" class="actions" { (tenant_actions(view, acting)) } }
        h2 { "Order" }
        section id="graph" class="graphs" { (graphs(view)) }
        h2 { "Nodes" }
        table class="nodes" {
            thead { tr {
                th { "Node" } th { "Kind" } th { "Phase" } th { "Ready" } th { "Revision (running → desired)" }
                th { "Version" } th { "Waiting for" } th { "Pod" } th { "Age" } th { "Restarts" }
                @if !chrome.read_only { th {} }
            } }
            tbody id="nodes" { (node_rows(view, chrome.read_only, acting)) }
        }
        h2 { "Rollout history" }
        section id="history" { (history(view)) }
        h2 { "Events" }
        section id=(EVENTS_PART) { (events(view)) }
    };
    let title = match acting.naming(namespace, cluster) {
        Some(named) => named,
        None => format!("{namespace}/{cluster}"),
    };
    page(
        chrome,
        &title,
        &format!("{}/stream", acting.api_base(namespace, cluster)),
        body,
    )
}

/// The parts of the tenant page the live updates replace, by element id.
pub fn tenant_parts(view: &TenantView, chrome: &Chrome<'_>) -> Vec<(&'static str, String)> {
    let (read_only, acting) = (chrome.read_only, chrome.acting);
    let mut parts = vec![
        ("summary", summary(view).into_string()),
        (UPGRADE_GRAPH_PART, upgrade_graph(view).into_string()),
        (
            PROVISIONING_GRAPH_PART,
            provisioning_graph(view).into_string(),
        ),
        ("nodes", node_rows(view, read_only, acting).into_string()),
        ("history", history(view).into_string()),
        (EVENTS_PART, events(view).into_string()),
    ];
    if !read_only {
        parts.push(("actions", tenant_actions(view, acting).into_string()));
    }
    parts
}

fn summary(view: &TenantView) -> Markup {
    let row = &view.summary.row;
    html! {
        dl {
            dt { "Phase" } dd { span class=(format!("phase {}", cluster_class(&row.list.phase))) data-phase=(row.list.phase) { (row.list.phase) } }
            dt { "Progress" } dd { (progress(row)) " nodes on their desired revision" }
            dt { "Rollout" } dd {
                @match &view.rollout {
                    None => "-",
                    Some(rollout) => {
                        (rollout.state)
                        @if let Some(started) = &rollout.started { ", started " (started) }
                        @if let Some(finished) = &rollout.finished { ", finished " (finished) }
                        @if !rollout.current.is_empty() { "; changing " (rollout.current.join(", ")) }
                        @if let Some(failed) = &rollout.failed_node { "; failed on " (failed) }
                    }
                }
            }
            dt { "Paused" } dd { (view.paused.as_deref().unwrap_or("no")) }
            dt { "Express versions" } dd { (if row.versions.is_empty() { "-".to_owned() } else { row.versions.join(", ") }) }
            dt { "Operator" } dd { "ring " (row.list.ring) ", version " (row.list.operator_version) }
            dt { "Message" } dd class="message" { (view.message) }
        }
    }
}

fn tenant_actions(view: &TenantView, acting: Acting<'_>) -> Markup {
    let (namespace, cluster) = (&view.namespace, &view.cluster);
    let base = acting.api_base(namespace, cluster);
    let target = format!("{namespace}/{cluster}");
    // Across DCs the confirmation starts with where: "dc-b / team-a / shop".
    let named = |sentence: String| match acting.naming(namespace, cluster) {
        Some(named) => format!("{named}: {sentence}"),
        None => sentence,
    };
    let button = |name: &str, scope: Option<&str>, label: &str, sentence: String, option| {
        let body = match scope {
            Some(scope) => format!(r#"{{"scope":"{scope}"}}"#),
            None => "{}".to_owned(),
        };
        let token = acting.token(&target, name, Some(scope.unwrap_or("cluster")));
        action(
            &format!("{base}/actions/{name}"),
            &body,
            label,
            &named(sentence),
            option,
            token,
        )
    };
    let has_cluster = view.express_cluster.is_some();
    html! {
        @if has_cluster {
            @if view.cluster_paused {
                (button("resume", Some("cluster"), "Resume",
                    format!("Resume Express cluster {cluster} in namespace {namespace}: the operator may create, replace and delete its pods again (sets its ExpressCluster's spec.paused to false)."), None))
            } @else {
                (button("pause", Some("cluster"), "Pause",
                    format!("Pause Express cluster {cluster} in namespace {namespace}: no pod of it is created, replaced or deleted until it is resumed (sets its ExpressCluster's spec.paused)."), None))
            }
        }
        (button("pause", Some("namespace"), "Pause namespace",
            format!("Pause every Express cluster in namespace {namespace}, not only {cluster}: no pod in the namespace is created, replaced or deleted until it is resumed (ConfigMap express-control)."), None))
        (button("resume", Some("namespace"), "Resume namespace",
            format!("Resume every Express cluster in namespace {namespace} that the namespace's pause held (ConfigMap express-control)."), None))
        @if has_cluster {
            (button("abort", None, "Abort",
                format!("Abort the rollout of Express cluster {cluster} in namespace {namespace}: no further node is changed for the current desired revisions until the spec changes or a retry is requested."),
                Some(("rollback", "and return the nodes this rollout changed to their previous revision"))))
            (button("retry", None, "Retry",
                format!("Retry Express cluster {cluster} in namespace {namespace}: clears its failed or aborted rollout, so the operator changes nodes again."), None))
        }
    }
}

/// The element ids of the parts a live update may carry, besides the page's sections.
pub const UPGRADE_GRAPH_PART: &str = "upgrade-graph-view";
pub const PROVISIONING_GRAPH_PART: &str = "provisioning-graph-view";
pub const EVENTS_PART: &str = "events";

fn upgrade_graph(view: &TenantView) -> Markup {
    svg::render(&view.upgrade_graph, "upgrade-graph")
}

fn provisioning_graph(view: &TenantView) -> Markup {
    svg::render(&view.provisioning_graph, "provisioning-graph")
}

/// The graphs' frames stay put across live updates (only the drawings inside are replaced),
/// so a reader scrolled along a wide graph, or with the provisioning order open, keeps it.
fn graphs(view: &TenantView) -> Markup {
    html! {
        figure {
            figcaption { "Upgrade order: who waits for whom when pods are replaced" }
            div class="scroll" id=(UPGRADE_GRAPH_PART) { (upgrade_graph(view)) }
        }
        details {
            summary { "Provisioning order: who waits for whom when pods are created" }
            div class="scroll" id=(PROVISIONING_GRAPH_PART) { (provisioning_graph(view)) }
        }
        p class="key" {
            span class="key-edge default" { "default" } " "
            span class="key-edge explicit" { "explicit" } " "
            span class="key-edge substituted" { "around a down node" } " "
            span class="key-edge waiting" { "waited on now" }
        }
    }
}

fn node_rows(view: &TenantView, read_only: bool, acting: Acting<'_>) -> Markup {
    let named = |sentence: String| match acting.naming(&view.namespace, &view.cluster) {
        Some(named) => format!("{named}: {sentence}"),
        None => sentence,
    };
    html! {
        @for node in &view.nodes {
            tr data-node=(node.name) data-phase=(node.phase) {
                td { (node.name) }
                td { (node.kind) }
                td {
                    span class=(format!("phase {}", svg::phase_class(&node.phase))) { (node.phase) }
                    @if let Some(bounce) = &node.bounce { " " span class="bounce" { "bounce " (bounce) } }
                }
                td { (match node.ready { Some(true) => "yes", Some(false) => "no", None => "-" }) }
                td class="revision" {
                    (crate::text::short(node.running_revision.as_deref())) " → " (crate::text::short(node.desired_revision.as_deref()))
                }
                td { (node.running_version.as_deref().unwrap_or("-")) }
                td { (waiting(node)) }
                td { (node.pod.as_deref().unwrap_or("-")) }
                td { (node.age.as_deref().unwrap_or("-")) }
                td { (node.restarts.map_or_else(|| "-".to_owned(), |r| r.to_string())) }
                @if !read_only {
                    td {
                        @if node.up && node.pod.is_some() {
                            (action(&format!("{}/nodes/{}/actions/bounce", acting.api_base(&view.namespace, &view.cluster), node.name), "{}", "Bounce",
                                &named(format!("Bounce node {} of Express cluster {} in namespace {}: its pod is deleted gracefully and recreated on the revision it runs, under the same ordering rules as every pod change.", node.name, view.cluster, view.namespace)),
                                Some(("force", "force: even while the application is Rebuilding, or the node has a pending change")),
                                acting.token(&format!("{}/{}/{}", view.namespace, view.cluster, node.name), "bounce", None)))
                        }
                    }
                }
            }
        }
    }
}

fn waiting(node: &NodeRow) -> Markup {
    html! {
        @if node.waiting_for.is_empty() {
            @match &node.shown_message {
                Some(message) => span class="message" { (message) },
                None => "-",
            }
        } @else {
            @for (i, wait) in node.waiting_for.iter().enumerate() {
                @if i > 0 { br; }
                (wait)
            }
        }
    }
}

fn history(view: &TenantView) -> Markup {
    html! {
        @if view.history.is_empty() {
            p class="empty" { "No node has been changed yet." }
        } @else {
            table class="history" {
                thead { tr { th { "#" } th { "Node" } th { "Change" } th { "State" } th { "Revision" } th { "Started" } th { "Took" } th { "Reason" } } }
                tbody {
                    @for entry in &view.history {
                        tr data-node=(entry.node) {
                            td { (entry.sequence) }
                            td { (entry.node) }
                            td { (entry.kind) }
                            td { (entry.state) }
                            td class="revision" { (crate::text::short(entry.from_revision.as_deref())) " → " (crate::text::short(Some(&entry.to_revision))) }
                            td { (entry.started.as_deref().unwrap_or("-")) }
                            td { (entry.took.as_deref().unwrap_or("-")) }
                            td { (entry.reason.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        }
    }
}

fn events(view: &TenantView) -> Markup {
    html! {
        @if view.events.is_empty() {
            p class="empty" { "No events." }
        } @else {
            table class="events" {
                thead { tr { th { "Age" } th { "Type" } th { "Reason" } th { "Object" } th { "Message" } } }
                tbody {
                    @for event in &view.events {
                        tr class=(event.type_.to_lowercase()) {
                            td { (event.age) @if event.count > 1 { " (×" (event.count) ")" } }
                            td { (event.type_) }
                            td { (event.reason) }
                            td { (event.object) }
                            td { (event.note) }
                        }
                    }
                }
            }
        }
    }
}
