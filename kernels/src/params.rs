//! The parameter struct of every kernel, `#[repr(C)]`, mirrored field for field by the struct
//! of the same role in the kernel's `.cu` file (both sides assert the size; the tests below
//! pin every offset).
//!
//! Pointers are device addresses (`u64`, a `CUdeviceptr`): this crate is data only, and the
//! CUDA backend fills them from its buffers. Each kernel receives its struct by value as its
//! only argument.

use core::mem::size_of;

/// `error[0]` after a kernel that met no failure (`BL_ERROR_NONE` in `common.cuh`).
pub const ERROR_NONE: i32 = 0;
/// `error[0]` after a recurrence block waited longer than its spin timeout for a partner's
/// word (`BL_ERROR_PARTNER_LOST` in `common.cuh`); `error[1..4]` then hold the layer, the
/// direction index and the step it waited at.
pub const ERROR_PARTNER_LOST: i32 = 1;
/// Number of `i32` words of a kernel's error array: code, layer, direction, step.
pub const ERROR_WORDS: usize = 4;

/// Parameters of `bilstm_clear` (`bl_clear_params` in `clear.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClearParams {
    /// `u64*`: the aligned exchange base.
    pub words: u64,
    /// Words to zero from `words`.
    pub word_count: u64,
    /// `int*`: the error array.
    pub error: u64,
    /// Error words to zero (at most the block size).
    pub error_count: u32,
    /// Padding; zero.
    pub reserved: u32,
}
const _: () = assert!(size_of::<ClearParams>() == 32);

/// Parameters of `bilstm_projection_small` and `bilstm_projection_large`
/// (`bl_projection_params` in `projection.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProjectionParams {
    /// `const float*`: the layer input `[rows, in_width]`.
    pub x: u64,
    /// `const float*` per direction: packed K-major input weights `[padded_in, 512]`.
    pub weights: [u64; 2],
    /// `float*`: the projection output, direction `d` at `out + d * out_direction_stride`,
    /// each `[rows, 512]`.
    pub out: u64,
    /// Floats from the forward to the reverse direction's output (a multiple of 4).
    pub out_direction_stride: u64,
    /// Rows (`batch * frames`).
    pub rows: u32,
    /// Values per input row (60 for layer 0 of pyannote, 256 after).
    pub in_width: u32,
}
const _: () = assert!(size_of::<ProjectionParams>() == 48);

/// Parameters of `bilstm_recurrence_wide` (`bl_recurrence_wide_params` in
/// `recurrence_wide.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecurrenceWideParams {
    /// `const float*`: this direction's projection `[batch * frames, 512]`.
    pub proj: u64,
    /// `const float*`: this direction's packed recurrent rows `[512, 128]`.
    pub recurrent: u64,
    /// `const float*`: this direction's packed combined bias `[512]`.
    pub bias: u64,
    /// `float*`: the layer output `[batch, frames, 256]`.
    pub out: u64,
    /// `u64*`: the aligned exchange base (both directions, all tiles).
    pub exchange: u64,
    /// `int*`: the error array ([`ERROR_WORDS`] ints).
    pub error: u64,
    /// A block that waits longer than this for a partner gives up (nanoseconds).
    pub spin_timeout_ns: u64,
    /// Windows in the batch.
    pub batch: u32,
    /// Frames (steps) per window.
    pub frames: u32,
    /// Layer index (part of the exchange flag).
    pub layer: u32,
    /// 0 forward, 1 reverse.
    pub direction: u32,
    /// Windows per tile: 8, 16 or 32.
    pub tile_height: u32,
    /// The first tile of this launch.
    pub tile_offset: u32,
    /// Exchange layout: words between producer blocks.
    pub block_stride: u32,
    /// Exchange layout: words between the two parity slots.
    pub slot_stride: u32,
    /// Exchange layout: words between tiles.
    pub tile_stride: u32,
    /// Exchange layout: words between the directions.
    pub direction_stride: u32,
    /// Test-only fault injection: this block index returns at once (`-1`: none).
    pub stall_block: i32,
    /// Padding; zero.
    pub reserved: u32,
}
const _: () = assert!(size_of::<RecurrenceWideParams>() == 104);

