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
/// Number of `i32` words of a kernel's error array: code, layer, direction, step (core's
/// device-memory accounting counts the same words).
pub const ERROR_WORDS: usize = bilstm_core::memory::ERROR_WORDS;

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

/// Parameters of `bilstm_projection_small`, `bilstm_projection_large` (`bl_projection_params`
/// in `projection.cu`) and `bilstm_projection_tf32x3` (the same struct in `projection_tf32x3.cu`).
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

/// Parameters of the two cooperative recurrences, `bilstm_recurrence_wide` and
/// `bilstm_recurrence_tiled` (`bl_recurrence_coop_params` in `coop.cuh`, which both kernels
/// include).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecurrenceCoopParams {
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
    /// Windows per tile: 8, 16 or 32 for the wide kernel, `TILED_WINDOWS` (8) for the tiled
    /// one (with any other value the kernel returns at once, writing nothing).
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
    /// Nonzero: TF32 mode's recurrence numerics (`numerics.cuh` sections 7 and 8: gate
    /// activations and the 8-chain dot), zero: FP32 mode's.
    pub tf32_numerics: u32,
    /// `float*` or 0: this layer's final hidden states `[2, batch, 128]` (direction-major: the
    /// layer's block of `h_n`), written by the cell lanes at their last step; 0 writes none.
    pub state_h: u64,
    /// `float*` or 0: this layer's final cell states, laid out as `state_h`.
    pub state_c: u64,
}
const _: () = assert!(size_of::<RecurrenceCoopParams>() == 120);

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
    /// `float*` or 0: this layer's final hidden states `[2, batch, 128]` (direction-major: the
    /// layer's block of `h_n`), written by the cell lanes at their last step; 0 writes none.
    pub state_h: u64,
    /// `float*` or 0: this layer's final cell states, laid out as `state_h`.
    pub state_c: u64,
    /// Nonzero: TF32 mode's recurrence numerics (`numerics.cuh` sections 7 and 8: gate
    /// activations and the 8-chain dot), zero: FP32 mode's.
    pub tf32_numerics: u32,
    /// Zero.
    pub reserved: u32,
}
const _: () = assert!(size_of::<RecurrenceResidentParams>() == 88);

/// Parameters of `bilstm_recurrence_cluster2` and `bilstm_recurrence_cluster4`
/// (`bl_recurrence_cluster_params` in `recurrence_cluster.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecurrenceClusterParams {
    /// `const float*` per direction: the projection `[batch * frames, 512]`.
    pub proj: [u64; 2],
    /// `const float*` per direction: packed recurrent rows `[512, 128]`.
    pub recurrent: [u64; 2],
    /// `const float*` per direction: packed combined bias `[512]`.
    pub bias: [u64; 2],
    /// `float*`: the layer output `[batch, frames, 256]`.
    pub out: u64,
    /// `int*`: the [`ERROR_WORDS`] error words, zeroed before the launch.
    pub error: u64,
    /// A wait for a partner longer than this (ns, `%globaltimer`) ends the kernel with
    /// [`ERROR_PARTNER_LOST`].
    pub spin_timeout_ns: u64,
    /// Windows in the batch (the grid is `2 * batch * cluster size` CTAs).
    pub batch: u32,
    /// Frames (steps) per window.
    pub frames: u32,
    /// The layer (reported with a lost partner).
    pub layer: u32,
    /// Test hook: the CTA (`blockIdx.x`) that never publishes; -1 in production.
    pub stall_cta: i32,
    /// `float*` or 0: this layer's final hidden states `[2, batch, 128]` (direction-major: the
    /// layer's block of `h_n`), written by the cell lanes at their last step; 0 writes none.
    pub state_h: u64,
    /// `float*` or 0: this layer's final cell states, laid out as `state_h`.
    pub state_c: u64,
    /// `unsigned*` or 0: progress words `[batch, 2]` in device-mapped host memory, each the
    /// count of steps whose output rows the host may read (the kernel's "Progress" contract);
    /// 0 reports none.
    pub progress: u64,
    /// Nonzero: outputs stored rounded to TF32 (`bl_output_value`; the register-quad and
    /// 16-window kernels only, the others refuse it); the final states exact.
    pub out_tf32: u32,
    /// Nonzero: TF32 mode's recurrence numerics (`numerics.cuh` sections 7 and 8: gate
    /// activations and the 8-chain dot), zero: FP32 mode's.
    pub tf32_numerics: u32,
}
const _: () = assert!(size_of::<RecurrenceClusterParams>() == 120);

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

