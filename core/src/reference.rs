//! The f64 reference stack every backend is tested against.
//!
//! Plain scalar code in the weights' own gate order (no packing, so it also checks the
//! packing of every backend): for each layer, direction, window and step,
//! `a = W·x + R·h + (Wb + Rb)` in f64, `i, f, o = σ(a)`, `g = tanh(a)`, `c = f·c + i·g`,
//! `h = o·tanh(c)`, with `h0 = c0 = 0`. `exp` and `tanh` are libm's f64 functions.

use crate::error::{CoreError, checked_mul};
use crate::layout::{Gate, StackWeights};
use crate::shape::{Direction, StackShape};

/// f64 elements of workspace [`forward_f64`] needs for `batch` windows.
///
/// # Errors
/// [`CoreError::Overflow`].
pub fn workspace_len(shape: &StackShape, batch: usize) -> Result<usize, CoreError> {
    let layer = shape.output_len(batch)?;
    checked_mul(layer, 2, "reference workspace")?
        .checked_add(shape.gate_rows() + 2 * shape.hidden)
        .ok_or(CoreError::Overflow {
            what: "reference workspace",
        })
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + libm::exp(-x))
}

/// Runs the stack in f64: `input [batch, frames, features]` f32 to `output
/// [batch, frames, 2 * hidden]` f64.
///
/// # Errors
/// [`CoreError::Shape`] for wrong `input`, `output` or `workspace` lengths (see
/// [`workspace_len`]); errors of [`StackWeights::validate`] except non-finite values, which
/// the reference runs through as IEEE arithmetic says.
pub fn forward_f64(
    weights: &StackWeights<'_>,
    input: &[f32],
    batch: usize,
    workspace: &mut [f64],
    output: &mut [f64],
) -> Result<(), CoreError> {
    forward_f64_inner(weights, input, batch, workspace, output, None)
}

/// [`forward_f64`] that also writes every layer's and direction's final hidden and cell states,
/// `[layers * 2, batch, hidden]` each, index `2 * layer + direction` (as
/// `Backend::forward_with_state` and PyTorch's `nn.LSTM` lay them out).
///
/// # Errors
/// As [`forward_f64`], plus [`CoreError::Shape`] (`"h_n length"`, `"c_n length"`) for state
/// tensors of the wrong length.
pub fn forward_f64_with_state(
    weights: &StackWeights<'_>,
    input: &[f32],
    batch: usize,
    workspace: &mut [f64],
    output: &mut [f64],
    h_n: &mut [f64],
    c_n: &mut [f64],
) -> Result<(), CoreError> {
    weights.shape().check_state(batch, h_n.len(), c_n.len())?;
    forward_f64_inner(weights, input, batch, workspace, output, Some((h_n, c_n)))
}

fn forward_f64_inner(
    weights: &StackWeights<'_>,
    input: &[f32],
    batch: usize,
    workspace: &mut [f64],
    output: &mut [f64],
    mut final_state: Option<(&mut [f64], &mut [f64])>,
) -> Result<(), CoreError> {
    let shape = *weights.shape();
    shape.check_io(batch, input.len(), output.len())?;
    let need = workspace_len(&shape, batch)?;
    if workspace.len() != need {
        return Err(CoreError::Shape {
            what: "reference workspace length",
            expected: need,
            got: workspace.len(),
        });
    }
    let h = shape.hidden;
    let rows = shape.gate_rows();
    let frames = shape.frames;
    let out_w = shape.output_width();
    let layer_len = shape.output_len(batch)?;
    let (bufs, scratch) = workspace.split_at_mut(2 * layer_len);
    let (buf_a, buf_b) = bufs.split_at_mut(layer_len);
    let (acc, state) = scratch.split_at_mut(rows);
    let (hs, cs) = state.split_at_mut(h);
    let order = weights.order();

    for (layer, lw) in weights.layers().iter().enumerate() {
        let width = shape.layer_input_width(layer);
        // Layer input: the f32 stack input for layer 0, else the previous layer's output.
        let (src, dst): (&[f64], &mut [f64]) = if !layer.is_multiple_of(2) {
            (&*buf_a, &mut *buf_b)
        } else {
            (&*buf_b, &mut *buf_a)
        };
        for direction in Direction::ALL {
            let d = lw.direction(direction);
            for w in 0..batch {
                hs.fill(0.0);
                cs.fill(0.0);
                for step in 0..frames {
                    let t = direction.frame_at(step, frames);
                    let row_in = (w * frames + t) * width;
                    for (r, a) in acc.iter_mut().enumerate() {
                        let wr = &d.input[r * width..(r + 1) * width];
                        let mut x_dot = 0.0f64;
                        for k in 0..width {
                            let x = if layer == 0 {
                                f64::from(input[row_in + k])
                            } else {
                                src[row_in + k]
                            };
                            x_dot += f64::from(wr[k]) * x;
                        }
                        let rr = &d.recurrent[r * h..(r + 1) * h];
                        let mut h_dot = 0.0f64;
                        for k in 0..h {
                            h_dot += f64::from(rr[k]) * hs[k];
                        }
                        *a = x_dot
                            + h_dot
                            + (f64::from(d.input_bias[r]) + f64::from(d.recurrent_bias[r]));
                    }
                    let out_row = (w * frames + t) * out_w + direction.index() * h;
                    for u in 0..h {
                        let i = sigmoid(acc[order.row(Gate::Input, u, h)]);
                        let f = sigmoid(acc[order.row(Gate::Forget, u, h)]);
                        let g = libm::tanh(acc[order.row(Gate::Cell, u, h)]);
                        let o = sigmoid(acc[order.row(Gate::Output, u, h)]);
                        cs[u] = f * cs[u] + i * g;
                        hs[u] = o * libm::tanh(cs[u]);
                        dst[out_row + u] = hs[u];
                    }
                }
                if let Some((h_n, c_n)) = &mut final_state {
                    let at = ((2 * layer + direction.index()) * batch + w) * h;
                    h_n[at..at + h].copy_from_slice(hs);
                    c_n[at..at + h].copy_from_slice(cs);
                }
            }
        }
    }
    let last: &[f64] = if shape.layers.is_multiple_of(2) {
        buf_b
    } else {
        buf_a
    };
    output.copy_from_slice(last);
    Ok(())
}

