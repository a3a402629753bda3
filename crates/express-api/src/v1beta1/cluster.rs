//! An ExpressCluster at `v1beta1`: the cluster named once, its tenant, the defaults it gives its
//! nodes, their ordering and the rollout's pace.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::v1alpha1::{DependencySettings, RolloutSettings, preserve_unknown_object};

/// The tenant an Express cluster serves.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct Tenant {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Per-kind defaults an ExpressCluster gives its nodes; node fields override them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeDefaults {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changeset: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub pod_template: Option<serde_json::Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterDefaults {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<NodeDefaults>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontend: Option<NodeDefaults>,
}

/// Cluster-wide settings of one Express cluster at `v1beta1`.
// Each printcolumn repeats `type_ = ...`, which this lint mistakes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "express.dev",
    version = "v1beta1",
    kind = "ExpressCluster",
    plural = "expressclusters",
    shortname = "ec",
    category = "express",
    namespaced,
    status = "crate::ExpressClusterStatus",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.nodes.ready"),
    printcolumn(name = "Nodes", type_ = "integer", json_path = ".status.nodes.total"),
    printcolumn(
        name = "UpToDate",
        type_ = "integer",
        json_path = ".status.nodes.upToDate"
    ),
    printcolumn(
        name = "Rollout",
        type_ = "string",
        json_path = ".status.rollout.state"
    ),
    printcolumn(
        name = "Paused",
        type_ = "boolean",
        json_path = ".spec.paused",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ExpressClusterSpec {
    /// The cluster its nodes name; defaults to the object's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(crate::names::LABEL_VALUE_PATTERN))]
    pub cluster: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<Tenant>,
    /// No pod is created, replaced or deleted while paused.
    #[serde(default)]
    pub paused: bool,
    #[serde(default)]
    pub defaults: ClusterDefaults,
    /// How the cluster's nodes are ordered (the same settings as `v1alpha1`'s `dependencies`).
    #[serde(default)]
    pub ordering: DependencySettings,
    #[serde(default)]
    pub rollout: RolloutSettings,
}
