//! [`CudaBackend`]: the [`Backend`] implementation on one GPU.
//!
//! # Plans
//! Every forward pass runs the plan core selects for its batch
//! (`bilstm_core::plan::select_with`) from the driver's device facts, the compiled kernels' real
//! resources (registers, static and dynamic shared bytes: [`CudaBackend::plan_resources`]) and
//! the caller's [`Overrides`]. Planning is pure and cheap, so it happens per forward batch;
//! buffers are sized at [`Backend::prepare`] for the largest batch and for every recurrence kind,
//! so a forced kind never needs a new allocation. [`CudaBackend::plan`] shows the plan a batch
//! gets.
//!
//! # A forward pass
//! Everything is enqueued on the main stream except the reverse direction's cooperative
//! recurrences, which run on a side stream when the schedule runs both directions at once:
//!
//! 1. upload the input (host forward only);
//! 2. cooperative recurrences (wide, tiled) only: `clear` zeroes the exchange and the error
//!    words (one launch per pass: flags include the layer);
//! 3. per layer: the projection of both directions (one launch, grid.z = direction), then
//!    - wide / tiled: record `proj_done`, the side stream waits on it; the forward recurrence
//!      on the main stream and the reverse one on the side stream (concurrent schedule) or
//!      both on the main stream, each split into the schedule's launches; record `side_done`
//!      on the side stream, the main stream waits on it (the next layer reads both
//!      directions' output);
//!    - resident: one ordinary launch of `2 * batch` blocks on the main stream (both
//!      directions; no exchange, no clear, no side stream);
//!    - cluster: the error words cleared once per pass, then per layer one cluster launch of
//!      `2 * batch` clusters on the main stream (both directions; no exchange, no side
//!      stream);
//! 4. download the output (host forward), synchronise; after a cooperative pass read the error
//!    words: a kernel that gave up waiting for a partner becomes [`CudaError::PartnerLost`].
//!
//! Nothing is allocated and nothing synchronises the host while a pass is enqueued, so a pass
//! can be captured in a CUDA graph ([`CudaBackend::capture_forward_device`]) and replayed
//! ([`CudaBackend::replay`], which checks the error words after the graph ran).

use std::sync::Arc;
use std::time::Duration;

use bilstm_core::exchange::ExchangeLayout;
use bilstm_core::layout::StackPacking;
use bilstm_core::plan::{
    self, Overrides, Plan, ProjectionTile, RecurrenceKind, RecurrenceSchedule,
};
use bilstm_core::schedule::CoopSchedule;
use bilstm_core::{
    Backend, BackendConfig, CoreError, Direction, MathMode, StackShape, StackWeights,
};
use bilstm_kernels::KernelId;
use bilstm_kernels::params::{ERROR_NONE, ERROR_PARTNER_LOST, ERROR_WORDS};
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaGraph, CudaSlice, CudaStream, DevicePtr, DevicePtrMut,
};

use crate::buffers::{Buffers, span};
use crate::device::{Device, DeviceInfo, KernelResources, Kernels};
use crate::error::CudaError;
use crate::launch::coop::CoopArgs;
use crate::launch::projection::ProjectionArgs;
use crate::launch::recurrence_cluster::ClusterArgs;
use crate::launch::recurrence_resident::ResidentArgs;
use crate::launch::{self, Span};

/// The default bound on a recurrence block's wait for a partner: far above any legitimate
/// wait (a step takes microseconds), short enough that a lost partner is reported promptly.
pub const DEFAULT_SPIN_TIMEOUT: Duration = Duration::from_secs(2);

/// The environment variable that overrides [`DEFAULT_SPIN_TIMEOUT`], in milliseconds (for
/// runs under compute-sanitizer, which slows kernels by orders of magnitude).
pub const SPIN_TIMEOUT_ENV: &str = "BILSTM_SPIN_TIMEOUT_MS";

/// Test-only fault injection: one block of one cooperative recurrence launch returns at once
/// and never publishes, so its partners must time out (see [`CudaBackend::inject_stall`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallInjection {
    /// The layer whose recurrence is hit.
    pub layer: usize,
    /// Its direction.
    pub direction: Direction,
    /// The block index in that direction's first launch; for the cluster recurrence (one launch
    /// per layer, both directions) the CTA index in the layer's launch, whatever `direction`.
    pub block: u32,
}

/// What a forward pass ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardSummary {
    /// The batch.
    pub batch: usize,
    /// The plan it ran (recurrence kind, schedule, projection tile, with reasons).
    pub plan: Plan,
    /// The recurrence kernel (`plan.recurrence.choice`).
    pub recurrence: RecurrenceKind,
    /// The cooperative schedule of a wide or tiled recurrence. For the resident recurrence it
    /// describes the one resident grid in the same terms: `batch` one-window "tiles" of two
    /// blocks (one per direction), both directions at once, one launch.
    pub schedule: CoopSchedule,
    /// The projection tile (`plan.projection.choice`).
    pub projection_tile: ProjectionTile,
    /// Blocks of the recurrence kernel the device holds at once (`plan.co_resident_blocks`).
    pub co_resident_blocks: usize,
}

