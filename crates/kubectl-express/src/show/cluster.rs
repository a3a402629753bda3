//! What `get` and `list` draw, pure: rows built from the objects read, and text rendered from
//! the rows. Colour and symbols only when [`Style::color`] is set (a terminal, without
//! `--no-color`); the same words either way.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use express_api::rings;
use express_api::views::PodView;
use express_api::{ChangeState, ExpressCluster, NodePhase, NodeStatus};
use express_planner::ClusterSnapshot;
use express_planner::observe::{pause_of, snapshot_of};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt as _;

use crate::show::status::{Outcome, assess};
use crate::text::{NONE, Style, dash, short, table};
use express_api::{ClusterKey, NodeRef, Objects};

/// One line of `list` (and of the dashboard's fleet page and `/api/tenants`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListRow {
    pub namespace: String,
    pub cluster: String,
    pub phase: String,
    pub rollout: String,
    /// The rollout's completed/order (or nodes on their revision / up, between rollouts). The
    /// dashboard shows its own measure (nodes on their revision / up) and sends that instead.
    #[serde(skip)]
    pub progress: String,
    pub current: String,
    pub ready: String,
    pub paused: String,
    /// The ring its label names, marked while a hand-over is under way ([`ring_cell`]).
    pub ring: String,
    /// The version of the operator that last wrote `status.operator` (`<none>`: nobody yet).
    pub operator_version: String,
}

/// The RING cell: the ring the label names (DESIGN section 11), with why the label's ring does
/// not drive the tenant yet when it does not. A tenant without an ExpressCluster has no label:
/// the default ring drives it.
pub fn ring_cell(cluster: Option<&ExpressCluster>) -> String {
    let Some(cluster) = cluster else {
        return rings::DEFAULT_RING.to_owned();
    };
    let label = rings::ring_of(cluster.labels());
    match cluster.status.as_ref().and_then(|s| s.operator.as_ref()) {
        // Let go by its last owner; the label's ring has not adopted it yet.
        Some(owner) if owner.released.is_some() => format!("{label} (released)"),
        // Written by a build whose status this one cannot read: nobody acts until it is
        // rewritten, which the reader needs to know.
        Some(owner) if owner.ring.is_empty() => format!("{label} (owner unreadable)"),
        // The label moved and the old ring has not released the tenant yet.
        Some(owner) if owner.ring != label => format!("{label} (from {})", owner.ring),
        _ => label.to_owned(),
    }
}

/// The OPERATOR VERSION cell: `status.operator.version`, or [`NONE`].
pub fn operator_version_cell(cluster: Option<&ExpressCluster>) -> String {
    cluster
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.operator.as_ref())
        .map(|o| o.version.as_str())
        .filter(|v| !v.is_empty())
        .unwrap_or(NONE)
        .to_owned()
}

/// The operator-wide control ConfigMap (a pause of every cluster), which every namespace's
/// tenants read besides their own objects.
fn operator_wide(objects: &Objects, operator_namespace: &str) -> Vec<Arc<ConfigMap>> {
    objects
        .config_maps
        .iter()
        .filter(|c| c.metadata.namespace.as_deref() == Some(operator_namespace))
        .cloned()
        .collect()
}

/// The objects split by namespace, each namespace also holding the operator-wide control
/// ConfigMap, so that a tenant can be read from its group alone.
pub fn by_namespace(objects: &Objects, operator_namespace: &str) -> BTreeMap<String, Objects> {
    let operator_wide = operator_wide(objects, operator_namespace);
    let mut groups = objects.by_namespace();
    for (namespace, group) in &mut groups {
        if namespace != operator_namespace {
            group.config_maps.extend(operator_wide.iter().cloned());
        }
    }
    groups
}

/// One namespace's objects, with the operator-wide control ConfigMap (see [`by_namespace`]).
pub fn namespace_objects(objects: &Objects, operator_namespace: &str, namespace: &str) -> Objects {
    let mut group = objects.in_namespace(namespace);
    if namespace != operator_namespace {
        group
            .config_maps
            .extend(operator_wide(objects, operator_namespace));
    }
    group
}

/// One row per Express cluster found, sorted by namespace and cluster.
pub fn list_rows(objects: &Objects, operator_namespace: &str) -> Vec<ListRow> {
    by_namespace(objects, operator_namespace)
        .values()
        .flat_map(|group| namespace_rows(group, operator_namespace))
        .collect()
}

