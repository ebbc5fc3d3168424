//! [`CpuBackend`]: packing at prepare, then per layer two direction jobs (projection GEMM and
//! recurrence) on one or two threads, then a merge of the two halves into the layer output.

use std::num::NonZeroUsize;
use std::thread;

use bilstm_core::error::checked_mul;
use bilstm_core::layout::{
    pack_bias_into, pack_input_kmajor_into, pack_recurrent_kmajor_into, padded_in,
};
use bilstm_core::{Backend, BackendConfig, CoreError, Direction, StackShape, StackWeights};

use crate::error::CpuError;
use crate::projection::project;
use crate::recurrence::Recurrence;

/// The most threads a forward uses: one per direction of a layer (DESIGN §6: on the 2-vCPU
/// development machine one direction per thread is the natural split).
pub const MAX_THREADS: usize = 2;

/// The CPU backend: FP32, deterministic, one thread per direction.
///
/// See the [crate docs](crate) for the numerics, determinism, special values and math modes.
///
/// ```
/// use bilstm_core::{Backend, BackendConfig};
/// use bilstm_core::owned::{OwnedStack, random_input};
/// use bilstm_cpu::CpuBackend;
///
/// let model = OwnedStack::builtin();
/// let shape = model.shape.with_frames(4);
/// let mut cpu = CpuBackend::with_threads(1);
/// cpu.prepare(&model.weights()?, &BackendConfig { shape, ..BackendConfig::pyannote(2) })?;
/// let input = random_input(&shape, 2, 1);
/// let mut output = vec![0.0; shape.output_len(2)?];
/// cpu.forward(&input, 2, &mut output)?;
/// assert!(output.iter().all(|v| v.abs() < 1.0));
/// # Ok::<(), bilstm_cpu::CpuError>(())
/// ```
#[derive(Debug)]
pub struct CpuBackend {
    threads: usize,
    prepared: Option<Prepared>,
}

/// One direction of one layer, packed (DESIGN §2).
#[derive(Debug)]
struct PackedDirection {
    /// Input weights, K-major `[padded_in, 4H]`.
    input_kmajor: Vec<f32>,
    /// Recurrent weights, K-major `[H, 4H]`.
    recurrent_kmajor: Vec<f32>,
    /// Combined bias `Wb + Rb`, `[4H]`.
    bias: Vec<f32>,
}

/// One direction's buffers, sized for `max_batch` windows.
#[derive(Debug)]
struct DirectionScratch {
    /// Input projections `[max_batch * frames, 4H]`.
    gates: Vec<f32>,
    /// Hidden state of every step `[max_batch * frames, H]`.
    hseq: Vec<f32>,
    /// Running hidden state `[max_batch, H]`.
    h: Vec<f32>,
    /// Running cell state `[max_batch, H]`.
    c: Vec<f32>,
}

/// Everything a forward needs, built by `prepare`.
#[derive(Debug)]
struct Prepared {
    config: BackendConfig,
    /// Per layer, forward then reverse.
    layers: Vec<[PackedDirection; 2]>,
    /// Forward's and reverse's buffers.
    scratch: [DirectionScratch; 2],
    /// The output of every layer but the last `[max_batch * frames, 2H]`, also the next
    /// layer's input (the last layer writes the caller's output).
    layer_out: Vec<f32>,
}

/// A zeroed `Vec` of `len` values, or [`CpuError::Allocation`] naming `what`.
fn zeroed(len: usize, what: &'static str) -> Result<Vec<f32>, CpuError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| CpuError::Allocation {
        what,
        bytes: len.saturating_mul(size_of::<f32>()),
    })?;
    v.resize(len, 0.0);
    Ok(v)
}

impl CpuBackend {
    /// A backend using `available_parallelism()` threads, at most [`MAX_THREADS`] (1 when the
    /// host cannot say).
    pub fn new() -> Self {
        let threads = thread::available_parallelism().map_or(1, NonZeroUsize::get);
        Self::with_threads(threads)
    }

    /// A backend using `threads` threads, clamped to `1..=`[`MAX_THREADS`]: 1 runs both
    /// directions of a layer on the calling thread, 2 runs the reverse direction on a scoped
    /// worker thread. The output bits are the same for every thread count.
    pub fn with_threads(threads: usize) -> Self {
        CpuBackend {
            threads: threads.clamp(1, MAX_THREADS),
            prepared: None,
        }
    }

    /// The number of threads a forward uses (1 or 2).
    pub fn threads(&self) -> usize {
        self.threads
    }

