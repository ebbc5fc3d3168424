//! The CPU kernels' *panel order* and weight strips, as pure index maps over the packed
//! layout (DESIGN §2: column `unit * 4 + gate`), built once at prepare.
//!
//! Panel order groups the gate columns by [`PANEL_UNITS`] units: inside panel `p`, column
//! `p * 4 * PANEL_UNITS + gate * PANEL_UNITS + j` is gate `[i, f, g, o][gate]` of unit
//! `PANEL_UNITS * p + j`. An 8-lane vector then holds one gate of eight units, so the cell
//! update needs no shuffles. Weights are cut into strips of `strip_cols` panel-order columns,
//! each `[width][strip_cols]` contiguous ([`pack_panel_strips_into`]).

use super::packed::check_len;
use crate::error::{CoreError, checked_mul};

/// Units in one panel (one 8-lane vector per gate).
pub const PANEL_UNITS: usize = 8;

/// Gate columns in one panel.
pub const PANEL_COLS: usize = 4 * PANEL_UNITS;

/// The packed column (`unit * 4 + gate`) of panel-order column `col`.
pub const fn packed_col_of_panel_col(col: usize) -> usize {
    let panel = col / PANEL_COLS;
    let gate = (col % PANEL_COLS) / PANEL_UNITS;
    let unit = panel * PANEL_UNITS + col % PANEL_UNITS;
    unit * 4 + gate
}

/// Checks that `hidden` units split into whole panels and `strip_cols` into whole vectors of
/// a row of `4 * hidden` columns.
fn check_panels(hidden: usize, strip_cols: usize) -> Result<usize, CoreError> {
    let cols = 4 * hidden;
    if hidden == 0 || !hidden.is_multiple_of(PANEL_UNITS) {
        return Err(CoreError::Unsupported {
            what: "hidden size",
            value: hidden,
            reason: "panel order needs a positive multiple of 8 units",
        });
    }
    if strip_cols == 0
        || !strip_cols.is_multiple_of(PANEL_UNITS)
        || !cols.is_multiple_of(strip_cols)
    {
        return Err(CoreError::Unsupported {
            what: "strip width",
            value: strip_cols,
            reason: "strips must be whole 8-column vectors dividing the gate columns",
        });
    }
    Ok(cols)
}

/// K-major weights `kmajor [>= width, 4 * hidden]` (packed order, as
/// [`super::pack_input_kmajor_into`] and [`super::pack_recurrent_kmajor_into`] build them;
/// rows past `width`, such as padding, are ignored) into `4 * hidden / strip_cols` strips of
/// `[width][strip_cols]` in panel order: `out[(s * width + k) * strip_cols + l] =
/// kmajor[k * 4 * hidden + packed_col_of_panel_col(s * strip_cols + l)]`. `out` must hold
/// exactly `width * 4 * hidden` values.
pub fn pack_panel_strips_into(
    kmajor: &[f32],
    width: usize,
    hidden: usize,
    strip_cols: usize,
    out: &mut [f32],
) -> Result<(), CoreError> {
    let cols = check_panels(hidden, strip_cols)?;
    let len = checked_mul(width, cols, "panel strips")?;
    if kmajor.len() < len {
        return Err(CoreError::Shape {
            what: "K-major weights length",
            expected: len,
            got: kmajor.len(),
        });
    }
    check_len("panel strips length", len, out.len())?;
    for (i, o) in out.iter_mut().enumerate() {
        let (s, rest) = (i / (width * strip_cols), i % (width * strip_cols));
        let (k, l) = (rest / strip_cols, rest % strip_cols);
        *o = kmajor[k * cols + packed_col_of_panel_col(s * strip_cols + l)];
    }
    Ok(())
}

/// A packed vector `[4 * hidden]` (the combined bias) into panel order.
pub fn pack_panel_bias_into(bias: &[f32], hidden: usize, out: &mut [f32]) -> Result<(), CoreError> {
    let cols = check_panels(hidden, PANEL_UNITS)?;
    check_len("packed bias length", cols, bias.len())?;
    check_len("panel bias length", cols, out.len())?;
    for (col, o) in out.iter_mut().enumerate() {
        *o = bias[packed_col_of_panel_col(col)];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: usize = 128;
    const COLS: usize = 4 * H;

    #[test]
    fn panel_order_is_a_permutation_with_gate_vectors() {
        let mut seen = vec![false; COLS];
        for col in 0..COLS {
            let c = packed_col_of_panel_col(col);
            assert!(!seen[c]);
            seen[c] = true;
        }
        // Panel 1, gate f (1), lane 3 is unit 11's f gate.
        assert_eq!(packed_col_of_panel_col(32 + 8 + 3), 11 * 4 + 1);
    }

    #[test]
    fn strips_and_panels_land_where_documented() {
        let width = 5;
        // Eight K rows: the three past `width` are ignored (padding).
        let kmajor: Vec<f32> = (0..8 * COLS).map(|v| v as f32).collect();
        let mut out = vec![0.0; width * COLS];
        pack_panel_strips_into(&kmajor, width, H, 16, &mut out).unwrap();
        // Strip 2, k 4, lane 9: panel-order column 41 = unit 9 gate 1.
        assert_eq!(out[(2 * width + 4) * 16 + 9], (4 * COLS + 9 * 4 + 1) as f32);
        // 64-column strips: strip 1, k 3, lane 40: panel 3, gate f (1), unit 24.
        let mut wide = vec![0.0; width * COLS];
        pack_panel_strips_into(&kmajor, width, H, 64, &mut wide).unwrap();
        assert_eq!(wide[(width + 3) * 64 + 40], (3 * COLS + 24 * 4 + 1) as f32);
        let b: Vec<f32> = (0..COLS).map(|v| v as f32).collect();
        let mut bp = vec![0.0; COLS];
        pack_panel_bias_into(&b, H, &mut bp).unwrap();
        assert_eq!(bp[32 + 24 + 2], (10 * 4 + 3) as f32);
    }

    #[test]
    fn bad_sizes_are_errors() {
        let kmajor = vec![0.0; 4 * COLS];
        let mut out = vec![0.0; 4 * COLS];
        assert_eq!(
            pack_panel_strips_into(&kmajor[1..], 4, H, 16, &mut out),
            Err(CoreError::Shape {
                what: "K-major weights length",
                expected: 4 * COLS,
                got: 4 * COLS - 1
            })
        );
        assert_eq!(
            pack_panel_strips_into(&kmajor, 4, H, 16, &mut out[1..]),
            Err(CoreError::Shape {
                what: "panel strips length",
                expected: 4 * COLS,
                got: 4 * COLS - 1
            })
        );
        for cols in [0, 12, 24] {
            assert!(matches!(
                pack_panel_strips_into(&kmajor, 4, H, cols, &mut out),
                Err(CoreError::Unsupported {
                    what: "strip width",
                    ..
                })
            ));
        }
        assert!(matches!(
            pack_panel_bias_into(&kmajor[..4 * 12], 12, &mut out[..4 * 12]),
            Err(CoreError::Unsupported {
                what: "hidden size",
                value: 12,
                ..
            })
        ));
        assert!(matches!(
            pack_panel_strips_into(&kmajor, usize::MAX, H, 16, &mut out),
            Err(CoreError::Overflow { .. })
        ));
    }
}
