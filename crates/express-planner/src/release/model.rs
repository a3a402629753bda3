//! What a release's step reads and decides: the snapshot (the spec, the status, the requests,
//! the tenants, `toRing`'s leader, the rings' health, `now`), the moves, the step, and the
//! words it uses (the Valid condition, the event reasons). Below every gate of the step.

use express_api::api_record::ApiRecord;
use express_api::release::{OperatorReleaseSpec, OperatorReleaseStatus};
use express_triage::rings::RingHealth;
use k8s_openapi::jiff::Timestamp;

use super::census::ReleaseTenant;

/// The condition that says whether the spec can be acted on.
pub const CONDITION_VALID: &str = "Valid";
/// Samples kept in `status.lastSamples`.
pub const SAMPLES_KEPT: usize = 5;

/// Event reasons, one per thing a release does.
pub mod reason {
    pub const INVALID_SPEC: &str = "InvalidSpec";
    pub const STARTED: &str = "Started";
    pub const WAVE_STARTED: &str = "WaveStarted";
    pub const SAMPLE_FAILED: &str = "SampleFailed";
    pub const SAMPLED: &str = "Sampled";
    pub const INCONCLUSIVE: &str = "Inconclusive";
    pub const PROMOTED: &str = "Promoted";
    pub const PAUSED: &str = "Paused";
    pub const RESUMED: &str = "Resumed";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const ROLLED_BACK: &str = "RolledBack";
    pub const REQUEST_IGNORED: &str = "RequestIgnored";
    pub const API_CHECKING: &str = "Checking";
    pub const API_BREAKING: &str = "APIBreaking";
    pub const API_READY: &str = "APIReady";
    pub const LEADER_AWAITED: &str = "AwaitingLeader";
    pub const LED: &str = "Led";
    pub const NO_LEADER: &str = "NoLeader";
}

/// The requests found on the release's annotations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    pub promote: Option<String>,
    pub promote_full: bool,
    pub rollback: Option<String>,
}

/// `toRing`'s live leader, as its Lease shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    pub holder: String,
    /// The build it reports (none: it has not said).
    pub version: Option<String>,
    /// What it last did with its own CRDs in this DC, from its Lease (none: not yet checked).
    pub api: Option<ApiRecord>,
}

/// Everything one step reads.
#[derive(Clone, Debug)]
pub struct ReleaseSnapshot<'a> {
    pub name: &'a str,
    /// The release's uid: `toRing`'s record of its CRDs counts only when made for it.
    pub uid: Option<&'a str>,
    pub generation: Option<i64>,
    pub spec: &'a OperatorReleaseSpec,
    pub status: &'a OperatorReleaseStatus,
    pub requests: Requests,
    /// Every tenant of the fleet.
    pub tenants: &'a [ReleaseTenant],
    /// `toRing`'s live leader; none when its Lease has no live holder.
    pub to_leader: Option<Leader>,
    /// Each ring's health (`fromRing`, `toRing`) when a sample is due ([`sample_due`]) and the
    /// fleet could be read; `Err` says what could not be read; `None`: not read this time.
    pub health: Option<Result<(RingHealth, RingHealth), String>>,
    /// The operator's vital signs over the window [`crate::analysis::window`] chose, read when
    /// a sample is due and the release has `spec.analysis` (none: not read this step).
    pub analysis: Option<crate::analysis::Analysis>,
    pub now: Timestamp,
}

/// Which way a tenant goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Forward,
    Back,
}

/// Set a tenant's ring label (removed for the default ring) and mark it as this release's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    pub namespace: String,
    pub name: String,
    pub to_ring: String,
    pub direction: Direction,
}

/// An event to publish on the release.
pub use crate::gates::Notice;

/// What one step decided.
#[derive(Clone, Debug, PartialEq)]
pub struct ReleaseStep {
    pub status: OperatorReleaseStatus,
    pub moves: Vec<Move>,
    pub notices: Vec<Notice>,
    /// When to step again though nothing changed (a sample due, a bake ending).
    pub wake_at: Option<Timestamp>,
}
