//! Plan selection: pure functions of device facts, kernel resources, stack shape, batch and
//! math mode.
//!
//! [`select`] only composes; each decision is one pure function in its own file, with its own
//! tests and named thresholds:
//!
//! | decision | function | rule |
//! |---|---|---|
//! | recurrence kernel | [`choose_recurrence`] | cluster from 9.0 where a cluster fits ([`CLUSTER_MIN_COMPUTE_CAPABILITY`]), else resident where it fits an SM (measured on 9.0: [`MEASURED_ARCHITECTURES`]), else tiled from [`TILED_MIN_BATCH`] windows, wide below |
//! | cluster size | [`choose_cluster_size`] | 4 CTAs while each CTA of all `2 * batch` clusters has an SM of its own ([`CLUSTER_ONE_WAVE_SIZE`]), else 2 ([`CLUSTER_WAVES_SIZE`]) (measured on 9.0) |
//! | windows per cluster | [`choose_cluster_windows`] | 1 while all one-window clusters fit one wave, else (2-CTA clusters) 2, or a window tile of 8 or 16 with R in shared memory where its waves cost less (measured on 9.0) |
//! | its schedule | [`choose_coop_schedule`], [`choose_cluster_schedule`] | [`crate::coop`]: tile heights, launches within the co-resident capacity; clusters in waves |
//! | directions at once | [`choose_streams`] | only when both directions fit the capacity together |
//! | projection tile | [`choose_projection_tile`] | TF32 where allowed in TF32 mode, else 3xTF32 at every batch on [`TF32X3_ARCHITECTURES`] (pending measurement), else 64x64 on [`SMALL_TILE_ARCHITECTURES`] (measured on 9.0), elsewhere 64x64 below [`LARGE_TILE_MIN_ROWS`] rows, 128x128 from there |
//!
//! A [`Plan`] is plain data (as RustFFT's recipes are): each decision keeps its choice and a
//! [`Reason`], and `Display` prints one line per decision:
//!
//! ```
//! use bilstm_core::{MathMode, StackShape, device::table, plan};
//! let h200 = table::find("h200").unwrap();
//! let p = plan::select(&h200.facts, &plan::KernelResources::nominal(), &StackShape::pyannote(), 32, MathMode::Fp32)
//!     .unwrap();
//! assert_eq!(p.recurrence.choice, plan::RecurrenceKind::Cluster);
//! assert_eq!(p.cluster_schedule().map(|s| s.cluster_size), Some(2));
//! for line in p.explain() {
//!     println!("{line}");
//! }
//! ```
//!
//! `select` takes the [`StackShape`] rather than a bare frame count: the projection tile
//! depends on `batch * frames` rows, and the shape is validated (hidden size 128) in the same
//! step, so a backend passes what it was prepared with.

pub mod pipeline;
pub mod projection;
pub mod reason;
pub mod recurrence;
pub mod schedule;
pub mod streams;
pub mod table;

#[cfg(test)]
mod tests;

use core::fmt;

use crate::coop::CoopSchedule;
use crate::device::{DeviceFacts, DeviceQuery};
use crate::error::{CoreError, checked_mul};
use crate::fixed::{self, FixedPick};
use crate::geometry::{
    BLOCK_THREADS, CLUSTER_SIZES, CLUSTER_THREADS, CLUSTER_TILE_DYNAMIC_SHARED,
    CLUSTER_TILE_WINDOWS, HIDDEN, PROJ_K_TILE, PROJ_LARGE_TILE, PROJ_SMALL_TILE,
    PROJ_TF32_SHARED_BYTES, PROJ_TF32X3_SHARED_BYTES, PROJ_TF32X3_SMALL_SHARED_BYTES,
    PROJ_WG_SHARED_BYTES, QUAD_H_ROW_FLOATS, RESIDENT_SHARED_BYTES, RESIDENT_THREADS,
};
use crate::occupancy::{KernelUsage, Occupancy, blocks_per_sm};
use crate::shape::{MathMode, StackShape};

pub use projection::{
    LARGE_TILE_MIN_ROWS, ProjectionTile, SMALL_TILE_ARCHITECTURES,
    TENSOR_CORE_MIN_COMPUTE_CAPABILITY, TF32_ARCHITECTURES, TF32X3_ARCHITECTURES,
    TF32X3_LARGE_MIN_ROWS, Tf32Refusal, WGMMA_ARCHITECTURES, check_forced_projection,
    choose_projection_tile, tf32x3_tile_for, tf32x3_tile_for_rows, wgmma_available,
};
pub use reason::{FixedPointRefusal, Reason};
pub use recurrence::{
    CLUSTER_MIN_COMPUTE_CAPABILITY, CLUSTER_ONE_WAVE_SIZE, CLUSTER_WAVE_LAYER_US,
    CLUSTER_WAVES_SIZE, CapacitySource, ClusterCapacity, ClusterRefusal, ClusterWindows,
    MEASURED_ARCHITECTURES, RESIDENT_MIN_BLOCKS_PER_SM, RecurrenceOccupancy, TILED_MIN_BATCH,
    WindowsDecision, check_forced_cluster_size, check_forced_cluster_windows,
    check_forced_recurrence, choose_cluster_size, choose_cluster_windows, choose_recurrence,
    cluster_capacity,
};
pub use schedule::{
    ClusterSchedule, RecurrenceSchedule, choose_cluster_schedule, choose_coop_schedule,
};
pub use streams::choose_streams;
pub use table::{PlanRow, ScheduleSummary, TABLE_HEADING, TableHeading};

