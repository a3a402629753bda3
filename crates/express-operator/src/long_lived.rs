//! Which allocations outlive the work that made them.
//!
//! The caches' views, the names and maps that index them, the recorders' events and the
//! per-tenant series are made in the middle of a burst (a provisioning, a fleet-wide upgrade,
//! a relist), between the burst's transient objects: decoded API objects, JSON bodies, plans.
//! Left to share pages with those, one view in a page keeps the whole page resident once the
//! burst is over. The code that makes what stays marks itself with [`long_lived`]; the
//! binary's allocator places what is allocated there in an arena of its own, so the pages a
//! burst fills hold only what the burst frees and go back whole. Without such an allocator
//! (tests, the CLI) a mark costs a thread-local write.

use std::cell::Cell;

thread_local! {
    /// Whether this thread is inside [`long_lived`]; const, without a destructor, so that an
    /// allocator can read it at any point of a thread's life without allocating.
    static MARKED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `make` with its allocations marked as long-lived (see the module doc). Marks nest;
/// the mark is lifted when `make` returns or unwinds.
pub fn long_lived<R>(make: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = MARKED.try_with(|marked| marked.set(self.0));
        }
    }
    let _restore = Restore(
        MARKED
            .try_with(|marked| marked.replace(true))
            .unwrap_or(false),
    );
    make()
}

/// Whether what this thread allocates now is long-lived: what the allocator asks.
#[inline]
pub fn is_long_lived() -> bool {
    MARKED.try_with(Cell::get).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_holds_inside_nests_and_is_lifted_after_a_panic() {
        assert!(!is_long_lived());
        let inner = long_lived(|| {
            let nested = long_lived(is_long_lived);
            (nested, is_long_lived())
        });
        assert_eq!(inner, (true, true));
        assert!(!is_long_lived());
        let unwound = std::panic::catch_unwind(|| long_lived(|| panic!("a view failed")));
        assert!(unwound.is_err());
        assert!(!is_long_lived(), "the mark outlived an unwind");
        let other = std::thread::spawn(|| long_lived(|| std::thread::spawn(is_long_lived).join()))
            .join()
            .expect("threads");
        assert_eq!(other.ok(), Some(false), "a mark is the thread's own");
    }
}