/// The rows of one namespace's objects (a group of [`by_namespace`] or [`namespace_objects`],
/// which already holds the operator-wide control ConfigMap).
pub(crate) fn namespace_rows(objects: &Objects, operator_namespace: &str) -> Vec<ListRow> {
    let inventory = express_client::read::live::inventory(objects, operator_namespace);
    objects
        .cluster_keys()
        .into_iter()
        .map(|ClusterKey { namespace, cluster }| {
            let express_cluster = objects.express_cluster(&namespace, &cluster);
            let nodes = objects.nodes_of(&namespace, &cluster);
            let status = express_cluster.and_then(|c| c.status.as_ref());
            let rollout = status.and_then(|s| s.rollout.as_ref());
            let ready_nodes = nodes
                .iter()
                .filter(|n| n.status().and_then(|s| s.ready) == Some(true))
                .count();
            let up = nodes.iter().filter(|n| n.spec().up).count();
            let paused = pause_of(&inventory, &namespace, &cluster)
                .map_or_else(|| "-".into(), |p| p.summary());
            let line = assess(express_cluster, &nodes);
            ListRow {
                phase: match status.and_then(|s| s.phase) {
                    Some(phase) => format!("{phase:?}"),
                    None => line.state.clone(),
                },
                rollout: rollout
                    .and_then(|r| r.state)
                    .map_or_else(|| "-".into(), |s| s.as_str().to_owned()),
                progress: match rollout.filter(|r| !r.order.is_empty()) {
                    Some(r) => format!("{}/{}", r.completed.len(), r.order.len()),
                    None => format!(
                        "{}/{up}",
                        nodes
                            .iter()
                            .filter(|n| n.spec().up && on_desired_revision(n))
                            .count()
                    ),
                },
                current: dash(&rollout.map(|r| r.current.join(",")).unwrap_or_default()),
                ready: format!("{ready_nodes}/{up}"),
                paused,
                ring: ring_cell(express_cluster),
                operator_version: operator_version_cell(express_cluster),
                namespace,
                cluster,
            }
        })
        .collect()
}

/// The upgrade order to show a cluster's nodes in: as its ExpressCluster reports it, else as
/// the planner computes it (`planned`: the cluster's plan).
pub(crate) fn upgrade_order(
    cluster: Option<&ExpressCluster>,
    planned: Option<&express_planner::Plan>,
) -> Vec<String> {
    let reported = cluster
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.rollout.as_ref())
        .map(|r| r.order.clone())
        .filter(|order| !order.is_empty());
    reported
        .or_else(|| planned.map(|p| p.upgrade_order.clone()))
        .unwrap_or_default()
}

/// A bounce under way on a node: "REQUEST-ID PHASE" (None when it has none, or it ended).
pub(crate) fn bounce_under_way(status: &NodeStatus) -> Option<String> {
    let bounce = status.bounce.as_ref()?;
    let phase = bounce.phase.filter(|p| !p.is_final())?;
    Some(format!("{} {}", bounce.request_id, phase.as_str()))
}

/// The message a node's row shows: why a Failed, Waiting or Paused node does not move, when no
/// unmet prerequisite already says so.
pub(crate) fn why_not_moving(status: &NodeStatus) -> Option<&str> {
    let stuck = matches!(
        status.phase,
        Some(NodePhase::Failed | NodePhase::Waiting | NodePhase::Paused)
    );
    (stuck && status.waiting_for.is_empty())
        .then_some(status.message.as_deref())
        .flatten()
}

/// Whether a node's pod runs its desired revision, as its status says.
pub(crate) fn on_desired_revision(node: &NodeRef<'_>) -> bool {
    node.status()
        .is_some_and(|s| s.desired_revision.is_some() && s.desired_revision == s.running_revision)
}

/// The columns of `list`.
pub const LIST_HEADER: [&str; 10] = [
    "NAMESPACE",
    "CLUSTER",
    "PHASE",
    "ROLLOUT",
    "PROGRESS",
    "CURRENT",
    "READY",
    "PAUSED",
    "RING",
    "OPERATOR VERSION",
];

/// One `list` row's cells, in [`LIST_HEADER`]'s order.
pub fn list_cells(r: &ListRow) -> Vec<String> {
    vec![
        r.namespace.clone(),
        r.cluster.clone(),
        r.phase.clone(),
        r.rollout.clone(),
        r.progress.clone(),
        r.current.clone(),
        r.ready.clone(),
        r.paused.clone(),
        r.ring.clone(),
        r.operator_version.clone(),
    ]
}

