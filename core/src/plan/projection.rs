//! Which input-projection kernel runs: FP32 64x64 or 128x128 tiles, the FP32-accurate 3xTF32
//! tensor-core tile, or the TF32 tensor-core tile.

use core::fmt;

use super::{Decision, KernelResources, Reason};
use crate::device::DeviceFacts;
use crate::error::CoreError;
use crate::occupancy::{Occupancy, blocks_per_sm};
use crate::shape::MathMode;

/// 128x128 FP32 projection tiles from this many GEMM rows (`batch * frames`) on; 64x64 below
/// (except on [`SMALL_TILE_ARCHITECTURES`]).
///
/// Upstream (RTX 4060 Ti, 8.9): 64x64 tiles were faster for batch 1..3 of 589 frames (up to
/// 1,767 rows) and 128x128 from batch 4 (2,356 rows). Not measured here on any architecture
/// where it applies (the H200 follows [`SMALL_TILE_ARCHITECTURES`]).
pub const LARGE_TILE_MIN_ROWS: usize = 2048;

/// Compute capabilities where the 64x64 FP32 tile runs at every row count.
///
/// Measured on the H200 (9.0, 2026-11-29, `bench/NOTES.md`; ms per forward of the pyannote
/// stack, 589 frames, resident recurrence, each tile forced): 64x64 vs 128x128 at batch 1:
/// 3.82 vs 3.88, 8: 4.08 vs 4.15, 9: 4.15 vs 4.16, 32: 5.01 vs 5.01, 64: 6.25 vs 6.27, 128:
/// 12.43 vs 12.55, 256: 24.76 vs 24.95, 1024: 98.60 vs 99.35. The 64x64 tile is up to 1.9%
/// faster and never more than 0.2% slower (the first run of the day showed the same
/// direction at every batch): on 9.0 the 128x128 tile's 138 registers leave one block per SM,
/// the 64x64 tile's 54 leave four. Other architectures are not measured here.
pub const SMALL_TILE_ARCHITECTURES: [(u32, u32); 1] = [(9, 0)];

/// Compute capabilities where the TF32 tile may run in [`MathMode::Tf32`].
///
/// Upstream compared its TF32 tile against cuDNN TF32: it lost accuracy on 12.0 (RTX 5060 Ti,
/// every batch) and on 8.9 (RTX 4060 Ti, batch 32), so those are left out; 7.x has no TF32
/// tensor cores. 8.0, 8.6, 8.7, 9.0 and 10.0 showed no loss or were not flagged; Hopper's
/// accuracy has not yet been measured against the budget of `crate::accuracy` (1.1 x cuDNN
/// TF32's error). Architectures not listed (10.3, 11.0, 12.1, later ones) fall back to FP32
/// until measured.
pub const TF32_ARCHITECTURES: [(u32, u32); 5] = [(8, 0), (8, 6), (8, 7), (9, 0), (10, 0)];

/// Compute capabilities where [`MathMode::Fp32`] runs the 3xTF32 tile ([`ProjectionTile::Tf32x3`])
/// at every row count.
///
/// One rule per device, not per batch: if the 3xTF32 tile is a device's FP32 projection, it is
/// so at every batch there, so a window's FP32 bits never depend on the batch it ran in (the
/// 3xTF32 and SIMT tiles give different bits).
///
/// The H200 (9.0), measured 2026-12-01 (`bench/NOTES.md`, "3xTF32 with fresh step
/// accumulators", calls 1-3): with each k-step's three products summed in a fresh tensor-core
/// accumulator and added to the running sum by one FP32 add, the whole stack's relative L2
/// error against f64 is 4.0e-7 (batch 1) to 4.2e-7 (batch 64), below the SIMT tiles' 5.5e-7
/// and FP32 mode's 2e-6 budget (the first kernel, chaining all k-steps through the tensor
/// cores' accumulation, measured 4.7e-6). Speed of the final kernels (call 3), ms per forward
/// with the plan's recurrence, SIMT 64x64 / 3xTF32 128x128 / 3xTF32 64x128: batch 1 1.523 /
/// 1.518 / 1.494, 8 1.762 / 1.689 / 1.678, 32 2.901 / 2.414 / 2.472, 64 5.229 / 4.247 / 4.357,
/// 1024 82.15 / 66.12 / 68.30: a 3xTF32 tile is the faster at every batch. Other
/// architectures are not measured here (8.x has the same instructions; list one after running
/// `gpu_tf32x3` and `bench --tiles small,3xtf32,3xtf32s` there). Which 3xTF32 tile:
/// [`tf32x3_tile_for`] (on 9.0 the warpgroup-MMA one at every batch, [`WGMMA_ARCHITECTURES`]).
pub const TF32X3_ARCHITECTURES: [(u32, u32); 1] = [(9, 0)];

