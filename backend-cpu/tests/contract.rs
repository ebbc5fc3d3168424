//! The [`Backend`] contract on the CPU: determinism (threads, repeated runs, batch
//! composition, dirty buffers), gate-order views, math modes, special values, and the exact
//! error of every bad input.

#![allow(
    clippy::unwrap_used,
    reason = "helpers of tests: a failed unwrap fails the test"
)]

use bilstm_core::layout::Tensor;
use bilstm_core::owned::{OwnedStack, random_input};
use bilstm_core::{
    Backend, BackendConfig, BackendError, CoreError, Direction, ErrorKind, GateOrder, MathMode,
    StackShape, StackWeights,
};
use bilstm_cpu::{CpuBackend, CpuError, Isa, Tiles};

fn config(shape: StackShape, max_batch: usize) -> BackendConfig {
    BackendConfig {
        shape,
        max_batch,
        math: MathMode::Fp32,
    }
}

fn prepared(
    weights: &StackWeights<'_>,
    shape: StackShape,
    max_batch: usize,
    threads: usize,
) -> CpuBackend {
    let mut cpu = CpuBackend::with_threads(threads);
    cpu.prepare(weights, &config(shape, max_batch)).unwrap();
    cpu
}

fn run(cpu: &mut CpuBackend, input: &[f32], batch: usize) -> Vec<f32> {
    let shape = cpu.config().unwrap().shape;
    let mut out = vec![0.0f32; shape.output_len(batch).unwrap()];
    cpu.forward(input, batch, &mut out).unwrap();
    out
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn same_bits_for_one_or_two_threads_and_every_run() {
    let model = OwnedStack::builtin();
    let shape = model.shape;
    let w = model.weights().unwrap();
    let input = random_input(&shape, 2, 11);
    let mut one = prepared(&w, shape, 2, 1);
    let mut two = prepared(&w, shape, 2, 2);
    assert_eq!((one.threads(), two.threads()), (1, 2));
    let want = bits(&run(&mut one, &input, 2));
    assert_eq!(
        bits(&run(&mut two, &input, 2)),
        want,
        "2 threads differ from 1"
    );
    assert_eq!(bits(&run(&mut two, &input, 2)), want, "second run differs");
    assert_eq!(
        bits(&run(&mut one, &input, 2)),
        want,
        "second single-thread run differs"
    );
    assert!(want.iter().all(|&b| f32::from_bits(b).abs() < 1.0));
}

/// The portable kernels (`f32::mul_add`, scalar gate functions), the AVX2 + FMA kernels and
/// the AVX-512VL build (larger tiles) give the same bits: the same operations in the same
/// order. Every instruction set the host has is compared with the portable one, at batches
/// that use every recurrence tile (7 = a group of six and a single window) and 13 frames (two
/// projection tiles and a remainder).
#[test]
fn every_instruction_set_gives_identical_bits() {
    let shape = StackShape::pyannote().with_frames(13);
    let model = OwnedStack::random(&shape, 31, 0.3);
    let w = model.weights().unwrap();
    let available = Isa::available();
    assert_eq!(available[0], Isa::portable());
    assert_eq!(available.last(), Some(&Isa::detect()));
    println!("available: {available:?}");
    for batch in [3, 7] {
        let input = random_input(&shape, batch, 13);
        let mut portable = CpuBackend::with_isa(1, Isa::portable());
        assert!(!portable.isa().is_avx2_fma());
        portable.prepare(&w, &config(shape, batch)).unwrap();
        let want = bits(&run(&mut portable, &input, batch));
        for &isa in &available[1..] {
            let mut fast = CpuBackend::with_isa(2, isa);
            fast.prepare(&w, &config(shape, batch)).unwrap();
            assert_eq!(
                bits(&run(&mut fast, &input, batch)),
                want,
                "{isa}, batch {batch}"
            );
        }
    }
}

/// Whole stacks: every instruction set the host has, with 1 and 2 threads, gives the bits of
/// the portable kernels on one thread, at batches that use every recurrence tile (1 to 7, 13,
/// 32) and frame counts around the projection tile (1, 6, 9).
fn stacks_agree_across_isas_and_threads(batches: &[usize], frames: &[usize]) {
    for &f in frames {
        let shape = StackShape::pyannote().with_frames(f);
        let model = OwnedStack::random(&shape, 40 + f as u64, 0.3);
        let w = model.weights().unwrap();
        let max = batches.iter().copied().max().unwrap_or(1);
        let mut portable = CpuBackend::with_isa(1, Isa::portable());
        portable.prepare(&w, &config(shape, max)).unwrap();
        let mut fast: Vec<CpuBackend> = Isa::available()
            .into_iter()
            .flat_map(|isa| [1, 2].map(|t| CpuBackend::with_isa(t, isa)))
            .collect();
        for cpu in &mut fast {
            cpu.prepare(&w, &config(shape, max)).unwrap();
        }
        for &batch in batches {
            let input = random_input(&shape, batch, 50 + batch as u64);
            let want = bits(&run(&mut portable, &input, batch));
            for cpu in &mut fast {
                let (isa, threads) = (cpu.isa(), cpu.threads());
                assert_eq!(
                    bits(&run(cpu, &input, batch)),
                    want,
                    "{isa}, {threads} thread(s), batch {batch}, {f} frames"
                );
            }
        }
    }
}

#[test]
fn every_instruction_set_and_thread_count_gives_identical_stack_bits() {
    println!("available: {:?}", Isa::available());
    stacks_agree_across_isas_and_threads(&[1, 2, 7, 13], &[1, 9]);
}

/// The 512-bit kernels on whole stacks, against every other set and thread count (see
/// [`stacks_agree_across_isas_and_threads`]). Runs only on a host with AVX-512F.
#[test]
fn avx512_stacks_give_identical_bits() {
    let Some(zmm) = Isa::detect_at_most("avx512").filter(|isa| isa.is_512_bit()) else {
        println!(
            "skipped: no avx512f on this host (available: {:?})",
            Isa::available()
        );
        return;
    };
    assert_eq!(zmm.name(), "avx512");
    assert_eq!(Isa::detect(), zmm);
    stacks_agree_across_isas_and_threads(&[1, 2, 3, 4, 5, 6, 7, 13, 32], &[1, 6, 9]);
    println!("avx512f stacks: bits identical to {:?}", Isa::available());
}

/// Every variant of the 512-bit kernels' register tiles (`BILSTM_CPU_TILES`: each token of
/// the sweep alone, and every non-default choice at once) on whole stacks, 1 and 2 threads,
/// gives the bits of the portable kernels, at batches that use every window tile of every
/// variant (1 to 8, 12 to 15, 19, 32) and frame counts around the projection tiles (1, 3, 13,
/// 25), and one window over several chunks of the fused one-window path (105). On a host without AVX-512F the tiles are ignored: checked on the best set it has.
#[test]
fn every_tile_variant_gives_identical_stack_bits() {
    let zmm = Isa::detect_at_most("avx512").filter(|isa| isa.is_512_bit());
    let isa = zmm.unwrap_or_else(Isa::detect);
    let mut variants: Vec<Tiles> = Tiles::SWEEP
        .iter()
        .filter_map(|t| Tiles::parse(t))
        .collect();
    variants.extend(Tiles::parse("p12x32,r12x32,q256,malloc"));
    variants.extend(Tiles::parse("p6x32,r6x64,q128"));
    assert_eq!(variants.len(), Tiles::SWEEP.len() + 2);
    if zmm.is_none() {
        // The tiles change nothing here: two variants show they are ignored.
        variants.drain(1..variants.len() - 1);
    }
    // (frames, batches): frame counts around the projection tiles with a few batches, and
    // every window-tile shape on short windows (the portable reference is slow: software FMA).
    let cases: [(usize, &[usize]); 5] = [
        // One window over three fused chunks (48, 48, 9 frames: the next chunk's projection
        // beside the steps, whole and with a partial group of rows).
        (105, &[1]),
        (25, &[1, 2, 7]),
        (13, &[1, 3, 6, 13, 14, 19]),
        (3, &[1, 2, 4, 5, 7, 8, 12, 14, 15, 19, 32]),
        (1, &[1, 32]),
    ];
    let max = 32;
    for (f, batches) in cases {
        let shape = StackShape::pyannote().with_frames(f);
        let model = OwnedStack::random(&shape, 70 + f as u64, 0.3);
        let w = model.weights().unwrap();
        let mut portable = CpuBackend::with_isa(1, Isa::portable());
        portable.prepare(&w, &config(shape, max)).unwrap();
        let mut fast: Vec<CpuBackend> = variants
            .iter()
            .flat_map(|&t| [1, 2].map(|n| CpuBackend::with_isa(n, isa).with_tiles(t)))
            .collect();
        for cpu in &mut fast {
            cpu.prepare(&w, &config(shape, max)).unwrap();
        }
        for &batch in batches {
            let input = random_input(&shape, batch, 90 + batch as u64);
            let want = bits(&run(&mut portable, &input, batch));
            for cpu in &mut fast {
                let (tiles, threads) = (cpu.tiles(), cpu.threads());
                assert_eq!(
                    bits(&run(cpu, &input, batch)),
                    want,
                    "{isa} tiles {tiles}, {threads} thread(s), batch {batch}, {f} frames"
                );
            }
        }
    }
    match zmm {
        Some(_) => println!(
            "avx512f tile variants: bits identical for {}",
            variants
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" | ")
        ),
        None => println!("skipped the 512-bit tile variants: no avx512f on this host ({isa})"),
    }
}

