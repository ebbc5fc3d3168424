//! The CPU backend's arithmetic kernels, written once over a vector of eight `f32` lanes
//! ([`Lanes`], the projection's input rows) and one of sixteen ([`Wide`]: one row of a
//! 16-column weight strip in the projection and the recurrent product, and two panels' units in
//! the gate math), both with the IEEE operations of [`Arith`], and compiled four times: for
//! AVX2 + FMA, for AVX2 + FMA with AVX-512VL's 32 registers (256-bit operations), for
//! AVX-512F (512-bit vectors for the projection, the recurrent product and the gate math)
//! ([`x86`], entered only after run-time detection), and portably ([`portable`], plain Rust
//! with `f32::mul_add`).
//!
//! # Same bits on every path
//! Every operation of [`Arith`] is one IEEE-754 operation per lane, rounded to nearest-even:
//! add, sub, mul, div, fused multiply-add, round-to-integral (ties to even), and exact bit
//! manipulations (sign, `2^n` construction). The x86 instructions and the Rust
//! scalar operations used by the portable path compute exactly the same value for each, and
//! `min`/`max` are defined with x86's operand rule (`a > b ? a : b`) in both. The AVX2 and
//! AVX-512VL builds run the same 256-bit operations (AVX-512VL only adds registers, so tiles
//! can be larger; tiling never changes a value's chain of operations). The AVX-512F build runs
//! the projection and the recurrent product on 512-bit vectors: a lane is one output column,
//! `vfmadd231ps` on a `zmm` computes per lane the same single-rounding FMA as on a `ymm` (or
//! `f32::mul_add`), and every column still gets one FMA chain in ascending `k` from the same
//! start; only how many columns advance together changes; its gate math runs each unit's
//! operations on a `zmm` lane instead of a `ymm` lane. So every path gives bit-identical
//! results for finite data (`tests` check it); NaN payloads may differ.
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

/// The IEEE operations of the gate math, per lane of a vector of `f32` (see the
/// [module docs](self)); [`Lanes`] and [`Wide`] add their loads and stores.
pub(crate) trait Arith: Copy {
    /// All lanes `v`.
    fn splat(v: f32) -> Self;
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
    /// Flips the sign bit.
    fn neg(self) -> Self;
}

/// Eight `f32` lanes (see the [module docs](self)): the projection's input rows.
pub(crate) trait Lanes: Arith {
    /// Loads eight values.
    fn load(src: &[f32; 8]) -> Self;
    /// Stores eight values.
    fn store(self, dst: &mut [f32; 8]);
    /// Hints that the cache line holding `src[0]` will be read soon (changes no value; the
    /// portable path does nothing).
    #[inline(always)]
    fn prefetch(_src: &[f32]) {}
}

/// Sixteen `f32` lanes: one row of a 16-column weight strip in the projection and the
/// recurrent product (lane `l` is always column `l` of the strip, so a wider or narrower
/// implementation never changes which values one lane's FMA chain combines), and sixteen units
/// of the gate math (two panels' gates, [`Wide::load_halves`]).
pub(crate) trait Wide: Arith {
    /// Loads sixteen values.
    fn load(src: &[f32; 16]) -> Self;
    /// Loads lanes 0..8 from `lo` and 8..16 from `hi`.
    fn load_halves(lo: &[f32; 8], hi: &[f32; 8]) -> Self;
    /// Stores sixteen values.
    fn store(self, dst: &mut [f32; 16]);
    /// Hints that the 64-byte line holding `src` will be read soon, into L1 (changes no
    /// value; only the 512-bit build does anything).
    #[inline(always)]
    fn prefetch_l1(_src: &[f32; 16]) {}
}

/// Two eight-lane vectors as one [`Wide`] (lanes 0..8 in the first): the 256-bit and portable
/// paths' strip rows and gate math, every operation on both halves.
#[derive(Clone, Copy)]
pub(crate) struct Pair<V>([V; 2]);

