//! Decoding one object at a time, so that one object no build of ours can read never stops a
//! watch. The API server never re-validates stored objects: one written under a looser CRD, or
//! a status written by a newer operator build, can hold what our types refuse. A list or watch
//! of [`Lenient<K>`] decodes every item it can into `K` and keeps the others aside as
//! [`Undecodable`], naming the field at fault, instead of failing the whole list (which, in a
//! reflector, is every tenant of the Kubernetes cluster).

use std::any::TypeId;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::keys::{ANNOTATION_EXPRESS_VERSION, LABEL_CLUSTER};

mod lean;

/// An object as a list or watch delivered it: decoded, or kept aside with why it was not.
///
/// It keeps what decisions read, for a fleet's worth of cached objects: `managedFields` keep
/// each entry's manager, operation, subresource and time (triage reads when a spec or status
/// last moved) but not its `fieldsV1`, the bulk of them, and pods and ControllerRevisions keep
/// none; the
/// `kubectl.kubernetes.io/last-applied-configuration` annotation (a second copy of the whole
/// object) is dropped; a pod's spec keeps only its containers' names and images, and only
/// when the pod has no `express.dev/express-version` annotation (the image's tag is then the
/// running version; the status and metadata say the rest): the spec's `Container` alone is
/// 2.3 KB before a string, for two strings read; a pod's status keeps only its phase, its
/// conditions and its containers' restart counts; and the metadata is held once, inside the
/// decoded object. Objects are decoded straight from their text (a pod parsing only the fields
/// it keeps); only one that does not decode is read as a JSON tree, to name the field at fault.
#[derive(Clone, Debug)]
pub struct Lenient<K> {
    decoded: Result<Arc<K>, (ObjectMeta, Arc<Undecodable>)>,
}

/// The annotation `kubectl apply` keeps a copy of the whole object in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops from a raw object of `kind` what no decision reads (see [`Lenient`]).
pub fn slim(kind: &str, raw: &mut Value) {
    if kind == "Pod" {
        slim_pod(raw);
    }
    let Some(metadata) = raw.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    // Triage reads when an ExpressCluster's or a node's spec or status last moved; nothing
    // reads who wrote a pod or a ControllerRevision, the most numerous objects cached.
    if matches!(kind, "Pod" | "ControllerRevision") {
        metadata.remove("managedFields");
    }
    if let Some(entries) = metadata
        .get_mut("managedFields")
        .and_then(Value::as_array_mut)
    {
        *entries = latest_writes(entries);
    }
    if let Some(annotations) = metadata
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED);
    }
}

/// What triage reads of `managedFields` (when the spec and when the status last moved): the
/// latest timed entry written to the status subresource and the latest written to anything
/// else, each as its manager, operation, subresource and time. A tenant's objects gather an
/// entry per writer (Helm, Argo CD, kubectl, the operator, each bounce or pause by hand), each
/// a few hundred bytes decoded.
fn latest_writes(entries: &[Value]) -> Vec<Value> {
    let mut latest: [Option<(k8s_openapi::jiff::Timestamp, &Value)>; 2] = [None, None];
    for entry in entries {
        let Some(time) = entry
            .get("time")
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        else {
            continue;
        };
        let slot =
            &mut latest[usize::from(entry.get("subresource") == Some(&Value::from("status")))];
        if slot.as_ref().is_none_or(|(kept, _)| *kept < time) {
            *slot = Some((time, entry));
        }
    }
    latest
        .into_iter()
        .flatten()
        .map(|(_, entry)| {
            let mut kept = serde_json::Map::new();
            for field in ["manager", "operation", "subresource", "time"] {
                if let Some(value) = entry.get(field) {
                    kept.insert(field.to_owned(), value.clone());
                }
            }
            Value::Object(kept)
        })
        .collect()
}

