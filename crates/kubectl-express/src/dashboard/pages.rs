//! The pages, rendered on the server with `maud` from the view models: a full page for the
//! first load, and the same parts one by one ([`fleet_parts`], [`tenant_parts`]) for the live
//! updates, so a part looks the same however it arrived. Every action button carries the
//! request it makes and the sentence its confirmation shows; the script only asks and posts.

use maud::{DOCTYPE, Markup, html};

use super::actions::Acting;
use super::model::{FleetQuery, FleetView, NodeRow, ReleaseRow, SortKey, TenantRow, TenantView};
use super::svg;

/// What every page needs to know of the server.
pub struct Chrome<'a> {
    /// Bound to this server and its pages: every POST must carry it.
    pub token: &'a str,
    pub read_only: bool,
    /// What the dashboard watches: "namespace tenant-a" or "every namespace".
    pub scope: &'a str,
    /// The serving process (see the live stream's `hello`).
    pub instance: &'a str,
    /// The DC its actions go to, and their tokens.
    pub acting: Acting<'a>,
}

pub(super) fn page(chrome: &Chrome<'_>, title: &str, stream: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if !chrome.read_only && !chrome.token.is_empty() { meta name="express-token" content=(chrome.token); }
                title { (title) " · Express dashboard" }
                link rel="stylesheet" href="/assets/dashboard.css";
                script src="/assets/dashboard.js" defer {}
            }
            body data-stream=(stream) data-instance=(chrome.instance) {
                header {
                    a href="/" class="brand" { "Express" }
                    span class="scope" { (chrome.scope) }
                    @if chrome.read_only { span class="badge read-only" { "read-only" } }
                    span id="live" class="live" title="updates arrive as the cluster changes" { "live" }
                }
                div id="connection" class="connection" role="alert" hidden {
                    "Connection to the dashboard lost; reconnecting…"
                }
                main { (body) }
                @if !chrome.read_only {
                    dialog id="confirm" {
                        form method="dialog" {
                            h2 id="confirm-title" { "Confirm" }
                            p id="confirm-text" {}
                            label id="confirm-option" hidden {
                                input type="checkbox" id="confirm-check";
                                " " span id="confirm-option-text" {}
                            }
                            div class="buttons" {
                                button value="cancel" id="confirm-cancel" { "Cancel" }
                                button value="ok" id="confirm-ok" class="danger" { "Confirm" }
                            }
                        }
                    }
                    div id="result" class="result" role="status" hidden {}
                }
            }
        }
    }
}

// ---- fleet page ----

pub fn fleet_page(chrome: &Chrome<'_>, view: &FleetView, query: &FleetQuery) -> Markup {
    let body = html! {
        div id="banner" { (banner(view)) }
        div id="releases" { (releases(view, chrome.read_only)) }
        (filter(view, query))
        p class="count" id="count" { (count(view)) }
        table class="tenants" {
            thead { tr {
                th { "Namespace" } th { "Cluster" } th { "Ring" } th { "Operator" }
                th { "Phase" } th { "Progress" } th { "Express versions" } th { "Rollout" }
                th { "Age" } th { "Paused" }
            } }
            tbody id="tenants" { (tenant_rows(view)) }
        }
    };
    page(chrome, "Fleet", "/api/stream", body)
}

/// The parts of the fleet page the live updates replace, by element id.
pub fn fleet_parts(view: &FleetView, read_only: bool) -> Vec<(&'static str, String)> {
    vec![
        ("banner", banner(view).into_string()),
        ("releases", releases(view, read_only).into_string()),
        ("count", count(view)),
        ("tenants", tenant_rows(view).into_string()),
    ]
}

fn count(view: &FleetView) -> String {
    if view.tenants.len() == view.total {
        format!("{} tenants", view.total)
    } else {
        format!("{} of {} tenants", view.tenants.len(), view.total)
    }
}

