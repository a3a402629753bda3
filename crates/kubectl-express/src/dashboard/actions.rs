//! The dashboard's actions (pause, resume, abort, retry, bounce, an OperatorRelease's requests
//! and a FleetRelease's): the same [`express_client::write::control`] and [`crate::write::release`] functions the CLI verbs call,
//! in the DC the request names.
//!
//! Across DCs each button carries a token of its own, bound to (context, tenant, action)
//! ([`super::links`]), so that a confirmation given for dc-a cannot act in dc-b, on another
//! tenant, or as another action. A DC marked read-only, or that cannot be read, takes no action
//! at all: the dashboard acts only where it can see the result.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::dcs::{Dc, dc_refusal};
use super::links::{Binding, TOKEN_HEADER, fleet_release_binding};
use super::state::{AppState, RELEASE_READ_DEADLINE, refuse};
use crate::write::release::{self, Request as ReleaseRequest};
use express_client::exit::{Code, Exit};
use express_client::fleet_release::dcs::Dcs;
use express_client::fleet_release::requests::{Ask, request};
use express_client::read::live::no_cluster;
use express_client::write::control::{self, Done, Request as ControlRequest, Scope};

/// Lets the action through, or says why not (403): the DC may act, and across DCs the token
/// sent is the one bound to this very action.
fn authorize(
    shared: &AppState,
    dc: &Dc,
    headers: &HeaderMap,
    target: String,
    action: &str,
    scope: Option<&str>,
) -> Result<(), Box<Response>> {
    if let Some(why) = dc_refusal(dc) {
        return Err(Box::new(refuse(StatusCode::FORBIDDEN, &why)));
    }
    let Some(context) = dc.context.as_deref() else {
        // The single DC: the guard checked the page's token.
        return Ok(());
    };
    let sent = headers
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let binding = Binding {
        context,
        target,
        action,
        scope,
    };
    if shared.signer.verifies(&binding, sent) {
        Ok(())
    } else {
        Err(Box::new(refuse(
            StatusCode::FORBIDDEN,
            &format!(
                "wrong token for {action} on {} in context {context}: a confirmation is good \
                 for its own DC, tenant and action only",
                binding.target
            ),
        )))
    }
}

/// The path of a tenant's action, in one DC (`context`) or the single one.
#[derive(Debug, serde::Deserialize)]
pub(super) struct TenantAction {
    #[serde(default)]
    context: Option<String>,
    namespace: String,
    cluster: String,
    action: String,
}

#[derive(Debug, serde::Deserialize)]
pub(super) struct NodeAction {
    #[serde(default)]
    context: Option<String>,
    namespace: String,
    cluster: String,
    node: String,
}

#[derive(Debug, serde::Deserialize)]
pub(super) struct ReleaseAction {
    #[serde(default)]
    context: Option<String>,
    name: String,
    action: String,
}

/// What an action's request body may say (every field optional; an empty body is `{}`).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionRequest {
    /// pause/resume: `cluster` (default) or `namespace`.
    scope: Option<String>,
    /// pause: why (shown in every paused cluster's status).
    reason: Option<String>,
    /// abort: also return the changed nodes to their previous revision.
    rollback: Option<bool>,
    /// bounce: even while Rebuilding, or with a pending change.
    force: Option<bool>,
    /// bounce: how long each wait may take (e.g. 10m).
    timeout: Option<String>,
}

impl ActionRequest {
    /// The fields the request gives.
    fn given(&self) -> Vec<&'static str> {
        let mut given = Vec::new();
        for (name, set) in [
            ("scope", self.scope.is_some()),
            ("reason", self.reason.is_some()),
            ("rollback", self.rollback.is_some()),
            ("force", self.force.is_some()),
            ("timeout", self.timeout.is_some()),
        ] {
            if set {
                given.push(name);
            }
        }
        given
    }
}

/// The action request in `body`, refused (400) when it is not one or gives a field `action`
/// does not take (`takes`).
fn parse_request(
    body: &Bytes,
    action: &str,
    takes: &[&str],
) -> Result<ActionRequest, Box<Response>> {
    let request = if body.iter().all(u8::is_ascii_whitespace) {
        ActionRequest::default()
    } else {
        serde_json::from_slice(body).map_err(|e| {
            Box::new(refuse(
                StatusCode::BAD_REQUEST,
                &format!("the request body is not an action request: {e}"),
            ))
        })?
    };
    match request.given().into_iter().find(|f| !takes.contains(f)) {
        Some(field) => Err(Box::new(refuse(
            StatusCode::BAD_REQUEST,
            &format!("{action} does not take {field:?}"),
        ))),
        None => Ok(request),
    }
}

