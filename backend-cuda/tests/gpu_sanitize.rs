//! GPU: one small pass per recurrence kernel (17 frames; wide, tiled, resident and the 2-CTA
//! cluster kernels with one and two windows a cluster forced) for compute-sanitizer's memcheck,
//! racecheck and synccheck (`scripts/gpu-bundle`'s run.sh runs this binary under each tool with
//! a long spin timeout: `BILSTM_SPIN_TIMEOUT_MS`), each checked against the f64 reference. The
//! default plan's pass (4-CTA clusters on the H200) runs too, and a graph replay of it, and a
//! chunked host pass.

// Test helpers: a failed expectation is a failed test.
#![allow(clippy::expect_used)]

mod gpu_support;

use bilstm_core::StackShape;
use bilstm_core::owned::random_input;
use bilstm_cuda::RecurrenceKind;
use gpu_support::{
    INPUT_SEED, assert_same_bits, budget, errors, prepared, prepared_kind, reference, run, stack,
};

fn small_pass(kind: Option<RecurrenceKind>) {
    let shape = StackShape::pyannote().with_frames(17);
    let st = stack(&shape);
    let batch = 2;
    let input = random_input(&shape, batch, INPUT_SEED);
    let mut b = match kind {
        Some(k) => prepared_kind(&st, batch, k),
        None => prepared(&st, batch),
    };
    eprintln!("spin timeout {:?}", b.spin_timeout());
    let got = run(&mut b, &shape, &input, batch);
    let ran = b.last_forward().expect("summary").recurrence;
    let want = reference(&st, &input, batch);
    let (rel, max_abs) = errors(&got, &want);
    eprintln!("{ran}: batch {batch}, 17 frames: rel L2 {rel:.3e}, max abs {max_abs:.3e}");
    assert!(rel <= budget());
    if kind.is_none() {
        // The same pass from a CUDA graph.
        let d_in = b.stream().clone_htod(&input).expect("upload");
        let d_out = b.stream().alloc_zeros::<f32>(got.len()).expect("alloc");
        let graph = b
            .capture_forward_device(d_in, batch, d_out)
            .expect("capture");
        b.replay(&graph).expect("replay");
        let replayed = b.stream().clone_dtoh(graph.output()).expect("download");
        assert_same_bits(&got, &replayed, "graph replay");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn small_pass_for_sanitizers() {
    small_pass(None);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn small_wide_pass_for_sanitizers() {
    small_pass(Some(RecurrenceKind::Wide));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn small_tiled_pass_for_sanitizers() {
    small_pass(Some(RecurrenceKind::Tiled));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn small_resident_pass_for_sanitizers() {
    small_pass(Some(RecurrenceKind::Resident));
}

/// The cluster recurrence with 2-CTA clusters (the default plan of an H200 runs 4-CTA
/// clusters at batch 2, which `small_pass_for_sanitizers` covers, with a graph replay).
#[test]
#[ignore = "needs a CUDA GPU"]
fn small_cluster2_pass_for_sanitizers() {
    cluster2_pass(2, 1);
}

/// The two-window 2-CTA cluster kernel (the plan's choice at batch 64 and above on an H200), at
/// batch 3: one cluster with two windows and one whose second window is absent.
#[test]
#[ignore = "needs a CUDA GPU"]
fn small_cluster2w2_pass_for_sanitizers() {
    cluster2_pass(3, 2);
}

/// The window-tile cluster kernels (2-CTA clusters of 4 and 8 windows with R in registers, 16
/// with R in shared memory), each with a partial last tile (batch = tile + 1).
#[test]
#[ignore = "needs a CUDA GPU"]
fn small_cluster_tile_passes_for_sanitizers() {
    for windows in bilstm_core::geometry::CLUSTER_TILE_WINDOWS {
        cluster2_pass(windows + 1, windows);
    }
}

/// One forward of `batch` windows (17 frames) with 2-CTA clusters of `windows` windows each,
/// checked against the f64 reference.
fn cluster2_pass(batch: usize, windows: usize) {
    let shape = StackShape::pyannote().with_frames(17);
    let st = stack(&shape);
    let input = random_input(&shape, batch, INPUT_SEED);
    let mut b = prepared(&st, batch);
    b.set_overrides(bilstm_cuda::Overrides {
        recurrence: Some(RecurrenceKind::Cluster),
        cluster_size: Some(2),
        cluster_windows: Some(windows),
        ..bilstm_cuda::Overrides::default()
    })
    .expect("forcing 2-CTA clusters");
    let got = run(&mut b, &shape, &input, batch);
    let s = b.last_forward().expect("summary");
    assert_eq!(
        s.plan
            .schedule
            .choice
            .cluster()
            .map(|c| (c.cluster_size, c.windows_per_cluster)),
        Some((2, windows))
    );
    let want = reference(&st, &input, batch);
    let (rel, max_abs) = errors(&got, &want);
    eprintln!(
        "cluster2 ({windows} window(s) a cluster): batch {batch}, 17 frames: rel L2 {rel:.3e}, \
         max abs {max_abs:.3e}"
    );
    assert!(rel <= budget());
}

/// The pipelined host path: batch 3 in chunks of 2 and 1 (two passes in two window regions of
/// the layer buffers, copies on the copy stream), checked against the f64 reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn small_chunked_host_pass_for_sanitizers() {
    let shape = StackShape::pyannote().with_frames(17);
    let st = stack(&shape);
    let batch = 3;
    let input = random_input(&shape, batch, INPUT_SEED);
    let mut b = prepared(&st, batch);
    b.set_host_chunk(2);
    let got = run(&mut b, &shape, &input, batch);
    let want = reference(&st, &input, batch);
    let (rel, max_abs) = errors(&got, &want);
    eprintln!(
        "chunked: batch {batch} in chunks of 2, 17 frames: rel L2 {rel:.3e}, max abs {max_abs:.3e}"
    );
    assert!(rel <= budget());
}
