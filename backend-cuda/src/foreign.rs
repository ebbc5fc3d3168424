//! A forward pass on device memory someone else owns (PyTorch tensors handed over by address,
//! DLPack-style), ordered with that owner's stream: [`CudaBackend::forward_foreign`].
//!
//! # Contract
//! - Every address is checked with the driver before any work is queued: device memory of this
//!   backend's GPU (the same device ordinal, current context) with at least the bytes the pass
//!   reads or writes from it. A host address, another GPU's memory or a short buffer is
//!   [`CudaError::Foreign`]; nothing runs.
//! - Ordering: the pass starts after everything already queued on the caller's stream (an event
//!   recorded there, waited on by the backend's main stream) and has finished when the call
//!   returns (the main stream is synchronised, which also lets a lost partner be reported), so
//!   anything the caller queues later sees the results.
//! - The output bits equal [`bilstm_core::Backend::forward`]'s for the same input; the final
//!   states those of [`bilstm_core::Backend::forward_with_state`]. The kernels read the input
//!   and write the output and the final states in place: nothing is copied.

use bilstm_core::{CoreError, error::checked_mul};

use crate::backend::CudaBackend;
use crate::error::CudaError;
use crate::launch::{self, Span};
use crate::pass::Region;
use crate::summary::ForwardSummary;

/// Device buffers owned by the caller, as device addresses on this backend's GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForeignBuffers {
    /// The stack input `[batch, frames, features]` f32, row-major.
    pub input: u64,
    /// The stack output `[batch, frames, 2 * hidden]` f32, row-major; must not overlap `input`.
    pub output: u64,
    /// The final hidden states `[layers * 2, batch, hidden]` f32, or 0 for none.
    pub h_n: u64,
    /// The final cell states, laid out as `h_n`, or 0 for none.
    pub c_n: u64,
}

/// Bytes of an f32.
const F32_BYTES: usize = 4;

impl CudaBackend {
    /// The GPU's ordinal (0 for the first).
    pub fn device_ordinal(&self) -> usize {
        self.device().ordinal
    }

    /// Runs `batch` windows from `bufs.input` to `bufs.output` (and the final states into
    /// `bufs.h_n` / `bufs.c_n` when not 0), all device memory of this GPU owned by the caller,
    /// after the work already queued on `stream` (a `CUstream` handle as an integer, such as
    /// PyTorch's `torch.cuda.current_stream().cuda_stream`; 0 for the legacy default stream).
    /// Returns when the pass is done. See the [module docs](self) for the contract.
    ///
    /// # Errors
    /// [`CudaError::Foreign`] for an address the driver does not place in this GPU's device
    /// memory with room for what the pass touches, or overlapping input and output;
    /// [`CoreError::NotPrepared`], [`CoreError::BatchTooLarge`], [`CoreError::Overflow`];
    /// then the errors of a forward pass ([`CudaError::PartnerLost`], driver errors).
    ///
    /// # Safety
    /// `stream` must be 0 or a live `CUstream` of this GPU's primary context (what PyTorch's
    /// streams on this device are): the driver cannot tell a destroyed handle from a live one.
    /// The buffers must stay allocated, and not be written by anyone else, until this returns.
    pub unsafe fn forward_foreign(
        &mut self,
        bufs: &ForeignBuffers,
        batch: usize,
        stream: u64,
    ) -> Result<(), CudaError> {
        let config = *bilstm_core::Backend::config(self).ok_or(CoreError::NotPrepared)?;
        let shape = config.shape;
        if batch > config.max_batch {
            return Err(CoreError::BatchTooLarge {
                batch,
                max: config.max_batch,
            }
            .into());
        }
        if batch == 0 {
            return Ok(());
        }
        let input_len = shape.input_len(batch)?;
        let output_len = shape.output_len(batch)?;
        let state_len = shape.state_len(batch)?;
        let main = self.stream().clone();
        main.context()
            .bind_to_thread()
            .map_err(CudaError::driver("binding the context"))?;
        let ordinal = self.device_ordinal();
        let check = |what: &'static str, address: u64, len: usize| -> Result<Span, CudaError> {
            let bytes = checked_mul(len, F32_BYTES, "foreign buffer bytes")?;
            let info = launch::sys::pointer_info(address).map_err(|e| CudaError::Foreign {
                what,
                problem: format!("the driver does not know address {address:#x} ({e})"),
            })?;
            if !info.device_memory || usize::try_from(info.ordinal).ok() != Some(ordinal) {
                return Err(CudaError::Foreign {
                    what,
                    problem: format!(
                        "address {address:#x} is not device memory of GPU {ordinal} (device {})",
                        info.ordinal
                    ),
                });
            }
            if info.bytes_left < bytes as u64 || !address.is_multiple_of(4) {
                return Err(CudaError::Foreign {
                    what,
                    problem: format!(
                        "{bytes} bytes needed from {address:#x}, its allocation holds {}",
                        info.bytes_left
                    ),
                });
            }
            Ok(Span { addr: address, len })
        };
        let input = check("input", bufs.input, input_len)?;
        let output = check("output", bufs.output, output_len)?;
        let overlap = |a: Span, b: Span| {
            let (a_end, b_end) = (
                a.addr + (a.len * F32_BYTES) as u64,
                b.addr + (b.len * F32_BYTES) as u64,
            );
            a.addr < b_end && b.addr < a_end
        };
        if overlap(input, output) {
            return Err(CudaError::Foreign {
                what: "output",
                problem: "overlaps the input".into(),
            });
        }
        let state = match (bufs.h_n, bufs.c_n) {
            (0, 0) => None,
            (h, c) if h != 0 && c != 0 => {
                Some((check("h_n", h, state_len)?, check("c_n", c, state_len)?))
            }
            _ => {
                return Err(CudaError::Foreign {
                    what: "h_n / c_n",
                    problem: "give both final-state buffers or neither".into(),
                });
            }
        };
        let plan = self.plan(batch)?;
        let joined = self.foreign_event()?;
        // SAFETY: `stream` is 0 or a live CUstream of this context (this function's # Safety);
        // the event is the backend's own, alive for the backend's life.
        unsafe { launch::sys::record_on_raw_stream(joined, stream) }.map_err(CudaError::driver(
            "recording an event on the caller's stream",
        ))?;
        main.wait(joined)
            .map_err(CudaError::driver("waiting for the caller's stream"))?;
        // The kernels write the final states straight into the caller's h_n / c_n (no copy).
        self.enqueue_with_states(&plan, input, Some(output), state, Region::WHOLE)
            .inspect_err(|_| self.drain())?;
        self.finish(ForwardSummary::of(plan))
    }
}