/// A pod reduced to what decisions read: no spec when its version annotation says what it runs,
/// else its containers' names and images; no addresses or QoS class in its status. A spec that
/// is not an object, or containers that are not a list, are left as they are, to be reported
/// undecodable as sent.
fn slim_pod(raw: &mut Value) {
    if let Some(status) = raw.get_mut("status").and_then(Value::as_object_mut) {
        for unread in ["podIP", "podIPs", "hostIP", "hostIPs", "qosClass"] {
            status.remove(unread);
        }
    }
    let annotated = raw
        .pointer(&format!(
            "/metadata/annotations/{}",
            ANNOTATION_EXPRESS_VERSION.replace('/', "~1")
        ))
        .is_some_and(Value::is_string);
    let Some(raw) = raw.as_object_mut() else {
        return;
    };
    if annotated && raw.get("spec").is_some_and(Value::is_object) {
        raw.remove("spec");
        return;
    }
    let Some(spec) = raw.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(containers) = spec.get("containers").and_then(Value::as_array) else {
        return;
    };
    let kept: Vec<Value> = containers
        .iter()
        .map(|container| {
            let mut slim = serde_json::Map::new();
            for field in ["name", "image"] {
                if let Some(value) = container.get(field) {
                    slim.insert(field.to_owned(), value.clone());
                }
            }
            Value::Object(slim)
        })
        .collect();
    spec.clear();
    spec.insert("containers".to_owned(), Value::Array(kept));
}

/// `K` decoded from its text, without what [`slim`] drops (see [`Slim`]).
fn decode_slim<K>(text: &str) -> serde_json::Result<K>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + 'static,
{
    serde_json::from_str::<Slim<K>>(text).map(|slim| slim.0)
}

/// An object decoded as [`Lenient`] decodes one that decodes, failing where `Lenient` keeps an
/// object aside. A pod goes through [`lean::PodFields`], an object of this API group through
/// [`lean::OurKind`], which parse only the fields kept into objects; any other kind is decoded
/// whole, then slimmed. A page of a list read as `Slim` objects is read in one pass over its
/// text; only a page holding an object that fails needs reading again object by object.
#[derive(Clone, Debug)]
pub struct Slim<K>(pub K);

impl<'de, K> Deserialize<'de> for Slim<K>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + 'static,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if TypeId::of::<K>() == TypeId::of::<Pod>() {
            let pod = Pod::from(lean::PodFields::deserialize(deserializer)?);
            return lean::same_type(pod).map(Slim);
        }
        let deserializer = match lean::our_kind::<K, D>(deserializer) {
            Ok(object) => return object.map(Slim),
            Err(not_ours) => not_ours,
        };
        let mut object = K::deserialize(deserializer)?;
        slim_decoded(&mut object);
        Ok(Slim(object))
    }
}

/// [`slim`] on an object already decoded: the same fields dropped, as the same types hold them.
/// (A pod never comes here: [`lean::PodFields`] keeps only what it keeps.)
fn slim_decoded<K: Resource<DynamicType = ()> + 'static>(object: &mut K) {
    let whole_history_unread = K::kind(&()) == "ControllerRevision";
    let metadata = object.meta_mut();
    if whole_history_unread {
        metadata.managed_fields = None;
    } else if let Some(entries) = &mut metadata.managed_fields {
        *entries = latest_decoded_writes(entries);
    }
    if let Some(annotations) = &mut metadata.annotations {
        annotations.remove(LAST_APPLIED);
    }
}

/// [`latest_writes`] over decoded entries.
fn latest_decoded_writes(entries: &[ManagedFieldsEntry]) -> Vec<ManagedFieldsEntry> {
    let mut latest: [Option<&ManagedFieldsEntry>; 2] = [None, None];
    for entry in entries {
        let Some(time) = &entry.time else {
            continue;
        };
        let slot = &mut latest[usize::from(entry.subresource.as_deref() == Some("status"))];
        if slot.is_none_or(|kept| kept.time.as_ref().is_some_and(|kept| kept.0 < time.0)) {
            *slot = Some(entry);
        }
    }
    latest
        .into_iter()
        .flatten()
        .map(|entry| ManagedFieldsEntry {
            manager: entry.manager.clone(),
            operation: entry.operation.clone(),
            subresource: entry.subresource.clone(),
            time: entry.time.clone(),
            ..ManagedFieldsEntry::default()
        })
        .collect()
}

/// An object this build cannot decode, and what it could still read of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Undecodable {
    /// The object's kind (`Frontend`, `Pod`, ...).
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: Option<String>,
    /// The Express cluster it belongs to, when that can be read: its `express.dev/cluster`
    /// label, a node's `spec.clusterConfig.clusterName`, an ExpressCluster's `spec.clusterName`
    /// (or name).
    pub cluster: Option<String>,
    /// The path of the field at fault, e.g. `spec.up` (empty when the object itself is wrong).
    pub field: String,
    /// What is wrong with it, in serde's words.
    pub error: String,
}