/// `bl_tensor_map` (kernels/cuda/projection_tf32x3.cu): an encoded `CUtensorMap` (128 opaque
/// bytes, 64-byte aligned), the second and third parameters of
/// `bilstm_projection_tf32_resident` (activations, output), made by the driver's
/// `cuTensorMapEncodeTiled` on the host for each launch.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorMap {
    /// The driver's encoding.
    pub words: [u64; 16],
}
const _: () = assert!(size_of::<TensorMap>() == 128 && core::mem::align_of::<TensorMap>() == 64);

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
    fn recurrence_coop_offsets() {
        let pointers = [
            offset_of!(RecurrenceCoopParams, proj),
            offset_of!(RecurrenceCoopParams, recurrent),
            offset_of!(RecurrenceCoopParams, bias),
            offset_of!(RecurrenceCoopParams, out),
            offset_of!(RecurrenceCoopParams, exchange),
            offset_of!(RecurrenceCoopParams, error),
            offset_of!(RecurrenceCoopParams, spin_timeout_ns),
        ];
        assert_eq!(pointers, [0, 8, 16, 24, 32, 40, 48]);
        let words = [
            offset_of!(RecurrenceCoopParams, batch),
            offset_of!(RecurrenceCoopParams, frames),
            offset_of!(RecurrenceCoopParams, layer),
            offset_of!(RecurrenceCoopParams, direction),
            offset_of!(RecurrenceCoopParams, tile_height),
            offset_of!(RecurrenceCoopParams, tile_offset),
            offset_of!(RecurrenceCoopParams, block_stride),
            offset_of!(RecurrenceCoopParams, slot_stride),
            offset_of!(RecurrenceCoopParams, tile_stride),
            offset_of!(RecurrenceCoopParams, direction_stride),
            offset_of!(RecurrenceCoopParams, stall_block),
            offset_of!(RecurrenceCoopParams, tf32_numerics),
        ];
        assert_eq!(words, [56, 60, 64, 68, 72, 76, 80, 84, 88, 92, 96, 100]);
        assert_eq!(offset_of!(RecurrenceCoopParams, state_h), 104);
        assert_eq!(offset_of!(RecurrenceCoopParams, state_c), 112);
    }

    /// The C mirror in `coop.cuh` declares the same fields in the same order (the offsets above
    /// then hold on both sides, given the C types' sizes, which the static_assert of the total
    /// size and the field types below pin), and asserts the same size.
    #[test]
    fn recurrence_coop_mirror_in_coop_cuh() {
        let cuh = include_str!("../cuda/coop.cuh");
        let body = cuh
            .split("struct bl_recurrence_coop_params {")
            .nth(1)
            .and_then(|rest| rest.split("};").next())
            .expect("coop.cuh declares bl_recurrence_coop_params");
        let fields: Vec<(String, String)> = body
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
            .map(|l| {
                let decl = l.trim_end_matches(';');
                let (ty, name) = decl.rsplit_once(' ').expect("a `type name;` line");
                (ty.trim().to_string(), name.to_string())
            })
            .collect();
        let want = [
            ("const float*", "proj"),
            ("const float*", "recurrent"),
            ("const float*", "bias"),
            ("float*", "out"),
            ("bl_u64*", "exchange"),
            ("int*", "error"),
            ("bl_u64", "spin_timeout_ns"),
            ("bl_u32", "batch"),
            ("bl_u32", "frames"),
            ("bl_u32", "layer"),
            ("bl_u32", "direction"),
            ("bl_u32", "tile_height"),
            ("bl_u32", "tile_offset"),
            ("bl_u32", "block_stride"),
            ("bl_u32", "slot_stride"),
            ("bl_u32", "tile_stride"),
            ("bl_u32", "direction_stride"),
            ("int", "stall_block"),
            ("bl_u32", "tf32_numerics"),
            ("float*", "state_h"),
            ("float*", "state_c"),
        ];
        let got: Vec<(&str, &str)> = fields
            .iter()
            .map(|(t, n)| (t.as_str(), n.as_str()))
            .collect();
        assert_eq!(got, want);
        assert!(cuh.contains(&format!(
            "static_assert(sizeof(bl_recurrence_coop_params) == {},",
            size_of::<RecurrenceCoopParams>()
        )));
    }

    #[test]
    fn recurrence_resident_offsets() {
        assert_eq!(offset_of!(RecurrenceResidentParams, proj), 0);
        assert_eq!(offset_of!(RecurrenceResidentParams, recurrent), 16);
        assert_eq!(offset_of!(RecurrenceResidentParams, bias), 32);
        assert_eq!(offset_of!(RecurrenceResidentParams, out), 48);
        assert_eq!(offset_of!(RecurrenceResidentParams, batch), 56);
        assert_eq!(offset_of!(RecurrenceResidentParams, frames), 60);
        assert_eq!(offset_of!(RecurrenceResidentParams, state_h), 64);
        assert_eq!(offset_of!(RecurrenceResidentParams, state_c), 72);
        assert_eq!(offset_of!(RecurrenceResidentParams, tf32_numerics), 80);
        assert_eq!(offset_of!(RecurrenceResidentParams, reserved), 84);
    }

    #[test]
    fn recurrence_cluster_offsets() {
        let fields = [
            offset_of!(RecurrenceClusterParams, proj),
            offset_of!(RecurrenceClusterParams, recurrent),
            offset_of!(RecurrenceClusterParams, bias),
            offset_of!(RecurrenceClusterParams, out),
            offset_of!(RecurrenceClusterParams, error),
            offset_of!(RecurrenceClusterParams, spin_timeout_ns),
            offset_of!(RecurrenceClusterParams, batch),
            offset_of!(RecurrenceClusterParams, frames),
            offset_of!(RecurrenceClusterParams, layer),
            offset_of!(RecurrenceClusterParams, stall_cta),
            offset_of!(RecurrenceClusterParams, state_h),
            offset_of!(RecurrenceClusterParams, state_c),
            offset_of!(RecurrenceClusterParams, progress),
        ];
        assert_eq!(fields, [0, 16, 32, 48, 56, 64, 72, 76, 80, 84, 88, 96, 104]);
        assert_eq!(offset_of!(RecurrenceClusterParams, out_tf32), 112);
        assert_eq!(offset_of!(RecurrenceClusterParams, tf32_numerics), 116);
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
