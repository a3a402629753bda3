//! Object storage: every object as compact JSON text under one global, strictly increasing
//! resourceVersion, with a bounded history of changes for watches that resume from a
//! resourceVersion and a broadcast channel that fans changes out to open watches.
//!
//! Objects are kept as text, not as `serde_json::Value`: a parsed pod costs about nine times its
//! text. What must be read without parsing (labels for selectors, uid, owner references,
//! deletion state, finalizers, apiVersion) is kept beside the text in a small [`Index`]; reads
//! that need the whole object parse it on demand.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast;

pub type Object = Arc<Value>;

/// The fields of an object that are read without parsing it.
#[derive(Debug, Default, PartialEq)]
pub struct Index {
    pub api_version: String,
    pub uid: String,
    pub labels: Vec<(String, String)>,
    pub owner_uids: Vec<String>,
    pub deleting: bool,
    pub finalizers: Vec<String>,
}

/// One stored version of an object: its JSON text and its index. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Stored {
    pub json: Arc<str>,
    pub index: Arc<Index>,
}

impl Stored {
    pub fn new(object: &Value) -> Stored {
        let meta = &object["metadata"];
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        };
        let index = Index {
            api_version: object["apiVersion"].as_str().unwrap_or("").to_owned(),
            uid: meta["uid"].as_str().unwrap_or("").to_owned(),
            labels: meta["labels"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect(),
            owner_uids: meta["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["uid"].as_str().map(str::to_owned))
                .collect(),
            deleting: meta["deletionTimestamp"].is_string(),
            finalizers: strings(&meta["finalizers"]),
        };
        Stored {
            json: Arc::from(object.to_string()),
            index: Arc::new(index),
        }
    }

    /// The object parsed (the text was written by this store, so it always parses).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.json).unwrap_or(Value::Null)
    }

    pub fn object(&self) -> Object {
        Arc::new(self.value())
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.index
            .labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change to one object.
#[derive(Debug)]
pub struct Event {
    pub revision: u64,
    /// Storage key of the resource (`group/plural`).
    pub resource: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub kind: EventType,
    pub object: Stored,
    /// For MODIFIED: the object as it was before, so that a watch with a selector can tell an
    /// object entering its selection (ADDED) or leaving it (DELETED).
    pub previous: Option<Stored>,
}

/// The resumable window of history is gone: the client must list again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooOld {
    pub oldest: u64,
}

pub struct Store {
    revision: u64,
    collections: HashMap<String, BTreeMap<(String, String), Stored>>,
    history: VecDeque<Arc<Event>>,
    history_limit: usize,
    /// Lowest resourceVersion a watch may resume from.
    oldest_watchable: u64,
    /// The revision of the last compaction: a list's continue token from before it is too old.
    compacted_at: u64,
    /// Per resource, where its own history begins when that is later than the store's: a custom
    /// resource's begins with its CRD, as the API server's watch cache for it is started then
    /// and holds nothing older.
    history_begins: HashMap<String, u64>,
    sender: broadcast::Sender<Arc<Event>>,
}

impl Store {
    pub fn new(history_limit: usize, fanout_buffer: usize) -> Self {
        let (sender, _) = broadcast::channel(fanout_buffer.max(16));
        Store {
            revision: 1,
            collections: HashMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            oldest_watchable: 1,
            compacted_at: 0,
            history_begins: HashMap::new(),
            sender,
        }
    }

    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The stored text and index of an object.
    pub fn stored(&self, resource: &str, namespace: &str, name: &str) -> Option<&Stored> {
        self.collections
            .get(resource)?
            .get(&(namespace.to_owned(), name.to_owned()))
    }

    /// An object, parsed.
    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<Object> {
        self.stored(resource, namespace, name).map(Stored::object)
    }