/// `detect_at_most` caps the detected set and refuses unknown names.
#[test]
fn instruction_set_caps() {
    assert_eq!(Isa::detect_at_most("portable"), Some(Isa::portable()));
    assert_eq!(Isa::detect_at_most("avx512"), Some(Isa::detect()));
    assert!(Isa::detect_at_most("avx2").unwrap() <= Isa::detect());
    assert!(Isa::detect_at_most("avx512vl").unwrap() <= Isa::detect());
    assert!(Isa::detect_at_most("avx2").unwrap() <= Isa::detect_at_most("avx512vl").unwrap());
    for isa in Isa::available() {
        assert_eq!(Isa::detect_at_most(isa.name()), Some(isa), "{isa}");
        assert_eq!(isa.is_512_bit(), isa.name() == "avx512", "{isa}");
    }
    assert_eq!(Isa::detect_at_most("sse9"), None);
    assert_eq!(Isa::detect_at_most(""), None);
}

#[test]
fn a_window_gives_the_same_bits_in_every_batch() {
    let shape = StackShape::pyannote().with_frames(40);
    let model = OwnedStack::random(&shape, 21, 0.3);
    let w = model.weights().unwrap();
    let input = random_input(&shape, 5, 12);
    let mut cpu = prepared(&w, shape, 5, 2);
    let all = run(&mut cpu, &input, 5);
    let (in_w, out_w) = (shape.input_len(1).unwrap(), shape.output_len(1).unwrap());
    for k in 0..5 {
        let one = run(&mut cpu, &input[k * in_w..(k + 1) * in_w], 1);
        assert_eq!(
            bits(&one),
            bits(&all[k * out_w..(k + 1) * out_w]),
            "window {k}"
        );
    }
    // Windows 1..4 as a batch of 3.
    let mid = run(&mut cpu, &input[in_w..4 * in_w], 3);
    assert_eq!(bits(&mid), bits(&all[out_w..4 * out_w]));
}

