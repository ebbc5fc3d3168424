//! GPU: the pipelined host path (a host forward split into chunks whose copies overlap their
//! neighbours' compute) and the zero-copy one (the output written to mapped host memory) give
//! the downloaded unsplit pass's bits for every chunk size and recurrence kind, and a lost
//! partner in any chunk is reported, never a silently partial output.

mod gpu_support;

use std::time::Duration;

use bilstm_core::owned::random_input;
use bilstm_core::plan::pipeline::HOST_CHUNK_WINDOWS;
use bilstm_core::{Backend, BackendError, Direction, ErrorKind, StackShape};
use bilstm_cuda::{CudaError, Overrides, RecurrenceKind, StallInjection};
use gpu_support::{
    INPUT_SEED, assert_same_bits, budget, errors, prepared, prepared_kind, reference, run, stack,
};

#[test]
#[ignore = "needs a CUDA GPU"]
fn chunked_host_forwards_give_the_unsplit_bits() {
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    let batch = 11;
    let input = random_input(&shape, batch, INPUT_SEED);
    let mut b = prepared(&st, batch);
    assert_eq!(b.host_chunk(), HOST_CHUNK_WINDOWS);
    assert!(b.host_zero_copy());
    b.set_host_chunk(0);
    // The unsplit pass with its output written to mapped host memory, then downloaded.
    let whole = run(&mut b, &shape, &input, batch);
    let (rel, _) = errors(&whole, &reference(&st, &input, batch));
    assert!(
        rel <= budget(),
        "unsplit zero-copy pass: relative L2 {rel:e}"
    );
    b.set_host_zero_copy(false);
    let downloaded = run(&mut b, &shape, &input, batch);
    assert_same_bits(&whole, &downloaded, "downloaded against zero-copy");
    b.set_host_zero_copy(true);
    // Chunks of 1 (eleven passes), 3 (3+3+3+2), 4 (4+4+3), 10 (10+1) and one chunk.
    for chunk in [1, 3, 4, 10, 11, 64] {
        b.set_host_chunk(chunk);
        let got = run(&mut b, &shape, &input, batch);
        assert_same_bits(&whole, &got, &format!("chunks of {chunk}"));
    }
    // Dirty workspaces between chunked passes change nothing either.
    b.set_host_chunk(3);
    b.scribble_workspaces(7).expect("scribble");
    let dirty = run(&mut b, &shape, &input, batch);
    assert_same_bits(&whole, &dirty, "chunks of 3 after a scribble");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn chunked_cooperative_passes_give_the_unsplit_bits() {
    // The wide and tiled kinds clear their exchange per chunk (but not the error words).
    let shape = StackShape::pyannote().with_frames(96);
    let st = stack(&shape);
    let batch = 19;
    let input = random_input(&shape, batch, INPUT_SEED);
    let mut reference_bits = None;
    for kind in [
        RecurrenceKind::Wide,
        RecurrenceKind::Tiled,
        RecurrenceKind::Resident,
        RecurrenceKind::Cluster,
    ] {
        let mut b = prepared_kind(&st, batch, kind);
        b.set_host_chunk(0);
        let whole = run(&mut b, &shape, &input, batch);
        for chunk in [5, 8] {
            b.set_host_chunk(chunk);
            let got = run(&mut b, &shape, &input, batch);
            assert_same_bits(&whole, &got, &format!("{kind}, chunks of {chunk}"));
        }
        match &reference_bits {
            None => reference_bits = Some(whole),
            Some(first) => assert_same_bits(first, &whole, &format!("{kind} against wide")),
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_lost_partner_in_an_early_chunk_is_reported_after_a_clean_last_chunk() {
    let shape = StackShape::pyannote().with_frames(64);
    let st = stack(&shape);
    // Chunks of 4, 4 and 2 windows. With 4-CTA clusters a chunk of n windows launches 8n
    // CTAs per layer: CTA 20 (cluster 5, the reverse direction) exists in the two 4-window
    // chunks only, so the last chunk runs clean after the failures and must not hide them.
    let batch = 10;
    let input = random_input(&shape, batch, INPUT_SEED);
    let mut b = prepared_kind(&st, batch, RecurrenceKind::Cluster);
    b.set_overrides(Overrides {
        recurrence: Some(RecurrenceKind::Cluster),
        cluster_size: Some(4),
        ..Overrides::default()
    })
    .expect("forcing 4-CTA clusters");
    b.set_host_chunk(4);
    let clean = run(&mut b, &shape, &input, batch);
    b.set_spin_timeout(Duration::from_millis(200));
    b.inject_stall(Some(StallInjection {
        layer: 1,
        direction: Direction::Reverse,
        block: 20,
    }));
    let mut out = vec![0.0; shape.output_len(batch).unwrap()];
    let e = b.forward(&input, batch, &mut out).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    match e {
        CudaError::PartnerLost {
            kernel,
            layer,
            direction,
            ..
        } => assert_eq!(
            (kernel, layer, direction),
            ("bilstm_recurrence_cluster4", 1, Direction::Reverse)
        ),
        other => panic!("expected PartnerLost, got {other}"),
    }
    // A stall every chunk reaches (CTA 12 exists in all three) is reported too.
    b.inject_stall(Some(StallInjection {
        layer: 3,
        direction: Direction::Forward,
        block: 12,
    }));
    let e = b.forward(&input, batch, &mut out).unwrap_err();
    assert!(
        matches!(e, CudaError::PartnerLost { layer: 3, .. }),
        "expected PartnerLost at layer 3, got {e}"
    );
    b.inject_stall(None);
    let again = run(&mut b, &shape, &input, batch);
    assert_same_bits(&clean, &again, "after the failed chunked passes");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn progressive_copies_give_the_downloaded_bits() {
    // The writer warp's progress reports come every 64 steps and after the last: 589 frames end
    // between two reports, 128 frames on one; one- and two-window clusters, 2- and 4-CTA.
    for frames in [589, 128, 5] {
        let shape = StackShape::pyannote().with_frames(frames);
        let st = stack(&shape);
        let max_batch = 64;
        let mut b = prepared(&st, max_batch);
        assert!(b.host_progressive() && b.host_zero_copy());
        for (batch, size, windows) in [(1, 4, 1), (7, 2, 1), (33, 2, 1), (64, 2, 2), (9, 2, 2)] {
            b.set_overrides(Overrides {
                recurrence: Some(RecurrenceKind::Cluster),
                cluster_size: Some(size),
                cluster_windows: Some(windows),
                ..Overrides::default()
            })
            .expect("forcing a cluster shape");
            let input = random_input(&shape, batch, INPUT_SEED + batch as u64);
            b.set_host_zero_copy(false);
            let downloaded = run(&mut b, &shape, &input, batch);
            b.set_host_zero_copy(true);
            b.set_host_progressive(false);
            let after = run(&mut b, &shape, &input, batch);
            b.set_host_progressive(true);
            // Another input's pass first: the mapped output then holds other values, so a row
            // copied before the kernel had made it visible would show.
            let other = random_input(&shape, batch, INPUT_SEED + 1000 + batch as u64);
            let _ = run(&mut b, &shape, &other, batch);
            let progressive = run(&mut b, &shape, &input, batch);
            let what = format!("{frames} frames, batch {batch}, {size}-CTA clusters of {windows}");
            assert_same_bits(&downloaded, &after, &format!("copy after the pass, {what}"));
            assert_same_bits(
                &downloaded,
                &progressive,
                &format!("progressive copy, {what}"),
            );
            if frames == 589 && batch == 33 {
                let (rel, _) = errors(&progressive, &reference(&st, &input, batch));
                assert!(rel <= budget(), "{what}: relative L2 {rel:e}");
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn graph_replays_of_host_passes_give_the_enqueued_bits() {
    // Every pass after the first of a batch size replays the captured graph with new input; a
    // changed plan (an override) captures anew; graphs off enqueues kernel by kernel.
    let shape = StackShape::pyannote().with_frames(97);
    let st = stack(&shape);
    let mut b = prepared(&st, 64);
    for kind in [None, Some(RecurrenceKind::Resident), None] {
        b.set_overrides(Overrides {
            recurrence: kind,
            ..Overrides::default()
        })
        .expect("overrides");
        for batch in [1, 9, 33, 64, 9] {
            for seed in [1, 2] {
                let input = random_input(&shape, batch, INPUT_SEED + seed * 100 + batch as u64);
                b.set_host_graph(false);
                let enqueued = run(&mut b, &shape, &input, batch);
                b.set_host_graph(true);
                let replayed = run(&mut b, &shape, &input, batch);
                let again = run(&mut b, &shape, &input, batch);
                let what = format!("{kind:?}, batch {batch}, seed {seed}");
                assert_same_bits(&enqueued, &replayed, &format!("graph pass, {what}"));
                assert_same_bits(&enqueued, &again, &format!("graph replay, {what}"));
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_lost_partner_in_the_last_layer_ends_a_progressive_copy_with_an_error() {
    // The last layer stops reporting half-way: the copy threads must notice the pass's end
    // (not wait for rows that never come) and the caller must get the report.
    let shape = StackShape::pyannote().with_frames(300);
    let st = stack(&shape);
    let batch = 6;
    let input = random_input(&shape, batch, INPUT_SEED);
    let mut b = prepared_kind(&st, batch, RecurrenceKind::Cluster);
    b.set_overrides(Overrides {
        recurrence: Some(RecurrenceKind::Cluster),
        cluster_size: Some(2),
        cluster_windows: Some(1),
        ..Overrides::default()
    })
    .expect("forcing 2-CTA clusters");
    assert!(b.host_progressive());
    let clean = run(&mut b, &shape, &input, batch);
    b.set_spin_timeout(Duration::from_millis(200));
    // CTA 5: cluster 2 (window 1, forward), rank 1: the rank-0 writer waits for it in vain.
    b.inject_stall(Some(StallInjection {
        layer: shape.layers - 1,
        direction: Direction::Forward,
        block: 5,
    }));
    let mut out = vec![0.0; shape.output_len(batch).unwrap()];
    let started = std::time::Instant::now();
    let e = b.forward(&input, batch, &mut out).unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the failed pass took {:?}",
        started.elapsed()
    );
    match e {
        CudaError::PartnerLost { kernel, layer, .. } => assert_eq!(
            (kernel, layer),
            ("bilstm_recurrence_cluster2", shape.layers - 1)
        ),
        other => panic!("expected PartnerLost, got {other}"),
    }
    b.inject_stall(None);
    let again = run(&mut b, &shape, &input, batch);
    assert_same_bits(&clean, &again, "after the failed progressive pass");
}
