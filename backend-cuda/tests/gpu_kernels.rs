//! GPU: the four recurrence kernels against each other and against the f64 reference, forced
//! through `CudaBackend::set_overrides`: wide, tiled, resident and cluster give bitwise identical
//! outputs (DESIGN section 4: one numerics, one fixed tree), with either FP32 projection tile,
//! repeated, after dirty workspaces, in every schedule, and replayed from a CUDA graph.

// Test helpers: a failed expectation is a failed test.
#![allow(clippy::expect_used)]

mod gpu_support;

use bilstm_core::geometry::CLUSTER_SIZES;
use bilstm_core::owned::random_input;
use bilstm_core::{BackendError, ErrorKind, MathMode, StackShape};
use bilstm_cuda::{CudaBackend, CudaError, Overrides, ProjectionTile, RecurrenceKind};
use cudarc::driver::CudaSlice;
use gpu_support::{
    INPUT_SEED, assert_same_bits, budget, cached_reference, errors, force, prepared, prepared_kind,
    run, stack,
};

const KINDS: [RecurrenceKind; 4] = [
    RecurrenceKind::Wide,
    RecurrenceKind::Tiled,
    RecurrenceKind::Resident,
    RecurrenceKind::Cluster,
];

/// The batches of issue 5 (plan boundaries 8/9 and 32/33 included).
const BATCHES: [usize; 7] = [1, 7, 8, 9, 32, 33, 64];

#[test]
#[ignore = "needs a CUDA GPU"]
fn wide_tiled_and_resident_give_identical_bits_at_589_frames() {
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    let mut gpu = prepared(&st, 64);
    for batch in BATCHES {
        let input = random_input(&shape, batch, INPUT_SEED);
        let mut outputs = Vec::new();
        for kind in KINDS {
            force(&mut gpu, Some(kind));
            let out = run(&mut gpu, &shape, &input, batch);
            let s = gpu.last_forward().expect("summary");
            assert_eq!(s.recurrence, kind);
            eprintln!(
                "batch {batch:>2} {kind:>8}: {} (projection {})",
                s.plan.schedule.reason, s.projection_tile
            );
            outputs.push(out);
        }
        assert_same_bits(
            &outputs[0],
            &outputs[1],
            &format!("batch {batch}: wide vs tiled"),
        );
        assert_same_bits(
            &outputs[0],
            &outputs[2],
            &format!("batch {batch}: wide vs resident"),
        );
        assert_same_bits(
            &outputs[0],
            &outputs[3],
            &format!("batch {batch}: wide vs cluster"),
        );
    }
}

