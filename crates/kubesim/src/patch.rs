//! The three patch formats: JSON patch (RFC 6902, with `test`), JSON merge patch (RFC 7386)
//! and strategic merge patch (built-in kinds only), plus the list keys strategic merge uses.

use serde_json::{Map, Value};

use crate::error::ApiError;

pub fn json_patch(target: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let mut patch: json_patch::Patch = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
    // Kubernetes' JSON patch reads a missing value as null, so `test` of a missing path against
    // null passes (kube's finalizer helper relies on it); the json-patch crate would fail it.
    patch.0.retain(|operation| match operation {
        json_patch::PatchOperation::Test(test) => {
            !(test.value.is_null() && target.pointer(test.path.as_str()).is_none())
        }
        _ => true,
    });
    let mut patched = target.clone();
    json_patch::patch(&mut patched, &patch).map_err(|e| {
        // A failed `test` or a missing path makes the whole patch fail, with no change.
        ApiError::invalid("", "Patch", "json-patch", e.to_string())
    })?;
    Ok(patched)
}

pub fn merge_patch(target: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid merge patch: {e}")))?;
    let mut patched = target.clone();
    json_patch::merge(&mut patched, &patch);
    Ok(patched)
}

pub fn strategic_merge_patch(target: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid strategic merge patch: {e}")))?;
    let mut patched = target.clone();
    strategic_merge(&mut patched, &patch, "");
    Ok(patched)
}

/// The merge key of a list field in built-in kinds, by field name. Lists not named here are
/// replaced whole, as Kubernetes does for lists without a patch strategy.
pub fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "containerStatuses"
        | "initContainerStatuses" => "name",
        "volumeMounts" => "mountPath",
        "ports" => "containerPort",
        "conditions" => "type",
        "ownerReferences" => "uid",
        _ => return None,
    })
}

fn strategic_merge(target: &mut Value, patch: &Value, field: &str) {
    match (target, patch) {
        (Value::Object(target_map), Value::Object(patch_map)) => {
            if patch_map.get("$patch").and_then(Value::as_str) == Some("replace") {
                let mut replaced: Map<String, Value> = patch_map.clone();
                replaced.remove("$patch");
                *target_map = replaced;
                return;
            }
            for (key, value) in patch_map {
                if key.starts_with('$') {
                    continue;
                }
                if value.is_null() {
                    target_map.remove(key);
                } else if let Some(existing) = target_map.get_mut(key) {
                    strategic_merge(existing, value, key);
                } else {
                    let mut fresh = Value::Null;
                    strategic_merge(&mut fresh, value, key);
                    target_map.insert(key.clone(), fresh);
                }
            }
        }
        (Value::Array(target_items), Value::Array(patch_items)) if merge_key(field).is_some() => {
            let key = merge_key(field).unwrap_or("name");
            for item in patch_items {
                let id = item.get(key).cloned();
                let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                let position = id
                    .as_ref()
                    .and_then(|id| target_items.iter().position(|t| t.get(key) == Some(id)));
                match (position, delete) {
                    (Some(i), true) => {
                        target_items.remove(i);
                    }
                    (Some(i), false) => strategic_merge(&mut target_items[i], item, ""),
                    (None, true) => {}
                    (None, false) => target_items.push(without_directives(item)),
                }
            }
        }
        (target, patch) => *target = without_directives(patch),
    }
}

fn without_directives(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, v)| !k.starts_with('$') && !v.is_null())
                .map(|(k, v)| (k.clone(), without_directives(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_directives).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_merges_containers_by_name() {
        let pod = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
        let patch = br#"{"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}]}}"#;
        let out = strategic_merge_patch(&pod, patch).expect("ok");
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "a", "image": "x"}, {"name": "b", "image": "z"}, {"name": "c", "image": "w"}])
        );
        let merged = merge_patch(&pod, patch).expect("ok");
        assert_eq!(
            merged["spec"]["containers"].as_array().map(Vec::len),
            Some(2),
            "merge patch replaces lists"
        );
        let deleted = strategic_merge_patch(
            &pod,
            br#"{"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}"#,
        )
        .expect("ok");
        assert_eq!(
            deleted["spec"]["containers"],
            json!([{"name": "b", "image": "y"}])
        );
    }

    #[test]
    fn test_of_a_missing_path_against_null_passes() {
        let o = json!({"metadata": {}});
        let ok = json_patch(&o, br#"[{"op": "test", "path": "/metadata/finalizers", "value": null}, {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}]"#).expect("ok");
        assert_eq!(ok["metadata"]["finalizers"], json!(["f"]));
        assert!(
            json_patch(
                &o,
                br#"[{"op": "test", "path": "/metadata/finalizers", "value": ["x"]}]"#
            )
            .is_err()
        );
    }

    #[test]
    fn json_patch_test_operation_guards_the_change() {
        let o = json!({"metadata": {"labels": {"a": "1"}}});
        let ok = json_patch(&o, br#"[{"op": "test", "path": "/metadata/labels/a", "value": "1"}, {"op": "replace", "path": "/metadata/labels/a", "value": "2"}]"#).expect("ok");
        assert_eq!(ok["metadata"]["labels"]["a"], "2");
        let failed = json_patch(&o, br#"[{"op": "test", "path": "/metadata/labels/a", "value": "9"}, {"op": "replace", "path": "/metadata/labels/a", "value": "2"}]"#);
        assert_eq!(failed.expect_err("test fails").code, 422);
    }
}