impl ForwardSummary {
    fn of(plan: Plan) -> Self {
        let schedule = match plan.schedule.choice {
            RecurrenceSchedule::Cooperative(s) => s,
            RecurrenceSchedule::Resident { grid_blocks } => CoopSchedule {
                kind: RecurrenceKind::Resident,
                tile_height: 1,
                blocks_per_tile: 2,
                tiles: grid_blocks / 2,
                concurrent: true,
                tiles_per_launch: grid_blocks / 2,
            },
            RecurrenceSchedule::Cluster(c) => CoopSchedule {
                kind: RecurrenceKind::Cluster,
                tile_height: 1,
                blocks_per_tile: 2 * c.cluster_size,
                tiles: c.clusters() / 2,
                concurrent: true,
                tiles_per_launch: c.clusters() / 2,
            },
        };
        ForwardSummary {
            batch: plan.batch,
            plan,
            recurrence: plan.recurrence.choice,
            schedule,
            projection_tile: plan.projection.choice,
            co_resident_blocks: plan.co_resident_blocks,
        }
    }
}

/// A forward pass captured in a CUDA graph ([`CudaBackend::capture_forward_device`]), with
/// the device buffers it reads and writes (the graph holds their addresses, so it owns them).
/// Replay it with [`CudaBackend::replay`] on the backend that captured it, while that backend
/// keeps the preparation it was captured under.
pub struct ForwardGraph {
    // Field order is drop order: the graph before the buffers it points at.
    graph: CudaGraph,
    summary: ForwardSummary,
    preparation: u64,
    input: CudaSlice<f32>,
    output: CudaSlice<f32>,
}

impl std::fmt::Debug for ForwardGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // cudarc's graph handle has no Debug.
        f.debug_struct("ForwardGraph")
            .field("summary", &self.summary)
            .field("preparation", &self.preparation)
            .field("input", &self.input)
            .field("output", &self.output)
            .finish_non_exhaustive()
    }
}

impl ForwardGraph {
    /// What the captured pass runs.
    pub fn summary(&self) -> &ForwardSummary {
        &self.summary
    }

    /// The input buffer the graph reads (its first `batch * frames * features` values).
    pub fn input(&self) -> &CudaSlice<f32> {
        &self.input
    }

    /// The input buffer, to write the next replay's input into (on the backend's stream, or
    /// synchronised before the replay).
    pub fn input_mut(&mut self) -> &mut CudaSlice<f32> {
        &mut self.input
    }

    /// The output buffer the graph writes (its first `batch * frames * 256` values).
    pub fn output(&self) -> &CudaSlice<f32> {
        &self.output
    }

    /// Gives the buffers back, dropping the graph.
    pub fn into_buffers(self) -> (CudaSlice<f32>, CudaSlice<f32>) {
        let ForwardGraph { input, output, .. } = self;
        (input, output)
    }
}

#[derive(Debug)]
struct Prepared {
    config: BackendConfig,
    packing: StackPacking,
    buffers: Buffers,
    proj_done: CudaEvent,
    side_done: CudaEvent,
    /// Distinguishes preparations (a graph captured under one must not replay under another).
    id: u64,
}

/// The CUDA backend: NVRTC-compiled kernels on one GPU (see the module docs).
///
/// Each forward pass runs the plan core selects for its batch on this device with the compiled
/// kernels' real resources: the resident recurrence where it fits an SM, else the wide or
/// tiled cooperative one; FP32 projections with 64x64 or 128x128 tiles by row count, or in
/// `MathMode::Tf32` the TF32 tensor-core tile where core's rule allows it.
/// [`CudaBackend::set_overrides`] forces a recurrence kind or projection tile. In FP32 the output
/// bits do not depend on the recurrence kind, the batch a window runs in, the tile height, the
/// schedule or the FP32 projection tile.
///
/// ```no_run
/// use bilstm_core::{Backend, BackendConfig};
/// use bilstm_core::owned::{OwnedStack, random_input};
/// let stack = OwnedStack::builtin();
/// let mut gpu = bilstm_cuda::CudaBackend::new(0)?;
/// let config = BackendConfig::pyannote(32);
/// gpu.prepare(&stack.weights()?, &config)?;
/// println!("{}", gpu.plan(32)?);
/// let input = random_input(&config.shape, 32, 1);
/// let mut output = vec![0.0; config.shape.output_len(32)?];
/// gpu.forward(&input, 32, &mut output)?;
/// # Ok::<(), bilstm_cuda::CudaError>(())
/// ```
#[derive(Debug)]
pub struct CudaBackend {
    // Field order is drop order: buffers and events before the kernels, both before the
    // device (context and streams).
    prepared: Option<Prepared>,
    /// Per-phase timing events (crate::phases), inert unless turned on.
    pub(crate) phases: crate::phases::PhaseTimer,
    kernels: Option<Kernels>,
    device: Device,
    spin_timeout: Duration,
    overrides: Overrides,
    stall: Option<StallInjection>,
    last: Option<ForwardSummary>,
    preparations: u64,
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // Buffers are freed on the main stream; make sure nothing on either stream still uses
        // them (a forward that failed half-way may have left work queued).
        let _ = self.device.side.synchronize();
        let _ = self.device.main.synchronize();
    }
}

