//! A few persistent threads for the host path's large copies (the zero-copy output into the
//! caller's slice, the caller's input into page-locked staging).
//!
//! Spawning threads for every forward pass costs tens of microseconds each, on a path whose
//! whole budget at batch 32 is a fraction of a millisecond (issue 11). The pool's threads are
//! started once, by the backend's first host pass, and sleep on a channel between passes.
//! [`CopyPool::run`] is a scoped parallel loop: it returns only after every part has run, so
//! the parts may borrow from the caller, and it says whether a part panicked.

use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

/// At most this many threads (the caller's included) copy at once.
pub const MAX_COPY_THREADS: usize = 16;

/// Threads (the caller's included) of [`CopyPool::for_host`] unless [`COPY_THREADS_ENV`] says
/// otherwise, or fewer on a smaller host: measured on the H200 machine's host (Intel Xeon, 16
/// vCPUs, 2026-12-01), one thread copies 10-15 GB/s, eight 61 GB/s (the 19 MB output of 32
/// windows in 0.31 ms); with 12 or 16 the batch-32 host forward was no faster (3.08 and 3.17 ms
/// against 3.08 with 8, progressive copy, `hosttrace2` in `scripts/gpu-run.sh`).
pub const DEFAULT_COPY_THREADS: usize = 8;

/// The environment variable that sets the pool's threads (the caller's included; at most
/// [`MAX_COPY_THREADS`]).
pub const COPY_THREADS_ENV: &str = "BILSTM_COPY_THREADS";

/// Below this many `f32` values (4 MiB) [`CopyPool::copy`] copies on the calling thread.
pub const MIN_PARALLEL_VALUES: usize = 1 << 20;

/// Counts the parts still running; the caller waits for zero.
#[derive(Debug)]
struct Latch {
    left: Mutex<usize>,
    zero: Condvar,
    /// A part handed to a worker panicked (its work may be incomplete).
    panicked: std::sync::atomic::AtomicBool,
    /// Parts handed to a worker that never ran them (the worker had died of an earlier panic,
    /// its queue dropped with it); the caller runs them after the wait.
    lost: Mutex<Vec<usize>>,
}

impl Latch {
    fn add(&self) {
        *self.left.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    }

    fn count_down(&self) {
        let mut left = self.left.lock().unwrap_or_else(PoisonError::into_inner);
        *left = left.saturating_sub(1);
        if *left == 0 {
            self.zero.notify_all();
        }
    }

    fn wait(&self) {
        let mut left = self.left.lock().unwrap_or_else(PoisonError::into_inner);
        while *left > 0 {
            left = self.zero.wait(left).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// The body of one [`CopyPool::run`] call, its lifetime erased (see the SAFETY note there).
type Body = dyn Fn(usize) + Sync + 'static;

/// One part of a [`CopyPool::run`] call, sent to a worker. Dropping it counts its latch down
/// once, whatever happened: after it ran, when it panicked (`panicked` set), or unrun, when
/// the worker's queue is dropped with a dead worker (the part is then listed in `lost`).
struct Job {
    body: *const Body,
    part: usize,
    latch: Arc<Latch>,
    started: bool,
    done: bool,
}

impl Drop for Job {
    fn drop(&mut self) {
        if self.started && !self.done {
            self.latch
                .panicked
                .store(true, std::sync::atomic::Ordering::Relaxed);
        } else if !self.started {
            self.latch
                .lost
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(self.part);
        }
        self.latch.count_down();
    }
}

// SAFETY: `body` points to a `Sync` closure (so calling it from another thread is sound) that
// `CopyPool::run` keeps alive, borrowed, until the job's latch reaches zero; the worker calls it
// before counting down and never touches it afterwards.
unsafe impl Send for Job {}

/// Persistent copy threads (see the [module docs](self)).
#[derive(Debug, Default)]
pub struct CopyPool {
    senders: Vec<Sender<Job>>,
    workers: Vec<JoinHandle<()>>,
}

impl CopyPool {
    /// A pool of `threads - 1` workers (the caller is the last thread); `threads` is capped at
    /// [`MAX_COPY_THREADS`]. Threads that cannot be spawned are left out (their parts then run on
    /// the caller).
    pub fn new(threads: usize) -> Self {
        let mut pool = CopyPool::default();
        for i in 1..threads.clamp(1, MAX_COPY_THREADS) {
            let (tx, rx) = channel::<Job>();
            let spawned = std::thread::Builder::new()
                .name(format!("bilstm-copy-{i}"))
                .spawn(move || {
                    for mut job in rx {
                        job.started = true;
                        let (body, part) = (job.body, job.part);
                        // A panicking part is reported (`done` stays false) and the worker
                        // lives on: a dead worker would leave the parts later sent to it unrun.
                        // SAFETY: see `impl Send for Job`: the closure is alive until the
                        // latch reaches zero, which dropping `job` only allows after this call.
                        let ran =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
                                (*body)(part)
                            }));
                        job.done = ran.is_ok();
                    }
                });
            if let Ok(handle) = spawned {
                pool.senders.push(tx);
                pool.workers.push(handle);
            }
        }
        pool
    }

