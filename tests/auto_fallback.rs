//! `Auto` picks CUDA only when it is usable, and says what it picked.
//!
//! On a machine without a CUDA driver (CI) `Auto::new()` must fall back to the CPU and name
//! the reason; on a GPU machine it must pick CUDA. Either way the forward runs and matches the
//! CPU backend within the FP32 budget.

use bilstm::owned::{OwnedStack, random_input};
use bilstm::{Auto, Backend, BackendConfig, BackendError, CpuBackend, ErrorKind, MathMode};

#[test]
fn auto_says_what_it_chose_and_runs() {
    let auto = Auto::new().expect("Auto falls back instead of failing when CUDA is unavailable");
    let sel = auto.selection().clone();
    assert!(sel.backend == "cuda" || sel.backend == "cpu", "{sel}");
    if sel.backend == "cpu" {
        assert!(sel.reason.starts_with("CUDA unavailable: "), "{sel}");
    }
    let mut auto = auto;
    let model = OwnedStack::builtin();
    let weights = model.weights().unwrap();
    let shape = model.shape.with_frames(5);
    let config = BackendConfig {
        shape,
        max_batch: 2,
        math: MathMode::Fp32,
    };
    auto.prepare(&weights, &config).unwrap();
    let input = random_input(&shape, 2, 3);
    let mut out = vec![f32::NAN; shape.output_len(2).unwrap()];
    auto.forward(&input, 2, &mut out).unwrap();
    let mut cpu = CpuBackend::new();
    cpu.prepare(&weights, &config).unwrap();
    let mut want = vec![0.0; out.len()];
    cpu.forward(&input, 2, &mut want).unwrap();
    let err = out
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(
        err < 1e-5,
        "{} differs from the CPU by {err}",
        auto.selection()
    );
}

#[test]
fn auto_cuda_without_a_gpu_is_unavailable_not_a_panic() {
    match Auto::cuda() {
        Ok(auto) => assert_eq!(auto.selection().backend, "cuda"),
        Err(e) => assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}"),
    }
}

#[test]
fn cpu_is_always_available() {
    let auto = Auto::cpu();
    assert_eq!(auto.name(), "cpu");
    assert_eq!(auto.selection().to_string(), "cpu (asked for the CPU)");
}
