//! A watch's objects kept as their views, not as objects (kube-state-metrics' way: a store of
//! what is read, not of what was sent): each object a watch brings becomes its view at once
//! and is let go, so a dashboard over a DC holds the views of its tenants, and a redraw reads
//! views that exist already instead of converting the store again.
//!
//! It follows kube-runtime's watcher events as its reflector store does: a (re)list's objects
//! are gathered aside (`Init` … `InitApply` … `InitDone`) and replace the store at once, so a
//! reader never sees half a list; `Apply` and `Delete` change one entry.

use std::collections::HashMap;
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
    entries: HashMap<Key, Entry<V>>,
    /// A list under way: its entries so far.
    listing: Option<HashMap<Key, Entry<V>>>,
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
    /// Every view held, and why each object that is not one could not be decoded.
    pub fn state(&self) -> (Vec<Arc<V>>, Vec<Arc<Undecodable>>) {
        let held = self
            .held
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut views = Vec::with_capacity(held.entries.len());
        let mut undecodable = Vec::new();
        for entry in held.entries.values() {
            match entry {
                Entry::View(view) => views.push(view.clone()),
                Entry::Undecodable(why) => undecodable.push(why.clone()),
            }
        }
        (views, undecodable)
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
                held.entries.insert(key, entry);
            }
            Change::Delete(key) => {
                held.entries.remove(&key);
            }
            Change::Init => held.listing = Some(HashMap::new()),
            Change::InitApply((key, entry)) => {
                held.listing
                    .get_or_insert_with(HashMap::new)
                    .insert(key, entry);
            }
            Change::InitDone => {
                if let Some(listed) = held.listing.take() {
                    held.entries = listed;
                }
                drop(held);
                self.listed.send_replace(true);
            }
        }
    }
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
    let held = Arc::new(RwLock::new(Held {
        entries: HashMap::new(),
        listing: None,
    }));
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
