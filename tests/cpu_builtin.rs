//! The built-in model on the CPU backend, through the public API: accurate against the f64
//! reference, and pinned bit for bit.
//!
//! The pinned hashes are the CPU backend's exact output for the built-in model; they are the
//! `fnv1a` that `cargo run --release --example run_stack` prints (batch 1, 589 frames, input
//! seed 1). They change only on purpose: when the built-in model changes (`bilstm_core::rng`
//! or `bilstm_core::owned`) or when the CPU backend's summation order or gate functions change
//! (say, the SIMD work). Then re-run the example and update them, saying why in the changelog.

use bilstm_core::accuracy::CPU_FP32_REL_L2;
use bilstm_core::owned::{Checksum, OwnedStack, random_input};
use bilstm_core::reference::{forward_f64, relative_l2, workspace_len};
use bilstm_core::{Backend, BackendConfig};
use bilstm_cpu::CpuBackend;

/// FNV-1a of the CPU output: built-in model, batch 1, 589 frames, input seed 1.
const BUILTIN_BATCH1_FNV1A: u64 = 0xc435_2ce3_acb7_95a7;

#[test]
fn builtin_model_full_window_is_pinned_and_accurate() {
    let model = OwnedStack::builtin();
    let weights = model.weights().unwrap();
    let shape = model.shape;
    let input = random_input(&shape, 1, 1);
    let mut cpu = CpuBackend::new();
    cpu.prepare(&weights, &BackendConfig::pyannote(1)).unwrap();
    let mut out = vec![0.0f32; shape.output_len(1).unwrap()];
    cpu.forward(&input, 1, &mut out).unwrap();

    let mut ws = vec![0.0f64; workspace_len(&shape, 1).unwrap()];
    let mut want = vec![0.0f64; out.len()];
    forward_f64(&weights, &input, 1, &mut ws, &mut want).unwrap();
    let err = relative_l2(&out, &want);
    println!("built-in model, batch 1, 589 frames: relative L2 error {err:.3e}");
    assert!(err <= CPU_FP32_REL_L2);

    let sum = Checksum::of(&out);
    println!("output: {sum}");
    assert_eq!(
        sum.fnv1a, BUILTIN_BATCH1_FNV1A,
        "CPU output bits changed: {sum}"
    );
}
