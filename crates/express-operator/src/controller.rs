//! The controller. Caches (reflectors) of ExpressClusters, Backends, Frontends, the pods they
//! own and the control ConfigMaps; every change is mapped to its Express cluster
//! (namespace, clusterName); one reconcile per cluster: observe (caches → snapshot) → plan (the
//! pure planner) → act (thin pod operations) → report (status via server-side apply, events,
//! metrics). Level-triggered and watch-driven: nothing polls.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use express_api::keys::{
    CONTROL_CONFIGMAP_GLOBAL, CONTROL_CONFIGMAP_NAMESPACE, FIELD_MANAGER, LABEL_CLUSTER,
};
use express_api::{
    Backend, EffectiveNodeSpec, ExpressCluster, ExpressClusterStatus, Frontend, NodeKind, NodeSpec,
    NodeStatus, effective_spec,
};
use express_planner::observe::{Inventory, PodOwnership, snapshots};
use express_planner::rollout::AbortOutcome;
use express_planner::{Action, Blocked, ClusterSnapshot, Operation, Plan, plan};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use crate::history;
use crate::metrics::{ActionLabel, ErrorLabel, Metrics, PhaseLabel, ResultLabel};
use crate::pods::{NodeIdentity, build_pod};
use crate::runner::{self, Next};
use crate::status::{cluster_status, node_status, same_ignoring_time};
use express_api::conditions::{self, reason};
use express_planner::settle::{SETTLE_STALLED, SETTLE_WAIT};

/// Which Express cluster a change belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterKey {
    pub namespace: String,
    pub cluster: String,
}

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
}

/// Errors of one reconcile, each meaningful to an operator reading an event or a log.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot create pod {pod}: {source}")]
    CreatePod { pod: String, source: kube::Error },
    #[error("cannot delete pod {pod}: {source}")]
    DeletePod { pod: String, source: kube::Error },
    #[error("cannot record {what} in the status of {object} before acting: {source}")]
    Record {
        what: String,
        object: String,
        source: kube::Error,
    },
    #[error("cannot keep revision {revision} of {node} as a ControllerRevision: {source}")]
    KeepRevision {
        node: String,
        revision: String,
        source: kube::Error,
    },
    #[error("cannot write the status of {object}: {source}")]
    WriteStatus { object: String, source: kube::Error },
    #[error("cannot build the pod of {node}: {why}")]
    BuildPod { node: String, why: String },
}

impl Error {
    fn kind(&self) -> &'static str {
        match self {
            Error::CreatePod { .. } => "create_pod",
            Error::DeletePod { .. } => "delete_pod",
            Error::Record { .. } => "record",
            Error::KeepRevision { .. } => "keep_revision",
            Error::WriteStatus { .. } => "write_status",
            Error::BuildPod { .. } => "build_pod",
        }
    }
}

/// A cache of one kind: one reflector per managed namespace (or one for all of them).
pub struct Scoped<K: Resource + Clone + 'static>
where
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    stores: Vec<(Option<String>, Store<K>)>,
}

impl<K> Scoped<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    /// Objects of a namespace, owned (the snapshot builder works on slices).
    pub fn in_namespace(&self, namespace: &str) -> Vec<K> {
        self.stores
            .iter()
            .filter(|(scope, _)| scope.as_deref().is_none_or(|s| s == namespace))
            .flat_map(|(_, store)| store.state())
            .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
            .map(|o| (*o).clone())
            .collect()
    }

    pub fn all(&self) -> Vec<Arc<K>> {
        self.stores
            .iter()
            .flat_map(|(_, store)| store.state())
            .collect()
    }

    async fn wait_until_ready(&self) {
        for (_, store) in &self.stores {
            let _ = store.wait_until_ready().await;
        }
    }
}

pub struct Caches {
    pub clusters: Scoped<ExpressCluster>,
    pub backends: Scoped<Backend>,
    pub frontends: Scoped<Frontend>,
    pub pods: Scoped<Pod>,
    pub controls: Scoped<ConfigMap>,
    pub revisions: Scoped<ControllerRevision>,
}

/// Statuses this operator wrote, kept until its caches have caught up with them. A reconcile
/// that starts before the watch delivers the operator's own status write must still see it:
/// the change record written before a pod is deleted is what makes the next step safe.
#[derive(Default)]
pub struct WrittenStatuses(Mutex<HashMap<StatusKey, (u64, serde_json::Value)>>);

