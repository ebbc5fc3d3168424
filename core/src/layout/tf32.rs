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

#[cfg(test)]
mod tests {
    use super::round_to_tf32;

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
}
