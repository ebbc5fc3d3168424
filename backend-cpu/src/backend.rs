//! [`CpuBackend`]: packing at prepare, then per layer two direction jobs (chunks of input
//! projection and recurrence) on one or two threads, then the merge of the last layer's two
//! halves into the caller's output.

use std::num::NonZeroUsize;
use std::thread;

use bilstm_core::error::checked_mul;
use bilstm_core::layout::{
    pack_bias_into, pack_input_kmajor_into, pack_panel_bias_into, pack_panel_strips_into,
    pack_recurrent_kmajor_into, padded_in,
};
use bilstm_core::{Backend, BackendConfig, CoreError, Direction, StackShape, StackWeights};

use crate::error::CpuError;
use crate::simd::{self, Isa, Tiles, kernels};

/// The environment variable [`CpuBackend::new`] reads the thread count from (`1` or `2`).
pub const THREADS_ENV: &str = "BILSTM_CPU_THREADS";

/// The environment variable [`CpuBackend::new`] reads a cap on the instruction set from:
/// `portable`, `avx2`, `avx512vl` (256-bit kernels with AVX-512VL's registers) or `avx512`
/// (the 512-bit AVX-512F kernels) ([`Isa::detect_at_most`]); other values are ignored. Every
/// instruction set gives the same bits, so this only changes speed (and lets one host time
/// each path).
pub const ISA_ENV: &str = "BILSTM_CPU_ISA";

/// The environment variable [`CpuBackend::new`] reads the 512-bit register tiles from, a
/// tuning aid: comma-separated tokens such as `p12x32` or `q256p`, or `default` ([`Tiles`]
/// lists them; [`Tiles::parse`]); other values are ignored. Unset, the tiles are
/// [`Tiles::for_host`], the measured best for the CPU's vendor. Only the 512-bit AVX-512F
/// kernels have variants (other instruction sets ignore it), and every variant gives the same
/// bits, so this only changes speed (and lets one host time each variant:
/// `scripts/cpu-run.sh`'s sweep).
pub const TILES_ENV: &str = "BILSTM_CPU_TILES";

/// The environment variables [`CpuBackend::new`] reads whose value it ignores because it is
/// not one it understands, each as one sentence naming the variable, the value and what is
/// accepted (empty when both are unset or valid). For callers that want to tell their users
/// (the `bilstm` CLI prints each as a note).
pub fn ignored_env() -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |name: &str, accepted: &str, valid: bool| {
        if let (Some(v), false) = (std::env::var_os(name), valid) {
            out.push(format!("{name}={v:?} is not {accepted}; ignored"));
        }
    };
    check(
        THREADS_ENV,
        "a positive whole number",
        env_value(THREADS_ENV, parse_threads).is_some(),
    );
    check(
        ISA_ENV,
        "portable, avx2, avx512vl or avx512",
        env_value(ISA_ENV, Isa::detect_at_most).is_some(),
    );
    check(
        TILES_ENV,
        "default or comma-separated tile tokens (one per choice: p6x64|p6x32|p12x32, \
         r8x32|r6x64|r12x32, f128|f128w|q256p|s128|q128|q256, a64|malloc)",
        env_value(TILES_ENV, Tiles::parse).is_some(),
    );
    out
}

/// `name`'s value (trimmed) parsed by `parse`; `None` when unset, not UTF-8 or refused.
fn env_value<T>(name: &str, parse: impl Fn(&str) -> Option<T>) -> Option<T> {
    std::env::var(name).ok().and_then(|v| parse(v.trim()))
}

/// A thread count: a positive whole number.
fn parse_threads(v: &str) -> Option<usize> {
    v.parse::<usize>().ok().filter(|&n| n > 0)
}

/// The most threads a forward uses: one per direction of a layer (DESIGN §6: on the 2-vCPU
/// development machine one direction per thread is the natural split).
pub const MAX_THREADS: usize = 2;

/// The CPU backend: FP32, deterministic, one thread per direction.
///
/// See the [crate docs](crate) for the numerics, determinism, special values and math modes.
///
/// ```
/// use bilstm_core::{Backend, BackendConfig};
/// use bilstm_core::owned::{OwnedStack, random_input};
/// use bilstm_cpu::CpuBackend;
///
/// let model = OwnedStack::builtin();
/// let shape = model.shape.with_frames(4);
/// let mut cpu = CpuBackend::with_threads(1);
/// cpu.prepare(&model.weights()?, &BackendConfig { shape, ..BackendConfig::pyannote(2) })?;
/// let input = random_input(&shape, 2, 1);
/// let mut output = vec![0.0; shape.output_len(2)?];
/// cpu.forward(&input, 2, &mut output)?;
/// assert!(output.iter().all(|v| v.abs() < 1.0));
/// # Ok::<(), bilstm_cpu::CpuError>(())
/// ```
#[derive(Debug)]
pub struct CpuBackend {
    threads: usize,
    isa: Isa,
    tiles: Tiles,
    prepared: Option<Prepared>,
}