/// Kind, namespace and name of an object whose status was written.
type StatusKey = (&'static str, String, String);

impl WrittenStatuses {
    fn remember(&self, kind: &'static str, meta: &ObjectMeta, status: serde_json::Value) {
        let (Some(namespace), Some(name)) = (meta.namespace.clone(), meta.name.clone()) else {
            return;
        };
        let Some(version) = meta
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok())
        else {
            return;
        };
        if let Ok(mut written) = self.0.lock() {
            written.insert((kind, namespace, name), (version, status));
        }
    }

    /// Replaces a cached object's status by the one written, while the cache is older than
    /// the write. Resource versions are compared as numbers (as etcd and kubesim issue them);
    /// an object whose version is not a number is taken as fresh.
    fn refresh<K>(&self, kind: &'static str, object: &mut K)
    where
        K: Resource + kube::core::object::HasStatus,
        K::Status: DeserializeOwned,
    {
        let meta = object.meta();
        let (Some(namespace), Some(name)) = (meta.namespace.clone(), meta.name.clone()) else {
            return;
        };
        let cached: Option<u64> = meta
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok());
        let Ok(mut written) = self.0.lock() else {
            return;
        };
        let key = (kind, namespace, name);
        match (written.get(&key), cached) {
            (Some((version, status)), Some(cached)) if cached < *version => {
                if let Ok(status) = serde_json::from_value(status.clone()) {
                    *object.status_mut() = Some(status);
                }
            }
            (Some(_), _) => {
                written.remove(&key);
            }
            (None, _) => {}
        }
    }
}

impl Caches {
    /// Every Express cluster known, optionally only in one namespace.
    fn keys(&self, namespace: Option<&str>) -> BTreeSet<ClusterKey> {
        let mut keys = BTreeSet::new();
        let mut add = |ns: Option<&String>, cluster: Option<&str>| {
            if let (Some(ns), Some(cluster)) = (ns, cluster)
                && namespace.is_none_or(|wanted| wanted == ns)
            {
                keys.insert(ClusterKey {
                    namespace: ns.clone(),
                    cluster: cluster.to_owned(),
                });
            }
        };
        for c in self.clusters.all() {
            add(c.metadata.namespace.as_ref(), c.cluster_name());
        }
        for b in self.backends.all() {
            add(
                b.metadata.namespace.as_ref(),
                Some(&b.spec.cluster_config.cluster_name),
            );
        }
        for f in self.frontends.all() {
            add(
                f.metadata.namespace.as_ref(),
                Some(&f.spec.cluster_config.cluster_name),
            );
        }
        keys
    }
}

pub struct Context {
    pub client: kube::Client,
    pub caches: Caches,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    pub settings: Settings,
    pub leader: watch::Receiver<bool>,
    pub written: WrittenStatuses,
}

type Trigger = mpsc::UnboundedSender<ClusterKey>;

/// Background tasks owned by one controller run: aborted when it ends or is dropped, so that
/// nothing (a watch, a leadership receiver) outlives it.
#[derive(Default)]
pub struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Tasks {
    fn spawn(&mut self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        self.0.push(tokio::spawn(task));
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Starts one reflector per scope for a kind, mapping every change to cluster keys.
fn cache<K, F>(
    client: &kube::Client,
    scopes: &[Option<String>],
    config: watcher::Config,
    to_keys: F,
    triggers: Trigger,
    tasks: &mut Tasks,
) -> Scoped<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    F: Fn(&K) -> Vec<ClusterKey> + Clone + Send + Sync + 'static,
{
    let mut stores = Vec::new();
    for scope in scopes {
        let api: Api<K> = match scope {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let (reader, writer) = reflector::store();
        let stream = reflector::reflector(writer, watcher(api, config.clone()).default_backoff())
            .touched_objects();
        let (triggers, to_keys) = (triggers.clone(), to_keys.clone());
        tasks.spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                match item {
                    Ok(object) => {
                        for key in to_keys(&object) {
                            let _ = triggers.send(key);
                        }
                    }
                    Err(err) => {
                        warn!(error = %err, kind = %K::kind(&()), "watch error; the watcher retries with backoff")
                    }
                }
            }
        });
        stores.push((scope.clone(), reader));
    }
    Scoped { stores }
}

fn node_key<K: Resource>(object: &K, spec: &NodeSpec) -> Vec<ClusterKey> {
    object
        .meta()
        .namespace
        .clone()
        .map(|namespace| ClusterKey {
            namespace,
            cluster: spec.cluster_config.cluster_name.clone(),
        })
        .into_iter()
        .collect()
}