fn banner(view: &FleetView) -> Markup {
    html! {
        @match &view.doctor {
            None => div class="doctor pending" { "doctor: not run yet" },
            Some(doctor) => div class=(format!("doctor verdict-{}", doctor.verdict)) data-verdict=(doctor.verdict) {
                strong { "doctor: " (doctor.verdict) } " — " (doctor.reason)
                @if !doctor.checks.is_empty() {
                    ul {
                        @for check in &doctor.checks {
                            li class=(format!("check {}", check.status)) {
                                strong { (check.name) } " [" (check.status) "] " (check.summary)
                                @if !check.evidence.is_empty() {
                                    ul class="evidence" { @for line in &check.evidence { li { (line) } } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The operator's releases (from the doctor's last read), each with its requests behind a
/// confirmation unless read-only or over.
fn releases(view: &FleetView, read_only: bool) -> Markup {
    let Some(releases) = view.doctor.as_ref().map(|d| &d.releases) else {
        return html! {};
    };
    if releases.is_empty() {
        return html! {};
    }
    html! {
        h2 { "Operator releases" }
        table class="releases" {
            thead { tr { th { "Release" } th { "Rings" } th { "Phase" } th { "Where it stands" } @if !read_only { th { "Actions" } } } }
            tbody {
                @for r in releases {
                    tr data-release=(r.name) {
                        td { (r.name) }
                        td { "ring " (r.from_ring) " → ring " (r.to_ring) }
                        td class=(format!("phase {}", r.phase)) { (r.phase) }
                        td class="message" { (r.message) }
                        @if !read_only {
                            td class="actions" {
                                @if !r.over() { (release_actions(r, Acting::SINGLE)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

pub(super) fn release_actions(r: &ReleaseRow, acting: Acting<'_>) -> Markup {
    let target = format!("release/{}", r.name);
    let button = |name: &str, label: &str, confirm: String| {
        let confirm = match acting.context {
            Some(context) => format!("{context} / {}: {confirm}", r.name),
            None => confirm,
        };
        let token = acting.token(&target, name, None);
        action(
            &acting.release_url(&r.name, name),
            "{}",
            label,
            &confirm,
            None,
            token,
        )
    };
    let rings = format!("ring {} to ring {}", r.from_ring, r.to_ring);
    html! {
        @if r.phase == "Paused" {
            (button("resume", "Resume", format!("Resume OperatorRelease {} ({rings})? Moves and judging go on.", r.name)))
        } @else {
            (button("pause", "Pause", format!("Pause OperatorRelease {} ({rings})? Nothing moves, nothing is judged, no bake time passes.", r.name)))
        }
        (button("promote", "Promote", format!("Promote OperatorRelease {}: end the current wave's bake now?", r.name)))
        (button("promote-full", "Promote all", format!("Promote OperatorRelease {} in full: every remaining wave now, no more baking or judging?", r.name)))
        (button("abort", "Abort", format!("Abort OperatorRelease {}: every tenant it moved goes back to ring {}?", r.name, r.from_ring)))
    }
}

fn filter(view: &FleetView, query: &FleetQuery) -> Markup {
    let chosen = |current: &Option<String>, value: &str| current.as_deref() == Some(value);
    html! {
        form id="filter" class="filter" method="get" action="/" {
            label { "Namespace "
                select name="namespace" {
                    option value="" { "all" }
                    @for namespace in &view.namespaces {
                        option value=(namespace) selected[chosen(&query.namespace, namespace)] { (namespace) }
                    }
                }
            }
            label { "Phase "
                select name="phase" {
                    option value="" { "all" }
                    @for phase in &view.phases {
                        option value=(phase) selected[chosen(&query.phase, phase)] { (phase) }
                    }
                }
            }
            label { "Text " input type="search" name="q" value=(query.q.as_deref().unwrap_or_default()) placeholder="cluster, version, ring…"; }
            label { "Sort by "
                select name="sort" {
                    @for key in SortKey::ALL {
                        option value=(key.as_str()) selected[query.sort == key] { (key.as_str()) }
                    }
                }
            }
            noscript { button { "Apply" } }
        }
    }
}

fn tenant_rows(view: &FleetView) -> Markup {
    html! {
        @if view.tenants.is_empty() {
            tr { td colspan="10" class="empty" { "No Express clusters found." } }
        }
        @for row in &view.tenants {
            @let list = &row.list;
            tr data-namespace=(list.namespace) data-cluster=(list.cluster) data-phase=(list.phase) {
                td { (list.namespace) }
                td { a href=(tenant_href(&list.namespace, &list.cluster)) { (list.cluster) } }
                td { (list.ring) }
                td { (list.operator_version) }
                td { span class=(format!("phase {}", cluster_class(&list.phase))) { (list.phase) } }
                td class="progress" { (progress(row)) }
                td { (if row.versions.is_empty() { "-".to_owned() } else { row.versions.join(", ") }) }
                td { (list.rollout) }
                td { (row.rollout_age.as_deref().unwrap_or("-")) }
                td { (list.paused) }
            }
        }
    }
}

pub(super) fn progress(row: &TenantRow) -> Markup {
    // A meter rather than a styled bar: the pages carry no inline style, so the CSP forbids it.
    html! {
        meter class="bar" min="0" max=(row.up.max(1)) value=(row.up_to_date) {}
        " " (row.progress())
    }
}

pub(super) fn cluster_class(phase: &str) -> &'static str {
    match phase {
        "Healthy" => "ready",
        "Progressing" => "changing",
        "Degraded" => "notready",
        "Failed" | "InvalidSpec" => "failed",
        "Paused" => "paused",
        _ => "unknown",
    }
}

/// Path segments are Kubernetes names (DNS labels and subdomains): nothing to escape.
pub fn tenant_href(namespace: &str, cluster: &str) -> String {
    Acting::SINGLE.tenant_href(namespace, cluster)
}

// ---- tenant page ----

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
    let row = &view.summary;
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

/// A button that asks before it posts; across DCs it carries its own token (`token`).
fn action(
    url: &str,
    body: &str,
    label: &str,
    confirm: &str,
    option: Option<(&str, &str)>,
    token: Option<String>,
) -> Markup {
    html! {
        button type="button" class="action" data-url=(url) data-body=(body) data-title=(label) data-confirm=(confirm)
            data-option=[option.map(|o| o.0)] data-option-text=[option.map(|o| o.1)] data-token=[token] { (label) }
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
                    (crate::view::short(node.running_revision.as_deref())) " → " (crate::view::short(node.desired_revision.as_deref()))
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
                            td class="revision" { (crate::view::short(entry.from_revision.as_deref())) " → " (crate::view::short(Some(&entry.to_revision))) }
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

/// A page that says what is not there.
pub fn not_found(chrome: &Chrome<'_>, what: &str) -> Markup {
    page(
        chrome,
        "Not found",
        "",
        html! { h1 { "Not found" } p { (what) } p { a href="/" { "Back to the fleet" } } },
    )
}

/// The script and stylesheet, served from the binary.
pub const SCRIPT: &str = include_str!("assets/dashboard.js");
pub const STYLESHEET: &str = include_str!("assets/dashboard.css");
