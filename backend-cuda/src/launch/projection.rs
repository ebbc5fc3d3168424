//! Launch of `bilstm_projection_small` / `bilstm_projection_large` (kernels/cuda/projection.cu).

use bilstm_core::geometry::{GATE_ROWS, PROJ_LARGE_TILE, PROJ_SMALL_TILE};
use bilstm_core::plan::ProjectionTile;
use bilstm_kernels::params::ProjectionParams;
use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig};

use super::{
    KernelArg, LaunchMode, Span, launch_kernel, product, require, require_aligned,
    require_multiple, to_u32,
};
use crate::error::CudaError;

/// The output tile edge and entry point of an FP32 SIMT projection tile; `None` for the
/// tensor-core tiles, which `launch::projection_tf32` and `launch::projection_tf32x3` launch.
pub(crate) const fn fp32_tile(tile: ProjectionTile) -> Option<(usize, &'static str)> {
    match tile {
        ProjectionTile::Small64 => Some((PROJ_SMALL_TILE, "bilstm_projection_small")),
        ProjectionTile::Large128 => Some((PROJ_LARGE_TILE, "bilstm_projection_large")),
        ProjectionTile::Tf32
        | ProjectionTile::Tf32x3
        | ProjectionTile::Tf32x3Small
        | ProjectionTile::Tf32x3Wgmma
        | ProjectionTile::Tf32Wgmma => None,
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

impl ProjectionArgs {
    /// The kernels' `bl_projection_params` for these buffers, with `rows` and `in_width` as
    /// `check_io` checked them.
    pub(crate) fn params(&self, rows: u32, in_width: u32) -> KernelArg<ProjectionParams> {
        KernelArg(ProjectionParams {
            x: self.x.addr,
            weights: [self.weights[0].addr, self.weights[1].addr],
            out: self.out.addr,
            out_direction_stride: self.direction_stride as u64,
            rows,
            in_width,
        })
    }
}

/// Alignments a projection kernel needs beyond what both share (the FP32 tiles and the TF32
/// tile load and store with different vector widths).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IoAlignment {
    /// Byte alignment of each direction's weights.
    pub weights_bytes: u64,
    /// The direction stride of the output is a multiple of this many floats.
    pub stride_floats: usize,
    /// Byte alignment of the output.
    pub out_bytes: u64,
    /// Weight tensors of `padded_in(in_width) * 512` floats each direction holds back to back
    /// (2 for the 3xTF32 tile's high parts and remainders, else 1).
    pub weight_parts: usize,
    /// The weights' K extent is the input width rounded up to a multiple of this
    /// (`bilstm_core::geometry::K_PAD`; the warpgroup-MMA image's `PROJ_WG_K_TILE`).
    pub k_pad: usize,
}

/// Refuses a tensor-core tile (`what`, e.g. "the TF32 projection tile") on a device of
/// `compute_capability` below 8.0, which has no TF32 tensor cores.
///
/// # Errors
/// [`CudaError::Unsupported`] below compute capability 8.0.
pub(crate) fn require_tensor_cores(
    what: &'static str,
    compute_capability: (u32, u32),
) -> Result<(), CudaError> {
    if compute_capability < bilstm_core::plan::TENSOR_CORE_MIN_COMPUTE_CAPABILITY {
        return Err(CudaError::Unsupported {
            what,
            reason: format!(
                "compute capability {}.{} has no TF32 tensor cores (8.0 or later)",
                compute_capability.0, compute_capability.1
            ),
        });
    }
    Ok(())
}

/// Checks what every projection kernel reads and writes: positive rows and input width that
/// fit u32; x holds `rows * in_width` floats (4-byte aligned); each direction's weights
/// `weight_parts * padded_in(in_width) * 512` floats; the output `direction_stride + rows * 512` floats with
/// `direction_stride >= rows * 512`; and the kernel's own alignments. Returns `(rows,
/// in_width)` as u32.
///
/// # Errors
/// [`CudaError::Contract`] naming the first broken precondition.
pub(crate) fn check_io(
    kernel: &'static str,
    args: &ProjectionArgs,
    align: IoAlignment,
) -> Result<(u32, u32), CudaError> {
    let rows = args.rows;
    require(kernel, "rows", 1, rows)?;
    require(kernel, "input width", 1, args.in_width)?;
    let rows_u32 = to_u32(kernel, "rows fit u32", rows)?;
    let in_width_u32 = to_u32(kernel, "input width fits u32", args.in_width)?;
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
        &[
            align.weight_parts,
            args.in_width.div_ceil(align.k_pad) * align.k_pad,
            GATE_ROWS,
        ],
    )?;
    for w in &args.weights {
        require(kernel, "weight values", weights_len, w.len)?;
        require_aligned(kernel, "weights alignment", w.addr, align.weights_bytes)?;
    }
    let per_direction = product(kernel, "output values", &[rows, GATE_ROWS])?;
    require(
        kernel,
        "direction stride",
        per_direction,
        args.direction_stride,
    )?;
    require_multiple(
        kernel,
        "direction stride multiple",
        args.direction_stride,
        align.stride_floats,
    )?;
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
    require_aligned(kernel, "output alignment", args.out.addr, align.out_bytes)?;
    Ok((rows_u32, in_width_u32))
}

