//! The host-slice forward ([`bilstm_core::Backend::forward`]) and its pipelined form.
//!
//! A batch of at most [`CudaBackend::host_chunk`] windows (or any pass that also returns the
//! final states) runs as one pass: upload, compute, download. A larger batch is split into
//! chunks ([`bilstm_core::plan::pipeline::host_chunks`]), each its own pass over its own
//! window region of the device buffers, so that the copies of one chunk overlap the compute of
//! the next:
//!
//! | host | copy stream | main stream |
//! |---|---|---|
//! | upload chunk 0 | `H→D 0`, record `chunk_uploaded` | |
//! | queue chunk 0 | | wait `chunk_uploaded`; pass 0; record `chunk_done` |
//! | upload chunk k+1 | `H→D k+1`, record `chunk_uploaded` | (pass k running) |
//! | queue chunk k+1 | wait `chunk_done` (pass k) | wait `chunk_uploaded`; pass k+1; record `chunk_done` |
//! | download chunk k | `D→H k` (the host waits for it) | (pass k+1 running) |
//!
//! An unsplit pass of at most [`ZERO_COPY_MAX_WINDOWS`] windows (the zero-copy path, on by
//! default, `BILSTM_ZERO_COPY=0` or [`CudaBackend::set_host_zero_copy`] turns it off) has its
//! last layer write the output straight into page-locked, device-mapped host memory allocated
//! at prepare time: no download after the pass, only a copy from that memory into the caller's
//! slice on several threads.
//!
//! The copies are from and to the caller's (pageable) slices: the driver stages them, and the
//! host thread is what waits, while the GPU computes on the main stream. The error words are
//! zeroed once before chunk 0 and read once at the end, so a partner lost in any chunk is
//! reported (later chunks' kernels stop waiting as soon as they see the report); on any error
//! both streams are drained and the output must be treated as unwritten. The output bits equal
//! the unsplit pass's: a window's results do not depend on the batch it runs in.

use bilstm_core::plan::RecurrenceKind;
use bilstm_core::plan::pipeline::{HOST_CHUNK_WINDOWS, host_chunks};
use bilstm_core::{Backend, CoreError};

use std::sync::Arc;

use bilstm_core::StackShape;
use cudarc::driver::{CudaContext, PinnedHostSlice};

use crate::backend::CudaBackend;
use crate::buffers::span;
use crate::error::CudaError;
use crate::launch::Span;
use crate::pass::Region;
use crate::summary::ForwardSummary;

impl CudaBackend {
    /// Windows per chunk of the pipelined host path (see the [module docs](self)); 0 when host
    /// forwards are never split.
    pub fn host_chunk(&self) -> usize {
        self.host_chunk
    }

    /// Sets the windows per chunk of the pipelined host path: a host forward of a larger batch
    /// is split into chunks of this many windows whose copies overlap their neighbours'
    /// compute; 0 turns the split off. The default is [`HOST_CHUNK_WINDOWS`] (or the
    /// [`HOST_CHUNK_ENV`] variable's value). The output bits do not depend on it.
    pub fn set_host_chunk(&mut self, windows: usize) {
        self.host_chunk = windows;
    }

    /// Whether an unsplit host pass of at most [`ZERO_COPY_MAX_WINDOWS`] windows writes its
    /// output to mapped host memory (see the [module docs](self)).
    pub fn host_zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Turns the zero-copy host path on or off (the default is on unless `BILSTM_ZERO_COPY=0`).
    /// The output bits do not depend on it.
    pub fn set_host_zero_copy(&mut self, on: bool) {
        self.zero_copy = on;
    }

