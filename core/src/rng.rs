//! A small, seedable, portable pseudo-random generator: SplitMix64.
//!
//! bilstm needs random numbers in two places: the weights of the built-in model
//! (`owned::OwnedStack::builtin`, with the `std` feature) and the seeded inputs of tests, examples and
//! benchmarks. Both must be the same on every host, build and version, so the generator lives
//! here, written out in full, instead of coming from a crate whose streams may change.
//!
//! # Stability
//! **The outputs of this module are part of the built-in model.** Changing any constant,
//! the order in which values are drawn, or the way [`SplitMix64::uniform_f32`] or
//! [`SplitMix64::normal_f32`] turn bits into floats changes the built-in model's weights and
//! every seeded test input. The tests at the foot of this file pin the first outputs; they
//! must only change together with a deliberate, documented change of the model.
//!
//! # The generator
//! SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
//! OOPSLA 2014; the finaliser constants are Stafford's "Mix13"): a 64-bit counter advanced by
//! the golden-ratio increment `0x9E37_79B9_7F4A_7C15`, whose value is scrambled by two
//! xor-shift-multiply rounds. It passes BigCrush, has period 2^64, and every seed (0 included)
//! is good. It is not cryptographic.
//!
//! ```
//! use bilstm_core::rng::SplitMix64;
//! let mut a = SplitMix64::new(42);
//! let mut b = SplitMix64::new(42);
//! assert_eq!(a.next_u64(), b.next_u64());
//! let w = a.uniform_f32(-0.3, 0.3);
//! assert!((-0.3..=0.3).contains(&w));
//! let x = a.normal_f32();
//! assert!(x.is_finite());
//! ```

/// The SplitMix64 increment: 2^64 divided by the golden ratio, rounded to odd.
const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
/// First multiplier of the output mix (Stafford's Mix13).
const MIX_MUL_1: u64 = 0xBF58_476D_1CE4_E5B9;
/// Second multiplier of the output mix (Stafford's Mix13).
const MIX_MUL_2: u64 = 0x94D0_49BB_1331_11EB;

/// 2^-24: the spacing of the 24-bit grid [`SplitMix64::unit_f32`] draws from.
const F32_UNIT: f32 = 1.0 / (1u32 << 24) as f32;
/// 2^-53: the spacing of the 53-bit grid the normal generator draws from.
const F64_UNIT: f64 = 1.0 / (1u64 << 53) as f64;

