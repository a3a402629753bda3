//! Compact views of the two most numerous kinds every reader keeps: a pod as the fields the
//! planner, the operator and triage read of it ([`PodView`]), and a ControllerRevision as the
//! node revision it keeps ([`RevisionView`]). A decoded k8s-openapi `Pod` holds every optional
//! field of the API inline (2,464 bytes before any content) and a B-tree map per label set; a
//! view is a few hundred bytes, built once as the object arrives and the API object dropped.
//!
//! Strings many objects repeat (namespaces, clusters, revisions, versions, condition types)
//! can be shared through an [`Interner`]: a fleet's 80,000 pods name a few thousand distinct
//! values.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::NodeKind;
use crate::history::KeptSpec;
use crate::keys::{
    ANNOTATION_APP_STATE, ANNOTATION_EXPRESS_VERSION, ANNOTATION_SHUTDOWN_PROTECTION,
    APP_CONTAINER, LABEL_CLUSTER, LABEL_DEPLOYMENT_REVISION, LABEL_KIND, LABEL_NODE,
};

/// Shares repeated strings: the same value interned twice is one allocation. Values no view
/// holds any more are dropped when the set has doubled since it was last pruned, so a fleet
/// whose tenants come and go does not keep every name it ever saw.
#[derive(Debug, Default)]
pub struct Interner(Mutex<InternerState>);

#[derive(Debug, Default)]
struct InternerState {
    values: HashSet<Arc<str>>,
    pruned_at: usize,
}

impl Interner {
    /// The shared copy of `value`.
    pub fn intern(&self, value: &str) -> Arc<str> {
        let Ok(mut state) = self.0.lock() else {
            return Arc::from(value);
        };
        if let Some(shared) = state.values.get(value) {
            return shared.clone();
        }
        if state.values.len() >= 2 * state.pruned_at.max(512) {
            state.values.retain(|v| Arc::strong_count(v) > 1);
            state.pruned_at = state.values.len();
        }
        let shared: Arc<str> = Arc::from(value);
        state.values.insert(shared.clone());
        shared
    }

    /// How many distinct values it holds (for the benchmark's accounting).
    pub fn len(&self) -> usize {
        self.0.lock().map(|s| s.values.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Interns through an [`Interner`], or copies when there is none (a CLI reading once).
fn shared(interner: Option<&Interner>, value: &str) -> Arc<str> {
    match interner {
        Some(interner) => interner.intern(value),
        None => Arc::from(value),
    }
}

/// A pod's controller owner reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodOwner {
    pub kind: Arc<str>,
    pub name: Box<str>,
    pub uid: Box<str>,
}

/// One of a pod's conditions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodConditionView {
    pub type_: Arc<str>,
    pub status: Arc<str>,
    pub last_transition: Option<Timestamp>,
}

/// What a pod's status says, when it has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodStatusView {
    pub phase: Option<Arc<str>>,
    pub conditions: Vec<PodConditionView>,
    /// Restarts summed over its containers.
    pub restarts: i32,
}

/// A pod as every reader of [`crate::Objects`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodView {
    pub namespace: Option<Arc<str>>,
    pub name: Box<str>,
    pub uid: Option<Box<str>>,
    /// The resourceVersion as a number (as etcd and kubesim issue them); None when it is not
    /// one, which readers take as fresh.
    pub resource_version: Option<u64>,
    /// Its `express.dev/cluster` label.
    pub cluster: Option<Arc<str>>,
    /// Its `express.dev/deployment-revision` label.
    pub revision: Option<Arc<str>>,
    /// Its controller owner references: the API server allows one, but a manifest or another
    /// server may carry more, and any of them makes the pod its node's.
    pub controllers: Box<[PodOwner]>,
    /// The Express version it runs: its `express.dev/express-version` annotation, else the tag
    /// of its application container's image.
    pub version: Option<Arc<str>>,
    /// Its `express.dev/app-state` annotation.
    pub app_state: Option<Box<str>>,
    /// Its `express.dev/shutdown-protection` annotation.
    pub shutdown_protection: Option<Box<str>>,
    pub created: Option<Timestamp>,
    pub deleted: Option<Timestamp>,
    pub status: Option<PodStatusView>,
}

