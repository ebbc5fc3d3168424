//! Rounding f32 to TF32 (10 explicit mantissa bits), as the tensor-core projection expects.

/// Rounds `x` to the nearest TF32 value, ties to even, returned as an f32 whose low 13
/// mantissa bits are zero.
///
/// NaN stays NaN (its payload's top bits kept, quiet bit set so it cannot become infinity),
/// infinities stay infinite, and finite values whose rounding carries past the largest
/// exponent become infinity, as IEEE round-to-nearest requires.
pub fn round_to_tf32(x: f32) -> f32 {
    let bits = x.to_bits();
    if x.is_nan() {
        // Keep sign and payload's high bits; force the quiet bit so truncation stays NaN.
        return f32::from_bits((bits & 0xffff_e000) | 0x0040_0000);
    }
    if x.is_infinite() {
        return x;
    }
    const DROPPED: u32 = 13;
    let half = 1u32 << (DROPPED - 1); // 0x1000
    let lsb = (bits >> DROPPED) & 1;
    // Adding half - 1 + lsb rounds to nearest with ties to even; a carry into the exponent
    // is the correct rounding (up to infinity past f32::MAX's TF32 neighbour).
    let rounded = bits.wrapping_add(half - 1 + lsb) & !((1u32 << DROPPED) - 1);
    f32::from_bits(rounded)
}

/// The largest finite TF32 value, `(2 - 2^-10) * 2^127` (bits `0x7f7f_e000`).
pub const TF32_MAX: f32 = f32::from_bits(0x7f7f_e000);

/// Splits `x` into a TF32 high part and a TF32 remainder for FP32-accurate tensor-core products
/// ("3xTF32"): `hi = round_to_tf32(x)`, `lo = round_to_tf32(x - hi)`, so `hi + lo` equals `x`
/// to within `2^-22 |x|` (for `|x| >= 2^-115`, where `lo` is normal). `x - hi` is exact in f32.
///
/// Where `hi` is not finite (`x` NaN or infinite, or finite but within `2^-11` relative of
/// `f32::MAX`, so that it rounds up to infinity) `lo` is `+0.0`: `hi + lo == hi`, and NaN or
/// infinity propagate through the `hi` products only. `lo` of a value already representable in
/// TF32 is `+0.0`. The 3xTF32 projection kernel (`bl_tf32_split` in `kernels/cuda/mma.cuh`)
/// computes exactly this, bit for bit.
pub fn split_tf32(x: f32) -> (f32, f32) {
    let hi = round_to_tf32(x);
    let rest = if hi.abs() <= TF32_MAX { x - hi } else { 0.0 };
    (hi, round_to_tf32(rest))
}

#[cfg(test)]
mod tests {
    use super::{TF32_MAX, round_to_tf32, split_tf32};

    #[test]
    fn ties_go_to_even() {
        // 1 + 2^-11 is exactly halfway between 1 and 1 + 2^-10: even (1.0) wins.
        let tie_down = f32::from_bits(0x3f80_1000);
        assert_eq!(round_to_tf32(tie_down).to_bits(), 0x3f80_0000);
        // 1 + 2^-10 + 2^-11 is halfway between an odd and an even neighbour: goes up.
        let tie_up = f32::from_bits(0x3f80_3000);
        assert_eq!(round_to_tf32(tie_up).to_bits(), 0x3f80_4000);
        // Just above the tie rounds up, just below rounds down.
        assert_eq!(
            round_to_tf32(f32::from_bits(0x3f80_1001)).to_bits(),
            0x3f80_2000
        );
        assert_eq!(
            round_to_tf32(f32::from_bits(0x3f80_0fff)).to_bits(),
            0x3f80_0000
        );
        // Negative values round symmetrically.
        assert_eq!(
            round_to_tf32(f32::from_bits(0xbf80_3000)).to_bits(),
            0xbf80_4000
        );
    }