fn spin_timeout_from_env() -> Duration {
    std::env::var(SPIN_TIMEOUT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map_or(DEFAULT_SPIN_TIMEOUT, Duration::from_millis)
}

impl CudaBackend {
    /// Opens GPU `ordinal` (0 for the first). The spin timeout is [`DEFAULT_SPIN_TIMEOUT`]
    /// unless `BILSTM_SPIN_TIMEOUT_MS` says otherwise. Kernels are compiled by the first
    /// [`Backend::prepare`] (or [`CudaBackend::plan_for`]).
    ///
    /// # Errors
    /// [`CudaError::Unavailable`] without a CUDA driver or GPU (or for an ordinal past the
    /// last GPU); [`CudaError::Unsupported`] for a GPU older than compute capability 7.0;
    /// [`CudaError::Driver`].
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        let device = Device::open(ordinal)?;
        Ok(CudaBackend {
            prepared: None,
            phases: crate::phases::PhaseTimer::default(),
            kernels: None,
            device,
            spin_timeout: spin_timeout_from_env(),
            overrides: Overrides::default(),
            stall: None,
            last: None,
            preparations: 0,
        })
    }

    /// One line about the GPU: name, ordinal, compute capability, SMs, memory, cooperative
    /// launch support.
    pub fn describe(&self) -> String {
        let i = &self.device.info;
        let f = &i.facts;
        format!(
            "{} (device {}, compute capability {}.{}, {} SMs, {} MiB{})",
            i.name,
            i.ordinal,
            f.compute_capability.0,
            f.compute_capability.1,
            f.sm_count,
            i.total_memory_bytes >> 20,
            if f.cooperative_launch {
                ""
            } else {
                ", no cooperative launch"
            }
        )
    }

    /// The GPU's name, facts and memory.
    pub fn device(&self) -> &DeviceInfo {
        &self.device.info
    }

    /// The CUDA context (to allocate buffers for [`CudaBackend::forward_device`]).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.device.ctx
    }

    /// The stream every forward pass is ordered on: work enqueued on it before
    /// [`CudaBackend::forward_device`] is finished before the pass reads its input.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.device.main
    }

    /// The compiled kernels' real resources (registers, shared and local memory, occupancy),
    /// once [`Backend::prepare`] has compiled them.
    pub fn kernel_resources(&self) -> Option<&[KernelResources]> {
        self.kernels.as_ref().map(|k| k.resources.as_slice())
    }

    /// Core's [`bilstm_core::plan::KernelResources`] with the compiled kernels' real usage
    /// (threads, registers, static and dynamic shared bytes of every kernel) in place of the
    /// design estimates: what every plan of this backend is selected with.
    pub fn plan_resources(&self) -> Option<plan::KernelResources> {
        self.kernels.as_ref().and_then(real_resources)
    }

    /// The driver's resident blocks per SM for `kernel` launched with `threads` threads and
    /// `dynamic_shared_bytes` (`cuOccupancyMaxActiveBlocksPerMultiprocessor`), and core's
    /// occupancy calculator's figure for the same usage: `(driver, core)`. For cross-checks
    /// beyond the launch shapes the backend uses (those are checked when the kernels load).
    ///
    /// # Errors
    /// [`CoreError::NotPrepared`] before the kernels are compiled; [`CudaError::Driver`].
    pub fn occupancy(
        &self,
        kernel: KernelId,
        threads: u32,
        dynamic_shared_bytes: u32,
    ) -> Result<(u32, u32), CudaError> {
        let k = self.kernels.as_ref().ok_or(CoreError::NotPrepared)?;
        k.occupancy(&self.device, kernel, threads, dynamic_shared_bytes)
    }

    /// The spin timeout passed to the cooperative recurrences.
    pub fn spin_timeout(&self) -> Duration {
        self.spin_timeout
    }

    /// Sets the spin timeout (a recurrence block waiting longer for a partner gives up and the
    /// forward returns [`CudaError::PartnerLost`]).
    pub fn set_spin_timeout(&mut self, timeout: Duration) {
        self.spin_timeout = timeout;
    }

    /// The choices currently forced past the plan rules.
    pub fn overrides(&self) -> Overrides {
        self.overrides
    }

    /// Forces a recurrence kernel and/or a projection tile for every later forward pass (for
    /// tests and benchmarks, or for users who know better); `Overrides::default()` returns to
    /// the rules. Once prepared, the forced choices are checked at once against the device and
    /// the prepared math mode (at the prepared maximum batch); before that, by the first
    /// [`Backend::prepare`] or forward pass.
    ///
    /// # Errors
    /// [`CoreError::ForcedChoice`] (inside [`CudaError::Core`]) when a forced kernel cannot run
    /// here: a resident recurrence whose shared memory does not fit an SM, a cooperative one
    /// without cooperative launch or room for a tile, a TF32 projection in FP32 mode or before
    /// compute capability 8.0. The overrides are then left as they were.
    pub fn set_overrides(&mut self, overrides: Overrides) -> Result<(), CudaError> {
        if let Some(st) = &self.prepared {
            self.select(
                &st.config.shape,
                st.config.max_batch,
                st.config.math,
                &overrides,
            )?;
        }
        self.overrides = overrides;
        Ok(())
    }

    /// Forces a projection tile (`None`: core's rule), keeping any forced recurrence: a thin
    /// wrapper over [`CudaBackend::set_overrides`] that checks nothing now (a forced tile that
    /// cannot run makes the next forward pass fail with [`CoreError::ForcedChoice`]). Both FP32
    /// tiles give the same bits; [`ProjectionTile::Tf32`] runs the TF32 tensor-core projection
    /// (`MathMode::Tf32` only); [`ProjectionTile::Tf32x3`] the FP32-accurate 3xTF32 one
    /// (compute capability 8.0 or later, either mode; its own bits).
    pub fn set_projection_tile(&mut self, tile: Option<ProjectionTile>) {
        self.overrides.projection = tile;
    }

    /// The plan a forward pass of `batch` windows runs now (prepared shape and math mode, the
    /// current overrides).
    ///
    /// # Errors
    /// [`CoreError::NotPrepared`]; the planning errors of `bilstm_core::plan::select_with`
    /// ([`CoreError::NoPlan`], [`CoreError::ForcedChoice`], [`CoreError::Overflow`]).
    pub fn plan(&self, batch: usize) -> Result<Plan, CudaError> {
        let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
        self.select(&st.config.shape, batch, st.config.math, &self.overrides)
    }

    /// The plan `batch` windows of `shape` in `math` mode would run on this GPU with the
    /// current overrides, compiling the kernels first if no preparation has (no weights
    /// needed: for `bilstm plan` on the local device).
    ///
    /// # Errors
    /// As [`CudaBackend::plan`] (without `NotPrepared`), plus the compile errors of
    /// [`Backend::prepare`].
    pub fn plan_for(
        &mut self,
        shape: &StackShape,
        batch: usize,
        math: MathMode,
    ) -> Result<Plan, CudaError> {
        self.load_kernels()?;
        self.select(shape, batch, math, &self.overrides)
    }

    fn select(
        &self,
        shape: &StackShape,
        batch: usize,
        math: MathMode,
        overrides: &Overrides,
    ) -> Result<Plan, CudaError> {
        let k = self.kernels.as_ref().ok_or(CoreError::NotPrepared)?;
        let resources = real_resources(k).ok_or_else(|| CudaError::Internal {
            what: "kernel resources missing".into(),
        })?;
        Ok(plan::select_with(
            &self.device.info.facts,
            &resources,
            shape,
            batch,
            math,
            overrides,
        )?)
    }

    fn load_kernels(&mut self) -> Result<(), CudaError> {
        if self.kernels.is_none() {
            self.kernels = Some(Kernels::load(&self.device)?);
        }
        Ok(())
    }

    /// Test-only fault injection: makes one block of one cooperative recurrence launch never
    /// publish (so forward passes of a wide or tiled plan end with [`CudaError::PartnerLost`]
    /// after the spin timeout); `None` turns it off. The resident recurrence has no partners
    /// and ignores it.
    pub fn inject_stall(&mut self, stall: Option<StallInjection>) {
        self.stall = stall;
    }

    /// What the last successful (or timed-out) forward pass ran.
    pub fn last_forward(&self) -> Option<ForwardSummary> {
        self.last
    }

    /// Test-only: fills every workspace (projections, layer outputs, exchange, error words)
    /// with garbage derived from `seed`, the exchange with words whose flags are valid flags
    /// of the coming pass. A correct forward pass must give the same bits afterwards.
    ///
    /// # Errors
    /// [`CoreError::NotPrepared`]; [`CudaError::Driver`].
    pub fn scribble_workspaces(&mut self, seed: u64) -> Result<(), CudaError> {
        let stream = self.device.main.clone();
        let st = self.prepared.as_mut().ok_or(CoreError::NotPrepared)?;
        let mut rng = bilstm_core::rng::SplitMix64::new(seed);
        let max_flag = (st.config.shape.layers * st.config.shape.frames).max(1) as u64;
        let garbage = |rng: &mut bilstm_core::rng::SplitMix64, n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| f32::from_bits(rng.next_u64() as u32))
                .collect()
        };
        let b = &mut st.buffers;
        let v = garbage(&mut rng, b.proj.len());
        stream
            .memcpy_htod(&v, &mut b.proj)
            .map_err(CudaError::driver("scribbling"))?;
        for out in &mut b.layer_out {
            let v = garbage(&mut rng, out.len());
            stream
                .memcpy_htod(&v, out)
                .map_err(CudaError::driver("scribbling"))?;
        }
        let words: Vec<u64> = (0..b.exchange.len())
            .map(|_| ((1 + rng.next_u64() % max_flag) << 32) | (rng.next_u64() & 0xffff_ffff))
            .collect();
        stream
            .memcpy_htod(&words, &mut b.exchange)
            .map_err(CudaError::driver("scribbling"))?;
        let errors = [ERROR_PARTNER_LOST, 7, 1, 99];
        stream
            .memcpy_htod(&errors[..], &mut b.error)
            .map_err(CudaError::driver("scribbling"))?;
        stream
            .synchronize()
            .map_err(CudaError::driver("scribbling"))?;
        Ok(())
    }

    /// Checks a device-buffer pass: batch within the preparation, buffers long enough and in
    /// this context. Returns the plan for `batch` and the output length.
    fn check_device_io(
        &self,
        input: &CudaSlice<f32>,
        batch: usize,
        output: &CudaSlice<f32>,
    ) -> Result<(Plan, usize), CudaError> {
        let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
        let shape = st.config.shape;
        if batch > st.config.max_batch {
            return Err(CoreError::BatchTooLarge {
                batch,
                max: st.config.max_batch,
            }
            .into());
        }
        let in_len = shape.input_len(batch)?;
        let out_len = shape.output_len(batch)?;
        for (what, ctx, have, need) in [
            ("input", input.context(), input.len(), in_len),
            ("output", output.context(), output.len(), out_len),
        ] {
            if **ctx != *self.device.ctx {
                return Err(CudaError::DeviceBuffer {
                    what,
                    reason: "it belongs to another CUDA context".into(),
                });
            }
            if have < need {
                return Err(CudaError::DeviceBuffer {
                    what,
                    reason: format!("{have} values, the batch needs {need}"),
                });
            }
        }
        Ok((self.plan(batch)?, out_len))
    }

    /// Runs the stack on `batch` windows already on the GPU: reads the first
    /// `batch * frames * features` values of `input`, writes the first `batch * frames * 256`
    /// of `output`. Ordered after earlier work on [`CudaBackend::stream`]; returns when done.
    ///
    /// # Errors
    /// [`CoreError::NotPrepared`], [`CoreError::BatchTooLarge`], the planning errors of
    /// [`CudaBackend::plan`]; [`CudaError::DeviceBuffer`] for a buffer that is too short or
    /// belongs to another context; [`CudaError::PartnerLost`], [`CudaError::Launch`],
    /// [`CudaError::Driver`].
    pub fn forward_device(
        &mut self,
        input: &CudaSlice<f32>,
        batch: usize,
        output: &mut CudaSlice<f32>,
    ) -> Result<(), CudaError> {
        let (plan, out_len) = self.check_device_io(input, batch, output)?;
        if batch == 0 {
            return Ok(());
        }
        let main = self.device.main.clone();
        // The guards keep cudarc's bookkeeping for buffers allocated with event tracking (in
        // another context object of this device) until the pass is enqueued.
        let (in_addr, in_guard) = input.device_ptr(&main);
        let (out_addr, out_guard) = output.device_ptr_mut(&main);
        let enqueued = self.enqueue(
            &plan,
            Span {
                addr: in_addr,
                len: input.len(),
            },
            Some(Span {
                addr: out_addr,
                len: out_len,
            }),
        );
        drop(in_guard);
        drop(out_guard);
        enqueued.inspect_err(|_| self.drain())?;
        self.finish(ForwardSummary::of(plan))
    }

    /// Captures one [`CudaBackend::forward_device`] pass of `batch` windows into a CUDA graph
    /// (stream capture of the main stream, which forks to the side stream and joins back
    /// through events): the plan, launches and addresses are fixed at capture time, and the
    /// graph owns `input` and `output`. Nothing runs until [`CudaBackend::replay`].
    ///
    /// # Errors
    /// As [`CudaBackend::forward_device`] (the buffers are dropped with the error), plus
    /// [`CoreError::Unsupported`] for batch 0 (an empty pass enqueues nothing) and
    /// [`CudaError::Driver`] when the driver refuses the capture or the instantiation.
    pub fn capture_forward_device(
        &mut self,
        input: CudaSlice<f32>,
        batch: usize,
        output: CudaSlice<f32>,
    ) -> Result<ForwardGraph, CudaError> {
        let (plan, out_len) = self.check_device_io(&input, batch, &output)?;
        if batch == 0 {
            return Err(CoreError::Unsupported {
                what: "graph capture of batch",
                value: 0,
                reason: "an empty batch enqueues nothing",
            }
            .into());
        }
        let preparation = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?.id;
        let main = self.device.main.clone();
        // Earlier work on the stream stays outside the graph.
        main.synchronize()
            .map_err(CudaError::driver("finishing work before a capture"))?;
        let in_span = span(&input, &main);
        let out_span = Span {
            addr: span(&output, &main).addr,
            len: out_len,
        };
        main.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(CudaError::driver("beginning a stream capture"))?;
        let enqueued = self.enqueue(&plan, in_span, Some(out_span));
        // The capture always ends, so the stream leaves capture mode whatever happened.
        let ended = main.end_capture(CUgraphInstantiate_flags(0));
        enqueued.inspect_err(|_| self.drain())?;
        let graph = ended
            .map_err(CudaError::driver("ending a stream capture"))?
            .ok_or_else(|| CudaError::Internal {
                what: "the stream capture produced no graph".into(),
            })?;
        Ok(ForwardGraph {
            graph,
            summary: ForwardSummary::of(plan),
            preparation,
            input,
            output,
        })
    }

    /// Runs a captured pass once and waits for it; after the graph ran, the error words are
    /// checked as after any forward pass.
    ///
    /// # Errors
    /// [`CudaError::Internal`] when the graph was captured by another backend or preparation;
    /// [`CudaError::Driver`] when the launch fails; [`CudaError::PartnerLost`].
    pub fn replay(&mut self, graph: &ForwardGraph) -> Result<(), CudaError> {
        let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
        if st.id != graph.preparation {
            return Err(CudaError::Internal {
                what: "the graph was captured under another preparation (its buffers are gone)"
                    .into(),
            });
        }
        graph
            .graph
            .launch()
            .map_err(CudaError::driver("launching a captured forward pass"))
            .inspect_err(|_| self.drain())?;
        self.finish(graph.summary)
    }

    /// Enqueues a whole pass of `plan`: (clear,) then per layer the projection and the
    /// recurrence. `final_out` receives the last layer's output (`None`: the backend's own
    /// layer buffer). Enqueues only: no allocation, no host synchronisation.
    fn enqueue(&self, plan: &Plan, input: Span, final_out: Option<Span>) -> Result<(), CudaError> {
        let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
        let k = self.kernels.as_ref().ok_or(CoreError::NotPrepared)?;
        let (main, side) = (&self.device.main, &self.device.side);
        let shape = st.config.shape;
        let b = &st.buffers;
        let batch = plan.batch;
        let exchange = b.exchange_span(main);
        let error = span(&b.error, main);

        // The cooperative kinds' exchange layout, zeroed once per pass.
        let coop = match plan.schedule.choice {
            RecurrenceSchedule::Cooperative(s) => {
                let layout = match s.kind {
                    RecurrenceKind::Wide => ExchangeLayout::wide(s.tile_height, s.tiles)?,
                    RecurrenceKind::Tiled => ExchangeLayout::tiled(s.tiles)?,
                    RecurrenceKind::Resident | RecurrenceKind::Cluster => {
                        return Err(CudaError::Internal {
                            what: format!("a cooperative schedule of the {} kind", s.kind),
                        });
                    }
                };
                if layout.words() > exchange.len {
                    return Err(CudaError::Internal {
                        what: format!(
                            "exchange of {} words needed, {} allocated",
                            layout.words(),
                            exchange.len
                        ),
                    });
                }
                launch::clear::launch(
                    k.get(KernelId::Clear)?,
                    main,
                    exchange,
                    layout.words(),
                    error,
                    ERROR_WORDS,
                )?;
                Some((s, layout))
            }
            RecurrenceSchedule::Resident { .. } => None,
            RecurrenceSchedule::Cluster(_) => {
                // No exchange: only the error words a lost partner would report in.
                launch::clear::launch(
                    k.get(KernelId::Clear)?,
                    main,
                    exchange,
                    0,
                    error,
                    ERROR_WORDS,
                )?;
                None
            }
        };

        let rows = bilstm_core::error::checked_mul(batch, shape.frames, "forward rows")?;
        let tile = plan.projection.choice;
        let proj_fn = k.get(match tile {
            ProjectionTile::Small64 => KernelId::ProjectionSmall,
            ProjectionTile::Large128 => KernelId::ProjectionLarge,
            ProjectionTile::Tf32 => KernelId::ProjectionTf32,
            ProjectionTile::Tf32x3 => KernelId::ProjectionTf32x3,
        })?;
        let weights = span(&b.weights, main);
        let proj = span(&b.proj, main);
        let layer_out = [span(&b.layer_out[0], main), span(&b.layer_out[1], main)];
        let missing = |what: &str| CudaError::Internal {
            what: format!("packed offsets of {what} missing"),
        };
        let spin_timeout_ns = u64::try_from(self.spin_timeout.as_nanos()).unwrap_or(u64::MAX);

        for layer in 0..shape.layers {
            let width = shape.layer_input_width(layer);
            let x = if layer == 0 {
                input
            } else {
                layer_out[(layer - 1) % 2]
            };
            let out = match final_out {
                Some(f) if layer + 1 == shape.layers => f,
                _ => layer_out[layer % 2],
            };
            let offsets = [
                st.packing
                    .offsets(layer, Direction::Forward)
                    .ok_or_else(|| missing("the forward direction"))?,
                st.packing
                    .offsets(layer, Direction::Reverse)
                    .ok_or_else(|| missing("the reverse direction"))?,
            ];
            let piece = |at: usize| {
                weights
                    .offset(at, 4)
                    .ok_or_else(|| missing("a tensor inside the buffer"))
            };
            // The TF32 kernel reads the gate-major TF32-rounded weights, the FP32 SIMT and 3xTF32
            // ones the K-major FP32 weights.
            let weights_of = |d: usize| {
                piece(if tile.is_tf32() {
                    offsets[d].input_tf32
                } else {
                    offsets[d].input_kmajor
                })
            };
            let args = ProjectionArgs {
                x,
                weights: [weights_of(0)?, weights_of(1)?],
                out: proj,
                direction_stride: b.proj_direction_stride,
                rows,
                in_width: width,
            };
            self.phases.layer_start(layer, main)?;
            let cc = self.device.info.facts.compute_capability;
            if tile.is_tf32() {
                launch::projection_tf32::launch(proj_fn, main, cc, &args)?;
            } else if tile == ProjectionTile::Tf32x3 {
                launch::projection_tf32x3::launch(proj_fn, main, cc, &args)?;
            } else {
                launch::projection::launch(proj_fn, main, tile, &args)?;
            }
            self.phases.projected(layer, main)?;
            let proj_of = |d: Direction| {
                proj.offset(d.index() * b.proj_direction_stride, 4)
                    .ok_or_else(|| missing("the projection's reverse half"))
            };

            if let Some(cluster) = plan.schedule.choice.cluster() {
                let id = cluster_kernel(cluster.cluster_size, cluster.windows_per_cluster)?;
                let stall_cta = self.stall.filter(|s| s.layer == layer).map(|s| s.block);
                launch::recurrence_cluster::launch(
                    id.kernel(),
                    k.get(id)?,
                    main,
                    &ClusterArgs {
                        proj: [proj_of(Direction::Forward)?, proj_of(Direction::Reverse)?],
                        recurrent: [piece(offsets[0].recurrent)?, piece(offsets[1].recurrent)?],
                        bias: [piece(offsets[0].bias)?, piece(offsets[1].bias)?],
                        out,
                        error,
                        batch,
                        frames: shape.frames,
                        layer,
                        spin_timeout_ns,
                        max_active_clusters: k.max_active_clusters_of(id),
                        stall_cta,
                    },
                )?;
                continue;
            }
            let Some((schedule, layout)) = coop else {
                launch::recurrence_resident::launch(
                    k.get(KernelId::RecurrenceResident)?,
                    main,
                    &ResidentArgs {
                        proj: [proj_of(Direction::Forward)?, proj_of(Direction::Reverse)?],
                        recurrent: [piece(offsets[0].recurrent)?, piece(offsets[1].recurrent)?],
                        bias: [piece(offsets[0].bias)?, piece(offsets[1].bias)?],
                        out,
                        batch,
                        frames: shape.frames,
                        blocks_per_sm: plan.recurrence_occupancy.blocks_per_sm,
                    },
                )?;
                continue;
            };

            self.proj_done_recorded(st, main, side)?;
            for direction in Direction::ALL {
                let o = offsets[direction.index()];
                let stream = if schedule.concurrent && direction == Direction::Reverse {
                    side
                } else {
                    main
                };
                let proj_dir = proj_of(direction)?;
                for l in 0..schedule.launches_per_direction() {
                    let stall_block = self
                        .stall
                        .filter(|s| s.layer == layer && s.direction == direction && l == 0)
                        .map(|s| s.block);
                    let args = CoopArgs {
                        proj: proj_dir,
                        recurrent: piece(o.recurrent)?,
                        bias: piece(o.bias)?,
                        out,
                        exchange,
                        error,
                        layout,
                        batch,
                        frames: shape.frames,
                        layer,
                        direction,
                        tiles: schedule.launch_tiles(l),
                        co_resident_blocks: plan.co_resident_blocks,
                        spin_timeout_ns,
                        stall_block,
                    };
                    if schedule.kind == RecurrenceKind::Tiled {
                        launch::recurrence_tiled::launch(
                            k.get(KernelId::RecurrenceTiled)?,
                            stream,
                            &args,
                        )?;
                    } else {
                        launch::recurrence_wide::launch(
                            k.get(KernelId::RecurrenceWide)?,
                            stream,
                            &args,
                        )?;
                    }
                }
            }
            st.side_done
                .record(side)
                .map_err(CudaError::driver("recording the side stream's event"))?;
            main.wait(&st.side_done)
                .map_err(CudaError::driver("joining the side stream"))?;
        }
        self.phases.pass_end(shape.layers, main)?;
        Ok(())
    }

    /// Waits for whatever a failed pass left queued on either stream, so the next pass (whose
    /// clear rewrites the exchange) never overlaps it. Errors here are the failed pass's own.
    fn drain(&self) {
        let _ = self.device.side.synchronize();
        let _ = self.device.main.synchronize();
    }

    fn proj_done_recorded(
        &self,
        st: &Prepared,
        main: &CudaStream,
        side: &CudaStream,
    ) -> Result<(), CudaError> {
        st.proj_done
            .record(main)
            .map_err(CudaError::driver("recording the projection's event"))?;
        side.wait(&st.proj_done)
            .map_err(CudaError::driver("making the side stream wait"))
    }

    /// Waits for the pass (the main stream has joined the side stream) and, after a
    /// cooperative pass, reads the error words and turns a kernel's report into an error.
    fn finish(&mut self, summary: ForwardSummary) -> Result<(), CudaError> {
        self.last = Some(summary);
        let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
        let kernel = match summary.recurrence {
            RecurrenceKind::Resident => {
                return self
                    .device
                    .main
                    .synchronize()
                    .map_err(CudaError::driver("finishing a forward pass"));
            }
            RecurrenceKind::Tiled => launch::recurrence_tiled::KERNEL,
            RecurrenceKind::Wide => launch::recurrence_wide::KERNEL,
            RecurrenceKind::Cluster => match summary.plan.schedule.choice.cluster() {
                Some(c) => {
                    cluster_kernel(c.cluster_size, c.windows_per_cluster)?
                        .kernel()
                        .entry
                }
                None => "bilstm_recurrence_cluster",
            },
        };
        let mut report = [0i32; ERROR_WORDS];
        self.device
            .main
            .memcpy_dtoh(&st.buffers.error, &mut report[..])
            .map_err(CudaError::driver("reading the kernels' error words"))?;
        match report[0] {
            ERROR_NONE => Ok(()),
            ERROR_PARTNER_LOST => Err(CudaError::PartnerLost {
                kernel,
                layer: usize::try_from(report[1]).unwrap_or(usize::MAX),
                direction: if report[2] == 0 {
                    Direction::Forward
                } else {
                    Direction::Reverse
                },
                step: usize::try_from(report[3]).unwrap_or(usize::MAX),
            }),
            code => Err(CudaError::KernelReport { kernel, code }),
        }
    }
}