/// Runs the controller until the process stops.
pub async fn run(
    client: kube::Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    leader: watch::Receiver<bool>,
) {
    let scopes: Vec<Option<String>> = if settings.namespaces.is_empty() {
        vec![None]
    } else {
        settings.namespaces.iter().cloned().map(Some).collect()
    };
    let (triggers, queue) = mpsc::unbounded_channel::<ClusterKey>();
    let mut tasks = Tasks::default();
    let all_keys: Arc<std::sync::OnceLock<Arc<Context>>> = Arc::new(std::sync::OnceLock::new());

    let clusters = cache::<ExpressCluster, _>(
        &client,
        &scopes,
        watcher::Config::default(),
        |c| match (c.metadata.namespace.clone(), c.cluster_name()) {
            (Some(namespace), Some(cluster)) => vec![ClusterKey {
                namespace,
                cluster: cluster.to_owned(),
            }],
            _ => Vec::new(),
        },
        triggers.clone(),
        &mut tasks,
    );
    let backends = cache::<Backend, _>(
        &client,
        &scopes,
        watcher::Config::default(),
        |b| node_key(b, &b.spec),
        triggers.clone(),
        &mut tasks,
    );
    let frontends = cache::<Frontend, _>(
        &client,
        &scopes,
        watcher::Config::default(),
        |f| node_key(f, &f.spec),
        triggers.clone(),
        &mut tasks,
    );
    let pods = cache::<Pod, _>(
        &client,
        &scopes,
        watcher::Config::default().labels(LABEL_CLUSTER),
        |p| match (p.metadata.namespace.clone(), p.labels().get(LABEL_CLUSTER)) {
            (Some(namespace), Some(cluster)) => vec![ClusterKey {
                namespace,
                cluster: cluster.clone(),
            }],
            _ => Vec::new(),
        },
        triggers.clone(),
        &mut tasks,
    );
    // Control ConfigMaps pause whole namespaces (or everything): every cluster there is affected.
    let operator_namespace = settings.operator_namespace.clone();
    let context_for_controls = all_keys.clone();
    let mut control_scopes = scopes.clone();
    if !control_scopes.contains(&None)
        && !control_scopes.contains(&Some(operator_namespace.clone()))
    {
        control_scopes.push(Some(operator_namespace.clone()));
    }
    let controls = cache::<ConfigMap, _>(
        &client,
        &control_scopes,
        watcher::Config::default(),
        move |cm| {
            let Some(ctx) = context_for_controls.get() else {
                return Vec::new();
            };
            let namespace = cm.metadata.namespace.as_deref().unwrap_or("");
            match cm.metadata.name.as_deref() {
                Some(CONTROL_CONFIGMAP_NAMESPACE) => {
                    ctx.caches.keys(Some(namespace)).into_iter().collect()
                }
                Some(CONTROL_CONFIGMAP_GLOBAL) if namespace == operator_namespace => {
                    ctx.caches.keys(None).into_iter().collect()
                }
                _ => Vec::new(),
            }
        },
        triggers.clone(),
        &mut tasks,
    );

    let revisions = cache::<ControllerRevision, _>(
        &client,
        &scopes,
        watcher::Config::default().labels(LABEL_CLUSTER),
        |_| Vec::new(),
        triggers.clone(),
        &mut tasks,
    );

    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "express-operator".into(),
            instance: Some(settings.identity.clone()),
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
            revisions,
        },
        recorder,
        metrics: metrics.clone(),
        settings,
        leader: leader.clone(),
        written: WrittenStatuses::default(),
    });
    let _ = all_keys.set(context.clone());
    let caches = &context.caches;
    caches.clusters.wait_until_ready().await;
    caches.backends.wait_until_ready().await;
    caches.frontends.wait_until_ready().await;
    caches.pods.wait_until_ready().await;
    caches.controls.wait_until_ready().await;
    caches.revisions.wait_until_ready().await;
    metrics.set_ready();
    info!("caches synced; reconciling");

    // Becoming leader means every cluster needs a look, whatever changed meanwhile.
    {
        let (context, triggers, mut leader) = (context.clone(), triggers.clone(), leader);
        tasks.spawn(async move {
            loop {
                if *leader.borrow_and_update() {
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

    let concurrency = context.settings.concurrency;
    runner::run(queue, concurrency, move |key| {
        let context = context.clone();
        async move {
            let started = Instant::now();
            let result = reconcile(&context, &key).await;
            context.metrics.reconcile_seconds.observe(started.elapsed().as_secs_f64());
            match result {
                Ok(next) => {
                    context.metrics.reconciles.get_or_create(&ResultLabel { result: "ok".into() }).inc();
                    Ok(next)
                }
                Err(err) => {
                    warn!(namespace = %key.namespace, cluster = %key.cluster, error = %err, "reconcile failed; retrying with backoff");
                    context.metrics.reconciles.get_or_create(&ResultLabel { result: "error".into() }).inc();
                    context.metrics.errors.get_or_create(&ErrorLabel { kind: err.kind().into() }).inc();
                    Err(())
                }
            }
        }
    })
    .await;
}

/// The node objects of one cluster, by kind and name.
struct Nodes {
    backends: HashMap<String, Backend>,
    frontends: HashMap<String, Frontend>,
}

impl Nodes {
    fn meta(&self, kind: NodeKind, name: &str) -> Option<&ObjectMeta> {
        match kind {
            NodeKind::Backend => self.backends.get(name).map(|b| &b.metadata),
            NodeKind::Frontend => self.frontends.get(name).map(|f| &f.metadata),
        }
    }

    fn spec(&self, kind: NodeKind, name: &str) -> Option<&NodeSpec> {
        match kind {
            NodeKind::Backend => self.backends.get(name).map(|b| &b.spec.0),
            NodeKind::Frontend => self.frontends.get(name).map(|f| &f.spec.0),
        }
    }

    fn status(&self, kind: NodeKind, name: &str) -> Option<&NodeStatus> {
        match kind {
            NodeKind::Backend => self.backends.get(name).and_then(|b| b.status.as_ref()),
            NodeKind::Frontend => self.frontends.get(name).and_then(|f| f.status.as_ref()),
        }
    }

    fn reference(
        &self,
        kind: NodeKind,
        name: &str,
    ) -> Option<k8s_openapi::api::core::v1::ObjectReference> {
        match kind {
            NodeKind::Backend => self.backends.get(name).map(|b| b.object_ref(&())),
            NodeKind::Frontend => self.frontends.get(name).map(|f| f.object_ref(&())),
        }
    }
}

pub async fn reconcile(ctx: &Context, key: &ClusterKey) -> Result<Next, Error> {
    if !*ctx.leader.borrow() {
        debug!(namespace = %key.namespace, cluster = %key.cluster, "not the leader; observing only");
        return Ok(Next::AwaitChange);
    }
    if !ctx.settings.namespaces.is_empty() && !ctx.settings.namespaces.contains(&key.namespace) {
        return Ok(Next::AwaitChange);
    }
    // Observe.
    let caches = &ctx.caches;
    let mut clusters = caches.clusters.in_namespace(&key.namespace);
    let mut backends = caches.backends.in_namespace(&key.namespace);
    let mut frontends = caches.frontends.in_namespace(&key.namespace);
    clusters
        .iter_mut()
        .for_each(|c| ctx.written.refresh("ExpressCluster", c));
    backends
        .iter_mut()
        .for_each(|b| ctx.written.refresh("Backend", b));
    frontends
        .iter_mut()
        .for_each(|f| ctx.written.refresh("Frontend", f));
    let pods = caches.pods.in_namespace(&key.namespace);
    let revisions = caches.revisions.in_namespace(&key.namespace);
    let mut controls = caches.controls.in_namespace(&key.namespace);
    controls.extend(
        caches
            .controls
            .in_namespace(&ctx.settings.operator_namespace),
    );
    let inventory = Inventory {
        clusters: &clusters,
        backends: &backends,
        frontends: &frontends,
        pods: &pods,
        config_maps: &controls,
        controller_revisions: &revisions,
        operator_namespace: &ctx.settings.operator_namespace,
        ownership: PodOwnership::OwnerReference,
    };
    let Some(snapshot) = snapshots(&inventory)
        .into_iter()
        .find(|s| s.cluster_name == key.cluster)
    else {
        return Ok(Next::AwaitChange);
    };
    let governing = clusters
        .iter()
        .find(|c| c.cluster_name() == Some(key.cluster.as_str()))
        .cloned();
    let nodes = Nodes {
        backends: backends
            .into_iter()
            .filter(|b| b.spec.cluster_config.cluster_name == key.cluster)
            .filter_map(|b| Some((b.metadata.name.clone()?, b)))
            .collect(),
        frontends: frontends
            .into_iter()
            .filter(|f| f.spec.cluster_config.cluster_name == key.cluster)
            .filter_map(|f| Some((f.metadata.name.clone()?, f)))
            .collect(),
    };
    let pod_uids: HashMap<String, String> = pods
        .iter()
        .filter_map(|p| Some((p.metadata.name.clone()?, p.metadata.uid.clone()?)))
        .collect();

    // Plan.
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let plan = plan(&snapshot, now.0.as_millisecond());
    debug!(namespace = %key.namespace, cluster = %key.cluster, actions = plan.actions.len(), in_flight = plan.in_flight, "planned");
    let env = Env {
        ctx,
        key,
        snapshot: &snapshot,
        plan: &plan,
        nodes: &nodes,
        governing: governing.as_ref(),
        now: &now,
    };

    // Record what must be durable before any pod is touched, then act.
    let mut written = Written::default();
    let act_result = match record(&env, &mut written).await {
        Ok(()) => act(&env, &pod_uids, &revisions).await,
        Err(err) => Err(err),
    };

    // Report, even when an action failed: status must say what is going on.
    let report_result = report(&env, &mut written).await;
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
    nodes: &'a Nodes,
    governing: Option<&'a ExpressCluster>,
    now: &'a Time,
}

/// Statuses written during one reconcile, so that the report does not write them again.
#[derive(Default)]
struct Written {
    nodes: HashMap<usize, NodeStatus>,
    cluster: Option<ExpressClusterStatus>,
}

impl Env<'_> {
    fn node_status(&self, index: usize, written: &Written) -> (Option<NodeStatus>, NodeStatus) {
        let observation = &self.snapshot.nodes[index];
        let (kind, name) = (observation.kind, observation.name.as_str());
        let previous = written
            .nodes
            .get(&index)
            .or_else(|| self.nodes.status(kind, name))
            .cloned();
        let generation = self.nodes.meta(kind, name).and_then(|m| m.generation);
        let status = node_status(
            observation,
            index,
            &self.plan.nodes[index],
            self.plan,
            previous.as_ref(),
            generation,
            self.now,
        );
        (previous, status)
    }

    fn cluster_status(
        &self,
        written: &Written,
    ) -> Option<(Option<ExpressClusterStatus>, ExpressClusterStatus)> {
        let cluster = self.governing?;
        let previous = written.cluster.clone().or_else(|| cluster.status.clone());
        let status = cluster_status(
            self.snapshot,
            self.plan,
            previous.as_ref(),
            cluster.metadata.generation,
            self.now,
        );
        Some((previous, status))
    }

    async fn write_node_status(
        &self,
        index: usize,
        status: &NodeStatus,
    ) -> Result<(), kube::Error> {
        let observation = &self.snapshot.nodes[index];
        let (kind, name) = (observation.kind, observation.name.as_str());
        let patch = status_patch(&kind.to_string(), status);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let (kind_name, meta) = match kind {
            NodeKind::Backend => (
                "Backend",
                Api::<Backend>::namespaced(self.ctx.client.clone(), &self.key.namespace)
                    .patch_status(name, &params, &Patch::Apply(&patch))
                    .await?
                    .metadata,
            ),
            NodeKind::Frontend => (
                "Frontend",
                Api::<Frontend>::namespaced(self.ctx.client.clone(), &self.key.namespace)
                    .patch_status(name, &params, &Patch::Apply(&patch))
                    .await?
                    .metadata,
            ),
        };
        self.ctx.written.remember(
            kind_name,
            &meta,
            serde_json::to_value(status).unwrap_or_default(),
        );
        Ok(())
    }

    async fn write_cluster_status(&self, status: &ExpressClusterStatus) -> Result<(), Error> {
        let Some(cluster) = self.governing else {
            return Ok(());
        };
        let name = cluster.name_any();
        let patch = status_patch("ExpressCluster", status);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let written =
            Api::<ExpressCluster>::namespaced(self.ctx.client.clone(), &self.key.namespace)
                .patch_status(&name, &params, &Patch::Apply(&patch))
                .await
                .map_err(|source| Error::WriteStatus {
                    object: format!("ExpressCluster {name}"),
                    source,
                })?;
        self.ctx.written.remember(
            "ExpressCluster",
            &written.metadata,
            serde_json::to_value(status).unwrap_or_default(),
        );
        Ok(())
    }

    async fn publish_on_node(
        &self,
        index: usize,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let observation = &self.snapshot.nodes[index];
        publish(
            self.ctx,
            self.nodes.reference(observation.kind, &observation.name),
            type_,
            reason,
            action,
            note,
        )
        .await;
    }

    async fn publish_on_cluster(&self, type_: EventType, reason: &str, action: &str, note: String) {
        if let Some(cluster) = self.governing {
            publish(
                self.ctx,
                Some(cluster.object_ref(&())),
                type_,
                reason,
                action,
                note,
            )
            .await;
        }
    }
}

fn action_label(operation: Operation) -> &'static str {
    match operation {
        Operation::CreatePod => "create_pod",
        Operation::ReplacePod => "replace_pod",
        Operation::ResumeReplacement => "resume_replacement",
        Operation::FinishReplacement => "finish_replacement",
        Operation::RemovePod => "remove_pod",
        Operation::DeleteEndedPod => "delete_ended_pod",
    }
}

async fn publish(
    ctx: &Context,
    reference: Option<k8s_openapi::api::core::v1::ObjectReference>,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    let Some(reference) = reference else { return };
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: None,
    };
    if let Err(err) = ctx.recorder.publish(&event, &reference).await {
        warn!(error = %err, reason, "cannot publish event");
    }
}

/// Writes, before any pod operation, the statuses that make the operation safe to resume and
/// act on once: the change record of every node about to change, failures found (the
/// revision becomes known-invalid), a retry clearing known-invalid revisions, and the
/// ExpressCluster's record of abort and retry requests.
async fn record(env: &Env<'_>, written: &mut Written) -> Result<(), Error> {
    let plan = env.plan;
    let rollout = &plan.rollout;
    for index in 0..env.snapshot.nodes.len() {
        let starts = plan
            .actions
            .iter()
            .any(|a| a.node == index && a.record.is_some());
        let fails = rollout.failures.iter().any(|f| f.node == index);
        let (previous, status) = env.node_status(index, written);
        let clears = rollout.retry.is_some()
            && previous
                .as_ref()
                .is_some_and(|p| !p.invalid_revisions.is_empty());
        if !(starts || fails || clears) {
            continue;
        }
        let name = env.snapshot.nodes[index].name.clone();
        if previous
            .as_ref()
            .is_none_or(|p| !same_ignoring_time(p, &status))
        {
            env.write_node_status(index, &status)
                .await
                .map_err(|source| Error::Record {
                    what: if fails {
                        "a failed change"
                    } else {
                        "the change about to start"
                    }
                    .into(),
                    object: name.clone(),
                    source,
                })?;
            written.nodes.insert(index, status);
        }
    }
    let cluster_news =
        rollout.abort_request.is_some() || rollout.retry.is_some() || !rollout.failures.is_empty();
    if cluster_news && let Some((previous, status)) = env.cluster_status(written) {
        if previous
            .as_ref()
            .is_none_or(|p| !same_ignoring_time(p, &status))
        {
            env.write_cluster_status(&status).await?;
        }
        written.cluster = Some(status);
    }

    // Tell what was recorded.
    for failure in &rollout.failures {
        env.ctx.metrics.rollout_failures.inc();
        let note = format!(
            "revision {} failed on {}: {}; no further node is changed{}",
            failure.revision,
            failure.name,
            failure.reason,
            if rollout.halt.as_ref().is_some_and(|h| h.rollback) {
                "; rolling back the nodes this rollout changed"
            } else {
                ""
            }
        );
        warn!(namespace = %env.key.namespace, cluster = %env.key.cluster, node = %failure.name, revision = %failure.revision, reason = %failure.reason, "rollout failed");
        env.publish_on_node(
            failure.node,
            EventType::Warning,
            "RolloutFailed",
            "Assess",
            note.clone(),
        )
        .await;
        env.publish_on_cluster(EventType::Warning, "RolloutFailed", "Assess", note)
            .await;
    }
    if let Some((id, outcome)) = &rollout.abort_request {
        let note = match outcome {
            AbortOutcome::Recorded => format!(
                "abort request {id}: the rollout stops{}",
                if rollout.abort.as_ref().is_some_and(|a| a.rollback) {
                    "; the nodes it changed return to their previous revision"
                } else {
                    ""
                }
            ),
            AbortOutcome::NothingToAbort => {
                format!("abort request {id}: no rollout in progress, nothing to stop")
            }
        };
        info!(namespace = %env.key.namespace, cluster = %env.key.cluster, request = %id, "{note}");
        env.publish_on_cluster(EventType::Normal, "Aborted", "Abort", note)
            .await;
    }
    if let Some(id) = &rollout.retry {
        let note = format!("retry request {id}: known-invalid revisions and any abort cleared");
        info!(namespace = %env.key.namespace, cluster = %env.key.cluster, request = %id, "{note}");
        env.publish_on_cluster(EventType::Normal, "Retried", "Retry", note)
            .await;
    }
    Ok(())
}

async fn act(
    env: &Env<'_>,
    pod_uids: &HashMap<String, String>,
    revisions: &[ControllerRevision],
) -> Result<(), Error> {
    let ctx = env.ctx;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &env.key.namespace);
    let mut first_error = Ok(());
    for action in &env.plan.actions {
        let observation = &env.snapshot.nodes[action.node];
        let waited_for = env.plan.nodes[action.node].prerequisites.join(", ");
        let waited = if waited_for.is_empty() || action.from_history {
            String::new()
        } else {
            format!(" (after {waited_for})")
        };
        let rollback = action.from_history;
        let result = match action.operation {
            Operation::CreatePod | Operation::FinishReplacement => {
                create_pod(env, &pods, action, revisions)
                    .await
                    .map(|revision| {
                        let reason = match (rollback, action.operation) {
                            (true, _) => "RollingBack",
                            (false, Operation::CreatePod) => "Provisioning",
                            (false, _) => "Upgrading",
                        };
                        (
                            reason,
                            format!("created pod {} on revision {revision}{waited}", action.name),
                        )
                    })
            }
            Operation::ReplacePod => delete_pod(&pods, &action.name, pod_uids.get(&action.name))
                .await
                .map(|()| {
                    let from = observation
                        .pod
                        .as_ref()
                        .and_then(|p| p.revision.as_deref())
                        .unwrap_or("none");
                    let to = action
                        .revision
                        .clone()
                        .or_else(|| {
                            observation
                                .desired
                                .as_ref()
                                .ok()
                                .map(|d| d.revision.clone())
                        })
                        .unwrap_or_default();
                    (
                        if rollback { "RollingBack" } else { "Upgrading" },
                        format!(
                            "replacing pod {} (revision {from} -> {to}){waited}",
                            action.name
                        ),
                    )
                }),
            Operation::ResumeReplacement => {
                delete_pod(&pods, &action.name, pod_uids.get(&action.name))
                    .await
                    .map(|()| {
                        (
                            "Upgrading",
                            format!("deleting old pod {} to finish its replacement", action.name),
                        )
                    })
            }
            Operation::RemovePod => delete_pod(&pods, &action.name, pod_uids.get(&action.name))
                .await
                .map(|()| {
                    (
                        "Removing",
                        format!("deleting pod {}: the node is set down", action.name),
                    )
                }),
            Operation::DeleteEndedPod => {
                delete_pod(&pods, &action.name, pod_uids.get(&action.name))
                    .await
                    .map(|()| {
                        (
                            "Recreating",
                            format!(
                                "deleting ended pod {} so it can be provisioned again",
                                action.name
                            ),
                        )
                    })
            }
        };
        ctx.metrics
            .actions
            .get_or_create(&ActionLabel {
                action: action_label(action.operation).into(),
            })
            .inc();
        match result {
            Ok((reason, note)) => {
                info!(namespace = %env.key.namespace, cluster = %env.key.cluster, node = %action.name, action = action_label(action.operation), rollback, "{note}");
                env.publish_on_node(
                    action.node,
                    EventType::Normal,
                    reason,
                    action_label(action.operation),
                    note,
                )
                .await;
            }
            Err(err) => {
                env.publish_on_node(
                    action.node,
                    EventType::Warning,
                    "ActionFailed",
                    action_label(action.operation),
                    err.to_string(),
                )
                .await;
                if first_error.is_ok() {
                    first_error = Err(err);
                }
            }
        }
    }
    first_error
}

