//! # bilstm-cpu
//!
//! The CPU backend of bilstm: [`CpuBackend`] runs a bidirectional LSTM stack
//! `[batch, frames, features] -> [batch, frames, 256]` in FP32 on any host, implementing
//! [`bilstm_core::Backend`]. On x86-64 with AVX2 and FMA (detected at run time, once, in
//! [`CpuBackend::new`]) it runs hand-blocked SIMD kernels; with AVX-512F and AVX-512VL, the
//! input projection and the recurrent product run on 512-bit vectors (one `zmm` per 16-column
//! weight-strip row), and so does the gate math (two 8-unit panels a `zmm`); elsewhere the same
//! kernels compiled portably. Every path gives the same bits ([`Isa`]).
//!
//! ## How a forward runs
//! [`Backend::prepare`](bilstm_core::Backend::prepare) validates the shape and weights, packs
//! each layer and direction with core's functions (DESIGN §2: K-major, column
//! `unit * 4 + gate`, combined bias `Wb + Rb`), then permutes the columns into the kernels'
//! *panel order* (inside each group of 8 units, gate-major: one 8-lane vector is one gate of 8
//! units) and cuts the weights into 16-column strips `[K][16]` that stay in L1. It allocates
//! every buffer for `max_batch` windows, so a forward allocates nothing. Then, per layer, one
//! thread per direction (the reverse one on a scoped worker when [`CpuBackend::threads`] is 2),
//! in chunks of about 192 rows (a chunk of frames, all windows; the gates buffer holds one
//! chunk, so it stays in L2 between its two phases):
//!
//! 1. the input projection of the chunk, a register-blocked SGEMM (6 rows x 16 columns, 12
//!    `ymm` accumulators, or 6 x 32 with 24 where AVX-512VL gives 32 registers, or 6 x 32 in
//!    12 `zmm` with AVX-512F; near the core's FMA peak), prefetching the next rows while it
//!    computes. From layer 1 on, it reads the
//!    previous layer's forward and reverse hidden states directly (K = 128 + 128), no merged
//!    copy;
//! 2. the recurrence over the chunk's steps: per step a small GEMM over the batch
//!    (`gates += h·R`, 6 windows x 16 columns per register tile, 6 x 32 with AVX-512VL, 6 x
//!    64 in `zmm` with AVX-512F, streaming R from L2; batch 1: 1 window x 64 columns, 128 in
//!    `zmm`), then the fused, vectorised
//!    pointwise pass `+ bias`, then `c = σ(a_f)·c + σ(a_i)·tanh(a_g)` and `h =
//!    σ(a_o)·tanh(c)` over common denominators (five exponentials and two divisions a unit),
//!    four panels at a time so their latency chains overlap.
//!
//! One window on the 512-bit kernels (default tiles, layers 1 to 3) runs the two phases
//! interleaved instead, in chunks of 48 frames: each step's product (four blocks of 128
//! columns, R from L2) carries one 8-row x 16-column tile of the *next* chunk's projection
//! per block (K = 256, two projection FMAs per product FMA), so the FMA units work while the
//! product waits on L2 (about 20 % off a one-thread forward on Zen 4, `Tiles`' `f128`; on the
//! Intel Xeon hosts measured it gained nothing, so there [`Tiles::for_host`] keeps the phases
//! apart).
//!
//! The last layer's two halves are merged into the caller's output, forward units first.
//!
//! ## Numerics and determinism
//! Every dot product is one FMA chain in ascending `k`: the projection from `0.0`, the
//! recurrent sum onto the projection value, the combined bias added last (DESIGN §2). The
//! blocking, the chunking, the window groups and the thread only decide which whole values are
//! computed when, never how, so:
//!
//! - the output bits are the same for 1 or 2 threads and on every run;
//! - a window's output bits do not depend on the batch it is run in, nor on its position;
//! - the AVX2 + FMA kernels, their AVX-512VL build, the 512-bit AVX-512F kernels and the
//!   portable kernels (`f32::mul_add`, [`Isa::portable`]) give the same bits: every step is
//!   one IEEE operation all compute alike, a vector lane is always one output column (so a
//!   512-bit vector only advances more columns' chains at once), and tile sizes never change
//!   a value's chain (tested on every set the host has; the 512-bit tiling also with the
//!   portable operations on any host).
//!
//! The cell update is the kernels' own vectorised function (Cephes' `exp` reduction, within 1.4
//! ulp; `c'` within 3.1e-7 of its terms' magnitude, `h` within 2.1e-7 of `σ(a_o)`, measured
//! against f64 in the unit tests), not libm's, so the bits differ from earlier CPU versions'
//! and from the GPU backend's (DESIGN §4: no `ex2.approx` here). Relative L2 error against the
//! f64 reference stays within [`bilstm_core::accuracy::CPU_FP32_REL_L2`] (1e-5). Measured with
//! weights U(-0.3, 0.3) and standard-normal inputs (`tests/accuracy.rs`): 6.9e-7 to 7.7e-7 for
//! batches 1, 3 and 8 of 589 frames, 3.2e-7 to 7.3e-7 for 1 to 17 frames, 1.1e-6 with inputs
//! scaled by 30 (saturated gates).
//!
//! ## Threads
//! [`CpuBackend::new`] uses the environment variable [`THREADS_ENV`] (`BILSTM_CPU_THREADS`,
//! `1` or `2`) when set, else the available parallelism, at most [`MAX_THREADS`];
//! [`CpuBackend::with_threads`] sets it in code. The `bilstm` CLI opens its CPU backend with
//! `new`, so `BILSTM_CPU_THREADS=1 bilstm bench --backend cpu` times one thread. Likewise
//! [`ISA_ENV`] (`BILSTM_CPU_ISA=portable|avx2|avx512vl|avx512`) caps the detected instruction
//! set, e.g. to time the AVX2-only kernels on an AVX-512 host: `avx512` is the 512-bit
//! AVX-512F kernels (the default where the CPU has AVX-512F and AVX-512VL), `avx512vl` the
//! 256-bit kernels with AVX-512VL's 32 registers (the `avx512` of versions before the 512-bit
//! kernels), `avx2` AVX2 + FMA, `portable` plain Rust ([`Isa`] has the table).
//!
//! ## Tuning: the 512-bit register tiles
//! [`TILES_ENV`] (`BILSTM_CPU_TILES`), read once in [`CpuBackend::new`] like the two above, is
//! a tuning aid: it picks among a few compiled variants of the 512-bit kernels' register tiles
//! (projection `p6x64|p6x32|p12x32`, recurrent product for 6 or more windows
//! `r8x32|r6x64|r12x32`, one window `f128|f128w|q256p|s128|q128|q256`, buffers `a64|malloc`
//! (64-byte-aligned weights and gates or the allocator's placement); comma-separated, one token
//! per choice, or `default`; [`Tiles`] explains each). Unset, the tiles are
//! [`Tiles::for_host`]: [`Tiles::default`] (the first tokens above), with `q128` for one window
//! on Intel CPUs, the measured best on the AVX-512 hosts (`scripts/cpu-run.sh` with
//! `CPU_RUN_SWEEP=1` times the variants). An
//! unknown value is ignored with a note, as for the other two variables
//! ([`ignored_env`]); other instruction sets than `avx512` ignore it; every variant gives the
//! same bits (tested), so it changes only speed. [`CpuBackend::with_tiles`] sets it in code.
//!
//! ## Special values
//! - **Weights** must be finite: NaN or infinite weights make `prepare` fail with
//!   [`bilstm_core::CoreError::NonFiniteWeight`] naming the first one (layer, direction,
//!   tensor, index).
//! - **Inputs** are data: NaN and infinities go through IEEE arithmetic, never panic and never
//!   hang. Windows never mix, so a non-finite value only touches its own window. A NaN
//!   reaches that window's forward outputs from its frame on and reverse outputs up to it in
//!   the first layer, hence every frame of the window after two or more layers. An infinity
//!   usually saturates the gates (finite outputs) and gives NaN where infinities cancel. The
//!   cell clamps its sigmoid arguments to `[-25, 25]` (tanh's to `[-12.5, 12.5]`): a
//!   saturated `σ` is 1 or 1.4e-11, never 0 or subnormal.
//!
//! ## Math modes
//! [`bilstm_core::MathMode::Tf32`] is accepted and runs FP32: the result is bit-identical to
//! [`bilstm_core::MathMode::Fp32`] and more accurate than the TF32 budget asks. TF32 is a
//! tensor-core trade-off with nothing to gain on a CPU; accepting it lets a caller that asks
//! for TF32 fall back to the CPU unchanged.
//!
//! ## Errors
//! [`CpuError`] wraps core's checks ([`CpuError::Core`]); every error has a
//! [`bilstm_core::ErrorKind`] through [`bilstm_core::BackendError::kind`].
#![deny(unsafe_code)]

mod backend;
mod error;
mod simd;

pub use backend::{CpuBackend, ISA_ENV, MAX_THREADS, THREADS_ENV, TILES_ENV, ignored_env};
pub use error::CpuError;
pub use simd::{Isa, Tiles};
