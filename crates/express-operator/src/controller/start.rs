//! Starting the controller: the caches it watches (each change mapped to the Express clusters
//! it concerns), the loops that run beside the reconciles (leadership, the fleet view), and one
//! reconcile measured into the metrics.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use express_api::keys::{CONTROL_CONFIGMAP_GLOBAL, CONTROL_CONFIGMAP_NAMESPACE, LABEL_CLUSTER};
use express_api::objects::WatchedKind;
use express_api::views::{Interner, NodeObject, NodeView};
use express_api::{Backend, ClusterKey, ExpressCluster, FleetRelease, Frontend, OperatorRelease};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Resource;
use kube::runtime::watcher;
use tokio::sync::{Notify, mpsc, watch};
use tracing::warn;

use super::context::{Context, Settings};
use super::fleet_view::{fleet_view_pause, publish_fleet_view};
use super::memory::caches::{Caches, Scoped, Tasks, Watch, cache, node_key};
use super::memory::compact;
use super::{releases, tenant};
use crate::metrics::{ErrorLabel, Metrics, ResultLabel, RingLabel};
use crate::runner::Next;

/// The context, once built: a ConfigMap's change maps to the clusters the caches hold, and
/// the caches are built before the context that holds them.
pub(super) type ContextCell = Arc<OnceLock<Arc<Context>>>;

/// What every cache is started with.
pub(super) struct Wiring<'a> {
    pub(super) client: &'a kube::Client,
    pub(super) settings: &'a Settings,
    pub(super) metrics: &'a Metrics,
    pub(super) triggers: mpsc::UnboundedSender<ClusterKey>,
    /// One interner for every kind: a tenant's namespace is one string for all its objects.
    pub(super) interner: Arc<Interner>,
    /// Releases step again whenever a tenant's ExpressCluster changes (a move adopted) or a
    /// release does.
    pub(super) release_wake: Arc<Notify>,
    pub(super) context: ContextCell,
}

