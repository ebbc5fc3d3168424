//! `bilstm run`: the stack on an `.npy` input (or a seeded random one), output to `.npy` or a
//! checksum on stdout.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use bilstm_core::owned::{BUILTIN_SCALE, BUILTIN_SEED, Checksum, OwnedStack, random_input};
use bilstm_core::{BackendConfig, MathMode, StackShape};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::engine::Selected;
use super::{BackendChoice, CliError, MathArg, positive};
use crate::model;
use crate::npy;

/// `bilstm run` options.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Model file: an ONNX export of the LSTM stack (`.onnx`) or a PyTorch state dict in
    /// safetensors (`.safetensors`). Default: the built-in model (pyannote's shape, seeded
    /// weights; needs no file).
    #[arg(long, value_name = "PATH")]
    pub model: Option<PathBuf>,
    /// Input `.npy`: `[batch, frames, features]`, little-endian float32, C order. Without it,
    /// a seeded standard-normal input of --batch windows of --frames frames.
    #[arg(long, value_name = "X.npy")]
    pub input: Option<PathBuf>,
    /// Output `.npy`, written as `[batch, frames, 256]` float32. Without it, the output's
    /// checksum (count, sum, sum of squares, FNV-1a of the bits) is printed on stdout.
    #[arg(long, value_name = "Y.npy")]
    pub output: Option<PathBuf>,
    /// Backend: `auto` runs CUDA when a usable GPU is present, else the CPU.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// Arithmetic of the input projections.
    #[arg(long, value_enum, default_value_t = MathArg::Fp32)]
    pub math: MathArg,
    /// With --input: windows per forward pass (the input is split into chunks of N windows,
    /// the last one smaller; default: all windows in one pass). Without --input: the number
    /// of random windows (default 1).
    #[arg(long, value_name = "N", value_parser = positive)]
    pub batch: Option<usize>,
    /// Frames per window of the random input (default: the model's, 589 for pyannote).
    #[arg(long, value_name = "F", value_parser = positive, conflicts_with = "input")]
    pub frames: Option<usize>,
    /// Seed of the random input.
    #[arg(long, value_name = "S", default_value_t = 1, conflicts_with = "input")]
    pub seed: u64,
}

/// The model to run and one line about it.
fn load_model(path: Option<&Path>) -> Result<(OwnedStack, String), CliError> {
    match path {
        None => {
            let stack = OwnedStack::builtin();
            let s = stack.shape;
            let description = format!(
                "built-in model: {} layers, {} features, hidden {} per direction, seeded weights \
                 U(-{BUILTIN_SCALE}, {BUILTIN_SCALE}) (seed {BUILTIN_SEED:#x}), not trained",
                s.layers, s.features, s.hidden
            );
            Ok((stack, description))
        }
        Some(path) => {
            let loaded = model::load(path)?;
            Ok((loaded.stack, loaded.description))
        }
    }
}

/// Formats a shape as `[a, b, c]`.
fn dims(shape: [usize; 3]) -> String {
    format!("[{}, {}, {}]", shape[0], shape[1], shape[2])
}

