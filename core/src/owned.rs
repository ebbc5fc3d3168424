//! Owned weights and seeded inputs: the built-in model, random stacks, test inputs and output
//! checksums (with `std` only; core's other modules borrow and never allocate).
//!
//! Every backend's tests, the examples and the benchmarks build their weights and inputs here,
//! so they all run the same numbers:
//!
//! - [`OwnedStack::builtin`] is **the built-in model: real shape, seeded weights**: the pyannote
//!   stack's exact shape (60 features, 128 hidden, 4 layers, 589 frames) with weights drawn
//!   from [`SplitMix64`] seeded by [`BUILTIN_SEED`], uniform in ±[`BUILTIN_SCALE`]. It is not
//!   pyannote's trained model; it has the same shape and the same cost, and it needs no file.
//! - [`OwnedStack::random`] draws any shape's weights from any seed;
//!   [`random_input`] draws standard-normal inputs.
//! - [`OwnedStack::with_order`] and [`OwnedStack::to_onnx`] rewrite the same logical weights
//!   in another gate order or as ONNX tensors, to check that every view gives the same bits.
//! - [`Checksum`] summarises an output (sum, sum of squares, FNV-1a of the bits).
//!
//! # Stability
//! The weights of [`OwnedStack::builtin`] and of every seeded stack or input depend on
//! [`crate::rng`]'s stream and on the draw order documented at [`OwnedStack::random`];
//! changing either changes the built-in model. A test pins the built-in model's checksum.
//!
//! ```
//! use bilstm_core::owned::{OwnedStack, random_input};
//! let model = OwnedStack::builtin();
//! let weights = model.weights().unwrap();
//! assert_eq!(weights.shape().layers, 4);
//! let x = random_input(&model.shape.with_frames(3), 2, 7);
//! assert_eq!(x.len(), 2 * 3 * 60);
//! ```

use core::fmt;
use std::vec::Vec;

use crate::error::CoreError;
use crate::layout::{
    DirectionWeights, Gate, GateOrder, LayerWeights, OnnxLayer, StackWeights, TorchLayer,
};
use crate::rng::SplitMix64;
use crate::shape::{Direction, StackShape};

/// Seed of the built-in model's weights (the ASCII bytes of `"PYANNOTE"`).
pub const BUILTIN_SEED: u64 = 0x5059_414E_4E4F_5445;

/// Half-width of the built-in model's uniform weight distribution: weights lie in
/// `[-0.3, 0.3]`, the range the accuracy budgets were measured with (DESIGN §5).
pub const BUILTIN_SCALE: f32 = 0.3;

/// One direction's four tensors, owned, in the stack's gate order (PyTorch names).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OwnedDirection {
    /// Input weights `[4H, in]` row-major.
    pub weight_ih: Vec<f32>,
    /// Recurrent weights `[4H, H]` row-major.
    pub weight_hh: Vec<f32>,
    /// Input bias `[4H]`.
    pub bias_ih: Vec<f32>,
    /// Recurrent bias `[4H]`.
    pub bias_hh: Vec<f32>,
}

impl OwnedDirection {
    /// Borrows the four tensors.
    pub fn view(&self) -> DirectionWeights<'_> {
        DirectionWeights {
            input: &self.weight_ih,
            recurrent: &self.weight_hh,
            input_bias: &self.bias_ih,
            recurrent_bias: &self.bias_hh,
        }
    }
}

/// Both directions of one layer, owned.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OwnedLayer {
    /// Forward direction.
    pub forward: OwnedDirection,
    /// Reverse direction.
    pub reverse: OwnedDirection,
}

impl OwnedLayer {
    /// The tensors of `direction`.
    pub fn direction(&self, direction: Direction) -> &OwnedDirection {
        match direction {
            Direction::Forward => &self.forward,
            Direction::Reverse => &self.reverse,
        }
    }

    /// The tensors of `direction`, mutably (to plant a NaN in a test, say).
    pub fn direction_mut(&mut self, direction: Direction) -> &mut OwnedDirection {
        match direction {
            Direction::Forward => &mut self.forward,
            Direction::Reverse => &mut self.reverse,
        }
    }

