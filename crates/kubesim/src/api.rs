//! Verb semantics, independent of HTTP: create, get, list, update, patch and delete on the
//! store, with resourceVersion conflicts, generation only on spec change, status subresource
//! isolation, finalizers and deletionTimestamp, graceful pod deletion, dryRun, and CRDs that
//! become served when created.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::clock;
use crate::error::ApiError;
use crate::events;
use crate::patch;
use crate::registry::{Registry, ResourceType, established_crd_status};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{EventType, Object, Store, Stored};

pub const CRD_KEY: &str = "apiextensions.k8s.io/customresourcedefinitions";
pub const NAMESPACE_KEY: &str = "/namespaces";
pub const POD_KEY: &str = "/pods";

/// Whether this request only pretends to write.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub force: bool,
    pub field_validation: FieldValidation,
}

/// What a write does with fields a custom resource's schema does not declare (`fieldValidation`).
/// They are pruned in every case; this only decides whether the client hears of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Silently dropped.
    Ignore,
    /// Dropped with a `Warning` header each: the API server's default.
    #[default]
    Warn,
    /// The write is refused (400), as kubectl asks by default.
    Strict,
}

#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    pub dry_run: bool,
    pub grace_period_seconds: Option<i64>,
    pub propagation: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    StrategicMerge,
    Apply,
}

/// A list response whose items are shared with the store (no copies until serialized).
pub struct List {
    pub kind: String,
    pub view: View,
    pub metadata: Value,
    pub items: Vec<Stored>,
}

impl List {
    /// The list as a JSON document, written straight from the stored objects.
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(64 + self.items.len() * 2048);
        out.push_str("{\"kind\":");
        out.push_str(&Value::String(self.kind.clone()).to_string());
        out.push_str(",\"apiVersion\":");
        out.push_str(&Value::String(self.view.api_version.clone()).to_string());
        out.push_str(",\"metadata\":");
        out.push_str(&self.metadata.to_string());
        out.push_str(",\"items\":[");
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&self.view.text(item));
        }
        out.push_str("]}");
        out
    }

    /// The items parsed, as served.
    pub fn values(&self) -> Vec<Value> {
        self.items
            .iter()
            .map(|item| self.view.value(&item.value()))
            .collect()
    }
}

/// How stored objects are served through one resource: all versions of a resource share
/// storage, so usually only the apiVersion is rewritten (parsing only then, like a CRD with
/// conversion strategy None); `events.k8s.io` events also rename fields ([`crate::events`]).
#[derive(Clone, Debug)]
pub struct View {
    pub api_version: String,
    events: bool,
}

impl View {
    pub fn of(rt: &ResourceType) -> View {
        View {
            api_version: rt.api_version(),
            events: crate::events::is_events_view(rt),
        }
    }

    /// A stored object's JSON text as served.
    pub fn text<'a>(&self, item: &'a Stored) -> std::borrow::Cow<'a, str> {
        if !self.events && item.index.api_version == self.api_version {
            return std::borrow::Cow::Borrowed(&item.json);
        }
        std::borrow::Cow::Owned(self.value(&item.value()).to_string())
    }

    /// A stored object as served.
    pub fn value(&self, stored: &Value) -> Value {
        if self.events {
            return crate::events::to_events_view(stored);
        }
        let mut value = stored.clone();
        if value["apiVersion"].as_str() != Some(self.api_version.as_str()) {
            value["apiVersion"] = Value::String(self.api_version.clone());
        }
        value
    }

    /// Whether a stored object passes field and label selectors, judged on what is served
    /// (only the events view renames fields, so only it converts before matching).
    pub fn selected(&self, labels: &LabelSelector, fields: &FieldSelector, item: &Stored) -> bool {
        if !labels.matches_stored(item) {
            return false;
        }
        if fields.is_empty() {
            return true;
        }
        let stored = item.value();
        if self.events {
            fields.matches(&crate::events::to_events_view(&stored))
        } else {
            fields.matches(&stored)
        }
    }
}

