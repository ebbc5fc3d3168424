//! [`Lanes`] on AVX2 + FMA (`__m256`), [`Wide`] on AVX-512F (`__m512`), and the kernels
//! compiled for those features.
//!
//! Every function here that touches an intrinsic is either an `#[inline(always)]` method of
//! [`A8`] or [`A16`], which only the `#[target_feature(enable = ...)]` entry points at the foot
//! of this file use (the types are private to this module; [`A16`] only in the entry points
//! that enable AVX-512F), or one of those entry points, which [`super`]'s dispatchers call only
//! with an [`super::Isa`] built after detection.
//!
//! Keep the kernels free of closures that take or return vectors unless LLVM inlines them: a
//! closure does not inherit its caller's `#[target_feature]`s, and one that stays a call passes
//! its vectors through memory (session 8: one such closure in the pointwise pass made the
//! 512-bit recurrence about 20 % slower, `bench/NOTES.md`). After editing the kernels, check
//! that `objdump -d` of the entry points (`bilstm_cpu::simd::x86::zmm::recurrence`, ...) shows
//! no calls to `{{closure}}` symbols.

use std::arch::x86_64::{
    __m256, __m512, _MM_FROUND_NO_EXC, _MM_FROUND_TO_NEAREST_INT, _MM_HINT_T0, _MM_HINT_T2,
    _mm_prefetch, _mm256_add_epi32, _mm256_add_ps, _mm256_castps_pd, _mm256_castsi256_ps,
    _mm256_cvtps_epi32, _mm256_div_ps, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_max_ps,
    _mm256_min_ps, _mm256_mul_ps, _mm256_round_ps, _mm256_set1_epi32, _mm256_set1_ps,
    _mm256_slli_epi32, _mm256_storeu_ps, _mm256_sub_ps, _mm256_xor_ps, _mm512_add_epi32,
    _mm512_add_ps, _mm512_castpd_ps, _mm512_castps_pd, _mm512_castps_si512, _mm512_castps256_ps512,
    _mm512_castsi512_ps, _mm512_cvtps_epi32, _mm512_div_ps, _mm512_fmadd_ps, _mm512_insertf64x4,
    _mm512_loadu_ps, _mm512_max_ps, _mm512_min_ps, _mm512_mul_ps, _mm512_roundscale_ps,
    _mm512_set1_epi32, _mm512_set1_ps, _mm512_slli_epi32, _mm512_storeu_ps, _mm512_sub_ps,
    _mm512_xor_si512,
};

use super::kernels::{self, Projection, Recurrence, State};
use super::{Arith, Lanes, Pair, ProjectTile, SingleTile, Tiles, Wide};

/// Eight lanes in a `__m256`.
#[derive(Clone, Copy)]
struct A8(__m256);

const SIGN: f32 = -0.0;

// SAFETY (every block in this impl): `A8` is private to this module and its methods run only
// inlined into the `#[target_feature]` entry points below (each enables at least AVX2 and
// FMA), which are called only after `Isa::detect` found their features (`CpuBackend::new`).
// The prefetch hint is SSE (part of x86_64) and cannot fault. Loads and stores
// go through `&[f32; 8]`/`&mut [f32; 8]`, so the 32 bytes are in bounds (unaligned access).
impl Arith for A8 {
    #[inline(always)]
    fn splat(v: f32) -> Self {
        // SAFETY: see the impl comment (AVX detected).
        A8(unsafe { _mm256_set1_ps(v) })
    }
    #[inline(always)]
    fn add(self, b: Self) -> Self {
        // SAFETY: AVX detected (impl comment).
        A8(unsafe { _mm256_add_ps(self.0, b.0) })
    }
    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        // SAFETY: AVX detected (impl comment).
        A8(unsafe { _mm256_sub_ps(self.0, b.0) })
    }
    #[inline(always)]
    fn mul(self, b: Self) -> Self {
        // SAFETY: AVX detected (impl comment).
        A8(unsafe { _mm256_mul_ps(self.0, b.0) })
    }
    #[inline(always)]
    fn div(self, b: Self) -> Self {
        // SAFETY: AVX detected (impl comment).
        A8(unsafe { _mm256_div_ps(self.0, b.0) })
    }
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        // SAFETY: FMA detected (impl comment).
        A8(unsafe { _mm256_fmadd_ps(self.0, b.0, c.0) })
    }
    #[inline(always)]
    fn max_x86(self, b: Self) -> Self {
        // SAFETY: AVX detected (impl comment).
        A8(unsafe { _mm256_max_ps(self.0, b.0) })
    }
    #[inline(always)]
    fn min_x86(self, b: Self) -> Self {
        // SAFETY: AVX detected (impl comment).
        A8(unsafe { _mm256_min_ps(self.0, b.0) })
    }
    #[inline(always)]
    fn round_even(self) -> Self {
        // SAFETY: AVX detected (impl comment).
        A8(unsafe { _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(self.0) })
    }
    #[inline(always)]
    fn pow2i(self) -> Self {
        // SAFETY: AVX2 detected (impl comment).
        A8(unsafe {
            let n = _mm256_cvtps_epi32(self.0);
            let biased = _mm256_add_epi32(n, _mm256_set1_epi32(127));
            _mm256_castsi256_ps(_mm256_slli_epi32::<23>(biased))
        })
    }
    #[inline(always)]
    fn neg(self) -> Self {
        // SAFETY: AVX detected (impl comment).
        A8(unsafe { _mm256_xor_ps(self.0, _mm256_set1_ps(SIGN)) })
    }
}