pub fn render_list(rows: &[ListRow]) -> String {
    if rows.is_empty() {
        return "No Express clusters found.\n".into();
    }
    table(
        &LIST_HEADER,
        &rows.iter().map(list_cells).collect::<Vec<_>>(),
    )
}

/// Renders the `get` tree of one Express cluster: the ExpressCluster, then every node in
/// upgrade order (down nodes last), each with its pod.
pub fn render_tree(objects: &Objects, namespace: &str, cluster: &str, style: Style) -> String {
    let express_cluster = objects.express_cluster(namespace, cluster);
    let nodes = objects.nodes_of(namespace, cluster);
    let inventory = express_client::read::live::inventory(objects, "");
    let snapshot = snapshot_of(&inventory, namespace, cluster);
    let mut out = tree_header(
        express_cluster,
        &nodes,
        snapshot.as_ref(),
        namespace,
        cluster,
        style,
    );
    let planned = snapshot.as_ref().map(|s| express_planner::plan(s, 0));
    let ordered = in_order(&nodes, &upgrade_order(express_cluster, planned.as_ref()));
    let mut rows: Vec<Vec<String>> = vec![cluster_row(express_cluster, cluster, style)];
    for (i, node) in ordered.iter().enumerate() {
        let last = i + 1 == ordered.len();
        let (branch, under) = if last {
            ("└──", "   ")
        } else {
            ("├──", "│  ")
        };
        rows.push(node_row(node, branch, style));
        if let Some(pod) = objects.pod(namespace, node.name()) {
            rows.push(pod_row(pod, under));
        }
    }
    out.push_str(&table(
        &[
            "NAME", "KIND", "STATUS", "REVISION", "VERSION", "READY", "RESTARTS", "INFO",
        ],
        &rows,
    ));
    out
}

/// The fields above the tree: name, namespace, phase, rollout, pause and message.
fn tree_header(
    express_cluster: Option<&ExpressCluster>,
    nodes: &[NodeRef<'_>],
    snapshot: Option<&ClusterSnapshot>,
    namespace: &str,
    cluster: &str,
    style: Style,
) -> String {
    let status = express_cluster.and_then(|c| c.status.as_ref());
    let line = assess(express_cluster, nodes);
    let mut out = String::new();
    let field = |out: &mut String, name: &str, value: &str| {
        let _ = writeln!(out, "{:<13}{value}", format!("{name}:"));
    };
    field(&mut out, "Name", cluster);
    field(&mut out, "Namespace", namespace);
    let phase = status.and_then(|s| s.phase);
    field(
        &mut out,
        "Phase",
        &format!(
            "{}{}",
            style.cluster(phase),
            phase.map_or_else(|| line.state.clone(), |p| format!("{p:?}"))
        ),
    );
    let rollout = status.and_then(|s| s.rollout.as_ref());
    if let Some(rollout) = rollout {
        field(
            &mut out,
            "Rollout",
            &format!(
                "{}  {}/{}{}",
                rollout.state.map_or("-", |s| s.as_str()),
                rollout.completed.len(),
                rollout.order.len(),
                if rollout.current.is_empty() {
                    String::new()
                } else {
                    format!("  (changing: {})", rollout.current.join(", "))
                }
            ),
        );
        if let Some(failed) = &rollout.failed_node {
            field(&mut out, "Failed node", failed);
        }
    }
    if let Some(pause) = snapshot.and_then(|s| s.pause.as_ref()) {
        field(&mut out, "Paused", &pause.detail());
    }
    field(&mut out, "Message", &line.message);
    out.push('\n');
    out
}

/// The nodes in `order`, then those it does not name.
fn in_order<'n, 'a>(nodes: &'n [NodeRef<'a>], order: &[String]) -> Vec<&'n NodeRef<'a>> {
    let mut ordered: Vec<&NodeRef<'_>> = order
        .iter()
        .filter_map(|name| nodes.iter().find(|n| n.name() == name))
        .collect();
    for node in nodes {
        if !ordered.iter().any(|o| o.name() == node.name()) {
            ordered.push(node);
        }
    }
    ordered
}

/// The tree's root: the ExpressCluster, or that there is none.
fn cluster_row(
    express_cluster: Option<&ExpressCluster>,
    cluster: &str,
    style: Style,
) -> Vec<String> {
    let phase = express_cluster
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.phase);
    let title = match express_cluster {
        Some(c) => format!(
            "{}{} (ExpressCluster)",
            style.cluster(phase),
            c.metadata.name.as_deref().unwrap_or(cluster)
        ),
        None => format!("{cluster} (no ExpressCluster)"),
    };
    vec![
        title,
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
    ]
}

