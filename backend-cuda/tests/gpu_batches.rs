//! GPU: a window's bits never depend on the batch it runs in, at the real shape (589 frames) and
//! the large batches of issue 14 (item 5: 1, 33, 128, 257, 1024): every window of every batch,
//! through the host path (unsplit and in the pipelined chunks) and device-resident, with the
//! plan's own kernels and with each recurrence kind forced, has the bits it has run alone.
//!
//! `gpu_kernels` checks the kinds against each other at the latency batches and the first and
//! last windows of large batches at 40 frames; this file checks every window where the plan
//! switches to multi-wave grids, two-window clusters and the chunked host path.

// Test helpers: a failed expectation is a failed test.
#![allow(clippy::expect_used, clippy::panic)]

mod gpu_support;

use bilstm_core::StackShape;
use bilstm_core::geometry::CLUSTER_TILE_WINDOWS;
use bilstm_core::owned::random_input;
use bilstm_core::plan::pipeline::HOST_CHUNK_WINDOWS;
use bilstm_cuda::{CudaBackend, Overrides, RecurrenceKind};
use gpu_support::{INPUT_SEED, differing_windows, force, prepared, run, run_device, stack};

/// The batches compared with batch 1 (issue 14 item 5, plus 64 and 128: the plan's last
/// one-wave batch and the CLI's file chunk).
const BATCHES: [usize; 5] = [33, 64, 128, 257, 1024];

