//! # bilstm-kernels
//!
//! The CUDA C++ sources of bilstm's kernels and their launch contracts, as data: no code here
//! runs on a GPU or talks to a driver. The CUDA backend (`bilstm-cuda`) compiles the sources
//! with NVRTC at prepare time for the device's exact architecture, passing every constant of
//! `bilstm_core::geometry::defines()` as a `-D` option (no geometry is written in a `.cu`).
//!
//! One kernel = one [`KernelId`] = one entry point `bilstm_<name>`; each `.cu` file opens with
//! a "Launch contract" comment (grid, block, shared memory, cooperative or not, parameter
//! struct, preconditions, postconditions, numerics, defines read), which [`Kernel::contract`]
//! returns. The parameter structs are in [`params`], mirrored in the `.cu` files.
//!
//! # Headers
//! NVRTC is given no include path and no CUDA header. The shared `.cuh` files ([`HEADERS`])
//! are pasted into a kernel's source by [`expand_source`]: each `#include "name.cuh"` line is
//! replaced by that header (once per translation unit, recursively), framed by `#line`
//! directives so compiler messages name the right file and line.
//!
//! ```
//! use bilstm_kernels::{KernelId, expand_source};
//! let k = KernelId::RecurrenceWide.kernel();
//! assert_eq!(k.entry, "bilstm_recurrence_wide");
//! assert!(k.cooperative());
//! let full = expand_source(k.source).unwrap();
//! assert!(!full.lines().any(|l| l.trim_start().starts_with("#include")));
//! ```
#![forbid(unsafe_code)]

pub mod params;

use bilstm_core::geometry;

use core::fmt;

/// One kernel entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelId {
    /// `bilstm_clear` (`clear.cu`): zeroes the exchange and the error words.
    Clear,
    /// `bilstm_projection_small` (`projection.cu`): FP32 input projection, 64x64 tiles.
    ProjectionSmall,
    /// `bilstm_projection_large` (`projection.cu`): FP32 input projection, 128x128 tiles.
    ProjectionLarge,
    /// `bilstm_recurrence_wide` (`recurrence_wide.cu`): the wide cooperative recurrence.
    RecurrenceWide,
    /// `bilstm_recurrence_tiled` (`recurrence_tiled.cu`): the tiled cooperative recurrence.
    RecurrenceTiled,
    /// `bilstm_recurrence_resident` (`recurrence_resident.cu`): one block per window and
    /// direction, R on one SM.
    RecurrenceResident,
    /// `bilstm_recurrence_cluster2` (`recurrence_cluster.cu`): 2-CTA thread-block clusters
    /// per window and direction, R in registers (compute capability 9.0 and later).
    RecurrenceCluster2,
    /// `bilstm_recurrence_cluster4` (`recurrence_cluster.cu`): 4-CTA thread-block clusters
    /// per window and direction, R in registers (compute capability 9.0 and later).
    RecurrenceCluster4,
    /// `bilstm_recurrence_cluster2w2` (`recurrence_cluster.cu`): 2-CTA thread-block clusters
    /// per pair of windows and direction, R in registers (compute capability 9.0 and later).
    RecurrenceCluster2W2,
    /// `bilstm_recurrence_cluster2w4` (`recurrence_cluster.cu`): 2-CTA thread-block clusters per
    /// tile of 4 windows and direction, R in registers (the register quads; compute capability
    /// 9.0 and later).
    RecurrenceCluster2W4,
    /// `bilstm_recurrence_cluster2w8` (`recurrence_cluster.cu`): 2-CTA thread-block clusters per
    /// tile of 8 windows and direction, R in registers (the register quads; compute capability
    /// 9.0 and later).
    RecurrenceCluster2W8,
    /// `bilstm_recurrence_cluster2w16` (`recurrence_cluster.cu`): 2-CTA thread-block clusters
    /// per tile of 16 windows and direction, R transposed in shared memory (compute capability
    /// 9.0 and later).
    RecurrenceCluster2W16,
    /// `bilstm_recurrence_fixed8` (`recurrence_cluster.cu`): one CTA per tile of 8 windows and
    /// direction, R as 16-bit fixed point in registers, exact integer products on the tensor
    /// cores (TF32 mode only; compute capability 9.0 and later).
    RecurrenceFixed8,
    /// `bilstm_recurrence_fixed8c2`: [`KernelId::RecurrenceFixed8`] split over 2-CTA clusters.
    RecurrenceFixed8C2,
    /// `bilstm_recurrence_fixed8c4`: [`KernelId::RecurrenceFixed8`] split over 4-CTA clusters.
    RecurrenceFixed8C4,
    /// `bilstm_recurrence_fixed1c2` (`recurrence_cluster.cu`): the fixed-point recurrence's
    /// products on the integer pipe (`dp4a`), one window a 2-CTA cluster (TF32 mode only;
    /// compute capability 9.0 and later).
    RecurrenceFixed1C2,
    /// `bilstm_recurrence_fixed1c4`: [`KernelId::RecurrenceFixed1C2`] over 4-CTA clusters.
    RecurrenceFixed1C4,
    /// `bilstm_recurrence_fixed1c8`: [`KernelId::RecurrenceFixed1C2`] over 8-CTA clusters of
    /// half the threads.
    RecurrenceFixed1C8,
    /// `bilstm_recurrence_fixed4` (`recurrence_cluster.cu`): the fixed-point recurrence on the
    /// tensor cores for tiles of 4 windows, the MMA's columns each window's two byte planes of h
    /// (TF32 mode only; compute capability 9.0 and later).
    RecurrenceFixed4,
    /// `bilstm_recurrence_fixed4c2`: [`KernelId::RecurrenceFixed4`] split over 2-CTA clusters.
    RecurrenceFixed4C2,
    /// `bilstm_recurrence_fixed4c4`: [`KernelId::RecurrenceFixed4`] split over 4-CTA clusters.
    RecurrenceFixed4C4,
    /// `bilstm_recurrence_fixed4c8`: [`KernelId::RecurrenceFixed4`] split over 8-CTA clusters.
    RecurrenceFixed4C8,
    /// `bilstm_recurrence_fixed2c4`: [`KernelId::RecurrenceFixed4C4`] with tiles of 2 windows.
    RecurrenceFixed2C4,
    /// `bilstm_recurrence_fixed2c8`: [`KernelId::RecurrenceFixed4C8`] with tiles of 2 windows.
    RecurrenceFixed2C8,
    /// `bilstm_projection_tf32` (`projection_tf32.cu`): TF32 tensor-core input projection,
    /// 128x256 tiles (`MathMode::Tf32` only, compute capability 8.0 or later).
    ProjectionTf32,
    /// `bilstm_projection_tf32x3` (`projection_tf32x3.cu`): FP32-accurate input projection on
    /// TF32 tensor cores ("3xTF32"), 128x128 tiles (compute capability 8.0 or later).
    ProjectionTf32x3,
    /// `bilstm_projection_tf32x3_small` (`projection_tf32x3.cu`): the 3xTF32 projection in
    /// 64x128 tiles, bit for bit the 128x128 tile's results (compute capability 8.0 or later).
    ProjectionTf32x3Small,
    /// `bilstm_projection_tf32x3_wgmma` (`projection_tf32x3.cu`): the 3xTF32 projection on
    /// warpgroup MMA (compute capability 9.0).
    ProjectionTf32x3Wgmma,
    /// `bilstm_projection_tf32_wgmma` (`projection_tf32x3.cu`): the TF32 projection on warpgroup
    /// MMA (compute capability 9.0, `MathMode::Tf32`).
    ProjectionTf32Wgmma,
    /// `bilstm_projection_tf32_resident` (`projection_tf32x3.cu`): the TF32 projection with one
    /// column tile's weights resident and the activations copied by TMA (compute capability 9.0,
    /// `MathMode::Tf32`, layers whose input a recurrence stored rounded to TF32).
    ProjectionTf32Resident,
}

