//! Prerequisite resolution (DESIGN section 3): the default provisioning and upgrade orders,
//! explicit prerequisites, substitution of intentionally-down nodes, cycle detection, and the
//! test of whether one prerequisite is met right now.
//!
//! Three rooms: `graph` resolves who waits for whom, `validate` finds prerequisites no
//! state of the cluster could meet, `met` checks one prerequisite against the pods now.
//! This file only names what they offer, so that none of them depends on it.

mod graph;
mod met;
mod validate;

pub use graph::{Cycle, Graph, Origin, Phase, ReachCache, Requirement, Target, resolve};
pub use met::{Checker, MISSING_BACKEND, Unmet, UnmetReason};
pub use validate::{DanglingPrerequisite, dangling_prerequisites};
