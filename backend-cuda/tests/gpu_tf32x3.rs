//! GPU: the FP32-accurate 3xTF32 tensor-core projection in its two `mma.sync` tiles
//! (`ProjectionTile::Tf32x3`, 128x128, and `ProjectionTile::Tf32x3Small`, 64x128) and, on 9.0,
//! its warpgroup-MMA tile (`ProjectionTile::Tf32x3Wgmma`, its own bits) in
//! `MathMode::Fp32`, forced: the whole stack against the f64 reference within FP32 mode's budget
//! (`gpu_budget(MathMode::Fp32)`, 2e-6; the kernel measured 4.7e-6 on the H200 before each k-step
//! got a fresh tensor-core accumulator), the two tiles bit for bit alike, a window's bits
//! independent of the batch (and of the tile the batch picks), repeated runs bit for bit, and
//! every recurrence kind giving the same bits with it.
//! `small_tf32x3_pass_for_sanitizers` is the pass `scripts/gpu-run.sh` runs under
//! compute-sanitizer.

// Test helpers: a failed expectation is a failed test.
#![allow(clippy::panic, clippy::expect_used)]

mod gpu_support;

use bilstm_core::owned::{OwnedStack, random_input};
use bilstm_core::plan::{TF32X3_ARCHITECTURES, tf32x3_tile_for, wgmma_available};
use bilstm_core::{
    Backend, BackendConfig, MathMode, Overrides, ProjectionTile, RecurrenceKind, StackShape,
};
use bilstm_cuda::CudaBackend;
use gpu_support::{
    INPUT_SEED, assert_same_bits, cached_reference, errors, gpu, reference, run, seed, stack,
};

/// Both `mma.sync` 3xTF32 tiles (identical bits).
const TILES: [ProjectionTile; 2] = [ProjectionTile::Tf32x3, ProjectionTile::Tf32x3Small];

/// Every 3xTF32 tile this GPU runs: [`TILES`], plus the warpgroup-MMA tile on 9.0.
fn tiles_here() -> Vec<ProjectionTile> {
    let mut tiles = TILES.to_vec();
    if wgmma_available(gpu().device().facts.compute_capability) {
        tiles.push(ProjectionTile::Tf32x3Wgmma);
    }
    tiles
}

/// The bound: FP32 mode's own budget, which a device's FP32 projection must meet.
fn budget() -> f64 {
    bilstm_core::accuracy::gpu_budget(MathMode::Fp32)
}

/// A backend in `MathMode::Fp32` with the 3xTF32 `tile` forced (and `kind`, if any).
fn prepared_x3(
    stack: &OwnedStack,
    max_batch: usize,
    kind: Option<RecurrenceKind>,
    tile: ProjectionTile,
) -> CudaBackend {
    let mut b = gpu();
    let config = BackendConfig {
        shape: stack.shape,
        max_batch,
        math: MathMode::Fp32,
    };
    b.prepare(&stack.weights().expect("weights"), &config)
        .unwrap_or_else(|e| panic!("prepare: {e}"));
    b.set_overrides(Overrides {
        recurrence: kind,
        projection: Some(tile),
        ..Overrides::default()
    })
    .unwrap_or_else(|e| panic!("forcing the 3xTF32 tile {tile}: {e}"));
    b
}

