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
//! - **The API first** ([`api`]). Before the first move, `toRing`'s build must have checked its
//!   own CRDs against this DC and applied them (or found them current, or newer and
//!   compatible), as its Lease records: the record becomes `status.api` and condition
//!   `APICompatible`. A breaking record moves nothing, and says why.
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

mod api;
mod census;
mod judge;
mod model;
mod requests;
mod samples;
mod schedule;
mod step;
mod stepper;
mod waves;

pub use census::ReleaseTenant;
pub use judge::judge;
pub use model::*;
pub use schedule::sample_due;
pub use step::step;