/// The answer to an action: what it did, or why it could not.
fn answer(result: Result<Done, Exit>) -> Response {
    match result {
        Ok(done) => axum::Json(done).into_response(),
        Err(exit) => {
            // What the API server said (RBAC's 403, a conflict's 409...) is passed on; a request
            // that cannot be made is 400; anything else between us and it is 502.
            let status = match (exit.api_status, exit.code) {
                (Some(code), _) if (400..500).contains(&code) => {
                    StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY)
                }
                (_, Code::Usage) => StatusCode::BAD_REQUEST,
                _ => StatusCode::BAD_GATEWAY,
            };
            refuse(status, &exit.message)
        }
    }
}

pub(super) async fn tenant_action(
    State(shared): State<AppState>,
    Path(path): Path<TenantAction>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let TenantAction {
        context,
        namespace,
        cluster,
        action,
    } = path;
    let dc = match shared.dc(context.as_deref()) {
        Ok(dc) => dc,
        Err(refused) => return *refused,
    };
    let takes: &[&str] = match action.as_str() {
        "pause" => &["scope", "reason"],
        "resume" => &["scope"],
        "abort" => &["rollback"],
        _ => &[],
    };
    let request = match parse_request(&body, &action, takes) {
        Ok(request) => request,
        Err(refused) => return *refused,
    };
    let scope = match request.scope.as_deref() {
        None | Some("cluster") => Scope::Cluster(cluster.clone()),
        Some("namespace") => Scope::Namespace,
        Some(other) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                &format!("scope {other:?}: expected \"cluster\" or \"namespace\""),
            );
        }
    };
    if !["pause", "resume", "abort", "retry"].contains(&action.as_str()) {
        return refuse(
            StatusCode::NOT_FOUND,
            &format!("no action {action:?}: expected pause, resume, abort or retry"),
        );
    }
    let scope_name = match scope {
        Scope::Namespace => "namespace",
        _ => "cluster",
    };
    if let Err(refused) = authorize(
        &shared,
        &dc,
        &headers,
        format!("{namespace}/{cluster}"),
        &action,
        Some(scope_name),
    ) {
        return *refused;
    }
    if !shared.knows(&dc, &namespace, &cluster) {
        return refuse(StatusCode::NOT_FOUND, &no_cluster(&namespace, &cluster));
    }
    let Some(client) = &dc.client else {
        return refuse(StatusCode::BAD_GATEWAY, "no client for this context");
    };
    let result = match action.as_str() {
        "pause" | "resume" => {
            // Only pause takes a reason (refused above for resume).
            let paused = action == "pause";
            let reason = request.reason.as_deref();
            control::set_paused(client, &namespace, &scope, paused, reason).await
        }
        "abort" => {
            let rollback = request.rollback.unwrap_or(false);
            let request = ControlRequest::Abort { rollback };
            control::send_request(client, &namespace, &cluster, request).await
        }
        _ => control::send_request(client, &namespace, &cluster, ControlRequest::Retry).await,
    };
    answer(result)
}

/// An OperatorRelease's pause, resume, promote, promote-full or abort, in the operator's
/// namespace, written as `kubectl express release` writes it.
pub(super) async fn release_action(
    State(shared): State<AppState>,
    Path(path): Path<ReleaseAction>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let ReleaseAction {
        context,
        name,
        action,
    } = path;
    let dc = match shared.dc(context.as_deref()) {
        Ok(dc) => dc,
        Err(refused) => return *refused,
    };
    if let Err(refused) = parse_request(&body, &action, &[]) {
        return *refused;
    }
    let request = match action.as_str() {
        "pause" => ReleaseRequest::Pause,
        "resume" => ReleaseRequest::Resume,
        "promote" => ReleaseRequest::Promote { full: false },
        "promote-full" => ReleaseRequest::Promote { full: true },
        "abort" => ReleaseRequest::Abort,
        other => {
            return refuse(
                StatusCode::NOT_FOUND,
                &format!(
                    "no action {other:?}: expected pause, resume, promote, promote-full or abort"
                ),
            );
        }
    };
    if let Err(refused) = authorize(
        &shared,
        &dc,
        &headers,
        format!("release/{name}"),
        &action,
        None,
    ) {
        return *refused;
    }
    let Some(client) = &dc.client else {
        return refuse(StatusCode::BAD_GATEWAY, "no client for this context");
    };
    answer(release::request(client, &shared.settings.operator_namespace, &name, request).await)
}

