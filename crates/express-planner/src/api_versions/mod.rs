//! The API's versions in one DC (DESIGN section 18), decided without I/O: which step brings a
//! CRD of the DC to what a build carries, what a step waits for, how far a DC has come, and
//! whether a build may lead at all.
//!
//! A new version travels in five steps, each taken only when the one before holds:
//!
//! 1. **listed**, not served: the older builds see a version they do not know and leave the
//!    conversion webhook's Service (each pod decides for itself, by what the CRDs list);
//! 2. **served**, once every pod behind the webhook knows every listed version;
//! 3. **storage moved**, once every ring of the DC runs a build that knows the new version
//!    (never on a canary's word: a ring whose build does not say what it knows holds it back);
//! 4. **migrated**: every stored object rewritten at the new storage version, a page at a time;
//! 5. **trimmed**: `status.storedVersions` is the storage version alone.
//!
//! A DC whose CRDs list a version the build does not know, or store at a version newer than the
//! one it would store at, is ahead of the build: it is left as it is (a build never downgrades
//! an API; a rollback leaves it).
//!
//! Its rooms: [`carried`], the API a build carries, decided once from its flags (the CRDs it
//! applies, each with where it takes the DC, and the versions it knows), and the CRD it applies
//! where a DC already has one; [`steps`], the steps themselves.

mod carried;
mod steps;

pub use carried::*;
pub use steps::*;
