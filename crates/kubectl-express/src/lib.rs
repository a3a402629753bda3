//! `kubectl-express`: the kubectl plugin for Express clusters (DESIGN section 9), as a library
//! the `kubectl-express` binary's menu dispatches into, and that `express-operator dev` drives a
//! release across DCs with in process. The verbs live in [`verbs`], one module each; the modules
//! beside it are the layers the verbs share, each importing only those below it: reading a
//! cluster or manifests ([`read`]), writing requests ([`write`]), drawing ([`show`]) in the
//! look of [`text`], choosing and reading contexts ([`contexts`]), driving a release across DCs
//! ([`fleet_release`]: the `fleet-release` verb and the dashboard both act through it), the planner's report
//! ([`plan`]), kept revisions ([`revisions`]), connecting ([`connect`]), the runtime
//! ([`runtime`]) and exit codes ([`exit`]); [`dashboard`] is the web UI behind the `dashboard`
//! verb.

pub mod connect;
pub mod contexts;
pub mod dashboard;
pub mod exit;
pub mod fleet_release;
pub mod plan;
pub mod read;
pub mod revisions;
pub mod runtime;
pub mod show;
pub mod text;
pub mod verbs;
pub mod write;
