//! One release across data centres (DESIGN section 14), as a pure step: the plan, the status
//! written last, the requests found on the copies and what each DC shows (its own
//! `OperatorRelease`, its doctor's verdict, or why it cannot be read) at `now` in; the next
//! status, the actions on the DCs' releases and when to look again out. The driver writes the
//! status into every copy after acting, and every action is safe to repeat, so a driver that
//! dies anywhere is resumed by any other from the DCs alone.
//!
//! The rules, each a row of `tests/fleet_release.rs`:
//! - **Stages in order.** The stage under way is derived from the DCs, not only from a stored
//!   cursor: the first stage with a DC whose release is not there, not succeeded, or not soaked.
//!   A stage starts by creating each DC's release (create-if-absent: a DC is released once).
//! - **Approval.** A stage marked `approval` waits (`WaitingApproval`) for an approve request;
//!   an approve made before the gate is reached passes the next gate.
//! - **Done, then soaked** ([`soak`]): a stage is done when every release of it succeeded; its
//!   soak is timed from the last of them finishing, so a new driver does not reset it. Every
//!   `release.intervalSeconds` its DCs are judged against the DCs not yet released; an
//!   inconclusive sample holds the soak clock; more than `release.failureLimit` failed samples
//!   fail the plan. DCs of earlier stages are not judged again.
//! - **Failure stops everything after it:** a DC whose release rolled back, a failed soak (the
//!   DCs in trouble are rolled back by their own release), or a stage past its deadline (paused
//!   time not counted; its releases still in flight are rolled back): `Failed`.
//! - **Unknown is never done.** A DC that cannot be read is `Unknown`, and the plan waits for it.
//! - **People win.** An abort (any copy) wins over everything: in-flight releases roll back
//!   (`Aborted`); with rollback, every release this plan made (`RolledBack`), even after
//!   `Succeeded`. Between a pause and a resume the newer wins; paused, in-flight releases are
//!   paused, no stage starts, no clock runs. Each request is acted on once.

mod model;
mod requests;
mod soak;
mod stages;
mod step;
mod stepper;

pub use model::*;
pub use soak::{SoakVerdict, judge};
pub use step::{step, verdicts_due};
