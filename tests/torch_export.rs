//! A model written by a real `torch.onnx.export` (PyTorch 2.11, TorchScript exporter, opset
//! 17; `tests/fixtures/torch-2.11-lstm1/README.md`) loads, and runs on the CPU backend within
//! 1e-5 of PyTorch's own float64 output.

#![allow(
    clippy::unwrap_used,
    reason = "a test: a failed unwrap is a failed test"
)]

use std::path::Path;

use bilstm::model::{self, ModelFormat};
use bilstm::{Backend, BackendConfig, CpuBackend, GateOrder, MathMode, StackShape};
use bilstm_core::reference::relative_l2;

const DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/torch-2.11-lstm1"
);

#[test]
fn a_real_torch_export_runs_within_budget_of_torch_in_f64() {
    let dir = Path::new(DIR);
    let loaded = model::load(&dir.join("model.onnx")).unwrap();
    assert_eq!(loaded.format, ModelFormat::Onnx);
    assert_eq!(loaded.stack.order, GateOrder::Onnx);
    assert_eq!(
        loaded.stack.shape,
        StackShape {
            layers: 1,
            ..StackShape::pyannote()
        }
    );
    println!("{}", loaded.description);
    assert!(
        loaded.description.contains("1 LSTM node"),
        "{}",
        loaded.description
    );

    let x = bilstm::npy::read_f32_3d(&dir.join("x.npy"), 60).unwrap();
    assert_eq!(x.shape, [2, 9, 60]);
    let want: Vec<f64> = std::fs::read(dir.join("y_f64.bin"))
        .unwrap()
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(want.len(), 2 * 9 * 256);

    let shape = loaded.stack.shape.with_frames(9);
    let mut cpu = CpuBackend::new();
    cpu.prepare(
        &loaded.stack.weights().unwrap(),
        &BackendConfig {
            shape,
            max_batch: 2,
            math: MathMode::Fp32,
        },
    )
    .unwrap();
    let mut got = vec![0.0f32; shape.output_len(2).unwrap()];
    cpu.forward(&x.data, 2, &mut got).unwrap();
    let err = relative_l2(&got, &want);
    // Measured 2026-11-29: 2.703e-7 (the same bits on the GPU machine's CPU).
    println!("torch 2.11 export, CPU backend vs PyTorch f64: relative L2 {err:.3e}");
    assert!(err <= 1e-5, "relative L2 {err:e}");
    assert!(err > 0.0, "an f32 run cannot match f64 exactly: {err:e}");
}
