//! Updating: replace, every patch type (merge, strategic, JSON and server-side apply) and the
//! status subresource, with preconditions, generation and the events view.

use serde_json::{Value, json};

use crate::clock;
use crate::error::ApiError;
use crate::events;
use crate::patch;
use crate::registry::{ResourceType, established_crd_status};
use crate::store::EventType;

use super::{
    CRD_KEY, Cluster, POD_KEY, PatchType, WriteOptions, generation_moves, meta_mut, name_of,
    other_uid, same_content,
};

impl Cluster {
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
        Self::check_type(rt, &object, options)?;
        let namespace = self.scope(rt, namespace).to_owned();
        if let Some(body_name) = object["metadata"]["name"].as_str()
            && !body_name.is_empty()
            && body_name != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if rt.namespaced
            && let Some(body_namespace) = object["metadata"]["namespace"].as_str()
            && !body_namespace.is_empty()
            && body_namespace != namespace
        {
            return Err(ApiError::bad_request(format!(
                "the namespace of the object ({body_namespace}) does not match the namespace on the request ({namespace})"
            )));
        }
        // Custom resources are never updated unconditionally (built-in kinds may be).
        let resource_version = object["metadata"]["resourceVersion"].as_str();
        if !rt.builtin && !options.unchecked && resource_version.is_none_or(str::is_empty) {
            return Err(ApiError::invalid(
                &rt.group,
                &rt.kind,
                name,
                "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
            ));
        }
        let current = self
            .store
            .get(&rt.storage_key(), &namespace, name)
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))?;
        let current = self.at_request_version(rt, current)?;
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
        self.admit(rt, &mut next, Some(current), &name, options)?;
        if rt.tracks_generation() && generation_moves(rt, current, &next) {
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
            crate::apply::record_update(&mut next, Some(current), manager, &rt.api_version());
        }
        let key = rt.storage_key();
        crate::builtin::fill_always_written(&key, &mut next);
        if key == CRD_KEY {
            let mut registry = self.registry.clone();
            registry
                .serve_crd(&next)
                .map_err(|why| ApiError::invalid(&rt.group, &rt.kind, name, why))?;
            if next["status"].is_null() {
                next["status"] = established_crd_status(&next, &clock::now());
            }
            crate::registry::keep_storage_version_recorded(&mut next);
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
        let next = self.at_storage_version(rt, next)?;
        if terminating && !finalizers_left && !self.waits_for_kubelet(rt, &next) {
            let stored = self
                .store
                .put(&key, namespace, name, next, EventType::Modified);
            self.finish_delete(rt, namespace, name);
            return Ok((*self.at_request_version(rt, stored)?).clone());
        }
        let stored = self
            .store
            .put(&key, namespace, name, next, EventType::Modified);
        Ok((*self.at_request_version(rt, stored)?).clone())
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
        let current = match self.store.get(&rt.storage_key(), &namespace, name) {
            Some(stored) => Some(self.at_request_version(rt, stored)?),
            None => None,
        };
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
}
