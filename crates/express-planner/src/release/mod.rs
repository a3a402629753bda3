//! The operator's own release (DESIGN section 12), as a pure step: what the API shows of an
//! `OperatorRelease`, the tenants and the two rings at `now` in; the next status, the tenants to
//! move (forward or back), the events to publish and when to look again out. The controller
//! records the status before it moves anything, so a successor resumes from the status and the
//! tenants' labels alone: nothing here remembers anything between steps.
//!
//! The rules, each a row of `tests/release.rs`:
//! - **Movable or pinned.** A tenant without a ring label, or whose label a release set
//!   (`express.dev/released-by`), may be moved; a label set by anyone else pins it. The release
//!   moves the movable tenants of `fromRing` (and counts the ones it moved already).
//! - **Order.** Movable tenants in the order of a stable hash of `namespace/name`: the same
//!   order after any restart, spread across namespaces. A tenant created mid-release takes its
//!   place in that order (moved in the wave that reaches it); one deleted leaves the counts.
//! - **Waves.** A wave's target is cumulative, from the movable count now. Moves are bounded by
//!   `maxHandOvers` hand-overs in flight (moved, not yet adopted).
//! - **Samples** every `intervalSeconds` ([`judge`]): failed when `toRing` is worse and
//!   `fromRing` is not; inconclusive when both are in trouble alike, or when nothing could be
//!   read; ok otherwise. Inconclusive holds: nothing moves, no bake time passes.
//! - **Bake.** A wave whose tenants are all adopted bakes from its first ok sample; any other
//!   sample restarts the bake. It ends after `bakeSeconds`, or at once when promoted.
//! - **Rollback.** More failed samples than `failureLimit`, or a rollback request: every tenant
//!   the release moved goes back, and it never moves one forward again.
//! - **A person wins.** `spec.paused` stops everything but a rollback request; promote ends
//!   the bake (`full`: every remaining wave, no more judging); requests are acted on once.

mod census;
mod judge;
mod requests;
mod samples;
mod schedule;
mod step;
mod stepper;
mod waves;

pub use census::ReleaseTenant;
pub use judge::judge;
pub use schedule::sample_due;
pub use step::step;

use express_api::release::{OperatorReleaseSpec, OperatorReleaseStatus};
use express_triage::rings::RingHealth;
use k8s_openapi::jiff::Timestamp;

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
    pub const INCONCLUSIVE: &str = "Inconclusive";
    pub const PROMOTED: &str = "Promoted";
    pub const PAUSED: &str = "Paused";
    pub const RESUMED: &str = "Resumed";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const ROLLED_BACK: &str = "RolledBack";
    pub const REQUEST_IGNORED: &str = "RequestIgnored";
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
}

/// Everything one step reads.
#[derive(Clone, Debug)]
pub struct ReleaseSnapshot<'a> {
    pub name: &'a str,
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