impl<V: Lanes> Arith for Pair<V> {
    #[inline(always)]
    fn splat(v: f32) -> Self {
        Pair([V::splat(v); 2])
    }
    #[inline(always)]
    fn add(self, b: Self) -> Self {
        Pair([self.0[0].add(b.0[0]), self.0[1].add(b.0[1])])
    }
    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        Pair([self.0[0].sub(b.0[0]), self.0[1].sub(b.0[1])])
    }
    #[inline(always)]
    fn mul(self, b: Self) -> Self {
        Pair([self.0[0].mul(b.0[0]), self.0[1].mul(b.0[1])])
    }
    #[inline(always)]
    fn div(self, b: Self) -> Self {
        Pair([self.0[0].div(b.0[0]), self.0[1].div(b.0[1])])
    }
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        Pair([
            self.0[0].mul_add(b.0[0], c.0[0]),
            self.0[1].mul_add(b.0[1], c.0[1]),
        ])
    }
    #[inline(always)]
    fn max_x86(self, b: Self) -> Self {
        Pair([self.0[0].max_x86(b.0[0]), self.0[1].max_x86(b.0[1])])
    }
    #[inline(always)]
    fn min_x86(self, b: Self) -> Self {
        Pair([self.0[0].min_x86(b.0[0]), self.0[1].min_x86(b.0[1])])
    }
    #[inline(always)]
    fn round_even(self) -> Self {
        Pair([self.0[0].round_even(), self.0[1].round_even()])
    }
    #[inline(always)]
    fn pow2i(self) -> Self {
        Pair([self.0[0].pow2i(), self.0[1].pow2i()])
    }
    #[inline(always)]
    fn neg(self) -> Self {
        Pair([self.0[0].neg(), self.0[1].neg()])
    }
}

impl<V: Lanes> Wide for Pair<V> {
    #[inline(always)]
    fn load(src: &[f32; 16]) -> Self {
        let (halves, _) = src.as_chunks::<8>();
        match halves {
            [lo, hi] => Pair([V::load(lo), V::load(hi)]),
            // A `[f32; 16]` always splits into two halves.
            _ => Pair([V::splat(0.0); 2]),
        }
    }
    #[inline(always)]
    fn load_halves(lo: &[f32; 8], hi: &[f32; 8]) -> Self {
        Pair([V::load(lo), V::load(hi)])
    }
    #[inline(always)]
    fn store(self, dst: &mut [f32; 16]) {
        let (halves, _) = dst.as_chunks_mut::<8>();
        if let [lo, hi] = halves {
            self.0[0].store(lo);
            self.0[1].store(hi);
        }
    }
}

/// Which instruction set the kernels run with, decided once at run time.
///
/// A value naming an x86 feature set exists only after [`Isa::detect`] found it on this CPU
/// (the field is private), which is what makes calling those kernels sound. Every kind gives
/// the same bits (each lane operation is one IEEE-754 operation, computed alike by all).
/// Ordered from the portable path (least) through AVX2 + FMA and its AVX-512VL build to the
/// 512-bit AVX-512F kernels (greatest).
///
/// | name ([`Isa::name`], `BILSTM_CPU_ISA`) | needs | projection and recurrent product | gate math |
/// |---|---|---|---|
/// | `portable` | nothing | `f32::mul_add` | scalar |
/// | `avx2` | AVX2, FMA | 256-bit, 16 registers | 256-bit |
/// | `avx512vl` | the above, AVX-512F, AVX-512VL | 256-bit, 32 registers | 256-bit |
/// | `avx512` | the same | 512-bit (`zmm`) | 512-bit |
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Isa(IsaKind);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum IsaKind {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2Fma,
    #[cfg(target_arch = "x86_64")]
    Avx512Vl,
    #[cfg(target_arch = "x86_64")]
    Avx512F,
}

