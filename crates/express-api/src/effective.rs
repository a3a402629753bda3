//! A node's effective spec and its deployment revision (DESIGN section 2).
//!
//! The effective spec is what the node's pod is built from: the ExpressCluster's defaults for the
//! node's kind, overridden field by field by the node object. The deployment revision is a short
//! hash of exactly the pod-relevant part of it (version, changeset, image repository, pod
//! template), so `up`, dependencies and metadata never change it, and neither does the order of
//! keys in the YAML a user wrote.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::keys::{DEFAULT_IMAGE_REPOSITORY, LABEL_DEPLOYMENT_REVISION};
use crate::names::{label_key_problem, label_value_problem};
use crate::{NodeDefaults, NodeKind, NodeSpec};

/// Number of hex digits of the SHA-256 kept in a revision. 40 bits: collisions among the few
/// dozen revisions a node ever has are out of reach, and the value stays readable in a column.
const REVISION_HEX_DIGITS: usize = 10;

/// Bumped only if the hashed material ever has to change shape; part of the hashed bytes.
/// The revision algorithm's version: hashed in with every revision, and reported by the tools
/// that compare revisions computed by different builds.
pub const REVISION_SCHEME: &str = "express.dev/revision/v1";

/// Why a node's effective spec cannot be computed. Each message is written for the SRE reading
/// the node's status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EffectiveSpecError {
    #[error(
        "no expressVersion: set spec.expressVersion on the node or spec.defaults.{kind_field}.expressVersion on its ExpressCluster"
    )]
    MissingVersion { kind_field: &'static str },
    #[error(
        "expressVersion {0:?} is not a valid image tag (letters, digits, '_', '.', '-'; at most 128)"
    )]
    InvalidVersion(String),
    #[error("image {0:?} is invalid: {1}")]
    InvalidImage(String, &'static str),
    #[error("podTemplate is invalid: {0}")]
    InvalidPodTemplate(String),
    #[error("podTemplate.metadata.labels[{key:?}] would make an invalid pod: {why}")]
    InvalidPodLabel { key: String, why: String },
}

/// The pod-relevant spec of one node after defaults are applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveNodeSpec {
    pub express_version: String,
    pub config_changeset: Option<String>,
    /// Image repository without tag.
    pub image_repository: String,
    /// Merged pod template overrides (a JSON object, possibly empty).
    pub pod_template: Value,
}

impl EffectiveNodeSpec {
    /// Full image reference: repository and expressVersion as the tag.
    pub fn image(&self) -> String {
        format!("{}:{}", self.image_repository, self.express_version)
    }

    /// The revision computed from this spec (ignores any label override): a digest of
    /// [`REVISION_SCHEME`] and [`EffectiveNodeSpec::canonical`].
    pub fn computed_revision(&self) -> String {
        let canonical = self.canonical();
        let mut hasher = Sha256::new();
        hasher.update(REVISION_SCHEME.as_bytes());
        hasher.update([0u8]);
        hasher.update(canonical.as_bytes());
        let digest = hasher.finalize();
        let mut hex = String::with_capacity(REVISION_HEX_DIGITS);
        for byte in digest.iter().take(REVISION_HEX_DIGITS / 2) {
            hex.push_str(&format!("{byte:02x}"));
        }
        hex
    }

    /// Exactly the text the revision hashes (after the scheme): the spec's fields as canonical
    /// JSON, keys sorted, no white space.
    pub fn canonical(&self) -> String {
        let mut material = Map::new();
        material.insert(
            "expressVersion".into(),
            Value::String(self.express_version.clone()),
        );
        if let Some(changeset) = &self.config_changeset {
            material.insert("configChangeset".into(), Value::String(changeset.clone()));
        }
        material.insert("image".into(), Value::String(self.image_repository.clone()));
        material.insert("podTemplate".into(), self.pod_template.clone());

        let mut canonical = String::new();
        write_canonical(&Value::Object(material), &mut canonical);
        canonical
    }

    /// The desired revision: the `express.dev/deployment-revision` label when the node carries
    /// one (control from Helm), else the computed revision.
    pub fn desired_revision(&self, node_labels: Option<&BTreeMap<String, String>>) -> String {
        match revision_override(node_labels) {
            Some(pinned) => pinned.to_owned(),
            None => self.computed_revision(),
        }
    }
}

