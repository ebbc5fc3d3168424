//! Every bad input ends in one `error: ...` line and a non-zero exit: 1 for a failed run, 2
//! for a command line clap refuses. Never a panic, never a hang.

// Helpers outside #[test] fns fail the test on a bad result, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_support;

use std::path::{Path, PathBuf};

use cli_support::{bilstm, f32_le, gpu_present, npy_bytes};

/// Writes `bytes` to `name` in `dir` and returns the path as a string.
fn file(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path: PathBuf = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_string()
}

/// `bilstm run --backend cpu --input X --output <dir>/y.npy`.
fn run_input(dir: &Path, input: &str) -> cli_support::Run {
    let y = dir.join("y.npy");
    let run = bilstm(&[
        "run",
        "--backend",
        "cpu",
        "--input",
        input,
        "--output",
        y.to_str().unwrap(),
    ]);
    assert!(!y.exists(), "no output is written for a bad input");
    run
}

#[test]
fn f64_input_names_its_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let x = file(
        dir.path(),
        "x.npy",
        &npy_bytes("<f8", false, "(1, 7, 60)", &[0; 7 * 60 * 8]),
    );
    run_input(dir.path(), &x).fails(1, &[&x, "dtype '<f8'", "'<f4'"]);
}

#[test]
fn big_endian_and_integer_inputs_name_their_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let data = [0u8; 7 * 60 * 4];
    let x = file(
        dir.path(),
        "be.npy",
        &npy_bytes(">f4", false, "(1, 7, 60)", &data),
    );
    run_input(dir.path(), &x).fails(1, &["dtype '>f4'"]);
    let x = file(
        dir.path(),
        "i4.npy",
        &npy_bytes("<i4", false, "(1, 7, 60)", &data),
    );
    run_input(dir.path(), &x).fails(1, &["dtype '<i4'"]);
}

#[test]
fn rank_2_input_names_its_shape() {
    let dir = tempfile::tempdir().unwrap();
    let x = file(
        dir.path(),
        "x.npy",
        &npy_bytes("<f4", false, "(7, 60)", &f32_le(&[0.0; 420])),
    );
    run_input(dir.path(), &x).fails(1, &["shape [7, 60]", "rank 2", "expected rank 3"]);
}

#[test]
fn width_59_input_names_its_shape_and_the_model_width() {
    let dir = tempfile::tempdir().unwrap();
    let x = file(
        dir.path(),
        "x.npy",
        &npy_bytes("<f4", false, "(2, 7, 59)", &f32_le(&[0.0; 2 * 7 * 59])),
    );
    run_input(dir.path(), &x).fails(1, &["shape [2, 7, 59]", "59 values per frame", "takes 60"]);
}

#[test]
fn fortran_order_truncated_and_frameless_inputs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = f32_le(&[0.0; 7 * 60]);
    let x = file(
        dir.path(),
        "f.npy",
        &npy_bytes("<f4", true, "(1, 7, 60)", &data),
    );
    run_input(dir.path(), &x).fails(1, &["Fortran order"]);
    let x = file(
        dir.path(),
        "t.npy",
        &npy_bytes("<f4", false, "(1, 7, 60)", &data[..100]),
    );
    run_input(dir.path(), &x).fails(1, &["truncated", "1680 data bytes", "holds 100"]);
    let x = file(
        dir.path(),
        "z.npy",
        &npy_bytes("<f4", false, "(2, 0, 60)", &[]),
    );
    run_input(dir.path(), &x).fails(1, &["no frames"]);
    let x = file(dir.path(), "g.npy", b"this is not numpy");
    run_input(dir.path(), &x).fails(1, &[&x, "not a valid .npy file"]);
}

#[test]
fn missing_input_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("missing.npy");
    run_input(dir.path(), x.to_str().unwrap()).fails(1, &["cannot read", x.to_str().unwrap()]);
}

#[test]
fn unwritable_output_names_the_path() {
    let run = bilstm(&[
        "run",
        "--backend",
        "cpu",
        "--frames",
        "2",
        "--output",
        "/nonexistent-dir/y.npy",
    ]);
    run.fails(1, &["cannot write", "/nonexistent-dir/y.npy"]);
}

#[test]
fn garbage_and_missing_model_files_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let x = file(
        dir.path(),
        "x.npy",
        &npy_bytes("<f4", false, "(1, 2, 60)", &f32_le(&[0.0; 120])),
    );
    for (name, bytes, want) in [
        (
            "garbage.onnx",
            &b"\xff\xfe not a protobuf \x00\x01\x02"[..],
            "not a valid ONNX model",
        ),
        (
            "garbage.safetensors",
            &b"\x10\x00\x00\x00\x00\x00\x00\x00{not json"[..],
            "not a valid safetensors file",
        ),
        ("garbage.bin", &b"hello"[..], "unknown model format"),
    ] {
        let model = file(dir.path(), name, bytes);
        let run = bilstm(&["run", "--backend", "cpu", "--model", &model, "--input", &x]);
        run.fails(1, &[&model, want]);
    }
    let missing = dir.path().join("missing.onnx");
    let missing = missing.to_str().unwrap();
    let run = bilstm(&["run", "--backend", "cpu", "--model", missing]);
    run.fails(1, &["cannot read", missing]);
}

#[test]
fn cuda_without_a_gpu_says_why() {
    for command in [
        &["run", "--backend", "cuda", "--frames", "2"][..],
        &[
            "bench",
            "--backend",
            "cuda",
            "--batches",
            "1",
            "--frames",
            "2",
            "--iters",
            "1",
        ][..],
    ] {
        let run = bilstm(command);
        if gpu_present() {
            assert_eq!(run.code, Some(0), "{}", run.stderr);
        } else {
            run.fails(1, &["CUDA"]);
        }
    }
}

#[test]
fn usage_errors_exit_2() {
    bilstm(&["run", "--batch", "0"]).fails(2, &["--batch", "at least 1"]);
    bilstm(&["bench", "--batches", "1,0"]).fails(2, &["--batches"]);
    bilstm(&["run", "--frames", "0"]).fails(2, &["--frames"]);
    bilstm(&["run", "--input", "x.npy", "--frames", "7"]).fails(2, &["--frames"]);
    bilstm(&["run", "--backend", "gpu"]).fails(2, &["gpu"]);
    bilstm(&["plan", "--math", "fp16"]).fails(2, &["fp16"]);
    bilstm(&["frobnicate"]).fails(2, &["frobnicate"]);
}