/// Every kernel, in a fixed order.
pub const ALL: [KernelId; 30] = [
    KernelId::Clear,
    KernelId::ProjectionSmall,
    KernelId::ProjectionLarge,
    KernelId::RecurrenceWide,
    KernelId::RecurrenceTiled,
    KernelId::RecurrenceResident,
    KernelId::RecurrenceCluster2,
    KernelId::RecurrenceCluster4,
    KernelId::RecurrenceCluster2W2,
    KernelId::RecurrenceCluster2W4,
    KernelId::RecurrenceCluster2W8,
    KernelId::RecurrenceCluster2W16,
    KernelId::RecurrenceFixed8,
    KernelId::RecurrenceFixed8C2,
    KernelId::RecurrenceFixed8C4,
    KernelId::RecurrenceFixed1C2,
    KernelId::RecurrenceFixed1C4,
    KernelId::RecurrenceFixed1C8,
    KernelId::RecurrenceFixed4,
    KernelId::RecurrenceFixed4C2,
    KernelId::RecurrenceFixed4C4,
    KernelId::RecurrenceFixed4C8,
    KernelId::RecurrenceFixed2C4,
    KernelId::RecurrenceFixed2C8,
    KernelId::ProjectionTf32,
    KernelId::ProjectionTf32x3,
    KernelId::ProjectionTf32x3Small,
    KernelId::ProjectionTf32x3Wgmma,
    KernelId::ProjectionTf32Wgmma,
    KernelId::ProjectionTf32Resident,
];

/// A kernel: its entry point, its source file and how it is launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kernel {
    /// Which kernel.
    pub id: KernelId,
    /// The `extern "C"` entry point.
    pub entry: &'static str,
    /// The source file's name under `kernels/cuda/` (several entries may share one file).
    pub source_name: &'static str,
    /// The source text (before [`expand_source`]).
    pub source: &'static str,
    /// How it is launched.
    pub launch: LaunchKind,
    /// Threads per block it is launched with.
    pub block_threads: u32,
    /// Dynamic shared bytes per block it is launched with (above 48 KiB the host must allow
    /// them first with `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    pub dynamic_shared_bytes: u32,
}

/// How a kernel is launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LaunchKind {
    /// `cuLaunchKernel`: blocks beyond the device's capacity run in later waves.
    Plain,
    /// `cuLaunchCooperativeKernel`: every block resident at once (blocks wait for each other).
    Cooperative,
    /// `cuLaunchKernelEx` with the cluster dimension `(size, 1, 1)`
    /// (`CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`, compute capability 9.0 and later): the CTAs of a
    /// cluster are co-scheduled; clusters beyond the device's capacity run in later waves.
    Cluster {
        /// CTAs per cluster.
        size: u32,
        /// Windows each cluster runs side by side (the grid is `2 * ceil(batch / windows)`
        /// clusters).
        windows: u32,
    },
}

impl Kernel {
    /// Whether it must be launched cooperatively (all blocks co-resident).
    pub const fn cooperative(&self) -> bool {
        matches!(self.launch, LaunchKind::Cooperative)
    }

    /// The cluster size it must be launched with, if it is a cluster kernel.
    pub const fn cluster_size(&self) -> Option<u32> {
        match self.launch {
            LaunchKind::Cluster { size, .. } => Some(size),
            _ => None,
        }
    }

    /// The "Launch contract" comment that opens the kernel's source (comment markers
    /// stripped), or `None` if the source has none (a test checks every source has one).
    pub fn contract(&self) -> Option<String> {
        let mut lines = self
            .source
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("// Launch contract"));
        lines.next()?;
        let body: Vec<&str> = lines
            .take_while(|l| l.trim_start().starts_with("//") && l.trim() != "//")
            .map(|l| l.trim_start().trim_start_matches("//").trim_end())
            .collect();
        Some(body.join("\n"))
    }
}

const CLEAR_SOURCE: &str = include_str!("../cuda/clear.cu");
const PROJECTION_SOURCE: &str = include_str!("../cuda/projection.cu");
const RECURRENCE_WIDE_SOURCE: &str = include_str!("../cuda/recurrence_wide.cu");
const RECURRENCE_TILED_SOURCE: &str = include_str!("../cuda/recurrence_tiled.cu");
const RECURRENCE_RESIDENT_SOURCE: &str = include_str!("../cuda/recurrence_resident.cu");
const RECURRENCE_CLUSTER_SOURCE: &str = include_str!("../cuda/recurrence_cluster.cu");
const PROJECTION_TF32_SOURCE: &str = include_str!("../cuda/projection_tf32.cu");
const PROJECTION_TF32X3_SOURCE: &str = include_str!("../cuda/projection_tf32x3.cu");

/// `bilstm_clear`: zeroes `word_count` exchange words and `error_count` error ints.
/// 1-D grid (any size; grid-stride loop), 256 threads, no dynamic shared memory, not
/// cooperative, [`params::ClearParams`]. Postcondition: all those words are zero for every
/// later kernel on the stream.
pub const CLEAR: Kernel = Kernel {
    id: KernelId::Clear,
    entry: "bilstm_clear",
    source_name: "clear.cu",
    source: CLEAR_SOURCE,
    launch: LaunchKind::Plain,
    block_threads: geometry::BLOCK_THREADS as u32,
    dynamic_shared_bytes: 0,
};

