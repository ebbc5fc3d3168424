//! Runs the CPU backend on the built-in model and reports time per forward and an output
//! checksum.
//!
//! ```text
//! cargo run --release --example run_stack -- [--batch N] [--frames F] [--runs R] [--threads T] [--seed S]
//! ```
//!
//! Defaults: batch 1, 589 frames (a 10 s pyannote window), 5 timed runs after one warm-up, the
//! backend's default thread count, input seed 1. The input is standard normal
//! ([`bilstm_core::owned::random_input`]); the weights are the built-in model
//! ([`bilstm_core::owned::OwnedStack::builtin`]). The checksum (sum, sum of squares, FNV-1a of
//! the output bits) identifies the output exactly: the CPU backend gives the same bits on
//! every run and for every thread count.

use std::error::Error;
use std::fmt;
use std::process::ExitCode;
use std::time::Instant;

use bilstm_core::owned::{BUILTIN_SCALE, BUILTIN_SEED, Checksum, OwnedStack, random_input};
use bilstm_core::{Backend, BackendConfig, MathMode};
use bilstm_cpu::CpuBackend;

/// Command-line options.
struct Options {
    batch: usize,
    frames: usize,
    runs: usize,
    threads: Option<usize>,
    seed: u64,
}

/// A bad command line: the message says what was wrong.
#[derive(Debug)]
struct Usage(String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}\nusage: run_stack [--batch N] [--frames F] [--runs R] [--threads T] [--seed S]",
            self.0
        )
    }
}

impl Error for Usage {}

fn parse_args(args: impl Iterator<Item = String>) -> Result<Option<Options>, Usage> {
    let mut o = Options {
        batch: 1,
        frames: 589,
        runs: 5,
        threads: None,
        seed: 1,
    };
    let mut args = args;
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            return Ok(None);
        }
        let value = args
            .next()
            .ok_or_else(|| Usage(format!("{flag} needs a value")))?;
        let number = |min: u64| -> Result<u64, Usage> {
            match value.parse::<u64>() {
                Ok(n) if n >= min => Ok(n),
                _ => Err(Usage(format!(
                    "{flag} wants an integer >= {min}, got {value:?}"
                ))),
            }
        };
        let to_usize =
            |n: u64| usize::try_from(n).map_err(|_| Usage(format!("{flag} {n} is too large")));
        match flag.as_str() {
            "--batch" => o.batch = to_usize(number(0)?)?,
            "--frames" => o.frames = to_usize(number(1)?)?,
            "--runs" => o.runs = to_usize(number(1)?)?,
            "--threads" => o.threads = Some(to_usize(number(1)?)?),
            "--seed" => o.seed = number(0)?,
            _ => return Err(Usage(format!("unknown argument {flag:?}"))),
        }
    }
    Ok(Some(o))
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("run_stack: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let Some(opts) = parse_args(std::env::args().skip(1))? else {
        println!(
            "{}",
            Usage("runs the CPU backend on the built-in model".into())
        );
        return Ok(());
    };
    let model = OwnedStack::builtin();
    let shape = model.shape.with_frames(opts.frames);
    let weights = model.weights()?;
    let config = BackendConfig {
        shape,
        max_batch: opts.batch,
        math: MathMode::Fp32,
    };
    let mut cpu = match opts.threads {
        Some(n) => CpuBackend::with_threads(n),
        None => CpuBackend::new(),
    };
    let started = Instant::now();
    cpu.prepare(&weights, &config)?;
    let prepare_ms = started.elapsed().as_secs_f64() * 1e3;
    println!(
        "backend {} ({} threads), built-in model (seed {BUILTIN_SEED:#x}, U(-{BUILTIN_SCALE}, {BUILTIN_SCALE})), batch {}, frames {}, input seed {}",
        cpu.name(),
        cpu.threads(),
        opts.batch,
        opts.frames,
        opts.seed
    );
    println!("prepare: {prepare_ms:.1} ms");

    let input = random_input(&shape, opts.batch, opts.seed);
    let mut output = vec![0.0f32; shape.output_len(opts.batch)?];
    cpu.forward(&input, opts.batch, &mut output)?; // warm-up
    let first = Checksum::of(&output);
    let mut times_ms = Vec::with_capacity(opts.runs);
    for _ in 0..opts.runs {
        let started = Instant::now();
        cpu.forward(&input, opts.batch, &mut output)?;
        times_ms.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times_ms.sort_by(f64::total_cmp);
    let median = times_ms[times_ms.len() / 2];
    let (min, max) = (times_ms[0], times_ms[times_ms.len() - 1]);
    let checksum = Checksum::of(&output);
    println!(
        "forward: median {median:.2} ms (min {min:.2}, max {max:.2}) over {} runs after 1 warm-up",
        opts.runs
    );
    if median > 0.0 {
        println!(
            "throughput: {:.2} windows/s",
            opts.batch as f64 / (median / 1e3)
        );
    }
    println!("output: {checksum}");
    if checksum.fnv1a != first.fnv1a {
        return Err("output changed between runs: the CPU backend should be deterministic".into());
    }
    Ok(())
}
