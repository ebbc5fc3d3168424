//! Launch of `bilstm_recurrence_wide` (kernels/cuda/recurrence_wide.cu), cooperatively.

use core::ops::Range;

use bilstm_core::Direction;
use bilstm_core::exchange::{ExchangeLayout, flag};
use bilstm_core::geometry::{
    BLOCK_THREADS, EXCHANGE_ALIGN_BYTES, GATE_ROWS, HIDDEN, WIDE_BLOCKS_PER_TILE,
    WIDE_TILE_HEIGHTS, WIDE_UNITS_PER_BLOCK,
};
use bilstm_kernels::params::{ERROR_WORDS, RecurrenceWideParams};
use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig, PushKernelArg};

use super::{KernelArg, Span, product, require, require_aligned};
use crate::error::CudaError;

pub(crate) const KERNEL: &str = "bilstm_recurrence_wide";

/// What one launch of the wide recurrence reads and writes.
#[derive(Debug, Clone)]
pub(crate) struct WideArgs {
    /// This direction's projection `[batch * frames, 512]`.
    pub proj: Span,
    /// This direction's packed recurrent rows `[512, 128]`.
    pub recurrent: Span,
    /// This direction's packed combined bias `[512]`.
    pub bias: Span,
    /// The layer output `[batch, frames, 256]`.
    pub out: Span,
    /// The aligned exchange base, in u64 words.
    pub exchange: Span,
    /// The error array, in i32 words.
    pub error: Span,
    /// The exchange layout of this pass (both directions, all tiles).
    pub layout: ExchangeLayout,
    /// Windows.
    pub batch: usize,
    /// Frames per window.
    pub frames: usize,
    /// Layer index.
    pub layer: usize,
    /// Direction.
    pub direction: Direction,
    /// The tiles this launch runs.
    pub tiles: Range<usize>,
    /// Blocks of this kernel the device holds at once (occupancy x SMs).
    pub co_resident_blocks: usize,
    /// Spin timeout in nanoseconds.
    pub spin_timeout_ns: u64,
    /// Test-only: the block (index in this launch's grid) that never publishes.
    pub stall_block: Option<u32>,
}

fn to_u32(what: &'static str, value: usize) -> Result<u32, CudaError> {
    u32::try_from(value).map_err(|_| CudaError::Contract {
        kernel: KERNEL,
        what,
        needed: value as u64,
        have: u32::MAX as u64,
    })
}

/// Checks `args` against the kernel's launch contract and builds its parameters and grid.
///
/// # Errors
/// [`CudaError::Contract`] naming the first broken precondition.
pub(crate) fn check(args: &WideArgs) -> Result<(RecurrenceWideParams, u32), CudaError> {
    let l = &args.layout;
    let th = l.windows_per_tile;
    if !WIDE_TILE_HEIGHTS.contains(&th)
        || l.blocks_per_tile != WIDE_BLOCKS_PER_TILE
        || l.units_per_block != WIDE_UNITS_PER_BLOCK
    {
        return Err(CudaError::Contract {
            kernel: KERNEL,
            what: "a wide exchange layout of tile height 8, 16 or 32",
            needed: 32,
            have: th as u64,
        });
    }
    require(KERNEL, "batch", 1, args.batch)?;
    require(KERNEL, "frames", 1, args.frames)?;
    require(KERNEL, "tiles in the launch", 1, args.tiles.len())?;
    require(KERNEL, "tiles of the layout", args.tiles.end, l.tiles)?;
    let grid = product(
        KERNEL,
        "grid blocks",
        &[args.tiles.len(), WIDE_BLOCKS_PER_TILE],
    )?;
    require(
        KERNEL,
        "co-resident blocks for the cooperative grid",
        grid,
        args.co_resident_blocks,
    )?;
    let grid = to_u32("grid blocks", grid)?;
    // Every flag of this layer fits 32 bits.
    flag(args.layer, args.frames, args.frames - 1).map_err(CudaError::from)?;

    let rows = product(KERNEL, "projection rows", &[args.batch, args.frames])?;
    require(
        KERNEL,
        "projection values",
        product(KERNEL, "projection values", &[rows, GATE_ROWS])?,
        args.proj.len,
    )?;
    require_aligned(KERNEL, "projection alignment", args.proj.addr, 16)?;
    require(
        KERNEL,
        "recurrent weights",
        GATE_ROWS * HIDDEN,
        args.recurrent.len,
    )?;
    require_aligned(
        KERNEL,
        "recurrent weights alignment",
        args.recurrent.addr,
        16,
    )?;
    require(KERNEL, "bias values", GATE_ROWS, args.bias.len)?;
    require_aligned(KERNEL, "bias alignment", args.bias.addr, 16)?;
    require(
        KERNEL,
        "output values",
        product(KERNEL, "output values", &[rows, 2 * HIDDEN])?,
        args.out.len,
    )?;
    require_aligned(KERNEL, "output alignment", args.out.addr, 4)?;
    require_aligned(
        KERNEL,
        "exchange base alignment",
        args.exchange.addr,
        EXCHANGE_ALIGN_BYTES as u64,
    )?;
    require(KERNEL, "exchange words", l.words(), args.exchange.len)?;
    require(KERNEL, "error words", ERROR_WORDS, args.error.len)?;
    require_aligned(KERNEL, "error alignment", args.error.addr, 4)?;
    if let Some(b) = args.stall_block {
        require(
            KERNEL,
            "stalled block inside the grid",
            b as usize + 1,
            grid as usize,
        )?;
    }

    let params = RecurrenceWideParams {
        proj: args.proj.addr,
        recurrent: args.recurrent.addr,
        bias: args.bias.addr,
        out: args.out.addr,
        exchange: args.exchange.addr,
        error: args.error.addr,
        spin_timeout_ns: args.spin_timeout_ns,
        batch: to_u32("batch", args.batch)?,
        frames: to_u32("frames", args.frames)?,
        layer: to_u32("layer", args.layer)?,
        direction: args.direction.index() as u32,
        tile_height: th as u32,
        tile_offset: to_u32("tile offset", args.tiles.start)?,
        block_stride: to_u32("exchange block stride", l.block_stride)?,
        slot_stride: to_u32("exchange slot stride", l.slot_stride)?,
        tile_stride: to_u32("exchange tile stride", l.tile_stride)?,
        direction_stride: to_u32("exchange direction stride", l.direction_stride)?,
        stall_block: args.stall_block.map_or(-1, |b| b as i32),
        reserved: 0,
    };
    Ok((params, grid))
}

