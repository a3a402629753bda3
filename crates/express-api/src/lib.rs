//! The `express.dev` API, `v1alpha1` ([`v1alpha1`], the operator's own types, re-exported at the
//! crate's root) and `v1beta1` ([`v1beta1`],
//! converted by [`conversion`]): the `ExpressCluster`, `Backend` and `Frontend` custom
//! resources, the well-known labels and annotations, and the two derived facts every other crate
//! relies on: a node's *effective* spec (cluster defaults merged with node overrides) and its
//! *deployment revision* (a stable hash of that effective spec).
//!
//! It also holds the one object model every reader shares ([`objects`]). This crate owns the
//! wire format. It does no I/O.

pub mod analysis;
pub mod api_record;
pub mod bounce;
pub mod conditions;
pub mod conversion;
pub mod crd;
pub mod delivery;
pub mod effective;
pub mod fleet_release;
pub mod history;
pub mod keys;
pub mod lenient;
pub mod names;
pub mod natural;
pub mod objects;
pub mod release;
pub mod rings;
pub mod v1alpha1;
pub mod v1beta1;
pub mod verdict;
pub mod views;

pub use bounce::{BouncePhase, BounceStatus};
pub use delivery::Work;
pub use effective::{EffectiveNodeSpec, EffectiveSpecError, effective_spec};
pub use fleet_release::{FleetPhase, FleetRelease, FleetReleaseSpec, FleetReleaseStatus};
pub use objects::{ClusterKey, NodeRef, Objects};
pub use release::{OperatorRelease, OperatorReleaseSpec, OperatorReleaseStatus, ReleasePhase};
/// The `v1alpha1` kinds at the crate's root: the hub every version converts through, and the
/// types the operator reasons over.
pub use v1alpha1::*;
