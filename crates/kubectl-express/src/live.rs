//! Reading a live cluster: the objects of one namespace (or all), listed once or kept current by
//! watches, and the views the verbs draw from them. Nothing here writes.

use std::collections::BTreeSet;
use std::pin::Pin;

use express_api::keys::{CONTROL_CONFIGMAP_GLOBAL, CONTROL_CONFIGMAP_NAMESPACE, LABEL_CLUSTER};
use express_api::{Backend, ExpressCluster, Frontend, NodeKind, NodeSpec, NodeStatus};
use express_planner::observe::{Inventory, PodOwnership};
use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

/// Everything the verbs read, from one namespace or from all.
#[derive(Clone, Debug, Default)]
pub struct Objects {
    pub clusters: Vec<ExpressCluster>,
    pub backends: Vec<Backend>,
    pub frontends: Vec<Frontend>,
    pub pods: Vec<Pod>,
    pub config_maps: Vec<ConfigMap>,
    pub revisions: Vec<ControllerRevision>,
}

/// One Backend or Frontend, whatever its kind.
#[derive(Clone, Copy, Debug)]
pub struct NodeView<'a> {
    pub kind: NodeKind,
    pub meta: &'a ObjectMeta,
    pub spec: &'a NodeSpec,
    pub status: Option<&'a NodeStatus>,
}

impl NodeView<'_> {
    pub fn name(&self) -> &str {
        self.meta.name.as_deref().unwrap_or("")
    }

    /// The operator has not reported on the node's latest spec yet.
    pub fn unobserved(&self) -> bool {
        self.status.and_then(|s| s.observed_generation) < self.meta.generation
            || self.status.is_none()
    }
}

fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

async fn list<K>(api: Api<K>, params: &ListParams, what: &str) -> Result<Vec<K>, String>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.list(params)
        .await
        .map(|list| list.items)
        .map_err(|e| format!("cannot list {what}: {e}"))
}

impl Objects {
    /// Lists the Express objects of `namespace` (None: every namespace), their pods and
    /// ControllerRevisions, and the control ConfigMaps (also the operator-wide one).
    pub async fn load(
        client: &Client,
        namespace: Option<&str>,
        operator_namespace: &str,
    ) -> Result<Objects, String> {
        let all = ListParams::default();
        let ours = ListParams::default().labels(LABEL_CLUSTER);
        let mut config_maps: Vec<ConfigMap> = list(
            scoped::<ConfigMap>(client, namespace),
            &ListParams::default().fields(&format!("metadata.name={CONTROL_CONFIGMAP_NAMESPACE}")),
            "ConfigMaps",
        )
        .await?;
        if let Ok(Some(global)) = Api::<ConfigMap>::namespaced(client.clone(), operator_namespace)
            .get_opt(CONTROL_CONFIGMAP_GLOBAL)
            .await
        {
            config_maps.push(global);
        }
        Ok(Objects {
            clusters: list(scoped(client, namespace), &all, "ExpressClusters").await?,
            backends: list(scoped(client, namespace), &all, "Backends").await?,
            frontends: list(scoped(client, namespace), &all, "Frontends").await?,
            pods: list(scoped(client, namespace), &ours, "pods").await?,
            config_maps,
            revisions: list(scoped(client, namespace), &ours, "ControllerRevisions").await?,
        })
    }

    pub fn inventory<'a>(&'a self, operator_namespace: &'a str) -> Inventory<'a> {
        Inventory {
            clusters: &self.clusters,
            backends: &self.backends,
            frontends: &self.frontends,
            pods: &self.pods,
            config_maps: &self.config_maps,
            controller_revisions: &self.revisions,
            operator_namespace,
            ownership: PodOwnership::OwnerReference,
        }
    }

    /// Every (namespace, clusterName) an ExpressCluster or a node names, sorted.
    pub fn cluster_keys(&self) -> BTreeSet<(String, String)> {
        let mut keys = BTreeSet::new();
        for c in &self.clusters {
            if let (Some(ns), Some(name)) = (&c.metadata.namespace, c.cluster_name()) {
                keys.insert((ns.clone(), name.to_owned()));
            }
        }
        for node in self.nodes() {
            if let Some(ns) = &node.meta.namespace {
                keys.insert((ns.clone(), node.spec.cluster_config.cluster_name.clone()));
            }
        }
        keys
    }

    pub fn express_cluster(&self, namespace: &str, cluster: &str) -> Option<&ExpressCluster> {
        self.clusters.iter().find(|c| {
            c.metadata.namespace.as_deref() == Some(namespace) && c.cluster_name() == Some(cluster)
        })
    }

