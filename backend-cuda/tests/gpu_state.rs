//! GPU: `Backend::forward_with_state` (what PyTorch's `nn.LSTM` returns as `(h_n, c_n)`): the
//! output bits of `forward`; every recurrence kind (wide, tiled, resident, cluster with 2 and 4
//! CTAs, 2-CTA clusters of 2, 4, 8 and 16 windows) writes the same final-state bits, also at 1,
//! 2 and 3 frames (the register quads' first and last steps); the last layer's
//! `h_n` equals the output at the window's last (forward) and first (reverse) frame; a window's
//! states do not depend on the batch; both tensors within FP32 mode's budget of the f64
//! reference; the exact error for state tensors of the wrong length.

// Test helpers: a failed expectation is a failed test.
#![allow(clippy::expect_used, clippy::panic)]

mod gpu_support;

use bilstm_core::owned::random_input;
use bilstm_core::reference::{forward_f64_with_state, relative_l2, workspace_len};
use bilstm_core::{Backend, CoreError, Overrides, StackShape};
use bilstm_cuda::{CudaBackend, CudaError, RecurrenceKind};
use gpu_support::{
    INPUT_SEED, StateRun, assert_last_h_n_is_the_output, assert_same_bits, budget, prepared,
    run_with_state, stack,
};

/// (kind, cluster size, windows per cluster) of every recurrence variant.
const VARIANTS: [(RecurrenceKind, Option<usize>, Option<usize>); 9] = [
    (RecurrenceKind::Wide, None, None),
    (RecurrenceKind::Tiled, None, None),
    (RecurrenceKind::Resident, None, None),
    (RecurrenceKind::Cluster, Some(2), Some(1)),
    (RecurrenceKind::Cluster, Some(4), Some(1)),
    (RecurrenceKind::Cluster, Some(2), Some(2)),
    // The register quads (one quad; two half a step apart) and the 16-window tile.
    (RecurrenceKind::Cluster, Some(2), Some(4)),
    (RecurrenceKind::Cluster, Some(2), Some(8)),
    (RecurrenceKind::Cluster, Some(2), Some(16)),
];

fn force(gpu: &mut CudaBackend, v: (RecurrenceKind, Option<usize>, Option<usize>)) {
    gpu.set_overrides(Overrides {
        recurrence: Some(v.0),
        cluster_size: v.1,
        cluster_windows: v.2,
        ..Overrides::default()
    })
    .expect("forcing a recurrence variant");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_kind_writes_the_same_final_states() {
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    let batch = 9;
    let input = random_input(&shape, batch, INPUT_SEED);
    let mut gpu = prepared(&st, 33);
    let mut first: Option<StateRun> = None;
    for v in VARIANTS {
        force(&mut gpu, v);
        let r = run_with_state(&mut gpu, &shape, &input, batch);
        let s = gpu.last_forward().expect("summary");
        eprintln!("{:?}: {}", v, s.plan.schedule.reason);
        assert_last_h_n_is_the_output(&shape, batch, &r, &format!("{v:?}"));
        match &first {
            None => first = Some(r),
            Some(f) => {
                assert_same_bits(&f.h_n, &r.h_n, &format!("{v:?}: h_n vs wide"));
                assert_same_bits(&f.c_n, &r.c_n, &format!("{v:?}: c_n vs wide"));
            }
        }
    }
    // Against the f64 reference.
    let f = first.expect("runs");
    let mut ws = vec![0.0f64; workspace_len(&shape, batch).expect("workspace")];
    let mut want = vec![0.0f64; shape.output_len(batch).expect("output")];
    let n = shape.state_len(batch).expect("state");
    let (mut h_want, mut c_want) = (vec![0.0f64; n], vec![0.0f64; n]);
    forward_f64_with_state(
        &st.weights().expect("weights"),
        &input,
        batch,
        &mut ws,
        &mut want,
        &mut h_want,
        &mut c_want,
    )
    .expect("reference");
    let errs = [
        ("output", relative_l2(&f.out, &want)),
        ("h_n", relative_l2(&f.h_n, &h_want)),
        ("c_n", relative_l2(&f.c_n, &c_want)),
    ];
    for (what, err) in errs {
        eprintln!(
            "batch {batch}, 589 frames: {what} rel L2 {err:.3e} (budget {:.1e})",
            budget()
        );
        assert!(err <= budget(), "{what}: {err:.3e}");
    }
}

/// At 1, 2 and 3 frames every variant gives the wide kernel's output and final-state bits
/// (batch 9: the 8-window quads run a full and a one-window cluster a direction): the quads'
/// peeled first step, their last step and the pending cell the two-quad kernel finishes after
/// its loop.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_kind_agrees_at_one_two_and_three_frames() {
    let batch = 9;
    for frames in [1, 2, 3] {
        let shape = StackShape::pyannote().with_frames(frames);
        let st = stack(&shape);
        let input = random_input(&shape, batch, INPUT_SEED + frames as u64);
        let mut gpu = prepared(&st, batch);
        let mut first: Option<StateRun> = None;
        for v in VARIANTS {
            force(&mut gpu, v);
            let r = run_with_state(&mut gpu, &shape, &input, batch);
            match &first {
                None => first = Some(r),
                Some(f) => {
                    let what = format!("{v:?} at {frames} frame(s)");
                    assert_same_bits(&f.out, &r.out, &format!("{what}: output vs wide"));
                    assert_same_bits(&f.h_n, &r.h_n, &format!("{what}: h_n vs wide"));
                    assert_same_bits(&f.c_n, &r.c_n, &format!("{what}: c_n vs wide"));
                }
            }
        }
        eprintln!(
            "{frames} frame(s): {} variants agree bit for bit",
            VARIANTS.len()
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_windows_final_states_do_not_depend_on_the_batch() {
    let shape = StackShape::pyannote().with_frames(64);
    let st = stack(&shape);
    let input = random_input(&shape, 33, INPUT_SEED);
    let mut gpu = prepared(&st, 33);
    let in_w = shape.frames * shape.features;
    let h = shape.hidden;
    for v in VARIANTS {
        force(&mut gpu, v);
        let all = run_with_state(&mut gpu, &shape, &input, 33);
        for w in [0usize, 17, 32] {
            let alone = run_with_state(&mut gpu, &shape, &input[w * in_w..(w + 1) * in_w], 1);
            for ld in 0..2 * shape.layers {
                let inside = (ld * 33 + w) * h;
                let solo = ld * h;
                assert_same_bits(
                    &all.h_n[inside..inside + h],
                    &alone.h_n[solo..solo + h],
                    &format!("{v:?}: h_n of window {w}, layer-direction {ld}"),
                );
                assert_same_bits(
                    &all.c_n[inside..inside + h],
                    &alone.c_n[solo..solo + h],
                    &format!("{v:?}: c_n of window {w}, layer-direction {ld}"),
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn wrong_state_lengths_are_refused_before_any_work() {
    let shape = StackShape::pyannote().with_frames(8);
    let st = stack(&shape);
    let mut gpu = prepared(&st, 2);
    let input = random_input(&shape, 2, INPUT_SEED);
    let mut out = vec![0.0f32; shape.output_len(2).expect("output")];
    let n = shape.state_len(2).expect("state");
    let (mut short, mut right) = (vec![0.0f32; n - 1], vec![0.0f32; n]);
    let e = gpu
        .forward_with_state(&input, 2, &mut out, &mut short, &mut right)
        .expect_err("a short h_n");
    assert!(
        matches!(
            e,
            CudaError::Core(CoreError::Shape {
                what: "h_n length",
                ..
            })
        ),
        "{e}"
    );
}