/// Parameters of `bilstm_recurrence_tiled` (`bl_recurrence_tiled_params` in
/// `recurrence_tiled.cu`). The tile height is fixed (`TILED_WINDOWS`), so unlike
/// [`RecurrenceWideParams`] there is no `tile_height`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecurrenceTiledParams {
    /// `const float*`: this direction's projection `[batch * frames, 512]`.
    pub proj: u64,
    /// `const float*`: this direction's packed recurrent rows `[512, 128]`.
    pub recurrent: u64,
    /// `const float*`: this direction's packed combined bias `[512]`.
    pub bias: u64,
    /// `float*`: the layer output `[batch, frames, 256]`.
    pub out: u64,
    /// `u64*`: the aligned exchange base (both directions, all tiles).
    pub exchange: u64,
    /// `int*`: the error array ([`ERROR_WORDS`] ints).
    pub error: u64,
    /// A block that waits longer than this for a partner gives up (nanoseconds).
    pub spin_timeout_ns: u64,
    /// Windows in the batch.
    pub batch: u32,
    /// Frames (steps) per window.
    pub frames: u32,
    /// Layer index (part of the exchange flag).
    pub layer: u32,
    /// 0 forward, 1 reverse.
    pub direction: u32,
    /// The first tile of this launch.
    pub tile_offset: u32,
    /// Exchange layout: words between producer blocks.
    pub block_stride: u32,
    /// Exchange layout: words between the two parity slots.
    pub slot_stride: u32,
    /// Exchange layout: words between tiles.
    pub tile_stride: u32,
    /// Exchange layout: words between the directions.
    pub direction_stride: u32,
    /// Test-only fault injection: this block index returns at once (`-1`: none).
    pub stall_block: i32,
}
const _: () = assert!(size_of::<RecurrenceTiledParams>() == 96);

/// Parameters of `bilstm_recurrence_resident` (`bl_recurrence_resident_params` in
/// `recurrence_resident.cu`): both directions of one layer in one launch, so the per-direction
/// tensors come in pairs (index 0 forward, 1 reverse).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecurrenceResidentParams {
    /// `const float*` per direction: the projection `[batch * frames, 512]`.
    pub proj: [u64; 2],
    /// `const float*` per direction: packed recurrent rows `[512, 128]`.
    pub recurrent: [u64; 2],
    /// `const float*` per direction: packed combined bias `[512]`.
    pub bias: [u64; 2],
    /// `float*`: the layer output `[batch, frames, 256]`.
    pub out: u64,
    /// Windows in the batch (the grid is `2 * batch` blocks).
    pub batch: u32,
    /// Frames (steps) per window.
    pub frames: u32,
}
const _: () = assert!(size_of::<RecurrenceResidentParams>() == 64);

