//! The Express operator: the controller (observe → plan → act → report per Express cluster),
//! its work queue, the client-side API rate limit, the pod builder, the status report, metrics, and (with the default `dev`
//! feature, left out of the shipped image) the local `dev` cluster on kubesim.

pub mod api_trouble;
pub mod controller;
pub mod crd_check;
#[cfg(feature = "dev")]
pub mod dev;
pub mod faults;
pub mod history;
pub mod install;
pub mod leader;
pub mod long_lived;
pub mod memory_metrics;
pub mod metric_groups;
pub mod metrics;
pub mod notify_metrics;
pub mod pods;
pub mod release_metrics;
pub mod run;
pub mod runner;
pub mod status;
pub mod throttle;
