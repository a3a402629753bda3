//! The views read what the code before them read of a whole object, field by field: each
//! reference below is how the planner, triage, the operator and the CLI read a `Pod` or a
//! `ControllerRevision` before the views, kept here as the oracle. Checked on the repository's
//! fixtures, on objects shaped as kubesim serves them, and on generated pods.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use express_api::NodeKind;
use express_api::history::kept_revision_of;
use express_api::keys::{
    ANNOTATION_APP_STATE, ANNOTATION_EXPRESS_VERSION, ANNOTATION_SHUTDOWN_PROTECTION,
    APP_CONTAINER, LABEL_CLUSTER, LABEL_DEPLOYMENT_REVISION, LABEL_KIND, LABEL_NODE,
};
use express_api::views::{Interner, PodView, RevisionView};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use serde_json::{Value, json};
use support::{opt, put, time};

/// How the pod was read before the views (planner `observe_pod`, triage `pod_moved`, CLI
/// `pod_row`), one value per field a view keeps.
fn reference(pod: &Pod) -> Read {
    let meta = &pod.metadata;
    let label = |key: &str| meta.labels.as_ref().and_then(|l| l.get(key)).cloned();
    let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key)).cloned();
    let spec_version = || {
        let containers = &pod.spec.as_ref()?.containers;
        let container = containers
            .iter()
            .find(|c| c.name == APP_CONTAINER)
            .or(containers.first())?;
        let image = container.image.as_deref()?;
        let (repository, tag) = image.rsplit_once(':')?;
        (!tag.contains('/') && !repository.is_empty()).then(|| tag.to_owned())
    };
    let status = pod.status.as_ref();
    Read {
        namespace: meta.namespace.clone(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone(),
        resource_version: meta
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok()),
        cluster: label(LABEL_CLUSTER),
        revision: label(LABEL_DEPLOYMENT_REVISION),
        version: annotation(ANNOTATION_EXPRESS_VERSION).or_else(spec_version),
        app_state: annotation(ANNOTATION_APP_STATE),
        shutdown_protection: annotation(ANNOTATION_SHUTDOWN_PROTECTION),
        created: meta.creation_timestamp.as_ref().map(|t| t.0),
        deleted: meta.deletion_timestamp.as_ref().map(|t| t.0),
        has_status: status.is_some(),
        phase: status.and_then(|s| s.phase.clone()),
        conditions: status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    c.type_.clone(),
                    c.status.clone(),
                    c.last_transition_time.as_ref().map(|t| t.0),
                )
            })
            .collect(),
        restarts: status
            .and_then(|s| s.container_statuses.as_ref())
            .into_iter()
            .flatten()
            .map(|c| c.restart_count)
            .sum(),
        owned_by: [NodeKind::Backend, NodeKind::Frontend]
            .into_iter()
            .flat_map(|kind| ["acme-be", "acme-fe1"].map(|name| (kind, name)))
            .flat_map(|(kind, name)| {
                [None, Some("u1"), Some("u2"), Some(UUID), Some(UPPER_UUID)]
                    .map(|uid| (kind, name, uid))
            })
            .map(|(kind, name, uid)| {
                meta.owner_references.iter().flatten().any(|r| {
                    r.controller == Some(true)
                        && r.kind == kind.as_str()
                        && r.name == name
                        && uid.is_none_or(|uid| uid == r.uid)
                })
            })
            .collect(),
    }
}

