//! The controller's view of the cluster: one index per kind (and per managed namespace) of what
//! the operator reads of each object, fed by its watch, every change mapped to the Express
//! clusters it concerns. Nodes, pods and ControllerRevisions are kept as views
//! ([`express_api::views`]); the other kinds as decoded. The overlay of this operator's own
//! writes is [`super::overlay`].

use std::collections::BTreeSet;
use std::sync::Arc;

use express_api::lenient::{Lenient, Undecodable};
use express_api::objects::WatchedKind;
use express_api::views::{Interner, NodeObject, NodeView, PodView, RevisionView};
use express_api::{Backend, ClusterKey, ExpressCluster, Frontend, Objects};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Resource;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;
use tracing::warn;

use super::index::{Entry, KindIndex, Synced, drive};
use crate::metrics::{ErrorLabel, Metrics};

/// A cache of one kind: one index per managed namespace (or one for all of them). Objects are
/// decoded one at a time ([`Lenient`]): one this build cannot read is kept aside, never
/// failing the watch (which would stop every tenant).
pub struct Scoped<V> {
    stores: Vec<ScopeStore<V>>,
}

/// One watch's index and its namespace (None: every namespace).
struct ScopeStore<V> {
    scope: Option<String>,
    index: Arc<KindIndex<V>>,
}

impl<V> Scoped<V> {
    fn entries<'a>(&'a self, namespace: Option<&'a str>) -> impl Iterator<Item = Entry<V>> + 'a {
        self.stores
            .iter()
            .filter(move |s| match (&s.scope, namespace) {
                (Some(scope), Some(namespace)) => scope == namespace,
                _ => true,
            })
            .flat_map(move |s| s.index.entries(namespace))
    }

    /// What the cache holds of a namespace (None: of every namespace), shared with the index:
    /// nothing is cloned but the `Arc`s.
    pub fn in_namespace(&self, namespace: Option<&str>) -> Vec<Arc<V>> {
        self.entries(namespace)
            .filter_map(|e| match e {
                Entry::View(view) => Some(view),
                Entry::Undecodable(_) => None,
            })
            .collect()
    }

    /// Name to resourceVersion (as a number) of every object of a namespace, decodable or not.
    pub(crate) fn versions(&self, namespace: &str) -> std::collections::HashMap<String, u64> {
        self.index_of(namespace)
            .map(|index| index.versions(namespace))
            .unwrap_or_default()
    }

    /// The objects of a namespace (None: of every namespace) this build cannot decode.
    pub fn undecodable(&self, namespace: Option<&str>) -> Vec<Arc<Undecodable>> {
        self.entries(namespace)
            .filter_map(|e| match e {
                Entry::View(_) => None,
                Entry::Undecodable(bad) => Some(bad),
            })
            .collect()
    }

    /// Objects held, and how many of them are undecodable, over every scope.
    pub fn counts(&self) -> (usize, usize) {
        self.stores.iter().fold((0, 0), |(all, bad), s| {
            let (a, b) = s.index.counts();
            (all + a, bad + b)
        })
    }

    pub(crate) async fn wait_until_ready(&self) {
        for s in &self.stores {
            s.index.wait_until_ready().await;
        }
    }

    /// The index holding a namespace's objects (none yet when none does).
    fn index_of(&self, namespace: &str) -> Option<&KindIndex<V>> {
        self.stores
            .iter()
            .find(|s| s.scope.as_deref().is_none_or(|scope| scope == namespace))
            .map(|s| &*s.index)
    }

    /// How far the index of a namespace has caught up; read it before reading the objects.
    pub(crate) fn synced(&self, namespace: &str) -> Synced {
        self.index_of(namespace)
            .map(KindIndex::synced)
            .unwrap_or_default()
    }

    /// See [`Caches::repack`].
    fn repack(&self)
    where
        V: Clone,
    {
        for s in &self.stores {
            s.index.repack();
        }
    }

    /// Relists begun so far by the index of a namespace; read it after a write returned: a
    /// relist numbered higher lists what that write left.
    pub(crate) fn relists_begun(&self, namespace: &str) -> u64 {
        self.index_of(namespace)
            .map_or(u64::MAX, KindIndex::relists_begun)
    }
}

/// A resourceVersion as a number (as etcd and kubesim issue them); 0 when it is not one.
pub(crate) fn version_number(version: Option<&str>) -> u64 {
    version.and_then(|v| v.parse().ok()).unwrap_or(0)
}

pub struct Caches {
    pub clusters: Scoped<ExpressCluster>,
    pub backends: Scoped<NodeView>,
    pub frontends: Scoped<NodeView>,
    pub pods: Scoped<PodView>,
    /// The namespaces' control ConfigMaps (`express-control`), watched by name.
    pub controls: Scoped<ConfigMap>,
    /// The operator-wide one (`express-operator-control` in the operator's namespace).
    pub operator_control: Scoped<ConfigMap>,
    pub revisions: Scoped<RevisionView>,
    /// The strings the views share (namespaces, clusters, revisions, versions).
    pub interner: Arc<Interner>,
}

