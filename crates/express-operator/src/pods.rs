//! Builds the pod of a node from its effective spec (DESIGN section 2, "Pods").

use std::collections::BTreeMap;

use express_api::keys::{
    ANNOTATION_CONFIG_CHANGESET, ANNOTATION_EXPRESS_VERSION, APP_CONTAINER, LABEL_CLUSTER,
    LABEL_DEPLOYMENT_REVISION, LABEL_KIND, LABEL_NODE,
};
use express_api::{EffectiveNodeSpec, NodeKind, NodeRef};
use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// Environment variable through which the application sees its configuration changeset.
pub const ENV_CONFIG_CHANGESET: &str = "EXPRESS_CONFIG_CHANGESET";

/// What identifies the node a pod (or a ControllerRevision) is built for.
#[derive(Clone, Debug)]
pub struct NodeIdentity {
    pub kind: NodeKind,
    pub name: String,
    pub namespace: String,
    pub cluster_name: String,
    /// The controller owner reference to the node, for its pod and its ControllerRevisions.
    pub owner: OwnerReference,
}

impl NodeIdentity {
    /// The identity of a stored node (None without a namespace or uid: not stored yet).
    pub fn of(node: NodeRef<'_>) -> Option<NodeIdentity> {
        Some(NodeIdentity {
            kind: node.kind(),
            name: node.name().to_owned(),
            namespace: node.namespace()?.to_owned(),
            cluster_name: node.cluster_name().to_owned(),
            owner: node.controller_owner_ref()?,
        })
    }
}

/// The revision a node's pod runs: its `express.dev/deployment-revision` label.
pub fn revision_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(LABEL_DEPLOYMENT_REVISION)
        .map(String::as_str)
}

/// The pod for a node: named after it, controlled by it, labelled with cluster, node, kind,
/// revision and the ring of the operator creating it (whose watch selects it), running the
/// effective image with the pod template's overrides merged in.
pub fn build_pod(
    node: &NodeIdentity,
    spec: &EffectiveNodeSpec,
    revision: &str,
    ring: &str,
) -> Result<Pod, String> {
    let template: PodTemplateSpec = serde_json::from_value(spec.pod_template.clone())
        .map_err(|e| format!("podTemplate: {e}"))?;
    let template_meta = template.metadata.unwrap_or_default();
    let mut labels: BTreeMap<String, String> = template_meta.labels.unwrap_or_default();
    labels.insert(LABEL_CLUSTER.into(), node.cluster_name.clone());
    labels.insert(LABEL_NODE.into(), node.name.clone());
    labels.insert(LABEL_KIND.into(), node.kind.label_value().into());
    labels.insert(LABEL_DEPLOYMENT_REVISION.into(), revision.into());
    express_api::rings::stamp(&mut labels, ring);
    let mut annotations: BTreeMap<String, String> = template_meta.annotations.unwrap_or_default();
    annotations.insert(
        ANNOTATION_EXPRESS_VERSION.into(),
        spec.express_version.clone(),
    );
    if let Some(changeset) = &spec.config_changeset {
        annotations.insert(ANNOTATION_CONFIG_CHANGESET.into(), changeset.clone());
    }

    let mut pod_spec: PodSpec = template.spec.unwrap_or_default();
    let position = pod_spec
        .containers
        .iter()
        .position(|c| c.name == APP_CONTAINER);
    let app = match position {
        Some(i) => &mut pod_spec.containers[i],
        None => {
            pod_spec.containers.insert(
                0,
                Container {
                    name: APP_CONTAINER.into(),
                    ..Container::default()
                },
            );
            &mut pod_spec.containers[0]
        }
    };
    app.image = Some(spec.image());
    if let Some(changeset) = &spec.config_changeset {
        let env = app.env.get_or_insert_with(Vec::new);
        env.retain(|e| e.name != ENV_CONFIG_CHANGESET);
        env.push(EnvVar {
            name: ENV_CONFIG_CHANGESET.into(),
            value: Some(changeset.clone()),
            value_from: None,
        });
    }

    Ok(Pod {
        metadata: ObjectMeta {
            name: Some(node.name.clone()),
            namespace: Some(node.namespace.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![node.owner.clone()]),
            ..ObjectMeta::default()
        },
        spec: Some(pod_spec),
        status: None,
    })
}