    #[test]
    fn special_values_survive() {
        assert!(round_to_tf32(f32::NAN).is_nan());
        // A NaN whose payload lives only in the dropped bits must not become infinity.
        assert!(round_to_tf32(f32::from_bits(0x7f80_0001)).is_nan());
        assert_eq!(round_to_tf32(f32::INFINITY), f32::INFINITY);
        assert_eq!(round_to_tf32(f32::NEG_INFINITY), f32::NEG_INFINITY);
        assert_eq!(round_to_tf32(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(round_to_tf32(f32::MAX), f32::INFINITY);
        // Subnormals round within their own grid.
        assert_eq!(round_to_tf32(f32::from_bits(0x0000_1000)).to_bits(), 0);
        assert_eq!(round_to_tf32(f32::from_bits(0x0000_3000)).to_bits(), 0x4000);
    }

    #[test]
    fn already_representable_values_are_fixed_points() {
        for bits in [0x3f80_0000u32, 0x4049_0000, 0xc2f6_e000, 0x0080_0000] {
            assert_eq!(round_to_tf32(f32::from_bits(bits)).to_bits(), bits);
        }
    }

    /// Deterministic xorshift samples spread over many binades.
    fn samples() -> impl Iterator<Item = f32> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        (0..200_000).map(move |_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Exponents 2^-100 .. 2^100, any mantissa, either sign.
            let bits = (state as u32) & 0x807f_ffff;
            let exponent = 27 + (state >> 32) as u32 % 200;
            f32::from_bits(bits | (exponent << 23))
        })
    }

    #[test]
    fn split_reconstructs_within_2_pow_minus_22() {
        let bound = 2f64.powi(-22);
        for x in samples() {
            let (hi, lo) = split_tf32(x);
            // Both parts are TF32 values.
            assert_eq!(hi.to_bits() & 0x1fff, 0, "{x:e}");
            assert_eq!(lo.to_bits() & 0x1fff, 0, "{x:e}");
            // The remainder is at most half a TF32 ulp of hi.
            assert!(lo.abs() <= hi.abs() * 2f32.powi(-11), "{x:e}");
            let error = (f64::from(hi) + f64::from(lo) - f64::from(x)).abs();
            assert!(error <= bound * f64::from(x).abs(), "{x:e}: {error:e}");
        }
        // A remainder that TF32 cannot hold exactly: 1 + 2^-12 + 2^-23 splits into 1 and
        // 2^-12 (a tie, to even), off by 2^-23.
        let x = f32::from_bits(0x3f80_0801);
        assert_eq!(split_tf32(x), (1.0, 2f32.powi(-12)));
    }

    #[test]
    fn split_of_a_tf32_value_has_no_remainder() {
        for bits in [
            0x3f80_0000u32,
            0x4049_0000,
            0xc2f6_e000,
            0x0080_0000,
            0,
            0x8000_0000,
        ] {
            let x = f32::from_bits(bits);
            let (hi, lo) = split_tf32(x);
            assert_eq!(hi.to_bits(), bits);
            assert_eq!(lo.to_bits(), 0);
        }
    }

    #[test]
    fn split_keeps_special_values() {
        let (hi, lo) = split_tf32(f32::NAN);
        assert!(hi.is_nan());
        assert_eq!(lo.to_bits(), 0);
        let (hi, lo) = split_tf32(f32::from_bits(0x7f80_0001));
        assert!(hi.is_nan());
        assert_eq!(lo.to_bits(), 0);
        for inf in [f32::INFINITY, f32::NEG_INFINITY] {
            assert_eq!(split_tf32(inf), (inf, 0.0));
            assert_eq!(split_tf32(inf).1.to_bits(), 0);
        }
        // f32::MAX rounds up to infinity in TF32: the remainder is dropped, not -infinity.
        assert_eq!(split_tf32(f32::MAX), (f32::INFINITY, 0.0));
        // The largest finite TF32 value and its neighbours below still split exactly.
        assert_eq!(split_tf32(TF32_MAX), (TF32_MAX, 0.0));
        let below = f32::from_bits(0x7f7f_d001);
        let (hi, lo) = split_tf32(below);
        assert!(hi.is_finite() && lo.is_finite() && lo != 0.0);
    }
}
