//! The HTTP face of kubesim: routes Kubernetes API paths to [`crate::api`] verbs, serves
//! discovery, OpenAPI and Table output, streams watches, and applies counters and faults.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast, mpsc};

use crate::api::View;
use crate::api::{Cluster, DeleteOptions, FieldValidation, ListOptions, PatchType, WriteOptions};
use crate::error::ApiError;
use crate::faults::{FaultRule, Faults};
use crate::registry::ResourceType;
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{Event, EventType, Stored};
use crate::table;

/// State shared by the server, the simulated kubelet, the garbage collector and the library.
pub struct Shared {
    pub cluster: Mutex<Cluster>,
    pub faults: Faults,
    pub kubelet: Arc<crate::kubelet::Kubelet>,
    pub bookmark_interval: Duration,
    /// Woken after every write, for the background controllers.
    pub changed: Notify,
    /// What the simulated kubelet's containers wrote.
    pub logs: crate::logs::Logs,
}

impl Shared {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Cluster> {
        self.cluster
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

pub fn router(shared: Arc<Shared>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(shared)
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn error_response(err: &ApiError) -> Response {
    let status = StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(status, &err.status());
    if let Some(seconds) = err.retry_after
        && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

fn percent_decode(text: &str) -> String {
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

struct Query(Vec<(String, String)>);

impl Query {
    fn parse(raw: Option<&str>) -> Self {
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

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }
}

/// A parsed resource path.
struct Target {
    rt: ResourceType,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

impl Target {
    fn counter_name(&self) -> String {
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

/// The API server's limit on a request body (3 MiB): larger writes are refused with 413.
const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_REQUEST_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(err) => {
            let over_limit = std::error::Error::source(&err)
                .is_some_and(|e| e.is::<http_body_util::LengthLimitError>());
            return error_response(&if over_limit {
                ApiError::too_large(MAX_REQUEST_BODY_BYTES)
            } else {
                ApiError::bad_request(format!("the request body could not be read: {err}"))
            });
        }
    };
    let query = Query::parse(parts.uri.query());
    let path = parts.uri.path().trim_end_matches('/').to_owned();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segments.as_slice() {
        ["version"] => return json_response(StatusCode::OK, &version()),
        ["healthz" | "readyz" | "livez"] => return (StatusCode::OK, "ok").into_response(),
        ["openapi", "v2"] => return json_response(StatusCode::OK, &openapi_v2()),
        ["openapi", "v3"] => return json_response(StatusCode::OK, &openapi_v3_root(&shared)),
        ["openapi", "v3", "api", "v1"] => {
            return openapi_v3_group_version(&shared, "", "v1", &path);
        }
        ["openapi", "v3", "apis", group, version] => {
            return openapi_v3_group_version(&shared, group, version, &path);
        }
        ["kubesim", rest @ ..] => return control(&shared, &parts.method, rest, &body),
        ["api"] => {
            return json_response(
                StatusCode::OK,
                &json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": parts.headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1")}]}),
            );
        }
        ["apis"] => return json_response(StatusCode::OK, &group_list(&shared)),
        ["apis", group] => {
            return match group_list(&shared)["groups"]
                .as_array()
                .and_then(|g| g.iter().find(|g| g["name"] == *group))
            {
                Some(found) => {
                    let mut g = found.clone();
                    g["kind"] = json!("APIGroup");
                    g["apiVersion"] = json!("v1");
                    json_response(StatusCode::OK, &g)
                }
                None => error_response(&ApiError::path_not_found(&path)),
            };
        }
        ["api", "v1"] => return resource_list(&shared, "", "v1", &path),
        ["apis", group, version] => return resource_list(&shared, group, version, &path),
        _ => {}
    }
    let (group, version, rest): (&str, &str, &[&str]) = match segments.as_slice() {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", group, version, rest @ ..] => (group, version, rest),
        _ => return error_response(&ApiError::path_not_found(&path)),
    };
    let target = match resolve(&shared, group, version, rest) {
        Ok(target) => target,
        Err(err) => return error_response(&err),
    };
    let verb = verb_of(&parts.method, &target, &query);
    let agent = parts
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    shared.faults.count_for(agent, verb, &target.counter_name());
    let latency = shared.faults.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if let Some(rule) = shared.faults.roll(verb, &target.counter_name()) {
        let err = if rule.status == 429 {
            ApiError::too_many_requests(rule.retry_after_seconds.unwrap_or(1))
        } else {
            let mut err = ApiError::injected(rule.status);
            err.retry_after = rule.retry_after_seconds;
            err
        };
        return error_response(&err);
    }
    if verb == "get"
        && target.rt.storage_key() == crate::api::POD_KEY
        && target.subresource.as_deref() == Some("log")
    {
        return pod_log(shared, &target, &query);
    }
    let as_table = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("as=Table"));
    let mut warnings = Vec::new();
    let result = match verb {
        "watch" => return watch(shared, target, &query, as_table),
        "list" => {
            return match list(&shared, &target, &query, as_table) {
                Ok(response) => response,
                Err(err) => error_response(&err),
            };
        }
        "get" => get(&shared, &target, as_table),
        "create" => request_object(&parts.headers, &body).and_then(|object| {
            let options = write_options(&query)?;
            let namespace = target.namespace.clone().unwrap_or_default();
            write(&shared, &mut warnings, |cluster| {
                cluster.create(&target.rt, &namespace, object, &options)
            })
        }),
        "update" => request_object(&parts.headers, &body).and_then(|object| {
            let options = write_options(&query)?;
            write(&shared, &mut warnings, |cluster| {
                cluster.update(
                    &target.rt,
                    target.namespace.as_deref().unwrap_or(""),
                    target.name.as_deref().unwrap_or(""),
                    target.subresource.as_deref(),
                    object,
                    &options,
                )
            })
        }),
        "patch" => patch_type(&parts.headers).and_then(|patch_type| {
            let options = write_options(&query)?;
            write(&shared, &mut warnings, |cluster| {
                cluster.patch(
                    &target.rt,
                    target.namespace.as_deref().unwrap_or(""),
                    target.name.as_deref().unwrap_or(""),
                    target.subresource.as_deref(),
                    patch_type,
                    &body,
                    &options,
                )
            })
        }),
        "delete" => delete_options(&parts.headers, &body, &query).and_then(|options| {
            let result = shared.lock().delete(
                &target.rt,
                target.namespace.as_deref().unwrap_or(""),
                target.name.as_deref().unwrap_or(""),
                &options,
            );
            shared.faults.record_delete(crate::faults::DeleteRequest {
                resource: target.counter_name(),
                namespace: target.namespace.clone().unwrap_or_default(),
                name: target.name.clone().unwrap_or_default(),
                grace_period_seconds: options.grace_period_seconds,
                precondition_uid: options.precondition_uid.clone(),
                status: result.as_ref().map_or_else(|e| e.code, |_| 200),
            });
            result
        }),
        "deletecollection" => delete_collection(&shared, &target, &query, &parts.headers, &body),
        _ => Err(ApiError::method_not_allowed(format!(
            "{} is not supported here",
            parts.method
        ))),
    };
    if matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    ) {
        shared.changed.notify_waiters();
    }
    match result {
        Ok(value) => {
            let status = if verb == "create" && query.get("dryRun").is_none_or(|d| d != "All") {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            let mut response = json_response(status, &value);
            for warning in warnings {
                // RFC 7234 warn-code 299, with the text quoted, as the API server sends it.
                let text = format!("299 - {}", Value::String(warning));
                if let Ok(value) = HeaderValue::from_str(&text) {
                    response.headers_mut().append(header::WARNING, value);
                }
            }
            response
        }
        Err(err) => error_response(&err),
    }
}

