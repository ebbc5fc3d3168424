//! Prints the plan every GPU of the device table would run, without a GPU.
//!
//! ```text
//! cargo run --example plan -- --batch N [--math fp32|tf32] [--frames F] [--device NAME] [--explain]
//! ```
//!
//! One row per table entry: name, compute capability, SMs, recurrence kernel, its schedule
//! (tile height, tiles per direction, whether the directions run at once, launches) and the
//! projection tile. `--explain` adds each decision's reason under its row; `--device` keeps
//! one entry. Plans use the nominal kernel resources ([`KernelResources::nominal`]); the
//! CUDA backend plans with the compiled kernels' real figures.

use std::fmt;
use std::process::ExitCode;

use bilstm_core::device::table;
use bilstm_core::plan::{self, KernelResources};
use bilstm_core::{MathMode, StackShape};

const USAGE: &str =
    "usage: plan --batch N [--math fp32|tf32] [--frames F] [--device NAME] [--explain]";

/// Command-line options.
#[derive(Debug)]
struct Options {
    batch: usize,
    math: MathMode,
    frames: usize,
    device: Option<String>,
    explain: bool,
}

/// A command line that cannot be used.
#[derive(Debug)]
struct ArgError(String);

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the command line asks for: options, or the usage text.
enum Command {
    Run(Options),
    Help,
}

fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, ArgError> {
    let mut batch = None;
    let mut math = MathMode::Fp32;
    let mut frames = StackShape::pyannote().frames;
    let mut device = None;
    let mut explain = false;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .ok_or_else(|| ArgError(format!("{name} needs a value")))
        };
        match arg.as_str() {
            "--batch" => {
                let v = value("--batch")?;
                batch = Some(
                    v.parse()
                        .map_err(|_| ArgError(format!("--batch: {v:?} is not a batch size")))?,
                );
            }
            "--math" => {
                let v = value("--math")?;
                math = MathMode::parse(&v)
                    .ok_or_else(|| ArgError(format!("--math: {v:?} is neither fp32 nor tf32")))?;
            }
            "--frames" => {
                let v = value("--frames")?;
                frames = v
                    .parse()
                    .map_err(|_| ArgError(format!("--frames: {v:?} is not a frame count")))?;
            }
            "--device" => {
                let v = value("--device")?;
                if table::find(&v).is_none() {
                    let names: Vec<_> = table::all().iter().map(|e| e.name).collect();
                    return Err(ArgError(format!(
                        "--device: {v:?} is not in the table ({})",
                        names.join(", ")
                    )));
                }
                device = Some(v);
            }
            "--explain" => explain = true,
            "-h" | "--help" => return Ok(Command::Help),
            other => return Err(ArgError(format!("unknown argument {other:?}"))),
        }
    }
    let batch = batch.ok_or_else(|| ArgError("--batch is required".into()))?;
    if frames == 0 {
        return Err(ArgError("--frames: a window has at least one frame".into()));
    }
    Ok(Command::Run(Options {
        batch,
        math,
        frames,
        device,
        explain,
    }))
}

fn run(options: &Options) {
    let shape = StackShape::pyannote().with_frames(options.frames);
    let resources = KernelResources::nominal();
    println!(
        "batch {}, {} frames, {} math, nominal kernel resources",
        options.batch, options.frames, options.math
    );
    println!("{}", plan::TABLE_HEADING);
    for entry in table::all() {
        if options
            .device
            .as_deref()
            .is_some_and(|d| !entry.name.eq_ignore_ascii_case(d))
        {
            continue;
        }
        let plan = plan::select(
            &entry.facts,
            &resources,
            &shape,
            options.batch,
            options.math,
        );
        let row = plan::PlanRow {
            device: entry.name,
            facts: &entry.facts,
            plan: plan.as_ref().map_err(|e| e as &dyn std::fmt::Display),
            explain: options.explain,
        };
        println!("{row}");
    }
}

fn main() -> ExitCode {
    match parse(std::env::args().skip(1)) {
        Ok(Command::Run(options)) => {
            run(&options);
            ExitCode::SUCCESS
        }
        Ok(Command::Help) => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("plan: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
