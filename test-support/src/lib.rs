//! Test helpers shared by the workspace's tests (`bits`, `npy_bytes`, batches) and the generic
//! [`Backend`] contract suite, [`contract`], run for every backend: the CPU backend and `Auto`
//! in CI (`tests/backend_contract.rs` at the workspace root), CUDA on a GPU machine
//! (`tests/gpu_backend_contract.rs`, ignored without a GPU).
//!
//! Not published (`publish = false`): a dev-dependency only. The suite panics on a broken
//! contract, as tests do.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test-support crate: a failed check fails the calling test"
)]

use bilstm_core::owned::{OwnedStack, random_input};
use bilstm_core::{Backend, BackendConfig, BackendError, ErrorKind, MathMode, StackShape};

/// The bit patterns of `values`, for exact comparisons that treat NaNs and signed zeros as
/// the bits they are.
pub fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// Asserts, bit for bit, that the last layer's final hidden states in `h_n` (the `Backend`
/// state layout `[layers][2][batch][hidden]`) of `batch` windows of `shape` are the output `out`
/// at each window's last step: the last frame forward, frame 0 reverse. `what` names the run in
/// a failure.
pub fn assert_last_h_n_is_the_output(
    shape: &StackShape,
    batch: usize,
    out: &[f32],
    h_n: &[f32],
    what: &str,
) {
    let h = shape.hidden;
    let last = shape.layers - 1;
    for w in 0..batch {
        for d in 0..2 {
            let frame = if d == 0 { shape.frames - 1 } else { 0 };
            let row = (w * shape.frames + frame) * shape.output_width() + d * h;
            let at = ((2 * last + d) * batch + w) * h;
            assert_eq!(
                bits(&h_n[at..at + h]),
                bits(&out[row..row + h]),
                "{what}: h_n vs output, window {w} direction {d}"
            );
        }
    }
}

/// An `.npy` file (format 1.0, numpy's layout: magic, version, header padded to 64 bytes
/// ending in a newline, data) with the given dtype descriptor, order, shape text such as
/// `"(2, 3, 4)"`, and raw data bytes.
pub fn npy_bytes(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let dict = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
        if fortran { "True" } else { "False" }
    );
    let mut header = dict.into_bytes();
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(b' ');
    }
    header.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&u16::try_from(header.len()).unwrap().to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(data);
    out
}

/// Little-endian bytes of `values`.
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A seeded batch of `batch` standard-normal windows of `shape`.
pub fn batch_of(shape: &StackShape, batch: usize, seed: u64) -> Vec<f32> {
    random_input(shape, batch, seed)
}

/// Runs `batch` windows of `input` on a prepared backend and returns the output.
pub fn run<B: Backend>(backend: &mut B, input: &[f32], batch: usize) -> Vec<f32> {
    let shape = backend.config().expect("prepared").shape;
    let mut out = vec![0.0f32; shape.output_len(batch).unwrap()];
    backend
        .forward(input, batch, &mut out)
        .unwrap_or_else(|e| panic!("forward of {batch} windows: {e:?}"));
    out
}

fn config(shape: StackShape, max_batch: usize) -> BackendConfig {
    BackendConfig {
        shape,
        max_batch,
        math: MathMode::Fp32,
    }
}

fn expect_kind<T: core::fmt::Debug, E: BackendError + core::fmt::Debug>(
    what: &str,
    r: Result<T, E>,
    kind: ErrorKind,
) {
    match r {
        Err(e) => assert_eq!(e.kind(), kind, "{what}: {e:?}"),
        Ok(v) => panic!("{what}: accepted ({v:?}), expected an error of kind {kind:?}"),
    }
}