/// Runs `bilstm run`.
///
/// # Errors
/// A model that cannot be loaded; an input that cannot be read or is not `[batch, frames,
/// features]` f32 with at least one frame; a backend that cannot be opened or prepared, or a
/// failed forward pass; an output that cannot be written.
pub(crate) fn run(args: &RunArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let started = Instant::now();
    // The output path is checked before any work: a path that cannot be written, or that
    // names the input or the model file, fails at once.
    let target = match &args.output {
        Some(path) => Some(check_output(
            path,
            args.input.as_deref(),
            args.model.as_deref(),
        )?),
        None => None,
    };
    let (stack, description) = load_model(args.model.as_deref())?;
    let weights = stack.weights()?;
    let features = stack.shape.features;

    // A file is read a chunk of windows at a time; the seeded random input is made whole.
    let (mut input, source) = match &args.input {
        Some(path) => {
            let reader = npy::open_f32_3d(path, features)?;
            let source = format!("{} {}", path.display(), dims(reader.shape()));
            (Input::File(reader), source)
        }
        None => {
            let batch = args.batch.unwrap_or(1);
            let frames = args.frames.unwrap_or(stack.shape.frames);
            let shape = stack.shape.with_frames(frames);
            check_random_size(&shape, batch)?;
            let data = random_input(&shape, batch, args.seed);
            let array = npy::Array3 {
                shape: [batch, frames, features],
                data,
            };
            let source = format!(
                "seeded standard normal {} (seed {})",
                dims(array.shape),
                args.seed
            );
            (Input::Memory(array), source)
        }
    };
    let [windows, frames, _] = input.shape();
    if frames == 0 {
        return Err(CliError::Input(format!(
            "input {source} has no frames: a window needs at least one"
        )));
    }
    let shape = stack.shape.with_frames(frames);
    let out_shape = [windows, frames, shape.output_width()];
    if windows == 0 {
        // Nothing to run: no backend is opened and nothing is allocated for the frames a
        // header may announce without data.
        note!("model: {description}");
        note!("input: {source}: no windows, nothing to run");
        return finish(args, target.as_deref(), out_shape, &[], started, out);
    }
    // --batch is the chunk (windows per pass); a file without it runs FILE_CHUNK_WINDOWS at a
    // time (memory bounded by two chunks, not by the file); the random input is one pass.
    let automatic = matches!((&input, args.batch), (Input::File(_), None));
    let mut chunk = match (&input, args.batch) {
        (Input::File(_), Some(n)) => n,
        (Input::File(_), None) => FILE_CHUNK_WINDOWS,
        (Input::Memory(_), _) => windows,
    }
    .clamp(1, windows);

    let opening = Instant::now();
    let mut backend = Selected::open(args.backend)?;
    let open_ms = opening.elapsed().as_secs_f64() * 1e3;
    note!("model: {description}");
    note!("input: {source}");
    // Without --batch, a chunk the GPU's free memory holds (a smaller GPU, or a busy one).
    if automatic && let Some(fits) = backend.max_batch_fitting(&shape, chunk) {
        let fits = fits?;
        if (1..chunk).contains(&fits) {
            note!("chunk: {fits} windows a pass (the free device memory holds no more than that)");
            chunk = fits;
        }
    }
    let math = MathMode::from(args.math);
    let prepare_started = Instant::now();
    backend.prepare(
        &weights,
        &BackendConfig {
            shape,
            max_batch: chunk,
            math,
        },
    )?;
    let prepare_ms = prepare_started.elapsed().as_secs_f64() * 1e3;
    note!("backend: {}", backend.selection());
    if let Some(compiled) = backend.compile_note() {
        note!("{compiled}");
    }
    if let Some(plan) = backend.cuda_plan(chunk) {
        match plan {
            Ok(plan) => {
                for line in plan.explain() {
                    note!("plan: {line}");
                }
            }
            Err(e) => note!("plan: none for batch {chunk}: {e}"),
        }
        if let Ok(memory) = bilstm_core::memory::DeviceMemory::of(&shape, chunk) {
            note!("plan: device memory for {chunk} windows a pass: {memory}");
        }
    }

    let chunks = windows.div_ceil(chunk);
    let bar = progress(chunks);
    let mut pass = Pass {
        backend: &mut backend,
        shape,
        chunk,
        forward_ms: 0.0,
        read_ms: 0.0,
        handover_ms: 0.0,
        write_ms: 0.0,
        x: Vec::new(),
        y: Vec::new(),
    };
    let passes_started = Instant::now();
    let whole = match (target.as_deref(), &args.output) {
        (Some(target_path), Some(path)) => {
            // Streamed: each chunk's output goes to the (temporary) file as it is computed, by a
            // writer thread, while the next chunk is read and computed.
            let mut failure: Option<CliError> = None;
            let written = npy::write_f32_3d_with(target_path, out_shape, |sink| {
                stream_passes(sink, &mut pass, &mut input, windows, &bar, &mut failure)
            });
            if let Some(e) = failure {
                return Err(e);
            }
            written.map_err(|e| match e {
                npy::NpyError::Write { source, .. } => npy::NpyError::Write {
                    path: path.clone(),
                    source,
                },
                other => other,
            })?;
            None
        }
        _ => {
            let out_len = shape.output_len(windows)?;
            let mut output = Vec::new();
            output.try_reserve_exact(out_len).map_err(|_| {
                CliError::Input(format!(
                    "the output of {} ({out_len} float32) does not fit in memory",
                    dims(out_shape)
                ))
            })?;
            let mut done = 0;
            while done < windows {
                let n = chunk.min(windows - done);
                output.extend_from_slice(pass.run(&mut input, done, n)?);
                done += n;
                bar.inc(1);
            }
            Some(output)
        }
    };
    bar.finish_and_clear();
    let forward_ms = pass.forward_ms;
    if std::env::var("BILSTM_HOST_TRACE").is_ok_and(|v| v.trim() == "1") {
        note!(
            "trace: before opening the backend {:.1} ms, open {open_ms:.1} ms, prepare \
             {prepare_ms:.1} ms, passes and output {:.1} ms (reading {:.1}, forward {forward_ms:.1}, \
             waiting for the writer {:.1}, writing {:.1}), in all {:.1} ms",
            (prepare_started - started).as_secs_f64() * 1e3 - open_ms,
            passes_started.elapsed().as_secs_f64() * 1e3,
            pass.read_ms,
            pass.handover_ms,
            pass.write_ms,
            started.elapsed().as_secs_f64() * 1e3,
        );
    }
    let label = backend.kernel_label();
    let on = if label.starts_with(backend.name()) {
        label
    } else {
        format!("{} ({label})", backend.name())
    };
    note!(
        "ran {windows} window{} x {frames} frames in {chunks} pass{} of up to {chunk} on {on}: \
         forward {forward_ms:.1} ms, prepare {prepare_ms:.1} ms",
        if windows == 1 { "" } else { "s" },
        if chunks == 1 { "" } else { "es" },
    );
    match whole {
        Some(output) => finish(args, target.as_deref(), out_shape, &output, started, out),
        None => {
            if let Some(path) = &args.output {
                let all_s = started.elapsed().as_secs_f64();
                note!(
                    "wrote {} {} float32 ({:.1} ms in all, {:.0} windows/s end to end)",
                    path.display(),
                    dims(out_shape),
                    all_s * 1e3,
                    windows as f64 / all_s.max(1e-9)
                );
            }
            Ok(())
        }
    }
}

