//! The CPU backend against the f64 reference: relative L2 error within
//! [`CPU_FP32_REL_L2`] with weights U(-0.3, 0.3) and standard-normal inputs.
//!
//! Run with `--nocapture` to see the measured errors. The f64 reference is scalar but quick
//! enough at opt-level 3 (bilstm-core's dev profile): every case, batch 8 of full 589-frame
//! windows included, takes a few seconds in all.

#![allow(
    clippy::unwrap_used,
    reason = "helpers of tests: a failed unwrap fails the test"
)]

use bilstm_core::accuracy::CPU_FP32_REL_L2;
use bilstm_core::owned::{OwnedStack, random_input};
use bilstm_core::reference::{forward_f64, relative_l2, workspace_len};
use bilstm_core::{Backend, BackendConfig, MathMode, StackShape};
use bilstm_cpu::{CpuBackend, Isa};

/// Runs `batch` windows of `frames` frames through the CPU backend and the reference, prints
/// and returns the relative L2 error.
fn rel_l2(label: &str, frames: usize, batch: usize, weight_seed: u64, input_seed: u64) -> f64 {
    rel_l2_on(
        CpuBackend::new(),
        label,
        frames,
        batch,
        weight_seed,
        input_seed,
        1.0,
    )
}

/// As [`rel_l2`] on `cpu`, with the inputs multiplied by `input_scale`.
fn rel_l2_on(
    mut cpu: CpuBackend,
    label: &str,
    frames: usize,
    batch: usize,
    weight_seed: u64,
    input_seed: u64,
    input_scale: f32,
) -> f64 {
    let shape = StackShape::pyannote().with_frames(frames);
    let model = OwnedStack::random(&shape, weight_seed, 0.3);
    let weights = model.weights().unwrap();
    let mut input = random_input(&shape, batch, input_seed);
    input.iter_mut().for_each(|v| *v *= input_scale);

    cpu.prepare(
        &weights,
        &BackendConfig {
            shape,
            max_batch: batch,
            math: MathMode::Fp32,
        },
    )
    .unwrap();
    let mut got = vec![0.0f32; shape.output_len(batch).unwrap()];
    cpu.forward(&input, batch, &mut got).unwrap();

    let mut workspace = vec![0.0f64; workspace_len(&shape, batch).unwrap()];
    let mut want = vec![0.0f64; shape.output_len(batch).unwrap()];
    forward_f64(&weights, &input, batch, &mut workspace, &mut want).unwrap();

    let err = relative_l2(&got, &want);
    println!(
        "{label} ({}, {} thread(s)): batch {batch}, {frames} frames: relative L2 error {err:.3e} (budget {CPU_FP32_REL_L2:.0e})",
        cpu.isa(),
        cpu.threads()
    );
    assert!(
        err <= CPU_FP32_REL_L2,
        "{label}: {err:e} > {CPU_FP32_REL_L2:e}"
    );
    err
}

#[test]
fn batch_1_full_window() {
    rel_l2("full window", 589, 1, 101, 1);
}

#[test]
fn batch_3_full_windows() {
    rel_l2("full windows", 589, 3, 102, 2);
}

#[test]
fn batch_8_full_windows() {
    rel_l2("full windows", 589, 8, 103, 3);
}

#[test]
fn short_windows() {
    for (frames, batch) in [(1, 3), (2, 3), (17, 3), (1, 1), (17, 8)] {
        rel_l2("short windows", frames, batch, 200 + frames as u64, 4);
    }
}

/// Inputs 30 times larger push most gates into saturation (|pre-activation| in the tens).
#[test]
fn saturated_gates() {
    rel_l2_on(
        CpuBackend::new(),
        "saturated gates (inputs x30)",
        64,
        3,
        301,
        5,
        30.0,
    );
}

/// The 512-bit kernels against the f64 reference (full windows at batches 1 and 8, short
/// windows, saturated gates). Runs only on a host with AVX-512F.
#[test]
fn avx512_kernels_accuracy() {
    let Some(zmm) = Isa::detect_at_most("avx512").filter(|isa| isa.is_512_bit()) else {
        println!("skipped: no avx512f on this host");
        return;
    };
    let cpu = || CpuBackend::with_isa(2, zmm);
    rel_l2_on(cpu(), "avx512 full window", 589, 1, 101, 1, 1.0);
    rel_l2_on(cpu(), "avx512 full windows", 589, 8, 103, 3, 1.0);
    rel_l2_on(cpu(), "avx512 short windows", 17, 7, 217, 4, 1.0);
    rel_l2_on(
        cpu(),
        "avx512 saturated gates (inputs x30)",
        64,
        3,
        301,
        5,
        30.0,
    );
}