/// One direction of one layer, packed (DESIGN §2) then repacked into the kernels' panel
/// layouts ([`crate::simd::kernels`]).
#[derive(Debug)]
struct PackedDirection {
    /// Input weights, `4H / 16` strips of `[width][16]` (from a 64-byte boundary with the
    /// 512-bit kernels' `a64` tiles, as the two below).
    input_strips: kernels::AlignedBuf,
    /// Recurrent weights, `4H / 16` strips of `[H][16]`.
    recurrent_strips: kernels::AlignedBuf,
    /// The same in the sequential layout the 512-bit one-window tile reads
    /// ([`kernels::pack_seq`]), only when the ISA and the tiles use it; else empty.
    recurrent_seq: kernels::AlignedBuf,
    /// Combined bias `Wb + Rb`, `[4H]`, panel order.
    bias: Vec<f32>,
}

/// One direction's buffers, sized for `max_batch` windows.
#[derive(Debug)]
struct DirectionScratch {
    /// Input projections `[max_batch * frames, 4H]` (from a 64-byte boundary with `a64`).
    gates: kernels::AlignedBuf,
    /// Running hidden state `[max_batch, H]`.
    h: Vec<f32>,
    /// Running cell state `[max_batch, H]`.
    c: Vec<f32>,
    /// The projection's packed input rows ([`kernels::panel_len`] of the widest layer input,
    /// so a forward never grows it).
    panel: Vec<f32>,
}

/// Everything a forward needs, built by `prepare`.
#[derive(Debug)]
struct Prepared {
    config: BackendConfig,
    /// Per layer, forward then reverse.
    layers: Vec<[PackedDirection; 2]>,
    /// Forward's and reverse's buffers.
    scratch: [DirectionScratch; 2],
    /// Hidden states of every step `[max_batch * frames, H]`, per layer parity then direction:
    /// layer `l` writes `hseq[l % 2]` and reads `hseq[(l + 1) % 2]` (the previous layer's, its
    /// input, both directions, without a merged copy); the last layer's are merged into the
    /// caller's output.
    hseq: [[Vec<f32>; 2]; 2],
}

/// A zeroed `Vec` of `len` values, or [`CpuError::Allocation`] naming `what`.
fn zeroed(len: usize, what: &'static str) -> Result<Vec<f32>, CpuError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| CpuError::Allocation {
        what,
        bytes: len.saturating_mul(size_of::<f32>()),
    })?;
    v.resize(len, 0.0);
    Ok(v)
}

impl CpuBackend {
    /// A backend using the environment variable [`THREADS_ENV`] (`BILSTM_CPU_THREADS`) threads
    /// when it holds a positive integer, else `available_parallelism()`, clamped to
    /// `1..=`[`MAX_THREADS`] (1 when the host cannot say). The kernels' instruction set is
    /// detected here, once ([`Isa::detect`]), capped by [`ISA_ENV`] (`BILSTM_CPU_ISA`) when it
    /// names one. The 512-bit kernels' register tiles are [`Tiles::for_host`], or what
    /// [`TILES_ENV`] (`BILSTM_CPU_TILES`, a tuning aid) names.
    pub fn new() -> Self {
        let threads = env_value(THREADS_ENV, parse_threads)
            .unwrap_or_else(|| thread::available_parallelism().map_or(1, NonZeroUsize::get));
        let isa = env_value(ISA_ENV, Isa::detect_at_most).unwrap_or_else(Isa::detect);
        let tiles = env_value(TILES_ENV, Tiles::parse).unwrap_or_else(Tiles::for_host);
        Self::with_isa(threads, isa).with_tiles(tiles)
    }

    /// A backend using `threads` threads, clamped to `1..=`[`MAX_THREADS`]: 1 runs both
    /// directions of a layer on the calling thread, 2 runs the reverse direction on a scoped
    /// worker thread. The output bits are the same for every thread count. The instruction
    /// set is detected ([`Isa::detect`]).
    pub fn with_threads(threads: usize) -> Self {
        Self::with_isa(threads, Isa::detect())
    }

