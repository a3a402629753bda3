//! A ControllerRevision as the node revision it keeps.

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;

use super::{Interner, shared};
use crate::NodeKind;
use crate::history::{KeptSpec, revision_name};
use crate::keys::{LABEL_DEPLOYMENT_REVISION, LABEL_KIND, LABEL_NODE};

/// A ControllerRevision keeping a node's revision: which node, which revision, its number in
/// the node's history, and, only where a reader asked for it, the kept spec. The operator's
/// cache keeps no body (it fetches the one revision a rollback needs); the CLI's `revisions`
/// reads them whole.
///
/// A settled fleet keeps ten of these a node, so the view is 80 bytes: its name is not kept
/// when it is the one the operator gives a node's revision ([`revision_name`] of its node and
/// revision), and what few views carry (another name, a kept spec) is behind one pointer.
#[derive(Clone, Debug, PartialEq)]
pub struct RevisionView {
    pub namespace: Option<Arc<str>>,
    /// Its `express.dev/node` label.
    pub node: Option<Box<str>>,
    /// Its `express.dev/kind` label, read as a node kind.
    pub kind: Option<NodeKind>,
    /// Its `express.dev/deployment-revision` label.
    pub revision: Option<Arc<str>>,
    /// Its `revision` number, ordering it among the node's others.
    pub number: Option<i64>,
    rare: Option<Box<Rare>>,
}

/// What few revision views carry.
#[derive(Clone, Debug, Default, PartialEq)]
struct Rare {
    /// Its name, when it is not [`revision_name`] of its labels.
    name: Option<Box<str>>,
    /// The spec it keeps, when read with [`RevisionView::with_body`] and it is one.
    kept: Option<Arc<KeptSpec>>,
}

impl RevisionView {
    /// The view of `revision` without its body.
    pub fn new(revision: &ControllerRevision, interner: Option<&Interner>) -> RevisionView {
        let meta = &revision.metadata;
        let label = |key: &str| meta.labels.as_ref().and_then(|l| l.get(key));
        let mut view = RevisionView {
            namespace: meta.namespace.as_deref().map(|n| shared(interner, n)),
            node: label(LABEL_NODE).map(|v| v.as_str().into()),
            kind: label(LABEL_KIND).and_then(|v| {
                [NodeKind::Backend, NodeKind::Frontend]
                    .into_iter()
                    .find(|k| k.label_value() == v)
            }),
            revision: label(LABEL_DEPLOYMENT_REVISION).map(|v| shared(interner, v)),
            number: revision.revision,
            rare: None,
        };
        let name = meta.name.as_deref().unwrap_or_default();
        if !view.is_named(name) {
            view.rare = Some(Box::new(Rare {
                name: Some(name.into()),
                kept: None,
            }));
        }
        view
    }

    /// The view of `revision` with the spec it keeps (None when its body is not one).
    pub fn with_body(revision: &ControllerRevision) -> RevisionView {
        let mut view = RevisionView::new(revision, None);
        let kept = serde_json::from_value(revision.data.0.clone())
            .ok()
            .map(Arc::new);
        if kept.is_some() {
            view.rare.get_or_insert_default().kept = kept;
        }
        view
    }

    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// Its name.
    pub fn name(&self) -> Cow<'_, str> {
        match (self.unusual_name(), &self.node, &self.revision) {
            (Some(name), _, _) => Cow::Borrowed(name),
            (None, Some(node), Some(revision)) => Cow::Owned(revision_name(node, revision)),
            // Only a view whose name is derived reaches here, and it has both labels.
            (None, _, _) => Cow::Borrowed(""),
        }
    }

    /// Whether it is named `name` (without building its name).
    pub fn is_named(&self, name: &str) -> bool {
        if let Some(unusual) = self.unusual_name() {
            return unusual == name;
        }
        let (Some(node), Some(revision)) = (&self.node, &self.revision) else {
            return false;
        };
        name.strip_prefix(&**node)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|rest| rest == &**revision)
    }

    fn unusual_name(&self) -> Option<&str> {
        self.rare.as_ref()?.name.as_deref()
    }

    /// The spec it keeps, when read with [`RevisionView::with_body`] and it is one.
    pub fn kept(&self) -> Option<&KeptSpec> {
        self.rare.as_ref()?.kept.as_deref()
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    fn revision(name: &str, labels: &[(&str, &str)]) -> ControllerRevision {
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from_iter(
                    labels.iter().map(|(k, v)| (k.to_string(), v.to_string())),
                )),
                ..ObjectMeta::default()
            },
            ..ControllerRevision::default()
        }
    }

    #[test]
    fn a_revision_keeps_its_name_only_when_its_labels_do_not_say_it() {
        let labels = [(LABEL_NODE, "acme-fe1"), (LABEL_DEPLOYMENT_REVISION, "r1")];
        type Labels<'a> = &'a [(&'a str, &'a str)];
        // (name, labels, whether the view keeps the name)
        let rows: [(&str, Labels, bool); 5] = [
            ("acme-fe1-r1", &labels, false),
            ("acme-fe1-r2", &labels, true),
            ("acme-fe1r1", &labels, true),
            ("acme-fe1-r1", &labels[..1], true),
            ("", &[], true),
        ];
        for (name, labels, kept) in rows {
            let view = RevisionView::from(&revision(name, labels));
            assert_eq!(view.name(), name, "{name} {labels:?}");
            assert_eq!(view.unusual_name().is_some(), kept, "{name} {labels:?}");
            assert!(view.is_named(name), "{name} {labels:?}");
            assert!(!view.is_named("acme-fe1-r3"), "{name} {labels:?}");
        }
    }
}