// SAFETY: as for `Arith for A8` above.
impl Lanes for A8 {
    #[inline(always)]
    fn load(src: &[f32; 8]) -> Self {
        // SAFETY: AVX detected (impl comment); `src` is 8 readable f32.
        A8(unsafe { _mm256_loadu_ps(src.as_ptr()) })
    }
    #[inline(always)]
    fn store(self, dst: &mut [f32; 8]) {
        // SAFETY: AVX detected (impl comment); `dst` is 8 writable f32.
        unsafe { _mm256_storeu_ps(dst.as_mut_ptr(), self.0) }
    }
    #[inline(always)]
    fn prefetch(src: &[f32]) {
        // The T2 hint: in the projection's cold-input-row flow on the development machine
        // (Zen 4, 2026-11-29) it ran at 109 GFLOP/s against 106.5 with T0, T1 or NTA.
        // SAFETY: SSE is part of x86_64; a prefetch reads nothing architecturally and cannot
        // fault, and the address is that of a live slice anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T2>(src.as_ptr().cast::<i8>()) }
    }
}

/// Sixteen lanes in a `__m512`: one 512-bit vector per strip row.
#[derive(Clone, Copy)]
struct A16(__m512);

// SAFETY (every block in this impl): `A16` is private to this module and its methods run only
// inlined into the `zmm` entry points below, whose `#[target_feature]` enables AVX-512F and
// which are called only after `Isa::detect` found AVX-512F (`CpuBackend::new`). Loads and
// stores go through `&[f32; 16]`/`&mut [f32; 16]`, so the 64 bytes are in bounds (unaligned
// access).
impl Arith for A16 {
    #[inline(always)]
    fn splat(v: f32) -> Self {
        // SAFETY: AVX-512F detected (impl comment).
        A16(unsafe { _mm512_set1_ps(v) })
    }
    #[inline(always)]
    fn add(self, b: Self) -> Self {
        // SAFETY: AVX-512F detected (impl comment).
        A16(unsafe { _mm512_add_ps(self.0, b.0) })
    }
    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        // SAFETY: AVX-512F detected (impl comment).
        A16(unsafe { _mm512_sub_ps(self.0, b.0) })
    }
    #[inline(always)]
    fn mul(self, b: Self) -> Self {
        // SAFETY: AVX-512F detected (impl comment).
        A16(unsafe { _mm512_mul_ps(self.0, b.0) })
    }
    #[inline(always)]
    fn div(self, b: Self) -> Self {
        // SAFETY: AVX-512F detected (impl comment).
        A16(unsafe { _mm512_div_ps(self.0, b.0) })
    }
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        // SAFETY: AVX-512F detected (impl comment). `vfmadd*ps` on a `zmm` rounds each lane's
        // `self * b + c` once, exactly as on a `ymm`.
        A16(unsafe { _mm512_fmadd_ps(self.0, b.0, c.0) })
    }
    #[inline(always)]
    fn max_x86(self, b: Self) -> Self {
        // SAFETY: AVX-512F detected (impl comment). `vmaxps` on a `zmm` takes the second
        // operand where either is NaN, as on a `ymm`.
        A16(unsafe { _mm512_max_ps(self.0, b.0) })
    }
    #[inline(always)]
    fn min_x86(self, b: Self) -> Self {
        // SAFETY: AVX-512F detected (impl comment); NaN rule as `max_x86`.
        A16(unsafe { _mm512_min_ps(self.0, b.0) })
    }
    #[inline(always)]
    fn round_even(self) -> Self {
        // SAFETY: AVX-512F detected (impl comment). `vrndscaleps` with scale 0 and
        // round-to-nearest is `vroundps`' round-to-nearest-even.
        A16(unsafe {
            _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(self.0)
        })
    }
    #[inline(always)]
    fn pow2i(self) -> Self {
        // SAFETY: AVX-512F detected (impl comment); the same integer steps as `A8::pow2i`.
        A16(unsafe {
            let n = _mm512_cvtps_epi32(self.0);
            let biased = _mm512_add_epi32(n, _mm512_set1_epi32(127));
            _mm512_castsi512_ps(_mm512_slli_epi32::<23>(biased))
        })
    }
    #[inline(always)]
    fn neg(self) -> Self {
        // SAFETY: AVX-512F detected (impl comment). `vpxord` (AVX-512F) flips the sign bits.
        A16(unsafe {
            _mm512_castsi512_ps(_mm512_xor_si512(
                _mm512_castps_si512(self.0),
                _mm512_set1_epi32(i32::MIN),
            ))
        })
    }
}

