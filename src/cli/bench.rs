//! `bilstm bench`: times forward passes of the built-in model at several batch sizes.

use std::io::Write;
use std::time::Instant;

use bilstm_core::owned::{OwnedStack, random_input};
use bilstm_core::{BackendConfig, MathMode, StackShape};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::engine::Selected;
use super::{BackendChoice, CliError, MathArg, positive};

/// Seed of the CPU timing input (the CUDA timing uses `bilstm_cuda::timing`'s, also 1).
const INPUT_SEED: u64 = 1;

/// `bilstm bench` options.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Backend: `auto` runs CUDA when a usable GPU is present, else the CPU.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// Batch sizes to time, comma-separated.
    #[arg(long, value_name = "N,N,...", value_delimiter = ',', default_value = "1,32", value_parser = positive)]
    pub batches: Vec<usize>,
    /// Frames per window.
    #[arg(long, value_name = "F", default_value_t = StackShape::pyannote().frames, value_parser = positive)]
    pub frames: usize,
    /// Arithmetic of the input projections.
    #[arg(long, value_enum, default_value_t = MathArg::Fp32)]
    pub math: MathArg,
    /// Timed passes per batch size (the median is reported).
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = passes)]
    pub iters: usize,
    /// Untimed passes before the timed ones, per batch size.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = warmups)]
    pub warmup: usize,
    /// One JSON object per line on stdout (keys backend, device, kernel, math, batch, frames,
    /// ms, min_ms, max_ms, iters, windows_per_s, and with --phases phases) and nothing else;
    /// notes stay on stderr.
    #[arg(long)]
    pub json: bool,
    /// Also time each layer's projection and recurrence (CUDA events, median of --iters
    /// separate passes): a table per batch after the usual output, or the key "phases" (a list
    /// of {"layer", "projection_ms", "recurrence_ms"}) in the JSON lines. CUDA backend only.
    #[arg(long)]
    pub phases: bool,
    /// Also time what a caller of the host API gets on the CUDA backend: `Backend::forward`
    /// with host slices (upload, pass, download), wall clock, median of --iters; a `host ms`
    /// column, or the key "host_ms" in the JSON lines. (On the CPU every figure is a host one.)
    #[arg(long)]
    pub host: bool,
}

/// One layer's phase times in ms (from `bilstm_cuda::phases` on the CUDA backend).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Phase {
    layer: usize,
    projection_ms: f64,
    recurrence_ms: f64,
}

/// The `"phases"` JSON value: one object per layer.
fn phases_json(phases: &[Phase]) -> serde_json::Value {
    serde_json::Value::Array(
        phases
            .iter()
            .map(|p| {
                serde_json::json!({
                    "layer": p.layer,
                    "projection_ms": round_to(p.projection_ms, 4),
                    "recurrence_ms": round_to(p.recurrence_ms, 4),
                })
            })
            .collect(),
    )
}

/// The per-layer table of one batch: projection, recurrence, their sum, then a total row.
fn phases_table(batch: usize, phases: &[Phase]) -> String {
    let mut out = format!(
        "batch {batch}: per-layer phases (device events, median ms)\n{:>6} {:>14} {:>14} {:>10}\n",
        "layer", "projection", "recurrence", "total"
    );
    let (mut proj, mut rec) = (0.0, 0.0);
    for p in phases {
        proj += p.projection_ms;
        rec += p.recurrence_ms;
        out.push_str(&format!(
            "{:>6} {:>14.4} {:>14.4} {:>10.4}\n",
            p.layer,
            p.projection_ms,
            p.recurrence_ms,
            p.projection_ms + p.recurrence_ms
        ));
    }
    out.push_str(&format!(
        "{:>6} {:>14.4} {:>14.4} {:>10.4}\n",
        "all",
        proj,
        rec,
        proj + rec
    ));
    out
}

/// One timed batch size.
struct Measurement {
    batch: usize,
    kernel: String,
    median_ms: f64,
    min_ms: f64,
    max_ms: f64,
    /// Per-layer phases (`--phases` on the CUDA backend).
    phases: Option<Vec<Phase>>,
    /// The host-slice forward's median, wall clock (`--host` on the CUDA backend).
    host_ms: Option<f64>,
}

