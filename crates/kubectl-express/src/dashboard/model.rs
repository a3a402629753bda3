//! What the dashboard's pages and its JSON API show, pure: view models built from the objects
//! the watches hold, the tenant's events, the doctor's report and a `now`. The pages render
//! these, and `/api/...` serves them as they are, so a tool reading the API sees what a person
//! sees.

use std::collections::BTreeSet;
use std::sync::Arc;

use express_api::{ClusterKey, NodeRef, Objects};
use express_planner::observe::snapshot_of;
use express_planner::prerequisites::{Origin, Phase};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::layout::{self, Layout};
use crate::graph;
use crate::view::{self, ListRow, short};

/// Seconds from `then` to `now` (0 when `then` is in the future).
fn seconds_since(now: Timestamp, then: Timestamp) -> i64 {
    (now.as_second() - then.as_second()).max(0)
}

fn age(now: Timestamp, then: Option<Timestamp>) -> Option<String> {
    then.map(|then| express_triage::age(seconds_since(now, then)))
}

/// How the fleet page is sorted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SortKey {
    #[default]
    Namespace,
    Cluster,
    Phase,
    Progress,
    Age,
}

impl SortKey {
    pub const ALL: [SortKey; 5] = [
        SortKey::Namespace,
        SortKey::Cluster,
        SortKey::Phase,
        SortKey::Progress,
        SortKey::Age,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SortKey::Namespace => "namespace",
            SortKey::Cluster => "cluster",
            SortKey::Phase => "phase",
            SortKey::Progress => "progress",
            SortKey::Age => "age",
        }
    }
}

/// The fleet page's filter and sort, from its query string.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, serde::Deserialize, Serialize)]
pub struct FleetQuery {
    /// Only this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Only this phase (as the PHASE column shows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Only tenants with this text in a column (case-insensitive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q: Option<String>,
    #[serde(default)]
    pub sort: SortKey,
}

impl FleetQuery {
    /// Empty fields mean "any" (a form submits them empty).
    pub fn normalized(mut self) -> FleetQuery {
        let keep = |v: Option<String>| v.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        self.namespace = keep(self.namespace);
        self.phase = keep(self.phase);
        self.q = keep(self.q);
        self
    }
}

/// One tenant on the fleet page: the `list` verb's row, and what the page adds to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantRow {
    #[serde(flatten)]
    pub list: ListRow,
    /// Up nodes whose pod runs their desired revision.
    pub up_to_date: usize,
    /// Nodes that are up (not intentionally down).
    pub up: usize,
    /// The Express versions the nodes' pods run, sorted.
    pub versions: Vec<String>,
    /// How long ago the rollout started (while active) or finished.
    pub rollout_age: Option<String>,
    #[serde(skip)]
    rollout_age_seconds: Option<i64>,
}

impl TenantRow {
    /// "3/4": nodes on their desired revision out of the nodes up.
    pub fn progress(&self) -> String {
        format!("{}/{}", self.up_to_date, self.up)
    }

    /// Seconds since its rollout started (while active) or finished.
    pub fn rollout_age_seconds(&self) -> Option<i64> {
        self.rollout_age_seconds
    }

    /// A row from its parts, `rollout_age_seconds` ago.
    #[cfg(test)]
    pub(crate) fn new(
        list: ListRow,
        up_to_date: usize,
        up: usize,
        versions: Vec<String>,
        rollout_age_seconds: Option<i64>,
    ) -> TenantRow {
        TenantRow {
            list,
            up_to_date,
            up,
            versions,
            rollout_age: rollout_age_seconds.map(express_triage::age),
            rollout_age_seconds,
        }
    }

    fn matches(&self, query: &FleetQuery) -> bool {
        let row = &self.list;
        query.namespace.as_ref().is_none_or(|n| &row.namespace == n)
            && query.phase.as_ref().is_none_or(|p| &row.phase == p)
            && query
                .q
                .as_ref()
                .is_none_or(|q| self.mentions(&q.to_lowercase()))
    }

    /// Whether a column (versions included) contains `lowercase`, whatever its case.
    pub(crate) fn mentions(&self, lowercase: &str) -> bool {
        let row = &self.list;
        [
            &row.namespace,
            &row.cluster,
            &row.phase,
            &row.rollout,
            &row.paused,
            &row.ring,
            &row.operator_version,
        ]
        .into_iter()
        .chain(&self.versions)
        .any(|cell| cell.to_lowercase().contains(lowercase))
    }
}

/// The doctor's verdict and the checks that are not ok, for the banner.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DoctorBanner {
    pub verdict: String,
    pub reason: String,
    pub checks: Vec<DoctorCheck>,
    /// The operator's releases (DESIGN section 12), read with the doctor's other inputs.
    pub releases: Vec<ReleaseRow>,
}