    /// Objects of a resource in key order; `namespace` None means every namespace.
    pub fn list<'a>(
        &'a self,
        resource: &str,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a (String, String), &'a Stored)> + 'a {
        self.collections
            .get(resource)
            .into_iter()
            .flat_map(move |objects| match namespace {
                Some(ns) => Box::new(
                    objects
                        .range((ns.to_owned(), String::new())..)
                        .take_while(move |((n, _), _)| n == ns),
                ) as Box<dyn Iterator<Item = _>>,
                None => Box::new(objects.iter()),
            })
    }

    /// Objects after `after` (exclusive) in key order, within `namespace` when given: the
    /// continuation of a paged list, found by range instead of a scan from the start.
    pub fn list_after<'a>(
        &'a self,
        resource: &str,
        namespace: Option<&'a str>,
        after: &'a (String, String),
    ) -> impl Iterator<Item = (&'a (String, String), &'a Stored)> + 'a {
        use std::ops::Bound;
        self.collections
            .get(resource)
            .into_iter()
            .flat_map(move |objects| {
                objects.range((Bound::Excluded(after.clone()), Bound::Unbounded))
            })
            .take_while(move |((ns, _), _)| namespace.is_none_or(|wanted| ns == wanted))
    }

    pub fn count(&self, resource: &str) -> usize {
        self.collections.get(resource).map_or(0, BTreeMap::len)
    }

    /// Stores an object under a new resourceVersion (written into its metadata) and tells
    /// every watcher. Returns the stored object.
    pub fn put(
        &mut self,
        resource: &str,
        namespace: &str,
        name: &str,
        mut object: Value,
        kind: EventType,
    ) -> Object {
        self.revision += 1;
        set_resource_version(&mut object, self.revision);
        let stored = Stored::new(&object);
        let previous = self
            .collections
            .entry(resource.to_owned())
            .or_default()
            .insert((namespace.to_owned(), name.to_owned()), stored.clone());
        let previous = previous.filter(|_| kind == EventType::Modified);
        self.record(resource, namespace, kind, stored, previous);
        Arc::new(object)
    }

    /// Removes an object; the DELETED event carries its last state under a new
    /// resourceVersion, as the API server does.
    pub fn remove(&mut self, resource: &str, namespace: &str, name: &str) -> Option<Object> {
        let removed = self
            .collections
            .get_mut(resource)?
            .remove(&(namespace.to_owned(), name.to_owned()))?;
        self.revision += 1;
        let mut last = removed.value();
        set_resource_version(&mut last, self.revision);
        self.record(
            resource,
            namespace,
            EventType::Deleted,
            Stored::new(&last),
            None,
        );
        Some(Arc::new(last))
    }

    /// Drops a whole resource (its CRD was deleted), with a DELETED event per object.
    pub fn drop_resource(&mut self, resource: &str) {
        let keys: Vec<(String, String)> = self
            .collections
            .get(resource)
            .map(|c| c.keys().cloned().collect())
            .unwrap_or_default();
        for (namespace, name) in keys {
            self.remove(resource, &namespace, &name);
        }
        self.collections.remove(resource);
    }

    fn record(
        &mut self,
        resource: &str,
        namespace: &str,
        kind: EventType,
        object: Stored,
        previous: Option<Stored>,
    ) {
        let event = Arc::new(Event {
            revision: self.revision,
            resource: resource.to_owned(),
            namespace: namespace.to_owned(),
            kind,
            object,
            previous,
        });
        self.history.push_back(event.clone());
        while self.history.len() > self.history_limit {
            if let Some(dropped) = self.history.pop_front() {
                self.oldest_watchable = dropped.revision;
            }
        }
        // No receiver is not an error: nobody is watching.
        let _ = self.sender.send(event);
    }

    /// From now on, `resource`'s history begins here: a watch of it from an earlier revision
    /// is too old.
    pub fn begin_history(&mut self, resource: &str) {
        self.history_begins
            .insert(resource.to_owned(), self.revision);
    }

    /// Changes after `revision`, for a watch of `resource` resuming there; Err when that part
    /// of its history is not kept.
    pub fn changes_since(&self, resource: &str, revision: u64) -> Result<Vec<Arc<Event>>, TooOld> {
        let oldest = self
            .history_begins
            .get(resource)
            .map_or(self.oldest_watchable, |begins| {
                (*begins).max(self.oldest_watchable)
            });
        if revision < oldest {
            return Err(TooOld { oldest });
        }
        Ok(self
            .history
            .iter()
            .filter(|e| e.revision > revision)
            .cloned()
            .collect())
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.sender.subscribe()
    }

    /// Forgets all history: every watch resuming from an older resourceVersion gets 410.
    pub fn compact(&mut self) {
        self.history.clear();
        self.oldest_watchable = self.revision;
        self.compacted_at = self.revision;
    }

    /// The revision of the last compaction (0: none yet).
    pub fn compacted_at(&self) -> u64 {
        self.compacted_at
    }
}

