//! What a release across DCs reads and decides: the snapshot (the plan, the status written
//! last, the requests, what each DC shows, `now`), the actions on the DCs' releases, the step,
//! and the reasons of its notices. Below every gate of the step.

pub use crate::gates::Notice;
use express_api::fleet_release::{FleetReleaseSpec, FleetReleaseStatus, Request};
use express_api::release::ReleasePhase;
use express_triage::Verdict;
use k8s_openapi::jiff::Timestamp;

/// The reasons of the notices a step leaves, one per thing a release across DCs does.
pub mod reason {
    pub const STAGE_STARTED: &str = "StageStarted";
    pub const SAMPLE: &str = "SoakSample";
    pub const SOAKED: &str = "Soaked";
    pub const APPROVED: &str = "Approved";
    pub const PAUSED: &str = "Paused";
    pub const RESUMED: &str = "Resumed";
    pub const ABORTED: &str = "Aborted";
    pub const FAILED: &str = "Failed";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const REQUEST_IGNORED: &str = "RequestIgnored";
}

/// The newest request of each kind found on the plan's copies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    pub pause: Option<Request>,
    pub resume: Option<Request>,
    pub approve: Option<Request>,
    pub abort: Option<Request>,
    /// The abort asks every DC already released back too.
    pub abort_rollback: bool,
}

/// A DC's `OperatorRelease` of this plan, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReleaseSeen {
    pub phase: ReleasePhase,
    pub wave: u32,
    pub moved: u32,
    /// When it succeeded (its last wave finished).
    pub finished_at: Option<Timestamp>,
    /// `spec.paused`.
    pub paused: bool,
    /// Paused by this plan (not by a person, whose pause stands).
    pub paused_by_plan: bool,
    /// A rollback was asked of it (acted on or not).
    pub rollback_asked: bool,
}

/// What one DC showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DcRead {
    /// Its release of this plan; None: not created.
    pub release: Option<ReleaseSeen>,
    /// Its doctor's verdict when the driver read it (a soak sample due, or the last stage
    /// about to start); `Err` says why it could not.
    pub verdict: Option<Result<Verdict, String>>,
}

/// One DC of the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DcSeen {
    pub context: String,
    /// `Err`: why it cannot be read.
    pub read: Result<DcRead, String>,
}

/// Everything one step reads.
#[derive(Clone, Debug)]
pub struct FleetSnapshot<'a> {
    pub spec: &'a FleetReleaseSpec,
    /// The status to resume from: the copy written last.
    pub status: &'a FleetReleaseStatus,
    pub requests: Requests,
    /// The DCs the plan names (any order).
    pub dcs: &'a [DcSeen],
    pub now: Timestamp,
}

/// What the driver does to a DC's release. Each is safe to repeat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FleetAction {
    /// Create the DC's release if it is not there.
    Create {
        context: String,
    },
    Pause {
        context: String,
    },
    Resume {
        context: String,
    },
    /// Ask the DC's release to roll back (its `fromRing` leader moves its tenants home).
    RollBack {
        context: String,
        reason: String,
    },
}

impl FleetAction {
    pub fn context(&self) -> &str {
        match self {
            FleetAction::Create { context }
            | FleetAction::Pause { context }
            | FleetAction::Resume { context }
            | FleetAction::RollBack { context, .. } => context,
        }
    }
}

/// What one step decided.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetStep {
    pub status: FleetReleaseStatus,
    pub actions: Vec<FleetAction>,
    /// What happened, in the words the driver prints (a stage started, a sample, a failure).
    pub notices: Vec<Notice>,
    /// When to step again though nothing changed (a sample due, a soak ending, a deadline).
    pub wake_at: Option<Timestamp>,
}