    pub fn nodes(&self) -> impl Iterator<Item = NodeView<'_>> {
        self.backends
            .iter()
            .map(|b| NodeView {
                kind: NodeKind::Backend,
                meta: &b.metadata,
                spec: &b.spec,
                status: b.status.as_ref(),
            })
            .chain(self.frontends.iter().map(|f| NodeView {
                kind: NodeKind::Frontend,
                meta: &f.metadata,
                spec: &f.spec,
                status: f.status.as_ref(),
            }))
    }

    /// The nodes of one Express cluster, in name order (natural).
    pub fn nodes_of<'a>(&'a self, namespace: &str, cluster: &str) -> Vec<NodeView<'a>> {
        let mut nodes: Vec<NodeView<'a>> = self
            .nodes()
            .filter(|n| {
                n.meta.namespace.as_deref() == Some(namespace)
                    && n.spec.cluster_config.cluster_name == cluster
            })
            .collect();
        nodes.sort_by(|a, b| express_api::natural::natural_cmp(a.name(), b.name()));
        nodes
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Pod> {
        self.pods.iter().find(|p| {
            p.metadata.namespace.as_deref() == Some(namespace)
                && p.metadata.name.as_deref() == Some(name)
        })
    }
}

/// Watches of the ExpressClusters, nodes and pods of one namespace, kept in reflector stores;
/// [`Watched::changed`] resolves on each change, so that a verb redraws only when something
/// changed (never by polling).
pub struct Watched {
    clusters: Store<ExpressCluster>,
    backends: Store<Backend>,
    frontends: Store<Frontend>,
    pods: Store<Pod>,
    events: Pin<Box<dyn Stream<Item = Result<(), String>> + Send>>,
}

fn watched<K>(
    api: Api<K>,
    config: watcher::Config,
) -> (Store<K>, impl Stream<Item = Result<(), String>>)
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, config).default_backoff())
        .map(|event| event.map(|_| ()).map_err(|e| format!("watch failed: {e}")));
    (store, stream)
}

impl Watched {
    pub fn start(client: &Client, namespace: &str) -> Watched {
        let (clusters, c) = watched(
            Api::namespaced(client.clone(), namespace),
            watcher::Config::default(),
        );
        let (backends, b) = watched(
            Api::namespaced(client.clone(), namespace),
            watcher::Config::default(),
        );
        let (frontends, f) = watched(
            Api::namespaced(client.clone(), namespace),
            watcher::Config::default(),
        );
        let (pods, p) = watched(
            Api::namespaced(client.clone(), namespace),
            watcher::Config::default().labels(LABEL_CLUSTER),
        );
        let events = futures::stream::select_all([c.boxed(), b.boxed(), f.boxed(), p.boxed()]);
        Watched {
            clusters,
            backends,
            frontends,
            pods,
            events: Box::pin(events),
        }
    }

    /// Waits until every watch has listed once.
    pub async fn ready(&mut self) -> Result<(), String> {
        let stores = (
            self.clusters.clone(),
            self.backends.clone(),
            self.frontends.clone(),
            self.pods.clone(),
        );
        let ready = async move {
            let _ = stores.0.wait_until_ready().await;
            let _ = stores.1.wait_until_ready().await;
            let _ = stores.2.wait_until_ready().await;
            let _ = stores.3.wait_until_ready().await;
        };
        tokio::pin!(ready);
        loop {
            tokio::select! {
                () = &mut ready => return Ok(()),
                event = self.events.next() => match event {
                    Some(Ok(())) => {}
                    Some(Err(e)) => return Err(e),
                    None => return Err("the watches ended".into()),
                },
            }
        }
    }

    /// Waits for the next change.
    pub async fn changed(&mut self) -> Result<(), String> {
        match self.events.next().await {
            Some(result) => result,
            None => Err("the watches ended".into()),
        }
    }

    /// What the watches hold now.
    pub fn objects(&self) -> Objects {
        let owned =
            |store: &Store<ExpressCluster>| store.state().iter().map(|o| (**o).clone()).collect();
        Objects {
            clusters: owned(&self.clusters),
            backends: self
                .backends
                .state()
                .iter()
                .map(|o| (**o).clone())
                .collect(),
            frontends: self
                .frontends
                .state()
                .iter()
                .map(|o| (**o).clone())
                .collect(),
            pods: self.pods.state().iter().map(|o| (**o).clone()).collect(),
            config_maps: Vec::new(),
            revisions: Vec::new(),
        }
    }
}
