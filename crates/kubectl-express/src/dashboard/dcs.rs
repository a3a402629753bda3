//! The DCs the dashboard serves: one for `dashboard` as it always was, or one per selected
//! context (DESIGN section 13). Each has its own client, its own watches and its own doctor,
//! and a [`Health`] the fleet page's badge and the actions' refusal read.
//!
//! A DC's health follows its watches: a watch that fails sends a probe (the fleet verbs' own,
//! within `--context-timeout`) to say why, and the next change its watches see makes it live
//! again. The stores keep what they last held while a DC is down, so its rows stay, stale.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use express_api::Objects;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use tokio::sync::watch;

use super::model::fleet::{DcDoctor, Health};
use super::model::release::{Trail, TrailPoint, UNHEALTHY_SIGNAL};
use super::model::rows::{DcRows, DoctorBanner, TenantRow};
use express_client::contexts::across::{ContextError, Scope};
use express_client::contexts::select::Loaded;
use express_client::read::live;

/// How often a DC's doctor runs by default (it reads Leases, Deployments, events and the
/// releases): `--doctor-interval`.
pub const DOCTOR_EVERY: Duration = Duration::from_secs(15);

/// One DC.
pub struct Dc {
    /// Its kubeconfig context; None for the single-context dashboard.
    pub context: Option<String>,
    /// What it watches: one namespace, or every namespace.
    pub namespace: Option<String>,
    /// None when the kubeconfig makes no client for it (then it is down for good).
    pub client: Option<Client>,
    pub stores: Option<live::Stores>,
    /// `--read-only`, or `--read-only-context` names it.
    pub read_only: bool,
    state: RwLock<State>,
    /// Bumped on each change its watches see and each new health or verdict.
    changes: AtomicU64,
    /// Its tenants' rows, each namespace's built again when its objects change.
    rows: Mutex<DcRows>,
    /// What its watches hold, as views, built once per change and shared by the rows, the
    /// doctor and the tenant pages (turning a DC's cached objects into views is most of what
    /// drawing its fleet costs).
    objects: Mutex<Option<(u64, Arc<Objects>)>>,
    /// Each OperatorRelease's readings over time, by name (the release pages' charts).
    trails: Mutex<HashMap<String, Trail>>,
}

struct State {
    health: Health,
    /// When it was last seen answering.
    seen: Option<Timestamp>,
    doctor: Option<DoctorBanner>,
    verdict: Option<DcDoctor>,
}

impl Dc {
    pub fn new(
        context: Option<String>,
        namespace: Option<String>,
        client: Option<Client>,
        stores: Option<live::Stores>,
        read_only: bool,
        health: Health,
    ) -> Dc {
        Dc {
            context,
            namespace,
            client,
            stores,
            read_only,
            state: RwLock::new(State {
                seen: matches!(health, Health::Live).then(Timestamp::now),
                health,
                doctor: None,
                verdict: None,
            }),
            changes: AtomicU64::new(0),
            rows: Mutex::new(DcRows::default()),
            objects: Mutex::new(None),
            trails: Mutex::new(HashMap::new()),
        }
    }

    /// The context's name, or "" for the single-context dashboard.
    pub fn name(&self) -> &str {
        self.context.as_deref().unwrap_or_default()
    }

    /// What its watches hold now (as of the last change at least).
    pub fn objects(&self) -> Arc<Objects> {
        // The change is read before the stores: what is built is at least that new.
        let change = self.changes.load(Ordering::SeqCst);
        if let Ok(cached) = self.objects.lock()
            && let Some((_, objects)) = cached.as_ref().filter(|(at, _)| *at == change)
        {
            return objects.clone();
        }
        let objects = Arc::new(
            self.stores
                .as_ref()
                .map(live::Stores::objects)
                .unwrap_or_default(),
        );
        if let Ok(mut cached) = self.objects.lock() {
            *cached = Some((change, objects.clone()));
        }
        objects
    }

    pub fn health(&self) -> Health {
        self.state
            .read()
            .map(|s| s.health.clone())
            .unwrap_or(Health::Connecting)
    }

    pub fn doctor(&self) -> Option<DoctorBanner> {
        self.state.read().ok().and_then(|s| s.doctor.clone())
    }

    pub fn verdict(&self) -> Option<DcDoctor> {
        self.state.read().ok().and_then(|s| s.verdict.clone())
    }

    pub fn in_scope(&self, namespace: &str) -> bool {
        self.namespace.as_deref().is_none_or(|n| n == namespace)
    }

    /// Its tenants' rows as its watches hold them now: the rows of the namespaces changed
    /// since the last call are built again, the others kept.
    pub fn rows(&self, operator_namespace: &str) -> Arc<Vec<Arc<TenantRow>>> {
        let Some(stores) = &self.stores else {
            return Arc::default();
        };
        let mut rows = self
            .rows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        rows.refresh(stores, operator_namespace)
    }