/// Checks `args` against the contract of the FP32 kernel of `tile` and returns its entry name,
/// parameters and launch configuration.
///
/// # Errors
/// [`CudaError::Unsupported`] for the TF32 tile (not this launcher's); [`CudaError::Contract`]
/// when a buffer is shorter than the kernel touches, misaligned, or the grid is too large.
pub(crate) fn check(
    tile: ProjectionTile,
    args: &ProjectionArgs,
) -> Result<(&'static str, KernelArg<ProjectionParams>, LaunchConfig), CudaError> {
    let Some((edge, kernel)) = fp32_tile(tile) else {
        return Err(CudaError::Unsupported {
            what: "a tensor-core projection tile",
            reason: format!("the FP32 SIMT projection launcher was handed the {tile} tile"),
        });
    };
    // The kernel loads weights as floats and stores float4 output rows at `direction *
    // direction_stride`.
    let align = IoAlignment {
        weights_bytes: 4,
        stride_floats: 4,
        out_bytes: 16,
        weight_parts: 1,
        k_pad: bilstm_core::geometry::K_PAD,
    };
    let (rows, in_width) = check_io(kernel, args, align)?;
    let row_tiles = args.rows.div_ceil(edge);
    require(kernel, "grid.x", row_tiles, i32::MAX as usize)?;
    let params = args.params(rows, in_width);
    let cfg = LaunchConfig {
        grid_dim: (row_tiles as u32, (GATE_ROWS / edge) as u32, 2),
        block_dim: (bilstm_kernels::PROJECTION_SMALL.block_threads, 1, 1),
        shared_mem_bytes: bilstm_kernels::PROJECTION_SMALL.dynamic_shared_bytes,
    };
    Ok((kernel, params, cfg))
}

/// Launches the projection of both directions of one layer with `tile`.
///
/// # Errors
/// As [`check`]; [`CudaError::Launch`] when the driver refuses the launch.
pub(crate) fn launch(
    func: &CudaFunction,
    stream: &CudaStream,
    tile: ProjectionTile,
    args: &ProjectionArgs,
) -> Result<(), CudaError> {
    let (kernel, params, cfg) = check(tile, args)?;
    // SAFETY: `func` is the entry `fp32_tile(tile)` names, loaded from projection.cu (the
    // backend loads the function of that name for each tile); its only parameter is
    // bl_projection_params, mirrored by `KernelArg<ProjectionParams>`. `check` verified its
    // contract: x holds rows * in_width floats, each direction's weights padded_in * 512, the
    // output direction_stride + rows * 512 floats with a 16-byte aligned base and a stride that
    // is a multiple of 4 floats; the grid is (ceil(rows / TILE), 512 / TILE, 2) with 256-thread
    // blocks and no dynamic shared memory; rows and in_width fit u32 and are positive. The
    // output buffer is distinct from the input and weights (the backend's projection buffer),
    // and stream order keeps readers of the previous contents (the last layer's recurrences)
    // finished before this runs.
    unsafe { launch_kernel(func, stream, kernel, &params, cfg, LaunchMode::Ordinary) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bilstm_core::layout::padded_in;

    fn args(rows: usize, in_width: usize) -> ProjectionArgs {
        let stride = rows * GATE_ROWS;
        let span = |len| Span { addr: 1 << 20, len };
        ProjectionArgs {
            x: span(rows * in_width),
            weights: [span(padded_in(in_width) * GATE_ROWS); 2],
            out: span(2 * stride),
            direction_stride: stride,
            rows,
            in_width,
        }
    }

    #[test]
    fn a_valid_launch_builds_matching_params() {
        let (kernel, p, cfg) = check(ProjectionTile::Small64, &args(589, 60)).unwrap();
        assert_eq!(kernel, "bilstm_projection_small");
        assert_eq!((p.0.rows, p.0.in_width), (589, 60));
        assert_eq!(cfg.grid_dim, (10, 8, 2));
        let (kernel, _, cfg) = check(ProjectionTile::Large128, &args(589, 256)).unwrap();
        assert_eq!(kernel, "bilstm_projection_large");
        assert_eq!(cfg.grid_dim, (5, 4, 2));
    }

    #[test]
    fn broken_preconditions_are_refused() {
        let refused = |a: &ProjectionArgs| match check(ProjectionTile::Small64, a) {
            Err(CudaError::Contract { what, .. }) => what,
            other => panic!("expected a contract error, got {other:?}"),
        };
        let mut a = args(589, 60);
        a.direction_stride += 2;
        a.out.len += 2;
        assert_eq!(refused(&a), "direction stride multiple");
        let mut a = args(589, 60);
        a.out.len -= 1;
        assert_eq!(refused(&a), "output values");
        let mut a = args(589, 60);
        a.weights[1].len -= 1;
        assert_eq!(refused(&a), "weight values");
        let mut a = args(589, 60);
        a.x.addr += 2;
        assert_eq!(refused(&a), "input alignment");
        assert_eq!(refused(&args(0, 60)), "rows");
        assert!(matches!(
            check(ProjectionTile::Tf32, &args(1, 60)),
            Err(CudaError::Unsupported { .. })
        ));
    }
}