    /// A backend using `threads` threads (as [`CpuBackend::with_threads`]) and the kernels of
    /// `isa`, e.g. [`Isa::portable`] to run the portable path on an AVX2 host. Both paths
    /// give the same bits (see the [crate docs](crate)).
    pub fn with_isa(threads: usize, isa: Isa) -> Self {
        CpuBackend {
            threads: threads.clamp(1, MAX_THREADS),
            isa,
            tiles: Tiles::for_host(),
            prepared: None,
        }
    }

    /// The same backend with the 512-bit kernels' register tiles `tiles` (a tuning aid: the
    /// default is the measured best; other instruction sets ignore it; every variant gives
    /// the same bits). Takes effect at the next [`Backend::prepare`](bilstm_core::Backend::prepare).
    #[must_use]
    pub fn with_tiles(mut self, tiles: Tiles) -> Self {
        self.tiles = tiles;
        self
    }

    /// The 512-bit kernels' register tiles (used only when [`CpuBackend::isa`] is the 512-bit
    /// set).
    pub fn tiles(&self) -> Tiles {
        self.tiles
    }

    /// The number of threads a forward uses (1 or 2).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The instruction set the kernels run with.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    fn pack_direction(
        &self,
        shape: &StackShape,
        weights: &StackWeights<'_>,
        layer: usize,
        direction: Direction,
    ) -> Result<PackedDirection, CpuError> {
        let h = shape.hidden;
        let rows = shape.gate_rows();
        let width = shape.layer_input_width(layer);
        let layer_weights = weights.layers().get(layer).ok_or(CoreError::LayerCount {
            expected: shape.layers,
            got: weights.layers().len(),
        })?;
        let d = layer_weights.direction(direction);
        let order = weights.order();
        let mut input_kmajor = zeroed(
            checked_mul(padded_in(width), rows, "packed input weights")?,
            "packed input weights",
        )?;
        pack_input_kmajor_into(d.input, width, h, order, &mut input_kmajor)?;
        let mut recurrent_kmajor = zeroed(
            checked_mul(h, rows, "packed recurrent weights")?,
            "packed recurrent weights",
        )?;
        pack_recurrent_kmajor_into(d.recurrent, h, order, &mut recurrent_kmajor)?;
        let mut bias = zeroed(rows, "packed bias")?;
        pack_bias_into(d.input_bias, d.recurrent_bias, h, order, &mut bias)?;
        let mut in_strips = zeroed(
            checked_mul(width, rows, "input weight strips")?,
            "input weight strips",
        )?;
        pack_panel_strips_into(&input_kmajor, width, h, kernels::STRIP_COLS, &mut in_strips)?;
        let mut r_strips = zeroed(recurrent_kmajor.len(), "recurrent weight strips")?;
        pack_panel_strips_into(
            &recurrent_kmajor,
            h,
            h,
            kernels::R_STRIP_COLS,
            &mut r_strips,
        )?;
        let mut bias_p = zeroed(rows, "packed bias")?;
        pack_panel_bias_into(&bias, h, &mut bias_p)?;
        // The sequential layout only where the 512-bit one-window tile chosen reads it.
        let recurrent_seq = match self.tiles.single.seq_strips() {
            Some(ns) if self.isa.is_512_bit() && h == kernels::H => {
                let seq = kernels::pack_seq(&r_strips, ns);
                debug_assert_eq!(seq.len(), r_strips.len());
                seq
            }
            _ => Vec::new(),
        };
        // Where the 512-bit kernels' tiles ask for it, each from a 64-byte boundary.
        let align64 = self.align64();
        let buf = |v: &[f32], what: &'static str| {
            kernels::AlignedBuf::copy_of(v, align64).ok_or(CpuError::Allocation {
                what,
                bytes: v.len().saturating_add(16).saturating_mul(size_of::<f32>()),
            })
        };
        Ok(PackedDirection {
            input_strips: buf(&in_strips, "input weight strips")?,
            recurrent_strips: buf(&r_strips, "recurrent weight strips")?,
            recurrent_seq: buf(&recurrent_seq, "recurrent weight blocks")?,
            bias: bias_p,
        })
    }

    /// Whether the buffers the kernels stream start on 64-byte boundaries: the 512-bit
    /// kernels with the `a64` tiles.
    fn align64(&self) -> bool {
        self.isa.is_512_bit() && self.tiles.align64
    }

    fn scratch(&self, shape: &StackShape, max_batch: usize) -> Result<DirectionScratch, CpuError> {
        // The fused one-window path holds two chunks (DirectionJob::run_fused).
        let max_rows =
            chunk_rows_max(max_batch, shape.frames)?.max(2 * FUSED_CHUNK_FRAMES.min(shape.frames));
        let gates = zeroed(
            checked_mul(max_rows, shape.gate_rows(), "projection gates")?,
            "projection gates",
        )?;
        Ok(DirectionScratch {
            gates: kernels::AlignedBuf::copy_of(&gates, self.align64()).ok_or(
                CpuError::Allocation {
                    what: "projection gates",
                    bytes: gates
                        .len()
                        .saturating_add(16)
                        .saturating_mul(size_of::<f32>()),
                },
            )?,
            h: zeroed(
                checked_mul(max_batch, shape.hidden, "hidden state")?,
                "hidden state",
            )?,
            c: zeroed(
                checked_mul(max_batch, shape.hidden, "cell state")?,
                "cell state",
            )?,
            panel: zeroed(
                kernels::panel_len(shape.features.max(2 * shape.hidden)),
                "projection panel",
            )?,
        })
    }
}