/// Creates a node's pod: from the node's spec (keeping that spec as a ControllerRevision
/// first), or for a rollback from the spec a ControllerRevision kept.
async fn create_pod(
    env: &Env<'_>,
    pods: &Api<Pod>,
    action: &Action,
    revisions: &[ControllerRevision],
) -> Result<String, Error> {
    let (kind, name) = (action.kind, action.name.as_str());
    let build = |why: String| Error::BuildPod {
        node: name.to_owned(),
        why,
    };
    let (Some(meta), Some(spec)) = (env.nodes.meta(kind, name), env.nodes.spec(kind, name)) else {
        return Err(build("the node object is gone".into()));
    };
    let identity = NodeIdentity {
        kind,
        name,
        namespace: &env.key.namespace,
        uid: meta.uid.as_deref().unwrap_or(""),
        cluster_name: &env.key.cluster,
    };
    let kept = history::of_node(revisions, &identity);
    let (effective, revision): (EffectiveNodeSpec, String) =
        match (&action.revision, action.from_history) {
            (Some(revision), true) => {
                let wanted = history::revision_name(name, revision);
                let kept_revision = kept
                    .iter()
                    .find(|r| r.metadata.name.as_deref() == Some(wanted.as_str()))
                    .ok_or_else(|| {
                        build(format!(
                            "no ControllerRevision {wanted} keeps revision {revision}"
                        ))
                    })?;
                (
                    history::spec_of(kept_revision).map_err(build)?,
                    revision.clone(),
                )
            }
            _ => {
                let defaults = env.governing.and_then(|c| c.spec.defaults.for_kind(kind));
                let effective =
                    effective_spec(kind, spec, defaults).map_err(|e| build(e.to_string()))?;
                let revision = effective.desired_revision(meta.labels.as_ref());
                keep_revision(env, &identity, &effective, &revision, &kept).await?;
                (effective, revision)
            }
        };
    let pod = build_pod(&identity, &effective, &revision).map_err(build)?;
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match pods.create(&params, &pod).await {
        Ok(_) => Ok(revision),
        // Created by an earlier attempt whose answer was lost: the watch will show it.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(revision),
        Err(source) => Err(Error::CreatePod {
            pod: name.to_owned(),
            source,
        }),
    }
}

