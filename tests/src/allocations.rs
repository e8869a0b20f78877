//! Counting the allocations a piece of code makes on the current thread,
//! to prove a path allocates nothing. A test binary opts in by making
//! [`Counting`] its global allocator:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: cronbox_tests::allocations::Counting = cronbox_tests::allocations::Counting;
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    /// Allocations made by this thread (const-initialised: reading it never
    /// allocates, so the allocator may).
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting each thread's allocations.
#[derive(Debug)]
pub struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(pointer, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        // SAFETY: as above.
        unsafe { System.realloc(pointer, layout, size) }
    }
}

/// What `work` returns, and how many allocations this thread made in it
/// (always 0 unless the binary's allocator is [`Counting`]).
pub fn counted<R>(work: impl FnOnce() -> R) -> (R, u64) {
    let before = ALLOCATIONS.with(Cell::get);
    let result = work();
    let after = ALLOCATIONS.with(Cell::get);
    (result, after - before)
}

/// Whether this binary counts (its allocator is [`Counting`]): a test
/// asserting zero allocations checks this first, so that it cannot pass
/// by counting nothing.
pub fn counting() -> bool {
    counted(|| std::hint::black_box(Box::new(1u8))).1 > 0
}
