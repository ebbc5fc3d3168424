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
//! | upload chunk k+1 (once `H→D k` is done: one staging buffer) | `H→D k+1`, record `chunk_uploaded` | (pass k running) |
//! | queue chunk k+1 | wait `chunk_done` (pass k) | wait `chunk_uploaded`; pass k+1; record `chunk_done` |
//! | download chunk k | `D→H k` (the host waits for it) | (pass k+1 running) |
//!
//! An unsplit pass of at most [`ZERO_COPY_MAX_WINDOWS`] windows (the zero-copy path, on by
//! default, `BILSTM_ZERO_COPY=0` or [`CudaBackend::set_host_zero_copy`] turns it off) has its
//! last layer write the output straight into page-locked, device-mapped host memory allocated
//! at prepare time: no download after the pass, only a copy from that memory into the caller's
//! slice on the backend's copy threads ([`crate::copy_pool`]). Its input is first copied on
//! those threads into page-locked staging memory, about a mebibyte of whole windows at a time,
//! each piece uploaded asynchronously while the next is staged ([`staging_pieces`];
//! `BILSTM_HOST_STAGING=0` uploads from the caller's slice instead).
//!
//! The unsplit pass's kernels are captured in a CUDA graph the first time its key (plan,
//! buffers, spin timeout) is seen and replayed after that, behind the input's
//! upload on the main stream ([`HOST_GRAPH_ENV`] `0` enqueues them one by one).
//!
//! With a cluster last layer the copy is progressive (`BILSTM_HOST_PROGRESSIVE=0` or
//! [`CudaBackend::set_host_progressive`] turns it off): that layer's writer warps report, every
//! [`bilstm_core::geometry::CLUSTER_PROGRESS_STEPS`] steps, how many rows of each window and
//! direction they have made visible to the host, in device-mapped progress words; once the
//! last layer has started, every copy thread copies the reported rows of its share of (window,
//! direction) pairs while the layer still runs, and after the pass ends (an event it polls
//! when no new rows come) whatever is left. The host thus waits for the last rows only, not for
//! a 19 MB copy after the pass (batch 32). `BILSTM_HOST_TRACE=1` prints each unsplit pass's
//! phases.
//!
//! The chunks' copies go through the page-locked memory of the unsplit path (its input staging
//! and mapped output, each a 64-window chunk): the copy threads move each chunk's input into
//! it before an asynchronous upload, and each chunk's output arrives there by DMA and leaves on
//! the copy threads, while the GPU computes the next chunk on the main stream (with
//! `BILSTM_HOST_STAGING=0`, or chunks larger than that memory, the driver stages the caller's
//! pageable slices itself, one thread at 10-17 GB/s). The error words are
//! zeroed once before chunk 0 and read once at the end, so a partner lost in any chunk is
//! reported (later chunks' kernels stop waiting as soon as they see the report); on any error
//! both streams are drained and the output must be treated as unwritten. The output bits equal
//! the unsplit pass's: a window's results do not depend on the batch it runs in.

use bilstm_core::plan::pipeline::{HOST_CHUNK_WINDOWS, host_chunks};
use bilstm_core::plan::{Plan, RecurrenceKind};
use bilstm_core::{Backend, CoreError};

use std::sync::Arc;

use bilstm_core::StackShape;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaContext, CudaEvent, PinnedHostSlice};

