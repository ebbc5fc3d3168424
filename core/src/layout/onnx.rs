//! ONNX `LSTM` node tensors: `W [2, 4H, in]`, `R [2, 4H, H]`, `B [2, 8H]`, gates `i, o, f, c`.

use super::{DirectionWeights, LayerWeights, Tensor};
use crate::error::CoreError;
use crate::shape::{Direction, StackShape};

/// The three initializers of one bidirectional ONNX `LSTM` node, borrowed.
///
/// Direction 0 is forward, 1 reverse. `B` holds per direction the 4H input biases (`Wb`)
/// followed by the 4H recurrent biases (`Rb`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OnnxLayer<'a> {
    /// `W [2, 4H, in]` row-major.
    pub w: &'a [f32],
    /// `R [2, 4H, H]` row-major.
    pub r: &'a [f32],
    /// `B [2, 8H]` row-major.
    pub b: &'a [f32],
}

impl<'a> OnnxLayer<'a> {
    /// Splits the node's tensors into the two directions after checking their lengths.
    pub(super) fn split(
        &self,
        shape: &StackShape,
        layer: usize,
    ) -> Result<LayerWeights<'a>, CoreError> {
        let rows = shape.gate_rows();
        let width = shape.layer_input_width(layer);
        let checks = [
            (self.w.len(), 2 * rows * width, Tensor::W),
            (self.r.len(), 2 * rows * shape.hidden, Tensor::R),
            (self.b.len(), 4 * rows, Tensor::B),
        ];
        for (got, expected, tensor) in checks {
            if got != expected {
                return Err(CoreError::Weights {
                    layer,
                    direction: Direction::Forward,
                    tensor,
                    expected,
                    got,
                });
            }
        }
        let (w0, w1) = self.w.split_at(rows * width);
        let (r0, r1) = self.r.split_at(rows * shape.hidden);
        let (b0, b1) = self.b.split_at(2 * rows);
        let (wb0, rb0) = b0.split_at(rows);
        let (wb1, rb1) = b1.split_at(rows);
        Ok(LayerWeights {
            forward: DirectionWeights {
                input: w0,
                recurrent: r0,
                input_bias: wb0,
                recurrent_bias: rb0,
            },
            reverse: DirectionWeights {
                input: w1,
                recurrent: r1,
                input_bias: wb1,
                recurrent_bias: rb1,
            },
        })
    }
}

/// Maps a per-direction tensor (named as in PyTorch) and index to the ONNX tensor and the
/// index inside all of it.
pub(super) fn whole_tensor_index(
    torch_name: Tensor,
    direction: Direction,
    index: usize,
    per_direction_len: usize,
) -> (Tensor, usize) {
    let d = direction.index();
    match torch_name {
        Tensor::WeightIh => (Tensor::W, d * per_direction_len + index),
        Tensor::WeightHh => (Tensor::R, d * per_direction_len + index),
        Tensor::BiasIh => (Tensor::B, d * 2 * per_direction_len + index),
        _ => (
            Tensor::B,
            d * 2 * per_direction_len + per_direction_len + index,
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::layout::{StackWeights, Tensor};
    use crate::shape::{Direction, StackShape};
    use crate::{CoreError, OnnxLayer};

    fn shape1() -> StackShape {
        StackShape {
            features: 3,
            hidden: 128,
            layers: 1,
            frames: 2,
        }
    }

    #[test]
    fn splits_directions_and_biases() {
        let s = shape1();
        let w: Vec<f32> = (0..2 * 512 * 3).map(|i| i as f32).collect();
        let r: Vec<f32> = (0..2 * 512 * 128).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..4 * 512).map(|i| i as f32).collect();
        let st = StackWeights::from_onnx(
            &s,
            &[OnnxLayer {
                w: &w,
                r: &r,
                b: &b,
            }],
        )
        .unwrap();
        let l = &st.layers()[0];
        assert_eq!(l.forward.input[0], 0.0);
        assert_eq!(l.reverse.input[0], (512 * 3) as f32);
        assert_eq!(l.reverse.recurrent[0], (512 * 128) as f32);
        assert_eq!(l.forward.input_bias[0], 0.0);
        assert_eq!(l.forward.recurrent_bias[0], 512.0);
        assert_eq!(l.reverse.input_bias[0], 1024.0);
        assert_eq!(l.reverse.recurrent_bias[511], 2047.0);
    }

    #[test]
    fn wrong_lengths_name_the_onnx_tensor() {
        let s = shape1();
        let w = vec![0.0; 2 * 512 * 3];
        let r = vec![0.0; 2 * 512 * 128];
        let b = vec![0.0; 4 * 512 - 1];
        let err = StackWeights::from_onnx(
            &s,
            &[OnnxLayer {
                w: &w,
                r: &r,
                b: &b,
            }],
        )
        .unwrap_err();
        assert_eq!(
            err,
            CoreError::Weights {
                layer: 0,
                direction: Direction::Forward,
                tensor: Tensor::B,
                expected: 2048,
                got: 2047
            }
        );
        assert_eq!(
            err.to_string(),
            "layer 0 forward B: expected 2048 values, got 2047"
        );
    }

    #[test]
    fn nan_is_reported_at_its_whole_tensor_index() {
        let s = shape1();
        let w = vec![0.0; 2 * 512 * 3];
        let r = vec![0.0; 2 * 512 * 128];
        let mut b = vec![0.0; 4 * 512];
        b[1024 + 512 + 7] = f32::NAN; // reverse direction, recurrent bias 7
        let st = StackWeights::from_onnx(
            &s,
            &[OnnxLayer {
                w: &w,
                r: &r,
                b: &b,
            }],
        )
        .unwrap();
        match st.validate(&s) {
            Err(CoreError::NonFiniteWeight {
                layer: 0,
                direction: Direction::Reverse,
                tensor: Tensor::B,
                index,
                value,
            }) => {
                assert_eq!(index, 1024 + 512 + 7);
                assert!(value.is_nan());
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
