//! Why each plan decision was made: one [`Reason`] per decision, printed as one line that
//! names the choice and quotes the numbers behind it.

use core::fmt;

use super::RecurrenceKind;
use super::projection::{LARGE_TILE_MIN_ROWS, ProjectionTile, Tf32Refusal};
use super::recurrence::{
    CLUSTER_ONE_WAVE_SIZE, CLUSTER_WAVES_SIZE, CapacitySource, ClusterRefusal, ClusterWindows,
    TILED_MIN_BATCH,
};
use crate::fixed::FixedPick;
use crate::occupancy::Limit;

/// Why a decision came out as it did. `Display` gives one line: the choice, then why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// The resident recurrence fits an SM, so it runs (no cooperative launch needed).
    ResidentFits {
        /// Resident blocks per SM.
        blocks_per_sm: u32,
        /// Dynamic plus static shared bytes of one block.
        shared_bytes: u32,
        /// The device's architecture is one of
        /// [`MEASURED_ARCHITECTURES`](super::recurrence::MEASURED_ARCHITECTURES) (the rule was
        /// measured there), not only derived from resources.
        measured_here: bool,
        /// Why the cluster recurrence does not run here.
        no_cluster: ClusterRefusal,
    },
    /// A cooperative recurrence chosen by the batch-size rule ([`TILED_MIN_BATCH`]).
    ByBatch {
        /// The kind chosen (wide or tiled).
        chosen: RecurrenceKind,
        /// The batch.
        batch: usize,
        /// What keeps the resident kernel off this device.
        resident_limit: Limit,
        /// Why the cluster recurrence does not run here.
        no_cluster: ClusterRefusal,
    },
    /// The kind the batch rule prefers needs more co-resident blocks than the device holds;
    /// the other cooperative kind fits.
    CooperativeFallback {
        /// The kind chosen.
        chosen: RecurrenceKind,
        /// The kind the batch rule preferred.
        preferred: RecurrenceKind,
        /// Blocks one tile of the preferred kind needs.
        needed: usize,
        /// Co-resident blocks of the preferred kind the device holds.
        capacity: usize,
        /// Why the cluster recurrence does not run here.
        no_cluster: ClusterRefusal,
    },
    /// The cluster recurrence runs, with clusters of `cluster_size` CTAs, by the size rule
    /// ([`CLUSTER_ONE_WAVE_SIZE`] while all clusters fit one wave, else [`CLUSTER_WAVES_SIZE`]).
    ClusterFits {
        /// CTAs per cluster.
        cluster_size: usize,
        /// Clusters in the grid: `2 * batch`.
        clusters: usize,
        /// Co-resident clusters of `cluster_size` CTAs.
        capacity: usize,
        /// Whether the capacities are the driver's or core's estimate.
        source: CapacitySource,
        /// Co-resident clusters of [`CLUSTER_ONE_WAVE_SIZE`] CTAs (0: that size cannot run).
        one_wave_capacity: usize,
    },
    /// The recurrence was forced through [`super::Overrides`].
    ForcedRecurrence(RecurrenceKind),
    /// The cluster size was forced through [`super::Overrides::cluster_size`].
    ForcedClusterSize {
        /// CTAs per cluster.
        cluster_size: usize,
        /// Co-resident clusters of that size.
        capacity: usize,
        /// The driver's figure or core's estimate.
        source: CapacitySource,
    },
    /// A cooperative schedule ([`crate::coop`]).
    Cooperative {
        /// Wide or tiled.
        kind: RecurrenceKind,
        /// Windows per tile.
        tile_height: usize,
        /// Tiles per direction.
        tiles: usize,
        /// Both directions at once.
        concurrent: bool,
        /// Launches per direction.
        launches: usize,
        /// Most blocks resident at once under this schedule.
        peak_blocks: usize,
        /// The joint co-resident capacity.
        capacity: usize,
    },
    /// The resident recurrence's grid: one block per (window, direction).
    ResidentGrid {
        /// Blocks in the grid (`2 * batch`).
        blocks: usize,
        /// Blocks resident at once (the rest run in later waves; no co-residency needed).
        capacity: usize,
    },
    /// The cluster recurrence's grid: one cluster per (window or pair of windows, direction),
    /// in waves.
    ClusterGrid {
        /// CTAs per cluster.
        cluster_size: usize,
        /// How many windows a cluster runs, and why.
        windows: ClusterWindows,
        /// CTAs in the grid: `2 * ceil(batch / windows) * cluster_size`.
        grid_blocks: usize,
        /// Clusters running at once.
        clusters_per_wave: usize,
        /// Waves: the grid's clusters over the co-resident clusters, rounded up.
        waves: usize,
        /// Whether the capacity is the driver's or core's estimate.
        source: CapacitySource,
    },
    /// Both directions run at once.
    DirectionsTogether {
        /// Blocks both directions' launches hold at once.
        blocks: usize,
        /// The joint co-resident capacity.
        capacity: usize,
    },
    /// The directions run one after the other: together they would exceed the capacity.
    DirectionsInTurn {
        /// Blocks both directions' largest launches would need together.
        blocks: usize,
        /// The joint co-resident capacity.
        capacity: usize,
    },
    /// The resident recurrence holds both directions in one grid.
    ResidentOneGrid {
        /// Blocks in the grid.
        blocks: usize,
    },
    /// The cluster recurrence holds both directions in one grid.
    ClusterOneGrid {
        /// CTAs in the grid.
        blocks: usize,
    },
    /// An FP32 projection tile chosen by the row count ([`LARGE_TILE_MIN_ROWS`]).
    ByRows {
        /// The tile.
        tile: ProjectionTile,
        /// Rows of the projection GEMM: `batch * frames`.
        rows: usize,
    },
    /// The 64x64 FP32 tile on an architecture where it was measured to be at least as fast at
    /// every row count ([`SMALL_TILE_ARCHITECTURES`](super::projection::SMALL_TILE_ARCHITECTURES)).
    SmallTileMeasured {
        /// Rows of the projection GEMM: `batch * frames`.
        rows: usize,
        /// The device's compute capability.
        compute_capability: (u32, u32),
    },
    /// A 3xTF32 tile (FP32 accuracy on TF32 tensor cores) at every row count, on one of
    /// `TF32X3_ARCHITECTURES`: 128x128 from `TF32X3_LARGE_MIN_ROWS` rows, 64x128 below (the
    /// same bits).
    Tf32x3Listed {
        /// The 3xTF32 tile chosen for the row count.
        tile: ProjectionTile,
        /// Rows of the projection GEMM: `batch * frames`.
        rows: usize,
        /// The device's compute capability.
        compute_capability: (u32, u32),
    },
    /// The TF32 tensor-core tile (TF32 mode, an architecture where it is allowed).
    Tf32Allowed {
        /// The device's compute capability.
        compute_capability: (u32, u32),
    },
    /// TF32 mode, but the TF32 tile is refused here; an FP32 tile runs instead.
    Tf32Refused {
        /// The FP32 tile that runs.
        tile: ProjectionTile,
        /// The device's compute capability.
        compute_capability: (u32, u32),
        /// Why TF32 is refused.
        why: Tf32Refusal,
    },
    /// The preferred projection tile cannot run on this device; a smaller one does.
    ProjectionFallback {
        /// The tile that runs.
        tile: ProjectionTile,
        /// The tile the rules preferred.
        preferred: ProjectionTile,
        /// What keeps the preferred tile off the device.
        limit: Limit,
    },
    /// The projection tile was forced through [`super::Overrides`].
    ForcedProjection(ProjectionTile),
    /// TF32 mode's recurrent products are section 9's exact fixed-point sums
    /// ([`crate::fixed`]), on the kernel [`crate::fixed::pick`] names for the batch and SMs.
    FixedPoint {
        /// The kernel.
        pick: FixedPick,
        /// Windows per forward.
        batch: usize,
        /// The device's SMs.
        sms: usize,
    },
    /// No fixed-point kernel: the plan's recurrence runs with its own product (section 1 in FP32
    /// numerics, section 8 in TF32 numerics).
    NoFixedPoint(FixedPointRefusal),
}