/// The SplitMix64 generator (see the [module docs](self)); its whole state is one `u64`.
///
/// Deliberately not `Copy`: copying a generator silently repeats its stream. Use
/// [`Clone::clone`] when that is what you want.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose stream is fixed by `seed` forever.
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 uniformly distributed bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(MIX_MUL_1);
        z = (z ^ (z >> 27)).wrapping_mul(MIX_MUL_2);
        z ^ (z >> 31)
    }

    /// A uniform value in `[0, 1)` on the grid of multiples of 2^-24 (the top 24 bits of one
    /// [`SplitMix64::next_u64`]), so every value is exact in f32.
    pub fn unit_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * F32_UNIT
    }

    /// A uniform value between `lo` and `hi`: `lo + (hi - lo) * u` with `u` from
    /// [`SplitMix64::unit_f32`]. One draw per value.
    ///
    /// The result lies in `[lo, hi]`: `u < 1`, but the final f32 rounding may land on `hi`.
    /// With `lo > hi` the roles swap; NaN bounds give NaN.
    pub fn uniform_f32(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit_f32()
    }

    /// A standard normal value (mean 0, variance 1), by the Box–Muller transform.
    ///
    /// Two draws per value: `u1` in `(0, 1]` and `u2` in `[0, 1)`, both on a 2^-53 grid; the
    /// result is `sqrt(-2 ln u1) * cos(2π u2)` computed in f64 with libm and rounded once to
    /// f32. The sine half of the pair is discarded, so the generator's state stays one `u64`.
    /// Values are finite and `|x| < 8.6` (as `u1 >= 2^-53`).
    ///
    /// libm's f64 `log`, `sqrt` and `cos` are pure software, the same on every host; a libm
    /// change of one f64 ulp would alter an f32 result only when it sits on a rounding
    /// boundary, and the pinned-output test would catch it.
    pub fn normal_f32(&mut self) -> f32 {
        let u1 = ((self.next_u64() >> 11) + 1) as f64 * F64_UNIT;
        let u2 = (self.next_u64() >> 11) as f64 * F64_UNIT;
        let radius = libm::sqrt(-2.0 * libm::log(u1));
        (radius * libm::cos(core::f64::consts::TAU * u2)) as f32
    }

    /// Fills `out` with [`SplitMix64::uniform_f32`] values, first to last.
    pub fn fill_uniform_f32(&mut self, out: &mut [f32], lo: f32, hi: f32) {
        for slot in out {
            *slot = self.uniform_f32(lo, hi);
        }
    }

    /// Fills `out` with [`SplitMix64::normal_f32`] values, first to last.
    pub fn fill_normal_f32(&mut self, out: &mut [f32]) {
        for slot in out {
            *slot = self.normal_f32();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64 from seed 0: the published first output is 0xE220A8397B1DCDAF (the
    /// reference C code by Vigna, `splitmix64.c`); the next ones pin our own stream.
    #[test]
    fn pinned_u64_stream() {
        let mut r = SplitMix64::new(0);
        let got: Vec<u64> = (0..4).map(|_| r.next_u64()).collect();
        assert_eq!(
            got,
            [
                0xE220_A839_7B1D_CDAF,
                0x6E78_9E6A_A1B9_65F4,
                0x06C4_5D18_8009_454F,
                0xF88B_B8A8_724C_81EC
            ]
        );
    }

    /// The first floats of seed 7, by their bits: a change here changes the built-in model.
    #[test]
    fn pinned_float_streams() {
        let mut r = SplitMix64::new(7);
        let uniform: Vec<u32> = (0..4).map(|_| r.uniform_f32(-0.3, 0.3).to_bits()).collect();
        let normal: Vec<u32> = (0..4).map(|_| r.normal_f32().to_bits()).collect();
        // About -0.066, -0.290, 0.241, 0.050.
        assert_eq!(
            uniform,
            [0xbd87_6096, 0xbe94_7152, 0x3e76_3a34, 0x3d4b_cf38]
        );
        // About 0.0045, -0.581, -1.713, 2.062.
        assert_eq!(normal, [0x3b93_685f, 0xbf14_a30f, 0xbfdb_3ff2, 0x4003_fc5d]);
    }

    #[test]
    fn uniform_stays_in_range_and_covers_it() {
        let mut r = SplitMix64::new(1);
        let (mut min, mut max, mut sum) = (f32::MAX, f32::MIN, 0.0f64);
        let n = 100_000;
        for _ in 0..n {
            let v = r.uniform_f32(-0.3, 0.3);
            assert!((-0.3..=0.3).contains(&v));
            min = min.min(v);
            max = max.max(v);
            sum += f64::from(v);
        }
        assert!(min < -0.299 && max > 0.299, "{min} {max}");
        assert!((sum / n as f64).abs() < 0.003);
        let mut r = SplitMix64::new(2);
        for _ in 0..10_000 {
            let u = r.unit_f32();
            assert!((0.0..1.0).contains(&u));
        }
    }

    #[test]
    fn normal_has_unit_moments() {
        let mut r = SplitMix64::new(3);
        let n = 200_000;
        let (mut s1, mut s2, mut s4) = (0.0f64, 0.0f64, 0.0f64);
        for _ in 0..n {
            let v = f64::from(r.normal_f32());
            assert!(v.is_finite() && v.abs() < 8.6);
            s1 += v;
            s2 += v * v;
            s4 += v * v * v * v;
        }
        let n = n as f64;
        assert!((s1 / n).abs() < 0.01, "mean {}", s1 / n);
        assert!((s2 / n - 1.0).abs() < 0.02, "variance {}", s2 / n);
        assert!((s4 / n - 3.0).abs() < 0.1, "fourth moment {}", s4 / n);
    }

    #[test]
    fn fills_match_single_draws() {
        let mut a = SplitMix64::new(9);
        let mut b = a.clone();
        let mut buf = [0.0f32; 5];
        a.fill_uniform_f32(&mut buf, -1.0, 1.0);
        for v in buf {
            assert_eq!(v.to_bits(), b.uniform_f32(-1.0, 1.0).to_bits());
        }
        a.fill_normal_f32(&mut buf);
        for v in buf {
            assert_eq!(v.to_bits(), b.normal_f32().to_bits());
        }
        assert_eq!(a, b);
    }
}
