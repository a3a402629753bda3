//! Writing: the requests people make, each written the way a user would write it — on clusters
//! and nodes ([`control`]: pause, resume, abort, retry, bounce) and on operator releases
//! ([`release`]).

pub mod control;
pub mod fleet_release;
pub mod release;