/// `bilstm_projection_small`: `gates[d] = x . W_d` for both directions, 64x64 output tiles.
/// Grid `(ceil(rows / 64), 512 / 64, 2)`, 256 threads, no dynamic shared memory, not
/// cooperative, [`params::ProjectionParams`]. Each output is one ascending FMA chain over
/// `k < in_width` from 0.0f: bitwise identical to [`PROJECTION_LARGE`].
pub const PROJECTION_SMALL: Kernel = Kernel {
    id: KernelId::ProjectionSmall,
    entry: "bilstm_projection_small",
    source_name: "projection.cu",
    source: PROJECTION_SOURCE,
    launch: LaunchKind::Plain,
    block_threads: geometry::BLOCK_THREADS as u32,
    dynamic_shared_bytes: 0,
};

/// `bilstm_projection_large`: as [`PROJECTION_SMALL`] with 128x128 output tiles; grid
/// `(ceil(rows / 128), 512 / 128, 2)`.
pub const PROJECTION_LARGE: Kernel = Kernel {
    id: KernelId::ProjectionLarge,
    entry: "bilstm_projection_large",
    source_name: "projection.cu",
    source: PROJECTION_SOURCE,
    launch: LaunchKind::Plain,
    block_threads: geometry::BLOCK_THREADS as u32,
    dynamic_shared_bytes: 0,
};

/// `bilstm_recurrence_wide`: all steps of one direction of one layer for a range of tiles.
/// COOPERATIVE; grid `tiles_in_launch * 16` blocks of 256 threads, no dynamic shared memory,
/// [`params::RecurrenceCoopParams`]. Preconditions: exchange zeroed on this stream (by
/// [`CLEAR`]) and laid out by `ExchangeLayout::wide(tile_height, tiles)`, tile height 8, 16 or
/// 32. A partner that never publishes ends the kernel with `error[0] ==`
/// [`params::ERROR_PARTNER_LOST`] after `spin_timeout_ns` instead of a hang.
pub const RECURRENCE_WIDE: Kernel = Kernel {
    id: KernelId::RecurrenceWide,
    entry: "bilstm_recurrence_wide",
    source_name: "recurrence_wide.cu",
    source: RECURRENCE_WIDE_SOURCE,
    launch: LaunchKind::Cooperative,
    block_threads: geometry::BLOCK_THREADS as u32,
    dynamic_shared_bytes: 0,
};

/// `bilstm_recurrence_tiled`: all steps of one direction of one layer for a range of
/// eight-window tiles. COOPERATIVE; grid `tiles_in_launch * 8` blocks of 256 threads, no
/// dynamic shared memory, [`params::RecurrenceCoopParams`] (tile height 8). Block `b` of a tile owns units
/// `16b .. 16b + 16` of the tile's 8 windows and keeps their 64 gate rows of R in registers.
/// Preconditions: exchange zeroed on this stream (by [`CLEAR`]) and laid out by
/// `ExchangeLayout::tiled(tiles)`. A partner that never publishes ends the kernel with
/// `error[0] ==` [`params::ERROR_PARTNER_LOST`] after `spin_timeout_ns` instead of a hang.
pub const RECURRENCE_TILED: Kernel = Kernel {
    id: KernelId::RecurrenceTiled,
    entry: "bilstm_recurrence_tiled",
    source_name: "recurrence_tiled.cu",
    source: RECURRENCE_TILED_SOURCE,
    launch: LaunchKind::Cooperative,
    block_threads: geometry::BLOCK_THREADS as u32,
    dynamic_shared_bytes: 0,
};

/// `bilstm_recurrence_resident`: all steps of both directions of one layer, one block per
/// (window, direction). Not cooperative; grid `2 * batch` blocks of `RESIDENT_THREADS` (256)
/// threads, `RESIDENT_SHARED_BYTES` (134,144) dynamic shared bytes, which the host must allow
/// first with `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`;
/// [`params::RecurrenceResidentParams`]. Half of R in registers, half in shared memory, the
/// hidden state double-buffered in shared memory: one block barrier per step, no exchange, no
/// clear, no spin.
pub const RECURRENCE_RESIDENT: Kernel = Kernel {
    id: KernelId::RecurrenceResident,
    entry: "bilstm_recurrence_resident",
    source_name: "recurrence_resident.cu",
    source: RECURRENCE_RESIDENT_SOURCE,
    launch: LaunchKind::Plain,
    block_threads: geometry::RESIDENT_THREADS as u32,
    dynamic_shared_bytes: geometry::RESIDENT_SHARED_BYTES as u32,
};

/// `bilstm_recurrence_cluster2`: all steps of both directions of one layer, one 2-CTA
/// thread-block cluster per (window, direction), that direction's whole R in the cluster's
/// registers (128 floats a thread), hidden values pushed into every CTA with `st.async` and
/// awaited on each CTA's mbarrier. Cluster launch (`(2, 1, 1)`), grid `2 * batch * 2` CTAs of
/// `CLUSTER_THREADS` (256) threads, no dynamic shared memory, [`params::RecurrenceClusterParams`].
/// Compute capability 9.0 or later (compiled for an older one the entry is a trap). Precondition:
/// the error words zeroed on this stream (by [`CLEAR`]); a partner that never publishes ends the
/// kernel with `error[0] ==` [`params::ERROR_PARTNER_LOST`] after `spin_timeout_ns`. Output bits
/// equal every other recurrence kernel's.
pub const RECURRENCE_CLUSTER2: Kernel = cluster_kernel(
    KernelId::RecurrenceCluster2,
    "bilstm_recurrence_cluster2",
    2,
    1,
    0,
);

/// `bilstm_recurrence_cluster4`: as [`RECURRENCE_CLUSTER2`] with 4-CTA clusters (64 floats of R
/// a thread), grid `2 * batch * 4` CTAs, cluster dimension `(4, 1, 1)`.
pub const RECURRENCE_CLUSTER4: Kernel = cluster_kernel(
    KernelId::RecurrenceCluster4,
    "bilstm_recurrence_cluster4",
    4,
    1,
    0,
);

/// `bilstm_recurrence_cluster2w2`: as [`RECURRENCE_CLUSTER2`] with two windows per cluster (each
/// lane applies its registers of R to both windows' hidden states every step); grid
/// `2 * ceil(batch / 2) * 2` CTAs, cluster dimension `(2, 1, 1)`.
pub const RECURRENCE_CLUSTER2W2: Kernel = cluster_kernel(
    KernelId::RecurrenceCluster2W2,
    "bilstm_recurrence_cluster2w2",
    2,
    2,
    0,
);

/// A cluster kernel of `recurrence_cluster.cu`: clusters of `size` CTAs running `windows`
/// windows each, `CLUSTER_THREADS` threads a CTA, `dynamic_shared_bytes` of dynamic shared
/// memory.
const fn cluster_kernel(
    id: KernelId,
    entry: &'static str,
    size: u32,
    windows: u32,
    dynamic_shared_bytes: usize,
) -> Kernel {
    Kernel {
        id,
        entry,
        source_name: "recurrence_cluster.cu",
        source: RECURRENCE_CLUSTER_SOURCE,
        launch: LaunchKind::Cluster { size, windows },
        block_threads: geometry::CLUSTER_THREADS as u32,
        dynamic_shared_bytes: dynamic_shared_bytes as u32,
    }
}