/// Core's kernel resources with every compiled kernel's real usage.
fn real_resources(k: &Kernels) -> Option<plan::KernelResources> {
    let usage = |id| k.resources_of(id).map(|r| r.usage());
    Some(plan::KernelResources {
        wide: usage(KernelId::RecurrenceWide)?,
        tiled: usage(KernelId::RecurrenceTiled)?,
        resident: usage(KernelId::RecurrenceResident)?,
        projection_small: usage(KernelId::ProjectionSmall)?,
        projection_large: usage(KernelId::ProjectionLarge)?,
        projection_tf32: usage(KernelId::ProjectionTf32)?,
        projection_tf32x3: usage(KernelId::ProjectionTf32x3)?,
        cluster2: usage(KernelId::RecurrenceCluster2)?,
        cluster4: usage(KernelId::RecurrenceCluster4)?,
        // The two-window 2-CTA kernel shares the 2-CTA capacity: the smaller of the two figures.
        max_active_clusters: [
            Some(
                k.max_active_clusters_of(KernelId::RecurrenceCluster2)
                    .min(k.max_active_clusters_of(KernelId::RecurrenceCluster2W2)),
            ),
            Some(k.max_active_clusters_of(KernelId::RecurrenceCluster4)),
        ],
    })
}

/// The cluster kernel of `size` CTAs per cluster running `windows` windows each.
///
/// # Errors
/// [`CudaError::Internal`] for a shape no kernel is built for (plans only pick those of
/// `bilstm_core::geometry::CLUSTER_SIZES` and `CLUSTER_MULTI_WINDOW_SIZE`).
fn cluster_kernel(size: usize, windows: usize) -> Result<KernelId, CudaError> {
    match (size, windows) {
        (2, 1) => Ok(KernelId::RecurrenceCluster2),
        (4, 1) => Ok(KernelId::RecurrenceCluster4),
        (2, 2) => Ok(KernelId::RecurrenceCluster2W2),
        _ => Err(CudaError::Internal {
            what: format!("no cluster kernel of {size} CTAs and {windows} windows"),
        }),
    }
}