// SAFETY: as for `Arith for A16` above.
impl Wide for A16 {
    #[inline(always)]
    fn load(src: &[f32; 16]) -> Self {
        // SAFETY: AVX-512F detected (impl comment); `src` is 16 readable f32.
        A16(unsafe { _mm512_loadu_ps(src.as_ptr()) })
    }
    #[inline(always)]
    fn load_halves(lo: &[f32; 8], hi: &[f32; 8]) -> Self {
        // SAFETY: AVX-512F detected (impl comment); `lo` and `hi` are 8 readable f32 each.
        // `vinsertf64x4` (AVX-512F) moves bits, so the lanes are the loaded values.
        A16(unsafe {
            let lo = _mm512_castps256_ps512(_mm256_loadu_ps(lo.as_ptr()));
            let hi = _mm256_castps_pd(_mm256_loadu_ps(hi.as_ptr()));
            _mm512_castpd_ps(_mm512_insertf64x4::<1>(_mm512_castps_pd(lo), hi))
        })
    }
    #[inline(always)]
    fn store(self, dst: &mut [f32; 16]) {
        // SAFETY: AVX-512F detected (impl comment); `dst` is 16 writable f32.
        unsafe { _mm512_storeu_ps(dst.as_mut_ptr(), self.0) }
    }
    #[inline(always)]
    fn prefetch_l1(src: &[f32; 16]) {
        // SAFETY: SSE is part of x86_64; a prefetch reads nothing architecturally and cannot
        // fault, and the address is that of a live array anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(src.as_ptr().cast::<i8>()) }
    }
}

/// The 256-bit kernels compiled for one x86 feature set: `$features` is what the caller must
/// have detected, `$wide` the strip-row type of the projection and the recurrent product,
/// `$strips` the projection tile's strips ([`kernels::project`]'s `NS`, 6 rows), `$s6, $s1,
/// $s2, $s3` the recurrent product's strips per tile for 6, 1, 2 and 3 to 5 windows
/// ([`kernels::recurrence`]).
macro_rules! entry_points {
    (
        $name:ident,
        $features:literal,
        $what:literal,
        $wide:ty,
        $strips:expr,
        [$s6:expr, $s1:expr, $s2:expr, $s3:expr]
    ) => {
        #[doc = concat!("The kernels compiled for ", $what, ".")]
        pub(super) mod $name {
            use super::{A8, Pair, Projection, Recurrence, SingleTile, State, kernels};

            /// [`kernels::project`] with [`A8`] and the build's strip rows.
            ///
            /// # Safety
            #[doc = concat!("The CPU must support ", $what, " (callers hold an `Isa` from `Isa::detect` saying so).")]
            #[target_feature(enable = $features)]
            pub(in crate::simd) unsafe fn project(
                args: &Projection<'_>,
                out: &mut [f32],
                panel: &mut Vec<f32>,
            ) {
                kernels::project::<A8, $wide, 6, { $strips }>(args, out, panel);
            }

            /// [`kernels::recurrence`] with [`A8`] and the build's strip rows.
            ///
            /// # Safety
            #[doc = concat!("The CPU must support ", $what, " (callers hold an `Isa` from `Isa::detect` saying so).")]
            #[target_feature(enable = $features)]
            pub(in crate::simd) unsafe fn recurrence(args: &Recurrence<'_>, state: State<'_>) {
                kernels::recurrence::<$wide, 6, { $s6 }, { $s1 }, { $s2 }, { $s3 }>(
                    args,
                    state,
                    SingleTile::Strips128,
                );
            }

            /// The cell and exponential functions with [`A8`] pairs (tests).
            ///
            /// # Safety
            #[doc = concat!("The CPU must support ", $what, ".")]
            #[cfg(test)]
            #[target_feature(enable = $features)]
            pub(in crate::simd) unsafe fn eval_math(x: &[[f32; 16]; 5]) -> [[f32; 16]; 4] {
                kernels::eval_math::<$wide>(x)
            }
        }
    };
}