/// A window-tile cluster kernel: 2-CTA clusters of `CLUSTER_TILE_WINDOWS[tile]` windows,
/// `CLUSTER_TILE_DYNAMIC_SHARED[tile]` bytes of dynamic shared memory.
const fn cluster_tile(id: KernelId, entry: &'static str, tile: usize) -> Kernel {
    cluster_kernel(
        id,
        entry,
        2,
        geometry::CLUSTER_TILE_WINDOWS[tile] as u32,
        geometry::CLUSTER_TILE_DYNAMIC_SHARED[tile],
    )
}

/// `bilstm_recurrence_cluster2w4`: all steps of both directions of one layer, one 2-CTA
/// thread-block cluster per quad of 4 windows and direction; R in registers (8-lane row groups:
/// each lane chains `2 m` and `2 m + 1` of its group's 8 rows, added in a register), the quad's
/// four dots reduced together so that each lane ends with the four gates of one (window, unit)
/// and runs that cell. Cluster launch (`(2, 1, 1)`), grid `2 * ceil(batch / 4) * 2` CTAs of
/// `CLUSTER_THREADS` (256) threads, no dynamic shared memory (5,136 static bytes),
/// [`params::RecurrenceClusterParams`]; waits, errors and output bits as
/// [`RECURRENCE_CLUSTER2`]'s (compute capability 9.0 or later).
pub const RECURRENCE_CLUSTER2W4: Kernel = cluster_tile(
    KernelId::RecurrenceCluster2W4,
    "bilstm_recurrence_cluster2w4",
    0,
);

/// `bilstm_recurrence_cluster2w8`: [`RECURRENCE_CLUSTER2W4`] with two quads (8 windows) a
/// cluster, half a step apart (each quad's cell runs between the other quad's products; each
/// quad with its own mbarriers); grid
/// `2 * ceil(batch / 8) * 2` CTAs, no dynamic shared memory (10,272 static bytes).
pub const RECURRENCE_CLUSTER2W8: Kernel = cluster_tile(
    KernelId::RecurrenceCluster2W8,
    "bilstm_recurrence_cluster2w8",
    1,
);

/// `bilstm_recurrence_cluster2w16`: all steps of both directions of one layer, one 2-CTA
/// thread-block cluster per tile of 16 windows and direction; each CTA keeps its 256 packed rows
/// of R transposed in `CLUSTER_TILE_SHARED_BYTES` (131,072) dynamic shared bytes, which the host
/// must allow first with `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`, and each thread
/// computes all four gates of one unit in four of the tile's windows. Cluster launch
/// (`(2, 1, 1)`), grid `2 * ceil(batch / 16) * 2` CTAs of `CLUSTER_THREADS` (256) threads,
/// [`params::RecurrenceClusterParams`]; waits, errors and output bits as
/// [`RECURRENCE_CLUSTER2`]'s (compute capability 9.0 or later).
pub const RECURRENCE_CLUSTER2W16: Kernel = cluster_tile(
    KernelId::RecurrenceCluster2W16,
    "bilstm_recurrence_cluster2w16",
    2,
);

/// `bilstm_recurrence_fixed8` (TF32 mode's recurrence at large batches where the plan's
/// `fixed_point` decision picks it, `bilstm_core::fixed::pick`): all steps of both directions of
/// one layer in TF32 mode, one CTA per tile of 8 windows and direction (launched as clusters of
/// one CTA), R as 16-bit fixed point in registers and the recurrent products as exact integer
/// sums on the tensor cores (`numerics.cuh` section 9, not section 8: other bits than the
/// section-8 kernels').
/// Grid `2 * ceil(batch / 8)` CTAs of `FIXED_THREADS` (512) threads, no dynamic shared memory,
/// [`params::RecurrenceClusterParams`] (`tf32_numerics` must be set: FP32 mode traps). Nothing
/// waits on another CTA. Compute capability 9.0 or later.
pub const RECURRENCE_FIXED8: Kernel = fixed_kernel(
    KernelId::RecurrenceFixed8,
    "bilstm_recurrence_fixed8",
    1,
    geometry::FIXED_WINDOWS,
);

/// `bilstm_recurrence_fixed8c2`: [`RECURRENCE_FIXED8`] with each tile's units split over a
/// 2-CTA cluster (`FIXED_THREADS / 2` threads a CTA, 64 units each), each CTA pushing its
/// units' bytes of h into every CTA's shared memory with `st.async` and waiting (bounded, as
/// [`RECURRENCE_CLUSTER2`]) on its mbarrier; grid `2 * ceil(batch / 8) * 2` CTAs. The same bits.
pub const RECURRENCE_FIXED8C2: Kernel = fixed_kernel(
    KernelId::RecurrenceFixed8C2,
    "bilstm_recurrence_fixed8c2",
    2,
    geometry::FIXED_WINDOWS,
);

/// `bilstm_recurrence_fixed8c4`: [`RECURRENCE_FIXED8C2`] with 4-CTA clusters
/// (`FIXED_THREADS / 4` threads and 32 units a CTA); grid `2 * ceil(batch / 8) * 4` CTAs.
pub const RECURRENCE_FIXED8C4: Kernel = fixed_kernel(
    KernelId::RecurrenceFixed8C4,
    "bilstm_recurrence_fixed8c4",
    4,
    geometry::FIXED_WINDOWS,
);

/// `bilstm_recurrence_fixed1c2` (picked by `bilstm_core::fixed::pick`): the fixed-point recurrence
/// (`numerics.cuh` section 9, the same bits as [`RECURRENCE_FIXED8`]) with its products on the
/// integer pipe (`dp4a` on bytes of R and h) in the one-window cluster kernels' structure: one
/// window a 2-CTA cluster of `CLUSTER_THREADS` (256) threads, grid `2 * batch * 2` CTAs, no
/// dynamic shared memory, [`params::RecurrenceClusterParams`] (`tf32_numerics` must be set;
/// `out_tf32` honoured); waits and lost partners as [`RECURRENCE_CLUSTER2`]. Compute
/// capability 9.0 or later.
pub const RECURRENCE_FIXED1C2: Kernel = cluster_kernel(
    KernelId::RecurrenceFixed1C2,
    "bilstm_recurrence_fixed1c2",
    2,
    1,
    0,
);

/// `bilstm_recurrence_fixed1c4`: [`RECURRENCE_FIXED1C2`] over 4-CTA clusters; grid
/// `2 * batch * 4` CTAs.
pub const RECURRENCE_FIXED1C4: Kernel = cluster_kernel(
    KernelId::RecurrenceFixed1C4,
    "bilstm_recurrence_fixed1c4",
    4,
    1,
    0,
);