use crate::backend::CudaBackend;
use crate::buffers::span;
use crate::copy_pool::{CopyPool, SharedOut};
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

    /// Whether a zero-copy pass with a cluster last layer copies its rows into the caller's
    /// slice while that layer runs (see the [module docs](self)).
    pub fn host_progressive(&self) -> bool {
        self.progressive
    }

    /// Turns the progressive copy on or off (the default is on unless
    /// `BILSTM_HOST_PROGRESSIVE=0`). The output bits do not depend on it.
    pub fn set_host_progressive(&mut self, on: bool) {
        self.progressive = on;
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
        let mut trace = HostTrace::start(self.host_trace, batch);
        let main = self.device.main.clone();
        let pool = self.copy_pool.get_or_insert_with(CopyPool::for_host);
        let st = self.prepared.as_mut().ok_or(CoreError::NotPrepared)?;
        let host = HostBuffers::of(&mut st.host, &st.config, &self.device.ctx);
        {
            let mut dst = st
                .buffers
                .input
                .try_slice_mut(0..input.len())
                .ok_or_else(|| short("input"))?;
            match host.staged_in.as_mut() {
                Some(staged) if self.staging && input.len() <= staged.len() => {
                    // The staging memory is free: the host path's previous pass (the only user)
                    // waited for its stream before it returned.
                    let staged = &mut staged
                        .as_mut_slice()
                        .map_err(CudaError::driver("reaching the input staging memory"))?
                        [..input.len()];
                    stage_and_upload(pool, input, staged, &mut dst, &main, input.len() / batch)?;
                    trace.mark("stage");
                }
                _ => main
                    .memcpy_htod(input, &mut dst)
                    .map_err(CudaError::driver("uploading the input"))?,
            }
        }
        trace.mark("upload");
        let input_span = span(&st.buffers.input, &main);
        let mapped = host
            .mapped_out
            .as_ref()
            .filter(|m| self.zero_copy && output.len() <= m.host.len())
            .map(Mapped::span);
        // The progressive copy: the cluster last layer reports finished rows while it runs and
        // the copy threads copy them meanwhile (needs two threads: one may wait on the GPU).
        let progress = match host.progress.as_mut() {
            Some(words)
                if mapped.is_some()
                    && self.progressive
                    && pool.threads() >= 2
                    && plan.schedule.choice.cluster().is_some()
                    && 2 * batch <= words.host.len() =>
            {
                // No pass is running (the previous one was waited for): the host may write.
                words
                    .host
                    .as_mut_slice()
                    .map_err(CudaError::driver("reaching the progress words"))?
                    .fill(0);
                Some(words.span())
            }
            _ => None,
        };
        let region = Region {
            progress,
            ..Region::WHOLE
        };
        self.enqueue_host_pass(&plan, input_span, mapped, region)
            .inspect_err(|_| self.drain())?;
        trace.mark("queue");
        if progress.is_some() {
            self.progressive_copy(output, batch, &mut trace)
                .inspect_err(|_| self.drain())?;
        } else if mapped.is_some() {
            main.synchronize()
                .map_err(CudaError::driver("finishing a forward pass"))
                .inspect_err(|_| self.drain())?;
            trace.mark("wait");
            let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
            let m = st
                .host
                .as_ref()
                .and_then(|h| h.mapped_out.as_ref())
                .ok_or_else(|| short("mapped output"))?;
            let values = m
                .host
                .as_slice()
                .map_err(CudaError::driver("reading the mapped output"))?;
            let pool = self.copy_pool.get_or_insert_with(CopyPool::for_host);
            pool.copy(&values[..output.len()], output);
            trace.mark("copy");
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
        trace.mark("download");
        let done = self.finish(ForwardSummary::of(plan));
        trace.report();
        done
    }

    /// The progressive copy of a queued zero-copy pass whose last layer reports progress: waits
    /// for the last layer to start, copies finished rows into `output` on the copy pool while it
    /// runs, then waits for the pass (see the [module docs](self)).
    fn progressive_copy(
        &mut self,
        output: &mut [f32],
        batch: usize,
        trace: &mut HostTrace,
    ) -> Result<(), CudaError> {
        let main = self.device.main.clone();
        let frames = self.config().ok_or(CoreError::NotPrepared)?.shape.frames;
        let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
        st.pass_done
            .record(&main)
            .map_err(CudaError::driver("recording a pass's end"))?;
        // The copy threads would only spin before the last layer.
        st.last_layer
            .synchronize()
            .map_err(CudaError::driver("waiting for the last layer"))?;
        trace.mark("layers");
        let host = st.host.as_ref().ok_or_else(|| short("host pass memory"))?;
        let mapped = host
            .mapped_out
            .as_ref()
            .ok_or_else(|| short("mapped output"))?
            .host
            .as_ptr()
            .map_err(CudaError::driver("reading the mapped output"))?;
        let words = host
            .progress
            .as_ref()
            .ok_or_else(|| short("progress words"))?
            .host
            .as_ptr()
            .map_err(CudaError::driver("reading the progress words"))?;
        let pool = self.copy_pool.get_or_insert_with(CopyPool::for_host);
        let rows = RowSource {
            values: mapped,
            words,
            batch,
            frames,
        };
        let stats = CopyStats::new();
        let complete = copy_as_reported(pool, &rows, output, &st.pass_done, &stats);
        trace.mark("copy");
        trace.note(|| stats.describe());
        main.synchronize()
            .map_err(CudaError::driver("finishing a forward pass"))?;
        trace.mark("wait");
        if !complete {
            // The event could not be queried, or a copy thread panicked: the pass is over now,
            // copy everything.
            // SAFETY: the pass has finished (synchronized above), nothing writes the mapped
            // output any more, and it holds at least output.len() values (host_forward checked).
            let values = unsafe { std::slice::from_raw_parts(mapped, output.len()) };
            pool.copy(values, output);
            trace.mark("recopy");
        }
        Ok(())
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
        self.clear_error_words()?;
        let staging = self.chunk_staging(chunks, in_per, out_per)?;
        let pool = self.copy_pool.take().unwrap_or_else(CopyPool::for_host);
        let run = self.copy_chunks(input, output, chunks, plans, staging, &pool);
        self.copy_pool = Some(pool);
        run
    }

    /// The page-locked staging of the pipelined path: the unsplit pass's input staging and
    /// mapped output memory (allocated on first use), when staging is on and they hold a chunk;
    /// `None` otherwise (the driver then stages the caller's pageable slices itself).
    fn chunk_staging(
        &mut self,
        chunks: &[(usize, usize)],
        in_per: usize,
        out_per: usize,
    ) -> Result<Option<ChunkStaging>, CudaError> {
        let widest = chunks.iter().map(|&(_, n)| n).max().unwrap_or(0);
        if !self.staging {
            return Ok(None);
        }
        let st = self.prepared.as_mut().ok_or(CoreError::NotPrepared)?;
        let host = HostBuffers::of(&mut st.host, &st.config, &self.device.ctx);
        match (host.staged_in.as_mut(), host.mapped_out.as_mut()) {
            (Some(i), Some(o))
                if widest * in_per <= i.len() && widest * out_per <= o.host.len() =>
            {
                Ok(Some(ChunkStaging {
                    input: i
                        .as_mut_ptr()
                        .map_err(CudaError::driver("reaching the input staging memory"))?,
                    output: o
                        .host
                        .as_mut_ptr()
                        .map_err(CudaError::driver("reaching the output staging memory"))?,
                }))
            }
            _ => Ok(None),
        }
    }

    /// The chunk loop of [`CudaBackend::run_chunks`].
    fn copy_chunks(
        &mut self,
        input: &[f32],
        output: &mut [f32],
        chunks: &[(usize, usize)],
        plans: &[bilstm_core::plan::Plan],
        staging: Option<ChunkStaging>,
        pool: &CopyPool,
    ) -> Result<(), CudaError> {
        let shape = self.config().ok_or(CoreError::NotPrepared)?.shape;
        let (in_per, out_per) = (shape.input_len(1)?, shape.output_len(1)?);
        let main = self.device.main.clone();
        let copy = self.device.copy.clone();
        let last_layer = (shape.layers - 1) % 2;

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
            match staging {
                Some(stage) => {
                    // The previous chunk's upload may still be reading the staging memory
                    // (chunk k + 1 is staged while chunk k's DMA runs; a pass of 128 windows
                    // got 1 to 10 of its first chunk's windows from the second chunk before
                    // this wait: `gpu_batches`, H200, session 6): wait for that DMA. An event
                    // never recorded (chunk 0) is complete.
                    st.chunk_uploaded
                        .synchronize()
                        .map_err(CudaError::driver("waiting for the previous chunk's upload"))?;
                    // SAFETY: `stage.input` holds at least the widest chunk's input
                    // (chunk_staging checked), and nothing reads it now: its only reader, the
                    // copy stream's upload of the previous chunk, has completed (the event
                    // above, recorded after that upload; chunk 0 has no previous upload).
                    let staged =
                        unsafe { std::slice::from_raw_parts_mut(stage.input, range.len()) };
                    pool.copy(&input[range], staged);
                    copy.memcpy_htod(&*staged, &mut dst)
                }
                None => copy.memcpy_htod(&input[range], &mut dst),
            }
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
                progress: None,
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
            match staging {
                Some(stage) => {
                    // SAFETY: `stage.output` holds at least the widest chunk's output
                    // (chunk_staging checked); the previous chunk's copy out of it has
                    // returned, and nothing else uses it during a pipelined forward.
                    let staged =
                        unsafe { std::slice::from_raw_parts_mut(stage.output, range.len()) };
                    // Page-locked: a DMA at the bus's speed; the copy threads then move it.
                    copy.memcpy_dtoh(&src, staged)
                        .map_err(CudaError::driver("downloading a chunk of the output"))?;
                    copy.synchronize()
                        .map_err(CudaError::driver("downloading a chunk of the output"))?;
                    pool.copy(staged, &mut output[range]);
                }
                // Pageable destination: returns once the chunk is in `output`.
                None => copy
                    .memcpy_dtoh(&src, &mut output[range])
                    .map_err(CudaError::driver("downloading a chunk of the output"))?,
            }
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
    on_unless_zero(std::env::var(ZERO_COPY_ENV).ok().as_deref())
}

/// Bytes of input the unsplit host pass stages and uploads at a time (whole windows, at least
/// one): the DMA of one piece overlaps the staging of the next, so the GPU starts one piece's
/// upload after the staging ends instead of the whole input's.
pub const STAGING_PIECE_BYTES: usize = 1 << 20;

/// The pieces (ranges of values, whole windows of `window_values` each) in which `values`
/// input values are staged and uploaded: windows of about [`STAGING_PIECE_BYTES`] together,
/// the last piece taking the remainder.
pub fn staging_pieces(
    values: usize,
    window_values: usize,
) -> impl Iterator<Item = std::ops::Range<usize>> {
    let window_bytes = window_values.max(1) * std::mem::size_of::<f32>();
    let step = STAGING_PIECE_BYTES.div_ceil(window_bytes).max(1) * window_values.max(1);
    (0..values)
        .step_by(step)
        .map(move |start| start..(start + step).min(values))
}

/// Copies `input` into the page-locked `staged` (same length) on the pool's threads, piece by
/// piece ([`staging_pieces`], every thread a share of every piece, in piece order), and queues
/// each piece's upload into `dst` on `stream` as soon as every thread has staged its share: the
/// DMA of one piece (page-locked source: asynchronous, at the bus's speed) runs while the
/// threads stage the next. The caller's thread queues the uploads. If a copy thread panics, the
/// whole input is staged again on the caller and uploaded once more behind the partial uploads
/// (stream order), so the device always receives `input`.
///
/// # Errors
/// [`CudaError::Driver`] when an upload cannot be queued.
fn stage_and_upload(
    pool: &CopyPool,
    input: &[f32],
    staged: &mut [f32],
    dst: &mut cudarc::driver::CudaViewMut<'_, f32>,
    stream: &Arc<cudarc::driver::CudaStream>,
    window_values: usize,
) -> Result<(), CudaError> {
    let len = input.len().min(staged.len());
    let pieces: Vec<std::ops::Range<usize>> = staging_pieces(len, window_values).collect();
    // Below MIN_PARALLEL_VALUES the caller alone (waking the threads costs more than they
    // save: H200 host, batch 1 with eight threads 1.56-1.72 ms against 1.49-1.52).
    let parts = if len < crate::copy_pool::MIN_PARALLEL_VALUES {
        1
    } else {
        pool.threads()
    };
    let staged_at = SharedOut(staged.as_mut_ptr());
    let done: Vec<AtomicU32> = pieces.iter().map(|_| AtomicU32::new(0)).collect();
    let failed = AtomicBool::new(false);
    let upload_error = std::sync::Mutex::new(None::<CudaError>);
    let dst_lock = std::sync::Mutex::new(&mut *dst);
    // Sets `failed` if its part unwinds, so that part 0 stops waiting for that part's shares.
    struct Unwinding<'a>(&'a AtomicBool);
    impl Drop for Unwinding<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                self.0.store(true, Ordering::Release);
            }
        }
    }
    let complete = pool.run(parts, &|part| {
        let _guard = Unwinding(&failed);
        for (p, piece) in pieces.iter().enumerate() {
            let mine = crate::copy_pool::share(piece.clone(), parts, part);
            // SAFETY: the shares of all parts and pieces are disjoint ranges of `staged` (which
            // outlives `run`), each written by exactly one part; `mine.end <= len <=
            // staged.len()`.
            let to =
                unsafe { std::slice::from_raw_parts_mut(staged_at.at(mine.start), mine.len()) };
            to.copy_from_slice(&input[mine]);
            done[p].fetch_add(1, Ordering::AcqRel);
            if part != 0 {
                continue;
            }
            // Part 0 queues the piece's upload once every part has staged its share.
            while done[p].load(Ordering::Acquire) < parts as u32 {
                if failed.load(Ordering::Acquire) {
                    return;
                }
                std::hint::spin_loop();
            }
            // SAFETY: every part finished writing this piece (the counter, acquire) and none
            // writes it again; `piece.end <= len <= staged.len()`.
            let src = unsafe {
                std::slice::from_raw_parts(staged_at.at(piece.start).cast_const(), piece.len())
            };
            let queued = dst_lock
                .lock()
                .map_err(|_| short("input"))
                .and_then(|mut d| {
                    let mut to = d
                        .try_slice_mut(piece.clone())
                        .ok_or_else(|| short("input"))?;
                    stream
                        .memcpy_htod(src, &mut to)
                        .map_err(CudaError::driver("uploading the input"))
                });
            if let Err(e) = queued {
                if let Ok(mut slot) = upload_error.lock() {
                    slot.get_or_insert(e);
                }
                failed.store(true, Ordering::Release);
                return;
            }
        }
    });
    if let Some(e) = upload_error.into_inner().ok().flatten() {
        return Err(e);
    }
    if !complete || failed.load(Ordering::Acquire) {
        // A copy thread panicked: stage and upload everything here.
        staged[..len].copy_from_slice(&input[..len]);
        let mut to = dst.try_slice_mut(0..len).ok_or_else(|| short("input"))?;
        stream
            .memcpy_htod(&staged[..len], &mut to)
            .map_err(CudaError::driver("uploading the input"))?;
    }
    Ok(())
}

