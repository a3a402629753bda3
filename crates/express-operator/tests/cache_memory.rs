//! Memory regression check: what the operator's caches hold per tenant, at 300 settled tenants
//! (8 nodes each, 3 kept revisions per node), under a ceiling. The objects go through the same
//! decoding, indexes and views as the watches ([`Caches::replay`]) and the heap is weighed with
//! dhat's counters; a change that puts whole API objects back in the caches (a `Pod` decoded
//! is about 6 KB, its view a few hundred bytes; a node 2.2 KB, its view about 1.2) fails here,
//! long before a fleet benchmark.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use express_api::Frontend;
use express_api::lenient::Lenient;
use express_api::views::{Interner, NodeView, PodView};
use express_operator::controller::Caches;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

/// The heap bytes what `hold` builds keeps while it is held.
fn weigh<T>(hold: impl FnOnce() -> T) -> usize {
    let before = dhat::HeapStats::get().curr_bytes;
    let held = hold();
    let bytes = dhat::HeapStats::get().curr_bytes.saturating_sub(before);
    drop(held);
    bytes
}

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

const TENANTS: usize = 300;
const FRONTENDS: usize = 7;
const REVISIONS_PER_NODE: usize = 3;
/// Recorded from this test's own measurement (32,550 B per tenant when the pod views came in,
/// 26,057 B with the node views; 20,793 B with uids as the API server issues them, kept in 16
/// bytes, instants in 8, revisions without their derivable names, and namespaces as sorted
/// vectors) with room for small changes; the test also weighs the pods and the nodes held
/// whole, as before their views, and checks that the ceiling catches either.
const CEILING_BYTES_PER_TENANT: usize = 24 * 1024;

fn time(second: usize) -> String {
    format!(
        "2026-11-25T10:{:02}:{:02}Z",
        (second / 60) % 60,
        second % 60
    )
}

fn managed_fields(manager: &str, status: bool) -> Value {
    let mut entries = vec![
        json!({"manager": manager, "operation": "Apply", "apiVersion": "express.dev/v1alpha1",
                                  "time": time(1), "fieldsType": "FieldsV1"}),
    ];
    if status {
        entries.push(json!({"manager": "express-operator", "operation": "Apply", "apiVersion": "express.dev/v1alpha1",
                            "time": time(9), "fieldsType": "FieldsV1", "subresource": "status"}));
    }
    Value::Array(entries)
}

fn condition(type_: &str, reason: &str) -> Value {
    json!({"type": type_, "status": "True", "reason": reason, "message": format!("{type_}: {reason}"),
           "lastTransitionTime": time(9), "observedGeneration": 1})
}

/// A uid as the API server issues them (a random UUID; here one per tenant, node and object).
fn uid(tenant: usize, node: usize, object: usize) -> String {
    format!("{tenant:08x}-{node:04x}-4{object:03x}-8000-00000000cafe")
}

