//! Building snapshots from API objects: grouping, effective revisions, pod ownership, pause.

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

use std::collections::HashMap;
use std::sync::Arc;

use express_api::objects::shared;
use express_api::views::PodView;
use express_api::{Backend, ClusterKey, ExpressCluster, Frontend};
use express_planner::observe::{Inventory, PodOwnership, pauses, snapshots};
use express_planner::{ClusterSnapshot, Pause, PauseScope, PodPhase};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use serde::de::DeserializeOwned;
use serde_json::json;

fn object<T: DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("valid object")
}

fn frontend(ns: &str, name: &str, cluster: &str, extra: serde_json::Value) -> Frontend {
    let mut spec = json!({"clusterConfig": {"clusterName": cluster}});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    object(
        json!({"apiVersion": "express.dev/v1alpha1", "kind": "Frontend",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}")}, "spec": spec}),
    )
}

fn backend(ns: &str, name: &str, cluster: &str) -> Backend {
    object(
        json!({"apiVersion": "express.dev/v1alpha1", "kind": "Backend",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}")},
        "spec": {"clusterConfig": {"clusterName": cluster}}}),
    )
}

fn express_cluster(ns: &str, name: &str, spec: serde_json::Value) -> ExpressCluster {
    object(
        json!({"apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
        "metadata": {"name": name, "namespace": ns}, "spec": spec}),
    )
}

fn owned_pod(ns: &str, name: &str, kind: &str, uid: &str, extra_meta: serde_json::Value) -> Pod {
    let mut metadata = json!({"name": name, "namespace": ns, "ownerReferences": [{
        "apiVersion": "express.dev/v1alpha1", "kind": kind, "name": name, "uid": uid, "controller": true}]});
    if let (Some(m), Some(extra)) = (metadata.as_object_mut(), extra_meta.as_object()) {
        m.extend(extra.clone());
    }
    object(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
        "spec": {"containers": [{"name": "express", "image": "reg:5000/express:v7"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"name": "express", "image": "x", "imageID": "", "ready": true, "restartCount": 3}]}}),
    )
}

fn control(ns: &str, name: &str, paused: &str, reason: Option<&str>) -> ConfigMap {
    let mut data = json!({"paused": paused});
    if let Some(reason) = reason {
        data["reason"] = json!(reason);
    }
    object(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}),
    )
}

#[derive(Default)]
struct Objects {
    clusters: Vec<ExpressCluster>,
    backends: Vec<Backend>,
    frontends: Vec<Frontend>,
    pods: Vec<Pod>,
    config_maps: Vec<ConfigMap>,
}

impl Objects {
    fn api(&self) -> express_api::Objects {
        express_api::Objects {
            clusters: shared(self.clusters.clone()),
            backends: shared(self.backends.clone()),
            frontends: shared(self.frontends.clone()),
            pods: self
                .pods
                .iter()
                .map(|p| Arc::new(PodView::from(p)))
                .collect(),
            config_maps: shared(self.config_maps.clone()),
            ..express_api::Objects::default()
        }
    }

    fn snapshots(&self) -> Vec<ClusterSnapshot> {
        snapshots(&inventory(&self.api()))
    }

    /// The fleet's pauses as `observe::pauses` reads them in one pass.
    fn pauses(&self) -> HashMap<ClusterKey, Pause> {
        pauses(&inventory(&self.api()))
    }
}

fn inventory(objects: &express_api::Objects) -> Inventory<'_> {
    Inventory {
        objects,
        operator_namespace: "express-system",
        ownership: PodOwnership::OwnerReference,
    }
}

#[test]
fn nodes_group_by_namespace_and_cluster_name() {
    let objects = Objects {
        clusters: vec![express_cluster(
            "a",
            "named-differently",
            json!({"clusterName": "acme",
            "defaults": {"frontend": {"expressVersion": "v2"}, "backend": {"expressVersion": "v3"}},
            "rollout": {"maxConcurrent": 3}, "dependencies": {"backendUpgradePosition": 0}}),
        )],
        backends: vec![backend("a", "acme-be", "acme")],
        frontends: vec![
            frontend("a", "acme-fe1", "acme", json!({})),
            frontend("a", "other-fe1", "other", json!({"expressVersion": "v1"})),
            frontend("b", "acme-fe1", "acme", json!({"expressVersion": "v1"})),
        ],
        ..Objects::default()
    };
    let found = objects.snapshots();
    let keys: Vec<(String, String, usize)> = found
        .iter()
        .map(|s| (s.namespace.clone(), s.cluster_name.clone(), s.nodes.len()))
        .collect();
    assert_eq!(
        keys,
        [
            ("a".into(), "acme".into(), 2),
            ("a".into(), "other".into(), 1),
            ("b".into(), "acme".into(), 1)
        ]
    );
    let acme = &found[0];
    assert_eq!(acme.settings.max_concurrent, 3);
    assert_eq!(acme.settings.backend_upgrade_position, 0);
    let versions: Vec<&str> = acme
        .nodes
        .iter()
        .map(|n| n.desired.as_ref().expect("valid").version.as_str())
        .collect();
    assert_eq!(versions, ["v3", "v2"], "per-kind defaults apply");
    // Without an ExpressCluster, built-in defaults apply and the node must carry a version.
    assert_eq!(found[2].settings, Default::default());
}

