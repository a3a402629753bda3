//! Reading a live cluster: the objects of one namespace (or all), listed once or kept current by
//! watches, the views the verbs draw from them. Nothing here writes.

use std::pin::Pin;
use std::sync::Arc;

use express_api::keys::{CONTROL_CONFIGMAP_GLOBAL, CONTROL_CONFIGMAP_NAMESPACE, LABEL_CLUSTER};
use express_api::lenient::{Lenient, Slim, Undecodable};

pub use super::view_store::Changed;
use super::view_store::{ViewStore, watched_views as watched};
use express_api::objects::WatchedKind;
use express_api::views::{Interner, NodeObject, NodeView, PodView, RevisionView};
use express_api::{Backend, ExpressCluster, Frontend, NodeKind, NodeStatus, Objects};
use express_planner::observe::{Inventory, PodOwnership};
use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, ObjectList};
use kube::runtime::watcher;
use kube::{Client, Resource};
pub use list_pages::FirstListing;
use list_pages::{self as pages, ListPaged};

use crate::exit::Exit;

pub fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

/// Lists one kind, decoding each object on its own: what cannot be decoded goes to
/// `undecodable` instead of failing the list (the operator reports it on its tenant).
pub async fn list<K>(
    api: Api<Lenient<K>>,
    params: &ListParams,
    what: &str,
    undecodable: &mut Vec<Arc<Undecodable>>,
) -> Result<Vec<Arc<K>>, String>
where
    K: WatchedKind,
{
    list_views(api, params, what, undecodable, |object| object).await
}

/// Lists one kind a page at a time, turning each page's objects into their views as the page
/// arrives (`view`) and letting the page go: a DC's decoded objects are never all in memory
/// at once, only one page of them and the views.
pub async fn list_views<K, V>(
    api: Api<Lenient<K>>,
    params: &ListParams,
    what: &str,
    undecodable: &mut Vec<Arc<Undecodable>>,
    view: impl Fn(Arc<K>) -> Arc<V>,
) -> Result<Vec<Arc<V>>, String>
where
    K: WatchedKind,
{
    let (views, bad) = pages::paged_fold(
        |token| {
            let mut page = params.clone().limit(pages::PAGE_SIZE);
            if let Some(token) = token {
                page = page.continue_token(&token);
            }
            lenient_page(&api, page)
        },
        || (Vec::new(), Vec::new()),
        |(views, bad): &mut (Vec<Arc<V>>, Vec<Arc<Undecodable>>), page| {
            for entry in page.items {
                match entry.into_decoded() {
                    Ok(object) => views.push(view(object)),
                    Err(why) => bad.push(why),
                }
            }
        },
    )
    .await
    .map_err(|e| format!("cannot list {what}: {e}"))?;
    undecodable.extend(bad);
    Ok(views)
}

/// One page of a list, read in one pass over its text when every object on it decodes
/// ([`Slim`]); a page holding one that does not is read again from the same text object by
/// object ([`Lenient`]). Decoding is most of what reading a DC costs.
async fn lenient_page<K>(
    api: &Api<Lenient<K>>,
    params: ListParams,
) -> Result<ObjectList<Lenient<K>>, kube::Error>
where
    K: WatchedKind,
{
    let request = kube::core::Request::new(api.resource_url())
        .list(&params)
        .map_err(kube::Error::BuildRequest)?;
    let text = api.clone().into_client().request_text(request).await?;
    if let Ok(page) = serde_json::from_str::<ObjectList<Slim<K>>>(&text) {
        return Ok(ObjectList {
            types: page.types,
            metadata: page.metadata,
            items: page
                .items
                .into_iter()
                .map(|slim| Lenient::new(slim.0))
                .collect(),
        });
    }
    serde_json::from_str(&text).map_err(kube::Error::SerdeError)
}

/// What a verb reads of each tenant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// Every object, ControllerRevisions included: a tenant's history, its plan, its revisions.
    Everything,
    /// What a fleet's rows and checks use (list, doctor, the dashboard's fleet): no
    /// ControllerRevisions, which are the largest objects a tenant has and which no row reads.
    Listing,
}

