//! The planner's input: what was observed of one Express cluster, reduced to the facts the
//! ordering rules need. Built by [`crate::observe`] from API objects, or by hand in tests.

use std::collections::BTreeMap;

use express_api::{
    BouncePhase, ChangeKind, ChangeState, DeploymentDependencies, EffectiveNodeSpec, NodeKind,
};

/// A node's position in [`ClusterSnapshot::nodes`], and in every per-node list the planner
/// returns for that snapshot ([`crate::Plan::nodes`], [`crate::settle::Settle::marks`]): the
/// one relation between a node's observation, its plan and what is written for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeIndex(pub usize);

impl ClusterSnapshot {
    pub fn node(&self, index: NodeIndex) -> &NodeObservation {
        &self.nodes[index.0]
    }

    /// Every node's index, in snapshot order.
    pub fn indices(&self) -> impl Iterator<Item = NodeIndex> + use<> {
        (0..self.nodes.len()).map(NodeIndex)
    }

    /// The cluster as deleting these nodes' pods leaves it: each of those pods terminating,
    /// so no longer serving. A status written with a deletion then already says what the
    /// deletion's watch event would have made the next reconcile write (one write, not two).
    pub fn with_pods_terminating(
        &self,
        deleted: impl IntoIterator<Item = NodeIndex>,
    ) -> ClusterSnapshot {
        let mut after = self.clone();
        for index in deleted {
            if let Some(pod) = after.nodes.get_mut(index.0).and_then(|n| n.pod.as_mut()) {
                pod.terminating = true;
            }
        }
        after
    }
}

/// Everything the planner knows about one Express cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterSnapshot {
    pub namespace: String,
    pub cluster_name: String,
    pub settings: ClusterSettings,
    pub nodes: Vec<NodeObservation>,
    pub pause: Option<Pause>,
    /// Problems with the cluster as a whole (e.g. two ExpressClusters claiming it). Any entry
    /// blocks every action, like a cycle.
    pub spec_errors: Vec<String>,
    /// Objects of the cluster this build cannot decode (`Kind name: field path: error`). An
    /// unreadable node is also a node whose spec is invalid (nothing is done to it, nothing
    /// waiting on it proceeds); an unreadable ExpressCluster, pod, ControllerRevision or control
    /// ConfigMap is also a spec error (the cluster does nothing until it can be read).
    pub unreadable: Vec<String>,
    /// Abort and retry requests, and the abort in force (DESIGN section 4).
    pub control: RolloutControl,
    /// The ExpressCluster governing the cluster, as far as the settle rules need it.
    pub express_cluster: Option<ExpressClusterObservation>,
}

/// What the settle rules (DESIGN section 3, rule 8) need of the governing ExpressCluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExpressClusterObservation {
    /// Its `express.dev/rollout-id` annotation.
    pub rollout_id: Option<String>,
    /// The desired state its status recorded (only `rollout_id` and `since_ms` matter).
    pub recorded: Option<DesiredMark>,
}

/// An object's desired state, and since when it has been so (`express_api::ObservedDesired`):
/// as an earlier reconcile recorded it in status (the snapshot), and as the settle rules keep
/// it for the report to write back (the plan).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredMark {
    /// The node's desired revision (absent for a node that is down or whose spec is invalid,
    /// and on the ExpressCluster).
    pub revision: Option<String>,
    pub up: bool,
    pub rollout_id: Option<String>,
    /// What orders the object's changes: a digest of a node's `deploymentDependencies`; the
    /// ExpressCluster's dependency settings.
    pub ordering: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub since_ms: i64,
}

/// Abort and retry, as requested by annotations and as recorded in the ExpressCluster status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RolloutControl {
    /// `express.dev/abort` (and `express.dev/abort-rollback`) on the ExpressCluster.
    pub abort_request: Option<AbortRequest>,
    /// `express.dev/retry` on the ExpressCluster.
    pub retry_request: Option<String>,
    /// Request ids already acted on.
    pub handled_abort: Option<String>,
    pub handled_retry: Option<String>,
    /// The abort recorded in status, if any.
    pub abort: Option<Abort>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbortRequest {
    pub id: String,
    pub rollback: bool,
}

