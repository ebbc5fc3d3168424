//! GPU: one small pass (batch 2, 17 frames) for compute-sanitizer's memcheck, racecheck and
//! synccheck (`scripts/gpu-bundle`'s run.sh runs it under each tool with a long spin timeout:
//! `BILSTM_SPIN_TIMEOUT_MS`), checked against the f64 reference.

mod gpu_support;

use bilstm_core::StackShape;
use bilstm_core::owned::random_input;
use gpu_support::{INPUT_SEED, budget, errors, prepared, reference, run, stack};

#[test]
#[ignore = "needs a CUDA GPU"]
fn small_pass_for_sanitizers() {
    let shape = StackShape::pyannote().with_frames(17);
    let st = stack(&shape);
    let batch = 2;
    let input = random_input(&shape, batch, INPUT_SEED);
    let mut b = prepared(&st, batch);
    eprintln!("spin timeout {:?}", b.spin_timeout());
    let got = run(&mut b, &shape, &input, batch);
    let want = reference(&st, &input, batch);
    let (rel, max_abs) = errors(&got, &want);
    eprintln!("batch {batch}, 17 frames: rel L2 {rel:.3e}, max abs {max_abs:.3e}");
    assert!(rel <= budget());
}
