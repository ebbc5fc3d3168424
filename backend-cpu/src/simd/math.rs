//! The LSTM cell's gate functions and update ([`cell_n`]) and `exp`, over any [`Arith`]
//! vector, from IEEE operations only (so every instruction set gives the same bits).
//!
//! # Construction and accuracy (measured by the tests below against f64)
//! - `e^x` and `e^x - 1` share Cephes' `expf` reduction: `n = round(x·log2 e)`, `r = x - n·ln
//!   2` in two FMA steps (ln 2 split as 0.693359375 + -2.12194440e-4), a degree-5 polynomial
//!   `e^r - 1 ≈ r + r²·P(r)`; then `e^x = (1 + (e^r - 1))·2^n` (at most 1 ulp over `[-87,
//!   88]`, measured 0.990 on 2^20 points) and `e^x - 1 = 2^n·(e^r - 1) + (2^n - 1)` in one FMA
//!   (1.375 ulp; exactly the polynomial near 0, so no cancellation), `exp_and_expm1_errors`.
//! - [`cell_n`] writes `σ(a) = 1 / (1 + e^-a)` and `tanh(x) = -(e^(-2x) - 1) / (2 + (e^(-2x)
//!   - 1))` over common denominators, so a unit's step takes five exponentials and two
//!   divisions (the first CPU kernels took five divisions: on the Xeon development machine the
//!   gate math then took 0.24-0.32 ms a layer-direction and window, against 0.15-0.21 with
//!   this form on 16 lanes, `bench/NOTES.md` session 12). `c'` is within 3.1e-7 of
//!   `|σ(a_f)·c| + |σ(a_i)·tanh(a_g)|` and `h` within 2.1e-7 of `σ(a_o)` plus what `c'`'s
//!   error moves it (bounds tested: 4e-7, 3e-7; `cell_errors`).
//!
//! # Special values
//! The cell clamps its sigmoid arguments to `[-25, 25]` and its tanh arguments to `[-12.5,
//! 12.5]` ([`CELL_BOUND`]): no product overflows, a saturated gate is 1 or `σ(-25) = 1.4e-11`
//! (never 0, never subnormal), and `σ(±inf)`, `tanh(±inf)` are those limits. NaN in a gate
//! or in `c` gives NaN. `exp` (tests only) clamps to `[-87, 88]`.

#![allow(
    clippy::needless_range_loop,
    reason = "indexed loops over several arrays at once read best here, and closures are avoided"
)]

use super::Arith;

#[cfg(test)]
const EXP_LO: f32 = -87.0;
#[cfg(test)]
const EXP_HI: f32 = 88.0;
const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
const EXP_P: [f32; 6] = [
    1.987_569_1e-4,
    1.398_2e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    5e-1,
];

// The functions below take `N` vectors and run every step on all `N` before the next step,
// so `N` independent dependency chains interleave and the core's out-of-order window hides
// their latency (the gate math of one panel is a long chain: exp, divide, cell, exp,
// divide). Plain indexed loops, no closures: a closure would not inherit the kernels'
// `target_feature` and the intrinsics inside would not be inlined.

/// `(2^n, e^r - 1)` per lane of `N` vectors with `x = n·ln 2 + r`, `n = round(x·log2 e)`, for
/// `x` already inside `[-87, 88]` (the callers clamp): `r` in two FMA steps, then `e^r - 1 ≈ r +
/// r²·P(r)`.
#[inline(always)]
fn exp_parts_n<V: Arith, const N: usize>(x: [V; N]) -> ([V; N], [V; N]) {
    let mut n = x;
    let mut r = x;
    for j in 0..N {
        n[j] = x[j].mul(V::splat(LOG2E)).round_even();
    }
    for j in 0..N {
        r[j] = n[j].mul_add(V::splat(-LN2_HI), x[j]);
    }
    for j in 0..N {
        r[j] = n[j].mul_add(V::splat(-LN2_LO), r[j]);
    }
    let mut p = [V::splat(EXP_P[0]); N];
    for &c in &EXP_P[1..] {
        for j in 0..N {
            p[j] = p[j].mul_add(r[j], V::splat(c));
        }
    }
    for j in 0..N {
        let z = r[j].mul(r[j]);
        p[j] = p[j].mul_add(z, r[j]);
        n[j] = n[j].pow2i();
    }
    (n, p)
}

/// `e^x` per lane of `N` vectors for `x` inside `[-87, 88]`: `(1 + (e^r - 1))·2^n`.
#[inline(always)]
fn exp_in_range_n<V: Arith, const N: usize>(x: [V; N]) -> [V; N] {
    let (s, mut y) = exp_parts_n(x);
    for j in 0..N {
        y[j] = y[j].add(V::splat(1.0)).mul(s[j]);
    }
    y
}