/// Which recurrence kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecurrenceKind {
    /// Cooperative, 16 blocks per tile of 8/16/32 windows.
    Wide,
    /// Cooperative, 8 blocks per 8-window tile.
    Tiled,
    /// One block per (window, direction), R on one SM.
    Resident,
    /// One thread-block cluster of 2 or 4 CTAs per (window, direction), R in the cluster's
    /// registers (compute capability 9.0 and later); not cooperative: clusters run in waves.
    Cluster,
}

impl RecurrenceKind {
    /// Every kind.
    pub const ALL: [RecurrenceKind; 4] = [
        RecurrenceKind::Wide,
        RecurrenceKind::Tiled,
        RecurrenceKind::Resident,
        RecurrenceKind::Cluster,
    ];

    /// Whether the kind needs a cooperative launch (all its blocks resident at once).
    pub const fn is_cooperative(self) -> bool {
        matches!(self, RecurrenceKind::Wide | RecurrenceKind::Tiled)
    }

    /// The kind `Display` names `name` (`"wide"`, `"tiled"`, `"resident"`, `"cluster"`; any
    /// case), or `None`.
    pub fn parse(name: &str) -> Option<RecurrenceKind> {
        RecurrenceKind::ALL
            .into_iter()
            .find(|k| name.trim().eq_ignore_ascii_case(k.name()))
    }

    /// The kind's name, as `Display` writes it.
    pub const fn name(self) -> &'static str {
        match self {
            RecurrenceKind::Wide => "wide",
            RecurrenceKind::Tiled => "tiled",
            RecurrenceKind::Resident => "resident",
            RecurrenceKind::Cluster => "cluster",
        }
    }
}

impl fmt::Display for RecurrenceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A decision and why it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision<T> {
    /// What was chosen.
    pub choice: T,
    /// Why.
    pub reason: Reason,
}

/// What one block of each kernel uses: the input to the occupancy rules.
///
/// [`KernelResources::nominal`] gives design estimates so plans can be computed for any table
/// entry; the CUDA backend replaces them with the compiled kernels' figures
/// (`cudaFuncAttributes`) before selecting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelResources {
    /// The wide recurrence.
    pub wide: KernelUsage,
    /// The tiled recurrence.
    pub tiled: KernelUsage,
    /// The resident recurrence.
    pub resident: KernelUsage,
    /// The FP32 64x64 projection.
    pub projection_small: KernelUsage,
    /// The FP32 128x128 projection.
    pub projection_large: KernelUsage,
    /// The TF32 128x256 projection.
    pub projection_tf32: KernelUsage,
    /// The 3xTF32 (FP32-accurate) 128x128 projection.
    pub projection_tf32x3: KernelUsage,
    /// The 3xTF32 (FP32-accurate) 64x128 projection.
    pub projection_tf32x3_small: KernelUsage,
    /// The 3xTF32 (FP32-accurate) 128x128 projection on warpgroup MMA (9.0).
    pub projection_tf32x3_wgmma: KernelUsage,
    /// The TF32 128x128 projection on warpgroup MMA (9.0).
    pub projection_tf32_wgmma: KernelUsage,
    /// The cluster recurrence with 2-CTA clusters (one CTA's usage).
    pub cluster2: KernelUsage,
    /// The cluster recurrence with 4-CTA clusters (one CTA's usage).
    pub cluster4: KernelUsage,
    /// Clusters of each size in [`CLUSTER_SIZES`] (same index) the device holds at once, as the
    /// driver's `cuOccupancyMaxActiveClusters` answers for the compiled kernel: `None` when not
    /// measured (core then estimates it, see [`cluster_capacity`]), `Some(0)` when that size
    /// cannot run on the device.
    pub max_active_clusters: [Option<u32>; CLUSTER_SIZES.len()],
    /// The window-tile cluster kernels (2-CTA clusters of each of
    /// [`crate::geometry::CLUSTER_TILE_WINDOWS`], same index; one CTA's usage).
    pub cluster_tiles: [KernelUsage; CLUSTER_TILE_WINDOWS.len()],
    /// The driver's co-resident clusters of each window-tile kernel (same index), as
    /// [`KernelResources::max_active_clusters`].
    pub tile_max_active_clusters: [Option<u32>; CLUSTER_TILE_WINDOWS.len()],
}

/// Registers per thread of the window-tile cluster kernels of 4, 8 and 16 windows (ptxas 13.0
/// for sm_90a: 254, 254 and 181 in session 8; the quads 228 and 248 since their 8-lane row
/// groups, 2026-12-02 session 10; 230 and 254 since the half-step pipeline, the advanced
/// pointers and the ftz sigmoid, session 11; the 4-window quads 232 since session 20, the
/// 8-window quads 245 since their push targets are mapped once and the gates loaded after each
/// cell, 2026-12-03 session 21, the 16-window tile 183 since session 20; no spills): one
/// 256-thread CTA per SM (the register quads by their registers, the 16-window tile by its
/// [`CLUSTER_TILE_SHARED_BYTES`](crate::geometry::CLUSTER_TILE_SHARED_BYTES) of dynamic shared memory).
pub const CLUSTER_TILE_REGISTERS: [u32; CLUSTER_TILE_WINDOWS.len()] = [232, 245, 183];

