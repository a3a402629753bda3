//! The data format of the ControllerRevisions that keep a node's revisions (DESIGN section 5):
//! their name, labels and `data`. The operator writes them; rollbacks and the CLI's history
//! and revision commands read them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::keys::{LABEL_DEPLOYMENT_REVISION, LABEL_KIND, LABEL_NODE};
use crate::{EffectiveNodeSpec, NodeKind};

/// What a ControllerRevision's `data` keeps: a node's effective spec, in a stable JSON shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptSpec {
    pub express_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_changeset: Option<String>,
    pub image_repository: String,
    #[serde(default)]
    pub pod_template: serde_json::Value,
}

impl From<&EffectiveNodeSpec> for KeptSpec {
    fn from(spec: &EffectiveNodeSpec) -> Self {
        KeptSpec {
            express_version: spec.express_version.clone(),
            config_changeset: spec.config_changeset.clone(),
            image_repository: spec.image_repository.clone(),
            pod_template: spec.pod_template.clone(),
        }
    }
}

impl From<KeptSpec> for EffectiveNodeSpec {
    fn from(kept: KeptSpec) -> Self {
        EffectiveNodeSpec {
            express_version: kept.express_version,
            config_changeset: kept.config_changeset,
            image_repository: kept.image_repository,
            pod_template: kept.pod_template,
        }
    }
}

/// The ControllerRevision name for a node's revision.
pub fn revision_name(node: &str, revision: &str) -> String {
    format!("{node}-{revision}")
}

/// The revision a ControllerRevision keeps for the node `name` of `kind`, judged by its labels;
/// None when it keeps another node's.
pub fn kept_revision_of<'a>(
    labels: Option<&'a BTreeMap<String, String>>,
    kind: NodeKind,
    name: &str,
) -> Option<&'a str> {
    let labels = labels?;
    let is = |key: &str, value: &str| labels.get(key).map(String::as_str) == Some(value);
    (is(LABEL_NODE, name) && is(LABEL_KIND, kind.label_value()))
        .then(|| labels.get(LABEL_DEPLOYMENT_REVISION).map(String::as_str))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_is_kept_for_its_node_and_kind_only() {
        let labels: BTreeMap<String, String> = [
            (LABEL_NODE, "acme-fe1"),
            (LABEL_KIND, "frontend"),
            (LABEL_DEPLOYMENT_REVISION, "r1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let of = |kind, name| kept_revision_of(Some(&labels), kind, name);
        assert_eq!(of(NodeKind::Frontend, "acme-fe1"), Some("r1"));
        assert_eq!(of(NodeKind::Backend, "acme-fe1"), None);
        assert_eq!(of(NodeKind::Frontend, "acme-fe2"), None);
        assert_eq!(kept_revision_of(None, NodeKind::Frontend, "acme-fe1"), None);
    }
}
