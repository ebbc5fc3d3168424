//! GPU: the fixed-point recurrences (`numerics.cuh` section 9, TF32 mode's recurrent product on
//! GPUs with clusters: the tensor-core `bilstm_recurrence_fixed8`, `fixed8c2`, `fixed8c4`,
//! `fixed4`, `fixed4c2`, `fixed4c4`, `fixed4c8`, `fixed2c4`, `fixed2c8` and the integer-pipe `fixed1c2`, `fixed1c4`,
//! `fixed1c8`), each forced on TF32 passes through the test hook
//! `CudaBackend::set_fixed_recurrence` (as `BILSTM_FIXED_RECURRENCE` does), and the plan's own
//! pick: within TF32 mode's budget of the f64 reference; every window's bits the same at batch
//! 1, in partial and full tiles of every kernel, with the resident projection and TF32-rounded
//! outputs of large batches; the default TF32 pass gives these bits, the switch `off` section
//! 8's (other bits); final states equal to the last outputs; a lost partner of the cluster
//! kernels ends in `PartnerLost`; FP32 passes untouched.
//! `small_fixed_pass_for_sanitizers` is the pass `scripts/gpu-run.sh` runs under
//! compute-sanitizer. Compute capability 9.0 only (elsewhere each test says it is skipped).

// Test helpers: a failed expectation is a failed test.
#![allow(clippy::panic, clippy::expect_used)]

mod gpu_support;

use bilstm_core::accuracy::gpu_budget;
use bilstm_core::fixed::FixedPick;
use bilstm_core::owned::random_input;
use bilstm_core::{BackendError, Direction, ErrorKind, MathMode, Overrides, StackShape};
use bilstm_cuda::CudaBackend;
use gpu_support::{
    INPUT_SEED, assert_last_h_n_is_the_output, assert_same_bits, cached_reference,
    differing_windows, errors, first_difference, gpu, prepared, reference, run, run_device,
    run_with_state, stack, stalls_end_in_partner_lost, tf32_backend,
};

/// Whether this GPU lacks the fixed-point recurrence (cluster plans: 9.0); says so.
fn no_fixed_recurrence_here() -> bool {
    let none = gpu().device().facts.compute_capability < (9, 0);
    if none {
        eprintln!("skipped: the fixed-point recurrence runs on compute capability 9.0 only");
    }
    none
}

/// Every fixed-point kernel by its hook name: 8 windows a CTA, a 2- and a 4-CTA cluster (tensor
/// cores); one window a 2-, 4- and 8-CTA cluster (integer pipe); 4 windows a CTA, a 2-, 4- and
/// 8-CTA cluster (tensor cores, the byte planes as columns); 2 windows a 4- and an 8-CTA
/// cluster (the same code, half the columns); and `auto`, the pick by batch.
const KERNELS: [&str; 13] = [
    "8", "8c2", "8c4", "1c2", "1c4", "1c8", "4", "4c2", "4c4", "4c8", "2c4", "2c8", "auto",
];

