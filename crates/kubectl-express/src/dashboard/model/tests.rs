#![allow(clippy::unwrap_used)]
use std::collections::BTreeSet;
use std::sync::Arc;

use express_api::Objects;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;

use super::fleet::{DcInput, FleetQuery, FleetSort, FleetView, Health, merge};
use super::rows::rows;
use super::tenant::*;
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

/// The fleet page of one DC holding [`fleet_objects`].
fn fleet_with(query: FleetQuery) -> FleetView {
    let rows = rows(&fleet_objects(), OPERATOR_NAMESPACE);
    let one = DcInput {
        context: "",
        health: &Health::Live,
        doctor: None,
        banner: None,
        read_only: false,
        rows: &rows,
    };
    merge(&[one], &query, now())
}

fn names(view: &FleetView) -> Vec<String> {
    view.tenants
        .iter()
        .map(|t| format!("{}/{}", t.tenant.list.namespace, t.tenant.list.cluster))
        .collect()
}

#[test]
fn the_fleet_page_has_a_row_per_tenant_with_progress_versions_age_and_pause() {
    // Unhealthy first unless asked otherwise: the page leads with what needs a look.
    assert_eq!(
        names(&fleet_with(FleetQuery::default())),
        ["team-b/shop", "team-c/web", "team-a/shop"]
    );
    let view = fleet_with(FleetQuery {
        sort: FleetSort::Namespace,
        ..FleetQuery::default()
    });
    assert_eq!(names(&view), ["team-a/shop", "team-b/shop", "team-c/web"]);
    assert_eq!(view.total, 3);
    assert_eq!(view.namespaces, ["team-a", "team-b", "team-c"]);
    assert_eq!(view.phases, ["Healthy", "Paused", "Progressing"]);
    let [healthy, upgrading, paused] = &view.tenants[..] else {
        panic!("three rows")
    };
    let (healthy_age, upgrading_age) = (&healthy.rollout_age, &upgrading.rollout_age);
    let (healthy, upgrading, paused) = (&healthy.tenant, &upgrading.tenant, &paused.tenant);
    assert_eq!(
        (healthy.progress(), healthy.versions.clone()),
        ("2/2".into(), vec!["v1".into()])
    );
    assert_eq!(
        healthy_age.as_deref(),
        Some("50m"),
        "finished 50 minutes ago"
    );
    assert_eq!(upgrading.progress(), "1/4");
    assert_eq!(upgrading.versions, ["v1", "v2"]);
    assert_eq!(upgrading.list.rollout, "Progressing");
    assert_eq!(upgrading_age.as_deref(), Some("1m30s"), "started 90 s ago");
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
                ..FleetQuery::default()
            }
            .normalized(),
        ))
    };
    assert_eq!(
        with(Some("team-b"), None, None, FleetSort::Namespace),
        ["team-b/shop"]
    );
    assert_eq!(
        with(None, Some("Paused"), None, FleetSort::Namespace),
        ["team-c/web"]
    );
    // Text matches any column, versions included, whatever the case.
    assert_eq!(
        with(None, None, Some("V2"), FleetSort::Namespace),
        ["team-b/shop"]
    );
    assert_eq!(
        with(None, None, Some("freeze"), FleetSort::Namespace),
        ["team-c/web"]
    );
    // Empty fields, as a form submits them, filter nothing.
    assert_eq!(
        with(Some(" "), Some(""), Some(""), FleetSort::Namespace).len(),
        3
    );
    // Least done first; oldest rollout first.
    assert_eq!(
        with(None, None, None, FleetSort::Progress),
        ["team-b/shop", "team-a/shop", "team-c/web"]
    );
    assert_eq!(
        with(None, None, None, FleetSort::Age),
        ["team-a/shop", "team-b/shop", "team-c/web"]
    );
    assert_eq!(
        with(None, None, None, FleetSort::Cluster),
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
    // The summary is the fleet row with its rollout's age, in the API as on the fleet page.
    let summary = serde_json::to_value(&view.summary).unwrap();
    assert_eq!(
        (&summary["rolloutAge"], &summary["namespace"]),
        (&json!("1m30s"), &json!("team-b"))
    );
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
