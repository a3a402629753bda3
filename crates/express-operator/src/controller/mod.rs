//! The controller. Caches (indexes fed by watches) of ExpressClusters, Backends, Frontends, the pods they
//! own, the control ConfigMaps and ControllerRevisions; every change is mapped to its Express
//! cluster (namespace, clusterName); one reconcile per cluster, which reads as its table of
//! contents: gate (leader, namespace) → [`observe`] → plan (the pure planner) → [`record`] →
//! [`act`] → [`report`], with every event worded in [`events`]. Level-triggered and
//! watch-driven: nothing polls.

mod act;
mod caches;
mod compact;
mod error;
mod events;
mod handover;
mod index;
mod moves;
mod observe;
mod overlay;
mod record;
mod recorders;
mod release;
mod report;

pub use caches::{Caches, Scoped, Tasks};
pub use error::Error;
pub use overlay::{WrittenPods, WrittenStatuses};
pub use recorders::{Recorders, Reporter};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use express_api::keys::{CONTROL_CONFIGMAP_GLOBAL, CONTROL_CONFIGMAP_NAMESPACE, LABEL_CLUSTER};
use express_api::{Backend, ExpressCluster, ExpressClusterStatus, Frontend, NodeStatus};
use express_planner::{ClusterSnapshot, NodeIndex, Plan, plan};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::watcher;
use tokio::sync::{mpsc, watch};
use tracing::{Instrument, debug, info, info_span, warn};

use act::act;
use caches::{Watch, cache, node_key};
use observe::Observed;
use record::record;
use report::report;

use crate::metrics::{ErrorLabel, Metrics, ResultLabel};
use crate::runner::{self, Next};

pub use compact::{Heap, HeapCompactor, repack_due};

/// Which Express cluster a change belongs to.
pub use express_api::ClusterKey;

#[derive(Clone, Debug)]
pub struct Settings {
    /// Namespaces to manage; empty means every namespace.
    pub namespaces: Vec<String>,
    /// Where the operator runs (its control ConfigMap and Lease live there).
    pub operator_namespace: String,
    /// Express clusters reconciled at once.
    pub concurrency: usize,
    /// Name of this instance in events and the Lease.
    pub identity: String,
    /// How often the fleet metrics are recomputed from the caches.
    pub fleet_metrics_every: std::time::Duration,
    /// The operator ring this instance serves: the tenants whose `express.dev/operator-ring`
    /// label names it (DESIGN section 11).
    pub ring: String,
    /// This build's version, written into the status of every tenant it drives.
    pub version: String,
    /// The allocator's means to give memory back after a burst (`compact`); None leaves the
    /// caches where they were allocated.
    pub compact_heap: Option<HeapCompactor>,
}

/// The operator's own namespace when nothing says otherwise.
pub const DEFAULT_OPERATOR_NAMESPACE: &str = "express-system";

impl Settings {
    /// Every namespace, the default operator namespace, `concurrency` clusters at once: the
    /// local cluster of `dev`, the end-to-end tests and the benchmarks.
    pub fn cluster_wide(identity: &str, concurrency: usize) -> Settings {
        Settings {
            namespaces: Vec::new(),
            operator_namespace: DEFAULT_OPERATOR_NAMESPACE.into(),
            concurrency,
            identity: identity.into(),
            fleet_metrics_every: std::time::Duration::from_secs(15),
            ring: express_api::rings::DEFAULT_RING.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            compact_heap: None,
        }
    }

    /// The same, serving one ring.
    pub fn in_ring(mut self, ring: &str) -> Settings {
        self.ring = ring.into();
        self
    }
}

pub struct Context {
    pub client: kube::Client,
    pub caches: Caches,
    pub recorders: Recorders,
    pub metrics: Arc<Metrics>,
    pub settings: Settings,
    pub leader: watch::Receiver<bool>,
    pub written: WrittenStatuses,
    pub written_pods: WrittenPods,
    /// Tenants releases moved, until the caches show it (a release's bound on hand-overs).
    pub moves: moves::MovesMade,
}