/// The API server's state: what is served and what is stored.
pub struct Cluster {
    pub registry: Registry,
    pub store: Store,
    /// Default pod termination time when a pod does not say otherwise (seconds).
    pub default_pod_termination_seconds: f64,
    /// `Warning` headers for the response to the write in progress (the server takes them).
    pub warnings: Vec<String>,
}

pub fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or("")
}

fn meta_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    match object.get_mut("metadata") {
        Some(Value::Object(map)) => map,
        // Just made sure it is an object.
        _ => unreachable!("metadata is an object"),
    }
}

fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn random_suffix(len: usize) -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..len)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// The uid an incoming object names, when it is not the stored object's.
fn other_uid<'a>(incoming: &'a Value, current: &Value) -> Option<&'a str> {
    incoming["metadata"]["uid"]
        .as_str()
        .filter(|uid| !uid.is_empty() && Some(*uid) != current["metadata"]["uid"].as_str())
}

pub fn new_uid() -> String {
    use rand::Rng;
    let bytes: [u8; 16] = rand::rng().random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Everything that makes up the "spec" for generation purposes: the object without metadata
/// and (when it has a status subresource) without status.
fn generation_relevant(rt: &ResourceType, object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(map) = copy.as_object_mut() {
        map.remove("metadata");
        map.remove("apiVersion");
        map.remove("kind");
        if rt.status_subresource {
            map.remove("status");
        }
    }
    copy
}

/// Compares two versions of an object ignoring what every write changes anyway.
fn same_content(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut copy = v.clone();
        if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            meta.remove("managedFields");
        }
        copy
    };
    strip(a) == strip(b)
}

