//! A Backend or a Frontend: one Express node, its kind, its spec (the one schema both kinds
//! share) and its status.

use std::fmt;
use std::ops::{Deref, DerefMut};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The kind of an Express node.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum NodeKind {
    Backend,
    Frontend,
}

impl NodeKind {
    /// Value of the `express.dev/kind` pod label.
    pub fn label_value(self) -> &'static str {
        match self {
            NodeKind::Backend => "backend",
            NodeKind::Frontend => "frontend",
        }
    }
}

impl NodeKind {
    /// The node kind of an API kind name, if it is one.
    pub fn from_kind_name(kind: &str) -> Option<NodeKind> {
        match kind {
            "Backend" => Some(NodeKind::Backend),
            "Frontend" => Some(NodeKind::Frontend),
            _ => None,
        }
    }

    /// The kind's name in the API (`Backend`, `Frontend`).
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Backend => "Backend",
            NodeKind::Frontend => "Frontend",
        }
    }
}

impl fmt::Display for NodeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which Express cluster a node belongs to, as the tenant chart renders it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterConfig {
    /// Nodes with the same clusterName in one namespace form one Express cluster. It is the
    /// `express.dev/cluster` label of their pods, so it must be a valid label value.
    #[schemars(length(min = 1, max = 63), pattern(crate::names::LABEL_VALUE_PATTERN))]
    pub cluster_name: String,
    #[serde(rename = "tenantID", default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_name: Option<String>,
}

/// One prerequisite of a node: another node whose pod must satisfy a condition first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Prerequisite {
    /// Name of the node object (Backend or Frontend) this node waits for.
    #[schemars(length(min = 1))]
    pub express_node: String,
    /// Kind of that node; when absent the name is looked up among both kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<NodeKind>,
    /// Pod condition that must hold; default `Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_condition_type: Option<String>,
    /// Required status of that condition; default `"True"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition_status: Option<String>,
    /// Pins the Express version the prerequisite's pod must run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub express_version: Option<String>,
    /// Pins the deployment revision the prerequisite's pod must run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_revision: Option<String>,
}

/// Default pod condition a prerequisite checks.
pub const DEFAULT_PREREQUISITE_CONDITION: &str = "Ready";
/// Default status of that condition.
pub const DEFAULT_PREREQUISITE_STATUS: &str = "True";

impl Prerequisite {
    pub fn condition_type(&self) -> &str {
        self.pod_condition_type
            .as_deref()
            .unwrap_or(DEFAULT_PREREQUISITE_CONDITION)
    }

    pub fn required_status(&self) -> &str {
        self.condition_status
            .as_deref()
            .unwrap_or(DEFAULT_PREREQUISITE_STATUS)
    }
}

/// Per-node ordering overrides. A list that is present (even empty) replaces the default
/// prerequisites for that phase; an absent list keeps the default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentDependencies {
    /// Ignore every prerequisite of this node.
    #[serde(default)]
    pub disabled: bool,
    /// Used when this node's pod must be created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_prerequisites: Option<Vec<Prerequisite>>,
    /// Used when this node's pod must be replaced by one on a new revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_prerequisites: Option<Vec<Prerequisite>>,
}

/// Schema for free-form Kubernetes objects (pod template overrides): any object, kept verbatim.
pub(crate) fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

pub(crate) fn default_true() -> bool {
    true
}

/// The spec shared by `Backend` and `Frontend`: one object per Express node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    pub cluster_config: ClusterConfig,
    /// `false` keeps the node intentionally down: no pod, skipped by ordering.
    #[serde(default = "default_true")]
    pub up: bool,
    /// Express version (the image tag); optional when the ExpressCluster gives a default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub express_version: Option<String>,
    /// Configuration changeset; optional when the ExpressCluster gives a default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_changeset: Option<String>,
    /// Image repository, without tag; the tag is expressVersion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// PodTemplateSpec overrides merged over the cluster defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub pod_template: Option<serde_json::Value>,
    /// Ordering overrides; absent = the operator's default order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_dependencies: Option<DeploymentDependencies>,
}

// Every field compares equal to itself (no floating-point number anywhere in a spec), so
// the views of a fleet's nodes can share their specs ([`crate::views::Interner`]).
impl Eq for NodeSpec {}

/// Hashes what tells specs apart in practice (the cluster, up, version, image, changeset),
/// not the pod template or the prerequisites: equal specs hash alike, which is all a hash
/// owes, and a fleet's specs differ by these.
impl std::hash::Hash for NodeSpec {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.cluster_config.cluster_name.hash(state);
        self.up.hash(state);
        self.express_version.hash(state);
        self.image.hash(state);
        self.config_changeset.hash(state);
    }
}

impl NodeSpec {
    /// A node spec of the given cluster with no overrides.
    pub fn for_cluster(cluster_name: impl Into<String>) -> Self {
        NodeSpec {
            cluster_config: ClusterConfig {
                cluster_name: cluster_name.into(),
                ..ClusterConfig::default()
            },
            up: true,
            express_version: None,
            config_changeset: None,
            image: None,
            pod_template: None,
            deployment_dependencies: None,
        }
    }
}

