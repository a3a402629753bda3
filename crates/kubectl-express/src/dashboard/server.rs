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
//! Every request passes [`super::guard`] first; the live updates are [`super::streams`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::middleware;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use express_api::ClusterKey;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams};
use tokio::sync::watch;

use super::actions::{self, Acting, Signer};
use super::dcs::{self, Dc, FleetStart};
use super::fleet::{self as across, DcInput, DcQuery, Health};
use super::fleet_pages;
use super::guard::{guard, new_token, refuse};
use super::model::{self, FleetQuery};
use super::pages::{self, Chrome};
use super::streams::{self, REFRESH, update};
use crate::exit::Exit;
use crate::live;

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
    pub(super) changes: watch::Receiver<u64>,
    /// Tells this process from the one before it: a page whose stream reconnects to another
    /// process reloads, since its token and its view are the old process's.
    pub(super) instance: String,
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
    pub(super) fn chrome<'a>(&'a self, dc: &'a Dc) -> Chrome<'a> {
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

    /// The single DC's page token.
    pub(super) fn token(&self) -> &str {
        &self.token
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
    pub(super) fn fleet_update(&self, query: &FleetQuery) -> Arc<String> {
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

    pub(super) fn dc_fleet_update(&self, query: &DcQuery) -> Arc<String> {
        let change = *self.changes.borrow();
        cached(&self.dc_updates, query, change, || {
            update(fleet_pages::parts(&self.dc_fleet(query), query))
        })
    }

    pub(super) fn tenant(
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

/// Serves one fleet page over every context of `start`, each DC with its own client, watches
/// and doctor. A DC that cannot be read is served too, with its badge saying why; the
/// dashboard waits at most the deadline for the DCs' first listing.
pub async fn serve_fleet(
    start: FleetStart,
    settings: Settings,
    listener: tokio::net::TcpListener,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), Exit> {
    let (dcs, watches) = dcs::open(&start, &settings).await;
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
        (
            get(dc_fleet_page),
            get(dc_fleet_json),
            get(streams::dc_fleet_stream),
        )
    } else {
        (get(fleet_page), get(fleet_json), get(streams::fleet_stream))
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
            get(streams::tenant_stream),
        )
        .route(
            "/api/dcs/{context}/tenants/{namespace}/{cluster}/stream",
            get(streams::tenant_stream),
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

pub(super) fn no_dc(context: Option<&str>) -> String {
    match context {
        Some(context) => format!("no context {context} on this dashboard"),
        None => {
            "this dashboard serves several contexts: its tenants are under /dcs/CONTEXT/".to_owned()
        }
    }
}

/// A tenant's path: in one DC (`/dcs/CONTEXT/...`), or in the single one.
#[derive(Debug, serde::Deserialize)]
pub(super) struct TenantPath {
    #[serde(default)]
    pub(super) context: Option<String>,
    pub(super) namespace: String,
    pub(super) cluster: String,
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