impl Isa {
    /// The best instruction set this CPU has: the 512-bit AVX-512F kernels when
    /// `is_x86_feature_detected!` reports AVX2, FMA, AVX-512F and AVX-512VL, else AVX2 + FMA
    /// when it reports both, else the portable path.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") && has!("fma") {
                if has!("avx512f") && has!("avx512vl") {
                    return Isa(IsaKind::Avx512F);
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
    /// FMA), `"avx512vl"` (the same 256-bit kernels with AVX-512VL's 32 registers) or
    /// `"avx512"` (the 512-bit AVX-512F kernels). `None` for any other name. Used for the
    /// environment variable `BILSTM_CPU_ISA` and to compare the paths on one host.
    pub fn detect_at_most(name: &str) -> Option<Self> {
        let best = Self::detect();
        let cap = match name {
            "portable" => IsaKind::Portable,
            #[cfg(target_arch = "x86_64")]
            "avx2" => IsaKind::Avx2Fma,
            #[cfg(target_arch = "x86_64")]
            "avx512vl" => IsaKind::Avx512Vl,
            #[cfg(target_arch = "x86_64")]
            "avx512" => IsaKind::Avx512F,
            #[cfg(not(target_arch = "x86_64"))]
            "avx2" | "avx512vl" | "avx512" => IsaKind::Portable,
            _ => return None,
        };
        Some(best.min(Isa(cap)))
    }

    /// The names [`Isa::detect_at_most`] accepts, least to greatest.
    pub const NAMES: [&'static str; 4] = ["portable", "avx2", "avx512vl", "avx512"];

    /// Every instruction set this CPU can run, portable first, best last.
    pub fn available() -> Vec<Self> {
        let mut all: Vec<Self> = Self::NAMES
            .into_iter()
            .filter_map(Self::detect_at_most)
            .collect();
        all.dedup();
        all
    }

    /// The name [`Isa::detect_at_most`] (and `BILSTM_CPU_ISA`) gives this set by:
    /// `portable`, `avx2`, `avx512vl` or `avx512`.
    pub fn name(self) -> &'static str {
        match self.0 {
            IsaKind::Portable => "portable",
            #[cfg(target_arch = "x86_64")]
            IsaKind::Avx2Fma => "avx2",
            #[cfg(target_arch = "x86_64")]
            IsaKind::Avx512Vl => "avx512vl",
            #[cfg(target_arch = "x86_64")]
            IsaKind::Avx512F => "avx512",
        }
    }

    /// Whether x86 kernels (AVX2 + FMA, with or without AVX-512) run.
    pub fn is_avx2_fma(self) -> bool {
        !matches!(self.0, IsaKind::Portable)
    }

    /// Whether the projection and the recurrent product run on 512-bit vectors (AVX-512F).
    pub fn is_512_bit(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            matches!(self.0, IsaKind::Avx512F)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
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
            #[cfg(target_arch = "x86_64")]
            IsaKind::Avx512F => "avx512f-512bit",
        })
    }
}

