//! Fleet triage for the L2 on call: is a tenant's trouble its own, a rollout's, or the operator
//! layer's underneath every tenant? [`triage`] is a pure function from a [`Fleet`] snapshot (what
//! the API showed, read at one instant `now`) and [`Thresholds`] to a [`Report`]: the checks, each
//! `ok`, `warn` or `fail` with its evidence, and one [`Verdict`]. `kubectl express doctor` reads
//! the fleet and prints the report; the operator publishes the same fleet view as metrics.
//!
//! [`observe`] turns API objects into the snapshot; nothing here talks to a server.

pub mod across;
pub mod figures;
pub mod observe;
pub mod rings;

mod checks;
mod control_plane;
mod explain;
mod releases;
mod verdict;

pub use express_api::Work;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

pub use checks::age;
pub use control_plane::ControlPlane;
pub use explain::explained_by_rollout;
pub use figures::{FleetFigures, fleet_figures};
pub use verdict::triage;

/// The thresholds of the decision table (`docs/doctor.md`), each a flag of `doctor`.
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    /// A tenant whose spec the operator has not observed (or whose status has not moved while
    /// its pods did) for longer than this is behind.
    pub stale_after_seconds: i64,
    /// One symptom is spread when it is in at least this many namespaces...
    pub spread_namespaces: usize,
    /// ...and in at least this fraction of the tenants seen.
    pub spread_fraction: f64,
    /// Operator Warning events this recent are counted.
    pub since_seconds: i64,
    /// A rollout that finished this recently still explains a tenant's trouble.
    pub recent_rollout_seconds: i64,
    /// A node down this long while a recovery re-creates its pod is stuck (said in the
    /// evidence; well under the progress deadline, since a recovery never fails a rollout).
    pub stuck_recovery_seconds: i64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            stale_after_seconds: 120,
            spread_namespaces: 3,
            spread_fraction: 0.25,
            since_seconds: 900,
            recent_rollout_seconds: 600,
            stuck_recovery_seconds: 120,
        }
    }
}

/// What the API showed of the fleet.
#[derive(Clone, Debug, Default)]
pub struct Fleet {
    pub now: Timestamp,
    /// One entry per operator ring (today: the one ring `default`).
    pub rings: Vec<Ring>,
    pub tenants: Vec<Tenant>,
    /// Operator Warning events, one entry per event object.
    pub warnings: Vec<Warning>,
    /// What could not be read (for example "leases in express-system: forbidden").
    pub unreadable: Vec<String>,
    /// The operator's releases (DESIGN section 12).
    pub releases: Vec<ReleaseSeen>,
    /// The releases across DCs this DC holds a copy of (DESIGN section 14), as the same fields:
    /// a failed or held one warns, and never changes this DC's verdict.
    pub fleet_releases: Vec<ReleaseSeen>,
    /// What the API server said of its own readiness.
    pub control_plane: ControlPlane,
}

/// A release of either kind (one DC's OperatorRelease, or this DC's copy of a FleetRelease) as
/// triage reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct ReleaseSeen {
    pub name: String,
    pub from_ring: String,
    pub to_ring: String,
    pub phase: ReleaseSeenPhase,
    pub message: Option<String>,
    /// `toRing`'s build found its CRDs would break this DC: nothing moves (DESIGN section 15).
    pub api_breaking: bool,
}

/// The phase of a release of either kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseSeenPhase {
    Operator(express_api::release::ReleasePhase),
    Fleet(express_api::fleet_release::FleetPhase),
}

impl ReleaseSeenPhase {
    /// As status names it (`Pending`...`RolledBack`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReleaseSeenPhase::Operator(phase) => phase.as_str(),
            ReleaseSeenPhase::Fleet(phase) => phase.as_str(),
        }
    }

    /// Rolled back, failed, aborted or holding inconclusive: a person should look.
    pub fn in_trouble(self) -> bool {
        use express_api::fleet_release::FleetPhase;
        use express_api::release::ReleasePhase;
        match self {
            ReleaseSeenPhase::Operator(phase) => {
                matches!(phase, ReleasePhase::RolledBack | ReleasePhase::Inconclusive)
            }
            ReleaseSeenPhase::Fleet(phase) => matches!(
                phase,
                FleetPhase::Failed
                    | FleetPhase::Aborted
                    | FleetPhase::RolledBack
                    | FleetPhase::Inconclusive
            ),
        }
    }
}