/// `e^x - 1` per lane of `N` vectors for `x` inside `[-87, 88]`: `2^n·(e^r - 1) + (2^n - 1)`
/// in one FMA (exactly `e^r - 1` where `n = 0`, so no cancellation near 0).
#[inline(always)]
fn expm1_in_range_n<V: Arith, const N: usize>(x: [V; N]) -> [V; N] {
    let (s, mut y) = exp_parts_n(x);
    for j in 0..N {
        y[j] = s[j].mul_add(y[j], s[j].sub(V::splat(1.0)));
    }
    y
}

/// `x` clamped to `[lo, hi]`; NaN stays NaN.
#[inline(always)]
fn clamp<V: Arith>(x: V, lo: f32, hi: f32) -> V {
    V::splat(hi).min_x86(V::splat(lo).max_x86(x))
}

/// `e^x` per lane of `N` vectors, the argument clamped to `[-87, 88]` (tests).
#[cfg(test)]
#[inline(always)]
pub(crate) fn exp_n<V: Arith, const N: usize>(x: [V; N]) -> [V; N] {
    let mut x = x;
    for v in &mut x {
        *v = clamp(*v, EXP_LO, EXP_HI);
    }
    exp_in_range_n(x)
}

/// `e^x - 1` per lane of `N` vectors, the argument clamped to `[-87, 88]` as [`exp_n`]'s
/// (tests).
#[cfg(test)]
#[inline(always)]
pub(crate) fn expm1_n<V: Arith, const N: usize>(x: [V; N]) -> [V; N] {
    let mut x = x;
    for v in &mut x {
        *v = clamp(*v, EXP_LO, EXP_HI);
    }
    expm1_in_range_n(x)
}

/// The largest `|a|` the cell's sigmoid arguments keep (and `2|x|` its tanh arguments):
/// `σ(a)` is `1 / (1 + e^-a)` of `a` clamped to `[-CELL_BOUND, CELL_BOUND]`, so every
/// product in [`cell_n`] stays below `e^(3·25) = 3.7e32` (no overflow), no gate is below
/// `σ(-25) = 1.4e-11` (no subnormals), and the clamp changes no value above `-25` (`σ(25)`
/// and `tanh(12.5)` round to 1).
pub(crate) const CELL_BOUND: f32 = 25.0;

/// One LSTM cell step per lane of `N` vectors: from the pre-activations `a = [i, f, g, o]`
/// (bias included) and the cell state `c`, the new cell state and hidden state, with two
/// divisions instead of five:
///
/// - `E_x = e^(-a_x)` for `x` in `i, f, o`, `M_g = e^(-2·a_g) - 1` (arguments clamped as
///   [`CELL_BOUND`] says), so `σ(a_x) = 1 / (1 + E_x)` and `tanh(a_g) = -M_g / (2 + M_g)`;
/// - `P = (1 + E_i)·(2 + M_g)`, `Q = 1 + E_f`, `c' = (c·P - M_g·Q) / (Q·P)`
///   (`= σ(a_f)·c + σ(a_i)·tanh(a_g)`);
/// - `M_c = e^(-2c') - 1`, `h = (0 - M_c) / ((1 + E_o)·(2 + M_c))` (`= σ(a_o)·tanh(c')`).
#[inline(always)]
pub(crate) fn cell_n<V: Arith, const N: usize>(a: [[V; N]; 4], c: [V; N]) -> ([V; N], [V; N]) {
    let one = V::splat(1.0);
    let two = V::splat(2.0);
    let [ai, af, ag, ao] = a;
    let mut x = [[one; N]; 4];
    for j in 0..N {
        x[0][j] = clamp(ai[j], -CELL_BOUND, CELL_BOUND).neg();
        x[1][j] = clamp(af[j], -CELL_BOUND, CELL_BOUND).neg();
        x[2][j] = clamp(ao[j], -CELL_BOUND, CELL_BOUND).neg();
        x[3][j] = clamp(ag[j], -0.5 * CELL_BOUND, 0.5 * CELL_BOUND).mul(V::splat(-2.0));
    }
    let ei = exp_in_range_n(x[0]);
    let ef = exp_in_range_n(x[1]);
    let eo = exp_in_range_n(x[2]);
    let mg = expm1_in_range_n(x[3]);
    let mut cn = c;
    for j in 0..N {
        let p = one.add(ei[j]).mul(two.add(mg[j]));
        let q = one.add(ef[j]);
        let num = c[j].mul_add(p, mg[j].mul(q).neg());
        cn[j] = num.div(q.mul(p));
    }
    let mut xc = cn;
    for j in 0..N {
        xc[j] = clamp(cn[j], -0.5 * CELL_BOUND, 0.5 * CELL_BOUND).mul(V::splat(-2.0));
    }
    let mc = expm1_in_range_n(xc);
    let mut h = cn;
    for j in 0..N {
        // `0 - M_c`, not `-M_c`: `h` is +0, not -0, where `c'` is 0.
        h[j] = V::splat(0.0)
            .sub(mc[j])
            .div(one.add(eo[j]).mul(two.add(mc[j])));
    }
    (cn, h)
}

