//! The occurrences an object's status shows now. Each is read from what status keeps (a state
//! with its start and finish, a condition with its transition, a wave's finish, a rollback's
//! instant), never from a change seen in passing: a pass that comes late, or a new leader after
//! a restart, finds the same occurrences with the same ids. One room per kind: [`tenant`],
//! [`release`], [`fleet`]; what they share in `base`.

mod base;
mod fleet;
mod release;
mod tenant;

pub use fleet::{fleet_release, fleet_teller};
pub use release::release;
pub use tenant::tenant;