/// Lists the Express objects of `namespace` (None: every namespace), their pods and
/// ControllerRevisions (unless `reading` is [`Reading::Listing`]), and the control ConfigMaps
/// (also the operator-wide one).
pub async fn load(
    client: &Client,
    namespace: Option<&str>,
    operator_namespace: &str,
    reading: Reading,
) -> Result<Objects, String> {
    let all = ListParams::default();
    let ours = ListParams::default().labels(LABEL_CLUSTER);
    let mut bad = Vec::new();
    // One interner for the read: a tenant's namespace, cluster name, revision and version,
    // and every pod's condition words, are one string each, not one per object.
    let interner = Interner::default();
    let interner = Some(&interner);
    let mut config_maps = list(
        scoped::<Lenient<ConfigMap>>(client, namespace),
        &ListParams::default().fields(&format!("metadata.name={CONTROL_CONFIGMAP_NAMESPACE}")),
        "ConfigMaps",
        &mut bad,
    )
    .await?;
    if let Ok(Some(global)) = Api::<ConfigMap>::namespaced(client.clone(), operator_namespace)
        .get_opt(CONTROL_CONFIGMAP_GLOBAL)
        .await
    {
        config_maps.push(Arc::new(global));
    }
    Ok(Objects {
        clusters: list(scoped(client, namespace), &all, "ExpressClusters", &mut bad).await?,
        backends: list_views::<Backend, _>(
            scoped(client, namespace),
            &all,
            "Backends",
            &mut bad,
            |node| node_view(node, interner),
        )
        .await?,
        frontends: list_views::<Frontend, _>(
            scoped(client, namespace),
            &all,
            "Frontends",
            &mut bad,
            |node| node_view(node, interner),
        )
        .await?,
        pods: list_views::<Pod, _>(scoped(client, namespace), &ours, "pods", &mut bad, |pod| {
            Arc::new(PodView::new(&pod, interner))
        })
        .await?,
        config_maps,
        // Read whole: `revisions` and `diff` compare the specs they keep.
        revisions: match reading {
            Reading::Listing => Vec::new(),
            Reading::Everything => {
                list_views::<ControllerRevision, _>(
                    scoped(client, namespace),
                    &ours,
                    "ControllerRevisions",
                    &mut bad,
                    |revision| Arc::new(RevisionView::with_body(&revision)),
                )
                .await?
            }
        },
        undecodable: bad,
    })
}

/// A listed node's view, moving its spec and status when the page held the only reference
/// to it (it does: the page is being let go), cloning them otherwise.
fn node_view<N: NodeObject>(node: Arc<N>, interner: Option<&Interner>) -> Arc<NodeView> {
    Arc::new(match Arc::try_unwrap(node) {
        Ok(node) => NodeView::owned(node, interner),
        Err(shared) => NodeView::of(&*shared, interner),
    })
}

/// What the planner reads of live objects: pods are matched to nodes by owner reference.
pub fn inventory<'a>(objects: &'a Objects, operator_namespace: &'a str) -> Inventory<'a> {
    Inventory {
        objects,
        operator_namespace,
        ownership: PodOwnership::OwnerReference,
    }
}

/// Watches of the ExpressClusters, nodes and pods of one namespace (or every namespace), and,
/// for the fleet, the control ConfigMaps, kept as their views ([`ViewStore`]); [`Watched::changed`]
/// resolves on each change, so that a verb redraws only when something changed (never by
/// polling).
pub struct Watched {
    stores: Stores,
    events: Pin<Box<dyn Stream<Item = Result<(), String>> + Send>>,
}

/// The stores of [`Watched`]: cheap to clone, readable from anywhere while the watches run.
/// Each keeps its objects' views, not the objects ([`ViewStore`]): the nodes' and pods' views
/// are made once per change of that object, as it arrives.
#[derive(Clone)]
pub struct Stores {
    clusters: ViewStore<ExpressCluster>,
    backends: ViewStore<NodeView>,
    frontends: ViewStore<NodeView>,
    pods: ViewStore<PodView>,
    /// The namespaces' control ConfigMaps (for the fleet).
    controls: Option<ViewStore<ConfigMap>>,
    /// The operator-wide control ConfigMap: read when the user may, but never waited for, and
    /// its watch's failures never fail the others (a user limited to tenant namespaces cannot
    /// watch the operator's namespace).
    operator_control: Option<ViewStore<ConfigMap>>,
}

type Changes = Pin<Box<dyn Stream<Item = Result<(), String>> + Send>>;

/// The view of an object kept as it is (ExpressClusters, control ConfigMaps).
fn kept<K>(object: Arc<K>) -> Arc<K> {
    object
}

impl Watched {
    /// The Express objects and pods of one namespace.
    pub fn start(client: &Client, namespace: &str) -> Watched {
        let (stores, changes) = Self::express(client, Some(namespace), FirstListing::Paged);
        Watched {
            stores,
            events: Box::pin(futures::stream::select_all(changes)),
        }
    }

