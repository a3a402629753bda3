//! Creating: names and generateName, defaults, admission, and the first resourceVersion.

use serde_json::{Value, json};

use crate::clock;
use crate::error::ApiError;
use crate::events;
use crate::registry::{ResourceType, established_crd_status};
use crate::store::EventType;

use super::{
    CRD_KEY, Cluster, NAMESPACE_KEY, POD_KEY, WriteOptions, is_valid_name, meta_mut, name_of,
    new_uid, random_suffix,
};

impl Cluster {
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
        Self::check_type(rt, &object, options)?;
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
        self.admit(rt, &mut object, None, &name, options)?;
        self.default_on_create(rt, &mut object);
        crate::builtin::fill_always_written(&key, &mut object);
        if let Some(manager) = &options.field_manager {
            crate::apply::record_update(&mut object, None, manager, &rt.api_version());
        }
        let mut served = None;
        if key == CRD_KEY {
            let mut registry = self.registry.clone();
            served = Some(
                registry
                    .serve_crd(&object)
                    .map_err(|why| ApiError::invalid(&rt.group, &rt.kind, &name, why))?,
            );
            object["status"] = established_crd_status(&object, &clock::now());
            if !options.dry_run {
                self.registry = registry;
            }
        }
        if options.dry_run {
            return Ok(object);
        }
        let object = self.at_storage_version(rt, object)?;
        let stored = self
            .store
            .put(&key, &namespace, &name, object, EventType::Added);
        if let Some(resource) = served {
            // The API server's watch cache of a new custom resource starts from the present: a
            // watch from before its CRD gets 410, not a replay.
            self.store.begin_history(&resource);
        }
        Ok((*self.at_request_version(rt, stored)?).clone())
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
}
