//! Packing source tensors into bilstm's layout (see the [module docs](super)).

use super::{DirectionWeights, GateOrder, StackWeights, round_to_tf32};
use crate::error::{CoreError, checked_mul};
use crate::geometry::{
    GATES, K_PAD, PROJ_WG_K_TILE, PROJ_WG_TILE_COLS, TENSOR_ALIGN_FLOATS, proj_wg_padded_in,
};
use crate::shape::{Direction, MAX_LAYERS, StackShape};

/// Input width rounded up to a multiple of [`K_PAD`] (60 becomes 64, 256 stays 256).
pub const fn padded_in(width: usize) -> usize {
    width.div_ceil(K_PAD) * K_PAD
}

pub(super) fn check_len(what: &'static str, expected: usize, got: usize) -> Result<(), CoreError> {
    if expected == got {
        Ok(())
    } else {
        Err(CoreError::Shape {
            what,
            expected,
            got,
        })
    }
}

/// Checks that source input weights hold `rows x width` values.
fn check_input_len(input: &[f32], rows: usize, width: usize) -> Result<(), CoreError> {
    check_len(
        "input weights length",
        checked_mul(rows, width, "input weights")?,
        input.len(),
    )
}

/// Packs input weights `[4H, width]` (source `order`) into K-major `[padded_in, 4H]`:
/// `out[k * 4H + unit * 4 + gate] = input[source_row * width + k]`, zero for `k >= width`.
///
/// # Errors
/// [`CoreError::Shape`] when `input` or `out` has the wrong length.
pub fn pack_input_kmajor_into(
    input: &[f32],
    width: usize,
    hidden: usize,
    order: GateOrder,
    out: &mut [f32],
) -> Result<(), CoreError> {
    let rows = GATES * hidden;
    check_input_len(input, rows, width)?;
    check_len(
        "packed K-major input weights length",
        checked_mul(padded_in(width), rows, "packed input")?,
        out.len(),
    )?;
    for (k, out_row) in out.chunks_exact_mut(rows).enumerate() {
        for (p, slot) in out_row.iter_mut().enumerate() {
            *slot = if k < width {
                input[order.source_row_of_packed(p, hidden) * width + k]
            } else {
                0.0
            };
        }
    }
    Ok(())
}

/// Packs input weights for the 3xTF32 projection into `out` (`2 * padded_in(in_width) * 4H`
/// values): the K-major layout of [`pack_input_kmajor_into`] twice, first each weight's TF32
/// high part, then its TF32 remainder ([`super::split_tf32`]), so the kernel loads both parts
/// instead of splitting the weights on every use. Padding rows are zero in both halves.
///
/// # Errors
/// As [`pack_input_kmajor_into`].
pub fn pack_input_x3_into(
    input: &[f32],
    in_width: usize,
    hidden: usize,
    order: GateOrder,
    out: &mut [f32],
) -> Result<(), CoreError> {
    let half = out.len() / 2;
    check_len("3xTF32 input weights", 2 * half, out.len())?;
    let (hi, lo) = out.split_at_mut(half);
    pack_input_kmajor_into(input, in_width, hidden, order, hi)?;
    for (h, l) in hi.iter_mut().zip(lo.iter_mut()) {
        let (high, rest) = super::split_tf32(*h);
        *h = high;
        *l = rest;
    }
    Ok(())
}

/// The slot of K-tile-local k (`0..PROJ_WG_K_TILE`) in a row of the warpgroup-MMA weight image:
/// k-step `c = k / 8` owns slots `8c .. 8c + 8`; its even k go to slots `8c + 0..4` and its odd k
/// to `8c + 4..8` (`k = 8c + 2j` in slot `8c + j`, `k = 8c + 2j + 1` in slot `8c + 4 + j`), so
/// that a thread's two A-fragment k values are adjacent in the activations (one 64-bit load).
pub const fn wgmma_k_slot(k: usize) -> usize {
    let step = k / 8;
    let r = k % 8;
    8 * step + (r % 2) * 4 + r / 2
}

/// Offset of (column `n`, K-tile-local slot `slot`) in one `PROJ_WG_TILE_COLS x PROJ_WG_K_TILE`
/// tile of the warpgroup-MMA weight image: row `n` (128 bytes of 32 slots), atoms of 8 rows, the
/// 16-byte chunk `slot / 4` of row `n` stored at chunk `(slot / 4) ^ (n % 8)` (the 128-byte
/// swizzle `wgmma` reads with a `SWIZZLE_128B` descriptor).
pub const fn wgmma_tile_offset(n: usize, slot: usize) -> usize {
    let chunk = (slot / 4) ^ (n % 8);
    n * PROJ_WG_K_TILE + chunk * 4 + slot % 4
}

