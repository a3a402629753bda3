//! `kubectl express revisions` and `kubectl express diff` (DESIGN sections 2 and 9): the
//! deployment revision of every node computed from local manifests (files, or a chart rendered
//! by `helm template`) and compared with the live cluster. The revision and effective spec come
//! from `express_api`, the one implementation the operator uses too.
//!
//! [`sources`] reads the nodes from both sides, [`compare`] compares them, and
//! `show::revisions` prints the result.

pub mod compare;
pub mod sources;

#[cfg(test)]
mod tests;