#[test]
fn onnx_torch_and_packed_views_give_identical_bits() {
    let shape = StackShape::pyannote().with_frames(30);
    let torch = OwnedStack::random(&shape, 31, 0.3);
    let onnx = torch.to_onnx().unwrap();
    let onnx_order = torch.with_order(GateOrder::Onnx).unwrap();
    let packed_order = torch.with_order(GateOrder::Packed).unwrap();
    let input = random_input(&shape, 3, 13);
    let views = [
        ("torch", torch.weights().unwrap()),
        ("onnx", onnx.weights().unwrap()),
        ("onnx-order layers", onnx_order.weights().unwrap()),
        ("packed-order layers", packed_order.weights().unwrap()),
    ];
    assert_eq!(views[1].1.order(), GateOrder::Onnx);
    let want = bits(&run(&mut prepared(&views[0].1, shape, 3, 2), &input, 3));
    for (name, w) in &views[1..] {
        assert_eq!(
            bits(&run(&mut prepared(w, shape, 3, 2), &input, 3)),
            want,
            "{name}"
        );
    }
}

#[test]
fn tf32_runs_fp32_bit_for_bit() {
    let shape = StackShape::pyannote().with_frames(20);
    let model = OwnedStack::random(&shape, 41, 0.3);
    let w = model.weights().unwrap();
    let input = random_input(&shape, 2, 14);
    let want = bits(&run(&mut prepared(&w, shape, 2, 2), &input, 2));
    let mut tf32 = CpuBackend::new();
    let cfg = BackendConfig {
        shape,
        max_batch: 2,
        math: MathMode::Tf32,
    };
    tf32.prepare(&w, &cfg).unwrap();
    assert_eq!(tf32.config(), Some(&cfg));
    assert_eq!(bits(&run(&mut tf32, &input, 2)), want);
}