impl Context {
    /// Publishes what the caches and the other long-lived structures hold
    /// (`express_operator_cached_objects`, `express_operator_memory_entries`).
    fn publish_memory(&self, recorded_events: usize) {
        let (memory, caches) = (&self.metrics.memory, &self.caches);
        for (kind, (objects, _)) in [
            ("ExpressCluster", caches.clusters.counts()),
            ("Backend", caches.backends.counts()),
            ("Frontend", caches.frontends.counts()),
            ("Pod", caches.pods.counts()),
            ("ConfigMap", caches.controls.counts()),
            ("ControllerRevision", caches.revisions.counts()),
        ] {
            memory.set_cached(kind, objects);
        }
        memory.set_entries("written_statuses", self.written.len());
        memory.set_entries("written_pods", self.written_pods.len());
        memory.set_entries("recorded_events", recorded_events);
        let (strings, histories) = caches.interner.counts();
        memory.set_entries("interned_strings", strings);
        memory.set_entries("revision_histories", histories);
    }
}

/// Recomputes the fleet view (ring counts, doctor's figures) from the caches; returns how long
/// that took.
fn publish_fleet_view(context: &Context) -> std::time::Duration {
    let started = Instant::now();
    let objects = context.caches.objects(None);
    let mut tenants = express_triage::observe::tenants(&objects, |_| None);
    context.metrics.set_ring_tenants(
        &context.settings.ring,
        tenants.iter().map(|t| t.ring.as_str()),
    );
    // Each ring's operator reports its own ring's tenants, so that rings add up.
    tenants.retain(|t| t.ring == context.settings.ring);
    context.metrics.set_fleet(
        &context.settings.ring,
        &express_triage::fleet_figures(&tenants, k8s_openapi::jiff::Timestamp::now()),
    );
    drop((objects, tenants));
    let took = started.elapsed();
    context
        .metrics
        .fleet_view_seconds
        .observe(took.as_secs_f64());
    took
}

/// How long the fleet view waits before its next recomputation: its interval, or a hundred
/// times what the last one took when that is longer. The pass over every tenant then costs at
/// most a hundredth of a core however large the fleet: at 10,000 tenants it would otherwise be
/// a tenth of what the operator spends on a fleet-wide upgrade, whose length grows with the
/// fleet too.
pub fn fleet_view_pause(
    every: std::time::Duration,
    took: std::time::Duration,
) -> std::time::Duration {
    every.max(took.saturating_mul(100))
}