/// A switch that is on unless its environment variable is `0` (unset: on).
fn on_unless_zero(value: Option<&str>) -> bool {
    value.is_none_or(|v| v.trim() != "0")
}

/// A switch that is off unless its environment variable is `1` (unset: off).
fn off_unless_one(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.trim() == "1")
}

/// The page-locked memory of unsplit host passes (see the [module docs](self)); each part is
/// `None` when the driver refused it (the pass then does without).
#[derive(Debug)]
pub(crate) struct HostBuffers {
    /// Device-mapped memory the last layer writes the output into ([`mapped_output`]).
    pub(crate) mapped_out: Option<Mapped<f32>>,
    /// The input's staging memory ([`staged_input`]).
    pub(crate) staged_in: Option<PinnedHostSlice<f32>>,
    /// Device-mapped progress words of the last layer ([`progress_words`]).
    pub(crate) progress: Option<Mapped<u32>>,
}

/// Page-locked, device-mapped host memory and its device address (looked up once, when it is
/// allocated, not on every pass).
#[derive(Debug)]
pub(crate) struct Mapped<T> {
    pub(crate) host: PinnedHostSlice<T>,
    device: u64,
}

impl<T> Mapped<T> {
    /// The memory as kernels address it.
    pub(crate) fn span(&self) -> Span {
        Span {
            addr: self.device,
            len: self.host.len(),
        }
    }
}

