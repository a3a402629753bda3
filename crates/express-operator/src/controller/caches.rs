//! The controller's view of the cluster: one reflector per kind (and per managed namespace),
//! every change mapped to the Express clusters it concerns, and the overlay of statuses this
//! operator wrote that its caches have not caught up with yet (read your own writes).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use express_api::lenient::{Lenient, Undecodable};
use express_api::objects::WatchedKind;
use express_api::{Backend, ClusterKey, ExpressCluster, Frontend, NodeRef, Objects};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use prometheus_client::metrics::gauge::Gauge;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tracing::warn;

use crate::metrics::{ErrorLabel, Metrics};

/// A cache of one kind: one reflector per managed namespace (or one for all of them). Objects
/// are decoded one at a time ([`Lenient`]): one this build cannot read is kept aside, never
/// failing the watch (which would stop every tenant).
pub struct Scoped<K: WatchedKind> {
    stores: Vec<ScopeStore<K>>,
}

/// One reflector's store: its namespace (None: every namespace), the names it holds per
/// namespace, and how far it has caught up.
struct ScopeStore<K: WatchedKind> {
    scope: Option<String>,
    store: Store<Lenient<K>>,
    names: Arc<NamespaceIndex>,
    progress: Arc<Progress>,
}

/// The names of a store's objects by namespace, kept from the same events as the store: a
/// reconcile reads its own namespace by name instead of walking the whole fleet's store (kube's
/// `Store` has no index, and `state()` copies every object's `Arc`: cost linear in the fleet
/// on every reconcile, quadratic over a fleet's provisioning).
#[derive(Default)]
struct NamespaceIndex(std::sync::RwLock<HashMap<String, BTreeSet<String>>>);

impl NamespaceIndex {
    fn names(&self, namespace: &str) -> Vec<String> {
        self.0
            .read()
            .map(|index| {
                index
                    .get(namespace)
                    .map(|names| names.iter().cloned().collect())
                    .unwrap_or_default()
            })
            .unwrap_or_default()
    }

    fn apply(index: &mut HashMap<String, BTreeSet<String>>, meta: &ObjectMeta, present: bool) {
        let (Some(namespace), Some(name)) = (meta.namespace.as_ref(), meta.name.as_ref()) else {
            return;
        };
        if present {
            index
                .entry(namespace.clone())
                .or_default()
                .insert(name.clone());
        } else if let Some(names) = index.get_mut(namespace) {
            names.remove(name);
            if names.is_empty() {
                index.remove(namespace);
            }
        }
    }

    fn note(&self, meta: &ObjectMeta, present: bool) {
        if let Ok(mut index) = self.0.write() {
            NamespaceIndex::apply(&mut index, meta, present);
        }
    }

    /// A relist is done: the index becomes what it listed (as the store does).
    fn replace(&self, listed: HashMap<String, BTreeSet<String>>) {
        if let Ok(mut index) = self.0.write() {
            *index = listed;
        }
    }
}

/// How far one reflector's store has caught up with the API server: what tells a write of this
/// operator the store has not shown yet from an object that is gone since.
#[derive(Default)]
struct Progress {
    /// Every change up to this resourceVersion is in the store: the highest version a watch
    /// event brought (the reflector applies an event before passing it on) or a relist listed.
    version: AtomicU64,
    /// Relists begun (`Init`: the list request goes out after it).
    relists_begun: AtomicU64,
    /// The number of the last relist completed (`InitDone`: the store is what it listed).
    relists_completed: AtomicU64,
}

/// Where a store stood at one moment (see [`Progress`]). Read before the store itself: the
/// store read after it holds at least this much.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Synced {
    pub(super) version: u64,
    pub(super) relists_completed: u64,
}

impl<K: WatchedKind> Scoped<K> {
    fn entries<'a>(
        &'a self,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = Arc<Lenient<K>>> + 'a {
        self.stores
            .iter()
            .filter(move |s| match (&s.scope, namespace) {
                (Some(scope), Some(namespace)) => scope == namespace,
                _ => true,
            })
            .flat_map(move |s| match namespace {
                None => s.store.state(),
                Some(namespace) => s
                    .names
                    .names(namespace)
                    .into_iter()
                    .filter_map(|name| {
                        s.store
                            .get(&reflector::ObjectRef::new(&name).within(namespace))
                    })
                    .collect(),
            })
    }