/// The same facts, read from the view.
fn through_view(view: &PodView) -> Read {
    let status = view.status.as_ref();
    Read {
        namespace: view.namespace().map(str::to_owned),
        name: view.name.to_string(),
        uid: view.uid.as_ref().map(ToString::to_string),
        resource_version: view.resource_version,
        cluster: view.cluster.as_deref().map(str::to_owned),
        revision: view.revision.as_deref().map(str::to_owned),
        version: view.version.as_deref().map(str::to_owned),
        app_state: view.app_state.as_deref().map(str::to_owned),
        shutdown_protection: view.shutdown_protection.as_deref().map(str::to_owned),
        created: view.created(),
        deleted: view.deleted(),
        has_status: status.is_some(),
        phase: status.and_then(|s| s.phase.as_deref()).map(str::to_owned),
        conditions: status
            .into_iter()
            .flat_map(|s| &s.conditions)
            .map(|c| {
                (
                    c.type_.to_string(),
                    c.status.to_string(),
                    c.last_transition(),
                )
            })
            .collect(),
        restarts: status.map_or(0, |s| s.restarts),
        owned_by: [NodeKind::Backend, NodeKind::Frontend]
            .into_iter()
            .flat_map(|kind| ["acme-be", "acme-fe1"].map(|name| (kind, name)))
            .flat_map(|(kind, name)| {
                [None, Some("u1"), Some("u2"), Some(UUID), Some(UPPER_UUID)]
                    .map(|uid| (kind, name, uid))
            })
            .map(|(kind, name, uid)| view.controlled_by(kind, name, uid))
            .collect(),
    }
}

#[derive(Debug, PartialEq)]
struct Read {
    namespace: Option<String>,
    name: String,
    uid: Option<String>,
    resource_version: Option<u64>,
    cluster: Option<String>,
    revision: Option<String>,
    version: Option<String>,
    app_state: Option<String>,
    shutdown_protection: Option<String>,
    created: Option<Timestamp>,
    deleted: Option<Timestamp>,
    has_status: bool,
    phase: Option<String>,
    conditions: Vec<(String, String, Option<Timestamp>)>,
    restarts: i32,
    owned_by: Vec<bool>,
}

fn assert_reads_alike(pod: &Pod) {
    let interner = Interner::default();
    let shared = PodView::new(pod, Some(&interner));
    let copied = PodView::from(pod);
    assert_eq!(through_view(&shared), reference(pod));
    assert_eq!(shared, copied, "interning changes no value");
}

/// A pod as kubesim serves one the operator created and the kubelet started.
fn served_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "acme-fe1", "namespace": "tenant-acme", "uid": "9b1c", "resourceVersion": "48213",
            "creationTimestamp": "2026-11-25T10:00:01Z",
            "labels": {LABEL_CLUSTER: "acme", LABEL_NODE: "acme-fe1", LABEL_KIND: "frontend",
                       LABEL_DEPLOYMENT_REVISION: "f86a979861", "express.dev/operator-ring": "default"},
            "annotations": {ANNOTATION_EXPRESS_VERSION: "express-e689.154",
                            ANNOTATION_SHUTDOWN_PROTECTION: "enabled",
                            ANNOTATION_APP_STATE: "serving"},
            "ownerReferences": [{"apiVersion": "express.dev/v1alpha1", "kind": "Frontend", "name": "acme-fe1",
                                 "uid": "u1", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "express-operator", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-11-25T10:00:01Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]
        },
        "spec": {"containers": [{"name": "express", "image": "registry.example/express:express-e689.154",
                                 "resources": {"requests": {"cpu": "100m"}}}],
                 "terminationGracePeriodSeconds": 30, "nodeName": "kubesim"},
        "status": {"phase": "Running", "podIP": "10.0.0.7", "qosClass": "Burstable",
                   "startTime": "2026-11-25T10:00:01Z",
                   "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-25T10:00:01Z"},
                                  {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-25T10:00:04Z"}],
                   "containerStatuses": [{"name": "express", "ready": true, "restartCount": 2, "image": "express", "imageID": ""}]}
    })
}

#[test]
fn the_fixture_pods_read_alike() {
    let text = include_str!("../../../examples/observed/acme-pods-previous-version.yaml");
    let mut seen = 0;
    for document in serde_yaml::Deserializer::from_str(text) {
        let value: Value = serde::Deserialize::deserialize(document).unwrap();
        if value.is_null() {
            continue;
        }
        let pod: Pod = serde_json::from_value(value).unwrap();
        assert_reads_alike(&pod);
        seen += 1;
    }
    assert!(seen >= 2, "the fixture has pods");
}