/// `len` device-mapped page-locked values, or `None` when the driver refuses them or their
/// device address.
fn mapped<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    ctx: &Arc<CudaContext>,
    len: usize,
) -> Option<Mapped<T>> {
    let mut host = pinned::<T>(ctx, len, cudarc::driver::sys::CU_MEMHOSTALLOC_DEVICEMAP)?;
    let start = host.as_mut_ptr().ok()?;
    // SAFETY: `start` is the start of `host`, just allocated with CU_MEMHOSTALLOC_DEVICEMAP in
    // `ctx`, which the allocation made current on this thread; `host` lives as long as the
    // returned value, so the address stays valid with it.
    let device = unsafe { crate::launch::sys::mapped_device_address(start) }.ok()?;
    Some(Mapped { host, device })
}

impl HostBuffers {
    /// The host-pass memory in `slot` (a `Prepared`'s), allocated for `config` by the first
    /// call.
    pub(crate) fn of<'a>(
        slot: &'a mut Option<HostBuffers>,
        config: &bilstm_core::BackendConfig,
        ctx: &Arc<CudaContext>,
    ) -> &'a mut Self {
        slot.get_or_insert_with(|| HostBuffers::allocate(ctx, config))
    }

    /// Allocates them for passes of up to `min(config.max_batch, ZERO_COPY_MAX_WINDOWS)`
    /// windows (about 48 MB page-locked at 64 windows of 589 frames).
    pub(crate) fn allocate(ctx: &Arc<CudaContext>, config: &bilstm_core::BackendConfig) -> Self {
        HostBuffers {
            mapped_out: mapped_output(ctx, &config.shape, config.max_batch),
            staged_in: staged_input(ctx, &config.shape, config.max_batch),
            progress: progress_words(ctx, config.max_batch),
        }
    }
}