/// Registers per thread of the warpgroup-MMA 3xTF32 projection (`bilstm_projection_tf32x3_wgmma`,
/// ptxas 13.0 for sm_90a, 2026-12-02 session 9: 216 since the persistent pipeline; 250 before):
/// one 256-thread block per SM, which its [`PROJ_WG_SHARED_BYTES`] allow anyway.
pub const PROJ_WG_REGISTERS: u32 = 216;
/// Registers per thread of its TF32 twin (`bilstm_projection_tf32_wgmma`, ptxas 13.0 for
/// sm_90a, 2026-12-02 session 9: 124 since the persistent pipeline; 144 in session 8, 176
/// before it copied only the high part of the weight image; 186 since its m64n256 products,
/// session 11): also one block per SM (the same shared bytes).
pub const PROJ_WG_TF32_REGISTERS: u32 = 186;

/// Registers per thread of the compiled wide recurrence (the H200 driver, 2026-12-01, and
/// ptxas 13.0 for sm_90: 254 since the re-polling load phase, the one-window path and the
/// final-state stores; sm_80: 251), with its static shared memory [`WIDE_STATIC_SHARED_BYTES`]: one block per SM on every
/// table entry.
pub const WIDE_REGISTERS: u32 = 254;
/// Static shared bytes of the compiled wide recurrence: two hidden-state stages of 32 windows x
/// 152 floats, the rows of TF32 mode's padded layout (144 floats, so that its 8-lane groups read
/// h without bank conflicts) plus 8; FP32 mode uses rows of 128 + 8 floats of the same array
/// (ptxas 13.0 for sm_90, 2026-12-03; 34,816 before the padded rows, measured on the H200 by
/// the driver, 2026-11-29).
pub const WIDE_STATIC_SHARED_BYTES: usize = 38_912;
/// Registers per thread of the compiled tiled recurrence (the H200 driver and ptxas 13.0 for
/// sm_90: 126 with the shared coop step code and the final-state stores, 2026-12-01; sm_80: 124;
/// `__launch_bounds__(256, 2)` caps it at 128): two blocks per SM on every table entry.
pub const TILED_REGISTERS: u32 = 126;
/// Static shared bytes of the compiled tiled recurrence: two hidden-state stages of 8 windows x
/// (128 + 16) floats, in both modes (TF32 mode's padded rows are 144 floats too).
pub const TILED_STATIC_SHARED_BYTES: usize = 9_216;
/// Registers per thread of the compiled resident recurrence (ptxas 13.0 for sm_90: 240 with the
/// final-state stores, 2026-12-01; 238 before, the H200 driver's figure of 2026-11-29; 128 of
/// them hold half of R): one 256-thread block per SM, which its 134,144 dynamic shared bytes
/// allow anyway.
pub const RESIDENT_REGISTERS: u32 = 240;
/// Registers per thread of the cluster recurrence with 2-CTA clusters: the H200 driver
/// (`CU_FUNC_ATTRIBUTE_NUM_REGS`, 2026-12-01, ptxas 13.0 for sm_90): 198 with the final-state
/// stores (128 of them hold R).
/// One 256-thread CTA per SM; the driver reported 66 co-resident 2-CTA clusters on the H200.
/// The two-window kernel (`bilstm_recurrence_cluster2w2`) uses 227, also one CTA per SM (66
/// clusters).
pub const CLUSTER2_REGISTERS: u32 = 198;
/// Registers per thread of the cluster recurrence with 4-CTA clusters: the H200 driver
/// (2026-12-01): 118 (`__launch_bounds__(256, 2)`: two CTAs per SM; the driver reported 62
/// co-resident 4-CTA clusters on the H200).
pub const CLUSTER4_REGISTERS: u32 = 118;
/// Static shared bytes of the one-window cluster recurrence (either size): the double-buffered
/// hidden vector as two padded rows of [`QUAD_H_ROW_FLOATS`] floats (TF32 mode's 8-lane groups
/// read it without bank conflicts) plus two 8-byte mbarriers: 1,296. A design figure; the
/// driver's replaces it.
pub const CLUSTER_STATIC_SHARED_BYTES: usize =
    2 * QUAD_H_ROW_FLOATS * F32_BYTES + 2 * MBARRIER_BYTES;

/// Bytes of one mbarrier object (PTX ISA: `.b64`).
const MBARRIER_BYTES: usize = 8;

/// Bytes of an f32.
const F32_BYTES: usize = 4;

