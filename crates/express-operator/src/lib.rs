//! The Express operator: the controller (observe → plan → act → report per Express cluster),
//! its work queue, the pod builder, the status report, metrics, and the local `dev` cluster.

pub mod controller;
pub mod dev;
pub mod history;
pub mod leader;
pub mod metrics;
pub mod pods;
pub mod runner;
pub mod status;