    /// Borrows the layer as PyTorch tensors (meaningful when the stack's order is
    /// [`GateOrder::Torch`]).
    pub fn as_torch(&self) -> TorchLayer<'_> {
        TorchLayer {
            weight_ih: &self.forward.weight_ih,
            weight_hh: &self.forward.weight_hh,
            bias_ih: &self.forward.bias_ih,
            bias_hh: &self.forward.bias_hh,
            weight_ih_reverse: &self.reverse.weight_ih,
            weight_hh_reverse: &self.reverse.weight_hh,
            bias_ih_reverse: &self.reverse.bias_ih,
            bias_hh_reverse: &self.reverse.bias_hh,
        }
    }

    /// Borrows both directions.
    pub fn view(&self) -> LayerWeights<'_> {
        LayerWeights {
            forward: self.forward.view(),
            reverse: self.reverse.view(),
        }
    }
}

/// A whole stack's weights, owned: per layer and direction the four PyTorch-style tensors,
/// their gate blocks in `order` ([`GateOrder::Torch`] for stacks made here).
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedStack {
    /// The stack's shape (its `frames` is the window length the stack is meant for).
    pub shape: StackShape,
    /// The gate order of every tensor's `4H` rows.
    pub order: GateOrder,
    /// The layers, first to last.
    pub layers: Vec<OwnedLayer>,
}

impl OwnedStack {
    /// Seeded random weights for `shape`, uniform in `[-scale, scale]`, PyTorch gate order.
    ///
    /// One [`SplitMix64`] stream seeded by `seed` fills, for each layer in order, the forward
    /// then the reverse direction, each as `weight_ih`, `weight_hh`, `bias_ih`, `bias_hh`,
    /// every tensor row-major, one [`SplitMix64::uniform_f32`] draw per value. This order is
    /// part of the built-in model ([module docs](self)).
    ///
    /// The shape is not validated: tensors get the sizes its formulas give
    /// (`4 * hidden` rows), and [`OwnedStack::weights`] refuses a shape this version cannot
    /// run. Allocation failure aborts, as for any `Vec`.
    pub fn random(shape: &StackShape, seed: u64, scale: f32) -> Self {
        let mut rng = SplitMix64::new(seed);
        let rows = shape.gate_rows();
        let mut draw = |n: usize| -> Vec<f32> {
            let mut v = vec![0.0f32; n];
            rng.fill_uniform_f32(&mut v, -scale, scale);
            v
        };
        let mut layers = Vec::with_capacity(shape.layers);
        for layer in 0..shape.layers {
            let width = shape.layer_input_width(layer);
            let mut direction = || OwnedDirection {
                weight_ih: draw(rows * width),
                weight_hh: draw(rows * shape.hidden),
                bias_ih: draw(rows),
                bias_hh: draw(rows),
            };
            let forward = direction();
            let reverse = direction();
            layers.push(OwnedLayer { forward, reverse });
        }
        OwnedStack {
            shape: *shape,
            order: GateOrder::Torch,
            layers,
        }
    }

    /// The built-in model: real shape, seeded weights.
    ///
    /// [`StackShape::pyannote`] (60 features, 128 hidden per direction, 4 layers, 589 frames)
    /// with [`OwnedStack::random`] weights from [`BUILTIN_SEED`] and [`BUILTIN_SCALE`]. It has
    /// the cost and numerics of pyannote's segmentation LSTM without shipping its trained
    /// weights; its outputs are fixed forever (see the [module docs](self)).
    pub fn builtin() -> Self {
        Self::random(&StackShape::pyannote(), BUILTIN_SEED, BUILTIN_SCALE)
    }

