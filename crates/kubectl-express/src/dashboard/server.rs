//! The dashboard's HTTP server (axum): the router, which lists every route once, the page and
//! JSON handlers, and starting the server over one context or several.
//!
//! What it reads comes from watches (view stores of the Express objects, pods and control
//! ConfigMaps of each DC, started once: [`super::dcs`]), so a fleet page costs no API request; a
//! tenant page lists its namespace's events once, and its live stream watches them for as long
//! as the page is open. Each DC's doctor runs every [`dcs::DOCTOR_EVERY`].
//!
//! One fleet page serves one context or several ([`super::model::fleet`]). A tenant of the
//! single context lives at `/tenants/NS/CLUSTER` (`/api/tenants/...`); of one DC of several at
//! `/dcs/CONTEXT/tenants/...`: the tenant routes are one list, mounted at both places.
//!
//! Every request passes [`super::guard`] first; the live updates are [`super::streams`], the
//! actions [`super::actions`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::middleware;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use kube::Client;

use super::actions;
use super::dcs::{self, Dc, FleetStart};
use super::guard::guard;
use super::model::fleet::{FleetQuery, Health};
use super::pages;
pub use super::state::Settings;
use super::state::{AppState, ReleasePath, TenantPath, no_dc, refuse, shared};
use super::streams;
use express_client::exit::Exit;
use express_client::read::live::{self, no_cluster};

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
    let listing = live::FirstListing::choose(
        live::scoped(&client, namespace.as_deref()),
        settings.streaming_lists,
        Duration::from_secs(10),
    )
    .await;
    let mut watched = live::Watched::fleet(
        &client,
        namespace.as_deref(),
        &settings.operator_namespace,
        listing,
    );
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
    let every = settings.doctor_every;
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
    tokio::spawn(dcs::doctor(dc, operator_namespace, bump, None, every));
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
    let (dcs, watches) = dcs::open(
        &start,
        settings.read_only,
        &settings.operator_namespace,
        settings.streaming_lists,
    )
    .await;
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
    let every = settings.doctor_every;
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
            every,
        ));
    }
    dcs::settled(&dcs, start.deadline).await;
    listen(shared, listener, ready).await
}

fn router(shared: AppState) -> Router {
    Router::new()
        .route("/", get(fleet_page))
        .route("/api/tenants", get(fleet_json))
        .route("/api/stream", get(streams::fleet_stream))
        .route("/fleet-releases/{name}", get(fleet_release_page))
        .route("/api/fleet-releases/{name}", get(fleet_release_json))
        .route(
            "/api/fleet-releases/{name}/stream",
            get(streams::fleet_release_stream),
        )
        .route(
            "/api/fleet-releases/{name}/actions/{action}",
            post(actions::fleet_release_action),
        )
        .merge(in_dc())
        .nest("/dcs/{context}", pages_in_dc())
        .nest("/api/dcs/{context}", api_in_dc())
        .route("/assets/dashboard.js", get(script))
        .route("/assets/dashboard.css", get(stylesheet))
        .layer(middleware::from_fn_with_state(shared.clone(), guard))
        .with_state(shared)
}

/// The routes of one DC's tenants and releases, at `/` for the single context.
fn in_dc() -> Router<AppState> {
    pages_in_dc().nest("/api", api_in_dc())
}

fn pages_in_dc() -> Router<AppState> {
    Router::new()
        .route("/tenants/{namespace}/{cluster}", get(tenant_page))
        .route("/releases/{name}", get(release_page))
}

fn api_in_dc() -> Router<AppState> {
    Router::new()
        .route("/tenants/{namespace}/{cluster}", get(tenant_json))
        .route(
            "/tenants/{namespace}/{cluster}/stream",
            get(streams::tenant_stream),
        )
        .route(
            "/tenants/{namespace}/{cluster}/actions/{action}",
            post(actions::tenant_action),
        )
        .route(
            "/tenants/{namespace}/{cluster}/nodes/{node}/actions/bounce",
            post(actions::bounce_action),
        )
        .route("/releases/{name}", get(release_json))
        .route("/releases/{name}/stream", get(streams::release_stream))
        .route(
            "/releases/{name}/actions/{action}",
            post(actions::release_action),
        )
}

