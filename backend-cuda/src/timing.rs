//! Device-side timing of forward passes with CUDA events, for benchmarks (`bilstm bench`).
//!
//! [`time_forward_device`] runs [`CudaBackend::forward_device`] on a seeded input already on
//! the GPU, so a timed pass holds no host transfer of the input or the output. Each pass is
//! bracketed by two events recorded on [`CudaBackend::stream`]; its time is the elapsed time
//! between them. A pass ends with the backend's read of the kernels' error words (a few
//! bytes), which the time includes, exactly as a caller of `forward_device` waits for it.

use bilstm_core::owned::random_input;
use bilstm_core::{Backend, CoreError};
use cudarc::driver::CudaSlice;
use cudarc::driver::sys::CUevent_flags;

use crate::backend::CudaBackend;
use crate::error::CudaError;

/// Seed of the standard-normal input [`time_forward_device`] runs on
/// ([`bilstm_core::owned::random_input`]).
pub const TIMING_INPUT_SEED: u64 = 1;

/// Times forward passes of `batch` windows on the GPU: `warmup` untimed passes, then `iters`
/// passes, each timed with CUDA events; returns the `iters` times in milliseconds, in run order.
///
/// The backend must be prepared (its configuration gives the shape) for at least `batch`
/// windows. The input is [`random_input`] of the prepared shape with [`TIMING_INPUT_SEED`],
/// uploaded once before the warm-up; the output goes to a device buffer that is then dropped.
///
/// # Errors
/// [`CoreError::NotPrepared`] before [`Backend::prepare`]; [`CoreError::BatchTooLarge`];
/// [`CoreError::Overflow`] for an absurd batch; [`CudaError::Driver`] for an allocation, copy
/// or event failure; any error of [`CudaBackend::forward_device`] (a lost partner, a launch
/// failure).
pub fn time_forward_device(
    backend: &mut CudaBackend,
    batch: usize,
    iters: usize,
    warmup: usize,
) -> Result<Vec<f64>, CudaError> {
    let (d_in, mut d_out) = timing_buffers(backend, batch)?;
    let stream = backend.stream().clone();
    let ctx = backend.context().clone();
    for _ in 0..warmup {
        backend.forward_device(&d_in, batch, &mut d_out)?;
    }
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let start = ctx
        .new_event(flags)
        .map_err(CudaError::driver("creating a timing event"))?;
    let end = ctx
        .new_event(flags)
        .map_err(CudaError::driver("creating a timing event"))?;
    let mut times_ms = Vec::with_capacity(iters);
    for _ in 0..iters {
        start
            .record(&stream)
            .map_err(CudaError::driver("recording the start event"))?;
        backend.forward_device(&d_in, batch, &mut d_out)?;
        end.record(&stream)
            .map_err(CudaError::driver("recording the end event"))?;
        end.synchronize()
            .map_err(CudaError::driver("waiting for the end event"))?;
        let ms = start
            .elapsed_ms(&end)
            .map_err(CudaError::driver("reading the elapsed time"))?;
        times_ms.push(f64::from(ms));
    }
    Ok(times_ms)
}

/// The device buffers a timed pass of `batch` windows runs on: the seeded random input
/// ([`TIMING_INPUT_SEED`]) uploaded, and an output (one-element buffers for batch 0, as a
/// zero-length allocation has no address).
///
/// # Errors
/// [`CoreError::NotPrepared`]; [`CoreError::BatchTooLarge`]; [`CoreError::Overflow`];
/// [`CudaError::Driver`] for an allocation or the upload.
pub(crate) fn timing_buffers(
    backend: &CudaBackend,
    batch: usize,
) -> Result<(CudaSlice<f32>, CudaSlice<f32>), CudaError> {
    let config = *backend.config().ok_or(CoreError::NotPrepared)?;
    if batch > config.max_batch {
        return Err(CoreError::BatchTooLarge {
            batch,
            max: config.max_batch,
        }
        .into());
    }
    let shape = config.shape;
    let input = random_input(&shape, batch, TIMING_INPUT_SEED);
    let out_len = shape.output_len(batch)?;
    let stream = backend.stream();
    let mut d_in = stream
        .alloc_zeros::<f32>(input.len().max(1))
        .map_err(CudaError::driver("allocating the timing input"))?;
    if !input.is_empty() {
        stream
            .memcpy_htod(&input, &mut d_in)
            .map_err(CudaError::driver("uploading the timing input"))?;
    }
    let d_out = stream
        .alloc_zeros::<f32>(out_len.max(1))
        .map_err(CudaError::driver("allocating the timing output"))?;
    Ok((d_in, d_out))
}
