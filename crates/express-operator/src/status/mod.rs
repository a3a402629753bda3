//! The report step, pure: node and ExpressCluster status from the snapshot and the plan
//! (DESIGN section 7). Conditions keep their lastTransitionTime unless their status changes;
//! [`same_ignoring_time`] tells whether a write is needed at all, [`quiet_start`] whether it
//! can wait; [`patch`] is the body every status write of our kinds applies.

mod cluster;
mod conditions;
#[cfg(test)]
mod fixtures;
mod node;
pub mod quiet_start;
mod settle_mark;

pub use cluster::{cluster_status, settle_reason};
pub use conditions::{condition, same_ignoring_time};
pub use node::node_status;

/// The body of a server-side apply of `status` to an object of our `kind`: what a status write
/// of a node, an ExpressCluster or an OperatorRelease sends.
pub fn patch(kind: &str, status: &impl serde::Serialize) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": format!("{}/{}", express_api::keys::GROUP, express_api::keys::VERSION),
        "kind": kind,
        "status": status,
    })
}
