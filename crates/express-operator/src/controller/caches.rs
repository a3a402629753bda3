//! The controller's view of the cluster: one reflector per kind (and per managed namespace),
//! every change mapped to the Express clusters it concerns, and the overlay of statuses this
//! operator wrote that its caches have not caught up with yet (read your own writes).

use std::collections::{BTreeSet, HashMap, HashSet};
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
    stores: Vec<(Option<String>, Store<Lenient<K>>)>,
}

impl<K: WatchedKind> Scoped<K> {
    fn entries<'a>(
        &'a self,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = Arc<Lenient<K>>> + 'a {
        self.stores
            .iter()
            .filter(move |(scope, _)| match (scope, namespace) {
                (Some(scope), Some(namespace)) => scope == namespace,
                _ => true,
            })
            .flat_map(|(_, store)| store.state())
            .filter(move |o| namespace.is_none_or(|ns| o.meta().namespace.as_deref() == Some(ns)))
    }

    /// Objects of a namespace (None: of every namespace), shared with the reflector: nothing
    /// is cloned but the `Arc`s.
    pub fn in_namespace(&self, namespace: Option<&str>) -> Vec<Arc<K>> {
        self.entries(namespace)
            .filter_map(|o| o.decoded().cloned())
            .collect()
    }

    /// The objects of a namespace (None: of every namespace) this build cannot decode.
    pub fn undecodable(&self, namespace: Option<&str>) -> Vec<Arc<Undecodable>> {
        self.entries(namespace)
            .filter_map(|o| o.undecodable().cloned())
            .collect()
    }

    pub(super) async fn wait_until_ready(&self) {
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

/// Pods as this operator's own writes returned them (the shutdown-protection patch, a graceful
/// delete), kept until the pod cache has caught up. Without it, a reconcile started by the
/// status write that precedes a bounce's deletion could see the pod not yet terminating and
/// delete it a second time.
#[derive(Default)]
pub struct WrittenPods(Mutex<HashMap<(String, String), (u64, Pod)>>);

impl WrittenPods {
    pub(super) fn remember(&self, pod: &Pod) {
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
            written.insert((namespace, name), (version, pod.clone()));
        }
    }

    /// Replaces cached pods by the versions this operator's writes returned, while the cache
    /// is older than them. A pod gone from the cache stays gone; one replaced by another (a
    /// different uid) is not touched.
    pub(super) fn refresh(&self, pods: &mut [Arc<Pod>]) {
        let Ok(mut written) = self.0.lock() else {
            return;
        };
        if written.is_empty() {
            return;
        }
        for pod in pods.iter_mut() {
            let meta = &pod.metadata;
            let (Some(namespace), Some(name)) = (meta.namespace.clone(), meta.name.clone()) else {
                continue;
            };
            let key = (namespace, name);
            let cached: Option<u64> = meta
                .resource_version
                .as_deref()
                .and_then(|v| v.parse().ok());
            match (written.get(&key), cached) {
                (Some((version, newer)), Some(cached))
                    if cached < *version && newer.metadata.uid == pod.metadata.uid =>
                {
                    *pod = Arc::new(newer.clone());
                }
                (Some(_), _) => {
                    written.remove(&key);
                }
                (None, _) => {}
            }
        }
    }
}

impl Caches {
    /// What the caches hold of a namespace (None: of every namespace), with the operator-wide
    /// control ConfigMap from `operator_namespace` among the controls.
    pub(super) fn objects(&self, namespace: Option<&str>, operator_namespace: &str) -> Objects {
        let mut config_maps = self.controls.in_namespace(namespace);
        if namespace.is_some_and(|ns| ns != operator_namespace) {
            config_maps.extend(self.controls.in_namespace(Some(operator_namespace)));
        }
        let mut undecodable = self.clusters.undecodable(namespace);
        undecodable.extend(self.backends.undecodable(namespace));
        undecodable.extend(self.frontends.undecodable(namespace));
        undecodable.extend(self.pods.undecodable(namespace));
        undecodable.extend(self.controls.undecodable(namespace));
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
    config: watcher::Config,
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
        let stream = reflector::reflector(writer, watcher(api, config.clone()).default_backoff());
        let (triggers, to_keys) = (triggers.clone(), to_keys.clone());
        let mut count = UndecodableCount {
            objects: HashSet::new(),
            counted: 0,
            gauge: gauge.clone(),
        };
        tasks.spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                let (object, present) = match item {
                    Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                        (object, true)
                    }
                    Ok(watcher::Event::Delete(object)) => (object, false),
                    Ok(watcher::Event::Init) => {
                        count.objects.clear();
                        continue;
                    }
                    Ok(watcher::Event::InitDone) => {
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
        stores.push((scope.clone(), reader));
    }
    Scoped { stores }
}

/// The Express cluster of a changed Backend or Frontend.
pub(super) fn node_key<'a>(node: impl Into<NodeRef<'a>>) -> Vec<ClusterKey> {
    node.into().key().into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, version: &str, terminating: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("acme-fe1".into()),
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

    #[test]
    fn a_pod_this_operator_deleted_reads_as_terminating_until_the_cache_catches_up() {
        let written = WrittenPods::default();
        written.remember(&pod("old", "12", true));
        // The cache still has the pod as it was before the delete.
        let mut cached = vec![Arc::new(pod("old", "10", false))];
        written.refresh(&mut cached);
        assert!(cached[0].metadata.deletion_timestamp.is_some());
        // Caught up: the cache is read as it is, and the write is forgotten.
        let mut cached = vec![Arc::new(pod("old", "12", true))];
        written.refresh(&mut cached);
        let mut stale_again = vec![Arc::new(pod("old", "10", false))];
        written.refresh(&mut stale_again);
        assert!(stale_again[0].metadata.deletion_timestamp.is_none());
    }

    #[test]
    fn a_replacement_or_a_vanished_pod_is_never_overlaid() {
        let written = WrittenPods::default();
        written.remember(&pod("old", "12", true));
        let mut replaced = vec![Arc::new(pod("new", "11", false))];
        written.refresh(&mut replaced);
        assert_eq!(replaced[0].metadata.uid.as_deref(), Some("new"));
        assert!(replaced[0].metadata.deletion_timestamp.is_none());
        written.remember(&pod("old", "12", true));
        let mut gone: Vec<Arc<Pod>> = Vec::new();
        written.refresh(&mut gone);
        assert!(gone.is_empty());
    }
}
