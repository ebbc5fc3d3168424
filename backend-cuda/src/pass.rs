//! The forward pass itself: [`CudaBackend::enqueue`] queues a whole pass of a plan on the
//! backend's streams (see [`crate::backend`]'s module docs for the order of launches),
//! [`CudaBackend::finish`] waits for it and turns a kernel's error report into an error.

use bilstm_core::exchange::ExchangeLayout;
use bilstm_core::fixed::FixedPick;
use bilstm_core::plan::{Plan, ProjectionTile, RecurrenceKind, RecurrenceSchedule};
use bilstm_core::{CoreError, Direction};
use bilstm_kernels::KernelId;
use bilstm_kernels::params::{ERROR_NONE, ERROR_PARTNER_LOST, ERROR_WORDS};
use cudarc::driver::CudaStream;

use crate::backend::{CudaBackend, FixedRecurrence, Prepared};
use crate::buffers::span;
use crate::error::CudaError;
use crate::launch::coop::CoopArgs;
use crate::launch::projection::ProjectionArgs;
use crate::launch::recurrence_cluster::ClusterArgs;
use crate::launch::recurrence_resident::ResidentArgs;
use crate::launch::{self, Span};
use crate::summary::ForwardSummary;

/// Where in the backend's layer buffers a pass works, whether it zeroes the error words, and
/// whether its last layer reports progress to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Region {
    /// The pass uses the layer buffers from this window on (a chunk of the pipelined host path
    /// keeps its layers apart from its neighbours' so their copies can overlap it).
    pub first_window: usize,
    /// Zero the error words before the pass (a later chunk keeps an earlier chunk's report).
    pub fresh_error: bool,
    /// The host path's progress words (`[batch, 2]` u32 in device-mapped host memory) that a
    /// cluster last layer writing host memory reports its finished steps in (the contract's
    /// "Progress" in kernels/cuda/recurrence_cluster.cu); with them the pass also records
    /// `Prepared::last_layer` on the main stream just before the last layer's recurrence.
    /// Other kinds ignore them.
    pub progress: Option<Span>,
}

impl Region {
    /// A whole pass: the buffers from window 0, fresh error words, no progress reports.
    pub(crate) const WHOLE: Region = Region {
        first_window: 0,
        fresh_error: true,
        progress: None,
    };
}

impl CudaBackend {
    /// Zeroes the kernels' error words on the main stream (before the chunks of a pipelined
    /// pass, whose kinds may differ and which then keep the first report).
    pub(crate) fn clear_error_words(&self) -> Result<(), CudaError> {
        let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
        let k = self.kernels.as_ref().ok_or(CoreError::NotPrepared)?;
        let main = &self.device.main;
        launch::clear::launch(
            k.get(KernelId::Clear)?,
            main,
            st.buffers.exchange_span(main),
            0,
            span(&st.buffers.error, main),
            ERROR_WORDS,
        )
    }

    /// Enqueues a whole pass of `plan`: (clear,) then per layer the projection and the
    /// recurrence. `final_out` receives the last layer's output (`None`: the backend's own
    /// layer buffer). Enqueues only: no allocation, no host synchronisation.
    pub(crate) fn enqueue(
        &self,
        plan: &Plan,
        input: Span,
        final_out: Option<Span>,
    ) -> Result<(), CudaError> {
        self.enqueue_with_states(plan, input, final_out, None, Region::WHOLE)
    }