/// Which 512-bit register tiles the projection and the recurrent product use
/// (`BILSTM_CPU_TILES`, a tuning aid: [`Tiles::default`] is the measured best on the AMD
/// AVX-512 host and [`Tiles::for_host`] picks per CPU vendor, as `scripts/cpu-run.sh`'s sweep
/// and `phase_timings` decided; the tiles only matter for the 512-bit AVX-512F kernels, every
/// other [`Isa`] ignores them).
///
/// The default, `p6x64,r8x32,f128,a64`. The first three choices' defaults were measured on the
/// H200 machine's Intel Xeon (AVX-512, 16 vCPUs, 2026-12-01, `bench/NOTES.md` "512-bit tile
/// sweep", ONNX Runtime 1.32 in the same run, 5 rounds): batch 1 on 2 threads 13.58 ms (ORT
/// 33.84; the first 512-bit tiles `p6x32,r6x64,s128,malloc` 68.15), batch 1 on 1 thread 20.30
/// (ORT 28.55; first tiles 107.10), batch 32 on 2 threads 274.2 (ORT 352.3; first tiles
/// 395.5); these virtual machines vary from run to run. The strip-wise one-window product
/// (`s128`: eight 64-byte streams 1 KiB apart per step) ran at 10.4 ms a layer and direction
/// there against 1.2 ms for the sequential blocks. The one-window default `f128` (the next
/// chunk's projection fused into the product) replaced `q256p` on the development machine
/// (AMD EPYC Zen 4, AVX-512, 2 vCPUs, 2026-12-03, `scripts/cpu-vs-ort.py --sweep-tiles
/// default,q256p`, 5 rounds): batch 1 on 1 thread 21.89 ms against 27.44, on 2 threads 12.43
/// against 14.19 (ORT 29.9 and 20.6 in that run).
///
/// Four independent choices, each one of a few compiled variants, named by tokens that
/// [`Tiles::parse`] reads (comma-separated, one per choice at most; `default` alone is all
/// four defaults):
///
/// | choice | tokens (default first) | what |
/// |---|---|---|
/// | projection register tile | `p6x64`, `p6x32`, `p12x32` | rows x columns (24, 12, 24 `zmm` accumulators) |
/// | recurrent product, 6 or more windows | `r8x32`, `r6x64`, `r12x32` | windows x columns per tile (16, 24, 24 accumulators; at batch 32: 4, 6, 4 passes over R per step) |
/// | recurrent product, one window (batch 1 and odd remainders) | `f128`, `f128w`, `q256p`, `s128`, `q128`, `q256` | `f128`: `q128`'s product and, at batch 1 from layer 1 on, the next chunk's input projection computed between its FMAs (8-row x 16-column tiles, chunks of 48 frames); `f128w`: the same with 4-row x 32-column tiles (fewer loads a FMA: 6 for 8 against 9); `s128`: 128 columns from eight 16-column strips (eight streams); `q128`/`q256`: R repacked at prepare into blocks `[H][128]`/`[H][256]`, one sequential stream, 8/16 accumulators; `q256p`: `q256` with software prefetches into L1 two rows ahead (and of R's first rows before the gate math) |
/// | buffers | `a64`, `malloc` | `malloc`: the packed weights and the gates buffer where the allocator puts them (glibc: 16-byte aligned, so a 64-byte `zmm` load of a weight row may span two cache lines); `a64`: each starts on a 64-byte boundary |
///
/// Every variant gives the same bits: a lane is still one output column and each column's
/// FMA chain runs in ascending `k` from the same start; only which columns advance together
/// changes (tested for every variant).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tiles {
    pub(crate) project: ProjectTile,
    pub(crate) recurrent: RecurrentTile,
    pub(crate) single: SingleTile,
    /// Whether the packed weights and the gates buffer start on 64-byte boundaries.
    pub(crate) align64: bool,
}

/// The projection's 512-bit register tile (rows x columns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) enum ProjectTile {
    /// 6 rows x 4 strips (24 accumulators: half the broadcasts per FMA, a 64 KiB panel).
    #[default]
    R6x64,
    /// 6 rows x 2 strips (12 accumulators; the 32-column weight panel is 32 KiB at K = 256).
    R6x32,
    /// 12 rows x 2 strips (24 accumulators: half the weight loads per FMA of 6 x 32).
    R12x32,
}

/// The recurrent product's 512-bit tile for groups of windows (batch 6 and up).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) enum RecurrentTile {
    /// 8 windows x 2 strips (16 accumulators, 2 R lines per 16 FMAs).
    #[default]
    W8x32,
    /// 6 windows x 4 strips (24 accumulators).
    W6x64,
    /// 12 windows x 2 strips (24 accumulators, 2 R lines per 24 FMAs).
    W12x32,
}