/// Parameters of `bilstm_projection_tf32` (`bl_projection_tf32_params` in `projection_tf32.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProjectionTf32Params {
    /// `const float*`: the layer input `[rows, in_width]`.
    pub x: u64,
    /// `const float*` per direction: packed gate-major input weights pre-rounded to TF32,
    /// `[512, weights_row_stride]` (16-byte aligned).
    pub weights: [u64; 2],
    /// `float*`: the projection output, direction `d` at `out + d * out_direction_stride`,
    /// each `[rows, 512]`.
    pub out: u64,
    /// Floats from the forward to the reverse direction's output (even).
    pub out_direction_stride: u64,
    /// Rows (`batch * frames`).
    pub rows: u32,
    /// Values per input row (60 for layer 0 of pyannote, 256 after).
    pub in_width: u32,
    /// Floats between consecutive gate rows of `weights` (`padded_in(in_width)`, a multiple
    /// of 4).
    pub weights_row_stride: u32,
    /// Padding; zero.
    pub reserved: u32,
}
const _: () = assert!(size_of::<ProjectionTf32Params>() == 56);

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn clear_offsets() {
        assert_eq!(offset_of!(ClearParams, words), 0);
        assert_eq!(offset_of!(ClearParams, word_count), 8);
        assert_eq!(offset_of!(ClearParams, error), 16);
        assert_eq!(offset_of!(ClearParams, error_count), 24);
        assert_eq!(offset_of!(ClearParams, reserved), 28);
    }

    #[test]
    fn projection_offsets() {
        assert_eq!(offset_of!(ProjectionParams, x), 0);
        assert_eq!(offset_of!(ProjectionParams, weights), 8);
        assert_eq!(offset_of!(ProjectionParams, out), 24);
        assert_eq!(offset_of!(ProjectionParams, out_direction_stride), 32);
        assert_eq!(offset_of!(ProjectionParams, rows), 40);
        assert_eq!(offset_of!(ProjectionParams, in_width), 44);
    }

    #[test]
    fn recurrence_wide_offsets() {
        let pointers = [
            offset_of!(RecurrenceWideParams, proj),
            offset_of!(RecurrenceWideParams, recurrent),
            offset_of!(RecurrenceWideParams, bias),
            offset_of!(RecurrenceWideParams, out),
            offset_of!(RecurrenceWideParams, exchange),
            offset_of!(RecurrenceWideParams, error),
            offset_of!(RecurrenceWideParams, spin_timeout_ns),
        ];
        assert_eq!(pointers, [0, 8, 16, 24, 32, 40, 48]);
        let words = [
            offset_of!(RecurrenceWideParams, batch),
            offset_of!(RecurrenceWideParams, frames),
            offset_of!(RecurrenceWideParams, layer),
            offset_of!(RecurrenceWideParams, direction),
            offset_of!(RecurrenceWideParams, tile_height),
            offset_of!(RecurrenceWideParams, tile_offset),
            offset_of!(RecurrenceWideParams, block_stride),
            offset_of!(RecurrenceWideParams, slot_stride),
            offset_of!(RecurrenceWideParams, tile_stride),
            offset_of!(RecurrenceWideParams, direction_stride),
            offset_of!(RecurrenceWideParams, stall_block),
            offset_of!(RecurrenceWideParams, reserved),
        ];
        assert_eq!(words, [56, 60, 64, 68, 72, 76, 80, 84, 88, 92, 96, 100]);
    }

    #[test]
    fn recurrence_tiled_offsets() {
        let pointers = [
            offset_of!(RecurrenceTiledParams, proj),
            offset_of!(RecurrenceTiledParams, recurrent),
            offset_of!(RecurrenceTiledParams, bias),
            offset_of!(RecurrenceTiledParams, out),
            offset_of!(RecurrenceTiledParams, exchange),
            offset_of!(RecurrenceTiledParams, error),
            offset_of!(RecurrenceTiledParams, spin_timeout_ns),
        ];
        assert_eq!(pointers, [0, 8, 16, 24, 32, 40, 48]);
        let words = [
            offset_of!(RecurrenceTiledParams, batch),
            offset_of!(RecurrenceTiledParams, frames),
            offset_of!(RecurrenceTiledParams, layer),
            offset_of!(RecurrenceTiledParams, direction),
            offset_of!(RecurrenceTiledParams, tile_offset),
            offset_of!(RecurrenceTiledParams, block_stride),
            offset_of!(RecurrenceTiledParams, slot_stride),
            offset_of!(RecurrenceTiledParams, tile_stride),
            offset_of!(RecurrenceTiledParams, direction_stride),
            offset_of!(RecurrenceTiledParams, stall_block),
        ];
        assert_eq!(words, [56, 60, 64, 68, 72, 76, 80, 84, 88, 92]);
    }

    #[test]
    fn recurrence_resident_offsets() {
        assert_eq!(offset_of!(RecurrenceResidentParams, proj), 0);
        assert_eq!(offset_of!(RecurrenceResidentParams, recurrent), 16);
        assert_eq!(offset_of!(RecurrenceResidentParams, bias), 32);
        assert_eq!(offset_of!(RecurrenceResidentParams, out), 48);
        assert_eq!(offset_of!(RecurrenceResidentParams, batch), 56);
        assert_eq!(offset_of!(RecurrenceResidentParams, frames), 60);
    }

    #[test]
    fn projection_tf32_offsets() {
        let fields = [
            offset_of!(ProjectionTf32Params, x),
            offset_of!(ProjectionTf32Params, weights),
            offset_of!(ProjectionTf32Params, out),
            offset_of!(ProjectionTf32Params, out_direction_stride),
            offset_of!(ProjectionTf32Params, rows),
            offset_of!(ProjectionTf32Params, in_width),
            offset_of!(ProjectionTf32Params, weights_row_stride),
            offset_of!(ProjectionTf32Params, reserved),
        ];
        assert_eq!(fields, [0, 8, 24, 32, 40, 44, 48, 52]);
    }
}
