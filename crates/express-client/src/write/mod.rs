//! Writing: the requests people make, each written the way a user would write it, on clusters
//! and nodes ([`control`]: pause, resume, abort, retry, bounce), and a plan's copies and the
//! steps of its driver ([`fleet_release`]).

pub mod control;
pub mod fleet_release;