/// Keeps `revision` of a node as a ControllerRevision (if not kept yet) and prunes the node's
/// history to `revisionHistoryLimit`, sparing the revisions it runs, wants or may return to.
async fn keep_revision(
    env: &Env<'_>,
    node: &NodeIdentity<'_>,
    effective: &EffectiveNodeSpec,
    revision: &str,
    kept: &[&ControllerRevision],
) -> Result<(), Error> {
    let api: Api<ControllerRevision> = Api::namespaced(env.ctx.client.clone(), &env.key.namespace);
    let failed = |source| Error::KeepRevision {
        node: node.name.to_owned(),
        revision: revision.to_owned(),
        source,
    };
    let name = history::revision_name(node.name, revision);
    let mut kept: Vec<&ControllerRevision> = kept.to_vec();
    let created;
    if !kept
        .iter()
        .any(|r| r.metadata.name.as_deref() == Some(name.as_str()))
    {
        let number = kept.iter().filter_map(|r| r.revision).max().unwrap_or(0) + 1;
        let object =
            history::build(node, effective, revision, number).map_err(|why| Error::BuildPod {
                node: node.name.to_owned(),
                why,
            })?;
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        created = match api.create(&params, &object).await {
            Ok(created) => created,
            Err(kube::Error::Api(status)) if status.code == 409 => object,
            Err(source) => return Err(failed(source)),
        };
        kept.push(&created);
    }
    let limit = env.governing.map_or(
        express_api::RolloutSettings::default().revision_history_limit,
        |c| c.spec.rollout.revision_history_limit,
    ) as usize;
    let observation = env.snapshot.nodes.iter().find(|n| n.name == node.name);
    let mut protected: Vec<&str> = vec![revision];
    if let Some(observation) = observation {
        protected.extend(observation.pod.as_ref().and_then(|p| p.revision.as_deref()));
        if let Some(change) = &observation.change {
            protected.extend(change.from.as_deref());
            protected.push(&change.to);
        }
    }
    for stale in history::to_prune(&kept, limit.max(1), &protected) {
        match api.delete(&stale, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(source) => return Err(failed(source)),
        }
    }
    Ok(())
}