    /// Borrows the weights as a checked [`StackWeights`]: through
    /// [`StackWeights::from_torch`] for [`GateOrder::Torch`], else
    /// [`StackWeights::from_layers`] with the stack's order.
    ///
    /// # Errors
    /// [`CoreError::Unsupported`] for a shape this version cannot run;
    /// [`CoreError::LayerCount`]; [`CoreError::Weights`] naming a tensor of the wrong length.
    /// Values are not checked here: see [`StackWeights::validate`].
    pub fn weights(&self) -> Result<StackWeights<'_>, CoreError> {
        if self.order == GateOrder::Torch {
            let torch: Vec<TorchLayer<'_>> = self.layers.iter().map(OwnedLayer::as_torch).collect();
            StackWeights::from_torch(&self.shape, &torch)
        } else {
            let layers: Vec<LayerWeights<'_>> = self.layers.iter().map(OwnedLayer::view).collect();
            StackWeights::from_layers(&self.shape, self.order, &layers)
        }
    }

    /// The same logical weights with every tensor's gate blocks rewritten in `order`.
    ///
    /// # Errors
    /// As [`OwnedStack::weights`] (the lengths are checked before anything is moved).
    pub fn with_order(&self, order: GateOrder) -> Result<Self, CoreError> {
        self.weights()?;
        let h = self.shape.hidden;
        let from = self.order;
        let mut layers = Vec::with_capacity(self.layers.len());
        for (index, layer) in self.layers.iter().enumerate() {
            let width = self.shape.layer_input_width(index);
            let convert = |d: &OwnedDirection| OwnedDirection {
                weight_ih: reorder_rows(&d.weight_ih, width, h, from, order),
                weight_hh: reorder_rows(&d.weight_hh, h, h, from, order),
                bias_ih: reorder_rows(&d.bias_ih, 1, h, from, order),
                bias_hh: reorder_rows(&d.bias_hh, 1, h, from, order),
            };
            layers.push(OwnedLayer {
                forward: convert(&layer.forward),
                reverse: convert(&layer.reverse),
            });
        }
        Ok(OwnedStack {
            shape: self.shape,
            order,
            layers,
        })
    }

    /// The same logical weights as ONNX `LSTM` initializers, one node per layer: gate blocks
    /// `i, o, f, c`, `W [2, 4H, in]`, `R [2, 4H, H]`, `B [2, 8H]` (per direction `Wb` then `Rb`).
    ///
    /// # Errors
    /// As [`OwnedStack::weights`].
    pub fn to_onnx(&self) -> Result<OwnedOnnx, CoreError> {
        let onnx = self.with_order(GateOrder::Onnx)?;
        let layers = onnx
            .layers
            .iter()
            .map(|l| {
                let (f, r) = (&l.forward, &l.reverse);
                OwnedOnnxLayer {
                    w: [f.weight_ih.as_slice(), &r.weight_ih].concat(),
                    r: [f.weight_hh.as_slice(), &r.weight_hh].concat(),
                    b: [f.bias_ih.as_slice(), &f.bias_hh, &r.bias_ih, &r.bias_hh].concat(),
                }
            })
            .collect();
        Ok(OwnedOnnx {
            shape: self.shape,
            layers,
        })
    }
}

/// Copies a `[4H, width]` tensor whose gate blocks are in `from` order into `to` order.
/// The caller has checked `src.len() == 4 * hidden * width`.
fn reorder_rows(
    src: &[f32],
    width: usize,
    hidden: usize,
    from: GateOrder,
    to: GateOrder,
) -> Vec<f32> {
    let mut out = vec![0.0f32; src.len()];
    for gate in Gate::ALL {
        for unit in 0..hidden {
            let s = from.row(gate, unit, hidden) * width;
            let d = to.row(gate, unit, hidden) * width;
            out[d..d + width].copy_from_slice(&src[s..s + width]);
        }
    }
    out
}

/// One ONNX `LSTM` node's initializers, owned (see [`OwnedStack::to_onnx`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OwnedOnnxLayer {
    /// `W [2, 4H, in]`.
    pub w: Vec<f32>,
    /// `R [2, 4H, H]`.
    pub r: Vec<f32>,
    /// `B [2, 8H]`.
    pub b: Vec<f32>,
}

impl OwnedOnnxLayer {
    /// Borrows the three tensors.
    pub fn view(&self) -> OnnxLayer<'_> {
        OnnxLayer {
            w: &self.w,
            r: &self.r,
            b: &self.b,
        }
    }
}

/// A whole stack as ONNX initializers, owned (see [`OwnedStack::to_onnx`]).
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedOnnx {
    /// The stack's shape.
    pub shape: StackShape,
    /// One node per layer, first to last.
    pub layers: Vec<OwnedOnnxLayer>,
}

