//! GPU: bad input is refused before any work, special values never hang, and a lost partner
//! block ends with `PartnerLost` instead of a hang.

mod gpu_support;

use bilstm_core::owned::random_input;
use bilstm_core::{
    Backend, BackendConfig, BackendError, Direction, ErrorKind, MathMode, StackShape,
};
use bilstm_cuda::{CudaError, Overrides, RecurrenceKind};
use gpu_support::{
    INPUT_SEED, assert_same_bits, gpu, prepared, prepared_kind, run, stack,
    stalls_end_in_partner_lost,
};

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_input_is_refused() {
    let shape = StackShape::pyannote().with_frames(8);
    let st = stack(&shape);
    let mut fresh = gpu();
    let mut out = vec![0.0; shape.output_len(1).unwrap()];
    let input = random_input(&shape, 1, INPUT_SEED);
    let e = fresh.forward(&input, 1, &mut out).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");

    let mut b = prepared(&st, 4);
    let e = b.forward(&input[1..], 1, &mut out).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let e = b.forward(&input, 1, &mut out[1..]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let big = random_input(&shape, 5, INPUT_SEED);
    let mut big_out = vec![0.0; shape.output_len(5).unwrap()];
    let e = b.forward(&big, 5, &mut big_out).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    // Batch 0 is valid and writes nothing.
    b.forward(&[], 0, &mut []).expect("batch 0");
    // Weights of another shape.
    let other = stack(&StackShape {
        features: 40,
        ..shape
    });
    let e = b
        .prepare(
            &other.weights().unwrap(),
            &BackendConfig {
                shape,
                max_batch: 1,
                math: MathMode::Fp32,
            },
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    // A batch whose buffers exceed the device's free memory: refused before allocating, with
    // the figures and the largest batch that fits (which then prepares).
    let huge = 1usize << 24; // 16.8 M windows of 8 frames: ~470 GiB
    let e = b
        .prepare(
            &st.weights().unwrap(),
            &BackendConfig {
                shape,
                max_batch: huge,
                math: MathMode::Fp32,
            },
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let CudaError::Core(bilstm_core::CoreError::DeviceMemory {
        max_batch, fits, ..
    }) = e
    else {
        panic!("not a device-memory refusal: {e}");
    };
    assert_eq!(max_batch, huge);
    assert!(fits > 0 && fits < huge, "{e}");
    assert!(e.to_string().contains("MiB"), "{e}");
    let fits_now = b.max_batch_fitting(&shape, huge).expect("free memory");
    eprintln!("{e}; max_batch_fitting: {fits_now}");
    assert!(fits_now >= fits / 2, "{fits_now} vs {fits}");
    // The refusal released nothing: the earlier preparation (batch 4) still runs.
    let _ = run(&mut b, &shape, &input, 1);
    // The backend still works after refusals.
    let _ = run(&mut prepared(&st, 1), &shape, &input, 1);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_lost_partner_ends_with_partner_lost_not_a_hang() {
    let shape = StackShape::pyannote().with_frames(64);
    let st = stack(&shape);
    let batch = 20;
    let input = random_input(&shape, batch, INPUT_SEED);
    // The cooperative kernels spin on partners, the cluster kernel's CTAs wait for each other;
    // the resident one has no partner. A cluster stall names a CTA of the layer's one launch:
    // with 4-CTA clusters, CTA b runs cluster b / 4, whose direction is (b / 4) % 2.
    let coop_stalls = [
        (1, Direction::Reverse, 3),
        (0, Direction::Forward, 17),
        (3, Direction::Forward, 0),
    ];
    let cluster_stalls = [
        (1, Direction::Reverse, 5),
        (0, Direction::Forward, 17),
        (3, Direction::Forward, 0),
    ];
    for (kind, kernel, stalls) in [
        (RecurrenceKind::Wide, "bilstm_recurrence_wide", coop_stalls),
        (
            RecurrenceKind::Tiled,
            "bilstm_recurrence_tiled",
            coop_stalls,
        ),
        (
            RecurrenceKind::Cluster,
            "bilstm_recurrence_cluster4",
            cluster_stalls,
        ),
    ] {
        let mut b = prepared_kind(&st, batch, kind);
        if kind == RecurrenceKind::Cluster {
            b.set_overrides(Overrides {
                recurrence: Some(kind),
                cluster_size: Some(4),
                ..Overrides::default()
            })
            .expect("forcing 4-CTA clusters");
        }
        stalls_end_in_partner_lost(&mut b, &shape, &input, &stalls, kernel);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn special_values_stay_in_their_window_and_never_hang() {
    let shape = StackShape::pyannote().with_frames(32);
    let st = stack(&shape);
    let batch = 10;
    let clean_input = random_input(&shape, batch, INPUT_SEED);
    let mut b = prepared(&st, batch);
    let clean = run(&mut b, &shape, &clean_input, batch);
    let in_w = shape.frames * shape.features;
    let out_w = shape.frames * shape.output_width();
    let mut input = clean_input.clone();
    input[2 * in_w + 5] = f32::NAN; // window 2
    input[4 * in_w + 7] = f32::INFINITY; // window 4
    input[6 * in_w + 9] = -1e30; // window 6: far beyond the exp clamp
    input[8 * in_w + 11] = f32::from_bits(1); // window 8: a subnormal
    let got = run(&mut b, &shape, &input, batch);
    for w in 0..batch {
        let window = &got[w * out_w..(w + 1) * out_w];
        match w {
            2 => assert!(
                window.iter().any(|v| v.is_nan()),
                "NaN input gives NaN output in its window"
            ),
            4 | 6 => assert!(
                window.iter().all(|v| v.is_finite() && v.abs() <= 1.0),
                "window {w}: saturates, stays finite"
            ),
            _ => assert!(window.iter().all(|v| v.is_finite()), "window {w}"),
        }
        if ![2, 4, 6, 8].contains(&w) {
            assert_same_bits(
                &clean[w * out_w..(w + 1) * out_w],
                window,
                &format!("window {w} untouched"),
            );
        }
    }
}

/// The window-tile cluster kernels (2-CTA clusters of 8 and 16 windows, forced) wait for their
/// partner with the same bound: a CTA that never publishes ends the forward with `PartnerLost`
/// naming the kernel, the layer and the direction, and the backend works again afterwards.
/// CTA `b` runs cluster `b / 2`, whose direction is `(b / 2) % 2`; the CTAs named exist with
/// both tiles (batch 20: 6 and 4 clusters).
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_lost_partner_of_a_window_tile_cluster_ends_with_partner_lost() {
    let shape = StackShape::pyannote().with_frames(64);
    let st = stack(&shape);
    let batch = 20;
    let input = random_input(&shape, batch, INPUT_SEED);
    let stalls = [
        (1, Direction::Reverse, 3),
        (0, Direction::Forward, 4),
        (3, Direction::Forward, 1),
    ];
    for (windows, kernel) in [
        (8, "bilstm_recurrence_cluster2w8"),
        (16, "bilstm_recurrence_cluster2w16"),
    ] {
        let mut b = prepared_kind(&st, batch, RecurrenceKind::Cluster);
        b.set_overrides(Overrides {
            recurrence: Some(RecurrenceKind::Cluster),
            cluster_size: Some(2),
            cluster_windows: Some(windows),
            ..Overrides::default()
        })
        .expect("forcing a window tile");
        stalls_end_in_partner_lost(&mut b, &shape, &input, &stalls, kernel);
    }
}
