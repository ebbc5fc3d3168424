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
//! A host forward of more than [`CudaBackend::host_chunk`] windows runs as several such passes
//! whose copies overlap each other's compute, and a smaller one may have its last layer write
//! into mapped host memory instead of downloading: see [`crate::host`].
//!
//! Nothing is allocated and nothing synchronises the host while a pass is enqueued, so a pass
//! can be captured in a CUDA graph ([`CudaBackend::capture_forward_device`]) and replayed
//! ([`CudaBackend::replay`], which checks the error words after the graph ran).

use std::sync::Arc;
use std::time::Duration;

use bilstm_core::layout::StackPacking;
use bilstm_core::plan::{self, Overrides, Plan, ProjectionTile};
use bilstm_core::{Backend, BackendConfig, CoreError, MathMode, StackShape, StackWeights};
use bilstm_kernels::KernelId;
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

use crate::buffers::Buffers;
use crate::device::{CompiledKernel, Device, DeviceInfo, Kernels};
use crate::error::CudaError;
use crate::hooks::StallInjection;
use crate::launch::Span;
use crate::summary::ForwardSummary;

/// The default bound on a recurrence block's wait for a partner: far above any legitimate
/// wait (a step takes microseconds), short enough that a lost partner is reported promptly.
pub const DEFAULT_SPIN_TIMEOUT: Duration = Duration::from_secs(2);

/// The environment variable that overrides [`DEFAULT_SPIN_TIMEOUT`], in milliseconds (for
/// runs under compute-sanitizer, which slows kernels by orders of magnitude).
pub const SPIN_TIMEOUT_ENV: &str = "BILSTM_SPIN_TIMEOUT_MS";

#[derive(Debug)]
pub(crate) struct Prepared {
    /// Unsplit host passes captured in CUDA graphs, replayed while their key matches (see
    /// [`crate::host::HostGraph`]). First field, so dropped first: before the buffers and the
    /// event their nodes name.
    pub(crate) host_graphs: Vec<crate::host::HostGraph>,
    pub(crate) config: BackendConfig,
    pub(crate) packing: StackPacking,
    pub(crate) buffers: Buffers,
    pub(crate) proj_done: CudaEvent,
    pub(crate) side_done: CudaEvent,
    /// Recorded on a caller's stream by [`CudaBackend::forward_foreign`].
    pub(crate) foreign_joined: CudaEvent,
    /// Pipelined host path: a chunk's upload is on the device (copy stream).
    pub(crate) chunk_uploaded: CudaEvent,
    /// Pipelined host path: a chunk's pass is done (main stream).
    pub(crate) chunk_done: CudaEvent,
    /// The unsplit host pass's page-locked memory, allocated by the first such pass (a
    /// backend that only runs device-resident or chunked passes never pins the 48 MB).
    pub(crate) host: Option<crate::host::HostBuffers>,
    /// Recorded just before the last layer's recurrence of a pass with progress words.
    pub(crate) last_layer: CudaEvent,
    /// Recorded after a pass with progress words (the copy threads poll it).
    pub(crate) pass_done: CudaEvent,
    /// Distinguishes preparations (a graph captured under one must not replay under another).
    pub(crate) id: u64,
}

