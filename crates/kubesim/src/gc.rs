//! Background controllers of the API server: owner-reference garbage collection (background,
//! foreground and orphan propagation) and namespace deletion.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::api::{Cluster, DeleteOptions, NAMESPACE_KEY};
use crate::shared::Shared;
use crate::store::EventType;

const FOREGROUND: &str = "foregroundDeletion";
const ORPHAN: &str = "orphan";

/// Runs the collector until the event stream closes. It rescans only after a change that can
/// matter: a deletion, a deletionTimestamp, or an object carrying owner references.
pub async fn run(shared: Arc<Shared>) {
    let dirty = Arc::new(AtomicBool::new(true));
    let mut events = shared.lock().store.subscribe();
    let watcher_dirty = dirty.clone();
    let wake = Arc::new(tokio::sync::Notify::new());
    let wake_collector = wake.clone();
    tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(event) => {
                    let index = &event.object.index;
                    let relevant = event.kind == EventType::Deleted
                        || index.deleting
                        || !index.owner_uids.is_empty();
                    if relevant {
                        watcher_dirty.store(true, Ordering::SeqCst);
                        wake.notify_one();
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    watcher_dirty.store(true, Ordering::SeqCst);
                    wake.notify_one();
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
    loop {
        if dirty.swap(false, Ordering::SeqCst) {
            let (changed, took) = {
                let mut cluster = shared.lock();
                let started = std::time::Instant::now();
                (collect(&mut cluster), started.elapsed())
            };
            if changed {
                shared.changed.notify_waiters();
                dirty.store(true, Ordering::SeqCst);
            }
            // A pass reads the whole store under its lock: at fleet scale, passes back to back
            // (every pod's status change wakes the collector) would hold it most of the time.
            // Idle three times as long as the pass took: the collector keeps a quarter of it.
            tokio::time::sleep(took * 3).await;
        }
        tokio::select! {
            _ = wake_collector.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        // Let bursts of changes settle into one scan.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// An object as the collector sees it, borrowed from the store's index.
struct Live<'a> {
    key: &'a str,
    namespace: &'a str,
    name: &'a str,
    deleting: bool,
    finalizers: &'a [String],
}

/// What one pass decided, applied once the scan (which only borrows the store) is over.
enum Step {
    /// Drop references to owners being deleted with orphan propagation.
    DropReferences {
        key: String,
        namespace: String,
        name: String,
        owners: Vec<String>,
    },
    Delete {
        key: String,
        namespace: String,
        name: String,
        propagation: &'static str,
    },
    RemoveFinalizer {
        key: String,
        namespace: String,
        name: String,
        finalizer: &'static str,
    },
    FinishNamespace(String),
}

/// One pass of garbage collection; returns whether it changed anything.
pub fn collect(cluster: &mut Cluster) -> bool {
    let steps = scan(cluster);
    let mut changed = false;
    for step in steps {
        changed |= match step {
            Step::DropReferences {
                key,
                namespace,
                name,
                owners,
            } => drop_references(cluster, &key, &namespace, &name, &owners),
            Step::Delete {
                key,
                namespace,
                name,
                propagation,
            } => delete(cluster, &key, &namespace, &name, propagation),
            Step::RemoveFinalizer {
                key,
                namespace,
                name,
                finalizer,
            } => remove_finalizer(cluster, &key, &namespace, &name, finalizer),
            Step::FinishNamespace(namespace) => finish_namespace(cluster, &namespace),
        };
    }
    changed
}

/// Reads every object's index once, copying nothing but what a step needs: at fleet scale
/// (hundreds of thousands of objects) a pass that cloned every key, name and uid held the
/// store's lock for most of the server's time.
fn scan(cluster: &Cluster) -> Vec<Step> {
    let mut keys: Vec<String> = cluster
        .registry
        .all()
        .iter()
        .map(|t| t.storage_key())
        .collect();
    keys.sort();
    keys.dedup();
    let mut by_uid: HashMap<&str, Live<'_>> = HashMap::new();
    let mut dependents: Vec<(&str, &str, &str, &[String])> = Vec::new();
    for key in &keys {
        for ((namespace, name), object) in cluster.store.list(key, None) {
            let index = &object.index;
            if !index.uid.is_empty() {
                by_uid.insert(
                    &index.uid,
                    Live {
                        key,
                        namespace,
                        name,
                        deleting: index.deleting,
                        finalizers: &index.finalizers,
                    },
                );
            }
            if !index.owner_uids.is_empty() {
                dependents.push((key, namespace, name, &index.owner_uids));
            }
        }
    }
    let mut steps = Vec::new();
    let mut has_dependents: HashSet<&str> = HashSet::new();
    for (key, namespace, name, owners) in dependents {
        let owner_of = |uid: &String| by_uid.get(uid.as_str());
        let orphaned_by: Vec<String> = owners
            .iter()
            .filter(|uid| {
                owner_of(uid)
                    .is_some_and(|o| o.deleting && o.finalizers.iter().any(|f| f == ORPHAN))
            })
            .cloned()
            .collect();
        if !orphaned_by.is_empty() {
            steps.push(Step::DropReferences {
                key: key.to_owned(),
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                owners: orphaned_by,
            });
            continue;
        }
        has_dependents.extend(owners.iter().map(String::as_str));
        let all_gone = owners.iter().all(|uid| owner_of(uid).is_none());
        let owner_in_foreground = owners.iter().any(|uid| {
            owner_of(uid)
                .is_some_and(|o| o.deleting && o.finalizers.iter().any(|f| f == FOREGROUND))
        });
        if all_gone || owner_in_foreground {
            steps.push(Step::Delete {
                key: key.to_owned(),
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                propagation: if owner_in_foreground {
                    "Foreground"
                } else {
                    "Background"
                },
            });
        }
    }
    for (uid, owner) in &by_uid {
        if !owner.deleting {
            continue;
        }
        let release = |f: &str| {
            owner.finalizers.iter().any(|x| x == f)
                && (f == ORPHAN || !has_dependents.contains(uid))
        };
        for finalizer in [FOREGROUND, ORPHAN] {
            if release(finalizer) {
                steps.push(Step::RemoveFinalizer {
                    key: owner.key.to_owned(),
                    namespace: owner.namespace.to_owned(),
                    name: owner.name.to_owned(),
                    finalizer,
                });
            }
        }
        if owner.key == NAMESPACE_KEY {
            steps.push(Step::FinishNamespace(owner.name.to_owned()));
        }
    }
    steps
}

fn delete(
    cluster: &mut Cluster,
    key: &str,
    namespace: &str,
    name: &str,
    propagation: &str,
) -> bool {
    let Some(rt) = cluster.type_for_key(key) else {
        return false;
    };
    let Some(object) = cluster.store.get(key, namespace, name) else {
        return false;
    };
    if object["metadata"]["deletionTimestamp"].is_string() {
        return false;
    }
    let options = DeleteOptions {
        propagation: Some(propagation.to_owned()),
        ..Default::default()
    };
    cluster.delete(&rt, namespace, name, &options).is_ok()
}

fn rewrite(
    cluster: &mut Cluster,
    key: &str,
    namespace: &str,
    name: &str,
    change: impl FnOnce(&mut Value),
) -> bool {
    let Some(rt) = cluster.type_for_key(key) else {
        return false;
    };
    let Some(current) = cluster.store.get(key, namespace, name) else {
        return false;
    };
    let mut next = (*current).clone();
    change(&mut next);
    if next == *current {
        return false;
    }
    next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    cluster
        .update(&rt, namespace, name, None, next, &Default::default())
        .is_ok()
}

fn drop_references(
    cluster: &mut Cluster,
    key: &str,
    namespace: &str,
    name: &str,
    owners: &[String],
) -> bool {
    rewrite(cluster, key, namespace, name, |object| {
        if let Some(references) = object["metadata"]["ownerReferences"].as_array_mut() {
            references.retain(|r| {
                !r["uid"]
                    .as_str()
                    .is_some_and(|u| owners.iter().any(|o| o == u))
            });
        }
    })
}

fn remove_finalizer(
    cluster: &mut Cluster,
    key: &str,
    namespace: &str,
    name: &str,
    finalizer: &str,
) -> bool {
    rewrite(cluster, key, namespace, name, |object| {
        if let Some(finalizers) = object["metadata"]["finalizers"].as_array_mut() {
            finalizers.retain(|f| f != finalizer);
        }
    })
}

/// Deletes everything in a terminating namespace, then the namespace itself.
fn finish_namespace(cluster: &mut Cluster, namespace: &str) -> bool {
    let mut keys: Vec<(String, bool)> = cluster
        .registry
        .all()
        .iter()
        .map(|t| (t.storage_key(), t.namespaced))
        .collect();
    keys.sort();
    keys.dedup();
    let mut remaining = 0;
    let mut changed = false;
    for (key, _) in keys.iter().filter(|(_, namespaced)| *namespaced) {
        let names: Vec<String> = cluster
            .store
            .list(key, Some(namespace))
            .map(|((_, n), _)| n.clone())
            .collect();
        for name in names {
            remaining += 1;
            changed |= delete(cluster, key, namespace, &name, "Background");
        }
    }
    if remaining == 0 {
        changed |= cluster.store.remove(NAMESPACE_KEY, "", namespace).is_some();
    } else if let Some(ns) = cluster.store.get(NAMESPACE_KEY, "", namespace)
        && ns["status"]["phase"] != json!("Terminating")
    {
        let mut next = (*ns).clone();
        next["status"]["phase"] = json!("Terminating");
        cluster
            .store
            .put(NAMESPACE_KEY, "", namespace, next, EventType::Modified);
        changed = true;
    }
    changed
}
