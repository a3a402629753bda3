//! Reading: what the verbs and the dashboard read from a live cluster ([`live`]), from files
//! ([`manifests`]), and the operator's releases ([`release`]). Imports nothing above it.

pub mod fleet_release;
pub mod live;
pub mod manifests;
pub mod release;
pub mod rings;
pub mod triage;
pub mod unread;
pub mod view_store;