impl Measurement {
    fn from_times(batch: usize, kernel: String, mut times_ms: Vec<f64>) -> Self {
        times_ms.sort_by(f64::total_cmp);
        let n = times_ms.len();
        let median_ms = match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => times_ms[n / 2],
            _ => 0.5 * (times_ms[n / 2 - 1] + times_ms[n / 2]),
        };
        Measurement {
            batch,
            kernel,
            median_ms,
            min_ms: times_ms.first().copied().unwrap_or(f64::NAN),
            max_ms: times_ms.last().copied().unwrap_or(f64::NAN),
            phases: None,
            host_ms: None,
        }
    }

    fn windows_per_s(&self) -> f64 {
        self.batch as f64 * 1e3 / self.median_ms
    }
}

/// `x` rounded to `decimals` decimal places, so JSON shows `2.1985` rather than float noise
/// (timer resolution is far coarser than 1e-4 ms).
fn round_to(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).round() / scale
}

/// The most passes `--iters` and `--warmup` take: a million (their timings are kept).
const MAX_PASSES: usize = 1_000_000;

/// Parses `--iters`: 1 to [`MAX_PASSES`].
fn passes(s: &str) -> Result<usize, String> {
    match positive(s)? {
        n if n <= MAX_PASSES => Ok(n),
        _ => Err(format!("at most {MAX_PASSES}")),
    }
}

/// Parses `--warmup`: 0 to [`MAX_PASSES`].
fn warmups(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n <= MAX_PASSES => Ok(n),
        Ok(_) => Err(format!("at most {MAX_PASSES}")),
        Err(e) => Err(format!("not a whole number ({e})")),
    }
}

/// Runs `bilstm bench`.
///
/// # Errors
/// A backend that cannot be opened or prepared (`--backend cuda` without a GPU), a failed
/// forward pass, a failed write to stdout.
pub(crate) fn bench(args: &BenchArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let model = OwnedStack::builtin();
    let shape = model.shape.with_frames(args.frames);
    let math = MathMode::from(args.math);
    let max_batch = args.batches.iter().copied().max().unwrap_or(1);
    super::run::check_random_size(&shape, max_batch)?;
    let mut backend = Selected::open(args.backend)?;
    backend.prepare(
        &model.weights()?,
        &BackendConfig {
            shape,
            max_batch,
            math,
        },
    )?;
    note!("backend: {}", backend.selection());
    note!(
        "built-in model, {} frames, {math}; median of {} passes after {} warm-up per batch",
        args.frames,
        args.iters,
        args.warmup
    );
    if args.phases && backend.name() != "cuda" {
        note!("--phases: per-phase timing needs the CUDA backend; no phases reported");
    }
    let mut tables = Vec::new();
    if !args.json {
        writeln!(
            out,
            "{:>6}  {:<7} {:<48} {:>11} {:>11}{}",
            "batch",
            "backend",
            "kernel",
            "ms/forward",
            "windows/s",
            if args.host { "     host ms" } else { "" }
        )?;
    }
    let per_batch = u64::try_from(args.warmup.saturating_add(args.iters)).unwrap_or(u64::MAX);
    let total = per_batch.saturating_mul(u64::try_from(args.batches.len()).unwrap_or(u64::MAX));
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} passes {msg}") {
        bar.set_style(style);
    }
    for &batch in &args.batches {
        bar.set_message(format!("batch {batch}"));
        let m = time_batch(&mut backend, &shape, batch, args, &bar)?;
        let line = if args.json {
            let mut obj = serde_json::json!({
                "backend": backend.name(),
                "device": backend.device_name(),
                "kernel": m.kernel,
                "math": math.to_string(),
                "batch": m.batch,
                "frames": args.frames,
                "ms": round_to(m.median_ms, 4),
                "min_ms": round_to(m.min_ms, 4),
                "max_ms": round_to(m.max_ms, 4),
                "iters": args.iters,
                "windows_per_s": round_to(m.windows_per_s(), 2),
            });
            if let (Some(p), Some(map)) = (&m.phases, obj.as_object_mut()) {
                map.insert("phases".into(), phases_json(p));
            }
            if let (Some(h), Some(map)) = (m.host_ms, obj.as_object_mut()) {
                map.insert("host_ms".into(), serde_json::json!(round_to(h, 4)));
            }
            obj.to_string()
        } else {
            if let Some(p) = &m.phases {
                tables.push(phases_table(m.batch, p));
            }
            format!(
                "{:>6}  {:<7} {:<48} {:>11.3} {:>11.2}{}",
                m.batch,
                backend.name(),
                m.kernel,
                m.median_ms,
                m.windows_per_s(),
                m.host_ms.map_or(String::new(), |h| format!(" {h:>11.3}"))
            )
        };
        bar.suspend(|| writeln!(out, "{line}"))?;
    }
    bar.finish_and_clear();
    for t in &tables {
        writeln!(out)?;
        write!(out, "{t}")?;
    }
    Ok(())
}

