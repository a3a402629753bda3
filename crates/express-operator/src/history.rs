//! Revision history (DESIGN section 5): every revision a node's pod is created on is kept as a
//! ControllerRevision owned by the node, holding the effective spec the pod was built from.
//! A rollback builds the pod from it; history is pruned to `revisionHistoryLimit`, never
//! dropping a revision the node runs, wants, or may return to.

use std::collections::BTreeMap;

use express_api::EffectiveNodeSpec;
use express_api::history::KeptSpec;
pub use express_api::history::revision_name;
use express_api::keys::{LABEL_CLUSTER, LABEL_DEPLOYMENT_REVISION, LABEL_KIND, LABEL_NODE};
use express_api::views::RevisionView;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;

use crate::pods::NodeIdentity;

/// The ControllerRevisions of one node, oldest first.
pub fn of_node<'a>(
    all: impl IntoIterator<Item = &'a RevisionView>,
    node: &NodeIdentity,
) -> Vec<&'a RevisionView> {
    let mut revisions: Vec<&RevisionView> = all
        .into_iter()
        .filter(|r| r.kept_for(node.kind, &node.name).is_some())
        .collect();
    revisions.sort_by_key(|r| r.number);
    revisions
}

/// A new ControllerRevision keeping `spec` as `revision` of a node; `number` orders it among
/// the node's others.
pub fn build(
    node: &NodeIdentity,
    spec: &EffectiveNodeSpec,
    revision: &str,
    number: i64,
) -> Result<ControllerRevision, String> {
    let data = serde_json::to_value(KeptSpec::from(spec)).map_err(|e| e.to_string())?;
    let labels = BTreeMap::from([
        (LABEL_CLUSTER.to_owned(), node.cluster_name.clone()),
        (LABEL_NODE.to_owned(), node.name.clone()),
        (LABEL_KIND.to_owned(), node.kind.label_value().to_owned()),
        (LABEL_DEPLOYMENT_REVISION.to_owned(), revision.to_owned()),
    ]);
    Ok(ControllerRevision {
        metadata: ObjectMeta {
            name: Some(revision_name(&node.name, revision)),
            namespace: Some(node.namespace.clone()),
            labels: Some(labels),
            owner_references: Some(vec![node.owner.clone()]),
            ..ObjectMeta::default()
        },
        data: RawExtension(data),
        revision: Some(number),
    })
}

/// The effective spec a ControllerRevision keeps.
pub fn spec_of(revision: &ControllerRevision) -> Result<EffectiveNodeSpec, String> {
    let kept: KeptSpec = serde_json::from_value(revision.data.0.clone())
        .map_err(|e| format!("the ControllerRevision's data is not a kept spec: {e}"))?;
    Ok(kept.into())
}

/// Names of the node's ControllerRevisions to delete so that at most `limit` remain, oldest
/// first, never one whose revision is `protected`.
pub fn to_prune(node_revisions: &[&RevisionView], limit: usize, protected: &[&str]) -> Vec<String> {
    let mut excess = node_revisions.len().saturating_sub(limit);
    let mut names = Vec::new();
    for revision in node_revisions {
        if excess == 0 {
            break;
        }
        let keep = revision
            .revision
            .as_deref()
            .is_some_and(|r| protected.contains(&r));
        if !keep {
            names.push(revision.name().into_owned());
            excess -= 1;
        }
    }
    names
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]
    use super::*;
    use express_api::NodeKind;

    fn node() -> NodeIdentity {
        crate::pods::test_identity(NodeKind::Frontend, "acme-fe1", "u1")
    }

    fn spec(version: &str) -> EffectiveNodeSpec {
        EffectiveNodeSpec {
            express_version: version.into(),
            config_changeset: Some("c1".into()),
            image_repository: "reg/express".into(),
            pod_template: serde_json::json!({"spec": {"priorityClassName": "high"}}),
        }
    }

    #[test]
    fn a_kept_spec_reads_back_as_written() {
        let kept = build(&node(), &spec("v1"), "r1", 3).unwrap();
        assert_eq!(kept.metadata.name.as_deref(), Some("acme-fe1-r1"));
        assert_eq!(kept.revision, Some(3));
        assert_eq!(spec_of(&kept).unwrap(), spec("v1"));
        let owner = &kept.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("Frontend", Some(true))
        );
    }

    #[test]
    fn pruning_drops_the_oldest_unprotected_first() {
        let all: Vec<RevisionView> = (1..=5)
            .map(|n| RevisionView::from(&build(&node(), &spec("v"), &format!("r{n}"), n).unwrap()))
            .collect();
        let mine = of_node(&all, &node());
        assert_eq!(to_prune(&mine, 5, &[]), Vec::<String>::new());
        assert_eq!(to_prune(&mine, 3, &[]), vec!["acme-fe1-r1", "acme-fe1-r2"]);
        assert_eq!(
            to_prune(&mine, 3, &["r1"]),
            vec!["acme-fe1-r2", "acme-fe1-r3"]
        );
        assert_eq!(to_prune(&mine, 0, &["r5"]).len(), 4);
    }
}