// ---- pages and JSON ----

async fn fleet_page(State(shared): State<AppState>, Query(query): Query<FleetQuery>) -> Response {
    let query = query.normalized();
    let view = shared.fleet(&query);
    Html(pages::fleet::page(&shared.fleet_chrome(), &view, &query).into_string()).into_response()
}

async fn fleet_json(State(shared): State<AppState>, Query(query): Query<FleetQuery>) -> Response {
    axum::Json(shared.fleet(&query.normalized())).into_response()
}

/// The DC a page names, or the page saying there is none.
fn page_dc(shared: &AppState, context: Option<&str>) -> Result<Arc<Dc>, Box<Response>> {
    shared.dc(context).map_err(|_| {
        let page = pages::not_found(&shared.fleet_chrome(), &no_dc(context));
        Box::new((StatusCode::NOT_FOUND, Html(page.into_string())).into_response())
    })
}

async fn tenant_page(
    State(shared): State<AppState>,
    Path(TenantPath {
        context,
        namespace,
        cluster,
    }): Path<TenantPath>,
) -> Response {
    let dc = match page_dc(&shared, context.as_deref()) {
        Ok(dc) => dc,
        Err(page) => return *page,
    };
    // Only a tenant the watches know costs an API request.
    let events = if shared.knows(&dc, &namespace, &cluster) {
        shared.events(&dc, &namespace).await
    } else {
        Vec::new()
    };
    let chrome = shared.chrome(&dc);
    match shared.tenant(&dc, &namespace, &cluster, &events) {
        Some(view) => {
            Html(pages::tenant::tenant_page(&chrome, &view).into_string()).into_response()
        }
        None => (
            StatusCode::NOT_FOUND,
            Html(pages::not_found(&chrome, &no_cluster(&namespace, &cluster)).into_string()),
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
        return refuse(StatusCode::NOT_FOUND, &no_cluster(&namespace, &cluster));
    }
    let events = shared.events(&dc, &namespace).await;
    match shared.tenant(&dc, &namespace, &cluster, &events) {
        Some(view) => axum::Json(view).into_response(),
        None => refuse(StatusCode::NOT_FOUND, &no_cluster(&namespace, &cluster)),
    }
}

async fn release_page(
    State(shared): State<AppState>,
    Path(ReleasePath { context, name }): Path<ReleasePath>,
) -> Response {
    let dc = match page_dc(&shared, context.as_deref()) {
        Ok(dc) => dc,
        Err(page) => return *page,
    };
    let chrome = shared.chrome(&dc);
    match shared.release(&dc, &name).await {
        Ok(view) => {
            Html(pages::release::release_page(&chrome, &view).into_string()).into_response()
        }
        Err((status, why)) => {
            (status, Html(pages::not_found(&chrome, &why).into_string())).into_response()
        }
    }
}

async fn release_json(
    State(shared): State<AppState>,
    Path(ReleasePath { context, name }): Path<ReleasePath>,
) -> Response {
    let dc = match shared.dc(context.as_deref()) {
        Ok(dc) => dc,
        Err(refused) => return *refused,
    };
    match shared.release(&dc, &name).await {
        Ok(view) => axum::Json(view).into_response(),
        Err((status, why)) => refuse(status, &why),
    }
}

async fn fleet_release_page(State(shared): State<AppState>, Path(name): Path<String>) -> Response {
    let chrome = shared.fleet_chrome();
    match shared.fleet_release(&name).await {
        Ok(view) => Html(
            pages::release::fleet_release_page(&chrome, shared.fleet_signer(), &view).into_string(),
        )
        .into_response(),
        Err(why) => (
            StatusCode::NOT_FOUND,
            Html(pages::not_found(&chrome, &why).into_string()),
        )
            .into_response(),
    }
}

async fn fleet_release_json(State(shared): State<AppState>, Path(name): Path<String>) -> Response {
    match shared.fleet_release(&name).await {
        Ok(view) => axum::Json(view).into_response(),
        Err(why) => refuse(StatusCode::NOT_FOUND, &why),
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use axum::body::{Body, to_bytes};
    use axum::http::Request;
    use tower::ServiceExt as _;

    use super::*;

    const HOST: &str = "127.0.0.1:3110";

    /// The router over DCs that hold nothing (no client: nothing is read), one context or
    /// several.
    fn served(contexts: &[&str]) -> Router {
        let settings = Settings {
            operator_namespace: "express-system".into(),
            read_only: false,
            allowed_hosts: vec![HOST.into()],
            doctor_every: crate::dashboard::dcs::DOCTOR_EVERY,
            streaming_lists: false,
        };
        let dcs = if contexts.is_empty() {
            vec![Arc::new(Dc::new(
                None,
                None,
                None,
                None,
                false,
                Health::Live,
            ))]
        } else {
            contexts
                .iter()
                .map(|c| {
                    Arc::new(Dc::new(
                        Some((*c).into()),
                        None,
                        None,
                        None,
                        false,
                        Health::Live,
                    ))
                })
                .collect()
        };
        let (state, _bump) = shared(settings, "test".into(), dcs, !contexts.is_empty());
        router(state)
    }

    async fn call(router: &Router, method: &str, path: &str) -> (StatusCode, String) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("host", HOST)
            .body(Body::empty())
            .unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn one_context_serves_the_fleet_page_and_its_tenants_at_the_root() {
        let router = served(&[]);
        let (status, page) = call(&router, "GET", "/").await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains("id=\"banner\""), "{page}");
        assert!(!page.contains("id=\"badges\""), "one DC has no badges");
        let (status, json) = call(&router, "GET", "/api/tenants").await;
        assert_eq!(status, StatusCode::OK);
        let view: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(view["tenants"], serde_json::json!([]));
        assert_eq!(view["contexts"], serde_json::json!([]));
        // A tenant that is not there, by page, API and action.
        let (status, page) = call(&router, "GET", "/tenants/team-a/shop").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(
            page.contains("no Express cluster shop in namespace team-a"),
            "{page}"
        );
        let (status, _) = call(&router, "GET", "/api/tenants/team-a/shop").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        // The routes of a DC of several are not this dashboard's.
        let (status, answer) = call(&router, "GET", "/api/dcs/dc-a/tenants/team-a/shop").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(answer.contains("no context dc-a"), "{answer}");
        // Every POST needs the page's token.
        let (status, answer) =
            call(&router, "POST", "/api/tenants/team-a/shop/actions/pause").await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    }

    #[tokio::test]
    async fn several_contexts_serve_one_fleet_page_and_each_tenant_under_its_dc() {
        let router = served(&["dc-a", "dc-b"]);
        let (status, page) = call(&router, "GET", "/").await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains("id=\"badges\""), "{page}");
        let (status, json) = call(&router, "GET", "/api/tenants?context=dc-b").await;
        assert_eq!(status, StatusCode::OK);
        let view: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(view["contexts"], serde_json::json!(["dc-a", "dc-b"]));
        let (status, answer) = call(&router, "GET", "/api/dcs/dc-b/tenants/team-a/shop").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(answer.contains("no Express cluster shop"), "{answer}");
        let (status, answer) = call(&router, "GET", "/api/dcs/dc-c/tenants/team-a/shop").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(answer.contains("no context dc-c"), "{answer}");
        // The single context's URLs say where a DC's tenants are.
        let (status, answer) =
            call(&router, "POST", "/api/tenants/team-a/shop/actions/pause").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(answer.contains("/dcs/"), "{answer}");
    }
}
