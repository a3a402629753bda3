//! The decision: from one [`ClusterSnapshot`](crate::snapshot::ClusterSnapshot), which pods to
//! create or delete now.
//!
//! A node's change is a short sequence of pod operations: provisioning creates the pod;
//! an upgrade deletes the old pod (gracefully) and creates the new one once the old is gone.
//! `rollout.maxConcurrent` bounds how many nodes are *in flight*: their pod is terminating,
//! a recorded replacement is unfinished, or their pod runs the desired revision but is not yet
//! Ready. Finishing a change already in flight never needs a free slot, starting one does.
//!
//! `verdict` holds what a plan says, `forward` decides it, and hands a halted rollout to
//! `halted`, which decides only what returns. This file names what they offer, so that none of
//! them depends on it.

mod forward;
mod halted;
mod verdict;

pub use forward::plan;
pub use verdict::{Blocked, Deferred, NodePlan, Plan};