#[test]
fn revision_label_on_the_node_overrides_the_computed_revision() {
    let mut node = frontend("a", "acme-fe1", "acme", json!({"expressVersion": "v1"}));
    let computed = Objects {
        frontends: vec![node.clone()],
        ..Objects::default()
    }
    .snapshots()[0]
        .nodes[0]
        .desired
        .clone()
        .expect("valid")
        .revision;
    assert_eq!(computed.len(), 10);
    node.metadata.labels = Some(
        [(
            "express.dev/deployment-revision".to_owned(),
            "from-helm".to_owned(),
        )]
        .into(),
    );
    let pinned = Objects {
        frontends: vec![node],
        ..Objects::default()
    }
    .snapshots()[0]
        .nodes[0]
        .desired
        .clone()
        .expect("valid")
        .revision;
    assert_eq!(pinned, "from-helm");
}

#[test]
fn pods_are_matched_and_owned_only_through_a_controller_reference() {
    let objects = Objects {
        frontends: vec![
            frontend("a", "acme-fe1", "acme", json!({"expressVersion": "v1"})),
            frontend("a", "acme-fe2", "acme", json!({"expressVersion": "v1"})),
            frontend("a", "acme-fe3", "acme", json!({"expressVersion": "v1"})),
        ],
        pods: vec![
            owned_pod(
                "a",
                "acme-fe1",
                "Frontend",
                "uid-acme-fe1",
                json!({"labels": {"express.dev/deployment-revision": "r1"}}),
            ),
            owned_pod(
                "a",
                "acme-fe2",
                "Frontend",
                "uid-of-an-older-object",
                json!({}),
            ),
            owned_pod(
                "a",
                "acme-fe3",
                "Backend",
                "uid-acme-fe3",
                json!({"annotations": {"express.dev/express-version": "v9"}}),
            ),
            owned_pod("other", "acme-fe1", "Frontend", "uid-acme-fe1", json!({})),
        ],
        ..Objects::default()
    };
    let snapshot = &objects.snapshots()[0];
    let fe1 = snapshot.nodes[0].pod.as_ref().expect("fe1 pod");
    assert!(fe1.owned);
    assert_eq!(fe1.revision.as_deref(), Some("r1"));
    assert_eq!(
        fe1.version.as_deref(),
        Some("v7"),
        "version from the image tag, registry port kept apart"
    );
    assert_eq!(fe1.restarts, 3);
    assert_eq!(fe1.phase, PodPhase::Running);
    assert!(fe1.is_ready());
    assert!(
        !snapshot.nodes[1].pod.as_ref().expect("fe2 pod").owned,
        "uid mismatch: a previous incarnation's pod"
    );
    let fe3 = snapshot.nodes[2].pod.as_ref().expect("fe3 pod");
    assert!(
        !fe3.owned,
        "owned by a Backend of that name, not this Frontend"
    );
    assert_eq!(
        fe3.version.as_deref(),
        Some("v9"),
        "annotation wins over the image"
    );
}

#[test]
fn pause_scopes_widest_first() {
    let mut objects = Objects {
        clusters: vec![express_cluster("a", "acme", json!({"paused": true}))],
        frontends: vec![frontend(
            "a",
            "acme-fe1",
            "acme",
            json!({"expressVersion": "v1"}),
        )],
        ..Objects::default()
    };
    // The snapshot's pause, which the fleet's one-pass reading must agree with.
    let pause = |o: &Objects| {
        let pause = o.snapshots()[0].pause.clone();
        assert_eq!(
            o.pauses().get(&ClusterKey::new("a", "acme")),
            pause.as_ref()
        );
        pause
    };
    assert_eq!(pause(&objects).map(|p| p.scope), Some(PauseScope::Cluster));

    objects
        .config_maps
        .push(control("a", "express-control", "True", Some("freeze")));
    let namespace = pause(&objects).expect("paused");
    assert_eq!(
        (namespace.scope, namespace.reason.as_deref()),
        (PauseScope::Namespace, Some("freeze"))
    );

    objects.config_maps.push(control(
        "express-system",
        "express-operator-control",
        "true",
        None,
    ));
    assert_eq!(pause(&objects).map(|p| p.scope), Some(PauseScope::Operator));

    // "false", other names and other namespaces do not pause.
    objects.clusters[0].spec.paused = false;
    objects.config_maps = vec![
        control("a", "express-control", "false", None),
        control("b", "express-control", "true", None),
        control("a", "express-operator-control", "true", None),
    ];
    assert_eq!(pause(&objects), None);
}