/// `len` (at least 1) page-locked host values allocated with `flags`, or `None` when the driver
/// refuses them.
fn pinned<T: cudarc::driver::DeviceRepr>(
    ctx: &Arc<CudaContext>,
    len: usize,
    flags: u32,
) -> Option<PinnedHostSlice<T>> {
    // SAFETY: the memory is uninitialised until written, and every user here reads only values
    // that a pass, a DMA or the host wrote first: the mapped output after the pass (or the rows
    // its progress words report), the staging memory after the copy into it, the progress words
    // after `host_forward` zeroed them. T is f32 or u32, valid for every bit pattern; `len` is
    // bounded by a 64-window output (no overflow).
    unsafe { ctx.alloc_pinned_with_flags::<T>(len.max(1), flags) }.ok()
}

/// Page-locked, device-mapped host memory for the output of `min(max_batch,
/// ZERO_COPY_MAX_WINDOWS)` windows of `shape` (the zero-copy last layer writes it; the pipelined
/// path downloads each chunk into it), or `None` when the driver refuses it.
pub(crate) fn mapped_output(
    ctx: &Arc<CudaContext>,
    shape: &StackShape,
    max_batch: usize,
) -> Option<Mapped<f32>> {
    let len = shape
        .output_len(max_batch.min(ZERO_COPY_MAX_WINDOWS))
        .ok()?;
    mapped(ctx, len)
}

/// Page-locked host memory for the input of `min(max_batch, ZERO_COPY_MAX_WINDOWS)` windows of
/// `shape`, which the copy threads fill from the caller's input before one asynchronous upload,
/// or `None` when the driver refuses it (uploads then come from the caller's pageable slice).
/// Plain cached memory (not write-combined; the two were not compared).
pub(crate) fn staged_input(
    ctx: &Arc<CudaContext>,
    shape: &StackShape,
    max_batch: usize,
) -> Option<PinnedHostSlice<f32>> {
    let len = shape.input_len(max_batch.min(ZERO_COPY_MAX_WINDOWS)).ok()?;
    pinned(ctx, len, 0)
}

/// The environment variable that turns the host path's trace on (`1`): every unsplit host
/// pass prints one line to stderr with the milliseconds of its phases (`stage`: the caller's
/// input into page-locked memory, piece by piece, each piece's upload queued behind it
/// ([`staging_pieces`]), `upload`: the upload when not staged, `queue`: the kernels queued; then
/// with the
/// progressive copy `layers`: until the last layer starts, `copy`: the rows copied while it runs
/// and after, `wait`: the pass's end, `recopy`: only after a failed copy; else `wait`: the GPU
/// finishing and `copy`: the mapped output into the caller's slice; `download`: the final
/// states, if asked for), then the total and, for the progressive copy, what the copy threads
/// saw. `bilstm run` adds one line of its own phases.
pub const HOST_TRACE_ENV: &str = "BILSTM_HOST_TRACE";

/// The environment variable that turns the page-locked input staging off (`0`): the caller's
/// input is then uploaded by the driver from pageable memory.
pub const STAGING_ENV: &str = "BILSTM_HOST_STAGING";

/// The environment variable that turns the host pass's graph replay off (`0`): every unsplit
/// host pass then enqueues its kernels one by one.
pub const HOST_GRAPH_ENV: &str = "BILSTM_HOST_GRAPH";

/// Whether [`HOST_GRAPH_ENV`] leaves graph replay on (anything but `0`).
pub(crate) fn host_graph_from_env() -> bool {
    on_unless_zero(std::env::var(HOST_GRAPH_ENV).ok().as_deref())
}

/// Captured unsplit host passes a preparation keeps (the most recent ones; a `bilstm run` of a
/// file alternates between at most two batch sizes: the chunk and the last, smaller one).
pub(crate) const HOST_GRAPHS: usize = 4;

/// What a captured unsplit host pass depends on: the graph replays only for an equal key (the
/// same plan, hence the same kernels, overrides and schedule; the same buffers and progress
/// words; the same spin timeout, a kernel parameter).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct HostGraphKey {
    plan: Plan,
    input: Span,
    mapped: Option<Span>,
    progress: Option<Span>,
    spin_timeout: std::time::Duration,
}

