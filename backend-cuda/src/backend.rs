//! [`CudaBackend`]: the [`Backend`] implementation on one GPU.
//!
//! # A forward pass
//! Everything is enqueued on the main stream except the reverse direction's recurrences,
//! which run on a side stream when the schedule runs both directions at once:
//!
//! 1. upload the input (host forward only);
//! 2. `clear`: zero the exchange and the error words (one launch per pass: flags include the
//!    layer);
//! 3. per layer: the projection of both directions (one launch, grid.z = direction); record
//!    `proj_done`, the side stream waits on it; the forward recurrence on the main stream and
//!    the reverse one on the side stream (concurrent schedule) or both on the main stream,
//!    each split into the schedule's launches; record `side_done` on the side stream, the
//!    main stream waits on it (the next layer reads both directions' output);
//! 4. download the output (host forward), read the error words, synchronise. A kernel that
//!    gave up waiting for a partner becomes [`CudaError::PartnerLost`].
//!
//! Nothing is allocated in a forward pass; all buffers come from [`Backend::prepare`].

use std::sync::Arc;
use std::time::Duration;

use bilstm_core::exchange::ExchangeLayout;
use bilstm_core::layout::StackPacking;
use bilstm_core::plan::ProjectionTile;
use bilstm_core::plan::projection::fp32_tile_for_rows;
use bilstm_core::schedule::{CoopSchedule, choose_wide_schedule};
use bilstm_core::{Backend, BackendConfig, CoreError, Direction, StackWeights};
use bilstm_kernels::KernelId;
use bilstm_kernels::params::{ERROR_NONE, ERROR_PARTNER_LOST, ERROR_WORDS};
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

use crate::buffers::{Buffers, span};
use crate::device::{Device, DeviceInfo, KernelResources, Kernels};
use crate::error::CudaError;
use crate::launch::projection::ProjectionArgs;
use crate::launch::recurrence_wide::WideArgs;
use crate::launch::{self, Span};

/// The default bound on a recurrence block's wait for a partner: far above any legitimate
/// wait (a step takes microseconds), short enough that a lost partner is reported promptly.
pub const DEFAULT_SPIN_TIMEOUT: Duration = Duration::from_secs(2);

/// The environment variable that overrides [`DEFAULT_SPIN_TIMEOUT`], in milliseconds (for
/// runs under compute-sanitizer, which slows kernels by orders of magnitude).
pub const SPIN_TIMEOUT_ENV: &str = "BILSTM_SPIN_TIMEOUT_MS";

/// Test-only fault injection: one block of one recurrence launch returns at once and never
/// publishes, so its partners must time out (see [`CudaBackend::inject_stall`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallInjection {
    /// The layer whose recurrence is hit.
    pub layer: usize,
    /// Its direction.
    pub direction: Direction,
    /// The block index in that direction's first launch.
    pub block: u32,
}

/// What the last forward pass ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardSummary {
    /// The batch.
    pub batch: usize,
    /// The wide recurrence's schedule.
    pub schedule: CoopSchedule,
    /// The projection tile.
    pub projection_tile: ProjectionTile,
    /// Blocks of the wide recurrence the device holds at once.
    pub co_resident_blocks: usize,
}

#[derive(Debug)]
struct Prepared {
    config: BackendConfig,
    packing: StackPacking,
    buffers: Buffers,
    co_resident_blocks: usize,
    proj_done: CudaEvent,
    side_done: CudaEvent,
}

