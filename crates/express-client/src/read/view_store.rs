//! A watch's objects kept as their views, not as objects (kube-state-metrics' way: a store of
//! what is read, not of what was sent): each object a watch brings becomes its view at once
//! and is let go, so a dashboard over a DC holds the views of its tenants, and a redraw reads
//! views that exist already instead of converting the store again.
//!
//! It follows kube-runtime's watcher events as its reflector store does: a (re)list's objects
//! are gathered aside (`Init` … `InitApply` … `InitDone`) and replace the store at once, so a
//! reader never sees half a list; `Apply` and `Delete` change one entry.
//!
//! It also says what changed since a reader last looked ([`ViewStore::changes_since`]): the
//! namespaces touched, or everything after a relist. The dashboard redraws a DC's rows of
//! those namespaces only, so a change of one tenant costs that tenant, not the DC.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use express_api::lenient::{Lenient, Undecodable};
use express_api::objects::WatchedKind;
use futures::{Stream, StreamExt};
use kube::Resource;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

/// What an entry is: the view of an object, or why the object could not be decoded.
enum Entry<V> {
    View(Arc<V>),
    Undecodable(Arc<Undecodable>),
}

impl<V> Clone for Entry<V> {
    fn clone(&self) -> Self {
        match self {
            Entry::View(view) => Entry::View(view.clone()),
            Entry::Undecodable(why) => Entry::Undecodable(why.clone()),
        }
    }
}

/// An object's place: its namespace and name.
type Key = (Option<String>, String);

struct Held<V> {
    /// Ordered, so that a namespace's entries are one range.
    entries: BTreeMap<Key, Entry<V>>,
    /// A list under way: its entries so far.
    listing: Option<BTreeMap<Key, Entry<V>>>,
    /// Bumped by each change taken.
    version: u64,
    /// The version of each namespace's last change since the last relist.
    touched: HashMap<Option<String>, u64>,
    /// The version of the last relist, after which anything may differ.
    relisted: u64,
}

/// What changed in a store, or in several, since a reader last looked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Changed {
    /// A relist (or a first look): anything may differ.
    Everything,
    /// The namespaces whose objects changed (none: nothing did).
    Namespaces(BTreeSet<Option<String>>),
}

impl Changed {
    /// Both changes: everything if either is, else the namespaces of both.
    pub fn and(self, other: Changed) -> Changed {
        match (self, other) {
            (Changed::Namespaces(mut a), Changed::Namespaces(b)) => {
                a.extend(b);
                Changed::Namespaces(a)
            }
            _ => Changed::Everything,
        }
    }
}

/// The views of one watch's objects. Cheap to clone; readable while the watch runs.
pub struct ViewStore<V> {
    held: Arc<RwLock<Held<V>>>,
    listed: watch::Receiver<bool>,
}

impl<V> Clone for ViewStore<V> {
    fn clone(&self) -> Self {
        ViewStore {
            held: self.held.clone(),
            listed: self.listed.clone(),
        }
    }
}

impl<V> ViewStore<V> {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Held<V>> {
        self.held
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every view held, and why each object that is not one could not be decoded.
    pub fn state(&self) -> (Vec<Arc<V>>, Vec<Arc<Undecodable>>) {
        let held = self.read();
        split(held.entries.len(), held.entries.values())
    }

    /// The views held in `namespace`, and why each object there that is not one could not
    /// be decoded.
    pub fn state_in(&self, namespace: &str) -> (Vec<Arc<V>>, Vec<Arc<Undecodable>>) {
        let held = self.read();
        let from: Key = (Some(namespace.to_owned()), String::new());
        let entries = held
            .entries
            .range(from..)
            .take_while(|((at, _), _)| at.as_deref() == Some(namespace))
            .map(|(_, entry)| entry);
        split(0, entries)
    }

    /// The store's version now, and what changed since version `seen` (None: never looked,
    /// so everything). Read the version before the views: what is read then is at least as
    /// new, and a change that lands between is named again by the next call.
    pub fn changes_since(&self, seen: Option<u64>) -> (u64, Changed) {
        let held = self.read();
        let changed = match seen {
            Some(seen) if seen >= held.relisted && seen <= held.version => Changed::Namespaces(
                held.touched
                    .iter()
                    .filter(|(_, at)| **at > seen)
                    .map(|(namespace, _)| namespace.clone())
                    .collect(),
            ),
            _ => Changed::Everything,
        };
        (held.version, changed)
    }

    /// Whether the watch has listed once.
    pub fn listed(&self) -> bool {
        *self.listed.borrow()
    }