    /// Objects of a namespace (None: of every namespace), shared with the reflector: nothing
    /// is cloned but the `Arc`s.
    pub fn in_namespace(&self, namespace: Option<&str>) -> Vec<Arc<K>> {
        self.entries(namespace)
            .filter_map(|o| o.decoded().cloned())
            .collect()
    }

    /// Name to resourceVersion (as a number) of every object of a namespace, decodable or not.
    pub(super) fn versions(&self, namespace: &str) -> HashMap<String, u64> {
        self.entries(Some(namespace))
            .filter_map(|o| Some((o.meta().name.clone()?, version_of(o.meta()))))
            .collect()
    }

    /// The objects of a namespace (None: of every namespace) this build cannot decode.
    pub fn undecodable(&self, namespace: Option<&str>) -> Vec<Arc<Undecodable>> {
        self.entries(namespace)
            .filter_map(|o| o.undecodable().cloned())
            .collect()
    }

    pub(super) async fn wait_until_ready(&self) {
        for s in &self.stores {
            let _ = s.store.wait_until_ready().await;
        }
    }

    /// The progress of the store holding a namespace's objects (nothing yet when none does).
    fn progress(&self, namespace: &str) -> Option<&Progress> {
        self.stores
            .iter()
            .find(|s| s.scope.as_deref().is_none_or(|scope| scope == namespace))
            .map(|s| &*s.progress)
    }

    /// How far the store of a namespace has caught up; read it before reading the objects.
    pub(super) fn synced(&self, namespace: &str) -> Synced {
        self.progress(namespace)
            .map(|p| Synced {
                version: p.version.load(Ordering::Acquire),
                relists_completed: p.relists_completed.load(Ordering::Acquire),
            })
            .unwrap_or_default()
    }

    /// Relists begun so far by the store of a namespace; read it after a write returned: a
    /// relist numbered higher lists what that write left.
    pub(super) fn relists_begun(&self, namespace: &str) -> u64 {
        self.progress(namespace)
            .map_or(u64::MAX, |p| p.relists_begun.load(Ordering::Acquire))
    }
}

/// A resourceVersion as a number (as etcd and kubesim issue them); 0 when it is not one.
pub(super) fn version_number(version: Option<&str>) -> u64 {
    version.and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// An object's resourceVersion as a number ([`version_number`]).
fn version_of(meta: &ObjectMeta) -> u64 {
    version_number(meta.resource_version.as_deref())
}

pub struct Caches {
    pub clusters: Scoped<ExpressCluster>,
    pub backends: Scoped<Backend>,
    pub frontends: Scoped<Frontend>,
    pub pods: Scoped<Pod>,
    /// The namespaces' control ConfigMaps (`express-control`), watched by name.
    pub controls: Scoped<ConfigMap>,
    /// The operator-wide one (`express-operator-control` in the operator's namespace).
    pub operator_control: Scoped<ConfigMap>,
    pub revisions: Scoped<ControllerRevision>,
}

/// Statuses this operator wrote, kept until its caches have caught up with them. A reconcile
/// that starts before the watch delivers the operator's own status write must still see it:
/// the change record written before a pod is deleted is what makes the next step safe.
#[derive(Default)]
pub struct WrittenStatuses(Mutex<HashMap<StatusKey, (u64, serde_json::Value)>>);

/// Kind, namespace and name of an object whose status was written.
pub(super) type StatusKey = (&'static str, String, String);

impl WrittenStatuses {
    pub(super) fn remember(
        &self,
        kind: &'static str,
        meta: &ObjectMeta,
        status: serde_json::Value,
    ) {
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
    /// the write (copying the object only then). Resource versions are compared as numbers (as
    /// etcd and kubesim issue them); an object whose version is not a number is taken as fresh.
    pub(super) fn refresh<K>(&self, kind: &'static str, object: &mut Arc<K>)
    where
        K: Resource + kube::core::object::HasStatus + Clone,
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
                    *Arc::make_mut(object).status_mut() = Some(status);
                }
            }
            (Some(_), _) => {
                written.remove(&key);
            }
            (None, _) => {}
        }
    }
}