/// One OperatorRelease on the fleet page.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseRow {
    pub name: String,
    pub from_ring: String,
    pub to_ring: String,
    pub phase: String,
    pub message: String,
}

impl ReleaseRow {
    /// Succeeded or rolled back: nothing more to ask of it.
    pub fn over(&self) -> bool {
        self.phase == "Succeeded" || self.phase == "RolledBack"
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DoctorCheck {
    pub name: String,
    pub status: String,
    pub summary: String,
    pub evidence: Vec<String>,
}

impl DoctorBanner {
    pub fn from_report(
        report: &express_triage::Report,
        releases: &[express_triage::ReleaseSeen],
    ) -> DoctorBanner {
        DoctorBanner {
            releases: releases
                .iter()
                .map(|r| ReleaseRow {
                    name: r.name.clone(),
                    from_ring: r.from_ring.clone(),
                    to_ring: r.to_ring.clone(),
                    phase: r.phase.clone(),
                    message: r.message.clone().unwrap_or_default(),
                })
                .collect(),
            verdict: report.verdict.as_str().to_owned(),
            reason: report.reason.clone(),
            checks: report
                .checks
                .iter()
                .filter(|c| c.status != express_triage::Status::Ok)
                .map(|c| DoctorCheck {
                    name: c.name.to_owned(),
                    status: c.status.as_str().to_owned(),
                    summary: c.summary.clone(),
                    evidence: c.evidence.clone(),
                })
                .collect(),
        }
    }
}

/// The fleet page.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetView {
    /// Tenants shown (after the filter), sorted.
    pub tenants: Vec<TenantRow>,
    /// Tenants seen in all.
    pub total: usize,
    /// Every namespace and phase seen, for the filter's choices.
    pub namespaces: Vec<String>,
    pub phases: Vec<String>,
    /// `doctor`'s verdict, once it has run.
    pub doctor: Option<DoctorBanner>,
}

/// The fleet page from the objects the watches hold: one row per tenant, each built from its
/// own namespace's objects (so the cost grows with the fleet, not with its square).
pub fn fleet(
    objects: &Objects,
    operator_namespace: &str,
    query: &FleetQuery,
    doctor: Option<DoctorBanner>,
    now: Timestamp,
) -> FleetView {
    let mut rows = Vec::new();
    for (namespace, group) in view::by_namespace(objects, operator_namespace) {
        for list in view::namespace_rows(&group, operator_namespace) {
            let nodes = group.nodes_of(&namespace, &list.cluster);
            rows.push(tenant_row(list, &group, &nodes, now));
        }
    }
    let namespaces: BTreeSet<String> = rows.iter().map(|r| r.list.namespace.clone()).collect();
    let phases: BTreeSet<String> = rows.iter().map(|r| r.list.phase.clone()).collect();
    let total = rows.len();
    let mut tenants: Vec<TenantRow> = rows.into_iter().filter(|r| r.matches(query)).collect();
    let by_name = |a: &TenantRow, b: &TenantRow| {
        (&a.list.namespace, &a.list.cluster).cmp(&(&b.list.namespace, &b.list.cluster))
    };
    match query.sort {
        SortKey::Namespace => tenants.sort_by(by_name),
        SortKey::Cluster => tenants.sort_by(|a, b| {
            a.list
                .cluster
                .cmp(&b.list.cluster)
                .then_with(|| by_name(a, b))
        }),
        SortKey::Phase => {
            tenants.sort_by(|a, b| a.list.phase.cmp(&b.list.phase).then_with(|| by_name(a, b)))
        }
        // Least done first: what an SRE watches during a release.
        SortKey::Progress => tenants.sort_by(|a, b| {
            let done = |r: &TenantRow| (r.up_to_date * 1000).checked_div(r.up).unwrap_or(1000);
            done(a).cmp(&done(b)).then_with(|| by_name(a, b))
        }),
        // Oldest rollout first; tenants without one last.
        SortKey::Age => tenants.sort_by(|a, b| {
            b.rollout_age_seconds
                .cmp(&a.rollout_age_seconds)
                .then_with(|| by_name(a, b))
        }),
    }
    FleetView {
        tenants,
        total,
        namespaces: namespaces.into_iter().collect(),
        phases: phases.into_iter().collect(),
        doctor,
    }
}

fn tenant_row(list: ListRow, group: &Objects, nodes: &[NodeRef<'_>], now: Timestamp) -> TenantRow {
    let express_cluster = group.express_cluster(&list.namespace, &list.cluster);
    let rollout = express_cluster
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.rollout.as_ref());
    let since = rollout.and_then(|r| {
        let active = r.state.is_some_and(|s| s.is_active());
        let time = if active {
            r.started_at.as_ref()
        } else {
            r.finished_at.as_ref().or(r.started_at.as_ref())
        };
        time.map(|t| t.0)
    });
    let up: Vec<&NodeRef<'_>> = nodes.iter().filter(|n| n.spec().up).collect();
    let versions: BTreeSet<String> = nodes
        .iter()
        .filter_map(|n| n.status()?.running_version.clone())
        .collect();
    TenantRow {
        up_to_date: up.iter().filter(|n| view::on_desired_revision(n)).count(),
        up: up.len(),
        versions: versions.into_iter().collect(),
        rollout_age: age(now, since),
        rollout_age_seconds: since.map(|t| seconds_since(now, t)),
        list,
    }
}

/// One node in the tenant page's table, in upgrade order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRow {
    pub name: String,
    pub kind: String,
    pub up: bool,
    /// As status says it (`-` before the operator wrote one).
    pub phase: String,
    pub ready: Option<bool>,
    pub desired_revision: Option<String>,
    pub running_revision: Option<String>,
    pub running_version: Option<String>,
    /// The unmet prerequisites: "acme-fe1: not yet Ready".
    pub waiting_for: Vec<String>,
    pub pod: Option<String>,
    /// The pod's age.
    pub age: Option<String>,
    pub restarts: Option<i32>,
    pub message: Option<String>,
    /// A bounce under way: "cli-... Terminating".
    pub bounce: Option<String>,
    /// What the table shows of `message` (as `get` does): why a stuck node does not move.
    #[serde(skip)]
    pub shown_message: Option<String>,
}

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