fn assert_ran(b: &CudaBackend, tile: ProjectionTile) {
    let s = b.last_forward().expect("summary");
    assert_eq!(s.projection_tile, tile);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tf32x3_matches_the_f64_reference_within_the_fp32_budget() {
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    let want_all = cached_reference(&shape, 33);
    let out_w = shape.frames * shape.output_width();
    for tile in tiles_here() {
        let mut b = prepared_x3(&st, 33, None, tile);
        eprintln!(
            "{}; seed {} (BILSTM_SEED overrides), FP32 budget {:.3e}",
            b.describe(),
            seed(),
            budget()
        );
        for batch in [1, 9, 33] {
            let input = random_input(&shape, batch, INPUT_SEED);
            let got = run(&mut b, &shape, &input, batch);
            assert_ran(&b, tile);
            let (rel, max_abs) = errors(&got, &want_all[..batch * out_w]);
            eprintln!("{tile} batch {batch:>2}: rel L2 {rel:.3e}, max abs {max_abs:.3e}");
            assert!(
                rel <= budget(),
                "{tile} batch {batch}: relative L2 {rel:.3e} over FP32 mode's budget {:.3e}",
                budget()
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn both_tf32x3_tiles_give_identical_bits() {
    for (frames, batches) in [(589, &[1usize, 9, 33][..]), (64, &[2, 130][..])] {
        let shape = StackShape::pyannote().with_frames(frames);
        let st = stack(&shape);
        let most = *batches.iter().max().unwrap_or(&1);
        let mut large = prepared_x3(&st, most, None, ProjectionTile::Tf32x3);
        let mut small = prepared_x3(&st, most, None, ProjectionTile::Tf32x3Small);
        for &batch in batches {
            let input = random_input(&shape, batch, INPUT_SEED);
            let a = run(&mut large, &shape, &input, batch);
            assert_ran(&large, ProjectionTile::Tf32x3);
            let b = run(&mut small, &shape, &input, batch);
            assert_ran(&small, ProjectionTile::Tf32x3Small);
            assert_same_bits(
                &b,
                &a,
                &format!("{frames} frames, batch {batch}: 64x128 vs 128x128"),
            );
        }
        eprintln!("3xtf32, {frames} frames, batches {batches:?}: both tiles bitwise identical");
    }
}

/// Windows of `input` alone and inside smaller batches, run on `b`, against their rows of `all`
/// (the whole batch of `big`): they sit at other rows of the row tiles there.
fn assert_windows_keep_their_bits(
    b: &mut CudaBackend,
    shape: &StackShape,
    input: &[f32],
    all: &[f32],
    big: usize,
    what: &str,
) {
    let in_w = shape.frames * shape.features;
    let out_w = shape.frames * shape.output_width();
    for (batch, first_window) in [(1, 0), (1, 5), (1, big - 1), (3, 4), (9, 20)] {
        let part = &input[first_window * in_w..(first_window + batch) * in_w];
        let got = run(b, shape, part, batch);
        assert_same_bits(
            &got,
            &all[first_window * out_w..(first_window + batch) * out_w],
            &format!(
                "{what}, {} frames: windows {first_window}.. alone (batch {batch}) vs inside batch \
                 {big}",
                shape.frames
            ),
        );
    }
    eprintln!(
        "{what}, {} frames: window bits the same alone and inside batch {big}",
        shape.frames
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tf32x3_window_bits_do_not_depend_on_the_batch() {
    // 589 frames up to batch 33; 64 frames for batch 128 (cheap, same row-tile positions).
    for (frames, big) in [(589, 33), (64, 128)] {
        let shape = StackShape::pyannote().with_frames(frames);
        let st = stack(&shape);
        let input = random_input(&shape, big, INPUT_SEED);
        // The big batch in large tiles, the windows alone and in small batches in small tiles:
        // what the plan does on a listed device without warpgroup MMA.
        let mut b = prepared_x3(&st, big, None, ProjectionTile::Tf32x3);
        let all = run(&mut b, &shape, &input, big);
        assert_ran(&b, ProjectionTile::Tf32x3);
        let mut b = prepared_x3(&st, big, None, ProjectionTile::Tf32x3Small);
        assert_windows_keep_their_bits(&mut b, &shape, &input, &all, big, "3xtf32");
        // The warpgroup tile (one tile at every batch): the same windows at other rows of its
        // 128-row tiles and with other column-tile neighbours.
        if tiles_here().contains(&ProjectionTile::Tf32x3Wgmma) {
            let mut b = prepared_x3(&st, big, None, ProjectionTile::Tf32x3Wgmma);
            let all = run(&mut b, &shape, &input, big);
            assert_ran(&b, ProjectionTile::Tf32x3Wgmma);
            assert_windows_keep_their_bits(&mut b, &shape, &input, &all, big, "3xtf32 wgmma");
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tf32x3_runs_are_bitwise_identical() {
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    // 9 * 589 = 5301 rows: a partial last row tile.
    let batch = 9;
    let input = random_input(&shape, batch, INPUT_SEED);
    for tile in tiles_here() {
        let mut b = prepared_x3(&st, batch, None, tile);
        let first = run(&mut b, &shape, &input, batch);
        for round in 0..3u64 {
            b.scribble_workspaces(0x3F32 + round).expect("scribble");
            let again = run(&mut b, &shape, &input, batch);
            assert_same_bits(&first, &again, &format!("{tile} run {}", round + 2));
        }
        eprintln!("{tile} batch {batch}: 4 runs (3 after dirty workspaces) bitwise identical");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn recurrence_kinds_agree_bitwise_with_tf32x3() {
    let shape = StackShape::pyannote().with_frames(64);
    let st = stack(&shape);
    // The device's own FP32 3xTF32 tile (the warpgroup one on 9.0).
    let tile = tf32x3_tile_for(gpu().device().facts.compute_capability, 589 * 64);
    for batch in [1, 9, 33] {
        let input = random_input(&shape, batch, INPUT_SEED);
        let mut first: Option<(RecurrenceKind, Vec<f32>)> = None;
        for kind in [
            RecurrenceKind::Wide,
            RecurrenceKind::Tiled,
            RecurrenceKind::Resident,
            RecurrenceKind::Cluster,
        ] {
            let mut b = gpu();
            let config = BackendConfig {
                shape,
                max_batch: batch,
                math: MathMode::Fp32,
            };
            b.prepare(&st.weights().expect("weights"), &config)
                .unwrap_or_else(|e| panic!("prepare: {e}"));
            let forced = b.set_overrides(Overrides {
                recurrence: Some(kind),
                projection: Some(tile),
                ..Overrides::default()
            });
            if let Err(e) = forced {
                // Only a kind this device cannot run (cluster before 9.0, resident without room).
                eprintln!("batch {batch}: {kind:?} skipped here: {e}");
                continue;
            }
            let got = run(&mut b, &shape, &input, batch);
            assert_ran(&b, tile);
            match &first {
                None => first = Some((kind, got)),
                Some((k0, want)) => {
                    assert_same_bits(&got, want, &format!("batch {batch}: {kind:?} vs {k0:?}"))
                }
            }
        }
        eprintln!("{tile} batch {batch}: every runnable recurrence kind bitwise identical");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_plan_runs_tf32x3_in_fp32_where_listed() {
    let shape = StackShape::pyannote().with_frames(32);
    let st = stack(&shape);
    let mut b = gpu();
    let config = BackendConfig {
        shape,
        max_batch: 64,
        math: MathMode::Fp32,
    };
    b.prepare(&st.weights().expect("weights"), &config)
        .unwrap_or_else(|e| panic!("prepare: {e}"));
    let cc = b.device().facts.compute_capability;
    let listed = TF32X3_ARCHITECTURES.contains(&cc);
    for batch in [1, 8, 33, 64] {
        let input = random_input(&shape, batch, INPUT_SEED);
        run(&mut b, &shape, &input, batch);
        let tile = b.last_forward().expect("summary").projection_tile;
        assert_eq!(tile.is_tf32x3(), listed, "batch {batch}: {tile}");
        if listed {
            assert_eq!(
                tile,
                tf32x3_tile_for(cc, batch * shape.frames),
                "batch {batch}"
            );
        }
    }
    eprintln!("{cc:?}: 3xtf32 listed {listed}, and the plan agrees at every batch");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn small_tf32x3_pass_for_sanitizers() {
    let shape = StackShape::pyannote().with_frames(17);
    let st = stack(&shape);
    let batch = 2;
    let input = random_input(&shape, batch, INPUT_SEED);
    let want = reference(&st, &input, batch);
    for tile in tiles_here() {
        let mut b = prepared_x3(&st, batch, None, tile);
        let got = run(&mut b, &shape, &input, batch);
        assert_ran(&b, tile);
        let (rel, max_abs) = errors(&got, &want);
        eprintln!("{tile} batch {batch}, 17 frames: rel L2 {rel:.3e}, max abs {max_abs:.3e}");
        assert!(rel <= budget(), "{tile}: {rel:.3e}");
    }
}
