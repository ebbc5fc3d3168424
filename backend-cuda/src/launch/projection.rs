//! Launch of `bilstm_projection_small` / `bilstm_projection_large` (kernels/cuda/projection.cu).

use bilstm_core::geometry::{BLOCK_THREADS, GATE_ROWS, PROJ_LARGE_TILE, PROJ_SMALL_TILE};
use bilstm_core::layout::padded_in;
use bilstm_core::plan::ProjectionTile;
use bilstm_kernels::params::ProjectionParams;
use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig, PushKernelArg};

use super::{KernelArg, Span, product, require, require_aligned};
use crate::error::CudaError;

/// The output tile edge and entry point of an FP32 projection tile; `None` for the TF32 tile,
/// which `launch::projection_tf32` launches.
pub(crate) const fn fp32_tile(tile: ProjectionTile) -> Option<(usize, &'static str)> {
    match tile {
        ProjectionTile::Small64 => Some((PROJ_SMALL_TILE, "bilstm_projection_small")),
        ProjectionTile::Large128 => Some((PROJ_LARGE_TILE, "bilstm_projection_large")),
        ProjectionTile::Tf32 => None,
    }
}

/// What one projection launch reads and writes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProjectionArgs {
    /// The layer input `[rows, in_width]`.
    pub x: Span,
    /// Per direction: packed K-major input weights `[padded_in(in_width), 512]` (for
    /// `launch::projection_tf32`: the gate-major TF32 weights `[512, padded_in(in_width)]`).
    pub weights: [Span; 2],
    /// The projection buffer: direction `d` at `d * direction_stride` floats.
    pub out: Span,
    /// Floats between the directions' outputs.
    pub direction_stride: usize,
    /// Rows (`batch * frames`).
    pub rows: usize,
    /// Input width.
    pub in_width: usize,
}

/// Launches the projection of both directions of one layer with `tile`.
///
/// # Errors
/// [`CudaError::Unsupported`] for the TF32 tile (not this launcher's); [`CudaError::Contract`]
/// when a buffer is
/// shorter than the kernel touches, misaligned, or the grid is too large;
/// [`CudaError::Launch`].
pub(crate) fn launch(
    func: &CudaFunction,
    stream: &CudaStream,
    tile: ProjectionTile,
    args: &ProjectionArgs,
) -> Result<(), CudaError> {
    let Some((edge, kernel)) = fp32_tile(tile) else {
        return Err(CudaError::Unsupported {
            what: "the TF32 projection tile",
            reason: "the FP32 projection launcher was handed the TF32 tile".into(),
        });
    };
    let rows = args.rows;
    require(kernel, "rows", 1, rows)?;
    require(kernel, "input width", 1, args.in_width)?;
    let rows_u32 = u32::try_from(rows).map_err(|_| CudaError::Contract {
        kernel,
        what: "rows fit u32",
        needed: rows as u64,
        have: u32::MAX as u64,
    })?;
    require(
        kernel,
        "input values",
        product(kernel, "input values", &[rows, args.in_width])?,
        args.x.len,
    )?;
    require_aligned(kernel, "input alignment", args.x.addr, 4)?;
    let weights_len = product(
        kernel,
        "weight values",
        &[padded_in(args.in_width), GATE_ROWS],
    )?;
    for w in &args.weights {
        require(kernel, "weight values", weights_len, w.len)?;
        require_aligned(kernel, "weights alignment", w.addr, 4)?;
    }
    let per_direction = product(kernel, "output values", &[rows, GATE_ROWS])?;
    require(
        kernel,
        "direction stride",
        per_direction,
        args.direction_stride,
    )?;
    // The kernel stores float4 rows at `direction * direction_stride`.
    if !args.direction_stride.is_multiple_of(4) {
        return Err(CudaError::Contract {
            kernel,
            what: "direction stride multiple of 4",
            needed: 4,
            have: (args.direction_stride % 4) as u64,
        });
    }
    let total = args
        .direction_stride
        .checked_add(per_direction)
        .ok_or(CudaError::Contract {
            kernel,
            what: "output values",
            needed: u64::MAX,
            have: 0,
        })?;
    require(kernel, "output values", total, args.out.len)?;
    require_aligned(kernel, "output alignment", args.out.addr, 16)?;
    let row_tiles = rows.div_ceil(edge);
    require(kernel, "grid.x", row_tiles, i32::MAX as usize)?;

    let params = KernelArg(ProjectionParams {
        x: args.x.addr,
        weights: [args.weights[0].addr, args.weights[1].addr],
        out: args.out.addr,
        out_direction_stride: args.direction_stride as u64,
        rows: rows_u32,
        in_width: args.in_width as u32,
    });
    let cfg = LaunchConfig {
        grid_dim: (row_tiles as u32, (GATE_ROWS / edge) as u32, 2),
        block_dim: (BLOCK_THREADS as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut builder = stream.launch_builder(func);
    builder.arg(&params);
    // SAFETY: `func` is the entry `fp32_tile(tile)` names, loaded from projection.cu (the backend loads the function
    // of that name for each tile); its only parameter is bl_projection_params, mirrored by
    // `KernelArg<ProjectionParams>`. Its contract is checked above: x holds rows * in_width
    // floats, each direction's weights padded_in * 512, the output direction_stride + rows * 512
    // floats with a 16-byte aligned base and a stride that is a multiple of 4 floats; the
    // grid is (ceil(rows / TILE), 512 / TILE, 2) with 256-thread blocks and no dynamic shared
    // memory; rows and in_width fit u32 and are positive. The output buffer is distinct from
    // the input and weights (the backend's projection buffer), and stream order keeps readers
    // of the previous contents (the last layer's recurrences) finished before this runs.
    unsafe { builder.launch(cfg) }.map_err(|source| CudaError::Launch { kernel, source })?;
    Ok(())
}