/// Pods as this operator's own writes returned them (a creation, the shutdown-protection patch,
/// a graceful delete), kept until the pod cache has caught up. Without it, a reconcile started
/// by the status write that precedes a bounce's deletion could see the pod not yet terminating
/// and delete it a second time; and one started while the pod watch relists (a watch cut, a
/// compacted history) would miss the pod it just created and create it again. Kept by
/// namespace, then name: a reconcile reads its own namespace's writes, never the whole fleet's
/// (walking every namespace's on each reconcile was half of the operator's CPU while it
/// provisioned 10,000 tenants).
#[derive(Default)]
pub struct WrittenPods(Mutex<HashMap<String, HashMap<String, WrittenPod>>>);

struct WrittenPod {
    /// The resourceVersion the write returned.
    version: u64,
    pod: Pod,
    /// For a creation: the pod cache's relists begun when it returned (see [`Synced`]).
    created: Option<u64>,
}

impl WrittenPods {
    /// A pod this operator patched or deleted.
    pub(super) fn remember(&self, pod: &Pod) {
        self.keep(pod, None);
    }

    /// A pod this operator created, with the relists its cache had begun once the creation
    /// returned ([`Scoped::relists_begun`]).
    pub(super) fn remember_created(&self, pod: &Pod, relists_begun: u64) {
        self.keep(pod, Some(relists_begun));
    }

    fn keep(&self, pod: &Pod, created: Option<u64>) {
        let meta = &pod.metadata;
        let (Some(namespace), Some(name), Some(version)) = (
            meta.namespace.clone(),
            meta.name.clone(),
            meta.resource_version
                .as_deref()
                .and_then(|v| v.parse().ok()),
        ) else {
            return;
        };
        if let Ok(mut written) = self.0.lock() {
            let pod = pod.clone();
            written.entry(namespace).or_default().insert(
                name,
                WrittenPod {
                    version,
                    pod,
                    created,
                },
            );
        }
    }

    /// Replaces a namespace's cached pods by the versions this operator's writes returned,
    /// while the cache is older than them. A pod this operator created is added while the cache
    /// has not caught up with its creation (`synced`, read before the pods), and shown in
    /// place of the pod it replaced while the cache still has that one. Otherwise a pod gone
    /// from the cache stays gone, and one replaced by another (a different uid) is not touched.
    pub(super) fn refresh(&self, namespace: &str, synced: Synced, pods: &mut Vec<Arc<Pod>>) {
        let Ok(mut by_namespace) = self.0.lock() else {
            return;
        };
        let Some(written) = by_namespace.get_mut(namespace) else {
            return;
        };
        let mut cached_names = HashSet::new();
        for pod in pods.iter_mut() {
            let meta = &pod.metadata;
            if meta.namespace.as_deref() != Some(namespace) {
                continue;
            }
            let Some(name) = meta.name.clone() else {
                continue;
            };
            cached_names.insert(name.clone());
            let cached: Option<u64> = meta
                .resource_version
                .as_deref()
                .and_then(|v| v.parse().ok());
            let Some(write) = written.get(&name) else {
                continue;
            };
            let same_pod = write.pod.metadata.uid == pod.metadata.uid;
            match cached {
                // An older state of the pod written, or (for a creation) of the pod it
                // replaced: the cache has not caught up yet.
                Some(cached) if cached < write.version && (same_pod || write.created.is_some()) => {
                    *pod = Arc::new(write.pod.clone());
                }
                _ => {
                    written.remove(&name);
                }
            }
        }
        written.retain(|name, write| {
            let Some(relists_begun) = write.created else {
                return true;
            };
            if cached_names.contains(name) {
                return true;
            }
            // Created, and not in the cache: gone since, if the cache has seen past the
            // creation or relisted since; otherwise the cache has not seen it yet.
            let gone = synced.version >= write.version || synced.relists_completed > relists_begun;
            if !gone {
                pods.push(Arc::new(write.pod.clone()));
            }
            !gone
        });
        if written.is_empty() {
            by_namespace.remove(namespace);
        }
    }
}

