//! The shape of a stack, its directions and math modes.

use core::fmt;

use crate::error::{CoreError, checked_mul};
use crate::geometry;

/// The largest number of layers a stack may have (bounds every fixed-capacity list in core).
pub const MAX_LAYERS: usize = 8;

/// Dimensions of a bidirectional LSTM stack.
///
/// Input is `[batch, frames, features]` f32 row-major (row = `window * frames + t`); output is
/// `[batch, frames, 2 * hidden]`, forward units first, then reverse units. Layer 0 reads
/// `features` values per frame, every later layer `2 * hidden`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StackShape {
    /// Input width of layer 0 (60 for pyannote).
    pub features: usize,
    /// Hidden units per direction (128; other sizes are refused by [`StackShape::validate`]).
    pub hidden: usize,
    /// Number of bidirectional layers (4 for pyannote).
    pub layers: usize,
    /// Frames per window (589 for a 10 s pyannote window).
    pub frames: usize,
}

impl StackShape {
    /// pyannote segmentation-3.0's stack: 60 features, 128 hidden, 4 layers, 589 frames.
    pub const fn pyannote() -> Self {
        StackShape {
            features: 60,
            hidden: geometry::HIDDEN,
            layers: 4,
            frames: 589,
        }
    }

    /// The same stack with another frame count.
    pub const fn with_frames(self, frames: usize) -> Self {
        StackShape { frames, ..self }
    }

    /// Checks that this version can run the shape.
    ///
    /// # Errors
    /// [`CoreError::Unsupported`] for a hidden size other than [`geometry::HIDDEN`], zero or more
    /// than [`MAX_LAYERS`] layers, zero features or more than [`geometry::MAX_FEATURES`], or zero
    /// frames.
    pub fn validate(&self) -> Result<(), CoreError> {
        if self.hidden != geometry::HIDDEN {
            return Err(CoreError::Unsupported {
                what: "hidden size",
                value: self.hidden,
                reason: "only 128 units per direction are built",
            });
        }
        if self.layers == 0 || self.layers > MAX_LAYERS {
            return Err(CoreError::Unsupported {
                what: "layer count",
                value: self.layers,
                reason: "a stack has 1 to 8 layers",
            });
        }
        if self.features == 0 || self.features > geometry::MAX_FEATURES {
            return Err(CoreError::Unsupported {
                what: "feature count",
                value: self.features,
                reason: "layer 0 reads 1 to 1024 features",
            });
        }
        if self.frames == 0 {
            return Err(CoreError::Unsupported {
                what: "frame count",
                value: 0,
                reason: "a window has at least one frame",
            });
        }
        Ok(())
    }

    /// Gate rows per direction: `4 * hidden` (512).
    pub const fn gate_rows(&self) -> usize {
        geometry::GATES * self.hidden
    }

    /// Output width of every layer and of the stack: `2 * hidden` (256).
    pub const fn output_width(&self) -> usize {
        2 * self.hidden
    }

    /// Input width of `layer`: `features` for layer 0, `2 * hidden` after.
    pub const fn layer_input_width(&self, layer: usize) -> usize {
        if layer == 0 {
            self.features
        } else {
            self.output_width()
        }
    }

    /// Values in a stack input of `batch` windows: `batch * frames * features`.
    ///
    /// # Errors
    /// [`CoreError::Overflow`] when the product does not fit `usize`.
    pub fn input_len(&self, batch: usize) -> Result<usize, CoreError> {
        checked_mul(
            checked_mul(batch, self.frames, "input length")?,
            self.features,
            "input length",
        )
    }

    /// Values in a stack output of `batch` windows: `batch * frames * 2 * hidden`.
    ///
    /// # Errors
    /// [`CoreError::Overflow`] when the product does not fit `usize`.
    pub fn output_len(&self, batch: usize) -> Result<usize, CoreError> {
        checked_mul(
            checked_mul(batch, self.frames, "output length")?,
            self.output_width(),
            "output length",
        )
    }

    /// Values in each of the final-state tensors `h_n` and `c_n` of `batch` windows:
    /// `2 * layers * batch * hidden`, laid out as PyTorch's `nn.LSTM` returns them,
    /// `[layers * 2, batch, hidden]` with index `2 * layer + direction` (forward 0, reverse 1).
    ///
    /// # Errors
    /// [`CoreError::Overflow`] when the product does not fit `usize`.
    pub fn state_len(&self, batch: usize) -> Result<usize, CoreError> {
        checked_mul(
            checked_mul(batch, 2 * self.layers, "final state length")?,
            self.hidden,
            "final state length",
        )
    }

    /// Checks the lengths of the final-state tensors `h_n` and `c_n` for `batch` windows
    /// ([`StackShape::state_len`] each).
    ///
    /// # Errors
    /// [`CoreError::Shape`] naming the tensor whose length is wrong, or [`CoreError::Overflow`].
    pub fn check_state(&self, batch: usize, h_n: usize, c_n: usize) -> Result<(), CoreError> {
        let want = self.state_len(batch)?;
        for (what, got) in [("h_n length", h_n), ("c_n length", c_n)] {
            if got != want {
                return Err(CoreError::Shape {
                    what,
                    expected: want,
                    got,
                });
            }
        }
        Ok(())
    }

    /// Checks the input and output lengths for `batch` windows.
    ///
    /// # Errors
    /// [`CoreError::Shape`] naming the buffer whose length is wrong, or [`CoreError::Overflow`].
    pub fn check_io(&self, batch: usize, input: usize, output: usize) -> Result<(), CoreError> {
        let want_in = self.input_len(batch)?;
        if input != want_in {
            return Err(CoreError::Shape {
                what: "input length",
                expected: want_in,
                got: input,
            });
        }
        let want_out = self.output_len(batch)?;
        if output != want_out {
            return Err(CoreError::Shape {
                what: "output length",
                expected: want_out,
                got: output,
            });
        }
        Ok(())
    }
}