/// An abort acted on: the desired revision it holds back, per node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Abort {
    pub request_id: String,
    pub rollback: bool,
    pub revisions: BTreeMap<String, String>,
}

/// The ordering and rollout settings of an ExpressCluster, or the built-in defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSettings {
    pub dependencies_disabled: bool,
    pub backend_upgrade_position: u32,
    pub max_concurrent: u32,
    /// A changed node must be Ready on its new revision within this many seconds of its pod's
    /// creation.
    pub progress_deadline_seconds: u32,
    /// A failed rollout returns the nodes it changed to their previous revision.
    pub auto_rollback: bool,
    /// A new change starts only once no desired state changed for this long (0: off), unless
    /// every up node carries an agreeing `express.dev/rollout-id`.
    pub settle_seconds: u32,
    /// A rollout-id disagreement with nothing written for this long is reported as stalled.
    pub settle_timeout_seconds: u32,
    /// ControllerRevisions kept per node.
    pub revision_history_limit: u32,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        let rollout = express_api::RolloutSettings::default();
        ClusterSettings {
            dependencies_disabled: false,
            backend_upgrade_position: express_api::DEFAULT_BACKEND_UPGRADE_POSITION,
            max_concurrent: rollout.max_concurrent,
            progress_deadline_seconds: rollout.progress_deadline_seconds,
            auto_rollback: rollout.auto_rollback,
            settle_seconds: rollout.settle_seconds,
            settle_timeout_seconds: rollout.settle_timeout_seconds,
            revision_history_limit: rollout.revision_history_limit,
        }
    }
}

/// One Backend or Frontend object and its pod.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeObservation {
    pub name: String,
    pub kind: NodeKind,
    /// `spec.up`: false means intentionally down.
    pub up: bool,
    /// What the node's pod should run, or why that cannot be computed (shown to the user).
    pub desired: Result<DesiredState, String>,
    pub dependencies: Option<DeploymentDependencies>,
    pub pod: Option<PodObservation>,
    /// The operator recorded (in the node's status) that it started replacing this node's pod
    /// and has not yet created the replacement.
    pub replacing: bool,
    /// The last change the operator recorded for this node.
    pub change: Option<Change>,
    /// Revisions known to fail on this node.
    pub invalid_revisions: Vec<InvalidRevision>,
    /// Revisions whose pod spec is kept (ControllerRevisions): the ones a rollback can return to.
    pub history: Vec<String>,
    /// Its `express.dev/rollout-id` annotation.
    pub rollout_id: Option<String>,
    /// The desired state its status recorded, and since when.
    pub recorded_desired: Option<DesiredMark>,
    /// Its `express.dev/bounce` request, if any.
    pub bounce_request: Option<Box<BounceRequest>>,
    /// The last bounce its status recorded (boxed: most nodes have none, and snapshots of many
    /// clusters are kept in memory).
    pub bounce: Option<Box<BounceRecord>>,
}

/// A bounce request on a node object (DESIGN section 6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BounceRequest {
    /// `express.dev/bounce`: each id is acted on once.
    pub id: String,
    /// `express.dev/bounce-force: "true"`.
    pub force: bool,
    /// `express.dev/bounce-timeout` in seconds, or why it cannot be read.
    pub timeout_seconds: Result<u64, String>,
}

/// A bounce as the node's status recorded it (`express_api::BounceStatus`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BounceRecord {
    pub request_id: String,
    pub phase: BouncePhase,
    pub message: Option<String>,
    pub force: bool,
    pub timeout_seconds: u64,
    /// The pod being restarted.
    pub pod_uid: Option<String>,
    /// The revision the new pod runs.
    pub revision: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub started_at_ms: Option<i64>,
    pub phase_since_ms: Option<i64>,
}

/// A node's last recorded change, reduced to what the rollout rules need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub kind: ChangeKind,
    pub state: ChangeState,
    pub from: Option<String>,
    pub to: String,
    pub sequence: u64,
    /// The rollout it belongs to (see [`crate::rollout::rollout_id`]).
    pub rollout: String,
    /// It brings back the revision the node ran (`express_api::delivery`).
    pub recovery: bool,
}

