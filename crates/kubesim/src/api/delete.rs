//! Deleting: graceful pod deletion, finalizers, preconditions and the end of a deletion.

use serde_json::{Value, json};

use crate::clock;
use crate::error::ApiError;
use crate::events;
use crate::registry::ResourceType;
use crate::store::{EventType, Object};

use super::{CRD_KEY, Cluster, DeleteOptions, NAMESPACE_KEY, POD_KEY, meta_mut};

impl Cluster {
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
}
