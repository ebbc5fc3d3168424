//! GPU: `CudaBackend::forward_foreign` on buffers the caller owns (as PyTorch tensors are handed
//! over): the output and final states of `forward_with_state`, bit for bit, ordered after the
//! caller's stream; host addresses, short buffers and overlapping input/output refused with
//! `CudaError::Foreign` before any work.

// Test helpers: a failed expectation is a failed test.
#![allow(clippy::expect_used, clippy::panic)]

mod gpu_support;

use bilstm_core::owned::random_input;
use bilstm_core::{Backend, BackendError, ErrorKind, StackShape};
use bilstm_cuda::{CudaError, ForeignBuffers};
use cudarc::driver::{CudaSlice, DevicePtr};
use gpu_support::{INPUT_SEED, assert_same_bits, prepared, stack};

fn addr(slice: &CudaSlice<f32>, stream: &cudarc::driver::CudaStream) -> u64 {
    let (ptr, _guard) = slice.device_ptr(stream);
    ptr
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn foreign_buffers_get_the_bits_of_a_host_forward() {
    let shape = StackShape::pyannote().with_frames(96);
    let st = stack(&shape);
    let batch = 5;
    let input = random_input(&shape, batch, INPUT_SEED);
    let mut gpu = prepared(&st, 8);
    let mut want = vec![0.0f32; shape.output_len(batch).expect("output")];
    let n = shape.state_len(batch).expect("state");
    let (mut h_want, mut c_want) = (vec![0.0f32; n], vec![0.0f32; n]);
    gpu.forward_with_state(&input, batch, &mut want, &mut h_want, &mut c_want)
        .expect("host forward");

    // The caller's own stream and buffers.
    let theirs = gpu.context().new_stream().expect("a stream");
    let d_in = theirs.clone_htod(&input).expect("upload");
    let d_out = theirs.alloc_zeros::<f32>(want.len()).expect("alloc");
    let d_h = theirs.alloc_zeros::<f32>(n).expect("alloc");
    let d_c = theirs.alloc_zeros::<f32>(n).expect("alloc");
    let bufs = ForeignBuffers {
        input: addr(&d_in, &theirs),
        output: addr(&d_out, &theirs),
        h_n: addr(&d_h, &theirs),
        c_n: addr(&d_c, &theirs),
    };
    // SAFETY: `theirs` is a live stream of the backend's context, and the four buffers stay
    // allocated (and untouched by anyone else) until the call returns.
    unsafe { gpu.forward_foreign(&bufs, batch, theirs.cu_stream() as usize as u64) }
        .expect("foreign forward");
    let got = theirs.clone_dtoh(&d_out).expect("download");
    assert_same_bits(&want, &got, "foreign output vs host forward");
    assert_same_bits(&h_want, &theirs.clone_dtoh(&d_h).expect("h"), "h_n");
    assert_same_bits(&c_want, &theirs.clone_dtoh(&d_c).expect("c"), "c_n");
    eprintln!(
        "foreign forward of batch {batch}: output, h_n and c_n equal the host forward's bits"
    );

    // Without final states.
    let d_out2 = theirs.alloc_zeros::<f32>(want.len()).expect("alloc");
    let bufs2 = ForeignBuffers {
        output: addr(&d_out2, &theirs),
        h_n: 0,
        c_n: 0,
        ..bufs
    };
    // SAFETY: as above.
    unsafe { gpu.forward_foreign(&bufs2, batch, theirs.cu_stream() as usize as u64) }
        .expect("foreign forward without states");
    assert_same_bits(
        &want,
        &theirs.clone_dtoh(&d_out2).expect("download"),
        "no states",
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_foreign_buffers_are_refused() {
    let shape = StackShape::pyannote().with_frames(16);
    let st = stack(&shape);
    let batch = 2;
    let mut gpu = prepared(&st, 2);
    let theirs = gpu.context().new_stream().expect("a stream");
    let input = random_input(&shape, batch, INPUT_SEED);
    let d_in = theirs.clone_htod(&input).expect("upload");
    let out_len = shape.output_len(batch).expect("output");
    let d_out = theirs.alloc_zeros::<f32>(out_len).expect("alloc");
    let short = theirs.alloc_zeros::<f32>(out_len - 1).expect("alloc");
    let host = vec![0.0f32; out_len];
    let good = ForeignBuffers {
        input: addr(&d_in, &theirs),
        output: addr(&d_out, &theirs),
        h_n: 0,
        c_n: 0,
    };
    let stream = theirs.cu_stream() as usize as u64;
    let cases = [
        (
            "host output",
            ForeignBuffers {
                output: host.as_ptr() as u64,
                ..good
            },
            "output",
        ),
        (
            "short output",
            ForeignBuffers {
                output: addr(&short, &theirs),
                ..good
            },
            "output",
        ),
        (
            "output = input",
            ForeignBuffers {
                output: good.input,
                ..good
            },
            "output",
        ),
        (
            "h_n without c_n",
            ForeignBuffers {
                h_n: good.output,
                ..good
            },
            "h_n / c_n",
        ),
    ];
    for (name, bufs, want_what) in cases {
        // SAFETY: `theirs` is live; every device buffer named is allocated until the end of the
        // test (the refused ones are never touched).
        let e = unsafe { gpu.forward_foreign(&bufs, batch, stream) }.expect_err(name);
        eprintln!("{name}: {e}");
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{name}: {e}");
        match e {
            CudaError::Foreign { what, .. } => assert_eq!(what, want_what, "{name}"),
            other => panic!("{name}: expected Foreign, got {other}"),
        }
    }
    // The backend still works.
    // SAFETY: as above.
    unsafe { gpu.forward_foreign(&good, batch, stream) }.expect("a good call after refusals");
}

/// TF32 mode on 9.0 with the 8-window quads forced: layer 0's projection runs the resident
/// kernel, whose tensor map needs a 16-byte aligned input. A caller's input 4 bytes past such an
/// address (allowed: 4-byte alignment) takes the streaming projection instead, with the same
/// bits and no error.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_foreign_input_off_16_byte_alignment_keeps_its_bits_in_tf32() {
    let shape = StackShape::pyannote().with_frames(17);
    let st = stack(&shape);
    let batch = 8;
    let input = random_input(&shape, batch, INPUT_SEED);
    if gpu_support::no_resident_projection_here() {
        return;
    }
    let mut gpu = gpu_support::prepared_quads(&st, batch, 8);
    let out_len = shape.output_len(batch).expect("output");
    let theirs = gpu.context().new_stream().expect("a stream");
    let mut results = Vec::new();
    for offset in [0usize, 1] {
        let mut padded = vec![0.0f32; offset];
        padded.extend_from_slice(&input);
        let d_in = theirs.clone_htod(&padded).expect("upload");
        let d_out = theirs.alloc_zeros::<f32>(out_len).expect("alloc");
        let bufs = ForeignBuffers {
            input: addr(&d_in, &theirs) + 4 * offset as u64,
            output: addr(&d_out, &theirs),
            h_n: 0,
            c_n: 0,
        };
        // SAFETY: `theirs` is a live stream of the backend's context, and both buffers stay
        // allocated (and untouched by anyone else) until the call returns.
        unsafe { gpu.forward_foreign(&bufs, batch, theirs.cu_stream() as usize as u64) }
            .unwrap_or_else(|e| panic!("input {offset} floats in: {e}"));
        results.push(theirs.clone_dtoh(&d_out).expect("download"));
    }
    assert_same_bits(
        &results[0],
        &results[1],
        "TF32: an input 4 bytes off 16-byte alignment against an aligned one",
    );
    eprintln!("TF32 foreign input at +4 bytes: same bits as the aligned input");
}