/// Runs the controller until the process stops.
pub async fn run(
    client: kube::Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    leader: watch::Receiver<bool>,
) {
    metrics.set_build(&settings.version, &settings.ring);
    let scopes: Vec<Option<String>> = if settings.namespaces.is_empty() {
        vec![None]
    } else {
        settings.namespaces.iter().cloned().map(Some).collect()
    };
    let (triggers, queue) = mpsc::unbounded_channel::<ClusterKey>();
    let mut tasks = Tasks::default();
    let all_keys: Arc<std::sync::OnceLock<Arc<Context>>> = Arc::new(std::sync::OnceLock::new());

    // Releases step again whenever a tenant's ExpressCluster changes (a move adopted) or a
    // release does.
    let release_wake = Arc::new(tokio::sync::Notify::new());
    let wake_releases = release_wake.clone();
    // One interner for every kind: a tenant's namespace is one string for all its objects.
    let interner = Arc::new(express_api::views::Interner::default());
    let clusters = cache::<ExpressCluster, _, _>(
        &client,
        &scopes,
        Watch::whole(watcher::Config::default(), &interner),
        move |c| {
            wake_releases.notify_one();
            match (c.metadata.namespace.as_deref(), c.cluster_name()) {
                (Some(namespace), Some(cluster)) => vec![ClusterKey::new(namespace, cluster)],
                _ => Vec::new(),
            }
        },
        triggers.clone(),
        &metrics,
        &mut tasks,
    );
    let backends = cache::<Backend, _, _>(
        &client,
        &scopes,
        Watch::nodes(watcher::Config::default(), &interner),
        node_key,
        triggers.clone(),
        &metrics,
        &mut tasks,
    );
    let frontends = cache::<Frontend, _, _>(
        &client,
        &scopes,
        Watch::nodes(watcher::Config::default(), &interner),
        node_key,
        triggers.clone(),
        &metrics,
        &mut tasks,
    );
    // Only this ring's pods (a tenant's pods are restamped when another ring adopts it): a
    // ring's operator does not hold the pods of the others.
    let pod_selector = express_api::rings::pod_selector(&settings.ring);
    let pods = cache::<Pod, _, _>(
        &client,
        &scopes,
        Watch::pods(watcher::Config::default().labels(&pod_selector), &interner),
        |p| match (p.namespace(), p.cluster.as_deref()) {
            (Some(namespace), Some(cluster)) => vec![ClusterKey::new(namespace, cluster)],
            _ => Vec::new(),
        },
        triggers.clone(),
        &metrics,
        &mut tasks,
    );
    // Control ConfigMaps pause whole namespaces (or everything): every cluster there is affected.
    // Each is watched by its name, so that no other ConfigMap of the cluster (a certificate
    // bundle in every namespace, a 50 KB dashboard) is cached or can cost a tenant anything.
    let context_for_controls = all_keys.clone();
    let controls = cache::<ConfigMap, _, _>(
        &client,
        &scopes,
        Watch::whole(
            watcher::Config::default()
                .fields(&format!("metadata.name={CONTROL_CONFIGMAP_NAMESPACE}")),
            &interner,
        ),
        move |cm| {
            let Some(ctx) = context_for_controls.get() else {
                return Vec::new();
            };
            let namespace = cm.metadata.namespace.as_deref().unwrap_or("");
            ctx.caches.keys(Some(namespace)).into_iter().collect()
        },
        triggers.clone(),
        &metrics,
        &mut tasks,
    );
    let context_for_operator_control = all_keys.clone();
    let operator_control = cache::<ConfigMap, _, _>(
        &client,
        &[Some(settings.operator_namespace.clone())],
        Watch::whole(
            watcher::Config::default().fields(&format!("metadata.name={CONTROL_CONFIGMAP_GLOBAL}")),
            &interner,
        ),
        move |_| {
            let Some(ctx) = context_for_operator_control.get() else {
                return Vec::new();
            };
            ctx.caches.keys(None).into_iter().collect()
        },
        triggers.clone(),
        &metrics,
        &mut tasks,
    );
    let revisions = cache::<ControllerRevision, _, _>(
        &client,
        &scopes,
        Watch::revisions(watcher::Config::default().labels(LABEL_CLUSTER), &interner),
        |_| Vec::new(),
        triggers.clone(),
        &metrics,
        &mut tasks,
    );

    let wake_releases = release_wake.clone();
    let releases = cache::<express_api::OperatorRelease, _, _>(
        &client,
        &[Some(settings.operator_namespace.clone())],
        Watch::whole(watcher::Config::default(), &interner),
        move |_| {
            wake_releases.notify_one();
            Vec::new()
        },
        triggers.clone(),
        &metrics,
        &mut tasks,
    );

    let recorders = Recorders::new(
        &client,
        Reporter {
            controller: express_api::keys::REPORTING_CONTROLLER.into(),
            instance: settings.identity.clone(),
        },
    );
    let context = Arc::new(Context {
        client,
        caches: Caches {
            clusters,
            backends,
            frontends,
            pods,
            controls,
            operator_control,
            revisions,
            interner,
        },
        recorders,
        metrics: metrics.clone(),
        settings,
        leader: leader.clone(),
        written: WrittenStatuses::default(),
        written_pods: WrittenPods::default(),
        moves: moves::MovesMade::default(),
    });
    let _ = all_keys.set(context.clone());
    let caches = &context.caches;
    caches.clusters.wait_until_ready().await;
    caches.backends.wait_until_ready().await;
    caches.frontends.wait_until_ready().await;
    caches.pods.wait_until_ready().await;
    caches.controls.wait_until_ready().await;
    caches.operator_control.wait_until_ready().await;
    caches.revisions.wait_until_ready().await;
    metrics.set_ready();
    info!(ring = %context.settings.ring, "caches synced; reconciling");

    // Becoming leader means every cluster needs a look, whatever changed meanwhile.
    {
        let (context, triggers, mut leader) = (context.clone(), triggers.clone(), leader);
        tasks.spawn(async move {
            loop {
                let leading = *leader.borrow_and_update();
                context
                    .metrics
                    .leader
                    .get_or_create(&crate::metrics::RingLabel {
                        ring: context.settings.ring.clone(),
                    })
                    .set(i64::from(leading));
                if leading {
                    release::announce_build(&context).await;
                    for key in context.caches.keys(None) {
                        let _ = triggers.send(key);
                    }
                }
                if leader.changed().await.is_err() {
                    return;
                }
            }
        });
    }

    // Releases run beside the tenants, on their own loop: an OperatorRelease CRD not installed
    // yet keeps only this loop waiting.
    tasks.spawn(release::run(context.clone(), releases, release_wake));

    // The fleet view for alerts: recomputed from the caches on a timer, never per reconcile
    // (that would cost the whole fleet on every tenant's reconcile). The same timer publishes
    // the memory figures and repacks the caches after a burst, at every tick.
    {
        let context = context.clone();
        tasks.spawn(async move {
            let every = context.settings.fleet_metrics_every;
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut compaction = compact::Compaction::default();
            let mut next_view = Instant::now();
            loop {
                ticks.tick().await;
                if Instant::now() >= next_view {
                    let took = publish_fleet_view(&context);
                    // Less a second, so that a tick landing a hair early does not skip one.
                    let pause = fleet_view_pause(every, took);
                    next_view =
                        Instant::now() + pause.saturating_sub(std::time::Duration::from_secs(1));
                }
                let recorded = context.recorders.sweep(Instant::now());
                context.publish_memory(recorded);
                compact::compact_if_due(&context, &mut compaction).await;
            }
        });
    }

    let concurrency = context.settings.concurrency;
    let queue_metrics = context.metrics.queue.clone();
    runner::run(queue, concurrency, queue_metrics, move |key| {
        let context = context.clone();
        // Every log line of a reconcile carries its Express cluster through this span.
        let span = info_span!("reconcile", namespace = %key.namespace, cluster = %key.cluster);
        async move {
            let started = Instant::now();
            let result = reconcile(&context, &key).await;
            context
                .metrics
                .reconcile_seconds
                .observe(started.elapsed().as_secs_f64());
            match result {
                Ok(next) => {
                    context
                        .metrics
                        .reconciles
                        .get_or_create(&ResultLabel {
                            result: "ok".into(),
                        })
                        .inc();
                    Ok(next)
                }
                Err(err) => {
                    warn!(error = %err, "reconcile failed; retrying with backoff");
                    context
                        .metrics
                        .reconciles
                        .get_or_create(&ResultLabel {
                            result: "error".into(),
                        })
                        .inc();
                    context
                        .metrics
                        .errors
                        .get_or_create(&ErrorLabel {
                            kind: err.kind().into(),
                        })
                        .inc();
                    Err(())
                }
            }
        }
        .instrument(span)
    })
    .await;
}