/// `bilstm_recurrence_fixed1c8`: [`RECURRENCE_FIXED1C2`] over 8-CTA clusters of
/// `CLUSTER_THREADS / 2` (128) threads (each row group keeps 4 rows, as in
/// [`RECURRENCE_FIXED1C4`]); grid `2 * batch * 8` CTAs.
pub const RECURRENCE_FIXED1C8: Kernel = Kernel {
    block_threads: geometry::CLUSTER_THREADS as u32 / 2,
    ..cluster_kernel(
        KernelId::RecurrenceFixed1C8,
        "bilstm_recurrence_fixed1c8",
        8,
        1,
        0,
    )
};

/// `bilstm_recurrence_fixed4` (picked by `bilstm_core::fixed::pick`): the fixed-point recurrence
/// (`numerics.cuh` section 9, the same bits as [`RECURRENCE_FIXED8`]) on the tensor cores for
/// tiles of 4 windows: the `mma.m16n8k32` columns are each window's two byte planes of h (the
/// low byte stored less 128, a signed byte; the row's constant added back exactly), so one s8
/// and one u8 product a k chunk and m16 tile give all four byte products. One CTA of
/// `FIXED_THREADS` (512) threads per tile and direction (launched as clusters of one CTA), grid
/// `2 * ceil(batch / 4)` CTAs, no dynamic shared memory, [`params::RecurrenceClusterParams`]
/// (`tf32_numerics` must be set; `out_tf32` honoured). Nothing waits on another CTA. Compute
/// capability 9.0 or later.
pub const RECURRENCE_FIXED4: Kernel = fixed_kernel(
    KernelId::RecurrenceFixed4,
    "bilstm_recurrence_fixed4",
    1,
    geometry::FIXED4_WINDOWS,
);

/// `bilstm_recurrence_fixed4c2`: [`RECURRENCE_FIXED4`] with each tile's units split over a
/// 2-CTA cluster (`FIXED_THREADS / 2` threads a CTA), each warp gathering its 8 units' bytes of
/// each plane and valid window into 8 bytes and pushing them into every CTA with `st.async`,
/// waiting (bounded, as [`RECURRENCE_CLUSTER2`]) on its mbarrier; grid `2 * ceil(batch / 4) * 2`
/// CTAs. The same bits.
pub const RECURRENCE_FIXED4C2: Kernel = fixed_kernel(
    KernelId::RecurrenceFixed4C2,
    "bilstm_recurrence_fixed4c2",
    2,
    geometry::FIXED4_WINDOWS,
);

/// `bilstm_recurrence_fixed4c4`: [`RECURRENCE_FIXED4C2`] with 4-CTA clusters
/// (`FIXED_THREADS / 4` threads a CTA); grid `2 * ceil(batch / 4) * 4` CTAs.
pub const RECURRENCE_FIXED4C4: Kernel = fixed_kernel(
    KernelId::RecurrenceFixed4C4,
    "bilstm_recurrence_fixed4c4",
    4,
    geometry::FIXED4_WINDOWS,
);

/// `bilstm_recurrence_fixed4c8`: [`RECURRENCE_FIXED4C2`] with 8-CTA clusters
/// (`FIXED_THREADS / 8` threads a CTA); grid `2 * ceil(batch / 4) * 8` CTAs.
pub const RECURRENCE_FIXED4C8: Kernel = fixed_kernel(
    KernelId::RecurrenceFixed4C8,
    "bilstm_recurrence_fixed4c8",
    8,
    geometry::FIXED4_WINDOWS,
);

/// `bilstm_recurrence_fixed2c4`: [`RECURRENCE_FIXED4C4`]'s code with tiles of
/// `FIXED2_WINDOWS` (2) windows (the MMA's columns of windows 2 and 3 stay zero bytes); grid
/// `2 * ceil(batch / 2) * 4` CTAs of `FIXED_THREADS / 4` threads.
pub const RECURRENCE_FIXED2C4: Kernel = fixed_kernel(
    KernelId::RecurrenceFixed2C4,
    "bilstm_recurrence_fixed2c4",
    4,
    geometry::FIXED2_WINDOWS,
);

/// `bilstm_recurrence_fixed2c8`: [`RECURRENCE_FIXED2C4`] with 8-CTA clusters
/// (`FIXED_THREADS / 8` threads a CTA); grid `2 * ceil(batch / 2) * 8` CTAs.
pub const RECURRENCE_FIXED2C8: Kernel = fixed_kernel(
    KernelId::RecurrenceFixed2C8,
    "bilstm_recurrence_fixed2c8",
    8,
    geometry::FIXED2_WINDOWS,
);

/// A tensor-core fixed-point recurrence of `recurrence_cluster.cu`: clusters of `size` CTAs of
/// `FIXED_THREADS / size` threads running tiles of `windows` windows, no dynamic shared memory.
const fn fixed_kernel(id: KernelId, entry: &'static str, size: u32, windows: usize) -> Kernel {
    Kernel {
        block_threads: geometry::FIXED_THREADS as u32 / size,
        ..cluster_kernel(id, entry, size, windows as u32, 0)
    }
}

/// `bilstm_projection_tf32`: `gates[d] = tf32(x) . Wt_d` for both directions on TF32 tensor
/// cores (`mma.sync m16n8k8`), `Wt_d` the packed gate-major weights pre-rounded to TF32
/// (`PackedOffsets::input_tf32`). Not cooperative; grid `(ceil(rows / 128), 512 / 256, 2)`,
/// 256 threads, `PROJ_TF32_SHARED_BYTES` (73,728) dynamic shared bytes, which the host must allow
/// first with `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`;
/// [`params::ProjectionTf32Params`]. Compute capability 8.0 or later: compiled for an older
/// architecture the entry is a trap and must not be launched. Activations are rounded in the
/// kernel to nearest, ties to even; FP32 accumulation in ascending steps of 8 k, deterministic
/// run to run (not bitwise equal to the FP32 tiles).
pub const PROJECTION_TF32: Kernel = Kernel {
    id: KernelId::ProjectionTf32,
    entry: "bilstm_projection_tf32",
    source_name: "projection_tf32.cu",
    source: PROJECTION_TF32_SOURCE,
    launch: LaunchKind::Plain,
    block_threads: geometry::BLOCK_THREADS as u32,
    dynamic_shared_bytes: geometry::PROJ_TF32_SHARED_BYTES as u32,
};