impl Wiring<'_> {
    fn scopes(&self) -> Vec<Option<String>> {
        if self.settings.namespaces.is_empty() {
            vec![None]
        } else {
            self.settings.namespaces.iter().cloned().map(Some).collect()
        }
    }

    /// A watch's configuration before its selectors: how it fills (`--streaming-lists`).
    fn filling(&self) -> watcher::Config {
        self.settings
            .first_listing
            .config(watcher::Config::default())
    }

    fn operator_namespace(&self) -> Vec<Option<String>> {
        vec![Some(self.settings.operator_namespace.clone())]
    }

    /// The caches of the tenants' objects and of their controls.
    pub(super) fn caches(&self, tasks: &mut Tasks) -> Caches {
        let (clusters, backends, frontends) = self.node_caches(tasks);
        let (controls, operator_control) = self.control_caches(tasks);
        Caches {
            clusters,
            backends,
            frontends,
            pods: self.pod_cache(tasks),
            controls,
            operator_control,
            revisions: self.revision_cache(tasks),
            interner: self.interner.clone(),
        }
    }

    fn node_caches(
        &self,
        tasks: &mut Tasks,
    ) -> (Scoped<ExpressCluster>, Scoped<NodeView>, Scoped<NodeView>) {
        let (client, scopes, interner) = (self.client, self.scopes(), &self.interner);
        let wake_releases = self.release_wake.clone();
        let clusters = cache::<ExpressCluster, _, _>(
            client,
            &scopes,
            Watch::whole(self.filling(), interner),
            move |c| {
                wake_releases.notify_one();
                match (c.metadata.namespace.as_deref(), c.cluster_name()) {
                    (Some(namespace), Some(cluster)) => vec![ClusterKey::new(namespace, cluster)],
                    _ => Vec::new(),
                }
            },
            self.triggers.clone(),
            self.metrics,
            tasks,
        );
        let backends = self.node_cache::<Backend>(&scopes, tasks);
        let frontends = self.node_cache::<Frontend>(&scopes, tasks);
        (clusters, backends, frontends)
    }

    /// The nodes of one kind, each change mapped to its Express cluster.
    fn node_cache<K>(&self, scopes: &[Option<String>], tasks: &mut Tasks) -> Scoped<NodeView>
    where
        K: NodeObject + WatchedKind + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    {
        cache::<K, _, _>(
            self.client,
            scopes,
            Watch::nodes(self.filling(), &self.interner),
            node_key,
            self.triggers.clone(),
            self.metrics,
            tasks,
        )
    }

    /// Only this ring's pods (a tenant's pods are restamped when another ring adopts it): a
    /// ring's operator does not hold the pods of the others.
    fn pod_cache(&self, tasks: &mut Tasks) -> Scoped<express_api::views::PodView> {
        let pod_selector = express_api::rings::pod_selector(&self.settings.ring);
        cache::<Pod, _, _>(
            self.client,
            &self.scopes(),
            Watch::pods(self.filling().labels(&pod_selector), &self.interner),
            |p| match (p.namespace(), p.cluster.as_deref()) {
                (Some(namespace), Some(cluster)) => vec![ClusterKey::new(namespace, cluster)],
                _ => Vec::new(),
            },
            self.triggers.clone(),
            self.metrics,
            tasks,
        )
    }

    /// Control ConfigMaps pause whole namespaces (or everything): every cluster there is
    /// affected. Each is watched by its name, so that no other ConfigMap of the cluster (a
    /// certificate bundle in every namespace, a 50 KB dashboard) is cached or can cost a tenant
    /// anything.
    fn control_caches(&self, tasks: &mut Tasks) -> (Scoped<ConfigMap>, Scoped<ConfigMap>) {
        let context = self.context.clone();
        let controls = cache::<ConfigMap, _, _>(
            self.client,
            &self.scopes(),
            Watch::whole(
                self.filling()
                    .fields(&format!("metadata.name={CONTROL_CONFIGMAP_NAMESPACE}")),
                &self.interner,
            ),
            move |cm| {
                let Some(ctx) = context.get() else {
                    return Vec::new();
                };
                let namespace = cm.metadata.namespace.as_deref().unwrap_or("");
                ctx.caches.keys(Some(namespace)).into_iter().collect()
            },
            self.triggers.clone(),
            self.metrics,
            tasks,
        );
        let context = self.context.clone();
        let operator_control = cache::<ConfigMap, _, _>(
            self.client,
            &self.operator_namespace(),
            Watch::whole(
                self.filling()
                    .fields(&format!("metadata.name={CONTROL_CONFIGMAP_GLOBAL}")),
                &self.interner,
            ),
            move |_| {
                let Some(ctx) = context.get() else {
                    return Vec::new();
                };
                ctx.caches.keys(None).into_iter().collect()
            },
            self.triggers.clone(),
            self.metrics,
            tasks,
        );
        (controls, operator_control)
    }

    fn revision_cache(&self, tasks: &mut Tasks) -> Scoped<express_api::views::RevisionView> {
        cache::<ControllerRevision, _, _>(
            self.client,
            &self.scopes(),
            Watch::revisions(self.filling().labels(LABEL_CLUSTER), &self.interner),
            |_| Vec::new(),
            self.triggers.clone(),
            self.metrics,
            tasks,
        )
    }

    /// The operator's releases: a change wakes the release loop, no tenant.
    pub(super) fn release_cache(&self, tasks: &mut Tasks) -> Scoped<OperatorRelease> {
        let wake_releases = self.release_wake.clone();
        cache::<OperatorRelease, _, _>(
            self.client,
            &self.operator_namespace(),
            Watch::whole(self.filling(), &self.interner),
            move |_| {
                wake_releases.notify_one();
                Vec::new()
            },
            self.triggers.clone(),
            self.metrics,
            tasks,
        )
    }

    /// The FleetReleases' copies in the operator's namespace: read by notifications only (a
    /// plan is driven from outside, `fleet-release run`); a change wakes nothing.
    pub(super) fn fleet_release_cache(&self, tasks: &mut Tasks) -> Scoped<FleetRelease> {
        cache::<FleetRelease, _, _>(
            self.client,
            &self.operator_namespace(),
            Watch::whole(self.filling(), &self.interner),
            |_| Vec::new(),
            self.triggers.clone(),
            self.metrics,
            tasks,
        )
    }
}

