//! The dashboard's HTTP server (axum): the pages, the JSON API, the live updates (server-sent
//! events) and the actions ([`super::actions`]), behind one guard.
//!
//! What it reads comes from watches (reflector stores of the Express objects, pods and control
//! ConfigMaps of each DC, started once: [`super::dcs`]), so a fleet page costs no API request; a
//! tenant page lists its namespace's events once, and its live stream watches them for as long
//! as the page is open. Each DC's doctor runs every [`dcs::DOCTOR_EVERY`].
//!
//! One context is served as it always was: the fleet page, `/tenants/NS/CLUSTER` and
//! `/api/tenants/...`. Several (DESIGN section 13) are served as one fleet page
//! ([`super::fleet`], [`super::fleet_pages`]), each tenant under `/dcs/CONTEXT/...`.
//!
//! The guard (DESIGN section 11): every request must name an allowed `Host` (a DNS-rebinding
//! page cannot reach a loopback server under its own name); every POST must come from one of
//! our pages (`Origin` and `Sec-Fetch-Site` when the browser sends them) and carry the token
//! bound to the pages of this server (across DCs: to its DC, tenant and action, checked by the
//! action); `--read-only` refuses every POST.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use express_api::ClusterKey;
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use tokio::sync::watch;

use super::actions::{self, Acting, Signer};
use super::dcs::{self, Dc};
use super::fleet::{self as across, DcInput, DcQuery, Health};
use super::fleet_pages;
use super::model::{self, FleetQuery};
use super::pages::{self, Chrome};
use crate::contexts::Loaded;
use crate::exit::Exit;
use crate::live;

/// Changes arriving this close together are sent as one update.
const COALESCE: Duration = Duration::from_millis(150);
/// Ages on a page move even when nothing changes: re-render this often.
const REFRESH: Duration = Duration::from_secs(10);
/// The header every POST carries the page's token in.
pub const TOKEN_HEADER: &str = "x-express-token";

/// How the dashboard was started.
#[derive(Clone, Debug)]
pub struct Settings {
    pub operator_namespace: String,
    pub read_only: bool,
    /// `Host` values requests may carry ("127.0.0.1:3110", "localhost:3110").
    pub allowed_hosts: Vec<String>,
}

pub(super) struct Shared {
    pub(super) settings: Settings,
    /// The single DC's page token (every POST carries it).
    token: String,
    /// Across DCs, each action's own token (see [`super::actions`]).
    pub(super) signer: Signer,
    scope: String,
    /// One DC, or one per selected context, in the selection's order.
    dcs: Vec<Arc<Dc>>,
    /// Several contexts were selected: one fleet page over them, tenants under `/dcs/...`.
    pub(super) fleet_mode: bool,
    /// Bumped on every change the watches see and every new doctor report or health.
    changes: watch::Receiver<u64>,
    /// Tells this process from the one before it: a page whose stream reconnects to another
    /// process reloads, since its token and its view are the old process's.
    instance: String,
    /// The last fleet update rendered for each query, with the change it was rendered at and
    /// when: pages showing the same view share one render per change (at 1,000 tenants a
    /// render is about 60 ms).
    fleet_updates: Mutex<HashMap<FleetQuery, FleetUpdate>>,
    dc_updates: Mutex<HashMap<DcQuery, FleetUpdate>>,
}

struct FleetUpdate {
    change: u64,
    at: Instant,
    data: Arc<String>,
}

/// Queries whose last render is kept; more are dropped all at once (a view nobody watches
/// costs nothing to render again).
const FLEET_UPDATES_KEPT: usize = 32;

pub(super) type AppState = Arc<Shared>;

