//! Condition types and reasons the operator writes into status (DESIGN section 7). Tools that
//! read status (kubectl-express, the Argo CD health checks, an SRE API) match on these names.

/// Node: its pod is Ready.
pub const READY: &str = "Ready";
/// Node: its pod runs the desired revision.
pub const UP_TO_DATE: &str = "UpToDate";
/// Node: every prerequisite of its next change is met.
pub const PREREQUISITES_MET: &str = "PrerequisitesMet";

/// ExpressCluster: the rollout is halted (failed or aborted).
pub const HALTED: &str = "Halted";
/// ExpressCluster: a node is changing or still needs a change.
pub const PROGRESSING: &str = "Progressing";
/// ExpressCluster: a pause is in force (any scope).
pub const PAUSED: &str = "Paused";
/// ExpressCluster: the cluster's spec cannot be acted on (a cycle, conflicting objects...).
pub const INVALID_SPEC: &str = "InvalidSpec";
/// ExpressCluster: the desired state has settled (DESIGN section 3, rule 8).
pub const DESIRED_STATE_SETTLED: &str = "DesiredStateSettled";
/// ExpressCluster: every object of the cluster can be read by this operator build (False names
/// the objects, and the fields, it cannot decode).
pub const OBJECTS_READABLE: &str = "ObjectsReadable";

/// Reasons, per condition.
pub mod reason {
    pub const POD_READY: &str = "PodReady";
    pub const POD_NOT_READY: &str = "PodNotReady";
    pub const DESIRED_REVISION: &str = "DesiredRevision";
    pub const OLD_REVISION: &str = "OldRevision";
    pub const MET: &str = "Met";
    pub const WAITING: &str = "Waiting";

    pub const ROLLOUT_FAILED: &str = "RolloutFailed";
    pub const ABORTED: &str = "Aborted";
    pub const NOT_HALTED: &str = "NotHalted";
    pub const ALL_NODES_READY: &str = "AllNodesReady";
    pub const NODES_NOT_READY: &str = "NodesNotReady";
    /// Ready: no Backend or Frontend names the cluster yet.
    pub const NO_NODES: &str = "NoNodes";
    pub const ROLLOUT_IN_PROGRESS: &str = "RolloutInProgress";
    pub const ROLLOUT_COMPLETE: &str = "RolloutComplete";
    /// Ready and Progressing: a node lost its pod and gets it back on the revision it ran (a
    /// recovery, not a rollout: `express_api::delivery`).
    pub const NODE_RECOVERING: &str = "NodeRecovering";
    /// Ready and Progressing: a bounce restarts a node's pod on the revision it runs.
    pub const NODE_BOUNCING: &str = "NodeBouncing";
    pub const PAUSED: &str = "Paused";
    pub const NOT_PAUSED: &str = "NotPaused";
    pub const INVALID_SPEC: &str = "InvalidSpec";
    pub const VALID: &str = "Valid";
    pub const READABLE: &str = "Readable";
    pub const UNDECODABLE: &str = "Undecodable";
    pub const SETTLED: &str = "Settled";
    pub const SETTLE_WINDOW: &str = "SettleWindow";
    pub const ROLLOUT_ID_MISMATCH: &str = "RolloutIdMismatch";
    pub const STALLED: &str = "Stalled";
}