    fn pack_direction(
        shape: &StackShape,
        weights: &StackWeights<'_>,
        layer: usize,
        direction: Direction,
    ) -> Result<PackedDirection, CpuError> {
        let h = shape.hidden;
        let rows = shape.gate_rows();
        let width = shape.layer_input_width(layer);
        let layer_weights = weights.layers().get(layer).ok_or(CoreError::LayerCount {
            expected: shape.layers,
            got: weights.layers().len(),
        })?;
        let d = layer_weights.direction(direction);
        let order = weights.order();
        let mut input_kmajor = zeroed(
            checked_mul(padded_in(width), rows, "packed input weights")?,
            "packed input weights",
        )?;
        pack_input_kmajor_into(d.input, width, h, order, &mut input_kmajor)?;
        let mut recurrent_kmajor = zeroed(
            checked_mul(h, rows, "packed recurrent weights")?,
            "packed recurrent weights",
        )?;
        pack_recurrent_kmajor_into(d.recurrent, h, order, &mut recurrent_kmajor)?;
        let mut bias = zeroed(rows, "packed bias")?;
        pack_bias_into(d.input_bias, d.recurrent_bias, h, order, &mut bias)?;
        Ok(PackedDirection {
            input_kmajor,
            recurrent_kmajor,
            bias,
        })
    }

    fn scratch(shape: &StackShape, max_batch: usize) -> Result<DirectionScratch, CpuError> {
        let max_rows = checked_mul(max_batch, shape.frames, "projection rows")?;
        Ok(DirectionScratch {
            gates: zeroed(
                checked_mul(max_rows, shape.gate_rows(), "projection gates")?,
                "projection gates",
            )?,
            hseq: zeroed(
                checked_mul(max_rows, shape.hidden, "hidden sequence")?,
                "hidden sequence",
            )?,
            h: zeroed(
                checked_mul(max_batch, shape.hidden, "hidden state")?,
                "hidden state",
            )?,
            c: zeroed(
                checked_mul(max_batch, shape.hidden, "cell state")?,
                "cell state",
            )?,
        })
    }
}

impl Default for CpuBackend {
    /// [`CpuBackend::new`].
    fn default() -> Self {
        Self::new()
    }
}

/// One direction job: the projection GEMM over all rows, then the recurrence.
struct DirectionJob<'a> {
    direction: Direction,
    shape: &'a StackShape,
    batch: usize,
    /// Layer input `[batch * frames, width]`.
    input: &'a [f32],
    width: usize,
    packed: &'a PackedDirection,
}

impl DirectionJob<'_> {
    fn run(&self, scratch: &mut DirectionScratch) {
        let rows = self.batch * self.shape.frames;
        let cols = self.shape.gate_rows();
        let gates = &mut scratch.gates[..rows * cols];
        project(
            self.input,
            self.width,
            &self.packed.input_kmajor,
            cols,
            gates,
        );
        let recurrence = Recurrence {
            direction: self.direction,
            frames: self.shape.frames,
            hidden: self.shape.hidden,
            proj: gates,
            recurrent_kmajor: &self.packed.recurrent_kmajor,
            bias: &self.packed.bias,
        };
        recurrence.run(
            self.batch,
            &mut scratch.h,
            &mut scratch.c,
            &mut scratch.hseq[..rows * self.shape.hidden],
        );
    }
}

/// What the two-thread attempt of a layer came to.
enum Parallel {
    /// Both directions ran (or the worker panicked: the error).
    Done(Result<(), CpuError>),
    /// The OS refused a thread; nothing ran.
    SpawnFailed,
}

