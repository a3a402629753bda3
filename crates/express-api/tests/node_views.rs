//! A node's view reads what the code before it read of a whole Backend or Frontend, field by
//! field: the reference below is how the planner (names, uids, the revision label, the
//! rollout-id and bounce annotations, `unobserved`), triage (`managedFields` write times,
//! creation time), the operator (owner and event references) and the CLI (generation, status)
//! read the decoded custom resource before the view, kept as the oracle. Checked on the
//! repository's fixture, on a node shaped as kubesim serves one, and on generated nodes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use express_api::effective::revision_override;
use express_api::keys::{ANNOTATION_BOUNCE, ANNOTATION_ROLLOUT_ID, LABEL_DEPLOYMENT_REVISION};
use express_api::views::{Interner, NodeObject, NodeView};
use express_api::{Backend, ClusterKey, Frontend, NodeKind, NodeSpec, NodeStatus};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use proptest::prelude::*;
use serde_json::{Value, json};
use support::{opt, put, time};

/// One value per field a reader took of the decoded node.
#[derive(Debug, PartialEq)]
struct Read {
    kind: NodeKind,
    name: String,
    namespace: Option<String>,
    uid: Option<String>,
    generation: Option<i64>,
    key: Option<ClusterKey>,
    revision_label: Option<String>,
    rollout_id: Option<String>,
    bounce: Option<String>,
    spec_written: Option<Timestamp>,
    status_written: Option<Timestamp>,
    created: Option<Timestamp>,
    deleted: Option<Timestamp>,
    unobserved: bool,
    object_ref: ObjectReference,
    owner: Option<OwnerReference>,
    spec: NodeSpec,
    status: Option<NodeStatus>,
}

/// The latest timed `managedFields` entry written to the status subresource, or to anything
/// else: triage's reading before the views.
fn last_write(meta: &ObjectMeta, status: bool) -> Option<Timestamp> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|e| (e.subresource.as_deref() == Some("status")) == status)
        .filter_map(|e| e.time.as_ref().map(|t| t.0))
        .max()
}

