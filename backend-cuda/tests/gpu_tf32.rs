//! GPU: the TF32 tensor-core projections (`ProjectionTile::Tf32`, and on 9.0 the warpgroup one,
//! `ProjectionTile::Tf32Wgmma`, `MathMode::Tf32`) against the f64 reference (budget
//! `gpu_budget(MathMode::Tf32)`, 1.1 x cuDNN TF32's error), run to run, and against the FP32
//! projection of the same backend, and (on 9.0) the resident TF32 projection against the
//! streaming one. `small_tf32_pass_for_sanitizers` and `small_tf32_pass_for_sanitizers_resident`
//! are the passes `scripts/gpu-run.sh` runs under compute-sanitizer.

// Test helpers: a failed expectation is a failed test.
#![allow(clippy::panic, clippy::expect_used)]

mod gpu_support;

use bilstm_core::accuracy::gpu_budget;
use bilstm_core::owned::{OwnedStack, random_input};
use bilstm_core::reference::relative_l2;
use bilstm_core::{
    Backend, BackendConfig, BackendError, ErrorKind, MathMode, Overrides, ProjectionTile,
    RecurrenceKind, StackShape,
};
use bilstm_cuda::CudaBackend;
use gpu_support::{
    INPUT_SEED, assert_same_bits, cached_reference, differing_windows, errors, first_difference,
    gpu, no_resident_projection_here, prepared_quads, reference, run, run_device, seed, stack,
    tf32_backend,
};

fn tf32_budget() -> f64 {
    gpu_budget(MathMode::Tf32)
}

/// The TF32 tiles this GPU runs: the mma.sync one, and the warpgroup one on 9.0.
fn tf32_tiles() -> Vec<ProjectionTile> {
    let mut tiles = vec![ProjectionTile::Tf32];
    if bilstm_core::plan::wgmma_available(gpu().device().facts.compute_capability) {
        tiles.push(ProjectionTile::Tf32Wgmma);
    }
    tiles
}

/// A backend in `MathMode::Tf32` with the TF32 projection `tile` forced, and the wide recurrence
/// (validated on the H200 since part 1) so that these tests measure the projection alone.
fn prepared_tf32(stack: &OwnedStack, max_batch: usize, tile: ProjectionTile) -> CudaBackend {
    tf32_backend(
        stack,
        max_batch,
        Overrides {
            recurrence: Some(RecurrenceKind::Wide),
            projection: Some(tile),
            ..Overrides::default()
        },
    )
}