/// Runs both directions of `layer`: the reverse one on a scoped worker when `threads >= 2`,
/// else (or when no thread can be spawned) both on the calling thread. Same bits either way:
/// the two jobs share nothing they write.
fn run_layer(
    threads: usize,
    layer: usize,
    jobs: [DirectionJob<'_>; 2],
    scratch: &mut [DirectionScratch; 2],
) -> Result<(), CpuError> {
    let [fwd_scratch, rev_scratch] = scratch;
    let [fwd_job, rev_job] = jobs;
    if threads >= 2 {
        let outcome = thread::scope(|s| {
            let worker = thread::Builder::new()
                .name("bilstm-cpu-reverse".into())
                .spawn_scoped(s, || rev_job.run(rev_scratch));
            match worker {
                Ok(handle) => {
                    fwd_job.run(fwd_scratch);
                    Parallel::Done(handle.join().map_err(|_| CpuError::WorkerPanicked {
                        layer,
                        direction: Direction::Reverse,
                    }))
                }
                Err(_) => Parallel::SpawnFailed,
            }
        });
        if let Parallel::Done(result) = outcome {
            return result;
        }
    }
    fwd_job.run(fwd_scratch);
    rev_job.run(rev_scratch);
    Ok(())
}

/// Interleaves the two directions' hidden sequences into `[rows, 2H]`: forward units first.
fn merge(forward: &[f32], reverse: &[f32], hidden: usize, out: &mut [f32]) {
    for ((row, f), r) in out
        .chunks_exact_mut(2 * hidden)
        .zip(forward.chunks_exact(hidden))
        .zip(reverse.chunks_exact(hidden))
    {
        let (left, right) = row.split_at_mut(hidden);
        left.copy_from_slice(f);
        right.copy_from_slice(r);
    }
}

impl Backend for CpuBackend {
    type Error = CpuError;

    fn name(&self) -> &'static str {
        "cpu"
    }

    /// Validates the shape and weights, packs the weights (K-major input and recurrent
    /// matrices, combined bias) and allocates every buffer for `config.max_batch` windows.
    /// [`bilstm_core::MathMode::Tf32`] is accepted and runs FP32 ([crate docs](crate)).
    ///
    /// On error the previous preparation, if any, is kept unchanged.
    ///
    /// # Errors
    /// [`CpuError::Core`] with [`CoreError::Unsupported`] for a shape this version cannot run,
    /// [`CoreError::Shape`] for weights of another shape than `config.shape`,
    /// [`CoreError::NonFiniteWeight`] naming the first NaN or infinite weight,
    /// [`CoreError::Overflow`] for sizes beyond `usize`; [`CpuError::Allocation`] when host
    /// memory runs out.
    fn prepare(
        &mut self,
        weights: &StackWeights<'_>,
        config: &BackendConfig,
    ) -> Result<(), CpuError> {
        let shape = config.shape;
        shape.validate()?;
        weights.validate(&shape)?;
        let mut layers = Vec::with_capacity(shape.layers);
        for layer in 0..shape.layers {
            layers.push([
                Self::pack_direction(&shape, weights, layer, Direction::Forward)?,
                Self::pack_direction(&shape, weights, layer, Direction::Reverse)?,
            ]);
        }
        let scratch = [
            Self::scratch(&shape, config.max_batch)?,
            Self::scratch(&shape, config.max_batch)?,
        ];
        let layer_out = zeroed(shape.output_len(config.max_batch)?, "layer output")?;
        self.prepared = Some(Prepared {
            config: *config,
            layers,
            scratch,
            layer_out,
        });
        Ok(())
    }

    /// Runs the stack on `batch` windows (see [`Backend::forward`]); every value of `output`
    /// is written. Allocates nothing; with two threads, spawns one scoped worker per layer.
    ///
    /// # Errors
    /// [`CpuError::Core`] with, checked in this order: [`CoreError::NotPrepared`];
    /// [`CoreError::Shape`] (`"input length"`, then `"output length"`) when a length is not
    /// `batch * frames * 60` or `batch * frames * 256`; [`CoreError::BatchTooLarge`] for
    /// `batch > max_batch`. [`CpuError::WorkerPanicked`] only for a bug.
    fn forward(&mut self, input: &[f32], batch: usize, output: &mut [f32]) -> Result<(), CpuError> {
        let threads = self.threads;
        let prepared = self.prepared.as_mut().ok_or(CoreError::NotPrepared)?;
        let shape = prepared.config.shape;
        shape.check_io(batch, input.len(), output.len())?;
        if batch > prepared.config.max_batch {
            return Err(CoreError::BatchTooLarge {
                batch,
                max: prepared.config.max_batch,
            }
            .into());
        }
        if batch == 0 {
            return Ok(());
        }
        let rows = batch * shape.frames;
        let hidden = shape.hidden;
        let layer_out = &mut prepared.layer_out[..rows * shape.output_width()];
        for (layer, packed) in prepared.layers.iter().enumerate() {
            let width = shape.layer_input_width(layer);
            let layer_input: &[f32] = if layer == 0 { input } else { &*layer_out };
            let job = |direction: Direction| DirectionJob {
                direction,
                shape: &shape,
                batch,
                input: layer_input,
                width,
                packed: &packed[direction.index()],
            };
            run_layer(
                threads,
                layer,
                [job(Direction::Forward), job(Direction::Reverse)],
                &mut prepared.scratch,
            )?;
            let [fwd, rev] = &prepared.scratch;
            let dst: &mut [f32] = if layer + 1 == shape.layers {
                &mut *output
            } else {
                &mut *layer_out
            };
            merge(
                &fwd.hseq[..rows * hidden],
                &rev.hseq[..rows * hidden],
                hidden,
                dst,
            );
        }
        Ok(())
    }

    fn config(&self) -> Option<&BackendConfig> {
        self.prepared.as_ref().map(|p| &p.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_counts_are_clamped() {
        assert_eq!(CpuBackend::with_threads(0).threads(), 1);
        assert_eq!(CpuBackend::with_threads(1).threads(), 1);
        assert_eq!(CpuBackend::with_threads(7).threads(), 2);
        assert!((1..=MAX_THREADS).contains(&CpuBackend::new().threads()));
        assert_eq!(CpuBackend::default().name(), "cpu");
        assert!(CpuBackend::default().config().is_none());
    }

    #[test]
    fn merge_puts_forward_units_first() {
        let f = [1.0, 2.0, 3.0, 4.0];
        let r = [5.0, 6.0, 7.0, 8.0];
        let mut out = [0.0; 8];
        merge(&f, &r, 2, &mut out);
        assert_eq!(out, [1.0, 2.0, 5.0, 6.0, 3.0, 4.0, 7.0, 8.0]);
    }

    #[test]
    fn allocation_failure_is_an_error() {
        assert!(matches!(
            zeroed(usize::MAX / 2, "x"),
            Err(CpuError::Allocation { what: "x", .. })
        ));
    }
}