/// Both cluster sizes (forced) give the resident kernel's bits at every batch of issue 10, in
/// one wave or several.
#[test]
#[ignore = "needs a CUDA GPU"]
fn both_cluster_sizes_give_the_resident_bits() {
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    let mut gpu = prepared(&st, 64);
    for batch in BATCHES {
        let input = random_input(&shape, batch, INPUT_SEED);
        force(&mut gpu, Some(RecurrenceKind::Resident));
        let resident = run(&mut gpu, &shape, &input, batch);
        for size in CLUSTER_SIZES {
            gpu.set_overrides(Overrides {
                recurrence: Some(RecurrenceKind::Cluster),
                cluster_size: Some(size),
                ..Overrides::default()
            })
            .expect("forcing a cluster size");
            let out = run(&mut gpu, &shape, &input, batch);
            let s = gpu.last_forward().expect("summary");
            assert_eq!(s.recurrence, RecurrenceKind::Cluster);
            assert_eq!(
                s.plan.schedule.choice.cluster().map(|c| c.cluster_size),
                Some(size)
            );
            eprintln!("batch {batch:>2} cluster{size}: {}", s.plan.schedule.reason);
            assert_same_bits(
                &resident,
                &out,
                &format!("batch {batch}: resident vs cluster{size}"),
            );
        }
    }
    gpu.set_overrides(Overrides::default()).expect("defaults");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn both_projection_tiles_give_identical_bits_with_every_kind() {
    let shape = StackShape::pyannote().with_frames(64);
    let st = stack(&shape);
    let mut gpu = prepared(&st, 33);
    for batch in [1, 33] {
        let input = random_input(&shape, batch, INPUT_SEED);
        let mut first: Option<Vec<f32>> = None;
        for kind in KINDS {
            for tile in [ProjectionTile::Small64, ProjectionTile::Large128] {
                gpu.set_overrides(Overrides {
                    recurrence: Some(kind),
                    projection: Some(tile),
                    ..Overrides::default()
                })
                .expect("forcing");
                let out = run(&mut gpu, &shape, &input, batch);
                match &first {
                    None => first = Some(out),
                    Some(f) => assert_same_bits(f, &out, &format!("batch {batch} {kind} {tile}")),
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_kind_matches_the_f64_reference() {
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    let batch = 9;
    let want = cached_reference(&shape, batch);
    let input = random_input(&shape, batch, INPUT_SEED);
    for kind in KINDS {
        let mut gpu = prepared_kind(&st, batch, kind);
        let got = run(&mut gpu, &shape, &input, batch);
        let (rel, max_abs) = errors(&got, &want);
        eprintln!("{kind:>8} batch {batch}, 589 frames: rel L2 {rel:.3e}, max abs {max_abs:.3e}");
        assert!(
            rel <= budget(),
            "{kind}: relative L2 {rel:.3e} over {:.2e}",
            budget()
        );
    }
    for frames in [1, 2, 17] {
        let shape = StackShape::pyannote().with_frames(frames);
        let st = stack(&shape);
        let want = cached_reference(&shape, 10);
        let input = random_input(&shape, 10, INPUT_SEED);
        for kind in KINDS {
            let mut gpu = prepared_kind(&st, 10, kind);
            let got = run(&mut gpu, &shape, &input, 10);
            let (rel, _) = errors(&got, &want);
            eprintln!("{kind:>8} batch 10, {frames:>2} frames: rel L2 {rel:.3e}");
            assert!(rel <= budget(), "{kind}, {frames} frames: {rel:.3e}");
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn repeated_runs_and_dirty_workspaces_keep_the_bits_of_every_kind() {
    let shape = StackShape::pyannote().with_frames(48);
    let st = stack(&shape);
    let batch = 19;
    let input = random_input(&shape, batch, INPUT_SEED);
    let mut reference_bits: Option<Vec<f32>> = None;
    for kind in KINDS {
        let mut gpu = prepared_kind(&st, 40, kind);
        let clean = run(&mut gpu, &shape, &input, batch);
        for i in 0..2 {
            let again = run(&mut gpu, &shape, &input, batch);
            assert_same_bits(&clean, &again, &format!("{kind}: repeat {i}"));
        }
        for seed in [3, 4] {
            gpu.scribble_workspaces(seed).expect("scribble");
            let dirty = run(&mut gpu, &shape, &input, batch);
            assert_same_bits(&clean, &dirty, &format!("{kind}: scribble {seed}"));
        }
        match &reference_bits {
            None => reference_bits = Some(clean),
            Some(r) => assert_same_bits(r, &clean, &format!("{kind} vs wide")),
        }
    }
}

/// A window's output does not depend on the batch it runs in, for the tiled kernel's
/// concurrent and sequential multi-launch schedules and the resident and cluster kernels'
/// multi-wave grids.
#[test]
#[ignore = "needs a CUDA GPU"]
fn tiled_resident_and_cluster_schedules_give_the_same_bits_per_window() {
    let shape = StackShape::pyannote().with_frames(40);
    let st = stack(&shape);
    let big = 700;
    let all = random_input(&shape, big, INPUT_SEED);
    let in_w = shape.frames * shape.features;
    let out_w = shape.frames * shape.output_width();
    let mut gpu = prepared_kind(&st, big, RecurrenceKind::Wide);
    let alone = run(&mut gpu, &shape, &all[..9 * in_w], 9);
    for kind in [
        RecurrenceKind::Tiled,
        RecurrenceKind::Resident,
        RecurrenceKind::Cluster,
    ] {
        force(&mut gpu, Some(kind));
        for batch in [9, 130, 300, 700] {
            let out = run(&mut gpu, &shape, &all[..batch * in_w], batch);
            let s = gpu.last_forward().expect("summary");
            eprintln!("{kind:>8} batch {batch:>3}: {}", s.plan.schedule.reason);
            assert_same_bits(
                &alone,
                &out[..9 * out_w],
                &format!("{kind} batch {batch}: first 9 windows"),
            );
            let tail = &all[(batch - 9) * in_w..batch * in_w];
            force(&mut gpu, Some(RecurrenceKind::Wide));
            let tail_alone = run(&mut gpu, &shape, tail, 9);
            force(&mut gpu, Some(kind));
            assert_same_bits(
                &tail_alone,
                &out[(batch - 9) * out_w..],
                &format!("{kind} batch {batch}: last 9 windows"),
            );
        }
    }
}

fn upload(gpu: &CudaBackend, data: &[f32]) -> CudaSlice<f32> {
    gpu.stream().clone_htod(data).expect("upload")
}

fn download(gpu: &CudaBackend, data: &CudaSlice<f32>) -> Vec<f32> {
    gpu.stream().clone_dtoh(data).expect("download")
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn graph_replay_gives_the_eager_bits_for_every_kind() {
    let shape = StackShape::pyannote().with_frames(64);
    let st = stack(&shape);
    let batch = 11;
    let input = random_input(&shape, batch, INPUT_SEED);
    let other = random_input(&shape, batch, INPUT_SEED + 1);
    let out_len = shape.output_len(batch).expect("len");
    for kind in KINDS {
        let mut gpu = prepared_kind(&st, 16, kind);
        // Eager, through forward_device.
        let d_in = upload(&gpu, &input);
        let mut d_out = gpu.stream().alloc_zeros::<f32>(out_len).expect("alloc");
        gpu.forward_device(&d_in, batch, &mut d_out).expect("eager");
        let eager = download(&gpu, &d_out);
        let d_other = upload(&gpu, &other);
        gpu.forward_device(&d_other, batch, &mut d_out)
            .expect("eager, other input");
        let eager_other = download(&gpu, &d_out);

        let graph_out = gpu.stream().alloc_zeros::<f32>(out_len).expect("alloc");
        let mut graph = gpu
            .capture_forward_device(upload(&gpu, &input), batch, graph_out)
            .unwrap_or_else(|e| panic!("{kind}: capture: {e}"));
        assert_eq!(graph.summary().recurrence, kind);
        // Capturing ran nothing: the output is still zero.
        assert!(download(&gpu, graph.output()).iter().all(|&v| v == 0.0));
        for i in 0..3 {
            gpu.replay(&graph)
                .unwrap_or_else(|e| panic!("{kind}: replay {i}: {e}"));
            assert_same_bits(
                &eager,
                &download(&gpu, graph.output()),
                &format!("{kind}: replay {i}"),
            );
        }
        // Dirty workspaces, then a new input written into the graph's input buffer.
        gpu.scribble_workspaces(9).expect("scribble");
        gpu.stream()
            .memcpy_htod(&other, graph.input_mut())
            .expect("new input");
        gpu.replay(&graph).expect("replay with a new input");
        assert_same_bits(
            &eager_other,
            &download(&gpu, graph.output()),
            &format!("{kind}: new input"),
        );
        // An eager pass between replays changes nothing either.
        gpu.forward_device(&d_in, batch, &mut d_out)
            .expect("eager again");
        gpu.replay(&graph).expect("replay after eager");
        assert_same_bits(
            &eager_other,
            &download(&gpu, graph.output()),
            &format!("{kind}: after eager"),
        );
        eprintln!(
            "{kind:>8}: graph replay bitwise equal to eager ({})",
            graph.summary().plan.schedule.reason
        );
        // A new preparation invalidates the graph.
        gpu.set_overrides(Overrides::default()).expect("defaults");
        let weights = st.weights().expect("weights");
        let config = bilstm_core::BackendConfig {
            shape,
            max_batch: 16,
            math: MathMode::Fp32,
        };
        bilstm_core::Backend::prepare(&mut gpu, &weights, &config).expect("prepare again");
        assert!(gpu.replay(&graph).is_err(), "{kind}: stale graph replayed");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn plans_follow_overrides_and_refuse_what_cannot_run() {
    let shape = StackShape::pyannote().with_frames(8);
    let st = stack(&shape);
    let mut gpu = prepared(&st, 64);
    for batch in [1, 9, 64] {
        let p = gpu.plan(batch).expect("plan");
        eprintln!("H200 plan, batch {batch}:\n{p}");
        for kind in KINDS {
            force(&mut gpu, Some(kind));
            assert_eq!(gpu.plan(batch).expect("plan").recurrence.choice, kind);
        }
        force(&mut gpu, None);
    }
    // TF32 in FP32 mode is refused at once and leaves the overrides as they were.
    let before = gpu.overrides();
    let e = gpu
        .set_overrides(Overrides {
            recurrence: None,
            projection: Some(ProjectionTile::Tf32),
            ..Overrides::default()
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(
        matches!(
            e,
            CudaError::Core(bilstm_core::CoreError::ForcedChoice { .. })
        ),
        "{e}"
    );
    assert_eq!(gpu.overrides(), before);
    // The thin wrapper checks nothing now; the forward pass refuses.
    gpu.set_projection_tile(Some(ProjectionTile::Tf32));
    let input = random_input(&shape, 1, INPUT_SEED);
    let mut out = vec![0.0; shape.output_len(1).expect("len")];
    let e = bilstm_core::Backend::forward(&mut gpu, &input, 1, &mut out).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    gpu.set_projection_tile(None);
    let _ = run(&mut gpu, &shape, &input, 1);
}