    /// The host-slice forward of [`Backend::forward`]; with `state`, also the final states of
    /// [`Backend::forward_with_state`] (such a pass is never split).
    pub(crate) fn host_forward(
        &mut self,
        input: &[f32],
        batch: usize,
        output: &mut [f32],
        state: Option<(&mut [f32], &mut [f32])>,
    ) -> Result<(), CudaError> {
        let config = *self.config().ok_or(CoreError::NotPrepared)?;
        let shape = config.shape;
        if let Some((h_n, c_n)) = &state {
            shape.check_state(batch, h_n.len(), c_n.len())?;
        }
        if batch > config.max_batch {
            return Err(CoreError::BatchTooLarge {
                batch,
                max: config.max_batch,
            }
            .into());
        }
        shape.check_io(batch, input.len(), output.len())?;
        if batch == 0 {
            return Ok(());
        }
        if state.is_none() && self.host_chunk > 0 && batch > self.host_chunk {
            return self.pipelined_forward(input, batch, output);
        }
        let plan = self.plan(batch)?;
        let main = self.device.main.clone();
        let st = self.prepared.as_mut().ok_or(CoreError::NotPrepared)?;
        {
            let mut dst = st
                .buffers
                .input
                .try_slice_mut(0..input.len())
                .ok_or_else(|| short("input"))?;
            main.memcpy_htod(input, &mut dst)
                .map_err(CudaError::driver("uploading the input"))?;
        }
        let input_span = span(&st.buffers.input, &main);
        let mapped = match st.mapped_out.as_mut() {
            Some(m) if self.zero_copy && output.len() <= m.len() => {
                let host = m
                    .as_mut_ptr()
                    .map_err(CudaError::driver("reaching the mapped output"))?;
                // SAFETY: `host` is the start of `mapped_out`, allocated by `mapped_output` in
                // this backend's context with CU_MEMHOSTALLOC_DEVICEMAP and alive with `st`.
                let addr = unsafe { crate::launch::sys::mapped_device_address(host) }
                    .map_err(CudaError::driver("mapping the output for the device"))?;
                Some(Span { addr, len: m.len() })
            }
            _ => None,
        };
        self.enqueue(&plan, input_span, mapped)
            .inspect_err(|_| self.drain())?;
        if mapped.is_some() {
            main.synchronize()
                .map_err(CudaError::driver("finishing a forward pass"))
                .inspect_err(|_| self.drain())?;
            let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
            let m = st
                .mapped_out
                .as_ref()
                .ok_or_else(|| short("mapped output"))?;
            let values = m
                .as_slice()
                .map_err(CudaError::driver("reading the mapped output"))?;
            parallel_copy(&values[..output.len()], output);
        } else {
            let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
            let last = &st.buffers.layer_out[(shape.layers - 1) % 2];
            let src = last
                .try_slice(0..output.len())
                .ok_or_else(|| short("output"))?;
            main.memcpy_dtoh(&src, output)
                .map_err(CudaError::driver("downloading the output"))
                .inspect_err(|_| self.drain())?;
        }
        let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
        if let Some((h_n, c_n)) = state {
            for (buffer, host) in [(&st.buffers.state_h, h_n), (&st.buffers.state_c, c_n)] {
                let src = buffer
                    .try_slice(0..host.len())
                    .ok_or_else(|| short("final-state"))?;
                main.memcpy_dtoh(&src, host)
                    .map_err(CudaError::driver("downloading the final states"))
                    .inspect_err(|_| self.drain())?;
            }
        }
        self.finish(ForwardSummary::of(plan))
    }