impl Change {
    pub fn in_progress(&self) -> bool {
        self.state == ChangeState::InProgress
    }

    /// Delivery or recovery (`express_api::delivery`).
    pub fn work(&self) -> express_api::Work {
        express_api::delivery::classify_change(self.recovery)
    }

    /// The node ran `revision`, by this record (`express_api::delivery::ran`).
    pub fn ran(&self, revision: &str) -> bool {
        express_api::delivery::ran(self.state, self.recovery, &self.to, revision)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidRevision {
    pub revision: String,
    pub reason: String,
}

/// The revision and version a node's pod should run, and the effective spec it is built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredState {
    pub revision: String,
    pub version: String,
    /// Cluster defaults merged with the node's overrides: what its pod is built from.
    pub spec: EffectiveNodeSpec,
}

/// The observed pod named after a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodObservation {
    /// The pod's controller owner reference points at the node object.
    pub owned: bool,
    /// Its metadata.uid: a bounce tells the old pod from its replacement by it.
    pub uid: Option<String>,
    /// Its `express.dev/app-state` annotation (written by the application).
    pub app_state: Option<String>,
    /// Its `express.dev/shutdown-protection` annotation.
    pub shutdown_protection: Option<String>,
    /// Its `express.dev/deployment-revision` label.
    pub revision: Option<String>,
    /// The Express version it runs.
    pub version: Option<String>,
    pub phase: PodPhase,
    pub conditions: Vec<PodCondition>,
    /// It has a deletionTimestamp.
    pub terminating: bool,
    pub restarts: i32,
    /// creationTimestamp, in milliseconds since the Unix epoch.
    pub created_at_ms: Option<i64>,
}

impl PodObservation {
    /// Status of a pod condition, if the pod reports it.
    pub fn condition(&self, type_: &str) -> Option<&str> {
        self.conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.status.as_str())
    }

    pub fn is_ready(&self) -> bool {
        self.condition("Ready") == Some("True")
    }

    /// The operator's pod, not on its way out, and Ready: the node serves.
    pub fn is_serving(&self) -> bool {
        self.owned && !self.terminating && self.is_ready()
    }

    /// The pod's containers have stopped for good (phase Succeeded or Failed).
    pub fn has_ended(&self) -> bool {
        matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodCondition {
    pub type_: String,
    pub status: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

/// Why nothing may be changed right now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pause {
    pub scope: PauseScope,
    pub reason: Option<String>,
}

impl Pause {
    /// Where and why, without the source: "namespace: maintenance window" (a table cell).
    pub fn summary(&self) -> String {
        let scope = self.scope.name();
        match &self.reason {
            Some(reason) => format!("{scope}: {reason}"),
            None => scope.to_owned(),
        }
    }

    /// Where, from what, and why: "(namespace (ConfigMap express-control)): maintenance
    /// window".
    pub fn detail(&self) -> String {
        match &self.reason {
            Some(reason) => format!("({}): {reason}", self.scope),
            None => format!("({})", self.scope),
        }
    }
}

impl std::fmt::Display for Pause {
    /// "paused (namespace (ConfigMap express-control)): maintenance window": the one wording
    /// of a pause, in status messages, events and the CLI.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "paused {}", self.detail())
    }
}

/// Where a pause was requested (DESIGN section 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauseScope {
    /// ConfigMap `express-operator-control` in the operator's namespace.
    Operator,
    /// ConfigMap `express-control` in the cluster's namespace.
    Namespace,
    /// `ExpressCluster.spec.paused`.
    Cluster,
}

impl PauseScope {
    /// "operator-wide", "namespace", "cluster".
    pub fn name(self) -> &'static str {
        match self {
            PauseScope::Operator => "operator-wide",
            PauseScope::Namespace => "namespace",
            PauseScope::Cluster => "cluster",
        }
    }

    /// What carries a pause of this scope.
    pub fn source(self) -> &'static str {
        match self {
            PauseScope::Operator => "ConfigMap express-operator-control",
            PauseScope::Namespace => "ConfigMap express-control",
            PauseScope::Cluster => "ExpressCluster spec.paused",
        }
    }
}

impl std::fmt::Display for PauseScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.source())
    }
}
