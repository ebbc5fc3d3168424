//! The CPU backend's arithmetic kernels, written once over a vector of eight `f32` lanes
//! ([`Lanes`]) and compiled three times: for AVX2 + FMA and for AVX2 + FMA with AVX-512VL's 32
//! registers ([`x86`], entered only after run-time detection), and portably ([`portable`],
//! plain Rust with `f32::mul_add`).
//!
//! # Same bits on every path
//! Every operation of [`Lanes`] is one IEEE-754 operation per lane, rounded to nearest-even:
//! add, sub, mul, div, fused multiply-add, round-to-integral (ties to even), and exact bit
//! manipulations (sign, `2^n` construction, selection). The x86 instructions and the Rust
//! scalar operations used by the portable path compute exactly the same value for each, and
//! `min`/`max` are defined with x86's operand rule (`a > b ? a : b`) in both. The two x86
//! builds run the same 256-bit operations (AVX-512VL only adds registers, so tiles can be
//! larger; tiling never changes a value's chain of operations). So every path gives
//! bit-identical results for finite data (`tests` check it); NaN payloads may differ.
//!
//! # Where `unsafe` is
//! Only in [`x86`]: its kernels are `#[target_feature(enable = ...)] unsafe fn`, called from
//! the dispatchers below only when [`Isa`] says those features were detected
//! (`is_x86_feature_detected!`, done once in [`Isa::detect`] from `CpuBackend::new`).

#![allow(
    unsafe_code,
    reason = "SIMD intrinsics; every unsafe block has a SAFETY comment"
)]

pub(crate) mod kernels;
pub(crate) mod math;
mod portable;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::fmt;

/// Eight `f32` lanes and the IEEE operations the kernels use (see the [module docs](self)).
pub(crate) trait Lanes: Copy {
    /// All lanes `v`.
    fn splat(v: f32) -> Self;
    /// Loads eight values.
    fn load(src: &[f32; 8]) -> Self;
    /// Stores eight values.
    fn store(self, dst: &mut [f32; 8]);
    /// `self + b`.
    fn add(self, b: Self) -> Self;
    /// `self - b`.
    fn sub(self, b: Self) -> Self;
    /// `self * b`.
    fn mul(self, b: Self) -> Self;
    /// `self / b` (correctly rounded).
    fn div(self, b: Self) -> Self;
    /// `self * b + c` with one rounding.
    fn mul_add(self, b: Self, c: Self) -> Self;
    /// `self > b ? self : b` per lane (x86 `maxps`: a NaN in either gives `b`).
    fn max_x86(self, b: Self) -> Self;
    /// `self < b ? self : b` per lane (x86 `minps`: a NaN in either gives `b`).
    fn min_x86(self, b: Self) -> Self;
    /// Rounds to an integral value, ties to even.
    fn round_even(self) -> Self;
    /// `2^n` for lanes holding integral `n` in `-126..=127`.
    fn pow2i(self) -> Self;
    /// Clears the sign bit.
    fn abs(self) -> Self;
    /// Flips the sign bit.
    fn neg(self) -> Self;
    /// `self` with the sign bit of `sign` or-ed in (`self` must be non-negative).
    fn or_sign_of(self, sign: Self) -> Self;
    /// Per lane: `self < limit ? then : other` (false for NaN).
    fn select_lt(self, limit: Self, then: Self, other: Self) -> Self;
    /// Hints that the cache line holding `src[0]` will be read soon (changes no value; the
    /// portable path does nothing).
    #[inline(always)]
    fn prefetch(_src: &[f32]) {}
}

/// Which instruction set the kernels run with, decided once at run time.
///
/// A value naming an x86 feature set exists only after [`Isa::detect`] found it on this CPU
/// (the field is private), which is what makes calling those kernels sound. Every kind gives
/// the same bits (each lane operation is one IEEE-754 operation, computed alike by all).
/// Ordered from the portable path (least) to AVX2 + FMA with AVX-512VL (greatest).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Isa(IsaKind);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum IsaKind {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2Fma,
    #[cfg(target_arch = "x86_64")]
    Avx512Vl,
}

