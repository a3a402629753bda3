//! Reading what only the plugin reads: manifests from files ([`manifests`]), the operator's
//! releases ([`release`]) and its rings ([`rings`]). A live cluster's objects are read with
//! `express_client::read`. Imports nothing above it.

pub mod manifests;
pub mod release;
pub mod rings;
