//! The dashboard's actions (pause, resume, abort, retry, bounce, and an OperatorRelease's
//! requests): the same [`crate::control`] and [`crate::release`] functions the CLI verbs call,
//! in the DC the request names.
//!
//! Across DCs each button carries a token of its own, bound to (context, tenant, action): an
//! HMAC of the three under a key of this server, so that a confirmation given for dc-a cannot
//! act in dc-b, on another tenant, or as another action. A DC marked read-only, or that cannot
//! be read, takes no action at all: the dashboard acts only where it can see the result.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use ring::hmac;

use super::dcs::Dc;
use super::fleet::encode;
use super::guard::{TOKEN_HEADER, refuse, same_secret};
use super::server::{AppState, no_tenant};
use crate::control::{self, Done, Request as ControlRequest, Scope};
use crate::exit::{Code, Exit};
use crate::release::Request as ReleaseRequest;

/// The key of this server's action tokens.
pub struct Signer(hmac::Key);

impl Signer {
    pub fn new() -> Signer {
        let key: [u8; 32] = rand::random();
        Signer(hmac::Key::new(hmac::HMAC_SHA256, &key))
    }

    /// The token of `binding`, as hex.
    pub fn token(&self, binding: &Binding<'_>) -> String {
        hmac::sign(&self.0, binding.text().as_bytes())
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Whether `sent` is the token of `binding`.
    pub fn verifies(&self, binding: &Binding<'_>, sent: &str) -> bool {
        same_secret(self.token(binding).as_bytes(), sent.as_bytes())
    }
}

/// What an action token is good for: one action on one target in one DC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding<'a> {
    pub context: &'a str,
    /// "team-a/shop", "team-a/shop/shop-fe1" (a node), "release/to-canary".
    pub target: String,
    /// "pause", "resume", "abort", "retry", "bounce", "promote"...
    pub action: &'a str,
    /// pause/resume: `cluster` or `namespace` (a namespace-wide pause is its own action).
    pub scope: Option<&'a str>,
}

impl Binding<'_> {
    fn text(&self) -> String {
        // Names hold no NUL: the parts cannot run into each other.
        format!(
            "{}\0{}\0{}\0{}",
            self.context,
            self.target,
            self.action,
            self.scope.unwrap_or("cluster")
        )
    }
}

/// Where a page's actions go and how they are vouched for: the single DC (the page's own
/// token, checked by the guard), or one DC of several (the URL names it, and each button has
/// its token).
#[derive(Clone, Copy)]
pub struct Acting<'a> {
    pub context: Option<&'a str>,
    pub signer: Option<&'a Signer>,
}

impl<'a> Acting<'a> {
    pub const SINGLE: Acting<'static> = Acting {
        context: None,
        signer: None,
    };

    fn prefix(&self) -> String {
        self.context
            .map(|c| format!("/dcs/{}", encode(c)))
            .unwrap_or_default()
    }

    /// The tenant's page.
    pub fn tenant_href(&self, namespace: &str, cluster: &str) -> String {
        format!("{}/tenants/{namespace}/{cluster}", self.prefix())
    }

    /// The tenant's API (its JSON, stream and actions).
    pub fn api_base(&self, namespace: &str, cluster: &str) -> String {
        format!("/api{}/tenants/{namespace}/{cluster}", self.prefix())
    }

    pub fn release_url(&self, name: &str, action: &str) -> String {
        format!("/api{}/releases/{name}/actions/{action}", self.prefix())
    }

    /// The token a button for `action` on `target` carries (None: the page's token serves).
    pub fn token(&self, target: &str, action: &str, scope: Option<&str>) -> Option<String> {
        let (context, signer) = (self.context?, self.signer?);
        Some(signer.token(&Binding {
            context,
            target: target.to_owned(),
            action,
            scope,
        }))
    }

    /// What the confirmation names first: "dc-b / team-a / shop" (nothing for a single DC).
    pub fn naming(&self, namespace: &str, cluster: &str) -> Option<String> {
        self.context
            .map(|context| format!("{context} / {namespace} / {cluster}"))
    }
}

