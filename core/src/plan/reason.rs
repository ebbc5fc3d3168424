//! Why each plan decision was made: one [`Reason`] per decision, printed as one line that
//! names the choice and quotes the numbers behind it.

use core::fmt;

use super::RecurrenceKind;
use super::projection::{LARGE_TILE_MIN_ROWS, ProjectionTile, Tf32Refusal};
use super::recurrence::TILED_MIN_BATCH;
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
    },
    /// A cooperative recurrence chosen by the batch-size rule ([`TILED_MIN_BATCH`]).
    ByBatch {
        /// The kind chosen (wide or tiled).
        chosen: RecurrenceKind,
        /// The batch.
        batch: usize,
        /// What keeps the resident kernel off this device.
        resident_limit: Limit,
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
    },
    /// The recurrence was forced through [`super::Overrides`].
    ForcedRecurrence(RecurrenceKind),
    /// A cooperative schedule ([`crate::schedule`]).
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
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Reason::ResidentFits {
                blocks_per_sm,
                shared_bytes,
                measured_here,
            } => {
                write!(
                    f,
                    "resident: {blocks_per_sm} block/SM fits ({shared_bytes} B shared with half of R, the other \
                     half in registers); "
                )?;
                if measured_here {
                    write!(
                        f,
                        "measured on the H200: fastest at every batch 1..1024 (batch 1: 3.84 ms vs tiled 6.09, \
                         wide 6.35; batch 1024: 99.4 vs 107.4, 270.9)"
                    )
                } else {
                    write!(
                        f,
                        "derived from resources, not measured on this architecture (upstream A100: 0.97 vs \
                         tiled 1.38 ms/layer at batch 32)"
                    )
                }
            }
            Reason::ByBatch {
                chosen,
                batch,
                resident_limit,
            } => {
                let cmp = if batch >= TILED_MIN_BATCH { ">=" } else { "<" };
                write!(
                    f,
                    "{chosen}: batch {batch} {cmp} {TILED_MIN_BATCH} (upstream RTX 4060 Ti and 5060 Ti: \
                     tiled beat wide from 9 windows); resident does not fit an SM (limited by {resident_limit})"
                )
            }
            Reason::CooperativeFallback {
                chosen,
                preferred,
                needed,
                capacity,
            } => write!(
                f,
                "{chosen}: one {preferred} tile needs {needed} co-resident blocks, the device holds {capacity}"
            ),
            Reason::ForcedRecurrence(kind) => write!(f, "{kind}: forced by override"),
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
            Reason::Tf32Allowed {
                compute_capability: (major, minor),
            } => write!(
                f,
                "{}: TF32 mode on {major}.{minor}, where upstream saw no accuracy loss (it did on 8.9 \
                 and 12.0)",
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
                },
                "resident: 1 block/SM",
            ),
            (
                Reason::ResidentFits {
                    blocks_per_sm: 1,
                    shared_bytes: 134_144,
                    measured_here: false,
                },
                "resident: 1 block/SM",
            ),
            (
                Reason::ByBatch {
                    chosen: RecurrenceKind::Tiled,
                    batch: 9,
                    resident_limit: Limit::PerBlockLimit,
                },
                "tiled: batch 9 >= 9",
            ),
            (
                Reason::ByBatch {
                    chosen: RecurrenceKind::Wide,
                    batch: 8,
                    resident_limit: Limit::SharedMemory,
                },
                "wide: batch 8 < 9",
            ),
            (
                Reason::CooperativeFallback {
                    chosen: RecurrenceKind::Tiled,
                    preferred: RecurrenceKind::Wide,
                    needed: 16,
                    capacity: 10,
                },
                "tiled: one wide tile needs 16",
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
                "tf32 128x256: TF32 mode on 9.0",
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