/// Launches one direction of one layer over `args.tiles`, cooperatively.
///
/// # Errors
/// [`CudaError::Contract`] from [`check`]; [`CudaError::Launch`] when the driver refuses the
/// cooperative launch.
pub(crate) fn launch(
    func: &CudaFunction,
    stream: &CudaStream,
    args: &WideArgs,
) -> Result<(), CudaError> {
    let (params, grid) = check(args)?;
    let params = KernelArg(params);
    let cfg = LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (BLOCK_THREADS as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut builder = stream.launch_builder(func);
    builder.arg(&params);
    // SAFETY: `func` is bilstm_recurrence_wide loaded from recurrence_wide.cu; its only
    // parameter is bl_recurrence_wide_params, mirrored by `KernelArg<RecurrenceWideParams>`.
    // `check` verified its contract: tile height 8/16/32 with the wide exchange layout whose
    // strides are passed; proj holds batch * frames * 512 floats, recurrent 512 * 128, bias 512
    // (all 16-byte aligned), out batch * frames * 256, the exchange base is aligned to
    // EXCHANGE_ALIGN_BYTES and holds layout.words() words, error holds ERROR_WORDS ints; every
    // flag fits 32 bits; the grid is tiles * 16 blocks of 256 threads, no dynamic shared
    // memory, and at most `co_resident_blocks` (occupancy x SMs), and the launch is cooperative,
    // so all blocks of a tile are resident together and their spins terminate (bounded by
    // spin_timeout_ns in any case). The exchange and error words were zeroed by launch::clear
    // on the main stream before this layer's projection, which this stream waits for.
    unsafe { builder.launch_cooperative(cfg) }.map_err(|source| CudaError::Launch {
        kernel: KERNEL,
        source,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> WideArgs {
        let layout = ExchangeLayout::wide(8, 2).unwrap();
        let big = 1usize << 30;
        WideArgs {
            proj: Span {
                addr: 1 << 21,
                len: big,
            },
            recurrent: Span {
                addr: 1 << 21,
                len: big,
            },
            bias: Span {
                addr: 1 << 21,
                len: big,
            },
            out: Span {
                addr: 1 << 21,
                len: big,
            },
            exchange: Span {
                addr: 1 << 21,
                len: layout.words(),
            },
            error: Span {
                addr: 1 << 21,
                len: 4,
            },
            layout,
            batch: 9,
            frames: 589,
            layer: 3,
            direction: Direction::Reverse,
            tiles: 0..2,
            co_resident_blocks: 132,
            spin_timeout_ns: 1,
            stall_block: None,
        }
    }

    #[test]
    fn a_valid_launch_builds_matching_params() {
        let (p, grid) = check(&args()).unwrap();
        assert_eq!(grid, 32);
        assert_eq!(
            (p.tile_height, p.tile_offset, p.direction, p.stall_block),
            (8, 0, 1, -1)
        );
        let l = ExchangeLayout::wide(8, 2).unwrap();
        assert_eq!(
            (
                p.block_stride,
                p.slot_stride,
                p.tile_stride,
                p.direction_stride
            ),
            (
                l.block_stride as u32,
                l.slot_stride as u32,
                l.tile_stride as u32,
                l.direction_stride as u32
            )
        );
    }

    #[test]
    fn broken_preconditions_are_refused() {
        let mut a = args();
        a.co_resident_blocks = 31;
        assert!(matches!(
            check(&a),
            Err(CudaError::Contract {
                what: "co-resident blocks for the cooperative grid",
                ..
            })
        ));
        let mut a = args();
        a.tiles = 1..3;
        assert!(check(&a).is_err());
        let mut a = args();
        a.exchange.addr += 8;
        assert!(check(&a).is_err());
        let mut a = args();
        a.proj.len = 9 * 589 * 512 - 1;
        assert!(check(&a).is_err());
        let mut a = args();
        a.exchange.len -= 1;
        assert!(check(&a).is_err());
        let mut a = args();
        a.layout = ExchangeLayout::new(8, 8, 16, 2).unwrap();
        assert!(check(&a).is_err());
        let mut a = args();
        a.stall_block = Some(32);
        assert!(check(&a).is_err());
        let mut a = args();
        a.frames = usize::MAX / 4;
        assert!(check(&a).is_err());
    }
}