#[test]
fn dirty_output_and_stale_buffers_do_not_change_the_result() {
    let shape = StackShape::pyannote().with_frames(25);
    let model = OwnedStack::random(&shape, 51, 0.3);
    let w = model.weights().unwrap();
    let input = random_input(&shape, 2, 15);
    let want = bits(&run(&mut prepared(&w, shape, 4, 2), &input, 2));

    let mut cpu = prepared(&w, shape, 4, 2);
    // Leave other data in every internal buffer: a bigger batch of other inputs, with NaN.
    let mut other = random_input(&shape, 4, 99);
    other[7] = f32::NAN;
    other[shape.input_len(3).unwrap() + 5] = f32::INFINITY;
    run(&mut cpu, &other, 4);
    for garbage in [f32::NAN, f32::INFINITY, -1.0e30, 0.0] {
        let mut out = vec![garbage; shape.output_len(2).unwrap()];
        cpu.forward(&input, 2, &mut out).unwrap();
        assert_eq!(bits(&out), want, "output pre-filled with {garbage}");
    }
}

#[test]
fn nan_and_infinity_inputs_stay_in_their_window() {
    let shape = StackShape::pyannote().with_frames(17);
    let model = OwnedStack::random(&shape, 61, 0.3);
    let w = model.weights().unwrap();
    let clean = random_input(&shape, 3, 16);
    let mut cpu = prepared(&w, shape, 3, 2);
    let want = run(&mut cpu, &clean, 3);
    let (in_w, out_w) = (shape.input_len(1).unwrap(), shape.output_len(1).unwrap());

    let mut nan = clean.clone();
    nan[in_w + 5 * 60 + 3] = f32::NAN; // window 1, frame 5, feature 3
    let got = run(&mut cpu, &nan, 3);
    assert_eq!(
        bits(&got[..out_w]),
        bits(&want[..out_w]),
        "window 0 touched"
    );
    assert_eq!(
        bits(&got[2 * out_w..]),
        bits(&want[2 * out_w..]),
        "window 2 touched"
    );
    // After four layers every frame of window 1 has seen the NaN (one way or the other).
    assert!(got[out_w..2 * out_w].iter().all(|v| v.is_nan()));

    // One infinite or huge feature saturates the gates it reaches: the window stays finite
    // (the README's contract, as on the GPU).
    for inf in [f32::INFINITY, f32::NEG_INFINITY, 1.0e30, -1.0e30] {
        let mut x = clean.clone();
        x[2 * in_w + 16 * 60] = inf; // window 2, last frame
        let got = run(&mut cpu, &x, 3);
        assert_eq!(
            bits(&got[..2 * out_w]),
            bits(&want[..2 * out_w]),
            "windows 0 and 1 touched"
        );
        assert!(
            got[2 * out_w..]
                .iter()
                .all(|v| v.is_finite() && v.abs() <= 1.0),
            "{inf}"
        );
    }
}

/// Subnormal inputs are read as zeros (README: special values): with zero biases, where a
/// subnormal product would otherwise survive every sum, the output is that of a zero input.
#[test]
fn subnormal_inputs_run_as_zeros() {
    let shape = StackShape::pyannote().with_frames(9);
    let mut model = OwnedStack::random(&shape, 62, 0.3);
    for layer in &mut model.layers {
        for d in [&mut layer.forward, &mut layer.reverse] {
            d.bias_ih.fill(0.0);
            d.bias_hh.fill(0.0);
        }
    }
    let w = model.weights().unwrap();
    let mut cpu = prepared(&w, shape, 2, 2);
    let zeros = vec![0.0f32; shape.input_len(2).unwrap()];
    let tiny: Vec<f32> = random_input(&shape, 2, 3)
        .iter()
        .map(|v| v * 1e-39)
        .collect();
    assert!(tiny.iter().any(|v| v.is_subnormal()));
    let want = run(&mut cpu, &zeros, 2);
    assert_eq!(bits(&run(&mut cpu, &tiny, 2)), bits(&want));
    // Outputs of inputs scaled to 1e30 hold no subnormal (saturated gates are exact zeros).
    let huge: Vec<f32> = random_input(&shape, 2, 3)
        .iter()
        .map(|v| v * 1e30)
        .collect();
    assert!(run(&mut cpu, &huge, 2).iter().all(|v| !v.is_subnormal()));
}