/// Relative L2 error `‖got − want‖ / ‖want‖` (NaN if either holds a NaN; `got`'s norm when
/// `want` is all zero).
pub fn relative_l2(got: &[f32], want: &[f64]) -> f64 {
    let mut num = 0.0f64;
    let mut den = 0.0f64;
    for (&g, &w) in got.iter().zip(want) {
        let d = f64::from(g) - w;
        num += d * d;
        den += w * w;
    }
    if got.len() != want.len() {
        return f64::NAN;
    }
    if den == 0.0 {
        libm::sqrt(num)
    } else {
        libm::sqrt(num / den)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{DirectionWeights, GateOrder, LayerWeights};

    /// One unit worked by hand: hidden is 128, but only unit 0 gets non-zero weights, so every
    /// other unit's h stays 0 and unit 0 is a scalar LSTM we can follow on paper.
    #[test]
    fn one_unit_by_hand() {
        let shape = StackShape {
            features: 1,
            hidden: 128,
            layers: 1,
            frames: 2,
        };
        let mut w = vec![0.0f32; 512];
        let mut r = vec![0.0f32; 512 * 128];
        let mut wb = vec![0.0f32; 512];
        let rb = vec![0.0f32; 512];
        // PyTorch order i, f, g, o: rows 0, 128, 256, 384 for unit 0.
        w[0] = 0.5; // i
        w[128] = -0.25; // f
        w[256] = 1.0; // g
        w[384] = 0.75; // o
        r[0] = 0.125; // i from h[0]
        r[256 * 128] = -0.1875; // g from h[0]
        wb[384] = 0.375; // o bias
        let dir = DirectionWeights {
            input: &w,
            recurrent: &r,
            input_bias: &wb,
            recurrent_bias: &rb,
        };
        let layer = LayerWeights {
            forward: dir,
            reverse: dir,
        };
        let st = StackWeights::from_layers(&shape, GateOrder::Torch, &[layer]).unwrap();
        let x = [2.0f32, -1.0];
        let mut ws = vec![0.0; workspace_len(&shape, 1).unwrap()];
        let mut out = vec![0.0; shape.output_len(1).unwrap()];
        forward_f64(&st, &x, 1, &mut ws, &mut out).unwrap();

        let s = |v: f64| 1.0 / (1.0 + (-v).exp());
        let cell = |x: f64, h: f64, c: f64| {
            let i = s(0.5 * x + 0.125 * h);
            let f = s(-0.25 * x);
            let g = (1.0 * x - 0.1875 * h).tanh();
            let o = s(0.75 * x + 0.375);
            let c = f * c + i * g;
            (o * c.tanh(), c)
        };
        let (h0, c0) = cell(2.0, 0.0, 0.0);
        let (h1, _) = cell(-1.0, h0, c0);
        let (r1, r1c) = cell(-1.0, 0.0, 0.0);
        let (r0, _) = cell(2.0, r1, r1c);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-15;
        assert!(close(out[0], h0), "{} vs {h0}", out[0]);
        assert!(close(out[256], h1));
        assert!(close(out[128], r0), "reverse at t=0 sees t=1 first");
        assert!(close(out[256 + 128], r1));
        assert!(
            out.iter()
                .enumerate()
                .all(|(i, &v)| i % 128 == 0 || v == 0.0)
        );
    }

    #[test]
    fn bad_lengths_are_errors() {
        let shape = StackShape {
            features: 1,
            hidden: 128,
            layers: 1,
            frames: 2,
        };
        let z = vec![0.0f32; 512 * 128];
        let dir = DirectionWeights {
            input: &z[..512],
            recurrent: &z,
            input_bias: &z[..512],
            recurrent_bias: &z[..512],
        };
        let st = StackWeights::from_layers(
            &shape,
            GateOrder::Torch,
            &[LayerWeights {
                forward: dir,
                reverse: dir,
            }],
        )
        .unwrap();
        let mut ws = vec![0.0; workspace_len(&shape, 1).unwrap()];
        let mut out = vec![0.0; 512];
        assert_eq!(
            forward_f64(&st, &[0.0; 3], 1, &mut ws, &mut out),
            Err(CoreError::Shape {
                what: "input length",
                expected: 2,
                got: 3
            })
        );
        assert!(matches!(
            forward_f64(&st, &[0.0; 2], 1, &mut ws[1..], &mut out),
            Err(CoreError::Shape {
                what: "reference workspace length",
                ..
            })
        ));
    }

    #[test]
    fn relative_l2_basics() {
        assert_eq!(relative_l2(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        assert!((relative_l2(&[1.1], &[1.0]) - 0.1).abs() < 1e-6);
        assert!(relative_l2(&[f32::NAN], &[1.0]).is_nan());
    }
}