impl KernelResources {
    /// The kernels' figures as compiled for sm_90 (ptxas 13.0), so that plans for table
    /// entries match what the CUDA backend computes from the real kernels (the occupancy they
    /// give is the same on every table architecture):
    ///
    /// - wide: 256 threads, [`WIDE_REGISTERS`], [`WIDE_STATIC_SHARED_BYTES`] static;
    /// - tiled: 256 threads, [`TILED_REGISTERS`], [`TILED_STATIC_SHARED_BYTES`] static;
    /// - resident: [`RESIDENT_THREADS`] threads, [`RESIDENT_REGISTERS`],
    ///   [`RESIDENT_SHARED_BYTES`] dynamic;
    /// - FP32 projections: 256 threads, double-buffered K tiles of 8 in static shared
    ///   (64x64: 64 registers, 8 KiB; 128x128: 128 registers, 16 KiB; design estimates);
    /// - TF32 projection: 256 threads, 128 registers, [`PROJ_TF32_SHARED_BYTES`] dynamic
    ///   (design estimate);
    /// - 3xTF32 projection: 256 threads; the 128x128 tile 214 registers and
    ///   [`PROJ_TF32X3_SHARED_BYTES`] dynamic, the 64x128 tile 120 registers and
    ///   [`PROJ_TF32X3_SMALL_SHARED_BYTES`] (ptxas 13.0, sm_90: 214 / 120; sm_80: 204 / 119);
    /// - cluster recurrence: [`CLUSTER_THREADS`] threads per CTA, [`CLUSTER2_REGISTERS`] or
    ///   [`CLUSTER4_REGISTERS`] (measured), [`CLUSTER_STATIC_SHARED_BYTES`] static, no dynamic,
    ///   and no driver figure of the cluster capacity (`max_active_clusters` all
    ///   `None`: plans estimate it);
    /// - window-tile cluster kernels: [`CLUSTER_THREADS`] threads, [`CLUSTER_TILE_REGISTERS`],
    ///   [`CLUSTER_TILE_STATIC_SHARED_BYTES`] static, [`CLUSTER_TILE_DYNAMIC_SHARED`] dynamic (the
    ///   16-window tile's [`CLUSTER_TILE_SHARED_BYTES`](crate::geometry::CLUSTER_TILE_SHARED_BYTES)), no driver figure
    ///   (`tile_max_active_clusters` all `None`).
    pub const fn nominal() -> Self {
        const fn usage(
            threads: usize,
            registers: u32,
            static_bytes: usize,
            dynamic_bytes: usize,
        ) -> KernelUsage {
            KernelUsage {
                threads: threads as u32,
                registers_per_thread: registers,
                static_shared_bytes: static_bytes as u32,
                dynamic_shared_bytes: dynamic_bytes as u32,
            }
        }
        // Two K tiles (A and B) of PROJ_K_TILE x edge, double-buffered.
        const fn projection_static(edge: usize) -> usize {
            2 * 2 * PROJ_K_TILE * edge * F32_BYTES
        }
        KernelResources {
            wide: usage(BLOCK_THREADS, WIDE_REGISTERS, WIDE_STATIC_SHARED_BYTES, 0),
            tiled: usage(BLOCK_THREADS, TILED_REGISTERS, TILED_STATIC_SHARED_BYTES, 0),
            resident: usage(
                RESIDENT_THREADS,
                RESIDENT_REGISTERS,
                0,
                RESIDENT_SHARED_BYTES,
            ),
            projection_small: usage(BLOCK_THREADS, 64, projection_static(PROJ_SMALL_TILE), 0),
            projection_large: usage(BLOCK_THREADS, 128, projection_static(PROJ_LARGE_TILE), 0),
            projection_tf32: usage(BLOCK_THREADS, 128, 0, PROJ_TF32_SHARED_BYTES),
            projection_tf32x3: usage(BLOCK_THREADS, 214, 0, PROJ_TF32X3_SHARED_BYTES),
            projection_tf32x3_small: usage(BLOCK_THREADS, 120, 0, PROJ_TF32X3_SMALL_SHARED_BYTES),
            projection_tf32x3_wgmma: usage(
                BLOCK_THREADS,
                PROJ_WG_REGISTERS,
                0,
                PROJ_WG_SHARED_BYTES,
            ),
            projection_tf32_wgmma: usage(
                BLOCK_THREADS,
                PROJ_WG_TF32_REGISTERS,
                0,
                PROJ_WG_SHARED_BYTES,
            ),
            cluster2: usage(
                CLUSTER_THREADS,
                CLUSTER2_REGISTERS,
                CLUSTER_STATIC_SHARED_BYTES,
                0,
            ),
            cluster4: usage(
                CLUSTER_THREADS,
                CLUSTER4_REGISTERS,
                CLUSTER_STATIC_SHARED_BYTES,
                0,
            ),
            max_active_clusters: [None; CLUSTER_SIZES.len()],
            cluster_tiles: [
                usage(
                    CLUSTER_THREADS,
                    CLUSTER_TILE_REGISTERS[0],
                    CLUSTER_TILE_STATIC_SHARED_BYTES[0],
                    CLUSTER_TILE_DYNAMIC_SHARED[0],
                ),
                usage(
                    CLUSTER_THREADS,
                    CLUSTER_TILE_REGISTERS[1],
                    CLUSTER_TILE_STATIC_SHARED_BYTES[1],
                    CLUSTER_TILE_DYNAMIC_SHARED[1],
                ),
                usage(
                    CLUSTER_THREADS,
                    CLUSTER_TILE_REGISTERS[2],
                    CLUSTER_TILE_STATIC_SHARED_BYTES[2],
                    CLUSTER_TILE_DYNAMIC_SHARED[2],
                ),
            ],
            tile_max_active_clusters: [None; CLUSTER_TILE_WINDOWS.len()],
        }
    }

    /// One CTA's usage of the cluster kernel for clusters of `cluster_size` CTAs running
    /// `windows` windows each: the register kernels' ([`KernelResources::cluster`]) for 1 or 2
    /// windows, a window-tile kernel's for one of [`CLUSTER_TILE_WINDOWS`] (2-CTA clusters);
    /// `None` for a combination not built.
    pub const fn cluster_kernel(
        &self,
        cluster_size: usize,
        windows: usize,
    ) -> Option<&KernelUsage> {
        match tile_slot(windows) {
            Some(i) if cluster_size == 2 => Some(&self.cluster_tiles[i]),
            Some(_) => None,
            None => self.cluster(cluster_size),
        }
    }