    /// The Express objects and pods of one namespace (None: every namespace), and the control
    /// ConfigMaps that pause them: the namespaces' and the operator-wide one.
    pub fn fleet(
        client: &Client,
        namespace: Option<&str>,
        operator_namespace: &str,
        listing: FirstListing,
    ) -> Watched {
        let (mut stores, mut changes) = Self::express(client, namespace, listing);
        let (local, l) = watched(
            scoped(client, namespace),
            listing.config(
                watcher::Config::default()
                    .fields(&format!("metadata.name={CONTROL_CONFIGMAP_NAMESPACE}")),
            ),
            kept::<ConfigMap>,
        );
        let (global, g) = watched(
            Api::namespaced(client.clone(), operator_namespace),
            watcher::Config::default().fields(&format!("metadata.name={CONTROL_CONFIGMAP_GLOBAL}")),
            kept::<ConfigMap>,
        );
        stores.controls = Some(local);
        stores.operator_control = Some(global);
        changes.extend([l.boxed(), g.map(|_| Ok(())).boxed()]);
        Watched {
            stores,
            events: Box::pin(futures::stream::select_all(changes)),
        }
    }

    fn express(
        client: &Client,
        namespace: Option<&str>,
        listing: FirstListing,
    ) -> (Stores, Vec<Changes>) {
        let every = || listing.config(watcher::Config::default());
        // One interner for the watches, as for a read (see `load`).
        let interner = Arc::new(Interner::default());
        let (clusters, c) = watched(scoped(client, namespace), every(), kept::<ExpressCluster>);
        let shared = interner.clone();
        let (backends, b) = watched(scoped(client, namespace), every(), move |node| {
            node_view::<Backend>(node, Some(&shared))
        });
        let shared = interner.clone();
        let (frontends, f) = watched(scoped(client, namespace), every(), move |node| {
            node_view::<Frontend>(node, Some(&shared))
        });
        let (pods, p) = watched(
            scoped(client, namespace),
            listing.config(watcher::Config::default().labels(LABEL_CLUSTER)),
            move |pod: Arc<Pod>| Arc::new(PodView::new(&pod, Some(&interner))),
        );
        let stores = Stores {
            clusters,
            backends,
            frontends,
            pods,
            controls: None,
            operator_control: None,
        };
        (stores, vec![c.boxed(), b.boxed(), f.boxed(), p.boxed()])
    }

