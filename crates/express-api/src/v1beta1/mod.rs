//! `express.dev/v1beta1`: the shape of the tenant-facing kinds chosen with what running the
//! product taught (DESIGN section 18; the field-by-field mapping is in docs/api.md).
//!
//! What changed from `v1alpha1`, and why:
//! - a node names its cluster once, `spec.cluster`; the tenant's id and name are the cluster's
//!   facts and live only on the ExpressCluster (`spec.tenant`), not repeated on every node;
//! - a prerequisite says what it waits for as it reads: `{node, kind, condition: {type, status},
//!   pin: {version, revision}}`;
//! - `expressVersion` and `configChangeset` are `version` and `changeset` (everything in the
//!   group is Express's); a node's `deploymentDependencies` and the cluster's `dependencies` are
//!   both `ordering`.
//!
//! The status of every kind is the same at both versions: the operator writes it, and a status
//! that reads the same at both versions lets two builds that know different versions share a
//! cluster. The OperatorRelease and the FleetRelease stay at `v1alpha1` only: the release tooling
//! writes them, each lives for one release, and nothing about their shape needs to break.
//!
//! These types are the wire shape only; the operator reasons over the `v1alpha1` types, the hub
//! every version converts through ([`crate::conversion`]), so a node's effective spec and
//! deployment revision cannot depend on the version it was written at.

mod cluster;
mod node;
pub mod old_names;

pub use cluster::*;
pub use node::*;

/// This version's name.
pub const VERSION: &str = "v1beta1";
