//! Giving memory back after a burst: when the allocator holds far more than the heap uses, the
//! caches are copied into fresh allocations ([`super::caches::Caches::repack`]) with the
//! thread's allocation cache off, so that the copies pack into few pages and the pages the old
//! objects leave empty are returned. The allocator's side (reading its figures, turning its
//! thread cache off) is the binary's, through [`HeapCompactor`](super::heap::HeapCompactor);
//! the decision is [`repack_due`], a pure function.

use std::sync::Arc;
use std::time::Instant;

use tracing::info;

use super::heap::{HeapCompactor, repack_due};
use crate::long_lived::long_lived;
use crate::metrics::Metrics;

/// What the timer remembers between looks.
#[derive(Default)]
pub(crate) struct Compaction {
    /// Reconciles counted at the last look.
    reconciles: u64,
    /// Resident bytes once the last repack's pages were returned.
    resident_after_last: Option<u64>,
    /// A repack ran at the last look: the allocator returns the pages it emptied over the
    /// next seconds (its decay), so what it left is read at the look after.
    repacked: bool,
}

/// Repacks the caches (`repack`: [`Caches::repack`](super::caches::Caches::repack) of the
/// running controller's) with `compactor`'s help when [`repack_due`] says so.
pub(crate) async fn compact_if_due(
    compactor: Option<HeapCompactor>,
    metrics: &Metrics,
    repack: Arc<dyn Fn() + Send + Sync>,
    state: &mut Compaction,
) {
    let Some(compactor) = compactor else {
        return;
    };
    let reconciles = metrics.reconciles_so_far();
    let quiet = reconciles == state.reconciles;
    state.reconciles = reconciles;
    let Some(heap) = (compactor.heap)() else {
        return;
    };
    if std::mem::take(&mut state.repacked) {
        state.resident_after_last = Some(heap.resident);
    }
    if !repack_due(heap, quiet, state.resident_after_last) {
        return;
    }
    let started = Instant::now();
    // A thread of its own: its allocation cache is turned off for the copy.
    let copied = tokio::task::spawn_blocking(move || {
        (compactor.without_thread_cache)(&mut || long_lived(|| repack()));
        (compactor.return_free_pages)();
    })
    .await;
    state.repacked = true;
    // Until the look after reads what it left, the heap as it stood counts as the last.
    state.resident_after_last = Some(heap.resident);
    if copied.is_ok() {
        metrics.memory.repacks.inc();
        info!(
            allocated_mib = heap.allocated >> 20,
            resident_mib = heap.resident >> 20,
            seconds = started.elapsed().as_secs_f64(),
            "repacked the caches: the heap kept far more resident than it used"
        );
    }
}
