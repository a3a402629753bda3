//! Discovery: `/version`, the API group and resource lists kubectl and kube-rs read, and the
//! OpenAPI documents.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::shared::Shared;

use super::{error_response, json_response};

pub(super) fn version() -> Value {
    json!({"major": "1", "minor": "37", "gitVersion": "v1.37.0-kubesim", "gitCommit": "kubesim",
           "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25",
           "compiler": "gc", "platform": "linux/amd64"})
}

pub(super) fn openapi_v2() -> Value {
    // No schemas: kubectl's client-side validation then has nothing to reject, and the server
    // accepts any well-formed object.
    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.37.0"}, "paths": {}, "definitions": {}})
}

/// The media type kubectl asks `/openapi/v2` for: gnostic's `openapi_v2.Document` in protobuf.
pub(super) const OPENAPI_V2_PROTOBUF: &str =
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// [`openapi_v2`] as gnostic's `openapi_v2.Document` protobuf, which is what kubectl asks for
/// when it validates an object whose kind OpenAPI v3 does not serve (a custom resource whose
/// CRD is not installed): answered with JSON, kubectl fails with "proto: cannot parse invalid
/// wire-format data" instead of the API server's "no matches for kind". Fields: `swagger` (1),
/// `info` (2: `title` 1, `version` 2), empty `paths` (8) and `definitions` (9).
pub(super) fn openapi_v2_protobuf() -> Vec<u8> {
    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        // Length-delimited (wire type 2); every length here is under 128, one varint byte.
        let mut out = vec![(number << 3) | 2, u8::try_from(bytes.len()).unwrap_or(0)];
        out.extend_from_slice(bytes);
        out
    }
    let info = [field(1, b"Kubernetes"), field(2, b"v1.37.0")].concat();
    [
        field(1, b"2.0"),
        field(2, &info),
        field(8, &[]),
        field(9, &[]),
    ]
    .concat()
}

/// The OpenAPI v3 index: one document per served group-version.
pub(super) fn openapi_v3_root(shared: &Shared) -> Value {
    let cluster = shared.lock();
    let revision = cluster.store.revision();
    let mut paths = serde_json::Map::new();
    for t in cluster.registry.all() {
        let path = if t.group.is_empty() {
            format!("api/{}", t.version)
        } else {
            format!("apis/{}/{}", t.group, t.version)
        };
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={revision}")}),
        );
    }
    json!({"paths": paths})
}

/// One group-version's OpenAPI v3 document. It describes every resource's operations with
/// their group-version-kind and the `fieldValidation` parameter, which tells kubectl to leave
/// validation to the server; component schemas are the CRD's schema where there is one.
pub(super) fn openapi_v3_group_version(
    shared: &Shared,
    group: &str,
    version: &str,
    path: &str,
) -> Response {
    let cluster = shared.lock();
    let types = cluster.registry.in_group_version(group, version);
    if types.is_empty() {
        return error_response(&ApiError::path_not_found(path));
    }
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for t in types {
        let gvk = json!({"group": t.group, "version": t.version, "kind": t.kind});
        let parameter = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
        let operation = |action: &str, id: &str| {
            json!({
                "operationId": format!("{id}{}", t.kind),
                "parameters": [parameter("dryRun"), parameter("fieldManager"), parameter("fieldValidation")],
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "responses": {"200": {"description": "OK"}},
            })
        };
        let base = if t.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", t.plural)
        } else {
            format!("{prefix}/{}", t.plural)
        };
        paths.insert(
            base.clone(),
            json!({"post": operation("post", "create"), "get": operation("list", "list")}),
        );
        paths.insert(
            format!("{base}/{{name}}"),
            json!({
            "get": operation("get", "read"), "put": operation("put", "replace"),
            "patch": operation("patch", "patch"), "delete": operation("delete", "delete")}),
        );
        let schema_name = format!(
            "{}.{}.{}",
            if t.group.is_empty() {
                "io.k8s.api.core"
            } else {
                t.group.as_str()
            },
            t.version,
            t.kind
        );
        let mut schema = t.schema.clone().unwrap_or_else(
            || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        );
        schema["x-kubernetes-group-version-kind"] = json!([gvk]);
        schemas.insert(schema_name, schema);
    }
    json_response(
        StatusCode::OK,
        &json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.37.0"},
            "paths": paths,
            "components": {"schemas": schemas},
        }),
    )
}

pub(super) fn group_list(shared: &Shared) -> Value {
    let groups: Vec<Value> = shared
        .lock()
        .registry
        .groups()
        .into_iter()
        .map(|(group, versions)| {
            let entries: Vec<Value> = versions
                .iter()
                .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
                .collect();
            json!({"name": group, "versions": entries, "preferredVersion": entries.first().cloned().unwrap_or(Value::Null)})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(super) fn resource_list(shared: &Shared, group: &str, version: &str, path: &str) -> Response {
    let cluster = shared.lock();
    let types = cluster.registry.in_group_version(group, version);
    if types.is_empty() {
        return error_response(&ApiError::path_not_found(path));
    }
    let verbs = [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ];
    let mut resources = Vec::new();
    for t in types {
        let mut entry = json!({"name": t.plural, "singularName": t.singular, "namespaced": t.namespaced,
            "kind": t.kind, "verbs": verbs});
        if !t.short_names.is_empty() {
            entry["shortNames"] = json!(t.short_names);
        }
        if !t.categories.is_empty() {
            entry["categories"] = json!(t.categories);
        }
        resources.push(entry);
        if t.status_subresource {
            resources.push(json!({"name": format!("{}/status", t.plural), "singularName": "", "namespaced": t.namespaced,
                "kind": t.kind, "verbs": ["get", "patch", "update"]}));
        }
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    json_response(
        StatusCode::OK,
        &json!({"kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": group_version, "resources": resources}),
    )
}