/// On [`TF32X3_ARCHITECTURES`], the 3xTF32 projection runs in 128x128 tiles
/// ([`ProjectionTile::Tf32x3`]) from this many GEMM rows (`batch * frames`) on, in 64x128
/// tiles ([`ProjectionTile::Tf32x3Small`]) below. Both give identical bits, so this is a speed
/// choice only.
///
/// Measured on the H200 (2026-12-01, each tile forced, plan's recurrence, ms per forward,
/// 64x128 / 128x128, calls 2 and 3 of `bench/NOTES.md`): batch 1 (589 rows) 1.474 / 1.498 and
/// 1.494 / 1.518, 8 (4,712) 1.662 / 1.676 and 1.678 / 1.689, 9 (5,301) 1.697 / 1.678 and 1.720
/// / 1.689, 32 2.446 / 2.416 and 2.472 / 2.414, 1024 68.29 / 67.01 and 68.30 / 66.12. Batch 2
/// (1,178 rows) is the exception below the threshold: 1.508 / 1.506 and 1.536 / 1.512.
pub const TF32X3_LARGE_MIN_ROWS: usize = 5_000;

/// Compute capabilities with Hopper's warpgroup MMA (`wgmma.mma_async`, the arch-specific
/// `sm_90a` features; the host compiles their kernels for `compute_90a`), where the FP32
/// projection is [`ProjectionTile::Tf32x3Wgmma`] at every row count.
///
/// The H200 (9.0), measured 2026-12-01 (`bench/NOTES.md`, session 7): a standalone harness of
/// the kernel (calls 4-6, K 256, ms a layer for both directions): 37,696 rows (batch 64) 0.289
/// against the mma.sync 128x128 tile's 0.443 in the stack, 603,136 rows (batch 1024) 4.31
/// against 6.9, GEMM error against f64 2.4e-7 (the mma.sync numerics: 1.3e-7); in the stack
/// (call 8, ms a forward against the mma.sync tiles' in the same call): batch 1 1.335 / 1.343,
/// 8 1.447 / 1.539, 32 1.963 / 2.235, 64 3.283 / 3.823, 1024 35.90 (was 44.35); stack error
/// 8.5e-7 .. 9.2e-7 against f64 (was 4.2e-7; FP32 budget 2e-6). Session 9 made the kernel
/// persistent (same bits): batch 1024 layer 1-3 projection 3.53 ms (was ~4.1), forward 33.96
/// ms; batch 256 8.54 (call 7). 10.0 and 12.x have no `wgmma` (their tensor-core generations
/// differ), so the list is 9.0 alone.
pub const WGMMA_ARCHITECTURES: [(u32, u32); 1] = [(9, 0)];

/// Whether `compute_capability` is one of [`WGMMA_ARCHITECTURES`].
pub const fn wgmma_available(compute_capability: (u32, u32)) -> bool {
    let mut i = 0;
    while i < WGMMA_ARCHITECTURES.len() {
        if WGMMA_ARCHITECTURES[i].0 == compute_capability.0
            && WGMMA_ARCHITECTURES[i].1 == compute_capability.1
        {
            return true;
        }
        i += 1;
    }
    false
}

/// The oldest compute capability with TF32 tensor cores (`mma.sync ... .tf32`) and `cp.async`,
/// which both tensor-core tiles need.
pub const TENSOR_CORE_MIN_COMPUTE_CAPABILITY: (u32, u32) = (8, 0);