/// Runs one write under the lock and collects the warnings it leaves for the response.
fn write(
    shared: &Shared,
    warnings: &mut Vec<String>,
    operation: impl FnOnce(&mut Cluster) -> Result<Value, ApiError>,
) -> Result<Value, ApiError> {
    let mut cluster = shared.lock();
    cluster.warnings.clear();
    let result = operation(&mut cluster);
    *warnings = std::mem::take(&mut cluster.warnings);
    result
}

fn verb_of(method: &Method, target: &Target, query: &Query) -> &'static str {
    match (method.as_str(), target.name.is_some()) {
        ("GET", false) if query.flag("watch") => "watch",
        ("GET", false) => "list",
        ("GET", true) => "get",
        ("POST", false) => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unsupported",
    }
}

fn resolve(shared: &Shared, group: &str, version: &str, rest: &[&str]) -> Result<Target, ApiError> {
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
fn request_object(headers: &HeaderMap, body: &Bytes) -> Result<Value, ApiError> {
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

fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
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
fn with_content_type(mut err: ApiError, headers: &HeaderMap) -> ApiError {
    if let Some(content_type) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|c| c.to_str().ok())
    {
        err.message = format!("{} (Content-Type {content_type})", err.message);
    }
    err
}

fn write_options(query: &Query) -> Result<WriteOptions, ApiError> {
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
    })
}

