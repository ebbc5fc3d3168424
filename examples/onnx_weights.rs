//! Loads a model file (ONNX or safetensors) with [`bilstm::model::load`], runs it on the CPU
//! backend and prints an output checksum; optionally reads the input from and writes the
//! output to `.npy` files.
//!
//! ```text
//! cargo run --release --example onnx_weights -- MODEL [--input X.npy] [--output Y.npy]
//!     [--batch N] [--frames F] [--seed S]
//! ```
//!
//! `X.npy` is a little-endian float32 array `[batch, frames, features]`; without it the input
//! is [`bilstm::owned::random_input`] of `--batch` windows (default 2) of `--frames` frames
//! (default 589) from `--seed` (default 1). `Y.npy` is written as float32
//! `[batch, frames, 256]`. `scripts/ort-check.py` runs the same model with ONNX Runtime and
//! compares the two outputs (the README gives the steps and the figure measured).

use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;

use bilstm::owned::{Checksum, random_input};
use bilstm::{Backend, BackendConfig, CpuBackend, MathMode, model};

const USAGE: &str = "usage: onnx_weights MODEL [--input X.npy] [--output Y.npy] [--batch N] \
                     [--frames F] [--seed S]";

/// Command-line options.
struct Options {
    model: PathBuf,
    input: Option<PathBuf>,
    output: Option<PathBuf>,
    batch: usize,
    frames: usize,
    seed: u64,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut model = None;
    let mut o = Options {
        model: PathBuf::new(),
        input: None,
        output: None,
        batch: 2,
        frames: 589,
        seed: 1,
    };
    while let Some(arg) = args.next() {
        if !arg.starts_with("--") {
            model = Some(PathBuf::from(arg));
            continue;
        }
        let value = args.next().ok_or(format!("{arg} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{arg} wants an integer, got {value:?}"))
        };
        match arg.as_str() {
            "--input" => o.input = Some(PathBuf::from(&value)),
            "--output" => o.output = Some(PathBuf::from(&value)),
            "--batch" => o.batch = usize::try_from(number()?).map_err(|e| e.to_string())?,
            "--frames" => o.frames = usize::try_from(number()?).map_err(|e| e.to_string())?,
            "--seed" => o.seed = number()?,
            _ => return Err(format!("unknown argument {arg:?}")),
        }
    }
    o.model = model.ok_or("no MODEL given")?;
    Ok(o)
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("onnx_weights: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Reads a float32 `[batch, frames, features]` `.npy` file.
fn read_input(
    path: &std::path::Path,
    features: usize,
) -> Result<(Vec<f32>, usize, usize), Box<dyn Error>> {
    let array = bilstm::npy::read_f32_3d(path, features)?;
    let [batch, frames, _] = array.shape;
    Ok((array.data, batch, frames))
}

fn run() -> Result<(), Box<dyn Error>> {
    let opts = parse_args(std::env::args().skip(1)).map_err(|e| format!("{e}\n{USAGE}"))?;
    let loaded = model::load(&opts.model)?;
    println!("{}", loaded.description);
    let stack = &loaded.stack;
    let (input, batch, frames) = match &opts.input {
        Some(path) => read_input(path, stack.shape.features)?,
        None => {
            let shape = stack.shape.with_frames(opts.frames);
            (
                random_input(&shape, opts.batch, opts.seed),
                opts.batch,
                opts.frames,
            )
        }
    };
    let shape = stack.shape.with_frames(frames);
    let mut cpu = CpuBackend::new();
    cpu.prepare(
        &stack.weights()?,
        &BackendConfig {
            shape,
            max_batch: batch,
            math: MathMode::Fp32,
        },
    )?;
    let mut output = vec![0.0f32; shape.output_len(batch)?];
    cpu.forward(&input, batch, &mut output)?;
    println!(
        "cpu, batch {batch}, frames {frames}: output {}",
        Checksum::of(&output)
    );
    if let Some(path) = &opts.output {
        let dims = [batch, frames, shape.output_width()];
        bilstm::npy::write_f32_3d(path, dims, &output)?;
        println!("wrote {}: {dims:?} float32", path.display());
    }
    Ok(())
}