/// Floats of one direction's warpgroup-MMA weight image for an input of `width`:
/// `2 * proj_wg_padded_in(width) * rows` (both parts).
pub const fn wgmma_image_len(width: usize, rows: usize) -> usize {
    2 * proj_wg_padded_in(width) * rows
}

/// Packs input weights `[4H, width]` (source `order`) for the warpgroup-MMA 3xTF32 projection
/// (`bilstm_projection_tf32x3_wgmma`) into `out` ([`wgmma_image_len`] values): for part 0 the
/// TF32 high parts and for part 1 the TF32 remainders ([`super::split_tf32`]), for each column
/// tile of `PROJ_WG_TILE_COLS` packed gate rows, for each K tile of `PROJ_WG_K_TILE`, the tile
/// image of [`wgmma_tile_offset`] / [`wgmma_k_slot`]: the exact shared-memory image the kernel
/// reads, so it copies it in 16-byte chunks unchanged. Padding (k >= width) is zero.
///
/// # Errors
/// [`CoreError::Shape`] when `input` or `out` has the wrong length, or when `4H` is not a
/// multiple of `PROJ_WG_TILE_COLS`.
pub fn pack_input_x3_wgmma_into(
    input: &[f32],
    width: usize,
    hidden: usize,
    order: GateOrder,
    out: &mut [f32],
) -> Result<(), CoreError> {
    pack_wgmma_image(input, width, hidden, order, out, WgmmaImage::SplitPairSlots)
}

/// Floats of one direction's natural-order TF32 warpgroup-MMA image for an input of `width`:
/// `proj_wg_padded_in(width) * rows` (high parts only).
pub const fn tf32_wgmma_image_len(width: usize, rows: usize) -> usize {
    proj_wg_padded_in(width) * rows
}

/// Packs input weights `[4H, width]` (source `order`) for the resident TF32 projection
/// (`bilstm_projection_tf32_resident`, which reads activations and weights from shared memory)
/// into `out` ([`tf32_wgmma_image_len`] values): the TF32 high parts ([`super::split_tf32`]`.0`,
/// the values the other warpgroup image's first part holds), per column tile of
/// `PROJ_WG_TILE_COLS` packed gate rows, per K tile of `PROJ_WG_K_TILE`, in the 128-byte swizzle
/// of [`wgmma_tile_offset`] with k in its natural slot (`slot = k % PROJ_WG_K_TILE`, as the
/// activations' TMA copies land). Padding (k >= width) is zero.
///
/// # Errors
/// As [`pack_input_x3_wgmma_into`].
pub fn pack_input_tf32_wgmma_into(
    input: &[f32],
    width: usize,
    hidden: usize,
    order: GateOrder,
    out: &mut [f32],
) -> Result<(), CoreError> {
    pack_wgmma_image(
        input,
        width,
        hidden,
        order,
        out,
        WgmmaImage::HighNaturalSlots,
    )
}

/// Which warpgroup-MMA weight image [`pack_wgmma_image`] writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum WgmmaImage {
    /// High parts then remainders, k at [`wgmma_k_slot`] (register A fragments).
    SplitPairSlots,
    /// High parts only, k at its natural slot (A from shared memory).
    HighNaturalSlots,
}

fn pack_wgmma_image(
    input: &[f32],
    width: usize,
    hidden: usize,
    order: GateOrder,
    out: &mut [f32],
    image: WgmmaImage,
) -> Result<(), CoreError> {
    let rows = GATES * hidden;
    check_input_len(input, rows, width)?;
    check_len(
        "gate rows in whole warpgroup-MMA column tiles",
        rows.div_ceil(PROJ_WG_TILE_COLS) * PROJ_WG_TILE_COLS,
        rows,
    )?;
    let padded = proj_wg_padded_in(width);
    let parts = if image == WgmmaImage::SplitPairSlots {
        2
    } else {
        1
    };
    check_len(
        "packed warpgroup-MMA input weights length",
        checked_mul(parts * padded, rows, "packed input")?,
        out.len(),
    )?;
    let k_tiles = padded / PROJ_WG_K_TILE;
    let tile_floats = PROJ_WG_TILE_COLS * PROJ_WG_K_TILE;
    let col_tiles = rows / PROJ_WG_TILE_COLS;
    out.fill(0.0);
    for p in 0..rows {
        let src = order.source_row_of_packed(p, hidden) * width;
        let (col_tile, n) = (p / PROJ_WG_TILE_COLS, p % PROJ_WG_TILE_COLS);
        for k in 0..width {
            let (hi, lo) = super::split_tf32(input[src + k]);
            let (kt, kl) = (k / PROJ_WG_K_TILE, k % PROJ_WG_K_TILE);
            let slot = match image {
                WgmmaImage::SplitPairSlots => wgmma_k_slot(kl),
                WgmmaImage::HighNaturalSlots => kl,
            };
            let at = wgmma_tile_offset(n, slot);
            for (part, value) in [(0, hi), (1, lo)].into_iter().take(parts) {
                let tile = (part * col_tiles + col_tile) * k_tiles + kt;
                out[tile * tile_floats + at] = value;
            }
        }
    }
    Ok(())
}