impl fmt::Display for Undecodable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.name)?;
        if self.field.is_empty() {
            write!(f, ": {}", self.error)
        } else {
            write!(f, ": field {}: {}", self.field, self.error)
        }
    }
}

impl<K> Lenient<K> {
    /// The object, if it could be decoded.
    pub fn decoded(&self) -> Option<&Arc<K>> {
        self.decoded.as_ref().ok()
    }

    /// The decoded object, to change before it is shared (copied if it already is).
    pub fn decoded_mut(&mut self) -> Option<&mut K>
    where
        K: Clone,
    {
        self.decoded.as_mut().ok().map(Arc::make_mut)
    }

    /// Why the object could not be decoded, if it could not.
    pub fn undecodable(&self) -> Option<&Arc<Undecodable>> {
        self.decoded.as_ref().err().map(|(_, why)| why)
    }

    /// The object, or why it could not be decoded, without a copy.
    pub fn into_decoded(self) -> Result<Arc<K>, Arc<Undecodable>> {
        self.decoded.map_err(|(_, why)| why)
    }
}

impl<K: Resource> Lenient<K> {
    /// A decoded object.
    pub fn new(object: K) -> Lenient<K> {
        Lenient {
            decoded: Ok(Arc::new(object)),
        }
    }
}

impl<K> Resource for Lenient<K>
where
    K: Resource<DynamicType = ()> + Clone,
{
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }

    fn api_version(dt: &()) -> Cow<'_, str> {
        K::api_version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        match &self.decoded {
            Ok(object) => object.meta(),
            Err((metadata, _)) => metadata,
        }
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match &mut self.decoded {
            Ok(object) => Arc::make_mut(object).meta_mut(),
            Err((metadata, _)) => metadata,
        }
    }
}

/// The Express cluster an object names, read from its raw form.
fn cluster_of(kind: &str, metadata: &ObjectMeta, raw: &Value) -> Option<String> {
    let text = |pointer: &str| {
        raw.pointer(pointer)
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .map(str::to_owned)
    };
    metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(LABEL_CLUSTER).cloned())
        .or_else(|| text("/spec/clusterConfig/clusterName"))
        .or_else(|| text("/spec/clusterName"))
        .or_else(|| {
            (kind == "ExpressCluster")
                .then(|| metadata.name.clone())
                .flatten()
        })
}

impl<'de, K> Deserialize<'de> for Lenient<K>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + 'static,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The object's text, kept aside (one copy) and decoded straight into `K`: building a
        // `Value` tree first costs about as much again as the decoding, for every object of a
        // list or watch. Only an object that does not decode takes the slow path below, which
        // slims the tree first (so what slimming drops cannot fail it) and names the field at
        // fault.
        let text = Box::<RawValue>::deserialize(deserializer)?;
        if let Ok(object) = decode_slim::<K>(text.get()) {
            return Ok(Lenient {
                decoded: Ok(Arc::new(object)),
            });
        }
        let mut raw: Value = serde_json::from_str(text.get()).map_err(serde::de::Error::custom)?;
        slim(&K::kind(&()), &mut raw);
        // The metadata the API server wrote is always readable; without it the object cannot
        // even be named, and the list fails as it would have.
        let metadata: ObjectMeta = match raw.get("metadata") {
            Some(metadata) => {
                ObjectMeta::deserialize(metadata).map_err(serde::de::Error::custom)?
            }
            None => return Err(serde::de::Error::missing_field("metadata")),
        };
        let decoded = match serde_path_to_error::deserialize::<_, K>(&raw) {
            Ok(object) => Ok(Arc::new(object)),
            Err(err) => {
                let kind = K::kind(&()).into_owned();
                let why = Arc::new(Undecodable {
                    cluster: cluster_of(&kind, &metadata, &raw),
                    namespace: metadata.namespace.clone(),
                    name: metadata.name.clone().unwrap_or_default(),
                    uid: metadata.uid.clone(),
                    field: match err.path().to_string() {
                        path if path == "." => String::new(),
                        path => path,
                    },
                    error: err.into_inner().to_string(),
                    kind,
                });
                Err((metadata, why))
            }
        };
        Ok(Lenient { decoded })
    }
}