/// The input-projection kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProjectionTile {
    /// FP32 SIMT, 64x64 output tiles.
    Small64,
    /// FP32 SIMT, 128x128 output tiles.
    Large128,
    /// TF32 tensor cores (`mma.sync m16n8k8`), 128x256 output tiles; [`MathMode::Tf32`] only.
    Tf32,
    /// FP32 accuracy on TF32 tensor cores ("3xTF32": each operand split into a TF32 part and a
    /// TF32 remainder, three `mma.sync` products per k-step), 128x128 output tiles; either
    /// math mode, compute capability 8.0 or later. Bits differ from the SIMT tiles'.
    Tf32x3,
    /// The 3xTF32 projection in 64x128 output tiles: the same bits as [`ProjectionTile::Tf32x3`],
    /// more blocks for small row counts.
    Tf32x3Small,
    /// The 3xTF32 projection on Hopper's warpgroup MMA (`wgmma`, [`WGMMA_ARCHITECTURES`] only),
    /// 128x128 output tiles; one FP32 add per K tile of 32 instead of per k-step of 8, so its
    /// bits differ from the `mma.sync` 3xTF32 tiles'.
    Tf32x3Wgmma,
    /// TF32 on Hopper's warpgroup MMA ([`WGMMA_ARCHITECTURES`] only), 128x256 output tiles
    /// (`m64n256k8` products), one product per k-step chained in the tensor cores (the [`ProjectionTile::Tf32`] numerics,
    /// its own bits); [`MathMode::Tf32`] only.
    Tf32Wgmma,
}

impl ProjectionTile {
    /// Every tile.
    pub const ALL: [ProjectionTile; 7] = [
        ProjectionTile::Small64,
        ProjectionTile::Large128,
        ProjectionTile::Tf32,
        ProjectionTile::Tf32x3,
        ProjectionTile::Tf32x3Small,
        ProjectionTile::Tf32x3Wgmma,
        ProjectionTile::Tf32Wgmma,
    ];

    /// Whether the tile rounds operands to TF32.
    pub const fn is_tf32(self) -> bool {
        matches!(self, ProjectionTile::Tf32 | ProjectionTile::Tf32Wgmma)
    }

    /// Whether the recurrences of a pass with this projection use TF32 mode's numerics: its gate
    /// activations (`kernels/cuda/numerics.cuh` section 7: the hardware's `ex2` and reciprocal
    /// estimates, errors of a few 1e-7 against TF32's 1e-3) and its recurrent dot (section 8:
    /// 8 FMA chains of 16 terms, one tree level fewer): exactly where the tile is a TF32 tile
    /// ([`ProjectionTile::is_tf32`]). One rule for every recurrence kernel and batch, so a
    /// window's TF32 bits never depend on the batch or the recurrence kind; FP32 mode (and a
    /// TF32 request that runs an FP32 tile) keeps the accurate activations and their bits.
    /// H200 figures: `bench/NOTES.md`, "2026-12-03 (session 19)" (gates) and "(session 20)"
    /// (dot).
    pub const fn tf32_numerics(self) -> bool {
        self.is_tf32()
    }

    /// Whether the tile runs on tensor cores (compute capability 8.0 or later).
    pub const fn needs_tensor_cores(self) -> bool {
        matches!(
            self,
            ProjectionTile::Tf32
                | ProjectionTile::Tf32x3
                | ProjectionTile::Tf32x3Small
                | ProjectionTile::Tf32x3Wgmma
                | ProjectionTile::Tf32Wgmma
        )
    }

    /// Whether the tile is one of the 3xTF32 tiles (FP32-accurate tensor-core products).
    pub const fn is_tf32x3(self) -> bool {
        matches!(
            self,
            ProjectionTile::Tf32x3 | ProjectionTile::Tf32x3Small | ProjectionTile::Tf32x3Wgmma
        )
    }

    /// Whether the tile needs Hopper's warpgroup MMA ([`WGMMA_ARCHITECTURES`]).
    pub const fn needs_wgmma(self) -> bool {
        matches!(
            self,
            ProjectionTile::Tf32x3Wgmma | ProjectionTile::Tf32Wgmma
        )
    }
}