/// The revision a node object pins through its label, if any (blank values are ignored).
pub fn revision_override(node_labels: Option<&BTreeMap<String, String>>) -> Option<&str> {
    node_labels
        .and_then(|labels| labels.get(LABEL_DEPLOYMENT_REVISION))
        .map(|value| value.trim())
        .filter(|value| !value.is_empty())
}

/// Merges cluster defaults for the node's kind with the node's own fields.
pub fn effective_spec(
    kind: NodeKind,
    node: &NodeSpec,
    defaults: Option<&NodeDefaults>,
) -> Result<EffectiveNodeSpec, EffectiveSpecError> {
    let kind_field = kind.label_value();
    let express_version = non_blank(node.express_version.as_deref())
        .or_else(|| non_blank(defaults.and_then(|d| d.express_version.as_deref())))
        .ok_or(EffectiveSpecError::MissingVersion { kind_field })?
        .to_owned();
    validate_tag(&express_version)?;

    let config_changeset = non_blank(node.config_changeset.as_deref())
        .or_else(|| non_blank(defaults.and_then(|d| d.config_changeset.as_deref())))
        .map(str::to_owned);

    let image_repository = non_blank(node.image.as_deref())
        .or_else(|| non_blank(defaults.and_then(|d| d.image.as_deref())))
        .unwrap_or(DEFAULT_IMAGE_REPOSITORY)
        .to_owned();
    validate_repository(&image_repository)?;

    let mut pod_template = Value::Object(Map::new());
    for layer in [
        defaults.and_then(|d| d.pod_template.as_ref()),
        node.pod_template.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        if !layer.is_object() {
            return Err(EffectiveSpecError::InvalidPodTemplate(
                "must be an object (a PodTemplateSpec)".into(),
            ));
        }
        merge_into(&mut pod_template, layer);
    }
    strip_nulls(&mut pod_template);
    let template = serde_json::from_value::<PodTemplateSpec>(pod_template.clone())
        .map_err(|err| EffectiveSpecError::InvalidPodTemplate(err.to_string()))?;
    // The template's labels are the pod's: one the API server would refuse stops the node here.
    let labels = template.metadata.and_then(|m| m.labels).unwrap_or_default();
    for (key, value) in &labels {
        let why = label_key_problem(key)
            .map(|why| format!("the key {why}"))
            .or_else(|| label_value_problem(value).map(|why| format!("the value {why}")));
        if let Some(why) = why {
            return Err(EffectiveSpecError::InvalidPodLabel {
                key: key.clone(),
                why,
            });
        }
    }

    Ok(EffectiveNodeSpec {
        express_version,
        config_changeset,
        image_repository,
        pod_template,
    })
}

fn non_blank(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

fn validate_tag(tag: &str) -> Result<(), EffectiveSpecError> {
    let mut chars = tag.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if first_ok && rest_ok && tag.len() <= 128 {
        Ok(())
    } else {
        Err(EffectiveSpecError::InvalidVersion(tag.to_owned()))
    }
}

fn validate_repository(repository: &str) -> Result<(), EffectiveSpecError> {
    let invalid = |why| Err(EffectiveSpecError::InvalidImage(repository.to_owned(), why));
    if repository
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return invalid("contains white space");
    }
    if repository.contains('@') {
        return invalid("must not carry a digest; the tag is expressVersion");
    }
    let last_segment = repository.rsplit('/').next().unwrap_or(repository);
    if last_segment.contains(':') {
        return invalid("must not carry a tag; the tag is expressVersion");
    }
    Ok(())
}

/// Overlays `layer` onto `base`: objects merge key by key (a `null` in the layer removes the
/// key, as in a JSON merge patch); lists whose items are all objects with a `name` (containers,
/// env, volumes, ports...) merge item by item on the name, like Kubernetes' strategic merge;
/// anything else is replaced.
pub fn merge_into(base: &mut Value, layer: &Value) {
    match (base, layer) {
        (Value::Object(base_map), Value::Object(layer_map)) => {
            for (key, layer_value) in layer_map {
                if layer_value.is_null() {
                    base_map.remove(key);
                    continue;
                }
                match base_map.get_mut(key) {
                    Some(base_value) => merge_into(base_value, layer_value),
                    None => {
                        base_map.insert(key.clone(), without_nulls(layer_value));
                    }
                }
            }
        }
        (Value::Array(base_items), Value::Array(layer_items))
            if is_named_list(base_items) && is_named_list(layer_items) =>
        {
            for layer_item in layer_items {
                let name = layer_item.get("name");
                match base_items.iter_mut().find(|item| item.get("name") == name) {
                    Some(base_item) => merge_into(base_item, layer_item),
                    None => base_items.push(without_nulls(layer_item)),
                }
            }
        }
        (base, layer) => *base = without_nulls(layer),
    }
}