/// Times one batch size: warm-up, then `iters` timed passes.
fn time_batch(
    backend: &mut Selected,
    shape: &StackShape,
    batch: usize,
    args: &BenchArgs,
    bar: &ProgressBar,
) -> Result<Measurement, CliError> {
    #[cfg(feature = "cuda")]
    if let Some(gpu) = backend.auto.as_cuda_mut() {
        let times = bilstm_cuda::timing::time_forward_device(gpu, batch, args.iters, args.warmup)?;
        // Separate passes, so the events between layers never touch the figures above.
        let phases = if args.phases {
            let p = bilstm_cuda::phases::time_phases(gpu, batch, args.iters, 1)?;
            Some(
                p.iter()
                    .map(|p| Phase {
                        layer: p.layer,
                        projection_ms: p.projection_ms,
                        recurrence_ms: p.recurrence_ms,
                    })
                    .collect(),
            )
        } else {
            None
        };
        bar.inc(u64::try_from(args.warmup + args.iters).unwrap_or(u64::MAX));
        let mut m = Measurement::from_times(batch, backend.kernel_label(), times);
        m.phases = phases;
        if args.host {
            let host = time_host(backend, shape, batch, args)?;
            m.host_ms = Some(host.median_ms);
        }
        return Ok(m);
    }
    let m = time_host(backend, shape, batch, args)?;
    bar.inc(u64::try_from(args.warmup + args.iters).unwrap_or(u64::MAX));
    Ok(m)
}

/// Times `Backend::forward` with host slices (wall clock): warm-up, then `iters` passes.
fn time_host(
    backend: &mut Selected,
    shape: &StackShape,
    batch: usize,
    args: &BenchArgs,
) -> Result<Measurement, CliError> {
    let input = random_input(shape, batch, INPUT_SEED);
    let mut output = vec![0.0f32; shape.output_len(batch)?];
    for _ in 0..args.warmup {
        backend.forward(&input, batch, &mut output)?;
    }
    let mut times = Vec::with_capacity(args.iters);
    for _ in 0..args.iters {
        let started = Instant::now();
        backend.forward(&input, batch, &mut output)?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    Ok(Measurement::from_times(
        batch,
        backend.kernel_label(),
        times,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_even_and_odd_counts() {
        let m = Measurement::from_times(2, "k".into(), vec![3.0, 1.0, 2.0]);
        assert_eq!((m.median_ms, m.min_ms, m.max_ms), (2.0, 1.0, 3.0));
        assert_eq!(m.windows_per_s(), 1000.0);
        let m = Measurement::from_times(1, "k".into(), vec![4.0, 1.0, 2.0, 3.0]);
        assert_eq!(m.median_ms, 2.5);
        assert!(
            Measurement::from_times(1, "k".into(), vec![])
                .median_ms
                .is_nan()
        );
    }

    fn fake() -> Vec<Phase> {
        vec![
            Phase {
                layer: 0,
                projection_ms: 0.05,
                recurrence_ms: 0.95,
            },
            Phase {
                layer: 1,
                projection_ms: 0.25,
                recurrence_ms: 0.75,
            },
        ]
    }

    #[test]
    fn phases_json_lists_layers_with_both_times() {
        let v = phases_json(&fake());
        assert_eq!(
            v.to_string(),
            r#"[{"layer":0,"projection_ms":0.05,"recurrence_ms":0.95},{"layer":1,"projection_ms":0.25,"recurrence_ms":0.75}]"#
        );
    }

    #[test]
    fn phases_table_has_a_row_per_layer_and_a_total() {
        let t = phases_table(32, &fake());
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}");
        assert!(lines[0].starts_with("batch 32:"));
        assert!(lines[2].contains("0.0500") && lines[2].contains("0.9500"));
        assert!(lines[4].trim_start().starts_with("all"));
        assert!(
            lines[4].contains("0.3000")
                && lines[4].contains("1.7000")
                && lines[4].ends_with("2.0000")
        );
    }
}
