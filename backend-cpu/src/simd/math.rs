//! `exp`, `sigmoid` and `tanh` over eight lanes, from [`Lanes`] operations only (so AVX2 and
//! portable give the same bits).
//!
//! # Accuracy (measured by the tests below against f64)
//! - [`exp_n`]: Cephes' `expf` construction: the input clamped to `[-87, 88]`, `n = round(x ·
//!   log2 e)`, `r = x - n·ln 2` in two FMA steps (ln 2 split as 0.693359375 + -2.12194440e-4),
//!   a degree-5 polynomial `e^r ≈ 1 + r + r²·P(r)`, then an exact multiply by `2^n`. At most
//!   1 ulp from the exact value over `[-87, 88]` (measured: 0.990 ulp on 2^20 points,
//!   `exp_ulp_error`).
//! - [`sigmoid_n`] `= 1 / (1 + exp(-x))`: relative error 1.42e-7 at most over `[-87, 87]`
//!   (bound tested: 1.5e-7).
//! - [`tanh_n`]: Cephes' `tanhf` odd polynomial for `|x| < 0.625`, else
//!   `±(1 - 2 / (exp(2|x|) + 1))`: absolute error 7.4e-8 and relative 1.33e-7 at most
//!   (bounds tested: 8e-8, 1.5e-7; `gate_function_errors`).
//!
//! # Special values
//! `exp` saturates: below -87 it returns `exp(-87)` (1.6e-38), above 88 `exp(88)` (1.65e38).
//! `sigmoid` returns +0 where its quotient would be subnormal (arguments below about -87.3),
//! so `sigmoid(-inf)` is 0 and no saturated gate produces a subnormal; `sigmoid(+inf)` is 1,
//! `tanh(±inf)` is ±1, `tanh(-0)` is +0. NaN stays NaN in all three.

#![allow(
    clippy::needless_range_loop,
    reason = "indexed loops over several arrays at once read best here, and closures are avoided"
)]

use super::Lanes;

const EXP_LO: f32 = -87.0;
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
const TANH_SMALL: f32 = 0.625;
const TANH_P: [f32; 5] = [
    -5.704_988_7e-3,
    2.063_909e-2,
    -5.373_971_6e-2,
    1.333_144_2e-1,
    -3.333_328e-1,
];

// The functions below take `N` vectors and run every step on all `N` before the next step,
// so `N` independent dependency chains interleave and the core's out-of-order window hides
// their latency (the gate math of one panel is a long chain: exp, divide, cell, exp,
// divide). Plain indexed loops, no closures: a closure would not inherit the kernels'
// `target_feature` and the intrinsics inside would not be inlined.

