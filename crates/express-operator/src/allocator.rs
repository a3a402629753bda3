//! The operator binary's allocator: jemalloc, with what outlives a burst kept apart.
//!
//! jemalloc (`tikv-jemallocator`, purging from a background thread) was chosen by measurement:
//! after a burst glibc's malloc kept what the transient work had freed (docs/benchmarks.md).
//! On top of it, what the operator marks as long-lived (`express_operator::long_lived`: the
//! caches' views and their index, the recorders' events, the per-tenant series) is allocated
//! in an arena of its own, without the thread cache: the pages of the other arenas then hold
//! only what a burst allocates and frees, and return whole once it is over, instead of each
//! staying resident for the one view allocated among the burst's objects. Every free goes
//! through jemalloc's ordinary path, which finds an object's arena from its address.
//!
//! Also here: what the heap compaction reads and asks of jemalloc (`controller::HeapCompactor`).

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::{c_int, c_void};
use std::sync::Once;
use std::sync::atomic::{AtomicI32, Ordering};

use express_operator::controller;
use express_operator::long_lived::is_long_lived;
use tikv_jemalloc_sys as jemalloc;
use tikv_jemallocator::Jemalloc;

/// jemalloc, the long-lived allocations in an arena of their own (see the module doc).
pub struct LifetimeArenas;

/// `MALLOCX_ARENA` of the long-lived allocations' arena; 0 until [`reserve_long_lived_arena`]
/// made it (until then they share the others).
static LONG_LIVED_ARENA: AtomicI32 = AtomicI32::new(0);

/// The alignment flag jemalloc needs for `align` (none when its size classes give it anyway),
/// the same rule `tikv-jemallocator` follows, so either of the two can free what the other
/// allocated.
fn align_flag(align: usize, size: usize) -> c_int {
    const ALIGNED_BY_SIZE_CLASS: usize = 16;
    if align <= ALIGNED_BY_SIZE_CLASS && align <= size {
        0
    } else {
        jemalloc::MALLOCX_ALIGN(align)
    }
}

impl LifetimeArenas {
    /// The flags placing an allocation of this thread now: `None` when it is not long-lived.
    #[inline]
    fn long_lived(align: usize, size: usize) -> Option<c_int> {
        let arena = LONG_LIVED_ARENA.load(Ordering::Relaxed);
        (arena != 0 && is_long_lived())
            .then(|| arena | jemalloc::MALLOCX_TCACHE_NONE | align_flag(align, size))
    }
}

