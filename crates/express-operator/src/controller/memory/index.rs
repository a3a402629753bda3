//! One kind's cache in one watch scope: the only copy the operator keeps of each object (its
//! view, or the decoded object where the operator reads it whole), keyed once by namespace and
//! name, with how far it has caught up with the API server; and [`drive`], which applies a
//! watch's events to it. The driver is a plain function over any event stream, so relists,
//! deletions and undecodable objects are tested by feeding it events, without a server.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use express_api::lenient::{Lenient, Undecodable};
use express_api::objects::WatchedKind;
use express_api::views::Interner;
use futures::{Stream, StreamExt};
use kube::Resource;
use kube::runtime::watcher;
use tokio::sync::Notify;
use tracing::warn;

use crate::long_lived::long_lived;

/// What is kept of one object: its view, or why it could not be decoded.
#[derive(Debug)]
pub(crate) enum Entry<V> {
    View(Arc<V>),
    Undecodable(Arc<Undecodable>),
}

impl<V> Clone for Entry<V> {
    fn clone(&self) -> Self {
        match self {
            Entry::View(view) => Entry::View(view.clone()),
            Entry::Undecodable(bad) => Entry::Undecodable(bad.clone()),
        }
    }
}

/// The objects by namespace then name, and their counts, kept as they change (a gauge reads
/// them after every event).
struct Objects<V> {
    by_namespace: HashMap<Arc<str>, Names<V>>,
    len: usize,
    undecodable: usize,
}

impl<V> Objects<V> {
    fn count(&mut self, slot: Option<&Slot<V>>, sign: isize) {
        if let Some(slot) = slot {
            self.len = self.len.saturating_add_signed(sign);
            if matches!(slot.entry, Entry::Undecodable(_)) {
                self.undecodable = self.undecodable.saturating_add_signed(sign);
            }
        }
    }
}

struct Slot<V> {
    /// Its resourceVersion as a number (0 when it is not one).
    version: u64,
    /// The relist that last listed it, or the one before the watch event that last brought
    /// it: a relist that completes without listing it removes it.
    relist: u64,
    entry: Entry<V>,
}

/// One namespace's objects of a kind, by name. A vector sorted by name while the namespace
/// holds up to [`SORTED_UP_TO`] objects (a tenant's few dozen, a settled tenant's 80
/// ControllerRevisions the most), a `BTreeMap` beyond: the map's nodes hold eleven entries and
/// a listing in name order leaves them about half full (some 110 bytes an object, against 48
/// in the vector), while in a namespace of thousands of objects (many tenants in one) moving
/// the entries after an insertion point would cost more than following a tree. The vector
/// grows by an eighth, not by doubling, so a tenant's one more revision does not double its
/// revisions' vector.
enum Names<V> {
    Sorted(Vec<(Box<str>, Slot<V>)>),
    Tree(BTreeMap<Box<str>, Slot<V>>),
}

/// Where `name` is in a sorted namespace, or where it would go.
fn position<V>(sorted: &[(Box<str>, Slot<V>)], name: &str) -> Result<usize, usize> {
    sorted.binary_search_by(|(held, _)| (**held).cmp(name))
}

/// The most objects a namespace keeps in a sorted vector.
const SORTED_UP_TO: usize = 4096;

impl<V> Names<V> {
    fn new() -> Names<V> {
        Names::Sorted(Vec::new())
    }

    /// Holds `slot` as `name`'s; returns the one it replaces.
    fn insert(&mut self, name: &str, slot: Slot<V>) -> Option<Slot<V>> {
        let sorted = match self {
            Names::Tree(tree) => return tree.insert(name.into(), slot),
            Names::Sorted(sorted) => sorted,
        };
        match position(sorted, name) {
            Ok(at) => Some(std::mem::replace(&mut sorted[at].1, slot)),
            Err(_) if sorted.len() >= SORTED_UP_TO => {
                let mut tree: BTreeMap<_, _> = std::mem::take(sorted).into_iter().collect();
                tree.insert(name.into(), slot);
                *self = Names::Tree(tree);
                None
            }
            Err(at) => {
                if sorted.len() == sorted.capacity() {
                    sorted.reserve_exact((sorted.len() / 8).max(2));
                }
                sorted.insert(at, (name.into(), slot));
                None
            }
        }
    }

