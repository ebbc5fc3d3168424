//! Graph capture: a forward pass on device buffers captured once in a CUDA graph
//! ([`CudaBackend::capture_forward_device`]) and replayed ([`CudaBackend::replay`]).

use bilstm_core::CoreError;
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, CudaSlice};

use crate::backend::CudaBackend;
use crate::buffers::span;
use crate::error::CudaError;
use crate::launch::Span;
use crate::summary::ForwardSummary;

/// A forward pass captured in a CUDA graph ([`CudaBackend::capture_forward_device`]), with
/// the device buffers it reads and writes (the graph holds their addresses, so it owns them).
/// Replay it with [`CudaBackend::replay`] on the backend that captured it, while that backend
/// keeps the preparation it was captured under.
pub struct ForwardGraph {
    // Field order is drop order: the graph before the buffers it points at.
    graph: CudaGraph,
    summary: ForwardSummary,
    preparation: u64,
    input: CudaSlice<f32>,
    output: CudaSlice<f32>,
}

impl std::fmt::Debug for ForwardGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // cudarc's graph handle has no Debug.
        f.debug_struct("ForwardGraph")
            .field("summary", &self.summary)
            .field("preparation", &self.preparation)
            .field("input", &self.input)
            .field("output", &self.output)
            .finish_non_exhaustive()
    }
}

impl ForwardGraph {
    /// What the captured pass runs.
    pub fn summary(&self) -> &ForwardSummary {
        &self.summary
    }

    /// The input buffer the graph reads (its first `batch * frames * features` values).
    pub fn input(&self) -> &CudaSlice<f32> {
        &self.input
    }

    /// The input buffer, to write the next replay's input into (on the backend's stream, or
    /// synchronised before the replay).
    pub fn input_mut(&mut self) -> &mut CudaSlice<f32> {
        &mut self.input
    }

    /// The output buffer the graph writes (its first `batch * frames * 256` values).
    pub fn output(&self) -> &CudaSlice<f32> {
        &self.output
    }

    /// Gives the buffers back, dropping the graph.
    pub fn into_buffers(self) -> (CudaSlice<f32>, CudaSlice<f32>) {
        let ForwardGraph { input, output, .. } = self;
        (input, output)
    }
}

impl CudaBackend {
    /// Captures one [`CudaBackend::forward_device`] pass of `batch` windows into a CUDA graph
    /// (stream capture of the main stream, which forks to the side stream and joins back
    /// through events): the plan, launches and addresses are fixed at capture time, and the
    /// graph owns `input` and `output`. Nothing runs until [`CudaBackend::replay`].
    ///
    /// # Errors
    /// As [`CudaBackend::forward_device`] (the buffers are dropped with the error), plus
    /// [`CoreError::Unsupported`] for batch 0 (an empty pass enqueues nothing) and
    /// [`CudaError::Driver`] when the driver refuses the capture or the instantiation.
    pub fn capture_forward_device(
        &mut self,
        input: CudaSlice<f32>,
        batch: usize,
        output: CudaSlice<f32>,
    ) -> Result<ForwardGraph, CudaError> {
        let (plan, out_len) = self.check_device_io(&input, batch, &output)?;
        if batch == 0 {
            return Err(CoreError::Unsupported {
                what: "graph capture of batch",
                value: 0,
                reason: "an empty batch enqueues nothing",
            }
            .into());
        }
        let preparation = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?.id;
        let main = self.device.main.clone();
        // Earlier work on the stream stays outside the graph.
        main.synchronize()
            .map_err(CudaError::driver("finishing work before a capture"))?;
        let in_span = span(&input, &main);
        let out_span = Span {
            addr: span(&output, &main).addr,
            len: out_len,
        };
        main.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(CudaError::driver("beginning a stream capture"))?;
        let enqueued = self.enqueue(&plan, in_span, Some(out_span));
        // The capture always ends, so the stream leaves capture mode whatever happened.
        let ended = main.end_capture(CUgraphInstantiate_flags(0));
        enqueued.inspect_err(|_| self.drain())?;
        let graph = ended
            .map_err(CudaError::driver("ending a stream capture"))?
            .ok_or_else(|| CudaError::Internal {
                what: "the stream capture produced no graph".into(),
            })?;
        Ok(ForwardGraph {
            graph,
            summary: ForwardSummary::of(plan),
            preparation,
            input,
            output,
        })
    }

    /// Runs a captured pass once and waits for it; after the graph ran, the error words are
    /// checked as after any forward pass.
    ///
    /// # Errors
    /// [`CudaError::Internal`] when the graph was captured by another backend or preparation;
    /// [`CudaError::Driver`] when the launch fails; [`CudaError::PartnerLost`].
    pub fn replay(&mut self, graph: &ForwardGraph) -> Result<(), CudaError> {
        let st = self.prepared.as_ref().ok_or(CoreError::NotPrepared)?;
        if st.id != graph.preparation {
            return Err(CudaError::Internal {
                what: "the graph was captured under another preparation (its buffers are gone)"
                    .into(),
            });
        }
        graph
            .graph
            .launch()
            .map_err(CudaError::driver("launching a captured forward pass"))
            .inspect_err(|_| self.drain())?;
        self.finish(graph.summary)
    }
}