/// `bilstm_projection_tf32x3`: `gates[d] = x . W_d` for both directions at FP32 accuracy on TF32
/// tensor cores ("3xTF32"), `W_d` the packed K-major weights split into TF32 high parts and
/// remainders (`PackedOffsets::input_x3`). Not cooperative; grid `(ceil(rows / 128), 512 / 128, 2)`, 256 threads,
/// `PROJ_TF32X3_SHARED_BYTES` (108,544) dynamic shared bytes, which the host must allow first with
/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`; [`params::ProjectionParams`] (the FP32
/// tiles' struct). Compute capability 8.0 or later: compiled for an older architecture the entry
/// is a trap and must not be launched. x is split in the kernel into a TF32 part and a TF32
/// remainder as `bilstm_core::layout::split_tf32` split the weights; per 8 values of k, in ascending k, the
/// products lo(x)hi(W), hi(x)lo(W), hi(x)hi(W) are added in that fixed order to an FP32
/// step accumulator that starts at 0, which one round-to-nearest FP32 add then adds to the sum:
/// every row runs the same instructions, so a window's bits do not depend on the batch, and runs
/// repeat bit for bit (not bitwise equal to the FP32 SIMT tiles).
pub const PROJECTION_TF32X3: Kernel = Kernel {
    id: KernelId::ProjectionTf32x3,
    entry: "bilstm_projection_tf32x3",
    source_name: "projection_tf32x3.cu",
    source: PROJECTION_TF32X3_SOURCE,
    launch: LaunchKind::Plain,
    block_threads: geometry::BLOCK_THREADS as u32,
    dynamic_shared_bytes: geometry::PROJ_TF32X3_SHARED_BYTES as u32,
};

/// `bilstm_projection_tf32x3_small`: [`PROJECTION_TF32X3`] in 64x128 output tiles (same source,
/// same parameters, same bits; two blocks per SM). Not cooperative; grid
/// `(ceil(rows / 64), 512 / 128, 2)`, 256 threads, `PROJ_TF32X3_SMALL_SHARED_BYTES` (46,080)
/// dynamic shared bytes; compute capability 8.0 or later.
pub const PROJECTION_TF32X3_SMALL: Kernel = Kernel {
    id: KernelId::ProjectionTf32x3Small,
    entry: "bilstm_projection_tf32x3_small",
    source_name: "projection_tf32x3.cu",
    source: PROJECTION_TF32X3_SOURCE,
    launch: LaunchKind::Plain,
    block_threads: geometry::BLOCK_THREADS as u32,
    dynamic_shared_bytes: geometry::PROJ_TF32X3_SMALL_SHARED_BYTES as u32,
};

/// `bilstm_projection_tf32x3_wgmma`: the 3xTF32 projection on Hopper's warpgroup MMA (compute
/// capability 9.0, compiled for `compute_90a`; a trap elsewhere), 128x128 output tiles, one FP32
/// add per K tile of 32 (its own bits, see its contract in `projection_tf32x3.cu`). Not
/// cooperative; persistent: grid `(min(8 * ceil(rows / 128), SMs), 1, 1)` looping over the
/// work tiles (row tile, direction, column tile), 256 threads (two warpgroups),
/// `PROJ_WG_SHARED_BYTES` (213,056) dynamic shared bytes, [`params::ProjectionParams`] with the
/// weights' warpgroup image (`PackedOffsets::input_x3_wgmma`).
pub const PROJECTION_TF32X3_WGMMA: Kernel = Kernel {
    id: KernelId::ProjectionTf32x3Wgmma,
    entry: "bilstm_projection_tf32x3_wgmma",
    source_name: "projection_tf32x3.cu",
    source: PROJECTION_TF32X3_SOURCE,
    launch: LaunchKind::Plain,
    block_threads: geometry::BLOCK_THREADS as u32,
    dynamic_shared_bytes: geometry::PROJ_WG_SHARED_BYTES as u32,
};

/// `bilstm_projection_tf32_wgmma`: [`PROJECTION_TF32X3_WGMMA`]'s TF32 twin for `MathMode::Tf32`
/// (one product a k-step, tf32(x) times the image's high parts, chained in the tensor cores);
/// the same grid, block, shared bytes, parameters and weight image (high parts read only).
pub const PROJECTION_TF32_WGMMA: Kernel = Kernel {
    id: KernelId::ProjectionTf32Wgmma,
    entry: "bilstm_projection_tf32_wgmma",
    source_name: "projection_tf32x3.cu",
    source: PROJECTION_TF32X3_SOURCE,
    launch: LaunchKind::Plain,
    block_threads: geometry::BLOCK_THREADS as u32,
    dynamic_shared_bytes: geometry::PROJ_WG_SHARED_BYTES as u32,
};

/// `bilstm_projection_tf32_resident`: the TF32 projection for `MathMode::Tf32` passes behind the
/// register-quad recurrences: each block keeps one 128-column tile's TF32 weights
/// (`PackedOffsets::input_tf32_wgmma`, the natural-order image) resident in shared memory, and
/// its `PROJ_RES_WARPGROUPS` (3) warpgroups stream 64-row blocks of activations by TMA through a
/// tensor map, one `m64n128k8` a k-step with both operands in shared memory, and store their
/// tiles with their own threads or, for inputs of at most `PROJ_RES_TMA_STORE_MAX_K_TILES` K
/// tiles (layer 0), through shared memory by TMA. Its input holds TF32 values (the previous
/// layer's recurrence stores them rounded) or is rounded in shared memory (layer 0).
/// Compute capability 9.0 (`compute_90a`; a trap elsewhere). Not cooperative; persistent: grid
/// `(8 * J, 1, 1)`, `PROJ_RES_THREADS` (384) threads, `PROJ_RES_SHARED_BYTES` (229,632) dynamic
/// shared bytes; parameters [`params::ProjectionParams`], two [`params::TensorMap`]s (the
/// activations', the output's), then the flags (u32: `PROJ_RES_ROUND_INPUT`,
/// `PROJ_RES_STORE_BY_TMA`); see its contract in `projection_tf32x3.cu`.
/// Same bits as [`PROJECTION_TF32_WGMMA`] over the same values.
pub const PROJECTION_TF32_RESIDENT: Kernel = Kernel {
    id: KernelId::ProjectionTf32Resident,
    entry: "bilstm_projection_tf32_resident",
    source_name: "projection_tf32x3.cu",
    source: PROJECTION_TF32X3_SOURCE,
    launch: LaunchKind::Plain,
    block_threads: geometry::PROJ_RES_THREADS as u32,
    dynamic_shared_bytes: geometry::PROJ_RES_SHARED_BYTES as u32,
};

impl KernelId {
    /// Whether this is one of the fixed-point recurrences (`numerics.cuh` section 9: TF32
    /// mode's recurrence where clusters exist, picked by the plan's `fixed_point` decision,
    /// never by its schedule).
    pub const fn is_fixed_point(self) -> bool {
        matches!(
            self,
            KernelId::RecurrenceFixed8
                | KernelId::RecurrenceFixed8C2
                | KernelId::RecurrenceFixed8C4
                | KernelId::RecurrenceFixed1C2
                | KernelId::RecurrenceFixed1C4
                | KernelId::RecurrenceFixed1C8
                | KernelId::RecurrenceFixed4
                | KernelId::RecurrenceFixed4C2
                | KernelId::RecurrenceFixed4C4
                | KernelId::RecurrenceFixed4C8
                | KernelId::RecurrenceFixed2C4
                | KernelId::RecurrenceFixed2C8
        )
    }

    /// The kernel's description.
    pub const fn kernel(self) -> &'static Kernel {
        match self {
            KernelId::Clear => &CLEAR,
            KernelId::ProjectionSmall => &PROJECTION_SMALL,
            KernelId::ProjectionLarge => &PROJECTION_LARGE,
            KernelId::RecurrenceWide => &RECURRENCE_WIDE,
            KernelId::RecurrenceTiled => &RECURRENCE_TILED,
            KernelId::RecurrenceResident => &RECURRENCE_RESIDENT,
            KernelId::RecurrenceCluster2 => &RECURRENCE_CLUSTER2,
            KernelId::RecurrenceCluster4 => &RECURRENCE_CLUSTER4,
            KernelId::RecurrenceCluster2W2 => &RECURRENCE_CLUSTER2W2,
            KernelId::RecurrenceCluster2W4 => &RECURRENCE_CLUSTER2W4,
            KernelId::RecurrenceCluster2W8 => &RECURRENCE_CLUSTER2W8,
            KernelId::RecurrenceCluster2W16 => &RECURRENCE_CLUSTER2W16,
            KernelId::RecurrenceFixed8 => &RECURRENCE_FIXED8,
            KernelId::RecurrenceFixed8C2 => &RECURRENCE_FIXED8C2,
            KernelId::RecurrenceFixed8C4 => &RECURRENCE_FIXED8C4,
            KernelId::RecurrenceFixed1C2 => &RECURRENCE_FIXED1C2,
            KernelId::RecurrenceFixed1C4 => &RECURRENCE_FIXED1C4,
            KernelId::RecurrenceFixed1C8 => &RECURRENCE_FIXED1C8,
            KernelId::RecurrenceFixed4 => &RECURRENCE_FIXED4,
            KernelId::RecurrenceFixed4C2 => &RECURRENCE_FIXED4C2,
            KernelId::RecurrenceFixed4C4 => &RECURRENCE_FIXED4C4,
            KernelId::RecurrenceFixed4C8 => &RECURRENCE_FIXED4C8,
            KernelId::RecurrenceFixed2C4 => &RECURRENCE_FIXED2C4,
            KernelId::RecurrenceFixed2C8 => &RECURRENCE_FIXED2C8,
            KernelId::ProjectionTf32 => &PROJECTION_TF32,
            KernelId::ProjectionTf32x3 => &PROJECTION_TF32X3,
            KernelId::ProjectionTf32x3Small => &PROJECTION_TF32X3_SMALL,
            KernelId::ProjectionTf32x3Wgmma => &PROJECTION_TF32X3_WGMMA,
            KernelId::ProjectionTf32Wgmma => &PROJECTION_TF32_WGMMA,
            KernelId::ProjectionTf32Resident => &PROJECTION_TF32_RESIDENT,
        }
    }

    /// A short lower-case name (`"recurrence_wide"`), the entry point without `bilstm_`.
    pub const fn name(self) -> &'static str {
        match self {
            KernelId::Clear => "clear",
            KernelId::ProjectionSmall => "projection_small",
            KernelId::ProjectionLarge => "projection_large",
            KernelId::RecurrenceWide => "recurrence_wide",
            KernelId::RecurrenceTiled => "recurrence_tiled",
            KernelId::RecurrenceResident => "recurrence_resident",
            KernelId::RecurrenceCluster2 => "recurrence_cluster2",
            KernelId::RecurrenceCluster4 => "recurrence_cluster4",
            KernelId::RecurrenceCluster2W2 => "recurrence_cluster2w2",
            KernelId::RecurrenceCluster2W4 => "recurrence_cluster2w4",
            KernelId::RecurrenceCluster2W8 => "recurrence_cluster2w8",
            KernelId::RecurrenceCluster2W16 => "recurrence_cluster2w16",
            KernelId::RecurrenceFixed8 => "recurrence_fixed8",
            KernelId::RecurrenceFixed8C2 => "recurrence_fixed8c2",
            KernelId::RecurrenceFixed8C4 => "recurrence_fixed8c4",
            KernelId::RecurrenceFixed1C2 => "recurrence_fixed1c2",
            KernelId::RecurrenceFixed1C4 => "recurrence_fixed1c4",
            KernelId::RecurrenceFixed1C8 => "recurrence_fixed1c8",
            KernelId::RecurrenceFixed4 => "recurrence_fixed4",
            KernelId::RecurrenceFixed4C2 => "recurrence_fixed4c2",
            KernelId::RecurrenceFixed4C4 => "recurrence_fixed4c4",
            KernelId::RecurrenceFixed4C8 => "recurrence_fixed4c8",
            KernelId::RecurrenceFixed2C4 => "recurrence_fixed2c4",
            KernelId::RecurrenceFixed2C8 => "recurrence_fixed2c8",
            KernelId::ProjectionTf32 => "projection_tf32",
            KernelId::ProjectionTf32x3 => "projection_tf32x3",
            KernelId::ProjectionTf32x3Small => "projection_tf32x3_small",
            KernelId::ProjectionTf32x3Wgmma => "projection_tf32x3_wgmma",
            KernelId::ProjectionTf32Wgmma => "projection_tf32_wgmma",
            KernelId::ProjectionTf32Resident => "projection_tf32_resident",
        }
    }
}

impl fmt::Display for KernelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A shared header: its file name (as written in `#include "..."`) and its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// File name under `kernels/cuda/`.
    pub name: &'static str,
    /// The text.
    pub source: &'static str,
}

