//! Gate nonlinearities in f32 as the CPU backend computes them.
//!
//! They are libm's correctly-rounded-in-practice software functions, so the CPU backend gives
//! the same bits on every x86-64 and ARM host and for any thread count. The GPU kernels use a
//! different `exp` (hardware `ex2.approx`, see `kernels/cuda/numerics.cuh`), so CPU and GPU
//! bits differ; each is deterministic on its own.

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
