//! The dashboard's HTTP server (axum): the pages, the JSON API, the live updates (server-sent
//! events) and the actions, behind one guard.
//!
//! What it reads comes from watches (reflector stores of the Express objects, pods and control
//! ConfigMaps, started once), so a fleet page costs no API request; a tenant page lists its
//! namespace's events once, and its live stream watches them for as long as the page is open.
//! The doctor's banner is recomputed every [`DOCTOR_EVERY`].
//!
//! The guard (DESIGN section 11): every request must name an allowed `Host` (a DNS-rebinding
//! page cannot reach a loopback server under its own name); every POST must come from one of
//! our pages (`Origin` and `Sec-Fetch-Site` when the browser sends them) and carry the token
//! bound to the pages of this server; `--read-only` refuses every POST.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use express_api::{ClusterKey, Objects};
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use tokio::sync::watch;

use super::model::{self, DoctorBanner, FleetQuery};
use super::pages::{self, Chrome};
use crate::control::{self, Done, Request as ControlRequest, Scope};
use crate::exit::{Code, Exit};
use crate::live;
use crate::release::Request as ReleaseRequest;

/// How often the doctor's banner is recomputed (it reads Leases, Deployments and events).
pub const DOCTOR_EVERY: Duration = Duration::from_secs(15);
/// Changes arriving this close together are sent as one update.
const COALESCE: Duration = Duration::from_millis(150);
/// Ages on a page move even when nothing changes: re-render this often.
const REFRESH: Duration = Duration::from_secs(10);
/// The header every POST carries the page's token in.
pub const TOKEN_HEADER: &str = "x-express-token";

/// How the dashboard was started.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Only this namespace (None: every namespace).
    pub namespace: Option<String>,
    pub operator_namespace: String,
    pub read_only: bool,
    /// `Host` values requests may carry ("127.0.0.1:3110", "localhost:3110").
    pub allowed_hosts: Vec<String>,
}

struct Shared {
    client: Client,
    settings: Settings,
    token: String,
    scope: String,
    stores: live::Stores,
    /// Bumped on every change the watches see and every new doctor report.
    changes: watch::Receiver<u64>,
    /// Tells this process from the one before it: a page whose stream reconnects to another
    /// process reloads, since its token and its view are the old process's.
    instance: String,
    doctor: RwLock<Option<DoctorBanner>>,
    /// The last fleet update rendered for each query, with the change it was rendered at and
    /// when: pages showing the same view share one render per change (at 1,000 tenants a
    /// render is about 60 ms).
    fleet_updates: Mutex<HashMap<FleetQuery, FleetUpdate>>,
}

struct FleetUpdate {
    change: u64,
    at: Instant,
    data: Arc<String>,
}

/// Queries whose last render is kept; more are dropped all at once (a view nobody watches
/// costs nothing to render again).
const FLEET_UPDATES_KEPT: usize = 32;

type AppState = Arc<Shared>;

impl Shared {
    fn chrome(&self) -> Chrome<'_> {
        Chrome {
            token: &self.token,
            read_only: self.settings.read_only,
            scope: &self.scope,
            instance: &self.instance,
        }
    }

    fn objects(&self) -> Objects {
        self.stores.objects()
    }

    fn doctor(&self) -> Option<DoctorBanner> {
        self.doctor.read().ok().and_then(|d| d.clone())
    }

    fn fleet(&self, query: &FleetQuery) -> model::FleetView {
        model::fleet(
            &self.objects(),
            &self.settings.operator_namespace,
            query,
            self.doctor(),
            Timestamp::now(),
        )
    }

    /// The fleet page's live update for `query`: rendered once per change (or, for its ages,
    /// once per [`REFRESH`]) whoever asks.
    fn fleet_update(&self, query: &FleetQuery) -> Arc<String> {
        let change = *self.changes.borrow();
        let fresh = |u: &FleetUpdate| u.change == change && u.at.elapsed() < REFRESH / 2;
        if let Ok(updates) = self.fleet_updates.lock()
            && let Some(update) = updates.get(query).filter(|u| fresh(u))
        {
            return update.data.clone();
        }
        let data = Arc::new(update(pages::fleet_parts(
            &self.fleet(query),
            self.settings.read_only,
        )));
        if let Ok(mut updates) = self.fleet_updates.lock() {
            if updates.len() >= FLEET_UPDATES_KEPT {
                updates.clear();
            }
            updates.insert(
                query.clone(),
                FleetUpdate {
                    change,
                    at: Instant::now(),
                    data: data.clone(),
                },
            );
        }
        data
    }

    fn tenant(
        &self,
        namespace: &str,
        cluster: &str,
        events: &[Arc<Event>],
    ) -> Option<model::TenantView> {
        if !self.in_scope(namespace) {
            return None;
        }
        model::tenant(
            &self.objects(),
            &self.settings.operator_namespace,
            namespace,
            cluster,
            events,
            Timestamp::now(),
        )
    }

    fn in_scope(&self, namespace: &str) -> bool {
        self.settings
            .namespace
            .as_deref()
            .is_none_or(|n| n == namespace)
    }

    /// Whether the tenant exists, as the watches see it.
    fn knows(&self, namespace: &str, cluster: &str) -> bool {
        self.in_scope(namespace)
            && self
                .objects()
                .cluster_keys()
                .contains(&ClusterKey::new(namespace, cluster))
    }

    /// One listing of a namespace's events, for a page or an API answer.
    async fn events(&self, namespace: &str) -> Vec<Arc<Event>> {
        Api::<Event>::namespaced(self.client.clone(), namespace)
            .list(&ListParams::default())
            .await
            .map(|list| list.items.into_iter().map(Arc::new).collect())
            .unwrap_or_default()
    }
}