/// The outputs of the first `windows` windows of `all`, each run alone (batch 1, the plan's
/// kernels), one after another.
fn each_alone(gpu: &mut CudaBackend, shape: &StackShape, all: &[f32], windows: usize) -> Vec<f32> {
    let in_w = shape.frames * shape.features;
    let mut alone = Vec::with_capacity(windows * shape.frames * shape.output_width());
    for w in 0..windows {
        alone.extend(run(gpu, shape, &all[w * in_w..(w + 1) * in_w], 1));
    }
    alone
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_window_of_a_large_batch_has_its_batch_one_bits() {
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    let big = *BATCHES.iter().max().expect("batches");
    let all = random_input(&shape, big, INPUT_SEED);
    let in_w = shape.frames * shape.features;
    let out_w = shape.frames * shape.output_width();
    let mut gpu = prepared(&st, big);
    let alone = each_alone(&mut gpu, &shape, &all, big);

    let mut failures = Vec::new();
    let mut check = |what: String, got: &[f32], batch: usize| {
        let bad = differing_windows(&alone[..batch * out_w], got, out_w, shape.output_width());
        eprintln!("{what}: {} of {batch} windows differ", bad.len());
        if !bad.is_empty() {
            eprintln!(
                "  {}",
                bad.iter().take(8).cloned().collect::<Vec<_>>().join("; ")
            );
            failures.push(format!(
                "{what}: {} windows differ, first {}",
                bad.len(),
                bad[0]
            ));
        }
    };
    let kinds = [
        None,
        Some(RecurrenceKind::Cluster),
        Some(RecurrenceKind::Resident),
        Some(RecurrenceKind::Tiled),
    ];
    for kind in kinds {
        force(&mut gpu, kind);
        let name = kind.map_or("auto".to_string(), |k| k.to_string());
        for batch in BATCHES {
            // The tiled kind at 1024 windows is minutes of sequential waves; 257 covers its
            // multi-launch schedule.
            if kind == Some(RecurrenceKind::Tiled) && batch > 257 {
                continue;
            }
            for chunk in [0, HOST_CHUNK_WINDOWS] {
                gpu.set_host_chunk(chunk);
                let got = run(&mut gpu, &shape, &all[..batch * in_w], batch);
                let plan = gpu
                    .last_forward()
                    .map(|s| s.plan.schedule.reason.to_string())
                    .unwrap_or_default();
                check(
                    format!("{name} batch {batch} host chunk {chunk} ({plan})"),
                    &got,
                    batch,
                );
            }
            let got = run_device(&mut gpu, &shape, &all, batch);
            check(format!("{name} batch {batch} device-resident"), &got, batch);
        }
    }
    gpu.set_host_chunk(HOST_CHUNK_WINDOWS);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The backend trait's host forward at the CLI's file chunk and twice it (the `bilstm run`
/// figures: 1024 windows in passes of 128 and of 256) gives the same bits for every window.
#[test]
#[ignore = "needs a CUDA GPU"]
fn passes_of_128_and_256_windows_give_the_same_bits() {
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    let windows = 512;
    let all = random_input(&shape, windows, INPUT_SEED + 3);
    let in_w = shape.frames * shape.features;
    let out_w = shape.frames * shape.output_width();
    let mut outputs = Vec::new();
    for pass in [128, 256] {
        let mut gpu = prepared(&st, pass);
        let mut out = Vec::with_capacity(windows * out_w);
        for start in (0..windows).step_by(pass) {
            let x = &all[start * in_w..(start + pass) * in_w];
            out.extend(run(&mut gpu, &shape, x, pass));
        }
        outputs.push(out);
    }
    let bad = differing_windows(&outputs[0], &outputs[1], out_w, shape.output_width());
    assert!(
        bad.is_empty(),
        "{} of {windows} windows differ between passes of 128 and 256: {}",
        bad.len(),
        bad.iter().take(8).cloned().collect::<Vec<_>>().join("; ")
    );
}

/// The window-tile cluster kernels (2-CTA clusters of 4 and 8 windows with R in registers, 16
/// with R in shared memory), forced: every window of batches 1 to 257 (partial last tiles
/// included), device-resident and through the host path (unsplit with the zero-copy output and
/// its one progress report, and chunked), has the bits it has run alone with the plan's kernels.
#[test]
#[ignore = "needs a CUDA GPU"]
fn window_tile_kernels_give_every_window_its_batch_one_bits() {
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    let big = 257;
    let all = random_input(&shape, big, INPUT_SEED + 5);
    let in_w = shape.frames * shape.features;
    let out_w = shape.frames * shape.output_width();
    let mut gpu = prepared(&st, big);
    let alone = each_alone(&mut gpu, &shape, &all, big);
    let mut failures = Vec::new();
    for windows in CLUSTER_TILE_WINDOWS {
        gpu.set_overrides(Overrides {
            recurrence: Some(RecurrenceKind::Cluster),
            cluster_size: Some(2),
            cluster_windows: Some(windows),
            ..Overrides::default()
        })
        .unwrap_or_else(|e| panic!("forcing 2-CTA clusters of {windows} windows: {e}"));
        for batch in [1, 5, 33, 128, 257] {
            let mut outputs = Vec::new();
            for chunk in [0, HOST_CHUNK_WINDOWS] {
                gpu.set_host_chunk(chunk);
                outputs.push((
                    format!("host chunk {chunk}"),
                    run(&mut gpu, &shape, &all[..batch * in_w], batch),
                ));
            }
            outputs.push((
                "device-resident".to_string(),
                run_device(&mut gpu, &shape, &all, batch),
            ));
            let summary = gpu.last_forward().expect("summary");
            let schedule = summary
                .plan
                .schedule
                .choice
                .cluster()
                .map(|c| c.windows_per_cluster);
            assert_eq!(schedule, Some(windows), "the forced tile ran");
            for (what, got) in outputs {
                let bad =
                    differing_windows(&alone[..batch * out_w], &got, out_w, shape.output_width());
                eprintln!(
                    "cluster2w{windows} batch {batch} {what}: {} of {batch} windows differ",
                    bad.len()
                );
                if let Some(first) = bad.first() {
                    failures.push(format!(
                        "cluster2w{windows} batch {batch} {what}: {} windows differ, first {first}",
                        bad.len()
                    ));
                }
            }
        }
    }
    gpu.set_host_chunk(HOST_CHUNK_WINDOWS);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