impl Isa {
    /// The best instruction set this CPU has: AVX2 + FMA with AVX-512F and AVX-512VL when
    /// `is_x86_feature_detected!` reports all four, else AVX2 + FMA when it reports both, else
    /// the portable path.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") && has!("fma") {
                if has!("avx512f") && has!("avx512vl") {
                    return Isa(IsaKind::Avx512Vl);
                }
                return Isa(IsaKind::Avx2Fma);
            }
        }
        Isa(IsaKind::Portable)
    }

    /// The portable path (plain Rust, `f32::mul_add`): the same bits as the x86 kernels, far
    /// slower where the CPU has no FMA instruction.
    pub fn portable() -> Self {
        Isa(IsaKind::Portable)
    }

    /// [`Isa::detect`], but no better than the set `name`d: `"portable"`, `"avx2"` (AVX2 +
    /// FMA) or `"avx512"` (the same with AVX-512VL's registers). `None` for any other name.
    /// Used for the environment variable `BILSTM_CPU_ISA` and to compare the paths on one host.
    pub fn detect_at_most(name: &str) -> Option<Self> {
        let best = Self::detect();
        let cap = match name {
            "portable" => IsaKind::Portable,
            #[cfg(target_arch = "x86_64")]
            "avx2" => IsaKind::Avx2Fma,
            #[cfg(target_arch = "x86_64")]
            "avx512" => IsaKind::Avx512Vl,
            #[cfg(not(target_arch = "x86_64"))]
            "avx2" | "avx512" => IsaKind::Portable,
            _ => return None,
        };
        Some(best.min(Isa(cap)))
    }

    /// Every instruction set this CPU can run, portable first, best last.
    pub fn available() -> Vec<Self> {
        let mut all: Vec<Self> = ["portable", "avx2", "avx512"]
            .into_iter()
            .filter_map(Self::detect_at_most)
            .collect();
        all.dedup();
        all
    }

    /// Whether x86 kernels (AVX2 + FMA, with or without AVX-512VL) run.
    pub fn is_avx2_fma(self) -> bool {
        !matches!(self.0, IsaKind::Portable)
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            IsaKind::Portable => "portable",
            #[cfg(target_arch = "x86_64")]
            IsaKind::Avx2Fma => "avx2+fma",
            #[cfg(target_arch = "x86_64")]
            IsaKind::Avx512Vl => "avx2+fma+avx512vl",
        })
    }
}

/// The input projection (see [`kernels::project`]) with `isa`'s kernels.
pub(crate) fn project(isa: Isa, args: &kernels::Projection<'_>, out: &mut [f32]) {
    match isa.0 {
        IsaKind::Portable => portable::project(args, out),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `IsaKind::Avx2Fma` is only built by `Isa::detect` after
        // `is_x86_feature_detected!` found AVX2 and FMA on this CPU.
        IsaKind::Avx2Fma => unsafe { x86::avx2::project(args, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `IsaKind::Avx512Vl` is only built by `Isa::detect` after
        // `is_x86_feature_detected!` found AVX2, FMA, AVX-512F and AVX-512VL on this CPU.
        IsaKind::Avx512Vl => unsafe { x86::avx512::project(args, out) },
    }
}

/// One direction's recurrence (see [`kernels::recurrence`]) with `isa`'s kernels.
pub(crate) fn recurrence(isa: Isa, args: &kernels::Recurrence<'_>, state: kernels::State<'_>) {
    match isa.0 {
        IsaKind::Portable => portable::recurrence(args, state),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `IsaKind::Avx2Fma` is only built by `Isa::detect` after
        // `is_x86_feature_detected!` found AVX2 and FMA on this CPU.
        IsaKind::Avx2Fma => unsafe { x86::avx2::recurrence(args, state) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `IsaKind::Avx512Vl` is only built by `Isa::detect` after
        // `is_x86_feature_detected!` found AVX2, FMA, AVX-512F and AVX-512VL on this CPU.
        IsaKind::Avx512Vl => unsafe { x86::avx512::recurrence(args, state) },
    }
}

/// The gate functions over eight lanes with `isa`'s kernels, for tests: `out[0]` sigmoid,
/// `out[1]` tanh, `out[2]` exp of `x`.
#[cfg(test)]
pub(crate) fn eval_math(isa: Isa, x: &[f32; 8]) -> [[f32; 8]; 3] {
    match isa.0 {
        IsaKind::Portable => portable::eval_math(x),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: only built by `Isa::detect` after it found AVX2 and FMA.
        IsaKind::Avx2Fma => unsafe { x86::avx2::eval_math(x) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: only built by `Isa::detect` after it found AVX2, FMA, AVX-512F and -VL.
        IsaKind::Avx512Vl => unsafe { x86::avx512::eval_math(x) },
    }
}
