//! The `Backend` contract's "a forward allocates nothing" on the CPU backend with one thread:
//! a counting global allocator sees no allocation during `forward` and `forward_with_state`,
//! from the first call on (the projection's packed-row panel of each direction is allocated
//! at prepare and handed to the projection with the rest of the direction's scratch). With two threads a forward spawns one scoped
//! worker per layer, and spawning a thread allocates, so only one thread is checked.
//!
//! The only test in this binary: the allocator counts every thread's allocations.

#![allow(
    clippy::unwrap_used,
    reason = "helpers of tests: a failed unwrap fails the test"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bilstm_core::owned::{OwnedStack, random_input};
use bilstm_core::{Backend, BackendConfig};
use bilstm_cpu::CpuBackend;

/// The system allocator, counting allocations while `COUNTING` is set.
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees hold; the counter updates are atomic and allocate nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` (or `realloc`) with `layout`, as the caller
        // guarantees for this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: as `dealloc` for `ptr` and `layout`; `new_size` is the caller's, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocations `f` makes (on any thread).
fn allocations(f: impl FnOnce()) -> usize {
    ALLOCATIONS.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    f();
    COUNTING.store(false, Ordering::Relaxed);
    ALLOCATIONS.load(Ordering::Relaxed)
}

#[test]
fn one_thread_forwards_allocate_nothing() {
    let model = OwnedStack::builtin();
    let shape = model.shape;
    // Batches 1 and 32 take different chunk sizes and register tiles; 33 leaves a remainder.
    for batch in [1, 32, 33] {
        let mut cpu = CpuBackend::with_threads(1);
        cpu.prepare(&model.weights().unwrap(), &BackendConfig::pyannote(batch))
            .unwrap();
        let input = random_input(&shape, batch, 3);
        let mut out = vec![0.0f32; shape.output_len(batch).unwrap()];
        let mut h_n = vec![0.0f32; shape.state_len(batch).unwrap()];
        let mut c_n = vec![0.0f32; shape.state_len(batch).unwrap()];
        for call in 0..2 {
            let n = allocations(|| cpu.forward(&input, batch, &mut out).unwrap());
            assert_eq!(n, 0, "batch {batch}, forward call {call}: {n} allocations");
            let n = allocations(|| {
                cpu.forward_with_state(&input, batch, &mut out, &mut h_n, &mut c_n)
                    .unwrap();
            });
            assert_eq!(
                n, 0,
                "batch {batch}, forward_with_state call {call}: {n} allocations"
            );
        }
        assert!(out.iter().all(|v| v.is_finite()), "batch {batch}");
    }
}
