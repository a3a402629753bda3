//! A ControllerRevision as the node revision it keeps.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;

use super::{Interner, shared};
use crate::NodeKind;
use crate::history::KeptSpec;
use crate::keys::{LABEL_DEPLOYMENT_REVISION, LABEL_KIND, LABEL_NODE};

/// A ControllerRevision keeping a node's revision: which node, which revision, its number in
/// the node's history, and, only where a reader asked for it, the kept spec. The operator's
/// cache keeps no body (it fetches the one revision a rollback needs); the CLI's `revisions`
/// reads them whole.
#[derive(Clone, Debug, PartialEq)]
pub struct RevisionView {
    pub namespace: Option<Arc<str>>,
    pub name: Box<str>,
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