    /// The driver's count of co-resident clusters of the window-tile kernel of `windows`
    /// windows, `None` when not measured or not a tile.
    pub const fn driver_tile_clusters(&self, windows: usize) -> Option<u32> {
        match tile_slot(windows) {
            Some(i) => self.tile_max_active_clusters[i],
            None => None,
        }
    }

    /// The usage of `kind`'s recurrence kernel. For [`RecurrenceKind::Cluster`], which has one
    /// kernel per cluster size, the largest size's ([`KernelResources::cluster4`]); use
    /// [`KernelResources::cluster`] (or [`Plan::recurrence_usage`]) for a given size.
    pub const fn recurrence(&self, kind: RecurrenceKind) -> &KernelUsage {
        match kind {
            RecurrenceKind::Wide => &self.wide,
            RecurrenceKind::Tiled => &self.tiled,
            RecurrenceKind::Resident => &self.resident,
            RecurrenceKind::Cluster => &self.cluster4,
        }
    }

    /// One CTA's usage of the cluster recurrence for clusters of `cluster_size` CTAs, or `None`
    /// for a size not in [`CLUSTER_SIZES`].
    pub const fn cluster(&self, cluster_size: usize) -> Option<&KernelUsage> {
        match cluster_size {
            2 => Some(&self.cluster2),
            4 => Some(&self.cluster4),
            _ => None,
        }
    }

    /// The driver's count of co-resident clusters of `cluster_size` CTAs
    /// ([`KernelResources::max_active_clusters`]), `None` when not measured or for a size not in
    /// [`CLUSTER_SIZES`].
    pub const fn driver_clusters(&self, cluster_size: usize) -> Option<u32> {
        match cluster_slot(cluster_size) {
            Some(i) => self.max_active_clusters[i],
            None => None,
        }
    }

    /// The usage of `tile`'s projection kernel.
    pub const fn projection(&self, tile: ProjectionTile) -> &KernelUsage {
        match tile {
            ProjectionTile::Small64 => &self.projection_small,
            ProjectionTile::Large128 => &self.projection_large,
            ProjectionTile::Tf32 => &self.projection_tf32,
            ProjectionTile::Tf32x3 => &self.projection_tf32x3,
            ProjectionTile::Tf32x3Small => &self.projection_tf32x3_small,
            ProjectionTile::Tf32x3Wgmma => &self.projection_tf32x3_wgmma,
            ProjectionTile::Tf32Wgmma => &self.projection_tf32_wgmma,
        }
    }
}

/// Static shared bytes of the window-tile kernels (same index as [`CLUSTER_TILE_WINDOWS`]): two
/// hidden-state slots of `windows` rows plus two mbarriers a quad (the register quads: one quad
/// for 4 windows, two for 8; rows of [`QUAD_H_ROW_FLOATS`]) or two (the 16-window tile: rows of
/// `HIDDEN`); ptxas: 5,136 / 10,272 / 16,400.
pub const CLUSTER_TILE_STATIC_SHARED_BYTES: [usize; CLUSTER_TILE_WINDOWS.len()] = [
    2 * QUAD_H_ROW_FLOATS * CLUSTER_TILE_WINDOWS[0] * F32_BYTES + 2 * MBARRIER_BYTES,
    2 * QUAD_H_ROW_FLOATS * CLUSTER_TILE_WINDOWS[1] * F32_BYTES + 4 * MBARRIER_BYTES,
    2 * HIDDEN * CLUSTER_TILE_WINDOWS[2] * F32_BYTES + 2 * MBARRIER_BYTES,
];