/// A random token, 128 bits as hex.
fn new_token() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Starts the watches, waits until they have listed once, and serves on `listener` until the
/// process ends. `ready` is called with the address once requests are answered.
pub async fn serve(
    client: Client,
    settings: Settings,
    listener: tokio::net::TcpListener,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), Exit> {
    let mut watched = live::Watched::fleet(
        &client,
        settings.namespace.as_deref(),
        &settings.operator_namespace,
    );
    watched.ready().await.map_err(Exit::failure)?;
    let (bump, changes) = watch::channel(0u64);
    let shared = Arc::new(Shared {
        scope: match &settings.namespace {
            Some(namespace) => format!("namespace {namespace}"),
            None => "every namespace".to_owned(),
        },
        client: client.clone(),
        stores: watched.stores(),
        changes,
        doctor: RwLock::new(None),
        fleet_updates: Mutex::new(HashMap::new()),
        instance: new_token(),
        token: new_token(),
        settings,
    });

    // The watches: every change wakes the live pages. A failing watch retries with backoff.
    let bump = Arc::new(bump);
    let on_change = bump.clone();
    tokio::spawn(async move {
        loop {
            if let Err(error) = watched.changed().await {
                eprintln!("kubectl-express dashboard: {error}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            on_change.send_modify(|n| *n += 1);
        }
    });
    // The doctor: its verdict on the fleet the watches hold, with what only it reads.
    let doctor_state = shared.clone();
    tokio::spawn(async move {
        loop {
            let objects = doctor_state.objects();
            let fleet = crate::live::fleet_around(
                &doctor_state.client,
                &doctor_state.settings.operator_namespace,
                &objects,
                Vec::new(),
            )
            .await;
            let report = express_triage::triage(&fleet, &express_triage::Thresholds::default());
            let banner = Some(DoctorBanner::from_report(&report, &fleet.releases));
            // Pages re-render only for a verdict that changed, not every run.
            let changed = match doctor_state.doctor.write() {
                Ok(mut doctor) if *doctor != banner => {
                    *doctor = banner;
                    true
                }
                _ => false,
            };
            if changed {
                bump.send_modify(|n| *n += 1);
            }
            tokio::time::sleep(DOCTOR_EVERY).await;
        }
    });

    let address = listener
        .local_addr()
        .map_err(|e| Exit::failure(format!("cannot read the listening address: {e}")))?;
    ready(address);
    axum::serve(listener, router(shared))
        .await
        .map_err(|e| Exit::failure(format!("the server stopped: {e}")))
}

fn router(shared: AppState) -> Router {
    Router::new()
        .route("/", get(fleet_page))
        .route("/tenants/{namespace}/{cluster}", get(tenant_page))
        .route("/api/tenants", get(fleet_json))
        .route("/api/stream", get(fleet_stream))
        .route("/api/tenants/{namespace}/{cluster}", get(tenant_json))
        .route(
            "/api/tenants/{namespace}/{cluster}/stream",
            get(tenant_stream),
        )
        .route(
            "/api/tenants/{namespace}/{cluster}/actions/{action}",
            post(tenant_action),
        )
        .route(
            "/api/tenants/{namespace}/{cluster}/nodes/{node}/actions/bounce",
            post(bounce_action),
        )
        .route(
            "/api/releases/{name}/actions/{action}",
            post(release_action),
        )
        .route("/assets/dashboard.js", get(script))
        .route("/assets/dashboard.css", get(stylesheet))
        .layer(middleware::from_fn_with_state(shared.clone(), guard))
        .with_state(shared)
}

// ---- the guard ----

fn refuse(status: StatusCode, why: &str) -> Response {
    (status, axum::Json(serde_json::json!({ "error": why }))).into_response()
}

/// Equal, in a time that does not depend on where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// Why a request is refused, if it is (pure: the tests call it with forged headers).
pub fn refusal(
    method: &Method,
    headers: &HeaderMap,
    settings: &Settings,
    token: &str,
) -> Option<(StatusCode, &'static str)> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let host_allowed = header(header::HOST.as_str()).is_some_and(|host| {
        settings
            .allowed_hosts
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(host))
    });
    if !host_allowed {
        return Some((
            StatusCode::MISDIRECTED_REQUEST,
            "this Host is not one the dashboard answers to (see --allowed-host)",
        ));
    }
    if method == Method::GET || method == Method::HEAD {
        return None;
    }
    if settings.read_only {
        return Some((StatusCode::FORBIDDEN, "the dashboard is read-only"));
    }
    if header("sec-fetch-site").is_some_and(|site| site != "same-origin" && site != "none") {
        return Some((StatusCode::FORBIDDEN, "cross-site request refused"));
    }
    if let Some(origin) = header(header::ORIGIN.as_str()) {
        let ours = settings
            .allowed_hosts
            .iter()
            .any(|host| origin.eq_ignore_ascii_case(&format!("http://{host}")));
        if !ours {
            return Some((StatusCode::FORBIDDEN, "request from another origin refused"));
        }
    }
    match header(TOKEN_HEADER) {
        Some(sent) if same_secret(sent.as_bytes(), token.as_bytes()) => None,
        _ => Some((
            StatusCode::FORBIDDEN,
            "missing or wrong token: actions are taken from the dashboard's own pages",
        )),
    }
}

