//! What every handler of the dashboard shares: how it was started ([`Settings`]), its DCs, its
//! tokens, the change counter the live pages follow, and the fleet page's render cache; the DC
//! a request names and the refusals every handler answers with.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use express_api::ClusterKey;
use express_api::fleet_release::FleetRelease;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use list_pages::ListPaged;
use tokio::sync::watch;

use super::dcs::{Dc, dc_refusal};
use super::links::{Acting, Signer, new_token};
use super::model::fleet::{self, DcInput, FleetQuery, FleetView};
use super::model::fleet_release::FleetReleaseView;
use super::model::release::ReleaseView;
use super::model::tenant::{self, TenantView};
use super::pages::{self, Chrome};

/// How the dashboard was started.
#[derive(Clone, Debug)]
pub struct Settings {
    pub operator_namespace: String,
    pub read_only: bool,
    /// `Host` values requests may carry ("127.0.0.1:3110", "localhost:3110").
    pub allowed_hosts: Vec<String>,
    /// How often each DC's doctor runs (and the release pages' charts gain a point).
    pub doctor_every: Duration,
    /// `--streaming-lists`: the watches fill by streaming lists where the server serves them.
    pub streaming_lists: bool,
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
}

struct FleetUpdate {
    change: u64,
    at: Instant,
    data: Arc<String>,
}

/// How long one DC may take to answer a release page's read or a FleetRelease action's
/// (the CLI's default `--context-timeout`).
pub(super) const RELEASE_READ_DEADLINE: Duration = Duration::from_secs(10);

/// Queries whose last render is kept; more are dropped all at once (a view nobody watches
/// costs nothing to render again).
const FLEET_UPDATES_KEPT: usize = 32;

pub(super) type AppState = Arc<Shared>;

