//! Weight views of the two source formats and their packing into bilstm's layout.
//!
//! # The packed layout (DESIGN §2)
//!
//! Every kernel and the CPU backend read weights in one order: packed gate row
//! `unit * 4 + gate` with gates `[i, f, g, o]` ([`Gate`]), so one unit's four gates are
//! adjacent. Source formats differ only in where a gate's block of `hidden` rows starts:
//! ONNX stores `i, o, f, c` and PyTorch `i, f, g, o` ([`GateOrder`]).
//!
//! | packed tensor | shape | built by |
//! |---|---|---|
//! | input weights, K-major (FP32 tiles, CPU) | `[padded_in, 4H]` | [`pack_input_kmajor_into`] |
//! | input weights, gate-major, TF32-rounded | `[4H, padded_in]` | [`pack_input_tf32_into`] |
//! | input weights, K-major, 3xTF32 high parts then remainders | `[2, padded_in, 4H]` | [`pack_input_x3_into`] |
//! | input weights, 3xTF32 parts as the warpgroup-MMA shared image (9.0) | `[2, 4H / 128, ceil(in / 32), 128 x 32]` swizzled | [`pack_input_x3_wgmma_into`] |
//! | input weights, TF32 high parts as the natural-order warpgroup-MMA image (9.0) | `[4H / 128, ceil(in / 32), 128 x 32]` swizzled | [`pack_input_tf32_wgmma_into`] |
//! | recurrent weights, row per gate | `[4H, H]` | [`pack_recurrent_into`] |
//! | recurrent weights, K-major | `[H, 4H]` | [`pack_recurrent_kmajor_into`] |
//! | combined bias `Wb + Rb` | `[4H]` | [`pack_bias_into`] |
//! | CPU panel strips of K-major weights | `4H / n` x `[width][n]` | [`pack_panel_strips_into`] |
//! | CPU panel-order bias | `[4H]` | [`pack_panel_bias_into`] |
//!
//! `padded_in = ceil(in / 16) * 16` ([`padded_in`]); the padding is zero.

mod onnx;
mod packed;
mod panel;
mod tf32;
mod torch;

use core::fmt;

pub use onnx::OnnxLayer;
pub use packed::{
    PackedOffsets, StackPacking, pack_bias_into, pack_input_kmajor_into, pack_input_tf32_into,
    pack_input_tf32_wgmma_into, pack_input_x3_into, pack_input_x3_wgmma_into, pack_recurrent_into,
    pack_recurrent_kmajor_into, padded_in, tf32_wgmma_image_len, wgmma_image_len, wgmma_k_slot,
    wgmma_tile_offset,
};
pub use panel::{
    PANEL_COLS, PANEL_UNITS, pack_panel_bias_into, pack_panel_strips_into, packed_col_of_panel_col,
};
pub use tf32::{TF32_MAX, round_to_tf32, split_tf32};
pub use torch::TorchLayer;

use crate::error::CoreError;
use crate::shape::{Direction, MAX_LAYERS, StackShape};

/// One LSTM gate, in packed order: `Gate::X as usize` is its packed index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gate {
    /// Input gate `i` (sigmoid).
    Input = 0,
    /// Forget gate `f` (sigmoid).
    Forget = 1,
    /// Cell candidate `g` (ONNX calls it `c`; tanh).
    Cell = 2,
    /// Output gate `o` (sigmoid).
    Output = 3,
}

impl Gate {
    /// All gates in packed order.
    pub const ALL: [Gate; 4] = [Gate::Input, Gate::Forget, Gate::Cell, Gate::Output];
}

/// The order of the four gate blocks in a source tensor's `4 * hidden` rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GateOrder {
    /// ONNX `LSTM`: `i, o, f, c`.
    Onnx,
    /// PyTorch `nn.LSTM`: `i, f, g, o`.
    Torch,
    /// bilstm's own interleaved order: row `unit * 4 + gate`, gates `i, f, g, o`.
    Packed,
}

impl GateOrder {
    /// The row holding `gate` of `unit` in a tensor of this order with `hidden` units.
    pub const fn row(self, gate: Gate, unit: usize, hidden: usize) -> usize {
        let block = match (self, gate) {
            (GateOrder::Packed, _) => return unit * 4 + gate as usize,
            (GateOrder::Onnx, Gate::Input) | (GateOrder::Torch, Gate::Input) => 0,
            (GateOrder::Onnx, Gate::Output) => 1,
            (GateOrder::Onnx, Gate::Forget) => 2,
            (GateOrder::Onnx, Gate::Cell) => 3,
            (GateOrder::Torch, Gate::Forget) => 1,
            (GateOrder::Torch, Gate::Cell) => 2,
            (GateOrder::Torch, Gate::Output) => 3,
        };
        block * hidden + unit
    }

    /// The source row that lands in packed row `packed_row` (`unit * 4 + gate`).
    pub const fn source_row_of_packed(self, packed_row: usize, hidden: usize) -> usize {
        let gate = Gate::ALL[packed_row % 4];
        self.row(gate, packed_row / 4, hidden)
    }
}