#[cfg(test)]
mod tests {
    use crate::simd::{Isa, eval_math};

    /// Distance in units in the last place of `want`'s f32 rounding.
    fn ulps(got: f32, want: f64) -> f64 {
        let w = want as f32;
        let ulp = (f32::from_bits(w.abs().to_bits() + 1) - w.abs()) as f64;
        (got as f64 - want).abs() / ulp
    }

    /// Runs the cell and exponential functions on sixteen-lane chunks of `(a, c)` pairs with
    /// every ISA, checks the ISAs agree bit for bit and hands each lane's inputs and results
    /// (`[c', h, e^a_i, e^a_i - 1]`) to `check`.
    fn sweep(xs: &[([f32; 4], f32)], mut check: impl FnMut([f32; 4], f32, [f32; 4])) {
        for chunk in xs.chunks_exact(16) {
            let x: [[f32; 16]; 5] = std::array::from_fn(|q| {
                std::array::from_fn(|l| if q < 4 { chunk[l].0[q] } else { chunk[l].1 })
            });
            let results: Vec<_> = Isa::available()
                .into_iter()
                .map(|isa| eval_math(isa, &x))
                .collect();
            for r in &results[1..] {
                for k in 0..4 {
                    for l in 0..16 {
                        assert_eq!(
                            r[k][l].to_bits(),
                            results[0][k][l].to_bits(),
                            "isas differ at {:?}",
                            chunk[l]
                        );
                    }
                }
            }
            for (l, (a, c)) in chunk.iter().enumerate() {
                let r = &results[0];
                check(*a, *c, [r[0][l], r[1][l], r[2][l], r[3][l]]);
            }
        }
    }

