//! Reading a live cluster: the objects of one namespace (or all), listed once or kept current by
//! watches, the views the verbs draw from them. Nothing here writes.

use std::pin::Pin;
use std::sync::Arc;

use express_api::keys::{CONTROL_CONFIGMAP_GLOBAL, CONTROL_CONFIGMAP_NAMESPACE, LABEL_CLUSTER};
use express_api::lenient::{Lenient, Slim, Undecodable};

use super::view_store::{ViewStore, watched_views as watched};
use express_api::objects::WatchedKind;
use express_api::views::{NodeView, PodView, RevisionView};
use express_api::{Backend, ExpressCluster, Frontend, NodeKind, NodeStatus, Objects};
use express_planner::observe::{Inventory, PodOwnership};
use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, ObjectList};
use kube::runtime::watcher;
use kube::{Client, Resource};
use list_pages::{self as pages, ListPaged};

use crate::exit::Exit;

pub(crate) fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
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
pub(crate) async fn list<K>(
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
pub(crate) async fn list_views<K, V>(
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
            node_view,
        )
        .await?,
        frontends: list_views::<Frontend, _>(
            scoped(client, namespace),
            &all,
            "Frontends",
            &mut bad,
            node_view,
        )
        .await?,
        pods: list_views::<Pod, _>(scoped(client, namespace), &ours, "pods", &mut bad, |pod| {
            Arc::new(PodView::from(&*pod))
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
fn node_view<N>(node: Arc<N>) -> Arc<NodeView>
where
    NodeView: From<N> + for<'a> From<&'a N>,
{
    Arc::new(match Arc::try_unwrap(node) {
        Ok(node) => NodeView::from(node),
        Err(shared) => NodeView::from(&*shared),
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

/// How a watch fills its store the first time, and again after a 410: one watch streaming the
/// objects and then their changes (KEP-3157's `sendInitialEvents`, where the server serves it),
/// or a list in pages and then the watch, which every server answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstListing {
    Streamed,
    Paged,
}

/// The pod a probe's streaming watch selects: none, so the answer is the bookmark alone.
const PROBE_POD: &str = "express-streaming-lists-probe";

impl FirstListing {
    /// Paged unless `streamed` is asked for; then streamed if the server answers a streaming
    /// watch of the pods in `namespace` (None: every namespace) with its initial-events-end
    /// bookmark within `deadline`, paged otherwise. A version cannot tell: servers of 1.33 and
    /// later may have the feature off and refuse `sendInitialEvents`, and a watch refused so
    /// would retry for ever.
    ///
    /// Paged is the default because it is cheaper where the dashboard runs: at 10,000 tenants
    /// its first listing costs 2.1 s of CPU paged and 3.8 s streamed, for the same memory (a
    /// page is at most 500 objects; the views are what is held). Streaming spares the API
    /// server the LIST instead (docs/benchmarks.md, issue 63).
    pub async fn choose(
        client: &Client,
        namespace: Option<&str>,
        streamed: bool,
        deadline: std::time::Duration,
    ) -> FirstListing {
        if !streamed {
            return FirstListing::Paged;
        }
        let api = scoped::<Pod>(client, namespace);
        let params = kube::api::WatchParams::streaming_lists()
            .fields(&format!("metadata.name={PROBE_POD}"))
            .timeout(u32::try_from(deadline.as_secs()).unwrap_or(10).max(1));
        let answered = async {
            let events = api.watch(&params, "").await.ok()?;
            let mut events = std::pin::pin!(events);
            match events.next().await {
                Some(Ok(kube::api::WatchEvent::Bookmark(bookmark))) => Some(
                    bookmark
                        .metadata
                        .annotations
                        .contains_key("k8s.io/initial-events-end"),
                ),
                _ => None,
            }
        };
        match tokio::time::timeout(deadline, answered).await {
            Ok(Some(true)) => FirstListing::Streamed,
            _ => FirstListing::Paged,
        }
    }

    fn config(self, config: watcher::Config) -> watcher::Config {
        match self {
            FirstListing::Streamed => config.streaming_lists(),
            FirstListing::Paged => config.page_size(pages::PAGE_SIZE),
        }
    }
}

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
        let (clusters, c) = watched(scoped(client, namespace), every(), kept::<ExpressCluster>);
        let (backends, b) = watched(scoped(client, namespace), every(), node_view::<Backend>);
        let (frontends, f) = watched(scoped(client, namespace), every(), node_view::<Frontend>);
        let (pods, p) = watched(
            scoped(client, namespace),
            listing.config(watcher::Config::default().labels(LABEL_CLUSTER)),
            |pod: Arc<Pod>| Arc::new(PodView::from(&*pod)),
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

    use kubesim::{Config, FaultRule, KubeSim};

    use super::FirstListing;

    /// Streaming lists are asked for, and taken only where the server answers them: kubesim
    /// does; a server refusing the streaming watch (as one with the feature off) gets pages.
    #[tokio::test]
    async fn streaming_lists_are_taken_only_where_the_server_answers_them() {
        let sim = KubeSim::start(Config::default()).await.expect("start");
        let client = sim.client().expect("client");
        let deadline = Duration::from_secs(5);
        let choose = |streamed| FirstListing::choose(&client, None, streamed, deadline);
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
