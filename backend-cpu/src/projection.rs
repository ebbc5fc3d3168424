//! The input projection of one layer and direction: one GEMM over all `batch * frames` rows,
//! `gates[row, j] = Σ_k x[row, k] · Wk[k, j]` with `Wk` K-major `[padded_in, 4H]`.
//!
//! # Numerics (fixed: the CPU backend's bits depend on it)
//! Every output element is summed from `0.0` in ascending `k` over the layer's real input width
//! (the zero padding rows of `Wk` are skipped), each product rounded to f32 and then added (no
//! FMA: Rust never contracts `a * b + c`). The blocking below only decides which elements are
//! computed together, never the order of one element's sum, so the result does not depend on
//! the block sizes, on the number of rows, or on which rows share a block: a window gives the
//! same bits in every batch.

/// Output columns one register block holds (4 SSE vectors of f32 per row).
pub(crate) const BLOCK_COLS: usize = 16;

/// Rows one register block holds: 4 rows x 16 columns = 16 SSE accumulators, the x86-64
/// baseline's register count. Not yet tuned: the SIMD issue re-measures it.
const BLOCK_ROWS: usize = 4;

/// Computes `out[r * cols + j] = Σ_{k < width} x[r * width + k] · wk[k * cols + j]` for every
/// row `r < out.len() / cols` (see the [module docs](self) for the summation order).
///
/// The caller guarantees `cols % BLOCK_COLS == 0`, `x.len() == rows * width` and
/// `wk.len() >= width * cols`; extra rows of `wk` (padding) are not read.
pub(crate) fn project(x: &[f32], width: usize, wk: &[f32], cols: usize, out: &mut [f32]) {
    debug_assert_eq!(cols % BLOCK_COLS, 0);
    debug_assert!(wk.len() >= width * cols);
    debug_assert_eq!(x.len() * cols, out.len() * width);
    let mut x_blocks = x.chunks_exact(BLOCK_ROWS * width);
    let mut out_blocks = out.chunks_exact_mut(BLOCK_ROWS * cols);
    for (xs, outs) in (&mut x_blocks).zip(&mut out_blocks) {
        block::<BLOCK_ROWS>(xs, width, wk, cols, outs);
    }
    // The last rows % BLOCK_ROWS rows, one at a time (same per-element order, same bits).
    let x_tail = x_blocks.remainder();
    let out_tail = out_blocks.into_remainder();
    for (xs, outs) in x_tail
        .chunks_exact(width)
        .zip(out_tail.chunks_exact_mut(cols))
    {
        block::<1>(xs, width, wk, cols, outs);
    }
}

/// `R` rows of the projection: `xs` is `[R, width]`, `outs` is `[R, cols]`.
#[inline(always)]
fn block<const R: usize>(xs: &[f32], width: usize, wk: &[f32], cols: usize, outs: &mut [f32]) {
    for c0 in (0..cols).step_by(BLOCK_COLS) {
        let mut acc = [[0.0f32; BLOCK_COLS]; R];
        for (k, w_row) in wk.chunks_exact(cols).take(width).enumerate() {
            let Some(w) = w_row[c0..].first_chunk::<BLOCK_COLS>() else {
                return;
            };
            for (r, acc_row) in acc.iter_mut().enumerate() {
                let xv = xs[r * width + k];
                for (a, &wv) in acc_row.iter_mut().zip(w) {
                    *a += xv * wv;
                }
            }
        }
        for (r, acc_row) in acc.iter().enumerate() {
            outs[r * cols + c0..r * cols + c0 + BLOCK_COLS].copy_from_slice(acc_row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naive triple loop the blocked version must match bit for bit.
    fn naive(x: &[f32], width: usize, wk: &[f32], cols: usize) -> Vec<f32> {
        let rows = x.len() / width;
        let mut out = vec![0.0f32; rows * cols];
        for r in 0..rows {
            for j in 0..cols {
                let mut s = 0.0f32;
                for k in 0..width {
                    s += x[r * width + k] * wk[k * cols + j];
                }
                out[r * cols + j] = s;
            }
        }
        out
    }

    #[test]
    fn matches_naive_bits_for_every_row_count() {
        let mut rng = bilstm_core::rng::SplitMix64::new(4);
        let (width, padded, cols) = (13, 16, 32);
        let mut wk = vec![0.0f32; padded * cols];
        rng.fill_uniform_f32(&mut wk[..width * cols], -1.0, 1.0);
        for rows in [0, 1, 3, 4, 5, 9] {
            let mut x = vec![0.0f32; rows * width];
            rng.fill_normal_f32(&mut x);
            let mut out = vec![f32::NAN; rows * cols];
            project(&x, width, &wk, cols, &mut out);
            let want = naive(&x, width, &wk, cols);
            assert!(
                out.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "rows {rows}"
            );
        }
    }

    #[test]
    fn padding_rows_are_not_read() {
        // NaN in the padding rows of Wk must not reach the output.
        let (width, cols) = (3, 16);
        let mut wk = vec![f32::NAN; 16 * cols];
        wk[..width * cols].fill(0.5);
        let x = [1.0f32, 2.0, 3.0];
        let mut out = [0.0f32; 16];
        project(&x, width, &wk, cols, &mut out);
        assert!(out.iter().all(|&v| v == 3.0));
    }
}
