//! A ControllerRevision as the node revision it keeps.

use std::borrow::Cow;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use hashbrown::Equivalent;

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
/// A settled fleet keeps ten of these a node, so the view is 48 bytes (a 64-byte allocation
/// with its `Arc`): the node it belongs to (namespace, node label, kind) is one shared
/// [`HistoryOf`] for all of a node's revisions; its name is not kept when it is the one the
/// operator gives a node's revision ([`revision_name`] of its node and revision); and what few
/// views carry (another name, a kept spec) is behind one pointer.
#[derive(Clone, Debug, PartialEq)]
pub struct RevisionView {
    history: Arc<HistoryOf>,
    /// Its `express.dev/deployment-revision` label.
    pub revision: Option<Arc<str>>,
    /// Its `revision` number, ordering it among the node's others.
    pub number: Option<i64>,
    rare: Option<Box<Rare>>,
}

/// Which node's history a revision belongs to: its namespace, its `express.dev/node` label and
/// its `express.dev/kind` label read as a node kind.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct HistoryOf {
    namespace: Option<Arc<str>>,
    node: Option<Box<str>>,
    kind: Option<NodeKind>,
}

/// A [`HistoryOf`] as borrowed from a revision, to look the shared one up without building it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct HistoryKey<'a> {
    pub(super) namespace: Option<&'a str>,
    pub(super) node: Option<&'a str>,
    pub(super) kind: Option<NodeKind>,
}

impl HistoryKey<'_> {
    /// The history it names, its namespace made shared by `share`.
    pub(super) fn to_owned(self, share: impl FnOnce(&str) -> Arc<str>) -> HistoryOf {
        HistoryOf {
            namespace: self.namespace.map(share),
            node: self.node.map(Box::from),
            kind: self.kind,
        }
    }
}

impl HistoryOf {
    fn key(&self) -> HistoryKey<'_> {
        HistoryKey {
            namespace: self.namespace.as_deref(),
            node: self.node.as_deref(),
            kind: self.kind,
        }
    }
}

// A history hashes as its key, so that the interner finds one by the other.
impl Hash for HistoryOf {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl Equivalent<Arc<HistoryOf>> for HistoryKey<'_> {
    fn equivalent(&self, history: &Arc<HistoryOf>) -> bool {
        *self == history.key()
    }
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
        let history = HistoryKey {
            namespace: meta.namespace.as_deref(),
            node: label(LABEL_NODE).map(String::as_str),
            kind: label(LABEL_KIND).and_then(|v| {
                [NodeKind::Backend, NodeKind::Frontend]
                    .into_iter()
                    .find(|k| k.label_value() == v)
            }),
        };
        let mut view = RevisionView {
            history: match interner {
                Some(interner) => interner.history_of(history),
                None => Arc::new(history.to_owned(|n| Arc::from(n))),
            },
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
        self.history.namespace.as_deref()
    }

    /// Its `express.dev/node` label.
    pub fn node(&self) -> Option<&str> {
        self.history.node.as_deref()
    }

    /// Its `express.dev/kind` label, read as a node kind.
    pub fn kind(&self) -> Option<NodeKind> {
        self.history.kind
    }

    /// Its name.
    pub fn name(&self) -> Cow<'_, str> {
        match (self.unusual_name(), self.node(), &self.revision) {
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
        let (Some(node), Some(revision)) = (self.node(), &self.revision) else {
            return false;
        };
        name.strip_prefix(node)
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
        (self.kind() == Some(kind) && self.node() == Some(name))
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

    #[test]
    fn a_nodes_revisions_share_one_history_through_the_interner() {
        let in_namespace = |namespace: &str, name: &str, labels: &[(&str, &str)]| {
            let mut r = revision(name, labels);
            r.metadata.namespace = Some(namespace.into());
            r
        };
        fn fe1(revision: &str) -> [(&'static str, &str); 3] {
            [
                (LABEL_NODE, "acme-fe1"),
                (LABEL_KIND, "frontend"),
                (LABEL_DEPLOYMENT_REVISION, revision),
            ]
        }
        let interner = Interner::default();
        let view = |r: &ControllerRevision| RevisionView::new(r, Some(&interner));
        let r1 = view(&in_namespace("a", "acme-fe1-r1", &fe1("r1")));
        let r2 = view(&in_namespace("a", "acme-fe1-r2", &fe1("r2")));
        assert!(Arc::ptr_eq(&r1.history, &r2.history));
        assert_eq!(
            (r2.namespace(), r2.node(), r2.kind()),
            (Some("a"), Some("acme-fe1"), Some(NodeKind::Frontend))
        );
        // Another namespace, another node, another kind, or no labels: another history.
        let others = [
            in_namespace("b", "acme-fe1-r1", &fe1("r1")),
            in_namespace("a", "acme-fe2-r1", &[(LABEL_NODE, "acme-fe2")]),
            in_namespace("a", "acme-fe1-r1", &[(LABEL_NODE, "acme-fe1")]),
            in_namespace("a", "x", &[]),
            revision("acme-fe1-r1", &fe1("r1")),
        ];
        for other in &others {
            let other = view(other);
            assert!(!Arc::ptr_eq(&r1.history, &other.history), "{other:?}");
            assert_ne!(r1.history, other.history);
        }
        // Each shared once more: two views of one revision, read again, are the same history.
        for other in &others {
            assert!(Arc::ptr_eq(&view(other).history, &view(other).history));
        }
        // Without an interner (a CLI reading once) the view is the same, unshared.
        let alone = RevisionView::from(&in_namespace("a", "acme-fe1-r1", &fe1("r1")));
        assert_eq!(alone, r1);
        assert!(!Arc::ptr_eq(&alone.history, &r1.history));
    }

    #[test]
    fn the_interner_forgets_histories_no_view_holds_once_it_has_doubled() {
        let interner = Interner::default();
        let held = RevisionView::new(
            &revision("kept-r1", &[(LABEL_NODE, "kept")]),
            Some(&interner),
        );
        for i in 0..2048 {
            let node = format!("n{i}");
            RevisionView::new(&revision("x", &[(LABEL_NODE, &node)]), Some(&interner));
        }
        // Pruned at 1,024 and again at 2,048 or so: far fewer than the 2,049 histories seen,
        // and the one still held is still the shared one.
        assert!(interner.len() < 1500, "{}", interner.len());
        let again = RevisionView::new(
            &revision("kept-r2", &[(LABEL_NODE, "kept")]),
            Some(&interner),
        );
        assert!(Arc::ptr_eq(&held.history, &again.history));
    }
}