/// One settled tenant as the API serves it: ExpressCluster, nodes, pods, kept revisions.
fn tenant(n: usize) -> Vec<Value> {
    let namespace = format!("tenant-{n:05}");
    let cluster = format!("c{n:05}");
    let clusterconfig = json!({"clusterName": cluster, "tenantID": n, "tenantName": cluster});
    let mut objects = vec![json!({
        "apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
        "metadata": {"name": cluster, "namespace": namespace, "uid": uid(n, 0, 0), "generation": 1,
                     "resourceVersion": (n * 100).to_string(), "creationTimestamp": time(1),
                     "managedFields": managed_fields("helm", true)},
        "spec": {"tenantID": n, "tenantName": cluster,
                 "defaults": {"backend": {"expressVersion": "express-e689.154", "configChangeset": "867fc47c23", "image": "registry.example/express"},
                              "frontend": {"expressVersion": "express-e689.154", "configChangeset": "867fc47c23", "image": "registry.example/express"}},
                 "rollout": {"maxConcurrent": 1, "progressDeadlineSeconds": 600}},
        "status": {"observedGeneration": 1, "phase": "Ready", "readyNodes": 8, "totalNodes": 8,
                   "conditions": [condition("Ready", "AllNodesReady"), condition("Progressing", "RolloutComplete")],
                   "observedDesired": {"up": true}},
    })];
    let nodes = std::iter::once(("Backend", format!("{cluster}-be")))
        .chain((1..=FRONTENDS).map(|i| ("Frontend", format!("{cluster}-fe{i}"))));
    for (i, (kind, name)) in nodes.enumerate() {
        let uid = uid(n, i + 1, 0);
        let version = n * 100 + i * 10;
        objects.push(json!({
            "apiVersion": "express.dev/v1alpha1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace, "uid": uid, "generation": 1,
                         "resourceVersion": (version + 1).to_string(), "creationTimestamp": time(1),
                         "managedFields": managed_fields("helm", true)},
            "spec": {"clusterConfig": clusterconfig, "up": true},
            "status": {"observedGeneration": 1, "phase": "Ready", "desiredRevision": "f86a979861",
                       "runningRevision": "f86a979861", "runningVersion": "express-e689.154",
                       "podName": name, "ready": true, "restarts": 0,
                       "conditions": [condition("Ready", "PodReady")],
                       "observedDesired": {"revision": "f86a979861", "up": true}},
        }));
        let kind_label = kind.to_lowercase();
        objects.push(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": self::uid(n, i + 1, 1),
                         "resourceVersion": (version + 2).to_string(), "creationTimestamp": time(2),
                         "labels": {"express.dev/cluster": cluster, "express.dev/node": name, "express.dev/kind": kind_label,
                                    "express.dev/deployment-revision": "f86a979861", "express.dev/operator-ring": "default"},
                         "annotations": {"express.dev/express-version": "express-e689.154",
                                         "express.dev/shutdown-protection": "enabled"},
                         "ownerReferences": [{"apiVersion": "express.dev/v1alpha1", "kind": kind, "name": name,
                                              "uid": uid, "controller": true, "blockOwnerDeletion": true}],
                         "managedFields": [{"manager": "express-operator", "operation": "Update", "apiVersion": "v1",
                                            "time": time(2), "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]},
            "spec": {"containers": [{"name": "express", "image": "registry.example/express:express-e689.154",
                                     "env": [{"name": "EXPRESS_CONFIG_CHANGESET", "value": "867fc47c23"}],
                                     "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
                     "terminationGracePeriodSeconds": 30, "nodeName": "kubesim"},
            "status": {"phase": "Running", "podIP": "10.0.0.7", "qosClass": "Burstable", "startTime": time(2),
                       "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": time(2)},
                                      {"type": "Initialized", "status": "True", "lastTransitionTime": time(2)},
                                      {"type": "ContainersReady", "status": "True", "lastTransitionTime": time(4)},
                                      {"type": "Ready", "status": "True", "lastTransitionTime": time(4)}],
                       "containerStatuses": [{"name": "express", "ready": true, "restartCount": 0,
                                              "image": "registry.example/express:express-e689.154", "imageID": ""}]},
        }));
        for r in 0..REVISIONS_PER_NODE {
            let revision = format!("f86a97986{r}");
            objects.push(json!({
                "apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {"name": format!("{name}-{revision}"), "namespace": namespace,
                             "uid": self::uid(n, i + 1, 2 + r), "resourceVersion": (version + 3 + r).to_string(),
                             "creationTimestamp": time(1),
                             "labels": {"express.dev/cluster": cluster, "express.dev/node": name,
                                        "express.dev/kind": kind_label, "express.dev/deployment-revision": revision},
                             "ownerReferences": [{"apiVersion": "express.dev/v1alpha1", "kind": kind, "name": name,
                                                  "uid": uid, "controller": true, "blockOwnerDeletion": true}]},
                "revision": r + 1,
                "data": {"expressVersion": "express-e689.154", "configChangeset": "867fc47c23",
                         "imageRepository": "registry.example/express", "podTemplate": {}},
            }));
        }
    }
    objects
}

