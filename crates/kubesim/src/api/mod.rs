//! Verb semantics, independent of HTTP: create, get, list, update, patch and delete on the
//! store, with resourceVersion conflicts, generation only on spec change, status subresource
//! isolation, finalizers and deletionTimestamp, graceful pod deletion, dryRun, and CRDs that
//! become served when created.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::clock;
use crate::error::ApiError;
use crate::registry::{Registry, ResourceType, is_events_view};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{EventType, Object, Store};

mod create;
mod delete;
mod read;
mod update;
mod view;

pub use view::{List, View};

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
    /// Store the object as it is, without the decoder's and admission's checks: for tests that
    /// need what an API server of another version, or an older CRD, left behind. Never set by
    /// an HTTP request.
    pub unchecked: bool,
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

/// The label regex the API server names in its messages.
const LABEL_VALUE_REGEX: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_NAME_REGEX: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";

fn label_name_ok(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
        && name.starts_with(alnum)
        && name.ends_with(alnum)
}

/// The API server's checks of `metadata.labels` (keys `[prefix/]name`, values at most 63
/// characters of the label alphabet), as `details.causes` in its words.
fn label_problems(object: &Value) -> Vec<crate::schema::Cause> {
    let Some(labels) = object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    let mut causes = Vec::new();
    for (key, value) in labels {
        let field = "metadata.labels";
        let (prefix, name) = match key.split_once('/') {
            Some((prefix, name)) => (Some(prefix), name),
            None => (None, key.as_str()),
        };
        if prefix.is_some_and(|p| !is_valid_name(p)) {
            causes.push(crate::schema::Cause::invalid(
                field,
                key,
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            ));
        } else if !label_name_ok(name) {
            causes.push(crate::schema::Cause::invalid(
                field,
                key,
                &format!(
                    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (regex used for validation is '{LABEL_NAME_REGEX}')"
                ),
            ));
        }
        let Some(value) = value.as_str() else {
            continue;
        };
        if value.len() > 63 {
            causes.push(crate::schema::Cause::invalid(
                field,
                value,
                "must be no more than 63 characters",
            ));
        } else if !value.is_empty() && !label_name_ok(value) {
            causes.push(crate::schema::Cause::invalid(
                field,
                value,
                &format!(
                    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (regex used for validation is '{LABEL_VALUE_REGEX}')"
                ),
            ));
        }
    }
    causes
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

/// Whether two JSON values mean the same, as the API server compares decoded objects: numbers
/// by value (`100` and `100.0` are one number to a Go client and to the server's structs, though
/// not to `serde_json::Value`'s `==`).
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_value(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, p)| y.get(key).is_some_and(|q| same_value(p, q)))
        }
        _ => a == b,
    }
}