pub(super) async fn bounce_action(
    State(shared): State<AppState>,
    Path(path): Path<NodeAction>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let NodeAction {
        context,
        namespace,
        cluster,
        node,
    } = path;
    let dc = match shared.dc(context.as_deref()) {
        Ok(dc) => dc,
        Err(refused) => return *refused,
    };
    let request = match parse_request(&body, "bounce", &["force", "timeout"]) {
        Ok(request) => request,
        Err(refused) => return *refused,
    };
    if let Err(refused) = authorize(
        &shared,
        &dc,
        &headers,
        format!("{namespace}/{cluster}/{node}"),
        "bounce",
        None,
    ) {
        return *refused;
    }
    let objects = dc.objects();
    let belongs = dc.in_scope(&namespace)
        && objects
            .nodes_of(&namespace, &cluster)
            .iter()
            .any(|n| n.name() == node);
    if !belongs {
        return refuse(
            StatusCode::NOT_FOUND,
            &format!("no node {node} in Express cluster {cluster} in namespace {namespace}"),
        );
    }
    let timeout = match request
        .timeout
        .as_deref()
        .map(express_api::bounce::parse_duration)
        .transpose()
    {
        Ok(timeout) => timeout,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, &format!("timeout: {why}")),
    };
    let Some(client) = &dc.client else {
        return refuse(StatusCode::BAD_GATEWAY, "no client for this context");
    };
    let force = request.force.unwrap_or(false);
    answer(
        control::request_bounce(client, &namespace, &node, force, timeout)
            .await
            .map(|(_, done)| done),
    )
}

#[derive(Debug, serde::Deserialize)]
pub(super) struct FleetReleaseAction {
    name: String,
    action: String,
}

/// A FleetRelease's approve, pause, resume, abort or abort-rollback, written on the copy of
/// every DC of the plan this dashboard serves, as `kubectl express fleet-release` writes it
/// (pause and abort take the step at once). A DC it could not write is named in the answer's
/// warning; if it wrote none, the action failed.
pub(super) async fn fleet_release_action(
    State(shared): State<AppState>,
    Path(FleetReleaseAction { name, action }): Path<FleetReleaseAction>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(refused) = parse_request(&body, &action, &[]) {
        return *refused;
    }
    let ask = match action.as_str() {
        "approve" => Ask::Approve,
        "pause" => Ask::Pause,
        "resume" => Ask::Resume,
        "abort" => Ask::Abort { rollback: false },
        "abort-rollback" => Ask::Abort { rollback: true },
        other => {
            return refuse(
                StatusCode::NOT_FOUND,
                &format!(
                    "no action {other:?}: expected approve, pause, resume, abort or abort-rollback"
                ),
            );
        }
    };
    if let Some(signer) = shared.fleet_signer() {
        let sent = headers
            .get(TOKEN_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !signer.verifies(&fleet_release_binding(&name, &action), sent) {
            return refuse(
                StatusCode::FORBIDDEN,
                &format!(
                    "wrong token for {action} on fleetrelease/{name}: a confirmation is good for \
                     its own plan and action only"
                ),
            );
        }
    }
    let clients = shared.plan_clients();
    if clients.is_empty() {
        return refuse(
            StatusCode::FORBIDDEN,
            "this dashboard acts in no DC: serve the plan's contexts (--context a,b,c), not \
             read-only, or use `kubectl express fleet-release`",
        );
    }
    // The copy its page shows: the one a driver wrote last.
    let plan = match shared.newest_copy(&name).await {
        Ok(plan) => plan,
        Err(why) => return refuse(StatusCode::NOT_FOUND, &why),
    };
    let unserved: Vec<&str> = plan
        .spec
        .contexts()
        .map(|(_, context)| context)
        .filter(|context| !clients.contains_key(*context))
        .collect();
    // Pause and abort take the plan's step at once, which reads every DC of the plan: one this
    // dashboard does not serve would be read as one that cannot be read, and written so into
    // every copy. Approve and resume only write the request where they can.
    if ask.at_once() && !unserved.is_empty() {
        return refuse(
            StatusCode::CONFLICT,
            &format!(
                "{} takes the plan's step, which reads every DC of the plan, and this dashboard \
                 does not act in {}: serve every DC of the plan, or use `kubectl express \
                 fleet-release {}`",
                ask.name(),
                unserved.join(", "),
                ask.name()
            ),
        );
    }
    let namespace = &shared.settings.operator_namespace;
    let dcs = Dcs::with_clients(
        &plan.spec,
        namespace,
        &name,
        RELEASE_READ_DEADLINE,
        &clients,
        "not served by this dashboard, or read-only there",
    );
    let asked = request(&dcs, &plan.spec, ask, true).await;
    let reached = plan.spec.contexts().count() > asked.unreached.len();
    let mut message = asked.summary(&name, ask);
    for notice in &asked.notices {
        message.push('\n');
        message.push_str(notice);
    }
    if !reached {
        return refuse(
            StatusCode::BAD_GATEWAY,
            &format!("{message}\n{}", asked.not_written(ask).unwrap_or_default()),
        );
    }
    axum::Json(serde_json::json!({
        "message": message,
        "warning": asked.not_written(ask),
        "requestId": asked.id,
        "phase": asked.phase.map(|p| p.as_str()),
        "unreached": asked
            .unreached
            .iter()
            .map(|(context, why)| serde_json::json!({"context": context, "why": why}))
            .collect::<Vec<_>>(),
    }))
    .into_response()
}