/// A weight tensor, by its name in the source format (for error messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tensor {
    /// ONNX `W [2, 4H, in]`.
    W,
    /// ONNX `R [2, 4H, H]`.
    R,
    /// ONNX `B [2, 8H]`.
    B,
    /// PyTorch `weight_ih_l{k}[_reverse] [4H, in]`.
    WeightIh,
    /// PyTorch `weight_hh_l{k}[_reverse] [4H, H]`.
    WeightHh,
    /// PyTorch `bias_ih_l{k}[_reverse] [4H]`.
    BiasIh,
    /// PyTorch `bias_hh_l{k}[_reverse] [4H]`.
    BiasHh,
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tensor::W => "W",
            Tensor::R => "R",
            Tensor::B => "B",
            Tensor::WeightIh => "weight_ih",
            Tensor::WeightHh => "weight_hh",
            Tensor::BiasIh => "bias_ih",
            Tensor::BiasHh => "bias_hh",
        })
    }
}

/// One direction of one layer, borrowed, in a source gate order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DirectionWeights<'a> {
    /// Input weights `[4H, in]` row-major.
    pub input: &'a [f32],
    /// Recurrent weights `[4H, H]` row-major.
    pub recurrent: &'a [f32],
    /// Input bias `[4H]`.
    pub input_bias: &'a [f32],
    /// Recurrent bias `[4H]`.
    pub recurrent_bias: &'a [f32],
}

/// Both directions of one layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerWeights<'a> {
    /// Forward direction.
    pub forward: DirectionWeights<'a>,
    /// Reverse direction.
    pub reverse: DirectionWeights<'a>,
}

impl<'a> LayerWeights<'a> {
    /// The weights of `direction`.
    pub const fn direction(&self, direction: Direction) -> &DirectionWeights<'a> {
        match direction {
            Direction::Forward => &self.forward,
            Direction::Reverse => &self.reverse,
        }
    }
}

/// A whole stack's weights, borrowed from the caller, with the gate order of their source.
///
/// Built by [`StackWeights::from_onnx`], [`StackWeights::from_torch`] or
/// [`StackWeights::from_layers`], each of which checks every tensor's length against the shape,
/// so a `StackWeights` always has the right sizes; [`StackWeights::validate`] then checks that
/// every value is finite.
#[derive(Debug, Clone, PartialEq)]
pub struct StackWeights<'a> {
    shape: StackShape,
    order: GateOrder,
    layers: heapless::Vec<LayerWeights<'a>, MAX_LAYERS>,
    onnx: bool,
}