/// A TF32 backend (the plan's own kernels otherwise) whose TF32 passes run the fixed-point
/// recurrence named `name`.
fn fixed_backend(shape: &StackShape, max_batch: usize, name: &str) -> CudaBackend {
    let mut b = tf32_backend(&stack(shape), max_batch, Overrides::default());
    b.set_fixed_recurrence(Some(name))
        .unwrap_or_else(|e| panic!("fixed recurrence {name}: {e}"));
    b
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn only_the_twelve_kernels_auto_and_off_are_named() {
    let mut b = gpu();
    for bad in [
        "", "2", "16", "32", "8c8", "1c16", "4c16", "fixed8", "Auto", "Off",
    ] {
        let e = b.set_fixed_recurrence(Some(bad)).expect_err("refused");
        assert_eq!(
            e.to_string(),
            format!(
                "fixed-point recurrence: no such value {bad:?} (expected 8, 8c2, 8c4, 1c2, 1c4, 1c8, 4, 4c2, 4c4, 4c8, 2c4, 2c8, auto or off)"
            )
        );
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    }
    for name in KERNELS.into_iter().chain(["off"]) {
        b.set_fixed_recurrence(Some(name)).expect(name);
    }
    b.set_fixed_recurrence(None).expect("the plan's pick");
}

/// Relative L2 against the f64 reference at 589 frames, batches 1, 8 and 33, within TF32
/// mode's budget (1.1 x cuDNN TF32's error), with each kernel.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fixed_recurrence_matches_the_f64_reference_at_589_frames() {
    if no_fixed_recurrence_here() {
        return;
    }
    let shape = StackShape::pyannote();
    let want_all = cached_reference(&shape, 33);
    let out_w = shape.frames * shape.output_width();
    let budget = gpu_budget(MathMode::Tf32);
    for name in KERNELS {
        let mut b = fixed_backend(&shape, 33, name);
        for batch in [1, 8, 33] {
            let input = random_input(&shape, batch, INPUT_SEED);
            let got = run(&mut b, &shape, &input, batch);
            let (rel, max_abs) = errors(&got, &want_all[..batch * out_w]);
            eprintln!(
                "fixed{name} batch {batch:>2}: rel L2 {rel:.3e}, max abs {max_abs:.3e} (budget {budget:.3e})"
            );
            assert!(
                rel <= budget,
                "batch {batch}: rel L2 {rel:.3e} over {budget:.3e}"
            );
        }
    }
}

/// Every window of batches 33, 257 and 1024 (589 frames, device-resident: one pass each, the
/// plan's TF32 projection, resident with TF32-rounded outputs from the quads' batches on) has,
/// with every kernel, the bits it has alone at batch 1 with the 8-window kernel (all of batch
/// 1024 the same bits in every kernel); and those bits are not the plan's own kernels'
/// (numerics.cuh section 8), so the hook really ran.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fixed_recurrence_bits_do_not_depend_on_the_batch_or_the_kernel() {
    if no_fixed_recurrence_here() {
        return;
    }
    let shape = StackShape::pyannote();
    let big = 1024;
    let all = random_input(&shape, big, INPUT_SEED + 23);
    let in_w = shape.frames * shape.features;
    let out_w = shape.frames * shape.output_width();
    let mut b = fixed_backend(&shape, big, "8");
    // Alone: windows 0..40 and the last 24 (partial and full tiles of every kernel).
    let picked: Vec<usize> = (0..40).chain(big - 24..big).collect();
    let alone: Vec<Vec<f32>> = picked
        .iter()
        .map(|&w| run_device(&mut b, &shape, &all[w * in_w..(w + 1) * in_w], 1))
        .collect();
    // TF32 mode's default is these bits; the switch `off` gives section 8's, which differ (so
    // the hook really ran).
    let mut planned = tf32_backend(&stack(&shape), 1, Overrides::default());
    let default = run_device(&mut planned, &shape, &all[..in_w], 1);
    assert_same_bits(
        &alone[0],
        &default,
        "fixed8 against TF32 mode's default, batch 1",
    );
    planned.set_fixed_recurrence(Some("off")).expect("off");
    let section8 = run_device(&mut planned, &shape, &all[..in_w], 1);
    assert!(
        first_difference(&section8, &alone[0]).is_some(),
        "the fixed-point recurrence gave section 8's bits: did it run?"
    );
    let mut at_1024: Vec<Vec<f32>> = Vec::new();
    for name in KERNELS {
        b.set_fixed_recurrence(Some(name)).expect("fixed");
        for batch in [33, 257, 1024] {
            let got = run_device(&mut b, &shape, &all, batch);
            let mut want = Vec::new();
            let mut have = Vec::new();
            for (i, &w) in picked.iter().enumerate() {
                if w < batch {
                    want.extend_from_slice(&alone[i]);
                    have.extend_from_slice(&got[w * out_w..(w + 1) * out_w]);
                }
            }
            let differ = differing_windows(&want, &have, out_w, shape.output_width());
            eprintln!(
                "fixed{name} batch {batch}: {} of the {} windows checked differ from their batch-1 bits",
                differ.len(),
                want.len() / out_w
            );
            assert!(differ.is_empty(), "fixed{name} batch {batch}: {differ:?}");
            if batch == big {
                at_1024.push(got);
            }
        }
    }
    for (name, got) in KERNELS.iter().zip(&at_1024).skip(1) {
        assert_same_bits(
            &at_1024[0],
            got,
            &format!("fixed8 vs fixed{name} at batch 1024"),
        );
    }
}