fn assert_ran_tf32(b: &CudaBackend, tile: ProjectionTile) {
    let s = b.last_forward().expect("summary");
    assert_eq!(s.projection_tile, tile);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tf32_matches_the_f64_reference_at_589_frames() {
    for tile in tf32_tiles() {
        let shape = StackShape::pyannote();
        let st = stack(&shape);
        let batches = [1, 8, 33];
        let mut b = prepared_tf32(&st, 33, tile);
        let want_all = cached_reference(&shape, 33);
        let out_w = shape.frames * shape.output_width();
        eprintln!(
            "{}; seed {} (BILSTM_SEED overrides), TF32 budget {:.3e}",
            b.describe(),
            seed(),
            tf32_budget()
        );
        let mut worst = 0.0f64;
        for batch in batches {
            let input = random_input(&shape, batch, INPUT_SEED);
            let got = run(&mut b, &shape, &input, batch);
            assert_ran_tf32(&b, tile);
            let (rel, max_abs) = errors(&got, &want_all[..batch * out_w]);
            eprintln!("{tile} batch {batch:>2}: rel L2 {rel:.3e}, max abs {max_abs:.3e}");
            assert!(
                rel <= tf32_budget(),
                "batch {batch}: relative L2 {rel:.3e} over the TF32 budget {:.3e}",
                tf32_budget()
            );
            worst = worst.max(rel);
        }
        // For scale: the FP32 projection in the same backend on the largest batch.
        b.set_projection_tile(Some(ProjectionTile::Large128));
        let input = random_input(&shape, 33, INPUT_SEED);
        let fp32 = run(&mut b, &shape, &input, 33);
        let (rel32, _) = errors(&fp32, &want_all[..33 * out_w]);
        eprintln!(
            "worst tf32 rel L2 {worst:.3e}; fp32 128x128 tile at batch 33: rel L2 {rel32:.3e}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tf32_runs_are_bitwise_identical() {
    for tile in tf32_tiles() {
        let shape = StackShape::pyannote();
        let st = stack(&shape);
        // 9 * 589 = 5301 rows: a partial last row tile (5301 = 41 * 128 + 53).
        let batch = 9;
        let input = random_input(&shape, batch, INPUT_SEED);
        let mut b = prepared_tf32(&st, batch, tile);
        let first = run(&mut b, &shape, &input, batch);
        for round in 0..3u64 {
            b.scribble_workspaces(0xD1A7 + round).expect("scribble");
            let again = run(&mut b, &shape, &input, batch);
            assert_same_bits(&first, &again, &format!("{tile} run {}", round + 2));
        }
        eprintln!("{tile} batch {batch}: 4 runs (3 after dirty workspaces) bitwise identical");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tf32_window_bits_do_not_depend_on_the_batch() {
    for tile in tf32_tiles() {
        let shape = StackShape::pyannote().with_frames(64);
        let st = stack(&shape);
        let big = 33;
        let input = random_input(&shape, big, INPUT_SEED);
        let mut b = prepared_tf32(&st, big, tile);
        let all = run(&mut b, &shape, &input, big);
        let in_w = shape.frames * shape.features;
        let out_w = shape.frames * shape.output_width();
        // Window 5 alone and inside batches of other sizes sits at other rows of the row tiles.
        for (batch, first_window) in [(1, 5), (3, 4), (9, 0)] {
            let part = &input[first_window * in_w..(first_window + batch) * in_w];
            let got = run(&mut b, &shape, part, batch);
            assert_same_bits(
                &got,
                &all[first_window * out_w..(first_window + batch) * out_w],
                &format!("windows {first_window}.. alone (batch {batch}) vs inside batch {big}"),
            );
        }
        eprintln!("tf32: window bits independent of batch and row-tile position");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tf32_and_fp32_projections_agree_within_tf32_tolerance() {
    for tile in tf32_tiles() {
        let shape = StackShape::pyannote();
        let st = stack(&shape);
        let batch = 8;
        let input = random_input(&shape, batch, INPUT_SEED);
        let mut b = prepared_tf32(&st, batch, tile);
        let tf32 = run(&mut b, &shape, &input, batch);
        b.set_projection_tile(Some(ProjectionTile::Large128));
        let fp32 = run(&mut b, &shape, &input, batch);
        let fp32_64: Vec<f64> = fp32.iter().map(|&v| f64::from(v)).collect();
        let rel = relative_l2(&tf32, &fp32_64);
        eprintln!("batch {batch}: tf32 vs fp32 projection (whole stack) rel L2 {rel:.3e}");
        assert!(
            first_difference(&tf32, &fp32).is_some(),
            "TF32 and FP32 gave the same bits: did the TF32 kernel run?"
        );
        assert!(rel <= tf32_budget(), "rel L2 {rel:.3e}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tf32_short_frames_and_odd_feature_counts() {
    for tile in tf32_tiles() {
        // Frames 1 and 17 (a single partial row tile); 61 features take the kernel's 4-byte copy
        // path (rows of x not 16-byte aligned) and a partial last K chunk.
        for (features, frames) in [(60, 1), (60, 17), (61, 17), (1, 5)] {
            let shape = StackShape {
                features,
                ..StackShape::pyannote().with_frames(frames)
            };
            let st = OwnedStack::random(&shape, seed(), 0.3);
            let mut b = prepared_tf32(&st, 3, tile);
            for batch in [1, 3] {
                let input = random_input(&shape, batch, INPUT_SEED);
                let got = run(&mut b, &shape, &input, batch);
                assert_ran_tf32(&b, tile);
                let want = reference(&st, &input, batch);
                let (rel, max_abs) = errors(&got, &want);
                eprintln!(
                    "tf32 features {features}, frames {frames:>2}, batch {batch}: rel L2 {rel:.3e}, max abs {max_abs:.3e}"
                );
                assert!(rel <= tf32_budget(), "rel L2 {rel:.3e}");
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn forcing_tf32_in_fp32_mode_is_refused() {
    let shape = StackShape::pyannote().with_frames(8);
    let st = stack(&shape);
    let mut b = gpu();
    b.prepare(
        &st.weights().expect("weights"),
        &BackendConfig {
            shape,
            max_batch: 1,
            math: MathMode::Fp32,
        },
    )
    .expect("prepare");
    b.set_projection_tile(Some(ProjectionTile::Tf32));
    let input = random_input(&shape, 1, INPUT_SEED);
    let mut out = vec![0.0; shape.output_len(1).expect("length")];
    let e = b
        .forward(&input, 1, &mut out)
        .expect_err("TF32 in FP32 mode");
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    // The backend still works afterwards.
    b.set_projection_tile(None);
    b.forward(&input, 1, &mut out).expect("FP32 forward");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn small_tf32_pass_for_sanitizers() {
    for tile in tf32_tiles() {
        let shape = StackShape::pyannote().with_frames(17);
        let st = stack(&shape);
        let batch = 2;
        let input = random_input(&shape, batch, INPUT_SEED);
        let mut b = prepared_tf32(&st, batch, tile);
        let got = run(&mut b, &shape, &input, batch);
        assert_ran_tf32(&b, tile);
        let want = reference(&st, &input, batch);
        let (rel, max_abs) = errors(&got, &want);
        eprintln!("{tile} batch {batch}, 17 frames: rel L2 {rel:.3e}, max abs {max_abs:.3e}");
        assert!(rel <= tf32_budget());
    }
}

/// The windows a cluster of the last forward's plan (`None`: not the cluster recurrence).
fn cluster_windows(b: &CudaBackend) -> Option<usize> {
    let s = b.last_forward().expect("summary");
    s.plan
        .schedule
        .choice
        .cluster()
        .map(|c| c.windows_per_cluster)
}

/// On 9.0, behind the register-quad recurrences, every TF32 layer runs the resident projection
/// (`bilstm_projection_tf32_resident`): layers after the first read their input as the
/// recurrence before stored it, rounded to TF32, and layer 0 rounds the model's input in shared
/// memory; turned off, every layer runs the streaming warpgroup projection over unrounded inputs
/// and rounds them itself. Both must give the same bits: the rounding is the one the streaming
/// projection applies, and each k-step's eight products reach the tensor cores in another order
/// (natural against pairs), which must not change the sum. Batches 128
/// and 256 with the 4- and 8-window quads' schedules forced (a host-memory forward is planned
/// chunk by chunk, so left to itself it runs smaller clusters and the streaming projection),
/// each also against the plan's own choice (a window's bits never depend on the kernels); once
/// with the quads themselves (fixed-point switch `off`: section 8) and once with the plan's
/// fixed-point pick behind the same schedule (section 9, TF32 mode's default: `fixed4c2` on the
/// H200 at 128, and at 256 too, whose host pass runs in chunks of 128; storing TF32 outputs
/// for the resident projection).
#[test]
#[ignore = "needs a CUDA GPU"]
fn resident_and_streaming_tf32_projections_give_the_same_bits() {
    if no_resident_projection_here() {
        return;
    }
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    let max = 256;
    let input = random_input(&shape, max, INPUT_SEED);
    let in_w = shape.frames * shape.features;
    for setting in [Some("off"), None] {
        for (batch, windows) in [(128, 4), (256, 8)] {
            let part = &input[..batch * in_w];
            let mut b = prepared_quads(&st, max, windows);
            b.set_fixed_recurrence(setting)
                .unwrap_or_else(|e| panic!("{setting:?}: {e}"));
            let resident = run(&mut b, &shape, part, batch);
            assert_eq!(cluster_windows(&b), Some(windows));
            let fixed = b.last_fixed_recurrence();
            assert_eq!(fixed.is_some(), setting.is_none(), "{setting:?}: {fixed:?}");
            b.set_resident_projection(false);
            let streaming = run(&mut b, &shape, part, batch);
            assert_same_bits(
                &resident,
                &streaming,
                &format!(
                    "batch {batch}, {windows} windows a cluster ({fixed:?}): resident against streaming projection"
                ),
            );
            // The plan's own choice must give the same bits again (whatever it picks).
            b.set_overrides(Overrides::default())
                .unwrap_or_else(|e| panic!("back to the plan: {e}"));
            b.set_resident_projection(true);
            let planned = run(&mut b, &shape, part, batch);
            assert_same_bits(
                &resident,
                &planned,
                &format!("batch {batch} ({fixed:?}): forced schedule against the plan's own"),
            );
            eprintln!(
                "batch {batch} ({fixed:?}): resident ({windows}-window schedule) and streaming TF32 projections agree bit for bit, and with the plan's own choice ({:?} windows a cluster, {:?})",
                cluster_windows(&b),
                b.last_fixed_recurrence()
            );
        }
    }
}

/// The resident TF32 projection in a pass small enough for compute-sanitizer
/// (`scripts/gpu-run.sh` runs the tests whose names start with `small_tf32_pass_for_sanitizers`):
/// batch 8 (one cluster of the 8-window quads a direction), 17 frames (136 rows: three 64-row
/// blocks, one for each warpgroup of a block), every layer on the resident projection (layer 0
/// rounding its input in shared memory), against the f64 reference and bit for bit against the
/// streaming one.
#[test]
#[ignore = "needs a CUDA GPU"]
fn small_tf32_pass_for_sanitizers_resident() {
    if no_resident_projection_here() {
        return;
    }
    let shape = StackShape::pyannote().with_frames(17);
    let st = stack(&shape);
    let batch = 8;
    let input = random_input(&shape, batch, INPUT_SEED);
    let mut b = prepared_quads(&st, batch, 8);
    let got = run(&mut b, &shape, &input, batch);
    assert_eq!(cluster_windows(&b), Some(8));
    let want = reference(&st, &input, batch);
    let (rel, max_abs) = errors(&got, &want);
    eprintln!(
        "resident projection, batch {batch}, 17 frames: rel L2 {rel:.3e}, max abs {max_abs:.3e}"
    );
    assert!(
        rel <= tf32_budget(),
        "rel L2 {rel:.3e} over the TF32 budget"
    );
    b.set_resident_projection(false);
    let streaming = run(&mut b, &shape, &input, batch);
    assert_same_bits(
        &got,
        &streaming,
        "small pass: resident against streaming projection",
    );
}

/// Overrides forcing each of `kinds`, then (on a GPU with 4-CTA clusters) the cluster
/// recurrence in each `(cluster size, windows a cluster)` of `clusters`, each with its name.
fn forced_recurrences(
    kinds: &[RecurrenceKind],
    clusters: &[(usize, usize)],
) -> Vec<(String, Overrides)> {
    let mut forced: Vec<(String, Overrides)> = kinds
        .iter()
        .map(|&kind| {
            let o = Overrides {
                recurrence: Some(kind),
                ..Overrides::default()
            };
            (kind.to_string(), o)
        })
        .collect();
    if gpu().device().facts.max_cluster_size >= 4 {
        for &(size, windows) in clusters {
            let o = Overrides {
                recurrence: Some(RecurrenceKind::Cluster),
                cluster_size: Some(size),
                cluster_windows: Some(windows),
                ..Overrides::default()
            };
            forced.push((format!("cluster {size}x{windows}"), o));
        }
    }
    forced
}

/// TF32 mode's bits are every recurrence kernel's, in both of its products. Section 8 (the
/// fixed-point switch `off`; `numerics.cuh` sections 7 and 8: 8 chains of 16 terms): with the
/// plan's TF32 projection, every window of batch 33 (64 frames; partial last tiles and clusters)
/// has, under each recurrence kind and window tile forced, the bits it has run alone with the
/// plan's own kernels (batch 1: the one-window cluster kernel on 9.0); a kernel left on FP32
/// mode's activations, or on its 16-chain dot, or whose lanes realised another tree, would
/// differ in about every value. Section 9 (the default on a GPU with clusters): the same with
/// each cluster schedule forced (the plan's fixed-point pick runs behind each: `fixed1c2` at
/// batch 33, `fixed1c8` alone on the H200), and the pass says which kernel ran.
#[test]
#[ignore = "needs a CUDA GPU"]
fn tf32_numerics_give_every_kernel_the_same_bits() {
    let shape = StackShape::pyannote().with_frames(64);
    let st = stack(&shape);
    let batch = 33;
    let input = random_input(&shape, batch, INPUT_SEED + 7);
    let in_w = shape.frames * shape.features;
    let out_w = shape.frames * shape.output_width();
    let clusters = gpu().device().facts.max_cluster_size >= 4;
    let section8 = [
        RecurrenceKind::Wide,
        RecurrenceKind::Tiled,
        RecurrenceKind::Resident,
    ];
    let settings: &[(Option<&str>, &[RecurrenceKind])] = if clusters {
        &[(Some("off"), &section8), (None, &[])]
    } else {
        &[(None, &section8)]
    };
    for &(setting, kinds) in settings {
        let mut b = tf32_backend(&st, batch, Overrides::default());
        b.set_fixed_recurrence(setting)
            .unwrap_or_else(|e| panic!("{setting:?}: {e}"));
        let mut alone = Vec::with_capacity(batch * out_w);
        for w in 0..batch {
            alone.extend(run(&mut b, &shape, &input[w * in_w..(w + 1) * in_w], 1));
        }
        let alone_fixed = b.last_fixed_recurrence();
        let tile = b.last_forward().expect("summary").projection_tile;
        assert!(tile.tf32_numerics(), "the plan's TF32 tile is {tile}");
        let mut forced = vec![("auto".to_string(), Overrides::default())];
        forced.extend(forced_recurrences(
            kinds,
            &[(2, 1), (4, 1), (2, 2), (2, 4), (2, 8), (2, 16)],
        ));
        for (name, overrides) in forced {
            b.set_overrides(overrides)
                .unwrap_or_else(|e| panic!("forcing {name}: {e}"));
            let got = run(&mut b, &shape, &input, batch);
            assert_eq!(
                b.last_forward().expect("summary").projection_tile,
                tile,
                "{name}: the projection changed"
            );
            let fixed = b.last_fixed_recurrence();
            if setting.is_some() || !clusters {
                assert_eq!(fixed, None, "{setting:?} {name}");
            } else {
                assert!(fixed.is_some(), "{name}: no fixed-point kernel ran");
            }
            assert_same_bits(
                &alone,
                &got,
                &format!(
                    "TF32 ({setting:?}), {name} ({fixed:?}), batch {batch} against each window alone ({alone_fixed:?})"
                ),
            );
            eprintln!(
                "TF32 ({setting:?}) {name} ({fixed:?}): every window of batch {batch} has its batch-1 bits ({alone_fixed:?})"
            );
        }
    }
}

/// TF32 mode's gate activations and dot in every recurrence kernel, in passes small enough for
/// compute-sanitizer (`scripts/gpu-run.sh`'s `-tf32` groups run every test whose name starts
/// with `small_tf32_pass_for_sanitizers`): batch 5, 17 frames, each kind and cluster shape the
/// other two passes do not run forced in turn, each against the f64 reference within the TF32
/// budget, with the fixed-point switch `off` so that the section-8 cluster kernels run (the
/// fixed-point kernels have `gpu_fixed`'s `small_fixed_pass_for_sanitizers`).
#[test]
#[ignore = "needs a CUDA GPU"]
fn small_tf32_pass_for_sanitizers_every_kind() {
    let shape = StackShape::pyannote().with_frames(17);
    let st = stack(&shape);
    let batch = 5;
    let input = random_input(&shape, batch, INPUT_SEED);
    let want = reference(&st, &input, batch);
    let forced = forced_recurrences(
        &[RecurrenceKind::Tiled, RecurrenceKind::Resident],
        &[(2, 1), (4, 1), (2, 2), (2, 4), (2, 16)],
    );
    for (_, overrides) in forced {
        let mut b = tf32_backend(&st, batch, overrides);
        b.set_fixed_recurrence(Some("off"))
            .unwrap_or_else(|e| panic!("the fixed-point switch: {e}"));
        let got = run(&mut b, &shape, &input, batch);
        let s = b.last_forward().expect("summary");
        assert!(
            s.projection_tile.tf32_numerics(),
            "{overrides:?}: {}",
            s.projection_tile
        );
        let (rel, max_abs) = errors(&got, &want);
        eprintln!("TF32 {overrides:?}: rel L2 {rel:.3e}, max abs {max_abs:.3e}");
        assert!(
            rel <= tf32_budget(),
            "{overrides:?}: rel L2 {rel:.3e} over the TF32 budget"
        );
    }
}

/// Issue 14 item 5 in TF32 mode: every window of batches 33, 128, 257 and 1024 (589 frames,
/// the plan's own kernels, device-resident so that each batch is one pass with its own plan)
/// has the bits it has alone at batch 1: with TF32 mode's default (section 9 on a GPU with
/// clusters: `fixed1c2`, `fixed4c2`, `fixed4`, `fixed8` on the H200, `fixed1c8` alone) and with
/// the fixed-point switch `off` (section 8: two-window clusters, the 4- and 8-window quads with
/// the resident projection; the one-window cluster kernel alone).
#[test]
#[ignore = "needs a CUDA GPU"]
fn tf32_every_window_of_a_large_batch_has_its_batch_one_bits() {
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    let big = 1024;
    let all = random_input(&shape, big, INPUT_SEED + 11);
    let in_w = shape.frames * shape.features;
    let out_w = shape.frames * shape.output_width();
    for setting in [None, Some("off")] {
        let mut b = tf32_backend(&st, big, Overrides::default());
        b.set_fixed_recurrence(setting)
            .unwrap_or_else(|e| panic!("{setting:?}: {e}"));
        let mut alone = Vec::with_capacity(big * out_w);
        for w in 0..big {
            alone.extend(run_device(
                &mut b,
                &shape,
                &all[w * in_w..(w + 1) * in_w],
                1,
            ));
        }
        let alone_fixed = b.last_fixed_recurrence();
        for batch in [33, 128, 257, 1024] {
            let got = run_device(&mut b, &shape, &all, batch);
            let windows = cluster_windows(&b);
            let fixed = b.last_fixed_recurrence();
            let differ =
                differing_windows(&alone[..batch * out_w], &got, out_w, shape.output_width());
            eprintln!(
                "TF32 ({setting:?}) batch {batch} ({windows:?} windows a cluster, {fixed:?}; alone {alone_fixed:?}): {} of {batch} windows differ from their batch-1 bits",
                differ.len()
            );
            assert!(
                differ.is_empty(),
                "TF32 ({setting:?}) batch {batch}: {} windows differ, first {}",
                differ.len(),
                differ[0]
            );
        }
    }
}
