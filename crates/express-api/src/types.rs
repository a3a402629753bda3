//! The three custom resource kinds of DESIGN section 2 and their status (section 7).
//!
//! `Backend` and `Frontend` share one schema, [`NodeSpec`]; each kind wraps it in a transparent
//! newtype so that kube-derive can give each its own `kind` while the rest of the code handles
//! nodes uniformly through [`NodeSpec`].

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
fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

fn default_true() -> bool {
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
    // (docs/architecture.md, the failure model).
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

/// Per-kind defaults an ExpressCluster gives its nodes; node fields override them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeDefaults {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub express_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_changeset: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub pod_template: Option<serde_json::Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDefaults {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<NodeDefaults>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontend: Option<NodeDefaults>,
}

impl ClusterDefaults {
    pub fn for_kind(&self, kind: NodeKind) -> Option<&NodeDefaults> {
        match kind {
            NodeKind::Backend => self.backend.as_ref(),
            NodeKind::Frontend => self.frontend.as_ref(),
        }
    }
}

/// Default of `dependencies.backendUpgradePosition`.
pub const DEFAULT_BACKEND_UPGRADE_POSITION: u32 = 2;

fn default_backend_upgrade_position() -> u32 {
    DEFAULT_BACKEND_UPGRADE_POSITION
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependencySettings {
    /// No ordering at all (still bounded by rollout.maxConcurrent).
    #[serde(default)]
    pub disabled: bool,
    /// The default upgrade order puts the backends after this many frontends.
    #[serde(default = "default_backend_upgrade_position")]
    pub backend_upgrade_position: u32,
}

impl Default for DependencySettings {
    fn default() -> Self {
        DependencySettings {
            disabled: false,
            backend_upgrade_position: DEFAULT_BACKEND_UPGRADE_POSITION,
        }
    }
}

fn default_max_concurrent() -> u32 {
    1
}
fn default_progress_deadline_seconds() -> u32 {
    600
}
fn default_revision_history_limit() -> u32 {
    10
}
/// Default of `rollout.settleSeconds`: long enough for Helm or an Argo CD sync to write every
/// object of a tenant, short next to a rollout.
pub const DEFAULT_SETTLE_SECONDS: u32 = 10;
fn default_settle_seconds() -> u32 {
    DEFAULT_SETTLE_SECONDS
}
/// Default of `rollout.settleTimeoutSeconds`.
pub const DEFAULT_SETTLE_TIMEOUT_SECONDS: u32 = 300;
fn default_settle_timeout_seconds() -> u32 {
    DEFAULT_SETTLE_TIMEOUT_SECONDS
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSettings {
    /// How many nodes may be changing at once.
    #[serde(default = "default_max_concurrent")]
    #[schemars(range(min = 1))]
    pub max_concurrent: u32,
    /// A changed node must be Ready on its new revision within this many seconds.
    #[serde(default = "default_progress_deadline_seconds")]
    #[schemars(range(min = 1))]
    pub progress_deadline_seconds: u32,
    /// Return nodes changed by a failed rollout to their previous revision.
    #[serde(default = "default_true")]
    pub auto_rollback: bool,
    /// ControllerRevisions kept per node.
    #[serde(default = "default_revision_history_limit")]
    pub revision_history_limit: u32,
    /// Without `express.dev/rollout-id` on every up node, a new change starts only once no
    /// node's desired revision (or `up`) has changed for this many seconds; 0 turns it off.
    #[serde(default = "default_settle_seconds")]
    pub settle_seconds: u32,
    /// Nodes that disagree on `express.dev/rollout-id` with nothing written for this many
    /// seconds raise a `DesiredStateSettled=False` condition (reason Stalled) and a warning.
    #[serde(default = "default_settle_timeout_seconds")]
    #[schemars(range(min = 1))]
    pub settle_timeout_seconds: u32,
}

impl Default for RolloutSettings {
    fn default() -> Self {
        RolloutSettings {
            max_concurrent: default_max_concurrent(),
            progress_deadline_seconds: default_progress_deadline_seconds(),
            auto_rollback: true,
            revision_history_limit: default_revision_history_limit(),
            settle_seconds: default_settle_seconds(),
            settle_timeout_seconds: default_settle_timeout_seconds(),
        }
    }
}

/// Cluster-wide settings of one Express cluster. Optional: without it built-in defaults apply.
// Each printcolumn repeats `type_ = ...`, which this lint mistakes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "express.dev",
    version = "v1alpha1",
    kind = "ExpressCluster",
    plural = "expressclusters",
    shortname = "ec",
    category = "express",
    namespaced,
    status = "ExpressClusterStatus",
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
    /// The clusterName its nodes carry; defaults to the object's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(crate::names::LABEL_VALUE_PATTERN))]
    pub cluster_name: Option<String>,
    #[serde(rename = "tenantID", default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_name: Option<String>,
    /// No pod is created, replaced or deleted while paused.
    #[serde(default)]
    pub paused: bool,
    #[serde(default)]
    pub defaults: ClusterDefaults,
    #[serde(default)]
    pub dependencies: DependencySettings,
    #[serde(default)]
    pub rollout: RolloutSettings,
}

impl ExpressCluster {
    /// The clusterName this object governs: `spec.clusterName`, else the object's name.
    pub fn cluster_name(&self) -> Option<&str> {
        self.spec
            .cluster_name
            .as_deref()
            .or(self.metadata.name.as_deref())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ClusterPhase {
    Healthy,
    Progressing,
    Degraded,
    Paused,
    Failed,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeCounts {
    pub total: u32,
    pub ready: u32,
    pub up_to_date: u32,
    pub down: u32,
}

/// Where an Express cluster's rollout stands (`status.rollout.state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RolloutState {
    /// Nodes are changing or still need a change.
    Progressing,
    /// Every up node runs its desired revision.
    Complete,
    /// A pause is in force.
    Paused,
    /// The cluster's spec cannot be acted on.
    Blocked,
    /// A node's change failed; the rollout is halted.
    Failed,
    /// An abort request halted the rollout.
    Aborted,
    /// Halted, and the nodes the rollout changed return to their previous revision.
    RollingBack,
}

impl RolloutState {
    /// The name status carries.
    pub fn as_str(self) -> &'static str {
        match self {
            RolloutState::Progressing => "Progressing",
            RolloutState::Complete => "Complete",
            RolloutState::Paused => "Paused",
            RolloutState::Blocked => "Blocked",
            RolloutState::Failed => "Failed",
            RolloutState::Aborted => "Aborted",
            RolloutState::RollingBack => "RollingBack",
        }
    }

    /// A rollout in this state is still under way (it has no finish time yet).
    pub fn is_active(self) -> bool {
        matches!(self, RolloutState::Progressing | RolloutState::RollingBack)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// Lenient on read: a state this version does not know reads as absent, so that a status
    /// written by another tool or version never breaks the operator's cache.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::lenient::or_absent"
    )]
    pub state: Option<RolloutState>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub current: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub completed: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExpressClusterStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    // Lenient on read: a phase this build does not know reads as absent.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::lenient::or_absent"
    )]
    pub phase: Option<ClusterPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<NodeCounts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
    /// An abort in force: the desired revisions it holds back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort: Option<AbortRecord>,
    /// The last abort and retry request ids acted on; each id is acted on once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<HandledRequests>,
    /// The ExpressCluster's `express.dev/rollout-id` as the operator last saw it, and since when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_desired: Option<ObservedDesired>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Which operator drives the tenant (DESIGN section 11), written by that operator before it
    /// acts. Absent on a tenant no ring-aware operator has written yet: the default ring's.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::lenient::owner_or_unreadable"
    )]
    pub operator: Option<OperatorStatus>,
}