/// The position of `windows` in [`CLUSTER_TILE_WINDOWS`].
pub(crate) const fn tile_slot(windows: usize) -> Option<usize> {
    let mut i = 0;
    while i < CLUSTER_TILE_WINDOWS.len() {
        if CLUSTER_TILE_WINDOWS[i] == windows {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The position of `cluster_size` in [`CLUSTER_SIZES`].
pub(crate) const fn cluster_slot(cluster_size: usize) -> Option<usize> {
    let mut i = 0;
    while i < CLUSTER_SIZES.len() {
        if CLUSTER_SIZES[i] == cluster_size {
            return Some(i);
        }
        i += 1;
    }
    None
}

impl Default for KernelResources {
    fn default() -> Self {
        Self::nominal()
    }
}

/// Choices forced past the rules (for benchmarks and bitwise cross-checks between kernels).
/// A forced choice is still checked: it must be able to run on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Overrides {
    /// Run this recurrence kernel.
    pub recurrence: Option<RecurrenceKind>,
    /// Run this projection kernel.
    pub projection: Option<ProjectionTile>,
    /// Run the cluster recurrence with clusters of this many CTAs (one of [`CLUSTER_SIZES`]).
    /// Only with the cluster recurrence, chosen by the rules or forced through
    /// [`Overrides::recurrence`]; otherwise [`select_with`] refuses it.
    pub cluster_size: Option<usize>,
    /// Run this many windows per cluster (1, or 2 with 2-CTA clusters). Only with the cluster
    /// recurrence; otherwise [`select_with`] refuses it.
    pub cluster_windows: Option<usize>,
}

/// A recurrence as a command line names it, to force it through [`Overrides`]: `auto` (the
/// plan's own choice), a kind (`wide`, `tiled`, `resident`, `cluster`: the cluster size by the
/// rules), the cluster recurrence with a given size and one window per cluster (`cluster2`,
/// `cluster4`) or with two windows per 2-CTA cluster (`cluster2w2`). Any case.
///
/// ```
/// use bilstm_core::plan::{ForcedRecurrence, Overrides, RecurrenceKind};
/// let f = ForcedRecurrence::parse("cluster4").unwrap();
/// let o = f.apply(Overrides::default());
/// assert_eq!((o.recurrence, o.cluster_size), (Some(RecurrenceKind::Cluster), Some(4)));
/// assert_eq!(f.to_string(), "cluster4");
/// assert_eq!(ForcedRecurrence::parse("cluster3"), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ForcedRecurrence {
    /// The kind to force (`None`: the plan's own).
    pub kind: Option<RecurrenceKind>,
    /// The cluster size to force (only with [`RecurrenceKind::Cluster`]).
    pub cluster_size: Option<usize>,
    /// The windows per cluster to force (only with a forced cluster size).
    pub cluster_windows: Option<usize>,
}

impl ForcedRecurrence {
    /// Every name [`ForcedRecurrence::parse`] accepts.
    pub const NAMES: [&'static str; 11] = [
        "auto",
        "wide",
        "tiled",
        "resident",
        "cluster",
        "cluster2",
        "cluster4",
        "cluster2w2",
        "cluster2w4",
        "cluster2w8",
        "cluster2w16",
    ];

    /// Parses `auto`, a kind name or `cluster<size>` with a size of [`CLUSTER_SIZES`]; `None`
    /// for anything else.
    pub fn parse(name: &str) -> Option<ForcedRecurrence> {
        let name = name.trim();
        if name.eq_ignore_ascii_case("auto") {
            return Some(ForcedRecurrence::default());
        }
        if let Some(kind) = RecurrenceKind::parse(name) {
            return Some(ForcedRecurrence {
                kind: Some(kind),
                cluster_size: None,
                cluster_windows: None,
            });
        }
        let prefix = RecurrenceKind::Cluster.name();
        let rest = name
            .get(..prefix.len())
            .filter(|p| p.eq_ignore_ascii_case(prefix))
            .and_then(|_| name.get(prefix.len()..))?;
        let (size, windows) = match rest.find(['w', 'W']) {
            Some(at) => (
                rest.get(..at)?,
                Some(rest.get(at + 1..)?.parse::<usize>().ok()?),
            ),
            None => (rest, None),
        };
        let size: usize = size.parse().ok()?;
        let windows_ok = crate::geometry::cluster_kernel_built(size, windows.unwrap_or(1));
        (CLUSTER_SIZES.contains(&size) && windows_ok).then_some(ForcedRecurrence {
            kind: Some(RecurrenceKind::Cluster),
            cluster_size: Some(size),
            cluster_windows: Some(windows.unwrap_or(1)),
        })
    }

    /// `overrides` with this recurrence (and cluster size) forced; the projection kept.
    pub const fn apply(self, overrides: Overrides) -> Overrides {
        Overrides {
            recurrence: self.kind,
            cluster_size: self.cluster_size,
            cluster_windows: self.cluster_windows,
            projection: overrides.projection,
        }
    }
}

impl fmt::Display for ForcedRecurrence {
    /// The name [`ForcedRecurrence::parse`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.kind, self.cluster_size, self.cluster_windows) {
            (None, _, _) => f.write_str("auto"),
            (Some(kind), None, _) => write!(f, "{kind}"),
            (Some(kind), Some(size), Some(windows)) if windows > 1 => {
                write!(f, "{kind}{size}w{windows}")
            }
            (Some(kind), Some(size), _) => write!(f, "{kind}{size}"),
        }
    }
}

/// A plan: what runs for one batch size and math mode on one device, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Windows per forward.
    pub batch: usize,
    /// Frames per window.
    pub frames: usize,
    /// Arithmetic of the projections.
    pub math: MathMode,
    /// The device's compute capability (the kernels are compiled for it).
    pub compute_capability: (u32, u32),
    /// The recurrence kernel.
    pub recurrence: Decision<RecurrenceKind>,
    /// Its occupancy (blocks per SM and the binding limit).
    pub recurrence_occupancy: Occupancy,
    /// Blocks of the recurrence kernel the device holds at once: occupancy times SMs; for the
    /// cluster recurrence, CTAs of whole clusters (co-resident clusters times the cluster size,
    /// the driver's figure or core's estimate, see [`cluster_capacity`]).
    pub co_resident_blocks: usize,
    /// How the recurrence is launched per layer.
    pub schedule: Decision<RecurrenceSchedule>,
    /// Whether both directions of a layer run at once.
    pub concurrent_directions: Decision<bool>,
    /// The projection kernel.
    pub projection: Decision<ProjectionTile>,
    /// Its occupancy.
    pub projection_occupancy: Occupancy,
    /// The fixed-point recurrence (`numerics.cuh` section 9) that runs instead of the cluster
    /// kernel the schedule names, for TF32 numerics on a device with clusters
    /// ([`choose_fixed_point`]); `None` where the plan's recurrence runs with its own product.
    pub fixed_point: Decision<Option<FixedPick>>,
}

/// One line of [`Plan::explain`]: a decision's name and its reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExplainLine<'a> {
    /// `"recurrence"`, `"schedule"`, `"streams"`, `"projection"` or `"fixed point"`.
    pub decision: &'static str,
    /// Why it came out as it did.
    pub reason: &'a Reason,
}