    /// Resolves once the watch has listed once (or its driver is gone).
    pub async fn wait_until_listed(&self) {
        let mut listed = self.listed.clone();
        let _ = listed.wait_for(|listed| *listed).await;
    }
}

/// A watch's event, its object already a view.
enum Change<V> {
    Apply((Key, Entry<V>)),
    Delete(Key),
    Init,
    InitApply((Key, Entry<V>)),
    InitDone,
}

fn key_of<K: Resource>(object: &K) -> Key {
    let meta = object.meta();
    (
        meta.namespace.clone(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// The side of a [`ViewStore`] that a watch's events change.
struct Writer<V> {
    held: Arc<RwLock<Held<V>>>,
    listed: watch::Sender<bool>,
}

impl<V> Writer<V> {
    fn apply<K: WatchedKind>(
        &self,
        event: watcher::Event<Lenient<K>>,
        entry: impl Fn(Lenient<K>) -> (Key, Entry<V>),
    ) {
        // The view is made before the lock is taken: readers wait for no conversion.
        let change = match event {
            watcher::Event::Apply(object) => Change::Apply(entry(object)),
            watcher::Event::Delete(object) => Change::Delete(key_of(&object)),
            watcher::Event::Init => Change::Init,
            watcher::Event::InitApply(object) => Change::InitApply(entry(object)),
            watcher::Event::InitDone => Change::InitDone,
        };
        let mut held = self
            .held
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match change {
            Change::Apply((key, entry)) => {
                held.touch(&key);
                held.entries.insert(key, entry);
            }
            Change::Delete(key) => {
                held.touch(&key);
                held.entries.remove(&key);
            }
            Change::Init => held.listing = Some(BTreeMap::new()),
            Change::InitApply((key, entry)) => {
                held.listing
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key, entry);
            }
            Change::InitDone => {
                if let Some(listed) = held.listing.take() {
                    held.entries = listed;
                }
                held.version += 1;
                held.relisted = held.version;
                held.touched.clear();
                drop(held);
                self.listed.send_replace(true);
            }
        }
    }
}

impl<V> Held<V> {
    fn empty() -> Held<V> {
        Held {
            entries: BTreeMap::new(),
            listing: None,
            version: 0,
            touched: HashMap::new(),
            relisted: 0,
        }
    }

    fn touch(&mut self, key: &Key) {
        self.version += 1;
        let version = self.version;
        match self.touched.get_mut(&key.0) {
            Some(at) => *at = version,
            None => {
                self.touched.insert(key.0.clone(), version);
            }
        }
    }
}

/// The views among `entries`, and the objects that are not one.
fn split<'a, V: 'a>(
    capacity: usize,
    entries: impl Iterator<Item = &'a Entry<V>>,
) -> (Vec<Arc<V>>, Vec<Arc<Undecodable>>) {
    let mut views = Vec::with_capacity(capacity);
    let mut undecodable = Vec::new();
    for entry in entries {
        match entry {
            Entry::View(view) => views.push(view.clone()),
            Entry::Undecodable(why) => undecodable.push(why.clone()),
        }
    }
    (views, undecodable)
}

/// Watches `api` under `config`, keeping each object as `view` makes it. The stream drives the
/// watch (with kube-runtime's backoff) and yields once per event, or why the watch failed.
pub fn watched_views<K, V>(
    api: Api<Lenient<K>>,
    config: watcher::Config,
    view: impl Fn(Arc<K>) -> Arc<V> + Send + 'static,
) -> (ViewStore<V>, impl Stream<Item = Result<(), String>>)
where
    K: WatchedKind,
    V: Send + Sync + 'static,
{
    let held = Arc::new(RwLock::new(Held::empty()));
    let (listed_tx, listed_rx) = watch::channel(false);
    let writer = Writer {
        held: held.clone(),
        listed: listed_tx,
    };
    let entry = move |object: Lenient<K>| -> (Key, Entry<V>) {
        let key = key_of(&object);
        let entry = match object.into_decoded() {
            Ok(object) => Entry::View(view(object)),
            Err(why) => Entry::Undecodable(why),
        };
        (key, entry)
    };
    let stream = watcher(api, config)
        .default_backoff()
        .map(move |event| match event {
            Ok(event) => {
                writer.apply(event, &entry);
                Ok(())
            }
            Err(e) => Err(format!("watch failed: {e}")),
        });
    (
        ViewStore {
            held,
            listed: listed_rx,
        },
        stream,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::time::{Duration, Instant};

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{DeleteParams, ObjectMeta, PostParams};
    use kubesim::{Config, KubeSim};

    use super::*;

    fn config_map(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    async fn eventually(what: &str, probe: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !probe() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn in_namespace(namespace: &str, name: &str) -> Lenient<ConfigMap> {
        let mut cm = config_map(name);
        cm.metadata.namespace = Some(namespace.into());
        Lenient::new(cm)
    }

    /// A reader learns the namespaces changed since it looked, and everything after a relist;
    /// a namespace's views are read alone.
    #[test]
    fn a_store_names_the_namespaces_changed_since_a_reader_looked() {
        let held = Arc::new(RwLock::new(Held::empty()));
        let (listed, listed_rx) = watch::channel(false);
        let writer = Writer {
            held: held.clone(),
            listed,
        };
        let store = ViewStore {
            held,
            listed: listed_rx,
        };
        let entry = |object: Lenient<ConfigMap>| {
            let key = key_of(&object);
            let name = key.1.clone();
            (key, Entry::View(Arc::new(name)))
        };
        let changed = |names: &[&str]| {
            Changed::Namespaces(names.iter().map(|n| Some((*n).to_owned())).collect())
        };
        let (never, everything) = store.changes_since(None);
        assert_eq!(everything, Changed::Everything);
        writer.apply(watcher::Event::Init, entry);
        for (namespace, name) in [("a", "one"), ("a", "two"), ("b", "one"), ("ab", "x")] {
            writer.apply(
                watcher::Event::InitApply(in_namespace(namespace, name)),
                entry,
            );
        }
        writer.apply(watcher::Event::InitDone, entry);
        assert_eq!(store.changes_since(Some(never)).1, Changed::Everything);
        let (listed_at, nothing) = store.changes_since(Some(store.changes_since(None).0));
        assert_eq!(nothing, changed(&[]));
        writer.apply(watcher::Event::Apply(in_namespace("b", "two")), entry);
        writer.apply(watcher::Event::Delete(in_namespace("a", "one")), entry);
        let (now, since) = store.changes_since(Some(listed_at));
        assert_eq!(since, changed(&["a", "b"]));
        assert_eq!(store.changes_since(Some(now)).1, changed(&[]));
        let names = |namespace| {
            let mut names: Vec<String> = store
                .state_in(namespace)
                .0
                .iter()
                .map(|v| v.to_string())
                .collect();
            names.sort();
            names
        };
        assert_eq!(names("a"), ["two"]);
        assert_eq!(names("b"), ["one", "two"]);
        assert_eq!(names("ab"), ["x"]);
        assert!(names("c").is_empty());
        writer.apply(watcher::Event::Init, entry);
        writer.apply(watcher::Event::InitDone, entry);
        assert_eq!(store.changes_since(Some(now)).1, Changed::Everything);
        assert_eq!(store.state().0.len(), 0, "a relist replaces the store");
        assert_eq!(changed(&["a"]).and(changed(&["b"])), changed(&["a", "b"]));
        assert_eq!(
            changed(&["a"]).and(Changed::Everything),
            Changed::Everything
        );
    }

    /// Against kubesim through kube-rs, both ways a watch fills: the store holds each object's
    /// view, follows changes and deletes, and goes on after the server drops every watch.
    #[tokio::test]
    async fn a_view_store_follows_a_watch_through_a_relist_either_way_it_fills() {
        for streamed in [false, true] {
            let sim = KubeSim::start(Config::default()).await.expect("start");
            let client = sim.client().expect("client");
            let plain: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
            for name in ["a", "bb", "ccc"] {
                plain
                    .create(&PostParams::default(), &config_map(name))
                    .await
                    .unwrap();
            }
            let config = if streamed {
                watcher::Config::default().streaming_lists()
            } else {
                watcher::Config::default().page_size(2)
            };
            let (store, stream) = watched_views(
                Api::<Lenient<ConfigMap>>::namespaced(client.clone(), "default"),
                config,
                |cm: Arc<ConfigMap>| Arc::new(cm.metadata.name.clone().unwrap_or_default()),
            );
            tokio::spawn(stream.for_each(|_| async {}));
            tokio::time::timeout(Duration::from_secs(10), store.wait_until_listed())
                .await
                .expect("listed in time");
            let names = || {
                let (views, bad) = store.state();
                assert!(bad.is_empty());
                let mut names: Vec<String> = views.iter().map(|v| v.to_string()).collect();
                names.sort();
                names
            };
            assert_eq!(names(), ["a", "bb", "ccc"], "streamed: {streamed}");
            plain
                .create(&PostParams::default(), &config_map("dddd"))
                .await
                .unwrap();
            plain.delete("a", &DeleteParams::default()).await.unwrap();
            eventually("a create and a delete", || names() == ["bb", "ccc", "dddd"]).await;
            sim.faults().close_watches();
            plain.delete("bb", &DeleteParams::default()).await.unwrap();
            eventually("the same set after the watch dropped", || {
                names() == ["ccc", "dddd"]
            })
            .await;
            assert!(store.listed());
        }
    }
}