    /// [`CudaBackend::enqueue`] with the final states written to `states` (`(h_n, c_n)`, each
    /// `[layers * 2, batch, 128]`) instead of the backend's own buffers, and the layer buffers
    /// used from `region`.
    pub(crate) fn enqueue_with_states(
        &self,
        plan: &Plan,
        input: Span,
        final_out: Option<Span>,
        states: Option<(Span, Span)>,
        region: Region,
    ) -> Result<(), CudaError> {
        let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
        let k = self.kernels.as_ref().ok_or(CoreError::NotPrepared)?;
        let (main, side) = (&self.device.main, &self.device.side);
        let shape = st.config.shape;
        let b = &st.buffers;
        let batch = plan.batch;
        let exchange = b.exchange_span(main);
        let error = span(&b.error, main);
        let error_words = if region.fresh_error { ERROR_WORDS } else { 0 };

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
                    error_words,
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
                    error_words,
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
            ProjectionTile::Tf32x3Small => KernelId::ProjectionTf32x3Small,
            ProjectionTile::Tf32x3Wgmma => KernelId::ProjectionTf32x3Wgmma,
            ProjectionTile::Tf32Wgmma => KernelId::ProjectionTf32Wgmma,
        })?;
        let weights = span(&b.weights, main);
        let proj = span(&b.proj, main);
        let missing = |what: &str| CudaError::Internal {
            what: format!("packed offsets of {what} missing"),
        };
        let region_start =
            bilstm_core::error::checked_mul(region.first_window, shape.output_len(1)?, "region")?;
        let layer_out = [
            span(&b.layer_out[0], main)
                .offset(region_start, 4)
                .ok_or_else(|| missing("the chunk's layer buffer"))?,
            span(&b.layer_out[1], main)
                .offset(region_start, 4)
                .ok_or_else(|| missing("the chunk's layer buffer"))?,
        ];
        let spin_timeout_ns = u64::try_from(self.spin_timeout.as_nanos()).unwrap_or(u64::MAX);
        let (state_h, state_c) =
            states.unwrap_or_else(|| (span(&b.state_h, main), span(&b.state_c, main)));
        let layer_state_len =
            bilstm_core::error::checked_mul(2 * batch, shape.hidden, "final state values")?;

        let cc = self.device.info.facts.compute_capability;
        // TF32 mode on 9.0: every layer runs the resident projection where the recurrence is
        // one of the register-quad cluster kernels (4, 8 or 16 windows a cluster). The layers
        // after the first read their input as stored, so the recurrence before each stores its
        // outputs rounded to TF32 (the value every TF32 projection rounds them to); layer 0
        // rounds the model's input in the kernel (`round_input`; a 16-byte aligned input only,
        // as its tensor map needs). The other kinds (the latency-bound one- and two-window
        // cluster kernels of small batches, the cooperative and resident kinds) keep exact
        // outputs and the streaming projection. Both projections give the same bits (GPU test
        // gpu_tf32 `resident_and_streaming_tf32_projections_give_the_same_bits`), so the choice
        // never changes a window's output.
        let quads =
            plan.schedule.choice.cluster().is_some_and(|c| {
                c.windows_per_cluster >= launch::recurrence_cluster::QUAD_MIN_WINDOWS
            });
        let resident = |layer: usize| {
            self.resident_projection
                && quads
                && tile == ProjectionTile::Tf32Wgmma
                && layer < shape.layers
                && launch::projection_tf32x3::resident_applies(cc, shape.layer_input_width(layer))
                && (layer > 0 || input.addr.is_multiple_of(16))
        };
        for layer in 0..shape.layers {
            let width = shape.layer_input_width(layer);
            // This layer's projection is the resident one; the next one's is (so this layer's
            // recurrence stores TF32 values).
            let resident_here = resident(layer);
            let out_tf32 = resident(layer + 1);
            let x = if layer == 0 {
                input
            } else {
                layer_out[(layer - 1) % 2]
            };
            let out = match final_out {
                Some(f) if layer + 1 == shape.layers => f,
                _ => layer_out[layer % 2],
            };
            // This layer's block of the final states: [2, batch, 128] at 2 * layer * batch * 128.
            let state = Some(launch::StateSpans {
                h: state_h
                    .offset(layer * layer_state_len, 4)
                    .ok_or_else(|| missing("the final states"))?,
                c: state_c
                    .offset(layer * layer_state_len, 4)
                    .ok_or_else(|| missing("the final states"))?,
            });
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
            // The warpgroup kernels read the swizzled split image (the TF32 one its high parts),
            // the mma.sync TF32 kernel the gate-major TF32-rounded weights, the mma.sync 3xTF32
            // ones the K-major weights split into high parts and remainders, the FP32 SIMT ones
            // the K-major FP32 weights.
            let weights_of = |d: usize| {
                piece(if resident_here {
                    offsets[d].input_tf32_wgmma
                } else if tile.needs_wgmma() {
                    offsets[d].input_x3_wgmma
                } else if tile.is_tf32() {
                    offsets[d].input_tf32
                } else if tile.is_tf32x3() {
                    offsets[d].input_x3
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
            // Each launcher owns its tiles: projection_tf32x3.cu's entries (3xTF32 and the
            // warpgroup ones, the resident TF32 one among them), the mma.sync TF32 tile, the FP32
            // SIMT tiles.
            if resident_here {
                launch::projection_tf32x3::launch_resident(
                    k.get(KernelId::ProjectionTf32Resident)?,
                    main,
                    cc,
                    self.device.info.facts.sm_count,
                    &args,
                    layer == 0,
                )?;
            } else if launch::projection_tf32x3::tile_kernel(tile).is_some() {
                launch::projection_tf32x3::launch(
                    proj_fn,
                    main,
                    cc,
                    self.device.info.facts.sm_count,
                    tile,
                    &args,
                )?;
            } else if tile.is_tf32() {
                launch::projection_tf32::launch(proj_fn, main, cc, &args)?;
            } else {
                launch::projection::launch(proj_fn, main, tile, &args)?;
            }
            self.phases.projected(layer, main)?;
            let proj_of = |d: Direction| {
                proj.offset(d.index() * b.proj_direction_stride, 4)
                    .ok_or_else(|| missing("the projection's reverse half"))
            };

            let last_layer = layer + 1 == shape.layers;
            if last_layer && region.progress.is_some() {
                // Captured into a host pass's graph, the record must be a node of its own (an
                // ordinary record under capture only orders the capture; the host then waits on
                // an event never recorded).
                launch::sys::record_event(&st.last_layer, main)
                    .map_err(CudaError::driver("recording the last layer's start"))?;
            }
            if let Some(cluster) = plan.schedule.choice.cluster() {
                let id = match self.fixed_recurrence_for(plan) {
                    Some(id) => id,
                    None => cluster_kernel(cluster.cluster_size, cluster.windows_per_cluster)?,
                };
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
                        state,
                        progress: region.progress.filter(|_| last_layer),
                        out_tf32,
                        tf32_numerics: tile.tf32_numerics(),
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
                        state,
                        tf32_numerics: tile.tf32_numerics(),
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
                        state,
                        tf32_numerics: tile.tf32_numerics(),
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
    /// The event a foreign pass records on the caller's stream (created at prepare time).
    ///
    /// # Errors
    /// [`CoreError::NotPrepared`].
    pub(crate) fn foreign_event(&self) -> Result<&cudarc::driver::CudaEvent, CudaError> {
        Ok(&self
            .prepared
            .as_ref()
            .ok_or(CoreError::NotPrepared)?
            .foreign_joined)
    }
    /// Waits for whatever a failed pass left queued on either stream, so the next pass (whose
    /// clear rewrites the exchange) never overlaps it. Errors here are the failed pass's own.
    pub(crate) fn drain(&self) {
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
    pub(crate) fn finish(&mut self, summary: ForwardSummary) -> Result<(), CudaError> {
        self.finish_reading(summary, false)
    }

    /// [`CudaBackend::finish`]; with `always_read`, the error words are read even after a
    /// resident pass (a pipelined pass's chunks may run different kinds).
    pub(crate) fn finish_reading(
        &mut self,
        summary: ForwardSummary,
        always_read: bool,
    ) -> Result<(), CudaError> {
        self.last = Some(summary);
        let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
        let kernel = match summary.recurrence {
            RecurrenceKind::Resident if !always_read => {
                return self
                    .device
                    .main
                    .synchronize()
                    .map_err(CudaError::driver("finishing a forward pass"));
            }
            RecurrenceKind::Resident => launch::recurrence_resident::KERNEL,
            RecurrenceKind::Tiled => launch::recurrence_tiled::KERNEL,
            RecurrenceKind::Wide => launch::recurrence_wide::KERNEL,
            RecurrenceKind::Cluster => match (
                self.fixed_recurrence_for(&summary.plan),
                summary.plan.schedule.choice.cluster(),
            ) {
                (Some(fixed), Some(_)) => fixed.kernel().entry,
                (None, Some(c)) => {
                    cluster_kernel(c.cluster_size, c.windows_per_cluster)?
                        .kernel()
                        .entry
                }
                (_, None) => "bilstm_recurrence_cluster",
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

    /// The entry point of the fixed-point recurrence (`numerics.cuh` section 9) that the last
    /// forward pass ran instead of its schedule's cluster kernel (the plan's `fixed_point` pick,
    /// or what [`FIXED_RECURRENCE_ENV`] or the test hook forced), or `None` (an FP32 pass, a
    /// device without clusters, a non-cluster recurrence, the switch `off`, or no pass yet).
    /// The summary ([`CudaBackend::last_forward`]) describes the plan, whose `fixed_point`
    /// decision names the same kernel unless the switch forced another.
    ///
    /// [`FIXED_RECURRENCE_ENV`]: crate::FIXED_RECURRENCE_ENV
    pub fn last_fixed_recurrence(&self) -> Option<&'static str> {
        let s = self.last?;
        self.fixed_recurrence_for(&s.plan)
            .map(|id| id.kernel().entry)
    }

    /// The fixed-point recurrence a pass of `plan` runs instead of its cluster kernel: the
    /// plan's `fixed_point` pick, unless [`CudaBackend::fixed_recurrence`] says `off` (none) or
    /// names a kernel (that one, for any cluster plan with TF32 numerics: the kernels implement
    /// TF32 mode only); none for a plan that is not a cluster plan.
    fn fixed_recurrence_for(&self, plan: &Plan) -> Option<KernelId> {
        plan.schedule.choice.cluster()?;
        match self.fixed_recurrence {
            Some(FixedRecurrence::Off) => None,
            Some(FixedRecurrence::Kernel(id)) => {
                plan.projection.choice.tf32_numerics().then_some(id)
            }
            Some(FixedRecurrence::Auto) | None => plan.fixed_point.choice.map(fixed_kernel_for),
        }
    }
}

/// The fixed-point kernel of a pick (`bilstm_core::fixed::pick`): the one-window integer-pipe
/// kernel of that cluster size, the 2- or 4-window tensor-core kernel of that cluster size, or the
/// 8-window tile kernel (`bilstm_recurrence_fixed8`, one CTA a tile), found by launch kind as
/// [`cluster_kernel`] finds the scheduled ones (`fixed8` should a pick name a size
/// no kernel has; the unit test below checks that none does).
fn fixed_kernel_for(pick: FixedPick) -> KernelId {
    let (size, windows) = pick.launch();
    find_cluster_kernel(size, windows, true).unwrap_or(KernelId::RecurrenceFixed8)
}

/// The kernel of [`bilstm_kernels::ALL`] launched as clusters of `size` CTAs running `windows`
/// windows each, among the fixed-point recurrences (`fixed_point`) or the others.
fn find_cluster_kernel(size: usize, windows: usize, fixed_point: bool) -> Option<KernelId> {
    bilstm_kernels::ALL
        .into_iter()
        .filter(|id| id.is_fixed_point() == fixed_point)
        .find(|id| match id.kernel().launch {
            bilstm_kernels::LaunchKind::Cluster {
                size: s,
                windows: w,
            } => s as usize == size && w as usize == windows,
            _ => false,
        })
}

/// The cluster kernel of `size` CTAs per cluster running `windows` windows each: the entry of
/// [`bilstm_kernels::ALL`] whose launch kind says so.
///
/// # Errors
/// [`CudaError::Internal`] for a shape no kernel is built for (plans only pick those
/// `bilstm_core::geometry::cluster_kernel_built` accepts).
fn cluster_kernel(size: usize, windows: usize) -> Result<KernelId, CudaError> {
    // The fixed-point recurrences are launched as clusters too; the plan's `fixed_point`
    // decision (or FIXED_RECURRENCE_ENV) picks them, never the schedule.
    find_cluster_kernel(size, windows, false).ok_or_else(|| CudaError::Internal {
        what: format!("no cluster kernel of {size} CTAs and {windows} windows"),
    })
}

#[cfg(test)]
mod tests {
    use super::{cluster_kernel, find_cluster_kernel, fixed_kernel_for};
    use bilstm_core::fixed::pick;
    use bilstm_core::geometry::cluster_kernel_built;
    use bilstm_kernels::KernelId;
    use bilstm_kernels::LaunchKind;

    /// Core's list of cluster shapes and the kernels built agree: every shape core may plan has
    /// a kernel of exactly that launch, and no other shape has one.
    #[test]
    fn every_plannable_cluster_shape_has_its_kernel() {
        for size in 1..=8 {
            for windows in 1..=64 {
                let found = cluster_kernel(size, windows);
                assert_eq!(
                    found.is_ok(),
                    cluster_kernel_built(size, windows),
                    "{size} CTAs, {windows} windows"
                );
                if let Ok(id) = found {
                    assert_eq!(
                        id.kernel().launch,
                        LaunchKind::Cluster {
                            size: size as u32,
                            windows: windows as u32
                        }
                    );
                }
            }
        }
    }

    /// Every pick names a fixed-point kernel of exactly its launch (no fallback taken), whose
    /// entry point is `bilstm_recurrence_` plus the pick's name: on the H200's 132 SMs and on
    /// smaller and larger GPUs, at every batch up to 2,048; and the H200's kernel at each band.
    #[test]
    fn every_auto_pick_has_its_fixed_point_kernel() {
        for sms in [16, 46, 108, 132, 170] {
            for batch in 1..=2048 {
                let p = pick(batch, sms);
                let (size, windows) = p.launch();
                let id = find_cluster_kernel(size, windows, true)
                    .unwrap_or_else(|| panic!("{p:?} on {sms} SMs: no kernel"));
                assert!(id.is_fixed_point());
                assert_eq!(fixed_kernel_for(p), id);
                assert_eq!(
                    id.kernel().entry.strip_prefix("bilstm_recurrence_"),
                    Some(p.name()),
                    "{p:?}"
                );
            }
        }
        for (batch, want) in [
            (1, KernelId::RecurrenceFixed1C8),
            (12, KernelId::RecurrenceFixed1C4),
            (16, KernelId::RecurrenceFixed2C4),
            (33, KernelId::RecurrenceFixed1C2),
            (34, KernelId::RecurrenceFixed4C4),
            (64, KernelId::RecurrenceFixed4C2),
            (256, KernelId::RecurrenceFixed4),
            (1024, KernelId::RecurrenceFixed8),
        ] {
            assert_eq!(fixed_kernel_for(pick(batch, 132)), want, "batch {batch}");
        }
    }
}
