//! The controller. Caches (reflectors) of ExpressClusters, Backends, Frontends, the pods they
//! own and the control ConfigMaps; every change is mapped to its Express cluster
//! (namespace, clusterName); one reconcile per cluster: observe (caches → snapshot) → plan (the
//! pure planner) → act (thin pod operations) → report (status via server-side apply, events,
//! metrics). Level-triggered and watch-driven: nothing polls.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use express_api::keys::{
    CONTROL_CONFIGMAP_GLOBAL, CONTROL_CONFIGMAP_NAMESPACE, FIELD_MANAGER, LABEL_CLUSTER,
};
use express_api::{
    Backend, ExpressCluster, Frontend, NodeKind, NodeSpec, NodeStatus, ReplacementStatus,
    effective_spec,
};
use express_planner::observe::{Inventory, PodOwnership, snapshots};
use express_planner::{Blocked, ClusterSnapshot, Operation, Plan, plan};
use futures::StreamExt;
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

use crate::metrics::{ActionLabel, ErrorLabel, Metrics, PhaseLabel, ResultLabel};
use crate::pods::{NodeIdentity, build_pod};
use crate::runner::{self, Next};
use crate::status::{cluster_status, node_status, same_ignoring_time};

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
    #[error("cannot record the replacement of {node} before deleting its pod: {source}")]
    RecordReplacement { node: String, source: kube::Error },
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
            Error::RecordReplacement { .. } => "record_replacement",
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
        },
        recorder,
        metrics: metrics.clone(),
        settings,
        leader: leader.clone(),
    });
    let _ = all_keys.set(context.clone());
    let caches = &context.caches;
    caches.clusters.wait_until_ready().await;
    caches.backends.wait_until_ready().await;
    caches.frontends.wait_until_ready().await;
    caches.pods.wait_until_ready().await;
    caches.controls.wait_until_ready().await;
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
    let clusters = caches.clusters.in_namespace(&key.namespace);
    let backends = caches.backends.in_namespace(&key.namespace);
    let frontends = caches.frontends.in_namespace(&key.namespace);
    let pods = caches.pods.in_namespace(&key.namespace);
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
    let plan = plan(&snapshot);
    debug!(namespace = %key.namespace, cluster = %key.cluster, actions = plan.actions.len(), in_flight = plan.in_flight, "planned");

    // Act.
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let act_result = act(
        ctx,
        key,
        &snapshot,
        &plan,
        &nodes,
        governing.as_ref(),
        &pod_uids,
        &now,
    )
    .await;
    let sweep_result = clear_finished_replacements(ctx, key, &snapshot, &plan).await;

    // Report, even when an action failed: status must say what is going on.
    let report_result = report(ctx, key, &snapshot, &plan, &nodes, governing.as_ref(), &now).await;
    act_result?;
    sweep_result?;
    report_result?;
    Ok(Next::AwaitChange)
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