/// One node's row, after the tree's `branch`.
fn node_row(node: &NodeRef<'_>, branch: &str, style: Style) -> Vec<String> {
    let status = node.status();
    let phase = status.and_then(|s| s.phase);
    let revision = format!(
        "{}→{}",
        short(status.and_then(|s| s.running_revision.as_deref())),
        short(status.and_then(|s| s.desired_revision.as_deref()))
    );
    vec![
        format!("{branch}{}{}", style.phase(phase), node.name()),
        node.kind().to_string(),
        phase.map_or_else(|| "-".into(), |p| p.as_str().to_owned()),
        revision,
        status
            .and_then(|s| s.running_version.clone())
            .unwrap_or_else(|| "-".into()),
        match status.and_then(|s| s.ready) {
            Some(true) => "yes".into(),
            Some(false) => "no".into(),
            None => "-".into(),
        },
        status
            .and_then(|s| s.restarts)
            .map_or_else(|| "-".into(), |r| r.to_string()),
        node_info(status).join("; "),
    ]
}

/// What a node is doing or waiting for: its change under way, the nodes it waits for, its
/// bounce, and why it does not move.
fn node_info(status: Option<&NodeStatus>) -> Vec<String> {
    let mut info: Vec<String> = Vec::new();
    if let Some(change) = status
        .and_then(|s| s.change.as_ref())
        .filter(|c| c.state == ChangeState::InProgress)
    {
        info.push(format!(
            "{:?} {}→{}",
            change.kind,
            short(change.from_revision.as_deref()),
            short(Some(&change.to_revision))
        ));
    }
    let waits: Vec<&str> = status
        .map(|s| s.waiting_for.iter().map(|w| w.node.as_str()).collect())
        .unwrap_or_default();
    if !waits.is_empty() {
        info.push(format!("waits for {}", waits.join(", ")));
    }
    if let Some(bounce) = status.and_then(bounce_under_way) {
        info.push(format!("bounce {bounce}"));
    }
    if let Some(message) = status.and_then(why_not_moving) {
        info.push(message.to_owned());
    }
    info
}

fn pod_row(pod: &PodView, under: &str) -> Vec<String> {
    let status = pod.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.iter().find(|c| &*c.type_ == "Ready"))
        .is_some_and(|c| &*c.status == "True");
    let restarts = status.map_or(0, |s| s.restarts);
    let phase = if pod.terminating() {
        "Terminating".to_owned()
    } else {
        status
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("Pending")
            .to_owned()
    };
    vec![
        format!("{under}└──{}", pod.name),
        "Pod".into(),
        phase,
        short(pod.revision.as_deref()),
        String::new(),
        if ready { "yes".into() } else { "no".into() },
        restarts.to_string(),
        String::new(),
    ]
}