/// TF32 passes run, by batch, the kernel `bilstm_core::fixed::pick` names for this GPU's SMs
/// (on the H200: 1c8 up to batch 7, 1c4 up to 15, 2c4 up to 30, 1c2 up to 33, 4c4 up to 48,
/// 4c2 up to 132, fixed4 up to 264, then fixed8), by default (the plan's `fixed_point` decision) and with
/// `auto`: with a CTA that never pushes (layer 1, forward, block 1: rank 1 of the first
/// cluster) the lost partner names that kernel, and where a one-CTA kernel runs (`fixed4`,
/// `fixed8`: nothing waits, the stall hook has no partner to starve) the pass completes; either
/// way the backend reports the kernel that ran.
#[test]
#[ignore = "needs a CUDA GPU"]
fn tf32_passes_run_the_kernel_the_rule_picks() {
    if no_fixed_recurrence_here() {
        return;
    }
    let sms = gpu().device().facts.sm_count as usize;
    let shape = StackShape::pyannote().with_frames(16);
    let batches = [1, 7, 8, 15, 16, 30, 31, 33, 34, 64, 140, 300];
    let input = random_input(&shape, 300, INPUT_SEED);
    let in_w = shape.input_len(1).expect("shape");
    for setting in [None, Some("auto")] {
        let mut b = tf32_backend(&stack(&shape), 300, Overrides::default());
        b.set_fixed_recurrence(setting)
            .unwrap_or_else(|e| panic!("{setting:?}: {e}"));
        b.set_spin_timeout(std::time::Duration::from_millis(200));
        for batch in batches {
            let pick = bilstm_core::fixed::pick(batch, sms);
            let want = format!("bilstm_recurrence_{}", pick.name());
            // The one-CTA kernels (fixed4, fixed8) have no partner to starve: they complete.
            let one_cta = matches!(pick, FixedPick::Quad { cluster_size: 1 } | FixedPick::Tile);
            b.inject_stall(Some(bilstm_cuda::StallInjection {
                layer: 1,
                direction: Direction::Forward,
                block: 1,
            }));
            // Device-resident, so that the pass runs the whole batch (the host path splits large
            // batches into chunks, each with its own pick).
            let stream = b.stream().clone();
            let d_in = stream.clone_htod(&input[..batch * in_w]).expect("upload");
            let mut d_out = stream
                .alloc_zeros::<f32>(shape.output_len(batch).expect("shape"))
                .expect("alloc");
            let got = match b.forward_device(&d_in, batch, &mut d_out) {
                Ok(()) => None,
                Err(bilstm_cuda::CudaError::PartnerLost {
                    kernel,
                    layer,
                    direction,
                    ..
                }) => {
                    assert_eq!((layer, direction), (1, Direction::Forward), "batch {batch}");
                    Some(kernel)
                }
                Err(e) => panic!("batch {batch}: {e}"),
            };
            eprintln!(
                "{setting:?} batch {batch}: {}",
                got.unwrap_or("completed (a one-CTA kernel)")
            );
            assert_eq!(
                got,
                (!one_cta).then_some(want.as_str()),
                "{setting:?} batch {batch} on {sms} SMs"
            );
            // What benchmarks report as the kernel that ran, and what the plan says.
            assert_eq!(
                b.last_fixed_recurrence(),
                Some(want.as_str()),
                "{setting:?} batch {batch}"
            );
            let plan = b.last_forward().expect("summary").plan;
            assert_eq!(plan.fixed_point.choice, Some(pick), "batch {batch}");
        }
        b.inject_stall(None);
    }
}