impl Default for StackShape {
    fn default() -> Self {
        Self::pyannote()
    }
}

/// One of the two directions of a bidirectional layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// Steps 0, 1, ..., frames - 1; output columns `0..hidden`.
    Forward,
    /// Steps frames - 1, ..., 0; output columns `hidden..2 * hidden`.
    Reverse,
}

impl Direction {
    /// Both directions, forward first.
    pub const ALL: [Direction; 2] = [Direction::Forward, Direction::Reverse];

    /// 0 for forward, 1 for reverse (the index in ONNX's `[2, ...]` tensors).
    pub const fn index(self) -> usize {
        match self {
            Direction::Forward => 0,
            Direction::Reverse => 1,
        }
    }

    /// The frame processed at step `step` of `frames`.
    pub const fn frame_at(self, step: usize, frames: usize) -> usize {
        match self {
            Direction::Forward => step,
            Direction::Reverse => frames - 1 - step,
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Forward => "forward",
            Direction::Reverse => "reverse",
        })
    }
}

/// Arithmetic used for the input projections (and, with them, the recurrences' gate
/// activations and recurrent dot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MathMode {
    /// FP32 everywhere (the default).
    #[default]
    Fp32,
    /// Input projections on tensor cores with TF32 operands where the plan allows it; where the
    /// projection is a TF32 tile the recurrences' sigmoid and tanh are the GPU's `ex2` and
    /// reciprocal estimates (errors of a few 1e-7, against TF32's 1e-3)
    /// (`ProjectionTile::tf32_numerics` in `plan::projection`), and the recurrent products are,
    /// on GPUs with thread-block clusters, exact 16-bit fixed-point sums (`numerics.cuh`
    /// section 9, [`crate::fixed`]; the plan's `fixed_point` decision), elsewhere 8 FP32 FMA
    /// chains of 16 terms instead of 16 of 8 (section 8). Either way a window's bits never
    /// depend on the batch or the kernel; section 9's differ from section 8's.
    Tf32,
}

impl MathMode {
    /// Both modes.
    pub const ALL: [MathMode; 2] = [MathMode::Fp32, MathMode::Tf32];

    /// Parses `"fp32"` or `"tf32"` (any case).
    pub fn parse(s: &str) -> Option<Self> {
        if s.eq_ignore_ascii_case("fp32") {
            Some(MathMode::Fp32)
        } else if s.eq_ignore_ascii_case("tf32") {
            Some(MathMode::Tf32)
        } else {
            None
        }
    }
}

impl fmt::Display for MathMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MathMode::Fp32 => "fp32",
            MathMode::Tf32 => "tf32",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pyannote_shape() {
        let s = StackShape::pyannote();
        assert_eq!(s.gate_rows(), 512);
        assert_eq!(s.output_width(), 256);
        assert_eq!(s.layer_input_width(0), 60);
        assert_eq!(s.layer_input_width(3), 256);
        assert_eq!(s.input_len(2), Ok(2 * 589 * 60));
        assert_eq!(s.output_len(2), Ok(2 * 589 * 256));
        assert_eq!(s.validate(), Ok(()));
    }

    #[test]
    fn refuses_other_hidden_sizes_and_bad_dims() {
        let s = StackShape {
            hidden: 64,
            ..StackShape::pyannote()
        };
        assert_eq!(
            s.validate(),
            Err(CoreError::Unsupported {
                what: "hidden size",
                value: 64,
                reason: "only 128 units per direction are built"
            })
        );
        assert!(
            StackShape {
                layers: 0,
                ..StackShape::pyannote()
            }
            .validate()
            .is_err()
        );
        assert!(
            StackShape {
                layers: 9,
                ..StackShape::pyannote()
            }
            .validate()
            .is_err()
        );
        assert!(
            StackShape {
                features: 0,
                ..StackShape::pyannote()
            }
            .validate()
            .is_err()
        );
        assert!(StackShape::pyannote().with_frames(0).validate().is_err());
    }

    #[test]
    fn io_checks_name_the_buffer() {
        let s = StackShape::pyannote().with_frames(3);
        assert_eq!(s.check_io(2, 360, 1536), Ok(()));
        assert_eq!(
            s.check_io(2, 359, 1536),
            Err(CoreError::Shape {
                what: "input length",
                expected: 360,
                got: 359
            })
        );
        assert_eq!(
            s.check_io(2, 360, 1),
            Err(CoreError::Shape {
                what: "output length",
                expected: 1536,
                got: 1
            })
        );
        assert!(matches!(
            s.input_len(usize::MAX),
            Err(CoreError::Overflow { .. })
        ));
    }

    #[test]
    fn reverse_walks_backwards() {
        assert_eq!(Direction::Reverse.frame_at(0, 589), 588);
        assert_eq!(Direction::Forward.frame_at(5, 589), 5);
        assert_eq!(MathMode::parse("TF32"), Some(MathMode::Tf32));
        assert_eq!(MathMode::parse("fp16"), None);
    }

    #[test]
    fn state_lengths() {
        let s = StackShape::pyannote();
        assert_eq!(s.state_len(3).unwrap(), 8 * 3 * 128);
        assert!(s.check_state(3, 3072, 3072).is_ok());
        assert!(matches!(
            s.check_state(3, 3071, 3072),
            Err(CoreError::Shape {
                what: "h_n length",
                expected: 3072,
                got: 3071
            })
        ));
        assert!(matches!(
            s.check_state(3, 3072, 0),
            Err(CoreError::Shape {
                what: "c_n length",
                ..
            })
        ));
        assert!(s.state_len(usize::MAX).is_err());
    }
}