#[test]
fn a_served_pod_reads_alike_and_keeps_what_decisions_read() {
    let pod: Pod = serde_json::from_value(served_pod()).unwrap();
    assert_reads_alike(&pod);
    let view = PodView::from(&pod);
    assert_eq!(view.version.as_deref(), Some("express-e689.154"));
    assert_eq!(view.status.as_ref().map(|s| s.restarts), Some(2));
    assert!(view.controlled_by(NodeKind::Frontend, "acme-fe1", Some("u1")));
    assert!(!view.controlled_by(NodeKind::Backend, "acme-fe1", Some("u1")));
    // Without the annotation, the image's tag says what it runs.
    let mut unannotated = pod.clone();
    unannotated.metadata.annotations = None;
    assert_reads_alike(&unannotated);
    assert_eq!(
        PodView::from(&unannotated).version.as_deref(),
        Some("express-e689.154")
    );
}

#[test]
fn views_share_the_strings_they_repeat() {
    let interner = Interner::default();
    let pod: Pod = serde_json::from_value(served_pod()).unwrap();
    let a = PodView::new(&pod, Some(&interner));
    let b = PodView::new(&pod, Some(&interner));
    for (x, y) in [
        (&a.namespace, &b.namespace),
        (&a.cluster, &b.cluster),
        (&a.revision, &b.revision),
        (&a.version, &b.version),
    ] {
        assert!(Arc::ptr_eq(x.as_ref().unwrap(), y.as_ref().unwrap()));
    }
}

#[test]
fn an_interner_forgets_what_no_view_holds() {
    let interner = Interner::default();
    for n in 0..5_000 {
        let _dropped = interner.intern(&format!("tenant-{n}"));
    }
    let kept = interner.intern("kept");
    for n in 0..5_000 {
        let _dropped = interner.intern(&format!("other-{n}"));
    }
    assert!(interner.len() < 2_100, "pruned: {}", interner.len());
    assert!(Arc::ptr_eq(&kept, &interner.intern("kept")));
}

fn revision(labels: &[(&str, &str)], number: Option<i64>) -> ControllerRevision {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "acme-fe1-r1", "namespace": "tenant-acme", "resourceVersion": "77",
                     "labels": labels},
        "revision": number,
        "data": {"expressVersion": "v1", "imageRepository": "reg/express", "podTemplate": {}}
    }))
    .unwrap()
}

#[test]
fn a_revision_view_keeps_the_node_revision_as_the_labels_said() {
    let cases = [
        vec![
            (LABEL_NODE, "acme-fe1"),
            (LABEL_KIND, "frontend"),
            (LABEL_DEPLOYMENT_REVISION, "r1"),
        ],
        vec![(LABEL_NODE, "acme-fe1"), (LABEL_KIND, "frontend")],
        vec![
            (LABEL_NODE, "acme-fe1"),
            (LABEL_KIND, "Frontend"),
            (LABEL_DEPLOYMENT_REVISION, "r1"),
        ],
        vec![
            (LABEL_NODE, "acme-be"),
            (LABEL_KIND, "backend"),
            (LABEL_DEPLOYMENT_REVISION, "r2"),
        ],
        vec![],
    ];
    for labels in cases {
        let whole = revision(&labels, Some(4));
        let view = RevisionView::from(&whole);
        for kind in [NodeKind::Backend, NodeKind::Frontend] {
            for name in ["acme-fe1", "acme-be"] {
                assert_eq!(
                    view.kept_for(kind, name),
                    kept_revision_of(whole.metadata.labels.as_ref(), kind, name),
                    "{labels:?} {kind} {name}"
                );
            }
        }
        assert_eq!(view.number, whole.revision);
        assert_eq!(
            view.name(),
            whole.metadata.name.as_deref().unwrap_or_default()
        );
        assert!(view.kept().is_none());
        let with_body = RevisionView::with_body(&whole);
        assert_eq!(with_body.name(), view.name());
        assert_eq!(
            with_body.kept().map(|k| k.express_version.as_str()),
            Some("v1")
        );
    }
}

/// A uid as the API server writes one, and the same UUID as another server might.
const UUID: &str = "0b8e3c2a-5f1d-4e7a-9c3b-2d6f8a1e4b70";
const UPPER_UUID: &str = "0B8E3C2A-5F1D-4E7A-9C3B-2D6F8A1E4B70";

