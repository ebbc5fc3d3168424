//! The fixed-point recurrent product (`kernels/cuda/numerics.cuh` section 9: TF32 mode's
//! recurrent product on devices with thread-block clusters, the `bilstm_recurrence_fixed*`
//! kernels), as plain integer arithmetic: an executable statement of what those kernels compute
//! for one gate row, and of the bounds their 32-bit sums rely on; and [`pick`], which of those
//! kernels a batch runs (the plan's `fixed_point` decision).
//!
//! A row of R is scaled by `2^(15 - e)` ([`row_exponent`] of its largest magnitude) and rounded
//! to a 16-bit integer ([`quantise`]); h to `rint(h 2^15)` ([`quantise_h`]). Each `q` splits as
//! `256 q1 + q0` ([`split`]: `q1` a signed byte, `q0` an unsigned one), and the byte products
//! summed over the row are exact integers in any order ([`sums`]): `A = Σ q1 h1`,
//! `B = Σ (q1 h0 + q0 h1)`, `C = Σ q0 h0`. The dot is `(A 2^16 + rn(B 2^8 + C))` rounded, times
//! `2^(e - 30)` ([`dot_from_sums`]).
//!
//! ```
//! use bilstm_core::fixed;
//! let row = [0.25f32, -0.5, 0.125, 0.0];
//! let h = [0.5f32, 0.25, -1.0, 0.75];
//! let exact: f64 = row.iter().zip(&h).map(|(&r, &x)| f64::from(r) * f64::from(x)).sum();
//! let got = fixed::row_dot(&row, &h).unwrap();
//! assert!((f64::from(got) - exact).abs() < 1e-4);
//! ```

use crate::error::CoreError;

/// The most terms one row's sums may hold (the kernels' `HIDDEN`, 128): [`sums`] refuses more,
/// since `B 2^8 + C` fits 32 bits only up to this length.
pub const MAX_TERMS: usize = 128;

/// The largest magnitude of a quantised value: `±32767`, so that the high byte stays in
/// `-128 ..= 127`.
pub const MAX_Q: i32 = 32767;

/// The exponent `e` of a row whose largest magnitude is `max_abs` (finite, at least 0):
/// `max_abs < 2^e`, and at least -96 so that `2^(e - 30)` stays a normal f32.
pub fn row_exponent(max_abs: f32) -> i32 {
    let e = ((max_abs.to_bits() >> 23) & 0xff) as i32 - 126;
    e.max(-96)
}

/// The nearest integer to `x` (ties to even), clamped to `±MAX_Q`; NaN gives `MAX_Q` (the
/// kernels' magic-constant rounding of a NaN).
pub fn quantise(x: f32) -> i16 {
    if x.is_nan() {
        return MAX_Q as i16;
    }
    let r = libm::rintf(x);
    if r >= MAX_Q as f32 {
        MAX_Q as i16
    } else if r <= -MAX_Q as f32 {
        -MAX_Q as i16
    } else {
        r as i16
    }
}

/// h as 16-bit fixed point: `rint(h 2^15)`, clamped to `±MAX_Q`.
pub fn quantise_h(h: f32) -> i16 {
    quantise(h * 32768.0)
}

/// `q = 256 q1 + q0`: the signed high byte and the unsigned low byte.
pub fn split(q: i16) -> (i8, u8) {
    ((q >> 8) as i8, (q & 0xff) as u8)
}

/// The exact sums `(A, B, C)` of a row's quantised weights `q` and quantised h `hq`.
///
/// # Errors
/// [`CoreError::Shape`] when the lengths differ or exceed [`MAX_TERMS`].
pub fn sums(q: &[i16], hq: &[i16]) -> Result<(i32, i32, i32), CoreError> {
    check_terms(q, hq)?;
    let (mut a, mut b, mut c) = (0i32, 0i32, 0i32);
    for (&w, &x) in q.iter().zip(hq) {
        let (w1, w0) = split(w);
        let (x1, x0) = split(x);
        a += i32::from(w1) * i32::from(x1);
        b += i32::from(w1) * i32::from(x0) + i32::from(w0) * i32::from(x1);
        c += i32::from(w0) * i32::from(x0);
    }
    Ok((a, b, c))
}