impl PodView {
    /// The view of `pod`, its repeated strings shared through `interner` when there is one.
    pub fn new(pod: &Pod, interner: Option<&Interner>) -> PodView {
        let meta = &pod.metadata;
        let label = |key: &str| {
            meta.labels
                .as_ref()
                .and_then(|l| l.get(key))
                .map(|v| shared(interner, v))
        };
        let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key));
        let image_tag = || {
            let containers = &pod.spec.as_ref()?.containers;
            let container = containers
                .iter()
                .find(|c| c.name == APP_CONTAINER)
                .or(containers.first())?;
            let (repository, tag) = container.image.as_deref()?.rsplit_once(':')?;
            (!tag.contains('/') && !repository.is_empty()).then_some(tag)
        };
        let version = annotation(ANNOTATION_EXPRESS_VERSION)
            .map(String::as_str)
            .or_else(image_tag)
            .map(|v| shared(interner, v));
        let controllers = meta
            .owner_references
            .iter()
            .flatten()
            .filter(|r| r.controller == Some(true))
            .map(|r| PodOwner {
                kind: shared(interner, &r.kind),
                name: r.name.as_str().into(),
                uid: r.uid.as_str().into(),
            })
            .collect();
        let status = pod.status.as_ref().map(|s| PodStatusView {
            phase: s.phase.as_deref().map(|p| shared(interner, p)),
            conditions: s
                .conditions
                .iter()
                .flatten()
                .map(|c| PodConditionView {
                    type_: shared(interner, &c.type_),
                    status: shared(interner, &c.status),
                    last_transition: c.last_transition_time.as_ref().map(|t| t.0),
                })
                .collect(),
            restarts: s
                .container_statuses
                .iter()
                .flatten()
                .map(|c| c.restart_count)
                .sum(),
        });
        PodView {
            namespace: meta.namespace.as_deref().map(|n| shared(interner, n)),
            name: meta.name.as_deref().unwrap_or_default().into(),
            uid: meta.uid.as_deref().map(Into::into),
            resource_version: number(meta.resource_version.as_deref()),
            cluster: label(LABEL_CLUSTER),
            revision: label(LABEL_DEPLOYMENT_REVISION),
            controllers,
            version,
            app_state: annotation(ANNOTATION_APP_STATE).map(|v| v.as_str().into()),
            shutdown_protection: annotation(ANNOTATION_SHUTDOWN_PROTECTION)
                .map(|v| v.as_str().into()),
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
            deleted: meta.deletion_timestamp.as_ref().map(|t| t.0),
            status,
        }
    }

    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    pub fn terminating(&self) -> bool {
        self.deleted.is_some()
    }

    /// Whether a controller owner reference names the node `name` of `kind` (and, when given,
    /// that node's uid).
    pub fn controlled_by(&self, kind: NodeKind, name: &str, uid: Option<&str>) -> bool {
        self.controllers.iter().any(|owner| {
            &*owner.kind == kind.as_str()
                && &*owner.name == name
                && uid.is_none_or(|uid| uid == &*owner.uid)
        })
    }
}

impl From<&Pod> for PodView {
    fn from(pod: &Pod) -> Self {
        PodView::new(pod, None)
    }
}

/// A ControllerRevision keeping a node's revision: which node, which revision, its number in
/// the node's history, and, only where a reader asked for it, the kept spec. The operator's
/// cache keeps no body (it fetches the one revision a rollback needs); the CLI's `revisions`
/// reads them whole.
#[derive(Clone, Debug, PartialEq)]
pub struct RevisionView {
    pub namespace: Option<Arc<str>>,
    pub name: Box<str>,
    pub resource_version: Option<u64>,
    pub cluster: Option<Arc<str>>,
    /// Its `express.dev/node` label.
    pub node: Option<Box<str>>,
    /// Its `express.dev/kind` label, read as a node kind.
    pub kind: Option<NodeKind>,
    /// Its `express.dev/deployment-revision` label.
    pub revision: Option<Arc<str>>,
    /// Its `revision` number, ordering it among the node's others.
    pub number: Option<i64>,
    /// The spec it keeps, when read with [`RevisionView::with_body`] and it is one.
    pub kept: Option<Arc<KeptSpec>>,
}

impl RevisionView {
    /// The view of `revision` without its body.
    pub fn new(revision: &ControllerRevision, interner: Option<&Interner>) -> RevisionView {
        let meta = &revision.metadata;
        let label = |key: &str| meta.labels.as_ref().and_then(|l| l.get(key));
        RevisionView {
            namespace: meta.namespace.as_deref().map(|n| shared(interner, n)),
            name: meta.name.as_deref().unwrap_or_default().into(),
            resource_version: number(meta.resource_version.as_deref()),
            cluster: label(LABEL_CLUSTER).map(|v| shared(interner, v)),
            node: label(LABEL_NODE).map(|v| v.as_str().into()),
            kind: label(LABEL_KIND).and_then(|v| {
                [NodeKind::Backend, NodeKind::Frontend]
                    .into_iter()
                    .find(|k| k.label_value() == v)
            }),
            revision: label(LABEL_DEPLOYMENT_REVISION).map(|v| shared(interner, v)),
            number: revision.revision,
            kept: None,
        }
    }

    /// The view of `revision` with the spec it keeps (None when its body is not one).
    pub fn with_body(revision: &ControllerRevision) -> RevisionView {
        RevisionView {
            kept: serde_json::from_value(revision.data.0.clone())
                .ok()
                .map(Arc::new),
            ..RevisionView::new(revision, None)
        }
    }

    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The revision it keeps for the node `name` of `kind`; None when it keeps another node's.
    pub fn kept_for(&self, kind: NodeKind, name: &str) -> Option<&str> {
        (self.kind == Some(kind) && self.node.as_deref() == Some(name))
            .then_some(self.revision.as_deref())?
    }
}

impl From<&ControllerRevision> for RevisionView {
    fn from(revision: &ControllerRevision) -> Self {
        RevisionView::new(revision, None)
    }
}

/// A resourceVersion as a number; None when it is not one.
fn number(version: Option<&str>) -> Option<u64> {
    version.and_then(|v| v.parse().ok())
}