    fn remove(&mut self, name: &str) -> Option<Slot<V>> {
        match self {
            Names::Tree(tree) => tree.remove(name),
            Names::Sorted(sorted) => {
                let at = position(sorted, name).ok()?;
                let (_, removed) = sorted.remove(at);
                if sorted.capacity() > 2 * sorted.len() + 8 {
                    sorted.shrink_to(sorted.len() + sorted.len() / 8);
                }
                Some(removed)
            }
        }
    }

    /// Keeps the slots `keep` accepts, and gives back the headroom a listing grew.
    fn retain(&mut self, keep: impl Fn(&Slot<V>) -> bool) {
        match self {
            Names::Tree(tree) => tree.retain(|_, slot| keep(slot)),
            Names::Sorted(sorted) => {
                sorted.retain(|(_, slot)| keep(slot));
                sorted.shrink_to_fit();
            }
        }
    }

    /// The same names and slots, `copy` applied to each slot, in fresh allocations.
    fn copied(self, copy: impl Fn(Slot<V>) -> Slot<V>) -> Names<V> {
        match self {
            Names::Tree(tree) => Names::Tree(
                tree.into_iter()
                    .map(|(name, slot)| (Box::from(&*name), copy(slot)))
                    .collect(),
            ),
            Names::Sorted(sorted) => Names::Sorted(
                sorted
                    .into_iter()
                    .map(|(name, slot)| (Box::from(&*name), copy(slot)))
                    .collect(),
            ),
        }
    }

    fn iter(&self) -> Box<dyn Iterator<Item = (&str, &Slot<V>)> + '_> {
        match self {
            Names::Tree(tree) => Box::new(tree.iter().map(|(name, slot)| (&**name, slot))),
            Names::Sorted(sorted) => Box::new(sorted.iter().map(|(name, slot)| (&**name, slot))),
        }
    }

    fn values(&self) -> impl Iterator<Item = &Slot<V>> {
        self.iter().map(|(_, slot)| slot)
    }

    fn is_empty(&self) -> bool {
        match self {
            Names::Tree(tree) => tree.is_empty(),
            Names::Sorted(sorted) => sorted.is_empty(),
        }
    }
}

/// How far an index has caught up with the API server: what tells a write of this operator
/// the index has not shown yet from an object that is gone since.
#[derive(Default)]
struct Progress {
    /// Every change up to this resourceVersion is in the index: the highest version a watch
    /// event brought or a relist listed.
    version: AtomicU64,
    /// Relists begun (`Init`: the list request goes out after it).
    relists_begun: AtomicU64,
    /// The number of the last relist completed (`InitDone`: the index is what it listed).
    relists_completed: AtomicU64,
}

/// Where an index stood at one moment (see [`Progress`]). Read before the objects: the
/// objects read after it are at least this new.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Synced {
    pub(crate) version: u64,
    pub(crate) relists_completed: u64,
}

/// One kind's objects of one watch scope, by namespace then name.
pub(crate) struct KindIndex<V> {
    objects: RwLock<Objects<V>>,
    progress: Progress,
    ready: Notify,
    /// Namespaces are shared with the views built through it.
    pub(crate) interner: Arc<Interner>,
}

impl<V> KindIndex<V> {
    pub(crate) fn new(interner: Arc<Interner>) -> KindIndex<V> {
        KindIndex {
            objects: RwLock::new(Objects {
                by_namespace: HashMap::new(),
                len: 0,
                undecodable: 0,
            }),
            progress: Progress::default(),
            ready: Notify::new(),
            interner,
        }
    }