impl fmt::Display for ProjectionTile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProjectionTile::Small64 => "fp32 64x64",
            ProjectionTile::Large128 => "fp32 128x128",
            ProjectionTile::Tf32 => "tf32 128x256",
            ProjectionTile::Tf32x3 => "3xtf32 128x128",
            ProjectionTile::Tf32x3Small => "3xtf32 64x128",
            ProjectionTile::Tf32x3Wgmma => "3xtf32 wgmma 128x128",
            ProjectionTile::Tf32Wgmma => "tf32 wgmma 128x256",
        })
    }
}

/// Why the TF32 tile does not run on an architecture in TF32 mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tf32Refusal {
    /// Compute capability below 8.0: no TF32 tensor cores.
    NoTensorCores,
    /// Upstream measured an accuracy loss against cuDNN TF32 here (8.9, 12.x).
    LostAccuracy,
    /// Not among [`TF32_ARCHITECTURES`] and never measured.
    NotValidated,
}

impl fmt::Display for Tf32Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tf32Refusal::NoTensorCores => "no TF32 tensor cores before 8.0",
            Tf32Refusal::LostAccuracy => {
                "upstream lost accuracy against cuDNN TF32 here (12.0 at every batch, 8.9 at batch 32)"
            }
            Tf32Refusal::NotValidated => "TF32 accuracy never measured on this architecture",
        })
    }
}

/// Whether the TF32 tile may run on `compute_capability`, or why not.
///
/// # Errors
/// The [`Tf32Refusal`] that keeps it off.
pub fn tf32_allowed(compute_capability: (u32, u32)) -> Result<(), Tf32Refusal> {
    let (major, minor) = compute_capability;
    if compute_capability < TENSOR_CORE_MIN_COMPUTE_CAPABILITY {
        Err(Tf32Refusal::NoTensorCores)
    } else if TF32_ARCHITECTURES.contains(&compute_capability) {
        Ok(())
    } else if (major, minor) == (8, 9) || major == 12 {
        Err(Tf32Refusal::LostAccuracy)
    } else {
        Err(Tf32Refusal::NotValidated)
    }
}

/// Whether `compute_capability` is one of [`TF32X3_ARCHITECTURES`].
pub fn tf32x3_listed(compute_capability: (u32, u32)) -> bool {
    TF32X3_ARCHITECTURES.contains(&compute_capability)
}

/// The 3xTF32 tile on `compute_capability` for `rows` rows: [`ProjectionTile::Tf32x3Wgmma`] at
/// every row count on [`WGMMA_ARCHITECTURES`], else [`tf32x3_tile_for_rows`].
pub const fn tf32x3_tile_for(compute_capability: (u32, u32), rows: usize) -> ProjectionTile {
    if wgmma_available(compute_capability) {
        ProjectionTile::Tf32x3Wgmma
    } else {
        tf32x3_tile_for_rows(rows)
    }
}

/// The `mma.sync` 3xTF32 tile for `rows` rows ([`TF32X3_LARGE_MIN_ROWS`]).
pub const fn tf32x3_tile_for_rows(rows: usize) -> ProjectionTile {
    if rows >= TF32X3_LARGE_MIN_ROWS {
        ProjectionTile::Tf32x3
    } else {
        ProjectionTile::Tf32x3Small
    }
}

/// The FP32 tile the row count asks for ([`LARGE_TILE_MIN_ROWS`]), on an architecture without
/// a measured rule of its own.
pub const fn fp32_tile_for_rows(rows: usize) -> ProjectionTile {
    if rows >= LARGE_TILE_MIN_ROWS {
        ProjectionTile::Large128
    } else {
        ProjectionTile::Small64
    }
}

/// Whether `compute_capability` is one of [`SMALL_TILE_ARCHITECTURES`].
const fn small_tile_architecture(compute_capability: (u32, u32)) -> bool {
    let mut i = 0;
    while i < SMALL_TILE_ARCHITECTURES.len() {
        let (major, minor) = SMALL_TILE_ARCHITECTURES[i];
        if major == compute_capability.0 && minor == compute_capability.1 {
            return true;
        }
        i += 1;
    }
    false
}

/// The FP32 tile for `rows` rows on `compute_capability`: 64x64 on
/// [`SMALL_TILE_ARCHITECTURES`], else [`fp32_tile_for_rows`].
pub const fn fp32_tile_for(compute_capability: (u32, u32), rows: usize) -> ProjectionTile {
    if small_tile_architecture(compute_capability) {
        ProjectionTile::Small64
    } else {
        fp32_tile_for_rows(rows)
    }
}