#[tokio::test]
async fn the_caches_hold_views_not_whole_objects() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let at_start = dhat::HeapStats::get().curr_bytes;
    let objects: Vec<Value> = (0..TENANTS).flat_map(tenant).collect();
    let count = objects.len();
    let pods: Vec<Value> = objects
        .iter()
        .filter(|o| o["kind"] == "Pod")
        .cloned()
        .collect();
    let pods_whole = weigh(|| {
        pods.iter()
            .map(|p| serde_json::from_value::<Lenient<Pod>>(p.clone()).unwrap())
            .map(Arc::new)
            .collect::<Vec<_>>()
    });
    let pods_as_views = weigh(|| {
        let interner = Interner::default();
        let views: Vec<Arc<PodView>> = pods
            .iter()
            .map(|p| serde_json::from_value::<Pod>(p.clone()).unwrap())
            .map(|p| Arc::new(PodView::new(&p, Some(&interner))))
            .collect();
        (interner, views)
    });
    drop(pods);
    let nodes: Vec<Value> = objects
        .iter()
        .filter(|o| o["kind"] == "Backend" || o["kind"] == "Frontend")
        .cloned()
        .collect();
    let nodes_whole = weigh(|| {
        nodes
            .iter()
            .map(|n| serde_json::from_value::<Lenient<Frontend>>(n.clone()).unwrap())
            .map(Arc::new)
            .collect::<Vec<_>>()
    });
    let nodes_as_views = weigh(|| {
        let interner = Interner::default();
        let views: Vec<Arc<NodeView>> = nodes
            .iter()
            .map(|n| serde_json::from_value::<Frontend>(n.clone()).unwrap())
            .map(|n| Arc::new(NodeView::of(&n, Some(&interner))))
            .collect();
        (interner, views)
    });
    drop(nodes);
    let caches = Caches::replay(objects).await;
    let held = dhat::HeapStats::get().curr_bytes.saturating_sub(at_start);
    let per_tenant = held / TENANTS;

    // Everything listed is held (nothing was set aside as undecodable).
    let kinds = [
        caches.clusters.counts(),
        caches.backends.counts(),
        caches.frontends.counts(),
        caches.pods.counts(),
        caches.revisions.counts(),
    ];
    let listed: usize = kinds.iter().map(|(all, _)| all).sum();
    assert_eq!(listed, count, "{kinds:?}");
    assert!(kinds.iter().all(|(_, undecodable)| *undecodable == 0));
    assert_eq!(caches.pods.in_namespace(Some("tenant-00007")).len(), 8);

    let with_whole_pods = per_tenant + (pods_whole - pods_as_views) / TENANTS;
    let with_whole_nodes = per_tenant + (nodes_whole - nodes_as_views) / TENANTS;
    println!(
        "caches at {TENANTS} tenants: {held} B held, {per_tenant} B per tenant (ceiling {CEILING_BYTES_PER_TENANT}); interned strings: {}; pods held whole instead: {with_whole_pods} B per tenant; nodes held whole instead: {with_whole_nodes} B per tenant",
        caches.interner.len()
    );
    assert!(
        with_whole_pods > CEILING_BYTES_PER_TENANT,
        "the ceiling must catch pods held whole ({with_whole_pods} B per tenant)"
    );
    assert!(
        with_whole_nodes > CEILING_BYTES_PER_TENANT,
        "the ceiling must catch nodes held whole ({with_whole_nodes} B per tenant)"
    );
    assert!(
        per_tenant <= CEILING_BYTES_PER_TENANT,
        "the caches hold {per_tenant} B per tenant, over the ceiling of {CEILING_BYTES_PER_TENANT} B: did whole objects come back?"
    );
}