/// Every shared header.
pub const HEADERS: [Header; 6] = [
    Header {
        name: "common.cuh",
        source: include_str!("../cuda/common.cuh"),
    },
    Header {
        name: "numerics.cuh",
        source: include_str!("../cuda/numerics.cuh"),
    },
    Header {
        name: "exchange.cuh",
        source: include_str!("../cuda/exchange.cuh"),
    },
    Header {
        name: "mma.cuh",
        source: include_str!("../cuda/mma.cuh"),
    },
    Header {
        name: "coop.cuh",
        source: include_str!("../cuda/coop.cuh"),
    },
    Header {
        name: "mbarrier.cuh",
        source: include_str!("../cuda/mbarrier.cuh"),
    },
];

/// Every distinct `.cu` source: `(file name, text)`.
pub fn sources() -> [(&'static str, &'static str); 8] {
    [
        ("clear.cu", CLEAR_SOURCE),
        ("projection.cu", PROJECTION_SOURCE),
        ("recurrence_wide.cu", RECURRENCE_WIDE_SOURCE),
        ("recurrence_tiled.cu", RECURRENCE_TILED_SOURCE),
        ("recurrence_resident.cu", RECURRENCE_RESIDENT_SOURCE),
        ("recurrence_cluster.cu", RECURRENCE_CLUSTER_SOURCE),
        ("projection_tf32.cu", PROJECTION_TF32_SOURCE),
        ("projection_tf32x3.cu", PROJECTION_TF32X3_SOURCE),
    ]
}