/// The recurrent product's 512-bit tile for one window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) enum SingleTile {
    /// Blocks `[H][128]` as [`SingleTile::Seq128`], and at batch 1 on layers whose input is
    /// the previous layer's `2H` hidden values, the next chunk's input projection computed in
    /// 8-row x 16-column tiles between the products' FMAs (`kernels::recurrence_fused`): the
    /// product waits on R from L2, the projection on the FMA units, so they overlap.
    #[default]
    Fused128,
    /// [`SingleTile::Fused128`] with projection tiles of 4 rows x 32 columns (fewer loads a
    /// FMA: 6 for 8 against 9).
    Fused128Wide,
    /// [`SingleTile::Seq256`] with software prefetches into L1.
    Seq256Prefetch,
    /// 8 strips of the `[H][16]` strip layout (eight 64-byte streams, 8 accumulators).
    Strips128,
    /// Blocks `[H][128]` (packed at prepare): one sequential stream, 8 accumulators.
    Seq128,
    /// Blocks `[H][256]`: one sequential stream, 16 accumulators.
    Seq256,
}

impl SingleTile {
    /// Whether this tile computes the next chunk's projection beside the product (batch 1,
    /// layers whose input is `2H` wide).
    pub(crate) fn fuses(self) -> bool {
        matches!(self, SingleTile::Fused128 | SingleTile::Fused128Wide)
    }

    /// Strips per block of the sequential layout this tile reads (`None`: the strips).
    pub(crate) fn seq_strips(self) -> Option<usize> {
        match self {
            SingleTile::Strips128 => None,
            SingleTile::Seq128 | SingleTile::Fused128 | SingleTile::Fused128Wide => Some(8),
            SingleTile::Seq256 | SingleTile::Seq256Prefetch => Some(16),
        }
    }
}

impl Default for Tiles {
    /// The measured best (see the type docs): `p6x64,r8x32,f128,a64`.
    fn default() -> Self {
        Tiles {
            project: ProjectTile::default(),
            recurrent: RecurrentTile::default(),
            single: SingleTile::default(),
            align64: true,
        }
    }
}

impl Tiles {
    /// The tiles [`crate::CpuBackend`] uses when `BILSTM_CPU_TILES` is unset: [`Tiles::default`],
    /// except on Intel CPUs the one-window tile `q128` (the product alone, the projection
    /// before it: the fused tiles gained nothing there). Measured with `phase_timings` (one
    /// layer-direction of 589 steps and a K = 256 projection of 589 rows, fused or one after
    /// the other) on the H200 machine's Intel Xeon, two calls on 2026-12-03 (session 18):
    /// `f128` 3.367 / 2.642 ms, `f128w` 2.957 / 2.415, the product then the projection 3.038 /
    /// 2.267 (`q128` alone in the first call 2.875); on the AMD EPYC Zen 4 development machine
    /// the same day `f128` 2.19-2.25 ms, `f128w` 2.38-2.54, one after the other 2.83-3.05.
    pub fn for_host() -> Self {
        let mut tiles = Tiles::default();
        #[cfg(target_arch = "x86_64")]
        if x86::vendor_is_intel() {
            tiles.single = SingleTile::Seq128;
        }
        tiles
    }