impl Caches {
    /// Waits until every cache has listed what it watches.
    pub(crate) async fn wait_until_ready(&self) {
        self.clusters.wait_until_ready().await;
        self.backends.wait_until_ready().await;
        self.frontends.wait_until_ready().await;
        self.pods.wait_until_ready().await;
        self.controls.wait_until_ready().await;
        self.operator_control.wait_until_ready().await;
        self.revisions.wait_until_ready().await;
    }

    /// What the caches hold of a namespace (None: of every namespace), with the operator-wide
    /// control ConfigMap among the controls.
    pub(crate) fn objects(&self, namespace: Option<&str>) -> Objects {
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

    /// Copies every cached object into fresh allocations and drops the old ones. After a burst
    /// (a provisioning, a fleet-wide upgrade, a relist) the objects that stay were allocated
    /// between the transient ones of the burst, one here and one there in pages the transient
    /// ones filled: the allocator cannot give those pages back while one object lives in them.
    /// Copied while its thread cache is off (see `Settings::compact_heap`), each copy takes
    /// the lowest free slot of the oldest page with room, so the copies pack together and the
    /// pages the old ones leave empty are returned.
    pub fn repack(&self) {
        self.clusters.repack();
        self.backends.repack();
        self.frontends.repack();
        self.pods.repack();
        self.controls.repack();
        self.operator_control.repack();
        self.revisions.repack();
    }

    /// Every Express cluster known, optionally only in one namespace.
    pub(crate) fn keys(&self, namespace: Option<&str>) -> BTreeSet<ClusterKey> {
        let nodes_and_clusters = Objects {
            clusters: self.clusters.in_namespace(namespace),
            backends: self.backends.in_namespace(namespace),
            frontends: self.frontends.in_namespace(namespace),
            ..Objects::default()
        };
        nodes_and_clusters.cluster_keys()
    }
}

impl Caches {
    /// Caches holding exactly `objects` (API objects as JSON, as a list returns them), built
    /// through the indexes, decoding and views the watches use: what the memory regression test
    /// and the fleet benchmark weigh, without a server.
    pub async fn replay(objects: impl IntoIterator<Item = serde_json::Value>) -> Caches {
        let interner = Arc::new(Interner::default());
        let mut by_kind: std::collections::HashMap<String, Vec<serde_json::Value>> =
            std::collections::HashMap::new();
        for object in objects {
            let kind = object["kind"].as_str().unwrap_or_default().to_owned();
            by_kind.entry(kind).or_default().push(object);
        }
        let mut take = |kind: &str| by_kind.remove(kind).unwrap_or_default();
        let whole = watcher::Config::default();
        let config_maps = take("ConfigMap");
        Caches {
            clusters: replayed(
                take("ExpressCluster"),
                Watch::whole(whole.clone(), &interner),
            )
            .await,
            backends: replayed(
                take("Backend"),
                Watch::<Backend, _>::nodes(whole.clone(), &interner),
            )
            .await,
            frontends: replayed(
                take("Frontend"),
                Watch::<Frontend, _>::nodes(whole.clone(), &interner),
            )
            .await,
            pods: replayed(take("Pod"), Watch::pods(whole.clone(), &interner)).await,
            controls: replayed(config_maps, Watch::whole(whole.clone(), &interner)).await,
            operator_control: replayed(Vec::new(), Watch::whole(whole.clone(), &interner)).await,
            revisions: replayed(
                take("ControllerRevision"),
                Watch::revisions(whole, &interner),
            )
            .await,
            interner,
        }
    }
}

/// One kind's cache holding `listed`, as after a first listing.
async fn replayed<K: WatchedKind, V>(
    listed: Vec<serde_json::Value>,
    watch: Watch<K, V>,
) -> Scoped<V> {
    let index = Arc::new(KindIndex::new(watch.interner.clone()));
    let listing = listed
        .into_iter()
        .filter_map(|object| serde_json::from_value::<Lenient<K>>(object).ok())
        .map(watcher::Event::InitApply);
    let events = std::iter::once(watcher::Event::Init)
        .chain(listing)
        .chain(std::iter::once(watcher::Event::InitDone))
        .map(Ok);
    drive(futures::stream::iter(events), &index, watch.view, |_| {}).await;
    Scoped {
        stores: vec![ScopeStore { scope: None, index }],
    }
}

pub(crate) type Trigger = mpsc::UnboundedSender<ClusterKey>;

/// Background tasks owned by one controller run: aborted when it ends or is dropped, so that
/// nothing (a watch, a leadership receiver) outlives it.
#[derive(Default)]
pub struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Tasks {
    pub(crate) fn spawn(&mut self, task: impl std::future::Future<Output = ()> + Send + 'static) {
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

/// The Express cluster an object no build of ours can read belongs to, by what could be read.
fn undecodable_key(bad: &Undecodable) -> Vec<ClusterKey> {
    match (&bad.namespace, &bad.cluster) {
        (Some(namespace), Some(cluster)) => vec![ClusterKey::new(namespace, cluster)],
        _ => Vec::new(),
    }
}

/// Starts one watch per scope for a kind, keeping each object as `view` builds it and mapping
/// every change to cluster keys.
pub(crate) fn cache<K, V, F>(
    client: &kube::Client,
    scopes: &[Option<String>],
    watch: Watch<K, V>,
    to_keys: F,
    triggers: Trigger,
    metrics: &Metrics,
    tasks: &mut Tasks,
) -> Scoped<V>
where
    K: WatchedKind + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    V: Send + Sync + 'static,
    F: Fn(&V) -> Vec<ClusterKey> + Clone + Send + Sync + 'static,
{
    let gauge = metrics
        .instance
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
        let index = Arc::new(KindIndex::new(watch.interner.clone()));
        let events = watcher(api, watch.config.clone()).default_backoff();
        let (triggers, to_keys, gauge, view) =
            (triggers.clone(), to_keys.clone(), gauge.clone(), watch.view);
        let task_index = index.clone();
        tasks.spawn(async move {
            let index = task_index;
            // This scope's share of the kind's gauge (every scope adds its own).
            let mut counted: i64 = 0;
            drive(events, &index, view, |applied| {
                let undecodable = i64::try_from(index.counts().1).unwrap_or(i64::MAX);
                gauge.inc_by(undecodable - counted);
                counted = undecodable;
                let keys = match applied.entry {
                    Entry::View(view) => to_keys(view),
                    Entry::Undecodable(bad) => {
                        if applied.present {
                            warn!(object = %bad, namespace = ?bad.namespace, "cannot decode a watched object; reporting it on its tenant");
                        }
                        undecodable_key(bad)
                    }
                };
                for key in keys {
                    let _ = triggers.send(key);
                }
            })
            .await;
        });
        stores.push(ScopeStore {
            scope: scope.clone(),
            index,
        });
    }
    Scoped { stores }
}

/// The Express cluster of a changed Backend or Frontend.
pub(crate) fn node_key(node: &NodeView) -> Vec<ClusterKey> {
    node.key().into_iter().collect()
}

/// What a cache watches of its kind, and what it keeps of each object.
pub(crate) struct Watch<K, V> {
    pub(crate) config: watcher::Config,
    /// Builds what is kept of a decoded object.
    pub(crate) view: fn(&Arc<K>, &Interner) -> Arc<V>,
    pub(crate) interner: Arc<Interner>,
}

impl<K> Watch<K, K> {
    /// The objects `config` selects, kept as decoded.
    pub(crate) fn whole(config: watcher::Config, interner: &Arc<Interner>) -> Watch<K, K> {
        Watch {
            config,
            view: |object, _| object.clone(),
            interner: interner.clone(),
        }
    }
}

impl Watch<Pod, PodView> {
    /// Pods, kept as views.
    pub(crate) fn pods(config: watcher::Config, interner: &Arc<Interner>) -> Self {
        Watch {
            config,
            view: |pod, interner| Arc::new(PodView::new(pod, Some(interner))),
            interner: interner.clone(),
        }
    }
}

impl<K: NodeObject + WatchedKind> Watch<K, NodeView> {
    /// Backends or Frontends, kept as views: the metadata they are read by, spec and status.
    pub(crate) fn nodes(config: watcher::Config, interner: &Arc<Interner>) -> Self {
        Watch {
            config,
            view: |node, interner| Arc::new(NodeView::of(&**node, Some(interner))),
            interner: interner.clone(),
        }
    }
}

impl Watch<ControllerRevision, RevisionView> {
    /// ControllerRevisions, kept as views without their bodies: the operator reads a kept spec
    /// only to roll a node back (or restart it on the revision it runs), and then fetches that
    /// one revision.
    pub(crate) fn revisions(config: watcher::Config, interner: &Arc<Interner>) -> Self {
        Watch {
            config,
            view: |revision, interner| Arc::new(RevisionView::new(revision, Some(interner))),
            interner: interner.clone(),
        }
    }
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
        let kept = crate::history::build(&node, &spec, "r1", 3).unwrap();
        let interner = Arc::new(Interner::default());
        let watch = Watch::revisions(watcher::Config::default(), &interner);
        let view = (watch.view)(&Arc::new(kept), &interner);
        assert!(view.kept().is_none(), "no body");
        assert_eq!(view.number, Some(3));
        assert_eq!(
            view.kept_for(express_api::NodeKind::Frontend, "acme-fe1"),
            Some("r1")
        );
        let history = crate::history::of_node([&*view], &node);
        assert_eq!(history.len(), 1, "still found as the node's revision");
    }
}
