//! An ExpressCluster: the cluster-wide settings of one Express cluster (the defaults it gives
//! its nodes, their ordering, the rollout's pace) and the status that reports on its nodes and
//! its rollout.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::node::{NodeKind, ObservedDesired, default_true, preserve_unknown_object};

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