/// A step of the rollout's history: a node's last change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    pub sequence: u64,
    pub node: String,
    /// Provision, Upgrade or Rollback.
    pub kind: String,
    /// InProgress, Succeeded or Failed.
    pub state: String,
    pub from_revision: Option<String>,
    pub to_revision: String,
    pub started: Option<String>,
    /// How long it took (or has taken so far).
    pub took: Option<String>,
    pub reason: Option<String>,
}

/// One event about the tenant's objects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRow {
    /// How long ago it was last seen.
    pub age: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    /// "Frontend/acme-fe1".
    pub object: String,
    pub note: String,
    pub count: i32,
    #[serde(skip)]
    seen: i64,
}

/// The rollout as status reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutView {
    pub state: String,
    pub order: Vec<String>,
    pub current: Vec<String>,
    pub completed: Vec<String>,
    pub failed_node: Option<String>,
    pub started: Option<String>,
    pub finished: Option<String>,
}

/// The tenant page.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantView {
    pub namespace: String,
    pub cluster: String,
    /// The ExpressCluster's name, when the tenant has one (pause, abort and retry act on it).
    pub express_cluster: Option<String>,
    /// The fleet row: phase, ring, operator version, pause...
    pub summary: TenantRow,
    /// Where it stands, in the `status` verb's words.
    pub message: String,
    /// The pause in force, with its scope and reason.
    pub paused: Option<String>,
    /// Whether the ExpressCluster itself is paused (so the page offers resume, not pause).
    pub cluster_paused: bool,
    pub rollout: Option<RolloutView>,
    pub nodes: Vec<NodeRow>,
    pub upgrade_graph: GraphView,
    pub provisioning_graph: GraphView,
    pub history: Vec<HistoryEntry>,
    pub events: Vec<EventRow>,
}

/// How many events the tenant page shows.
pub const EVENTS_SHOWN: usize = 25;