/// Packs input weights `[4H, width]` into gate-major `[4H, padded_in]`, each value rounded to
/// TF32 ([`round_to_tf32`]), for the tensor-core projection.
///
/// # Errors
/// [`CoreError::Shape`] when `input` or `out` has the wrong length.
pub fn pack_input_tf32_into(
    input: &[f32],
    width: usize,
    hidden: usize,
    order: GateOrder,
    out: &mut [f32],
) -> Result<(), CoreError> {
    let rows = GATES * hidden;
    let padded = padded_in(width);
    check_input_len(input, rows, width)?;
    check_len(
        "packed TF32 input weights length",
        checked_mul(rows, padded, "packed input")?,
        out.len(),
    )?;
    for (p, out_row) in out.chunks_exact_mut(padded).enumerate() {
        let src = order.source_row_of_packed(p, hidden) * width;
        for (k, slot) in out_row.iter_mut().enumerate() {
            *slot = if k < width {
                round_to_tf32(input[src + k])
            } else {
                0.0
            };
        }
    }
    Ok(())
}

/// Packs recurrent weights `[4H, H]` into packed rows `[4H, H]`:
/// `out[(unit * 4 + gate) * H + k] = recurrent[source_row * H + k]`.
///
/// # Errors
/// [`CoreError::Shape`] when `recurrent` or `out` has the wrong length.
pub fn pack_recurrent_into(
    recurrent: &[f32],
    hidden: usize,
    order: GateOrder,
    out: &mut [f32],
) -> Result<(), CoreError> {
    let rows = GATES * hidden;
    let len = checked_mul(rows, hidden, "recurrent weights")?;
    check_len("recurrent weights length", len, recurrent.len())?;
    check_len("packed recurrent weights length", len, out.len())?;
    for (p, out_row) in out.chunks_exact_mut(hidden).enumerate() {
        let src = order.source_row_of_packed(p, hidden) * hidden;
        out_row.copy_from_slice(&recurrent[src..src + hidden]);
    }
    Ok(())
}

/// Packs recurrent weights `[4H, H]` into K-major `[H, 4H]` (the CPU's per-step layout):
/// `out[k * 4H + unit * 4 + gate] = recurrent[source_row * H + k]`.
///
/// # Errors
/// [`CoreError::Shape`] when `recurrent` or `out` has the wrong length.
pub fn pack_recurrent_kmajor_into(
    recurrent: &[f32],
    hidden: usize,
    order: GateOrder,
    out: &mut [f32],
) -> Result<(), CoreError> {
    pack_input_kmajor_into(recurrent, hidden, hidden, order, out).map_err(|e| match e {
        CoreError::Shape {
            what: "input weights length",
            expected,
            got,
        } => CoreError::Shape {
            what: "recurrent weights length",
            expected,
            got,
        },
        CoreError::Shape {
            what: "packed K-major input weights length",
            expected,
            got,
        } => CoreError::Shape {
            what: "packed K-major recurrent weights length",
            expected,
            got,
        },
        other => other,
    })
}

/// Packs the combined bias: `out[unit * 4 + gate] = input_bias[src] + recurrent_bias[src]`
/// (one f32 addition, as ONNX Runtime does).
///
/// # Errors
/// [`CoreError::Shape`] when a slice has the wrong length.
pub fn pack_bias_into(
    input_bias: &[f32],
    recurrent_bias: &[f32],
    hidden: usize,
    order: GateOrder,
    out: &mut [f32],
) -> Result<(), CoreError> {
    let rows = GATES * hidden;
    check_len("input bias length", rows, input_bias.len())?;
    check_len("recurrent bias length", rows, recurrent_bias.len())?;
    check_len("packed bias length", rows, out.len())?;
    for (p, slot) in out.iter_mut().enumerate() {
        let src = order.source_row_of_packed(p, hidden);
        *slot = input_bias[src] + recurrent_bias[src];
    }
    Ok(())
}

