//! Repacking core's packed tensors (DESIGN §2: column `unit * 4 + gate`) into the CPU
//! kernels' panel layouts (see [`crate::simd::kernels`]): pure index permutations, done once
//! at prepare.

use crate::simd::kernels::{COLS, PANEL_COLS, PANEL_UNITS};

/// Core's packed column (`unit * 4 + gate`) of the CPU's panel-order column `col`.
pub(crate) fn core_col(col: usize) -> usize {
    let panel = col / PANEL_COLS;
    let gate = (col % PANEL_COLS) / PANEL_UNITS;
    let unit = panel * PANEL_UNITS + col % PANEL_UNITS;
    unit * 4 + gate
}

/// Weights K-major `[>= width, COLS]` (core) into `COLS / n` strips of `[width][n]` (panel
/// order): `out[(s * width + k) * n + l] = kmajor[k * COLS + core_col(s * n + l)]`, with
/// `n = strip_cols` (16 for the projection and the recurrence). `out` must hold
/// `width * COLS` values.
pub(crate) fn strips(kmajor: &[f32], width: usize, strip_cols: usize, out: &mut [f32]) {
    for (i, o) in out.iter_mut().enumerate().take(width * COLS) {
        let (s, rest) = (i / (width * strip_cols), i % (width * strip_cols));
        let (k, l) = (rest / strip_cols, rest % strip_cols);
        *o = kmajor[k * COLS + core_col(s * strip_cols + l)];
    }
}

/// Bias `[COLS]` (core order) into panel order.
pub(crate) fn bias_panels(bias: &[f32], out: &mut [f32]) {
    for (col, o) in out.iter_mut().enumerate().take(COLS) {
        *o = bias[core_col(col)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::kernels::STRIP_COLS;

    #[test]
    fn core_col_is_a_permutation_with_gate_vectors() {
        let mut seen = vec![false; COLS];
        for col in 0..COLS {
            let c = core_col(col);
            assert!(!seen[c]);
            seen[c] = true;
        }
        // Panel 1, gate f (1), lane 3 is unit 11's f gate.
        assert_eq!(core_col(32 + 8 + 3), 11 * 4 + 1);
    }

    #[test]
    fn strips_and_panels_land_where_documented() {
        let width = 5;
        let kmajor: Vec<f32> = (0..8 * COLS).map(|v| v as f32).collect();
        let mut out = vec![0.0; width * COLS];
        strips(&kmajor, width, STRIP_COLS, &mut out);
        // Strip 2, k 4, lane 9: panel-order column 41 = unit 9 gate 1.
        assert_eq!(out[(2 * width + 4) * 16 + 9], (4 * COLS + 9 * 4 + 1) as f32);
        // 64-column blocks: block 1, k 3, lane 40: panel 3, gate f (1), unit 24.
        let mut wide = vec![0.0; width * COLS];
        strips(&kmajor, width, 64, &mut wide);
        assert_eq!(wide[(width + 3) * 64 + 40], (3 * COLS + 24 * 4 + 1) as f32);
        let b: Vec<f32> = (0..COLS).map(|v| v as f32).collect();
        let mut bp = vec![0.0; COLS];
        bias_panels(&b, &mut bp);
        assert_eq!(bp[32 + 24 + 2], (10 * 4 + 3) as f32);
    }
}
