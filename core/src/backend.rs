//! The [`Backend`] trait: what callers program against, whichever hardware runs the stack.

use crate::error::BackendError;
use crate::layout::StackWeights;
use crate::shape::{MathMode, StackShape};

/// What a backend is prepared for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendConfig {
    /// The stack's shape (its `frames` is the window length every forward uses).
    pub shape: StackShape,
    /// The largest batch a forward may run; buffers are sized for it at prepare time.
    pub max_batch: usize,
    /// Arithmetic for the input projections.
    pub math: MathMode,
}

impl BackendConfig {
    /// The pyannote shape, FP32, for batches up to `max_batch`.
    pub const fn pyannote(max_batch: usize) -> Self {
        BackendConfig {
            shape: StackShape::pyannote(),
            max_batch,
            math: MathMode::Fp32,
        }
    }
}

/// A bidirectional LSTM stack runner.
///
/// # Contract
/// 1. [`Backend::prepare`] checks the weights (lengths and finiteness), packs and uploads
///    them, and allocates everything a forward needs for up to `config.max_batch` windows.
/// 2. [`Backend::forward`] runs `[batch, frames, features] -> [batch, frames, 2 * hidden]`,
///    row-major, window-major, with `h0 = c0 = 0` for every window. It allocates nothing,
///    returns only when `output` is written, and for a given prepared backend and input
///    produces the same bits on every call. `batch == 0` is valid and writes nothing.
/// 3. Bad input (wrong lengths, a batch above `max_batch`, forward before prepare) is an
///    error of kind [`crate::ErrorKind::InvalidInput`] raised before any work is done.
pub trait Backend {
    /// The backend's concrete error.
    type Error: BackendError;

    /// A short name (`"cpu"`, `"cuda"`).
    fn name(&self) -> &'static str;

    /// Prepares for `config` with `weights` (replacing any earlier preparation).
    ///
    /// # Errors
    /// Invalid weights or shapes ([`crate::ErrorKind::InvalidInput`],
    /// [`crate::ErrorKind::Unsupported`]), or device failures.
    fn prepare(
        &mut self,
        weights: &StackWeights<'_>,
        config: &BackendConfig,
    ) -> Result<(), Self::Error>;

    /// Runs the stack on `batch` windows.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for wrong lengths, a batch above the prepared
    /// maximum or a backend never prepared; device failures and timeouts on GPUs.
    fn forward(
        &mut self,
        input: &[f32],
        batch: usize,
        output: &mut [f32],
    ) -> Result<(), Self::Error>;

    /// Runs the stack on `batch` windows as [`Backend::forward`] does (the same output bits) and
    /// also writes every layer's and direction's final hidden and cell states, as PyTorch's
    /// `nn.LSTM` returns them: `h_n` and `c_n` are `[layers * 2, batch, hidden]`
    /// ([`StackShape::state_len`] values each), index `2 * layer + direction` (forward 0,
    /// reverse 1). The forward direction's final state is at the window's last frame, the
    /// reverse direction's at its first (the last step it computes).
    ///
    /// # Errors
    /// As [`Backend::forward`], plus [`crate::ErrorKind::InvalidInput`] for `h_n` or `c_n` of
    /// the wrong length.
    fn forward_with_state(
        &mut self,
        input: &[f32],
        batch: usize,
        output: &mut [f32],
        h_n: &mut [f32],
        c_n: &mut [f32],
    ) -> Result<(), Self::Error>;

    /// The configuration of the last successful [`Backend::prepare`], if any.
    fn config(&self) -> Option<&BackendConfig>;
}
