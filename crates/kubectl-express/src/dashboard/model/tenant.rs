//! The tenant page: its summary, nodes in upgrade order, both prerequisite graphs, the
//! rollout's history and the tenant's recent events.

use std::collections::BTreeSet;
use std::sync::Arc;

use express_api::{ClusterKey, NodeRef, Objects};
use express_planner::observe::snapshot_of;
use express_planner::prerequisites::Phase;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::graph::{GraphView, graph_view};
use super::rows::{ShownRow, tenant_row};
use super::shown::{age, phase_of, seconds_since};
use crate::show::cluster;
use crate::show::graph;

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
    /// The fleet row: phase, ring, operator version, pause..., and its rollout's age.
    pub summary: ShownRow,
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
    let group = cluster::namespace_objects(objects, operator_namespace, namespace);
    if !group
        .cluster_keys()
        .contains(&ClusterKey::new(namespace, cluster))
    {
        return None;
    }
    let list = cluster::namespace_rows(&group, operator_namespace)
        .into_iter()
        .find(|r| r.cluster == cluster)?;
    let nodes = group.nodes_of(namespace, cluster);
    let summary = ShownRow::at(tenant_row(list, &group, &nodes), now);
    let express_cluster = group.express_cluster(namespace, cluster);
    let status = express_cluster.and_then(|c| c.status.as_ref());
    let inventory = express_client::read::live::inventory(&group, operator_namespace);
    let snapshot = snapshot_of(&inventory, namespace, cluster);
    // One plan for the whole page: the order, and what each graph's edges wait for.
    let planned = snapshot.as_ref().map(|s| express_planner::plan(s, 0));
    let upgrade_order = cluster::upgrade_order(express_cluster, planned.as_ref());
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

    let line = crate::show::status::assess(express_cluster, &nodes);
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
        bounce: status.and_then(cluster::bounce_under_way),
        shown_message: status.and_then(cluster::why_not_moving).map(str::to_owned),
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