impl std::fmt::Display for ReleaseSeenPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One operator ring: its Lease, its Deployment and that Deployment's pods.
#[derive(Clone, Debug)]
pub struct Ring {
    pub name: String,
    pub lease: LeaseSeen,
    /// None: no operator Deployment found (the operator may run elsewhere).
    pub deployment: Option<Deployment>,
    pub pods: Vec<OperatorPod>,
}

#[derive(Clone, Debug)]
pub enum LeaseSeen {
    Seen(Lease),
    /// The Lease does not exist.
    Missing {
        namespace: String,
        name: String,
    },
    /// Leases could not be read (RBAC).
    Unreadable {
        namespace: String,
        name: String,
    },
}

#[derive(Clone, Debug)]
pub struct Lease {
    pub namespace: String,
    pub name: String,
    pub holder: Option<String>,
    pub renewed: Option<Timestamp>,
    pub duration_seconds: Option<i64>,
    /// The build the holder reports (`express_api::release::ANNOTATION_LEADER_VERSION`), when
    /// the holder itself wrote it.
    pub version: Option<String>,
    /// The fields its build writes that the installed CRDs lack, as its leader wrote them
    /// (`express_api::api_record::ANNOTATION_API_BEHIND`).
    pub api_behind: Option<String>,
    /// Why a build of this ring refuses to lead here: it cannot read what the DC stores
    /// (`express_api::api_record::ANNOTATION_CANNOT_READ`).
    pub cannot_read: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Deployment {
    pub namespace: String,
    pub name: String,
    pub replicas: i32,
    pub available: i32,
}

#[derive(Clone, Debug)]
pub struct OperatorPod {
    pub name: String,
    pub restarts: i32,
    /// A container's waiting reason (`CrashLoopBackOff`...).
    pub waiting: Option<String>,
}

/// One Express cluster, as triage sees it.
#[derive(Clone, Debug, Default)]
pub struct Tenant {
    pub namespace: String,
    pub cluster: String,
    /// The operator ring its label names (`default` without one, or without an ExpressCluster).
    pub ring: String,
    /// The ring whose operator owns it, as `status.operator` says (none while released or
    /// never owned).
    pub owner_ring: Option<String>,
    /// The ring that let it go, and when, while no ring has adopted it yet.
    pub released: Option<(String, Timestamp)>,
    pub generation: i64,
    pub observed_generation: Option<i64>,
    /// The last write to the ExpressCluster other than its status (when its spec could have
    /// changed).
    pub spec_changed: Option<Timestamp>,
    /// The last write to the ExpressCluster or any of its nodes other than their status: when
    /// the desired state last changed (a version, a node's spec, a bounce request...).
    pub desired_changed: Option<Timestamp>,
    /// When the latest delivery to one of its nodes (a pod provisioned, replaced or rolled
    /// back; never a recovery) started.
    pub last_node_change: Option<Timestamp>,
    /// Its up nodes that are not Ready, and what moves each.
    pub nodes_down: Vec<NodeDown>,
    /// When the rollout halted on a failure (the `Halted` condition's transition).
    pub failed_at: Option<Timestamp>,
    /// `spec.rollout.progressDeadlineSeconds`: how long a node change may take to fail.
    pub progress_deadline_seconds: i64,
    /// The last status write to the ExpressCluster or its nodes.
    pub status_changed: Option<Timestamp>,
    /// The last transition of one of its pods (created, a condition changed, deleted).
    pub pods_changed: Option<Timestamp>,
    pub symptoms: Vec<Symptom>,
    pub rollout: Option<Rollout>,
    /// The pause in force: its scope (`operator-wide`, `namespace`, `cluster`) and reason.
    pub pause: Option<(String, Option<String>)>,
    /// An abort request is in force.
    pub aborted: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// The state as status names it (`Progressing`, `Failed`...), when known.
    pub state: Option<String>,
    pub started: Option<Timestamp>,
    pub finished: Option<Timestamp>,
    /// The Express version(s) the cluster's defaults ask for.
    pub version: Option<String>,
    pub failed_node: Option<String>,
}

impl Rollout {
    /// Under way: nodes changing or returning.
    pub fn active(&self) -> bool {
        matches!(self.state.as_deref(), Some("Progressing" | "RollingBack"))
    }

