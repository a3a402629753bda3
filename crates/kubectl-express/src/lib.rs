//! `kubectl-express`: the kubectl plugin for Express clusters (DESIGN section 9), as a library
//! the `kubectl-express` binary's menu dispatches into. The verbs live in [`verbs`], one module
//! each; the modules beside it are the layers the verbs share, each importing only those below
//! it: reading a cluster or manifests ([`read`]), writing requests ([`write`]), drawing
//! ([`show`]) in the look of [`text`], the contexts' shared end ([`contexts`]), the planner's
//! report ([`plan`]) and kept revisions ([`revisions`]); [`dashboard`] is the web UI behind the
//! `dashboard` verb. Connecting, exit codes, the runtime, live reads, requests and the driver of
//! a release across DCs live one crate down, in `express-client` (the operator's `dev` drives
//! its demo release with it).

pub mod contexts;
pub mod dashboard;
pub mod plan;
pub mod read;
pub mod revisions;
pub mod show;
pub mod text;
pub mod verbs;
pub mod write;