/// Reads an optional status value, taking one this build does not know (a phase, state or
/// change record a newer build wrote) as absent instead of failing the object. Every status
/// field written by the operator that a newer build may extend is read through it.
pub fn or_absent<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let value = Option::<Value>::deserialize(deserializer)?;
    Ok(value.and_then(|v| serde_json::from_value(v).ok()))
}

/// Reads `status.operator`, taking one this build cannot decode as owned by an unknown ring
/// (an empty ring name), never as absent: absent means "the default ring's", and reading a
/// newer build's ownership as that would let two operators act on one tenant.
pub fn owner_or_unreadable<'de, D>(
    deserializer: D,
) -> Result<Option<crate::OperatorStatus>, D::Error>
where
    D: Deserializer<'de>,
{
    let value = Option::<Value>::deserialize(deserializer)?;
    Ok(value
        .map(|v| serde_json::from_value(v).unwrap_or_else(|_| crate::OperatorStatus::default())))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{ExpressCluster, Frontend};
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn frontend(spec: Value) -> Value {
        json!({
            "apiVersion": "express.dev/v1alpha1", "kind": "Frontend",
            "metadata": {"name": "acme-fe2", "namespace": "tenant", "uid": "u2"},
            "spec": spec,
        })
    }

    #[test]
    fn what_no_decision_reads_is_not_kept() {
        let mut raw = frontend(json!({"clusterConfig": {"clusterName": "acme"}}));
        raw["metadata"]["annotations"] =
            json!({LAST_APPLIED: "{...the whole object...}", "team": "a"});
        raw["metadata"]["managedFields"] = json!([
            {"manager": "helm", "operation": "Apply", "time": "2026-11-24T09:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}},
            {"manager": "kubectl", "operation": "Apply", "time": "2026-11-24T10:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:clusterConfig": {}}}},
            {"manager": "express-operator", "operation": "Apply", "time": "2026-11-24T10:00:05Z",
             "subresource": "status", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}},
            {"manager": "express-operator", "operation": "Apply", "time": "2026-11-24T09:30:00Z",
             "subresource": "status", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}},
            {"manager": "untimed", "operation": "Update"}]);
        for lenient in [
            serde_json::from_value::<Lenient<Frontend>>(raw.clone()).unwrap(),
            // Undecodable objects keep their (slimmed) metadata too.
            serde_json::from_value::<Lenient<Frontend>>({
                let mut bad = raw.clone();
                bad["spec"]["up"] = json!("yes");
                bad
            })
            .unwrap(),
        ] {
            let meta = lenient.meta();
            let annotations = meta.annotations.as_ref().unwrap();
            assert!(!annotations.contains_key(LAST_APPLIED));
            assert_eq!(annotations.get("team").map(String::as_str), Some("a"));
            // The latest write to the spec and the latest to the status, nothing else.
            let entries = meta.managed_fields.as_ref().unwrap();
            let kept: Vec<(Option<&str>, Option<&str>, String)> = entries
                .iter()
                .map(|e| {
                    assert!(e.fields_v1.is_none() && e.api_version.is_none());
                    (
                        e.manager.as_deref(),
                        e.subresource.as_deref(),
                        e.time.as_ref().map(|t| t.0.to_string()).unwrap_or_default(),
                    )
                })
                .collect();
            assert_eq!(
                kept,
                [
                    (Some("kubectl"), None, "2026-11-24T10:00:00Z".to_owned()),
                    (
                        Some("express-operator"),
                        Some("status"),
                        "2026-11-24T10:00:05Z".to_owned()
                    ),
                ]
            );
        }
        let decoded = serde_json::from_value::<Lenient<Frontend>>(raw).unwrap();
        assert!(
            std::ptr::eq(decoded.meta(), decoded.decoded().unwrap().meta()),
            "one copy of the metadata"
        );
    }

    #[test]
    fn a_cached_pod_keeps_its_containers_names_and_images_and_the_status_its_view_reads() {
        let raw = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "acme-fe1", "namespace": "t", "labels": {LABEL_CLUSTER: "acme"}},
            "spec": {
                "containers": [{"name": "express", "image": "registry/express:v1",
                                "env": [{"name": "A", "value": "b"}], "resources": {"limits": {"cpu": "1"}}}],
                "volumes": [{"name": "data", "emptyDir": {}}],
                "terminationGracePeriodSeconds": 30},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        });
        let pod = serde_json::from_value::<Lenient<Pod>>(raw).unwrap();
        let pod = pod.decoded().unwrap();
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.containers.len(), 1);
        assert_eq!(spec.containers[0].name, "express");
        assert_eq!(
            spec.containers[0].image.as_deref(),
            Some("registry/express:v1")
        );
        assert!(spec.containers[0].env.is_none() && spec.containers[0].resources.is_none());
        assert!(spec.volumes.is_none() && spec.termination_grace_period_seconds.is_none());
        assert_eq!(
            pod.status.as_ref().unwrap().phase.as_deref(),
            Some("Running")
        );
        // A pod whose annotation says its version keeps no spec, and no addresses.
        let raw = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "acme-fe1", "namespace": "t",
                         "annotations": {ANNOTATION_EXPRESS_VERSION: "v1"},
                         "managedFields": [{"manager": "express-operator", "operation": "Update",
                                            "time": "2026-11-24T10:00:00Z"}]},
            "spec": {"containers": [{"name": "express", "image": "registry/express:v1"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.9", "hostIP": "10.0.0.1",
                       "qosClass": "BestEffort",
                       "containerStatuses": [{"name": "express", "image": "registry/express:v1",
                                              "imageID": "", "ready": true, "restartCount": 2}]}
        });
        let pod = serde_json::from_value::<Lenient<Pod>>(raw).unwrap();
        let pod = pod.decoded().unwrap();
        assert!(pod.spec.is_none());
        assert!(pod.metadata.managed_fields.is_none());
        let status = pod.status.as_ref().unwrap();
        assert!(status.pod_ip.is_none() && status.host_ip.is_none() && status.qos_class.is_none());
        assert_eq!(
            status.container_statuses.as_ref().unwrap()[0].restart_count,
            2
        );
        // Other kinds keep their spec whole.
        let frontend = serde_json::from_value::<Lenient<Frontend>>(frontend(
            json!({"clusterConfig": {"clusterName": "acme"}, "podTemplate": {"spec": {"containers": []}}}),
        ))
        .unwrap();
        assert!(frontend.decoded().unwrap().spec.0.pod_template.is_some());
    }

    #[test]
    fn a_list_with_one_bad_item_decodes_every_other_item() {
        let list = json!([
            frontend(json!({"clusterConfig": {"clusterName": "acme"}})),
            frontend(json!({"clusterConfig": {"clusterName": "acme"}, "up": "yes"})),
        ]);
        // Read as `Slim` objects in one pass, the page fails (and is then read again object by
        // object); the good item alone reads as `Slim`, and the same as `Lenient` reads it.
        let text = list.to_string();
        assert!(serde_json::from_str::<Vec<Slim<Frontend>>>(&text).is_err());
        let good = serde_json::to_string(&list[0]).unwrap();
        let slim = serde_json::from_str::<Slim<Frontend>>(&good).unwrap().0;
        let lenient = serde_json::from_str::<Lenient<Frontend>>(&good).unwrap();
        assert_eq!(
            serde_json::to_value(&slim).unwrap(),
            serde_json::to_value(&**lenient.decoded().unwrap()).unwrap()
        );
        let items: Vec<Lenient<Frontend>> = serde_json::from_str(&text).unwrap();
        assert!(items[0].decoded().is_some());
        let bad = items[1].undecodable().unwrap();
        assert_eq!(
            (
                bad.kind.as_str(),
                bad.name.as_str(),
                bad.namespace.as_deref(),
                bad.cluster.as_deref(),
                bad.field.as_str()
            ),
            (
                "Frontend",
                "acme-fe2",
                Some("tenant"),
                Some("acme"),
                "spec.up"
            )
        );
        assert!(bad.error.contains("expected a boolean"), "{}", bad.error);
        assert_eq!(items[1].meta().uid.as_deref(), Some("u2"));
        assert!(
            bad.to_string()
                .starts_with("Frontend acme-fe2: field spec.up: ")
        );
    }

    #[test]
    fn a_pod_names_its_cluster_by_label_and_an_object_without_metadata_still_fails() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "acme-fe1", "namespace": "tenant",
                         "labels": {"express.dev/cluster": "acme"}},
            "spec": {"containers": "not a list"},
        });
        let pod: Lenient<Pod> = serde_json::from_value(pod).unwrap();
        let bad = pod.undecodable().unwrap();
        assert_eq!(bad.cluster.as_deref(), Some("acme"));
        assert_eq!(bad.field, "spec.containers");
        assert!(serde_json::from_value::<Lenient<Pod>>(json!({"kind": "Pod"})).is_err());
    }

    /// An object decoded straight from its text, and the same object's slimmed tree decoded
    /// (the slow path), as `read` reads them.
    fn fast_and_slow<K, R>(raw: &Value, read: impl Fn(&K) -> R) -> (R, R)
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + 'static,
    {
        let text = serde_json::to_string(raw).unwrap();
        // The fast path itself reads it (Lenient would hide a fall back to the slow one).
        let straight = serde_json::from_str::<Slim<K>>(&text);
        assert!(straight.is_ok(), "{:?}", straight.err());
        let fast = serde_json::from_str::<Lenient<K>>(&text).unwrap();
        let mut slimmed = raw.clone();
        slim(&K::kind(&()), &mut slimmed);
        let slow: K = serde_json::from_value(slimmed).unwrap();
        (read(fast.decoded().unwrap()), read(&slow))
    }

    #[test]
    fn decoding_straight_from_text_reads_what_the_slimmed_tree_reads() {
        let managed = json!([
            {"manager": "helm", "operation": "Apply", "time": "2026-11-24T09:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}},
            {"manager": "kubectl", "operation": "Apply", "time": "2026-11-24T10:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}},
            {"manager": "express-operator", "operation": "Apply", "time": "2026-11-24T10:00:05Z",
             "subresource": "status", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}},
            {"manager": "untimed", "operation": "Update"}]);
        let mut frontend = frontend(json!({"clusterConfig": {"clusterName": "acme"}}));
        frontend["metadata"]["managedFields"] = managed.clone();
        frontend["metadata"]["annotations"] = json!({LAST_APPLIED: "{}", "team": "a"});
        let (fast, slow) =
            fast_and_slow::<Frontend, _>(&frontend, |f| serde_json::to_value(f).unwrap());
        assert_eq!(fast, slow);
        // With a status, and a top-level field this build does not know (ignored, as the
        // derived type ignores it).
        frontend["status"] = json!({"phase": "Ready", "ready": true, "restarts": 1,
                                    "runningRevision": "abc", "futureField": 3,
                                    "change": {"kind": "SomethingNew"}});
        frontend["extra"] = json!({"anything": [1, 2]});
        let (fast, slow) =
            fast_and_slow::<Frontend, _>(&frontend, |f| serde_json::to_value(f).unwrap());
        assert_eq!(fast, slow);
        assert_eq!(fast["status"]["runningRevision"], "abc");
        let cluster = json!({
            "apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
            "metadata": {"name": "acme", "namespace": "t", "managedFields": managed,
                         "generation": 4},
            "spec": {"version": "v2"},
            "status": {"observedGeneration": 4, "phase": "Progressing"}
        });
        let (fast, slow) =
            fast_and_slow::<ExpressCluster, _>(&cluster, |c| serde_json::to_value(c).unwrap());
        assert_eq!(fast, slow);
        assert_eq!(fast["metadata"]["generation"], 4);
        let pod = |annotations: Value| {
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "acme-fe1", "namespace": "t", "annotations": annotations,
                             "managedFields": managed},
                "spec": {"containers": [{"name": "express", "image": "registry/express:v1",
                                         "env": [{"name": "A", "value": "b"}]}],
                         "volumes": [{"name": "data", "emptyDir": {}}]},
                "status": {"phase": "Running", "podIP": "10.0.0.9", "qosClass": "BestEffort",
                           "conditions": [{"type": "Ready", "status": "True"}],
                           "containerStatuses": [{"name": "express", "image": "e:v1",
                                                  "imageID": "", "ready": true,
                                                  "restartCount": 2}]}
            })
        };
        // A pod keeps less than its slimmed tree (only what a pod's view reads), and reads the
        // same.
        for annotations in [
            json!({LAST_APPLIED: "{}"}),
            json!({ANNOTATION_EXPRESS_VERSION: "v1"}),
        ] {
            let (fast, slow) =
                fast_and_slow::<Pod, _>(&pod(annotations), |p| crate::views::PodView::from(p));
            assert_eq!(fast, slow);
            assert_eq!(fast.status.as_ref().map(|s| s.restarts), Some(2));
        }
    }
}