/// Whether `get -w` can stop: the cluster settled (done or failed).
pub fn settled(objects: &Objects, namespace: &str, cluster: &str) -> Option<Outcome> {
    let express_cluster = objects.express_cluster(namespace, cluster);
    let nodes = objects.nodes_of(namespace, cluster);
    let line = assess(express_cluster, &nodes);
    matches!(line.outcome, Outcome::Done | Outcome::Failed).then_some(line.outcome)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::show::status::assess;
    use express_api::objects::shared;
    use express_api::{Backend, ExpressCluster, Frontend, NodePhase, OperatorStatus};
    use serde_json::{Value, json};
    use std::sync::Arc;

    const PLAIN: Style = Style { color: false };
    const COLOR: Style = Style { color: true };

    fn meta(name: &str) -> Value {
        json!({"name": name, "namespace": "tenant", "generation": 2, "uid": format!("uid-{name}")})
    }

    fn node_status(phase: NodePhase, message: &str, extra: Value) -> Value {
        let mut status = json!({
            "observedGeneration": 2, "phase": phase.as_str(), "message": message,
            "runningRevision": "5f1c2a9e7b3d", "desiredRevision": "9a8b7c6d5e4f",
            "runningVersion": "v1", "ready": phase == NodePhase::Ready, "restarts": 0,
        });
        if let (Some(map), Some(extra)) = (status.as_object_mut(), extra.as_object()) {
            map.extend(extra.clone());
        }
        status
    }

    fn frontend(name: &str, up: bool, status: Value) -> Frontend {
        serde_json::from_value(json!({
            "apiVersion": "express.dev/v1alpha1", "kind": "Frontend", "metadata": meta(name),
            "spec": {"clusterConfig": {"clusterName": "acme"}, "up": up}, "status": status,
        }))
        .unwrap()
    }

    fn pod(name: &str, phase: &str, ready: bool, terminating: bool) -> PodView {
        let mut metadata = meta(name);
        metadata["labels"] = json!({"express.dev/cluster": "acme", "express.dev/deployment-revision": "5f1c2a9e7b3d"});
        if terminating {
            metadata["deletionTimestamp"] = json!("2026-11-22T06:00:00Z");
        }
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": metadata,
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}],
                       "containerStatuses": [{"name": "express", "restartCount": 1, "ready": ready, "image": "express:v1", "imageID": ""}]},
        }))
        .unwrap();
        PodView::from(&pod)
    }

    /// A cluster mid-rollout with a node in every phase.
    fn every_phase() -> Objects {
        let cluster: ExpressCluster = serde_json::from_value(json!({
            "apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster", "metadata": meta("acme"),
            "spec": {},
            "status": {"observedGeneration": 2, "phase": "Progressing",
                       "message": "3 of 8 up nodes on their desired revision; bouncing acme-fe6",
                       "rollout": {"state": "Progressing",
                                   "order": ["acme-fe1", "acme-fe2", "acme-be", "acme-fe3", "acme-fe4", "acme-fe5", "acme-fe6", "acme-fe7"],
                                   "current": ["acme-fe2"], "completed": ["acme-fe1", "acme-fe7", "acme-fe4"]}}
        }))
        .unwrap();
        let backend: Backend = serde_json::from_value(json!({
            "apiVersion": "express.dev/v1alpha1", "kind": "Backend", "metadata": meta("acme-be"),
            "spec": {"clusterConfig": {"clusterName": "acme"}},
            "status": node_status(NodePhase::Waiting, "waiting for acme-fe2 (not Ready)",
                json!({"waitingFor": [{"node": "acme-fe2", "reason": "not Ready"}]})),
        }))
        .unwrap();
        let frontends = vec![
            frontend(
                "acme-fe1",
                true,
                node_status(
                    NodePhase::Ready,
                    "running its desired revision",
                    json!({"runningRevision": "9a8b7c6d5e4f", "runningVersion": "v2"}),
                ),
            ),
            frontend(
                "acme-fe2",
                true,
                node_status(
                    NodePhase::Upgrading,
                    "new pod starting",
                    json!({"change": {"kind": "Upgrade", "state": "InProgress", "fromRevision": "5f1c2a9e7b3d", "toRevision": "9a8b7c6d5e4f", "sequence": 2, "rollout": "r"}}),
                ),
            ),
            frontend(
                "acme-fe3",
                true,
                node_status(NodePhase::Provisioning, "creating its pod", json!({})),
            ),
            frontend(
                "acme-fe4",
                true,
                node_status(NodePhase::NotReady, "pod is not Ready", json!({})),
            ),
            frontend(
                "acme-fe5",
                true,
                node_status(
                    NodePhase::Failed,
                    "revision 9a8b7c6d5e failed on this node (crash-looping)",
                    json!({}),
                ),
            ),
            frontend(
                "acme-fe6",
                true,
                node_status(
                    NodePhase::Bouncing,
                    "bounce b1: deleting pod acme-fe6 gracefully",
                    json!({"bounce": {"requestId": "b1", "phase": "Terminating"}}),
                ),
            ),
            frontend(
                "acme-fe7",
                true,
                node_status(
                    NodePhase::Paused,
                    "paused: nothing is changed until resumed",
                    json!({}),
                ),
            ),
            frontend(
                "acme-fe8",
                false,
                node_status(
                    NodePhase::Down,
                    "intentionally down (up: false)",
                    json!({"ready": false}),
                ),
            ),
        ];
        Objects {
            clusters: shared([cluster]),
            backends: shared([backend]),
            frontends: shared(frontends),
            pods: shared([
                pod("acme-be", "Running", true, false),
                pod("acme-fe1", "Running", true, false),
                pod("acme-fe2", "Running", false, false),
                pod("acme-fe4", "Running", false, false),
                pod("acme-fe5", "Running", false, false),
                pod("acme-fe6", "Running", true, true),
                pod("acme-fe7", "Running", true, false),
            ]),
            ..Objects::default()
        }
    }

    #[test]
    fn the_tree_shows_every_node_phase_in_upgrade_order() {
        insta::assert_snapshot!(
            "tree_plain",
            render_tree(&every_phase(), "tenant", "acme", PLAIN)
        );
    }

    #[test]
    fn colour_adds_symbols_and_nothing_else() {
        let objects = every_phase();
        let colored = render_tree(&objects, "tenant", "acme", COLOR);
        assert!(colored.contains("\x1b[32m✔\x1b[0m acme-fe1"));
        assert!(colored.contains("↻"));
        let plain = render_tree(&objects, "tenant", "acme", PLAIN);
        assert!(!plain.contains('\x1b') && !plain.contains('✔'));
    }

    #[test]
    fn the_list_has_one_line_per_cluster() {
        let mut objects = every_phase();
        objects.frontends.push(Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "express.dev/v1alpha1", "kind": "Frontend",
                "metadata": {"name": "beta-fe1", "namespace": "other", "generation": 1},
                "spec": {"clusterConfig": {"clusterName": "beta"}},
                "status": {"observedGeneration": 1, "phase": "Ready", "ready": true,
                           "runningRevision": "r1", "desiredRevision": "r1"}
            }))
            .unwrap(),
        ));
        objects.config_maps.push(Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": "express-control", "namespace": "other"},
                "data": {"paused": "true", "reason": "freeze"}
            }))
            .unwrap(),
        ));
        // `acme` is the default ring's, as its operator reported; the others show each stage of
        // a move to the canary ring.
        let mut acme = (*objects.clusters[0]).clone();
        acme.status.as_mut().unwrap().operator = Some(OperatorStatus {
            ring: "default".into(),
            version: "0.5.0".into(),
            ..OperatorStatus::default()
        });
        objects.clusters[0] = Arc::new(acme);
        for (namespace, owner) in [
            ("moving", json!({"ring": "default", "version": "0.5.0"})),
            (
                "released",
                json!({"ring": "default", "version": "0.5.0", "released": "2026-11-22T06:00:00Z"}),
            ),
            (
                "adopted",
                json!({"ring": "canary", "version": "0.6.0-rc.1"}),
            ),
            ("unreadable", json!({"ring": "", "version": ""})),
            ("unowned", Value::Null),
        ] {
            objects.clusters.push(Arc::new(
                serde_json::from_value(json!({
                    "apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
                    "metadata": {"name": "gamma", "namespace": namespace, "generation": 1,
                                 "labels": {"express.dev/operator-ring": "canary"}},
                    "spec": {},
                    "status": {"observedGeneration": 1, "phase": "Healthy", "operator": owner}
                }))
                .unwrap(),
            ));
        }
        insta::assert_snapshot!("list", render_list(&list_rows(&objects, "express-system")));
        assert_eq!(render_list(&[]), "No Express clusters found.\n");
    }

    #[test]
    fn status_lines_say_the_state_and_why() {
        let objects = every_phase();
        let nodes = objects.nodes_of("tenant", "acme");
        let mut lines = Vec::new();
        for (state, phase, message) in [
            (
                "Progressing",
                "Progressing",
                "3 of 8 up nodes on their desired revision",
            ),
            (
                "Complete",
                "Healthy",
                "all 8 up nodes Ready on their desired revision",
            ),
            (
                "Failed",
                "Failed",
                "revision 9a8b7c6d5e failed on acme-fe5: crash-looping",
            ),
            ("Aborted", "Degraded", "aborted by request a1"),
            (
                "RollingBack",
                "Failed",
                "rolling back the nodes it changed, newest first",
            ),
            (
                "Paused",
                "Paused",
                "paused (namespace (ConfigMap express-control)): freeze",
            ),
        ] {
            let mut cluster = (*objects.clusters[0]).clone();
            let status = cluster.status.as_mut().unwrap();
            status.phase = serde_json::from_value(json!(phase)).unwrap();
            status.message = Some(message.into());
            status.rollout.as_mut().unwrap().state = serde_json::from_value(json!(state)).unwrap();
            let line = assess(Some(&cluster), &nodes);
            lines.push(format!("{line}  => {:?}", line.outcome));
        }
        let mut unobserved = (*objects.clusters[0]).clone();
        unobserved.metadata.generation = Some(3);
        let line = assess(Some(&unobserved), &nodes);
        lines.push(format!("{line}  => {:?}", line.outcome));
        let line = assess(None, &nodes);
        lines.push(format!("{line}  => {:?}", line.outcome));
        insta::assert_snapshot!("status_lines", lines.join("\n"));
    }
}