/// Graceful delete of exactly the pod observed (uid precondition), never forced.
async fn delete_pod(pods: &Api<Pod>, name: &str, uid: Option<&String>) -> Result<(), Error> {
    let params = DeleteParams {
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match pods.delete(name, &params).await {
        Ok(_) => Ok(()),
        // Already gone, or replaced by another pod meanwhile: nothing to do now.
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(source) => Err(Error::DeletePod {
            pod: name.to_owned(),
            source,
        }),
    }
}

fn status_patch(kind: &str, status: &impl serde::Serialize) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": format!("{}/{}", express_api::keys::GROUP, express_api::keys::VERSION),
        "kind": kind,
        "status": status,
    })
}

/// Whether a status message says that nothing starts until the desired state settles.
fn waits_to_settle(message: Option<&str>) -> bool {
    message.is_some_and(|m| m.contains(SETTLE_WAIT))
}

/// Publishes, on a node of a cluster without ExpressCluster, the start of a settle wait (or of
/// its stall) that holds the node's change.
async fn publish_settle_wait(
    env: &Env<'_>,
    index: usize,
    previous: Option<&str>,
    message: Option<&str>,
) {
    let stalled = |m: Option<&str>| m.is_some_and(|m| m.starts_with(SETTLE_STALLED));
    let note = || env.plan.settle.message().unwrap_or_default();
    if stalled(message) && !stalled(previous) {
        env.publish_on_node(index, EventType::Warning, "SettleStalled", "Settle", note())
            .await;
    } else if waits_to_settle(message) && !waits_to_settle(previous) {
        env.publish_on_node(index, EventType::Normal, "Settling", "Settle", note())
            .await;
    }
}