async fn guard(State(shared): State<AppState>, request: Request, next: Next) -> Response {
    if let Some((status, why)) = refusal(
        request.method(),
        request.headers(),
        &shared.settings,
        &shared.token,
    ) {
        return refuse(status, why);
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    let set = |headers: &mut HeaderMap, name: header::HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(
        headers,
        header::CONTENT_SECURITY_POLICY,
        "default-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
    );
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::REFERRER_POLICY, "no-referrer");
    response
}

// ---- pages and JSON ----

async fn fleet_page(State(shared): State<AppState>, Query(query): Query<FleetQuery>) -> Response {
    let query = query.normalized();
    let view = shared.fleet(&query);
    Html(pages::fleet_page(&shared.chrome(), &view, &query).into_string()).into_response()
}

async fn fleet_json(State(shared): State<AppState>, Query(query): Query<FleetQuery>) -> Response {
    axum::Json(shared.fleet(&query.normalized())).into_response()
}

fn no_tenant(namespace: &str, cluster: &str) -> String {
    format!("no Express cluster {cluster} in namespace {namespace}")
}

async fn tenant_page(
    State(shared): State<AppState>,
    Path((namespace, cluster)): Path<(String, String)>,
) -> Response {
    // Only a tenant the watches know costs an API request.
    let events = if shared.knows(&namespace, &cluster) {
        shared.events(&namespace).await
    } else {
        Vec::new()
    };
    match shared.tenant(&namespace, &cluster, &events) {
        Some(view) => {
            Html(pages::tenant_page(&shared.chrome(), &view).into_string()).into_response()
        }
        None => (
            StatusCode::NOT_FOUND,
            Html(
                pages::not_found(&shared.chrome(), &no_tenant(&namespace, &cluster)).into_string(),
            ),
        )
            .into_response(),
    }
}

async fn tenant_json(
    State(shared): State<AppState>,
    Path((namespace, cluster)): Path<(String, String)>,
) -> Response {
    if !shared.knows(&namespace, &cluster) {
        return refuse(StatusCode::NOT_FOUND, &no_tenant(&namespace, &cluster));
    }
    let events = shared.events(&namespace).await;
    match shared.tenant(&namespace, &cluster, &events) {
        Some(view) => axum::Json(view).into_response(),
        None => refuse(StatusCode::NOT_FOUND, &no_tenant(&namespace, &cluster)),
    }
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        pages::SCRIPT,
    )
        .into_response()
}

async fn stylesheet() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        pages::STYLESHEET,
    )
        .into_response()
}

// ---- live updates ----

