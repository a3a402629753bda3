//! The HTTP face of kubesim: routes Kubernetes API paths to [`crate::api`] verbs and applies
//! counters and faults; reading requests, the read verbs, watches, logs, discovery and the
//! control endpoints each have a module here.

mod control;
mod discovery;
mod logs;
mod request;
mod verbs;
mod watch;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::api::{Cluster, DeleteOptions, PatchType};
use crate::error::ApiError;
use crate::faults::is_write;
use crate::shared::Shared;

use control::control;
use discovery::{
    group_list, openapi_v2, openapi_v3_group_version, openapi_v3_root, resource_list, version,
};
use logs::pod_log;
use request::{Query, Target, delete_options, patch_type, request_object, resolve, write_options};
use verbs::{delete_collection, get, list};
use watch::watch;

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

/// The API server's limit on a request body (3 MiB): larger writes are refused with 413.
const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Whether `headers` carry the credentials kubesim was started with (always, without a token).
fn authenticated(shared: &Shared, headers: &axum::http::HeaderMap) -> bool {
    let Some(token) = &shared.token else {
        return true;
    };
    headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .is_some_and(|presented| presented == token)
}

/// One request, in the order the API server takes it: authenticate, read the body, serve the
/// fixed paths, resolve the resource, count and admit, then run the verb and answer.
async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    // As the API server does: authentication first, before anything else is looked at.
    if !authenticated(&shared, &parts.headers) {
        return error_response(&ApiError::unauthorized());
    }
    let body = match read_body(body).await {
        Ok(bytes) => bytes,
        Err(err) => return error_response(&err),
    };
    let query = Query::parse(parts.uri.query());
    let path = parts.uri.path().trim_end_matches('/').to_owned();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if let Some(response) = fixed_path(&shared, &parts, &segments, &path, &body) {
        return response;
    }
    let target = match resource_target(&shared, &segments, &path) {
        Ok(target) => target,
        Err(err) => return error_response(&err),
    };
    let verb = verb_of(&parts.method, &target, &query);
    if let Err(refused) = admit(&shared, &parts.headers, verb, &target).await {
        return refused;
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
        "get" => (get(&shared, &target, as_table), false),
        _ => {
            let creates = creates_object(&shared, verb, &parts.headers, &target);
            let result = write_verb(&shared, verb, &parts, &target, &query, &body, &mut warnings);
            (result, creates)
        }
    };
    if matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    ) {
        shared.changed.notify_waiters();
    }
    let (result, creates) = result;
    answer(creates, result, warnings)
}

/// Whether a write makes a new object, answered 201 as the API server answers it: every create
/// (a dry run's too) and a server-side apply of an object that does not exist yet.
fn creates_object(shared: &Shared, verb: &str, headers: &HeaderMap, target: &Target) -> bool {
    match verb {
        "create" => true,
        "patch" => {
            matches!(patch_type(headers), Ok(PatchType::Apply))
                && target.subresource.is_none()
                && target.name.as_deref().is_some_and(|name| {
                    shared
                        .lock()
                        .get(&target.rt, target.namespace.as_deref().unwrap_or(""), name)
                        .is_err()
                })
        }
        _ => false,
    }
}

/// The request body, refused with 413 past the API server's limit.
async fn read_body(body: axum::body::Body) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, MAX_REQUEST_BODY_BYTES)
        .await
        .map_err(|err| {
            let over_limit = std::error::Error::source(&err)
                .is_some_and(|e| e.is::<http_body_util::LengthLimitError>());
            if over_limit {
                ApiError::too_large(MAX_REQUEST_BODY_BYTES)
            } else {
                ApiError::bad_request(format!("the request body could not be read: {err}"))
            }
        })
}

/// The paths that name no resource: version, health, OpenAPI, discovery and kubesim's own
/// control endpoints; `None` for a path that goes on to resolve a resource.
fn fixed_path(
    shared: &Shared,
    parts: &Parts,
    segments: &[&str],
    path: &str,
    body: &Bytes,
) -> Option<Response> {
    let response = match segments {
        ["version"] => json_response(StatusCode::OK, &version()),
        ["healthz" | "readyz" | "livez"] => (StatusCode::OK, "ok").into_response(),
        ["openapi", "v2"] => openapi_v2_response(&parts.headers),
        ["openapi", "v3"] => json_response(StatusCode::OK, &openapi_v3_root(shared)),
        ["openapi", "v3", "api", "v1"] => openapi_v3_group_version(shared, "", "v1", path),
        ["openapi", "v3", "apis", group, version] => {
            openapi_v3_group_version(shared, group, version, path)
        }
        ["kubesim", rest @ ..] => control(shared, &parts.method, rest, body),
        ["api"] => json_response(StatusCode::OK, &api_versions(&parts.headers)),
        ["apis"] => json_response(StatusCode::OK, &group_list(shared)),
        ["apis", group] => api_group(shared, group, path),
        ["api", "v1"] => resource_list(shared, "", "v1", path),
        ["apis", group, version] => resource_list(shared, group, version, path),
        _ => return None,
    };
    Some(response)
}