impl OwnedOnnx {
    /// Borrows the weights through [`StackWeights::from_onnx`].
    ///
    /// # Errors
    /// As [`StackWeights::from_onnx`].
    pub fn weights(&self) -> Result<StackWeights<'_>, CoreError> {
        let layers: Vec<OnnxLayer<'_>> = self.layers.iter().map(OwnedOnnxLayer::view).collect();
        StackWeights::from_onnx(&self.shape, &layers)
    }
}

/// Seeded standard-normal input `[batch, shape.frames, shape.features]`: one
/// [`SplitMix64::normal_f32`] stream seeded by `seed`, filled row-major. The first
/// `k * frames * features` values do not depend on `batch`, so window `k` is the same in every
/// batch that holds it.
///
/// # Panics
/// Only when the length overflows `usize` or cannot be allocated, as `vec!` does.
pub fn random_input(shape: &StackShape, batch: usize, seed: u64) -> Vec<f32> {
    let len = shape.input_len(batch).unwrap_or(usize::MAX);
    let mut out = vec![0.0f32; len];
    SplitMix64::new(seed).fill_normal_f32(&mut out);
    out
}

/// A summary of an f32 buffer that tells runs apart: exact for bits, readable for values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Checksum {
    /// Number of values.
    pub len: usize,
    /// Sum of the values, in f64, first to last.
    pub sum: f64,
    /// Sum of their squares, in f64, first to last.
    pub sum_sq: f64,
    /// 64-bit FNV-1a hash of the values' little-endian bytes, first to last.
    pub fnv1a: u64,
}

/// FNV-1a 64-bit offset basis.
const FNV_OFFSET: u64 = 0xCBF2_9CE4_8422_2325;
/// FNV-1a 64-bit prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01B3;

impl Checksum {
    /// Summarises `values`.
    pub fn of(values: &[f32]) -> Self {
        let mut sum = 0.0f64;
        let mut sum_sq = 0.0f64;
        let mut hash = FNV_OFFSET;
        for &v in values {
            let d = f64::from(v);
            sum += d;
            sum_sq += d * d;
            for byte in v.to_bits().to_le_bytes() {
                hash = (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME);
            }
        }
        Checksum {
            len: values.len(),
            sum,
            sum_sq,
            fnv1a: hash,
        }
    }
}