    /// The entries of a namespace (None: of every namespace), sharing what the index holds.
    pub(crate) fn entries(&self, namespace: Option<&str>) -> Vec<Entry<V>> {
        let Ok(objects) = self.objects.read() else {
            return Vec::new();
        };
        let slots = |names: &Names<V>| names.values().map(|s| s.entry.clone()).collect::<Vec<_>>();
        match namespace {
            Some(namespace) => objects
                .by_namespace
                .get(namespace)
                .map(slots)
                .unwrap_or_default(),
            None => objects.by_namespace.values().flat_map(slots).collect(),
        }
    }

    /// Name to resourceVersion of every object of a namespace, decodable or not.
    pub(crate) fn versions(&self, namespace: &str) -> HashMap<String, u64> {
        let Ok(objects) = self.objects.read() else {
            return HashMap::new();
        };
        objects
            .by_namespace
            .get(namespace)
            .into_iter()
            .flat_map(Names::iter)
            .map(|(name, slot)| (name.to_string(), slot.version))
            .collect()
    }

    /// How many objects it holds, and how many of them are undecodable.
    pub(crate) fn counts(&self) -> (usize, usize) {
        self.objects
            .read()
            .map(|o| (o.len, o.undecodable))
            .unwrap_or_default()
    }

    pub(crate) fn synced(&self) -> Synced {
        Synced {
            version: self.progress.version.load(Ordering::Acquire),
            relists_completed: self.progress.relists_completed.load(Ordering::Acquire),
        }
    }

    pub(crate) fn relists_begun(&self) -> u64 {
        self.progress.relists_begun.load(Ordering::Acquire)
    }

    /// Returns once a first listing is complete.
    pub(crate) async fn wait_until_ready(&self) {
        loop {
            // Created before the check: a completion in between still wakes it.
            let completed = self.ready.notified();
            if self.progress.relists_completed.load(Ordering::Acquire) > 0 {
                return;
            }
            completed.await;
        }
    }

    /// Moves what it holds into fresh allocations, one namespace at a time: a copy of each
    /// view, its name and its namespace's map, the old ones dropped as their copies are made
    /// (see [`super::caches::Caches::repack`]). Readers holding the old `Arc`s keep them.
    pub(crate) fn repack(&self)
    where
        V: Clone,
    {
        let namespaces: Vec<Arc<str>> = match self.objects.read() {
            Ok(objects) => objects.by_namespace.keys().cloned().collect(),
            Err(_) => return,
        };
        for namespace in namespaces {
            let Ok(mut objects) = self.objects.write() else {
                return;
            };
            if let Some(names) = objects.by_namespace.get_mut(&namespace) {
                *names = std::mem::replace(names, Names::new()).copied(|slot| {
                    let entry = match slot.entry {
                        Entry::View(view) => Entry::View(Arc::new(V::clone(&view))),
                        undecodable => undecodable,
                    };
                    Slot { entry, ..slot }
                });
            }
        }
    }

    fn apply(&self, namespace: &str, name: &str, version: u64, entry: Entry<V>) {
        let Ok(mut objects) = self.objects.write() else {
            return;
        };
        let relist = self.progress.relists_begun.load(Ordering::Acquire);
        let slot = Slot {
            version,
            relist,
            entry,
        };
        objects.count(Some(&slot), 1);
        let replaced = match objects.by_namespace.get_mut(namespace) {
            Some(names) => names.insert(name, slot),
            None => {
                let namespace = self.interner.intern(namespace);
                let mut names = Names::new();
                names.insert(name, slot);
                objects.by_namespace.insert(namespace, names);
                None
            }
        };
        objects.count(replaced.as_ref(), -1);
    }

    fn delete(&self, namespace: &str, name: &str) {
        let Ok(mut objects) = self.objects.write() else {
            return;
        };
        let Some(names) = objects.by_namespace.get_mut(namespace) else {
            return;
        };
        let removed = names.remove(name);
        if names.is_empty() {
            objects.by_namespace.remove(namespace);
        }
        objects.count(removed.as_ref(), -1);
    }