    fn grid(lo: f32, hi: f32, n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| lo + (hi - lo) * (i as f32 / (n - 1) as f32))
            .collect()
    }

    /// Each value as `a_i` of a lane (the exponentials' argument), the other inputs 0.
    fn as_ai(xs: &[f32]) -> Vec<([f32; 4], f32)> {
        xs.iter().map(|&x| ([x, 0.0, 0.0, 0.0], 0.0)).collect()
    }

    #[test]
    fn exp_and_expm1_errors() {
        let (mut exp_worst, mut expm1_worst) = (0.0f64, 0.0f64);
        let mut xs = grid(-87.0, 88.0, 1 << 20);
        xs.extend(grid(-1.0, 1.0, 1 << 16));
        xs.extend(grid(-1e-3, 1e-3, 1 << 12));
        sweep(&as_ai(&xs), |[x, ..], _, [_, _, e, m]| {
            exp_worst = exp_worst.max(ulps(e, (x as f64).exp()));
            expm1_worst = expm1_worst.max(ulps(m, (x as f64).exp_m1()));
        });
        println!("exp: max error {exp_worst:.3} ulp, expm1 {expm1_worst:.3} ulp over [-87, 88]");
        assert!(exp_worst <= 1.0, "{exp_worst}");
        assert!(expm1_worst <= 2.0, "{expm1_worst}");
    }

    /// The cell against f64 (`σ`, `tanh` and the update in f64 from the same f32 inputs, the
    /// arguments clamped as [`super::CELL_BOUND`] says):
    /// `c'` within `4e-7·(|σ(a_f)·c| + |σ(a_i)·tanh(a_g)|)`, `h` within `3e-7·σ(a_o)` plus
    /// what the error of `c'` moves it (`|dh/dc'| ≤ σ(a_o)`).
    #[test]
    fn cell_errors() {
        let mut rng = bilstm_core::rng::SplitMix64::new(17);
        let mut xs = Vec::new();
        for range in [1.0f32, 4.0, 10.0, 30.0] {
            let mut v = vec![0.0f32; 5 << 16];
            rng.fill_uniform_f32(&mut v, -range, range);
            xs.extend(
                v.chunks_exact(5)
                    .map(|q| ([q[0], q[1], q[2], q[3]], q[4] / range * 3.0)),
            );
        }
        let (mut c_worst, mut h_worst) = (0.0f64, 0.0f64);
        sweep(&xs, |a, c, [cn, h, ..]| {
            // The documented function: arguments clamped to ±CELL_BOUND (tanh's to half).
            let b = super::CELL_BOUND as f64;
            let sig = |x: f32| 1.0 / (1.0 + (-(x as f64).clamp(-b, b)).exp());
            let tanh = |x: f32| (x as f64).clamp(-b / 2.0, b / 2.0).tanh();
            let (fc, ig) = (sig(a[1]) * c as f64, sig(a[0]) * tanh(a[2]));
            let c_want = fc + ig;
            let c_err = (cn as f64 - c_want).abs() / (fc.abs() + ig.abs()).max(1e-30);
            let so = sig(a[3]);
            let h_want = so * c_want.tanh();
            let h_err = ((h as f64 - h_want).abs() - so * (cn as f64 - c_want).abs()).max(0.0) / so;
            c_worst = c_worst.max(c_err);
            h_worst = h_worst.max(h_err);
        });
        println!("cell: c' error {c_worst:.3e} of its terms, h error {h_worst:.3e} of σ(a_o)");
        assert!(c_worst <= 4e-7, "{c_worst}");
        assert!(h_worst <= 3e-7, "{h_worst}");
    }

    /// Subnormal values make the recurrence's products slow on many x86 cores (inputs of
    /// 1e30 ran 20x slower): no pre-activation, however large, gives one in `c'` or `h` where
    /// the old cell state is normal.
    #[test]
    fn cell_never_returns_subnormals() {
        let mut big = grid(-1e4, 1e4, 1 << 10);
        big.extend(grid(-90.0, 90.0, 1 << 10));
        big.extend([-1e30f32, 1e30, f32::MIN, f32::MAX, -87.3, -25.0, 25.0, 12.5]);
        big.extend([f32::INFINITY, f32::NEG_INFINITY]);
        let mut xs = Vec::new();
        for (n, &x) in big.iter().enumerate() {
            for c in [1.0f32, -0.5, 1e-30, 3.0] {
                let y = big[(n * 7 + 3) % big.len()];
                xs.push(([x, y, x, y], c));
                xs.push(([y, x, -x, x], c));
            }
        }
        while !xs.len().is_multiple_of(16) {
            xs.push(([0.0; 4], 0.0));
        }
        sweep(&xs, |a, c, [cn, h, ..]| {
            assert!(
                !cn.is_subnormal() && cn.is_finite(),
                "c'({a:?}, {c}) = {cn:e}"
            );
            assert!(!h.is_subnormal() && h.is_finite(), "h({a:?}, {c}) = {h:e}");
        });
    }

    #[test]
    fn special_values() {
        let nan = f32::NAN;
        let cases: [([f32; 4], f32); 8] = [
            ([nan, 0.0, 0.0, 0.0], 1.0),
            ([0.0, nan, 0.0, 0.0], 1.0),
            ([0.0, 0.0, nan, 0.0], 1.0),
            ([0.0, 0.0, 0.0, nan], 1.0),
            ([0.0, 0.0, 0.0, 0.0], nan),
            ([0.0, 0.0, 0.0, 0.0], 0.0),
            (
                [
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                    f32::INFINITY,
                    f32::INFINITY,
                ],
                5.0,
            ),
            (
                [
                    f32::INFINITY,
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                    f32::NEG_INFINITY,
                ],
                0.5,
            ),
        ];
        for isa in Isa::available() {
            let x: [[f32; 16]; 5] = std::array::from_fn(|q| {
                std::array::from_fn(|l| {
                    let (a, c) = cases[l % cases.len()];
                    if q < 4 { a[q] } else { c }
                })
            });
            let [cn, h, ..] = eval_math(isa, &x);
            for l in 0..3 {
                assert!(cn[l].is_nan() && h[l].is_nan(), "{isa}: NaN in gate {l}");
            }
            // A NaN output gate leaves c' alone.
            assert!(cn[3].is_finite() && h[3].is_nan(), "{isa}: NaN in gate o");
            assert!(cn[4].is_nan() && h[4].is_nan(), "{isa}: NaN cell state");
            // All gates 0 and c = 0: c' and h are +0 (not -0).
            assert_eq!((cn[5].to_bits(), h[5].to_bits()), (0, 0), "{isa}");
            // i = o = 1, f = σ(-25) (the clamp), g = 1: c' = 1 + 5·σ(-25), h = tanh(c').
            let f = 1.0 / (1.0 + 25f64.exp());
            assert!(
                ((cn[6] as f64) - (1.0 + 5.0 * f)).abs() < 1.2e-7,
                "{isa}: {}",
                cn[6]
            );
            assert!(
                ((h[6] as f64) - (cn[6] as f64).tanh()).abs() < 1.2e-7,
                "{isa}: {}",
                h[6]
            );
            // i = f = 1, g = -1, o = σ(-25): c' = -0.5, h = σ(-25)·tanh(-0.5).
            assert_eq!(cn[7], -0.5, "{isa}");
            let h_want = f * (-0.5f64).tanh();
            assert!(
                ((h[7] as f64) - h_want).abs() < 2e-7 * h_want.abs(),
                "{isa}: {}",
                h[7]
            );
        }
    }
}
