//! What observing reads: the inventory of objects (one or more namespaces) and how a pod is
//! matched to its node, with the two small readers every observation shares (an annotation's
//! value, an object's namespace). Below both the snapshots and the pause in force.

use express_api::Objects;
use kube::Resource;

/// An object's annotations.
pub(super) type Annotations = std::collections::BTreeMap<String, String>;

/// How to decide that a pod is the one the operator manages for a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodOwnership {
    /// Its controller owner reference names the node (the live cluster).
    OwnerReference,
    /// Its name is the node's name (pod manifests standing for observed state, offline).
    Name,
}

/// Every object that bears on planning, from one or more namespaces, and how to read it.
#[derive(Clone, Copy, Debug)]
pub struct Inventory<'a> {
    pub objects: &'a Objects,
    /// Namespace the operator runs in, where `express-operator-control` lives.
    pub operator_namespace: &'a str,
    pub ownership: PodOwnership,
}

/// An annotation's value, trimmed; blank counts as absent.
pub(super) fn annotation(annotations: Option<&Annotations>, key: &str) -> Option<String> {
    annotations?
        .get(key)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The namespace an object is in.
pub(super) fn namespace_of<K: Resource>(object: &K) -> Option<&str> {
    object.meta().namespace.as_deref()
}