    /// What the dashboard has read of release `name` over time.
    pub fn trail(&self, name: &str) -> Trail {
        self.trails
            .lock()
            .ok()
            .and_then(|t| t.get(name).cloned())
            .unwrap_or_default()
    }

    /// Records one reading of each release: both rings' share of unhealthy tenants as the
    /// doctor sees them now, and the analysis' signals as the judge last read them. Releases
    /// gone from the DC lose their trail.
    fn record_releases(
        &self,
        releases: &[express_api::OperatorRelease],
        fleet: &express_triage::Fleet,
        now: Timestamp,
    ) {
        let Ok(mut trails) = self.trails.lock() else {
            return;
        };
        trails.retain(|name, _| {
            releases
                .iter()
                .any(|r| r.metadata.name.as_deref() == Some(name))
        });
        for release in releases {
            let (Some(name), uid) = (
                release.metadata.name.clone(),
                release.metadata.uid.clone().unwrap_or_default(),
            ) else {
                continue;
            };
            let trail = trails.entry(name).or_default();
            if trail.uid != uid {
                *trail = Trail {
                    uid,
                    ..Trail::default()
                };
            }
            // A release over reads the same forever: its chart stops where it ended.
            if release
                .status
                .as_ref()
                .is_some_and(|s| s.phase().is_final())
                && !trail.points.is_empty()
            {
                continue;
            }
            let limits = express_triage::Thresholds::default();
            let share = |ring: &str| {
                let health = express_triage::rings::ring_health(fleet, ring, &limits);
                (health.tenants > 0).then(|| health.unhealthy_percent())
            };
            trail.record(TrailPoint {
                at: now,
                signal: UNHEALTHY_SIGNAL.to_owned(),
                canary: share(&release.spec.to_ring),
                stable: share(&release.spec.from_ring),
            });
            for point in Trail::analysis_points(release) {
                trail.record(point);
            }
        }
    }

    pub(super) fn bump(&self, all: &watch::Sender<u64>) {
        self.changes.fetch_add(1, Ordering::SeqCst);
        all.send_modify(|n| *n += 1);
    }

    /// Sets its health; true when that changed anything.
    fn set_health(&self, health: Health) -> bool {
        let Ok(mut state) = self.state.write() else {
            return false;
        };
        if matches!(health, Health::Live) {
            state.seen = Some(Timestamp::now());
        }
        let health = match health {
            // Down since it was last seen.
            Health::Down { error, .. } => Health::Down {
                error,
                last_seen: state.seen,
            },
            other => other,
        };
        if state.health == health {
            return false;
        }
        state.health = health;
        true
    }

    /// Records its doctor's verdict; true when it changed.
    fn set_doctor(&self, banner: DoctorBanner, verdict: DcDoctor) -> bool {
        let Ok(mut state) = self.state.write() else {
            return false;
        };
        let banner = Some(banner);
        if state.doctor == banner {
            return false;
        }
        state.doctor = banner;
        state.verdict = Some(verdict);
        true
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

/// Each context of `start` as a DC, in order, and the watches to follow for those the
/// kubeconfig makes a client for (a context it does not is down for good, and says why).
/// `streaming_lists`: `--streaming-lists`, the watches fill by streaming lists where a DC
/// answers them.
pub async fn open(
    start: &FleetStart,
    read_only: bool,
    operator_namespace: &str,
    streaming_lists: bool,
) -> (Vec<Arc<Dc>>, Vec<(Arc<Dc>, live::Watched)>) {
    let mut dcs = Vec::new();
    let mut watches = Vec::new();
    for context in &start.contexts {
        let read_only = read_only || start.read_only_contexts.contains(context);
        match start.loaded.client(context).await {
            Ok((client, default)) => {
                let namespace =
                    (!start.all_namespaces).then(|| start.namespace.clone().unwrap_or(default));
                let listing = live::FirstListing::choose(
                    live::scoped(&client, namespace.as_deref()),
                    streaming_lists,
                    start.deadline,
                )
                .await;
                let watched = live::Watched::fleet(
                    &client,
                    namespace.as_deref(),
                    operator_namespace,
                    listing,
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
                    error: express_client::contexts::across::ContextError::Config(why),
                    last_seen: None,
                },
            ))),
        }
    }
    (dcs, watches)
}

