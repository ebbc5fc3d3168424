//! Gate nonlinearities in f32 through libm: a scalar, portable statement of `σ` and `tanh`.
//!
//! No backend computes with these: the CPU backend has its own vectorised cell function
//! (`bilstm-cpu`'s `simd::math`, Cephes' `exp` reduction, whose bits differ from libm's), and
//! the GPU kernels theirs (`kernels/cuda/numerics.cuh`, hardware `ex2.approx`). They remain as the f32
//! definitions the tests and tools may compare against; each backend is deterministic on its
//! own and the backends' bits differ.

/// Logistic sigmoid `1 / (1 + e^-x)`; saturates to exactly 0 or 1 for large |x|; NaN stays NaN.
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + libm::expf(-x))
}

/// Hyperbolic tangent (libm's `tanhf`).
pub fn tanh(x: f32) -> f32 {
    libm::tanhf(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_to_f64_and_saturating() {
        for i in -400..=400 {
            let x = i as f32 * 0.05;
            let s = 1.0 / (1.0 + (-(x as f64)).exp());
            assert!((sigmoid(x) as f64 - s).abs() <= 2.0 * f32::EPSILON as f64 * s.max(1e-30));
            assert!((tanh(x) as f64 - (x as f64).tanh()).abs() <= 2.0 * f32::EPSILON as f64);
        }
        assert_eq!(sigmoid(-200.0), 0.0);
        assert_eq!(sigmoid(200.0), 1.0);
        assert!(sigmoid(f32::NAN).is_nan());
        assert_eq!(tanh(f32::INFINITY), 1.0);
    }
}
