//! `bilstm plan` and `bilstm devices` against core's plan selection and device table.

// Helpers outside #[test] fns fail the test on a bad result, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_support;

use bilstm::core::device::table;
use bilstm::core::plan::{self, KernelResources};
use bilstm::{MathMode, StackShape};
use cli_support::{bilstm, bilstm_env, gpu_present};

/// The plan core selects for a table entry with the nominal resources the CLI uses.
fn core_plan(name: &str, batch: usize, math: MathMode) -> plan::Plan {
    let entry = table::find(name).unwrap();
    plan::select(
        &entry.facts,
        &KernelResources::nominal(),
        &StackShape::pyannote(),
        batch,
        math,
    )
    .unwrap()
}

/// The stdout line of device `name`'s row.
fn row<'a>(stdout: &'a str, name: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row for {name}:\n{stdout}"))
}

#[test]
fn plan_for_h200_shows_what_core_selects() {
    let run = bilstm(&["plan", "--device", "h200", "--batch", "32"]).ok();
    let p = core_plan("h200", 32, MathMode::Fp32);
    let line = row(&run.stdout, "h200");
    assert!(line.contains(&p.recurrence.choice.to_string()), "{line}");
    assert!(line.contains(&p.projection.choice.to_string()), "{line}");
    assert!(line.contains(" 9.0 ") && line.contains(" 132 "), "{line}");
    assert!(
        run.stdout.contains("batch 32, 589 frames, fp32"),
        "{}",
        run.stdout
    );
    // One table row, no reasons without --explain.
    assert!(!run.stdout.contains("recurrence: "), "{}", run.stdout);
    assert!(run.stdout.lines().all(|l| !l.starts_with("a100")));
}

#[test]
fn explain_prints_one_line_per_decision() {
    let run = bilstm(&[
        "plan",
        "--device",
        "H200",
        "--batch",
        "32",
        "--explain",
        "--math",
        "tf32",
    ])
    .ok();
    let p = core_plan("h200", 32, MathMode::Tf32);
    let explain: Vec<String> = p.explain().iter().map(|l| format!("    {l}")).collect();
    let lines: Vec<&str> = run.stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("h200"))
        .expect("the h200 row");
    assert_eq!(&lines[at + 1..], explain.as_slice(), "{}", run.stdout);
}

#[test]
fn plan_for_all_lists_every_table_entry() {
    let run = bilstm(&["plan", "--device", "all", "--batch", "9", "--frames", "100"]).ok();
    let shape = StackShape::pyannote().with_frames(100);
    for entry in table::all() {
        let line = row(&run.stdout, entry.name);
        match plan::select(
            &entry.facts,
            &KernelResources::nominal(),
            &shape,
            9,
            MathMode::Fp32,
        ) {
            Ok(p) => assert!(line.contains(&p.recurrence.choice.to_string()), "{line}"),
            Err(_) => assert!(line.contains("no plan"), "{line}"),
        }
    }
}

#[test]
fn unknown_device_is_a_usage_error_listing_the_names() {
    let run = bilstm(&["plan", "--device", "h300"]);
    let e = run.fails(
        2,
        &["h300", "unknown device", "h200", "a100", "rtx4090", "all"],
    );
    assert!(e.contains("--device"), "{e}");
}

#[test]
fn plan_without_a_gpu_shows_the_table_and_says_why() {
    if gpu_present() {
        return; // the local GPU's plan is shown instead (covered on the GPU machine)
    }
    let run = bilstm(&["plan", "--batch", "2"]).ok();
    assert!(
        run.stderr.contains("no usable GPU (") && run.stderr.contains("showing the device table"),
        "{}",
        run.stderr
    );
    for entry in table::all() {
        row(&run.stdout, entry.name);
    }
    // Asked for explicitly, a missing local GPU is an error.
    bilstm(&["plan", "--device", "local"]).fails(1, &["CUDA"]);
}

#[test]
fn devices_lists_the_table_names() {
    let run = bilstm(&["devices"]).ok();
    assert!(run.stdout.starts_with("local GPUs:"), "{}", run.stdout);
    for entry in table::all() {
        let line = row(
            run.stdout.split("device table").nth(1).unwrap_or(""),
            entry.name,
        );
        assert!(line.contains(entry.product), "{line}");
    }
    // The CPU backend's line: the detected instruction set, or the one the environment caps.
    let best = bilstm::Isa::detect().to_string();
    assert!(
        run.stdout
            .contains(&format!("CPU backend: 2 thread(s), {best} ("))
            || run
                .stdout
                .contains(&format!("CPU backend: 1 thread(s), {best} (")),
        "{}",
        run.stdout
    );
    let capped = bilstm_env(
        &["devices"],
        &[("BILSTM_CPU_ISA", "portable"), ("BILSTM_CPU_THREADS", "1")],
    )
    .ok();
    assert!(
        capped
            .stdout
            .contains("CPU backend: 1 thread(s), portable (available: portable"),
        "{}",
        capped.stdout
    );
    // A value the CPU backend does not understand is ignored, and said so on stderr.
    let odd = bilstm_env(&["devices"], &[("BILSTM_CPU_ISA", "sse9")]).ok();
    assert!(
        odd.stderr.contains(
            "bilstm: BILSTM_CPU_ISA=\"sse9\" is not portable, avx2, avx512vl or avx512; ignored"
        ),
        "{}",
        odd.stderr
    );
    assert!(
        odd.stdout.contains(&format!(", {best} (")),
        "{}",
        odd.stdout
    );
}

#[test]
fn explain_says_why_cluster_and_recurrence_can_be_forced() {
    let run = bilstm(&["plan", "--device", "h200", "--batch", "32", "--explain"]).ok();
    assert!(
        run.stdout
            .contains("    recurrence: cluster: 2-CTA clusters, 64 clusters"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("(estimate, an upper bound)"),
        "{}",
        run.stdout
    );
    let run = bilstm(&[
        "plan",
        "--device",
        "all",
        "--batch",
        "32",
        "--recurrence",
        "cluster4",
        "--explain",
    ])
    .ok();
    assert!(
        row(&run.stdout, "h200").contains("4-CTA clusters x64"),
        "{}",
        run.stdout
    );
    assert!(
        row(&run.stdout, "a100").contains("no plan"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("recurrence: cluster: 4-CTA clusters forced by override"),
        "{}",
        run.stdout
    );
    bilstm(&["plan", "--device", "h200", "--recurrence", "cluster8"])
        .fails(2, &["unknown recurrence", "cluster4"]);
}