/// Phase of one node, as shown by `kubectl get express`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum NodePhase {
    Waiting,
    Provisioning,
    Upgrading,
    Ready,
    NotReady,
    Down,
    Failed,
    Paused,
    Bouncing,
}

impl NodePhase {
    /// Every phase, in the order DESIGN section 7 lists them.
    pub const ALL: [NodePhase; 9] = [
        NodePhase::Waiting,
        NodePhase::Provisioning,
        NodePhase::Upgrading,
        NodePhase::Ready,
        NodePhase::NotReady,
        NodePhase::Down,
        NodePhase::Failed,
        NodePhase::Paused,
        NodePhase::Bouncing,
    ];

    /// The name status carries.
    pub fn as_str(self) -> &'static str {
        match self {
            NodePhase::Waiting => "Waiting",
            NodePhase::Provisioning => "Provisioning",
            NodePhase::Upgrading => "Upgrading",
            NodePhase::Ready => "Ready",
            NodePhase::NotReady => "NotReady",
            NodePhase::Down => "Down",
            NodePhase::Failed => "Failed",
            NodePhase::Paused => "Paused",
            NodePhase::Bouncing => "Bouncing",
        }
    }
}

/// One prerequisite a node is waiting for, and why it is not met.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitingFor {
    pub node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<NodeKind>,
    pub reason: String,
}

/// What kind of change the operator made to a node's pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ChangeKind {
    /// A pod created for a node that had none.
    Provision,
    /// A pod replaced to move the node to a new revision.
    Upgrade,
    /// A pod replaced to return the node to the revision it ran before a failed or aborted
    /// rollout.
    Rollback,
}

/// Where a change stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ChangeState {
    /// The pod on the target revision is not Ready yet.
    InProgress,
    /// The pod on the target revision became Ready.
    Succeeded,
    /// The target revision crash-looped or missed the progress deadline on this node.
    Failed,
}

/// The last change the operator made to a node's pod (DESIGN section 5). Recorded before the pod
/// is touched, so that an operator restarted at any instant finishes the change instead of
/// starting it again, and so that a failed rollout knows which nodes it changed, from which
/// revision, in which order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeChange {
    pub kind: ChangeKind,
    pub state: ChangeState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_revision: Option<String>,
    /// Lenient on read: a status written by another tool must never break the operator's cache.
    #[serde(default)]
    pub to_revision: String,
    /// Orders the changes of one Express cluster: one more than the highest of its nodes when
    /// the change starts. Rollback goes through them in reverse.
    #[serde(default)]
    pub sequence: u64,
    /// The rollout the change belongs to: a digest of the set of desired revisions of the
    /// Express cluster when it started.
    #[serde(default)]
    pub rollout: String,
    /// The change brings back the revision the node ran (its pod was lost and is re-created):
    /// a recovery, part of no rollout (`express_api::delivery`, DESIGN section 12).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recovery: bool,
    /// Why the change failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
}

/// A revision that failed on this node: refused until the spec changes or a retry is requested.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InvalidRevision {
    #[serde(default)]
    pub revision: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Time>,
}

/// An object's desired state as the operator last saw it, and since when (DESIGN section 3,
/// rule 8). Kept in status so that the settle window survives an operator restart: a change
/// starts only once no desired state of the cluster has changed for `rollout.settleSeconds`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedDesired {
    /// The node's desired revision (absent for a node that is down or whose spec is invalid, and
    /// on the ExpressCluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Whether the node is up (`spec.up`); always true on the ExpressCluster.
    #[serde(default = "default_true")]
    pub up: bool,
    /// The object's `express.dev/rollout-id` annotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_id: Option<String>,
    /// What orders the object's changes: a digest of a node's `deploymentDependencies`; the
    /// ExpressCluster's dependency settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering: Option<String>,
    /// When the operator first saw this desired state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<MicroTime>,
}

/// Status of a Backend or Frontend.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    // Lenient on read: a phase this build does not know reads as absent.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::lenient::or_absent"
    )]
    pub phase: Option<NodePhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarts: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<WaitingFor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The last change made to the node's pod.
    // Lenient on read: a record whose kind or state this build does not know reads as absent
    // (docs/decisions/what-happens-when-things-fail.md).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::lenient::or_absent"
    )]
    pub change: Option<NodeChange>,
    /// Revisions known to fail on this node (newest last, at most ten kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid_revisions: Vec<InvalidRevision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Boxed: a bounce is rare, and its record (192 bytes) would otherwise sit in every
    // cached node.
    pub bounce: Option<Box<crate::bounce::BounceStatus>>,
    /// The desired state the operator last saw, for the settle window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_desired: Option<ObservedDesired>,
}

macro_rules! node_kind {
    ($spec:ident, $kind:literal, $plural:literal, $short:literal) => {
        #[doc = concat!("One Express ", $kind, " node: its cluster, version, pod template overrides and ordering prerequisites.")]
        #[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[kube(
            group = "express.dev",
            version = "v1alpha1",
            kind = $kind,
            plural = $plural,
            shortname = $short,
            category = "express",
            namespaced,
            status = "NodeStatus",
            printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.clusterConfig.clusterName"),
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