pub async fn reconcile(ctx: &Context, key: &ClusterKey) -> Result<Next, Error> {
    // Whatever stops a reconcile here also stops this instance reporting the tenant's nodes.
    let forget = || ctx.metrics.forget_tenant(&key.namespace, &key.cluster);
    if !*ctx.leader.borrow() {
        debug!("not the leader; observing only");
        forget();
        return Ok(Next::AwaitChange);
    }
    if !ctx.settings.namespaces.is_empty() && !ctx.settings.namespaces.contains(&key.namespace) {
        return Ok(Next::AwaitChange);
    }
    // Ownership first, every time: a requeue can fire after the tenant moved to another ring.
    if let handover::Gate::Stop(next) = handover::gate(ctx, key).await? {
        forget();
        return Ok(next);
    }
    let Some(observed) = observe::observe(ctx, key) else {
        forget();
        return Ok(Next::AwaitChange);
    };
    let snapshot = &observed.snapshot;

    // Plan.
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let plan = plan(snapshot, now.0.as_millisecond());
    debug!(
        actions = plan.actions.len(),
        in_flight = plan.in_flight,
        "planned"
    );
    let env = Env {
        ctx,
        key,
        snapshot,
        plan: &plan,
        observed: &observed,
        governing: observed.governing(),
        now: &now,
    };

    // Record what must be durable before any pod is touched, then act. Statuses are written
    // as the deletions leave the pods (terminating, not serving): the record is written
    // expecting them, the report knowing which happened. A deletion's watch event then finds
    // nothing left to write, and a node's change costs one status write fewer, the
    // ExpressCluster's one fewer too (its Ready count no longer moves in a write of its own).
    let mut written = Written::default();
    // Copies of the snapshot only when a pod is retired: most reconciles delete nothing.
    let retiring =
        |nodes: Vec<NodeIndex>| (!nodes.is_empty()).then(|| snapshot.with_pods_terminating(nodes));
    let expected = retiring(
        plan.actions
            .iter()
            .filter(|a| a.operation.retires_pod())
            .map(|a| a.node)
            .collect(),
    );
    let record_env = env.reporting(expected.as_ref().unwrap_or(snapshot));
    let (retired, act_result) = match record(&record_env, &mut written).await {
        Ok(()) => {
            let acted = act(&env).await;
            (acted.retired, acted.result)
        }
        Err(err) => (Vec::new(), Err(err)),
    };

    // Report, even when an action failed: status must say what is going on.
    let after = retiring(retired);
    let report_result = report(
        &env.reporting(after.as_ref().unwrap_or(snapshot)),
        &mut written,
    )
    .await;
    act_result?;
    report_result?;
    // A progress deadline passes, a settle window ends, a disagreement turns stalled: none of
    // these comes with an event, so look again just after it.
    Ok(match plan.wake_at_ms() {
        Some(at) => Next::RequeueAfter(std::time::Duration::from_millis(
            u64::try_from(at.saturating_sub(now.0.as_millisecond()))
                .unwrap_or(0)
                .max(1),
        )),
        None => Next::AwaitChange,
    })
}