prop_compose! {
    fn a_pod()(
        namespace in opt(prop::sample::select(vec!["a", "tenant-acme"])),
        name in opt(prop::sample::select(vec!["acme-be", "acme-fe1", ""])),
        uid in opt(prop_oneof![
            "[a-z0-9]{1,4}",
            // As the API server issues them (kept in 16 bytes), and near misses (kept as text).
            "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "[0-9a-fA-F]{8}-?[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        ]),
        version in opt(prop::sample::select(vec!["12", "x1", ""])),
        labels in prop::collection::btree_map(
            prop::sample::select(vec![LABEL_CLUSTER, LABEL_DEPLOYMENT_REVISION, LABEL_NODE, "other"]),
            "[a-z0-9]{0,5}", 0..4),
        annotations in prop::collection::btree_map(
            prop::sample::select(vec![ANNOTATION_EXPRESS_VERSION, ANNOTATION_APP_STATE,
                                      ANNOTATION_SHUTDOWN_PROTECTION, "other"]),
            "[a-z0-9.]{0,5}", 0..4),
        owners in prop::collection::vec((
            prop::sample::select(vec!["Backend", "Frontend", "ReplicaSet"]),
            prop::sample::select(vec!["acme-be", "acme-fe1"]),
            prop::sample::select(vec!["u1", "u2", UUID, UPPER_UUID]),
            opt(any::<bool>()),
        ), 0..3),
        created in opt(0i64..2_000_000_000),
        deleted in opt(0i64..2_000_000_000),
        images in opt(prop::collection::vec((
            prop::sample::select(vec!["express", "sidecar", ""]),
            opt(prop::sample::select(vec!["reg/express:v1", "reg:5000/express", ":v2", "express", "r/e:t/x"])),
        ), 0..3)),
        status in opt((
            opt(prop::sample::select(vec!["Pending", "Running", "Succeeded", "Failed", "Weird"])),
            prop::collection::vec((
                prop::sample::select(vec!["Ready", "PodScheduled", "ContainersReady"]),
                prop::sample::select(vec!["True", "False", "Unknown"]),
                opt(0i64..2_000_000_000),
            ), 0..4),
            prop::collection::vec(0i32..50, 0..3),
        )),
    ) -> Pod {
        let mut metadata = json!({"labels": labels, "annotations": annotations});
        put(&mut metadata, "namespace", namespace.map(Value::from));
        put(&mut metadata, "name", name.map(Value::from));
        put(&mut metadata, "uid", uid.map(Value::from));
        put(&mut metadata, "resourceVersion", version.map(Value::from));
        put(&mut metadata, "creationTimestamp", created.map(|s| Value::from(time(s))));
        put(&mut metadata, "deletionTimestamp", deleted.map(|s| Value::from(time(s))));
        metadata["ownerReferences"] = owners.into_iter().map(|(kind, name, uid, controller)| json!({
            "apiVersion": "express.dev/v1alpha1", "kind": kind, "name": name, "uid": uid, "controller": controller,
        })).collect();
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata});
        if let Some(images) = images {
            pod["spec"] = json!({"containers": images.into_iter().map(|(name, image)| {
                let mut c = json!({"name": name});
                if let Some(image) = image { c["image"] = json!(image); }
                c
            }).collect::<Vec<_>>()});
        }
        if let Some((phase, conditions, restarts)) = status {
            let mut s = json!({
                "conditions": conditions.into_iter().map(|(t, st, at)| {
                    let mut c = json!({"type": t, "status": st});
                    if let Some(at) = at { c["lastTransitionTime"] = json!(time(at)); }
                    c
                }).collect::<Vec<_>>(),
                "containerStatuses": restarts.into_iter().enumerate().map(|(i, r)| json!({
                    "name": format!("c{i}"), "ready": true, "restartCount": r, "image": "", "imageID": ""
                })).collect::<Vec<_>>(),
            });
            put(&mut s, "phase", phase.map(Value::from));
            pod["status"] = s;
        }
        serde_json::from_value(pod).unwrap()
    }
}

proptest! {
    #[test]
    fn any_pod_reads_alike_through_its_view(pod in a_pod()) {
        assert_reads_alike(&pod);
    }
}
