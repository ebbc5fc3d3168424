//! `bilstm run` on the CPU: output shape and bits equal the CPU backend's, `--batch` chunking
//! changes no bit, the random-input mode prints the output's checksum.

// Helpers outside #[test] fns fail the test on a bad result, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_support;

use bilstm::npy;
use bilstm::owned::{Checksum, OwnedStack, random_input};
use cli_support::{Run, bilstm, bits, cpu_output, write_input};

const FRAMES: usize = 7;

#[test]
fn run_round_trip_matches_the_cpu_backend_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    let shape = OwnedStack::builtin().shape.with_frames(FRAMES);
    let input = random_input(&shape, 3, 42);
    write_input(&x, 3, FRAMES, &input);

    let run = run_cpu(&["--input", path(&x), "--output", path(&y)]).ok();
    assert!(run.stdout.is_empty(), "stdout: {}", run.stdout);
    for want in [
        "backend: cpu",
        "model: built-in",
        "ran 3 windows x 7 frames",
        "wrote",
    ] {
        assert!(
            run.stderr.contains(want),
            "{want:?} missing:\n{}",
            run.stderr
        );
    }

    let out = npy::read_f32_3d(&y, 256).unwrap();
    assert_eq!(out.shape, [3, FRAMES, 256]);
    assert_eq!(bits(&out.data), bits(&cpu_output(&input, 3, FRAMES)));
}

#[test]
fn batch_chunks_give_the_bits_of_one_big_batch() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x.npy");
    let shape = OwnedStack::builtin().shape.with_frames(FRAMES);
    let input = random_input(&shape, 5, 3);
    write_input(&x, 5, FRAMES, &input);
    let mut outputs = Vec::new();
    for batch in [None, Some("2"), Some("5"), Some("9")] {
        let y = dir.path().join(format!("y{}.npy", batch.unwrap_or("all")));
        let mut args = vec!["--input", path(&x), "--output", path(&y)];
        if let Some(b) = batch {
            args.extend(["--batch", b]);
        }
        let run = run_cpu(&args).ok();
        if batch == Some("2") {
            assert!(
                run.stderr.contains("in 3 passes of up to 2 on cpu x"),
                "{}",
                run.stderr
            );
        }
        let out = npy::read_f32_3d(&y, 256).unwrap();
        assert_eq!(out.shape, [5, FRAMES, 256]);
        outputs.push(bits(&out.data));
    }
    for other in &outputs[1..] {
        assert!(
            other == &outputs[0],
            "a chunked run changed the output bits"
        );
    }
}

#[test]
fn run_without_input_prints_the_checksum_of_a_seeded_input() {
    let run = run_cpu(&["--batch", "2", "--frames", "7", "--seed", "9"]).ok();
    let shape = OwnedStack::builtin().shape.with_frames(FRAMES);
    let want = Checksum::of(&cpu_output(&random_input(&shape, 2, 9), 2, FRAMES));
    assert_eq!(run.stdout, format!("output [2, 7, 256]: {want}\n"));
    assert!(
        run.stderr
            .contains("seeded standard normal [2, 7, 60] (seed 9)"),
        "{}",
        run.stderr
    );
}

#[test]
fn empty_input_gives_an_empty_output() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    write_input(&x, 0, FRAMES, &[]);
    run_cpu(&["--input", path(&x), "--output", path(&y)]).ok();
    assert_eq!(npy::read_f32_3d(&y, 256).unwrap().shape, [0, FRAMES, 256]);
}

/// `bilstm run --backend cpu` followed by `args`.
fn run_cpu(args: &[&str]) -> Run {
    let all: Vec<&str> = ["run", "--backend", "cpu"]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    bilstm(&all)
}

/// A test path as a command-line argument (temporary paths are UTF-8).
fn path(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// The built-in model as a PyTorch state dict in safetensors (`lstm.weight_ih_l0`, ...).
fn builtin_safetensors() -> Vec<u8> {
    let model = OwnedStack::builtin();
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for (k, layer) in model.layers.iter().enumerate() {
        for (suffix, d) in [("", &layer.forward), ("_reverse", &layer.reverse)] {
            let width = model.shape.layer_input_width(k);
            for (name, values, shape) in [
                ("weight_ih", &d.weight_ih, vec![512, width]),
                ("weight_hh", &d.weight_hh, vec![512, 128]),
                ("bias_ih", &d.bias_ih, vec![512]),
                ("bias_hh", &d.bias_hh, vec![512]),
            ] {
                tensors.push((
                    format!("lstm.{name}_l{k}{suffix}"),
                    shape,
                    cli_support::f32_le(values),
                ));
            }
        }
    }
    let views = tensors.iter().map(|(name, shape, bytes)| {
        let view =
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes)
                .unwrap();
        (name.clone(), view)
    });
    safetensors::serialize(views, None).unwrap()
}

#[test]
fn a_model_file_runs_and_a_truncated_one_fails() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("builtin.safetensors");
    let bytes = builtin_safetensors();
    std::fs::write(&model, &bytes).unwrap();
    let run = run_cpu(&["--model", path(&model), "--frames", "7"]).ok();
    // The same weights as the built-in model: the same checksum.
    let shape = OwnedStack::builtin().shape.with_frames(FRAMES);
    let want = Checksum::of(&cpu_output(&random_input(&shape, 1, 1), 1, FRAMES));
    assert_eq!(run.stdout, format!("output [1, 7, 256]: {want}\n"));
    assert!(run.stderr.contains("model: "), "{}", run.stderr);

    std::fs::write(&model, &bytes[..bytes.len() / 2]).unwrap();
    run_cpu(&["--model", path(&model)]).fails(1, &[path(&model)]);
}

/// A file without `--batch` runs `FILE_CHUNK_WINDOWS` (128) windows a pass, streaming the
/// output to the file chunk by chunk: the bits of one big pass, and the file whole.
#[test]
fn files_stream_in_chunks_of_128_windows_with_the_bits_of_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x.npy");
    let frames = 2;
    let windows = 300;
    let shape = OwnedStack::builtin().shape.with_frames(frames);
    let input = random_input(&shape, windows, 8);
    write_input(&x, windows, frames, &input);
    let streamed = dir.path().join("streamed.npy");
    let run = run_cpu(&["--input", path(&x), "--output", path(&streamed)]).ok();
    assert!(
        run.stderr.contains("in 3 passes of up to 128 on cpu"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("windows/s end to end"),
        "{}",
        run.stderr
    );
    let one = dir.path().join("one.npy");
    run_cpu(&[
        "--input",
        path(&x),
        "--output",
        path(&one),
        "--batch",
        "300",
    ])
    .ok();
    let (a, b) = (
        npy::read_f32_3d(&streamed, 256).unwrap(),
        npy::read_f32_3d(&one, 256).unwrap(),
    );
    assert_eq!(a.shape, [windows, frames, 256]);
    assert_eq!(bits(&a.data), bits(&b.data));
    assert_eq!(bits(&a.data), bits(&cpu_output(&input, windows, frames)));
}