#[test]
fn batch_zero_writes_nothing() {
    let shape = StackShape::pyannote().with_frames(5);
    let model = OwnedStack::random(&shape, 71, 0.3);
    let mut cpu = prepared(&model.weights().unwrap(), shape, 2, 2);
    assert_eq!(cpu.forward(&[], 0, &mut []), Ok(()));
    // A backend prepared for max_batch 0 runs batch 0 and refuses the rest.
    let mut zero = prepared(&model.weights().unwrap(), shape, 0, 1);
    assert_eq!(zero.forward(&[], 0, &mut []), Ok(()));
    let input = random_input(&shape, 1, 1);
    let mut out = vec![0.0; shape.output_len(1).unwrap()];
    assert_eq!(
        zero.forward(&input, 1, &mut out),
        Err(CpuError::Core(CoreError::BatchTooLarge {
            batch: 1,
            max: 0
        }))
    );
}

#[test]
fn every_bad_forward_gets_its_exact_error() {
    let shape = StackShape::pyannote().with_frames(3);
    let model = OwnedStack::random(&shape, 81, 0.3);
    let w = model.weights().unwrap();
    let input = random_input(&shape, 2, 1);
    let mut out = vec![0.0f32; shape.output_len(2).unwrap()];

    let mut cpu = CpuBackend::new();
    let e = cpu.forward(&input, 2, &mut out).unwrap_err();
    assert_eq!(e, CpuError::Core(CoreError::NotPrepared));
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert_eq!(
        cpu.forward(&[], 0, &mut []),
        Err(CpuError::Core(CoreError::NotPrepared))
    );

    cpu.prepare(&w, &config(shape, 2)).unwrap();
    let cases: [(&[f32], usize, usize, CoreError); 6] = [
        (
            &input[1..],
            2,
            1536,
            CoreError::Shape {
                what: "input length",
                expected: 360,
                got: 359,
            },
        ),
        (
            &input,
            2,
            1537,
            CoreError::Shape {
                what: "output length",
                expected: 1536,
                got: 1537,
            },
        ),
        (
            &input,
            1,
            768,
            CoreError::Shape {
                what: "input length",
                expected: 180,
                got: 360,
            },
        ),
        (
            &input[..180],
            1,
            1536,
            CoreError::Shape {
                what: "output length",
                expected: 768,
                got: 1536,
            },
        ),
        (
            &[],
            0,
            1,
            CoreError::Shape {
                what: "output length",
                expected: 0,
                got: 1,
            },
        ),
        // Lengths are checked before the batch limit.
        (
            &input,
            3,
            2304,
            CoreError::Shape {
                what: "input length",
                expected: 540,
                got: 360,
            },
        ),
    ];
    for (x, batch, out_len, want) in cases {
        let mut out = vec![0.0f32; out_len];
        let e = cpu.forward(x, batch, &mut out).unwrap_err();
        assert_eq!(e, CpuError::Core(want.clone()));
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{want}");
    }
    let big = random_input(&shape, 3, 1);
    let mut big_out = vec![0.0f32; shape.output_len(3).unwrap()];
    let e = cpu.forward(&big, 3, &mut big_out).unwrap_err();
    assert_eq!(
        e,
        CpuError::Core(CoreError::BatchTooLarge { batch: 3, max: 2 })
    );
    assert_eq!(e.to_string(), "batch 3 exceeds the prepared maximum 2");
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    // Nothing was written by a refused forward.
    assert!(big_out.iter().all(|&v| v == 0.0));
    // And the backend still runs.
    cpu.forward(&input, 2, &mut out).unwrap();
}