/// Everything one reconcile works from.
struct Env<'a> {
    ctx: &'a Context,
    key: &'a ClusterKey,
    snapshot: &'a ClusterSnapshot,
    plan: &'a Plan,
    observed: &'a Observed,
    governing: Option<&'a ExpressCluster>,
    now: &'a Time,
}

impl<'a> Env<'a> {
    /// The same reconcile, reporting the cluster as `snapshot` shows it (the observed one as
    /// this reconcile's actions leave it); the plan stays the one made from the observation.
    fn reporting(&self, snapshot: &'a ClusterSnapshot) -> Env<'a> {
        Env {
            ctx: self.ctx,
            key: self.key,
            snapshot,
            plan: self.plan,
            observed: self.observed,
            governing: self.governing,
            now: self.now,
        }
    }
}

/// Statuses written during one reconcile, so that the report does not write them again.
#[derive(Default)]
struct Written {
    nodes: HashMap<NodeIndex, NodeStatus>,
    cluster: Option<ExpressClusterStatus>,
}

#[cfg(test)]
mod tests {
    use super::fleet_view_pause;
    use std::time::Duration;

    #[test]
    fn the_fleet_view_waits_a_hundred_times_what_it_took_when_that_is_longer() {
        let every = Duration::from_secs(15);
        for (took_ms, pause_s) in [(0, 15), (40, 15), (150, 15), (400, 40), (2_000, 200)] {
            assert_eq!(
                fleet_view_pause(every, Duration::from_millis(took_ms)),
                Duration::from_secs(pause_s),
                "took {took_ms} ms"
            );
        }
        assert_eq!(fleet_view_pause(every, Duration::MAX), Duration::MAX);
    }
}