fn set_resource_version(object: &mut Value, revision: u64) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert(
            "resourceVersion".into(),
            Value::String(revision.to_string()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str) -> Value {
        json!({"metadata": {"name": name}})
    }

    #[test]
    fn revisions_increase_and_are_written_into_objects() {
        let mut store = Store::new(100, 16);
        let a = store.put("/pods", "ns", "a", obj("a"), EventType::Added);
        let b = store.put("/pods", "ns", "b", obj("b"), EventType::Added);
        assert_eq!(a["metadata"]["resourceVersion"], "2");
        assert_eq!(b["metadata"]["resourceVersion"], "3");
        let gone = store.remove("/pods", "ns", "a").expect("removed");
        assert_eq!(gone["metadata"]["resourceVersion"], "4");
        assert!(store.get("/pods", "ns", "a").is_none());
    }

    #[test]
    fn list_by_namespace_does_not_leak_neighbours() {
        let mut store = Store::new(100, 16);
        for (ns, name) in [("a", "x"), ("ab", "y"), ("b", "z"), ("a", "w")] {
            store.put("/cm", ns, name, obj(name), EventType::Added);
        }
        let names: Vec<&str> = store
            .list("/cm", Some("a"))
            .map(|((_, n), _)| n.as_str())
            .collect();
        assert_eq!(names, ["w", "x"]);
        assert_eq!(store.list("/cm", None).count(), 4);
        assert_eq!(store.list("/none", None).count(), 0);
    }

    #[test]
    fn history_window_and_compaction() {
        let mut store = Store::new(3, 16);
        for i in 0..5 {
            store.put("/cm", "ns", &format!("o{i}"), obj("o"), EventType::Added);
        }
        // Revisions 2..=6 written; only the last 3 kept.
        assert!(store.changes_since("/cm", 2).is_err());
        assert_eq!(store.changes_since("/cm", 4).expect("kept").len(), 2);
        store.compact();
        assert!(store.changes_since("/cm", 5).is_err());
        assert_eq!(store.changes_since("/cm", 6).expect("now").len(), 0);
    }

    #[test]
    fn a_resource_whose_history_begins_later_is_too_old_before_it() {
        let mut store = Store::new(100, 16);
        store.put("/cm", "ns", "a", obj("a"), EventType::Added);
        store.put("/crds", "", "gadgets", obj("gadgets"), EventType::Added);
        store.begin_history("example.dev/gadgets");
        store.put("example.dev/gadgets", "ns", "g", obj("g"), EventType::Added);
        // Revisions: 2 the ConfigMap, 3 the CRD, 4 the gadget.
        assert_eq!(
            store.changes_since("example.dev/gadgets", 1).err(),
            Some(TooOld { oldest: 3 })
        );
        assert_eq!(
            store
                .changes_since("example.dev/gadgets", 3)
                .expect("from its start")
                .len(),
            1
        );
        // Other resources keep the store's whole history.
        assert_eq!(store.changes_since("/cm", 1).expect("kept").len(), 3);
        // A compaction past its start is what counts then.
        store.compact();
        assert_eq!(
            store.changes_since("example.dev/gadgets", 3).err(),
            Some(TooOld { oldest: 4 })
        );
    }
}
