//! Showing, pure: text output one object at a time, as argo-rollouts' `info/` — clusters
//! ([`cluster`]: list rows, the tree), their status ([`status`]), prerequisite graphs
//! ([`graph`]), kept revisions ([`history`]), operator releases ([`release`]) and releases
//! across DCs ([`fleet_release`]), rings ([`rings`]), doctor's report ([`doctor`]), over the
//! shared look of [`crate::text`].

pub mod cluster;
pub mod doctor;
pub mod fleet_release;
pub mod graph;
pub mod history;
pub mod release;
pub mod revisions;
pub mod rings;
pub mod status;