/// One update: the page's parts by element id, as JSON.
fn update(parts: Vec<(&'static str, String)>) -> String {
    let map: serde_json::Map<String, serde_json::Value> = parts
        .into_iter()
        .map(|(id, html)| (id.to_owned(), html.into()))
        .collect();
    serde_json::Value::Object(map).to_string()
}

/// Waits for the next change (or the periodic refresh), then lets close changes gather.
/// False when the watches are gone.
async fn next_change(changes: &mut watch::Receiver<u64>) -> bool {
    tokio::select! {
        changed = changes.changed() => if changed.is_err() { return false; },
        () = tokio::time::sleep(REFRESH) => {}
    }
    tokio::time::sleep(COALESCE).await;
    true
}

type Updates = Sse<
    axum::response::sse::KeepAliveStream<
        std::pin::Pin<Box<dyn Stream<Item = Result<SseEvent, Infallible>> + Send>>,
    >,
>;

/// A live stream: first `hello` with the server's instance, then the updates.
fn sse(instance: &str, stream: impl Stream<Item = SseEvent> + Send + 'static) -> Updates {
    let hello = SseEvent::default().event("hello").data(instance);
    let stream = futures::stream::once(async move { hello }).chain(stream);
    Sse::new(stream.map(Ok).boxed()).keep_alive(KeepAlive::default())
}

async fn fleet_stream(State(shared): State<AppState>, Query(query): Query<FleetQuery>) -> Updates {
    let query = query.normalized();
    let changes = shared.changes.clone();
    let instance = shared.instance.clone();
    // The first update goes out at once: the page may be older than the stream.
    let stream = futures::stream::unfold(
        (shared, changes, Arc::new(String::new()), true),
        move |(shared, mut changes, last, first)| {
            let query = query.clone();
            async move {
                let mut first = first;
                loop {
                    if !first && !next_change(&mut changes).await {
                        return None;
                    }
                    first = false;
                    let data = shared.fleet_update(&query);
                    if data != last {
                        let event = SseEvent::default().event("update").data(data.as_str());
                        return Some((event, (shared, changes, data, false)));
                    }
                }
            }
        },
    );
    sse(&instance, stream)
}

async fn tenant_stream(
    State(shared): State<AppState>,
    Path((namespace, cluster)): Path<(String, String)>,
) -> Updates {
    // The namespace's events, watched for as long as the page is open.
    let (events, writer) = reflector::store::<Event>();
    let api = Api::<Event>::namespaced(shared.client.clone(), &namespace);
    let event_changes = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff(),
    )
    .map(|_| ())
    .boxed();
    let changes = shared.changes.clone();
    let instance = shared.instance.clone();
    struct Follow {
        shared: AppState,
        changes: watch::Receiver<u64>,
        event_changes: std::pin::Pin<Box<dyn Stream<Item = ()> + Send>>,
        events: reflector::Store<Event>,
        last: String,
        first: bool,
        gone: bool,
    }
    impl Follow {
        /// Takes every event the watch has ready, so that a relist of hundreds of events is
        /// one wake-up, not one each.
        fn drain_events(&mut self) {
            while let Some(Some(())) = self.event_changes.next().now_or_never() {}
        }

        /// The events listed so far, or None until the watch has listed them once (the page
        /// keeps the events it was served with until then).
        fn events(&self) -> Option<Vec<Arc<Event>>> {
            let mut ready = std::pin::pin!(self.events.wait_until_ready());
            ready.as_mut().now_or_never().map(|_| self.events.state())
        }
    }
    let follow = Follow {
        shared,
        changes,
        event_changes,
        events,
        last: String::new(),
        first: true,
        gone: false,
    };
    let stream = futures::stream::unfold(follow, move |mut follow| {
        let (namespace, cluster) = (namespace.clone(), cluster.clone());
        async move {
            if follow.gone {
                return None;
            }
            loop {
                if !follow.first {
                    tokio::select! {
                        more = next_change(&mut follow.changes) => if !more { return None; },
                        Some(()) = follow.event_changes.next() => {
                            follow.drain_events();
                            tokio::time::sleep(COALESCE).await;
                        }
                    }
                }
                follow.first = false;
                follow.drain_events();
                let events = follow.events();
                let read_only = follow.shared.settings.read_only;
                let listed = events.as_deref().unwrap_or_default();
                let Some(view) = follow.shared.tenant(&namespace, &cluster, listed) else {
                    follow.gone = true;
                    let event = SseEvent::default()
                        .event("gone")
                        .data(no_tenant(&namespace, &cluster));
                    return Some((event, follow));
                };
                let mut parts = pages::tenant_parts(&view, read_only);
                if events.is_none() {
                    parts.retain(|(id, _)| *id != pages::EVENTS_PART);
                }
                let data = update(parts);
                if data != follow.last {
                    follow.last = data.clone();
                    return Some((SseEvent::default().event("update").data(data), follow));
                }
            }
        }
    });
    sse(&instance, stream)
}