/// How a decoded node was read before its view.
fn reference<K: Resource<DynamicType = ()>>(
    kind: NodeKind,
    node: &K,
    spec: &NodeSpec,
    status: Option<&NodeStatus>,
) -> Read {
    let meta = node.meta();
    let annotation = |key: &str| meta.annotations.as_ref()?.get(key).cloned();
    Read {
        kind,
        name: meta.name.clone().unwrap_or_default(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        generation: meta.generation,
        key: meta
            .namespace
            .as_deref()
            .map(|ns| ClusterKey::new(ns, &spec.cluster_config.cluster_name)),
        revision_label: revision_override(meta.labels.as_ref()).map(str::to_owned),
        rollout_id: annotation(ANNOTATION_ROLLOUT_ID),
        bounce: annotation(ANNOTATION_BOUNCE),
        spec_written: last_write(meta, false),
        status_written: last_write(meta, true),
        created: meta.creation_timestamp.as_ref().map(|t| t.0),
        deleted: meta.deletion_timestamp.as_ref().map(|t| t.0),
        unobserved: status.is_none()
            || status.and_then(|s| s.observed_generation) < meta.generation,
        object_ref: node.object_ref(&()),
        owner: node.controller_owner_ref(&()).map(|owner| OwnerReference {
            block_owner_deletion: Some(true),
            ..owner
        }),
        spec: spec.clone(),
        status: status.cloned(),
    }
}

/// The same fields, read through the view.
fn through_view(view: &NodeView) -> Read {
    let meta = view.meta();
    Read {
        kind: view.kind(),
        name: view.name().to_owned(),
        namespace: view.namespace().map(str::to_owned),
        uid: meta.uid.as_ref().map(ToString::to_string),
        generation: meta.generation,
        key: view.key(),
        revision_label: revision_override(meta.labels.as_deref()).map(str::to_owned),
        rollout_id: meta.annotation(ANNOTATION_ROLLOUT_ID).map(str::to_owned),
        bounce: meta.annotation(ANNOTATION_BOUNCE).map(str::to_owned),
        spec_written: meta.written(),
        status_written: meta.status_written(),
        created: meta.created(),
        deleted: meta.deleted(),
        unobserved: view.unobserved(),
        object_ref: view.object_ref(),
        owner: view.controller_owner_ref(),
        spec: view.spec().clone(),
        status: view.status().cloned(),
    }
}

/// The node decoded as the custom resource `N`: how it was read before the view, its view
/// built without and with an interner.
fn decoded<N>(node: &Value) -> (Read, NodeView, NodeView)
where
    N: NodeObject + Resource<DynamicType = ()> + serde::de::DeserializeOwned + Clone,
    NodeView: From<N>,
{
    let interner = Interner::default();
    let whole: N = serde_json::from_value(node.clone()).unwrap();
    let (_, spec, status) = whole.parts();
    let expected = reference(N::KIND, &whole, spec, status);
    let shared = NodeView::of(&whole, Some(&interner));
    let borrowed = NodeView::of(&whole, None);
    assert_eq!(
        NodeView::from(whole),
        borrowed,
        "a node given whole moves into the same view"
    );
    (expected, borrowed, shared)
}

/// A node's JSON reads alike decoded whole and through its view (decoded from the custom
/// resource, straight from the JSON, and with shared strings).
fn assert_reads_alike(node: &Value) {
    let (expected, from_object, shared) = match node["kind"].as_str() {
        Some("Backend") => decoded::<Backend>(node),
        _ => decoded::<Frontend>(node),
    };
    let from_json: NodeView = serde_json::from_value(node.clone()).unwrap();
    assert_eq!(through_view(&from_object), expected);
    assert_eq!(
        from_json, from_object,
        "decoding the JSON straight to a view"
    );
    assert_eq!(shared, from_object, "interning changes no value");
}

/// A Frontend as kubesim serves one written by Helm and reported on by the operator.
fn served_node() -> Value {
    json!({
        "apiVersion": "express.dev/v1alpha1", "kind": "Frontend",
        "metadata": {
            "name": "acme-fe1", "namespace": "tenant-acme", "uid": "7c1f0e2d-3b4a-4c5d-8e6f-9a0b1c2d3e4f", "resourceVersion": "48210",
            "generation": 3, "creationTimestamp": "2026-11-25T10:00:00Z",
            "labels": {"app.kubernetes.io/managed-by": "Helm", LABEL_DEPLOYMENT_REVISION: " f86a979861 "},
            "annotations": {"meta.helm.sh/release-name": "acme", ANNOTATION_ROLLOUT_ID: "r-7"},
            "managedFields": [
                {"manager": "helm", "operation": "Apply", "apiVersion": "express.dev/v1alpha1",
                 "time": "2026-11-25T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}},
                {"manager": "kubectl-patch", "operation": "Update", "apiVersion": "express.dev/v1alpha1",
                 "time": "2026-11-25T10:05:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}},
                {"manager": "express-operator", "operation": "Apply", "apiVersion": "express.dev/v1alpha1",
                 "time": "2026-11-25T10:06:00Z", "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": {}}}]
        },
        "spec": {"clusterConfig": {"clusterName": "acme", "tenantID": 7}, "up": true, "expressVersion": "express-e689.154",
                 "deploymentDependencies": {"prerequisites": [{"expressNode": "acme-be"}]}},
        "status": {"observedGeneration": 3, "phase": "Ready", "desiredRevision": "f86a979861",
                   "runningRevision": "f86a979861", "runningVersion": "express-e689.154", "podName": "acme-fe1",
                   "ready": true, "restarts": 0,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "PodReady", "message": "",
                                   "lastTransitionTime": "2026-11-25T10:06:00Z"}],
                   "bounce": {"requestId": "b1", "phase": "Succeeded"}}
    })
}

#[test]
fn the_fixture_nodes_read_alike() {
    let text = include_str!("../../../examples/acme/nodes.yaml");
    let mut seen = 0;
    for document in serde_yaml::Deserializer::from_str(text) {
        let value: Value = serde::Deserialize::deserialize(document).unwrap();
        if matches!(value["kind"].as_str(), Some("Backend" | "Frontend")) {
            assert_reads_alike(&value);
            seen += 1;
        }
    }
    assert!(seen >= 2, "the fixture has nodes");
}

