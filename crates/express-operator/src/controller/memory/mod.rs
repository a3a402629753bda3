//! The operator's memory: what it holds of the cluster between reconciles. One cache per kind
//! ([`caches`]), each an index fed by its watch ([`index`]); the operator's own writes laid
//! over them until they show ([`overlay`]: statuses and pods; [`moves`]: the tenants a release
//! moved); and giving memory back after a burst ([`heap`], the allocator's side and the pure
//! decision; [`compact`], the repack). Nothing here reads the controller's context: the
//! context holds these.

pub mod caches;
pub mod compact;
pub mod heap;
pub mod index;
pub mod moves;
pub mod overlay;