    /// Every token [`Tiles::parse`] accepts besides `default`, per choice (default first; the
    /// enums' variants are in this order).
    pub const TOKENS: [&'static [&'static str]; 4] = [
        &["p6x64", "p6x32", "p12x32"],
        &["r8x32", "r6x64", "r12x32"],
        &["f128", "f128w", "q256p", "s128", "q128", "q256"],
        &["a64", "malloc"],
    ];

    /// The variants worth timing against each other: the default, then each other token
    /// alone (one choice changed at a time), then the first 512-bit tiles (before the
    /// 2026-12-01 sweep). `scripts/cpu-run.sh`'s sweep times these.
    pub const SWEEP: [&'static str; 12] = [
        "default",
        "f128w",
        "q256p",
        "p6x32",
        "p12x32",
        "r6x64",
        "r12x32",
        "s128",
        "q128",
        "q256",
        "malloc",
        "p6x32,r6x64,s128,malloc",
    ];

    /// Tiles from comma-separated tokens (see the [type docs](Tiles)): `default`, or at most
    /// one token per choice, the others left at their default. `None` for an unknown token,
    /// two tokens for one choice, or nothing at all.
    pub fn parse(spec: &str) -> Option<Self> {
        let spec = spec.trim();
        let mut tiles = Tiles::default();
        if spec == "default" {
            return Some(tiles);
        }
        let mut set = [false; 4];
        for token in spec.split(',').map(str::trim) {
            let choice = match token {
                "p6x32" => {
                    tiles.project = ProjectTile::R6x32;
                    0
                }
                "p12x32" => {
                    tiles.project = ProjectTile::R12x32;
                    0
                }
                "p6x64" => {
                    tiles.project = ProjectTile::R6x64;
                    0
                }
                "r6x64" => {
                    tiles.recurrent = RecurrentTile::W6x64;
                    1
                }
                "r8x32" => {
                    tiles.recurrent = RecurrentTile::W8x32;
                    1
                }
                "r12x32" => {
                    tiles.recurrent = RecurrentTile::W12x32;
                    1
                }
                "s128" => {
                    tiles.single = SingleTile::Strips128;
                    2
                }
                "q128" => {
                    tiles.single = SingleTile::Seq128;
                    2
                }
                "q256" => {
                    tiles.single = SingleTile::Seq256;
                    2
                }
                "q256p" => {
                    tiles.single = SingleTile::Seq256Prefetch;
                    2
                }
                "f128" => {
                    tiles.single = SingleTile::Fused128;
                    2
                }
                "f128w" => {
                    tiles.single = SingleTile::Fused128Wide;
                    2
                }
                "malloc" => {
                    tiles.align64 = false;
                    3
                }
                "a64" => {
                    tiles.align64 = true;
                    3
                }
                _ => return None,
            };
            if std::mem::replace(&mut set[choice], true) {
                return None;
            }
        }
        Some(tiles)
    }

    /// The tokens of the choices that differ from the default, comma-separated, or
    /// `default`: what [`Tiles::parse`] reads back to the same tiles.
    pub fn name(self) -> String {
        let tokens = [
            Self::TOKENS[0][self.project as usize],
            Self::TOKENS[1][self.recurrent as usize],
            Self::TOKENS[2][self.single as usize],
            Self::TOKENS[3][usize::from(!self.align64)],
        ];
        let changed: Vec<&str> = tokens
            .iter()
            .zip(Self::TOKENS)
            .filter(|(t, all)| **t != all[0])
            .map(|(t, _)| *t)
            .collect();
        if changed.is_empty() {
            "default".into()
        } else {
            changed.join(",")
        }
    }

    /// Every combination of the choices (tests).
    #[cfg(test)]
    pub(crate) fn all() -> Vec<Self> {
        let mut out = Vec::new();
        for p in Self::TOKENS[0] {
            for r in Self::TOKENS[1] {
                for s in Self::TOKENS[2] {
                    for a in Self::TOKENS[3] {
                        out.extend(Self::parse(&format!("{p},{r},{s},{a}")));
                    }
                }
            }
        }
        out
    }
}