/// A row's terms: as many quantised weights as quantised h values, at most [`MAX_TERMS`].
fn check_terms(q: &[i16], hq: &[i16]) -> Result<(), CoreError> {
    if q.len() != hq.len() || q.len() > MAX_TERMS {
        return Err(CoreError::Shape {
            what: "fixed-point terms (equal lengths, at most 128)",
            expected: q.len().min(MAX_TERMS),
            got: hq.len(),
        });
    }
    Ok(())
}

/// The dot from the exact sums and the row's exponent: `B 2^8 + C` (exact in 32 bits),
/// rounded to f32, then `A 2^16` plus that rounded once, times `2^(e - 30)`.
///
/// Sums of at most [`MAX_TERMS`] terms (what [`sums`] gives) and exponents of [`row_exponent`]
/// are in range. Outside it nothing panics: `B 2^8 + C` wraps modulo 2^32 as the kernels' 32-bit
/// integer arithmetic does, and `e` is clamped to `-96 ..= 157` (where `2^(e - 30)` is a normal
/// f32).
pub fn dot_from_sums(a: i32, b: i32, c: i32, e: i32) -> f32 {
    dot_from_a_t(a, b.wrapping_mul(256).wrapping_add(c), e)
}

/// [`dot_from_sums`] from `A` and `T = B 2^8 + C` (the integer-pipe kernels add partial `T`s of
/// 16 terms across lanes modulo 2^32, which gives the same `T` since the final one fits 32
/// bits): `T` rounded to f32, then `A 2^16` plus that rounded once, times `2^(e - 30)` (`e`
/// clamped as there).
pub fn dot_from_a_t(a: i32, t: i32, e: i32) -> f32 {
    let scale = f32::from_bits(((e.clamp(-96, 157) - 30 + 127) as u32) << 23);
    libm::fmaf(a as f32, 65536.0, t as f32) * scale
}

/// One gate row's recurrent dot with h, the fixed-point way (at most [`MAX_TERMS`] terms). The
/// weights are meant to be finite (models are validated when loaded); a non-finite one gives a
/// clamped, meaningless result, never a panic.
///
/// # Errors
/// [`CoreError::Shape`] when the lengths differ or exceed [`MAX_TERMS`].
pub fn row_dot(row: &[f32], h: &[f32]) -> Result<f32, CoreError> {
    if row.len() != h.len() || row.len() > MAX_TERMS {
        return Err(CoreError::Shape {
            what: "fixed-point terms (equal lengths, at most 128)",
            expected: row.len().min(MAX_TERMS),
            got: h.len(),
        });
    }
    let max_abs = row.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let e = row_exponent(max_abs);
    let up = f32::from_bits(((15 - e + 127) as u32) << 23);
    let mut q = [0i16; MAX_TERMS];
    let mut hq = [0i16; MAX_TERMS];
    for (k, (&w, &x)) in row.iter().zip(h).enumerate() {
        q[k] = quantise(w * up);
        hq[k] = quantise_h(x);
    }
    let (a, b, c) = sums(&q[..row.len()], &hq[..row.len()])?;
    Ok(dot_from_sums(a, b, c, e))
}

/// `(A, T = B 2^8 + C modulo 2^32)` of a row as the 4-window tensor-core kernels
/// (`bilstm_recurrence_fixed4*`) form them: h's low byte enters the products less 128 (a signed
/// byte, `h0 ^ 0x80`), so each k chunk needs one product of the high and one of the low weight
/// bytes against both planes of h; the offset comes back as the row's constant
/// `2^15 sum q1 + 2^7 sum q0` (wrapping). The same `(A, T)` as [`sums`] (a unit test checks it
/// at every byte's extremes), hence the same dot ([`dot_from_a_t`]).
///
/// # Errors
/// [`CoreError::Shape`] as [`sums`].
pub fn a_t_from_offset_planes(q: &[i16], hq: &[i16]) -> Result<(i32, i32), CoreError> {
    check_terms(q, hq)?;
    let (mut a, mut hi_lo, mut lo_hi, mut lo_lo, mut sum_hi, mut sum_lo) =
        (0i32, 0i32, 0i32, 0i32, 0i32, 0i32);
    for (&w, &x) in q.iter().zip(hq) {
        let (w1, w0) = split(w);
        let (x1, x0) = split(x);
        let x0_signed = i32::from(x0) - 128;
        a += i32::from(w1) * i32::from(x1);
        hi_lo += i32::from(w1) * x0_signed;
        lo_hi += i32::from(w0) * i32::from(x1);
        lo_lo += i32::from(w0) * x0_signed;
        sum_hi += i32::from(w1);
        sum_lo += i32::from(w0);
    }
    let offset = (sum_hi as u32)
        .wrapping_mul(32_768)
        .wrapping_add((sum_lo as u32).wrapping_mul(128));
    let t = (hi_lo as u32)
        .wrapping_add(lo_hi as u32)
        .wrapping_mul(256)
        .wrapping_add(lo_lo as u32)
        .wrapping_add(offset);
    Ok((a, t as i32))
}