/// The tenant page of Express cluster `cluster` in `namespace` (None: no such tenant).
/// `objects` may hold the whole fleet; only the namespace's are read.
pub fn tenant(
    objects: &Objects,
    operator_namespace: &str,
    namespace: &str,
    cluster: &str,
    events: &[Arc<Event>],
    now: Timestamp,
) -> Option<TenantView> {
    let group = view::namespace_objects(objects, operator_namespace, namespace);
    if !group
        .cluster_keys()
        .contains(&ClusterKey::new(namespace, cluster))
    {
        return None;
    }
    let list = view::namespace_rows(&group, operator_namespace)
        .into_iter()
        .find(|r| r.cluster == cluster)?;
    let nodes = group.nodes_of(namespace, cluster);
    let summary = tenant_row(list, &group, &nodes, now);
    let express_cluster = group.express_cluster(namespace, cluster);
    let status = express_cluster.and_then(|c| c.status.as_ref());
    let inventory = crate::live::inventory(&group, operator_namespace);
    let snapshot = snapshot_of(&inventory, namespace, cluster);
    // One plan for the whole page: the order, and what each graph's edges wait for.
    let planned = snapshot.as_ref().map(|s| express_planner::plan(s, 0));
    let upgrade_order = view::upgrade_order(express_cluster, planned.as_ref());
    let position = |name: &str| {
        upgrade_order
            .iter()
            .position(|n| n == name)
            .unwrap_or(usize::MAX)
    };
    let mut ordered: Vec<&NodeRef<'_>> = nodes.iter().collect();
    ordered.sort_by_key(|n| (!n.spec().up, position(n.name())));

    let rows = ordered
        .iter()
        .map(|node| node_row(node, &group, namespace, now))
        .collect();
    let graph_of = |phase| match (&snapshot, &planned) {
        (Some(snapshot), Some(planned)) => {
            graph_view(snapshot, planned, &group, phase, &upgrade_order)
        }
        _ => GraphView {
            phase: graph::phase_name(phase).to_owned(),
            nodes: Vec::new(),
            edges: Vec::new(),
            cycle: None,
            width: 0.0,
            height: 0.0,
        },
    };
    let mut history: Vec<HistoryEntry> = nodes
        .iter()
        .filter_map(|node| {
            let change = node.status()?.change.as_ref()?;
            let started = change.started_at.as_ref().map(|t| t.0);
            let end = change.finished_at.as_ref().map_or(now, |t| t.0);
            Some(HistoryEntry {
                sequence: change.sequence,
                node: node.name().to_owned(),
                kind: format!("{:?}", change.kind),
                state: format!("{:?}", change.state),
                from_revision: change.from_revision.clone(),
                to_revision: change.to_revision.clone(),
                started: age(now, started).map(|a| format!("{a} ago")),
                took: started.map(|s| express_triage::age(seconds_since(end, s))),
                reason: change.reason.clone(),
            })
        })
        .collect();
    history.sort_by(|a, b| b.sequence.cmp(&a.sequence).then(a.node.cmp(&b.node)));

    let line = crate::status::assess(express_cluster, &nodes);
    let pause = snapshot.as_ref().and_then(|s| s.pause.as_ref());
    Some(TenantView {
        namespace: namespace.to_owned(),
        cluster: cluster.to_owned(),
        express_cluster: express_cluster.and_then(|c| c.metadata.name.clone()),
        message: line.message,
        paused: pause.map(|p| p.to_string()),
        cluster_paused: express_cluster.is_some_and(|c| c.spec.paused),
        rollout: status
            .and_then(|s| s.rollout.as_ref())
            .map(|r| RolloutView {
                state: r.state.map_or("-", |s| s.as_str()).to_owned(),
                order: r.order.clone(),
                current: r.current.clone(),
                completed: r.completed.clone(),
                failed_node: r.failed_node.clone(),
                started: age(now, r.started_at.as_ref().map(|t| t.0)).map(|a| format!("{a} ago")),
                finished: age(now, r.finished_at.as_ref().map(|t| t.0)).map(|a| format!("{a} ago")),
            }),
        nodes: rows,
        upgrade_graph: graph_of(Phase::Upgrade),
        provisioning_graph: graph_of(Phase::Provisioning),
        history,
        events: tenant_events(events, &group, namespace, cluster, now),
        summary,
    })
}

fn node_row(node: &NodeRef<'_>, group: &Objects, namespace: &str, now: Timestamp) -> NodeRow {
    let status = node.status();
    let pod = group.pod(namespace, node.name());
    NodeRow {
        name: node.name().to_owned(),
        kind: node.kind().to_string(),
        up: node.spec().up,
        phase: phase_of(node),
        ready: status.and_then(|s| s.ready),
        desired_revision: status.and_then(|s| s.desired_revision.clone()),
        running_revision: status.and_then(|s| s.running_revision.clone()),
        running_version: status.and_then(|s| s.running_version.clone()),
        waiting_for: status
            .map(|s| {
                s.waiting_for
                    .iter()
                    .map(|w| format!("{}: {}", w.node, w.reason))
                    .collect()
            })
            .unwrap_or_default(),
        pod: pod.map(|p| p.name.to_string()),
        age: age(now, pod.and_then(|p| p.created())),
        restarts: status.and_then(|s| s.restarts),
        message: status.and_then(|s| s.message.clone()),
        bounce: status.and_then(view::bounce_under_way),
        shown_message: status.and_then(view::why_not_moving).map(str::to_owned),
    }
}

fn phase_of(node: &NodeRef<'_>) -> String {
    node.status()
        .and_then(|s| s.phase)
        .map_or_else(|| "-".into(), |p| p.as_str().to_owned())
}