// ---- actions ----

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

async fn tenant_action(
    State(shared): State<AppState>,
    Path((namespace, cluster, action)): Path<(String, String, String)>,
    body: Bytes,
) -> Response {
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
    if !shared.knows(&namespace, &cluster) {
        return refuse(StatusCode::NOT_FOUND, &no_tenant(&namespace, &cluster));
    }
    let client = &shared.client;
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
        "retry" => control::send_request(client, &namespace, &cluster, ControlRequest::Retry).await,
        other => {
            return refuse(
                StatusCode::NOT_FOUND,
                &format!("no action {other:?}: expected pause, resume, abort or retry"),
            );
        }
    };
    answer(result)
}

/// An OperatorRelease's pause, resume, promote, promote-full or abort, in the operator's
/// namespace, written as `kubectl express release` writes it.
async fn release_action(
    State(shared): State<AppState>,
    Path((name, action)): Path<(String, String)>,
    body: Bytes,
) -> Response {
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
    answer(
        crate::release::request(
            &shared.client,
            &shared.settings.operator_namespace,
            &name,
            request,
        )
        .await,
    )
}

async fn bounce_action(
    State(shared): State<AppState>,
    Path((namespace, cluster, node)): Path<(String, String, String)>,
    body: Bytes,
) -> Response {
    let request = match parse_request(&body, "bounce", &["force", "timeout"]) {
        Ok(request) => request,
        Err(refused) => return *refused,
    };
    let objects = shared.objects();
    let belongs = shared.in_scope(&namespace)
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
    let force = request.force.unwrap_or(false);
    answer(
        control::request_bounce(&shared.client, &namespace, &node, force, timeout)
            .await
            .map(|(_, done)| done),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn settings(read_only: bool) -> Settings {
        Settings {
            namespace: None,
            operator_namespace: "express-system".into(),
            read_only,
            allowed_hosts: vec!["127.0.0.1:3110".into(), "localhost:3110".into()],
        }
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    const TOKEN: &str = "0123456789abcdef";

    #[test]
    fn pages_are_served_to_an_allowed_host_only() {
        let ok = headers(&[("host", "localhost:3110")]);
        assert_eq!(refusal(&Method::GET, &ok, &settings(false), TOKEN), None);
        // A DNS-rebinding page reaches the loopback server under its own name.
        let rebound = headers(&[("host", "evil.example:3110")]);
        let refused = refusal(&Method::GET, &rebound, &settings(false), TOKEN);
        assert_eq!(refused.map(|r| r.0), Some(StatusCode::MISDIRECTED_REQUEST));
        assert!(refusal(&Method::GET, &HeaderMap::new(), &settings(false), TOKEN).is_some());
    }

    #[test]
    fn a_post_needs_the_token_and_our_origin() {
        let post = |pairs: &[(&'static str, &'static str)]| {
            refusal(&Method::POST, &headers(pairs), &settings(false), TOKEN).map(|r| r.1)
        };
        let host = ("host", "127.0.0.1:3110");
        let token = (TOKEN_HEADER, TOKEN);
        assert_eq!(post(&[host, token]), None);
        assert_eq!(
            post(&[
                host,
                token,
                ("origin", "http://127.0.0.1:3110"),
                ("sec-fetch-site", "same-origin")
            ]),
            None
        );
        assert!(post(&[host]).unwrap().contains("token"));
        assert!(
            post(&[host, (TOKEN_HEADER, "0123456789abcdeX")])
                .unwrap()
                .contains("token")
        );
        assert!(
            post(&[host, token, ("origin", "http://evil.example")])
                .unwrap()
                .contains("origin")
        );
        assert!(
            post(&[host, token, ("sec-fetch-site", "cross-site")])
                .unwrap()
                .contains("cross-site")
        );
    }

    #[test]
    fn read_only_refuses_every_post_and_serves_pages() {
        let pairs = headers(&[("host", "127.0.0.1:3110"), (TOKEN_HEADER, TOKEN)]);
        assert_eq!(
            refusal(&Method::POST, &pairs, &settings(true), TOKEN),
            Some((StatusCode::FORBIDDEN, "the dashboard is read-only"))
        );
        assert_eq!(refusal(&Method::GET, &pairs, &settings(true), TOKEN), None);
    }

    #[test]
    fn tokens_differ_and_compare_in_full() {
        assert_ne!(new_token(), new_token());
        assert_eq!(new_token().len(), 32);
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
    }
}
