//! PyTorch `nn.LSTM` tensors: per layer and direction `weight_ih [4H, in]`,
//! `weight_hh [4H, H]`, `bias_ih [4H]`, `bias_hh [4H]`, gates `i, f, g, o`.

use super::{DirectionWeights, LayerWeights};

/// One layer of a PyTorch state dict, borrowed: `weight_ih_l{k}`, ..., `bias_hh_l{k}_reverse`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TorchLayer<'a> {
    /// `weight_ih_l{k} [4H, in]`.
    pub weight_ih: &'a [f32],
    /// `weight_hh_l{k} [4H, H]`.
    pub weight_hh: &'a [f32],
    /// `bias_ih_l{k} [4H]`.
    pub bias_ih: &'a [f32],
    /// `bias_hh_l{k} [4H]`.
    pub bias_hh: &'a [f32],
    /// `weight_ih_l{k}_reverse [4H, in]`.
    pub weight_ih_reverse: &'a [f32],
    /// `weight_hh_l{k}_reverse [4H, H]`.
    pub weight_hh_reverse: &'a [f32],
    /// `bias_ih_l{k}_reverse [4H]`.
    pub bias_ih_reverse: &'a [f32],
    /// `bias_hh_l{k}_reverse [4H]`.
    pub bias_hh_reverse: &'a [f32],
}

impl<'a> TorchLayer<'a> {
    /// The same tensors as a [`LayerWeights`] (PyTorch gate order).
    pub fn as_layer(&self) -> LayerWeights<'a> {
        LayerWeights {
            forward: DirectionWeights {
                input: self.weight_ih,
                recurrent: self.weight_hh,
                input_bias: self.bias_ih,
                recurrent_bias: self.bias_hh,
            },
            reverse: DirectionWeights {
                input: self.weight_ih_reverse,
                recurrent: self.weight_hh_reverse,
                input_bias: self.bias_ih_reverse,
                recurrent_bias: self.bias_hh_reverse,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::layout::{StackWeights, Tensor};
    use crate::shape::{Direction, StackShape};
    use crate::{CoreError, TorchLayer};

    #[test]
    fn wrong_lengths_name_the_torch_tensor_and_direction() {
        let s = StackShape {
            features: 4,
            hidden: 128,
            layers: 2,
            frames: 1,
        };
        let ih0 = vec![0.0; 512 * 4];
        let ih1 = vec![0.0; 512 * 256];
        let hh = vec![0.0; 512 * 128];
        let b = vec![0.0; 512];
        let short = vec![0.0; 512 * 128 - 3];
        let l0 = TorchLayer {
            weight_ih: &ih0,
            weight_hh: &hh,
            bias_ih: &b,
            bias_hh: &b,
            weight_ih_reverse: &ih0,
            weight_hh_reverse: &hh,
            bias_ih_reverse: &b,
            bias_hh_reverse: &b,
        };
        let l1 = TorchLayer {
            weight_hh_reverse: &short,
            weight_ih: &ih1,
            weight_ih_reverse: &ih1,
            ..l0
        };
        let err = StackWeights::from_torch(&s, &[l0, l1]).unwrap_err();
        assert_eq!(
            err,
            CoreError::Weights {
                layer: 1,
                direction: Direction::Reverse,
                tensor: Tensor::WeightHh,
                expected: 65536,
                got: 65533
            }
        );
        // Layer 0's input width is the feature count: a 256-wide layer-0 matrix is refused.
        let l0_wide = TorchLayer {
            weight_ih: &ih1,
            ..l0
        };
        assert!(matches!(
            StackWeights::from_torch(&s, &[l0_wide, l1]),
            Err(CoreError::Weights {
                layer: 0,
                tensor: Tensor::WeightIh,
                expected: 2048,
                ..
            })
        ));
        assert_eq!(
            StackWeights::from_torch(&s, &[l0]).unwrap_err(),
            CoreError::LayerCount {
                expected: 2,
                got: 1
            }
        );
    }
}
