//! The report step, pure: node and ExpressCluster status from the snapshot and the plan
//! (DESIGN section 7). Conditions keep their lastTransitionTime unless their status changes;
//! [`same_ignoring_time`] tells whether a write is needed at all.

mod cluster;
mod conditions;
#[cfg(test)]
mod fixtures;
mod node;
mod settle_mark;

pub use cluster::{cluster_status, settle_reason};
pub use conditions::{condition, same_ignoring_time};
pub use node::node_status;