impl<'a> StackWeights<'a> {
    /// Views ONNX `LSTM` nodes (one per layer, in graph order) as a stack of `shape`.
    ///
    /// # Errors
    /// [`CoreError::Unsupported`] for a shape this version cannot run;
    /// [`CoreError::LayerCount`] when the node count differs from `shape.layers`;
    /// [`CoreError::Weights`] naming the layer and the tensor (`W`, `R` or `B`) whose length
    /// is wrong.
    pub fn from_onnx(shape: &StackShape, layers: &[OnnxLayer<'a>]) -> Result<Self, CoreError> {
        check_layer_count(shape, layers.len())?;
        let mut out = heapless::Vec::new();
        for (index, layer) in layers.iter().enumerate() {
            let split = layer.split(shape, index)?;
            push(&mut out, split, layers.len())?;
        }
        Ok(StackWeights {
            shape: *shape,
            order: GateOrder::Onnx,
            layers: out,
            onnx: true,
        })
    }

    /// Views PyTorch `nn.LSTM` tensors (one [`TorchLayer`] per layer) as a stack of `shape`.
    ///
    /// # Errors
    /// As [`StackWeights::from_layers`], naming PyTorch tensors (`weight_ih`, ...).
    pub fn from_torch(shape: &StackShape, layers: &[TorchLayer<'a>]) -> Result<Self, CoreError> {
        check_layer_count(shape, layers.len())?;
        let mut out = heapless::Vec::new();
        for layer in layers {
            push(&mut out, layer.as_layer(), layers.len())?;
        }
        check_lengths(shape, &out)?;
        Ok(StackWeights {
            shape: *shape,
            order: GateOrder::Torch,
            layers: out,
            onnx: false,
        })
    }

    /// Views per-direction tensors already in a known gate order (the built-in model, tests).
    ///
    /// # Errors
    /// [`CoreError::Unsupported`] for a shape this version cannot run;
    /// [`CoreError::LayerCount`]; [`CoreError::Weights`] naming layer, direction and tensor
    /// (by its PyTorch name) whose length is wrong.
    pub fn from_layers(
        shape: &StackShape,
        order: GateOrder,
        layers: &[LayerWeights<'a>],
    ) -> Result<Self, CoreError> {
        check_layer_count(shape, layers.len())?;
        let mut out = heapless::Vec::new();
        for layer in layers {
            push(&mut out, *layer, layers.len())?;
        }
        check_lengths(shape, &out)?;
        Ok(StackWeights {
            shape: *shape,
            order,
            layers: out,
            onnx: false,
        })
    }

    /// The shape the weights were checked against.
    pub fn shape(&self) -> &StackShape {
        &self.shape
    }

    /// The gate order of the source tensors.
    pub fn order(&self) -> GateOrder {
        self.order
    }

    /// The layers, first to last.
    pub fn layers(&self) -> &[LayerWeights<'a>] {
        &self.layers
    }

    /// Checks that the weights belong to `shape` and that every value is finite.
    ///
    /// # Errors
    /// [`CoreError::Shape`] when `shape` differs from the one the weights were built for
    /// (`what` names the dimension); [`CoreError::NonFiniteWeight`] naming the first NaN or
    /// infinite value (for ONNX tensors, its index in the whole `[2, ...]` tensor).
    pub fn validate(&self, shape: &StackShape) -> Result<(), CoreError> {
        let dims = [
            (
                "weights' feature count",
                shape.features,
                self.shape.features,
            ),
            ("weights' hidden size", shape.hidden, self.shape.hidden),
            ("weights' layer count", shape.layers, self.shape.layers),
        ];
        for (what, expected, got) in dims {
            if expected != got {
                return Err(CoreError::Shape {
                    what,
                    expected,
                    got,
                });
            }
        }
        for (layer, weights) in self.layers.iter().enumerate() {
            for direction in Direction::ALL {
                let d = weights.direction(direction);
                let tensors = [
                    (d.input, Tensor::WeightIh),
                    (d.recurrent, Tensor::WeightHh),
                    (d.input_bias, Tensor::BiasIh),
                    (d.recurrent_bias, Tensor::BiasHh),
                ];
                for (values, torch_name) in tensors {
                    let Some((index, &value)) =
                        values.iter().enumerate().find(|(_, v)| !v.is_finite())
                    else {
                        continue;
                    };
                    let (tensor, index) = if self.onnx {
                        onnx::whole_tensor_index(torch_name, direction, index, values.len())
                    } else {
                        (torch_name, index)
                    };
                    return Err(CoreError::NonFiniteWeight {
                        layer,
                        direction,
                        tensor,
                        index,
                        value,
                    });
                }
            }
        }
        Ok(())
    }
}

fn push<'a>(
    out: &mut heapless::Vec<LayerWeights<'a>, MAX_LAYERS>,
    layer: LayerWeights<'a>,
    count: usize,
) -> Result<(), CoreError> {
    out.push(layer).map_err(|_| CoreError::LayerCount {
        expected: MAX_LAYERS,
        got: count,
    })
}

/// Checks every per-direction tensor's length against `shape` (PyTorch names in errors).
fn check_lengths(shape: &StackShape, layers: &[LayerWeights<'_>]) -> Result<(), CoreError> {
    let rows = shape.gate_rows();
    for (layer, weights) in layers.iter().enumerate() {
        let width = shape.layer_input_width(layer);
        for direction in Direction::ALL {
            let d = weights.direction(direction);
            let checks = [
                (d.input.len(), rows * width, Tensor::WeightIh),
                (d.recurrent.len(), rows * shape.hidden, Tensor::WeightHh),
                (d.input_bias.len(), rows, Tensor::BiasIh),
                (d.recurrent_bias.len(), rows, Tensor::BiasHh),
            ];
            for (got, expected, tensor) in checks {
                if got != expected {
                    return Err(CoreError::Weights {
                        layer,
                        direction,
                        tensor,
                        expected,
                        got,
                    });
                }
            }
        }
    }
    Ok(())
}

fn check_layer_count(shape: &StackShape, n: usize) -> Result<(), CoreError> {
    shape.validate()?;
    if n != shape.layers {
        return Err(CoreError::LayerCount {
            expected: shape.layers,
            got: n,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_orders_map_rows() {
        // ONNX i,o,f,c: the forget gate of unit 5 is in block 2.
        assert_eq!(GateOrder::Onnx.row(Gate::Forget, 5, 128), 2 * 128 + 5);
        assert_eq!(GateOrder::Onnx.row(Gate::Output, 5, 128), 128 + 5);
        assert_eq!(GateOrder::Onnx.row(Gate::Cell, 0, 128), 3 * 128);
        // PyTorch i,f,g,o.
        assert_eq!(GateOrder::Torch.row(Gate::Forget, 5, 128), 128 + 5);
        assert_eq!(GateOrder::Torch.row(Gate::Output, 127, 128), 511);
        assert_eq!(GateOrder::Packed.row(Gate::Cell, 3, 128), 14);
        // Every packed row comes from exactly one source row, in both orders.
        for order in [GateOrder::Onnx, GateOrder::Torch, GateOrder::Packed] {
            let mut seen = [false; 512];
            for p in 0..512 {
                let s = order.source_row_of_packed(p, 128);
                assert!(!seen[s], "{order:?} row {s} used twice");
                seen[s] = true;
            }
        }
    }
}