/// Which fixed-point kernel a TF32 pass of a batch runs ([`pick`]; the plan's `fixed_point`
/// decision): a one-window integer-pipe cluster kernel of `cluster_size` CTAs
/// (`bilstm_recurrence_fixed1c8` / `1c4` / `1c2`), a 2-window tensor-core kernel
/// (`bilstm_recurrence_fixed2c4`; `fixed2c8` is forced only), a 4-window tensor-core kernel
/// (`bilstm_recurrence_fixed4c4` / `4c2` / `fixed4`), or the 8-window tensor-core kernel
/// (`bilstm_recurrence_fixed8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FixedPick {
    /// One window a cluster of this many CTAs, on the integer pipe.
    Simt {
        /// CTAs a cluster (8, 4 or 2).
        cluster_size: usize,
    },
    /// Tiles of 2 windows a cluster of this many CTAs, on the tensor cores (the 4-window
    /// kernels' code with half the columns).
    Pair {
        /// CTAs a cluster (4 or 8).
        cluster_size: usize,
    },
    /// Tiles of 4 windows a cluster of this many CTAs (1: one CTA a tile), on the tensor cores.
    Quad {
        /// CTAs a cluster (4, 2 or 1).
        cluster_size: usize,
    },
    /// Tiles of 8 windows a CTA on the tensor cores.
    Tile,
}

impl FixedPick {
    /// The pick's launch shape `(CTAs a cluster, windows a cluster)`, as the kernel table
    /// (`bilstm_kernels`) describes each fixed-point kernel's cluster launch.
    pub const fn launch(self) -> (usize, usize) {
        match self {
            FixedPick::Simt { cluster_size } => (cluster_size, 1),
            FixedPick::Pair { cluster_size } => (cluster_size, crate::geometry::FIXED2_WINDOWS),
            FixedPick::Quad { cluster_size } => (cluster_size, crate::geometry::FIXED4_WINDOWS),
            FixedPick::Tile => (1, crate::geometry::FIXED_WINDOWS),
        }
    }

    /// The kernel's name: its entry point after `bilstm_recurrence_` (`fixed1c8`, `fixed4c2`,
    /// `fixed4`, `fixed8`; the names `BILSTM_FIXED_RECURRENCE` takes without the `fixed`), or
    /// `"none (no such kernel)"` for a cluster size no kernel is built for ([`pick`] never
    /// names one; the backend's unit test checks every pick's name against its entry point).
    pub const fn name(self) -> &'static str {
        match self {
            FixedPick::Simt { cluster_size: 8 } => "fixed1c8",
            FixedPick::Simt { cluster_size: 4 } => "fixed1c4",
            FixedPick::Simt { cluster_size: 2 } => "fixed1c2",
            FixedPick::Pair { cluster_size: 8 } => "fixed2c8",
            FixedPick::Pair { cluster_size: 4 } => "fixed2c4",
            FixedPick::Quad { cluster_size: 8 } => "fixed4c8",
            FixedPick::Quad { cluster_size: 4 } => "fixed4c4",
            FixedPick::Quad { cluster_size: 2 } => "fixed4c2",
            FixedPick::Quad { cluster_size: 1 } => "fixed4",
            FixedPick::Tile => "fixed8",
            FixedPick::Simt { .. } | FixedPick::Pair { .. } | FixedPick::Quad { .. } => {
                "none (no such kernel)"
            }
        }
    }
}

