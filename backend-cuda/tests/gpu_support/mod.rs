//! Shared helpers of the GPU tests (`tests/gpu_*.rs`): the backend, seeded stacks and inputs,
//! the f64 reference computed in parallel threads, and error measures.
//!
//! GPU tests are `#[ignore = "needs a CUDA GPU"]`; on the GPU machine they run with
//! `--include-ignored`, and there a missing GPU fails them (they never skip).

// Test helpers: a failed expectation is a failed test.
#![allow(dead_code, clippy::panic, clippy::expect_used, clippy::unwrap_used)]

use std::sync::{Mutex, OnceLock};

use bilstm_core::owned::{OwnedStack, random_input};
use bilstm_core::reference::{forward_f64, relative_l2, workspace_len};
use bilstm_core::{Backend, BackendConfig, MathMode, StackShape};
use bilstm_cuda::CudaBackend;

/// Seed of the test weights (`BILSTM_SEED` overrides it; printed by every test that uses it).
pub fn seed() -> u64 {
    std::env::var("BILSTM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_2026)
}

/// Seed of the test inputs.
pub const INPUT_SEED: u64 = 17;

/// The GPU FP32 budget (relative L2 against f64).
pub fn budget() -> f64 {
    bilstm_core::accuracy::gpu_budget(MathMode::Fp32)
}

/// A CUDA backend on device 0, or a failed test.
pub fn gpu() -> CudaBackend {
    match CudaBackend::new(0) {
        Ok(b) => b,
        Err(e) => panic!("GPU tests need a CUDA GPU with NVRTC: {e}"),
    }
}

/// Weights U(-0.3, 0.3) for `shape` from [`seed`].
pub fn stack(shape: &StackShape) -> OwnedStack {
    OwnedStack::random(shape, seed(), 0.3)
}

/// A backend prepared for `shape` and batches up to `max_batch`.
pub fn prepared(stack: &OwnedStack, max_batch: usize) -> CudaBackend {
    let mut b = gpu();
    let config = BackendConfig {
        shape: stack.shape,
        max_batch,
        math: MathMode::Fp32,
    };
    b.prepare(&stack.weights().expect("weights"), &config)
        .unwrap_or_else(|e| panic!("prepare: {e}"));
    b
}

/// A backend in `MathMode::Tf32` for `stack`'s shape and batches up to `max_batch`, with
/// `overrides` forced.
pub fn tf32_backend(
    stack: &OwnedStack,
    max_batch: usize,
    overrides: bilstm_cuda::Overrides,
) -> CudaBackend {
    let mut b = gpu();
    let config = BackendConfig {
        shape: stack.shape,
        max_batch,
        math: MathMode::Tf32,
    };
    b.prepare(&stack.weights().expect("weights"), &config)
        .unwrap_or_else(|e| panic!("prepare: {e}"));
    b.set_overrides(overrides)
        .unwrap_or_else(|e| panic!("forcing {overrides:?}: {e}"));
    b
}

/// A TF32 backend for `stack`'s shape and batches up to `max_batch` whose recurrence is the
/// 2-CTA cluster kernel with `windows` windows a cluster (a register-quad kernel for 4 and 8),
/// the warpgroup TF32 projection forced and the resident projection on, and the fixed-point
/// switch `off` (so that the quads themselves run, with section 8's dot, not the plan's
/// fixed-point pick; `set_fixed_recurrence(None)` brings the pick back).
pub fn prepared_quads(stack: &OwnedStack, max_batch: usize, windows: usize) -> CudaBackend {
    let mut b = tf32_backend(
        stack,
        max_batch,
        bilstm_cuda::Overrides {
            recurrence: Some(bilstm_cuda::RecurrenceKind::Cluster),
            projection: Some(bilstm_core::plan::ProjectionTile::Tf32Wgmma),
            cluster_size: Some(2),
            cluster_windows: Some(windows),
        },
    );
    b.set_resident_projection(true);
    b.set_fixed_recurrence(Some("off"))
        .unwrap_or_else(|e| panic!("the fixed-point switch: {e}"));
    b
}

/// Whether this GPU lacks warpgroup MMA (the resident projection runs on 9.0 only); says so.
pub fn no_resident_projection_here() -> bool {
    let none = !bilstm_core::plan::wgmma_available(gpu().device().facts.compute_capability);
    if none {
        eprintln!("skipped: no warpgroup MMA on this GPU");
    }
    none
}

/// A backend prepared as [`prepared`] with `kind` forced as its recurrence kernel.
pub fn prepared_kind(
    stack: &OwnedStack,
    max_batch: usize,
    kind: bilstm_cuda::RecurrenceKind,
) -> CudaBackend {
    let mut b = prepared(stack, max_batch);
    force(&mut b, Some(kind));
    b
}

/// Forces `kind` as the recurrence kernel of `backend` (`None`: the plan's own; a cluster kind
/// gets its size by the rules), keeping any forced projection tile.
pub fn force(backend: &mut CudaBackend, kind: Option<bilstm_cuda::RecurrenceKind>) {
    let overrides = bilstm_cuda::Overrides {
        recurrence: kind,
        cluster_size: None,
        cluster_windows: None,
        ..backend.overrides()
    };
    backend
        .set_overrides(overrides)
        .unwrap_or_else(|e| panic!("forcing {kind:?}: {e}"));
}

/// Runs `backend` on `input` (`batch` windows of `shape`).
pub fn run(
    backend: &mut impl Backend<Error = impl std::fmt::Display>,
    shape: &StackShape,
    input: &[f32],
    batch: usize,
) -> Vec<f32> {
    let mut out = vec![f32::NAN; shape.output_len(batch).expect("output length")];
    backend
        .forward(input, batch, &mut out)
        .unwrap_or_else(|e| panic!("forward of batch {batch}: {e}"));
    out
}

/// One pass's output and final states (`forward_with_state`).
pub struct StateRun {
    /// The output.
    pub out: Vec<f32>,
    /// The final hidden states, `[layers * 2, batch, hidden]`.
    pub h_n: Vec<f32>,
    /// The final cell states, the same layout.
    pub c_n: Vec<f32>,
}

/// Runs `gpu` on `input` (`batch` windows of `shape`) with `forward_with_state`, and asserts
/// that its output has the bits `forward` gives.
pub fn run_with_state(
    gpu: &mut CudaBackend,
    shape: &StackShape,
    input: &[f32],
    batch: usize,
) -> StateRun {
    let mut out = vec![f32::NAN; shape.output_len(batch).expect("output length")];
    let n = shape.state_len(batch).expect("state length");
    let (mut h_n, mut c_n) = (vec![f32::NAN; n], vec![f32::NAN; n]);
    gpu.forward_with_state(input, batch, &mut out, &mut h_n, &mut c_n)
        .unwrap_or_else(|e| panic!("forward_with_state of batch {batch}: {e}"));
    let plain = run(gpu, shape, input, batch);
    assert_same_bits(&plain, &out, "forward_with_state vs forward");
    StateRun { out, h_n, c_n }
}

/// Asserts that the states of `r` (`batch` windows of `shape`) are finite and that the last
/// layer's `h_n` is the output at each window's last (forward) and first (reverse) frame.
pub fn assert_last_h_n_is_the_output(shape: &StackShape, batch: usize, r: &StateRun, what: &str) {
    assert!(
        r.h_n.iter().chain(&r.c_n).all(|v| v.is_finite()),
        "{what}: a state is not finite"
    );
    bilstm_test_support::assert_last_h_n_is_the_output(shape, batch, &r.out, &r.h_n, what);
}

/// Runs the first `batch` windows of `all` through the device-resident forward
/// (`CudaBackend::forward_device`: one pass, planned for the whole batch, unlike the host path,
/// which plans each of its chunks).
pub fn run_device(
    gpu: &mut CudaBackend,
    shape: &StackShape,
    all: &[f32],
    batch: usize,
) -> Vec<f32> {
    let stream = gpu.stream().clone();
    let in_len = shape.input_len(batch).expect("input length");
    let out_len = shape.output_len(batch).expect("output length");
    let d_in = stream.clone_htod(&all[..in_len]).expect("upload");
    let mut d_out = stream.alloc_zeros::<f32>(out_len).expect("alloc");
    gpu.forward_device(&d_in, batch, &mut d_out)
        .unwrap_or_else(|e| panic!("device forward of batch {batch}: {e}"));
    stream.clone_dtoh(&d_out).expect("download")
}

/// Where `got`'s windows differ from `alone`'s (the same windows run one at a time): for each
/// differing window, its index, the first differing frame and channel, and the largest
/// absolute difference.
pub fn differing_windows(alone: &[f32], got: &[f32], out_w: usize, width: usize) -> Vec<String> {
    let mut found = Vec::new();
    for (w, (a, g)) in alone.chunks(out_w).zip(got.chunks(out_w)).enumerate() {
        let Some(i) = a
            .iter()
            .zip(g)
            .position(|(x, y)| x.to_bits() != y.to_bits())
        else {
            continue;
        };
        let worst = a
            .iter()
            .zip(g)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0_f32, f32::max);
        found.push(format!(
            "window {w} (frame {}, channel {}, max abs {worst:.3e})",
            i / width,
            i % width
        ));
    }
    found
}