/// An unsplit host pass captured in a CUDA graph (stream capture of exactly what
/// `CudaBackend::enqueue_with_states` enqueues: the error-word clear, every layer's projection
/// and recurrence, the last-layer event), instantiated once and replayed by later passes with
/// the same [`HostGraphKey`]: one launch instead of a dozen (issue 11).
pub(crate) struct HostGraph {
    key: HostGraphKey,
    graph: cudarc::driver::CudaGraph,
}

impl std::fmt::Debug for HostGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // cudarc's graph handle has no Debug.
        f.debug_struct("HostGraph")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

// SAFETY: a CUDA graph and its executable may be used from any thread as long as no two calls
// on them run at once (CUDA driver API, "Graph object thread safety"). A HostGraph lives in
// `Prepared::host_graphs` and is only touched through `&mut CudaBackend` (capture, launch,
// drop), so every call on it is serialised by the borrow; its stream handle is an
// `Arc<CudaStream>`, which cudarc makes Send and Sync.
unsafe impl Send for HostGraph {}

impl CudaBackend {
    /// Enqueues an unsplit host pass on the main stream (behind the input's upload): the
    /// replay of a graph captured earlier under the same [`HostGraphKey`], else a capture of
    /// the pass, kept for next time, launched now. Without graphs ([`HOST_GRAPH_ENV`] `0`,
    /// a test's stall injection, or after the driver refused a capture) the kernels are
    /// enqueued one by one.
    ///
    /// # Errors
    /// As `enqueue_with_states`; [`CudaError::Driver`] when the capture, instantiation or
    /// launch fails.
    fn enqueue_host_pass(
        &mut self,
        plan: &Plan,
        input: Span,
        mapped: Option<Span>,
        region: Region,
    ) -> Result<(), CudaError> {
        if !self.host_graph || self.stall.is_some() {
            return self.enqueue_with_states(plan, input, mapped, None, region);
        }
        let key = HostGraphKey {
            plan: *plan,
            input,
            mapped,
            progress: region.progress,
            spin_timeout: self.spin_timeout,
        };
        let st = self.prepared.as_mut().ok_or(CoreError::NotPrepared)?;
        if let Some(at) = st.host_graphs.iter().position(|g| g.key == key) {
            // Most recently used last.
            let g = st.host_graphs.remove(at);
            let launched = g
                .graph
                .launch()
                .map_err(CudaError::driver("replaying a captured host pass"));
            st.host_graphs.push(g);
            return launched;
        }
        let main = self.device.main.clone();
        main.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(CudaError::driver("beginning a host-pass capture"))?;
        let enqueued = self.enqueue_with_states(plan, input, mapped, None, region);
        // The capture always ends, so the stream leaves capture mode whatever happened.
        let ended = main.end_capture(CUgraphInstantiate_flags(0));
        enqueued?;
        // Nothing captured has run: where the driver cannot capture or instantiate this pass,
        // it runs (now and from now on) kernel by kernel.
        let Ok(Some(graph)) = ended else {
            self.host_graph = false;
            return self.enqueue_with_states(plan, input, mapped, None, region);
        };
        graph
            .launch()
            .map_err(CudaError::driver("launching a captured host pass"))?;
        let st = self.prepared.as_mut().ok_or(CoreError::NotPrepared)?;
        if st.host_graphs.len() >= HOST_GRAPHS {
            st.host_graphs.remove(0);
        }
        st.host_graphs.push(HostGraph { key, graph });
        Ok(())
    }

    /// Turns the unsplit host pass's graph replay on or off (default on unless
    /// `BILSTM_HOST_GRAPH=0`); both give the same bits.
    pub fn set_host_graph(&mut self, on: bool) {
        self.host_graph = on;
    }
}

/// Whether [`HOST_TRACE_ENV`] is `1`.
pub(crate) fn host_trace_from_env() -> bool {
    off_unless_one(std::env::var(HOST_TRACE_ENV).ok().as_deref())
}

/// Whether [`STAGING_ENV`] leaves the input staging on (anything but `0`).
pub(crate) fn staging_from_env() -> bool {
    on_unless_zero(std::env::var(STAGING_ENV).ok().as_deref())
}

