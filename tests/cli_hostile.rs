//! The command line under hostile options and paths (issue 12): absurd sizes exit 1 or 2 with
//! one line (never 101 or a signal), outputs are validated before any work and never replace
//! the input, special files are refused without blocking.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_support;

use std::time::{Duration, Instant};

use bilstm_test_support::{f32_bytes, npy_bytes};
use cli_support::bilstm;

#[test]
fn absurd_sizes_exit_with_one_line() {
    let huge = "18446744073709551615";
    let r = bilstm(&["run", "--backend", "cpu", "--frames", huge]);
    r.fails(1, &["random input", "--frames"]);
    let r = bilstm(&["run", "--backend", "cpu", "--batch", huge, "--frames", "2"]);
    r.fails(1, &["random input"]);
    let r = bilstm(&[
        "run",
        "--backend",
        "cpu",
        "--batch",
        "100000000",
        "--frames",
        "589",
    ]);
    r.fails(1, &["more than 8589934592 bytes"]);
    let r = bilstm(&[
        "bench",
        "--backend",
        "cpu",
        "--iters",
        huge,
        "--frames",
        "2",
    ]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("at most 1000000"), "{}", r.stderr);
    let r = bilstm(&[
        "bench",
        "--backend",
        "cpu",
        "--batches",
        huge,
        "--frames",
        "2",
    ]);
    r.fails(1, &["random input"]);
    let r = bilstm(&["bench", "--backend", "cpu", "--frames", huge]);
    r.fails(1, &["random input"]);
}

#[test]
fn zero_windows_of_many_frames_allocate_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x.npy");
    std::fs::write(&x, npy_bytes("<f4", false, "(0, 1000000000000, 60)", &[])).unwrap();
    let started = Instant::now();
    let r = bilstm(&["run", "--backend", "cpu", "--input", x.to_str().unwrap()]).ok();
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(
        r.stdout.contains("output [0, 1000000000000, 256]: n=0"),
        "{}",
        r.stdout
    );
}

#[test]
fn outputs_are_checked_before_computing_and_never_replace_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x.npy");
    let bytes = npy_bytes("<f4", false, "(1, 3, 60)", &f32_bytes(&[0.25; 180]));
    std::fs::write(&x, &bytes).unwrap();
    let xs = x.to_str().unwrap();
    // --output equal to --input, also by another spelling of the path.
    let other = format!("{}/./x.npy", dir.path().display());
    for out in [xs, other.as_str()] {
        let r = bilstm(&["run", "--backend", "cpu", "--input", xs, "--output", out]);
        r.fails(1, &["same file as --input"]);
        assert_eq!(std::fs::read(&x).unwrap(), bytes, "the input was touched");
    }
    // /dev/stdout and /dev/null are not regular files: refused before any work.
    for dev in ["/dev/stdout", "/dev/null"] {
        let r = bilstm(&["run", "--backend", "cpu", "--frames", "2", "--output", dev]);
        r.fails(1, &[dev, "not a regular file"]);
    }
    // A missing directory fails before the model is even loaded (the model is missing too:
    // the output is what is reported).
    let r = bilstm(&[
        "run",
        "--model",
        "/nonexistent/m.onnx",
        "--output",
        "/nonexistent/dir/y.npy",
    ]);
    r.fails(1, &["/nonexistent/dir/y.npy"]);
    // A good run replaces the old output whole and leaves no temporary file.
    let y = dir.path().join("y.npy");
    std::fs::write(&y, b"old").unwrap();
    bilstm(&[
        "run",
        "--backend",
        "cpu",
        "--input",
        xs,
        "--output",
        y.to_str().unwrap(),
    ])
    .ok();
    let back = bilstm::npy::read_f32_3d(&y, 256).unwrap();
    assert_eq!(back.shape, [1, 3, 256]);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

#[cfg(unix)]
#[test]
fn special_input_and_model_files_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("f.npy");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    let started = Instant::now();
    let r = bilstm(&["run", "--backend", "cpu", "--input", "/dev/zero"]);
    r.fails(1, &["/dev/zero", "character device"]);
    let r = bilstm(&["run", "--backend", "cpu", "--model", "/dev/zero"]);
    r.fails(1, &["/dev/zero", "character device"]);
    if made.is_ok_and(|s| s.success()) {
        let f = fifo.to_str().unwrap();
        bilstm(&["run", "--backend", "cpu", "--input", f]).fails(1, &["FIFO"]);
        bilstm(&["run", "--backend", "cpu", "--model", f]).fails(1, &["FIFO"]);
    }
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn escape_sequences_in_files_reach_no_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x.npy");
    std::fs::write(&x, npy_bytes("\x1b[2J\n", false, "(1, 3, 60)", &[0; 720])).unwrap();
    let r = bilstm(&["run", "--backend", "cpu", "--input", x.to_str().unwrap()]);
    let line = r.fails(1, &["dtype", "\\u{1b}"]);
    assert!(!r.stderr.contains('\x1b'), "{line:?}");
}