impl fmt::Display for Checksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "n={} sum={:.9e} sum_sq={:.9e} fnv1a={:016x}",
            self.len, self.sum, self.sum_sq, self.fnv1a
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::StackPacking;

    fn all_values(stack: &OwnedStack) -> Vec<f32> {
        let mut v = Vec::new();
        for l in &stack.layers {
            for d in [&l.forward, &l.reverse] {
                v.extend_from_slice(&d.weight_ih);
                v.extend_from_slice(&d.weight_hh);
                v.extend_from_slice(&d.bias_ih);
                v.extend_from_slice(&d.bias_hh);
            }
        }
        v
    }

    /// The built-in model, pinned: a change here is a change of the model.
    #[test]
    fn builtin_model_is_pinned() {
        let m = OwnedStack::builtin();
        assert_eq!(m.shape, StackShape::pyannote());
        assert_eq!(m.order, GateOrder::Torch);
        let w = m.weights().unwrap();
        assert_eq!(w.validate(&m.shape), Ok(()));
        let values = all_values(&m);
        // 2 directions x (layer 0: 512*60 + 512*128 + 1024; layers 1-3: 512*256 + 512*128 + 1024).
        assert_eq!(
            values.len(),
            2 * (512 * 60 + 65536 + 1024) + 6 * (512 * 256 + 65536 + 1024)
        );
        assert!(values.iter().all(|v| (-0.3..=0.3).contains(v)));
        let first: Vec<u32> = values[..3].iter().map(|v| v.to_bits()).collect();
        assert_eq!(first, [0xbe49_13c4, 0xbe4a_0740, 0xbe80_5c36]);
        assert_eq!(Checksum::of(&values).fnv1a, 0x9dad_431a_6416_bd84);
    }

    #[test]
    fn random_draw_order_is_documented_one() {
        let s = StackShape {
            features: 3,
            hidden: 128,
            layers: 2,
            frames: 5,
        };
        let m = OwnedStack::random(&s, 11, 0.5);
        let mut rng = SplitMix64::new(11);
        let mut next = || rng.uniform_f32(-0.5, 0.5).to_bits();
        for l in &m.layers {
            for d in [&l.forward, &l.reverse] {
                for t in [&d.weight_ih, &d.weight_hh, &d.bias_ih, &d.bias_hh] {
                    assert!(t.iter().all(|v| v.to_bits() == next()));
                }
            }
        }
        assert_eq!(m.layers[0].forward.weight_ih.len(), 512 * 3);
        assert_eq!(m.layers[1].reverse.weight_ih.len(), 512 * 256);
        assert_eq!(OwnedStack::random(&s, 11, 0.5), m);
        assert_ne!(OwnedStack::random(&s, 12, 0.5), m);
    }

    #[test]
    fn every_view_packs_to_the_same_bits() {
        let s = StackShape {
            features: 7,
            hidden: 128,
            layers: 2,
            frames: 4,
        };
        let torch = OwnedStack::random(&s, 5, 0.3);
        let onnx = torch.to_onnx().unwrap();
        let packed_order = torch.with_order(GateOrder::Packed).unwrap();
        let onnx_order = torch.with_order(GateOrder::Onnx).unwrap();
        let sp = StackPacking::new(&s).unwrap();
        let pack = |w: StackWeights<'_>| {
            let mut out = vec![f32::NAN; sp.len()];
            sp.pack_into(&w, &mut out).unwrap();
            out.iter().map(|v| v.to_bits()).collect::<Vec<u32>>()
        };
        let want = pack(torch.weights().unwrap());
        assert_eq!(pack(onnx.weights().unwrap()), want);
        assert_eq!(pack(packed_order.weights().unwrap()), want);
        assert_eq!(pack(onnx_order.weights().unwrap()), want);
        assert_eq!(onnx.weights().unwrap().order(), GateOrder::Onnx);
        // Round trip back to PyTorch order restores the original tensors.
        assert_eq!(onnx_order.with_order(GateOrder::Torch).unwrap(), torch);
        // ONNX B holds Wb then Rb per direction.
        assert_eq!(onnx.layers[0].b.len(), 4 * 512);
        assert_eq!(
            onnx.layers[0].b[512],
            onnx_order.layers[0].forward.bias_hh[0]
        );
    }

    #[test]
    fn bad_stacks_are_refused_not_panicked_on() {
        let s = StackShape::pyannote().with_frames(2);
        let mut m = OwnedStack::random(&s, 1, 0.3);
        m.layers[2].reverse.bias_hh.pop();
        assert!(matches!(
            m.weights(),
            Err(CoreError::Weights { layer: 2, .. })
        ));
        assert!(m.with_order(GateOrder::Onnx).is_err());
        assert!(m.to_onnx().is_err());
        let odd = OwnedStack::random(&StackShape { hidden: 64, ..s }, 1, 0.3);
        assert!(matches!(
            odd.weights(),
            Err(CoreError::Unsupported {
                what: "hidden size",
                ..
            })
        ));
        m.layers.pop();
        assert!(matches!(
            m.weights(),
            Err(CoreError::LayerCount {
                expected: 4,
                got: 3
            })
        ));
    }

    #[test]
    fn random_input_is_seeded_normal_and_prefix_stable() {
        let s = StackShape::pyannote().with_frames(10);
        let a = random_input(&s, 3, 9);
        let b = random_input(&s, 1, 9);
        assert_eq!(a.len(), 3 * 10 * 60);
        assert_eq!(&a[..600], &b[..]);
        assert_ne!(random_input(&s, 1, 10), b);
        assert!(random_input(&s, 0, 9).is_empty());
        let mean = a.iter().map(|&v| f64::from(v)).sum::<f64>() / a.len() as f64;
        assert!(mean.abs() < 0.15);
    }

    #[test]
    fn checksum_tells_bits_apart() {
        let c = Checksum::of(&[1.0, -2.0]);
        assert_eq!((c.len, c.sum, c.sum_sq), (2, -1.0, 5.0));
        // FNV-1a of no bytes is the offset basis.
        assert_eq!(Checksum::of(&[]).fnv1a, FNV_OFFSET);
        assert_ne!(Checksum::of(&[0.0]).fnv1a, Checksum::of(&[-0.0]).fnv1a);
        assert!(c.to_string().starts_with("n=2 sum=-1.000000000e0"));
    }
}