/// `e^x` per lane of `N` vectors (see the [module docs](self) for the accuracy and clamping).
#[inline(always)]
pub(crate) fn exp_n<V: Lanes, const N: usize>(x: [V; N]) -> [V; N] {
    let mut x = x;
    let mut n = x;
    let mut r = x;
    for j in 0..N {
        x[j] = V::splat(EXP_HI).min_x86(V::splat(EXP_LO).max_x86(x[j]));
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
    let mut y = p;
    for j in 0..N {
        let z = r[j].mul(r[j]);
        y[j] = p[j].mul_add(z, r[j]).add(V::splat(1.0)).mul(n[j].pow2i());
    }
    y
}

/// `1 / (1 + e^-x)` per lane of `N` vectors.
#[inline(always)]
pub(crate) fn sigmoid_n<V: Lanes, const N: usize>(x: [V; N]) -> [V; N] {
    let one = V::splat(1.0);
    let mut m = x;
    for j in 0..N {
        m[j] = x[j].neg();
    }
    let mut e = exp_n(m);
    for j in 0..N {
        e[j] = one.div(one.add(e[j]));
    }
    // Below -87.3 the quotient is subnormal (6.1e-39 at the clamp): return +0 there, so a
    // saturated gate never feeds subnormals into the cell and hidden-state products (they
    // take a microcode assist on many x86 cores; inputs of 1e30 ran 20x slower). Arguments
    // above -87.3 never reach this branch, so their bits are unchanged; NaN stays NaN (the
    // comparison is false).
    for j in 0..N {
        e[j] = e[j].select_lt(V::splat(f32::MIN_POSITIVE), V::splat(0.0), e[j]);
    }
    e
}

/// `tanh x` per lane of `N` vectors.
#[inline(always)]
pub(crate) fn tanh_n<V: Lanes, const N: usize>(x: [V; N]) -> [V; N] {
    let one = V::splat(1.0);
    let mut ax = x;
    let mut twice = x;
    let mut z = x;
    for j in 0..N {
        ax[j] = x[j].abs();
        twice[j] = ax[j].add(ax[j]);
        z[j] = x[j].mul(x[j]);
    }
    let e = exp_n(twice);
    let mut p = [V::splat(TANH_P[0]); N];
    for &c in &TANH_P[1..] {
        for j in 0..N {
            p[j] = p[j].mul_add(z[j], V::splat(c));
        }
    }
    let mut out = x;
    for j in 0..N {
        let small = p[j].mul(z[j]).mul_add(x[j], x[j]);
        let large = one.sub(V::splat(2.0).div(e[j].add(one))).or_sign_of(x[j]);
        out[j] = ax[j].select_lt(V::splat(TANH_SMALL), small, large);
    }
    out
}

/// `e^x` per lane.
#[cfg(test)]
#[inline(always)]
pub(crate) fn exp<V: Lanes>(x: V) -> V {
    exp_n([x])[0]
}

/// `1 / (1 + e^-x)` per lane.
#[cfg(test)]
#[inline(always)]
pub(crate) fn sigmoid<V: Lanes>(x: V) -> V {
    sigmoid_n([x])[0]
}

/// `tanh x` per lane.
#[cfg(test)]
#[inline(always)]
pub(crate) fn tanh<V: Lanes>(x: V) -> V {
    tanh_n([x])[0]
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

    /// Runs `f` on eight-lane chunks of `xs` with every ISA, checks the ISAs agree bit for bit
    /// and hands each lane's results (sigmoid, tanh, exp) to `check`.
    fn sweep(xs: &[f32], mut check: impl FnMut(f32, [f32; 3])) {
        for chunk in xs.chunks_exact(8) {
            let x: [f32; 8] = chunk.try_into().unwrap();
            let results: Vec<_> = Isa::available()
                .into_iter()
                .map(|isa| eval_math(isa, &x))
                .collect();
            for r in &results[1..] {
                for k in 0..3 {
                    for l in 0..8 {
                        assert_eq!(
                            r[k][l].to_bits(),
                            results[0][k][l].to_bits(),
                            "isas differ at x = {}",
                            x[l]
                        );
                    }
                }
            }
            for l in 0..8 {
                let r = &results[0];
                check(x[l], [r[0][l], r[1][l], r[2][l]]);
            }
        }
    }

    fn grid(lo: f32, hi: f32, n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| lo + (hi - lo) * (i as f32 / (n - 1) as f32))
            .collect()
    }

    #[test]
    fn exp_ulp_error() {
        let mut worst = 0.0f64;
        sweep(&grid(-87.0, 88.0, 1 << 20), |x, [_, _, e]| {
            worst = worst.max(ulps(e, (x as f64).exp()));
        });
        println!("exp: max error {worst:.3} ulp over [-87, 88]");
        assert!(worst <= 1.0, "{worst}");
    }

    #[test]
    fn gate_function_errors() {
        let (mut sig_rel, mut tanh_abs, mut tanh_rel) = (0.0f64, 0.0f64, 0.0f64);
        let mut xs = grid(-87.0, 87.0, 1 << 20);
        xs.extend(grid(-1.0, 1.0, 1 << 16));
        xs.extend(grid(-1e-3, 1e-3, 1 << 12));
        sweep(&xs, |x, [s, t, _]| {
            let xd = x as f64;
            let sd = 1.0 / (1.0 + (-xd).exp());
            sig_rel = sig_rel.max((s as f64 - sd).abs() / sd);
            let td = xd.tanh();
            tanh_abs = tanh_abs.max((t as f64 - td).abs());
            if td != 0.0 {
                tanh_rel = tanh_rel.max((t as f64 - td).abs() / td.abs());
            }
        });
        println!("sigmoid rel {sig_rel:.3e}, tanh abs {tanh_abs:.3e} rel {tanh_rel:.3e}");
        assert!(sig_rel <= 1.5e-7, "{sig_rel}");
        assert!(tanh_abs <= 8e-8, "{tanh_abs}");
        assert!(tanh_rel <= 1.5e-7, "{tanh_rel}");
    }

    /// Subnormal gate values make the recurrence's products slow on many x86 cores (inputs of
    /// 1e30 ran 20x slower): no argument, however large, gives one.
    #[test]
    fn gate_functions_never_return_subnormals() {
        let mut xs = grid(-1e4, 1e4, 1 << 14);
        xs.extend(grid(-90.0, -85.0, 1 << 12));
        xs.extend([
            -1e30f32,
            1e30,
            f32::MIN,
            f32::MAX,
            -87.3,
            -87.4,
            -87.5,
            -88.0,
        ]);
        while !xs.len().is_multiple_of(8) {
            xs.push(0.0);
        }
        sweep(&xs, |x, [s, t, _]| {
            assert!(!s.is_subnormal(), "sigmoid({x}) = {s:e}");
            assert!(!t.is_subnormal(), "tanh({x}) = {t:e}");
        });
    }

    #[test]
    fn special_values() {
        let x = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            200.0,
            -200.0,
            1e-30,
        ];
        for isa in Isa::available() {
            let [s, t, e] = eval_math(isa, &x);
            assert!(s[0].is_nan() && t[0].is_nan() && e[0].is_nan());
            assert_eq!((s[1], t[1]), (1.0, 1.0));
            // A saturated sigmoid is exactly +0, not the subnormal 6.1e-39.
            assert_eq!(s[2].to_bits(), 0);
            assert_eq!(t[2], -1.0);
            assert_eq!((s[3], t[3], e[3]), (0.5, 0.0, 1.0));
            assert_eq!(t[4], 0.0);
            assert_eq!((s[5], t[5], s[6], t[6]), (1.0, 1.0, s[2], -1.0));
            assert_eq!(t[7], 1e-30);
        }
    }
}