/// The render kept for `query`, or `render`'s, kept.
fn cached<Q: Clone + Eq + std::hash::Hash>(
    updates: &Mutex<HashMap<Q, FleetUpdate>>,
    query: &Q,
    change: u64,
    render: impl FnOnce() -> String,
) -> Arc<String> {
    let fresh = |u: &FleetUpdate| u.change == change && u.at.elapsed() < REFRESH / 2;
    if let Ok(updates) = updates.lock()
        && let Some(update) = updates.get(query).filter(|u| fresh(u))
    {
        return update.data.clone();
    }
    let data = Arc::new(render());
    if let Ok(mut updates) = updates.lock() {
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

impl Shared {
    /// The chrome of a page of `dc` (of the fleet page: the first DC, whose read-only is the
    /// server's).
    fn chrome<'a>(&'a self, dc: &'a Dc) -> Chrome<'a> {
        let dc_refused = self.fleet_mode && actions::dc_refusal(dc).is_some();
        Chrome {
            token: if self.fleet_mode { "" } else { &self.token },
            read_only: self.settings.read_only || dc_refused,
            scope: &self.scope,
            instance: &self.instance,
            acting: Acting {
                context: dc.context.as_deref(),
                signer: Some(&self.signer),
            },
        }
    }

    /// The fleet page's chrome across DCs: no DC's actions, the server's read-only.
    fn fleet_chrome(&self) -> Chrome<'_> {
        Chrome {
            token: if self.fleet_mode { "" } else { &self.token },
            read_only: self.settings.read_only,
            scope: &self.scope,
            instance: &self.instance,
            acting: Acting::SINGLE,
        }
    }

    /// The DC a request names: the single one (no context), or the context's.
    pub(super) fn dc(&self, context: Option<&str>) -> Result<Arc<Dc>, Box<Response>> {
        let found = match (self.fleet_mode, context) {
            (false, None) => self.dcs.first(),
            (true, Some(context)) => self
                .dcs
                .iter()
                .find(|dc| dc.context.as_deref() == Some(context)),
            _ => None,
        };
        found
            .cloned()
            .ok_or_else(|| Box::new(refuse(StatusCode::NOT_FOUND, &no_dc(context))))
    }

    fn fleet(&self, query: &FleetQuery) -> model::FleetView {
        let dc = &self.dcs[0];
        model::fleet(
            &dc.objects(),
            &self.settings.operator_namespace,
            query,
            dc.doctor(),
            Timestamp::now(),
        )
    }

    /// The fleet page's live update for `query`: rendered once per change (or, for its ages,
    /// once per [`REFRESH`]) whoever asks.
    fn fleet_update(&self, query: &FleetQuery) -> Arc<String> {
        let change = *self.changes.borrow();
        cached(&self.fleet_updates, query, change, || {
            update(pages::fleet_parts(
                &self.fleet(query),
                self.settings.read_only,
            ))
        })
    }

    /// The fleet page across DCs: each DC's rows (built once per change of that DC), merged.
    fn dc_fleet(&self, query: &DcQuery) -> across::DcFleetView {
        let read: Vec<_> = self
            .dcs
            .iter()
            .map(|dc| {
                (
                    dc.health(),
                    dc.verdict(),
                    dc.rows(&self.settings.operator_namespace),
                )
            })
            .collect();
        let inputs: Vec<DcInput<'_>> = self
            .dcs
            .iter()
            .zip(&read)
            .map(|(dc, (health, verdict, rows))| DcInput {
                context: dc.name(),
                health,
                doctor: verdict.as_ref(),
                read_only: self.settings.read_only || dc.read_only,
                rows: rows.as_slice(),
            })
            .collect();
        across::merge(&inputs, query, Timestamp::now())
    }

    fn dc_fleet_update(&self, query: &DcQuery) -> Arc<String> {
        let change = *self.changes.borrow();
        cached(&self.dc_updates, query, change, || {
            update(fleet_pages::parts(&self.dc_fleet(query), query))
        })
    }

    fn tenant(
        &self,
        dc: &Dc,
        namespace: &str,
        cluster: &str,
        events: &[Arc<Event>],
    ) -> Option<model::TenantView> {
        if !dc.in_scope(namespace) {
            return None;
        }
        model::tenant(
            &dc.objects(),
            &self.settings.operator_namespace,
            namespace,
            cluster,
            events,
            Timestamp::now(),
        )
    }

    /// Whether the tenant exists, as the DC's watches see it.
    pub(super) fn knows(&self, dc: &Dc, namespace: &str, cluster: &str) -> bool {
        dc.in_scope(namespace)
            && dc
                .objects()
                .cluster_keys()
                .contains(&ClusterKey::new(namespace, cluster))
    }

    /// One listing of a namespace's events, for a page or an API answer.
    async fn events(&self, dc: &Dc, namespace: &str) -> Vec<Arc<Event>> {
        let Some(client) = &dc.client else {
            return Vec::new();
        };
        Api::<Event>::namespaced(client.clone(), namespace)
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

fn shared(
    settings: Settings,
    scope: String,
    dcs: Vec<Arc<Dc>>,
    fleet_mode: bool,
) -> (AppState, Arc<watch::Sender<u64>>) {
    let (bump, changes) = watch::channel(0u64);
    let shared = Arc::new(Shared {
        scope,
        dcs,
        fleet_mode,
        changes,
        fleet_updates: Mutex::new(HashMap::new()),
        dc_updates: Mutex::new(HashMap::new()),
        instance: new_token(),
        token: new_token(),
        signer: Signer::new(),
        settings,
    });
    (shared, Arc::new(bump))
}

async fn listen(
    shared: AppState,
    listener: tokio::net::TcpListener,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), Exit> {
    let address = listener
        .local_addr()
        .map_err(|e| Exit::failure(format!("cannot read the listening address: {e}")))?;
    ready(address);
    axum::serve(listener, router(shared))
        .await
        .map_err(|e| Exit::failure(format!("the server stopped: {e}")))
}

/// Starts the watches of one context (`namespace`; None: every namespace), waits until they
/// have listed once, and serves on `listener` until the process ends. `ready` is called with
/// the address once requests are answered.
pub async fn serve(
    client: Client,
    namespace: Option<String>,
    settings: Settings,
    listener: tokio::net::TcpListener,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), Exit> {
    let mut watched =
        live::Watched::fleet(&client, namespace.as_deref(), &settings.operator_namespace);
    watched.ready().await.map_err(Exit::failure)?;
    let scope = match &namespace {
        Some(namespace) => format!("namespace {namespace}"),
        None => "every namespace".to_owned(),
    };
    let dc = Arc::new(Dc::new(
        None,
        namespace,
        Some(client),
        Some(watched.stores()),
        settings.read_only,
        Health::Live,
    ));
    let operator_namespace = settings.operator_namespace.clone();
    let (shared, bump) = shared(settings, scope, vec![dc.clone()], false);

    // The watches: every change wakes the live pages. A failing watch retries with backoff.
    let on_change = bump.clone();
    let watching = dc.clone();
    tokio::spawn(async move {
        loop {
            if let Err(error) = watched.changed().await {
                eprintln!("kubectl-express dashboard: {error}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            watching.bump(&on_change);
        }
    });
    // The doctor: its verdict on the fleet the watches hold, with what only it reads.
    tokio::spawn(dcs::doctor(dc, operator_namespace, bump, None));
    listen(shared, listener, ready).await
}

/// What the dashboard serves across DCs.
pub struct FleetStart {
    pub loaded: Arc<Loaded>,
    /// The selected contexts, in order.
    pub contexts: Vec<String>,
    /// `-n`; None: each context's own namespace.
    pub namespace: Option<String>,
    pub all_namespaces: bool,
    /// `--read-only-context`.
    pub read_only_contexts: Vec<String>,
    /// `--context-timeout`: how long a DC may take to answer a probe, and how long the
    /// dashboard waits for the DCs' first listing before it serves anyway.
    pub deadline: Duration,
}

/// Serves one fleet page over every context of `start`, each DC with its own client, watches
/// and doctor. A DC that cannot be read is served too, with its badge saying why; the
/// dashboard waits at most the deadline for the DCs' first listing.
pub async fn serve_fleet(
    start: FleetStart,
    settings: Settings,
    listener: tokio::net::TcpListener,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), Exit> {
    let mut dcs = Vec::new();
    let mut watches = Vec::new();
    for context in &start.contexts {
        let read_only = settings.read_only || start.read_only_contexts.contains(context);
        match start.loaded.client(context).await {
            Ok((client, default)) => {
                let namespace =
                    (!start.all_namespaces).then(|| start.namespace.clone().unwrap_or(default));
                let watched = live::Watched::fleet(
                    &client,
                    namespace.as_deref(),
                    &settings.operator_namespace,
                );
                let dc = Arc::new(Dc::new(
                    Some(context.clone()),
                    namespace,
                    Some(client),
                    Some(watched.stores()),
                    read_only,
                    Health::Connecting,
                ));
                watches.push((dc.clone(), watched));
                dcs.push(dc);
            }
            Err(why) => dcs.push(Arc::new(Dc::new(
                Some(context.clone()),
                None,
                None,
                None,
                read_only,
                Health::Down {
                    error: crate::fleet::ContextError::Config(why),
                    last_seen: None,
                },
            ))),
        }
    }
    let scope = format!(
        "{} contexts: {} · {}",
        start.contexts.len(),
        start.contexts.join(", "),
        match (&start.namespace, start.all_namespaces) {
            (_, true) => "every namespace".to_owned(),
            (Some(namespace), false) => format!("namespace {namespace}"),
            (None, false) => "each context's namespace".to_owned(),
        }
    );
    let operator_namespace = settings.operator_namespace.clone();
    let (shared, bump) = shared(settings, scope, dcs.clone(), true);
    for (dc, watched) in watches {
        tokio::spawn(dcs::follow(
            dc.clone(),
            watched,
            bump.clone(),
            start.deadline,
        ));
        tokio::spawn(dcs::doctor(
            dc,
            operator_namespace.clone(),
            bump.clone(),
            Some(start.deadline),
        ));
    }
    dcs::settled(&dcs, start.deadline).await;
    listen(shared, listener, ready).await
}

fn router(shared: AppState) -> Router {
    let (fleet_page, fleet_json, fleet_stream) = if shared.fleet_mode {
        (get(dc_fleet_page), get(dc_fleet_json), get(dc_fleet_stream))
    } else {
        (get(fleet_page), get(fleet_json), get(fleet_stream))
    };
    Router::new()
        .route("/", fleet_page)
        .route("/api/tenants", fleet_json)
        .route("/api/stream", fleet_stream)
        .route("/tenants/{namespace}/{cluster}", get(tenant_page))
        .route(
            "/dcs/{context}/tenants/{namespace}/{cluster}",
            get(tenant_page),
        )
        .route("/api/tenants/{namespace}/{cluster}", get(tenant_json))
        .route(
            "/api/dcs/{context}/tenants/{namespace}/{cluster}",
            get(tenant_json),
        )
        .route(
            "/api/tenants/{namespace}/{cluster}/stream",
            get(tenant_stream),
        )
        .route(
            "/api/dcs/{context}/tenants/{namespace}/{cluster}/stream",
            get(tenant_stream),
        )
        .route(
            "/api/tenants/{namespace}/{cluster}/actions/{action}",
            post(actions::tenant_action),
        )
        .route(
            "/api/dcs/{context}/tenants/{namespace}/{cluster}/actions/{action}",
            post(actions::tenant_action),
        )
        .route(
            "/api/tenants/{namespace}/{cluster}/nodes/{node}/actions/bounce",
            post(actions::bounce_action),
        )
        .route(
            "/api/dcs/{context}/tenants/{namespace}/{cluster}/nodes/{node}/actions/bounce",
            post(actions::bounce_action),
        )
        .route(
            "/api/releases/{name}/actions/{action}",
            post(actions::release_action),
        )
        .route(
            "/api/dcs/{context}/releases/{name}/actions/{action}",
            post(actions::release_action),
        )
        .route("/assets/dashboard.js", get(script))
        .route("/assets/dashboard.css", get(stylesheet))
        .layer(middleware::from_fn_with_state(shared.clone(), guard))
        .with_state(shared)
}

// ---- the guard ----

pub(super) fn refuse(status: StatusCode, why: &str) -> Response {
    (status, axum::Json(serde_json::json!({ "error": why }))).into_response()
}

/// Equal, in a time that does not depend on where they differ.
pub(super) fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// Why a request is refused, if it is (pure: the tests call it with forged headers).
pub fn refusal(
    method: &Method,
    headers: &HeaderMap,
    settings: &Settings,
    token: Option<&str>,
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
    // Across DCs each action checks the token bound to it: nothing more to refuse here.
    let token = token?;
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
        (!shared.fleet_mode).then_some(shared.token.as_str()),
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
    Html(pages::fleet_page(&shared.fleet_chrome(), &view, &query).into_string()).into_response()
}

async fn fleet_json(State(shared): State<AppState>, Query(query): Query<FleetQuery>) -> Response {
    axum::Json(shared.fleet(&query.normalized())).into_response()
}

async fn dc_fleet_page(State(shared): State<AppState>, Query(query): Query<DcQuery>) -> Response {
    let query = query.normalized();
    let view = shared.dc_fleet(&query);
    Html(fleet_pages::page(&shared.fleet_chrome(), &view, &query).into_string()).into_response()
}

async fn dc_fleet_json(State(shared): State<AppState>, Query(query): Query<DcQuery>) -> Response {
    axum::Json(shared.dc_fleet(&query.normalized())).into_response()
}

pub(super) fn no_tenant(namespace: &str, cluster: &str) -> String {
    format!("no Express cluster {cluster} in namespace {namespace}")
}

fn no_dc(context: Option<&str>) -> String {
    match context {
        Some(context) => format!("no context {context} on this dashboard"),
        None => {
            "this dashboard serves several contexts: its tenants are under /dcs/CONTEXT/".to_owned()
        }
    }
}

/// A tenant's path: in one DC (`/dcs/CONTEXT/...`), or in the single one.
#[derive(Debug, serde::Deserialize)]
struct TenantPath {
    #[serde(default)]
    context: Option<String>,
    namespace: String,
    cluster: String,
}

async fn tenant_page(
    State(shared): State<AppState>,
    Path(TenantPath {
        context,
        namespace,
        cluster,
    }): Path<TenantPath>,
) -> Response {
    let dc = match shared.dc(context.as_deref()) {
        Ok(dc) => dc,
        Err(_) => {
            let chrome = shared.fleet_chrome();
            let page = pages::not_found(&chrome, &no_dc(context.as_deref()));
            return (StatusCode::NOT_FOUND, Html(page.into_string())).into_response();
        }
    };
    // Only a tenant the watches know costs an API request.
    let events = if shared.knows(&dc, &namespace, &cluster) {
        shared.events(&dc, &namespace).await
    } else {
        Vec::new()
    };
    let chrome = shared.chrome(&dc);
    match shared.tenant(&dc, &namespace, &cluster, &events) {
        Some(view) => Html(pages::tenant_page(&chrome, &view).into_string()).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Html(pages::not_found(&chrome, &no_tenant(&namespace, &cluster)).into_string()),
        )
            .into_response(),
    }
}

async fn tenant_json(
    State(shared): State<AppState>,
    Path(TenantPath {
        context,
        namespace,
        cluster,
    }): Path<TenantPath>,
) -> Response {
    let dc = match shared.dc(context.as_deref()) {
        Ok(dc) => dc,
        Err(refused) => return *refused,
    };
    if !shared.knows(&dc, &namespace, &cluster) {
        return refuse(StatusCode::NOT_FOUND, &no_tenant(&namespace, &cluster));
    }
    let events = shared.events(&dc, &namespace).await;
    match shared.tenant(&dc, &namespace, &cluster, &events) {
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

async fn dc_fleet_stream(State(shared): State<AppState>, Query(query): Query<DcQuery>) -> Updates {
    let query = query.normalized();
    let changes = shared.changes.clone();
    let instance = shared.instance.clone();
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
                    let data = shared.dc_fleet_update(&query);
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

/// A tenant stream that can only say the tenant is not there.
fn gone(instance: &str, why: String) -> Updates {
    let event = SseEvent::default().event("gone").data(why);
    sse(instance, futures::stream::once(async move { event }))
}

async fn tenant_stream(
    State(shared): State<AppState>,
    Path(TenantPath {
        context,
        namespace,
        cluster,
    }): Path<TenantPath>,
) -> Updates {
    let instance = shared.instance.clone();
    let (dc, client) = match shared.dc(context.as_deref()) {
        Ok(dc) => match dc.client.clone() {
            Some(client) => (dc, client),
            None => return gone(&instance, "no client for this context".into()),
        },
        Err(_) => return gone(&instance, no_dc(context.as_deref())),
    };
    // The namespace's events, watched for as long as the page is open.
    let (events, writer) = reflector::store::<Event>();
    let api = Api::<Event>::namespaced(client, &namespace);
    let event_changes = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff(),
    )
    .map(|_| ())
    .boxed();
    let changes = shared.changes.clone();
    struct Follow {
        shared: AppState,
        dc: Arc<Dc>,
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
        dc,
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
                let listed = events.as_deref().unwrap_or_default();
                let Some(view) = follow
                    .shared
                    .tenant(&follow.dc, &namespace, &cluster, listed)
                else {
                    follow.gone = true;
                    let event = SseEvent::default()
                        .event("gone")
                        .data(no_tenant(&namespace, &cluster));
                    return Some((event, follow));
                };
                let chrome = follow.shared.chrome(&follow.dc);
                let mut parts = pages::tenant_parts(&view, &chrome);
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn settings(read_only: bool) -> Settings {
        Settings {
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
        assert_eq!(
            refusal(&Method::GET, &ok, &settings(false), Some(TOKEN)),
            None
        );
        // A DNS-rebinding page reaches the loopback server under its own name.
        let rebound = headers(&[("host", "evil.example:3110")]);
        let refused = refusal(&Method::GET, &rebound, &settings(false), Some(TOKEN));
        assert_eq!(refused.map(|r| r.0), Some(StatusCode::MISDIRECTED_REQUEST));
        assert!(
            refusal(
                &Method::GET,
                &HeaderMap::new(),
                &settings(false),
                Some(TOKEN)
            )
            .is_some()
        );
    }

    #[test]
    fn a_post_needs_the_token_and_our_origin() {
        let post = |pairs: &[(&'static str, &'static str)]| {
            refusal(
                &Method::POST,
                &headers(pairs),
                &settings(false),
                Some(TOKEN),
            )
            .map(|r| r.1)
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
            refusal(&Method::POST, &pairs, &settings(true), Some(TOKEN)),
            Some((StatusCode::FORBIDDEN, "the dashboard is read-only"))
        );
        assert_eq!(
            refusal(&Method::GET, &pairs, &settings(true), Some(TOKEN)),
            None
        );
    }

    #[test]
    fn across_dcs_the_guard_leaves_the_token_to_the_action() {
        let post = |pairs: &[(&'static str, &'static str)], read_only: bool| {
            refusal(&Method::POST, &headers(pairs), &settings(read_only), None).map(|r| r.1)
        };
        let host = ("host", "127.0.0.1:3110");
        assert_eq!(post(&[host], false), None);
        // Host, origin and read-only are still the guard's.
        assert!(
            post(&[host, ("origin", "http://evil.example")], false)
                .unwrap()
                .contains("origin")
        );
        assert_eq!(post(&[host], true), Some("the dashboard is read-only"));
        assert!(post(&[("host", "evil.example")], false).is_some());
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
