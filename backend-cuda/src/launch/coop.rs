//! What the two cooperative recurrences (wide and tiled) share: their launch arguments and the
//! host-side checks of the launch contract both kernels state in their `.cu` headers.

use core::ops::Range;

use bilstm_core::Direction;
use bilstm_core::exchange::{ExchangeLayout, flag};
use bilstm_core::geometry::EXCHANGE_ALIGN_BYTES;
use bilstm_kernels::params::{ERROR_WORDS, RecurrenceCoopParams};
use cudarc::driver::DeviceRepr;

use super::StateSpans;
use super::{
    KernelArg, Span, check_direction_tensors, check_output, product, require, require_aligned,
    to_u32,
};
use crate::error::CudaError;

// SAFETY: `RecurrenceCoopParams` is `#[repr(C)]`, `Copy`, holds only integers (device addresses
// as u64), and its layout equals `bl_recurrence_coop_params` in kernels/cuda/coop.cuh, the one
// parameter struct of recurrence_wide.cu and recurrence_tiled.cu (size asserted on both sides:
// 120 bytes; offsets and the C field order pinned by bilstm_kernels' params tests). `KernelArg`
// is `repr(transparent)`, so it has the same layout.
unsafe impl DeviceRepr for KernelArg<RecurrenceCoopParams> {}

/// What one launch of a cooperative recurrence (wide or tiled) reads and writes.
#[derive(Debug, Clone)]
pub(crate) struct CoopArgs {
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
    /// The exchange layout of this pass (both directions, all tiles): `ExchangeLayout::wide`
    /// or `ExchangeLayout::tiled`, checked by each kernel's own `check`.
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
    /// Where this layer's final states go (`None`: nowhere).
    pub state: Option<StateSpans>,
    /// TF32 mode's recurrence numerics (`numerics.cuh` sections 7 and 8: gate activations and
    /// the 8-chain dot), else FP32 mode's.
    pub tf32_numerics: bool,
}

/// The checked values both kernels' parameter structs are built from, narrowed to the
/// kernels' integer widths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CoopChecked {
    /// Blocks in the grid: tiles of the launch × blocks per tile.
    pub grid: u32,
    /// Windows.
    pub batch: u32,
    /// Frames per window.
    pub frames: u32,
    /// Layer index.
    pub layer: u32,
    /// 0 forward, 1 reverse.
    pub direction: u32,
    /// The launch's first tile.
    pub tile_offset: u32,
    /// Exchange strides, in words.
    pub block_stride: u32,
    /// See [`ExchangeLayout::slot_stride`].
    pub slot_stride: u32,
    /// See [`ExchangeLayout::tile_stride`].
    pub tile_stride: u32,
    /// See [`ExchangeLayout::direction_stride`].
    pub direction_stride: u32,
    /// The stalled block, or -1.
    pub stall_block: i32,
    /// The final-state pointers (`state_h`, `state_c`; 0 for none), checked.
    pub state: (u64, u64),
}

/// Checks what the wide and tiled contracts share: batch, frames and tiles against the
/// layout; the grid against the co-resident capacity (`layout.blocks_per_tile` blocks per
/// tile); every flag of the layer fitting 32 bits; every buffer's length and alignment; the
/// stalled block inside the grid.
///
/// # Errors
/// [`CudaError::Contract`] naming the first broken precondition, with `kernel`'s name.
pub(crate) fn check_coop(kernel: &'static str, args: &CoopArgs) -> Result<CoopChecked, CudaError> {
    let l = &args.layout;
    require(kernel, "batch", 1, args.batch)?;
    require(kernel, "frames", 1, args.frames)?;
    require(kernel, "tiles in the launch", 1, args.tiles.len())?;
    require(kernel, "tiles of the layout", args.tiles.end, l.tiles)?;
    require(
        kernel,
        "windows covered by the layout's tiles",
        args.batch,
        product(kernel, "windows", &[l.tiles, l.windows_per_tile])?,
    )?;
    let grid = product(
        kernel,
        "grid blocks",
        &[args.tiles.len(), l.blocks_per_tile],
    )?;
    require(
        kernel,
        "co-resident blocks for the cooperative grid",
        grid,
        args.co_resident_blocks,
    )?;
    let grid = to_u32(kernel, "grid blocks", grid)?;
    // Every flag of this layer fits 32 bits.
    flag(args.layer, args.frames, args.frames - 1).map_err(CudaError::from)?;

    let rows = product(kernel, "projection rows", &[args.batch, args.frames])?;
    check_direction_tensors(kernel, rows, args.proj, args.recurrent, args.bias)?;
    check_output(kernel, rows, args.out)?;
    require_aligned(
        kernel,
        "exchange base alignment",
        args.exchange.addr,
        EXCHANGE_ALIGN_BYTES as u64,
    )?;
    require(kernel, "exchange words", l.words(), args.exchange.len)?;
    require(kernel, "error words", ERROR_WORDS, args.error.len)?;
    require_aligned(kernel, "error alignment", args.error.addr, 4)?;
    if let Some(b) = args.stall_block {
        require(
            kernel,
            "stalled block inside the grid",
            b as usize + 1,
            grid as usize,
        )?;
    }
    Ok(CoopChecked {
        grid,
        batch: to_u32(kernel, "batch", args.batch)?,
        frames: to_u32(kernel, "frames", args.frames)?,
        layer: to_u32(kernel, "layer", args.layer)?,
        direction: args.direction.index() as u32,
        tile_offset: to_u32(kernel, "tile offset", args.tiles.start)?,
        block_stride: to_u32(kernel, "exchange block stride", l.block_stride)?,
        slot_stride: to_u32(kernel, "exchange slot stride", l.slot_stride)?,
        tile_stride: to_u32(kernel, "exchange tile stride", l.tile_stride)?,
        direction_stride: to_u32(kernel, "exchange direction stride", l.direction_stride)?,
        stall_block: args.stall_block.map_or(-1, |b| b as i32),
        state: super::check_state(kernel, args.batch, args.state)?,
    })
}

impl CoopChecked {
    /// The kernels' parameter struct for `args` (checked into `self`) and tile height
    /// `tile_height` (the layout's windows per tile).
    ///
    /// # Errors
    /// [`CudaError::Contract`] when the tile height does not fit 32 bits.
    pub(crate) fn params(
        &self,
        kernel: &'static str,
        args: &CoopArgs,
    ) -> Result<RecurrenceCoopParams, CudaError> {
        Ok(RecurrenceCoopParams {
            proj: args.proj.addr,
            recurrent: args.recurrent.addr,
            bias: args.bias.addr,
            out: args.out.addr,
            exchange: args.exchange.addr,
            error: args.error.addr,
            spin_timeout_ns: args.spin_timeout_ns,
            batch: self.batch,
            frames: self.frames,
            layer: self.layer,
            direction: self.direction,
            tile_height: to_u32(kernel, "tile height", args.layout.windows_per_tile)?,
            tile_offset: self.tile_offset,
            block_stride: self.block_stride,
            slot_stride: self.slot_stride,
            tile_stride: self.tile_stride,
            direction_stride: self.direction_stride,
            stall_block: self.stall_block,
            tf32_numerics: u32::from(args.tf32_numerics),
            state_h: self.state.0,
            state_c: self.state.1,
        })
    }
}
