//! Launch of `bilstm_projection_tf32x3` and `bilstm_projection_tf32x3_small`
//! (kernels/cuda/projection_tf32x3.cu): the input projection of both directions of one layer at
//! FP32 accuracy on TF32 tensor cores ("3xTF32"), in 128x128 or 64x128 tiles; and of the same
//! file's warpgroup-MMA entries (compute capability 9.0): `bilstm_projection_tf32x3_wgmma` and
//! its TF32 twin `bilstm_projection_tf32_wgmma`, whose weights are the swizzled image
//! (`PackedOffsets::input_x3_wgmma`, K padded to `PROJ_WG_K_TILE`) and which are persistent (one
//! block an SM looping over the work tiles).
//!
//! The arguments are the FP32 SIMT projection's [`ProjectionArgs`], the weights being the split
//! ones (`PackedOffsets::input_x3`: high parts then remainders, twice the K-major FP32 size). [`check`]
//! turns them into the kernel's parameters and launch configuration, refusing anything the launch
//! contract forbids; it needs no GPU, so its refusals are unit-tested here. `Kernels::load` sets
//! each function's dynamic shared limit (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`, from
//! `device::launch_shape`) once.

use bilstm_core::geometry::{
    GATE_ROWS, K_PAD, PROJ_RES_BLOCK_ROWS, PROJ_RES_COL_TILES, PROJ_RES_MAX_K_TILES,
    PROJ_RES_ROUND_INPUT, PROJ_RES_STORE_BY_TMA, PROJ_RES_TMA_STORE_MAX_K_TILES,
    PROJ_TF32X3_SMALL_TILE_COLS, PROJ_TF32X3_SMALL_TILE_ROWS, PROJ_TF32X3_TILE_COLS,
    PROJ_TF32X3_TILE_ROWS, PROJ_WG_K_TILE, PROJ_WG_TF32_TILE_COLS, PROJ_WG_TILE_COLS,
    PROJ_WG_TILE_ROWS,
};
use bilstm_core::plan::ProjectionTile;
use bilstm_kernels::Kernel;
use bilstm_kernels::params::{ProjectionParams, TensorMap};
use cudarc::driver::{CudaFunction, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg};

use super::projection::{IoAlignment, ProjectionArgs, check_io, require_tensor_cores};
use super::{KernelArg, LaunchMode, launch_kernel, require, require_aligned, require_multiple};
use crate::error::CudaError;

/// The kernel of a tile of projection_tf32x3.cu (the 3xTF32 tiles and the warpgroup TF32 one)
/// and its output tile (rows, columns); `None` for other tiles.
pub(crate) const fn tile_kernel(tile: ProjectionTile) -> Option<(&'static Kernel, usize, usize)> {
    match tile {
        ProjectionTile::Tf32x3 => Some((
            &bilstm_kernels::PROJECTION_TF32X3,
            PROJ_TF32X3_TILE_ROWS,
            PROJ_TF32X3_TILE_COLS,
        )),
        ProjectionTile::Tf32x3Small => Some((
            &bilstm_kernels::PROJECTION_TF32X3_SMALL,
            PROJ_TF32X3_SMALL_TILE_ROWS,
            PROJ_TF32X3_SMALL_TILE_COLS,
        )),
        ProjectionTile::Tf32x3Wgmma => Some((
            &bilstm_kernels::PROJECTION_TF32X3_WGMMA,
            PROJ_WG_TILE_ROWS,
            PROJ_WG_TILE_COLS,
        )),
        // The TF32 twin: the same launch and weight image (its high parts), work tiles of two
        // column tiles.
        ProjectionTile::Tf32Wgmma => Some((
            &bilstm_kernels::PROJECTION_TF32_WGMMA,
            PROJ_WG_TILE_ROWS,
            PROJ_WG_TF32_TILE_COLS,
        )),
        _ => None,
    }
}