impl Default for CpuBackend {
    /// [`CpuBackend::new`].
    fn default() -> Self {
        Self::new()
    }
}

/// One direction job: per chunk of frames, the projection of those rows, then the recurrence
/// steps over them.
struct DirectionJob<'a> {
    isa: Isa,
    tiles: Tiles,
    direction: Direction,
    shape: &'a StackShape,
    batch: usize,
    /// Layer input in two parts (layer 0: the stack input and nothing; later layers: the
    /// previous layer's forward and reverse hidden states), `[batch * frames, widths[p]]`.
    input: [&'a [f32]; 2],
    widths: [usize; 2],
    packed: &'a PackedDirection,
}

/// Frames per projection chunk for `batch` windows: about [`CHUNK_ROWS`] rows, a multiple of
/// 6 (the projection's register tile), at least 6.
fn chunk_frames(batch: usize) -> usize {
    (CHUNK_ROWS / batch.max(1)).div_ceil(6).max(1) * 6
}

/// The most gate rows one chunk holds for any batch up to `max_batch` (`batch *` its chunk's
/// frames): beyond [`CHUNK_ROWS`] windows every chunk is six frames, so the rows grow with the
/// batch; below, each batch is tried.
fn chunk_rows_max(max_batch: usize, frames: usize) -> Result<usize, CoreError> {
    let small = (1..=max_batch.min(CHUNK_ROWS))
        .map(|b| b * chunk_frames(b).min(frames))
        .max()
        .unwrap_or(0);
    let large = checked_mul(max_batch, chunk_frames(max_batch).min(frames), "gate rows")?;
    Ok(small.max(large))
}

/// Rows of input projection (all windows, a chunk of frames) computed just before the
/// recurrence steps that read them, into a gates buffer that holds only the chunk (384 KiB):
/// it stays in L2, where a buffer of every frame (`batch * frames * 2 KiB`, 38.6 MB at batch
/// 32) made each projection store miss. On the development machine (2026-11-29, batch 32,
/// one thread) that buffer change took the projection from 335 to 318 ms per forward; chunks of
/// 96 to 384 rows measured the same within noise (`bench/NOTES.md`).
const CHUNK_ROWS: usize = 192;

/// Frames per chunk of the fused one-window path ([`DirectionJob::run_fused`]): two chunks'
/// gates (2 x 96 KiB) stay in L2 beside R (256 KiB) and the weight strips the fused tiles
/// stream.
const FUSED_CHUNK_FRAMES: usize = 48;