impl fmt::Display for Tiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// The input projection (see [`kernels::project`]) with `isa`'s kernels.
///
/// `tiles` picks the 512-bit build's register tile; the other builds have one each.
pub(crate) fn project(
    isa: Isa,
    tiles: Tiles,
    args: &kernels::Projection<'_>,
    out: &mut [f32],
    panel: &mut Vec<f32>,
) {
    match isa.0 {
        IsaKind::Portable => portable::project(args, out, panel),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `IsaKind::Avx2Fma` is only built by `Isa::detect` after
        // `is_x86_feature_detected!` found AVX2 and FMA on this CPU.
        IsaKind::Avx2Fma => unsafe { x86::avx2::project(args, out, panel) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `IsaKind::Avx512Vl` is only built by `Isa::detect` after
        // `is_x86_feature_detected!` found AVX2, FMA, AVX-512F and AVX-512VL on this CPU.
        IsaKind::Avx512Vl => unsafe { x86::avx512::project(args, out, panel) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `IsaKind::Avx512F` is only built by `Isa::detect` after
        // `is_x86_feature_detected!` found AVX2, FMA, AVX-512F and AVX-512VL on this CPU.
        IsaKind::Avx512F => unsafe { x86::zmm::project(tiles.project, args, out, panel) },
    }
}

/// One direction's recurrence (see [`kernels::recurrence`]) with `isa`'s kernels.
///
/// `tiles` picks the 512-bit build's tiles; the other builds have one set each.
pub(crate) fn recurrence(
    isa: Isa,
    tiles: Tiles,
    args: &kernels::Recurrence<'_>,
    state: kernels::State<'_>,
) {
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
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `IsaKind::Avx512F` is only built by `Isa::detect` after
        // `is_x86_feature_detected!` found AVX2, FMA, AVX-512F and AVX-512VL on this CPU.
        IsaKind::Avx512F => unsafe { x86::zmm::recurrence(tiles, args, state) },
    }
}

/// One direction's recurrence over a chunk of one window's steps and, beside it, the next
/// chunk's input projection (see [`kernels::recurrence_fused`]): the 512-bit kernels with the
/// fused one-window tiles ([`SingleTile::fuses`]) interleave the two where
/// [`kernels::fused_applies`]; every other case runs [`recurrence`] then [`project`] (`panel`
/// as there). Same bits either way.
pub(crate) fn recurrence_fused(
    isa: Isa,
    tiles: Tiles,
    args: &kernels::Recurrence<'_>,
    state: kernels::State<'_>,
    fused: kernels::Fused<'_>,
    panel: &mut Vec<f32>,
) {
    #[cfg(target_arch = "x86_64")]
    if isa.0 == IsaKind::Avx512F && tiles.single.fuses() && kernels::fused_applies(args, &fused) {
        // SAFETY: `IsaKind::Avx512F` is only built by `Isa::detect` after
        // `is_x86_feature_detected!` found AVX2, FMA, AVX-512F and AVX-512VL on this CPU.
        unsafe { x86::zmm::recurrence_fused(tiles.single, args, state, fused) };
        return;
    }
    recurrence(isa, tiles, args, state);
    project(isa, tiles, &fused.next, fused.out, panel);
}

/// The cell and exponential functions over sixteen lanes with `isa`'s kernels, for tests:
/// from `x = [a_i, a_f, a_g, a_o, c]`, `[c', h, e^x[0], e^x[0] - 1]` (`kernels::eval_math`).
#[cfg(test)]
pub(crate) fn eval_math(isa: Isa, x: &[[f32; 16]; 5]) -> [[f32; 16]; 4] {
    match isa.0 {
        IsaKind::Portable => portable::eval_math(x),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: only built by `Isa::detect` after it found AVX2 and FMA.
        IsaKind::Avx2Fma => unsafe { x86::avx2::eval_math(x) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: only built by `Isa::detect` after it found AVX2, FMA, AVX-512F and -VL.
        IsaKind::Avx512Vl => unsafe { x86::avx512::eval_math(x) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: only built by `Isa::detect` after it found AVX2, FMA, AVX-512F and -VL.
        IsaKind::Avx512F => unsafe { x86::zmm::eval_math(x) },
    }
}

/// The portable kernels with the 512-bit build's register tiles (tests: the AVX-512F kernels'
/// tiling, every variant of [`Tiles`], checked on any host; only `Wide`'s four operations
/// differ from the `zmm` build).
#[cfg(test)]
pub(crate) mod zmm_tiles {
    pub(crate) use super::portable::{
        project_zmm_tiles as project, recurrence_fused_zmm_tiles as recurrence_fused,
        recurrence_zmm_tiles as recurrence,
    };
}