fn patch_type(headers: &HeaderMap) -> Result<PatchType, ApiError> {
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

fn delete_options(
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

fn list_options(query: &Query) -> Result<ListOptions, ApiError> {
    Ok(ListOptions {
        labels: LabelSelector::parse(query.get("labelSelector").unwrap_or(""))?,
        fields: FieldSelector::parse(query.get("fieldSelector").unwrap_or(""))?,
        limit: query
            .get("limit")
            .and_then(|l| l.parse().ok())
            .filter(|l| *l > 0),
        continue_token: query
            .get("continue")
            .filter(|c| !c.is_empty())
            .map(str::to_owned),
    })
}

fn get(shared: &Shared, target: &Target, as_table: bool) -> Result<Value, ApiError> {
    if let Some(sub) = &target.subresource
        && !(sub == "status" && target.rt.status_subresource)
    {
        return Err(ApiError::path_not_found(&format!("subresource {sub}")));
    }
    let cluster = shared.lock();
    let object = cluster.get(
        &target.rt,
        target.namespace.as_deref().unwrap_or(""),
        target.name.as_deref().unwrap_or(""),
    )?;
    if as_table {
        return Ok(table::table(
            &target.rt,
            &[&object],
            object["metadata"]["resourceVersion"].as_str().unwrap_or(""),
        ));
    }
    Ok((*object).clone())
}

fn list(
    shared: &Shared,
    target: &Target,
    query: &Query,
    as_table: bool,
) -> Result<Response, ApiError> {
    let options = list_options(query)?;
    // Serialized after the lock is released: the items are shared, immutable snapshots.
    let list = shared
        .lock()
        .list(&target.rt, target.namespace.as_deref(), &options)?;
    if as_table {
        let values = list.values();
        let items: Vec<&Value> = values.iter().collect();
        let mut table = table::table(
            &target.rt,
            &items,
            list.metadata["resourceVersion"].as_str().unwrap_or(""),
        );
        if let Some(token) = list.metadata.get("continue") {
            table["metadata"]["continue"] = token.clone();
        }
        return Ok(json_response(StatusCode::OK, &table));
    }
    let mut response = (StatusCode::OK, list.to_json()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

fn delete_collection(
    shared: &Shared,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Value, ApiError> {
    let options = list_options(query)?;
    let delete = delete_options(headers, body, query)?;
    let mut cluster = shared.lock();
    let list = cluster.list(&target.rt, target.namespace.as_deref(), &options)?;
    let mut deleted = Vec::new();
    for item in list.values() {
        let namespace = item["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let name = item["metadata"]["name"].as_str().unwrap_or("").to_owned();
        if let Ok(object) = cluster.delete(&target.rt, &namespace, &name, &delete) {
            deleted.push(object);
        }
    }
    Ok(
        json!({"kind": format!("{}List", target.rt.kind), "apiVersion": target.rt.api_version(),
              "metadata": {"resourceVersion": cluster.store.revision().to_string()}, "items": deleted}),
    )
}

/// What a stored change is to this watch, as the API server tells it: nothing (another resource
/// or namespace, or outside the selection before and after), or ADDED, MODIFIED or DELETED. An
/// object that starts matching the selectors is ADDED; one that stops matching is DELETED
/// (carrying its new state). Labels come from the index; the object is parsed only for a field
/// selector.
fn delivered(
    target: &Target,
    key: &str,
    labels: &LabelSelector,
    fields: &FieldSelector,
    event: &Event,
) -> Option<&'static str> {
    let ours = event.resource == key
        && target
            .namespace
            .as_deref()
            .is_none_or(|ns| !target.rt.namespaced || ns == event.namespace);
    if !ours {
        return None;
    }
    let view = View::of(&target.rt);
    let is = view.selected(labels, fields, &event.object);
    match (&event.kind, &event.previous) {
        (EventType::Modified, Some(previous)) => {
            match (view.selected(labels, fields, previous), is) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => Some("DELETED"),
                (false, false) => None,
            }
        }
        (kind, _) => is.then_some(kind.as_str()),
    }
}

/// One line of a watch stream, before encoding.
enum Outgoing {
    /// ADDED, MODIFIED or DELETED, with the object as stored.
    Change(&'static str, Stored),
    /// BOOKMARK or ERROR, built here.
    Synthetic(Value),
}

fn watch(shared: Arc<Shared>, target: Target, query: &Query, as_table: bool) -> Response {
    let options = match list_options(query) {
        Ok(options) => options,
        Err(err) => return error_response(&err),
    };
    let send_initial = query.flag("sendInitialEvents");
    if send_initial && query.get("resourceVersionMatch") != Some("NotOlderThan") {
        return error_response(&ApiError::invalid(
            "",
            "ListOptions",
            "",
            "resourceVersionMatch: Forbidden: sendInitialEvents requires resourceVersionMatch=NotOlderThan",
        ));
    }
    let bookmarks = query.flag("allowWatchBookmarks");
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs);
    let key = target.rt.storage_key();
    let requested = query.get("resourceVersion").unwrap_or("");

    // Under the lock only cheap clones of stored objects are taken; encoding happens later.
    let (initial, receiver, start_revision) = {
        let cluster = shared.lock();
        let receiver = cluster.store.subscribe();
        let current = cluster.store.revision();
        if send_initial || requested.is_empty() || requested == "0" {
            let mut initial: Vec<Outgoing> = cluster
                .store
                .list(
                    &key,
                    target.namespace.as_deref().filter(|_| target.rt.namespaced),
                )
                .filter(|(_, o)| View::of(&target.rt).selected(&options.labels, &options.fields, o))
                .map(|(_, o)| Outgoing::Change("ADDED", o.clone()))
                .collect();
            if send_initial {
                initial.push(Outgoing::Synthetic(json!({"type": "BOOKMARK", "object": {
                    "kind": target.rt.kind, "apiVersion": target.rt.api_version(),
                    "metadata": {"resourceVersion": current.to_string(),
                                 "annotations": {"k8s.io/initial-events-end": "true"}}}})));
            }
            (initial, Some(receiver), current)
        } else {
            let Ok(since) = requested.parse::<u64>() else {
                return error_response(&ApiError::bad_request(format!(
                    "invalid resourceVersion {requested:?}"
                )));
            };
            match cluster.store.changes_since(since) {
                Ok(changes) => {
                    let replay = changes
                        .iter()
                        .filter_map(|e| {
                            let kind =
                                delivered(&target, &key, &options.labels, &options.fields, e)?;
                            Some(Outgoing::Change(kind, e.object.clone()))
                        })
                        .collect();
                    (replay, Some(receiver), current)
                }
                Err(too_old) => {
                    let err = ApiError::gone(format!(
                        "too old resource version: {since} ({})",
                        too_old.oldest
                    ));
                    (
                        vec![Outgoing::Synthetic(
                            json!({"type": "ERROR", "object": err.status()}),
                        )],
                        None,
                        current,
                    )
                }
            }
        }
    };

    let (sender, mut outgoing) = mpsc::channel::<Bytes>(256);
    let mut epoch = shared.faults.watch_epoch();
    let interval = shared.bookmark_interval;
    let rt = target.rt.clone();
    let view = View::of(&rt);
    tokio::spawn(async move {
        let encode = |line: &Outgoing| -> Bytes {
            let mut text = match line {
                Outgoing::Change(kind, object) if as_table => {
                    let value = view.value(&object.value());
                    let table = table::table(
                        &rt,
                        &[&value],
                        value["metadata"]["resourceVersion"].as_str().unwrap_or(""),
                    );
                    json!({"type": kind, "object": table}).to_string()
                }
                Outgoing::Change(kind, object) => {
                    format!("{{\"type\":\"{kind}\",\"object\":{}}}", view.text(object))
                }
                Outgoing::Synthetic(value) => value.to_string(),
            };
            text.push('\n');
            Bytes::from(text)
        };
        for line in &initial {
            if sender.send(encode(line)).await.is_err() {
                return;
            }
        }
        drop(initial);
        let Some(mut receiver) = receiver else { return };
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let mut ticker = tokio::time::interval(interval);
        ticker.tick().await;
        let mut last_revision = start_revision;
        loop {
            let sleep_until_deadline = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                received = receiver.recv() => match received {
                    Ok(event) => {
                        if event.revision <= start_revision {
                            continue;
                        }
                        let Some(kind) = delivered(&target, &key, &options.labels, &options.fields, &event) else {
                            continue;
                        };
                        last_revision = event.revision;
                        if sender.send(encode(&Outgoing::Change(kind, event.object.clone()))).await.is_err() {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let err = ApiError::gone("watch fell too far behind; too old resource version");
                        let _ = sender.send(encode(&Outgoing::Synthetic(json!({"type": "ERROR", "object": err.status()})))).await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = ticker.tick(), if bookmarks => {
                    let bookmark = json!({"type": "BOOKMARK", "object": {"kind": target.rt.kind, "apiVersion": target.rt.api_version(),
                        "metadata": {"resourceVersion": last_revision.to_string()}}});
                    if sender.send(encode(&Outgoing::Synthetic(bookmark))).await.is_err() {
                        return;
                    }
                }
                _ = epoch.changed() => return,
                _ = sleep_until_deadline => return,
                _ = sender.closed() => return,
            }
        }
    });
    let stream = futures::stream::poll_fn(move |cx| {
        outgoing.poll_recv(cx).map(|b| b.map(Ok::<_, Infallible>))
    });
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// `GET .../pods/NAME/log`: the container's lines (`container`, `previous`, `tailLines`,
/// `timestamps`), and with `follow` every new one until the container's run ends or the pod
/// goes.
fn pod_log(shared: Arc<Shared>, target: &Target, query: &Query) -> Response {
    let namespace = target.namespace.clone().unwrap_or_default();
    let name = target.name.clone().unwrap_or_default();
    let Some(pod) = shared
        .lock()
        .store
        .get(crate::api::POD_KEY, &namespace, &name)
    else {
        return error_response(&ApiError::not_found("", "pods", &name));
    };
    let uid = pod["metadata"]["uid"].as_str().unwrap_or("").to_owned();
    let containers: Vec<String> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect();
    let container = match (query.get("container"), containers.as_slice()) {
        (Some(wanted), _) if containers.iter().any(|c| c == wanted) => wanted.to_owned(),
        (Some(wanted), _) => {
            return error_response(&ApiError::bad_request(format!(
                "container {wanted} is not valid for pod {name}"
            )));
        }
        (None, [only]) => only.clone(),
        (None, _) => {
            return error_response(&ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            )));
        }
    };
    let request = crate::logs::LogRequest {
        container,
        previous: query.flag("previous"),
        tail_lines: query.get("tailLines").and_then(|t| t.parse().ok()),
        timestamps: query.flag("timestamps"),
    };
    let first = match shared.logs.read(&uid, &request, None) {
        Ok(read) => read,
        Err(why) => return error_response(&ApiError::bad_request(why)),
    };
    let text_response = |body: Body| {
        let mut response = Response::new(body);
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        response
    };
    if !query.flag("follow") || first.ended {
        return text_response(Body::from(first.text));
    }
    let (sender, mut outgoing) = tokio::sync::mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        let mut next = first.next;
        if sender.send(Bytes::from(first.text)).await.is_err() {
            return;
        }
        loop {
            // A line written between the read and the wait is seen at the latest a moment later.
            let _ = tokio::time::timeout(Duration::from_millis(250), shared.logs.written()).await;
            let gone = shared
                .lock()
                .store
                .get(crate::api::POD_KEY, &namespace, &name)
                .is_none_or(|p| p["metadata"]["uid"].as_str() != Some(uid.as_str()));
            let Ok(read) = shared.logs.read(&uid, &request, Some(next)) else {
                return;
            };
            next = read.next;
            if !read.text.is_empty() && sender.send(Bytes::from(read.text)).await.is_err() {
                return;
            }
            if read.ended || gone || sender.is_closed() {
                return;
            }
        }
    });
    let stream = futures::stream::poll_fn(move |cx| {
        outgoing.poll_recv(cx).map(|b| b.map(Ok::<_, Infallible>))
    });
    text_response(Body::from_stream(stream))
}

fn version() -> Value {
    json!({"major": "1", "minor": "37", "gitVersion": "v1.37.0-kubesim", "gitCommit": "kubesim",
           "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25",
           "compiler": "gc", "platform": "linux/amd64"})
}

fn openapi_v2() -> Value {
    // No schemas: kubectl's client-side validation then has nothing to reject, and the server
    // accepts any well-formed object.
    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.37.0"}, "paths": {}, "definitions": {}})
}

/// The OpenAPI v3 index: one document per served group-version.
fn openapi_v3_root(shared: &Shared) -> Value {
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
fn openapi_v3_group_version(shared: &Shared, group: &str, version: &str, path: &str) -> Response {
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

fn group_list(shared: &Shared) -> Value {
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

fn resource_list(shared: &Shared, group: &str, version: &str, path: &str) -> Response {
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

/// `/kubesim/...`: counters, faults, watch closing and history compaction over HTTP.
fn control(shared: &Shared, method: &Method, rest: &[&str], body: &Bytes) -> Response {
    match (method.as_str(), rest) {
        ("GET", ["counters"]) => json_response(StatusCode::OK, &json!(shared.faults.counters())),
        ("GET", ["deletes"]) => json_response(StatusCode::OK, &json!(shared.faults.deletes())),
        ("DELETE", ["counters"]) => {
            shared.faults.reset_counters();
            json_response(StatusCode::OK, &json!({}))
        }
        ("GET", ["faults"]) => json_response(
            StatusCode::OK,
            &json!({"rules": shared.faults.rules(), "latencyMillis": shared.faults.latency().as_millis() as u64}),
        ),
        ("POST", ["faults"]) => match serde_json::from_slice::<FaultRule>(body) {
            Ok(rule) => {
                shared.faults.add_rule(rule);
                json_response(StatusCode::OK, &json!({}))
            }
            Err(e) => error_response(&ApiError::bad_request(format!("invalid fault rule: {e}"))),
        },
        ("POST", ["latency"]) => match serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v["millis"].as_u64())
        {
            Some(millis) => {
                shared.faults.set_latency(Duration::from_millis(millis));
                json_response(StatusCode::OK, &json!({}))
            }
            None => error_response(&ApiError::bad_request("expected {\"millis\": N}")),
        },
        ("DELETE", ["faults"]) => {
            shared.faults.clear();
            json_response(StatusCode::OK, &json!({}))
        }
        ("GET", ["kubelet", "rules"]) => {
            json_response(StatusCode::OK, &json!(shared.kubelet.rules()))
        }
        ("POST", ["kubelet", "rules"]) => {
            match serde_json::from_slice::<crate::kubelet::KubeletRule>(body) {
                Ok(rule) => {
                    shared.kubelet.add_rule(rule);
                    json_response(StatusCode::OK, &json!({}))
                }
                Err(e) => {
                    error_response(&ApiError::bad_request(format!("invalid kubelet rule: {e}")))
                }
            }
        }
        ("DELETE", ["kubelet", "rules"]) => {
            shared.kubelet.set_rules(Vec::new());
            json_response(StatusCode::OK, &json!({}))
        }
        ("POST", ["close-watches"]) => {
            shared.faults.close_watches();
            json_response(StatusCode::OK, &json!({}))
        }
        ("POST", ["compact"]) => {
            shared.lock().store.compact();
            json_response(StatusCode::OK, &json!({}))
        }
        _ => error_response(&ApiError::path_not_found(&format!(
            "/kubesim/{}",
            rest.join("/")
        ))),
    }
}
