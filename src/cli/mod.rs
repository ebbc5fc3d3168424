//! The `bilstm` command line: `run`, `plan`, `bench` and `devices` (issue 3).
//!
//! The binary `src/bin/bilstm.rs` only calls [`main`]; the logic lives here, in the library,
//! so it is compiled and linted with it. The module is hidden from the docs: its interface is
//! the command line (`bilstm --help`, the README's "Command line" section), not a Rust API.
//!
//! # Output and exit codes
//! Results go to stdout (the output checksum of `run`, the plan table, the bench table or its
//! JSON lines); notes, progress bars and errors go to stderr, each note prefixed `bilstm:`.
//! A run that fails prints one `error: ...` message on stderr and exits with 1; a command line
//! clap refuses (an unknown flag, `--batch 0`, an unknown device name) exits with 2, as clap
//! does. A closed stdout (`bilstm plan --device all | head -1`) ends the command quietly.

/// Writes a note on stderr, prefixed `bilstm: ` (see [`note_line`]).
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::cli::note_line(format_args!($($arg)*))
    };
}

mod bench;
mod devices;
mod engine;
mod error;
mod plan;
mod run;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use crate::MathMode;

pub use error::CliError;

/// Runs the 4-layer bidirectional LSTM stack of pyannote's segmentation-3.0 model (input 60,
/// hidden 128 per direction, 589-frame windows) on CUDA GPUs and CPUs.
#[derive(Debug, Parser)]
#[command(name = "bilstm", version, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the stack on an .npy input (or on a seeded random input) and write or checksum the
    /// output.
    ///
    /// The input is `[batch, frames, features]` little-endian float32 (features = 60 for
    /// pyannote), any frame count; the output `[batch, frames, 256]` float32 (columns 0..127
    /// forward, 128..255 reverse). Without --input, --batch windows of --frames frames are
    /// drawn from a standard normal (seed --seed) and the output's checksum is printed, so the
    /// command needs no file. Notes on stderr say which backend ran and why, the model, the
    /// plan on a GPU, and the time taken.
    Run(run::RunArgs),
    /// Show the plan (recurrence kernel, schedule, projection tile, and why) for a GPU.
    ///
    /// By default the local GPU, planned with its driver's facts and the compiled kernels' real
    /// resources; without a usable GPU, the whole device table with a note saying why. With
    /// --device NAME, a GPU of the device table (nominal kernel resources), or `all` of them.
    Plan(plan::PlanArgs),
    /// Time forward passes of the built-in model and print a table (or JSON lines).
    ///
    /// Each figure is the median of --iters passes after --warmup untimed ones: on CUDA timed
    /// with device events around a pass whose data is already on the GPU, on the CPU with the
    /// host clock. A progress bar runs on stderr when it is a terminal.
    Bench(bench::BenchArgs),
    /// List the local GPUs (or say why there are none) and the device table's names.
    Devices,
}

/// `--backend`: which backend runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendChoice {
    /// CUDA when a usable driver and GPU are present, else the CPU (and say why).
    Auto,
    /// The CPU backend.
    Cpu,
    /// The CUDA backend on GPU 0; an error when there is none.
    Cuda,
}

/// `--math`: the arithmetic of the input projections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MathArg {
    /// FP32 everywhere.
    Fp32,
    /// TF32 tensor-core projections where the plan allows them (the recurrence stays FP32).
    Tf32,
}

impl From<MathArg> for MathMode {
    fn from(m: MathArg) -> Self {
        match m {
            MathArg::Fp32 => MathMode::Fp32,
            MathArg::Tf32 => MathMode::Tf32,
        }
    }
}

/// Parses a count of at least one (a batch, a frame count, iterations).
fn positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a whole number ({e})")),
    }
}

/// Writes a note on stderr, prefixed `bilstm: `. A failing stderr is ignored (there is nowhere
/// left to report it).
fn note_line(args: std::fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr(), "bilstm: {args}");
}

/// Parses the command line and runs it: exit code 0 on success, 1 on a failure (one
/// `error: ...` line on stderr), 2 for a command line clap refuses.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version come here too, with exit code 0 and the text for stdout.
            let code = e.exit_code();
            let _ = e.print();
            return ExitCode::from(u8::try_from(code).unwrap_or(2));
        }
    };
    for ignored in bilstm_cpu::ignored_env() {
        note_line(format_args!("{ignored}"));
    }
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let result = execute(&cli, &mut out).and_then(|()| out.flush().map_err(CliError::Output));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of stdout went away: nothing to report, nobody to report it to.
        Err(CliError::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(io::stderr(), "error: {}", one_line(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}

/// The most characters of an error message printed.
const MAX_MESSAGE_CHARS: usize = 2000;

/// `message` as one line: control characters (newlines, terminal escapes) escaped as Rust
/// does (`\n`, `\u{1b}`), cut at 2,000 characters. Messages quote file
/// content (node names, header text) and OS errors; none of it reaches the terminal raw.
pub fn one_line(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_MESSAGE_CHARS + 3));
    for (i, c) in message.chars().enumerate() {
        if i == MAX_MESSAGE_CHARS {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Runs one parsed command line, writing results to `out`.
///
/// # Errors
/// Whatever the command met: see [`CliError`].
pub fn execute(cli: &Cli, out: &mut dyn Write) -> Result<(), CliError> {
    match &cli.command {
        Command::Run(args) => run::run(args, out),
        Command::Plan(args) => plan::plan(args, out),
        Command::Bench(args) => bench::bench(args, out),
        Command::Devices => devices::devices(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn error_messages_are_one_escaped_line() {
        assert_eq!(one_line("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
        let long = "x".repeat(5000);
        assert_eq!(one_line(&long).chars().count(), MAX_MESSAGE_CHARS + 3);
    }

    #[test]
    fn counts_are_positive() {
        assert_eq!(positive("3"), Ok(3));
        assert!(positive("0").is_err());
        assert!(positive("-1").is_err());
        assert!(positive("x").is_err());
    }
}