/// Why an action in `dc` is refused before anything else is looked at: read-only, or a DC the
/// dashboard cannot read. Pure but for reading the DC's health.
pub fn dc_refusal(dc: &Dc) -> Option<String> {
    let context = dc.context.as_deref()?;
    if dc.read_only {
        return Some(format!(
            "context {context} is read-only (--read-only-context): its actions are refused"
        ));
    }
    dc.health().refusal().map(|why| {
        format!("context {context} {why}: the dashboard takes no action in a DC it cannot see")
    })
}

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
        return refuse(StatusCode::NOT_FOUND, &no_tenant(&namespace, &cluster));
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
    answer(
        crate::release::request(client, &shared.settings.operator_namespace, &name, request).await,
    )
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::dashboard::fleet::Health;
    use crate::fleet::ContextError;

    fn binding<'a>(context: &'a str, target: &str, action: &'a str) -> Binding<'a> {
        Binding {
            context,
            target: target.into(),
            action,
            scope: Some("cluster"),
        }
    }

    #[test]
    fn a_token_acts_in_its_own_dc_on_its_own_tenant_as_its_own_action() {
        let signer = Signer::new();
        let pause_b = binding("dc-b", "team-a/shop", "pause");
        let token = signer.token(&pause_b);
        assert!(signer.verifies(&pause_b, &token));
        for other in [
            binding("dc-a", "team-a/shop", "pause"),
            binding("dc-b", "team-b/shop", "pause"),
            binding("dc-b", "team-a/shop", "abort"),
            Binding {
                scope: Some("namespace"),
                ..pause_b.clone()
            },
        ] {
            assert!(!signer.verifies(&other, &token), "{other:?}");
        }
        // Another server's key: nothing carries over.
        assert!(!Signer::new().verifies(&pause_b, &token));
        assert!(!signer.verifies(&pause_b, ""));
        // Names cannot be shifted from one part to the next.
        assert_ne!(
            signer.token(&binding("dc-b", "a/shop", "pause")),
            signer.token(&binding("dc-b\0a", "shop", "pause"))
        );
    }

    #[test]
    fn buttons_name_their_dc_in_the_url_the_token_and_the_confirmation() {
        let signer = Signer::new();
        let acting = Acting {
            context: Some("dc-b"),
            signer: Some(&signer),
        };
        assert_eq!(
            acting.api_base("team-a", "shop"),
            "/api/dcs/dc-b/tenants/team-a/shop"
        );
        assert_eq!(
            acting.tenant_href("team-a", "shop"),
            "/dcs/dc-b/tenants/team-a/shop"
        );
        assert_eq!(
            acting.release_url("to-canary", "pause"),
            "/api/dcs/dc-b/releases/to-canary/actions/pause"
        );
        assert_eq!(
            acting.naming("team-a", "shop").as_deref(),
            Some("dc-b / team-a / shop")
        );
        let token = acting
            .token("team-a/shop", "pause", Some("cluster"))
            .unwrap();
        assert!(signer.verifies(&binding("dc-b", "team-a/shop", "pause"), &token));
        // A context name with a slash stays one path segment.
        let odd = Acting {
            context: Some("arn:eks/prod"),
            signer: None,
        };
        assert_eq!(
            odd.tenant_href("ns", "c"),
            "/dcs/arn%3Aeks%2Fprod/tenants/ns/c"
        );
        // The single DC: the old URLs, the page's token, no DC named.
        let single = Acting::SINGLE;
        assert_eq!(
            single.api_base("team-a", "shop"),
            "/api/tenants/team-a/shop"
        );
        assert_eq!(single.token("team-a/shop", "pause", None), None);
        assert_eq!(single.naming("team-a", "shop"), None);
    }

    #[test]
    fn a_read_only_or_unreadable_dc_refuses_actions() {
        let dc = |context: Option<&str>, read_only: bool, health: Health| {
            Dc::new(context.map(Into::into), None, None, None, read_only, health)
        };
        assert_eq!(dc_refusal(&dc(Some("dc-a"), false, Health::Live)), None);
        assert_eq!(
            dc_refusal(&dc(Some("dc-b"), true, Health::Live)).as_deref(),
            Some("context dc-b is read-only (--read-only-context): its actions are refused")
        );
        let down = Health::Down {
            error: ContextError::Unauthorized,
            last_seen: None,
        };
        assert_eq!(
            dc_refusal(&dc(Some("dc-c"), false, down)).as_deref(),
            Some(
                "context dc-c cannot be read (Unauthorized): the dashboard takes no action in \
                 a DC it cannot see"
            )
        );
        assert!(
            dc_refusal(&dc(Some("dc-d"), false, Health::Connecting))
                .unwrap()
                .contains("connecting")
        );
        // The single DC: the guard's --read-only covers it.
        assert_eq!(dc_refusal(&dc(None, true, Health::Live)), None);
    }
}