#[test]
fn every_bad_prepare_gets_its_exact_error_and_keeps_the_old_preparation() {
    let shape = StackShape::pyannote().with_frames(4);
    let model = OwnedStack::random(&shape, 91, 0.3);
    let w = model.weights().unwrap();
    let input = random_input(&shape, 1, 2);
    let mut cpu = prepared(&w, shape, 1, 2);
    let want = bits(&run(&mut cpu, &input, 1));
    let good = *cpu.config().unwrap();

    // NaN and infinite weights are refused, naming the first one.
    let mut bad = model.clone();
    bad.layers[2].direction_mut(Direction::Reverse).weight_hh[77] = f32::NAN;
    match cpu.prepare(&bad.weights().unwrap(), &config(shape, 1)) {
        Err(CpuError::Core(CoreError::NonFiniteWeight {
            layer: 2,
            direction: Direction::Reverse,
            tensor: Tensor::WeightHh,
            index: 77,
            value,
        })) => assert!(value.is_nan()),
        other => panic!("expected NonFiniteWeight, got {other:?}"),
    }
    let mut bad = model.clone();
    bad.layers[0].forward.bias_ih[3] = f32::NEG_INFINITY;
    let e = cpu
        .prepare(&bad.weights().unwrap(), &config(shape, 1))
        .unwrap_err();
    assert_eq!(
        e,
        CpuError::Core(CoreError::NonFiniteWeight {
            layer: 0,
            direction: Direction::Forward,
            tensor: Tensor::BiasIh,
            index: 3,
            value: f32::NEG_INFINITY,
        })
    );
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert_eq!(
        e.to_string(),
        "layer 0 forward bias_ih: value 3 is not finite (-inf)"
    );
    // ONNX weights name the ONNX tensor and the index in all of it.
    let mut onnx = model.to_onnx().unwrap();
    onnx.layers[1].b[1024 + 9] = f32::INFINITY; // reverse Wb[9]
    assert!(matches!(
        cpu.prepare(&onnx.weights().unwrap(), &config(shape, 1)),
        Err(CpuError::Core(CoreError::NonFiniteWeight {
            layer: 1,
            direction: Direction::Reverse,
            tensor: Tensor::B,
            index: 1033,
            ..
        }))
    ));

    // Weights of another shape than the config's.
    let narrow = StackShape {
        features: 40,
        ..shape
    };
    let other = OwnedStack::random(&narrow, 1, 0.3);
    assert_eq!(
        cpu.prepare(&other.weights().unwrap(), &config(shape, 1)),
        Err(CpuError::Core(CoreError::Shape {
            what: "weights' feature count",
            expected: 60,
            got: 40
        }))
    );
    // Shapes this version cannot run.
    let e = cpu
        .prepare(
            &w,
            &config(
                StackShape {
                    hidden: 64,
                    ..shape
                },
                1,
            ),
        )
        .unwrap_err();
    assert_eq!(
        e,
        CpuError::Core(CoreError::Unsupported {
            what: "hidden size",
            value: 64,
            reason: "only 128 units per direction are built"
        })
    );
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(matches!(
        cpu.prepare(&w, &config(shape.with_frames(0), 1)),
        Err(CpuError::Core(CoreError::Unsupported {
            what: "frame count",
            ..
        }))
    ));
    assert!(matches!(
        cpu.prepare(&w, &config(shape, usize::MAX)),
        Err(CpuError::Core(CoreError::Overflow { .. }))
    ));
    // Buffers beyond any address space: an error, not an abort.
    let e = cpu.prepare(&w, &config(shape, 1 << 40)).unwrap_err();
    assert!(matches!(e, CpuError::Allocation { .. }), "{e:?}");
    assert_eq!(e.kind(), ErrorKind::Device);

    // Every failure kept the earlier preparation.
    assert_eq!(cpu.config(), Some(&good));
    assert_eq!(bits(&run(&mut cpu, &input, 1)), want);
}

#[test]
fn prepare_again_replaces_weights_and_frames() {
    let shape = StackShape::pyannote().with_frames(6);
    let a = OwnedStack::random(&shape, 1, 0.3);
    let b = OwnedStack::random(&shape, 2, 0.3);
    let input = random_input(&shape, 1, 3);
    let want_b = bits(&run(
        &mut prepared(&b.weights().unwrap(), shape, 1, 1),
        &input,
        1,
    ));
    let mut cpu = prepared(&a.weights().unwrap(), shape, 1, 2);
    let got_a = bits(&run(&mut cpu, &input, 1));
    assert_ne!(got_a, want_b);
    cpu.prepare(&b.weights().unwrap(), &config(shape, 1))
        .unwrap();
    assert_eq!(bits(&run(&mut cpu, &input, 1)), want_b);
    // A new frame count takes effect at once.
    let longer = shape.with_frames(9);
    cpu.prepare(&b.weights().unwrap(), &config(longer, 1))
        .unwrap();
    let out = run(&mut cpu, &random_input(&longer, 1, 3), 1);
    assert_eq!(out.len(), 9 * 256);
}
