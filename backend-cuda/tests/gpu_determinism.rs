//! GPU: bitwise reproducibility: repeated runs, dirty workspaces, both projection tiles, every
//! tile height and schedule, and device-resident buffers.

mod gpu_support;

use bilstm_core::owned::random_input;
use bilstm_core::{Backend, StackShape};
use bilstm_cuda::{ProjectionTile, RecurrenceKind};
use gpu_support::{INPUT_SEED, assert_same_bits, prepared, prepared_kind, run, stack};

#[test]
#[ignore = "needs a CUDA GPU"]
fn repeated_runs_give_identical_bits() {
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    let mut gpu = prepared(&st, 33);
    for batch in [1, 9, 33] {
        let input = random_input(&shape, batch, INPUT_SEED);
        let first = run(&mut gpu, &shape, &input, batch);
        for i in 0..3 {
            let again = run(&mut gpu, &shape, &input, batch);
            assert_same_bits(&first, &again, &format!("batch {batch}, repeat {i}"));
        }
        // A fresh backend (new context objects, new buffers) gives the same bits too.
        let mut other = prepared(&st, batch);
        assert_same_bits(
            &first,
            &run(&mut other, &shape, &input, batch),
            &format!("batch {batch}, fresh backend"),
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn dirty_workspaces_and_stale_flags_do_not_change_bits() {
    let shape = StackShape::pyannote().with_frames(64);
    let st = stack(&shape);
    let mut gpu = prepared(&st, 40);
    for batch in [3, 40] {
        let input = random_input(&shape, batch, INPUT_SEED);
        let clean = run(&mut gpu, &shape, &input, batch);
        for seed in [1, 2] {
            gpu.scribble_workspaces(seed).expect("scribble");
            let dirty = run(&mut gpu, &shape, &input, batch);
            assert_same_bits(&clean, &dirty, &format!("batch {batch}, scribble {seed}"));
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn both_projection_tiles_give_identical_bits() {
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    let mut gpu = prepared(&st, 33);
    for batch in [1, 8, 33] {
        let input = random_input(&shape, batch, INPUT_SEED);
        gpu.set_projection_tile(Some(ProjectionTile::Small64));
        let small = run(&mut gpu, &shape, &input, batch);
        gpu.set_projection_tile(Some(ProjectionTile::Large128));
        let large = run(&mut gpu, &shape, &input, batch);
        assert_same_bits(&small, &large, &format!("batch {batch}: 64x64 vs 128x128"));
    }
}

/// A window's output does not depend on the batch it runs in: the wide kernel's tile heights
/// 8, 16 and 32, concurrent and sequential schedules and multi-launch directions all give the
/// same bits.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_schedule_gives_the_same_bits_per_window() {
    let shape = StackShape::pyannote().with_frames(96);
    let st = stack(&shape);
    let big = 600;
    // The wide kernel's schedules (gpu_kernels.rs covers the tiled and resident ones).
    let mut gpu = prepared_kind(&st, big, RecurrenceKind::Wide);
    let all = random_input(&shape, big, INPUT_SEED);
    let in_w = shape.frames * shape.features;
    let out_w = shape.frames * shape.output_width();
    let small = run(&mut gpu, &shape, &all[..9 * in_w], 9);
    let mut seen = Vec::new();
    for batch in [9, 20, 33, 64, 100, 200, 300, 600] {
        let out = run(&mut gpu, &shape, &all[..batch * in_w], batch);
        let s = gpu.last_forward().expect("summary").schedule;
        eprintln!(
            "batch {batch}: tile height {}, {} tiles, concurrent {}, {} launches per direction",
            s.tile_height,
            s.tiles,
            s.concurrent,
            s.launches_per_direction()
        );
        seen.push((s.tile_height, s.concurrent, s.launches_per_direction() > 1));
        assert_same_bits(
            &small,
            &out[..9 * out_w],
            &format!("batch {batch}: first 9 windows"),
        );
        // The batch's last windows, run alone as a batch of 9 (tile height 8).
        let tail = &all[(batch - 9) * in_w..batch * in_w];
        let alone = run(&mut gpu, &shape, tail, 9);
        assert_same_bits(
            &alone,
            &out[(batch - 9) * out_w..],
            &format!("batch {batch}: last 9 windows"),
        );
    }
    eprintln!("schedules seen (tile height, concurrent, multi-launch): {seen:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn forward_device_matches_forward() {
    let shape = StackShape::pyannote().with_frames(128);
    let st = stack(&shape);
    let batch = 17;
    let mut gpu = prepared(&st, 32);
    let input = random_input(&shape, batch, INPUT_SEED);
    let host = run(&mut gpu, &shape, &input, batch);
    let stream = gpu.stream().clone();
    let d_in = stream.clone_htod(&input).expect("upload");
    // A larger output buffer: only the batch's prefix is written.
    let mut d_out = stream
        .alloc_zeros::<f32>(shape.output_len(batch).expect("len") + 100)
        .expect("alloc");
    gpu.forward_device(&d_in, batch, &mut d_out)
        .expect("forward_device");
    let back = stream.clone_dtoh(&d_out).expect("download");
    assert_same_bits(&host, &back[..host.len()], "forward_device vs forward");
    assert!(
        back[host.len()..].iter().all(|&v| v == 0.0),
        "wrote past the batch"
    );
    assert!(gpu.config().is_some());
}