/// The [`Backend`] contract, checked on backends made by `make` (each check starts from a
/// fresh one):
///
/// - **errors**: forward before prepare, wrong input and output lengths and a batch above
///   `max_batch` are [`ErrorKind::InvalidInput`] and write nothing; non-finite weights are
///   refused at prepare;
/// - **lengths and batch limits**: `batch == 0` is valid and writes nothing; every batch up
///   to `max_batch` runs;
/// - **preparation order**: a second prepare replaces the first (a new shape and weights give
///   exactly what a fresh backend prepared for them gives); `config` reports the last one;
/// - **determinism**: the same input gives the same bits on every call, and a window's bits do
///   not depend on the batch it runs in nor on its position; no window reads another's data.
pub fn contract<B: Backend>(make: impl Fn() -> B)
where
    B::Error: core::fmt::Debug,
{
    let shape = StackShape::pyannote().with_frames(7);
    let model = OwnedStack::random(&shape, 0x5eed, 0.3);
    let weights = model.weights().unwrap();
    let (in_w, out_w) = (shape.input_len(1).unwrap(), shape.output_len(1).unwrap());

    // Errors before prepare.
    let mut b = make();
    assert!(b.config().is_none(), "config before prepare");
    let mut out = vec![0.0; out_w];
    expect_kind(
        "forward before prepare",
        b.forward(&batch_of(&shape, 1, 1), 1, &mut out),
        ErrorKind::InvalidInput,
    );

    // Prepare, then bad lengths and batches, each writing nothing.
    b.prepare(&weights, &config(shape, 3)).unwrap();
    assert_eq!(b.config(), Some(&config(shape, 3)));
    let x3 = batch_of(&shape, 3, 2);
    let sentinel = 12345.0f32;
    for (what, input_len, output_len, batch) in [
        ("short input", 3 * in_w - 1, 3 * out_w, 3),
        ("long input", 3 * in_w + 1, 3 * out_w, 3),
        ("short output", 3 * in_w, 3 * out_w - 1, 3),
        ("batch above max_batch", 4 * in_w, 4 * out_w, 4),
    ] {
        let input = vec![0.5f32; input_len];
        let mut output = vec![sentinel; output_len];
        expect_kind(
            what,
            b.forward(&input, batch, &mut output),
            ErrorKind::InvalidInput,
        );
        assert!(
            output.iter().all(|&v| v == sentinel),
            "{what}: output written"
        );
    }
    assert!(b.forward(&[], 0, &mut []).is_ok(), "batch 0");

    // Determinism and batch independence.
    let all = run(&mut b, &x3, 3);
    assert_eq!(
        bits(&run(&mut b, &x3, 3)),
        bits(&all),
        "a second call differs"
    );
    assert!(all.iter().all(|v| v.is_finite() && v.abs() <= 1.0));
    for k in 0..3 {
        let one = run(&mut b, &x3[k * in_w..(k + 1) * in_w], 1);
        assert_eq!(
            bits(&one),
            bits(&all[k * out_w..(k + 1) * out_w]),
            "window {k} alone differs from window {k} of a batch of 3"
        );
    }
    let mut swapped = x3[in_w..2 * in_w].to_vec();
    swapped.extend_from_slice(&x3[..in_w]);
    let two = run(&mut b, &swapped, 2);
    assert_eq!(
        bits(&two[..out_w]),
        bits(&all[out_w..2 * out_w]),
        "position matters"
    );
    // Windows never mix: a NaN in window 0 leaves window 1 alone.
    let mut poisoned = swapped.clone();
    poisoned[3] = f32::NAN;
    let got = run(&mut b, &poisoned, 2);
    assert_eq!(
        bits(&got[out_w..]),
        bits(&two[out_w..]),
        "a NaN crossed windows"
    );

    // Re-prepare with another shape and weights: as a fresh backend prepared for them.
    let shape2 = StackShape {
        layers: 2,
        ..StackShape::pyannote().with_frames(5)
    };
    let model2 = OwnedStack::random(&shape2, 0xbeef, 0.3);
    let w2 = model2.weights().unwrap();
    b.prepare(&w2, &config(shape2, 2)).unwrap();
    assert_eq!(b.config(), Some(&config(shape2, 2)));
    let x2 = batch_of(&shape2, 2, 3);
    let mut fresh = make();
    fresh.prepare(&w2, &config(shape2, 2)).unwrap();
    assert_eq!(bits(&run(&mut b, &x2, 2)), bits(&run(&mut fresh, &x2, 2)));
    expect_kind(
        "old shape after re-prepare",
        b.forward(&x3, 3, &mut vec![0.0; 3 * out_w]),
        ErrorKind::InvalidInput,
    );

    // Non-finite weights are refused at prepare.
    let mut bad = model.clone();
    bad.layers[0].forward.weight_hh[5] = f32::NAN;
    let mut b = make();
    if let Ok(w) = bad.weights() {
        assert!(
            b.prepare(&w, &config(shape, 1)).is_err(),
            "NaN weight accepted"
        );
    }
}
