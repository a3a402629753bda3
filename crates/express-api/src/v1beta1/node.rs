//! A Backend or a Frontend at `v1beta1`: the spec both kinds share.

use std::ops::{Deref, DerefMut};

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::v1alpha1::{NodeKind, default_true, preserve_unknown_object};

/// The pod condition a prerequisite waits for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct PodCondition {
    /// The pod condition; default `Ready`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Its required status; default `"True"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// What the prerequisite's pod must run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct Pin {
    /// The Express version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The deployment revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

/// One prerequisite of a node: another node whose pod must satisfy a condition first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Prerequisite {
    /// The node object (Backend or Frontend) this node waits for.
    #[schemars(length(min = 1))]
    pub node: String,
    /// Its kind; when absent the name is looked up among both kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<NodeKind>,
    /// The condition its pod must show; default `Ready` `"True"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<PodCondition>,
    /// What its pod must run; absent, anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<Pin>,
}

/// A node's ordering overrides. A list that is present (even empty) replaces the default
/// prerequisites for that change; an absent list keeps the default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeOrdering {
    /// Ignore every prerequisite of this node.
    #[serde(default)]
    pub disabled: bool,
    /// Used when this node's pod must be created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning: Option<Vec<Prerequisite>>,
    /// Used when this node's pod must be replaced by one on a new revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<Vec<Prerequisite>>,
}

/// The spec shared by `Backend` and `Frontend` at `v1beta1`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    /// The Express cluster this node belongs to: nodes naming the same cluster in one namespace
    /// form it. It is the `express.dev/cluster` label of their pods, so a valid label value.
    #[schemars(length(min = 1, max = 63), pattern(crate::names::LABEL_VALUE_PATTERN))]
    pub cluster: String,
    /// `false` keeps the node intentionally down: no pod, skipped by ordering.
    #[serde(default = "default_true")]
    pub up: bool,
    /// Express version (the image tag); optional when the ExpressCluster gives a default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Configuration changeset; optional when the ExpressCluster gives a default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changeset: Option<String>,
    /// Image repository, without tag; the tag is `version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// PodTemplateSpec overrides merged over the cluster defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub pod_template: Option<serde_json::Value>,
    /// Ordering overrides; absent = the operator's default order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering: Option<NodeOrdering>,
}

macro_rules! node_kind {
    ($spec:ident, $kind:literal, $plural:literal, $short:literal) => {
        #[doc = concat!("One Express ", $kind, " node at v1beta1.")]
        #[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[kube(
            group = "express.dev",
            version = "v1beta1",
            kind = $kind,
            plural = $plural,
            shortname = $short,
            category = "express",
            namespaced,
            status = "crate::NodeStatus",
            printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.cluster"),
            printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
            printcolumn(name = "Ready", type_ = "boolean", json_path = ".status.ready"),
            printcolumn(name = "Revision", type_ = "string", json_path = ".status.runningRevision"),
            printcolumn(name = "Desired", type_ = "string", json_path = ".status.desiredRevision"),
            printcolumn(name = "Version", type_ = "string", json_path = ".status.runningVersion", priority = 1),
            printcolumn(name = "Message", type_ = "string", json_path = ".status.message", priority = 1),
            printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
        )]
        #[serde(transparent)]
        #[schemars(transparent)]
        pub struct $spec(pub NodeSpec);

        impl Deref for $spec {
            type Target = NodeSpec;
            fn deref(&self) -> &NodeSpec {
                &self.0
            }
        }

        impl DerefMut for $spec {
            fn deref_mut(&mut self) -> &mut NodeSpec {
                &mut self.0
            }
        }
    };
}

node_kind!(BackendSpec, "Backend", "backends", "be");
node_kind!(FrontendSpec, "Frontend", "frontends", "fe");
