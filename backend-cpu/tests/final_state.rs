//! `Backend::forward_with_state` on the CPU: the output bits of `forward`, every layer's and
//! direction's final hidden and cell states against the f64 reference (CPU budget), the last
//! layer's final hidden states equal to the output at the window's last (forward) and first
//! (reverse) frame, bit for bit, the same bits for any thread count and batch composition, and
//! the exact error for state tensors of the wrong length.

#![allow(
    clippy::unwrap_used,
    reason = "helpers of tests: a failed unwrap fails the test"
)]

use bilstm_core::accuracy::CPU_FP32_REL_L2;
use bilstm_core::owned::{OwnedStack, random_input};
use bilstm_core::reference::{forward_f64_with_state, relative_l2, workspace_len};
use bilstm_core::{Backend, BackendConfig, CoreError, MathMode, StackShape};
use bilstm_cpu::{CpuBackend, CpuError};
use bilstm_test_support::assert_last_h_n_is_the_output;

struct Run {
    out: Vec<f32>,
    h_n: Vec<f32>,
    c_n: Vec<f32>,
}

fn run(stack: &OwnedStack, threads: usize, input: &[f32], batch: usize) -> Run {
    let shape = stack.shape;
    let mut cpu = CpuBackend::with_threads(threads);
    let config = BackendConfig {
        shape,
        max_batch: batch.max(1),
        math: MathMode::Fp32,
    };
    cpu.prepare(&stack.weights().unwrap(), &config).unwrap();
    let mut out = vec![f32::NAN; shape.output_len(batch).unwrap()];
    let mut h_n = vec![f32::NAN; shape.state_len(batch).unwrap()];
    let mut c_n = vec![f32::NAN; shape.state_len(batch).unwrap()];
    cpu.forward_with_state(input, batch, &mut out, &mut h_n, &mut c_n)
        .unwrap();
    let mut plain = vec![0.0f32; out.len()];
    cpu.forward(input, batch, &mut plain).unwrap();
    assert_eq!(
        bits(&plain),
        bits(&out),
        "forward_with_state changes the output"
    );
    Run { out, h_n, c_n }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn final_states_match_the_reference_and_the_output() {
    let stack = OwnedStack::random(&StackShape::pyannote().with_frames(40), 5, 0.3);
    let shape = stack.shape;
    let batch = 3;
    let input = random_input(&shape, batch, 21);
    let r = run(&stack, 2, &input, batch);
    assert_last_h_n_is_the_output(&shape, batch, &r.out, &r.h_n, "CPU");
    let mut ws = vec![0.0f64; workspace_len(&shape, batch).unwrap()];
    let mut want = vec![0.0f64; shape.output_len(batch).unwrap()];
    let mut h_want = vec![0.0f64; shape.state_len(batch).unwrap()];
    let mut c_want = vec![0.0f64; shape.state_len(batch).unwrap()];
    forward_f64_with_state(
        &stack.weights().unwrap(),
        &input,
        batch,
        &mut ws,
        &mut want,
        &mut h_want,
        &mut c_want,
    )
    .unwrap();
    let (out_err, h_err, c_err) = (
        relative_l2(&r.out, &want),
        relative_l2(&r.h_n, &h_want),
        relative_l2(&r.c_n, &c_want),
    );
    eprintln!("rel L2 vs f64: output {out_err:.3e}, h_n {h_err:.3e}, c_n {c_err:.3e}");
    for (what, err) in [("output", out_err), ("h_n", h_err), ("c_n", c_err)] {
        assert!(err <= CPU_FP32_REL_L2, "{what}: {err:.3e}");
    }
    // The reference's own states agree with its output (its last layer's h is the output).
    let h = shape.hidden;
    let at = (2 * (shape.layers - 1)) * batch * h;
    let row = (shape.frames - 1) * shape.output_width();
    assert_eq!(h_want[at..at + h], want[row..row + h]);
}

#[test]
fn final_states_are_the_same_bits_for_any_threads_and_batch() {
    let stack = OwnedStack::random(&StackShape::pyannote().with_frames(24), 9, 0.3);
    let shape = stack.shape;
    let input = random_input(&shape, 5, 4);
    let five = run(&stack, 2, &input, 5);
    let one_thread = run(&stack, 1, &input, 5);
    assert_eq!(bits(&five.h_n), bits(&one_thread.h_n));
    assert_eq!(bits(&five.c_n), bits(&one_thread.c_n));
    // Window 3 alone: its states are those of window 3 inside the batch of 5.
    let in_w = shape.frames * shape.features;
    let alone = run(&stack, 2, &input[3 * in_w..4 * in_w], 1);
    let h = shape.hidden;
    for layer_dir in 0..2 * shape.layers {
        let inside = (layer_dir * 5 + 3) * h;
        let solo = layer_dir * h;
        assert_eq!(
            bits(&five.h_n[inside..inside + h]),
            bits(&alone.h_n[solo..solo + h])
        );
        assert_eq!(
            bits(&five.c_n[inside..inside + h]),
            bits(&alone.c_n[solo..solo + h])
        );
    }
}

#[test]
fn wrong_state_lengths_are_refused() {
    let stack = OwnedStack::random(&StackShape::pyannote().with_frames(8), 2, 0.3);
    let shape = stack.shape;
    let mut cpu = CpuBackend::with_threads(1);
    let config = BackendConfig {
        shape,
        max_batch: 2,
        math: MathMode::Fp32,
    };
    cpu.prepare(&stack.weights().unwrap(), &config).unwrap();
    let input = random_input(&shape, 2, 1);
    let mut out = vec![0.0f32; shape.output_len(2).unwrap()];
    let n = shape.state_len(2).unwrap();
    assert_eq!(n, 8 * 2 * 128);
    let mut short = vec![0.0f32; n - 1];
    let mut right = vec![0.0f32; n];
    let e = cpu
        .forward_with_state(&input, 2, &mut out, &mut short, &mut right)
        .unwrap_err();
    assert!(
        matches!(
            e,
            CpuError::Core(CoreError::Shape {
                what: "h_n length",
                expected,
                got,
            }) if expected == n && got == n - 1
        ),
        "{e}"
    );
    let mut right2 = vec![0.0f32; n];
    let e = cpu
        .forward_with_state(&input, 2, &mut out, &mut right2, &mut short)
        .unwrap_err();
    assert!(
        matches!(
            e,
            CpuError::Core(CoreError::Shape {
                what: "c_n length",
                ..
            })
        ),
        "{e}"
    );
}