/// The reason an FP32 tile chosen by [`fp32_tile_for`] gives.
const fn fp32_reason(compute_capability: (u32, u32), tile: ProjectionTile, rows: usize) -> Reason {
    if small_tile_architecture(compute_capability) {
        Reason::SmallTileMeasured {
            rows,
            compute_capability,
        }
    } else {
        Reason::ByRows { tile, rows }
    }
}

fn occupancy(facts: &DeviceFacts, resources: &KernelResources, tile: ProjectionTile) -> Occupancy {
    blocks_per_sm(facts, resources.projection(tile))
}

/// Chooses the projection tile for a GEMM of `rows` rows (`batch * frames`).
///
/// In [`MathMode::Tf32`] on an architecture [`tf32_allowed`] accepts, the TF32 tile; otherwise
/// (FP32 mode, or TF32 refused) the FP32 projection: the 3xTF32 tile at every row count on
/// [`TF32X3_ARCHITECTURES`], else the SIMT tile [`fp32_tile_for`] names. A tile that cannot
/// run on the device (0 blocks per SM) gives way to the SIMT tiles, larger first.
///
/// # Errors
/// [`CoreError::NoPlan`] when no projection kernel fits an SM.
pub fn choose_projection_tile(
    facts: &DeviceFacts,
    resources: &KernelResources,
    rows: usize,
    math: MathMode,
) -> Result<Decision<ProjectionTile>, CoreError> {
    let by_rows = fp32_tile_for(facts.compute_capability, rows);
    let (preferred, reason) = match (math, tf32_allowed(facts.compute_capability)) {
        (MathMode::Tf32, Ok(())) => (
            if wgmma_available(facts.compute_capability) {
                ProjectionTile::Tf32Wgmma
            } else {
                ProjectionTile::Tf32
            },
            Reason::Tf32Allowed {
                compute_capability: facts.compute_capability,
            },
        ),
        // FP32 mode, or TF32 mode where the TF32 tile is refused: the FP32 projection.
        (_, _) if tf32x3_listed(facts.compute_capability) => {
            let tile = tf32x3_tile_for(facts.compute_capability, rows);
            (
                tile,
                Reason::Tf32x3Listed {
                    tile,
                    rows,
                    compute_capability: facts.compute_capability,
                },
            )
        }
        (MathMode::Tf32, Err(why)) => (
            by_rows,
            Reason::Tf32Refused {
                tile: by_rows,
                compute_capability: facts.compute_capability,
                why,
            },
        ),
        (MathMode::Fp32, _) => (
            by_rows,
            fp32_reason(facts.compute_capability, by_rows, rows),
        ),
    };
    let preferred_occupancy = occupancy(facts, resources, preferred);
    if preferred_occupancy.blocks_per_sm > 0 {
        return Ok(Decision {
            choice: preferred,
            reason,
        });
    }
    // Fall back to smaller FP32 tiles, largest first.
    let fallbacks: &[ProjectionTile] = match preferred {
        ProjectionTile::Tf32x3Wgmma => &[
            ProjectionTile::Tf32x3,
            ProjectionTile::Tf32x3Small,
            ProjectionTile::Large128,
            ProjectionTile::Small64,
        ],
        ProjectionTile::Tf32Wgmma => &[
            ProjectionTile::Tf32,
            ProjectionTile::Large128,
            ProjectionTile::Small64,
        ],
        ProjectionTile::Tf32x3 => &[
            ProjectionTile::Tf32x3Small,
            ProjectionTile::Large128,
            ProjectionTile::Small64,
        ],
        ProjectionTile::Tf32 | ProjectionTile::Tf32x3Small => {
            &[ProjectionTile::Large128, ProjectionTile::Small64]
        }
        ProjectionTile::Large128 => &[ProjectionTile::Small64],
        ProjectionTile::Small64 => &[],
    };
    for &tile in fallbacks {
        if occupancy(facts, resources, tile).blocks_per_sm > 0 {
            let reason = Reason::ProjectionFallback {
                tile,
                preferred,
                limit: preferred_occupancy.limited_by,
            };
            return Ok(Decision {
                choice: tile,
                reason,
            });
        }
    }
    Err(CoreError::NoPlan {
        reason: "no projection kernel fits an SM",
    })
}

