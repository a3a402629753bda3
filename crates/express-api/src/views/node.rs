//! A Backend or Frontend as every reader takes it ([`NodeView`]): its kind, the metadata it is
//! read by ([`MetaView`]), its spec and its status. The decoded custom resource carries a
//! k8s-openapi `ObjectMeta` (360 bytes inline before any content) and the `managedFields`
//! entries triage dates its writes by (two entries of 176 bytes each, with their strings); a
//! view keeps the two instants those entries give and the handful of metadata fields read.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;

use super::time::{ApiTime, api_time};
use super::{Interner, Uid, number, shared};
use crate::{Backend, ClusterKey, Frontend, NodeKind, NodeSpec, NodeStatus};

/// The latest write to an object (from its `managedFields`): to its status subresource
/// (`status: true`) or to anything else.
pub fn last_write(meta: &ObjectMeta, status: bool) -> Option<Timestamp> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|entry| (entry.subresource.as_deref() == Some("status")) == status)
        .filter_map(|entry| entry.time.as_ref().map(|t| t.0))
        .max()
}

/// What readers take of an object's metadata. Labels and annotations stay maps (the readers
/// of both kinds of object share their lookups) but cost a pointer when absent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetaView {
    pub namespace: Option<Arc<str>>,
    pub name: Box<str>,
    pub uid: Option<Uid>,
    /// The resourceVersion as a number (as etcd and kubesim issue them); None when it is not
    /// one, which readers take as fresh.
    pub resource_version: Option<u64>,
    pub generation: Option<i64>,
    created: Option<ApiTime>,
    deleted: Option<ApiTime>,
    pub labels: Option<Box<BTreeMap<String, String>>>,
    pub annotations: Option<Box<BTreeMap<String, String>>>,
    /// When anything but the status was last written ([`last_write`]).
    written: Option<ApiTime>,
    /// When the status was last written.
    status_written: Option<ApiTime>,
}

impl MetaView {
    pub fn new(meta: &ObjectMeta, interner: Option<&Interner>) -> MetaView {
        let map = |m: &Option<BTreeMap<String, String>>| {
            m.as_ref().filter(|m| !m.is_empty()).cloned().map(Box::new)
        };
        MetaView {
            namespace: meta.namespace.as_deref().map(|n| shared(interner, n)),
            name: meta.name.as_deref().unwrap_or_default().into(),
            uid: meta.uid.as_deref().map(Uid::new),
            resource_version: number(meta.resource_version.as_deref()),
            generation: meta.generation,
            created: api_time(meta.creation_timestamp.as_ref().map(|t| t.0)),
            deleted: api_time(meta.deletion_timestamp.as_ref().map(|t| t.0)),
            labels: map(&meta.labels),
            annotations: map(&meta.annotations),
            written: api_time(last_write(meta, false)),
            status_written: api_time(last_write(meta, true)),
        }
    }

    pub fn created(&self) -> Option<Timestamp> {
        self.created.map(ApiTime::timestamp)
    }

    pub fn deleted(&self) -> Option<Timestamp> {
        self.deleted.map(ApiTime::timestamp)
    }

    /// When anything but the status was last written ([`last_write`]).
    pub fn written(&self) -> Option<Timestamp> {
        self.written.map(ApiTime::timestamp)
    }

    /// When the status was last written ([`last_write`]).
    pub fn status_written(&self) -> Option<Timestamp> {
        self.status_written.map(ApiTime::timestamp)
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.as_ref()?.get(key).map(String::as_str)
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.as_ref()?.get(key).map(String::as_str)
    }
}

/// A Backend or Frontend, whatever its kind, as every reader of [`crate::Objects`] reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeView {
    pub kind: NodeKind,
    pub meta: MetaView,
    /// Shared with the nodes of the same spec when read through an [`Interner`].
    pub spec: Arc<NodeSpec>,
    pub status: Option<NodeStatus>,
}

impl NodeView {
    /// The view of a decoded node, its namespace shared through `interner` when there is one.
    pub fn new(
        kind: NodeKind,
        meta: &ObjectMeta,
        spec: NodeSpec,
        status: Option<NodeStatus>,
        interner: Option<&Interner>,
    ) -> NodeView {
        NodeView {
            kind,
            meta: MetaView::new(meta, interner),
            spec: match interner {
                Some(interner) => interner.spec(spec),
                None => Arc::new(spec),
            },
            status,
        }
    }

