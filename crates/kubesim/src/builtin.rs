//! The field types of built-in kinds, checked the way the API server's decoder checks them: a
//! body whose fields have the wrong type (`data: {x: true}` in a ConfigMap) is refused with 400
//! before anything is stored, instead of being kept for every client to trip over. The types
//! are k8s-openapi's, which follow the API's OpenAPI document.

use k8s_openapi::api::apps::v1::{ControllerRevision, Deployment};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Event, Namespace, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn decode<K: DeserializeOwned>(object: &Value) -> Option<String> {
    serde_path_to_error::deserialize::<_, K>(object)
        .err()
        .map(|err| {
            let path = err.path().to_string();
            format!("{path}: {}", err.into_inner())
        })
}

/// Why `object` cannot be a `kind` of the API (None: it can, or the kind is not built in).
/// `events.k8s.io` events are checked in their stored, v1 form.
pub fn type_problem(kind: &str, object: &Value) -> Option<String> {
    match kind {
        "Namespace" => decode::<Namespace>(object),
        "Pod" => decode::<Pod>(object),
        "ConfigMap" => decode::<ConfigMap>(object),
        "Secret" => decode::<Secret>(object),
        "Service" => decode::<Service>(object),
        "Event" => decode::<Event>(object),
        "Lease" => decode::<Lease>(object),
        "ControllerRevision" => decode::<ControllerRevision>(object),
        "ServiceAccount" => decode::<ServiceAccount>(object),
        "Deployment" => decode::<Deployment>(object),
        "PodDisruptionBudget" => decode::<PodDisruptionBudget>(object),
        "Role" => decode::<Role>(object),
        "RoleBinding" => decode::<RoleBinding>(object),
        "ClusterRole" => decode::<ClusterRole>(object),
        "ClusterRoleBinding" => decode::<ClusterRoleBinding>(object),
        "CustomResourceDefinition" => decode::<CustomResourceDefinition>(object),
        _ => None,
    }
}

/// The fields of built-in kinds that the API server's Go types always write, even when a client
/// left them out (a struct, not a pointer, in Go): by storage key, the fields made `{}` when
/// absent. A leader election library creates its Lease without a `spec`; the API server still
/// answers with `spec: {}`, and readers rely on it.
const ALWAYS_WRITTEN: &[(&str, &[&str])] = &[("coordination.k8s.io/leases", &["spec"])];

/// Gives `object` (stored under `storage_key`) the fields its Go type always writes.
pub fn fill_always_written(storage_key: &str, object: &mut Value) {
    let Some((_, fields)) = ALWAYS_WRITTEN.iter().find(|(key, _)| *key == storage_key) else {
        return;
    };
    if let Some(map) = object.as_object_mut() {
        for field in *fields {
            let value = map
                .entry(*field)
                .or_insert_with(|| Value::Object(Default::default()));
            if value.is_null() {
                *value = Value::Object(Default::default());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrong_field_types_are_named_and_right_ones_pass() {
        let bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                         "data": {"x": true}});
        let why = type_problem("ConfigMap", &bad).unwrap_or_default();
        assert!(why.starts_with("data.x: invalid type: boolean"), "{why}");
        let good = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                          "data": {"x": "true"}});
        assert_eq!(type_problem("ConfigMap", &good), None);
        assert_eq!(type_problem("Frontend", &bad), None);
    }
}