    fn begin_relist(&self) -> u64 {
        self.progress.relists_begun.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Relist `relist` is complete: what it did not list is gone. Objects were replaced in
    /// place as they were listed, so a relist never holds two copies of the kind.
    fn finish_relist(&self, relist: u64, listed_up_to: u64) {
        if let Ok(mut objects) = self.objects.write() {
            let objects = &mut *objects;
            long_lived(|| {
                objects.by_namespace.retain(|_, names| {
                    names.retain(|slot| slot.relist >= relist);
                    !names.is_empty()
                });
                // Maps keep their capacity: give back what a shrunken fleet no longer needs.
                objects.by_namespace.shrink_to_fit();
            });
            let slots = || objects.by_namespace.values().flat_map(Names::values);
            let undecodable = |s: &&Slot<V>| matches!(s.entry, Entry::Undecodable(_));
            let (len, bad) = (slots().count(), slots().filter(undecodable).count());
            objects.len = len;
            objects.undecodable = bad;
        }
        self.progress
            .version
            .fetch_max(listed_up_to, Ordering::AcqRel);
        self.progress
            .relists_completed
            .fetch_max(relist, Ordering::AcqRel);
        self.ready.notify_waiters();
    }
}

/// One object the driver applied: what the caller maps to the tenants it concerns.
pub(crate) struct Applied<'a, V> {
    pub(crate) entry: &'a Entry<V>,
    /// Listed, added or changed; false: deleted.
    pub(crate) present: bool,
}