impl fmt::Display for ExplainLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.decision, self.reason)
    }
}

impl Plan {
    /// The cooperative schedule, for the wide and tiled kernels.
    pub const fn coop_schedule(&self) -> Option<&CoopSchedule> {
        self.schedule.choice.coop()
    }

    /// Blocks of the resident grid, for the resident kernel.
    pub const fn resident_grid_blocks(&self) -> Option<usize> {
        match self.schedule.choice {
            RecurrenceSchedule::Resident { grid_blocks } => Some(grid_blocks),
            RecurrenceSchedule::Cooperative(_) | RecurrenceSchedule::Cluster(_) => None,
        }
    }

    /// The cluster schedule (cluster size, grid, waves), for the cluster kernel.
    pub const fn cluster_schedule(&self) -> Option<&ClusterSchedule> {
        self.schedule.choice.cluster()
    }

    /// What one block (CTA) of the plan's recurrence kernel uses in `resources`: for the
    /// cluster recurrence, the kernel of the planned cluster size.
    pub const fn recurrence_usage<'r>(&self, resources: &'r KernelResources) -> &'r KernelUsage {
        match self.schedule.choice {
            RecurrenceSchedule::Cluster(s) => {
                match resources.cluster_kernel(s.cluster_size, s.windows_per_cluster) {
                    Some(usage) => usage,
                    None => resources.recurrence(RecurrenceKind::Cluster),
                }
            }
            _ => resources.recurrence(self.recurrence.choice),
        }
    }

    /// Rows of the projection GEMM: `batch * frames` (checked when the plan was made).
    pub const fn projection_rows(&self) -> usize {
        self.batch.saturating_mul(self.frames)
    }

    /// One line per decision, in the order they were made.
    pub fn explain(&self) -> [ExplainLine<'_>; 5] {
        [
            ExplainLine {
                decision: "recurrence",
                reason: &self.recurrence.reason,
            },
            ExplainLine {
                decision: "schedule",
                reason: &self.schedule.reason,
            },
            ExplainLine {
                decision: "streams",
                reason: &self.concurrent_directions.reason,
            },
            ExplainLine {
                decision: "projection",
                reason: &self.projection.reason,
            },
            ExplainLine {
                decision: "fixed point",
                reason: &self.fixed_point.reason,
            },
        ]
    }
}

impl fmt::Display for Plan {
    /// One line per decision ([`Plan::explain`]), separated by newlines.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, line) in self.explain().iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{line}")?;
        }
        Ok(())
    }
}

/// The oldest compute capability the kernels run on: they use relaxed GPU-scope loads and
/// stores (`ld.relaxed.gpu`, PTX ISA 6.0, `sm_70`).
pub const MIN_COMPUTE_CAPABILITY: (u32, u32) = (7, 0);

/// Selects a plan for `batch` windows of `shape` in `math` mode on the device `facts`
/// describes, whose kernels use `resources`.
///
/// # Errors
/// [`CoreError::Unsupported`] for a shape this version does not build, a compute capability
/// below [`MIN_COMPUTE_CAPABILITY`] or a device without SMs; [`CoreError::NoPlan`] when no
/// recurrence or projection kernel can run; [`CoreError::Overflow`] for an absurd batch.
pub fn select(
    facts: &DeviceFacts,
    resources: &KernelResources,
    shape: &StackShape,
    batch: usize,
    math: MathMode,
) -> Result<Plan, CoreError> {
    select_with(facts, resources, shape, batch, math, &Overrides::default())
}

/// [`select`] on the device `query` reports.
///
/// # Errors
/// The query's error (kind [`crate::ErrorKind::Device`]), else as [`select`].
pub fn select_on<Q: DeviceQuery + ?Sized>(
    query: &Q,
    resources: &KernelResources,
    shape: &StackShape,
    batch: usize,
    math: MathMode,
) -> Result<Plan, CoreError> {
    let facts = query.facts()?;
    select(&facts, resources, shape, batch, math)
}

/// Checks what every decision assumes of the device.
fn check_device(facts: &DeviceFacts) -> Result<(), CoreError> {
    let (major, minor) = facts.compute_capability;
    if (major, minor) < MIN_COMPUTE_CAPABILITY {
        return Err(CoreError::Unsupported {
            what: "compute capability",
            value: (major as usize)
                .saturating_mul(10)
                .saturating_add(minor as usize),
            reason: "the kernels need sm_70 or newer (relaxed GPU-scope loads)",
        });
    }
    if facts.sm_count == 0 {
        return Err(CoreError::Unsupported {
            what: "SM count",
            value: 0,
            reason: "the device reports no multiprocessors",
        });
    }
    Ok(())
}

