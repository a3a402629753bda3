//! Reading a request: the path resolved to a resource type and object, query parameters,
//! the body (JSON, YAML or protobuf) and the options of each verb.

use axum::body::Bytes;
use axum::http::{HeaderMap, header};
use serde_json::{Value, json};

use crate::api::{DeleteOptions, FieldValidation, ListOptions, PatchType, WriteOptions};
use crate::error::ApiError;
use crate::registry::ResourceType;
use crate::selector::{FieldSelector, LabelSelector};
use crate::shared::Shared;

pub(super) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let decoded = match bytes[i] {
            b'%' => bytes
                .get(i + 1..i + 3)
                .and_then(|hex| std::str::from_utf8(hex).ok())
                .and_then(|hex| u8::from_str_radix(hex, 16).ok()),
            _ => None,
        };
        match (decoded, bytes[i]) {
            (Some(byte), _) => {
                out.push(byte);
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, other) => {
                out.push(other);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(super) struct Query(Vec<(String, String)>);

impl Query {
    pub(super) fn parse(raw: Option<&str>) -> Self {
        Query(
            raw.unwrap_or("")
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|pair| {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    (percent_decode(k), percent_decode(v))
                })
                .collect(),
        )
    }

    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }
}

/// A parsed resource path.
pub(super) struct Target {
    pub(super) rt: ResourceType,
    pub(super) namespace: Option<String>,
    pub(super) name: Option<String>,
    pub(super) subresource: Option<String>,
}

impl Target {
    pub(super) fn counter_name(&self) -> String {
        let mut name = if self.rt.group.is_empty() {
            self.rt.plural.clone()
        } else {
            format!("{}.{}", self.rt.plural, self.rt.group)
        };
        if let Some(sub) = &self.subresource {
            name.push('/');
            name.push_str(sub);
        }
        name
    }
}

pub(super) fn resolve(
    shared: &Shared,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Target, ApiError> {
    let cluster = shared.lock();
    let find = |plural: &str| {
        cluster
            .registry
            .find(group, version, plural)
            .cloned()
            .ok_or_else(|| ApiError::path_not_found(&format!("{group}/{version}/{plural}")))
    };
    let target = |rt, namespace: Option<&str>, name: Option<&str>, sub: Option<&str>| Target {
        rt,
        namespace: namespace.map(str::to_owned),
        name: name.map(str::to_owned),
        subresource: sub.map(str::to_owned),
    };
    Ok(match rest {
        ["namespaces", ns, plural, tail @ ..] if !matches!(*plural, "status" | "finalize") => {
            let rt = find(plural)?;
            if !rt.namespaced {
                return Err(ApiError::path_not_found(&format!(
                    "{plural} is not namespaced"
                )));
            }
            match tail {
                [] => target(rt, Some(ns), None, None),
                [name] => target(rt, Some(ns), Some(name), None),
                [name, sub] => target(rt, Some(ns), Some(name), Some(sub)),
                _ => return Err(ApiError::path_not_found(&rest.join("/"))),
            }
        }
        [plural] => target(find(plural)?, None, None, None),
        [plural, name] => target(find(plural)?, None, Some(name), None),
        [plural, name, sub] => target(find(plural)?, None, Some(name), Some(sub)),
        _ => return Err(ApiError::path_not_found(&rest.join("/"))),
    })
}

/// The object a create, update or delete carries: JSON, YAML, or Kubernetes protobuf (decoded
/// into the JSON the same request would have carried).
pub(super) fn request_object(headers: &HeaderMap, body: &Bytes) -> Result<Value, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|c| c.to_str().ok())
        .unwrap_or("");
    let media = content_type.split(';').next().unwrap_or("").trim();
    match media {
        crate::protobuf::MEDIA_TYPE => crate::protobuf::decode(body),
        "" | "application/json" | "application/yaml" | "application/x-yaml" | "text/yaml" => {
            parse_body(body).map_err(|e| with_content_type(e, headers))
        }
        other => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format ({other:?}) - accepted media \
             types include: application/json, application/yaml, {}",
            crate::protobuf::MEDIA_TYPE
        ))),
    }
}

pub(super) fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .or_else(|_| {
            std::str::from_utf8(body)
                .ok()
                .and_then(|text| serde_yaml::from_str(text).ok())
                .ok_or(())
        })
        .map_err(|_| ApiError::bad_request("the request body is not a valid JSON or YAML object"))
}

/// Names the media type in a body error: a client sending protobuf must learn that kubesim
/// speaks JSON only.
pub(super) fn with_content_type(mut err: ApiError, headers: &HeaderMap) -> ApiError {
    if let Some(content_type) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|c| c.to_str().ok())
    {
        err.message = format!("{} (Content-Type {content_type})", err.message);
    }
    err
}