impl Backend for CudaBackend {
    type Error = CudaError;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn prepare(
        &mut self,
        weights: &StackWeights<'_>,
        config: &BackendConfig,
    ) -> Result<(), CudaError> {
        config.shape.validate()?;
        let packing = StackPacking::new(&config.shape)?;
        let mut packed = vec![0.0f32; packing.len()];
        packing.pack_into(weights, &mut packed)?;
        // Sizes are checked before the device is touched.
        config.shape.input_len(config.max_batch)?;
        config.shape.output_len(config.max_batch)?;
        self.load_kernels()?;
        // The largest batch must have a plan (else every forward at that size would fail).
        self.select(
            &config.shape,
            config.max_batch,
            config.math,
            &self.overrides,
        )?;
        // Free the previous preparation first (its buffers may be large).
        self.prepared = None;
        self.device
            .main
            .synchronize()
            .map_err(CudaError::driver("finishing earlier work"))?;
        let buffers =
            Buffers::allocate(&self.device.main, &config.shape, config.max_batch, &packed)?;
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DISABLE_TIMING);
        let proj_done = self
            .device
            .ctx
            .new_event(flags)
            .map_err(CudaError::driver("creating an event"))?;
        let side_done = self
            .device
            .ctx
            .new_event(flags)
            .map_err(CudaError::driver("creating an event"))?;
        self.preparations = self.preparations.wrapping_add(1);
        self.prepared = Some(Prepared {
            config: *config,
            packing,
            buffers,
            proj_done,
            side_done,
            id: self.preparations,
        });
        Ok(())
    }

    fn forward(
        &mut self,
        input: &[f32],
        batch: usize,
        output: &mut [f32],
    ) -> Result<(), CudaError> {
        let st = self.prepared.as_mut().ok_or(CoreError::NotPrepared)?;
        let shape = st.config.shape;
        if batch > st.config.max_batch {
            return Err(CoreError::BatchTooLarge {
                batch,
                max: st.config.max_batch,
            }
            .into());
        }
        shape.check_io(batch, input.len(), output.len())?;
        if batch == 0 {
            return Ok(());
        }
        let plan = self.plan(batch)?;
        let main = self.device.main.clone();
        let st = self.prepared.as_mut().ok_or(CoreError::NotPrepared)?;
        {
            let mut dst = st
                .buffers
                .input
                .try_slice_mut(0..input.len())
                .ok_or_else(|| CudaError::Internal {
                    what: "input buffer shorter than the batch".into(),
                })?;
            main.memcpy_htod(input, &mut dst)
                .map_err(CudaError::driver("uploading the input"))?;
        }
        let input_span = span(&st.buffers.input, &main);
        self.enqueue(&plan, input_span, None)
            .inspect_err(|_| self.drain())?;
        let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
        let last = &st.buffers.layer_out[(shape.layers - 1) % 2];
        let src = last
            .try_slice(0..output.len())
            .ok_or_else(|| CudaError::Internal {
                what: "output buffer shorter than the batch".into(),
            })?;
        main.memcpy_dtoh(&src, output)
            .map_err(CudaError::driver("downloading the output"))
            .inspect_err(|_| self.drain())?;
        self.finish(ForwardSummary::of(plan))
    }

    fn config(&self) -> Option<&BackendConfig> {
        self.prepared.as_ref().map(|p| &p.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bilstm_core::device::table;

    #[test]
    fn spin_timeout_env_parsing_falls_back_to_the_default() {
        // Only the default is observable without touching the process environment.
        assert!(DEFAULT_SPIN_TIMEOUT >= Duration::from_millis(100));
    }

    #[test]
    fn summaries_describe_resident_grids_as_one_window_tiles() {
        let h200 = table::find("h200").unwrap().facts;
        let shape = StackShape::pyannote();
        let r = plan::KernelResources::nominal();
        // An H200 without cluster launch, so that the resident kernel runs.
        let h200 = bilstm_core::device::DeviceFacts {
            max_cluster_size: 0,
            ..h200
        };
        let p = plan::select(&h200, &r, &shape, 33, MathMode::Fp32).unwrap();
        assert_eq!(p.recurrence.choice, RecurrenceKind::Resident);
        let s = ForwardSummary::of(p);
        assert_eq!(
            (
                s.schedule.tiles,
                s.schedule.blocks_per_tile,
                s.schedule.tile_height
            ),
            (33, 2, 1)
        );
        assert_eq!(s.schedule.launches_per_direction(), 1);
        let forced = Overrides {
            recurrence: Some(RecurrenceKind::Tiled),
            projection: None,
            cluster_size: None,
            cluster_windows: None,
        };
        let p = plan::select_with(&h200, &r, &shape, 33, MathMode::Fp32, &forced).unwrap();
        let s = ForwardSummary::of(p);
        assert_eq!(s.recurrence, RecurrenceKind::Tiled);
        assert_eq!(Some(&s.schedule), p.coop_schedule());
    }
}
