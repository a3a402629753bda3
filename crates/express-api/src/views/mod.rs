//! Compact views of the kinds every reader keeps by the thousand: a pod as the fields the
//! planner, the operator and triage read of it ([`PodView`]), a ControllerRevision as the node
//! revision it keeps ([`RevisionView`]), and a Backend or Frontend as its kind, spec, status and
//! the few metadata fields read ([`NodeView`]). A decoded k8s-openapi `Pod` holds every optional
//! field of the API inline (2,464 bytes before any content) and a B-tree map per label set; a
//! view is a few hundred bytes, built once as the object arrives and the API object dropped.
//!
//! Strings many objects repeat (namespaces, clusters, revisions, versions, condition types)
//! can be shared through an [`Interner`]: a fleet's 80,000 pods name a few thousand distinct
//! values.

use std::hash::Hash;
use std::sync::{Arc, Mutex};

use hashbrown::{Equivalent, HashSet};

mod node;
mod pod;
mod revision;
mod time;
mod uid;

pub use node::{MetaView, NodeObject, NodeView, last_write};
pub use pod::{PodConditionView, PodOwner, PodStatusView, PodView};
pub use revision::RevisionView;
pub use time::ApiTime;
pub use uid::Uid;

use revision::{HistoryKey, HistoryOf};

/// Shares repeated values: strings, and which node's history a ControllerRevision belongs to
/// (a settled node keeps ten). The same value interned twice is one allocation. Values no view
/// holds any more are dropped when a set has doubled since it was last pruned, so a fleet whose
/// tenants come and go does not keep every name it ever saw.
#[derive(Debug, Default)]
pub struct Interner(Mutex<InternerState>);

#[derive(Debug, Default)]
struct InternerState {
    strings: SharedSet<str>,
    histories: SharedSet<HistoryOf>,
    /// Node specs: a tenant's Frontends mostly have one spec, and a node view's spec is a
    /// quarter of its size.
    specs: SharedSet<crate::NodeSpec>,
}

/// Values shared through [`Arc`]s, pruned of those only the set holds once it has doubled.
#[derive(Debug)]
struct SharedSet<T: ?Sized> {
    values: HashSet<Arc<T>>,
    pruned_at: usize,
}

impl<T: ?Sized> Default for SharedSet<T> {
    fn default() -> Self {
        SharedSet {
            values: HashSet::new(),
            pruned_at: 0,
        }
    }
}

impl<T: ?Sized + Hash + Eq> SharedSet<T> {
    /// The shared value `key` stands for, made by `make` the first time.
    fn get<Q>(&mut self, key: &Q, make: impl FnOnce() -> Arc<T>) -> Arc<T>
    where
        Q: ?Sized + Hash + Equivalent<Arc<T>>,
    {
        if let Some(shared) = self.values.get(key) {
            return shared.clone();
        }
        if self.values.len() >= 2 * self.pruned_at.max(512) {
            self.values.retain(|v| Arc::strong_count(v) > 1);
            self.pruned_at = self.values.len();
        }
        let shared = make();
        self.values.insert(shared.clone());
        shared
    }
}

impl Interner {
    /// The shared copy of `value`.
    pub fn intern(&self, value: &str) -> Arc<str> {
        let Ok(mut state) = self.0.lock() else {
            return Arc::from(value);
        };
        state.strings.get(value, || Arc::from(value))
    }

    /// The shared copy of a node's spec.
    pub fn spec(&self, spec: crate::NodeSpec) -> Arc<crate::NodeSpec> {
        let Ok(mut state) = self.0.lock() else {
            return Arc::new(spec);
        };
        // Cloned once per distinct spec, on its first sight.
        state.specs.get(&spec, || Arc::new(spec.clone()))
    }

    /// The shared history of the node a revision names (namespace, node label, kind).
    fn history_of(&self, key: HistoryKey<'_>) -> Arc<HistoryOf> {
        let Ok(mut state) = self.0.lock() else {
            return Arc::new(key.to_owned(|n| Arc::from(n)));
        };
        let InternerState {
            strings, histories, ..
        } = &mut *state;
        histories.get(&key, || {
            Arc::new(key.to_owned(|n| strings.get(n, || Arc::from(n))))
        })
    }

    /// How many distinct values it holds, strings and histories (for the benchmark's and the
    /// memory metrics' accounting).
    pub fn len(&self) -> usize {
        let (strings, histories) = self.counts();
        strings + histories
    }

    /// How many distinct strings, and how many node histories, it holds.
    pub fn counts(&self) -> (usize, usize) {
        self.0
            .lock()
            .map(|s| (s.strings.values.len(), s.histories.values.len()))
            .unwrap_or_default()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Interns through an [`Interner`], or copies when there is none (a CLI reading once).
pub(crate) fn shared(interner: Option<&Interner>, value: &str) -> Arc<str> {
    match interner {
        Some(interner) => interner.intern(value),
        None => Arc::from(value),
    }
}

/// A resourceVersion as a number; None when it is not one.
pub(crate) fn number(version: Option<&str>) -> Option<u64> {
    version.and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each cached view is one allocation behind an `Arc` (two counters, 16 bytes, before it),
    /// rounded up by jemalloc to a size class (..., 96, ..., 256, ..., 768, 896, 1024, ...):
    /// a few bytes more would cost a whole class more for every node, pod or revision of a
    /// fleet (docs/benchmarks.md, "A settled fleet at 10,000 tenants: compact uids and instants").
    #[test]
    fn views_fit_the_allocator_size_classes_they_were_measured_in() {
        let arc = 2 * size_of::<usize>();
        // 768 since a node's spec is shared behind an `Arc` (issue 63; 896 before).
        assert!(
            arc + size_of::<NodeView>() <= 768,
            "{}",
            size_of::<NodeView>()
        );
        assert!(
            arc + size_of::<PodView>() <= 256,
            "{}",
            size_of::<PodView>()
        );
        assert!(
            arc + size_of::<RevisionView>() <= 64,
            "{}",
            size_of::<RevisionView>()
        );
        assert!(size_of::<PodConditionView>() <= 40);
    }

    /// Nodes of one spec share it through an interner; a spec that differs only where the
    /// hash does not look (the pod template) is still its own.
    #[test]
    fn equal_specs_are_one_and_specs_that_differ_anywhere_are_not() {
        let interner = Interner::default();
        let spec = crate::NodeSpec::for_cluster("shop");
        let templated = crate::NodeSpec {
            pod_template: Some(serde_json::json!({"metadata": {"labels": {"a": "b"}}})),
            ..crate::NodeSpec::for_cluster("shop")
        };
        let one = interner.spec(spec.clone());
        let again = interner.spec(spec.clone());
        let other = interner.spec(templated.clone());
        assert!(Arc::ptr_eq(&one, &again));
        assert!(!Arc::ptr_eq(&one, &other));
        assert_eq!((&*one, &*other), (&spec, &templated));
        let down = interner.spec(crate::NodeSpec {
            up: false,
            ..crate::NodeSpec::for_cluster("shop")
        });
        assert!(!down.up && one.up);
    }
}