/// Whether a write changes what `metadata.generation` follows.
fn generation_moves(rt: &ResourceType, current: &Value, next: &Value) -> bool {
    !same_value(
        &generation_relevant(rt, next),
        &generation_relevant(rt, current),
    )
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
    same_value(&strip(a), &strip(b))
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
    fn served(&self, rt: &ResourceType, object: &Object) -> Result<Object, ApiError> {
        let view = View::of(rt);
        if !view.events && object["apiVersion"].as_str() == Some(view.api_version.as_str()) {
            return Ok(object.clone());
        }
        Ok(Arc::new(view.value(object)?))
    }

    /// A stored object at `rt`'s version, to be written at it: through the CRD's conversion
    /// webhook when it is stored at another (without one, as stored: a relabelled write would
    /// move what it is stored at).
    fn at_request_version(&self, rt: &ResourceType, object: Object) -> Result<Object, ApiError> {
        if rt.conversion.is_none() {
            return Ok(object);
        }
        self.served(rt, &object)
    }

    /// An object about to be stored, at the CRD's storage version (through its conversion
    /// webhook; without one, as written).
    fn at_storage_version(&self, rt: &ResourceType, object: Value) -> Result<Value, ApiError> {
        match &rt.conversion {
            Some(webhook)
                if object["apiVersion"].as_str() != Some(webhook.storage_api_version.as_str()) =>
            {
                let from = object.clone();
                webhook
                    .convert_one(object, &webhook.storage_api_version)
                    .map_err(|why| View::of(rt).conversion_failed(&from, &why))
            }
            _ => Ok(object),
        }
    }

    /// What the API server's decoder refuses before anything else: another kind, an API version
    /// other than the URL's (one the CRD does not serve included), and, for built-in kinds,
    /// fields of the wrong type. `options.unchecked` (never set over HTTP) skips it.
    fn check_type(
        rt: &ResourceType,
        object: &Value,
        options: &WriteOptions,
    ) -> Result<(), ApiError> {
        if options.unchecked {
            return Ok(());
        }
        if let Some(kind) = object["kind"].as_str()
            && kind != rt.kind
        {
            return Err(ApiError::bad_request(format!(
                "the kind of the object ({kind}) does not match the resource ({})",
                rt.kind
            )));
        }
        if let Some(api_version) = object["apiVersion"].as_str()
            && api_version != rt.api_version()
        {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                rt.api_version()
            )));
        }
        if rt.builtin
            && let Some(why) = crate::builtin::type_problem(&rt.kind, object)
        {
            return Err(ApiError::bad_request(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: {why}",
                kind = rt.kind,
                version = rt.version,
            )));
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

    /// A custom resource's schema rules ([`crate::schema`]): prunes and defaults `object` in
    /// place, answers unknown fields as `fieldValidation` asks, evaluates its CEL rules (`old`:
    /// the stored object an update changes, `None` on a create), and refuses an invalid object
    /// with 422 and a cause per field.
    fn admit(
        &mut self,
        rt: &ResourceType,
        object: &mut Value,
        old: Option<&Value>,
        name: &str,
        options: &WriteOptions,
    ) -> Result<(), ApiError> {
        if options.unchecked {
            return Ok(());
        }
        fold_string_data(rt, object);
        let label_causes = label_problems(object);
        if !label_causes.is_empty() {
            return Err(ApiError::invalid_fields(
                &rt.group,
                &rt.kind,
                name,
                &label_causes,
            ));
        }
        let Some(schema) = rt.schema.as_ref().filter(|_| !rt.builtin) else {
            return Ok(());
        };
        let admission = crate::schema::admit(schema, object, old);
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
        self.warnings.extend(admission.warnings);
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
        if !is_events_view(rt) {
            return None;
        }
        self.registry.find("", "v1", "events").cloned()
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

/// A continue token: where the next page starts, and the revision the list began at (a token
/// older than the store's compaction answers 410, as the API server's does). None: no
/// revision, the list goes on at the latest one (the token that 410 hands out).
fn encode_continue(namespace: &str, name: &str, revision: Option<u64>) -> String {
    use base64::Engine;
    // -1 for none, as the API server's own tokens say it.
    let revision = revision.map_or(-1, |r| i64::try_from(r).unwrap_or(i64::MAX));
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!([namespace, name, revision]).to_string())
}

fn decode_continue(token: &str) -> Result<(String, String, Option<u64>), ApiError> {
    use base64::Engine;
    let invalid = || ApiError::bad_request("invalid continue token");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| invalid())?;
    let (namespace, name, revision): (String, String, i64) =
        serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    Ok((namespace, name, u64::try_from(revision).ok()))
}

/// A Secret's `stringData` is write-only: the API server merges it into `data`, base64-encoded,
/// over what `data` holds under the same keys, and stores no `stringData`.
fn fold_string_data(rt: &ResourceType, object: &mut Value) {
    use base64::Engine;
    if rt.kind != "Secret" || !rt.group.is_empty() {
        return;
    }
    let Some(Value::Object(strings)) = object.as_object_mut().and_then(|o| o.remove("stringData"))
    else {
        return;
    };
    let Some(fields) = object.as_object_mut() else {
        return;
    };
    let data = fields.entry("data").or_insert_with(|| json!({}));
    if !data.is_object() {
        *data = json!({});
    }
    for (key, value) in strings {
        if let (Some(text), Some(data)) = (value.as_str(), data.as_object_mut()) {
            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
            data.insert(key, Value::String(encoded));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_compared_by_value_as_the_api_server_does() {
        assert!(same_value(
            &json!({"spec": {"maximum": 100, "items": [1, 2.5]}}),
            &json!({"spec": {"maximum": 100.0, "items": [1.0, 2.5]}})
        ));
        assert!(!same_value(
            &json!({"maximum": 100}),
            &json!({"maximum": 100.5})
        ));
        assert!(!same_value(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(!same_value(&json!([1]), &json!([1, 1])));
        assert!(!same_value(&json!("100"), &json!(100)));
    }
}