impl Caches {
    /// What the caches hold of a namespace (None: of every namespace), with the operator-wide
    /// control ConfigMap among the controls.
    pub(super) fn objects(&self, namespace: Option<&str>) -> Objects {
        let mut config_maps = self.controls.in_namespace(namespace);
        config_maps.extend(self.operator_control.in_namespace(None));
        let mut undecodable = self.clusters.undecodable(namespace);
        undecodable.extend(self.backends.undecodable(namespace));
        undecodable.extend(self.frontends.undecodable(namespace));
        undecodable.extend(self.pods.undecodable(namespace));
        undecodable.extend(self.controls.undecodable(namespace));
        undecodable.extend(self.operator_control.undecodable(namespace));
        undecodable.extend(self.revisions.undecodable(namespace));
        Objects {
            clusters: self.clusters.in_namespace(namespace),
            backends: self.backends.in_namespace(namespace),
            frontends: self.frontends.in_namespace(namespace),
            pods: self.pods.in_namespace(namespace),
            config_maps,
            revisions: self.revisions.in_namespace(namespace),
            undecodable,
        }
    }

    /// Every Express cluster known, optionally only in one namespace.
    pub(super) fn keys(&self, namespace: Option<&str>) -> BTreeSet<ClusterKey> {
        let nodes_and_clusters = Objects {
            clusters: self.clusters.in_namespace(namespace),
            backends: self.backends.in_namespace(namespace),
            frontends: self.frontends.in_namespace(namespace),
            ..Objects::default()
        };
        nodes_and_clusters.cluster_keys()
    }
}

pub(super) type Trigger = mpsc::UnboundedSender<ClusterKey>;