impl DirectionJob<'_> {
    /// Whether this job runs [`DirectionJob::run_fused`]: one window, the 512-bit kernels with
    /// a fused one-window tile (`f128`, `f128w`), and a layer whose input is the previous
    /// layer's two halves (K = 2H, the fused tiles' shape).
    fn fuses(&self) -> bool {
        self.batch == 1
            && self.isa.is_512_bit()
            && self.tiles.single.fuses()
            && self.shape.hidden == kernels::H
            && self.widths == [kernels::H; 2]
    }

    /// Projection and recurrence in chunks of frames: the projection of a chunk's rows (every
    /// window), then the recurrence steps over those frames. Each value's arithmetic is the
    /// same as unchunked (chunking only reorders whole values), so the bits do not depend on it.
    fn run(&self, scratch: &mut DirectionScratch, hseq: &mut [f32]) {
        if self.fuses() {
            self.run_fused(scratch, hseq);
            return;
        }
        let frames = self.shape.frames;
        let rows = self.batch * frames;
        let cols = self.shape.gate_rows();
        let chunk = chunk_frames(self.batch);
        for s0 in (0..frames).step_by(chunk) {
            let (s1, t0, t1) = self.chunk_span(s0, chunk);
            // Frames t0..t1 of every window: one call, so each weight strip is reused from L1
            // by all of them. The gates buffer holds just these frames (window w's at rows
            // w * (t1 - t0)..), so it stays in L2 between the projection and the steps.
            let held = t1 - t0;
            simd::project(
                self.isa,
                self.tiles,
                &self.projection(t0, t1),
                &mut scratch.gates.as_mut_slice()[..self.batch * held * cols],
                &mut scratch.panel,
            );
            simd::recurrence(
                self.isa,
                self.tiles,
                &self.recurrence(s0..s1, t0..t1),
                kernels::State {
                    gates: &mut scratch.gates.as_mut_slice()[..self.batch * held * cols],
                    hseq: &mut hseq[..rows * self.shape.hidden],
                    h: &mut scratch.h,
                    c: &mut scratch.c,
                },
            );
        }
    }

    /// The chunk of `chunk` steps from step `s0`: its end step and its frames `t0..t1`
    /// (the reverse direction walks frames down).
    fn chunk_span(&self, s0: usize, chunk: usize) -> (usize, usize, usize) {
        let frames = self.shape.frames;
        let s1 = (s0 + chunk).min(frames);
        if self.direction == Direction::Forward {
            (s1, s0, s1)
        } else {
            (s1, frames - s1, frames - s0)
        }
    }

    /// The input projection of frames `t0..t1` of every window (into a buffer holding just
    /// those frames).
    fn projection(&self, t0: usize, t1: usize) -> kernels::Projection<'_> {
        let (frames, widths) = (self.shape.frames, self.widths);
        let rows = self.batch * frames;
        kernels::Projection {
            x: [
                &self.input[0][t0 * widths[0]..rows * widths[0]],
                &self.input[1][t0 * widths[1]..rows * widths[1]],
            ],
            widths,
            rows: t1 - t0,
            groups: self.batch,
            group_stride: frames,
            out_stride: t1 - t0,
            strips: self.packed.input_strips.as_slice(),
        }
    }

    /// The recurrence over `steps`, whose frames' gates the buffer holds (`gates_frames`).
    fn recurrence(
        &self,
        steps: std::ops::Range<usize>,
        gates_frames: std::ops::Range<usize>,
    ) -> kernels::Recurrence<'_> {
        kernels::Recurrence {
            forward: self.direction == Direction::Forward,
            frames: self.shape.frames,
            batch: self.batch,
            steps,
            gates_frames,
            strips: self.packed.recurrent_strips.as_slice(),
            seq_strips: self.packed.recurrent_seq.as_slice(),
            bias: &self.packed.bias,
        }
    }
}

impl DirectionJob<'_> {
    /// [`DirectionJob::run`] for one window with the fused kernels: the first chunk's
    /// projection, then each chunk's steps with the next chunk's projection computed beside
    /// them ([`simd::recurrence_fused`]) into the other half of the gates buffer. Chunks of
    /// [`FUSED_CHUNK_FRAMES`]; the same values as [`DirectionJob::run`], so the same bits.
    fn run_fused(&self, scratch: &mut DirectionScratch, hseq: &mut [f32]) {
        let frames = self.shape.frames;
        let cols = self.shape.gate_rows();
        let chunk = FUSED_CHUNK_FRAMES;
        let DirectionScratch { gates, h, c, panel } = scratch;
        let half = chunk.min(frames) * cols;
        let Some(both) = gates.as_mut_slice().get_mut(..2 * half) else {
            debug_assert!(false, "the gates buffer holds two fused chunks");
            return;
        };
        let (mut cur, mut next) = both.split_at_mut(half);
        let (_, t0, t1) = self.chunk_span(0, chunk);
        simd::project(
            self.isa,
            self.tiles,
            &self.projection(t0, t1),
            &mut cur[..(t1 - t0) * cols],
            panel,
        );
        for s0 in (0..frames).step_by(chunk) {
            let (s1, t0, t1) = self.chunk_span(s0, chunk);
            let rec = self.recurrence(s0..s1, t0..t1);
            let state = kernels::State {
                gates: &mut cur[..(t1 - t0) * cols],
                hseq: &mut hseq[..frames * self.shape.hidden],
                h,
                c,
            };
            if s1 < frames {
                let (_, u0, u1) = self.chunk_span(s1, chunk);
                let fused = kernels::Fused {
                    next: self.projection(u0, u1),
                    out: &mut next[..(u1 - u0) * cols],
                };
                simd::recurrence_fused(self.isa, self.tiles, &rec, state, fused, panel);
            } else {
                simd::recurrence(self.isa, self.tiles, &rec, state);
            }
            std::mem::swap(&mut cur, &mut next);
        }
    }
}