    /// Halted by its own failure or by an abort.
    pub fn halted(&self) -> bool {
        matches!(
            self.state.as_deref(),
            Some("Failed" | "Aborted" | "RollingBack")
        )
    }
}

/// An up node that is not Ready, and what moves it (`express_api::delivery::down_node_work`).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeDown {
    pub node: String,
    /// A delivery, a recovery or a bounce; `None` when nothing moves it yet.
    pub work: Option<Work>,
    /// Since when: the start of the change or bounce that moves it, else when its status last
    /// said it was Ready.
    pub since: Option<Timestamp>,
    /// When a delivery to its desired revision finished, if that is its last change and its
    /// pod is still there: a node a delivery just made Ready that went NotReady on its own is
    /// the new revision's doing, not a lost pod.
    pub delivered: Option<Timestamp>,
}

impl NodeDown {
    /// No delivery can explain this node being down at `now` (DESIGN section 12): a recovery
    /// moves it, or nothing does, and no delivery made it Ready within `window_seconds` (the
    /// progress deadline plus `--recent-rollout`) with the pod it still has. A bounce under way
    /// is neither explained nor a symptom: the operator fails it at its own timeout.
    pub fn unexplained(&self, now: Timestamp, window_seconds: i64) -> bool {
        match self.work {
            Some(Work::Recovery) => true,
            None => self
                .delivered
                .is_none_or(|at| now.as_second() - at.as_second() > window_seconds),
            Some(Work::Delivery | Work::Bounce) => false,
        }
    }
}

/// What is wrong with a tenant, as the runbook groups it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Symptom {
    Failed,
    RollingBack,
    Aborted,
    InvalidSpec,
    SettleStalled,
    NodesNotReady,
    Unreadable,
}

impl Symptom {
    pub const ALL: [Symptom; 7] = [
        Symptom::Failed,
        Symptom::RollingBack,
        Symptom::Aborted,
        Symptom::InvalidSpec,
        Symptom::SettleStalled,
        Symptom::NodesNotReady,
        Symptom::Unreadable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Symptom::Failed => "Failed",
            Symptom::RollingBack => "RollingBack",
            Symptom::Aborted => "Aborted",
            Symptom::InvalidSpec => "InvalidSpec",
            Symptom::SettleStalled => "SettleStalled",
            Symptom::NodesNotReady => "NodesNotReady",
            Symptom::Unreadable => "Unreadable",
        }
    }
}

/// A Warning event the operator published.
#[derive(Clone, Debug)]
pub struct Warning {
    pub namespace: String,
    pub reason: String,
    pub count: u32,
    pub last: Option<Timestamp>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// Exactly one per report; a higher one outranks a lower one. The API keeps it (a
/// FleetRelease stores each DC's), so it is defined with the API's types.
pub use express_api::verdict::Verdict;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub summary: String,
    pub evidence: Vec<String>,
}

/// One tenant in the report: what is wrong, and whether a rollout explains it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantReport {
    pub namespace: String,
    pub cluster: String,
    pub symptoms: Vec<Symptom>,
    pub rollout: Option<Rollout>,
    /// The trouble follows an ongoing or just-finished rollout.
    pub explained_by_rollout: bool,
    /// Seconds the operator is behind on this tenant, past the threshold.
    pub behind_seconds: Option<i64>,
    /// Its up nodes that are not Ready, and what moves each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes_down: Vec<NodeDownReport>,
}

/// One node down, in the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeDownReport {
    pub node: String,
    /// `delivery`, `recovery`, `bounce`, or null when nothing moves it.
    pub work: Option<Work>,
    /// Seconds since it went down or its recovery started, when known.
    pub for_seconds: Option<i64>,
    /// A recovery (or nothing) has left it down for longer than `--stuck-recovery`.
    pub stuck: bool,
}

impl NodeDownReport {
    /// "acme-fe2 recovering for 45s", "acme-fe2 down 3m10s, recovery stuck (over 2m)".
    pub fn describe(&self, stuck_after_seconds: i64) -> String {
        let during = self
            .for_seconds
            .map(|s| format!(" for {}", age(s)))
            .unwrap_or_default();
        let doing = match self.work {
            Some(Work::Recovery) => "recovering",
            Some(Work::Bounce) => "bouncing",
            Some(Work::Delivery) => "changing",
            None => "down, not recovered yet",
        };
        let stuck = if self.stuck {
            format!(", stuck (over {})", age(stuck_after_seconds))
        } else {
            String::new()
        };
        format!("{} {doing}{during}{stuck}", self.node)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub verdict: Verdict,
    /// Why the verdict, in one line (and, for `infrastructure`, who to engage).
    pub reason: String,
    pub checks: Vec<Check>,
    pub tenants: Vec<TenantReport>,
}