#[test]
fn a_served_node_reads_alike_and_keeps_the_write_times_triage_reads() {
    let node = served_node();
    assert_reads_alike(&node);
    let view: NodeView = serde_json::from_value(node).unwrap();
    let at = |s: &str| Some(s.parse::<Timestamp>().unwrap());
    assert_eq!(
        view.meta.written(),
        at("2026-11-25T10:05:00Z"),
        "the latest non-status write"
    );
    assert_eq!(view.meta.status_written(), at("2026-11-25T10:06:00Z"));
    assert_eq!(
        view.meta.label("app.kubernetes.io/managed-by"),
        Some("Helm")
    );
    assert_eq!(
        view.status()
            .and_then(|s| s.bounce.as_ref())
            .map(|b| b.request_id.as_str()),
        Some("b1")
    );
}

#[test]
fn a_view_refuses_what_is_not_a_node() {
    let mut cluster = served_node();
    cluster["kind"] = json!("ExpressCluster");
    let error = serde_json::from_value::<NodeView>(cluster).unwrap_err();
    assert!(
        error.to_string().contains("not a Backend or Frontend"),
        "{error}"
    );
}

prop_compose! {
    fn a_node()(
        kind in prop::sample::select(vec!["Backend", "Frontend"]),
        namespace in opt(prop::sample::select(vec!["a", "tenant-acme"])),
        // Absent or a name: a view takes an empty name for none (the API server stores neither).
        name in opt(prop::sample::select(vec!["acme-be", "acme-fe1"])),
        uid in opt(prop_oneof![
            "[a-z0-9]{1,4}",
            "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "[0-9a-fA-F]{8}-?[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        ]),
        version in opt(prop::sample::select(vec!["12", "x1", ""])),
        generation in opt(0i64..5),
        observed in opt(opt(0i64..5)),
        labels in prop::collection::btree_map(
            prop::sample::select(vec![LABEL_DEPLOYMENT_REVISION, "express.dev/operator-ring", "other"]),
            "[a-z0-9 ]{0,5}", 0..3),
        annotations in prop::collection::btree_map(
            prop::sample::select(vec![ANNOTATION_ROLLOUT_ID, ANNOTATION_BOUNCE, "other"]),
            "[a-z0-9 ]{0,5}", 0..3),
        writes in prop::collection::vec((
            prop::sample::select(vec!["helm", "argocd-controller", "express-operator"]),
            opt(prop::sample::select(vec!["status", "scale"])),
            opt(0i64..2_000_000_000),
        ), 0..4),
        created in opt(0i64..2_000_000_000),
        deleted in opt(0i64..2_000_000_000),
        cluster in prop::sample::select(vec!["acme", "other"]),
    ) -> Value {
        let mut metadata = json!({"labels": labels, "annotations": annotations});
        put(&mut metadata, "namespace", namespace.map(Value::from));
        put(&mut metadata, "name", name.map(Value::from));
        put(&mut metadata, "uid", uid.map(Value::from));
        put(&mut metadata, "resourceVersion", version.map(Value::from));
        put(&mut metadata, "generation", generation.map(Value::from));
        put(&mut metadata, "creationTimestamp", created.map(|s| Value::from(time(s))));
        put(&mut metadata, "deletionTimestamp", deleted.map(|s| Value::from(time(s))));
        metadata["managedFields"] = writes.into_iter().map(|(manager, subresource, at)| {
            let mut entry = json!({"manager": manager, "operation": "Apply"});
            put(&mut entry, "subresource", subresource.map(Value::from));
            put(&mut entry, "time", at.map(|s| Value::from(time(s))));
            entry
        }).collect();
        let mut node = json!({
            "apiVersion": "express.dev/v1alpha1", "kind": kind, "metadata": metadata,
            "spec": {"clusterConfig": {"clusterName": cluster}},
        });
        if let Some(observed) = observed {
            node["status"] = json!({});
            put(&mut node["status"], "observedGeneration", observed.map(Value::from));
        }
        node
    }
}

proptest! {
    #[test]
    fn any_node_reads_alike_through_its_view(node in a_node()) {
        assert_reads_alike(&node);
    }
}