/// Checks a projection tile forced through [`super::Overrides`].
///
/// # Errors
/// [`CoreError::ForcedChoice`] for the TF32 tile in [`MathMode::Fp32`], for either tensor-core
/// tile before compute capability 8.0, or for a tile whose block does not fit an SM.
pub fn check_forced_projection(
    facts: &DeviceFacts,
    resources: &KernelResources,
    tile: ProjectionTile,
    math: MathMode,
) -> Result<Decision<ProjectionTile>, CoreError> {
    if tile.is_tf32() && math == MathMode::Fp32 {
        return Err(CoreError::ForcedChoice {
            what: "tf32 projection",
            reason: "FP32 math mode allows no TF32 rounding",
        });
    }
    if tile.needs_tensor_cores() && facts.compute_capability < TENSOR_CORE_MIN_COMPUTE_CAPABILITY {
        return Err(CoreError::ForcedChoice {
            what: if tile.is_tf32() {
                "tf32 projection"
            } else {
                "3xtf32 projection"
            },
            reason: "no TF32 tensor cores before compute capability 8.0",
        });
    }
    if tile.needs_wgmma() && !wgmma_available(facts.compute_capability) {
        return Err(CoreError::ForcedChoice {
            what: "3xtf32 wgmma projection",
            reason: "warpgroup MMA (wgmma) exists on compute capability 9.0 only",
        });
    }
    if occupancy(facts, resources, tile).blocks_per_sm == 0 {
        return Err(CoreError::ForcedChoice {
            what: "projection tile",
            reason: "its block does not fit an SM",
        });
    }
    Ok(Decision {
        choice: tile,
        reason: Reason::ForcedProjection(tile),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::table;

    fn facts(name: &str) -> DeviceFacts {
        table::find(name).unwrap().facts
    }

    #[test]
    fn rows_pick_the_fp32_tile() {
        let nominal = KernelResources::nominal();
        let ada = facts("rtx4090");
        for (rows, tile) in [
            (0, ProjectionTile::Small64),
            (1767, ProjectionTile::Small64),
            (2047, ProjectionTile::Small64),
        ] {
            assert_eq!(
                choose_projection_tile(&ada, &nominal, rows, MathMode::Fp32)
                    .unwrap()
                    .choice,
                tile
            );
        }
        for rows in [2048, 2356, 589 * 1024] {
            let d = choose_projection_tile(&ada, &nominal, rows, MathMode::Fp32).unwrap();
            assert_eq!(d.choice, ProjectionTile::Large128);
            assert_eq!(
                d.reason,
                Reason::ByRows {
                    tile: ProjectionTile::Large128,
                    rows
                }
            );
        }
    }

    #[test]
    fn hopper_runs_3xtf32_in_fp32_mode_in_tiles_by_rows() {
        // TF32X3_ARCHITECTURES = [9.0] (the H200 measurement: 4.2e-7 for the stack, faster than
        // the SIMT tiles at every batch): FP32 mode runs a 3xTF32 tile at every row count, the
        // 64x128 one below TF32X3_LARGE_MIN_ROWS; TF32 mode keeps the TF32 tile. (9.0 has
        // warpgroup MMA and runs that tile at every row count; the mma.sync rule by rows is
        // what a listed architecture without it would run.)
        for (rows, tile) in [
            (0, ProjectionTile::Tf32x3Small),
            (589, ProjectionTile::Tf32x3Small),
            (8 * 589, ProjectionTile::Tf32x3Small),
            (TF32X3_LARGE_MIN_ROWS - 1, ProjectionTile::Tf32x3Small),
            (TF32X3_LARGE_MIN_ROWS, ProjectionTile::Tf32x3),
            (9 * 589, ProjectionTile::Tf32x3),
            (589 * 1024, ProjectionTile::Tf32x3),
        ] {
            assert_eq!(tf32x3_tile_for_rows(rows), tile, "{rows}");
            assert_eq!(tf32x3_tile_for((8, 0), rows), tile, "{rows}");
            assert_eq!(tf32x3_tile_for((10, 0), rows), tile, "{rows}");
            assert_eq!(
                tf32x3_tile_for((9, 0), rows),
                ProjectionTile::Tf32x3Wgmma,
                "{rows}"
            );
        }
        let nominal = KernelResources::nominal();
        for name in ["h200", "h100"] {
            let f = facts(name);
            for rows in [0, 589, 8 * 589, 9 * 589, 589 * 1024] {
                let tile = ProjectionTile::Tf32x3Wgmma;
                let d = choose_projection_tile(&f, &nominal, rows, MathMode::Fp32).unwrap();
                assert_eq!(d.choice, tile, "{name} {rows}");
                assert_eq!(
                    d.reason,
                    Reason::Tf32x3Listed {
                        tile,
                        rows,
                        compute_capability: (9, 0)
                    }
                );
                let d = choose_projection_tile(&f, &nominal, rows, MathMode::Tf32).unwrap();
                assert_eq!(d.choice, ProjectionTile::Tf32Wgmma, "{name} {rows}");
            }
        }
        for e in crate::device::table::all() {
            assert_eq!(
                tf32x3_listed(e.facts.compute_capability),
                e.facts.compute_capability == (9, 0),
                "{}",
                e.name
            );
        }
        // Forced, it runs from 8.0 in either mode.
        let h200 = facts("h200");
        for math in [MathMode::Fp32, MathMode::Tf32] {
            let d = check_forced_projection(&h200, &nominal, ProjectionTile::Tf32x3, math).unwrap();
            assert_eq!(d.choice, ProjectionTile::Tf32x3);
        }
    }

    #[test]
    fn tf32_only_where_allowed() {
        let nominal = KernelResources::nominal();
        for (name, tf32) in [
            ("t4", false),
            ("a10", true),
            ("a100", true),
            ("orin", true),
            ("l4", false),
            ("rtx4060ti", false),
            ("h200", true),
            ("b200", true),
            ("rtx5060ti", false),
            ("rtx5090", false),
        ] {
            let f = facts(name);
            let d = choose_projection_tile(&f, &nominal, 4 * 589, MathMode::Tf32).unwrap();
            assert_eq!(d.choice.is_tf32(), tf32, "{name}");
            if !tf32 {
                assert_eq!(d.choice, ProjectionTile::Large128, "{name}");
                assert!(matches!(d.reason, Reason::Tf32Refused { .. }));
            }
            // FP32 mode never rounds to TF32.
            assert!(
                !choose_projection_tile(&f, &nominal, 4 * 589, MathMode::Fp32)
                    .unwrap()
                    .choice
                    .is_tf32()
            );
        }
        assert_eq!(tf32_allowed((7, 5)), Err(Tf32Refusal::NoTensorCores));
        assert_eq!(tf32_allowed((8, 9)), Err(Tf32Refusal::LostAccuracy));
        assert_eq!(tf32_allowed((12, 1)), Err(Tf32Refusal::LostAccuracy));
        assert_eq!(tf32_allowed((10, 3)), Err(Tf32Refusal::NotValidated));
        assert_eq!(tf32_allowed((9, 0)), Ok(()));
    }

    #[test]
    fn tiles_that_do_not_fit_give_way() {
        let mut nominal = KernelResources::nominal();
        let h200 = facts("h200");
        // TF32 mode on 9.0: the warpgroup TF32 tile, else the mma.sync one, else SIMT.
        let tf32 = |r: &KernelResources| {
            choose_projection_tile(&h200, r, 4096, MathMode::Tf32)
                .unwrap()
                .choice
        };
        assert_eq!(tf32(&nominal), ProjectionTile::Tf32Wgmma);
        nominal.projection_tf32_wgmma.dynamic_shared_bytes = 300_000;
        assert_eq!(tf32(&nominal), ProjectionTile::Tf32);
        nominal.projection_tf32.dynamic_shared_bytes = 300_000;
        let d = choose_projection_tile(&h200, &nominal, 4096, MathMode::Tf32).unwrap();
        assert_eq!(d.choice, ProjectionTile::Large128);
        assert!(matches!(
            d.reason,
            Reason::ProjectionFallback {
                preferred: ProjectionTile::Tf32Wgmma,
                ..
            }
        ));
        // FP32 mode on 9.0 prefers the warpgroup 3xTF32 tile, then the mma.sync ones; where
        // none fits, the SIMT ones.
        let fp32 = |r: &KernelResources, rows: usize| {
            choose_projection_tile(&h200, r, rows, MathMode::Fp32)
                .unwrap()
                .choice
        };
        assert_eq!(fp32(&nominal, 8192), ProjectionTile::Tf32x3Wgmma);
        assert_eq!(fp32(&nominal, 589), ProjectionTile::Tf32x3Wgmma);
        nominal.projection_tf32x3_wgmma.threads = 2048;
        assert_eq!(fp32(&nominal, 8192), ProjectionTile::Tf32x3);
        assert_eq!(fp32(&nominal, 589), ProjectionTile::Tf32x3);
        nominal.projection_tf32x3.threads = 2048;
        assert_eq!(fp32(&nominal, 8192), ProjectionTile::Tf32x3Small);
        nominal.projection_tf32x3_small.threads = 2048;
        let d = choose_projection_tile(&h200, &nominal, 4096, MathMode::Fp32).unwrap();
        assert_eq!(d.choice, ProjectionTile::Large128);
        assert!(matches!(
            d.reason,
            Reason::ProjectionFallback {
                preferred: ProjectionTile::Tf32x3Wgmma,
                ..
            }
        ));
        nominal.projection_large.threads = 2048;
        assert_eq!(fp32(&nominal, 4096), ProjectionTile::Small64);
        nominal.projection_small.threads = 2048;
        assert!(matches!(
            choose_projection_tile(&h200, &nominal, 4096, MathMode::Fp32),
            Err(CoreError::NoPlan { .. })
        ));
    }

    #[test]
    fn forced_tiles_are_checked() {
        let nominal = KernelResources::nominal();
        let h200 = facts("h200");
        assert!(matches!(
            check_forced_projection(&h200, &nominal, ProjectionTile::Tf32, MathMode::Fp32),
            Err(CoreError::ForcedChoice { .. })
        ));
        assert!(matches!(
            check_forced_projection(&facts("t4"), &nominal, ProjectionTile::Tf32, MathMode::Tf32),
            Err(CoreError::ForcedChoice { .. })
        ));
        // Forcing TF32 where upstream saw a loss is allowed (for measurement), and says so.
        let d = check_forced_projection(
            &facts("rtx5090"),
            &nominal,
            ProjectionTile::Tf32,
            MathMode::Tf32,
        )
        .unwrap();
        assert_eq!(d.reason, Reason::ForcedProjection(ProjectionTile::Tf32));
        // 3xTF32 is FP32-accurate: allowed in both modes from 8.0, refused before; the 128x128
        // tile's 106 KiB of shared memory do not fit 8.9's 99 KiB opt-in, the 64x128 tile's do.
        for math in [MathMode::Fp32, MathMode::Tf32] {
            for (name, tile) in [
                ("h200", ProjectionTile::Tf32x3),
                ("a100", ProjectionTile::Tf32x3),
                ("h200", ProjectionTile::Tf32x3Small),
                ("rtx4060ti", ProjectionTile::Tf32x3Small),
            ] {
                let d = check_forced_projection(&facts(name), &nominal, tile, math).unwrap();
                assert_eq!(d.reason, Reason::ForcedProjection(tile));
            }
            assert!(matches!(
                check_forced_projection(
                    &facts("rtx4060ti"),
                    &nominal,
                    ProjectionTile::Tf32x3,
                    math
                ),
                Err(CoreError::ForcedChoice {
                    what: "projection tile",
                    ..
                })
            ));
            assert!(matches!(
                check_forced_projection(&facts("t4"), &nominal, ProjectionTile::Tf32x3, math),
                Err(CoreError::ForcedChoice {
                    what: "3xtf32 projection",
                    ..
                })
            ));
        }
        assert_eq!(
            check_forced_projection(&h200, &nominal, ProjectionTile::Small64, MathMode::Fp32)
                .unwrap()
                .choice,
            ProjectionTile::Small64
        );
    }
}