#[allow(clippy::too_many_arguments)]
async fn act(
    ctx: &Context,
    key: &ClusterKey,
    snapshot: &ClusterSnapshot,
    plan: &Plan,
    nodes: &Nodes,
    governing: Option<&ExpressCluster>,
    pod_uids: &HashMap<String, String>,
    now: &Time,
) -> Result<(), Error> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let mut first_error = Ok(());
    for action in &plan.actions {
        let observation = &snapshot.nodes[action.node];
        let waited_for = plan.nodes[action.node].prerequisites.join(", ");
        let waited = if waited_for.is_empty() {
            String::new()
        } else {
            format!(" (after {waited_for})")
        };
        let desired = observation.desired.as_ref().ok();
        let result = match action.operation {
            Operation::CreatePod | Operation::FinishReplacement => {
                create_pod(ctx, &pods, key, action.kind, &action.name, nodes, governing)
                    .await
                    .map(|revision| {
                        let reason = if action.operation == Operation::CreatePod {
                            "Provisioning"
                        } else {
                            "Upgrading"
                        };
                        (
                            reason,
                            format!("created pod {} on revision {revision}{waited}", action.name),
                        )
                    })
            }
            Operation::ReplacePod => {
                let marker = ReplacementStatus {
                    from_revision: observation.pod.as_ref().and_then(|p| p.revision.clone()),
                    to_revision: desired.map(|d| d.revision.clone()).unwrap_or_default(),
                    started_at: Some(now.clone()),
                };
                match record_replacement(ctx, key, action.kind, &action.name, Some(&marker)).await {
                    Err(err) => Err(err),
                    Ok(()) => delete_pod(&pods, &action.name, pod_uids.get(&action.name))
                        .await
                        .map(|()| {
                            (
                                "Upgrading",
                                format!(
                                    "replacing pod {} (revision {} -> {}){waited}",
                                    action.name,
                                    marker.from_revision.as_deref().unwrap_or("none"),
                                    marker.to_revision
                                ),
                            )
                        }),
                }
            }
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
                info!(namespace = %key.namespace, cluster = %key.cluster, node = %action.name, action = action_label(action.operation), "{note}");
                publish(
                    ctx,
                    nodes.reference(action.kind, &action.name),
                    EventType::Normal,
                    reason,
                    action_label(action.operation),
                    note,
                )
                .await;
            }
            Err(err) => {
                publish(
                    ctx,
                    nodes.reference(action.kind, &action.name),
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

/// Clears the replacement record of nodes whose replacement pod now exists (also after an
/// operator restart between creating the pod and clearing the record).
async fn clear_finished_replacements(
    ctx: &Context,
    key: &ClusterKey,
    snapshot: &ClusterSnapshot,
    plan: &Plan,
) -> Result<(), Error> {
    for (observation, node_plan) in snapshot.nodes.iter().zip(&plan.nodes) {
        let finished = observation.replacing
            && (node_plan.action == Some(Operation::FinishReplacement)
                || matches!(
                    node_plan.state,
                    express_planner::NodeState::Starting | express_planner::NodeState::UpToDate
                ));
        if finished {
            record_replacement(ctx, key, observation.kind, &observation.name, None).await?;
        }
    }
    Ok(())
}

async fn create_pod(
    ctx: &Context,
    pods: &Api<Pod>,
    key: &ClusterKey,
    kind: NodeKind,
    name: &str,
    nodes: &Nodes,
    governing: Option<&ExpressCluster>,
) -> Result<String, Error> {
    let build = |why: String| Error::BuildPod {
        node: name.to_owned(),
        why,
    };
    let (Some(meta), Some(spec)) = (nodes.meta(kind, name), nodes.spec(kind, name)) else {
        return Err(build("the node object is gone".into()));
    };
    let defaults = governing.and_then(|c| c.spec.defaults.for_kind(kind));
    let effective = effective_spec(kind, spec, defaults).map_err(|e| build(e.to_string()))?;
    let revision = effective.desired_revision(meta.labels.as_ref());
    let identity = NodeIdentity {
        kind,
        name,
        namespace: &key.namespace,
        uid: meta.uid.as_deref().unwrap_or(""),
        cluster_name: &key.cluster,
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
        Err(source) => {
            let _ = ctx;
            Err(Error::CreatePod {
                pod: name.to_owned(),
                source,
            })
        }
    }
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

/// Writes (Some) or clears (None) a node's replacement record.
async fn record_replacement(
    ctx: &Context,
    key: &ClusterKey,
    kind: NodeKind,
    name: &str,
    marker: Option<&ReplacementStatus>,
) -> Result<(), Error> {
    let status = match marker {
        Some(marker) => serde_json::json!({"replacement": marker}),
        None => serde_json::json!({}),
    };
    let patch = serde_json::json!({
        "apiVersion": format!("{}/{}", express_api::keys::GROUP, express_api::keys::VERSION),
        "kind": kind.to_string(),
        "status": status,
    });
    // Its own field manager, so that the status report (another manager) never removes it.
    let params = PatchParams::apply(&format!("{FIELD_MANAGER}-replacement")).force();
    let result = match kind {
        NodeKind::Backend => Api::<Backend>::namespaced(ctx.client.clone(), &key.namespace)
            .patch_status(name, &params, &Patch::Apply(&patch))
            .await
            .map(|_| ()),
        NodeKind::Frontend => Api::<Frontend>::namespaced(ctx.client.clone(), &key.namespace)
            .patch_status(name, &params, &Patch::Apply(&patch))
            .await
            .map(|_| ()),
    };
    result.map_err(|source| Error::RecordReplacement {
        node: name.to_owned(),
        source,
    })
}

#[allow(clippy::too_many_arguments)]
async fn report(
    ctx: &Context,
    key: &ClusterKey,
    snapshot: &ClusterSnapshot,
    plan: &Plan,
    nodes: &Nodes,
    governing: Option<&ExpressCluster>,
    now: &Time,
) -> Result<(), Error> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut result = Ok(());
    let mut phases: HashMap<String, i64> = HashMap::new();
    for (observation, node_plan) in snapshot.nodes.iter().zip(&plan.nodes) {
        let (kind, name) = (observation.kind, observation.name.as_str());
        let previous = nodes.status(kind, name);
        let generation = nodes.meta(kind, name).and_then(|m| m.generation);
        let mut status = node_status(observation, node_plan, plan, previous, generation, now);
        // The marker is written by its own field manager; the report never carries it.
        status.replacement = None;
        let mut previous_comparable = previous.cloned().unwrap_or_default();
        previous_comparable.replacement = None;
        *phases
            .entry(format!(
                "{:?}",
                status.phase.unwrap_or(express_api::NodePhase::Waiting)
            ))
            .or_default() += 1;
        if previous.is_some() && same_ignoring_time(&previous_comparable, &status) {
            continue;
        }
        let patch = status_patch(&kind.to_string(), &status);
        let written = match kind {
            NodeKind::Backend => Api::<Backend>::namespaced(ctx.client.clone(), &key.namespace)
                .patch_status(name, &params, &Patch::Apply(&patch))
                .await
                .map(|_| ()),
            NodeKind::Frontend => Api::<Frontend>::namespaced(ctx.client.clone(), &key.namespace)
                .patch_status(name, &params, &Patch::Apply(&patch))
                .await
                .map(|_| ()),
        };
        if let Err(source) = written
            && result.is_ok()
        {
            result = Err(Error::WriteStatus {
                object: format!("{kind} {name}"),
                source,
            });
        }
    }
    for phase in [
        "Waiting",
        "Provisioning",
        "Upgrading",
        "Ready",
        "NotReady",
        "Down",
        "Failed",
        "Paused",
        "Bouncing",
    ] {
        ctx.metrics
            .nodes
            .get_or_create(&PhaseLabel {
                namespace: key.namespace.clone(),
                cluster: key.cluster.clone(),
                phase: phase.into(),
            })
            .set(phases.get(phase).copied().unwrap_or(0));
    }
    if let Some(cluster) = governing {
        let previous = cluster.status.as_ref();
        let status = cluster_status(snapshot, plan, previous, cluster.metadata.generation, now);
        let transitioned = |type_: &str| {
            let was = previous
                .and_then(|p| p.conditions.iter().find(|c| c.type_ == type_))
                .map(|c| c.status == "True");
            let is = status
                .conditions
                .iter()
                .find(|c| c.type_ == type_)
                .map(|c| c.status == "True");
            is == Some(true) && was != Some(true)
        };
        let name = cluster.name_any();
        if transitioned("Paused") {
            publish(
                ctx,
                Some(cluster.object_ref(&())),
                EventType::Normal,
                "Paused",
                "Pause",
                status.message.clone().unwrap_or_default(),
            )
            .await;
        }
        if transitioned("InvalidSpec")
            && let Some(Blocked::InvalidSpec(why)) = &plan.blocked
        {
            publish(
                ctx,
                Some(cluster.object_ref(&())),
                EventType::Warning,
                "InvalidSpec",
                "Validate",
                why.clone(),
            )
            .await;
        }
        if previous.is_none_or(|p| !same_ignoring_time(p, &status)) {
            let patch = status_patch("ExpressCluster", &status);
            if let Err(source) =
                Api::<ExpressCluster>::namespaced(ctx.client.clone(), &key.namespace)
                    .patch_status(&name, &params, &Patch::Apply(&patch))
                    .await
                && result.is_ok()
            {
                result = Err(Error::WriteStatus {
                    object: format!("ExpressCluster {name}"),
                    source,
                });
            }
        }
    } else if let Some(Blocked::InvalidSpec(why)) = &plan.blocked {
        // No ExpressCluster to carry the condition: every node's status says it, and an event
        // on each node records it.
        for observation in &snapshot.nodes {
            let had = nodes
                .status(observation.kind, &observation.name)
                .and_then(|s| s.message.clone());
            if had.as_deref().is_none_or(|m| !m.contains(why.as_str())) {
                publish(
                    ctx,
                    nodes.reference(observation.kind, &observation.name),
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