/// Checks `args` against the launch contract of `tile`'s entry on a device of
/// `compute_capability` with `sm_count` multiprocessors and returns the entry's name, its
/// parameters and launch configuration. The warpgroup entries are persistent: one block an SM
/// (their shared memory allows no more), at most one a work tile.
///
/// # Errors
/// [`CudaError::Unsupported`] below compute capability 8.0; [`CudaError::Contract`] when a
/// buffer is shorter than the kernel touches or misaligned, a size is zero or overflows, or the
/// grid is too large; [`CudaError::Internal`] for a tile that is not a 3xTF32 one.
pub(crate) fn check(
    compute_capability: (u32, u32),
    sm_count: u32,
    tile: ProjectionTile,
    args: &ProjectionArgs,
) -> Result<(&'static str, KernelArg<ProjectionParams>, LaunchConfig), CudaError> {
    let (handle, tile_rows, tile_cols) = tile_kernel(tile).ok_or_else(|| CudaError::Internal {
        what: format!("{tile} is not a 3xTF32 projection tile"),
    })?;
    let kernel = handle.entry;
    require_tensor_cores("the 3xTF32 projection tile", compute_capability)?;
    let wgmma = tile.needs_wgmma();
    if wgmma && !bilstm_core::plan::wgmma_available(compute_capability) {
        return Err(CudaError::Unsupported {
            what: "the warpgroup-MMA 3xTF32 projection tile",
            reason: format!(
                "compute capability {}.{} has no wgmma (9.0 only)",
                compute_capability.0, compute_capability.1
            ),
        });
    }
    // Weights are read as 16-byte cp.async chunks (rows of 512 floats, so every chunk stays
    // aligned), the output stored as float2.
    let align = IoAlignment {
        weights_bytes: 16,
        stride_floats: 2,
        out_bytes: 8,
        weight_parts: 2,
        k_pad: if wgmma { PROJ_WG_K_TILE } else { K_PAD },
    };
    let (rows, in_width) = check_io(kernel, args, align)?;
    let row_tiles = args.rows.div_ceil(tile_rows);
    let col_tiles = GATE_ROWS / tile_cols;
    // The warpgroup entries loop over the work tiles (row tile, direction, column tile): one
    // block an SM, none without a tile. The kernel counts tiles in u32 and adds the grid to
    // them: rows fit u32 (check_io), so there are at most 2^28 tiles.
    let work_tiles = row_tiles.saturating_mul(2 * col_tiles);
    let grid_x = if wgmma {
        work_tiles.min(sm_count.max(1) as usize)
    } else {
        row_tiles
    };
    require(kernel, "grid.x", grid_x, i32::MAX as usize)?;
    let params = args.params(rows, in_width);
    let cfg = LaunchConfig {
        grid_dim: if wgmma {
            (grid_x as u32, 1, 1)
        } else {
            (grid_x as u32, col_tiles as u32, 2)
        },
        block_dim: (handle.block_threads, 1, 1),
        shared_mem_bytes: handle.dynamic_shared_bytes,
    };
    Ok((kernel, params, cfg))
}

/// Launches the 3xTF32 projection of both directions of one layer on `stream` in `tile`'s
/// tiles.
///
/// `func` must be `tile`'s entry (`bilstm_projection_tf32x3` or
/// `bilstm_projection_tf32x3_small`), loaded for this device with its dynamic shared limit
/// raised to the kernel's dynamic shared bytes (as `Kernels::load` does); `compute_capability`
/// and `sm_count` are the device's.
///
/// # Errors
/// As [`check`]; [`CudaError::Launch`] when the driver refuses the launch.
pub(crate) fn launch(
    func: &CudaFunction,
    stream: &CudaStream,
    compute_capability: (u32, u32),
    sm_count: u32,
    tile: ProjectionTile,
    args: &ProjectionArgs,
) -> Result<(), CudaError> {
    let (kernel, params, cfg) = check(compute_capability, sm_count, tile, args)?;
    // SAFETY: `func` is `tile`'s entry from projection_tf32x3.cu (the backend loads it by that
    // name, `KernelId::kernel().entry`; every entry's only parameter is bl_projection_params,
    // mirrored by `KernelArg<ProjectionParams>`, 48 bytes asserted on both sides). `check`
    // established the launch contract: compute capability >= 8.0, and 9.0 for the warpgroup
    // entries (so the entry is the real kernel, not the trap); x holds rows * in_width floats
    // and is 4-byte aligned; each direction's weights hold 2 * padded * 512 floats from a
    // 16-byte aligned base, padded = in_width rounded up to K_PAD (the mma.sync entries' split
    // K-major weights, high parts then remainders) or to PROJ_WG_K_TILE (the warpgroup entries'
    // image, every float of which they may read); the output holds direction_stride + rows * 512
    // floats from an 8-byte aligned base, direction_stride >= rows * 512 and even; rows and
    // in_width are positive and fit u32; the grid is (ceil(rows / tile rows), 512 / tile
    // columns, 2), or (min(8 * ceil(rows / 128), SMs), 1, 1) for the warpgroup entries (at most
    // 2^28 work tiles; any grid size is correct for them), with 256-thread
    // blocks and exactly the entry's dynamic shared bytes (which Kernels::load allowed the
    // function; were it not, the driver refuses the launch, it does not run it). The output (the backend's projection buffer) is distinct from the input and
    // the weights, and stream order finishes the previous readers of the output before this
    // kernel runs.
    unsafe { launch_kernel(func, stream, kernel, &params, cfg, LaunchMode::Ordinary) }
}