    /// The pipelined host forward (sizes already checked): see the [module docs](self).
    fn pipelined_forward(
        &mut self,
        input: &[f32],
        batch: usize,
        output: &mut [f32],
    ) -> Result<(), CudaError> {
        let chunks: Vec<(usize, usize)> = host_chunks(batch, self.host_chunk).collect();
        // Every chunk but the last has the full size: two plans at most, selected once each.
        let full = self.plan(self.host_chunk)?;
        let plans = chunks
            .iter()
            .map(|&(_, n)| {
                if n == full.batch {
                    Ok(full)
                } else {
                    self.plan(n)
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let run = self.run_chunks(input, output, &chunks, &plans);
        if run.is_err() {
            let _ = self.device.copy.synchronize();
            self.drain();
        }
        run?;
        // Any chunk's report names the kernel of the first chunk that reports at all.
        let named = plans
            .iter()
            .find(|p| p.recurrence.choice != RecurrenceKind::Resident)
            .unwrap_or(&plans[0]);
        self.finish_reading(ForwardSummary::of(*named), true)
    }

    /// Queues and copies every chunk; returns after the last download.
    fn run_chunks(
        &mut self,
        input: &[f32],
        output: &mut [f32],
        chunks: &[(usize, usize)],
        plans: &[bilstm_core::plan::Plan],
    ) -> Result<(), CudaError> {
        let shape = self.config().ok_or(CoreError::NotPrepared)?.shape;
        let (in_per, out_per) = (shape.input_len(1)?, shape.output_len(1)?);
        let main = self.device.main.clone();
        let copy = self.device.copy.clone();
        let last_layer = (shape.layers - 1) % 2;
        self.clear_error_words()?;

        // Uploads chunk k into its window region of the input buffer, and makes the main
        // stream wait for it.
        let upload = |this: &mut CudaBackend, k: usize| -> Result<(), CudaError> {
            let (start, n) = chunks[k];
            let range = start * in_per..(start + n) * in_per;
            let st = this.prepared.as_mut().ok_or(CoreError::NotPrepared)?;
            let mut dst = st
                .buffers
                .input
                .try_slice_mut(range.clone())
                .ok_or_else(|| short("input"))?;
            copy.memcpy_htod(&input[range], &mut dst)
                .map_err(CudaError::driver("uploading a chunk of the input"))?;
            st.chunk_uploaded
                .record(&copy)
                .map_err(CudaError::driver("recording a chunk's upload"))?;
            main.wait(&st.chunk_uploaded)
                .map_err(CudaError::driver("waiting for a chunk's upload"))
        };
        // Queues chunk k's pass on the main stream and records `chunk_done` after it.
        let queue = |this: &CudaBackend, k: usize| -> Result<(), CudaError> {
            let (start, n) = chunks[k];
            let st = this.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
            let input_span = span(&st.buffers.input, &main)
                .offset(start * in_per, 4)
                .ok_or_else(|| short("input"))?;
            let region = Region {
                first_window: start,
                fresh_error: false,
            };
            debug_assert_eq!(plans[k].batch, n);
            this.enqueue_with_states(&plans[k], input_span, None, None, region)?;
            st.chunk_done
                .record(&main)
                .map_err(CudaError::driver("recording a chunk's end"))
        };

        upload(self, 0)?;
        queue(self, 0)?;
        for k in 0..chunks.len() {
            let more = k + 1 < chunks.len();
            if more {
                upload(self, k + 1)?;
            }
            let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
            copy.wait(&st.chunk_done)
                .map_err(CudaError::driver("waiting for a chunk's pass"))?;
            if more {
                queue(self, k + 1)?;
            }
            let (start, n) = chunks[k];
            let range = start * out_per..(start + n) * out_per;
            let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
            let src = st.buffers.layer_out[last_layer]
                .try_slice(range.clone())
                .ok_or_else(|| short("output"))?;
            // Pageable destination: returns once the chunk is in `output`.
            copy.memcpy_dtoh(&src, &mut output[range])
                .map_err(CudaError::driver("downloading a chunk of the output"))?;
        }
        copy.synchronize()
            .map_err(CudaError::driver("finishing the chunk copies"))
    }
}

/// The most windows an unsplit host pass runs on the zero-copy path (its mapped output buffer
/// holds this many windows' output, 38.6 MB for 589 frames; larger batches are split into
/// chunks anyway). Equal to [`HOST_CHUNK_WINDOWS`], so every default unsplit pass qualifies.
///
/// Measured on the H200 (FP32, 2026-12-01, `bilstm bench --backend cuda --host --iters 10`,
/// zero copy on / `BILSTM_ZERO_COPY=0`): host forward of batch 32 4.43 / 5.45 ms, 64 8.58 /
/// 10.39, 8 2.38 / 2.33, 1 1.56 / 1.61, against 2.88, 5.21, 1.75 and 1.49 ms device-resident.
pub const ZERO_COPY_MAX_WINDOWS: usize = HOST_CHUNK_WINDOWS;

/// The environment variable that turns the zero-copy host path off (`0`).
pub const ZERO_COPY_ENV: &str = "BILSTM_ZERO_COPY";

/// Whether [`ZERO_COPY_ENV`] leaves the zero-copy path on (anything but `0`).
pub(crate) fn zero_copy_from_env() -> bool {
    std::env::var(ZERO_COPY_ENV).map_or(true, |v| v.trim() != "0")
}

/// Page-locked, device-mapped host memory for the output of `min(max_batch,
/// ZERO_COPY_MAX_WINDOWS)` windows of `shape`, or `None` when the driver refuses it (the host
/// pass then downloads as usual).
pub(crate) fn mapped_output(
    ctx: &Arc<CudaContext>,
    shape: &StackShape,
    max_batch: usize,
) -> Option<PinnedHostSlice<f32>> {
    let len = shape
        .output_len(max_batch.min(ZERO_COPY_MAX_WINDOWS))
        .ok()?
        .max(1);
    // SAFETY: the memory is uninitialised until a pass writes it; it is read only after a
    // pass wrote the first `output.len()` values (`host_forward`), never before. f32 is valid
    // for every bit pattern. The length is bounded by a 64-window output (no overflow).
    unsafe {
        ctx.alloc_pinned_with_flags::<f32>(len, cudarc::driver::sys::CU_MEMHOSTALLOC_DEVICEMAP)
    }
    .ok()
}

/// Copies `src` into `dst` (equal lengths) on up to 8 threads: one thread copies 10-15 GB/s,
/// the 19 MB output of 32 windows would take longer than half the pass.
fn parallel_copy(src: &[f32], dst: &mut [f32]) {
    /// Below this many values (4 MiB) one thread copies.
    const MIN_PARALLEL: usize = 1 << 20;
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(8);
    if src.len() < MIN_PARALLEL || threads < 2 {
        dst.copy_from_slice(src);
        return;
    }
    let per = src.len().div_ceil(threads);
    let all_started = std::thread::scope(|scope| {
        let mut all = true;
        for (d, s) in dst.chunks_mut(per).zip(src.chunks(per)) {
            // `chunks` of two equal-length slices pair pieces of equal length.
            all &= std::thread::Builder::new()
                .spawn_scoped(scope, || d.copy_from_slice(s))
                .is_ok();
        }
        all
    });
    if !all_started {
        // A thread that could not start copied nothing: copy everything here.
        dst.copy_from_slice(src);
    }
}

/// The environment variable that sets the host path's chunk in windows (0: never split).
pub const HOST_CHUNK_ENV: &str = "BILSTM_HOST_CHUNK";

/// The chunk [`HOST_CHUNK_ENV`] names, else [`HOST_CHUNK_WINDOWS`].
pub(crate) fn host_chunk_from_env() -> usize {
    parse_host_chunk(std::env::var(HOST_CHUNK_ENV).ok().as_deref())
}

/// A [`HOST_CHUNK_ENV`] value: a whole number of windows (0 turns the split off), else
/// [`HOST_CHUNK_WINDOWS`].
fn parse_host_chunk(value: Option<&str>) -> usize {
    value
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(HOST_CHUNK_WINDOWS)
}

/// The error for a device buffer shorter than a pass needs (prepare sized them all).
fn short(what: &str) -> CudaError {
    CudaError::Internal {
        what: format!("{what} buffer shorter than the batch"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_chunks_parse_whole_windows_and_fall_back_to_the_default() {
        assert_eq!(parse_host_chunk(Some("64")), 64);
        assert_eq!(parse_host_chunk(Some(" 0 ")), 0);
        for bad in [None, Some(""), Some("-1"), Some("1.5"), Some("lots")] {
            assert_eq!(parse_host_chunk(bad), HOST_CHUNK_WINDOWS, "{bad:?}");
        }
    }
}
