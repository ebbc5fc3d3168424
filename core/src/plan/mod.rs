//! Plan selection: pure functions of device facts, kernel resources, stack shape, batch and
//! math mode.
//!
//! [`select`] only composes; each decision is one pure function in its own file, with its own
//! tests and named thresholds:
//!
//! | decision | function | rule |
//! |---|---|---|
//! | recurrence kernel | [`choose_recurrence`] | resident where it fits an SM (measured on 9.0: [`MEASURED_ARCHITECTURES`]), else tiled from [`TILED_MIN_BATCH`] windows, wide below |
//! | its schedule | [`choose_coop_schedule`] | [`crate::schedule`]: tile heights, launches within the co-resident capacity |
//! | directions at once | [`choose_streams`] | only when both directions fit the capacity together |
//! | projection tile | [`choose_projection_tile`] | TF32 where allowed in TF32 mode, else 64x64 on [`SMALL_TILE_ARCHITECTURES`] (measured on 9.0), elsewhere 64x64 below [`LARGE_TILE_MIN_ROWS`] rows, 128x128 from there |
//!
//! A [`Plan`] is plain data (as RustFFT's recipes are): each decision keeps its choice and a
//! [`Reason`], and `Display` prints one line per decision:
//!
//! ```
//! use bilstm_core::{MathMode, StackShape, device::table, plan};
//! let h200 = table::find("h200").unwrap();
//! let p = plan::select(&h200.facts, &plan::KernelResources::nominal(), &StackShape::pyannote(), 32, MathMode::Fp32)
//!     .unwrap();
//! assert_eq!(p.recurrence.choice, plan::RecurrenceKind::Resident);
//! for line in p.explain() {
//!     println!("{line}");
//! }
//! ```
//!
//! `select` takes the [`StackShape`] rather than a bare frame count: the projection tile
//! depends on `batch * frames` rows, and the shape is validated (hidden size 128) in the same
//! step, so a backend passes what it was prepared with.

pub mod projection;
pub mod reason;
pub mod recurrence;
pub mod schedule;
pub mod streams;

#[cfg(test)]
mod tests;

use core::fmt;

use crate::device::{DeviceFacts, DeviceQuery};
use crate::error::{CoreError, checked_mul};
use crate::geometry::{
    BLOCK_THREADS, PROJ_K_TILE, PROJ_LARGE_TILE, PROJ_SMALL_TILE, PROJ_TF32_SHARED_BYTES,
    RESIDENT_SHARED_BYTES, RESIDENT_THREADS,
};
use crate::occupancy::{KernelUsage, Occupancy, blocks_per_sm};
use crate::schedule::CoopSchedule;
use crate::shape::{MathMode, StackShape};

pub use projection::{
    LARGE_TILE_MIN_ROWS, ProjectionTile, SMALL_TILE_ARCHITECTURES, TF32_ARCHITECTURES, Tf32Refusal,
    check_forced_projection, choose_projection_tile,
};
pub use reason::Reason;
pub use recurrence::{
    MEASURED_ARCHITECTURES, RESIDENT_MIN_BLOCKS_PER_SM, RecurrenceOccupancy, TILED_MIN_BATCH,
    check_forced_recurrence, choose_recurrence,
};
pub use schedule::{RecurrenceSchedule, choose_coop_schedule};
pub use streams::choose_streams;

/// Which recurrence kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecurrenceKind {
    /// Cooperative, 16 blocks per tile of 8/16/32 windows.
    Wide,
    /// Cooperative, 8 blocks per 8-window tile.
    Tiled,
    /// One block per (window, direction), R on one SM.
    Resident,
}

impl RecurrenceKind {
    /// Every kind.
    pub const ALL: [RecurrenceKind; 3] = [
        RecurrenceKind::Wide,
        RecurrenceKind::Tiled,
        RecurrenceKind::Resident,
    ];

    /// Whether the kind needs a cooperative launch (all its blocks resident at once).
    pub const fn is_cooperative(self) -> bool {
        !matches!(self, RecurrenceKind::Resident)
    }
}

impl fmt::Display for RecurrenceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RecurrenceKind::Wide => "wide",
            RecurrenceKind::Tiled => "tiled",
            RecurrenceKind::Resident => "resident",
        })
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
}