#[test]
fn two_express_clusters_claiming_one_cluster_is_a_spec_error() {
    let objects = Objects {
        clusters: vec![
            express_cluster("a", "acme", json!({})),
            express_cluster("a", "acme-too", json!({"clusterName": "acme"})),
        ],
        ..Objects::default()
    };
    let snapshot = &objects.snapshots()[0];
    assert_eq!(
        snapshot.spec_errors,
        ["ExpressClusters acme, acme-too all claim Express cluster acme; keep one"]
    );
}

#[test]
fn recorded_replacement_is_read_from_status() {
    let mut node = frontend("a", "acme-fe1", "acme", json!({"expressVersion": "v1"}));
    node.status = Some(object(json!({"change": {
        "kind": "Upgrade", "state": "InProgress", "fromRevision": "r1", "toRevision": "r2",
        "sequence": 4, "rollout": "abc"
    }})));
    let snapshot = &Objects {
        frontends: vec![node.clone()],
        ..Objects::default()
    }
    .snapshots()[0];
    assert!(snapshot.nodes[0].replacing, "no pod on r2 yet");
    let change = snapshot.nodes[0].change.as_ref().expect("change read");
    assert_eq!(
        (change.from.as_deref(), change.to.as_str(), change.sequence),
        (Some("r1"), "r2", 4)
    );

    node.status = Some(object(json!({"change": {
        "kind": "Upgrade", "state": "Succeeded", "fromRevision": "r1", "toRevision": "r2"
    }})));
    let snapshot = &Objects {
        frontends: vec![node],
        ..Objects::default()
    }
    .snapshots()[0];
    assert!(
        !snapshot.nodes[0].replacing,
        "a finished change is not a replacement"
    );
}

#[test]
fn abort_and_retry_requests_are_read_from_the_express_cluster() {
    let mut cluster: ExpressCluster = object(json!({
        "apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
        "metadata": {"name": "acme", "namespace": "a", "annotations": {
            "express.dev/abort": " req-2 ", "express.dev/abort-rollback": "TRUE",
            "express.dev/retry": "req-1"}},
        "spec": {"tenantID": 1, "tenantName": "acme"},
        "status": {"requests": {"abort": "req-1"},
                   "abort": {"requestId": "req-1", "rollback": false, "revisions": {"acme-fe1": "r2"}}}
    }));
    let snapshot = &Objects {
        clusters: vec![cluster.clone()],
        ..Objects::default()
    }
    .snapshots()[0];
    let control = &snapshot.control;
    assert_eq!(
        control
            .abort_request
            .as_ref()
            .map(|r| (r.id.as_str(), r.rollback)),
        Some(("req-2", true))
    );
    assert_eq!(control.retry_request.as_deref(), Some("req-1"));
    assert_eq!(control.handled_abort.as_deref(), Some("req-1"));
    assert_eq!(control.abort.as_ref().map(|a| a.revisions.len()), Some(1));

    cluster.metadata.annotations = None;
    let snapshot = &Objects {
        clusters: vec![cluster],
        ..Objects::default()
    }
    .snapshots()[0];
    assert_eq!(snapshot.control.abort_request, None);
    assert_eq!(snapshot.control.retry_request, None);
}

/// What becomes a label value or a pod name is checked before any pod is attempted: a node
/// whose name or pod labels the API server would refuse is invalid (named), a clusterName that
/// cannot be a label blocks its cluster; valid neighbours are not touched.
#[test]
fn names_that_would_make_invalid_pods_are_invalid_specs() {
    let long = format!("acme-{}", "x".repeat(60));
    let objects = Objects {
        frontends: vec![
            frontend("a", &long, "acme", json!({"expressVersion": "v1"})),
            frontend(
                "a",
                "acme-fe1",
                "acme",
                json!({"expressVersion": "v1", "podTemplate": {"metadata": {"labels": {"team": "sre ops"}}}}),
            ),
            frontend("a", "acme-fe2", "acme", json!({"expressVersion": "v1"})),
            frontend(
                "a",
                "bad-fe1",
                "bad cluster",
                json!({"expressVersion": "v1"}),
            ),
        ],
        ..Objects::default()
    };
    let found = objects.snapshots();
    let acme = found
        .iter()
        .find(|s| s.cluster_name == "acme")
        .expect("acme");
    let why = |name: &str| {
        acme.nodes
            .iter()
            .find(|n| n.name == name)
            .and_then(|n| n.desired.clone().err())
    };
    assert!(
        why(&long).is_some_and(|w| w.contains("express.dev/node") && w.contains("63")),
        "{:?}",
        why(&long)
    );
    assert!(
        why("acme-fe1").is_some_and(|w| w.contains("podTemplate.metadata.labels[\"team\"]")),
        "{:?}",
        why("acme-fe1")
    );
    assert_eq!(why("acme-fe2"), None);
    assert!(acme.spec_errors.is_empty());
    let bad = found
        .iter()
        .find(|s| s.cluster_name == "bad cluster")
        .expect("bad");
    assert!(
        bad.spec_errors
            .iter()
            .any(|e| e.contains("clusterName \"bad cluster\"") && e.contains("express.dev/cluster")),
        "{:?}",
        bad.spec_errors
    );
}