/// `forward_with_state` with the fixed-point recurrence: the same output bits as `forward`,
/// finite states, and the last layer's `h_n` equal to the output at each window's last
/// (forward) and first (reverse) frame (batch 9, 64 frames: a partial tile).
#[test]
#[ignore = "needs a CUDA GPU"]
fn fixed_recurrence_final_states_are_the_last_outputs() {
    if no_fixed_recurrence_here() {
        return;
    }
    let shape = StackShape::pyannote().with_frames(64);
    let batch = 9;
    let input = random_input(&shape, batch, INPUT_SEED);
    for name in KERNELS {
        let mut b = fixed_backend(&shape, batch, name);
        let r = run_with_state(&mut b, &shape, &input, batch);
        assert_last_h_n_is_the_output(&shape, batch, &r, &format!("fixed{name}"));
    }
}

/// FP32 passes never run the fixed-point recurrence (TF32 mode only): with the hook set they
/// keep their bits.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fp32_passes_ignore_the_fixed_recurrence() {
    let shape = StackShape::pyannote().with_frames(64);
    let st = stack(&shape);
    let batch = 9;
    let input = random_input(&shape, batch, INPUT_SEED);
    let mut b = prepared(&st, batch);
    let before = run(&mut b, &shape, &input, batch);
    b.set_fixed_recurrence(Some("8c2")).expect("fixed");
    let after = run(&mut b, &shape, &input, batch);
    assert_same_bits(&before, &after, "FP32 with the fixed-point hook set");
    assert_eq!(b.last_fixed_recurrence(), None);
}

/// The cluster kernels (8 windows a 2- or 4-CTA cluster, one window a 2-, 4- or 8-CTA cluster) wait for their partners' bytes of
/// h with a bound: a CTA told never to push (the stall hook; forward direction's cluster at
/// layer 0, reverse direction's at layer 2) ends the forward within 30 s in `PartnerLost`
/// naming the kernel, the layer and the direction; without the fault the same backend gives
/// the clean run's bits again.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_lost_partner_ends_the_cluster_kernels_in_partner_lost() {
    if no_fixed_recurrence_here() {
        return;
    }
    let shape = StackShape::pyannote().with_frames(64);
    let batch = 9;
    let input = random_input(&shape, batch, INPUT_SEED);
    for (name, size, entry) in [
        ("8c2", 2u32, "bilstm_recurrence_fixed8c2"),
        ("8c4", 4, "bilstm_recurrence_fixed8c4"),
        ("1c2", 2, "bilstm_recurrence_fixed1c2"),
        ("1c4", 4, "bilstm_recurrence_fixed1c4"),
        ("1c8", 8, "bilstm_recurrence_fixed1c8"),
        ("4c2", 2, "bilstm_recurrence_fixed4c2"),
        ("4c4", 4, "bilstm_recurrence_fixed4c4"),
        ("4c8", 8, "bilstm_recurrence_fixed4c8"),
        ("2c4", 4, "bilstm_recurrence_fixed2c4"),
        ("2c8", 8, "bilstm_recurrence_fixed2c8"),
    ] {
        let mut b = fixed_backend(&shape, batch, name);
        // CTA x of a layer's launch is rank x % size of cluster x / size, whose direction is
        // (x / size) % 2.
        let stalls = [
            (0, Direction::Forward, 1),
            (2, Direction::Reverse, size + 1),
        ];
        stalls_end_in_partner_lost(&mut b, &shape, &input, &stalls, entry);
    }
}

/// The pass `scripts/gpu-run.sh` runs under compute-sanitizer: 9 windows of 17 frames with
/// each kernel (a partial tile; both slots and planes), within TF32 mode's budget.
#[test]
#[ignore = "needs a CUDA GPU"]
fn small_fixed_pass_for_sanitizers() {
    if no_fixed_recurrence_here() {
        return;
    }
    let shape = StackShape::pyannote().with_frames(17);
    let st = stack(&shape);
    let batch = 9;
    let input = random_input(&shape, batch, INPUT_SEED);
    let want = reference(&st, &input, batch);
    for name in KERNELS {
        let mut b = fixed_backend(&shape, batch, name);
        let got = run(&mut b, &shape, &input, batch);
        let (rel, max_abs) = errors(&got, &want);
        eprintln!("fixed{name} batch {batch}, 17 frames: rel L2 {rel:.3e}, max abs {max_abs:.3e}");
        assert!(rel <= gpu_budget(MathMode::Tf32));
    }
}