/// The prerequisite graph of one phase, with the planner's edges (as `plan -o dot` draws them)
/// and the layout's boxes and routes.
fn graph_view(
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

/// The most recent events about the tenant's ExpressCluster, nodes and pods, newest first.
fn tenant_events(
    events: &[Arc<Event>],
    group: &Objects,
    namespace: &str,
    cluster: &str,
    now: Timestamp,
) -> Vec<EventRow> {
    let mut names: BTreeSet<&str> = BTreeSet::new();
    if let Some(name) = group
        .express_cluster(namespace, cluster)
        .and_then(|c| c.metadata.name.as_deref())
    {
        names.insert(name);
    }
    for node in group.nodes_of(namespace, cluster) {
        // A node's pod is named after it.
        names.insert(node.name());
    }
    let mut rows: Vec<EventRow> = events
        .iter()
        .filter(|e| e.metadata.namespace.as_deref() == Some(namespace))
        .filter_map(|event| {
            let regarding = event.regarding.as_ref()?;
            let name = regarding.name.as_deref()?;
            if !names.contains(name) {
                return None;
            }
            let seen = event
                .series
                .as_ref()
                .map(|s| s.last_observed_time.0)
                .or(event.event_time.as_ref().map(|t| t.0))
                .or(event.deprecated_last_timestamp.as_ref().map(|t| t.0))
                .or(event.metadata.creation_timestamp.as_ref().map(|t| t.0))?;
            Some(EventRow {
                age: express_triage::age(seconds_since(now, seen)),
                type_: event.type_.clone().unwrap_or_default(),
                reason: event.reason.clone().unwrap_or_default(),
                object: format!("{}/{name}", regarding.kind.as_deref().unwrap_or("object")),
                note: event.note.clone().unwrap_or_default(),
                count: event
                    .series
                    .as_ref()
                    .map(|s| s.count)
                    .or(event.deprecated_count)
                    .unwrap_or(1),
                seen: seen.as_millisecond(),
            })
        })
        .collect();
    rows.sort_by_key(|row| std::cmp::Reverse(row.seen));
    rows.truncate(EVENTS_SHOWN);
    rows
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use express_api::ExpressCluster;
    use express_api::objects::shared;
    use express_api::views::{NodeView, PodView};
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use serde_json::{Value, json};

    const OPERATOR_NAMESPACE: &str = "express-system";

    fn now() -> Timestamp {
        "2026-11-25T10:00:00Z".parse().unwrap()
    }

    /// `seconds` before [`now`], as the API writes times.
    fn ago(seconds: i64) -> String {
        now()
            .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(seconds))
            .unwrap()
            .to_string()
    }

    /// One node of a tenant: its desired revision pinned by label, its status as the operator
    /// wrote it, and (unless `pod_revision` is None) its pod on that revision.
    struct Node {
        kind: &'static str,
        name: &'static str,
        phase: &'static str,
        desired: &'static str,
        pod_revision: Option<&'static str>,
        version: &'static str,
        change: Option<Value>,
    }

    fn tenant_objects(namespace: &str, cluster: &str, status: Value, nodes: &[Node]) -> Objects {
        let meta = |name: &str, extra: Value| {
            let mut meta = json!({"name": name, "namespace": namespace, "uid": format!("uid-{namespace}-{name}"),
                                  "generation": 1, "creationTimestamp": ago(600)});
            meta.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            meta
        };
        let cluster_object: ExpressCluster = serde_json::from_value(json!({
            "apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
            "metadata": meta(cluster, json!({})), "spec": {"rollout": {"settleSeconds": 0}}, "status": status,
        }))
        .unwrap();
        let mut objects = Objects {
            clusters: shared([cluster_object]),
            ..Objects::default()
        };
        for node in nodes {
            let ready = node.phase == "Ready";
            let value = json!({
                "apiVersion": "express.dev/v1alpha1", "kind": node.kind,
                "metadata": meta(node.name, json!({"labels": {"express.dev/deployment-revision": node.desired}})),
                "spec": {"clusterConfig": {"clusterName": cluster}, "up": node.phase != "Down", "expressVersion": node.version},
                "status": {"observedGeneration": 1, "phase": node.phase, "ready": ready,
                           "desiredRevision": node.desired, "runningRevision": node.pod_revision,
                           "runningVersion": node.pod_revision.map(|r| if r == "r2" { "v2" } else { "v1" }),
                           "change": node.change},
            });
            match node.kind {
                "Backend" => objects
                    .backends
                    .push(Arc::new(serde_json::from_value::<NodeView>(value).unwrap())),
                _ => objects
                    .frontends
                    .push(Arc::new(serde_json::from_value::<NodeView>(value).unwrap())),
            }
            if let Some(revision) = node.pod_revision {
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": meta(node.name, json!({
                        "creationTimestamp": ago(120),
                        "labels": {"express.dev/cluster": cluster, "express.dev/deployment-revision": revision},
                        "ownerReferences": [{"apiVersion": "express.dev/v1alpha1", "kind": node.kind, "name": node.name,
                                             "uid": format!("uid-{namespace}-{}", node.name), "controller": true}],
                    })),
                    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
                }))
                .unwrap();
                objects.pods.push(Arc::new(PodView::from(&pod)));
            }
        }
        objects
    }

    fn node(
        kind: &'static str,
        name: &'static str,
        phase: &'static str,
        desired: &'static str,
        pod: Option<&'static str>,
    ) -> Node {
        Node {
            kind,
            name,
            phase,
            desired,
            pod_revision: pod,
            version: if desired == "r2" { "v2" } else { "v1" },
            change: None,
        }
    }

    /// team-a/shop healthy on r1; team-b/shop mid-upgrade to r2 (fe1 done, fe2 upgrading, be and
    /// fe3 waiting), started 90 s ago; team-c/web paused by its namespace's ConfigMap.
    fn fleet_objects() -> Objects {
        let mut objects = tenant_objects(
            "team-a",
            "shop",
            json!({"observedGeneration": 1, "phase": "Healthy", "rollout": {"state": "Complete", "startedAt": ago(3600), "finishedAt": ago(3000)}}),
            &[
                node("Backend", "shop-be", "Ready", "r1", Some("r1")),
                node("Frontend", "shop-fe1", "Ready", "r1", Some("r1")),
            ],
        );
        let change = |sequence: u64, state: &str, started: i64, finished: Option<i64>| {
            Some(
                json!({"kind": "Upgrade", "state": state, "fromRevision": "r1", "toRevision": "r2",
                        "sequence": sequence, "rollout": "x", "startedAt": ago(started),
                        "finishedAt": finished.map(ago)}),
            )
        };
        objects.extend(tenant_objects(
            "team-b",
            "shop",
            json!({"observedGeneration": 1, "phase": "Progressing",
                   "rollout": {"state": "Progressing", "order": ["shop-fe1", "shop-fe2", "shop-be", "shop-fe3"],
                               "current": ["shop-fe2"], "completed": ["shop-fe1"], "startedAt": ago(90)}}),
            &[
                node("Backend", "shop-be", "Waiting", "r2", Some("r1")),
                Node { change: change(1, "Succeeded", 90, Some(60)), version: "v2", ..node("Frontend", "shop-fe1", "Ready", "r2", Some("r2")) },
                Node { change: change(2, "InProgress", 50, None), ..node("Frontend", "shop-fe2", "Upgrading", "r2", Some("r1")) },
                node("Frontend", "shop-fe3", "Waiting", "r2", Some("r1")),
            ],
        ));
        objects.extend(tenant_objects(
            "team-c",
            "web",
            json!({"observedGeneration": 1, "phase": "Paused", "rollout": {"state": "Paused"}}),
            &[node("Backend", "web-be", "Paused", "r1", Some("r1"))],
        ));
        let freeze: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "express-control", "namespace": "team-c"},
            "data": {"paused": "true", "reason": "freeze"},
        }))
        .unwrap();
        objects.config_maps.push(Arc::new(freeze));
        objects
    }

    fn fleet_with(query: FleetQuery) -> FleetView {
        fleet(&fleet_objects(), OPERATOR_NAMESPACE, &query, None, now())
    }

    fn names(view: &FleetView) -> Vec<String> {
        view.tenants
            .iter()
            .map(|t| format!("{}/{}", t.list.namespace, t.list.cluster))
            .collect()
    }

    #[test]
    fn the_fleet_page_has_a_row_per_tenant_with_progress_versions_age_and_pause() {
        let view = fleet_with(FleetQuery::default());
        assert_eq!(names(&view), ["team-a/shop", "team-b/shop", "team-c/web"]);
        assert_eq!(view.total, 3);
        assert_eq!(view.namespaces, ["team-a", "team-b", "team-c"]);
        assert_eq!(view.phases, ["Healthy", "Paused", "Progressing"]);
        let [healthy, upgrading, paused] = &view.tenants[..] else {
            panic!("three rows")
        };
        assert_eq!(
            (healthy.progress(), healthy.versions.clone()),
            ("2/2".into(), vec!["v1".into()])
        );
        assert_eq!(
            healthy.rollout_age.as_deref(),
            Some("50m"),
            "finished 50 minutes ago"
        );
        assert_eq!(upgrading.progress(), "1/4");
        assert_eq!(upgrading.versions, ["v1", "v2"]);
        assert_eq!(upgrading.list.rollout, "Progressing");
        assert_eq!(
            upgrading.rollout_age.as_deref(),
            Some("1m30s"),
            "started 90 s ago"
        );
        assert_eq!(paused.list.paused, "namespace: freeze");
        assert_eq!(paused.list.phase, "Paused");
    }

    #[test]
    fn the_fleet_page_filters_by_namespace_phase_and_text_and_sorts() {
        let with = |namespace: Option<&str>, phase: Option<&str>, q: Option<&str>, sort| {
            names(&fleet_with(
                FleetQuery {
                    namespace: namespace.map(Into::into),
                    phase: phase.map(Into::into),
                    q: q.map(Into::into),
                    sort,
                }
                .normalized(),
            ))
        };
        assert_eq!(
            with(Some("team-b"), None, None, SortKey::Namespace),
            ["team-b/shop"]
        );
        assert_eq!(
            with(None, Some("Paused"), None, SortKey::Namespace),
            ["team-c/web"]
        );
        // Text matches any column, versions included, whatever the case.
        assert_eq!(
            with(None, None, Some("V2"), SortKey::Namespace),
            ["team-b/shop"]
        );
        assert_eq!(
            with(None, None, Some("freeze"), SortKey::Namespace),
            ["team-c/web"]
        );
        // Empty fields, as a form submits them, filter nothing.
        assert_eq!(
            with(Some(" "), Some(""), Some(""), SortKey::Namespace).len(),
            3
        );
        // Least done first; oldest rollout first.
        assert_eq!(
            with(None, None, None, SortKey::Progress),
            ["team-b/shop", "team-a/shop", "team-c/web"]
        );
        assert_eq!(
            with(None, None, None, SortKey::Age),
            ["team-a/shop", "team-b/shop", "team-c/web"]
        );
        assert_eq!(
            with(None, None, None, SortKey::Cluster),
            ["team-a/shop", "team-b/shop", "team-c/web"]
        );
        let filtered = fleet_with(FleetQuery {
            phase: Some("Healthy".into()),
            ..FleetQuery::default()
        });
        assert_eq!((filtered.tenants.len(), filtered.total), (1, 3));
    }

    #[test]
    fn the_tenant_page_has_nodes_in_upgrade_order_the_graph_and_the_history() {
        let view = tenant(
            &fleet_objects(),
            OPERATOR_NAMESPACE,
            "team-b",
            "shop",
            &[],
            now(),
        )
        .unwrap();
        assert_eq!(view.express_cluster.as_deref(), Some("shop"));
        let order: Vec<&str> = view.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(order, ["shop-fe1", "shop-fe2", "shop-be", "shop-fe3"]);
        let fe2 = &view.nodes[1];
        assert_eq!(
            (fe2.phase.as_str(), fe2.pod.as_deref(), fe2.age.as_deref()),
            ("Upgrading", Some("shop-fe2"), Some("2m"))
        );
        assert_eq!(view.rollout.as_ref().unwrap().current, ["shop-fe2"]);

        let graph = &view.upgrade_graph;
        assert_eq!(graph.phase, "upgrade");
        assert_eq!(graph.nodes.len(), 4);
        let edges: Vec<(&str, &str, &str)> = graph
            .edges
            .iter()
            .map(|e| (e.from.as_str(), e.to.as_str(), e.origin.as_str()))
            .collect();
        assert_eq!(
            edges.iter().map(|e| (e.0, e.1)).collect::<BTreeSet<_>>(),
            [
                ("shop-be", "shop-fe3"),
                ("shop-fe1", "shop-fe2"),
                ("shop-fe2", "shop-be")
            ]
            .into_iter()
            .collect()
        );
        assert!(edges.iter().all(|e| e.2 == "default"));
        // The backend waits for fe2, which is not on r2 yet: that edge says why; fe1's is met.
        let waits = |from: &str, to: &str| {
            graph
                .edges
                .iter()
                .find(|e| e.from == from && e.to == to)
                .unwrap()
                .waiting
                .clone()
        };
        assert!(waits("shop-fe2", "shop-be").is_some());
        assert_eq!(waits("shop-fe1", "shop-fe2"), None);
        // Ranks follow the upgrade order; every edge is drawn.
        let rank = |name: &str| graph.nodes.iter().find(|n| n.name == name).unwrap().rank;
        assert_eq!(
            [
                rank("shop-fe1"),
                rank("shop-fe2"),
                rank("shop-be"),
                rank("shop-fe3")
            ],
            [0, 1, 2, 3]
        );
        assert!(graph.edges.iter().all(|e| e.route.len() >= 2));
        let fe2_box = graph.nodes.iter().find(|n| n.name == "shop-fe2").unwrap();
        assert_eq!(
            (fe2_box.phase.as_str(), fe2_box.revision.as_str()),
            ("Upgrading", "r1→r2")
        );
        // Provisioning order: be first.
        assert_eq!(
            view.provisioning_graph
                .nodes
                .iter()
                .find(|n| n.name == "shop-be")
                .unwrap()
                .rank,
            0
        );

        let history: Vec<(&str, &str, Option<&str>)> = view
            .history
            .iter()
            .map(|h| (h.node.as_str(), h.state.as_str(), h.took.as_deref()))
            .collect();
        assert_eq!(
            history,
            [
                ("shop-fe2", "InProgress", Some("50s")),
                ("shop-fe1", "Succeeded", Some("30s"))
            ]
        );
    }

    #[test]
    fn a_tenant_that_is_not_there_has_no_page() {
        let objects = fleet_objects();
        assert!(tenant(&objects, OPERATOR_NAMESPACE, "team-b", "web", &[], now()).is_none());
        assert!(tenant(&objects, OPERATOR_NAMESPACE, "team-z", "shop", &[], now()).is_none());
    }

    #[test]
    fn a_tenant_page_lists_its_own_events_newest_first() {
        let event = |namespace: &str,
                     kind: &str,
                     name: &str,
                     reason: &str,
                     seen: i64,
                     count: Option<i32>| {
            let series = count.map(|count| json!({"count": count, "lastObservedTime": format!("{}", ago(seen).replace('Z', ".000000Z"))}));
            Arc::new(
                serde_json::from_value::<Event>(json!({
                    "metadata": {"name": format!("{name}.{reason}"), "namespace": namespace},
                    "eventTime": ago(seen + 100).replace('Z', ".000000Z"),
                    "regarding": {"kind": kind, "name": name, "namespace": namespace},
                    "reason": reason, "note": format!("{reason} {name}"), "type": "Normal",
                    "reportingController": "express-operator", "reportingInstance": "x", "action": reason,
                    "series": series,
                }))
                .unwrap(),
            )
        };
        let events = vec![
            event("team-b", "Frontend", "shop-fe1", "Upgraded", 60, None),
            event("team-b", "Pod", "shop-fe2", "Deleted", 10, Some(3)),
            event(
                "team-b",
                "ExpressCluster",
                "shop",
                "RolloutStarted",
                90,
                None,
            ),
            // Another tenant's, and another namespace's: not shown.
            event("team-b", "Frontend", "web-fe1", "Upgraded", 5, None),
            event("team-a", "Frontend", "shop-fe1", "Upgraded", 5, None),
        ];
        let view = tenant(
            &fleet_objects(),
            OPERATOR_NAMESPACE,
            "team-b",
            "shop",
            &events,
            now(),
        )
        .unwrap();
        let shown: Vec<(&str, &str, i32)> = view
            .events
            .iter()
            .map(|e| (e.reason.as_str(), e.object.as_str(), e.count))
            .collect();
        assert_eq!(
            shown,
            [
                ("Deleted", "Pod/shop-fe2", 3),
                ("Upgraded", "Frontend/shop-fe1", 1),
                ("RolloutStarted", "ExpressCluster/shop", 1)
            ]
        );
        assert_eq!(view.events[0].age, "10s");
    }

    #[test]
    fn a_thirty_node_tenant_is_drawn_whole() {
        let mut nodes = vec![node("Backend", "big-be", "Ready", "r1", Some("r1"))];
        let names: Vec<&'static str> = (1..30)
            .map(|i| &*Box::leak(format!("big-fe{i}").into_boxed_str()))
            .collect();
        nodes.extend(
            names
                .iter()
                .map(|name| node("Frontend", name, "Ready", "r1", Some("r1"))),
        );
        let objects = tenant_objects(
            "team-big",
            "big",
            json!({"observedGeneration": 1, "phase": "Healthy"}),
            &nodes,
        );
        let view = tenant(&objects, OPERATOR_NAMESPACE, "team-big", "big", &[], now()).unwrap();
        let graph = &view.upgrade_graph;
        assert_eq!(graph.nodes.len(), 30);
        // The default upgrade order is one chain: fe1, fe2, be, fe3 ... fe29.
        assert_eq!(graph.edges.len(), 29);
        assert!(
            graph
                .edges
                .iter()
                .all(|e| e.route.len() >= 2 && e.waiting.is_none())
        );
        let mut ranks: Vec<usize> = graph.nodes.iter().map(|n| n.rank).collect();
        ranks.sort_unstable();
        assert_eq!(ranks, (0..30).collect::<Vec<_>>());
        let svg = super::super::svg::render(graph, "g").into_string();
        assert_eq!(svg.matches("<rect ").count(), 30);
        assert_eq!(svg.matches("class=\"edge ").count(), 29);
    }
}