/// Where one direction's packed tensors start inside a [`StackPacking`] buffer (in f32
/// elements, each a multiple of [`TENSOR_ALIGN_FLOATS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PackedOffsets {
    /// K-major input weights `[padded_in, 4H]`.
    pub input_kmajor: usize,
    /// Gate-major TF32-rounded input weights `[4H, padded_in]`.
    pub input_tf32: usize,
    /// The K-major input weights split for the 3xTF32 projection: `[2, padded_in, 4H]`, the
    /// TF32 high parts (`split_tf32(w).0`) then the TF32 remainders (`split_tf32(w).1`),
    /// [`pack_input_x3_into`].
    pub input_x3: usize,
    /// The warpgroup-MMA 3xTF32 image of the input weights ([`pack_input_x3_wgmma_into`],
    /// [`wgmma_image_len`] floats).
    pub input_x3_wgmma: usize,
    /// The natural-order TF32 warpgroup-MMA image of the input weights
    /// ([`pack_input_tf32_wgmma_into`], [`tf32_wgmma_image_len`] floats).
    pub input_tf32_wgmma: usize,
    /// Recurrent weights, packed rows `[4H, H]`.
    pub recurrent: usize,
    /// Recurrent weights, K-major `[H, 4H]`.
    pub recurrent_kmajor: usize,
    /// Combined bias `[4H]`.
    pub bias: usize,
    /// The layer's input width before padding.
    pub width: usize,
    /// The layer's padded input width.
    pub padded_width: usize,
}

/// The layout of a whole stack's packed weights in one f32 buffer: per layer, forward then
/// reverse, each direction's five tensors in the order of [`PackedOffsets`]' fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackPacking {
    shape: StackShape,
    offsets: heapless::Vec<[PackedOffsets; 2], MAX_LAYERS>,
    len: usize,
}

impl StackPacking {
    /// Computes the layout for `shape`.
    ///
    /// # Errors
    /// [`CoreError::Unsupported`] for a shape this version cannot run; [`CoreError::Overflow`].
    pub fn new(shape: &StackShape) -> Result<Self, CoreError> {
        shape.validate()?;
        let rows = shape.gate_rows();
        let mut cursor = 0usize;
        let mut take = |n: usize| -> Result<usize, CoreError> {
            let at = cursor;
            let n = n.div_ceil(TENSOR_ALIGN_FLOATS) * TENSOR_ALIGN_FLOATS;
            cursor = cursor.checked_add(n).ok_or(CoreError::Overflow {
                what: "packed stack length",
            })?;
            Ok(at)
        };
        let mut offsets = heapless::Vec::new();
        for layer in 0..shape.layers {
            let width = shape.layer_input_width(layer);
            let padded = padded_in(width);
            let mut pair = [PackedOffsets::default(); 2];
            for o in &mut pair {
                *o = PackedOffsets {
                    input_kmajor: take(checked_mul(padded, rows, "packed input")?)?,
                    input_tf32: take(checked_mul(padded, rows, "packed input")?)?,
                    input_x3: take(checked_mul(2 * padded, rows, "packed input")?)?,
                    input_x3_wgmma: take(checked_mul(
                        2 * proj_wg_padded_in(width),
                        rows,
                        "packed input",
                    )?)?,
                    input_tf32_wgmma: take(checked_mul(
                        proj_wg_padded_in(width),
                        rows,
                        "packed input",
                    )?)?,
                    recurrent: take(rows * shape.hidden)?,
                    recurrent_kmajor: take(rows * shape.hidden)?,
                    bias: take(rows)?,
                    width,
                    padded_width: padded,
                };
            }
            offsets.push(pair).map_err(|_| CoreError::LayerCount {
                expected: MAX_LAYERS,
                got: shape.layers,
            })?;
        }
        Ok(StackPacking {
            shape: *shape,
            offsets,
            len: cursor,
        })
    }

    /// The shape this layout is for.
    pub fn shape(&self) -> &StackShape {
        &self.shape
    }

    /// Total f32 elements of the packed buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (never, for a valid shape).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Offsets of `direction` of `layer`, or `None` past the last layer.
    pub fn offsets(&self, layer: usize, direction: Direction) -> Option<PackedOffsets> {
        self.offsets.get(layer).map(|pair| pair[direction.index()])
    }