/// The CUDA backend: NVRTC-compiled kernels on one GPU (see the module docs).
///
/// Runs the wide cooperative recurrence for every batch, with core's wide schedule
/// (`choose_wide_schedule`) and FP32 projections (64x64 or 128x128 tiles by row count). A
/// configuration in `MathMode::Tf32` is accepted and runs the same FP32 kernels (no TF32 tile
/// is built yet; FP32 is well inside the TF32 budget). The output bits do not depend on the
/// batch a window runs in, the tile height, the schedule or the projection tile.
///
/// ```no_run
/// use bilstm_core::{Backend, BackendConfig};
/// use bilstm_core::owned::{OwnedStack, random_input};
/// let stack = OwnedStack::builtin();
/// let mut gpu = bilstm_cuda::CudaBackend::new(0)?;
/// let config = BackendConfig::pyannote(32);
/// gpu.prepare(&stack.weights()?, &config)?;
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
    kernels: Option<Kernels>,
    device: Device,
    spin_timeout: Duration,
    projection_tile: Option<ProjectionTile>,
    stall: Option<StallInjection>,
    last: Option<ForwardSummary>,
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
    /// [`Backend::prepare`].
    ///
    /// # Errors
    /// [`CudaError::Unavailable`] without a CUDA driver or GPU (or for an ordinal past the
    /// last GPU); [`CudaError::Unsupported`] for a GPU older than compute capability 7.0;
    /// [`CudaError::Driver`].
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        let device = Device::open(ordinal)?;
        Ok(CudaBackend {
            prepared: None,
            kernels: None,
            device,
            spin_timeout: spin_timeout_from_env(),
            projection_tile: None,
            stall: None,
            last: None,
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

    /// Core's [`bilstm_core::plan::KernelResources`] with the compiled kernels' real usage in
    /// place of the design estimates (wide recurrence and both FP32 projections; the kernels
    /// not built yet keep their nominal figures), for `bilstm_core::plan::select`.
    pub fn plan_resources(&self) -> Option<bilstm_core::plan::KernelResources> {
        let k = self.kernels.as_ref()?;
        let mut r = bilstm_core::plan::KernelResources::nominal();
        r.wide = k.resources_of(KernelId::RecurrenceWide)?.usage();
        r.projection_small = k.resources_of(KernelId::ProjectionSmall)?.usage();
        r.projection_large = k.resources_of(KernelId::ProjectionLarge)?.usage();
        Some(r)
    }

    /// The spin timeout passed to the recurrences.
    pub fn spin_timeout(&self) -> Duration {
        self.spin_timeout
    }

    /// Sets the spin timeout (a recurrence block waiting longer for a partner gives up and the
    /// forward returns [`CudaError::PartnerLost`]).
    pub fn set_spin_timeout(&mut self, timeout: Duration) {
        self.spin_timeout = timeout;
    }

    /// Forces a projection tile (`None`: core's `fp32_tile_for_rows`). Both FP32 tiles give the
    /// same bits; this exists for tests and benchmarks ([`ProjectionTile::Tf32`] makes forward
    /// passes fail with [`CudaError::Unsupported`] until a TF32 kernel exists).
    pub fn set_projection_tile(&mut self, tile: Option<ProjectionTile>) {
        self.projection_tile = tile;
    }

    /// Test-only fault injection: makes one block of one recurrence launch never publish (so
    /// forward passes end with [`CudaError::PartnerLost`] after the spin timeout); `None`
    /// turns it off.
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

    /// Runs the stack on `batch` windows already on the GPU: reads the first
    /// `batch * frames * features` values of `input`, writes the first `batch * frames * 256`
    /// of `output`. Ordered after earlier work on [`CudaBackend::stream`]; returns when done.
    ///
    /// # Errors
    /// [`CoreError::NotPrepared`], [`CoreError::BatchTooLarge`]; [`CudaError::DeviceBuffer`]
    /// for a buffer that is too short or belongs to another context;
    /// [`CudaError::PartnerLost`], [`CudaError::Launch`], [`CudaError::Driver`].
    pub fn forward_device(
        &mut self,
        input: &CudaSlice<f32>,
        batch: usize,
        output: &mut CudaSlice<f32>,
    ) -> Result<(), CudaError> {
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
        if batch == 0 {
            return Ok(());
        }
        let main = self.device.main.clone();
        // The guards keep cudarc's bookkeeping for buffers allocated with event tracking (in
        // another context object of this device) until the pass is enqueued.
        let (in_addr, in_guard) = input.device_ptr(&main);
        let (out_addr, out_guard) = output.device_ptr_mut(&main);
        let summary = self.enqueue(
            Span {
                addr: in_addr,
                len: input.len(),
            },
            batch,
            Some(Span {
                addr: out_addr,
                len: out_len,
            }),
        );
        drop(in_guard);
        drop(out_guard);
        let summary = summary.inspect_err(|_| self.drain())?;
        self.finish(summary)
    }

    /// Enqueues a whole pass: clear, then per layer the projection and both recurrences.
    /// `final_out` receives the last layer's output (`None`: the backend's own layer buffer).
    fn enqueue(
        &self,
        input: Span,
        batch: usize,
        final_out: Option<Span>,
    ) -> Result<ForwardSummary, CudaError> {
        let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
        let k = self.kernels.as_ref().ok_or(CoreError::NotPrepared)?;
        let (main, side) = (&self.device.main, &self.device.side);
        let shape = st.config.shape;
        let b = &st.buffers;
        let schedule = choose_wide_schedule(batch, st.co_resident_blocks)?;
        let layout = ExchangeLayout::wide(schedule.tile_height, schedule.tiles)?;
        let exchange = b.exchange_span(main);
        if layout.words() > exchange.len {
            return Err(CudaError::Internal {
                what: format!(
                    "exchange of {} words needed, {} allocated",
                    layout.words(),
                    exchange.len
                ),
            });
        }
        let error = span(&b.error, main);
        launch::clear::launch(&k.clear, main, exchange, layout.words(), error, ERROR_WORDS)?;

        let rows = bilstm_core::error::checked_mul(batch, shape.frames, "forward rows")?;
        // Core's row rule; the TF32 tile has no kernel yet, so MathMode::Tf32 runs FP32 tiles too
        // (they meet the TF32 budget with room to spare).
        let tile = self.projection_tile.unwrap_or(fp32_tile_for_rows(rows));
        let proj_fn = match tile {
            ProjectionTile::Small64 => &k.projection_small,
            ProjectionTile::Large128 => &k.projection_large,
            ProjectionTile::Tf32 => {
                return Err(CudaError::Unsupported {
                    what: "the TF32 projection tile",
                    reason: "no TF32 kernel is built yet".into(),
                });
            }
        };
        let weights = span(&b.weights, main);
        let proj = span(&b.proj, main);
        let layer_out = [span(&b.layer_out[0], main), span(&b.layer_out[1], main)];
        let missing = |what: &str| CudaError::Internal {
            what: format!("packed offsets of {what} missing"),
        };

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
            launch::projection::launch(
                proj_fn,
                main,
                tile,
                &ProjectionArgs {
                    x,
                    weights: [
                        piece(offsets[0].input_kmajor)?,
                        piece(offsets[1].input_kmajor)?,
                    ],
                    out: proj,
                    direction_stride: b.proj_direction_stride,
                    rows,
                    in_width: width,
                },
            )?;
            self.proj_done_recorded(st, main, side)?;
            for direction in Direction::ALL {
                let o = offsets[direction.index()];
                let stream = if schedule.concurrent && direction == Direction::Reverse {
                    side
                } else {
                    main
                };
                let proj_dir = proj
                    .offset(direction.index() * b.proj_direction_stride, 4)
                    .ok_or_else(|| missing("the projection's reverse half"))?;
                for l in 0..schedule.launches_per_direction() {
                    let stall = self
                        .stall
                        .filter(|s| s.layer == layer && s.direction == direction && l == 0)
                        .map(|s| s.block);
                    launch::recurrence_wide::launch(
                        &k.recurrence_wide,
                        stream,
                        &WideArgs {
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
                            co_resident_blocks: st.co_resident_blocks,
                            spin_timeout_ns: u64::try_from(self.spin_timeout.as_nanos())
                                .unwrap_or(u64::MAX),
                            stall_block: stall,
                        },
                    )?;
                }
            }
            st.side_done
                .record(side)
                .map_err(CudaError::driver("recording the side stream's event"))?;
            main.wait(&st.side_done)
                .map_err(CudaError::driver("joining the side stream"))?;
        }
        Ok(ForwardSummary {
            batch,
            schedule,
            projection_tile: tile,
            co_resident_blocks: st.co_resident_blocks,
        })
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

    /// Reads the error words (synchronising the main stream, which has joined the side
    /// stream) and turns a kernel's report into an error.
    fn finish(&mut self, summary: ForwardSummary) -> Result<(), CudaError> {
        self.last = Some(summary);
        let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
        let mut report = [0i32; ERROR_WORDS];
        self.device
            .main
            .memcpy_dtoh(&st.buffers.error, &mut report[..])
            .map_err(CudaError::driver("reading the kernels' error words"))?;
        match report[0] {
            ERROR_NONE => Ok(()),
            ERROR_PARTNER_LOST => Err(CudaError::PartnerLost {
                kernel: launch::recurrence_wide::KERNEL,
                layer: usize::try_from(report[1]).unwrap_or(usize::MAX),
                direction: if report[2] == 0 {
                    Direction::Forward
                } else {
                    Direction::Reverse
                },
                step: usize::try_from(report[3]).unwrap_or(usize::MAX),
            }),
            code => Err(CudaError::KernelReport {
                kernel: launch::recurrence_wide::KERNEL,
                code,
            }),
        }
    }

    fn co_resident_blocks(&self, kernels: &Kernels) -> Result<usize, CudaError> {
        let r = kernels
            .resources_of(KernelId::RecurrenceWide)
            .ok_or_else(|| CudaError::Internal {
                what: "wide recurrence resources missing".into(),
            })?;
        let per_sm = r.blocks_per_sm as usize;
        Ok(per_sm.saturating_mul(self.device.info.facts.sm_count as usize))
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
        let facts = self.device.info.facts;
        if !facts.cooperative_launch {
            return Err(CudaError::Unsupported {
                what: "cooperative launch",
                reason: format!(
                    "{} reports CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 0",
                    self.device.info.name
                ),
            });
        }
        if self.kernels.is_none() {
            self.kernels = Some(Kernels::load(&self.device)?);
        }
        let kernels = self.kernels.as_ref().ok_or_else(|| CudaError::Internal {
            what: "kernels missing".into(),
        })?;
        let co_resident_blocks = self.co_resident_blocks(kernels)?;
        // The largest batch must have a schedule (else every forward at that size would fail).
        choose_wide_schedule(config.max_batch, co_resident_blocks)?;
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
        self.prepared = Some(Prepared {
            config: *config,
            packing,
            buffers,
            co_resident_blocks,
            proj_done,
            side_done,
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
        let main = self.device.main.clone();
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
        let summary = self
            .enqueue(input_span, batch, None)
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
        self.finish(summary)
    }

    fn config(&self) -> Option<&BackendConfig> {
        self.prepared.as_ref().map(|p| &p.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_timeout_env_parsing_falls_back_to_the_default() {
        // Only the default is observable without touching the process environment.
        assert!(DEFAULT_SPIN_TIMEOUT >= Duration::from_millis(100));
    }
}