    pub fn kind(&self) -> NodeKind {
        self.kind
    }

    pub fn meta(&self) -> &MetaView {
        &self.meta
    }

    pub fn spec(&self) -> &NodeSpec {
        &self.spec
    }

    pub fn status(&self) -> Option<&NodeStatus> {
        self.status.as_ref()
    }

    /// The node's name ("" for an object without one, which the API server never stores).
    pub fn name(&self) -> &str {
        &self.meta.name
    }

    pub fn namespace(&self) -> Option<&str> {
        self.meta.namespace.as_deref()
    }

    /// The Express cluster the node belongs to.
    pub fn cluster_name(&self) -> &str {
        &self.spec.cluster_config.cluster_name
    }

    /// Its namespace and Express cluster, borrowed: how the fleet-wide readers group nodes.
    pub fn cluster_names(&self) -> Option<(&str, &str)> {
        Some((self.namespace()?, self.cluster_name()))
    }

    pub fn key(&self) -> Option<ClusterKey> {
        let (namespace, cluster) = self.cluster_names()?;
        Some(ClusterKey::new(namespace, cluster))
    }

    /// The operator has not reported on the node's latest spec yet.
    pub fn unobserved(&self) -> bool {
        let status = self.status();
        status.is_none() || status.and_then(|s| s.observed_generation) < self.meta.generation
    }

    fn api_version(&self) -> String {
        match self.kind {
            NodeKind::Backend => Backend::api_version(&()).into_owned(),
            NodeKind::Frontend => Frontend::api_version(&()).into_owned(),
        }
    }

    /// The controller owner reference a pod or ControllerRevision of this node carries (None
    /// for a node the API server has not stored yet: it has no uid, or no name). It blocks the node's
    /// foreground deletion until the pod is gone, as a workload controller's does.
    pub fn controller_owner_ref(&self) -> Option<OwnerReference> {
        let name = Some(self.name()).filter(|n| !n.is_empty())?;
        Some(OwnerReference {
            api_version: self.api_version(),
            kind: self.kind.as_str().to_owned(),
            name: name.to_owned(),
            uid: self.meta.uid.as_ref()?.to_string(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        })
    }

    /// The node as an event's subject (without a resourceVersion, as kube makes it: an event
    /// is about the node, not one version of it).
    pub fn object_ref(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.api_version()),
            kind: Some(self.kind.as_str().to_owned()),
            name: Some(self.name())
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
            namespace: self.namespace().map(str::to_owned),
            uid: self.meta.uid.as_ref().map(Uid::to_string),
            resource_version: None,
            field_path: None,
        }
    }
}

/// A Backend or Frontend custom resource: what a [`NodeView`] is built from.
pub trait NodeObject {
    const KIND: NodeKind;
    fn parts(&self) -> (&ObjectMeta, &NodeSpec, Option<&NodeStatus>);
    fn into_parts(self) -> (ObjectMeta, NodeSpec, Option<NodeStatus>);
}

impl NodeObject for Backend {
    const KIND: NodeKind = NodeKind::Backend;
    fn parts(&self) -> (&ObjectMeta, &NodeSpec, Option<&NodeStatus>) {
        (&self.metadata, &self.spec, self.status.as_ref())
    }
    fn into_parts(self) -> (ObjectMeta, NodeSpec, Option<NodeStatus>) {
        (self.metadata, self.spec.0, self.status)
    }
}

impl NodeObject for Frontend {
    const KIND: NodeKind = NodeKind::Frontend;
    fn parts(&self) -> (&ObjectMeta, &NodeSpec, Option<&NodeStatus>) {
        (&self.metadata, &self.spec, self.status.as_ref())
    }
    fn into_parts(self) -> (ObjectMeta, NodeSpec, Option<NodeStatus>) {
        (self.metadata, self.spec.0, self.status)
    }
}

impl NodeView {
    /// The view of a decoded Backend or Frontend, its namespace shared through `interner`
    /// when there is one.
    pub fn of<N: NodeObject>(node: &N, interner: Option<&Interner>) -> NodeView {
        let (meta, spec, status) = node.parts();
        NodeView::new(N::KIND, meta, spec.clone(), status.cloned(), interner)
    }