impl core::fmt::Display for FixedPick {
    /// The kernel's name and what it runs: `fixed4c2 (4-window tiles, 2-CTA clusters, tensor
    /// cores)`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let name = self.name();
        match *self {
            FixedPick::Simt { cluster_size } => write!(
                f,
                "{name} (one window a {cluster_size}-CTA cluster, integer pipe)"
            ),
            FixedPick::Pair { cluster_size } => write!(
                f,
                "{name} (2-window tiles, {cluster_size}-CTA clusters, tensor cores)"
            ),
            FixedPick::Quad { cluster_size: 1 } => {
                write!(f, "{name} (4-window tiles, one CTA a tile, tensor cores)")
            }
            FixedPick::Quad { cluster_size } => write!(
                f,
                "{name} (4-window tiles, {cluster_size}-CTA clusters, tensor cores)"
            ),
            FixedPick::Tile => write!(f, "{name} (8-window tiles, one CTA a tile, tensor cores)"),
        }
    }
}

/// The largest cluster a fixed-point kernel launches (`fixed1c8`, `fixed4c8`): a device runs
/// TF32 mode's section 9 only where its portable cluster limit reaches this.
pub const MAX_CLUSTER_SIZE: usize = 8;

/// The rule for `batch` windows on a GPU of `sms` SMs: both directions of every tile of `W`
/// windows run as one cluster of `S` CTAs each, one CTA an SM, in one wave, so a kernel's grid
/// is `2 ceil(batch / W) S` CTAs. First the one-window kernels (`W = 1`) of 8 and 4 CTAs while
/// their grid takes at most 15/16 of the SMs; then the 2-window tiles on 4-CTA clusters under the
/// same bound; then the 2-CTA one-window kernel while its grid takes at most all the SMs; then
/// the 4-window tiles: 4-CTA clusters up to three quarters of the SMs, 2-CTA clusters and one CTA
/// a tile up to all of them; else [`FixedPick::Tile`]. Larger clusters first: their steps are
/// shorter.
///
/// H200 (132 SMs), TF32, 589 frames, medians of 10. Session 27 call 4 (two rounds, ms):
/// `fixed1c8` 1.15-1.16 at batch 7 (112 CTAs) but 1.34-1.35 at 8 (128), where `fixed1c4` takes
/// 1.33; `fixed1c4` 1.35 / 1.35-1.36 / 1.39-1.40 at batches 13 / 14 / 15 (104-120 CTAs) but
/// 1.93-1.94 at 16 (128), where `fixed1c2` takes 1.69-1.71 (at 13-15 1.65-1.70): with 128 CTAs
/// of these clusters some SMs get two (our reading: the GPCs cannot give each CTA an SM of its
/// own), whose integer pipe then serves both; so 15/16 of the SMs (session 25's three quarters had
/// measured only 96 and 128 CTAs). Session 27 call 6: `fixed2c4` 1.58 / 1.63-1.64 / 1.68-1.69 /
/// 1.73-1.74 ms at batches 16 / 20 / 24 / 30 (64-120 CTAs) against `fixed1c2`'s 1.69 / 1.69-1.70
/// / 1.73-1.74 / 1.78-1.79, but 1.82-1.83 at 32 (128 CTAs) against 1.78; at 8-15 `fixed1c4`
/// stays ahead (1.33-1.41 against 1.40-1.56); `fixed2c8` is 1-3 % behind `fixed2c4` throughout.
/// Session 26 calls 2-3: at batch 32 `fixed1c2` 1.78-1.79 against
/// `fixed4c4` 1.85-1.87; at 40 / 48 `fixed4c4` 1.90 / 1.94-1.98 (`fixed4c2` 2.03-2.10); at 64
/// `fixed4c2` 2.16-2.17 (`fixed4c4` 2.20-2.22); at 96 / 128 `fixed4c2` 2.27-2.30 / 2.42-2.44
/// (`fixed4` 2.41 / 2.55-2.58); at 160 `fixed4` 2.73 (`fixed4c4` 2.90, `fixed4c2` 4.32: two
/// waves); at 256 `fixed4` 3.23-3.25 (`fixed8` 4.17); at 1024 `fixed8` 10.8 (`fixed4` 12.7).
pub fn pick(batch: usize, sms: usize) -> FixedPick {
    // The grid of a pick: 2 ceil(batch / W) S CTAs.
    let ctas = |p: FixedPick| {
        let (size, windows) = p.launch();
        batch.div_ceil(windows).saturating_mul(2 * size)
    };
    // Shares of the SMs: 15/16, 3/4, all.
    let within = |p: FixedPick, num: usize, den: usize| {
        ctas(p).saturating_mul(den) <= sms.saturating_mul(num)
    };
    let simt = |cluster_size| FixedPick::Simt { cluster_size };
    let quad = |cluster_size| FixedPick::Quad { cluster_size };
    [
        (simt(8), 15, 16),
        (simt(4), 15, 16),
        (FixedPick::Pair { cluster_size: 4 }, 15, 16),
        (simt(2), 1, 1),
        (quad(4), 3, 4),
        (quad(2), 1, 1),
        (quad(1), 1, 1),
    ]
    .into_iter()
    .find(|&(p, num, den)| within(p, num, den))
    .map_or(FixedPick::Tile, |(p, _, _)| p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn the_sums_are_the_exact_product_in_every_order() {
        let mut rng = SplitMix64::new(23);
        for _ in 0..200 {
            let q: Vec<i16> = (0..MAX_TERMS)
                .map(|_| (rng.next_u64() % 65535) as i32 - MAX_Q)
                .map(|v| v as i16)
                .collect();
            let hq: Vec<i16> = (0..MAX_TERMS)
                .map(|_| (rng.next_u64() % 65535) as i32 - MAX_Q)
                .map(|v| v as i16)
                .collect();
            let (a, b, c) = sums(&q, &hq).unwrap();
            let exact: i64 = q
                .iter()
                .zip(&hq)
                .map(|(&w, &x)| i64::from(w) * i64::from(x))
                .sum();
            assert_eq!(
                i64::from(a) * 65536 + i64::from(b) * 256 + i64::from(c),
                exact
            );
            let mut rq = q.clone();
            let mut rh = hq.clone();
            rq.reverse();
            rh.reverse();
            assert_eq!(sums(&rq, &rh).unwrap(), (a, b, c));
        }
    }

    /// The bounds numerics.cuh section 9 states and the kernels rely on: |A| <= 2^21 (an exact
    /// float conversion below 2^22), |B| <= 8,355,840, 0 <= C <= 8,323,200, and B 2^8 + C in
    /// 32 bits, at the extremes of every byte.
    #[test]
    fn the_sums_stay_within_the_kernels_bounds_at_the_extremes() {
        let extremes: [i16; 6] = [-32767, -32513, -32640, 32767, 32639, -1];
        for &w in &extremes {
            for &x in &extremes {
                let (a, b, c) = sums(&[w; MAX_TERMS], &[x; MAX_TERMS]).unwrap();
                assert!(a.unsigned_abs() <= 1 << 21, "{w} {x}: A {a}");
                assert!(b.unsigned_abs() <= 8_355_840, "{w} {x}: B {b}");
                assert!((0..=8_323_200).contains(&c), "{w} {x}: C {c}");
                let t = i64::from(b) * 256 + i64::from(c);
                assert!(i32::try_from(t).is_ok(), "{w} {x}: B 2^8 + C = {t}");
            }
        }
        // The worst B: high bytes -128 against low bytes 255 in both products.
        let (_, b, _) = sums(&[-32513; MAX_TERMS], &[-32513; MAX_TERMS]).unwrap();
        assert_eq!(b, -8_355_840);
    }

    #[test]
    fn quantising_rounds_to_even_and_clamps() {
        assert_eq!(quantise(0.5), 0);
        assert_eq!(quantise(1.5), 2);
        assert_eq!(quantise(-2.5), -2);
        assert_eq!(quantise(40000.0), 32767);
        assert_eq!(quantise(-40000.0), -32767);
        assert_eq!(quantise(f32::NAN), 32767);
        assert_eq!(quantise_h(1.0), 32767);
        assert_eq!(quantise_h(-1.0), -32767);
        assert_eq!(quantise_h(0.25), 8192);
        assert_eq!(split(-32767), (-128, 1));
        assert_eq!(split(32767), (127, 255));
        assert_eq!(split(-1), (-1, 255));
        assert_eq!(row_exponent(0.0), -96);
        assert_eq!(row_exponent(0.5), 0);
        assert_eq!(row_exponent(0.49), -1);
        assert_eq!(row_exponent(1.0), 1);
    }

    /// Against f64, a row's fixed-point dot is far closer than TF32 rounding would be: within
    /// 2^-14 of sum |r| (the products' own scale) for random rows and h in (-1, 1).
    #[test]
    fn the_dot_is_close_to_f64() {
        let mut rng = SplitMix64::new(7);
        let mut uniform = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        for scale in [1.0f64, 0.3, 1e-3, 40.0] {
            for _ in 0..100 {
                let row: Vec<f32> = (0..MAX_TERMS).map(|_| (uniform() * scale) as f32).collect();
                let h: Vec<f32> = (0..MAX_TERMS).map(|_| uniform() as f32).collect();
                let exact: f64 = row
                    .iter()
                    .zip(&h)
                    .map(|(&r, &x)| f64::from(r) * f64::from(x))
                    .sum();
                let size: f64 = row.iter().map(|&r| f64::from(r).abs()).sum();
                let got = f64::from(row_dot(&row, &h).unwrap());
                assert!(
                    (got - exact).abs() <= size / 16384.0,
                    "scale {scale}: {got} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn bad_rows_are_errors() {
        assert!(matches!(
            row_dot(&[1.0, 2.0], &[0.5]),
            Err(CoreError::Shape { .. })
        ));
        // Not refused, not a panic: a clamped value.
        assert!(row_dot(&[1.0, f32::INFINITY], &[0.5, 0.5]).is_ok());
        assert!(row_dot(&[1.0, f32::NAN], &[0.5, f32::NAN]).is_ok());
        assert!(matches!(
            sums(&[0; 129], &[0; 129]),
            Err(CoreError::Shape { .. })
        ));
    }

    #[test]
    fn sums_and_exponents_out_of_range_do_not_panic() {
        // B 2^8 + C wraps as the kernels' 32-bit arithmetic does: 2^23 2^8 = 2^31 wraps to
        // -2^31, so the dot is -2^31 2^(0 - 30) = -2.
        assert_eq!(dot_from_sums(0, 1 << 23, 0, 0), -2.0);
        // (2^31 - 1) 2^8 wraps to -256; plus 2^31 - 1 gives 2^31 - 257, rounded to 2^31 - 256.
        assert_eq!(
            dot_from_sums(0, i32::MAX, i32::MAX, 0),
            2.0 - (2.0f32).powi(-22)
        );
        // e clamped to -96 ..= 157: the scale stays a normal power of two.
        assert_eq!(
            dot_from_sums(1, 0, 0, i32::MIN),
            65536.0 * (2.0f32).powi(-126)
        );
        assert_eq!(dot_from_sums(0, 0, 1, i32::MAX), (2.0f32).powi(127));
    }

    /// The integer-pipe kernels' grouping (fixed1c*): each of 8 lanes sums its 16 terms four at
    /// a time (dp4a) into partial A, B, C, forms T = B 2^8 + C, and the lanes' (A, T) pairs are
    /// added in 32-bit wrapping arithmetic along the transpose-reduce's pairs; the result is the
    /// tensor-core kernels' A and B 2^8 + C, so the dot has the same bits, at the extremes too.
    #[test]
    fn lane_partial_sums_of_a_and_t_give_the_same_dot() {
        let mut rng = SplitMix64::new(25);
        let extreme = |r: u64| match r % 4 {
            0 => MAX_Q,
            1 => -MAX_Q,
            2 => -256,
            _ => 255,
        };
        for round in 0..300 {
            let draw = |rng: &mut SplitMix64| -> i16 {
                let r = rng.next_u64();
                let v = if round % 3 == 0 {
                    extreme(r)
                } else {
                    (r % 65535) as i32 - MAX_Q
                };
                v as i16
            };
            let q: Vec<i16> = (0..MAX_TERMS).map(|_| draw(&mut rng)).collect();
            let hq: Vec<i16> = (0..MAX_TERMS).map(|_| draw(&mut rng)).collect();
            let (a, b, c) = sums(&q, &hq).unwrap();
            // Lane j: terms 16 j .. 16 j + 15, in dp4a groups of four.
            let mut lanes: Vec<(i32, i32)> = (0..8)
                .map(|j| {
                    let (mut la, mut lb, mut lc) = (0i32, 0i32, 0i32);
                    for g in 0..4 {
                        let at = 16 * j + 4 * g;
                        let (ga, gb, gc) = sums(&q[at..at + 4], &hq[at..at + 4]).unwrap();
                        la += ga;
                        lb += gb;
                        lc += gc;
                    }
                    (la, lb.wrapping_mul(256).wrapping_add(lc))
                })
                .collect();
            // Lane offsets 1, 2, 4.
            for offset in [1, 2, 4] {
                for j in 0..8 {
                    if j & offset == 0 {
                        let (pa, pt) = lanes[j + offset];
                        lanes[j].0 = lanes[j].0.wrapping_add(pa);
                        lanes[j].1 = lanes[j].1.wrapping_add(pt);
                    }
                }
            }
            let (la, lt) = lanes[0];
            assert_eq!((la, lt), (a, b.wrapping_mul(256).wrapping_add(c)));
            for e in [-3, 0, 2] {
                assert_eq!(
                    dot_from_a_t(la, lt, e).to_bits(),
                    dot_from_sums(a, b, c, e).to_bits()
                );
            }
        }
    }

    /// The 4-window kernels' grouping (h's low byte less 128, the row's constant added back)
    /// gives `sums`' A and B 2^8 + C at every byte's extremes and for random rows.
    #[test]
    fn the_offset_planes_give_the_same_a_and_t() {
        let extremes: [i16; 8] = [-32767, -32513, -32640, 32767, 32639, -1, 0, 128];
        let mut rng = SplitMix64::new(11);
        let mut rows: Vec<(Vec<i16>, Vec<i16>)> = Vec::new();
        for &w in &extremes {
            for &x in &extremes {
                rows.push((vec![w; MAX_TERMS], vec![x; MAX_TERMS]));
            }
        }
        for _ in 0..200 {
            let mut draw = || {
                (0..MAX_TERMS)
                    .map(|_| ((rng.next_u64() % 65535) as i32 - MAX_Q) as i16)
                    .collect::<Vec<i16>>()
            };
            let q = draw();
            let hq = draw();
            rows.push((q, hq));
        }
        for (q, hq) in &rows {
            let (a, b, c) = sums(q, hq).unwrap();
            let (pa, pt) = a_t_from_offset_planes(q, hq).unwrap();
            assert_eq!((pa, pt), (a, b.wrapping_mul(256).wrapping_add(c)));
            assert_eq!(
                dot_from_a_t(pa, pt, 1).to_bits(),
                dot_from_sums(a, b, c, 1).to_bits()
            );
        }
        assert!(a_t_from_offset_planes(&[1, 2], &[1]).is_err());
    }

    #[test]
    fn auto_takes_the_largest_cluster_within_its_share_of_the_sms() {
        let simt = |cluster_size| FixedPick::Simt { cluster_size };
        let quad = |cluster_size| FixedPick::Quad { cluster_size };
        // The H200: 132 SMs (123 for the 8- and 4-CTA kernels).
        for (batch, want) in [
            (1, simt(8)),
            (7, simt(8)),
            (8, simt(4)),
            (15, simt(4)),
            (16, FixedPick::Pair { cluster_size: 4 }),
            (30, FixedPick::Pair { cluster_size: 4 }),
            (31, simt(2)),
            (33, simt(2)),
            (34, quad(4)),
            (48, quad(4)),
            (49, quad(2)),
            (132, quad(2)),
            (133, quad(1)),
            (264, quad(1)),
            (265, FixedPick::Tile),
            (1024, FixedPick::Tile),
            (usize::MAX, FixedPick::Tile),
        ] {
            assert_eq!(pick(batch, 132), want, "batch {batch}");
        }
        // Fewer SMs: smaller clusters sooner; none at all on a GPU too small for one.
        assert_eq!(pick(1, 18), simt(8));
        assert_eq!(pick(1, 17), simt(4));
        assert_eq!(pick(1, 9), simt(4));
        assert_eq!(pick(1, 8), simt(2));
        assert_eq!(pick(1, 3), quad(1));
        assert_eq!(pick(1, 1), FixedPick::Tile);
        // Launch shapes: (CTAs a cluster, windows a cluster).
        assert_eq!(simt(8).launch(), (8, 1));
        assert_eq!(quad(2).launch(), (2, 4));
        assert_eq!(FixedPick::Pair { cluster_size: 4 }.launch(), (4, 2));
        // Names: each built kernel's, and no kernel's name for a size none is built for.
        assert_eq!(FixedPick::Pair { cluster_size: 4 }.name(), "fixed2c4");
        assert_eq!(quad(1).name(), "fixed4");
        assert_eq!(simt(3).name(), "none (no such kernel)");
        assert_eq!(quad(16).name(), "none (no such kernel)");
        assert_eq!(FixedPick::Tile.launch(), (1, 8));
    }
}
