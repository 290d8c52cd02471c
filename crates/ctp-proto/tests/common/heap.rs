//! A counting allocator: a test binary that installs it
//! (`#[global_allocator] static ALLOC: Counting = Counting;`) measures the heap for real,
//! so a bound that holds only in the code's own accounting fails there.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

/// Counts the bytes live on the heap in [`LIVE`].
pub struct Counting;

/// Bytes live on the heap.
pub static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The heap is one process-wide counter: tests that measure it take this first, one at a
/// time.
pub static SERIAL: Mutex<()> = Mutex::new(());

/// Bytes live on the heap now.
pub fn live() -> usize {
    LIVE.load(Relaxed)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Relaxed);
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Relaxed);
        LIVE.fetch_sub(l.size(), Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}