/// The widest layer input the resident TF32 entry takes: its weights for that many K values
/// fill the resident image (`PROJ_RES_MAX_K_TILES` K tiles).
pub(crate) const RESIDENT_MAX_WIDTH: usize = PROJ_RES_MAX_K_TILES * PROJ_WG_K_TILE;

/// Whether the TF32 projection of a layer with `in_width` inputs may run
/// `bilstm_projection_tf32_resident` on a device of `compute_capability`: 9.0 and an input width
/// the tensor map and the resident image take. Layers after the first then read their input as
/// the previous recurrence stored it (rounded to TF32, `out_tf32`); layer 0 reads the model's
/// input and rounds it in the kernel (`round_input`), which needs it 16-byte aligned (the
/// pass's check). Both give the streaming projection's bits, so the choice never changes a
/// window's output (the backend may turn it off as a whole: `RESIDENT_PROJECTION_ENV`).
pub(crate) fn resident_applies(compute_capability: (u32, u32), in_width: usize) -> bool {
    bilstm_core::plan::wgmma_available(compute_capability)
        && in_width.is_multiple_of(4)
        && (1..=RESIDENT_MAX_WIDTH).contains(&in_width)
}

/// Checks `args` against the launch contract of `bilstm_projection_tf32_resident` (weights:
/// each direction's natural-order TF32 image, `PackedOffsets::input_tf32_wgmma`) on a device of
/// `compute_capability` with `sm_count` multiprocessors, and returns its parameters and launch
/// configuration: `PROJ_RES_COL_TILES` blocks for each set of two 64-row blocks up to one block
/// an SM (a multiple of `PROJ_RES_COL_TILES` blocks, at least one set).
///
/// # Errors
/// [`CudaError::Unsupported`] off 9.0; [`CudaError::Contract`] for a width the entry does not
/// take (not a multiple of 4, above [`RESIDENT_MAX_WIDTH`]), rows past the TMA coordinates'
/// signed 32-bit range, a misaligned input (16 bytes) or the checks of the other warpgroup
/// entries (lengths, alignment).
pub(crate) fn check_resident(
    compute_capability: (u32, u32),
    sm_count: u32,
    args: &ProjectionArgs,
) -> Result<(KernelArg<ProjectionParams>, LaunchConfig), CudaError> {
    let handle = &bilstm_kernels::PROJECTION_TF32_RESIDENT;
    let kernel = handle.entry;
    if !bilstm_core::plan::wgmma_available(compute_capability) {
        return Err(CudaError::Unsupported {
            what: "the resident TF32 projection",
            reason: format!(
                "compute capability {}.{} has no wgmma or TMA (9.0 only)",
                compute_capability.0, compute_capability.1
            ),
        });
    }
    let align = IoAlignment {
        weights_bytes: 16,
        stride_floats: 2,
        out_bytes: 8,
        weight_parts: 1,
        k_pad: PROJ_WG_K_TILE,
    };
    let (rows, in_width) = check_io(kernel, args, align)?;
    require_multiple(kernel, "input width multiple", args.in_width, 4)?;
    require(
        kernel,
        "input width at most",
        args.in_width,
        RESIDENT_MAX_WIDTH,
    )?;
    // The last block's first row is a signed 32-bit TMA coordinate.
    require(
        kernel,
        "rows within TMA coordinates",
        args.rows.div_ceil(PROJ_RES_BLOCK_ROWS) * PROJ_RES_BLOCK_ROWS,
        i32::MAX as usize,
    )?;
    require_aligned(kernel, "input alignment for TMA", args.x.addr, 16)?;
    require_aligned(kernel, "output alignment for TMA", args.out.addr, 16)?;
    require_multiple(
        kernel,
        "direction stride multiple for TMA",
        args.direction_stride,
        4,
    )?;
    let blocks = args.rows.div_ceil(PROJ_RES_BLOCK_ROWS);
    let sets = blocks
        .div_ceil(bilstm_core::geometry::PROJ_RES_WARPGROUPS)
        .min(sm_count as usize / PROJ_RES_COL_TILES)
        .max(1);
    let grid_x = sets * PROJ_RES_COL_TILES;
    let params = args.params(rows, in_width);
    let cfg = LaunchConfig {
        grid_dim: (grid_x as u32, 1, 1),
        block_dim: (handle.block_threads, 1, 1),
        shared_mem_bytes: handle.dynamic_shared_bytes,
    };
    Ok((params, cfg))
}