/// What the two-thread attempt of a layer came to.
enum Parallel {
    /// Both directions ran (or the worker panicked: the error).
    Done(Result<(), CpuError>),
    /// The OS refused a thread; nothing ran.
    SpawnFailed,
}

/// Runs both directions of `layer`: the reverse one on a scoped worker when `threads >= 2`,
/// else (or when no thread can be spawned) both on the calling thread. Same bits either way:
/// the two jobs share nothing they write.
fn run_layer(
    threads: usize,
    layer: usize,
    jobs: [DirectionJob<'_>; 2],
    scratch: &mut [DirectionScratch; 2],
    hseq: &mut [Vec<f32>; 2],
) -> Result<(), CpuError> {
    let [fwd_scratch, rev_scratch] = scratch;
    let [fwd_hseq, rev_hseq] = hseq;
    let [fwd_job, rev_job] = jobs;
    if threads >= 2 {
        let outcome = thread::scope(|s| {
            let worker = thread::Builder::new()
                .name("bilstm-cpu-reverse".into())
                .spawn_scoped(s, || rev_job.run(rev_scratch, rev_hseq));
            match worker {
                Ok(handle) => {
                    fwd_job.run(fwd_scratch, fwd_hseq);
                    Parallel::Done(handle.join().map_err(|_| CpuError::WorkerPanicked {
                        layer,
                        direction: Direction::Reverse,
                    }))
                }
                Err(_) => Parallel::SpawnFailed,
            }
        });
        if let Parallel::Done(result) = outcome {
            return result;
        }
    }
    fwd_job.run(fwd_scratch, fwd_hseq);
    rev_job.run(rev_scratch, rev_hseq);
    Ok(())
}

/// [`merge`], the second half of the rows on a scoped worker when `threads >= 2` and there
/// are at least [`PARALLEL_MERGE_ROWS`] rows (inline when no thread can be spawned).
fn merge_rows(threads: usize, forward: &[f32], reverse: &[f32], hidden: usize, out: &mut [f32]) {
    let rows = forward.len() / hidden.max(1);
    if threads < 2 || rows < PARALLEL_MERGE_ROWS {
        return merge(forward, reverse, hidden, out);
    }
    let half = rows / 2;
    let (f0, f1) = forward.split_at(half * hidden);
    let (r0, r1) = reverse.split_at(half * hidden);
    let (o0, o1) = out.split_at_mut((half * 2 * hidden).min(out.len()));
    let spawned = thread::scope(|s| {
        let worker = thread::Builder::new()
            .name("bilstm-cpu-merge".into())
            .spawn_scoped(s, || merge(f1, r1, hidden, &mut *o1));
        merge(f0, r0, hidden, o0);
        worker.is_ok()
    });
    if !spawned {
        merge(f1, r1, hidden, o1);
    }
}

/// Rows from which the final merge is split over two threads: it moves `rows x 1 KiB`; at
/// batch 32 (18,848 rows) it took 1.6 ms on one thread (development machine, 2026-11-29),
/// while spawning a thread costs tens of microseconds.
const PARALLEL_MERGE_ROWS: usize = 4096;

/// Interleaves the two directions' hidden sequences into `[rows, 2H]`: forward units first.
fn merge(forward: &[f32], reverse: &[f32], hidden: usize, out: &mut [f32]) {
    for ((row, f), r) in out
        .chunks_exact_mut(2 * hidden)
        .zip(forward.chunks_exact(hidden))
        .zip(reverse.chunks_exact(hidden))
    {
        let (left, right) = row.split_at_mut(hidden);
        left.copy_from_slice(f);
        right.copy_from_slice(r);
    }
}

impl Backend for CpuBackend {
    type Error = CpuError;

    fn name(&self) -> &'static str {
        "cpu"
    }

    /// Validates the shape and weights, packs the weights (K-major input and recurrent
    /// matrices, combined bias) and allocates every buffer for `config.max_batch` windows.
    /// [`bilstm_core::MathMode::Tf32`] is accepted and runs FP32 ([crate docs](crate)).
    ///
    /// On error the previous preparation, if any, is kept unchanged.
    ///
    /// # Errors
    /// [`CpuError::Core`] with [`CoreError::Unsupported`] for a shape this version cannot run,
    /// [`CoreError::Shape`] for weights of another shape than `config.shape`,
    /// [`CoreError::NonFiniteWeight`] naming the first NaN or infinite weight,
    /// [`CoreError::Overflow`] for sizes beyond `usize`; [`CpuError::Allocation`] when host
    /// memory runs out.
    fn prepare(
        &mut self,
        weights: &StackWeights<'_>,
        config: &BackendConfig,
    ) -> Result<(), CpuError> {
        let shape = config.shape;
        shape.validate()?;
        weights.validate(&shape)?;
        let mut layers = Vec::with_capacity(shape.layers);
        for layer in 0..shape.layers {
            layers.push([
                self.pack_direction(&shape, weights, layer, Direction::Forward)?,
                self.pack_direction(&shape, weights, layer, Direction::Reverse)?,
            ]);
        }
        let scratch = [
            self.scratch(&shape, config.max_batch)?,
            self.scratch(&shape, config.max_batch)?,
        ];
        let hseq_len = checked_mul(
            checked_mul(config.max_batch, shape.frames, "projection rows")?,
            shape.hidden,
            "hidden sequence",
        )?;
        let hseq_pair = || -> Result<[Vec<f32>; 2], CpuError> {
            Ok([
                zeroed(hseq_len, "hidden sequence")?,
                zeroed(hseq_len, "hidden sequence")?,
            ])
        };
        let hseq = [hseq_pair()?, hseq_pair()?];
        self.prepared = Some(Prepared {
            config: *config,
            layers,
            scratch,
            hseq,
        });
        Ok(())
    }

    /// Runs the stack on `batch` windows (see [`Backend::forward`]); every value of `output`
    /// is written. Allocates nothing; with two threads, spawns one scoped worker per layer.
    ///
    /// # Errors
    /// [`CpuError::Core`] with, checked in this order: [`CoreError::NotPrepared`];
    /// [`CoreError::Shape`] (`"input length"`, then `"output length"`) when a length is not
    /// `batch * frames * 60` or `batch * frames * 256`; [`CoreError::BatchTooLarge`] for
    /// `batch > max_batch`. [`CpuError::WorkerPanicked`] only for a bug.
    fn forward(&mut self, input: &[f32], batch: usize, output: &mut [f32]) -> Result<(), CpuError> {
        self.run(input, batch, output, None)
    }

    /// As [`Backend::forward`] (the same output bits), then copies each layer's and direction's
    /// final hidden and cell states out of the running state buffers.
    ///
    /// # Errors
    /// As [`Backend::forward`], plus [`CoreError::Shape`] (`"h_n length"`, `"c_n length"`) for
    /// state tensors other than `layers * 2 * batch * hidden` values.
    fn forward_with_state(
        &mut self,
        input: &[f32],
        batch: usize,
        output: &mut [f32],
        h_n: &mut [f32],
        c_n: &mut [f32],
    ) -> Result<(), CpuError> {
        self.run(input, batch, output, Some((h_n, c_n)))
    }

    fn config(&self) -> Option<&BackendConfig> {
        self.prepared.as_ref().map(|p| &p.config)
    }
}

