//! The CPU backend's arithmetic kernels, written once over a vector of eight `f32` lanes
//! ([`Lanes`]) and compiled twice: for AVX2 + FMA ([`avx2`], entered only after run-time
//! detection) and portably ([`portable`], plain Rust with `f32::mul_add`).
//!
//! # Same bits on both paths
//! Every operation of [`Lanes`] is one IEEE-754 operation per lane, rounded to nearest-even:
//! add, sub, mul, div, fused multiply-add, round-to-integral (ties to even), and exact bit
//! manipulations (sign, `2^n` construction, selection). The x86 instructions and the Rust
//! scalar operations used by the portable path compute exactly the same value for each, and
//! `min`/`max` are defined with x86's operand rule (`a > b ? a : b`) in both. So the two paths
//! give bit-identical results for finite data (`tests` check it); NaN payloads may differ.
//!
//! # Where `unsafe` is
//! Only in [`avx2`]: its kernels are `#[target_feature(enable = "avx2,fma")] unsafe fn`, called
//! from the dispatchers below only when [`Isa`] says AVX2 and FMA were detected
//! (`is_x86_feature_detected!`, done once in [`Isa::detect`] from `CpuBackend::new`).

#![allow(
    unsafe_code,
    reason = "SIMD intrinsics; every unsafe block has a SAFETY comment"
)]

#[cfg(target_arch = "x86_64")]
mod avx2;
pub(crate) mod kernels;
pub(crate) mod math;
mod portable;

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
}

/// Which instruction set the kernels run with, decided once at run time.
///
/// A value saying AVX2 + FMA exists only after [`Isa::detect`] found both on this CPU (the
/// field is private), which is what makes calling the AVX2 kernels sound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Isa(IsaKind);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IsaKind {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2Fma,
}

impl Isa {
    /// The best instruction set this CPU has: AVX2 + FMA when `is_x86_feature_detected!`
    /// reports both, else the portable path.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Isa(IsaKind::Avx2Fma);
        }
        Isa(IsaKind::Portable)
    }

    /// The portable path (plain Rust, `f32::mul_add`): the same bits as AVX2, far slower
    /// where the CPU has no FMA instruction.
    pub fn portable() -> Self {
        Isa(IsaKind::Portable)
    }

    /// Whether the AVX2 + FMA kernels run.
    pub fn is_avx2_fma(self) -> bool {
        !matches!(self.0, IsaKind::Portable)
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_avx2_fma() {
            "avx2+fma"
        } else {
            "portable"
        })
    }
}

/// The input projection (see [`kernels::project`]) with `isa`'s kernels.
pub(crate) fn project(isa: Isa, args: &kernels::Projection<'_>, out: &mut [f32]) {
    match isa.0 {
        IsaKind::Portable => portable::project(args, out),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `IsaKind::Avx2Fma` is only built by `Isa::detect` after
        // `is_x86_feature_detected!` found AVX2 and FMA on this CPU (done in `CpuBackend::new`).
        IsaKind::Avx2Fma => unsafe { avx2::project(args, out) },
    }
}

/// One direction's recurrence (see [`kernels::recurrence`]) with `isa`'s kernels.
pub(crate) fn recurrence(isa: Isa, args: &kernels::Recurrence<'_>, state: kernels::State<'_>) {
    match isa.0 {
        IsaKind::Portable => portable::recurrence(args, state),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `IsaKind::Avx2Fma` is only built by `Isa::detect` after
        // `is_x86_feature_detected!` found AVX2 and FMA on this CPU (done in `CpuBackend::new`).
        IsaKind::Avx2Fma => unsafe { avx2::recurrence(args, state) },
    }
}

/// The gate functions over eight lanes with `isa`'s kernels, for tests: `out[0]` sigmoid,
/// `out[1]` tanh, `out[2]` exp of `x`.
#[cfg(test)]
pub(crate) fn eval_math(isa: Isa, x: &[f32; 8]) -> [[f32; 8]; 3] {
    match isa.0 {
        IsaKind::Portable => portable::eval_math(x),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `IsaKind::Avx2Fma` is only built by `Isa::detect` after
        // `is_x86_feature_detected!` found AVX2 and FMA on this CPU.
        IsaKind::Avx2Fma => unsafe { avx2::eval_math(x) },
    }
}