pub(super) fn write_options(query: &Query) -> Result<WriteOptions, ApiError> {
    let field_validation = match query.get("fieldValidation") {
        None | Some("" | "Warn") => FieldValidation::Warn,
        Some("Ignore") => FieldValidation::Ignore,
        Some("Strict") => FieldValidation::Strict,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
            )));
        }
    };
    Ok(WriteOptions {
        dry_run: query.get("dryRun") == Some("All"),
        field_manager: query.get("fieldManager").map(str::to_owned),
        force: query.flag("force"),
        field_validation,
        unchecked: false,
    })
}

pub(super) fn patch_type(headers: &HeaderMap) -> Result<PatchType, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|c| c.to_str().ok())
        .unwrap_or("");
    let media = content_type.split(';').next().unwrap_or("").trim();
    match media {
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/strategic-merge-patch+json" => Ok(PatchType::StrategicMerge),
        "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
        other => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format ({other:?})"
        ))),
    }
}

pub(super) fn delete_options(
    headers: &HeaderMap,
    body: &Bytes,
    query: &Query,
) -> Result<DeleteOptions, ApiError> {
    let body: Value = if body.is_empty() {
        json!({})
    } else {
        request_object(headers, body)?
    };
    let dry_run = query.get("dryRun") == Some("All")
        || body["dryRun"]
            .as_array()
            .is_some_and(|d| d.iter().any(|v| v == "All"));
    Ok(DeleteOptions {
        dry_run,
        grace_period_seconds: query
            .get("gracePeriodSeconds")
            .and_then(|g| g.parse().ok())
            .or_else(|| body["gracePeriodSeconds"].as_i64()),
        propagation: query
            .get("propagationPolicy")
            .map(str::to_owned)
            .or_else(|| body["propagationPolicy"].as_str().map(str::to_owned)),
        precondition_uid: body["preconditions"]["uid"].as_str().map(str::to_owned),
        precondition_resource_version: body["preconditions"]["resourceVersion"]
            .as_str()
            .map(str::to_owned),
    })
}

/// What a list or a watch selects, once its options are ones the API server accepts.
pub(super) fn list_options(query: &Query) -> Result<ListOptions, ApiError> {
    check_resource_version(query)?;
    // A list at resourceVersion 0 is answered from the API server's watch cache, whole: its
    // `limit` is not honoured and there is no continue token (as measured on kube-apiserver
    // 1.37 for every kind the operator and the plugin list: tests/acceptance/test_differential.py).
    let from_cache = query.get("resourceVersion") == Some("0") && !query.flag("watch");
    Ok(ListOptions {
        labels: LabelSelector::parse(query.get("labelSelector").unwrap_or(""))?,
        fields: FieldSelector::parse(query.get("fieldSelector").unwrap_or(""))?,
        limit: query
            .get("limit")
            .and_then(|l| l.parse().ok())
            .filter(|l| *l > 0 && !from_cache),
        continue_token: query
            .get("continue")
            .filter(|c| !c.is_empty())
            .map(str::to_owned),
    })
}

/// `resourceVersion`, `resourceVersionMatch` and `sendInitialEvents` as the API server's
/// `ValidateListOptions` judges them, with its status codes and words (kubesim itself always
/// answers from its latest state, which every accepted combination allows).
fn check_resource_version(query: &Query) -> Result<(), ApiError> {
    const FIELD: &str = "resourceVersionMatch";
    let forbidden = |why: &str| {
        ApiError::invalid_option(
            "ListOptions",
            FIELD,
            "FieldValueForbidden",
            &format!("Forbidden: {why}"),
        )
    };
    let version = query.get("resourceVersion").unwrap_or("");
    if !version.is_empty() && version.parse::<u64>().is_err() {
        return Err(ApiError::bad_request(format!(
            "invalid resource version: resourceVersion: Invalid value: {version:?}: strconv.ParseUint: parsing {version:?}: invalid syntax"
        )));
    }
    let matching = query.get(FIELD).unwrap_or("");
    if !matches!(matching, "" | "Exact" | "NotOlderThan") {
        return Err(ApiError::invalid_option(
            "ListOptions",
            FIELD,
            "FieldValueNotSupported",
            &format!(
                "Unsupported value: {matching:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
            ),
        ));
    }
    let watch = query.flag("watch");
    if query.get("sendInitialEvents").is_some() {
        if !watch {
            return Err(forbidden("sendInitialEvents is forbidden for list"));
        }
        if matching != "NotOlderThan" {
            return Err(forbidden(
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        return Ok(());
    }
    if matching.is_empty() {
        return Ok(());
    }
    if watch {
        return Err(forbidden("resourceVersionMatch is forbidden for watch"));
    }
    if version.is_empty() {
        return Err(forbidden(
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ));
    }
    if matching == "Exact" && version == "0" {
        return Err(forbidden(
            "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
        ));
    }
    Ok(())
}