impl CpuBackend {
    /// The forward pass of [`Backend::forward`]; with `state`, also the final states of
    /// [`Backend::forward_with_state`].
    fn run(
        &mut self,
        input: &[f32],
        batch: usize,
        output: &mut [f32],
        mut state: Option<(&mut [f32], &mut [f32])>,
    ) -> Result<(), CpuError> {
        let (threads, isa, tiles) = (self.threads, self.isa, self.tiles);
        let prepared = self.prepared.as_mut().ok_or(CoreError::NotPrepared)?;
        let shape = prepared.config.shape;
        shape.check_io(batch, input.len(), output.len())?;
        if let Some((h_n, c_n)) = &state {
            shape.check_state(batch, h_n.len(), c_n.len())?;
        }
        if batch > prepared.config.max_batch {
            return Err(CoreError::BatchTooLarge {
                batch,
                max: prepared.config.max_batch,
            }
            .into());
        }
        if batch == 0 {
            return Ok(());
        }
        // Subnormal inputs are read as zeros of their sign: their products with the weights are
        // subnormal, which takes a microcode assist per operation on many x86 cores (a 4x
        // slower pass), and a product that small vanishes in every sum with a normal bias.
        // Inputs without subnormals (every ordinary input) are used as they are, so their bits
        // are unchanged; the copy is made only when one is present.
        let flushed: Vec<f32>;
        let input = if input.iter().any(|v| v.is_subnormal()) {
            flushed = input
                .iter()
                .map(|&v| {
                    if v.is_subnormal() {
                        0.0f32.copysign(v)
                    } else {
                        v
                    }
                })
                .collect();
            &flushed[..]
        } else {
            input
        };
        let rows = batch * shape.frames;
        let hidden = shape.hidden;
        let [even, odd] = &mut prepared.hseq;
        for (layer, packed) in prepared.layers.iter().enumerate() {
            let (cur, prev) = if layer % 2 == 0 {
                (&mut *even, &*odd)
            } else {
                (&mut *odd, &*even)
            };
            let (parts, widths): ([&[f32]; 2], _) = if layer == 0 {
                ([input, &[]], [shape.layer_input_width(0), 0])
            } else {
                (
                    [&prev[0][..rows * hidden], &prev[1][..rows * hidden]],
                    [hidden, hidden],
                )
            };
            let job = |direction: Direction| DirectionJob {
                isa,
                tiles,
                direction,
                shape: &shape,
                batch,
                input: parts,
                widths,
                packed: &packed[direction.index()],
            };
            run_layer(
                threads,
                layer,
                [job(Direction::Forward), job(Direction::Reverse)],
                &mut prepared.scratch,
                cur,
            )?;
            if let Some((h_n, c_n)) = &mut state {
                // The running states hold the last step each direction computed.
                let n = batch * hidden;
                for (d, scratch) in prepared.scratch.iter().enumerate() {
                    let at = (2 * layer + d) * n;
                    h_n[at..at + n].copy_from_slice(&scratch.h[..n]);
                    c_n[at..at + n].copy_from_slice(&scratch.c[..n]);
                }
            }
            if layer + 1 == shape.layers {
                merge_rows(
                    threads,
                    &cur[0][..rows * hidden],
                    &cur[1][..rows * hidden],
                    hidden,
                    output,
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_counts_are_clamped() {
        assert_eq!(CpuBackend::with_threads(0).threads(), 1);
        assert_eq!(CpuBackend::with_threads(1).threads(), 1);
        assert_eq!(CpuBackend::with_threads(7).threads(), 2);
        assert!((1..=MAX_THREADS).contains(&CpuBackend::new().threads()));
        assert_eq!(CpuBackend::default().name(), "cpu");
        assert!(CpuBackend::default().config().is_none());
    }

    #[test]
    fn merge_puts_forward_units_first() {
        let f = [1.0, 2.0, 3.0, 4.0];
        let r = [5.0, 6.0, 7.0, 8.0];
        let mut out = [0.0; 8];
        merge(&f, &r, 2, &mut out);
        assert_eq!(out, [1.0, 2.0, 5.0, 6.0, 3.0, 4.0, 7.0, 8.0]);
        // Split over two threads: the same result.
        let rows = PARALLEL_MERGE_ROWS + 3;
        let f: Vec<f32> = (0..rows * 2).map(|v| v as f32).collect();
        let r: Vec<f32> = (0..rows * 2).map(|v| -(v as f32)).collect();
        let (mut one, mut two) = (vec![0.0; rows * 4], vec![0.0; rows * 4]);
        merge_rows(1, &f, &r, 2, &mut one);
        merge_rows(2, &f, &r, 2, &mut two);
        assert_eq!(one, two);
        assert_eq!(
            &two[rows * 4 - 4..],
            &[
                f[rows * 2 - 2],
                f[rows * 2 - 1],
                r[rows * 2 - 2],
                r[rows * 2 - 1]
            ]
        );
    }

    #[test]
    fn the_gates_buffer_holds_every_batchs_chunk() {
        for frames in [1, 5, 7, 589] {
            for max_batch in 1..=400 {
                let rows = chunk_rows_max(max_batch, frames).unwrap();
                let need = (1..=max_batch)
                    .map(|b| b * chunk_frames(b).min(frames))
                    .max()
                    .unwrap();
                assert_eq!(rows, need, "frames {frames}, max_batch {max_batch}");
            }
        }
        assert_eq!(chunk_rows_max(1, 589).unwrap(), 192);
        // Batch 27 chunks 12 frames (324 rows): more than batch 32's 6 frames (192).
        assert_eq!(chunk_rows_max(32, 589).unwrap(), 324);
        assert_eq!(chunk_rows_max(1000, 589).unwrap(), 6000);
        assert!(chunk_rows_max(usize::MAX, 589).is_err());
    }

    #[test]
    fn environment_values() {
        assert_eq!(parse_threads("2"), Some(2));
        assert_eq!(parse_threads("0"), None);
        assert_eq!(parse_threads("two"), None);
        assert_eq!(
            env_value("BILSTM_TEST_SURELY_UNSET_VARIABLE", parse_threads),
            None
        );
    }

    #[test]
    fn allocation_failure_is_an_error() {
        assert!(matches!(
            zeroed(usize::MAX / 2, "x"),
            Err(CpuError::Allocation { what: "x", .. })
        ));
    }
}