/// A copy of a layer value as it lands in the merged template: a `null` member means "remove",
/// so it never survives into the result.
fn without_nulls(layer: &Value) -> Value {
    let mut copy = layer.clone();
    strip_nulls(&mut copy);
    copy
}

fn is_named_list(items: &[Value]) -> bool {
    items
        .iter()
        .all(|item| item.get("name").is_some_and(Value::is_string))
}

fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// JSON with object keys sorted at every level, whatever map type serde_json was built with.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn node(version: Option<&str>) -> NodeSpec {
        NodeSpec {
            express_version: version.map(str::to_owned),
            ..NodeSpec::for_cluster("acme")
        }
    }

    /// Revisions are part of the contract with pods already running: if this test fails, every
    /// pod in every cluster would be replaced on upgrade of the operator. The values were
    /// computed independently (Python hashlib over the canonical JSON), not copied from this code.
    #[test]
    fn golden_revisions() {
        let plain = effective_spec(NodeKind::Frontend, &node(Some("express-e689.154")), None)
            .expect("valid");
        assert_eq!(plain.computed_revision(), "c74ea4e168");

        let full = NodeSpec {
            config_changeset: Some("867fc47c23".into()),
            image: Some("registry.example/express".into()),
            pod_template: Some(json!({
                "metadata": {"annotations": {"kubesim.dev/startup-seconds": "3"}},
                "spec": {"containers": [{"name": "express", "resources": {"limits": {"cpu": "2"}}}]}
            })),
            ..node(Some("express-e689.154"))
        };
        let full = effective_spec(NodeKind::Backend, &full, None).expect("valid");
        assert_eq!(full.computed_revision(), "98839b3ee7");
        assert_eq!(full.image(), "registry.example/express:express-e689.154");
    }

    #[test]
    fn revision_ignores_up_dependencies_and_key_order() {
        let a = NodeSpec {
            pod_template: Some(json!({"metadata": {"labels": {"a": "1", "b": "2"}}})),
            ..node(Some("v1"))
        };
        let b = NodeSpec {
            up: false,
            pod_template: Some(json!({"metadata": {"labels": {"b": "2", "a": "1"}}})),
            deployment_dependencies: Some(Default::default()),
            cluster_config: crate::ClusterConfig {
                cluster_name: "acme".into(),
                tenant_id: Some(7),
                tenant_name: Some("acme".into()),
            },
            ..node(Some("v1"))
        };
        let rev = |n: &NodeSpec| {
            effective_spec(NodeKind::Frontend, n, None)
                .expect("valid")
                .computed_revision()
        };
        assert_eq!(rev(&a), rev(&b));
        assert_ne!(rev(&a), rev(&node(Some("v1"))));
        assert_ne!(rev(&node(Some("v1"))), rev(&node(Some("v2"))));
    }

    #[test]
    fn absent_and_empty_pod_template_are_the_same_revision() {
        let empty = NodeSpec {
            pod_template: Some(json!({})),
            ..node(Some("v1"))
        };
        let a = effective_spec(NodeKind::Frontend, &node(Some("v1")), None).expect("valid");
        let b = effective_spec(NodeKind::Frontend, &empty, None).expect("valid");
        assert_eq!(a.computed_revision(), b.computed_revision());
    }

    #[test]
    fn defaults_apply_and_node_fields_override() {
        let defaults = NodeDefaults {
            express_version: Some("v1".into()),
            config_changeset: Some("c1".into()),
            image: Some("reg/express".into()),
            pod_template: Some(json!({"spec": {"containers": [
                {"name": "express", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
            ]}})),
        };
        let inherited =
            effective_spec(NodeKind::Frontend, &node(None), Some(&defaults)).expect("valid");
        assert_eq!(inherited.express_version, "v1");
        assert_eq!(inherited.config_changeset.as_deref(), Some("c1"));
        assert_eq!(inherited.image(), "reg/express:v1");

        let overriding = NodeSpec {
            config_changeset: Some("c2".into()),
            pod_template: Some(json!({"spec": {"containers": [
                {"name": "express", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]}
            ]}})),
            ..node(Some("v2"))
        };
        let merged =
            effective_spec(NodeKind::Frontend, &overriding, Some(&defaults)).expect("valid");
        assert_eq!(merged.express_version, "v2");
        assert_eq!(merged.config_changeset.as_deref(), Some("c2"));
        assert_eq!(
            merged.pod_template,
            json!({"spec": {"containers": [{"name": "express", "env": [
                {"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}
            ]}]}})
        );
    }

    #[test]
    fn null_in_node_template_removes_a_default() {
        let defaults = NodeDefaults {
            express_version: Some("v1".into()),
            pod_template: Some(json!({"metadata": {"annotations": {"a": "1", "b": "2"}}})),
            ..Default::default()
        };
        let n = NodeSpec {
            pod_template: Some(json!({"metadata": {"annotations": {"a": null}}})),
            ..node(None)
        };
        let spec = effective_spec(NodeKind::Backend, &n, Some(&defaults)).expect("valid");
        assert_eq!(
            spec.pod_template,
            json!({"metadata": {"annotations": {"b": "2"}}})
        );
    }

    #[test]
    fn label_overrides_revision() {
        let spec = effective_spec(NodeKind::Frontend, &node(Some("v1")), None).expect("valid");
        let mut labels = BTreeMap::new();
        assert_eq!(
            spec.desired_revision(Some(&labels)),
            spec.computed_revision()
        );
        labels.insert(LABEL_DEPLOYMENT_REVISION.to_owned(), "helm-42".to_owned());
        assert_eq!(spec.desired_revision(Some(&labels)), "helm-42");
    }

    #[test]
    fn bad_input_gives_clear_errors() {
        let err = effective_spec(NodeKind::Frontend, &node(None), None).unwrap_err();
        assert!(
            err.to_string()
                .contains("spec.defaults.frontend.expressVersion"),
            "{err}"
        );

        let err = effective_spec(NodeKind::Frontend, &node(Some("v 1")), None).unwrap_err();
        assert_eq!(err, EffectiveSpecError::InvalidVersion("v 1".into()));

        let tagged = NodeSpec {
            image: Some("reg:5000/express:latest".into()),
            ..node(Some("v1"))
        };
        let err = effective_spec(NodeKind::Frontend, &tagged, None).unwrap_err();
        assert!(err.to_string().contains("must not carry a tag"), "{err}");
        let port_only = NodeSpec {
            image: Some("reg:5000/express".into()),
            ..node(Some("v1"))
        };
        assert!(effective_spec(NodeKind::Frontend, &port_only, None).is_ok());

        let bad_template = NodeSpec {
            pod_template: Some(json!({"spec": {"containers": "not-a-list"}})),
            ..node(Some("v1"))
        };
        let err = effective_spec(NodeKind::Frontend, &bad_template, None).unwrap_err();
        assert!(
            matches!(err, EffectiveSpecError::InvalidPodTemplate(_)),
            "{err}"
        );

        let scalar_template = NodeSpec {
            pod_template: Some(json!(3)),
            ..node(Some("v1"))
        };
        assert!(effective_spec(NodeKind::Frontend, &scalar_template, None).is_err());
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(|n| json!(n)),
            "[a-z]{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{1,3}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Merging never panics, and merging a layer twice is the same as merging it once.
        #[test]
        fn merge_is_idempotent(base in arb_json(), layer in arb_json()) {
            let mut once = base.clone();
            merge_into(&mut once, &layer);
            let mut twice = once.clone();
            merge_into(&mut twice, &layer);
            prop_assert_eq!(once, twice);
        }

        /// Whatever a user writes in podTemplate, computing the spec returns, never panics.
        #[test]
        fn effective_spec_never_panics(template in arb_json(), version in "\\PC{0,12}") {
            let n = NodeSpec { pod_template: Some(template), ..node(Some(&version)) };
            let _ = effective_spec(NodeKind::Frontend, &n, None);
        }
    }
}
