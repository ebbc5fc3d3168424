//! Accuracy budgets, in one table: relative L2 error against the f64 reference
//! ([`crate::reference`]) that each backend and math mode must meet.

use crate::shape::MathMode;

/// cuDNN FP32's relative L2 error against f64 on the pyannote stack, weights U(-0.3, 0.3),
/// normal inputs. Measured on the H200, 2026-11-29 (DESIGN §5, `shared/bench/cudnn_baseline.py`).
pub const CUDNN_FP32_REL_L2: f64 = 1.5e-5;
/// cuDNN TF32's relative L2 error on the same data (DESIGN §5).
pub const CUDNN_TF32_REL_L2: f64 = 1.1e-3;
/// The CPU backend's budget: issue 2 asks for 1e-5 (random weights U(-0.3, 0.3), normal
/// inputs, 589 frames; measured figures are in `bench/NOTES.md`).
pub const CPU_FP32_REL_L2: f64 = 1e-5;

/// The budget of a GPU run in `math` mode: no worse than cuDNN FP32, or 1.1 × cuDNN TF32.
pub const fn gpu_budget(math: MathMode) -> f64 {
    match math {
        MathMode::Fp32 => CUDNN_FP32_REL_L2,
        MathMode::Tf32 => 1.1 * CUDNN_TF32_REL_L2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_ordered() {
        assert!(CPU_FP32_REL_L2 < gpu_budget(MathMode::Fp32));
        assert!(gpu_budget(MathMode::Fp32) < gpu_budget(MathMode::Tf32));
    }
}