/// Runs every pass of `input` and writes the outputs to `sink` in order. A writer thread owns
/// the sink: it writes pass k's output while this thread reads and computes pass k + 1, so
/// memory holds at most two output chunks (the hand-over waits for the writer), and the
/// buffers circulate instead of being allocated per pass. A write error stops the passes and
/// is returned; a pass's error is put in `failure` (and returned as an I/O error that says so).
fn stream_passes(
    sink: &mut npy::ValueSink<'_>,
    pass: &mut Pass<'_>,
    input: &mut Input,
    windows: usize,
    bar: &ProgressBar,
    failure: &mut Option<CliError>,
) -> io::Result<()> {
    std::thread::scope(|scope| {
        // Rendezvous hand-over: a full buffer passes only when the writer is free to take it.
        let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Vec<f32>>(0);
        let (empty_tx, empty_rx) = std::sync::mpsc::channel::<Vec<f32>>();
        let writer = scope.spawn(move || -> io::Result<f64> {
            let mut busy = 0.0;
            for y in full_rx {
                let started = Instant::now();
                sink.write(&y)?;
                busy += started.elapsed().as_secs_f64() * 1e3;
                // The computing side may have finished; a spare buffer is then just dropped.
                let _ = empty_tx.send(y);
            }
            Ok(busy)
        });
        let mut computed = Ok(());
        let mut done = 0;
        while done < windows {
            let n = pass.chunk.min(windows - done);
            if let Err(e) = pass.run(input, done, n) {
                computed = Err(e);
                break;
            }
            let handing = Instant::now();
            if full_tx.send(std::mem::take(&mut pass.y)).is_err() {
                break; // The writer stopped on an error, reported below.
            }
            pass.handover_ms += handing.elapsed().as_secs_f64() * 1e3;
            // The writer took this output only after sending the previous one back, so that
            // buffer is waiting here: two output buffers in all.
            pass.y = empty_rx.try_recv().unwrap_or_default();
            done += n;
            bar.inc(1);
        }
        drop(full_tx);
        let joining = Instant::now();
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the output writer thread panicked")));
        pass.handover_ms += joining.elapsed().as_secs_f64() * 1e3;
        if let Err(e) = computed {
            return Err(io::Error::other(failure.insert(e).to_string()));
        }
        pass.write_ms = written?;
        Ok(())
    })
}

/// Windows per pass when `bilstm run` reads a file and `--batch` is not given: host memory
/// then holds about two such chunks (input and output) instead of the whole file. On the H200
/// 128 windows run as efficiently as any larger batch (two-window 2-CTA clusters in two waves:
/// 10.33 ms, 0.081 ms a window, against 82.2 ms for 1024; `bench/NOTES.md`, 2026-12-01).
pub(crate) const FILE_CHUNK_WINDOWS: usize = 128;

/// The stack input: a file read a chunk at a time, or the seeded random input in memory.
enum Input {
    File(npy::WindowReader),
    Memory(npy::Array3),
}

impl Input {
    fn shape(&self) -> [usize; 3] {
        match self {
            Input::File(r) => r.shape(),
            Input::Memory(a) => a.shape,
        }
    }
}

/// The forward passes of one run: the backend, the chunk buffers (reused) and the time spent
/// (in the forward passes, reading the input, handing outputs to the writer and waiting for it
/// at the end, and writing in the writer thread).
struct Pass<'a> {
    backend: &'a mut Selected,
    shape: StackShape,
    chunk: usize,
    forward_ms: f64,
    read_ms: f64,
    handover_ms: f64,
    write_ms: f64,
    x: Vec<f32>,
    y: Vec<f32>,
}