/// The phases of one host pass, printed by [`HostTrace::report`] when [`HOST_TRACE_ENV`] is on.
struct HostTrace {
    on: bool,
    batch: usize,
    last: std::time::Instant,
    start: std::time::Instant,
    marks: Vec<(&'static str, f64)>,
    notes: Vec<String>,
}

impl HostTrace {
    fn start(on: bool, batch: usize) -> Self {
        let now = std::time::Instant::now();
        HostTrace {
            on,
            batch,
            last: now,
            start: now,
            marks: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Ends phase `name` now.
    fn mark(&mut self, name: &'static str) {
        if self.on {
            let now = std::time::Instant::now();
            self.marks
                .push((name, (now - self.last).as_secs_f64() * 1e3));
            self.last = now;
        }
    }

    /// Adds a remark to the pass's line (made only when the trace is on).
    fn note(&mut self, note: impl FnOnce() -> String) {
        if self.on {
            self.notes.push(note());
        }
    }

    fn report(&self) {
        if self.on {
            let phases: Vec<String> = self
                .marks
                .iter()
                .map(|(name, ms)| format!("{name} {ms:.3}"))
                .collect();
            eprintln!(
                "bilstm host trace: batch {}: {}, total {:.3} ms{}",
                self.batch,
                phases.join(", "),
                self.start.elapsed().as_secs_f64() * 1e3,
                self.notes
                    .iter()
                    .map(|n| format!(" ({n})"))
                    .collect::<String>()
            );
        }
    }
}

/// The page-locked staging of a pipelined forward ([`HostBuffers`]' input staging and mapped
/// output memory, each holding one chunk).
#[derive(Clone, Copy)]
struct ChunkStaging {
    input: *mut f32,
    output: *mut f32,
}

/// The zero-copy output of a running pass and its progress words (see the "Progress" contract
/// of kernels/cuda/recurrence_cluster.cu).
struct RowSource {
    /// The mapped output, `[batch, frames, 256]`.
    values: *const f32,
    /// The progress words, `[batch, 2]`.
    words: *const u32,
    batch: usize,
    frames: usize,
}

// SAFETY: the pointers are only read, at places the kernel's progress words (or the pass's end)
// say are finished (see `copy_as_reported`), from any thread.
unsafe impl Sync for RowSource {}

/// How long a copy thread that saw no new rows spins before it asks the driver whether the pass
/// is over (a kernel that ends early stops reporting).
const EVENT_POLL: std::time::Duration = std::time::Duration::from_micros(50);

/// Copies every row of `rows` into `out` (`batch * frames * 256` values) as the progress words
/// report it, on every thread of `pool`, each thread taking every n-th window; after `done`
/// completes, copies whatever is left. False if `done` could not be queried or a copy thread
/// panicked (rows may then be missing).
///
/// A row is copied once both directions have reported it: frame t of a window is finished at
/// step max(t, frames - 1 - t), so finished rows grow from the middle of the window outwards,
/// and each report adds two runs of whole rows, contiguous in the mapped output and in `out`
/// alike. Measured on the H200 machine's host (Intel Xeon, 16 vCPUs, 2026-12-01, batch 32):
/// copying each direction's half rows as they come, 512 bytes at a time 1 KiB apart, ran at a
/// third of a contiguous copy's speed (the whole 19 MB took 0.93 ms after the pass, against
/// 0.26-0.32 ms contiguous) and left 0.3-0.4 ms of copying after the pass; whole rows leave
/// 0.07-0.15 ms. Streaming (non-temporal) stores and 12 or 16 threads instead of 8 were no
/// faster.
fn copy_as_reported(
    pool: &CopyPool,
    rows: &RowSource,
    out: &mut [f32],
    done: &CudaEvent,
    stats: &CopyStats,
) -> bool {
    const ROW: usize = 256;
    let (batch, frames) = (rows.batch, rows.frames);
    if out.len() < batch * frames * ROW {
        return false;
    }
    let parts = pool.threads().min(batch).max(1);
    let out_at = SharedOut(out.as_mut_ptr());
    let failed = AtomicBool::new(false);
    // The count one progress word reports (0 when the pass is over: everything is finished).
    let reported = |window: usize, direction: usize| -> usize {
        // SAFETY: `2 * window + direction < 2 * batch` words, 4-byte aligned, live for the pass;
        // the GPU writes them with single 32-bit stores and the host wrote them only before the
        // launch. Acquire: the rows it counts are read after it.
        let word =
            unsafe { AtomicU32::from_ptr(rows.words.add(2 * window + direction).cast_mut()) };
        (word.load(Ordering::Acquire) as usize).min(frames)
    };
    // Copies rows `range` of `window` (whole rows, contiguous on both sides).
    let copy = |window: usize, range: std::ops::Range<usize>| {
        if range.is_empty() {
            return;
        }
        let at = (window * frames + range.start) * ROW;
        // SAFETY: `range.end <= frames`, so `at + len <= batch * frames * ROW <= out.len()` and
        // the mapped output's length (host_forward checked both); both directions reported these
        // rows (or the pass is over), so nothing writes them; each window belongs to one part,
        // so the destinations are disjoint.
        unsafe {
            std::ptr::copy_nonoverlapping(rows.values.add(at), out_at.at(at), range.len() * ROW);
        }
    };
    let complete = pool.run(parts, &|part| {
        let windows: Vec<usize> = (part..batch).step_by(parts).collect();
        // Rows lo..hi of each window are copied (empty until both directions meet).
        let mut copied: Vec<Option<(usize, usize)>> = vec![None; windows.len()];
        let mut over = false;
        let mut idle_since: Option<std::time::Instant> = None;
        loop {
            let mut progressed = false;
            let mut all = true;
            for (&window, have) in windows.iter().zip(copied.iter_mut()) {
                // Finished rows: the forward direction's first `f` frames and the reverse
                // direction's last `r`, i.e. frames - r .. f where they overlap.
                let (lo, hi) = if over {
                    (0, frames)
                } else {
                    let (f, r) = (reported(window, 0), reported(window, 1));
                    (frames - r, f)
                };
                if lo < hi {
                    let n_before = have.map_or(0, |(a, b)| b - a);
                    match *have {
                        None => copy(window, lo..hi),
                        Some((a, b)) => {
                            copy(window, lo.min(a)..a);
                            copy(window, b..hi.max(b));
                        }
                    }
                    let (a, b) = have.map_or((lo, hi), |(a, b)| (lo.min(a), hi.max(b)));
                    *have = Some((a, b));
                    let n = (b - a) - n_before;
                    if n > 0 {
                        progressed = true;
                        if over {
                            stats.late_rows.fetch_add(n, Ordering::Relaxed);
                        } else {
                            stats.early_rows.fetch_add(n, Ordering::Relaxed);
                            stats
                                .first_report
                                .fetch_min(stats.now_us(), Ordering::Relaxed);
                        }
                    }
                }
                all &= *have == Some((0, frames));
            }
            if all || over {
                stats.part_done.fetch_max(stats.now_us(), Ordering::Relaxed);
                return;
            }
            if progressed {
                idle_since = None;
                continue;
            }
            let since = *idle_since.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() >= EVENT_POLL {
                match done.try_is_complete() {
                    Ok(true) => over = true,
                    Ok(false) => idle_since = None,
                    Err(_) => {
                        failed.store(true, Ordering::Relaxed);
                        return;
                    }
                }
            }
            std::hint::spin_loop();
        }
    });
    complete && !failed.load(Ordering::Relaxed)
}

/// What a progressive copy saw (for [`HOST_TRACE_ENV`]): rows copied as reported and after the
/// pass, and when (microseconds from its start) the first report came and the last part ended.
struct CopyStats {
    start: std::time::Instant,
    early_rows: std::sync::atomic::AtomicUsize,
    late_rows: std::sync::atomic::AtomicUsize,
    first_report: std::sync::atomic::AtomicU64,
    part_done: std::sync::atomic::AtomicU64,
}

impl CopyStats {
    fn new() -> Self {
        CopyStats {
            start: std::time::Instant::now(),
            early_rows: 0.into(),
            late_rows: 0.into(),
            first_report: u64::MAX.into(),
            part_done: 0.into(),
        }
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    fn describe(&self) -> String {
        format!(
            "rows as reported {}, after the pass {}, first report at {} us, last part done at {} us",
            self.early_rows.load(Ordering::Relaxed),
            self.late_rows.load(Ordering::Relaxed),
            self.first_report.load(Ordering::Relaxed),
            self.part_done.load(Ordering::Relaxed)
        )
    }
}

/// Page-locked, device-mapped progress words (`[windows, 2]` u32) for an unsplit host pass of
/// up to [`ZERO_COPY_MAX_WINDOWS`] windows, or `None` when the driver refuses them (the pass then
/// copies after it ends).
pub(crate) fn progress_words(ctx: &Arc<CudaContext>, max_batch: usize) -> Option<Mapped<u32>> {
    mapped(ctx, 2 * max_batch.clamp(1, ZERO_COPY_MAX_WINDOWS))
}

/// The environment variable that turns the progressive copy off (`0`): the zero-copy pass's
/// output is then copied after the pass ends.
pub const PROGRESSIVE_ENV: &str = "BILSTM_HOST_PROGRESSIVE";

/// Whether [`PROGRESSIVE_ENV`] leaves the progressive copy on (anything but `0`).
pub(crate) fn progressive_from_env() -> bool {
    on_unless_zero(std::env::var(PROGRESSIVE_ENV).ok().as_deref())
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
    fn switches_read_zero_as_off_and_one_as_on() {
        for (value, on, trace) in [
            (None, true, false),
            (Some("0"), false, false),
            (Some(" 0 "), false, false),
            (Some("1"), true, true),
            (Some("yes"), true, false),
            (Some(""), true, false),
        ] {
            assert_eq!(on_unless_zero(value), on, "{value:?}");
            assert_eq!(off_unless_one(value), trace, "{value:?}");
        }
    }

    #[test]
    fn staging_pieces_cover_the_input_in_whole_windows_of_about_a_mebibyte() {
        let window = 589 * 60; // 141,360 bytes: 8 windows a piece
        let pieces: Vec<_> = staging_pieces(32 * window, window).collect();
        assert_eq!(
            pieces,
            [
                0..8 * window,
                8 * window..16 * window,
                16 * window..24 * window,
                24 * window..32 * window
            ]
        );
        let odd: Vec<_> = staging_pieces(9 * window, window).collect();
        assert_eq!(odd, [0..8 * window, 8 * window..9 * window]);
        // Small batches: one piece; windows larger than a piece: one window each.
        let one: Vec<_> = staging_pieces(window, window).collect();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0], 0..window);
        let big = 300_000;
        assert_eq!(
            staging_pieces(3 * big, big).collect::<Vec<_>>(),
            [0..big, big..2 * big, 2 * big..3 * big]
        );
        assert_eq!(staging_pieces(0, window).count(), 0);
    }

    #[test]
    fn host_chunks_parse_whole_windows_and_fall_back_to_the_default() {
        assert_eq!(parse_host_chunk(Some("64")), 64);
        assert_eq!(parse_host_chunk(Some(" 0 ")), 0);
        for bad in [None, Some(""), Some("-1"), Some("1.5"), Some("lots")] {
            assert_eq!(parse_host_chunk(bad), HOST_CHUNK_WINDOWS, "{bad:?}");
        }
    }
}