/// The f64 reference of the first `windows` windows of `input`, one window per task on all
/// cores (windows are independent, so window `k` of any batch is the same computation).
pub fn reference(stack: &OwnedStack, input: &[f32], windows: usize) -> Vec<f64> {
    let shape = stack.shape;
    let weights = stack.weights().expect("weights");
    let in_w = shape.frames * shape.features;
    let out_w = shape.frames * shape.output_width();
    let mut out = vec![0.0f64; windows * out_w];
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(windows.max(1));
    let next = Mutex::new(0usize);
    let chunks: Vec<Mutex<&mut [f64]>> = out.chunks_mut(out_w).map(Mutex::new).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut ws = vec![0.0f64; workspace_len(&shape, 1).expect("workspace")];
                loop {
                    let w = {
                        let mut n = next.lock().expect("counter");
                        let w = *n;
                        *n += 1;
                        w
                    };
                    if w >= windows {
                        break;
                    }
                    let mut chunk = chunks[w].lock().expect("chunk");
                    forward_f64(
                        &weights,
                        &input[w * in_w..(w + 1) * in_w],
                        1,
                        &mut ws,
                        &mut chunk,
                    )
                    .expect("reference");
                }
            });
        }
    });
    drop(chunks);
    out
}

/// The f64 reference of the first `windows` windows of the default test stack and input at
/// `shape`, computed once per process and shape.
pub fn cached_reference(shape: &StackShape, windows: usize) -> Vec<f64> {
    type Cache = Mutex<Vec<(StackShape, Vec<f64>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    let out_w = shape.frames * shape.output_width();
    if let Some((_, v)) = cache
        .lock()
        .expect("cache")
        .iter()
        .find(|(s, v)| s == shape && v.len() >= windows * out_w)
    {
        return v[..windows * out_w].to_vec();
    }
    let stack = stack(shape);
    let input = random_input(shape, windows, INPUT_SEED);
    let started = std::time::Instant::now();
    let v = reference(&stack, &input, windows);
    eprintln!(
        "f64 reference: {windows} windows of {} frames in {:.1} s",
        shape.frames,
        started.elapsed().as_secs_f64()
    );
    cache.lock().expect("cache").push((*shape, v.clone()));
    v
}

/// Relative L2 error of `got` against `want`, and the largest absolute difference.
pub fn errors(got: &[f32], want: &[f64]) -> (f64, f64) {
    let max_abs = got
        .iter()
        .zip(want)
        .map(|(&g, &w)| (f64::from(g) - w).abs())
        .fold(0.0, f64::max);
    (relative_l2(got, want), max_abs)
}

/// Whether two outputs have the same bits everywhere; else the first differing index.
pub fn first_difference(a: &[f32], b: &[f32]) -> Option<usize> {
    if a.len() != b.len() {
        return Some(a.len().min(b.len()));
    }
    a.iter()
        .zip(b)
        .position(|(x, y)| x.to_bits() != y.to_bits())
}

/// Asserts bitwise equality with a helpful message.
pub fn assert_same_bits(a: &[f32], b: &[f32], what: &str) {
    if let Some(i) = first_difference(a, b) {
        panic!(
            "{what}: first difference at {i}: {:?} vs {:?}",
            a.get(i),
            b.get(i)
        );
    }
}

/// For each `(layer, direction, block)` of `stalls`, a forward of `input` with that block told
/// never to publish ends within 30 s in `PartnerLost` naming `kernel`, the layer and the
/// direction; afterwards, without the fault, the backend gives the clean run's bits again.
pub fn stalls_end_in_partner_lost(
    b: &mut bilstm_cuda::CudaBackend,
    shape: &StackShape,
    input: &[f32],
    stalls: &[(usize, bilstm_core::Direction, u32)],
    kernel: &str,
) {
    let batch = input.len() / shape.input_len(1).unwrap();
    let clean = run(b, shape, input, batch);
    b.set_spin_timeout(std::time::Duration::from_millis(200));
    for &(layer, direction, block) in stalls {
        b.inject_stall(Some(bilstm_cuda::StallInjection {
            layer,
            direction,
            block,
        }));
        let mut out = vec![0.0; shape.output_len(batch).unwrap()];
        let started = std::time::Instant::now();
        let e = b.forward(input, batch, &mut out).unwrap_err();
        let took = started.elapsed();
        eprintln!(
            "{kernel}: stall at layer {layer} {direction} block {block}: {e} after {:.2} s",
            took.as_secs_f64()
        );
        assert_eq!(
            bilstm_core::BackendError::kind(&e),
            bilstm_core::ErrorKind::Timeout,
            "{e}"
        );
        match e {
            bilstm_cuda::CudaError::PartnerLost {
                kernel: k,
                layer: l,
                direction: d,
                ..
            } => assert_eq!((k, l, d), (kernel, layer, direction)),
            other => panic!("expected PartnerLost, got {other}"),
        }
        assert!(took < std::time::Duration::from_secs(30), "took {took:?}");
    }
    // Without the fault the same backend works again, bit for bit.
    b.inject_stall(None);
    let again = run(b, shape, input, batch);
    assert_same_bits(
        &clean,
        &again,
        &format!("{kernel}: after recovering from lost partners"),
    );
}