impl Cluster {
    pub fn new(default_pod_termination_seconds: f64, history_limit: usize) -> Self {
        let mut cluster = Cluster {
            registry: Registry::default(),
            store: Store::new(history_limit, 65_536),
            default_pod_termination_seconds,
            warnings: Vec::new(),
        };
        for namespace in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let object = json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": namespace, "uid": new_uid(), "creationTimestamp": clock::now(),
                             "labels": {"kubernetes.io/metadata.name": namespace}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
            cluster
                .store
                .put(NAMESPACE_KEY, "", namespace, object, EventType::Added);
        }
        cluster
    }

    fn scope<'a>(&self, rt: &ResourceType, namespace: &'a str) -> &'a str {
        if rt.namespaced { namespace } else { "" }
    }

    /// The object as served under `rt` (see [`View`]).
    fn served(&self, rt: &ResourceType, object: &Object) -> Object {
        let view = View::of(rt);
        if !view.events && object["apiVersion"].as_str() == Some(view.api_version.as_str()) {
            return object.clone();
        }
        Arc::new(view.value(object))
    }

    pub fn get(&self, rt: &ResourceType, namespace: &str, name: &str) -> Result<Object, ApiError> {
        self.store
            .get(&rt.storage_key(), self.scope(rt, namespace), name)
            .map(|o| self.served(rt, &o))
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))
    }

    /// A list response; `namespace` None lists across namespaces.
    pub fn list(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<List, ApiError> {
        let after = match &options.continue_token {
            Some(token) => Some(decode_continue(token)?),
            None => None,
        };
        let namespace = if rt.namespaced { namespace } else { None };
        let mut items = Vec::new();
        let mut last_key = None;
        let mut remaining = 0usize;
        let key_of_resource = rt.storage_key();
        let objects: Box<dyn Iterator<Item = (&(String, String), &Stored)>> = match &after {
            Some(after) => Box::new(self.store.list_after(&key_of_resource, namespace, after)),
            None => Box::new(self.store.list(&key_of_resource, namespace)),
        };
        let view = View::of(rt);
        for (key, object) in objects {
            if !view.selected(&options.labels, &options.fields, object) {
                continue;
            }
            if options.limit.is_some_and(|limit| items.len() >= limit) {
                // One more match is enough to know a continue token is needed; counting all of
                // them (remainingItemCount, which is optional) would make every page O(n).
                remaining += 1;
                break;
            }
            items.push(object.clone());
            last_key = Some(key.clone());
        }
        let mut metadata = json!({"resourceVersion": self.store.revision().to_string()});
        if remaining > 0
            && let Some((ns, name)) = last_key
        {
            metadata["continue"] = Value::String(encode_continue(&ns, &name));
        }
        Ok(List {
            kind: format!("{}List", rt.kind),
            view,
            metadata,
            items,
        })
    }

    fn check_type(rt: &ResourceType, object: &Value) -> Result<(), ApiError> {
        if let Some(kind) = object["kind"].as_str()
            && kind != rt.kind
        {
            return Err(ApiError::bad_request(format!(
                "the kind of the object ({kind}) does not match the resource ({})",
                rt.kind
            )));
        }
        if let Some(api_version) = object["apiVersion"].as_str() {
            let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
            if group != rt.group {
                return Err(ApiError::bad_request(format!(
                    "the API version of the object ({api_version}) does not match the resource ({})",
                    rt.api_version()
                )));
            }
        }
        Ok(())
    }

    fn require_namespace(&self, rt: &ResourceType, namespace: &str) -> Result<(), ApiError> {
        if !rt.namespaced {
            return Ok(());
        }
        match self.store.get(NAMESPACE_KEY, "", namespace) {
            None => Err(ApiError::not_found("", "namespaces", namespace)),
            Some(ns) if ns["metadata"]["deletionTimestamp"].is_string() => {
                Err(ApiError::forbidden_terminating(namespace))
            }
            Some(_) => Ok(()),
        }
    }

    pub fn create(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        mut object: Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if let Some(core) = self.stored_events(rt) {
            let created =
                self.create(&core, namespace, events::from_events_view(&object), options)?;
            return Ok(events::to_events_view(&created));
        }
        if !object.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        Self::check_type(rt, &object)?;
        let namespace = self.scope(rt, namespace).to_owned();
        let meta = meta_mut(&mut object);
        if rt.namespaced {
            match meta.get("namespace").and_then(Value::as_str) {
                Some(ns) if !ns.is_empty() && ns != namespace => {
                    return Err(ApiError::bad_request(format!(
                        "the namespace of the object ({ns}) does not match the namespace on the request ({namespace})"
                    )));
                }
                _ => {
                    meta.insert("namespace".into(), Value::String(namespace.clone()));
                }
            }
        } else {
            meta.remove("namespace");
        }
        let name = match (
            meta.get("name").and_then(Value::as_str),
            meta.get("generateName").and_then(Value::as_str),
        ) {
            (Some(name), _) if !name.is_empty() => name.to_owned(),
            (_, Some(prefix)) if !prefix.is_empty() => format!("{prefix}{}", random_suffix(5)),
            _ => {
                return Err(ApiError::invalid(
                    &rt.group,
                    &rt.kind,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
        };
        if !is_valid_name(&name) {
            return Err(ApiError::invalid(
                &rt.group,
                &rt.kind,
                &name,
                format!(
                    "metadata.name: Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'"
                ),
            ));
        }
        meta.insert("name".into(), Value::String(name.clone()));
        meta.insert("uid".into(), Value::String(new_uid()));
        meta.insert("creationTimestamp".into(), Value::String(clock::now()));
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        meta.remove("resourceVersion");
        if rt.tracks_generation() {
            meta.insert("generation".into(), json!(1));
        } else {
            meta.remove("generation");
        }
        object["apiVersion"] = Value::String(rt.api_version());
        object["kind"] = Value::String(rt.kind.clone());
        if rt.status_subresource
            && !rt.builtin
            && let Some(map) = object.as_object_mut()
        {
            map.remove("status");
        }
        self.require_namespace(rt, &namespace)?;
        let key = rt.storage_key();
        if self.store.get(&key, &namespace, &name).is_some() {
            return Err(ApiError::already_exists(&rt.group, &rt.plural, &name));
        }
        self.admit(rt, &mut object, &name, options)?;
        self.default_on_create(rt, &mut object);
        if let Some(manager) = &options.field_manager {
            crate::apply::record_update(&mut object, manager, &rt.api_version());
        }
        if key == CRD_KEY {
            let mut registry = self.registry.clone();
            registry
                .serve_crd(&object)
                .map_err(|why| ApiError::invalid(&rt.group, &rt.kind, &name, why))?;
            object["status"] = established_crd_status(&object, &clock::now());
            if !options.dry_run {
                self.registry = registry;
            }
        }
        if options.dry_run {
            return Ok(object);
        }
        Ok((*self
            .store
            .put(&key, &namespace, &name, object, EventType::Added))
        .clone())
    }

    fn default_on_create(&self, rt: &ResourceType, object: &mut Value) {
        match rt.storage_key().as_str() {
            POD_KEY => {
                object["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
                if object["spec"]["nodeName"].is_null() {
                    object["spec"]["nodeName"] = json!("kubesim-node");
                }
                if object["spec"]["terminationGracePeriodSeconds"].is_null() {
                    object["spec"]["terminationGracePeriodSeconds"] = json!(30);
                }
            }
            NAMESPACE_KEY => {
                object["status"] = json!({"phase": "Active"});
                let name = name_of(object).to_owned();
                meta_mut(object)
                    .entry("labels")
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
                    .map(|l| l.insert("kubernetes.io/metadata.name".into(), Value::String(name)));
            }
            "/secrets" if object["type"].as_str().is_none_or(str::is_empty) => {
                object["type"] = json!("Opaque");
            }
            "/services" => {
                if object["spec"]["type"].is_null() {
                    object["spec"]["type"] = json!("ClusterIP");
                }
                if object["spec"]["clusterIP"].is_null() {
                    object["spec"]["clusterIP"] = json!("10.96.0.10");
                }
            }
            _ => {}
        }
    }

    /// Replaces an object (PUT). `subresource` is `Some("status")` for the status endpoint.
    pub fn update(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        subresource: Option<&str>,
        mut object: Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if let Some(core) = self.stored_events(rt) {
            let object = events::from_events_view(&object);
            let updated = self.update(&core, namespace, name, subresource, object, options)?;
            return Ok(events::to_events_view(&updated));
        }
        if !object.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        Self::check_type(rt, &object)?;
        let namespace = self.scope(rt, namespace).to_owned();
        if let Some(body_name) = object["metadata"]["name"].as_str()
            && !body_name.is_empty()
            && body_name != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let current = self
            .store
            .get(&rt.storage_key(), &namespace, name)
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))?;
        if let Some(expected) = object["metadata"]["resourceVersion"].as_str()
            && !expected.is_empty()
            && Some(expected) != current["metadata"]["resourceVersion"].as_str()
        {
            return Err(ApiError::stale(&rt.group, &rt.plural, name));
        }
        // An update naming another uid is for another object of that name: a precondition.
        if let Some(uid) = other_uid(&object, &current) {
            return Err(ApiError::conflict(
                &rt.group,
                &rt.plural,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    current["metadata"]["uid"].as_str().unwrap_or("")
                ),
            ));
        }
        let next = self.merge_for_write(rt, &current, &mut object, subresource, options)?;
        self.write_existing(rt, &namespace, name, &current, next, options)
    }

    /// Applies the isolation rules of the main resource and its status subresource.
    fn merge_for_write(
        &mut self,
        rt: &ResourceType,
        current: &Value,
        incoming: &mut Value,
        subresource: Option<&str>,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let mut next = match subresource {
            Some("status") if rt.status_subresource => {
                // Only status changes through /status.
                let mut next = current.clone();
                next["status"] = incoming.get("status").cloned().unwrap_or(Value::Null);
                next
            }
            Some(other) => return Err(ApiError::path_not_found(&format!("subresource {other}"))),
            None => {
                let mut next = incoming.clone();
                if rt.status_subresource {
                    // The main resource ignores status.
                    match current.get("status") {
                        Some(status) => next["status"] = status.clone(),
                        None => {
                            if let Some(map) = next.as_object_mut() {
                                map.remove("status");
                            }
                        }
                    }
                }
                next
            }
        };
        // Identity and server-owned metadata always come from the stored object.
        let kept = [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ];
        let current_meta = current["metadata"].as_object().cloned().unwrap_or_default();
        let meta = meta_mut(&mut next);
        for key in kept {
            match current_meta.get(key) {
                Some(value) => {
                    meta.insert(key.into(), value.clone());
                }
                None => {
                    meta.remove(key);
                }
            }
        }
        if subresource.is_some() {
            // Status writes keep the stored metadata as it is (labels, finalizers, ...).
            next["metadata"] = current["metadata"].clone();
        }
        next["apiVersion"] = current["apiVersion"].clone();
        next["kind"] = current["kind"].clone();
        let name = name_of(current).to_owned();
        self.admit(rt, &mut next, &name, options)?;
        if rt.tracks_generation()
            && generation_relevant(rt, &next) != generation_relevant(rt, current)
        {
            let generation = current["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            meta_mut(&mut next).insert("generation".into(), json!(generation));
        }
        Ok(next)
    }

    /// The write half of a server-side apply: status isolation, generation, then the write.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn apply_write(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        subresource: Option<&str>,
        current: &Value,
        mut next: Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let managed = next["metadata"]["managedFields"].clone();
        let mut merged = self.merge_for_write(rt, current, &mut next, subresource, options)?;
        merged["metadata"]["managedFields"] = managed;
        self.write_existing(rt, namespace, name, current, merged, options)
    }

    /// Writes a changed object, handling no-op writes, CRDs and the last finalizer of an object
    /// being deleted.
    fn write_existing(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        current: &Value,
        mut next: Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if let Some(manager) = &options.field_manager {
            crate::apply::record_update(&mut next, manager, &rt.api_version());
        }
        let key = rt.storage_key();
        if key == CRD_KEY {
            let mut registry = self.registry.clone();
            registry
                .serve_crd(&next)
                .map_err(|why| ApiError::invalid(&rt.group, &rt.kind, name, why))?;
            if next["status"].is_null() {
                next["status"] = established_crd_status(&next, &clock::now());
            }
            if !options.dry_run {
                self.registry = registry;
            }
        }
        if options.dry_run || same_content(current, &next) {
            // Kubernetes does not write (or bump resourceVersion for) an update that changes nothing.
            let mut unchanged = next;
            unchanged["metadata"]["resourceVersion"] =
                current["metadata"]["resourceVersion"].clone();
            return Ok(unchanged);
        }
        let terminating = next["metadata"]["deletionTimestamp"].is_string();
        let finalizers_left = next["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if terminating && !finalizers_left && !self.waits_for_kubelet(rt, &next) {
            let stored = self
                .store
                .put(&key, namespace, name, next, EventType::Modified);
            self.finish_delete(rt, namespace, name);
            return Ok((*stored).clone());
        }
        Ok((*self
            .store
            .put(&key, namespace, name, next, EventType::Modified))
        .clone())
    }

    /// Pods being deleted gracefully stay until the (simulated) kubelet has stopped them.
    fn waits_for_kubelet(&self, rt: &ResourceType, object: &Value) -> bool {
        rt.storage_key() == POD_KEY
            && object["metadata"]["deletionGracePeriodSeconds"]
                .as_i64()
                .is_some_and(|s| s > 0)
    }

    #[allow(clippy::too_many_arguments)] // one argument per part of a PATCH request
    pub fn patch(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        subresource: Option<&str>,
        patch_type: PatchType,
        body: &[u8],
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if let Some(core) = self.stored_events(rt) {
            return self.patch_events_view(&core, namespace, name, patch_type, body, options);
        }
        let namespace = self.scope(rt, namespace).to_owned();
        let current = self.store.get(&rt.storage_key(), &namespace, name);
        if patch_type == PatchType::Apply {
            return crate::apply::server_side_apply(
                self,
                rt,
                &namespace,
                name,
                subresource,
                current,
                body,
                options,
            );
        }
        let current = current.ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))?;
        let mut patched = match patch_type {
            PatchType::Json => patch::json_patch(&current, body)?,
            PatchType::Merge => patch::merge_patch(&current, body)?,
            PatchType::StrategicMerge if rt.builtin => {
                patch::strategic_merge_patch(&current, body)?
            }
            PatchType::StrategicMerge => {
                return Err(ApiError::unsupported_media_type(format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (strategic merge patch is not supported for custom resources like {})",
                    rt.kind
                )));
            }
            PatchType::Apply => unreachable!("handled above"),
        };
        // A patch may carry resourceVersion as a precondition.
        if let Some(expected) = patched["metadata"]["resourceVersion"].as_str()
            && expected
                != current["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or("")
        {
            return Err(ApiError::stale(&rt.group, &rt.plural, name));
        }
        // A patch that sets another uid tries to change an immutable field.
        if let Some(uid) = other_uid(&patched, &current) {
            return Err(ApiError::invalid(
                &rt.group,
                &rt.kind,
                name,
                format!("metadata.uid: Invalid value: \"{uid}\": field is immutable"),
            ));
        }
        let next = self.merge_for_write(rt, &current, &mut patched, subresource, options)?;
        self.write_existing(rt, &namespace, name, &current, next, options)
    }

    pub fn delete(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        if let Some(core) = self.stored_events(rt) {
            let deleted = self.delete(&core, namespace, name, options)?;
            return Ok(events::to_events_view(&deleted));
        }
        let namespace = self.scope(rt, namespace).to_owned();
        let key = rt.storage_key();
        let current = self
            .store
            .get(&key, &namespace, name)
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))?;
        if let Some(uid) = &options.precondition_uid
            && current["metadata"]["uid"].as_str() != Some(uid.as_str())
        {
            return Err(ApiError::conflict(
                &rt.group,
                &rt.plural,
                name,
                "Precondition failed: UID in precondition does not match the UID of the object",
            ));
        }
        if let Some(rv) = &options.precondition_resource_version
            && current["metadata"]["resourceVersion"].as_str() != Some(rv.as_str())
        {
            return Err(ApiError::conflict(
                &rt.group,
                &rt.plural,
                name,
                "Precondition failed: ResourceVersion in precondition does not match the ResourceVersion of the object",
            ));
        }
        if options.dry_run {
            return Ok((*current).clone());
        }
        let mut next = (*current).clone();
        let mut finalizers: Vec<Value> = next["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let already_terminating = next["metadata"]["deletionTimestamp"].is_string();
        match options.propagation.as_deref() {
            Some("Foreground")
                if !finalizers.contains(&json!("foregroundDeletion")) && !already_terminating =>
            {
                finalizers.push(json!("foregroundDeletion"))
            }
            Some("Orphan") if !finalizers.contains(&json!("orphan")) && !already_terminating => {
                finalizers.push(json!("orphan"))
            }
            _ => {}
        }
        if key == NAMESPACE_KEY && !already_terminating {
            next["status"]["phase"] = json!("Terminating");
        }
        let grace = self.pod_grace_seconds(rt, &current, options);
        if !finalizers.is_empty() || grace > 0 || key == NAMESPACE_KEY {
            if already_terminating {
                // A second delete does not restart anything.
                return Ok((*current).clone());
            }
            let meta = meta_mut(&mut next);
            meta.insert("deletionTimestamp".into(), Value::String(clock::now()));
            meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
            if !finalizers.is_empty() {
                meta.insert("finalizers".into(), Value::Array(finalizers));
            }
            let stored = self
                .store
                .put(&key, &namespace, name, next, EventType::Modified);
            return Ok((*stored).clone());
        }
        self.finish_delete(rt, &namespace, name)
            .map(|o| (*o).clone())
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))
    }

    /// Seconds of graceful termination a pod deletion gets; 0 for everything that is not a
    /// running pod.
    fn pod_grace_seconds(&self, rt: &ResourceType, pod: &Value, options: &DeleteOptions) -> i64 {
        if rt.storage_key() != POD_KEY
            || matches!(
                pod["status"]["phase"].as_str(),
                Some("Succeeded" | "Failed")
            )
        {
            return 0;
        }
        options
            .grace_period_seconds
            .or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_i64())
            .unwrap_or(30)
            .max(0)
    }

    /// Removes an object for good. CRDs take their resources with them.
    pub fn finish_delete(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Option<Object> {
        let removed = self.store.remove(&rt.storage_key(), namespace, name)?;
        if rt.storage_key() == CRD_KEY {
            let group = removed["spec"]["group"].as_str().unwrap_or("").to_owned();
            let plural = removed["spec"]["names"]["plural"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            self.registry.remove_crd(&group, &plural);
            self.store.drop_resource(&format!("{group}/{plural}"));
        }
        Some(removed)
    }

    /// A custom resource's schema rules ([`crate::schema`]): prunes and defaults `object` in
    /// place, answers unknown fields as `fieldValidation` asks, and refuses an invalid object
    /// with 422 and a cause per field.
    fn admit(
        &mut self,
        rt: &ResourceType,
        object: &mut Value,
        name: &str,
        options: &WriteOptions,
    ) -> Result<(), ApiError> {
        let Some(schema) = rt.schema.as_ref().filter(|_| !rt.builtin) else {
            return Ok(());
        };
        let admission = crate::schema::admit(schema, object);
        let unknown = admission
            .unknown_fields
            .iter()
            .map(|path| format!("unknown field \"{path}\""));
        match options.field_validation {
            FieldValidation::Strict if !admission.unknown_fields.is_empty() => {
                let unknown: Vec<String> = unknown.collect();
                return Err(ApiError::bad_request(format!(
                    "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
                    unknown.join(", "),
                    kind = rt.kind,
                    version = rt.version,
                )));
            }
            FieldValidation::Warn => self.warnings.extend(unknown),
            FieldValidation::Strict | FieldValidation::Ignore => {}
        }
        if admission.causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid_fields(
                &rt.group,
                &rt.kind,
                name,
                &admission.causes,
            ))
        }
    }

    /// The core events type, when `rt` is the `events.k8s.io` view of them: writes through the
    /// view are converted and made to the stored events.
    fn stored_events(&self, rt: &ResourceType) -> Option<ResourceType> {
        if !events::is_events_view(rt) {
            return None;
        }
        self.registry.find("", "v1", "events").cloned()
    }

    /// A patch through the `events.k8s.io` view applies to the event as that view shows it,
    /// and the result is stored in the core form. A server-side apply is converted before it is
    /// applied, so its managed fields name the core paths.
    fn patch_events_view(
        &mut self,
        core: &ResourceType,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        body: &[u8],
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if patch_type == PatchType::Apply {
            let intent: Value = serde_yaml::from_slice(body).map_err(|err| {
                ApiError::bad_request(format!("the apply body is not valid YAML or JSON: {err}"))
            })?;
            let converted = events::from_events_view(&intent).to_string();
            let applied = self.patch(
                core,
                namespace,
                name,
                None,
                PatchType::Apply,
                converted.as_bytes(),
                options,
            )?;
            return Ok(events::to_events_view(&applied));
        }
        let current = self.get(core, namespace, name)?;
        let viewed = events::to_events_view(&current);
        let patched = match patch_type {
            PatchType::Json => patch::json_patch(&viewed, body)?,
            PatchType::Merge | PatchType::Apply => patch::merge_patch(&viewed, body)?,
            PatchType::StrategicMerge => patch::strategic_merge_patch(&viewed, body)?,
        };
        let updated = self.update(
            core,
            namespace,
            name,
            None,
            events::from_events_view(&patched),
            options,
        )?;
        Ok(events::to_events_view(&updated))
    }

    /// Finds the resource type serving objects stored under `storage_key` (any version).
    pub fn type_for_key(&self, storage_key: &str) -> Option<ResourceType> {
        self.registry
            .all()
            .iter()
            .find(|t| t.storage_key() == storage_key)
            .cloned()
    }
}

fn encode_continue(namespace: &str, name: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json!([namespace, name]).to_string())
}

fn decode_continue(token: &str) -> Result<(String, String), ApiError> {
    use base64::Engine;
    let invalid = || ApiError::bad_request("invalid continue token");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| invalid())?;
    let (namespace, name): (String, String) =
        serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    Ok((namespace, name))
}