    /// Waits until every watch has listed once.
    pub async fn ready(&mut self) -> Result<(), String> {
        let stores = self.stores.clone();
        let ready = async move {
            stores.clusters.wait_until_listed().await;
            stores.backends.wait_until_listed().await;
            stores.frontends.wait_until_listed().await;
            stores.pods.wait_until_listed().await;
            if let Some(controls) = &stores.controls {
                controls.wait_until_listed().await;
            }
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

    /// What the watches hold now (shared with the stores, not copied).
    pub fn objects(&self) -> Objects {
        self.stores.objects()
    }

    /// The stores, to read while something else drives the watches.
    pub fn stores(&self) -> Stores {
        self.stores.clone()
    }
}

impl Stores {
    /// Whether every watch has listed once (without waiting).
    pub fn listed(&self) -> bool {
        self.clusters.listed()
            && self.backends.listed()
            && self.frontends.listed()
            && self.pods.listed()
            && self.controls.as_ref().is_none_or(ViewStore::listed)
    }

    /// What the watches hold now (the views themselves, shared, not copied).
    pub fn objects(&self) -> Objects {
        let mut bad = Vec::new();
        let mut config_maps = Vec::new();
        for store in self.controls.iter().chain(&self.operator_control) {
            config_maps.extend(held(store, &mut bad));
        }
        Objects {
            clusters: held(&self.clusters, &mut bad),
            backends: held(&self.backends, &mut bad),
            frontends: held(&self.frontends, &mut bad),
            pods: held(&self.pods, &mut bad),
            config_maps,
            undecodable: bad,
            ..Objects::default()
        }
    }
}

/// The versions of a [`Stores`]' stores a reader last looked at ([`Stores::changes_since`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seen([u64; 6]);

impl Stores {
    /// The stores' versions now, and what changed since `seen` (None: never looked). A change
    /// of the operator-wide control ConfigMap pauses every namespace: everything changed.
    pub fn changes_since(&self, seen: Option<&Seen>) -> (Seen, Changed) {
        let mut now = Seen::default();
        let mut changed = Changed::Namespaces(Default::default());
        let at = |i: usize| seen.map(|s| s.0[i]);
        let mut look = |i: usize, (version, what): (u64, Changed)| {
            now.0[i] = version;
            changed = std::mem::replace(&mut changed, Changed::Everything).and(what);
        };
        look(0, self.clusters.changes_since(at(0)));
        look(1, self.backends.changes_since(at(1)));
        look(2, self.frontends.changes_since(at(2)));
        look(3, self.pods.changes_since(at(3)));
        if let Some(controls) = &self.controls {
            look(4, controls.changes_since(at(4)));
        }
        if let Some(operator_control) = &self.operator_control {
            let (version, what) = operator_control.changes_since(at(5));
            let what = match what {
                Changed::Namespaces(n) if n.is_empty() => Changed::Namespaces(n),
                _ => Changed::Everything,
            };
            look(5, (version, what));
        }
        (now, changed)
    }

    /// What the watches hold in `namespace`, with the operator-wide control ConfigMap (as
    /// [`crate::show::cluster::namespace_objects`] gives it).
    pub fn objects_in(&self, namespace: &str) -> Objects {
        let mut bad = Vec::new();
        let mut config_maps = Vec::new();
        if let Some(controls) = &self.controls {
            config_maps.extend(held_in(controls, namespace, &mut bad));
        }
        if let Some(operator_control) = &self.operator_control {
            config_maps.extend(held(operator_control, &mut bad));
        }
        Objects {
            clusters: held_in(&self.clusters, namespace, &mut bad),
            backends: held_in(&self.backends, namespace, &mut bad),
            frontends: held_in(&self.frontends, namespace, &mut bad),
            pods: held_in(&self.pods, namespace, &mut bad),
            config_maps,
            undecodable: bad,
            ..Objects::default()
        }
    }
}

/// The views `store` holds in `namespace`; what it could not decode goes to `undecodable`.
fn held_in<V>(
    store: &ViewStore<V>,
    namespace: &str,
    undecodable: &mut Vec<Arc<Undecodable>>,
) -> Vec<Arc<V>> {
    let (views, bad) = store.state_in(namespace);
    undecodable.extend(bad);
    views
}

/// The views `store` holds; what it could not decode goes to `undecodable`.
fn held<V>(store: &ViewStore<V>, undecodable: &mut Vec<Arc<Undecodable>>) -> Vec<Arc<V>> {
    let (views, bad) = store.state();
    undecodable.extend(bad);
    views
}

/// A node, its kind and status, looked up by name in a namespace.
pub async fn find_node(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<(NodeKind, Option<NodeStatus>), Exit> {
    let unreachable = |e: kube::Error| Exit::failure(format!("cannot read node {name}: {e}"));
    if let Some(b) = Api::<Backend>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(unreachable)?
    {
        return Ok((NodeKind::Backend, b.status));
    }
    if let Some(f) = Api::<Frontend>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(unreachable)?
    {
        return Ok((NodeKind::Frontend, f.status));
    }
    Err(Exit::usage(format!(
        "no Backend or Frontend named {name} in namespace {namespace}"
    )))
}

/// Why a verb or the dashboard has nothing to show for `cluster`: the one wording of a cluster
/// that is not there.
pub fn no_cluster(namespace: &str, cluster: &str) -> String {
    format!(
        "no Express cluster {cluster} in namespace {namespace} (no ExpressCluster and no node \
         names it)"
    )
}

/// Whether a read was refused for lack of rights (403, or 401): verbs that read what a user may
/// not be allowed to see (Leases, the operator's objects) then warn and go on.
pub fn forbidden(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 403 || status.code == 401)
}

/// The ExpressCluster governing Express cluster `cluster` (by `spec.clusterName`, else name).
pub async fn express_cluster(
    client: &Client,
    namespace: &str,
    cluster: &str,
) -> Result<ExpressCluster, Exit> {
    let clusters = Api::<ExpressCluster>::namespaced(client.clone(), namespace)
        .list_paged(&ListParams::default())
        .await
        .map_err(|e| {
            Exit::api(
                format!("cannot list ExpressClusters in namespace {namespace}"),
                &e,
            )
        })?;
    clusters
        .items
        .into_iter()
        .find(|c| c.cluster_name() == Some(cluster))
        .ok_or_else(|| {
            Exit::usage(format!(
                "no ExpressCluster for Express cluster {cluster} in namespace {namespace}"
            ))
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use std::time::Duration;

    use kube::Api;
    use kubesim::{Config, FaultRule, KubeSim};

    use super::FirstListing;

    /// Streaming lists are asked for, and taken only where the server answers them: kubesim
    /// does; a server refusing the streaming watch (as one with the feature off) gets pages.
    #[tokio::test]
    async fn streaming_lists_are_taken_only_where_the_server_answers_them() {
        let sim = KubeSim::start(Config::default()).await.expect("start");
        let client = sim.client().expect("client");
        let deadline = Duration::from_secs(5);
        let choose = |streamed| FirstListing::choose(Api::all(client.clone()), streamed, deadline);
        assert_eq!(choose(false).await, FirstListing::Paged, "not asked for");
        assert_eq!(choose(true).await, FirstListing::Streamed);
        sim.faults().add_rule(FaultRule {
            verb: Some("watch".into()),
            resource: Some("pods".into()),
            rate: 1.0,
            status: 400,
            retry_after_seconds: None,
        });
        assert_eq!(choose(true).await, FirstListing::Paged, "refused");
    }
}