    /// A pool sized for this host: [`DEFAULT_COPY_THREADS`] or the available parallelism if
    /// less ([`COPY_THREADS_ENV`] overrides it, up to [`MAX_COPY_THREADS`]).
    pub fn for_host() -> Self {
        let host = std::thread::available_parallelism().map_or(1, usize::from);
        let asked = std::env::var(COPY_THREADS_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n >= 1);
        CopyPool::new(asked.unwrap_or(host.min(DEFAULT_COPY_THREADS)))
    }

    /// Threads that run parts (the caller's included).
    pub fn threads(&self) -> usize {
        self.senders.len() + 1
    }

    /// Runs `body(part)` for every part in `0..parts`, spread over the pool's threads and the
    /// caller's; returns when all have returned: true, or false if a part on a worker panicked
    /// (its work may be incomplete; a part on the caller's thread unwinds as usual). Parts
    /// beyond the pool's size queue behind others on the same thread.
    pub fn run(&self, parts: usize, body: &(dyn Fn(usize) + Sync)) -> bool {
        if parts == 0 {
            return true;
        }
        // Counts the parts handed to workers (never those run here), so that the caller waits
        // for exactly those, also when one of its own parts panics.
        let latch = Arc::new(Latch {
            left: Mutex::new(0),
            zero: Condvar::new(),
            panicked: false.into(),
            lost: Mutex::new(Vec::new()),
        });
        // SAFETY: only the lifetime is erased. `waiter` does not let this function return (or
        // unwind) before every part handed to a worker has run and counted down, so `body`
        // outlives every use of this pointer.
        let erased: &Body = unsafe {
            std::mem::transmute::<&(dyn Fn(usize) + Sync), &(dyn Fn(usize) + Sync + 'static)>(body)
        };
        let waiter = Waiter(&latch);
        for part in 1..parts {
            let sender = match self.senders.len() {
                0 => None,
                n => self.senders.get((part - 1) % n),
            };
            let Some(tx) = sender else {
                body(part);
                continue;
            };
            latch.add();
            let job = Job {
                body: erased,
                part,
                latch: Arc::clone(&latch),
                started: false,
                done: false,
            };
            if let Err(failed) = tx.send(job) {
                // The worker is gone: run its part here (dropping the job counts it down).
                let mut job = failed.0;
                job.started = true;
                body(job.part);
                job.done = true;
            }
        }
        body(0);
        drop(waiter);
        // Parts whose worker dropped them unrun run here.
        let lost = std::mem::take(&mut *latch.lost.lock().unwrap_or_else(PoisonError::into_inner));
        for part in lost {
            body(part);
        }
        !latch.panicked.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Copies `src` into `dst` (the shorter length of the two) on the pool's threads, or on the
    /// caller's alone below [`MIN_PARALLEL_VALUES`] values.
    pub fn copy(&self, src: &[f32], dst: &mut [f32]) {
        let len = src.len().min(dst.len());
        let (src, dst) = (&src[..len], &mut dst[..len]);
        let threads = self.threads();
        if len < MIN_PARALLEL_VALUES || threads < 2 {
            dst.copy_from_slice(src);
            return;
        }
        // Only the parts with a non-empty share run.
        let parts = (0..threads)
            .take_while(|&part| !share(0..len, threads, part).is_empty())
            .count();
        let out = SharedOut(dst.as_mut_ptr());
        let complete = self.run(parts, &|part| {
            let r = share(0..len, threads, part);
            // SAFETY: shares are disjoint ranges of `dst` (which outlives `run`), each written
            // by exactly one part; `r.end <= len = dst.len()`.
            let to = unsafe { std::slice::from_raw_parts_mut(out.at(r.start), r.len()) };
            to.copy_from_slice(&src[r]);
        });
        if !complete {
            // A part that panicked may have copied nothing: copy everything here.
            dst.copy_from_slice(src);
        }
    }
}

/// Part `part`'s share of `range` when `parts` parts split it in whole 64-byte lines (16 values
/// each, the last share taking the rest; trailing parts of a short range get empty shares):
/// how [`CopyPool::copy`] and the host path's piecewise staging divide a copy.
pub(crate) fn share(
    range: std::ops::Range<usize>,
    parts: usize,
    part: usize,
) -> std::ops::Range<usize> {
    let per = range.len().div_ceil(parts.max(1)).next_multiple_of(16);
    let start = range
        .start
        .saturating_add(part.saturating_mul(per))
        .min(range.end);
    start..start.saturating_add(per).min(range.end)
}

/// Waits for a [`CopyPool::run`] call's parts, also when the caller's own part panics.
struct Waiter<'a>(&'a Latch);

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.0.wait();
    }
}