fn openapi_v2_response(headers: &HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .unwrap_or_default();
    if accept.contains(discovery::OPENAPI_V2_PROTOBUF) {
        return (
            StatusCode::OK,
            // As the API server labels it: the media type asked for is not one that
            // Go's mime parser (kubectl's) accepts back.
            [(header::CONTENT_TYPE, "application/octet-stream")],
            discovery::openapi_v2_protobuf(),
        )
            .into_response();
    }
    json_response(StatusCode::OK, &openapi_v2())
}

fn api_versions(headers: &HeaderMap) -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1")}]})
}

fn api_group(shared: &Shared, group: &str, path: &str) -> Response {
    match group_list(shared)["groups"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["name"] == *group))
    {
        Some(found) => {
            let mut g = found.clone();
            g["kind"] = json!("APIGroup");
            g["apiVersion"] = json!("v1");
            json_response(StatusCode::OK, &g)
        }
        None => error_response(&ApiError::path_not_found(path)),
    }
}

/// The resource a `/api/v1/...` or `/apis/<group>/<version>/...` path names.
fn resource_target(shared: &Shared, segments: &[&str], path: &str) -> Result<Target, ApiError> {
    let (group, version, rest): (&str, &str, &[&str]) = match segments {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", group, version, rest @ ..] => (group, version, rest),
        _ => return Err(ApiError::path_not_found(path)),
    };
    resolve(shared, group, version, rest)
}

/// Counts the request, then applies the faults in force: stopped writes, latency and the
/// injected errors (the count comes first so refused requests are counted too).
async fn admit(
    shared: &Shared,
    headers: &HeaderMap,
    verb: &str,
    target: &Target,
) -> Result<(), Response> {
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    shared.faults.count_in(
        agent,
        verb,
        &target.counter_name(),
        target.namespace.as_deref(),
    );
    if is_write(verb) && !shared.faults.admit_write(agent) {
        return Err(error_response(&ApiError::writes_stopped()));
    }
    let latency = shared.faults.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if let Some(rule) = shared.faults.roll(verb, &target.counter_name()) {
        if rule.status == 429 {
            return Err(throttled(rule.retry_after_seconds.unwrap_or(1)));
        }
        let mut err = if rule.status == 403 {
            ApiError::forbidden(
                &target.rt.group,
                &target.rt.plural,
                target.subresource.as_deref(),
                target.name.as_deref(),
                verb,
                target.namespace.as_deref().filter(|_| target.rt.namespaced),
            )
        } else {
            ApiError::injected(rule.status)
        };
        err.retry_after = rule.retry_after_seconds;
        return Err(error_response(&err));
    }
    Ok(())
}

/// A 429 as API Priority and Fairness answers a request its priority level rejects, the 429 a
/// client meets under load: a line of plain text (Go's `http.Error`), not a `Status`, and how
/// long to wait only in `Retry-After`.
fn throttled(retry_after: u64) -> Response {
    let mut response = (
        StatusCode::TOO_MANY_REQUESTS,
        "Too many requests, please try again later.\n",
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    response
}

/// Runs a write verb (create, update, patch, delete, deletecollection); any other verb is
/// refused as not allowed.
fn write_verb(
    shared: &Shared,
    verb: &str,
    parts: &Parts,
    target: &Target,
    query: &Query,
    body: &Bytes,
    warnings: &mut Vec<String>,
) -> Result<Value, ApiError> {
    match verb {
        "create" => request_object(&parts.headers, body).and_then(|object| {
            let options = write_options(query)?;
            let namespace = target.namespace.clone().unwrap_or_default();
            write(shared, warnings, |cluster| {
                cluster.create(&target.rt, &namespace, object, &options)
            })
        }),
        "update" => request_object(&parts.headers, body).and_then(|object| {
            let options = write_options(query)?;
            write(shared, warnings, |cluster| {
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
            let options = write_options(query)?;
            write(shared, warnings, |cluster| {
                cluster.patch(
                    &target.rt,
                    target.namespace.as_deref().unwrap_or(""),
                    target.name.as_deref().unwrap_or(""),
                    target.subresource.as_deref(),
                    patch_type,
                    body,
                    &options,
                )
            })
        }),
        "delete" => delete_options(&parts.headers, body, query)
            .and_then(|options| delete(shared, target, &options)),
        "deletecollection" => delete_collection(shared, target, query, &parts.headers, body),
        _ => Err(ApiError::method_not_allowed(format!(
            "{} is not supported here",
            parts.method
        ))),
    }
}

/// Deletes the one object and records the request for the faults' log, whatever its outcome.
fn delete(shared: &Shared, target: &Target, options: &DeleteOptions) -> Result<Value, ApiError> {
    let result = shared.lock().delete(
        &target.rt,
        target.namespace.as_deref().unwrap_or(""),
        target.name.as_deref().unwrap_or(""),
        options,
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
}

/// The response to a verb that ran: 201 when it made a new object, with the warnings the write
/// left as `Warning` headers.
fn answer(creates: bool, result: Result<Value, ApiError>, warnings: Vec<String>) -> Response {
    match result {
        Ok(value) => {
            let status = if creates {
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
