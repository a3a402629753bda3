//! The sans-IO core of the operator: given a snapshot of one Express cluster (node objects,
//! observed pods, pause state), decide which pods may be created or deleted now, and for every
//! node that must wait, exactly what it waits for.
//!
//! Nothing here talks to a server or reads a clock. [`observe`] turns API objects into a
//! [`ClusterSnapshot`], [`plan`] decides, [`simulate`] replays plans step by step for
//! `kubectl express plan` and the property tests. [`ownership`] decides which operator ring
//! may act on a tenant at all.

pub mod action;
pub mod analysis;
pub mod api_versions;
pub mod bounce;
pub mod fleet_release;
pub mod gates;
pub mod observe;
pub mod ownership;
pub mod plan;
pub mod prerequisites;
pub mod release;
pub mod rollout;
pub mod settle;
pub mod simulate;
pub mod snapshot;
pub mod state;
mod text;

pub use action::{Action, Operation, PodSource};
pub use bounce::BouncePlan;
pub use plan::{Blocked, NodePlan, Plan, plan};
pub use prerequisites::{Phase, Unmet, UnmetReason};
pub use settle::{Settle, SettleState};
pub use snapshot::*;
pub use state::{NodeState, classify};
