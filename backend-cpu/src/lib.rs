//! # bilstm-cpu
//!
//! The CPU backend of bilstm: [`CpuBackend`] runs a bidirectional LSTM stack
//! `[batch, frames, features] -> [batch, frames, 256]` in FP32 on any host, implementing
//! [`bilstm_core::Backend`]. It is correct and deterministic first; the SIMD work comes later
//! (DESIGN §6 gives the CPU targets).
//!
//! ## How a forward runs
//! [`Backend::prepare`](bilstm_core::Backend::prepare) validates the shape and weights and
//! packs each layer and direction with core's functions (DESIGN §2): input weights K-major
//! `[padded_in, 512]`, recurrent weights K-major `[128, 512]`, combined bias `Wb + Rb`; packed
//! column `unit * 4 + gate`, gates `i, f, g, o`. It allocates every buffer for `max_batch`
//! windows, so a forward allocates nothing. Then, per layer and for each direction:
//!
//! 1. the input projection, one GEMM over all `batch * frames` rows
//!    (`gates[row, 0..512] = x[row, 0..in] · Wk`);
//! 2. the recurrence, step by step over the whole batch: `a = (proj[t] + h·R) + bias`, then
//!    `i, f, o = σ(a)`, `g = tanh(a)`, `c = f·c + i·g`, `h = o·tanh(c)`, with `σ` and `tanh`
//!    from [`bilstm_core::numerics`] and `h0 = c0 = 0`.
//!
//! The two directions of a layer run on two threads (the reverse one on a scoped worker)
//! when [`CpuBackend::threads`] is 2, and are merged into the layer output, forward units
//! first, before the next layer starts.
//!
//! ## Numerics and determinism
//! Every dot product is summed in ascending `k`, each product rounded and then added (no
//! FMA), the projection from `0.0`, the recurrent sum onto the projection, the combined bias
//! last (DESIGN §2). Vectorisation runs across output columns only, never across a sum, so:
//!
//! - the output bits are the same for 1 or 2 threads and on every run;
//! - a window's output bits do not depend on the batch it is run in, nor on its position;
//! - the bits are the same on every host with IEEE f32 (the gate functions are libm's
//!   software `expf` and `tanhf`).
//!
//! They differ from the GPU backend's bits (DESIGN §4: no `ex2.approx` here) and may change
//! when the SIMD work changes the summation; relative L2 error against the f64 reference
//! stays within [`bilstm_core::accuracy::CPU_FP32_REL_L2`] (1e-5). Measured with weights
//! U(-0.3, 0.3) and standard-normal inputs (`tests/accuracy.rs`): 6.8e-7 to 7.7e-7 for batches
//! 1, 3 and 8 of 589 frames, 3.2e-7 to 7.2e-7 for 1 to 17 frames, 1.2e-6 with inputs scaled by
//! 30 (saturated gates).
//!
//! ## Special values
//! - **Weights** must be finite: NaN or infinite weights make `prepare` fail with
//!   [`bilstm_core::CoreError::NonFiniteWeight`] naming the first one (layer, direction,
//!   tensor, index).
//! - **Inputs** are data: NaN and infinities go through IEEE arithmetic, never panic and never
//!   hang. Windows never mix, so a non-finite value only touches its own window. A NaN
//!   reaches that window's forward outputs from its frame on and reverse outputs up to it in
//!   the first layer, hence every frame of the window after two or more layers. An infinity
//!   usually saturates the gates (finite outputs) and gives NaN where infinities cancel.
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
#![forbid(unsafe_code)]

mod backend;
mod error;
mod projection;
mod recurrence;

pub use backend::{CpuBackend, MAX_THREADS};
pub use error::CpuError;
