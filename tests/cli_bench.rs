//! `bilstm bench --json` prints only JSON lines with the promised keys.

// Helpers outside #[test] fns fail the test on a bad result, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_support;

use cli_support::bilstm;

const KEYS: [&str; 7] = [
    "backend",
    "kernel",
    "math",
    "batch",
    "frames",
    "ms",
    "windows_per_s",
];

/// `bilstm bench --backend cpu --batches 1 --frames 7 --iters 2 --json` plus `extra`: the run
/// and its only stdout line, parsed (the test fails unless there is exactly one).
fn one_cpu_json_line(extra: &[&str]) -> (cli_support::Run, serde_json::Value) {
    let mut args = vec![
        "bench",
        "--backend",
        "cpu",
        "--batches",
        "1",
        "--frames",
        "7",
        "--iters",
        "2",
        "--json",
    ];
    args.extend_from_slice(extra);
    let run = bilstm(&args).ok();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", run.stdout);
    let v = serde_json::from_str(lines[0]).unwrap();
    (run, v)
}

#[test]
fn json_lines_only_on_stdout() {
    let (run, v) = one_cpu_json_line(&[]);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let obj = v.as_object().expect("a JSON object");
    for key in KEYS {
        assert!(obj.contains_key(key), "{key} missing from {}", lines[0]);
    }
    assert_eq!(v["backend"], "cpu");
    assert_eq!(v["math"], "fp32");
    assert_eq!(v["batch"], 1);
    assert_eq!(v["frames"], 7);
    assert!(
        v["kernel"].as_str().unwrap().starts_with("cpu x"),
        "{}",
        v["kernel"]
    );
    let ms = v["ms"].as_f64().unwrap();
    let rate = v["windows_per_s"].as_f64().unwrap();
    assert!(ms > 0.0 && rate > 0.0, "{}", lines[0]);
    assert!((rate * ms / 1e3 - 1.0).abs() < 1e-3, "{}", lines[0]);
    assert!(run.stderr.contains("backend: cpu"), "{}", run.stderr);
}

#[test]
fn one_line_per_batch_and_a_table_without_json() {
    let run = bilstm(&[
        "bench",
        "--backend",
        "cpu",
        "--batches",
        "2,1",
        "--frames",
        "3",
        "--iters",
        "1",
        "--warmup",
        "0",
        "--json",
    ])
    .ok();
    let batches: Vec<i64> = run
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["batch"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(batches, [2, 1]);

    let run = bilstm(&[
        "bench",
        "--backend",
        "cpu",
        "--batches",
        "1",
        "--frames",
        "3",
        "--iters",
        "1",
    ])
    .ok();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stdout);
    assert!(lines[0].contains("ms/forward") && lines[0].contains("windows/s"));
    assert!(lines[1].trim_start().starts_with("1  cpu"), "{}", lines[1]);
}

#[test]
fn phases_on_the_cpu_backend_is_a_note_and_changes_nothing() {
    let (run, v) = one_cpu_json_line(&["--phases"]);
    assert!(v.get("phases").is_none(), "{}", run.stdout);
    assert!(
        run.stderr
            .contains("per-phase timing needs the CUDA backend"),
        "{}",
        run.stderr
    );
}