/// A destination pointer shared by the parts of a [`CopyPool::run`] call that each write their
/// own, disjoint, elements ([`CopyPool::copy`], the host path's progressive copy).
#[derive(Clone, Copy)]
pub(crate) struct SharedOut(pub(crate) *mut f32);

impl SharedOut {
    /// The address `offset` elements on (not dereferenced here).
    pub(crate) fn at(self, offset: usize) -> *mut f32 {
        self.0.wrapping_add(offset)
    }
}

// SAFETY: sharing the pointer is sound because every user writes only elements no other part
// writes or reads (each user's SAFETY note says why its ranges are disjoint), while the
// destination outlives the `run` call.
unsafe impl Sync for SharedOut {}

impl Drop for CopyPool {
    fn drop(&mut self) {
        // Closing the channels ends the workers' loops.
        self.senders.clear();
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn shares_split_a_range_in_whole_lines_without_gaps_or_overlaps() {
        for (range, parts) in [
            (0..1000, 8),
            (7..7 + 4096, 8),
            (3..5, 4),
            (0..0, 3),
            (10..41, 1),
        ] {
            let shares: Vec<_> = (0..parts).map(|p| share(range.clone(), parts, p)).collect();
            let mut at = range.start;
            for s in &shares {
                assert_eq!(s.start, at, "{range:?} / {parts}: {shares:?}");
                if s.end < range.end {
                    assert_eq!(s.len() % 16, 0, "{range:?} / {parts}: {shares:?}");
                }
                at = s.end;
            }
            assert_eq!(at, range.end, "{range:?} / {parts}: {shares:?}");
        }
        assert_eq!(share(0..100, 0, 0), 0..100);
    }

    #[test]
    fn every_part_runs_once_whatever_the_pool_size() {
        for threads in [1, 2, 3, 8, 20] {
            let pool = CopyPool::new(threads);
            assert!(pool.threads() <= MAX_COPY_THREADS);
            let hits: Vec<AtomicUsize> = (0..37).map(|_| AtomicUsize::new(0)).collect();
            pool.run(hits.len(), &|part| {
                hits[part].fetch_add(1, Ordering::Relaxed);
            });
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                "{threads} threads"
            );
        }
    }

    #[test]
    fn a_panicking_part_is_reported_and_the_pool_still_runs_every_part() {
        let pool = CopyPool::new(3);
        // Part 1 runs on the first worker and panics there: reported, and the worker lives.
        assert!(!pool.run(3, &|part| assert_ne!(part, 1, "part {part}")));
        // Every part of the next call runs exactly once (none dropped by a dead worker: that
        // was a race, a job queued to a dying worker was dropped and its caller waited forever).
        let hits: Vec<AtomicUsize> = (0..7).map(|_| AtomicUsize::new(0)).collect();
        assert!(pool.run(hits.len(), &|part| {
            hits[part].fetch_add(1, Ordering::Relaxed);
        }));
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
    }

    #[test]
    fn copies_equal_the_source_bit_for_bit() {
        let pool = CopyPool::new(4);
        for len in [
            0,
            5,
            MIN_PARALLEL_VALUES - 1,
            MIN_PARALLEL_VALUES + 17,
            3 << 20,
        ] {
            let src: Vec<f32> = (0..len)
                .map(|i| f32::from_bits(i as u32 ^ 0x5a5a_5a5a))
                .collect();
            let mut dst = vec![0.0f32; len];
            pool.copy(&src, &mut dst);
            assert!(
                src.iter()
                    .zip(&dst)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "length {len}"
            );
        }
    }

    #[test]
    fn a_copy_stops_at_the_shorter_slice() {
        let pool = CopyPool::new(2);
        let src = vec![1.0f32; MIN_PARALLEL_VALUES + 8];
        let mut dst = vec![0.0f32; MIN_PARALLEL_VALUES + 16];
        pool.copy(&src, &mut dst);
        assert!(dst[..src.len()].iter().all(|&v| v == 1.0));
        assert!(dst[src.len()..].iter().all(|&v| v == 0.0));
    }
}