/// Whether the CPU's vendor string (CPUID leaf 0) is `GenuineIntel`.
pub(super) fn vendor_is_intel() -> bool {
    // SAFETY: CPUID leaf 0 exists on every x86-64 CPU and only reads identification
    // registers (the intrinsic is safe from Rust 1.94 on; `unsafe` for the 1.89 minimum).
    #[allow(unused_unsafe)]
    let r = unsafe { std::arch::x86_64::__cpuid(0) };
    // "Genu" "ineI" "ntel" in EBX, EDX, ECX.
    (r.ebx, r.edx, r.ecx) == (0x756e_6547, 0x4965_6e69, 0x6c65_746e)
}

// AVX2 + FMA: 16 vector registers, so the projection tile is 6 rows x one 16-column strip
// (12 accumulators).
entry_points!(avx2, "avx2,fma", "AVX2 and FMA", Pair<A8>, 1, [1, 4, 2, 1]);
// The same 256-bit instructions with AVX-512VL's 32 vector registers (EVEX encodings of the
// same operations, so the same bits): the gate math spills less and the projection tile is 6
// rows x two strips (24 accumulators), the recurrence's 6 windows x 32 columns (24). On the
// development machine (Zen 4, 2026-11-29) the gate math went from 78 to 62 cycles per panel,
// the projection from 112 to 114 GFLOP/s (hot) and 105 to 110 (cold input rows), and the
// 6 x 32 recurrence tile took batch 32 from 265.2 to 263.3 ms (medians of 5 alternating
// runs), `bench/NOTES.md`.
entry_points!(
    avx512,
    "avx2,fma,avx512f,avx512vl",
    "AVX2, FMA, AVX-512F and AVX-512VL",
    Pair<A8>,
    2,
    [2, 4, 2, 1]
);
// The 512-bit kernels: one `zmm` per 16-column strip row in the projection and the recurrent
// product, and one `zmm` per two 8-unit panels in the gate math (its five exponentials and two
// divisions a unit on 16 lanes: 0.15-0.21 ms a layer-direction and window against 0.24-0.32
// on 8 lanes, Xeon development machine, session 12, `bench/NOTES.md`), with the register
// tiles `Tiles` picks (`BILSTM_CPU_TILES`; `Tiles::default()` is the measured best: projection
// 6 rows x 4 strips, recurrent product 8 windows x 2 strips, one window from R repacked as one
// sequential stream with prefetches, 64-byte-aligned buffers).
// Lanes are columns, so each column's FMA chain is the one every other build computes, whatever
// the tiles.
/// The kernels compiled for AVX2, FMA, AVX-512F and AVX-512VL with 512-bit vectors.
pub(super) mod zmm {
    use super::{A8, A16, ProjectTile, Projection, Recurrence, SingleTile, State, Tiles, kernels};

    /// [`kernels::project_tiled`] with [`A8`] and [`A16`] strip rows.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA, AVX-512F and AVX-512VL (callers hold an `Isa` from
    /// `Isa::detect` saying so).
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    pub(in crate::simd) unsafe fn project(
        tile: ProjectTile,
        args: &Projection<'_>,
        out: &mut [f32],
        panel: &mut Vec<f32>,
    ) {
        kernels::project_tiled::<A8, A16>(tile, args, out, panel);
    }

    /// [`kernels::recurrence_tiled`] with [`A16`] strip rows and gate math.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA, AVX-512F and AVX-512VL (callers hold an `Isa` from
    /// `Isa::detect` saying so).
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    pub(in crate::simd) unsafe fn recurrence(
        tiles: Tiles,
        args: &Recurrence<'_>,
        state: State<'_>,
    ) {
        kernels::recurrence_tiled::<A16>(tiles, args, state);
    }

    /// [`kernels::recurrence_fused_tiled`] with [`A16`] strip rows and gate math.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA, AVX-512F and AVX-512VL (callers hold an `Isa` from
    /// `Isa::detect` saying so).
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    pub(in crate::simd) unsafe fn recurrence_fused(
        single: SingleTile,
        args: &Recurrence<'_>,
        state: State<'_>,
        fused: kernels::Fused<'_>,
    ) {
        kernels::recurrence_fused_tiled::<A16>(single, args, state, fused);
    }

    /// The cell and exponential functions with [`A16`] (tests).
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA, AVX-512F and AVX-512VL.
    #[cfg(test)]
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    pub(in crate::simd) unsafe fn eval_math(x: &[[f32; 16]; 5]) -> [[f32; 16]; 4] {
        kernels::eval_math::<A16>(x)
    }
}