/// An `#include` that [`expand_source`] cannot resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncludeError {
    /// The offending line, trimmed.
    pub line: String,
}

impl fmt::Display for IncludeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot resolve `{}`: kernels may include only {:?}",
            self.line,
            HEADERS.map(|h| h.name)
        )
    }
}

impl std::error::Error for IncludeError {}

/// Replaces every `#include "name"` line of `source` by the header `name` of [`HEADERS`]
/// (each header once; later includes of the same header become empty), recursively, framing
/// each pasted header with `#line` directives.
///
/// # Errors
/// [`IncludeError`] for an `#include <...>` or an unknown header name.
pub fn expand_source(source: &str) -> Result<String, IncludeError> {
    let mut out = String::with_capacity(source.len() * 3);
    let mut included: Vec<&'static str> = Vec::new();
    expand_into(source, None, &mut included, &mut out)?;
    Ok(out)
}

fn expand_into(
    source: &str,
    file: Option<&str>,
    included: &mut Vec<&'static str>,
    out: &mut String,
) -> Result<(), IncludeError> {
    for (index, line) in source.lines().enumerate() {
        let trimmed = line.trim();
        let Some(rest) = trimmed.strip_prefix("#include") else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let name = rest
            .trim()
            .strip_prefix('"')
            .and_then(|r| r.strip_suffix('"'));
        let header = name.and_then(|n| HEADERS.iter().find(|h| h.name == n));
        let Some(header) = header else {
            return Err(IncludeError {
                line: trimmed.to_string(),
            });
        };
        if !included.contains(&header.name) {
            included.push(header.name);
            out.push_str(&format!("#line 1 \"{}\"\n", header.name));
            expand_into(header.source, Some(header.name), included, out)?;
        }
        // Back in the including file: the next line is line index + 2.
        match file {
            Some(f) => out.push_str(&format!("#line {} \"{}\"\n", index + 2, f)),
            None => out.push_str(&format!("#line {}\n", index + 2)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_is_described_once() {
        for (i, id) in ALL.iter().enumerate() {
            let k = id.kernel();
            assert_eq!(k.id, *id);
            assert_eq!(k.entry, format!("bilstm_{}", id.name()));
            assert!(
                k.source.contains(&format!("bilstm_{}(", id.name())),
                "{id}: entry not in source"
            );
            assert!(
                ALL[i + 1..]
                    .iter()
                    .all(|other| other.kernel().entry != k.entry)
            );
            assert!(
                sources()
                    .iter()
                    .any(|(name, text)| *name == k.source_name && *text == k.source)
            );
        }
    }

    #[test]
    fn every_source_opens_with_a_contract_and_the_guard() {
        for id in ALL {
            let k = id.kernel();
            let contract = k.contract().unwrap_or_default();
            for field in [
                "Grid",
                "Parameters",
                "Preconditions",
                "Postconditions",
                "Numerics",
                "Defines read",
            ] {
                assert!(contract.contains(field), "{id}: contract lacks {field}");
            }
            assert!(
                contract.contains(if k.cooperative() {
                    "COOPERATIVE"
                } else {
                    "Not cooperative"
                }),
                "{id}"
            );
        }
        for (name, text) in sources() {
            let first_code = text
                .lines()
                .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with("//"));
            assert_eq!(
                first_code,
                Some("#ifndef BILSTM_HIDDEN"),
                "{name} must start with the guard"
            );
        }
    }

    #[test]
    fn includes_expand_once_and_unknown_ones_fail() {
        for (name, text) in sources() {
            let full = expand_source(text).unwrap();
            assert!(
                !full.lines().any(|l| l.trim_start().starts_with("#include")),
                "{name}"
            );
            assert_eq!(full.matches("#line 1 \"common.cuh\"").count(), 1, "{name}");
        }
        let full =
            expand_source("#include \"numerics.cuh\"\n#include \"common.cuh\"\nx\n").unwrap();
        assert_eq!(full.matches("bl_expf(float x)").count(), 1);
        assert_eq!(full.matches("#line 1 \"common.cuh\"").count(), 1);
        let twice = expand_source("#include \"common.cuh\"\n#include \"common.cuh\"\n").unwrap();
        assert_eq!(twice.matches("bl_globaltimer_ns()").count(), 1);
        assert!(full.ends_with("#line 3\nx\n"));
        assert!(expand_source("#include <cuda_fp16.h>\n").is_err());
        assert!(expand_source("#include \"nope.cuh\"\n").is_err());
    }

    #[test]
    fn error_codes_match_common_cuh() {
        let common = HEADERS[0].source;
        assert!(common.contains(&format!("#define BL_ERROR_NONE {}\n", params::ERROR_NONE)));
        assert!(common.contains(&format!(
            "#define BL_ERROR_PARTNER_LOST {}\n",
            params::ERROR_PARTNER_LOST
        )));
    }

    #[test]
    fn params_sizes_match_the_static_asserts() {
        let pairs = [
            (
                "clear.cu",
                "sizeof(bl_clear_params) ==",
                core::mem::size_of::<params::ClearParams>(),
            ),
            (
                "projection.cu",
                "sizeof(bl_projection_params) ==",
                core::mem::size_of::<params::ProjectionParams>(),
            ),
            (
                "coop.cuh",
                "sizeof(bl_recurrence_coop_params) ==",
                core::mem::size_of::<params::RecurrenceCoopParams>(),
            ),
            (
                "recurrence_resident.cu",
                "sizeof(bl_recurrence_resident_params) ==",
                core::mem::size_of::<params::RecurrenceResidentParams>(),
            ),
            (
                "projection_tf32.cu",
                "sizeof(bl_projection_tf32_params) ==",
                core::mem::size_of::<params::ProjectionTf32Params>(),
            ),
            (
                "projection_tf32x3.cu",
                "sizeof(bl_projection_params) ==",
                core::mem::size_of::<params::ProjectionParams>(),
            ),
        ];
        for (file, needle, size) in pairs {
            let text = sources()
                .into_iter()
                .chain(HEADERS.iter().map(|h| (h.name, h.source)))
                .find(|(n, _)| *n == file)
                .map(|(_, t)| t)
                .unwrap_or_default();
            assert!(
                text.contains(&format!("{needle} {size},")),
                "{file}: static_assert of {size} bytes"
            );
        }
    }
}