// SAFETY: `TensorMap` is `#[repr(C, align(64))]`, `Copy`, 128 bytes of plain integers: the
// driver's encoded `CUtensorMap`, mirrored by `bl_tensor_map` in projection_tf32x3.cu (128
// bytes, 64-byte aligned, asserted on both sides). Kernel parameters are copied by value.
unsafe impl DeviceRepr for KernelArg<TensorMap> {}

/// The flags (last parameter) of `bilstm_projection_tf32_resident` for an input of `in_width`
/// values: `PROJ_RES_ROUND_INPUT` with `round_input` (an input not stored rounded: layer 0), and
/// `PROJ_RES_STORE_BY_TMA` wherever the input's K tiles leave the weight space room for the
/// output staging (at most `PROJ_RES_TMA_STORE_MAX_K_TILES`: layer 0's 60 values).
pub(crate) fn resident_flags(in_width: usize, round_input: bool) -> u32 {
    let mut flags = 0;
    if round_input {
        flags |= PROJ_RES_ROUND_INPUT as u32;
    }
    if in_width.div_ceil(PROJ_WG_K_TILE) <= PROJ_RES_TMA_STORE_MAX_K_TILES {
        flags |= PROJ_RES_STORE_BY_TMA as u32;
    }
    flags
}

/// Launches the resident TF32 projection of both directions of one layer on `stream`.
///
/// `func` must be `bilstm_projection_tf32_resident`, loaded for this device with its dynamic
/// shared limit raised (as `Kernels::load` does). With `round_input` the kernel rounds the
/// layer input to TF32 itself (layer 0); without it the input must hold TF32 values (the
/// previous recurrence ran with `out_tf32`), else the tensor cores truncate it. The flags are
/// [`resident_flags`]'s.
///
/// # Errors
/// As [`check_resident`]; [`CudaError::Driver`] when the driver cannot encode a tensor map;
/// [`CudaError::Launch`] when it refuses the launch.
pub(crate) fn launch_resident(
    func: &CudaFunction,
    stream: &CudaStream,
    compute_capability: (u32, u32),
    sm_count: u32,
    args: &ProjectionArgs,
    round_input: bool,
) -> Result<(), CudaError> {
    let kernel = bilstm_kernels::PROJECTION_TF32_RESIDENT.entry;
    let (params, cfg) = check_resident(compute_capability, sm_count, args)?;
    let map = KernelArg(super::sys::activation_map(
        args.x.addr,
        args.rows,
        args.in_width,
    )?);
    let flags = resident_flags(args.in_width, round_input);
    // The output map only where the tiles leave by TMA (the kernel reads it only then).
    let out_map = KernelArg(if flags & PROJ_RES_STORE_BY_TMA as u32 != 0 {
        super::sys::gates_map(args.out.addr, args.rows, args.direction_stride)?
    } else {
        TensorMap { words: [0; 16] }
    });
    let mut builder = stream.launch_builder(func);
    builder.arg(&params);
    builder.arg(&map);
    builder.arg(&out_map);
    builder.arg(&flags);
    // SAFETY: `func` is bilstm_projection_tf32_resident (loaded by that name); its parameters
    // are bl_projection_params (mirrored by `KernelArg<ProjectionParams>`, 48 bytes), two
    // bl_tensor_map (`KernelArg<TensorMap>`, 128 bytes each: the input's, the output's) and a
    // u32 (the flags), in that order. `check_resident` established its launch contract:
    // compute capability 9.0 (the entry is the real kernel);
    // x 16-byte aligned holding rows * in_width floats, in_width a multiple of 4 in 1..=256,
    // rows below 2^31 in whole 64-row blocks; each direction's weights hold
    // proj_wg_padded_in(in_width) * 512 floats from a 16-byte aligned base (the whole resident
    // image is read); the output holds direction_stride + rows * 512 floats, 16-byte aligned,
    // direction_stride >= rows * 512 and a multiple of 4; the grid is a positive multiple of 8
    // blocks of PROJ_RES_THREADS threads with exactly the entry's dynamic shared bytes (which
    // Kernels::load allowed; were it not, the driver refuses the launch). The input's tensor map
    // was encoded by the driver over exactly x's rows * in_width floats (`sys::activation_map`),
    // so the copies read nothing else; with PROJ_RES_STORE_BY_TMA (only for inputs of at most
    // PROJ_RES_TMA_STORE_MAX_K_TILES K tiles, whose weight space holds the staging) the
    // output's was encoded over its two directions of rows * 512 floats at direction_stride
    // (`sys::gates_map`), so the stores touch nothing else, and without it the kernel never
    // reads the (zeroed) map; the threads' 8-byte stores go to rows below `rows` only
    // (params.rows), at even column offsets below 512 of a direction, so they stay inside the
    // output and are 8-byte aligned. The output (the backend's projection buffer) overlaps
    // neither the input nor the weights, and stream order finishes its previous readers first.
    let launched = unsafe { builder.launch(cfg) };
    launched
        .map(|_| ())
        .map_err(|e| CudaError::Launch { kernel, source: e })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::Span;
    use bilstm_core::layout::padded_in;

    fn args(rows: usize, in_width: usize) -> ProjectionArgs {
        let weights = 2 * padded_in(in_width) * GATE_ROWS;
        ProjectionArgs {
            x: Span {
                addr: 1 << 20,
                len: rows * in_width,
            },
            weights: [
                Span {
                    addr: 1 << 30,
                    len: weights,
                },
                Span {
                    addr: (1 << 30) + 4096 * 1024,
                    len: weights,
                },
            ],
            out: Span {
                addr: 1 << 32,
                len: 2 * rows * GATE_ROWS,
            },
            direction_stride: rows * GATE_ROWS,
            rows,
            in_width,
        }
    }

    #[test]
    fn a_valid_launch_gets_the_contract_grid() {
        let (entry, p, cfg) = check((9, 0), 132, ProjectionTile::Tf32x3, &args(589, 60)).unwrap();
        assert_eq!(entry, "bilstm_projection_tf32x3");
        assert_eq!(cfg.grid_dim, (5, 4, 2));
        assert_eq!(cfg.block_dim, (256, 1, 1));
        assert_eq!(
            cfg.shared_mem_bytes as usize,
            bilstm_core::geometry::PROJ_TF32X3_SHARED_BYTES
        );
        assert_eq!((p.0.rows, p.0.in_width), (589, 60));
        assert_eq!(p.0.out_direction_stride, 589 * 512);
        assert_eq!(p.0.weights, [1 << 30, (1 << 30) + 4096 * 1024]);
        let (_, _, cfg) =
            check((8, 0), 132, ProjectionTile::Tf32x3, &args(128 * 3 + 1, 256)).unwrap();
        assert_eq!(cfg.grid_dim.0, 4);
        assert!(check((8, 6), 132, ProjectionTile::Tf32x3, &args(3, 61)).is_ok());
        assert_eq!(
            crate::device::launch_shape(bilstm_kernels::KernelId::ProjectionTf32x3),
            (cfg.block_dim.0, cfg.shared_mem_bytes)
        );
    }

    #[test]
    fn the_small_tile_gets_its_own_grid_and_other_tiles_are_refused() {
        let (entry, p, cfg) =
            check((9, 0), 132, ProjectionTile::Tf32x3Small, &args(589, 60)).unwrap();
        assert_eq!(entry, "bilstm_projection_tf32x3_small");
        assert_eq!(cfg.grid_dim, (10, 4, 2));
        assert_eq!(cfg.block_dim, (256, 1, 1));
        assert_eq!(
            (cfg.block_dim.0, cfg.shared_mem_bytes),
            crate::device::launch_shape(bilstm_kernels::KernelId::ProjectionTf32x3Small)
        );
        assert_eq!(cfg.shared_mem_bytes, 46_080);
        assert_eq!((p.0.rows, p.0.in_width), (589, 60));
        let (_, _, cfg) = check(
            (9, 0),
            132,
            ProjectionTile::Tf32x3Small,
            &args(64 * 3 + 1, 256),
        )
        .unwrap();
        assert_eq!(cfg.grid_dim.0, 4);
        for tile in [
            ProjectionTile::Small64,
            ProjectionTile::Large128,
            ProjectionTile::Tf32,
        ] {
            assert!(matches!(
                check((9, 0), 132, tile, &args(589, 60)),
                Err(CudaError::Internal { .. })
            ));
        }
    }

    #[test]
    fn the_warpgroup_tile_runs_column_tiles_side_by_side_on_9_0_only() {
        let wg = ProjectionTile::Tf32x3Wgmma;
        let (entry, p, cfg) = check((9, 0), 132, wg, &args(589, 64)).unwrap();
        assert_eq!(entry, "bilstm_projection_tf32x3_wgmma");
        // ceil(589 / 128) = 5 row tiles x 4 column tiles x 2 directions: 40 work tiles, a block
        // each; at batch 64 (37,696 rows) 2,360 tiles on one block an SM.
        assert_eq!(cfg.grid_dim, (40, 1, 1));
        let (_, _, big) = check((9, 0), 132, wg, &args(37_696, 256)).unwrap();
        assert_eq!(big.grid_dim, (132, 1, 1));
        let (_, _, few_sms) = check((9, 0), 0, wg, &args(37_696, 256)).unwrap();
        assert_eq!(few_sms.grid_dim, (1, 1, 1));
        assert_eq!(
            (cfg.block_dim.0, cfg.shared_mem_bytes),
            crate::device::launch_shape(bilstm_kernels::KernelId::ProjectionTf32x3Wgmma)
        );
        assert_eq!(
            cfg.shared_mem_bytes as usize,
            bilstm_core::geometry::PROJ_WG_SHARED_BYTES
        );
        assert_eq!((p.0.rows, p.0.in_width), (589, 64));
        // Its weight image pads K to 32, not 16: 40 inputs need 2 * 64 * 512 floats.
        let mut a = args(10, 40);
        assert_eq!(a.weights[0].len, 2 * 48 * GATE_ROWS);
        assert!(matches!(
            check((9, 0), 132, wg, &a),
            Err(CudaError::Contract {
                what: "weight values",
                ..
            })
        ));
        for w in &mut a.weights {
            w.len = bilstm_core::layout::wgmma_image_len(40, GATE_ROWS);
        }
        assert!(check((9, 0), 132, wg, &a).is_ok());
        // The TF32 twin: the same launch under its own entry, with work tiles of two column
        // tiles (256 columns): 5 row tiles x 2 x 2 directions = 20 blocks.
        let (entry, _, cfg2) =
            check((9, 0), 132, ProjectionTile::Tf32Wgmma, &args(589, 64)).unwrap();
        assert_eq!(entry, "bilstm_projection_tf32_wgmma");
        assert_eq!(cfg2.grid_dim, (20, 1, 1));
        assert_eq!(cfg2.shared_mem_bytes, cfg.shared_mem_bytes);
        // No wgmma before or after Hopper.
        for cc in [(8, 0), (8, 9), (10, 0), (12, 0)] {
            for tile in [wg, ProjectionTile::Tf32Wgmma] {
                assert!(matches!(
                    check(cc, 132, tile, &args(589, 64)),
                    Err(CudaError::Unsupported { .. })
                ));
            }
        }
    }

    #[test]
    fn the_resident_entry_runs_whole_column_tile_sets_on_9_0_only() {
        let resident_args = |rows: usize, width: usize| {
            let mut a = args(rows, width);
            for w in &mut a.weights {
                w.len = bilstm_core::layout::tf32_wgmma_image_len(width, GATE_ROWS);
            }
            a
        };
        // Batch 1: 589 rows = 10 blocks of 64, three a set: 4 sets of 8 column-tile blocks.
        let (p, cfg) = check_resident((9, 0), 132, &resident_args(589, 256)).unwrap();
        assert_eq!(cfg.grid_dim, (32, 1, 1));
        assert_eq!(cfg.block_dim, (384, 1, 1));
        assert_eq!(
            (cfg.block_dim.0, cfg.shared_mem_bytes),
            crate::device::launch_shape(bilstm_kernels::KernelId::ProjectionTf32Resident)
        );
        assert_eq!(
            cfg.shared_mem_bytes as usize,
            bilstm_core::geometry::PROJ_RES_SHARED_BYTES
        );
        assert_eq!((p.0.rows, p.0.in_width), (589, 256));
        // Batch 256: 2,356 blocks; 132 SMs hold 16 whole sets (128 blocks); one SM: one set.
        let (_, big) = check_resident((9, 0), 132, &resident_args(256 * 589, 256)).unwrap();
        assert_eq!(big.grid_dim, (128, 1, 1));
        let (_, one) = check_resident((9, 0), 1, &resident_args(256 * 589, 256)).unwrap();
        assert_eq!(one.grid_dim, (8, 1, 1));
        // The weights are the one-part natural image: the split image's length is not enough
        // to pass for it, and a shorter one is refused.
        let mut a = resident_args(10, 256);
        a.weights[1].len -= 1;
        assert!(matches!(
            check_resident((9, 0), 132, &a),
            Err(CudaError::Contract {
                what: "weight values",
                ..
            })
        ));
        let refused = |a: ProjectionArgs, what: &str| match check_resident((9, 0), 132, &a) {
            Err(CudaError::Contract { what: w, .. }) => assert_eq!(w, what),
            other => panic!("{what}: {other:?}"),
        };
        refused(resident_args(10, 62), "input width multiple");
        refused(resident_args(10, 260), "input width at most");
        let mut a = resident_args(10, 256);
        a.x.addr += 4;
        refused(a, "input alignment for TMA");
        let huge = i32::MAX as usize - 10;
        let mut a = resident_args(10, 4);
        a.rows = huge;
        a.x.len = huge * 4;
        a.out.len = 2 * huge * GATE_ROWS;
        a.direction_stride = huge * GATE_ROWS;
        refused(a, "rows within TMA coordinates");
        for cc in [(8, 0), (8, 9), (10, 0), (12, 0)] {
            assert!(matches!(
                check_resident(cc, 132, &resident_args(589, 256)),
                Err(CudaError::Unsupported { .. })
            ));
        }
        // Flags: layer 0 rounds its input; inputs of up to two K tiles store by TMA.
        assert_eq!(resident_flags(60, true), 3);
        assert_eq!(resident_flags(64, false), 2);
        assert_eq!(resident_flags(68, true), 1);
        assert_eq!(resident_flags(256, false), 0);
        // Which inputs it takes: widths of whole 16-byte rows up to 256, on 9.0.
        assert!(resident_applies((9, 0), 256));
        assert!(resident_applies((9, 0), 60));
        assert!(!resident_applies((9, 0), 258));
        assert!(!resident_applies((9, 0), 62));
        assert!(!resident_applies((8, 0), 256));
    }

    #[test]
    fn older_devices_and_broken_contracts_are_refused() {
        for cc in [(7, 0), (7, 5)] {
            assert!(matches!(
                check(cc, 132, ProjectionTile::Tf32x3Small, &args(589, 60)),
                Err(CudaError::Unsupported { .. })
            ));
        }
        let refused =
            |a: ProjectionArgs, what: &str| match check((9, 0), 132, ProjectionTile::Tf32x3, &a) {
                Err(CudaError::Contract { what: w, .. }) => assert_eq!(w, what),
                other => panic!("{what}: {other:?}"),
            };
        let mut a = args(10, 60);
        a.rows = 0;
        refused(a, "rows");
        let mut a = args(10, 60);
        a.weights[1].len -= 1;
        refused(a, "weight values");
        let mut a = args(10, 60);
        a.weights[0].addr += 4;
        refused(a, "weights alignment");
        let mut a = args(10, 60);
        a.direction_stride += 1;
        a.out.len += 1;
        refused(a, "direction stride multiple");
        let mut a = args(10, 60);
        a.out.addr += 4;
        refused(a, "output alignment");
        let mut a = args(10, 60);
        a.x.len -= 1;
        refused(a, "input values");
    }
}