/// The render kept for `query` if it was made at `change` less than `fresh_for` ago, or
/// `render`'s, kept.
fn cached(
    updates: &Mutex<HashMap<FleetQuery, FleetUpdate>>,
    query: &FleetQuery,
    change: u64,
    fresh_for: Duration,
    render: impl FnOnce() -> String,
) -> Arc<String> {
    let fresh = |u: &FleetUpdate| u.change == change && u.at.elapsed() < fresh_for;
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
        let dc_refused = self.fleet_mode && dc_refusal(dc).is_some();
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

    /// The fleet page's chrome: the server's read-only; its release buttons each act in their
    /// own DC, with this server's signer.
    pub(super) fn fleet_chrome(&self) -> Chrome<'_> {
        Chrome {
            token: if self.fleet_mode { "" } else { &self.token },
            read_only: self.settings.read_only,
            scope: &self.scope,
            instance: &self.instance,
            acting: Acting {
                context: None,
                signer: Some(&self.signer),
            },
        }
    }

    /// Across DCs, the signer of the FleetRelease buttons' own tokens (the single DC's page
    /// token serves its buttons).
    pub(super) fn fleet_signer(&self) -> Option<&Signer> {
        self.fleet_mode.then_some(&self.signer)
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

    /// The fleet page for `query`: each DC's rows (built once per change of that DC), merged.
    pub(super) fn fleet(&self, query: &FleetQuery) -> FleetView {
        let read: Vec<_> = self
            .dcs
            .iter()
            .map(|dc| {
                (
                    dc.health(),
                    dc.verdict(),
                    dc.doctor(),
                    dc.rows(&self.settings.operator_namespace),
                )
            })
            .collect();
        let inputs: Vec<DcInput<'_>> = self
            .dcs
            .iter()
            .zip(&read)
            .map(|(dc, (health, verdict, banner, rows))| DcInput {
                context: dc.name(),
                health,
                doctor: verdict.as_ref(),
                banner: banner.as_ref(),
                read_only: self.settings.read_only || dc.read_only,
                rows: rows.as_slice(),
            })
            .collect();
        fleet::merge(&inputs, query, Timestamp::now())
    }

    /// The fleet page's live update for `query`: rendered once per change (or, for its ages,
    /// once per `fresh_for`) whoever asks.
    pub(super) fn fleet_update(&self, query: &FleetQuery, fresh_for: Duration) -> Arc<String> {
        let change = *self.changes.borrow();
        cached(&self.fleet_updates, query, change, fresh_for, || {
            pages::update(pages::fleet::parts(
                &self.fleet_chrome(),
                &self.fleet(query),
                query,
            ))
        })
    }

    pub(super) fn tenant(
        &self,
        dc: &Dc,
        namespace: &str,
        cluster: &str,
        events: &[Arc<Event>],
    ) -> Option<TenantView> {
        if !dc.in_scope(namespace) {
            return None;
        }
        tenant::tenant(
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

    /// An OperatorRelease of `dc` as its page shows it, read now; Err: the answer's status
    /// (404 no such release or kind, 502 the DC did not answer in time or failed) and why.
    pub(super) async fn release(
        &self,
        dc: &Dc,
        name: &str,
    ) -> Result<ReleaseView, (StatusCode, String)> {
        let Some(client) = &dc.client else {
            return Err((StatusCode::BAD_GATEWAY, "no client for this context".into()));
        };
        if let Some(why) = dc.health().refusal() {
            return Err((StatusCode::BAD_GATEWAY, format!("the DC {why}")));
        }
        let read = crate::read::release::get(client, &self.settings.operator_namespace, name);
        let release = match tokio::time::timeout(RELEASE_READ_DEADLINE, read).await {
            Ok(Ok(release)) => release,
            Ok(Err(exit)) if exit.code == express_client::exit::Code::Usage => {
                return Err((StatusCode::NOT_FOUND, exit.message));
            }
            Ok(Err(exit)) => return Err((StatusCode::BAD_GATEWAY, exit.message)),
            Err(_) => {
                return Err((
                    StatusCode::BAD_GATEWAY,
                    format!(
                        "OperatorRelease {name}: no answer within {}s",
                        RELEASE_READ_DEADLINE.as_secs()
                    ),
                ));
            }
        };
        let namespace = &self.settings.operator_namespace;
        let ledger_read =
            crate::read::release::notifications(client, namespace, &release.spec.from_ring);
        let ledger = tokio::time::timeout(RELEASE_READ_DEADLINE, ledger_read)
            .await
            .ok()
            .flatten();
        let now = Timestamp::now();
        let mut view = ReleaseView::of(dc.name(), &release, &dc.trail(name), now);
        view.notifications =
            crate::show::release::notification_lines(&release, ledger.as_ref(), now);
        Ok(view)
    }

    /// The clients of the DCs a FleetRelease action may write in: served, not read-only,
    /// whatever their health (one that does not answer is named, as the CLI names it). The
    /// single DC has no context name a plan could name: none.
    pub(super) fn plan_clients(&self) -> BTreeMap<String, kube::Client> {
        self.dcs
            .iter()
            .filter(|dc| self.fleet_mode && !self.settings.read_only && !dc.read_only)
            .filter_map(|dc| Some((dc.context.clone()?, dc.client.clone()?)))
            .collect()
    }

    /// The newest copy of FleetRelease `name` among the DCs served (the copy a driver wrote
    /// last: the one its page shows and its actions act on), each read at once within
    /// [`RELEASE_READ_DEADLINE`]. Err: no DC holds it, or none answered.
    pub(super) async fn newest_copy(&self, name: &str) -> Result<FleetRelease, String> {
        let namespace = &self.settings.operator_namespace;
        let reads = self.dcs.iter().filter_map(|dc| {
            let client = dc.client.clone()?;
            Some(async move {
                tokio::time::timeout(
                    RELEASE_READ_DEADLINE,
                    express_client::read::fleet_release::copy(&client, namespace, name),
                )
                .await
                .ok()
                .and_then(Result::ok)
                .flatten()
            })
        });
        futures::future::join_all(reads)
            .await
            .into_iter()
            .flatten()
            .max_by_key(|copy| {
                copy.status
                    .as_ref()
                    .and_then(|s| s.updated_at.as_ref())
                    .map(|t| t.0)
            })
            .ok_or_else(|| {
                format!(
                    "no DC of this dashboard holds a FleetRelease {name} in namespace {namespace}"
                )
            })
    }

    /// FleetRelease `name` as its page shows it, from [`Self::newest_copy`].
    pub(super) async fn fleet_release(&self, name: &str) -> Result<FleetReleaseView, String> {
        let plan = self.newest_copy(name).await?;
        let served: Vec<String> = self.plan_clients().into_keys().collect();
        Ok(FleetReleaseView::of(&plan, &served, Timestamp::now()))
    }

    /// One listing of a namespace's events, for a page or an API answer.
    pub(super) async fn events(&self, dc: &Dc, namespace: &str) -> Vec<Arc<Event>> {
        let Some(client) = &dc.client else {
            return Vec::new();
        };
        Api::<Event>::namespaced(client.clone(), namespace)
            .list_paged(&ListParams::default())
            .await
            .map(|list| list.items.into_iter().map(Arc::new).collect())
            .unwrap_or_default()
    }
}

pub(super) fn shared(
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
        instance: new_token(),
        token: new_token(),
        signer: Signer::new(),
        settings,
    });
    (shared, Arc::new(bump))
}

/// A refusal, as JSON: `{"error": why}`.
pub fn refuse(status: StatusCode, why: &str) -> Response {
    (status, axum::Json(serde_json::json!({ "error": why }))).into_response()
}

/// Why a request names no DC of this dashboard.
pub(super) fn no_dc(context: Option<&str>) -> String {
    match context {
        Some(context) => format!("no context {context} on this dashboard"),
        None => {
            "this dashboard serves several contexts: its tenants are under /dcs/CONTEXT/".to_owned()
        }
    }
}

/// An OperatorRelease's path: in one DC (`/dcs/CONTEXT/...`), or in the single one.
#[derive(Debug, serde::Deserialize)]
pub(super) struct ReleasePath {
    #[serde(default)]
    pub(super) context: Option<String>,
    pub(super) name: String,
}

/// A tenant's path: in one DC (`/dcs/CONTEXT/...`), or in the single one.
#[derive(Debug, serde::Deserialize)]
pub(super) struct TenantPath {
    #[serde(default)]
    pub(super) context: Option<String>,
    pub(super) namespace: String,
    pub(super) cluster: String,
}