/// The CUDA backend: NVRTC-compiled kernels on one GPU (see the module docs).
///
/// Each forward pass runs the plan core selects for its batch on this device with the compiled
/// kernels' real resources: the cluster recurrence on GPUs with thread-block clusters, else the
/// resident recurrence where it fits an SM, else the wide or tiled cooperative one; FP32 projections with 64x64 or 128x128 tiles by row count, or in
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
    pub(crate) prepared: Option<Prepared>,
    /// Per-phase timing events (crate::phases), inert unless turned on.
    pub(crate) phases: crate::phases::PhaseTimer,
    pub(crate) kernels: Option<Kernels>,
    pub(crate) device: Device,
    pub(crate) spin_timeout: Duration,
    pub(crate) overrides: Overrides,
    /// Test-only fault injection ([`crate::hooks`]); always `None` in production.
    pub(crate) stall: Option<StallInjection>,
    /// Whether TF32 passes on 9.0 behind the register-quad recurrences run the resident
    /// projection in every layer (layer 0 rounding its input in the kernel, the recurrences
    /// before the others storing TF32 values): on unless [`RESIDENT_PROJECTION_ENV`] is `0` (an
    /// A/B switch; both settings give the same bits).
    pub(crate) resident_projection: bool,
    /// What [`FIXED_RECURRENCE_ENV`] (or the test hook) asks TF32 passes of cluster plans to run
    /// instead of the plan's own fixed-point decision (`Plan::fixed_point`), or `None` (the
    /// default: the plan's decision).
    pub(crate) fixed_recurrence: Option<FixedRecurrence>,
    pub(crate) last: Option<ForwardSummary>,
    /// Windows per chunk of the pipelined host path (0: never split); see [`crate::host`].
    pub(crate) host_chunk: usize,
    /// Whether an unsplit host pass writes its output to mapped host memory; see [`crate::host`].
    pub(crate) zero_copy: bool,
    /// Whether an unsplit host pass stages its input in page-locked memory; see [`crate::host`].
    pub(crate) staging: bool,
    /// Whether a zero-copy pass copies rows as its last layer reports them; see [`crate::host`].
    pub(crate) progressive: bool,
    /// Whether host passes print their phases ([`crate::host::HOST_TRACE_ENV`]).
    pub(crate) host_trace: bool,
    /// Whether an unsplit host pass replays a captured graph ([`crate::host::HOST_GRAPH_ENV`]).
    pub(crate) host_graph: bool,
    /// Threads for the host path's large copies, started by the first host pass.
    pub(crate) copy_pool: Option<crate::copy_pool::CopyPool>,
    pub(crate) preparations: u64,
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // Buffers are freed on the main stream; make sure nothing on either stream still uses
        // them (a forward that failed half-way may have left work queued).
        let _ = self.device.side.synchronize();
        let _ = self.device.main.synchronize();
    }
}

/// Set to `0`, TF32 passes on compute capability 9.0 run the streaming warpgroup projection
/// (`bilstm_projection_tf32_wgmma`) in every layer instead of the resident one
/// (`bilstm_projection_tf32_resident`): for A/B measurements; the bits are the same either way.
pub const RESIDENT_PROJECTION_ENV: &str = "BILSTM_PROJ_RESIDENT";

/// For measurements and tests: TF32 passes of cluster plans (compute capability 9.0 and later)
/// run the fixed-point recurrence (`numerics.cuh` section 9) the plan picks
/// (`Plan::fixed_point`, `bilstm_core::fixed::pick`); set to `off`, they run the plan's cluster
/// kernel with section 8's FP32 dot instead (other bits: the section-8 kernels' A/B and test
/// switch), or to `8`, `8c2`, `8c4`, `1c2`, `1c4`, `1c8`, `4`, `4c2`, `4c4`, `4c8`, `2c4` or `2c8`, that
/// fixed-point kernel at every batch: the tensor-core `bilstm_recurrence_fixed8` (8 windows a
/// CTA), `fixed8c2` / `fixed8c4` (8 windows a 2- / 4-CTA cluster), the integer-pipe
/// `bilstm_recurrence_fixed1c2` / `fixed1c4` / `fixed1c8` (one window a 2- / 4- / 8-CTA cluster),
/// or the tensor-core 4-window tiles `bilstm_recurrence_fixed4` (one CTA) / `fixed4c2` /
/// `fixed4c4` / `fixed4c8` (2- / 4- / 8-CTA clusters) and their 2-window tiles `fixed2c4` /
/// `fixed2c8`, all with the same bits; `auto` (or no
/// value, or any other) leaves the plan's pick.
pub const FIXED_RECURRENCE_ENV: &str = "BILSTM_FIXED_RECURRENCE";