/// Becoming leader means every cluster needs a look, whatever changed meanwhile.
pub(super) async fn follow_leadership(
    context: Arc<Context>,
    triggers: mpsc::UnboundedSender<ClusterKey>,
    mut leader: watch::Receiver<bool>,
) {
    loop {
        let leading = *leader.borrow_and_update();
        context
            .metrics
            .instance
            .leader
            .get_or_create(&RingLabel {
                ring: context.settings.ring.clone(),
            })
            .set(i64::from(leading));
        if leading {
            releases::announce_build(&context).await;
            for key in context.caches.keys(None) {
                let _ = triggers.send(key);
            }
        }
        if leader.changed().await.is_err() {
            return;
        }
    }
}

/// The fleet view for alerts: recomputed from the caches on a timer, never per reconcile
/// (that would cost the whole fleet on every tenant's reconcile). The same timer publishes the
/// memory figures and repacks the caches after a burst, at every tick.
pub(super) async fn keep_publishing(context: Arc<Context>) {
    let every = context.settings.fleet_metrics_every;
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut compaction = compact::Compaction::default();
    let repack: Arc<dyn Fn() + Send + Sync> = {
        let context = context.clone();
        Arc::new(move || context.caches.repack())
    };
    let mut next_view = Instant::now();
    loop {
        ticks.tick().await;
        if Instant::now() >= next_view {
            let took = publish_fleet_view(&context);
            // Less a second, so that a tick landing a hair early does not skip one.
            let pause = fleet_view_pause(every, took);
            next_view = Instant::now() + pause.saturating_sub(std::time::Duration::from_secs(1));
        }
        let recorded = context.recorders.sweep(Instant::now());
        context.publish_memory(recorded);
        compact::compact_if_due(
            context.settings.compact_heap,
            &context.metrics,
            repack.clone(),
            &mut compaction,
        )
        .await;
    }
}

/// One reconcile, its duration and its outcome counted; an error is logged and handed to the
/// runner, which retries it with backoff.
pub(super) async fn measured_reconcile(
    context: &Context,
    key: &ClusterKey,
) -> Result<Next, crate::runner::Failure> {
    let started = Instant::now();
    let fault = context.settings.fault;
    let (reconciled, requests) = crate::throttle::counting_requests(async {
        crate::faults::before_reconcile(fault, &context.client, key).await;
        tenant::reconcile(context, key).await
    })
    .await;
    let tenant::Reconciled { drove, mut result } = reconciled;
    if result.is_ok() && crate::faults::fails_this_reconcile(fault) {
        result = Err(super::error::Error::InjectedFault {
            fault: fault.map_or("", crate::faults::Fault::as_str),
        });
    }
    let metrics = &context.metrics;
    let seconds = started.elapsed().as_secs_f64();
    metrics.work.reconcile_seconds.observe(seconds);
    let outcome = ResultLabel {
        result: if result.is_ok() { "ok" } else { "error" }.into(),
    };
    metrics.work.reconciles.get_or_create(&outcome).inc();
    if drove {
        metrics.work.driven_reconciles.get_or_create(&outcome).inc();
        metrics.work.driven_reconcile_seconds.observe(seconds);
        metrics.work.driven_reconcile_requests.inc_by(requests);
    }
    result.map_err(|err| {
        let failure = err.failure();
        warn!(error = %err, ?failure, "reconcile failed; retrying with backoff");
        metrics
            .work
            .errors
            .get_or_create(&ErrorLabel {
                kind: err.kind().into(),
            })
            .inc();
        failure
    })
}