    /// Packs all of `weights` into `out` (length [`StackPacking::len`]); gaps are zero.
    ///
    /// # Errors
    /// [`CoreError::Shape`] for a wrong `out` length or weights of another shape;
    /// [`CoreError::NonFiniteWeight`] from [`StackWeights::validate`].
    pub fn pack_into(&self, weights: &StackWeights<'_>, out: &mut [f32]) -> Result<(), CoreError> {
        weights.validate(&self.shape)?;
        check_len("packed stack length", self.len, out.len())?;
        out.fill(0.0);
        let h = self.shape.hidden;
        let rows = self.shape.gate_rows();
        for (layer, pair) in self.offsets.iter().enumerate() {
            let Some(lw) = weights.layers().get(layer) else {
                return Err(CoreError::LayerCount {
                    expected: self.shape.layers,
                    got: weights.layers().len(),
                });
            };
            for direction in Direction::ALL {
                let o = pair[direction.index()];
                let d: &DirectionWeights<'_> = lw.direction(direction);
                let order = weights.order();
                let span = |at: usize, n: usize| at..at + n;
                pack_input_kmajor_into(
                    d.input,
                    o.width,
                    h,
                    order,
                    &mut out[span(o.input_kmajor, o.padded_width * rows)],
                )?;
                pack_input_tf32_into(
                    d.input,
                    o.width,
                    h,
                    order,
                    &mut out[span(o.input_tf32, o.padded_width * rows)],
                )?;
                pack_input_x3_into(
                    d.input,
                    o.width,
                    h,
                    order,
                    &mut out[span(o.input_x3, 2 * o.padded_width * rows)],
                )?;
                pack_input_x3_wgmma_into(
                    d.input,
                    o.width,
                    h,
                    order,
                    &mut out[span(o.input_x3_wgmma, wgmma_image_len(o.width, rows))],
                )?;
                pack_input_tf32_wgmma_into(
                    d.input,
                    o.width,
                    h,
                    order,
                    &mut out[span(o.input_tf32_wgmma, tf32_wgmma_image_len(o.width, rows))],
                )?;
                pack_recurrent_into(d.recurrent, h, order, &mut out[span(o.recurrent, rows * h)])?;
                pack_recurrent_kmajor_into(
                    d.recurrent,
                    h,
                    order,
                    &mut out[span(o.recurrent_kmajor, rows * h)],
                )?;
                pack_bias_into(
                    d.input_bias,
                    d.recurrent_bias,
                    h,
                    order,
                    &mut out[span(o.bias, rows)],
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Gate, LayerWeights, OnnxLayer, TorchLayer};

    /// Encodes (gate block, unit, k) of a source tensor into a value, so a packed value
    /// tells exactly which source row and column it came from.
    fn code(block: usize, unit: usize, k: usize) -> f32 {
        (block * 1_000_000 + unit * 1000 + k) as f32
    }

    fn source(width: usize) -> Vec<f32> {
        let mut v = vec![0.0; 512 * width];
        for row in 0..512 {
            for k in 0..width {
                v[row * width + k] = code(row / 128, row % 128, k);
            }
        }
        v
    }

    #[test]
    fn padded_widths() {
        assert_eq!(padded_in(60), 64);
        assert_eq!(padded_in(256), 256);
        assert_eq!(padded_in(1), 16);
        assert_eq!(padded_in(16), 16);
        assert_eq!(padded_in(17), 32);
    }

    #[test]
    fn kmajor_input_lands_by_gate_order() {
        let w = source(60);
        let mut onnx = vec![f32::NAN; 64 * 512];
        pack_input_kmajor_into(&w, 60, 128, GateOrder::Onnx, &mut onnx).unwrap();
        let mut torch = vec![f32::NAN; 64 * 512];
        pack_input_kmajor_into(&w, 60, 128, GateOrder::Torch, &mut torch).unwrap();
        // Packed column unit*4+gate, gates i,f,g,o. ONNX blocks i,o,f,c; PyTorch i,f,g,o.
        let col = |unit: usize, gate: Gate| unit * 4 + gate as usize;
        assert_eq!(onnx[7 * 512 + col(5, Gate::Input)], code(0, 5, 7));
        assert_eq!(onnx[7 * 512 + col(5, Gate::Forget)], code(2, 5, 7));
        assert_eq!(onnx[7 * 512 + col(5, Gate::Cell)], code(3, 5, 7));
        assert_eq!(onnx[7 * 512 + col(5, Gate::Output)], code(1, 5, 7));
        assert_eq!(torch[59 * 512 + col(127, Gate::Forget)], code(1, 127, 59));
        assert_eq!(torch[59 * 512 + col(127, Gate::Cell)], code(2, 127, 59));
        assert_eq!(torch[col(0, Gate::Output)], code(3, 0, 0));
        // Padding rows 60..64 are zero.
        assert!(onnx[60 * 512..].iter().all(|&v| v == 0.0));
    }

    #[test]
    fn tf32_input_is_gate_major_and_rounded() {
        let mut w = source(60);
        w[0] = 1.0 + f32::EPSILON; // ONNX row 0 = gate i of unit 0; rounds to 1.0
        w[2 * 128 * 60 + 3 * 60 + 1] = f32::from_bits(0x3f80_3000); // forget, unit 3, k 1: tie up
        let mut out = vec![f32::NAN; 512 * 64];
        pack_input_tf32_into(&w, 60, 128, GateOrder::Onnx, &mut out).unwrap();
        assert_eq!(out[0], 1.0);
        assert_eq!(out[(3 * 4 + 1) * 64 + 1].to_bits(), 0x3f80_4000);
        assert_eq!(
            out[(9 * 4 + 3) * 64 + 2],
            crate::layout::round_to_tf32(code(1, 9, 2))
        );
        assert_eq!(&out[63..64], &[0.0]);
    }

    #[test]
    fn recurrent_rows_and_kmajor_agree() {
        let r = source(128);
        let mut rows = vec![0.0; 512 * 128];
        let mut kmaj = vec![0.0; 128 * 512];
        pack_recurrent_into(&r, 128, GateOrder::Torch, &mut rows).unwrap();
        pack_recurrent_kmajor_into(&r, 128, GateOrder::Torch, &mut kmaj).unwrap();
        for p in 0..512 {
            for k in 0..128 {
                assert_eq!(rows[p * 128 + k], kmaj[k * 512 + p]);
            }
        }
        assert_eq!(rows[(10 * 4 + 3) * 128 + 99], code(3, 10, 99));
        assert_eq!(
            pack_recurrent_kmajor_into(&r[1..], 128, GateOrder::Torch, &mut kmaj),
            Err(CoreError::Shape {
                what: "recurrent weights length",
                expected: 65536,
                got: 65535
            })
        );
    }

    #[test]
    fn bias_is_summed_in_packed_order() {
        let wb: Vec<f32> = (0..512).map(|i| i as f32).collect();
        let rb: Vec<f32> = (0..512).map(|i| 0.5 * i as f32).collect();
        let mut out = vec![0.0; 512];
        pack_bias_into(&wb, &rb, 128, GateOrder::Onnx, &mut out).unwrap();
        // unit 2, forget gate: ONNX row 2*128+2 = 258.
        assert_eq!(out[2 * 4 + 1], 258.0 * 1.5);
        assert_eq!(
            pack_bias_into(&wb, &rb, 128, GateOrder::Onnx, &mut out[1..]),
            Err(CoreError::Shape {
                what: "packed bias length",
                expected: 512,
                got: 511
            })
        );
    }

    #[test]
    fn wgmma_tile_offsets_and_slots_are_permutations() {
        let mut seen = vec![false; PROJ_WG_TILE_COLS * PROJ_WG_K_TILE];
        for n in 0..PROJ_WG_TILE_COLS {
            for slot in 0..PROJ_WG_K_TILE {
                let at = wgmma_tile_offset(n, slot);
                assert!(!seen[at], "({n}, {slot}) -> {at} twice");
                seen[at] = true;
                // Row n owns its 128 bytes; 16-byte chunks stay whole.
                assert_eq!(at / PROJ_WG_K_TILE, n);
                assert_eq!(at % 4, slot % 4);
            }
        }
        // Chunk q of row n sits at chunk q ^ (n % 8): row 9, slot 5 (chunk 1) at chunk 0.
        assert_eq!(wgmma_tile_offset(9, 5), 9 * 32 + 1);
        let mut slots: Vec<usize> = (0..PROJ_WG_K_TILE).map(wgmma_k_slot).collect();
        assert_eq!(&slots[..8], &[0, 4, 1, 5, 2, 6, 3, 7]);
        slots.sort_unstable();
        assert!(slots.iter().copied().eq(0..PROJ_WG_K_TILE));
    }

    #[test]
    fn wgmma_image_is_the_swizzled_split_of_the_weights() {
        for width in [60, 256, 17] {
            let w: Vec<f32> = (0..512 * width)
                .map(|i| ((i as f32) * 0.618_034).sin() * 0.3)
                .collect();
            let padded = proj_wg_padded_in(width);
            let mut kmajor = vec![0.0f32; padded_in(width) * 512];
            pack_input_kmajor_into(&w, width, 128, GateOrder::Onnx, &mut kmajor).unwrap();
            let mut image = vec![f32::NAN; wgmma_image_len(width, 512)];
            pack_input_x3_wgmma_into(&w, width, 128, GateOrder::Onnx, &mut image).unwrap();
            let k_tiles = padded / PROJ_WG_K_TILE;
            let tile = PROJ_WG_TILE_COLS * PROJ_WG_K_TILE;
            for p in 0..512 {
                for k in 0..padded {
                    let v = if k < width { kmajor[k * 512 + p] } else { 0.0 };
                    let (hi, lo) = crate::layout::split_tf32(v);
                    let at = wgmma_tile_offset(p % 128, wgmma_k_slot(k % 32));
                    for (part, want) in [(0, hi), (1, lo)] {
                        let t = (part * 4 + p / 128) * k_tiles + k / 32;
                        assert_eq!(
                            image[t * tile + at].to_bits(),
                            want.to_bits(),
                            "width {width}, row {p}, k {k}, part {part}"
                        );
                    }
                }
            }
        }
        let mut short = vec![0.0f32; wgmma_image_len(60, 512) - 1];
        assert!(
            pack_input_x3_wgmma_into(&[0.0; 512 * 60], 60, 128, GateOrder::Torch, &mut short)
                .is_err()
        );
    }

    #[test]
    fn tf32_wgmma_image_is_the_high_parts_in_natural_slots() {
        for width in [60, 256, 17] {
            let w: Vec<f32> = (0..512 * width)
                .map(|i| ((i as f32) * 0.618_034).sin() * 0.3)
                .collect();
            let mut split = vec![0.0f32; wgmma_image_len(width, 512)];
            pack_input_x3_wgmma_into(&w, width, 128, GateOrder::Torch, &mut split).unwrap();
            let mut image = vec![f32::NAN; tf32_wgmma_image_len(width, 512)];
            pack_input_tf32_wgmma_into(&w, width, 128, GateOrder::Torch, &mut image).unwrap();
            let k_tiles = proj_wg_padded_in(width) / PROJ_WG_K_TILE;
            let tile = PROJ_WG_TILE_COLS * PROJ_WG_K_TILE;
            for p in 0..512 {
                for k in 0..k_tiles * PROJ_WG_K_TILE {
                    let t = (p / 128) * k_tiles + k / 32;
                    let natural = image[t * tile + wgmma_tile_offset(p % 128, k % 32)];
                    let high = split[t * tile + wgmma_tile_offset(p % 128, wgmma_k_slot(k % 32))];
                    assert_eq!(
                        natural.to_bits(),
                        high.to_bits(),
                        "width {width}, row {p}, k {k}"
                    );
                    assert_eq!(natural.to_bits() & 0x1fff, 0);
                    if k >= width {
                        assert_eq!(natural.to_bits(), 0);
                    }
                }
            }
        }
        let mut short = vec![0.0f32; tf32_wgmma_image_len(256, 512) - 1];
        assert!(matches!(
            pack_input_tf32_wgmma_into(&[0.0; 512 * 256], 256, 128, GateOrder::Torch, &mut short),
            Err(CoreError::Shape { .. })
        ));
    }

    #[test]
    fn x3_packing_is_the_split_of_the_kmajor_packing() {
        let w: Vec<f32> = (0..512 * 60)
            .map(|i| ((i as f32) * 0.618_034).sin() * 0.3)
            .collect();
        let mut kmajor = vec![0.0f32; 64 * 512];
        pack_input_kmajor_into(&w, 60, 128, GateOrder::Torch, &mut kmajor).unwrap();
        let mut x3 = vec![f32::NAN; 2 * 64 * 512];
        pack_input_x3_into(&w, 60, 128, GateOrder::Torch, &mut x3).unwrap();
        let (hi, lo) = x3.split_at(64 * 512);
        let mut inexact = 0;
        for ((&k, &h), &l) in kmajor.iter().zip(hi).zip(lo) {
            let (want_h, want_l) = crate::layout::split_tf32(k);
            assert_eq!(
                (h.to_bits(), l.to_bits()),
                (want_h.to_bits(), want_l.to_bits())
            );
            assert_eq!(h.to_bits() & 0x1fff, 0);
            assert_eq!(l.to_bits() & 0x1fff, 0);
            assert!(
                (f64::from(h) + f64::from(l) - f64::from(k)).abs()
                    <= f64::from(k.abs()) * 2f64.powi(-22)
            );
            inexact += usize::from(l != 0.0);
        }
        assert!(inexact > 20_000, "most weights need a remainder: {inexact}");
        // Padding rows 60..64 are zero in both halves.
        assert!(
            hi[60 * 512..]
                .iter()
                .chain(&lo[60 * 512..])
                .all(|&v| v.to_bits() == 0)
        );
        let mut odd = vec![0.0f32; 2 * 64 * 512 + 1];
        assert!(pack_input_x3_into(&w, 60, 128, GateOrder::Torch, &mut odd).is_err());
    }

    #[test]
    fn stack_packing_is_aligned_disjoint_and_matches_per_tensor_packing() {
        let shape = StackShape::pyannote();
        let p = StackPacking::new(&shape).unwrap();
        let mut spans = Vec::new();
        for layer in 0..4 {
            for d in Direction::ALL {
                let o = p.offsets(layer, d).unwrap();
                let w = if layer == 0 { 64 } else { 256 };
                assert_eq!(o.padded_width, w);
                for (at, n) in [
                    (o.input_kmajor, w * 512),
                    (o.input_tf32, w * 512),
                    (o.input_x3, 2 * w * 512),
                    (o.input_x3_wgmma, 2 * w * 512),
                    (o.input_tf32_wgmma, w * 512),
                    (o.recurrent, 65536),
                    (o.recurrent_kmajor, 65536),
                    (o.bias, 512),
                ] {
                    assert_eq!(at % TENSOR_ALIGN_FLOATS, 0);
                    spans.push((at, at + n));
                }
            }
        }
        spans.sort();
        for pair in spans.windows(2) {
            assert!(pair[0].1 <= pair[1].0, "overlap {pair:?}");
        }
        assert!(spans.last().unwrap().1 <= p.len());
        assert_eq!(p.offsets(4, Direction::Forward), None);

        // ONNX and PyTorch views of the same logical weights pack to identical buffers.
        let small = StackShape {
            features: 5,
            hidden: 128,
            layers: 2,
            frames: 1,
        };
        let onnx_w: Vec<Vec<f32>> = (0..2)
            .map(|l| {
                let width = small.layer_input_width(l);
                (0..2 * 512 * width)
                    .map(|i| ((i * 7 + l) % 101) as f32 * 0.01)
                    .collect()
            })
            .collect();
        let onnx_r: Vec<f32> = (0..2 * 512 * 128)
            .map(|i| ((i * 13) % 97) as f32 * 0.01)
            .collect();
        let onnx_b: Vec<f32> = (0..4 * 512).map(|i| ((i * 3) % 89) as f32 * 0.01).collect();
        let onnx_layers: Vec<OnnxLayer> = onnx_w
            .iter()
            .map(|w| OnnxLayer {
                w,
                r: &onnx_r,
                b: &onnx_b,
            })
            .collect();
        let from_onnx = StackWeights::from_onnx(&small, &onnx_layers).unwrap();
        // Re-order ONNX blocks i,o,f,c into PyTorch i,f,g,o.
        let reorder = |t: &[f32], width: usize| -> Vec<f32> {
            let mut out = vec![0.0; t.len()];
            for gate in Gate::ALL {
                for unit in 0..128 {
                    let s = GateOrder::Onnx.row(gate, unit, 128) * width;
                    let d = GateOrder::Torch.row(gate, unit, 128) * width;
                    out[d..d + width].copy_from_slice(&t[s..s + width]);
                }
            }
            out
        };
        let mut owned = Vec::new();
        for (l, lw) in from_onnx.layers().iter().enumerate() {
            let width = small.layer_input_width(l);
            let mut per = Vec::new();
            for d in Direction::ALL {
                let dw = lw.direction(d);
                per.push((
                    reorder(dw.input, width),
                    reorder(dw.recurrent, 128),
                    reorder(dw.input_bias, 1),
                    reorder(dw.recurrent_bias, 1),
                ));
            }
            owned.push(per);
        }
        let torch_layers: Vec<TorchLayer> = owned
            .iter()
            .map(|per| TorchLayer {
                weight_ih: &per[0].0,
                weight_hh: &per[0].1,
                bias_ih: &per[0].2,
                bias_hh: &per[0].3,
                weight_ih_reverse: &per[1].0,
                weight_hh_reverse: &per[1].1,
                bias_ih_reverse: &per[1].2,
                bias_hh_reverse: &per[1].3,
            })
            .collect();
        let from_torch = StackWeights::from_torch(&small, &torch_layers).unwrap();
        let sp = StackPacking::new(&small).unwrap();
        let mut a = vec![f32::NAN; sp.len()];
        let mut b = vec![0.5; sp.len()];
        sp.pack_into(&from_onnx, &mut a).unwrap();
        sp.pack_into(&from_torch, &mut b).unwrap();
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
        let _ = LayerWeights::direction; // the view type is part of the public API
    }
}