impl Pass<'_> {
    /// Runs windows `first .. first + n` of `input` and returns their output.
    fn run(&mut self, input: &mut Input, first: usize, n: usize) -> Result<&[f32], CliError> {
        let in_w = self.shape.input_len(1)?;
        let x: &[f32] = match input {
            Input::File(reader) => {
                let reading = Instant::now();
                reader.read_windows(n, &mut self.x)?;
                self.read_ms += reading.elapsed().as_secs_f64() * 1e3;
                &self.x
            }
            Input::Memory(a) => &a.data[first * in_w..(first + n) * in_w],
        };
        let out_len = self.shape.output_len(n)?;
        if self.y.len() != out_len {
            self.y.clear();
            self.y
                .try_reserve_exact(self.shape.output_len(self.chunk)?)
                .map_err(|_| CliError::Input("the output chunk does not fit in memory".into()))?;
            self.y.resize(out_len, 0.0);
        }
        let started = Instant::now();
        self.backend.forward(x, n, &mut self.y)?;
        self.forward_ms += started.elapsed().as_secs_f64() * 1e3;
        Ok(&self.y)
    }
}

/// The most bytes a seeded random input and its output may take together (8 GiB): the
/// random input exists to try the command without a file; larger runs read a file, whose
/// size bounds them.
pub(crate) const MAX_RANDOM_RUN_BYTES: u64 = 1 << 33;

/// Refuses a seeded random input of `batch` windows of `shape` whose input and output take
/// more than [`MAX_RANDOM_RUN_BYTES`] (or whose size overflows), before allocating anything.
pub(crate) fn check_random_size(shape: &StackShape, batch: usize) -> Result<(), CliError> {
    let values = shape
        .input_len(batch)
        .ok()
        .zip(shape.output_len(batch).ok())
        .and_then(|(i, o)| i.checked_add(o))
        .and_then(|n| u64::try_from(n).ok())
        .and_then(|n| n.checked_mul(4));
    match values {
        Some(b) if b <= MAX_RANDOM_RUN_BYTES => Ok(()),
        _ => Err(CliError::Input(format!(
            "a random input of {batch} window(s) x {} frames x {} features and its output take \
             more than {MAX_RANDOM_RUN_BYTES} bytes; use fewer --batch or --frames, or an \
             --input file",
            shape.frames, shape.features
        ))),
    }
}

/// Validates `--output` before any work: a regular file or nothing (not `/dev/stdout`, a
/// FIFO or a device: outputs are written beside the target and renamed into place), in an
/// existing directory, and not the input or the model file. Returns the path to write.
fn check_output(
    output: &Path,
    input: Option<&Path>,
    model: Option<&Path>,
) -> Result<PathBuf, CliError> {
    let target = crate::fsio::check_output(output).map_err(|source| {
        CliError::Npy(npy::NpyError::Write {
            path: output.to_path_buf(),
            source,
        })
    })?;
    for (flag, other) in [("--input", input), ("--model", model)] {
        if let Some(other) = other
            && crate::fsio::same_file(output, other)
        {
            return Err(CliError::Input(format!(
                "--output {} is the same file as {flag} {}: refused (it would be replaced)",
                output.display(),
                other.display()
            )));
        }
    }
    Ok(target)
}

/// Writes the output to `target` (or its checksum to `out`) and says so.
fn finish(
    args: &RunArgs,
    target: Option<&Path>,
    out_shape: [usize; 3],
    output: &[f32],
    started: Instant,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match (target, &args.output) {
        (Some(target), Some(path)) => {
            npy::write_f32_3d(target, out_shape, output).map_err(|e| match e {
                npy::NpyError::Write { source, .. } => npy::NpyError::Write {
                    path: path.clone(),
                    source,
                },
                other => other,
            })?;
            note!(
                "wrote {} {} float32 ({:.1} ms in all)",
                path.display(),
                dims(out_shape),
                started.elapsed().as_secs_f64() * 1e3
            );
        }
        _ => {
            writeln!(out, "output {}: {}", dims(out_shape), Checksum::of(output))?;
        }
    }
    Ok(())
}

/// A progress bar of `chunks` forward passes on stderr, shown only when there is more than one
/// pass and stderr is a terminal.
fn progress(chunks: usize) -> ProgressBar {
    if chunks <= 1 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(
        Some(u64::try_from(chunks).unwrap_or(u64::MAX)),
        ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} passes {elapsed}") {
        bar.set_style(style);
    }
    bar
}
