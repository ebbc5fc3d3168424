//! Launch of `bilstm_clear` (kernels/cuda/clear.cu).

use bilstm_core::geometry::{BLOCK_THREADS, EXCHANGE_ALIGN_BYTES};
use bilstm_kernels::params::ClearParams;
use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig};

use super::{KernelArg, LaunchMode, Span, launch_kernel, require, require_aligned};
use crate::error::CudaError;

const KERNEL: &str = "bilstm_clear";

/// Most blocks one clear uses (a grid-stride loop covers the rest).
const MAX_CLEAR_BLOCKS: usize = 1024;

/// Zeroes `words` exchange words from `exchange.addr` and `error_words` ints of `error`.
///
/// # Errors
/// [`CudaError::Contract`] when `exchange` is not aligned to `EXCHANGE_ALIGN_BYTES` or shorter
/// than `words`, or `error` shorter than `error_words` (or more than a block's threads);
/// [`CudaError::Launch`] when the driver refuses the launch.
pub(crate) fn launch(
    func: &CudaFunction,
    stream: &CudaStream,
    exchange: Span,
    words: usize,
    error: Span,
    error_words: usize,
) -> Result<(), CudaError> {
    require_aligned(
        KERNEL,
        "exchange base alignment",
        exchange.addr,
        EXCHANGE_ALIGN_BYTES as u64,
    )?;
    require(KERNEL, "exchange words", words, exchange.len)?;
    require(KERNEL, "error words", error_words, error.len)?;
    require(KERNEL, "error words per block", error_words, BLOCK_THREADS)?;
    require_aligned(KERNEL, "error alignment", error.addr, 4)?;
    let blocks = words.div_ceil(BLOCK_THREADS).clamp(1, MAX_CLEAR_BLOCKS);
    let params = KernelArg(ClearParams {
        words: exchange.addr,
        word_count: words as u64,
        error: error.addr,
        error_count: error_words as u32,
        reserved: 0,
    });
    let cfg = LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (bilstm_kernels::CLEAR.block_threads, 1, 1),
        shared_mem_bytes: bilstm_kernels::CLEAR.dynamic_shared_bytes,
    };
    // SAFETY: `func` is bilstm_clear loaded from clear.cu, whose only parameter is
    // bl_clear_params, which `KernelArg<ClearParams>` mirrors (DeviceRepr impl in launch/mod.rs).
    // Its contract: `words` is an 8-byte aligned device address with `word_count` writable u64
    // (checked above: aligned to EXCHANGE_ALIGN_BYTES, `words <= exchange.len`, and `exchange`
    // comes from a live allocation of the caller's buffers), `error` holds `error_count` ints
    // with error_count <= BLOCK_THREADS (checked above); block = BLOCK_THREADS threads, no
    // dynamic shared memory; the stream orders it before every kernel that reads these words.
    unsafe { launch_kernel(func, stream, KERNEL, &params, cfg, LaunchMode::Ordinary) }
}