/// Why a plan runs no fixed-point recurrence ([`Reason::NoFixedPoint`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FixedPointRefusal {
    /// The pass's numerics are FP32 mode's (FP32 mode, or a TF32 pass whose projection is not a
    /// TF32 tile): the fixed-point kernels implement TF32 mode only.
    Fp32Numerics,
    /// The device has no thread-block clusters (compute capability below 9.0): TF32 mode keeps
    /// section 8 there.
    NoClusters,
    /// The recurrence kind (forced through [`super::Overrides`], or the only one that fits) is
    /// not the cluster recurrence: it has section 8 only.
    Kind(RecurrenceKind),
}

impl fmt::Display for FixedPointRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FixedPointRefusal::Fp32Numerics => f.write_str("FP32 numerics (section 1)"),
            FixedPointRefusal::NoClusters => f.write_str(
                "no thread-block clusters on this device: TF32 mode's section-8 FP32 dot",
            ),
            FixedPointRefusal::Kind(kind) => write!(
                f,
                "the {kind} recurrence has TF32 mode's section-8 FP32 dot only (other bits than \
                 the fixed-point kernels': a diagnostic, not TF32 mode's default on this device)"
            ),
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Waves `clusters` take with `capacity` at once (0 when nothing fits).
fn waves(clusters: usize, capacity: usize) -> usize {
    if capacity == 0 {
        0
    } else {
        clusters.div_ceil(capacity)
    }
}