/// Applies a watch's events to `index`, building each object's view with `view`, and tells
/// `applied` of every object after the index holds it (a reader woken by it finds it).
pub(crate) async fn drive<K, V>(
    events: impl Stream<Item = Result<watcher::Event<Lenient<K>>, watcher::Error>>,
    index: &KindIndex<V>,
    view: impl Fn(&Arc<K>, &Interner) -> Arc<V>,
    mut applied: impl FnMut(Applied<'_, V>),
) where
    K: WatchedKind,
{
    // The relist under way (its number) and the highest version it listed so far.
    let (mut relist, mut listed) = (0, 0);
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let (object, present, listing) = match event {
            Ok(watcher::Event::Init) => {
                relist = index.begin_relist();
                listed = 0;
                continue;
            }
            Ok(watcher::Event::InitDone) => {
                index.finish_relist(relist, listed);
                continue;
            }
            Ok(watcher::Event::InitApply(object)) => (object, true, true),
            Ok(watcher::Event::Apply(object)) => (object, true, false),
            Ok(watcher::Event::Delete(object)) => (object, false, false),
            Err(err) => {
                warn!(error = %err, kind = %K::kind(&()), "watch error; the watcher retries with backoff");
                continue;
            }
        };
        let meta = object.meta();
        let (Some(namespace), Some(name)) = (meta.namespace.as_deref(), meta.name.as_deref())
        else {
            continue;
        };
        let version = meta
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        // The view and its place in the index outlive the burst that delivered the object.
        let entry = long_lived(|| {
            let entry = match (object.decoded(), object.undecodable()) {
                (Some(decoded), _) => Entry::View(view(decoded, &index.interner)),
                (None, Some(bad)) => Entry::Undecodable(bad.clone()),
                (None, None) => return None,
            };
            if present {
                index.apply(namespace, name, version, entry.clone());
            } else {
                index.delete(namespace, name);
            }
            Some(entry)
        });
        let Some(entry) = entry else {
            continue;
        };
        if listing {
            listed = listed.max(version);
        } else {
            // After the index: a reader who sees the progress finds the object.
            index.progress.version.fetch_max(version, Ordering::AcqRel);
        }
        applied(Applied {
            entry: &entry,
            present,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use express_api::views::PodView;
    use k8s_openapi::api::core::v1::Pod;

    fn pod(namespace: &str, name: &str, version: u64) -> Lenient<Pod> {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": namespace, "name": name, "uid": format!("{name}-uid"),
                         "resourceVersion": version.to_string(),
                         "labels": {"express.dev/cluster": "shop"}},
        }))
        .expect("a pod")
    }

    fn broken(namespace: &str, name: &str, version: u64) -> Lenient<Pod> {
        let bad: Lenient<Pod> = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": namespace, "name": name,
                         "resourceVersion": version.to_string(),
                         "labels": {"express.dev/cluster": "shop"}},
            "spec": {"containers": "not a list"},
        }))
        .expect("kept aside, not refused");
        assert!(bad.undecodable().is_some());
        bad
    }

    type Event = Result<watcher::Event<Lenient<Pod>>, watcher::Error>;

    /// Feeds `events` to a pod index; returns what the driver reported, in order.
    async fn feed(index: &KindIndex<PodView>, events: Vec<Event>) -> Vec<(String, bool)> {
        let mut seen = Vec::new();
        drive(
            futures::stream::iter(events),
            index,
            |pod: &Arc<Pod>, interner| Arc::new(PodView::new(pod, Some(interner))),
            |applied| match applied.entry {
                Entry::View(view) => seen.push((view.name.to_string(), applied.present)),
                Entry::Undecodable(bad) => {
                    seen.push((format!("undecodable {}", bad.name), applied.present))
                }
            },
        )
        .await;
        seen
    }

    fn names(index: &KindIndex<PodView>, namespace: Option<&str>) -> Vec<String> {
        let mut names: Vec<String> = index
            .entries(namespace)
            .into_iter()
            .map(|e| match e {
                Entry::View(view) => view.name.to_string(),
                Entry::Undecodable(bad) => format!("undecodable {}", bad.name),
            })
            .collect();
        names.sort();
        names
    }

    fn index() -> KindIndex<PodView> {
        KindIndex::new(Arc::new(Interner::default()))
    }

    #[tokio::test]
    async fn a_listing_then_watch_events_are_applied_in_order() {
        use watcher::Event::*;
        let index = index();
        let seen = feed(
            &index,
            vec![
                Ok(Init),
                Ok(InitApply(pod("a", "shop-be", 5))),
                Ok(InitApply(pod("b", "shop-be", 7))),
                Ok(InitDone),
                Ok(Apply(pod("a", "shop-fe1", 9))),
                Ok(Delete(pod("b", "shop-be", 10))),
            ],
        )
        .await;
        assert_eq!(
            seen,
            [
                ("shop-be".into(), true),
                ("shop-be".into(), true),
                ("shop-fe1".into(), true),
                ("shop-be".into(), false),
            ]
        );
        assert_eq!(names(&index, Some("a")), ["shop-be", "shop-fe1"]);
        assert!(names(&index, Some("b")).is_empty());
        assert_eq!(index.versions("a").get("shop-fe1"), Some(&9));
        assert_eq!(
            index.synced(),
            Synced {
                version: 10,
                relists_completed: 1
            }
        );
        index.wait_until_ready().await;
    }

    /// kubert's `namespaced_restart`, ours: a relist after a watch cut removes what it did not
    /// list and replaces what it did, and the namespaces' shared names are the interner's.
    #[tokio::test]
    async fn a_relist_removes_what_it_did_not_list() {
        use watcher::Event::*;
        let index = index();
        feed(
            &index,
            vec![
                Ok(Init),
                Ok(InitApply(pod("a", "shop-be", 5))),
                Ok(InitApply(pod("a", "shop-fe1", 6))),
                Ok(InitApply(pod("b", "shop-be", 7))),
                Ok(InitDone),
                Ok(Apply(pod("c", "shop-be", 8))),
            ],
        )
        .await;
        assert_eq!(index.relists_begun(), 1);
        let seen = feed(
            &index,
            vec![
                Ok(Init),
                Ok(InitApply(pod("a", "shop-fe1", 12))),
                Ok(InitApply(pod("d", "shop-be", 11))),
                Ok(InitDone),
            ],
        )
        .await;
        assert_eq!(seen.len(), 2, "each listed object reported once");
        assert_eq!(names(&index, None), ["shop-be", "shop-fe1"]);
        assert_eq!(names(&index, Some("a")), ["shop-fe1"]);
        assert!(names(&index, Some("b")).is_empty() && names(&index, Some("c")).is_empty());
        assert_eq!(index.versions("a").get("shop-fe1"), Some(&12));
        assert_eq!(
            index.synced(),
            Synced {
                version: 12,
                relists_completed: 2
            }
        );
        // The views share the index's namespace string.
        let Entry::View(view) = &index.entries(Some("d"))[0] else {
            panic!("decoded");
        };
        let shared = view.namespace.clone().expect("namespaced");
        assert!(Arc::ptr_eq(&shared, &index.interner.intern("d")));
    }

    #[tokio::test]
    async fn an_undecodable_object_is_kept_aside_and_replaced_when_fixed() {
        use watcher::Event::*;
        let index = index();
        let seen = feed(
            &index,
            vec![
                Ok(Init),
                Ok(InitApply(broken("a", "shop-fe1", 3))),
                Ok(InitDone),
            ],
        )
        .await;
        assert_eq!(seen, [("undecodable shop-fe1".into(), true)]);
        assert_eq!(index.counts(), (1, 1));
        feed(&index, vec![Ok(Apply(pod("a", "shop-fe1", 4)))]).await;
        assert_eq!(index.counts(), (1, 0));
        assert_eq!(names(&index, Some("a")), ["shop-fe1"]);
    }

    #[test]
    fn a_namespace_keeps_its_objects_sorted_by_name_and_grows_by_an_eighth() {
        let slot = |version| Slot::<PodView> {
            version,
            relist: 0,
            entry: Entry::Undecodable(Arc::new(Undecodable {
                kind: "Pod".into(),
                namespace: None,
                name: String::new(),
                uid: None,
                cluster: None,
                field: String::new(),
                error: String::new(),
            })),
        };
        let mut names = Names::new();
        for (i, name) in ["c", "a", "d", "b"].into_iter().enumerate() {
            assert!(names.insert(name, slot(i as u64)).is_none());
        }
        let replaced = names.insert("a", slot(9)).map(|s| s.version);
        assert_eq!(replaced, Some(1));
        let held: Vec<(&str, u64)> = names.iter().map(|(n, s)| (n, s.version)).collect();
        assert_eq!(held, [("a", 9), ("b", 3), ("c", 0), ("d", 2)]);
        assert_eq!(names.remove("b").map(|s| s.version), Some(3));
        assert!(names.remove("b").is_none());
        // Eighty revisions, one more, and back: the vector grows by an eighth, not double.
        let capacity = |names: &Names<PodView>| match names {
            Names::Sorted(sorted) => sorted.capacity(),
            Names::Tree(_) => usize::MAX,
        };
        let mut revisions = Names::new();
        for n in 0..80 {
            revisions.insert(&format!("r{n:03}"), slot(n));
        }
        revisions.retain(|_| true);
        assert_eq!(capacity(&revisions), 80, "a listing's headroom given back");
        revisions.insert("r999", slot(80));
        assert!(capacity(&revisions) <= 81 + 10, "{}", capacity(&revisions));
        assert!(revisions.remove("r000").is_some());
        for n in 1..80 {
            revisions.remove(&format!("r{n:03}"));
        }
        assert!(
            capacity(&revisions) <= 2 + 8,
            "gives back what it no longer holds"
        );
        // A namespace of many tenants becomes a tree, in the same order.
        let mut crowded = Names::new();
        for n in (0..=SORTED_UP_TO as u64).rev() {
            crowded.insert(&format!("p{n:05}"), slot(n));
        }
        assert!(matches!(crowded, Names::Tree(_)));
        let versions: Vec<u64> = crowded.values().map(|s| s.version).collect();
        assert_eq!(versions, (0..=SORTED_UP_TO as u64).collect::<Vec<_>>());
        assert_eq!(crowded.remove("p00007").map(|s| s.version), Some(7));
    }

    #[tokio::test]
    async fn a_watch_error_changes_nothing() {
        use watcher::Event::*;
        let index = index();
        feed(
            &index,
            vec![
                Ok(Init),
                Ok(InitApply(pod("a", "shop-be", 5))),
                Ok(InitDone),
                Err(watcher::Error::NoResourceVersion),
            ],
        )
        .await;
        assert_eq!(names(&index, Some("a")), ["shop-be"]);
    }
}