    /// The view of a node given whole: its spec and status move into the view (cloning them
    /// is most of what turning a DC's nodes into views costs).
    pub fn owned<N: NodeObject>(node: N, interner: Option<&Interner>) -> NodeView {
        let (meta, spec, status) = node.into_parts();
        NodeView::new(N::KIND, &meta, spec, status, interner)
    }
}

impl<N: NodeObject> From<&N> for NodeView {
    fn from(node: &N) -> Self {
        NodeView::of(node, None)
    }
}

/// A node given whole moves its spec and status into its view ([`NodeView::owned`]).
impl From<Backend> for NodeView {
    fn from(node: Backend) -> Self {
        NodeView::owned(node, None)
    }
}

impl From<Frontend> for NodeView {
    fn from(node: Frontend) -> Self {
        NodeView::owned(node, None)
    }
}

/// A node decodes from a Backend's or a Frontend's JSON, by its `kind`, as the custom
/// resource it is would: manifests and tests build their views straight from the object.
impl<'de> serde::Deserialize<'de> for NodeView {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        struct Node {
            kind: String,
            #[serde(default)]
            metadata: ObjectMeta,
            spec: NodeSpec,
            #[serde(default)]
            status: Option<NodeStatus>,
        }
        let node = Node::deserialize(deserializer)?;
        let kind = NodeKind::from_kind_name(&node.kind).ok_or_else(|| {
            serde::de::Error::custom(format!("kind {:?} is not a Backend or Frontend", node.kind))
        })?;
        Ok(NodeView::new(
            kind,
            &node.metadata,
            node.spec,
            node.status,
            None,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FrontendSpec;

    #[test]
    fn a_view_keeps_what_the_node_is_read_by() {
        let frontend: Frontend = serde_json::from_value(serde_json::json!({
            "apiVersion": "express.dev/v1alpha1", "kind": "Frontend",
            "metadata": {"name": "acme-fe1", "namespace": "tenant", "uid": "u1", "generation": 3,
                         "resourceVersion": "42", "creationTimestamp": "2026-11-25T10:00:00Z",
                         "labels": {"express.dev/deployment-revision": "r1"},
                         "managedFields": [
                            {"manager": "helm", "operation": "Apply", "time": "2026-11-25T10:00:01Z"},
                            {"manager": "express-operator", "operation": "Apply", "subresource": "status",
                             "time": "2026-11-25T10:00:09Z"}]},
            "spec": {"clusterConfig": {"clusterName": "acme"}},
            "status": {"observedGeneration": 2},
        }))
        .expect("a Frontend");
        let view = NodeView::from(&frontend);
        assert_eq!(view.kind(), NodeKind::Frontend);
        assert_eq!(
            (view.name(), view.namespace()),
            ("acme-fe1", Some("tenant"))
        );
        assert_eq!(view.key(), Some(ClusterKey::new("tenant", "acme")));
        assert_eq!(view.meta.resource_version, Some(42));
        assert_eq!(
            view.meta.label("express.dev/deployment-revision"),
            Some("r1")
        );
        assert_eq!(view.meta.annotations, None);
        assert_eq!(
            view.meta.written().map(|t| t.to_string()).as_deref(),
            Some("2026-11-25T10:00:01Z")
        );
        assert_eq!(
            view.meta.status_written().map(|t| t.to_string()).as_deref(),
            Some("2026-11-25T10:00:09Z")
        );
        assert!(view.unobserved(), "status observed generation 2 of 3");
        // The references it makes are the ones kube makes of the decoded object.
        assert_eq!(Some(view.object_ref()), Some(frontend.object_ref(&())));
        let owner = view.controller_owner_ref().expect("stored: it has a uid");
        assert_eq!(
            owner,
            OwnerReference {
                block_owner_deletion: Some(true),
                ..frontend.controller_owner_ref(&()).expect("a uid")
            }
        );
        let unsaved = Frontend {
            metadata: ObjectMeta {
                name: Some("acme-fe2".into()),
                ..ObjectMeta::default()
            },
            spec: FrontendSpec(NodeSpec::for_cluster("acme")),
            status: None,
        };
        assert!(NodeView::from(unsaved).controller_owner_ref().is_none());
    }
}