/// Keeps `dc` current: its watches (`watched`), and why it cannot be read when they fail.
/// `all` is bumped on every change the pages should see.
pub async fn follow(
    dc: Arc<Dc>,
    mut watched: live::Watched,
    all: Arc<watch::Sender<u64>>,
    deadline: Duration,
) {
    loop {
        match watched.changed().await {
            Ok(()) => {
                let listed = dc.stores.as_ref().is_some_and(live::Stores::listed);
                match dc.health() {
                    Health::Live => {}
                    Health::Connecting => {
                        if listed {
                            dc.set_health(Health::Live);
                        }
                    }
                    // Not every watch reports its failures (the operator-wide ConfigMap's is
                    // optional), and a down DC's stores still say listed: only an answer
                    // makes it live again.
                    Health::Down { .. } => {
                        if listed {
                            dc.set_health(match probe(&dc, deadline).await {
                                Ok(()) => Health::Live,
                                Err(error) => Health::Down {
                                    error,
                                    last_seen: None,
                                },
                            });
                        }
                    }
                }
                dc.bump(&all);
            }
            Err(failed) => {
                let why = match probe(&dc, deadline).await {
                    Ok(()) => match dc.health() {
                        // It answers, but a watch does not: say what the watch said.
                        Health::Live => None,
                        _ => Some(ContextError::Failed(failed)),
                    },
                    Err(error) => Some(error),
                };
                if let Some(error) = why
                    && dc.set_health(Health::Down {
                        error,
                        last_seen: None,
                    })
                {
                    dc.bump(&all);
                }
                // The watches retry with their own backoff; this only bounds a tight loop.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Asks the DC for its version and one ExpressCluster, within `deadline`.
pub async fn probe(dc: &Dc, deadline: Duration) -> Result<(), ContextError> {
    let Some(client) = &dc.client else {
        return Err(ContextError::Config("no client for this context".into()));
    };
    let scope = match dc.namespace {
        Some(_) => Scope::Namespace,
        None => Scope::All,
    };
    let namespace = dc.namespace.clone().unwrap_or_default();
    match tokio::time::timeout(
        deadline,
        express_client::contexts::across::probe(client, scope.namespace(&namespace)),
    )
    .await
    {
        Ok(result) => result,
        Err(_) => Err(ContextError::TimedOut(deadline.as_secs())),
    }
}

/// Runs `dc`'s doctor every `every` while it is live; in the fleet (`deadline` set), a
/// probe first, so that a DC that hangs without failing its watches is named too.
pub async fn doctor(
    dc: Arc<Dc>,
    operator_namespace: String,
    all: Arc<watch::Sender<u64>>,
    deadline: Option<Duration>,
    every: Duration,
) {
    loop {
        if let Some(deadline) = deadline
            && let Err(error) = probe(&dc, deadline).await
            && dc.set_health(Health::Down {
                error,
                last_seen: None,
            })
        {
            dc.bump(&all);
        }
        if let (Health::Live, Some(client)) = (dc.health(), &dc.client) {
            let objects = dc.objects();
            // The banner names the layer underneath as doctor does.
            let control_plane = express_client::read::triage::control_plane(client).await;
            let fleet = express_client::read::triage::fleet_around(
                client,
                &operator_namespace,
                &objects,
                Vec::new(),
                control_plane,
            )
            .await;
            let report = express_triage::triage(&fleet, &express_triage::Thresholds::default());
            // Every release in full, for the release pages' readings (none before the CRD).
            if let Ok(releases) = crate::read::release::list(client, &operator_namespace).await {
                dc.record_releases(&releases, &fleet, Timestamp::now());
            }
            // The copies of the releases across DCs, for their stages (none before their CRD).
            let plans = express_client::read::fleet_release::copies(client, &operator_namespace)
                .await
                .unwrap_or_default();
            let banner = DoctorBanner::from_report(&report, &fleet.releases, &plans);
            let verdict = DcDoctor {
                verdict: report.verdict,
                reason: report.reason.clone(),
            };
            // Pages re-render only for a verdict that changed, not every run.
            if dc.set_doctor(banner, verdict) {
                dc.bump(&all);
            }
        }
        tokio::time::sleep(every).await;
    }
}

/// Waits until no DC is still connecting, or `deadline` has passed.
pub async fn settled(dcs: &[Arc<Dc>], deadline: Duration) {
    let started = Instant::now();
    while started.elapsed() < deadline
        && dcs
            .iter()
            .any(|dc| matches!(dc.health(), Health::Connecting))
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_dc_that_drops_is_down_since_it_was_last_seen_and_comes_back_live() {
        let dc = Dc::new(
            Some("dc-b".into()),
            None,
            None,
            None,
            false,
            Health::Connecting,
        );
        let unreachable = || Health::Down {
            error: ContextError::Unreachable("connection refused".into()),
            last_seen: None,
        };
        // Never seen: down with no time.
        assert!(dc.set_health(unreachable()));
        assert_eq!(dc.health(), unreachable());
        assert!(!dc.set_health(unreachable()), "the same health again");
        assert!(dc.set_health(Health::Live));
        let before = Timestamp::now();
        assert!(dc.set_health(unreachable()));
        let Health::Down {
            last_seen: Some(seen),
            ..
        } = dc.health()
        else {
            panic!("down, seen before: {:?}", dc.health())
        };
        assert!(seen <= before);
        assert!(dc.set_health(Health::Live));
        assert_eq!(dc.health(), Health::Live);
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
