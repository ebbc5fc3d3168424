//! Launch of `bilstm_recurrence_tiled` (kernels/cuda/recurrence_tiled.cu), cooperatively.

use core::ops::Range;

use bilstm_core::Direction;
use bilstm_core::exchange::{ExchangeLayout, flag};
use bilstm_core::geometry::{
    BLOCK_THREADS, EXCHANGE_ALIGN_BYTES, GATE_ROWS, HIDDEN, TILED_BLOCKS_PER_TILE,
    TILED_UNITS_PER_BLOCK, TILED_WINDOWS,
};
use bilstm_kernels::params::{ERROR_WORDS, RecurrenceTiledParams};
use cudarc::driver::{CudaFunction, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg};

use super::{KernelArg, Span, product, require, require_aligned};
use crate::error::CudaError;

pub(crate) const KERNEL: &str = "bilstm_recurrence_tiled";

// SAFETY: `RecurrenceTiledParams` is `#[repr(C)]`, `Copy`, holds only integers (device
// addresses as u64), and its layout equals `bl_recurrence_tiled_params` in
// kernels/cuda/recurrence_tiled.cu (size asserted on both sides: 96 bytes; offsets pinned by
// bilstm_kernels' params tests). `KernelArg` is `repr(transparent)`, so it has the same layout.
unsafe impl DeviceRepr for KernelArg<RecurrenceTiledParams> {}

/// What one launch of the tiled recurrence reads and writes.
#[derive(Debug, Clone)]
pub(crate) struct TiledArgs {
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
    /// The exchange layout of this pass (`ExchangeLayout::tiled`, both directions, all tiles).
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
pub(crate) fn check(args: &TiledArgs) -> Result<(RecurrenceTiledParams, u32), CudaError> {
    let l = &args.layout;
    if l.windows_per_tile != TILED_WINDOWS
        || l.blocks_per_tile != TILED_BLOCKS_PER_TILE
        || l.units_per_block != TILED_UNITS_PER_BLOCK
    {
        return Err(CudaError::Contract {
            kernel: KERNEL,
            what: "a tiled exchange layout (ExchangeLayout::tiled)",
            needed: TILED_WINDOWS as u64,
            have: l.windows_per_tile as u64,
        });
    }
    require(KERNEL, "batch", 1, args.batch)?;
    require(KERNEL, "frames", 1, args.frames)?;
    require(KERNEL, "tiles in the launch", 1, args.tiles.len())?;
    require(KERNEL, "tiles of the layout", args.tiles.end, l.tiles)?;
    require(
        KERNEL,
        "windows covered by the layout's tiles",
        args.batch,
        product(KERNEL, "windows", &[l.tiles, TILED_WINDOWS])?,
    )?;
    let grid = product(
        KERNEL,
        "grid blocks",
        &[args.tiles.len(), TILED_BLOCKS_PER_TILE],
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

    let params = RecurrenceTiledParams {
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
        tile_offset: to_u32("tile offset", args.tiles.start)?,
        block_stride: to_u32("exchange block stride", l.block_stride)?,
        slot_stride: to_u32("exchange slot stride", l.slot_stride)?,
        tile_stride: to_u32("exchange tile stride", l.tile_stride)?,
        direction_stride: to_u32("exchange direction stride", l.direction_stride)?,
        stall_block: args.stall_block.map_or(-1, |b| b as i32),
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
    args: &TiledArgs,
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
    // SAFETY: `func` is bilstm_recurrence_tiled loaded from recurrence_tiled.cu (the backend
    // looks it up by KernelId::RecurrenceTiled); its only parameter is
    // bl_recurrence_tiled_params, mirrored by `KernelArg<RecurrenceTiledParams>`. `check`
    // verified its contract: the exchange layout is ExchangeLayout::tiled (8 windows, 8 blocks,
    // 16 units) with the strides passed, and its tiles cover the batch and this launch's tiles;
    // proj holds batch * frames * 512 floats, recurrent 512 * 128, bias 512 (all 16-byte
    // aligned), out batch * frames * 256, the exchange base is aligned to EXCHANGE_ALIGN_BYTES
    // and holds layout.words() words, error holds ERROR_WORDS ints; every flag fits 32 bits; the
    // grid is tiles * 8 blocks of 256 threads, no dynamic shared memory, and at most
    // `co_resident_blocks` (occupancy x SMs), and the launch is cooperative, so all blocks of a
    // tile are resident together and their spins terminate (bounded by spin_timeout_ns in any
    // case). The exchange and error words were zeroed by launch::clear on the main stream before
    // this layer's projection, which this stream waits for.
    unsafe { builder.launch_cooperative(cfg) }.map_err(|source| CudaError::Launch {
        kernel: KERNEL,
        source,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> TiledArgs {
        let layout = ExchangeLayout::tiled(3).unwrap();
        let big = 1usize << 30;
        let span = |len| Span { addr: 1 << 21, len };
        TiledArgs {
            proj: span(big),
            recurrent: span(big),
            bias: span(big),
            out: span(big),
            exchange: span(layout.words()),
            error: span(4),
            layout,
            batch: 20,
            frames: 589,
            layer: 2,
            direction: Direction::Forward,
            tiles: 1..3,
            co_resident_blocks: 264,
            spin_timeout_ns: 1,
            stall_block: None,
        }
    }

    #[test]
    fn a_valid_launch_builds_matching_params() {
        let (p, grid) = check(&args()).unwrap();
        assert_eq!(grid, 16);
        assert_eq!((p.tile_offset, p.direction, p.stall_block), (1, 0, -1));
        let l = ExchangeLayout::tiled(3).unwrap();
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
        assert_eq!((p.batch, p.frames, p.layer), (20, 589, 2));
    }

    #[test]
    fn broken_preconditions_are_refused() {
        let mut a = args();
        a.co_resident_blocks = 15;
        assert!(matches!(
            check(&a),
            Err(CudaError::Contract {
                what: "co-resident blocks for the cooperative grid",
                ..
            })
        ));
        let mut a = args();
        a.layout = ExchangeLayout::wide(8, 3).unwrap();
        assert!(check(&a).is_err());
        let mut a = args();
        a.batch = 25; // 3 tiles hold 24 windows
        assert!(check(&a).is_err());
        let mut a = args();
        a.tiles = 2..4;
        assert!(check(&a).is_err());
        let mut a = args();
        a.exchange.addr += 8;
        assert!(check(&a).is_err());
        let mut a = args();
        a.proj.len = 20 * 589 * 512 - 1;
        assert!(check(&a).is_err());
        let mut a = args();
        a.stall_block = Some(16);
        assert!(check(&a).is_err());
        let mut a = args();
        a.frames = usize::MAX / 4;
        assert!(check(&a).is_err());
    }
}