/// The fixed-point recurrence a [`FIXED_RECURRENCE_ENV`] value names: `8` for 8 windows a CTA,
/// `8c2` or `8c4` for 8 windows a 2- or 4-CTA cluster, `1c2`, `1c4` or `1c8` for one window a
/// 2-, 4- or 8-CTA cluster (the integer-pipe kernels), `4`, `4c2`, `4c4` or `4c8` for 4 windows
/// a CTA or a 2-, 4- or 8-CTA cluster, `2c4` or `2c8` for 2 windows a 4- or 8-CTA cluster,
/// `auto` for the plan's pick, `off` for section 8.
pub(crate) fn parse_fixed_recurrence(value: Option<&str>) -> Option<FixedRecurrence> {
    let v = value?.trim();
    match v {
        "auto" => return Some(FixedRecurrence::Auto),
        "off" => return Some(FixedRecurrence::Off),
        _ => {}
    }
    // A kernel's name is its entry point's tail: `bilstm_recurrence_fixed1c8` is `1c8`.
    bilstm_kernels::ALL
        .into_iter()
        .filter(|id| id.is_fixed_point())
        .find(|id| id.kernel().entry.strip_prefix(FIXED_ENTRY_PREFIX) == Some(v))
        .map(FixedRecurrence::Kernel)
}

/// The part of every fixed-point recurrence's entry point before its [`FIXED_RECURRENCE_ENV`]
/// name.
const FIXED_ENTRY_PREFIX: &str = "bilstm_recurrence_fixed";

/// The values [`FIXED_RECURRENCE_ENV`] and the test hook accept, as the hook's error lists them
/// (a unit test checks the list against the kernels). Only the test hook reports it.
#[cfg(any(test, feature = "test-hooks"))]
pub(crate) const FIXED_RECURRENCE_NAMES: &str =
    "8, 8c2, 8c4, 1c2, 1c4, 1c8, 4, 4c2, 4c4, 4c8, 2c4, 2c8, auto or off";

/// What [`FIXED_RECURRENCE_ENV`] (or the test hook) asks TF32 passes of cluster plans to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FixedRecurrence {
    /// This fixed-point kernel at every batch.
    Kernel(KernelId),
    /// The plan's pick (`Plan::fixed_point`: `bilstm_core::fixed::pick` for the pass's batch
    /// and this device's SMs), as with no setting.
    Auto,
    /// No fixed-point kernel: the plan's cluster kernel with section 8's FP32 dot.
    Off,
}

fn spin_timeout_from_env() -> Duration {
    parse_spin_timeout(std::env::var(SPIN_TIMEOUT_ENV).ok().as_deref())
}

/// A [`SPIN_TIMEOUT_ENV`] value: whole milliseconds above 0, else [`DEFAULT_SPIN_TIMEOUT`].
fn parse_spin_timeout(value: Option<&str>) -> Duration {
    value
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map_or(DEFAULT_SPIN_TIMEOUT, Duration::from_millis)
}

impl CudaBackend {
    /// Opens GPU `ordinal` (0 for the first). The spin timeout is [`DEFAULT_SPIN_TIMEOUT`]
    /// unless `BILSTM_SPIN_TIMEOUT_MS` says otherwise; the host path's chunk
    /// [`bilstm_core::plan::pipeline::HOST_CHUNK_WINDOWS`] unless `BILSTM_HOST_CHUNK` does. Kernels are compiled by the first
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
            resident_projection: std::env::var(RESIDENT_PROJECTION_ENV).map_or(true, |v| v != "0"),
            fixed_recurrence: parse_fixed_recurrence(
                std::env::var(FIXED_RECURRENCE_ENV).ok().as_deref(),
            ),
            last: None,
            preparations: 0,
            host_chunk: crate::host::host_chunk_from_env(),
            zero_copy: crate::host::zero_copy_from_env(),
            staging: crate::host::staging_from_env(),
            progressive: crate::host::progressive_from_env(),
            host_trace: crate::host::host_trace_from_env(),
            host_graph: crate::host::host_graph_from_env(),
            copy_pool: None,
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

    /// Free and total device memory in bytes, as the driver reports them now
    /// (`cuMemGetInfo`; other processes' and this backend's own allocations are not free).
    ///
    /// # Errors
    /// [`CudaError::Driver`] when the driver refuses the query.
    pub fn device_memory(&self) -> Result<(u64, u64), CudaError> {
        let (free, total) = self.device.ctx.mem_get_info().map_err(CudaError::driver(
            "asking the driver for free device memory",
        ))?;
        Ok((free as u64, total as u64))
    }