/// Writes the cluster rule's line.
fn write_cluster_fits(
    f: &mut fmt::Formatter<'_>,
    cluster_size: usize,
    clusters: usize,
    capacity: usize,
    source: CapacitySource,
    one_wave_capacity: usize,
) -> fmt::Result {
    let n = waves(clusters, capacity);
    write!(
        f,
        "cluster: {cluster_size}-CTA clusters, {clusters} cluster{} (one per window and direction), \
         {capacity} co-resident ({source}), {n} wave{}; ",
        plural(clusters),
        plural(n)
    )?;
    if cluster_size == CLUSTER_ONE_WAVE_SIZE && clusters <= one_wave_capacity {
        write!(
            f,
            "{CLUSTER_ONE_WAVE_SIZE}-CTA clusters while each CTA has an SM of its own (up to \
             {one_wave_capacity} clusters; H200 batch 1: 0.59 us/step vs 0.69 with 2-CTA clusters)"
        )
    } else if cluster_size == CLUSTER_WAVES_SIZE && one_wave_capacity > 0 {
        write!(
            f,
            "{clusters} {CLUSTER_ONE_WAVE_SIZE}-CTA clusters would share SMs (one CTA per SM up to \
             {one_wave_capacity}; H200 batch 16: 2-CTA 0.41 ms a layer vs 4-CTA 0.53)"
        )
    } else if cluster_size == CLUSTER_WAVES_SIZE {
        write!(f, "no {CLUSTER_ONE_WAVE_SIZE}-CTA cluster fits")
    } else {
        write!(f, "no {CLUSTER_WAVES_SIZE}-CTA cluster fits")
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Reason::ResidentFits {
                blocks_per_sm,
                shared_bytes,
                measured_here,
                no_cluster,
            } => {
                write!(
                    f,
                    "resident: {blocks_per_sm} block/SM fits ({shared_bytes} B shared with half of R, the other \
                     half in registers); "
                )?;
                if measured_here {
                    write!(
                        f,
                        "measured on the H200: fastest of resident, tiled and wide at every batch 1..1024 \
                         (batch 1: 3.84 ms vs tiled 6.09, wide 6.35; batch 1024: 99.4 vs 107.4, 270.9)"
                    )?;
                } else {
                    write!(
                        f,
                        "derived from resources, not measured on this architecture (upstream A100: 0.97 vs \
                         tiled 1.38 ms/layer at batch 32)"
                    )?;
                }
                write!(f, "; not cluster: {no_cluster}")
            }
            Reason::ByBatch {
                chosen,
                batch,
                resident_limit,
                no_cluster,
            } => {
                let cmp = if batch >= TILED_MIN_BATCH { ">=" } else { "<" };
                write!(
                    f,
                    "{chosen}: batch {batch} {cmp} {TILED_MIN_BATCH} (upstream RTX 4060 Ti and 5060 Ti: \
                     tiled beat wide from 9 windows); resident does not fit an SM (limited by {resident_limit}); \
                     not cluster: {no_cluster}"
                )
            }
            Reason::CooperativeFallback {
                chosen,
                preferred,
                needed,
                capacity,
                no_cluster,
            } => write!(
                f,
                "{chosen}: one {preferred} tile needs {needed} co-resident blocks, the device holds {capacity}; \
                 not cluster: {no_cluster}"
            ),
            Reason::ClusterFits {
                cluster_size,
                clusters,
                capacity,
                source,
                one_wave_capacity,
            } => write_cluster_fits(
                f,
                cluster_size,
                clusters,
                capacity,
                source,
                one_wave_capacity,
            ),
            Reason::ForcedRecurrence(kind) => write!(f, "{kind}: forced by override"),
            Reason::ForcedClusterSize {
                cluster_size,
                capacity,
                source,
            } => write!(
                f,
                "cluster: {cluster_size}-CTA clusters forced by override ({capacity} co-resident, {source})"
            ),
            Reason::ClusterGrid {
                cluster_size,
                windows,
                grid_blocks,
                clusters_per_wave,
                waves,
                source,
            } => write!(
                f,
                "cluster: one grid of {grid_blocks} CTA{} in clusters of {cluster_size}, {windows}; \
                 {clusters_per_wave} cluster{} per wave, {waves} wave{} ({source}), not cooperative",
                plural(grid_blocks),
                plural(clusters_per_wave),
                plural(waves)
            ),
            Reason::Cooperative {
                kind,
                tile_height,
                tiles,
                concurrent,
                launches,
                peak_blocks,
                capacity,
            } => {
                write!(
                    f,
                    "{kind}: {tile_height}-window tiles, {tiles} tile{} per direction, ",
                    plural(tiles)
                )?;
                if concurrent {
                    write!(f, "both directions at once")?;
                } else {
                    write!(f, "directions in turn")?;
                }
                write!(
                    f,
                    ", {launches} launch{} per direction ({peak_blocks} of {capacity} co-resident blocks)",
                    if launches == 1 { "" } else { "es" }
                )
            }
            Reason::ResidentGrid { blocks, capacity } => write!(
                f,
                "resident: one grid of {blocks} block{} (2 per window), {capacity} resident at once, \
                 not cooperative",
                plural(blocks)
            ),
            Reason::DirectionsTogether { blocks, capacity } => write!(
                f,
                "concurrent: reverse on a side stream; both directions' {blocks} blocks fit the \
                 {capacity} co-resident"
            ),
            Reason::DirectionsInTurn { blocks, capacity } => write!(
                f,
                "in turn: both directions would need {blocks} co-resident blocks, the device holds {capacity}"
            ),
            Reason::ResidentOneGrid { blocks } => {
                write!(
                    f,
                    "concurrent: one resident grid of {blocks} blocks holds both directions"
                )
            }
            Reason::ClusterOneGrid { blocks } => {
                write!(
                    f,
                    "concurrent: one cluster grid of {blocks} CTAs holds both directions"
                )
            }
            Reason::ByRows { tile, rows } => {
                let cmp = if rows >= LARGE_TILE_MIN_ROWS {
                    ">="
                } else {
                    "<"
                };
                write!(
                    f,
                    "{tile}: {rows} rows {cmp} {LARGE_TILE_MIN_ROWS} (upstream RTX 4060 Ti: 64x64 faster \
                     below 2048 rows, batch 1..3; not measured on this architecture)"
                )
            }
            Reason::SmallTileMeasured {
                rows,
                compute_capability: (major, minor),
            } => write!(
                f,
                "{}: {rows} rows; on {major}.{minor} the 64x64 tile is as fast or faster at every batch \
                 (H200: 98.6 vs 99.4 ms at batch 1024, 4.08 vs 4.15 at 8)",
                ProjectionTile::Small64
            ),
            Reason::Tf32x3Listed {
                tile,
                rows,
                compute_capability: (major, minor),
            } if tile.needs_wgmma() => write!(
                f,
                "{tile}: FP32-accurate tensor-core products (error within the FP32 budget) at every \
                 batch on {major}.{minor}, one of TF32X3_ARCHITECTURES and WGMMA_ARCHITECTURES \
                 (warpgroup MMA: faster than the mma.sync tiles at every row count measured); \
                 {rows} rows"
            ),
            Reason::Tf32x3Listed {
                tile,
                rows,
                compute_capability: (major, minor),
            } => write!(
                f,
                "{tile}: FP32-accurate tensor-core products (error within the FP32 budget) at every \
                 batch on {major}.{minor}, one of TF32X3_ARCHITECTURES; {rows} rows: {} tiles \
                 from {} rows (identical bits)",
                ProjectionTile::Tf32x3,
                super::projection::TF32X3_LARGE_MIN_ROWS
            ),
            Reason::Tf32Allowed {
                compute_capability: (major, minor),
            } if super::projection::wgmma_available((major, minor)) => write!(
                f,
                "{}: TF32 mode on {major}.{minor}, where upstream saw no accuracy loss (it did on 8.9 \
                 and 12.0); warpgroup MMA (WGMMA_ARCHITECTURES): faster than the mma.sync TF32 \
                 tile at every batch measured; the recurrences take TF32 mode's gate \
                 activations and recurrent product (ProjectionTile::tf32_numerics; which product: \
                 the fixed-point line)",
                ProjectionTile::Tf32Wgmma
            ),
            Reason::Tf32Allowed {
                compute_capability: (major, minor),
            } => write!(
                f,
                "{}: TF32 mode on {major}.{minor}, where upstream saw no accuracy loss (it did on 8.9 \
                 and 12.0); the recurrences take TF32 mode's gate activations \
                 and recurrent product (ProjectionTile::tf32_numerics; which product: the \
                 fixed-point line)",
                ProjectionTile::Tf32
            ),
            Reason::Tf32Refused {
                tile,
                compute_capability: (major, minor),
                why,
            } => {
                write!(f, "{tile}: TF32 tile refused on {major}.{minor}: {why}")
            }
            Reason::ProjectionFallback {
                tile,
                preferred,
                limit,
            } => {
                write!(
                    f,
                    "{tile}: {preferred} does not fit an SM (limited by {limit})"
                )
            }
            Reason::ForcedProjection(tile) => write!(f, "{tile}: forced by override"),
            Reason::FixedPoint { pick, batch, sms } => write!(
                f,
                "{pick}: TF32 mode's section 9 (exact fixed-point recurrent products, the same bits \
                 in every kernel and at every batch), picked for {batch} window{} on {sms} SMs \
                 (H200 session 27, ms: batch 1 1.10 vs section 8's 1.15, 128 2.42 vs 3.16, 1024 \
                 10.75 vs 21.32)",
                plural(batch)
            ),
            Reason::NoFixedPoint(why) => write!(f, "none: {why}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_one_line_naming_its_choice() {
        let reasons = [
            (
                Reason::ResidentFits {
                    blocks_per_sm: 1,
                    shared_bytes: 134_144,
                    measured_here: true,
                    no_cluster: ClusterRefusal::NoClusterLaunch,
                },
                "resident: 1 block/SM",
            ),
            (
                Reason::ResidentFits {
                    blocks_per_sm: 1,
                    shared_bytes: 134_144,
                    measured_here: false,
                    no_cluster: ClusterRefusal::Architecture {
                        compute_capability: (8, 0),
                    },
                },
                "resident: 1 block/SM",
            ),
            (
                Reason::ByBatch {
                    chosen: RecurrenceKind::Tiled,
                    batch: 9,
                    resident_limit: Limit::PerBlockLimit,
                    no_cluster: ClusterRefusal::MaxClusterSize {
                        max_cluster_size: 1,
                    },
                },
                "tiled: batch 9 >= 9",
            ),
            (
                Reason::ByBatch {
                    chosen: RecurrenceKind::Wide,
                    batch: 8,
                    resident_limit: Limit::SharedMemory,
                    no_cluster: ClusterRefusal::NoCapacity {
                        source: CapacitySource::Driver,
                        limited_by: Limit::Registers,
                    },
                },
                "wide: batch 8 < 9",
            ),
            (
                Reason::CooperativeFallback {
                    chosen: RecurrenceKind::Tiled,
                    preferred: RecurrenceKind::Wide,
                    needed: 16,
                    capacity: 10,
                    no_cluster: ClusterRefusal::NoCapacity {
                        source: CapacitySource::Estimate,
                        limited_by: Limit::Registers,
                    },
                },
                "tiled: one wide tile needs 16",
            ),
            (
                Reason::ClusterFits {
                    cluster_size: 4,
                    clusters: 2,
                    capacity: 62,
                    source: CapacitySource::Driver,
                    one_wave_capacity: 31,
                },
                "cluster: 4-CTA clusters, 2 clusters (one per window and direction), 62 co-resident \
                 (driver), 1 wave; 4-CTA clusters while each CTA has an SM of its own (up to 31",
            ),
            (
                Reason::ClusterFits {
                    cluster_size: 2,
                    clusters: 64,
                    capacity: 66,
                    source: CapacitySource::Estimate,
                    one_wave_capacity: 33,
                },
                "cluster: 2-CTA clusters, 64 clusters (one per window and direction), 66 co-resident \
                 (estimate, an upper bound), 1 wave; 64 4-CTA clusters would share SMs (one CTA per \
                 SM up to 33",
            ),
            (
                Reason::ClusterFits {
                    cluster_size: 2,
                    clusters: 0,
                    capacity: 66,
                    source: CapacitySource::Driver,
                    one_wave_capacity: 0,
                },
                "cluster: 2-CTA clusters, 0 clusters (one per window and direction), 66 co-resident \
                 (driver), 0 waves; no 4-CTA cluster fits",
            ),
            (
                Reason::ForcedClusterSize {
                    cluster_size: 2,
                    capacity: 66,
                    source: CapacitySource::Driver,
                },
                "cluster: 2-CTA clusters forced by override (66 co-resident, driver)",
            ),
            (
                Reason::ClusterGrid {
                    cluster_size: 2,
                    windows: ClusterWindows::Several {
                        windows: 2,
                        clusters_one: 2048,
                        capacity: 66,
                    },
                    grid_blocks: 2048,
                    clusters_per_wave: 66,
                    waves: 16,
                    source: CapacitySource::Driver,
                },
                "cluster: one grid of 2048 CTAs in clusters of 2, 2 windows per cluster (one-window \
                 clusters would need 32 waves of 66; H200: batch 64 in 0.649 ms a layer vs 0.798, \
                 batch 1024 in 10.26 vs 12.51 resident); 66 clusters per wave, 16 waves (driver), \
                 not cooperative",
            ),
            (
                Reason::ClusterGrid {
                    cluster_size: 4,
                    windows: ClusterWindows::OnlySize { cluster_size: 4 },
                    grid_blocks: 8,
                    clusters_per_wave: 2,
                    waves: 1,
                    source: CapacitySource::Estimate,
                },
                "cluster: one grid of 8 CTAs in clusters of 4, one window per cluster (only 2-CTA \
                 clusters run more; these have 4); 2 clusters per wave, 1 wave (estimate, an upper \
                 bound), not cooperative",
            ),
            (
                Reason::ClusterOneGrid { blocks: 8 },
                "concurrent: one cluster grid of 8 CTAs holds both directions",
            ),
            (
                Reason::ForcedRecurrence(RecurrenceKind::Wide),
                "wide: forced",
            ),
            (
                Reason::Cooperative {
                    kind: RecurrenceKind::Wide,
                    tile_height: 32,
                    tiles: 32,
                    concurrent: false,
                    launches: 2,
                    peak_blocks: 256,
                    capacity: 264,
                },
                "wide: 32-window tiles, 32 tiles per direction, directions in turn, 2 launches",
            ),
            (
                Reason::ResidentGrid {
                    blocks: 64,
                    capacity: 132,
                },
                "resident: one grid of 64 blocks",
            ),
            (
                Reason::DirectionsTogether {
                    blocks: 64,
                    capacity: 264,
                },
                "concurrent",
            ),
            (
                Reason::DirectionsInTurn {
                    blocks: 512,
                    capacity: 264,
                },
                "in turn",
            ),
            (
                Reason::ResidentOneGrid { blocks: 2 },
                "concurrent: one resident grid",
            ),
            (
                Reason::ByRows {
                    tile: ProjectionTile::Small64,
                    rows: 1767,
                },
                "fp32 64x64: 1767 rows < 2048",
            ),
            (
                Reason::ByRows {
                    tile: ProjectionTile::Large128,
                    rows: 2048,
                },
                "fp32 128x128: 2048 rows >= 2048",
            ),
            (
                Reason::SmallTileMeasured {
                    rows: 589 * 1024,
                    compute_capability: (9, 0),
                },
                "fp32 64x64: 603136 rows; on 9.0",
            ),
            (
                Reason::Tf32Allowed {
                    compute_capability: (9, 0),
                },
                "tf32 wgmma 128x256: TF32 mode on 9.0",
            ),
            (
                Reason::Tf32Allowed {
                    compute_capability: (8, 0),
                },
                "tf32 128x256: TF32 mode on 8.0",
            ),
            (
                Reason::Tf32x3Listed {
                    tile: ProjectionTile::Tf32x3Wgmma,
                    rows: 589,
                    compute_capability: (9, 0),
                },
                "3xtf32 wgmma 128x128: FP32-accurate",
            ),
            (
                Reason::Tf32x3Listed {
                    tile: ProjectionTile::Tf32x3Small,
                    rows: 589,
                    compute_capability: (9, 0),
                },
                "3xtf32 64x128: FP32-accurate",
            ),
            (
                Reason::Tf32Refused {
                    tile: ProjectionTile::Large128,
                    compute_capability: (8, 9),
                    why: Tf32Refusal::LostAccuracy,
                },
                "fp32 128x128: TF32 tile refused on 8.9",
            ),
            (
                Reason::ProjectionFallback {
                    tile: ProjectionTile::Small64,
                    preferred: ProjectionTile::Large128,
                    limit: Limit::SharedMemory,
                },
                "fp32 64x64: fp32 128x128 does not fit",
            ),
            (
                Reason::ForcedProjection(ProjectionTile::Tf32),
                "tf32 128x256: forced",
            ),
        ];
        for (reason, start) in reasons {
            let line = reason.to_string();
            assert!(
                line.starts_with(start),
                "{line:?} should start with {start:?}"
            );
            assert!(!line.contains('\n'), "{line:?}");
        }
    }
}