/// [`select`] with choices forced by `overrides`.
///
/// # Errors
/// As [`select`], plus [`CoreError::ForcedChoice`] when a forced kernel cannot run on the
/// device or in `math` mode (a resident recurrence that does not fit an SM, a cooperative
/// one without cooperative launch or room for a tile, a cluster recurrence without clusters
/// or room for one, a TF32 projection in FP32 mode or before 8.0), or a cluster size forced
/// without the cluster recurrence or one the device cannot run
/// ([`check_forced_cluster_size`]).
pub fn select_with(
    facts: &DeviceFacts,
    resources: &KernelResources,
    shape: &StackShape,
    batch: usize,
    math: MathMode,
    overrides: &Overrides,
) -> Result<Plan, CoreError> {
    shape.validate()?;
    check_device(facts)?;
    let rows = checked_mul(batch, shape.frames, "projection rows")?;

    let occupancy = RecurrenceOccupancy::of(facts, resources);
    let mut recurrence = match overrides.recurrence {
        Some(kind) => check_forced_recurrence(facts, &occupancy, kind)?,
        None => choose_recurrence(facts, &occupancy, batch)?,
    };
    let kind = recurrence.choice;
    let (recurrence_occupancy, co_resident_blocks, schedule) = if kind == RecurrenceKind::Cluster {
        let size = match overrides.cluster_size {
            Some(size) => {
                let forced = check_forced_cluster_size(facts, &occupancy, size)?;
                recurrence.reason = forced.reason;
                forced.choice
            }
            None => {
                choose_cluster_size(facts, &occupancy, batch)
                    .map_err(|_| CoreError::NoPlan {
                        reason: "no cluster size can run on the device",
                    })?
                    .choice
            }
        };
        let capacity = occupancy.cluster(size).ok_or(CoreError::NoPlan {
            reason: "the chosen cluster size is not built",
        })?;
        let windows = match overrides.cluster_windows {
            Some(w) => check_forced_cluster_windows(size, w)?,
            None => choose_cluster_windows(capacity, &occupancy.tiles, batch),
        };
        // A window-tile kernel has its own capacity (its shared memory).
        let capacity =
            occupancy
                .cluster_kernel(size, windows.windows)
                .ok_or(CoreError::NoPlan {
                    reason: "the chosen cluster kernel is not built",
                })?;
        if capacity.clusters == 0 && tile_slot(windows.windows).is_some() {
            return Err(CoreError::NoPlan {
                reason: "a window-tile cluster kernel (128 KiB of R in shared memory a CTA) fits \
                         no SM of the device",
            });
        }
        (
            capacity.occupancy,
            capacity.ctas(),
            choose_cluster_schedule(capacity, batch, &windows)?,
        )
    } else {
        if overrides.cluster_windows.is_some() {
            return Err(CoreError::ForcedChoice {
                what: "windows per cluster",
                reason: "windows per cluster need the cluster recurrence (chosen or forced)",
            });
        }
        if overrides.cluster_size.is_some() {
            return Err(CoreError::ForcedChoice {
                what: "cluster size",
                reason: "a cluster size needs the cluster recurrence (chosen or forced)",
            });
        }
        let recurrence_occupancy = occupancy.get(kind);
        let co_resident_blocks = recurrence_occupancy.co_resident_blocks(facts.sm_count);
        (
            recurrence_occupancy,
            co_resident_blocks,
            choose_coop_schedule(kind, batch, co_resident_blocks)?,
        )
    };
    let concurrent_directions = choose_streams(&schedule.choice, co_resident_blocks);

    let projection = match overrides.projection {
        Some(tile) => check_forced_projection(facts, resources, tile, math)?,
        None => choose_projection_tile(facts, resources, rows, math)?,
    };
    let projection_occupancy = blocks_per_sm(facts, resources.projection(projection.choice));
    let fixed_point = choose_fixed_point(facts, kind, projection.choice, batch);

    Ok(Plan {
        batch,
        frames: shape.frames,
        math,
        compute_capability: facts.compute_capability,
        recurrence,
        recurrence_occupancy,
        co_resident_blocks,
        schedule,
        concurrent_directions,
        projection,
        projection_occupancy,
        fixed_point,
    })
}

/// TF32 mode's recurrent product: on a device with thread-block clusters, where the pass has TF32
/// numerics (a TF32 projection tile) and the recurrence is the cluster kind, section 9's exact
/// fixed-point sums on the kernel [`fixed::pick`] names for `batch` and the device's SMs (its
/// bits are the same in every fixed-point kernel and at every batch, so the pick never changes a
/// window's output); else none, and the plan's recurrence keeps its own product (FP32 numerics:
/// section 1; TF32 numerics without clusters, or a non-cluster kind: section 8).
///
/// H200 (session 27 call 1, TF32, 589 frames, one call with cuDNN TF32, ms): batch 1 1.10
/// against section 8's 1.15, 34 1.85 against 2.27, 128 2.42 against 3.16, 256 3.21 against
/// 5.39, 1024 10.75-10.84 against 21.32-21.36 (cuDNN TF32 72.0); slower only at batches 8-33,
/// 1.33-1.79 against 1.20-1.53 (calls 5-6; bench/NOTES.md, session 27).
pub fn choose_fixed_point(
    facts: &DeviceFacts,
    kind: RecurrenceKind,
    tile: ProjectionTile,
    batch: usize,
) -> Decision<Option<FixedPick>> {
    let refuse = |why| Decision {
        choice: None,
        reason: Reason::NoFixedPoint(why),
    };
    if !tile.tf32_numerics() {
        return refuse(FixedPointRefusal::Fp32Numerics);
    }
    if (facts.max_cluster_size as usize) < fixed::MAX_CLUSTER_SIZE {
        return refuse(FixedPointRefusal::NoClusters);
    }
    if kind != RecurrenceKind::Cluster {
        return refuse(FixedPointRefusal::Kind(kind));
    }
    let sms = facts.sm_count as usize;
    let pick = fixed::pick(batch, sms);
    Decision {
        choice: Some(pick),
        reason: Reason::FixedPoint { pick, batch, sms },
    }
}