/// Registers per thread of the compiled wide recurrence (the H200 driver and ptxas 13.0 for
/// sm_90: 222; sm_80: 224), with its static shared memory [`WIDE_STATIC_SHARED_BYTES`]: one
/// block per SM on every table entry.
pub const WIDE_REGISTERS: u32 = 222;
/// Static shared bytes of the compiled wide recurrence: two hidden-state stages of 32 windows x
/// (128 + 8) floats (measured on the H200 by the driver, 2026-11-29).
pub const WIDE_STATIC_SHARED_BYTES: usize = 34_816;
/// Registers per thread of the compiled tiled recurrence (the H200 driver and ptxas 13.0 for
/// sm_90: 126; sm_80: 124; `__launch_bounds__(256, 2)` caps it at 128): two blocks per SM on
/// every table entry.
pub const TILED_REGISTERS: u32 = 126;
/// Static shared bytes of the compiled tiled recurrence: two hidden-state stages of 8 windows x
/// (128 + 16) floats.
pub const TILED_STATIC_SHARED_BYTES: usize = 9_216;
/// Registers per thread of the compiled resident recurrence (the H200 driver's figure,
/// 2026-11-29, and ptxas 13.0 for sm_80: 238; 128 of them hold half of R): one 256-thread block
/// per SM, which its 134,144 dynamic shared bytes allow anyway.
pub const RESIDENT_REGISTERS: u32 = 238;

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
    ///   (design estimate).
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
        }
    }

    /// The usage of `kind`'s recurrence kernel.
    pub const fn recurrence(&self, kind: RecurrenceKind) -> &KernelUsage {
        match kind {
            RecurrenceKind::Wide => &self.wide,
            RecurrenceKind::Tiled => &self.tiled,
            RecurrenceKind::Resident => &self.resident,
        }
    }

    /// The usage of `tile`'s projection kernel.
    pub const fn projection(&self, tile: ProjectionTile) -> &KernelUsage {
        match tile {
            ProjectionTile::Small64 => &self.projection_small,
            ProjectionTile::Large128 => &self.projection_large,
            ProjectionTile::Tf32 => &self.projection_tf32,
        }
    }
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
    /// Blocks of the recurrence kernel the device holds at once (occupancy times SMs).
    pub co_resident_blocks: usize,
    /// How the recurrence is launched per layer.
    pub schedule: Decision<RecurrenceSchedule>,
    /// Whether both directions of a layer run at once.
    pub concurrent_directions: Decision<bool>,
    /// The projection kernel.
    pub projection: Decision<ProjectionTile>,
    /// Its occupancy.
    pub projection_occupancy: Occupancy,
}

/// One line of [`Plan::explain`]: a decision's name and its reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExplainLine<'a> {
    /// `"recurrence"`, `"schedule"`, `"streams"` or `"projection"`.
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
            RecurrenceSchedule::Cooperative(_) => None,
        }
    }

    /// Rows of the projection GEMM: `batch * frames` (checked when the plan was made).
    pub const fn projection_rows(&self) -> usize {
        self.batch.saturating_mul(self.frames)
    }

    /// One line per decision, in the order they were made.
    pub fn explain(&self) -> [ExplainLine<'_>; 4] {
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
/// one without cooperative launch or room for a tile, a TF32 projection in FP32 mode or
/// before 8.0).
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
    let recurrence = match overrides.recurrence {
        Some(kind) => check_forced_recurrence(facts, &occupancy, kind)?,
        None => choose_recurrence(facts, &occupancy, batch)?,
    };
    let kind = recurrence.choice;
    let recurrence_occupancy = occupancy.get(kind);
    let co_resident_blocks = recurrence_occupancy.co_resident_blocks(facts.sm_count);
    let schedule = choose_coop_schedule(kind, batch, co_resident_blocks)?;
    let concurrent_directions = choose_streams(&schedule.choice, co_resident_blocks);

    let projection = match overrides.projection {
        Some(tile) => check_forced_projection(facts, resources, tile, math)?,
        None => choose_projection_tile(facts, resources, rows, math)?,
    };
    let projection_occupancy = blocks_per_sm(facts, resources.projection(projection.choice));

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
    })
}
