//! GPU: the CUDA backend against the f64 reference and the CPU backend.

mod gpu_support;

use bilstm_core::owned::random_input;
use bilstm_core::reference::relative_l2;
use bilstm_core::{Backend, BackendConfig, MathMode, StackShape};
use bilstm_cpu::CpuBackend;
use gpu_support::{INPUT_SEED, budget, cached_reference, errors, prepared, run, seed, stack};

const BATCHES: [usize; 7] = [1, 7, 8, 9, 32, 33, 64];

#[test]
#[ignore = "needs a CUDA GPU"]
fn matches_the_f64_reference_at_589_frames() {
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    let max = *BATCHES.iter().max().unwrap_or(&1);
    let mut gpu = prepared(&st, max);
    let want_all = cached_reference(&shape, max);
    let out_w = shape.frames * shape.output_width();
    eprintln!(
        "seed {} (BILSTM_SEED overrides), budget {:.2e}",
        seed(),
        budget()
    );
    let mut worst = 0.0f64;
    for batch in BATCHES {
        let input = random_input(&shape, batch, INPUT_SEED);
        let got = run(&mut gpu, &shape, &input, batch);
        let (rel, max_abs) = errors(&got, &want_all[..batch * out_w]);
        let s = gpu.last_forward().expect("summary");
        eprintln!(
            "batch {batch:>3}: rel L2 {rel:.3e}, max abs {max_abs:.3e} (tile height {}, {} tiles, concurrent {}, projection {:?})",
            s.schedule.tile_height, s.schedule.tiles, s.schedule.concurrent, s.projection_tile
        );
        assert!(
            rel <= budget(),
            "batch {batch}: relative L2 {rel:.3e} over the budget {:.2e}",
            budget()
        );
        worst = worst.max(rel);
    }
    eprintln!("worst rel L2 {worst:.3e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn matches_the_f64_reference_at_short_frame_counts() {
    for frames in [1, 2, 17] {
        let shape = StackShape::pyannote().with_frames(frames);
        let st = stack(&shape);
        let mut gpu = prepared(&st, 33);
        let want_all = cached_reference(&shape, 33);
        let out_w = shape.frames * shape.output_width();
        for batch in [1, 2, 9, 33] {
            let input = random_input(&shape, batch, INPUT_SEED);
            let got = run(&mut gpu, &shape, &input, batch);
            let (rel, max_abs) = errors(&got, &want_all[..batch * out_w]);
            eprintln!(
                "frames {frames:>2}, batch {batch:>2}: rel L2 {rel:.3e}, max abs {max_abs:.3e}"
            );
            assert!(
                rel <= budget(),
                "frames {frames}, batch {batch}: relative L2 {rel:.3e}"
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn agrees_with_the_cpu_backend() {
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    let batch = 33;
    let input = random_input(&shape, batch, INPUT_SEED);
    let mut gpu = prepared(&st, batch);
    let got = run(&mut gpu, &shape, &input, batch);
    let mut cpu = CpuBackend::new();
    cpu.prepare(
        &st.weights().expect("weights"),
        &BackendConfig {
            shape,
            max_batch: batch,
            math: MathMode::Fp32,
        },
    )
    .expect("cpu prepare");
    let want = run(&mut cpu, &shape, &input, batch);
    let want64: Vec<f64> = want.iter().map(|&v| f64::from(v)).collect();
    let rel = relative_l2(&got, &want64);
    let f64_ref = cached_reference(&shape, batch);
    let (cpu_rel, _) = errors(&want, &f64_ref);
    let (gpu_rel, _) = errors(&got, &f64_ref);
    eprintln!(
        "batch {batch}: GPU vs CPU rel L2 {rel:.3e}; vs f64: GPU {gpu_rel:.3e}, CPU {cpu_rel:.3e}"
    );
    assert!(rel <= 2.0 * budget(), "GPU and CPU differ by {rel:.3e}");
}
