//! The recurrence of one layer and direction, step by step over a batch of windows.
//!
//! At each step, for every window, the packed gate pre-activations are
//! `a = (proj[t] + h·R) + bias` (DESIGN §2: projection plus recurrent sum first, combined bias
//! last), then, per unit `u` with packed columns `4u + [i, f, g, o]`:
//! `i, f, o = σ(a)`, `g = tanh(a)`, `c = f·c + i·g`, `h = o·tanh(c)`, with `σ` and `tanh`
//! from [`bilstm_core::numerics`] and `h0 = c0 = 0`.
//!
//! # Numerics (fixed: the CPU backend's bits depend on it)
//! `proj[t] + h·R` is accumulated per packed column, starting from the projection value and
//! adding `h[k] · R[k, col]` in ascending `k`, each product rounded then added (no FMA). At
//! step 0, `h = 0` and `R` is finite (checked at prepare), so the recurrent term is exactly
//! zero and is skipped. Windows never mix: each window's arithmetic is the same whatever the
//! batch, the column blocking or the thread.

use bilstm_core::Direction;
use bilstm_core::numerics::{sigmoid, tanh};

/// Packed columns one register block accumulates: 16 columns = 4 units' four gates.
const BLOCK_COLS: usize = 16;

/// Everything one direction's recurrence reads and writes, for `batch` windows.
pub(crate) struct Recurrence<'a> {
    /// The direction: forward walks frames up, reverse down.
    pub direction: Direction,
    /// Frames per window.
    pub frames: usize,
    /// Hidden units (the packed width is `4 * hidden`).
    pub hidden: usize,
    /// Input projections `[batch * frames, 4H]` (row `window * frames + t`).
    pub proj: &'a [f32],
    /// Recurrent weights, K-major `[H, 4H]`.
    pub recurrent_kmajor: &'a [f32],
    /// Combined bias `[4H]`.
    pub bias: &'a [f32],
}

impl Recurrence<'_> {
    /// Runs all steps for `batch` windows, writing each step's hidden state to
    /// `hseq [batch * frames, H]` (same row numbering as `proj`). `h` and `c` are `[batch, H]`
    /// scratch, overwritten (zeroed first).
    ///
    /// The caller guarantees the lengths: `proj` holds `batch * frames` rows of `4H`, `hseq`
    /// `batch * frames` rows of `H`, `h` and `c` at least `batch * H` values each, `4H` is a
    /// multiple of 16 (H = 128 is the only hidden size core accepts).
    pub(crate) fn run(&self, batch: usize, h: &mut [f32], c: &mut [f32], hseq: &mut [f32]) {
        let hidden = self.hidden;
        let cols = 4 * hidden;
        debug_assert_eq!(cols % BLOCK_COLS, 0);
        debug_assert!(self.proj.len() >= batch * self.frames * cols);
        debug_assert!(hseq.len() >= batch * self.frames * hidden);
        let h = &mut h[..batch * hidden];
        let c = &mut c[..batch * hidden];
        h.fill(0.0);
        c.fill(0.0);
        for step in 0..self.frames {
            let t = self.direction.frame_at(step, self.frames);
            for c0 in (0..cols).step_by(BLOCK_COLS) {
                for w in 0..batch {
                    let row = w * self.frames + t;
                    let Some(proj) = self.proj[row * cols + c0..].first_chunk::<BLOCK_COLS>()
                    else {
                        return;
                    };
                    let mut acc = *proj;
                    if step > 0 {
                        let h_w = &h[w * hidden..(w + 1) * hidden];
                        for (&hk, r_row) in h_w.iter().zip(self.recurrent_kmajor.chunks_exact(cols))
                        {
                            let Some(r) = r_row[c0..].first_chunk::<BLOCK_COLS>() else {
                                return;
                            };
                            for (a, &rv) in acc.iter_mut().zip(r) {
                                *a += hk * rv;
                            }
                        }
                    }
                    let Some(bias) = self.bias[c0..].first_chunk::<BLOCK_COLS>() else {
                        return;
                    };
                    let u0 = c0 / 4;
                    let c_w = &mut c[w * hidden + u0..w * hidden + u0 + BLOCK_COLS / 4];
                    let h_out = &mut hseq[row * hidden + u0..row * hidden + u0 + BLOCK_COLS / 4];
                    for (((gates, b), cell), out) in acc
                        .chunks_exact(4)
                        .zip(bias.chunks_exact(4))
                        .zip(c_w)
                        .zip(h_out)
                    {
                        let i = sigmoid(gates[0] + b[0]);
                        let f = sigmoid(gates[1] + b[1]);
                        let g = tanh(gates[2] + b[2]);
                        let o = sigmoid(gates[3] + b[3]);
                        *cell = f * *cell + i * g;
                        *out = o * tanh(*cell);
                    }
                }
            }
            // Every column block has read this step's h: publish the new one.
            for w in 0..batch {
                let row = w * self.frames + t;
                h[w * hidden..(w + 1) * hidden]
                    .copy_from_slice(&hseq[row * hidden..(row + 1) * hidden]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One unit followed by hand (all other weights zero), against the same formulas in f32.
    #[test]
    fn one_unit_by_hand() {
        let hidden = 128;
        let cols = 512;
        let frames = 3;
        let mut proj = vec![0.0f32; frames * cols];
        for (t, x) in [0.5f32, -1.0, 2.0].iter().enumerate() {
            // Unit 0's gates i, f, g, o get x times these input weights.
            for (g, wgt) in [0.5f32, -0.25, 1.0, 0.75].iter().enumerate() {
                proj[t * cols + g] = x * wgt;
            }
        }
        let mut rk = vec![0.0f32; hidden * cols];
        rk[0] = 0.125; // i from h[0]
        rk[2] = -0.1875; // g from h[0]
        let mut bias = vec![0.0f32; cols];
        bias[3] = 0.375;
        let rec = Recurrence {
            direction: Direction::Forward,
            frames,
            hidden,
            proj: &proj,
            recurrent_kmajor: &rk,
            bias: &bias,
        };
        let (mut h, mut c) = (vec![9.0f32; hidden], vec![9.0f32; hidden]);
        let mut hseq = vec![f32::NAN; frames * hidden];
        rec.run(1, &mut h, &mut c, &mut hseq);
        let (mut hh, mut cc) = (0.0f32, 0.0f32);
        for t in 0..frames {
            let p = &proj[t * cols..];
            let i = sigmoid((p[0] + hh * 0.125) + 0.0);
            let f = sigmoid(p[1] + hh * 0.0);
            let g = tanh(p[2] + hh * -0.1875);
            let o = sigmoid(p[3] + 0.375);
            cc = f * cc + i * g;
            hh = o * tanh(cc);
            assert_eq!(hseq[t * hidden].to_bits(), hh.to_bits(), "step {t}");
            // Other units: zero pre-activations give h = σ(0)·tanh(σ(0)·tanh(0)) = 0.
            assert!(
                hseq[t * hidden + 1..(t + 1) * hidden]
                    .iter()
                    .all(|&v| v == 0.0)
            );
        }
        // The reverse direction starts at the last frame.
        let rev = Recurrence {
            direction: Direction::Reverse,
            ..rec
        };
        rev.run(1, &mut h, &mut c, &mut hseq);
        let first = {
            let p = &proj[2 * cols..];
            let c = sigmoid(p[0]) * tanh(p[2]);
            sigmoid(p[3] + 0.375) * tanh(c)
        };
        assert_eq!(hseq[2 * hidden].to_bits(), first.to_bits());
    }
}