// SAFETY: every path is jemalloc's own (`mallocx`, `rallocx`, `sdallocx` with the flags
// `tikv-jemallocator` uses, plus an arena and no thread cache), which meets `GlobalAlloc`'s
// contract as `tikv-jemallocator` does; a block allocated by one path may be freed or resized
// by the other, since jemalloc finds its arena from its address.
unsafe impl GlobalAlloc for LifetimeArenas {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match Self::long_lived(layout.align(), layout.size()) {
            // SAFETY: `layout.size()` is not zero (the caller's contract).
            Some(flags) => unsafe { jemalloc::mallocx(layout.size(), flags).cast() },
            // SAFETY: the caller's contract, passed on.
            None => unsafe { Jemalloc.alloc(layout) },
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match Self::long_lived(layout.align(), layout.size()) {
            // SAFETY: as in `alloc`.
            Some(flags) => unsafe {
                jemalloc::mallocx(layout.size(), flags | jemalloc::MALLOCX_ZERO).cast()
            },
            // SAFETY: the caller's contract, passed on.
            None => unsafe { Jemalloc.alloc_zeroed(layout) },
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match Self::long_lived(layout.align(), layout.size()) {
            // Straight back to its arena: the replaced view's slot is the next view's.
            // SAFETY: `ptr` was allocated by this allocator with `layout` (the caller's
            // contract); the size and alignment flag are those it was allocated with.
            Some(_) => unsafe {
                jemalloc::sdallocx(
                    ptr.cast::<c_void>(),
                    layout.size(),
                    jemalloc::MALLOCX_TCACHE_NONE | align_flag(layout.align(), layout.size()),
                )
            },
            // SAFETY: the caller's contract, passed on.
            None => unsafe { Jemalloc.dealloc(ptr, layout) },
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match Self::long_lived(layout.align(), new_size) {
            // SAFETY: `ptr` is this allocator's, `new_size` is not zero (the caller's
            // contract); a block that moves moves into the long-lived arena.
            Some(flags) => unsafe {
                jemalloc::rallocx(ptr.cast::<c_void>(), new_size, flags).cast()
            },
            // SAFETY: the caller's contract, passed on.
            None => unsafe { Jemalloc.realloc(ptr, layout, new_size) },
        }
    }
}

/// Creates the long-lived allocations' arena (once; later calls do nothing). Until it exists,
/// and if jemalloc cannot make it, they share the other arenas, as every allocation did before.
pub fn reserve_long_lived_arena() {
    static RESERVED: Once = Once::new();
    RESERVED.call_once(|| {
        use tikv_jemalloc_ctl::{Access, AsName};
        let created: tikv_jemalloc_ctl::Result<u32> = b"arenas.create\0".name().read();
        match created {
            Ok(arena) => {
                let flag = jemalloc::MALLOCX_ARENA(arena as usize);
                LONG_LIVED_ARENA.store(flag, Ordering::Relaxed);
            }
            Err(error) => {
                tracing::warn!(%error, "cannot create jemalloc's arena for the long-lived caches; they share the others");
            }
        }
    });
}

/// jemalloc's heap now (its statistics are a snapshot taken when the epoch advances).
pub fn heap() -> Option<controller::Heap> {
    use tikv_jemalloc_ctl::{epoch, stats};
    epoch::advance().ok()?;
    let read = |bytes: Result<usize, _>| u64::try_from(bytes.ok()?).ok();
    Some(controller::Heap {
        allocated: read(stats::allocated::read())?,
        resident: read(stats::resident::read())?,
        retained: read(stats::retained::read())?,
    })
}

/// Runs `work` with this thread's jemalloc cache off (turning it off flushes it): every
/// allocation then takes a free slot of the arena's oldest page with room, every free returns
/// its slot at once, which is what packs a copy of the caches (`Caches::repack`).
pub fn without_thread_cache(work: &mut dyn FnMut()) {
    use tikv_jemalloc_ctl::{Access, AsName};
    let enabled = b"thread.tcache.enabled\0".name();
    let was: Result<bool, _> = enabled.read();
    if let Err(error) = enabled.write(false) {
        tracing::warn!(%error, "cannot turn jemalloc's thread cache off; copying with it on");
    }
    work();
    let _ = enabled.write(was.unwrap_or(true));
}

/// Purges every arena's unused pages now, in this thread (`arena.<MALLCTL_ARENAS_ALL>.purge`):
/// without it the pages a repack empties go back over the next ten seconds, bit by bit.
/// Setting the arenas' decay times to 0 and back, as this did before, only tries the decay's
/// lock: while a background thread held it (the more often, the busier the machine) nothing
/// was purged, and a compaction returned nothing.
///
/// A purge is also skipped while jemalloc's background thread is purging the same arena (it
/// marks the arena's decay as under way and lets go of the lock meanwhile): the pages stay
/// dirty until its next step. A test saw 63 MiB still dirty after the purge, under load one
/// time in four, and none 200 ms later. So the purge is asked again, a few times, while more
/// than a little is dirty; this runs on a blocking thread of its own.
pub fn return_free_pages() {
    /// Dirty pages (of 4 KiB) left that are not worth another try: others free all the time.
    const LITTLE_LEFT: usize = 256;
    const TRIES: u32 = 20;
    for _ in 0..TRIES {
        if !purge_every_arena() {
            return;
        }
        match dirty_pages() {
            Some(left) if left > LITTLE_LEFT => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            _ => return,
        }
    }
}

/// One purge of every arena; false when jemalloc refused it (said in the log).
fn purge_every_arena() -> bool {
    let Ok(name) = std::ffi::CString::new(format!("arena.{ALL_ARENAS}.purge")) else {
        return false;
    };
    // SAFETY: `arena.<i>.purge` takes and returns nothing: no old value is read (null `oldp`
    // and `oldlenp`) and no new one written (null `newp`, length 0); the name is a valid C
    // string for the call's duration.
    let failed = unsafe {
        jemalloc::mallctl(
            name.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if failed != 0 {
        tracing::warn!(code = failed, "jemalloc refused to purge its arenas");
    }
    failed == 0
}

/// jemalloc's `MALLCTL_ARENAS_ALL`: the index naming every arena at once.
const ALL_ARENAS: u32 = 4096;

/// Unused pages every arena holds resident, not yet returned (`stats.arenas.<all>.pdirty`).
fn dirty_pages() -> Option<usize> {
    tikv_jemalloc_ctl::epoch::advance().ok()?;
    let name = format!("stats.arenas.{ALL_ARENAS}.pdirty\0");
    // SAFETY: `stats.arenas.<i>.pdirty` is a `size_t`, read as one; the name ends in NUL.
    unsafe { tikv_jemalloc_ctl::raw::read::<usize>(name.as_bytes()) }.ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use express_operator::long_lived::long_lived;

    use super::*;

    /// jemalloc's statistics are the process's: the tests that read them take turns.
    static HEAP_READERS: Mutex<()> = Mutex::new(());

    /// Returns the free pages, then reads the heap and what it keeps resident beyond its live
    /// objects (bytes).
    fn resident_beyond_allocated_once_returned() -> (controller::Heap, u64) {
        return_free_pages();
        let heap = heap().expect("jemalloc's statistics");
        (heap, heap.resident.saturating_sub(heap.allocated))
    }

    /// The arena jemalloc placed `block` in (`arenas.lookup`).
    fn arena_of(block: *const u8) -> u32 {
        let mut arena: u32 = u32::MAX;
        let mut len = size_of::<u32>();
        let mut pointer = block.cast::<c_void>();
        // SAFETY: `arenas.lookup` reads a pointer and writes an unsigned; the lengths given
        // are those of the two variables passed.
        let failed = unsafe {
            jemalloc::mallctl(
                c"arenas.lookup".as_ptr(),
                (&raw mut arena).cast(),
                &mut len,
                (&raw mut pointer).cast(),
                size_of::<*const c_void>(),
            )
        };
        assert_eq!(failed, 0, "arenas.lookup");
        arena
    }

    fn long_lived_arena() -> u32 {
        reserve_long_lived_arena();
        let flag = LONG_LIVED_ARENA.load(Ordering::Relaxed);
        assert_ne!(flag, 0, "the arena was created");
        u32::try_from((flag >> 20) - 1).expect("an arena index")
    }

    #[test]
    fn what_is_marked_long_lived_is_placed_in_its_arena_and_the_rest_is_not() {
        let arena = long_lived_arena();
        let view: Box<[u8; 48]> = long_lived(|| Box::new([7; 48]));
        let mut index: Vec<u64> = long_lived(|| Vec::with_capacity(4));
        let transient = Box::new([7u8; 48]);
        assert_eq!(arena_of(view.as_ptr()), arena);
        assert_ne!(arena_of(transient.as_ptr()), arena);
        // Growing under the mark moves it there; what was allocated marked is freed unmarked.
        long_lived(|| index.extend(0..4096));
        assert_eq!(arena_of(index.as_ptr().cast()), arena);
        let zeroed: Box<[u64; 512]> = long_lived(zeroed_words);
        assert_eq!(arena_of(zeroed.as_ptr().cast()), arena);
        assert!(zeroed.iter().all(|&word| word == 0));
        let aligned: Box<Aligned> = long_lived(|| Box::new(Aligned([3; 64])));
        assert_eq!(arena_of(aligned.0.as_ptr()), arena);
        assert_eq!((&raw const *aligned).addr() % 128, 0);
        drop((view, index, zeroed, aligned));
    }

    #[repr(align(128))]
    struct Aligned([u8; 64]);

    /// A zeroed allocation (`alloc_zeroed`), as `vec![0; n]` makes one.
    fn zeroed_words() -> Box<[u64; 512]> {
        let zeroed = vec![0u64; 512].into_boxed_slice();
        zeroed.try_into().expect("512 words")
    }

    /// The burst's pattern: one object that stays allocated among three that go, all of one
    /// size. Without an arena of their own, those that stay keep every page resident.
    #[test]
    fn what_stays_after_a_burst_does_not_keep_the_bursts_pages() {
        let _turn = HEAP_READERS.lock().unwrap_or_else(|p| p.into_inner());
        long_lived_arena();
        let mut stays: Vec<Box<[u8; 1024]>> = long_lived(|| Vec::with_capacity(16_384));
        let mut goes: Vec<Box<[u8; 1024]>> = Vec::with_capacity(49_152);
        for n in 0..65_536 {
            if n % 4 == 0 {
                stays.push(long_lived(|| Box::new([1; 1024])));
            } else {
                goes.push(Box::new([2; 1024]));
            }
        }
        drop(goes);
        let (heap, spread) = resident_beyond_allocated_once_returned();
        assert!(
            spread < 16 << 20,
            "{heap:?}: 48 MiB freed around 16 MiB kept, {spread} bytes still resident"
        );
        drop(stays);
    }

    /// What a burst frees is resident until jemalloc's decay returns it, seconds later;
    /// returning the free pages gives it back at once.
    #[test]
    fn returning_free_pages_gives_back_what_a_burst_freed() {
        let _turn = HEAP_READERS.lock().unwrap_or_else(|p| p.into_inner());
        let burst: Vec<Box<[u8; 1024]>> = (0..65_536).map(|_| Box::new([1u8; 1024])).collect();
        drop(burst);
        let (heap, spread) = resident_beyond_allocated_once_returned();
        assert!(
            spread < 16 << 20,
            "{heap:?}: 64 MiB freed, {spread} bytes still resident"
        );
    }
}