/// The operator that owns an ExpressCluster: its ring and version, and whether it has let the
/// tenant go because the ring label moved.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorStatus {
    /// The ring whose operator drives the tenant (or last drove it, when `released` is set).
    /// Empty when this build cannot read what another build wrote here: no ring acts on the
    /// tenant until its owner writes it again.
    #[serde(default)]
    pub ring: String,
    /// That operator's version.
    #[serde(default)]
    pub version: String,
    /// When the ring's operator let the tenant go, after its ring label named another ring. The
    /// ring the label names adopts it from here.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::lenient::or_absent"
    )]
    pub released: Option<Time>,
    /// The ring's operator has claimed the tenant from another ring and is still bringing its
    /// pods into its own watch (restamping their ring label); it acts once that is done.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adopting: bool,
}

/// An abort request acted on (DESIGN section 4): no node moves to the revision recorded for it
/// until its spec changes or a retry is requested.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AbortRecord {
    #[serde(default)]
    pub request_id: String,
    /// Nodes changed by the aborted rollout return to their previous revision.
    #[serde(default)]
    pub rollback: bool,
    /// Node name to the desired revision held back.
    #[serde(default)]
    pub revisions: std::collections::BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Time>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HandledRequests {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_wire_names() {
        for phase in NodePhase::ALL {
            assert_eq!(
                serde_json::to_value(phase).ok(),
                Some(phase.as_str().into())
            );
        }
        for state in [
            RolloutState::Progressing,
            RolloutState::Complete,
            RolloutState::Paused,
            RolloutState::Blocked,
            RolloutState::Failed,
            RolloutState::Aborted,
            RolloutState::RollingBack,
        ] {
            assert_eq!(
                serde_json::to_value(state).ok(),
                Some(state.as_str().into())
            );
        }
    }

    #[test]
    fn an_unknown_rollout_state_reads_as_absent() {
        let read = |state: serde_json::Value| -> RolloutStatus {
            serde_json::from_value(serde_json::json!({"state": state, "order": ["a"]}))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        assert_eq!(
            read("RollingBack".into()).state,
            Some(RolloutState::RollingBack)
        );
        let unknown = read("Exploded".into());
        assert_eq!((unknown.state, unknown.order), (None, vec!["a".to_owned()]));
        assert_eq!(read(serde_json::Value::Null).state, None);
    }

    /// Two operator builds share one API server while a ring runs a canary: each reads the
    /// other's ExpressCluster status. What a newer build may write (a phase, rollout state or
    /// field this build does not know, a reshaped owner) reads as unknown, never as an error.
    #[test]
    fn a_status_written_by_another_build_is_read() {
        let newer = serde_json::json!({
            "observedGeneration": 3,
            "phase": "Hibernating",
            "rollout": {"state": "Canarying", "order": ["a"], "wave": 2},
            "operator": {"ring": "canary", "version": "9.0.0", "shard": 4,
                         "released": "not a time"},
            "newField": {"anything": true},
            "message": "from the future"
        });
        let status: ExpressClusterStatus =
            serde_json::from_value(newer).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(status.phase, None);
        assert_eq!(status.rollout.as_ref().and_then(|r| r.state), None);
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(
            status.operator,
            Some(OperatorStatus {
                ring: "canary".into(),
                version: "9.0.0".into(),
                released: None,
                adopting: false,
            })
        );

        // An owner in a shape this build cannot read is an unknown ring, never "nobody's"
        // (which would be the default ring's: two operators would act).
        let reshaped: ExpressClusterStatus =
            serde_json::from_value(serde_json::json!({"operator": {"ring": {"name": "canary"}}}))
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(reshaped.operator, Some(OperatorStatus::default()));

        // And what this build writes, an older one without rings reads (it ignores `operator`).
        let ours = ExpressClusterStatus {
            operator: Some(OperatorStatus {
                ring: "default".into(),
                version: "1.0.0".into(),
                ..OperatorStatus::default()
            }),
            ..ExpressClusterStatus::default()
        };
        let written = serde_json::to_value(&ours).unwrap_or_default();
        assert_eq!(
            written["operator"],
            serde_json::json!({"ring": "default", "version": "1.0.0"})
        );
    }
}