/// The identity of a stored node of `kind` in namespace `t`, cluster `acme`, for tests.
#[cfg(test)]
pub(crate) fn test_identity(kind: NodeKind, name: &str, uid: &str) -> NodeIdentity {
    let object = serde_json::json!({
        "apiVersion": "express.dev/v1alpha1",
        "kind": kind.to_string(),
        "metadata": {"name": name, "namespace": "t", "uid": uid},
        "spec": {"clusterConfig": {"clusterName": "acme"}},
    });
    let identity = match kind {
        NodeKind::Backend => serde_json::from_value::<express_api::Backend>(object)
            .ok()
            .and_then(|b| NodeIdentity::of(&express_api::views::NodeView::from(b))),
        NodeKind::Frontend => serde_json::from_value::<express_api::Frontend>(object)
            .ok()
            .and_then(|f| NodeIdentity::of(&express_api::views::NodeView::from(f))),
    };
    identity.unwrap_or_else(|| panic!("a test node {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use express_api::{NodeSpec, effective_spec};
    use serde_json::json;

    fn identity() -> NodeIdentity {
        test_identity(NodeKind::Frontend, "acme-fe1", "u-1")
    }

    #[test]
    fn pod_carries_identity_revision_image_and_overrides() {
        let node = NodeSpec {
            express_version: Some("v7".into()),
            config_changeset: Some("c1".into()),
            image: Some("reg/express".into()),
            pod_template: Some(json!({
                "metadata": {"labels": {"team": "sre", "express.dev/operator-ring": "spoofed"},
                             "annotations": {"kubesim.dev/startup-seconds": "2"}},
                "spec": {"containers": [{"name": "express", "resources": {"limits": {"cpu": "2"}}, "env": [{"name": "A", "value": "1"}]},
                                        {"name": "sidecar", "image": "busybox"}]}
            })),
            ..NodeSpec::for_cluster("acme")
        };
        let spec = effective_spec(NodeKind::Frontend, &node, None).expect("valid");
        let pod = build_pod(&identity(), &spec, "rev1", "canary").expect("pod");
        let labels = pod.metadata.labels.as_ref().expect("labels");
        // The creating ring's watch selects it, whatever the template says.
        assert_eq!(labels["express.dev/operator-ring"], "canary");
        let default_ring = build_pod(&identity(), &spec, "rev1", "default").expect("pod");
        assert!(
            !default_ring
                .metadata
                .labels
                .as_ref()
                .expect("labels")
                .contains_key("express.dev/operator-ring")
        );
        assert_eq!(labels["express.dev/cluster"], "acme");
        assert_eq!(labels["express.dev/node"], "acme-fe1");
        assert_eq!(labels["express.dev/kind"], "frontend");
        assert_eq!(labels["express.dev/deployment-revision"], "rev1");
        assert_eq!(labels["team"], "sre");
        let annotations = pod.metadata.annotations.as_ref().expect("annotations");
        assert_eq!(annotations["express.dev/express-version"], "v7");
        assert_eq!(annotations["express.dev/config-changeset"], "c1");
        assert_eq!(annotations["kubesim.dev/startup-seconds"], "2");
        let owner = &pod.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.uid.as_str(),
                owner.controller
            ),
            ("Frontend", "acme-fe1", "u-1", Some(true))
        );
        let containers = &pod.spec.as_ref().expect("spec").containers;
        assert_eq!(containers[0].image.as_deref(), Some("reg/express:v7"));
        assert_eq!(containers[1].name, "sidecar");
        let env: Vec<(&str, &str)> = containers[0]
            .env
            .iter()
            .flatten()
            .map(|e| (e.name.as_str(), e.value.as_deref().unwrap_or("")))
            .collect();
        assert_eq!(env, [("A", "1"), ("EXPRESS_CONFIG_CHANGESET", "c1")]);
    }

    #[test]
    fn pod_without_template_gets_the_app_container() {
        let node = NodeSpec {
            express_version: Some("v1".into()),
            ..NodeSpec::for_cluster("acme")
        };
        let spec = effective_spec(NodeKind::Backend, &node, None).expect("valid");
        let pod = build_pod(
            &test_identity(NodeKind::Backend, "acme-fe1", "u-1"),
            &spec,
            "r",
            "default",
        )
        .expect("pod");
        let containers = &pod.spec.expect("spec").containers;
        assert_eq!(containers.len(), 1);
        assert_eq!(
            (containers[0].name.as_str(), containers[0].image.as_deref()),
            ("express", Some("express:v1"))
        );
    }
}