async fn report(env: &Env<'_>, written: &mut Written) -> Result<(), Error> {
    let ctx = env.ctx;
    let (snapshot, plan, key) = (env.snapshot, env.plan, env.key);
    let mut result = Ok(());
    let mut phases: HashMap<express_api::NodePhase, i64> = HashMap::new();
    for index in 0..snapshot.nodes.len() {
        let (previous, status) = env.node_status(index, written);
        if env.governing.is_none() {
            // No ExpressCluster to carry the settle condition: tell it on each waiting node.
            publish_settle_wait(
                env,
                index,
                previous.as_ref().and_then(|p| p.message.as_deref()),
                status.message.as_deref(),
            )
            .await;
        }
        *phases
            .entry(status.phase.unwrap_or(express_api::NodePhase::Waiting))
            .or_default() += 1;
        if previous
            .as_ref()
            .is_some_and(|p| same_ignoring_time(p, &status))
        {
            continue;
        }
        // A node whose pod was just created or deleted is reported by the reconcile its watch
        // event brings: the state seen before acting is already stale.
        if plan.actions.iter().any(|a| a.node == index) && !written.nodes.contains_key(&index) {
            continue;
        }
        let observation = &snapshot.nodes[index];
        match env.write_node_status(index, &status).await {
            Ok(()) => {
                written.nodes.insert(index, status);
            }
            Err(source) if result.is_ok() => {
                result = Err(Error::WriteStatus {
                    object: format!("{} {}", observation.kind, observation.name),
                    source,
                });
            }
            Err(_) => {}
        }
    }
    for phase in express_api::NodePhase::ALL {
        ctx.metrics
            .nodes
            .get_or_create(&PhaseLabel {
                namespace: key.namespace.clone(),
                cluster: key.cluster.clone(),
                phase: phase.as_str().into(),
            })
            .set(phases.get(&phase).copied().unwrap_or(0));
    }
    if let Some((previous, status)) = env.cluster_status(written) {
        let transitioned = |type_: &str| {
            let was = previous
                .as_ref()
                .and_then(|p| p.conditions.iter().find(|c| c.type_ == type_))
                .map(|c| c.status == "True");
            let is = status
                .conditions
                .iter()
                .find(|c| c.type_ == type_)
                .map(|c| c.status == "True");
            is == Some(true) && was != Some(true)
        };
        if transitioned(conditions::PAUSED) {
            env.publish_on_cluster(
                EventType::Normal,
                "Paused",
                "Pause",
                status.message.clone().unwrap_or_default(),
            )
            .await;
        }
        let stalled = |status: Option<&ExpressClusterStatus>| {
            status
                .and_then(|s| {
                    s.conditions
                        .iter()
                        .find(|c| c.type_ == conditions::DESIRED_STATE_SETTLED)
                })
                .is_some_and(|c| c.status == "False" && c.reason == reason::STALLED)
        };
        if stalled(Some(&status)) && !stalled(previous.as_ref()) {
            env.publish_on_cluster(
                EventType::Warning,
                "SettleStalled",
                "Settle",
                plan.settle.message().unwrap_or_default(),
            )
            .await;
        } else if waits_to_settle(status.message.as_deref())
            && !waits_to_settle(previous.as_ref().and_then(|p| p.message.as_deref()))
        {
            env.publish_on_cluster(
                EventType::Normal,
                "Settling",
                "Settle",
                plan.settle.message().unwrap_or_default(),
            )
            .await;
        }
        if transitioned(conditions::INVALID_SPEC)
            && let Some(Blocked::InvalidSpec(why)) = &plan.blocked
        {
            env.publish_on_cluster(EventType::Warning, "InvalidSpec", "Validate", why.clone())
                .await;
        }
        if previous
            .as_ref()
            .is_none_or(|p| !same_ignoring_time(p, &status))
        {
            match env.write_cluster_status(&status).await {
                Ok(()) => written.cluster = Some(status),
                Err(err) if result.is_ok() => result = Err(err),
                Err(_) => {}
            }
        }
    } else if let Some(Blocked::InvalidSpec(why)) = &plan.blocked {
        // No ExpressCluster to carry the condition: every node's status says it, and an event
        // on each node records it.
        for (index, observation) in snapshot.nodes.iter().enumerate() {
            let had = env
                .nodes
                .status(observation.kind, &observation.name)
                .and_then(|s| s.message.clone());
            if had.as_deref().is_none_or(|m| !m.contains(why.as_str())) {
                env.publish_on_node(
                    index,
                    EventType::Warning,
                    "InvalidSpec",
                    "Validate",
                    why.clone(),
                )
                .await;
            }
        }
    }
    result
}
