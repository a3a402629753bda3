//! Object storage: every object as JSON under one global, strictly increasing resourceVersion,
//! with a bounded history of changes for watches that resume from a resourceVersion and a
//! broadcast channel that fans changes out to open watches.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast;

pub type Object = Arc<Value>;

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
    pub object: Object,
}

/// The resumable window of history is gone: the client must list again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooOld {
    pub oldest: u64,
}

pub struct Store {
    revision: u64,
    collections: HashMap<String, BTreeMap<(String, String), Object>>,
    history: VecDeque<Arc<Event>>,
    history_limit: usize,
    /// Lowest resourceVersion a watch may resume from.
    oldest_watchable: u64,
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
            sender,
        }
    }

    pub fn revision(&self) -> u64 {
        self.revision
    }

    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<&Object> {
        self.collections
            .get(resource)?
            .get(&(namespace.to_owned(), name.to_owned()))
    }

    /// Objects of a resource in key order; `namespace` None means every namespace.
    pub fn list<'a>(
        &'a self,
        resource: &str,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a (String, String), &'a Object)> + 'a {
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
    ) -> impl Iterator<Item = (&'a (String, String), &'a Object)> + 'a {
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
        let object = Arc::new(object);
        self.collections
            .entry(resource.to_owned())
            .or_default()
            .insert((namespace.to_owned(), name.to_owned()), object.clone());
        self.record(resource, namespace, kind, object.clone());
        object
    }

    /// Removes an object; the DELETED event carries its last state under a new
    /// resourceVersion, as the API server does.
    pub fn remove(&mut self, resource: &str, namespace: &str, name: &str) -> Option<Object> {
        let removed = self
            .collections
            .get_mut(resource)?
            .remove(&(namespace.to_owned(), name.to_owned()))?;
        self.revision += 1;
        let mut last = (*removed).clone();
        set_resource_version(&mut last, self.revision);
        let last = Arc::new(last);
        self.record(resource, namespace, EventType::Deleted, last.clone());
        Some(last)
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

    fn record(&mut self, resource: &str, namespace: &str, kind: EventType, object: Object) {
        let event = Arc::new(Event {
            revision: self.revision,
            resource: resource.to_owned(),
            namespace: namespace.to_owned(),
            kind,
            object,
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

    /// Changes after `revision`, for a watch resuming there; Err when that part of history
    /// is no longer kept.
    pub fn changes_since(&self, revision: u64) -> Result<Vec<Arc<Event>>, TooOld> {
        if revision < self.oldest_watchable {
            return Err(TooOld {
                oldest: self.oldest_watchable,
            });
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
        assert!(store.changes_since(2).is_err());
        assert_eq!(store.changes_since(4).expect("kept").len(), 2);
        store.compact();
        assert!(store.changes_since(5).is_err());
        assert_eq!(store.changes_since(6).expect("now").len(), 0);
    }
}