    /// The largest batch, at most `limit`, that a preparation of `shape` could hold in the
    /// device memory free now beside what this backend holds (its current preparation would be
    /// released by the next `prepare`), with `bilstm_core::memory::DRIVER_RESERVE_BYTES` left to
    /// the driver; 0 when not one window fits.
    ///
    /// # Errors
    /// [`CudaError::Driver`] when the driver refuses the query.
    pub fn max_batch_fitting(&self, shape: &StackShape, limit: usize) -> Result<usize, CudaError> {
        use bilstm_core::memory::{DRIVER_RESERVE_BYTES, max_batch_within};
        let usable = self.free_with_held()?.saturating_sub(DRIVER_RESERVE_BYTES);
        Ok(max_batch_within(shape, usable, limit))
    }

    /// Free device memory plus what this backend's current preparation holds (released by the
    /// next `prepare`).
    fn free_with_held(&self) -> Result<u64, CudaError> {
        let (free, _) = self.device_memory()?;
        let held = self.prepared.as_ref().map_or(0, |p| {
            bilstm_core::memory::DeviceMemory::of(&p.config.shape, p.config.max_batch)
                .map_or(0, |m| m.total())
        });
        Ok(free.saturating_add(held))
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
    pub fn kernel_resources(&self) -> Option<&[CompiledKernel]> {
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

    /// What the last successful (or timed-out) forward pass ran.
    pub fn last_forward(&self) -> Option<ForwardSummary> {
        self.last
    }

    /// Checks a device-buffer pass: batch within the preparation, buffers long enough and in
    /// this context. Returns the plan for `batch` and the output length.
    pub(crate) fn check_device_io(
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
        projection_tf32x3_small: usage(KernelId::ProjectionTf32x3Small)?,
        projection_tf32x3_wgmma: usage(KernelId::ProjectionTf32x3Wgmma)?,
        projection_tf32_wgmma: usage(KernelId::ProjectionTf32Wgmma)?,
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
        cluster_tiles: [
            usage(KernelId::RecurrenceCluster2W4)?,
            usage(KernelId::RecurrenceCluster2W8)?,
            usage(KernelId::RecurrenceCluster2W16)?,
        ],
        tile_max_active_clusters: [
            Some(k.max_active_clusters_of(KernelId::RecurrenceCluster2W4)),
            Some(k.max_active_clusters_of(KernelId::RecurrenceCluster2W8)),
            Some(k.max_active_clusters_of(KernelId::RecurrenceCluster2W16)),
        ],
    })
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
        // A batch whose buffers do not fit (in the free memory plus what the previous
        // preparation, about to be released, holds) is refused with the figures, before
        // anything is released or allocated.
        bilstm_core::memory::fits(&config.shape, config.max_batch, self.free_with_held()?)?;
        // Free the previous preparation first (its buffers may be large).
        self.prepared = None;
        self.device
            .main
            .synchronize()
            .map_err(CudaError::driver("finishing earlier work"))?;
        let buffers =
            Buffers::allocate(&self.device.main, &config.shape, config.max_batch, &packed)?;
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DISABLE_TIMING);
        let event = || {
            self.device
                .ctx
                .new_event(flags)
                .map_err(CudaError::driver("creating an event"))
        };
        let (proj_done, side_done, foreign_joined) = (event()?, event()?, event()?);
        let (chunk_uploaded, chunk_done) = (event()?, event()?);
        let (last_layer, pass_done) = (event()?, event()?);
        self.preparations = self.preparations.wrapping_add(1);
        self.prepared = Some(Prepared {
            config: *config,
            packing,
            buffers,
            proj_done,
            side_done,
            foreign_joined,
            chunk_uploaded,
            chunk_done,
            host: None,
            host_graphs: Vec::new(),
            last_layer,
            pass_done,
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
        self.host_forward(input, batch, output, None)
    }

    /// As [`Backend::forward`] (the same output bits); the recurrence kernels write every layer's
    /// and direction's final hidden and cell states into device buffers on every pass, and this
    /// downloads them after the output.
    ///
    /// # Errors
    /// As [`Backend::forward`], plus [`CoreError::Shape`] (`"h_n length"`, `"c_n length"`) for
    /// state tensors other than `layers * 2 * batch * 128` values.
    fn forward_with_state(
        &mut self,
        input: &[f32],
        batch: usize,
        output: &mut [f32],
        h_n: &mut [f32],
        c_n: &mut [f32],
    ) -> Result<(), CudaError> {
        self.host_forward(input, batch, output, Some((h_n, c_n)))
    }

    fn config(&self) -> Option<&BackendConfig> {
        self.prepared.as_ref().map(|p| &p.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_timeouts_parse_milliseconds_and_fall_back_to_the_default() {
        assert_eq!(parse_spin_timeout(Some("250")), Duration::from_millis(250));
        assert_eq!(
            parse_spin_timeout(Some(" 120000 ")),
            Duration::from_secs(120)
        );
        for bad in [
            None,
            Some(""),
            Some("0"),
            Some("-5"),
            Some("2s"),
            Some("1e3"),
        ] {
            assert_eq!(parse_spin_timeout(bad), DEFAULT_SPIN_TIMEOUT, "{bad:?}");
        }
        assert!(DEFAULT_SPIN_TIMEOUT >= Duration::from_millis(100));
    }

    #[test]
    fn the_fixed_recurrence_switch_names_its_twelve_kernels_auto_or_off_else_nothing() {
        let fixed = bilstm_core::geometry::FIXED_THREADS;
        let tile = bilstm_core::geometry::FIXED_WINDOWS as u32;
        // (value, kernel, CTAs a cluster, threads a CTA, windows a cluster)
        for (value, id, size, threads, windows) in [
            (" 8 ", KernelId::RecurrenceFixed8, 1u32, fixed, tile),
            ("8c2", KernelId::RecurrenceFixed8C2, 2, fixed / 2, tile),
            ("8c4", KernelId::RecurrenceFixed8C4, 4, fixed / 4, tile),
            ("1c2", KernelId::RecurrenceFixed1C2, 2, 256, 1),
            ("1c4", KernelId::RecurrenceFixed1C4, 4, 256, 1),
            ("1c8", KernelId::RecurrenceFixed1C8, 8, 128, 1),
            ("4", KernelId::RecurrenceFixed4, 1, fixed, 4),
            ("4c2", KernelId::RecurrenceFixed4C2, 2, fixed / 2, 4),
            ("4c4", KernelId::RecurrenceFixed4C4, 4, fixed / 4, 4),
            ("4c8", KernelId::RecurrenceFixed4C8, 8, fixed / 8, 4),
            ("2c4", KernelId::RecurrenceFixed2C4, 4, fixed / 4, 2),
            ("2c8", KernelId::RecurrenceFixed2C8, 8, fixed / 8, 2),
        ] {
            assert_eq!(
                parse_fixed_recurrence(Some(value)),
                Some(FixedRecurrence::Kernel(id)),
                "{value}"
            );
            assert!(id.is_fixed_point());
            let k = id.kernel();
            assert_eq!(k.block_threads as usize, threads, "{value}");
            assert_eq!(
                k.launch,
                bilstm_kernels::LaunchKind::Cluster { size, windows },
                "{value}"
            );
        }
        for other in [
            None,
            Some(""),
            Some("0"),
            Some("16"),
            Some("8c8"),
            Some("4c16"),
            Some("1c16"),
            Some("on"),
            Some("AUTO"),
            Some("OFF"),
        ] {
            assert_eq!(parse_fixed_recurrence(other), None, "{other:?}");
        }
        assert_eq!(
            parse_fixed_recurrence(Some(" auto")),
            Some(FixedRecurrence::Auto)
        );
        assert_eq!(
            parse_fixed_recurrence(Some("off ")),
            Some(FixedRecurrence::Off)
        );
        // The hook's error lists exactly the names of the fixed-point kernels, then `auto` and
        // `off`.
        let names: Vec<&str> = bilstm_kernels::ALL
            .into_iter()
            .filter(|id| id.is_fixed_point())
            .map(|id| id.kernel().entry.strip_prefix(FIXED_ENTRY_PREFIX).unwrap())
            .collect();
        assert_eq!(
            FIXED_RECURRENCE_NAMES,
            format!("{}, auto or off", names.join(", "))
        );
    }
}
