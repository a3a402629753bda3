//! The allocator's side of giving memory back: what it offers ([`HeapCompactor`], jemalloc's
//! in the binary), what it reports ([`Heap`]), and the pure decision whether a repack is worth
//! it ([`repack_due`]). Below the context that carries the compactor in its settings.

/// What the operator's allocator offers to compact its heap (jemalloc's, in the binary).
#[derive(Clone, Copy, Debug)]
pub struct HeapCompactor {
    /// The heap as the allocator reports it now.
    pub heap: fn() -> Option<Heap>,
    /// Runs `work` on the calling thread with its allocation cache off.
    pub without_thread_cache: fn(&mut dyn FnMut()),
    /// Returns the pages the allocator holds free to the system now, rather than over its
    /// decay time (seconds), so that a repack's effect shows at once.
    pub return_free_pages: fn(),
}

/// Resident bytes beyond the allocated ones below which nothing is worth copying.
const SLACK_BYTES: u64 = 16 << 20;

/// The heap as the allocator reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heap {
    /// Bytes in live objects.
    pub allocated: u64,
    /// Bytes in the pages the allocator holds.
    pub resident: u64,
    /// Address space the allocator keeps but has given back to the system.
    pub retained: u64,
}

/// Whether the caches should be repacked now: the operator is at rest (`quiet`: no reconcile
/// since the last look, so that a burst is not copied while it runs), the heap keeps resident
/// a quarter more than it has allocated and more than [`SLACK_BYTES`] over it, and it has grown
/// by a tenth since the last repack left it at `resident_after_last` (a heap a repack could
/// not pack better is not copied again and again).
pub fn repack_due(heap: Heap, quiet: bool, resident_after_last: Option<u64>) -> bool {
    let spread = heap.resident.saturating_sub(heap.allocated);
    quiet
        && spread > heap.allocated / 4
        && spread > SLACK_BYTES
        && resident_after_last.is_none_or(|after| heap.resident > after.saturating_add(after / 10))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn heap(allocated: u64, resident: u64) -> Heap {
        Heap {
            allocated: allocated * MIB,
            resident: resident * MIB,
            retained: 0,
        }
    }

    #[test]
    fn a_spread_heap_is_repacked_at_rest_and_again_only_once_it_grew() {
        let rows = [
            // (heap, quiet, resident after the last repack, due)
            (heap(20, 34), true, None, false), // 14 MiB over: not worth a copy
            (heap(40, 70), true, None, true),
            (heap(40, 80), false, None, false), // a burst under way
            (heap(300, 370), true, None, false), // under a quarter more
            (heap(480, 620), true, None, true), // a settled fleet after an upgrade
            (heap(300, 620), true, None, true),
            (heap(300, 620), true, Some(600 * MIB), false), // the last repack could do no better
            (heap(300, 620), true, Some(500 * MIB), true),  // grew since
            (heap(0, 0), true, None, false),
            (
                Heap {
                    allocated: u64::MAX,
                    resident: 0,
                    retained: 0,
                },
                true,
                None,
                false,
            ),
            (
                Heap {
                    allocated: 0,
                    resident: u64::MAX,
                    retained: u64::MAX,
                },
                true,
                Some(u64::MAX),
                false,
            ),
        ];
        for (heap, quiet, after, due) in rows {
            assert_eq!(
                repack_due(heap, quiet, after),
                due,
                "{heap:?}, quiet {quiet}, {after:?} after the last"
            );
        }
    }
}