/// Background tasks owned by one controller run: aborted when it ends or is dropped, so that
/// nothing (a watch, a leadership receiver) outlives it.
#[derive(Default)]
pub struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Tasks {
    pub(super) fn spawn(&mut self, task: impl std::future::Future<Output = ()> + Send + 'static) {
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

/// The objects of one reflector that cannot be decoded, counted into the
/// `express_operator_undecodable_objects{kind}` gauge (shared by every scope of the kind).
struct UndecodableCount {
    objects: HashSet<(Option<String>, String)>,
    counted: i64,
    gauge: Gauge,
}

impl UndecodableCount {
    fn note<K: WatchedKind>(&mut self, object: &Lenient<K>, present: bool) {
        let meta = object.meta();
        let id = (
            meta.namespace.clone(),
            meta.name.clone().unwrap_or_default(),
        );
        if present && object.undecodable().is_some() {
            self.objects.insert(id);
        } else {
            self.objects.remove(&id);
        }
    }

    fn publish(&mut self) {
        let now = i64::try_from(self.objects.len()).unwrap_or(i64::MAX);
        self.gauge.inc_by(now - self.counted);
        self.counted = now;
    }
}

/// The Express cluster an object no build of ours can read belongs to, by what could be read.
fn undecodable_key(bad: &Undecodable) -> Vec<ClusterKey> {
    match (&bad.namespace, &bad.cluster) {
        (Some(namespace), Some(cluster)) => vec![ClusterKey::new(namespace, cluster)],
        _ => Vec::new(),
    }
}

/// Starts one reflector per scope for a kind, mapping every change to cluster keys.
pub(super) fn cache<K, F>(
    client: &kube::Client,
    scopes: &[Option<String>],
    selection: Selection<K>,
    to_keys: F,
    triggers: Trigger,
    metrics: &Metrics,
    tasks: &mut Tasks,
) -> Scoped<K>
where
    K: WatchedKind + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    F: Fn(&K) -> Vec<ClusterKey> + Clone + Send + Sync + 'static,
{
    let gauge = metrics
        .undecodable
        .get_or_create(&ErrorLabel {
            kind: K::kind(&()).into_owned(),
        })
        .clone();
    let mut stores = Vec::new();
    for scope in scopes {
        let api: Api<Lenient<K>> = match scope {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let (reader, writer) = reflector::store();
        let progress = Arc::new(Progress::default());
        let task_progress = progress.clone();
        let names = Arc::new(NamespaceIndex::default());
        let task_names = names.clone();
        let stream = reflector::reflector(
            writer,
            watcher(api, selection.config.clone())
                .default_backoff()
                .modify(move |object: &mut Lenient<K>| {
                    if let Some(decoded) = object.decoded_mut() {
                        (selection.keep)(decoded);
                    }
                }),
        );
        let (triggers, to_keys) = (triggers.clone(), to_keys.clone());
        let mut count = UndecodableCount {
            objects: HashSet::new(),
            counted: 0,
            gauge: gauge.clone(),
        };
        tasks.spawn(async move {
            let (progress, names) = (task_progress, task_names);
            // The relist under way (its number), the highest version it listed so far and
            // the names it listed.
            let (mut relist, mut listed) = (0, 0);
            let mut listed_names: HashMap<String, BTreeSet<String>> = HashMap::new();
            // A watch event the store has applied: the index first, then the progress, so
            // that a reader who sees the progress finds the object by name.
            let seen = |meta: &ObjectMeta, present: bool| {
                names.note(meta, present);
                progress
                    .version
                    .fetch_max(version_of(meta), Ordering::AcqRel);
            };
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                let (object, present) = match item {
                    Ok(watcher::Event::Apply(object)) => {
                        seen(object.meta(), true);
                        (object, true)
                    }
                    Ok(watcher::Event::InitApply(object)) => {
                        NamespaceIndex::apply(&mut listed_names, object.meta(), true);
                        listed = listed.max(version_of(object.meta()));
                        (object, true)
                    }
                    Ok(watcher::Event::Delete(object)) => {
                        seen(object.meta(), false);
                        (object, false)
                    }
                    Ok(watcher::Event::Init) => {
                        relist = progress.relists_begun.fetch_add(1, Ordering::AcqRel) + 1;
                        listed = 0;
                        listed_names.clear();
                        count.objects.clear();
                        continue;
                    }
                    Ok(watcher::Event::InitDone) => {
                        // The store now holds the listing: as new as what it listed.
                        names.replace(std::mem::take(&mut listed_names));
                        progress.version.fetch_max(listed, Ordering::AcqRel);
                        progress
                            .relists_completed
                            .fetch_max(relist, Ordering::AcqRel);
                        count.publish();
                        continue;
                    }
                    Err(err) => {
                        warn!(error = %err, kind = %K::kind(&()), "watch error; the watcher retries with backoff");
                        continue;
                    }
                };
                count.note(&object, present);
                count.publish();
                let keys = match (object.decoded(), object.undecodable()) {
                    (Some(decoded), _) => to_keys(decoded),
                    (None, Some(bad)) => {
                        warn!(object = %bad, namespace = ?bad.namespace, "cannot decode a watched object; reporting it on its tenant");
                        undecodable_key(bad)
                    }
                    (None, None) => Vec::new(),
                };
                for key in keys {
                    let _ = triggers.send(key);
                }
            }
        });
        stores.push(ScopeStore {
            scope: scope.clone(),
            store: reader,
            names,
            progress,
        });
    }
    Scoped { stores }
}

/// The Express cluster of a changed Backend or Frontend.
pub(super) fn node_key<'a>(node: impl Into<NodeRef<'a>>) -> Vec<ClusterKey> {
    node.into().key().into_iter().collect()
}

/// What a cache watches of its kind, and what it keeps of each object.
pub(super) struct Selection<K> {
    pub(super) config: watcher::Config,
    /// Trims each decoded object to what the operator reads, before the store holds it.
    pub(super) keep: fn(&mut K),
}

impl<K> Selection<K> {
    /// The objects `config` selects, every field kept.
    pub(super) fn whole(config: watcher::Config) -> Selection<K> {
        Selection {
            config,
            keep: |_| {},
        }
    }
}

/// For [`Selection::keep`]: a ControllerRevision without its body. The operator reads a kept spec only to
/// roll a node back (or restart it on the revision it runs), and then fetches that one
/// revision; the cache holds each node's history (up to `revisionHistoryLimit` copies of its
/// effective spec) as names, labels, numbers and resourceVersions. A settled tenant keeps ten
/// per node by default, the most numerous objects cached: their owner references (the node
/// they belong to is in their labels), annotations and timestamps go too.
pub fn keep_revision_metadata(revision: &mut ControllerRevision) {
    revision.data = Default::default();
    let meta = &mut revision.metadata;
    meta.owner_references = None;
    meta.annotations = None;
    meta.creation_timestamp = None;
    meta.generation = None;
    meta.managed_fields = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_revision_keeps_what_the_history_reads() {
        let node = crate::pods::test_identity(express_api::NodeKind::Frontend, "acme-fe1", "u1");
        let spec = express_api::EffectiveNodeSpec {
            express_version: "v1".into(),
            config_changeset: None,
            image_repository: "reg/express".into(),
            pod_template: serde_json::json!({}),
        };
        let mut kept = crate::history::build(&node, &spec, "r1", 3).unwrap();
        kept.metadata.resource_version = Some("7".into());
        let labels = kept.metadata.labels.clone();
        keep_revision_metadata(&mut kept);
        assert_eq!(kept.data, Default::default());
        assert!(kept.metadata.owner_references.is_none());
        assert_eq!(kept.metadata.labels, labels);
        assert_eq!(kept.revision, Some(3));
        assert_eq!(version_of(&kept.metadata), 7);
        let history = crate::history::of_node([&kept], &node);
        assert_eq!(history.len(), 1, "still found as the node's revision");
    }

    fn named(name: &str, uid: &str, version: &str, terminating: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("tenant".into()),
                uid: Some(uid.into()),
                resource_version: Some(version.into()),
                deletion_timestamp: terminating.then_some(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                    ),
                ),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    fn pod(uid: &str, version: &str, terminating: bool) -> Pod {
        named("acme-fe1", uid, version, terminating)
    }

    fn synced(version: u64, relists_completed: u64) -> Synced {
        Synced {
            version,
            relists_completed,
        }
    }

    fn uids(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter()
            .filter_map(|p| p.metadata.uid.as_deref())
            .collect()
    }

    #[test]
    fn a_pod_this_operator_deleted_reads_as_terminating_until_the_cache_catches_up() {
        let written = WrittenPods::default();
        written.remember(&pod("old", "12", true));
        // The cache still has the pod as it was before the delete.
        let mut cached = vec![Arc::new(pod("old", "10", false))];
        written.refresh("tenant", synced(10, 0), &mut cached);
        assert!(cached[0].metadata.deletion_timestamp.is_some());
        // Caught up: the cache is read as it is, and the write is forgotten.
        let mut cached = vec![Arc::new(pod("old", "12", true))];
        written.refresh("tenant", synced(12, 0), &mut cached);
        let mut stale_again = vec![Arc::new(pod("old", "10", false))];
        written.refresh("tenant", synced(10, 0), &mut stale_again);
        assert!(stale_again[0].metadata.deletion_timestamp.is_none());
    }

    #[test]
    fn a_namespace_reads_only_its_own_writes_and_forgets_them_once_caught_up() {
        let written = WrittenPods::default();
        let mut elsewhere = named("other-fe1", "o1", "12", false);
        elsewhere.metadata.namespace = Some("other".into());
        written.remember_created(&elsewhere, 0);
        written.remember_created(&pod("new", "11", false), 0);
        let mut cached: Vec<Arc<Pod>> = Vec::new();
        written.refresh("tenant", synced(10, 0), &mut cached);
        assert_eq!(
            uids(&cached),
            ["new"],
            "the other namespace's creation is not shown"
        );
        // Caught up in "tenant": its entry goes, the other namespace's stays.
        let mut caught_up = vec![Arc::new(pod("new", "11", false))];
        written.refresh("tenant", synced(11, 0), &mut caught_up);
        let namespaces: Vec<String> = written.0.lock().unwrap().keys().cloned().collect();
        assert_eq!(namespaces, ["other"]);
        let mut other: Vec<Arc<Pod>> = Vec::new();
        written.refresh("other", synced(10, 0), &mut other);
        assert_eq!(uids(&other), ["o1"]);
    }

    #[test]
    fn a_replacement_or_a_vanished_pod_is_never_overlaid() {
        let written = WrittenPods::default();
        written.remember(&pod("old", "12", true));
        let mut replaced = vec![Arc::new(pod("new", "11", false))];
        written.refresh("tenant", synced(11, 0), &mut replaced);
        assert_eq!(uids(&replaced), ["new"]);
        assert!(replaced[0].metadata.deletion_timestamp.is_none());
        written.remember(&pod("old", "12", true));
        let mut gone: Vec<Arc<Pod>> = Vec::new();
        written.refresh("tenant", synced(0, 0), &mut gone);
        assert!(gone.is_empty());
    }

    #[test]
    fn the_namespace_index_follows_events_and_relists() {
        let meta = |namespace: &str, name: &str| ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            ..ObjectMeta::default()
        };
        let index = NamespaceIndex::default();
        index.note(&meta("a", "x-fe2"), true);
        index.note(&meta("a", "x-fe1"), true);
        index.note(&meta("b", "y-be"), true);
        assert_eq!(index.names("a"), ["x-fe1", "x-fe2"]);
        index.note(&meta("a", "x-fe2"), false);
        assert_eq!(index.names("a"), ["x-fe1"]);
        assert!(index.names("c").is_empty());
        // A relist replaces what was known.
        let mut listed = HashMap::new();
        NamespaceIndex::apply(&mut listed, &meta("c", "z-be"), true);
        index.replace(listed);
        assert!(index.names("a").is_empty() && index.names("b").is_empty());
        assert_eq!(index.names("c"), ["z-be"]);
    }

    /// The pod watch was cut right after a creation and relists: until its cache shows the
    /// pod, reconciles see it as created, never as missing (which would create it again).
    #[test]
    fn a_created_pod_is_seen_until_the_cache_shows_it() {
        let written = WrittenPods::default();
        let other = Arc::new(named("acme-fe2", "fe2", "5", false));
        written.remember_created(&pod("new", "20", false), 3);
        let mut stale = vec![other.clone()];
        written.refresh("tenant", synced(18, 3), &mut stale);
        assert_eq!(uids(&stale), ["fe2", "new"]);
        // Another namespace's cache is left alone.
        let mut elsewhere = Vec::new();
        written.refresh("other", synced(0, 0), &mut elsewhere);
        assert!(elsewhere.is_empty());
        // A cache that still has the pod it replaced shows the new one in its place.
        let mut replaced_one = vec![Arc::new(pod("old", "18", true))];
        written.refresh("tenant", synced(18, 3), &mut replaced_one);
        assert_eq!(uids(&replaced_one), ["new"]);
        // Caught up (the pod as the kubelet left it): read as cached, and forgotten.
        let mut cached = vec![other.clone(), Arc::new(pod("new", "23", false))];
        written.refresh("tenant", synced(23, 3), &mut cached);
        assert_eq!(cached[1].metadata.resource_version.as_deref(), Some("23"));
        let mut stale_again = vec![other];
        written.refresh("tenant", synced(18, 3), &mut stale_again);
        assert_eq!(uids(&stale_again), ["fe2"]);
    }

    #[test]
    fn a_created_pod_gone_before_the_cache_showed_it_is_not_kept() {
        // The cache saw past the creation (the pod's deletion, or any later change).
        let written = WrittenPods::default();
        written.remember_created(&pod("new", "20", false), 3);
        let mut gone = Vec::new();
        written.refresh("tenant", synced(25, 3), &mut gone);
        assert!(gone.is_empty());
        // A relist begun after the creation did not list it.
        written.remember_created(&pod("new", "20", false), 3);
        let mut listing_begun_before = Vec::new();
        written.refresh("tenant", synced(12, 3), &mut listing_begun_before);
        assert_eq!(uids(&listing_begun_before), ["new"]);
        let mut relisted = Vec::new();
        written.refresh("tenant", synced(12, 4), &mut relisted);
        assert!(relisted.is_empty());
        let mut later = Vec::new();
        written.refresh("tenant", synced(12, 3), &mut later);
        assert!(later.is_empty(), "forgotten once known gone");
    }
}
