//! Errors of the core crate and the [`ErrorKind`] every bilstm error maps onto.
//!
//! As in embedded-hal, each crate keeps its own concrete error type (this crate's is
//! [`CoreError`]) and maps it onto the small shared [`ErrorKind`] through
//! [`BackendError::kind`]. Generic code matches on the kind; logs show the concrete error.

use core::fmt;

use crate::layout::Tensor;
use crate::shape::Direction;

/// What kind of failure an error is, shared by every bilstm crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller passed something wrong: a buffer of the wrong length, weights of the wrong
    /// shape or with non-finite values, a batch above the prepared maximum, a malformed file.
    InvalidInput,
    /// The request is well formed but this build, backend or device does not support it
    /// (a hidden size other than 128, a GPU without cooperative launch for a cooperative plan).
    Unsupported,
    /// The backend cannot run here at all: no CUDA driver, no GPU, no NVRTC. `Auto` falls back
    /// to the CPU on this kind only.
    Unavailable,
    /// The device or driver reported a failure while work was prepared or ran.
    Device,
    /// A bounded wait ended: a kernel's partner block never arrived.
    Timeout,
    /// A bug in bilstm: an invariant that should always hold did not.
    Internal,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::InvalidInput => "invalid input",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Device => "device error",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Internal => "internal error",
        })
    }
}

/// An error of any bilstm crate: a concrete error that says what happened, plus its kind.
pub trait BackendError: core::error::Error + Send + Sync + 'static {
    /// The kind of failure, for code that must decide what to do about it.
    fn kind(&self) -> ErrorKind;
}

/// Errors of the core crate: shapes, weights, sizes, plans and device facts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    /// A buffer or dimension has the wrong size.
    #[error("{what}: expected {expected}, got {got}")]
    Shape {
        /// What was being checked (`"input length"`, `"output length"`, ...).
        what: &'static str,
        /// The size that was required.
        expected: usize,
        /// The size that was found.
        got: usize,
    },
    /// A weight tensor has the wrong number of values.
    #[error("layer {layer} {direction} {tensor}: expected {expected} values, got {got}")]
    Weights {
        /// Layer index, from 0.
        layer: usize,
        /// Direction (for ONNX tensors, which hold both, the forward one).
        direction: Direction,
        /// The tensor, by its name in the source format.
        tensor: Tensor,
        /// The number of values required.
        expected: usize,
        /// The number of values found.
        got: usize,
    },
    /// The stack has a different number of layers than its shape says.
    #[error("weights hold {got} layers, the shape has {expected}")]
    LayerCount {
        /// Layers the shape has.
        expected: usize,
        /// Layers the weights hold.
        got: usize,
    },
    /// A weight is NaN or infinite; such a model is refused rather than run.
    #[error("layer {layer} {direction} {tensor}: value {index} is not finite ({value})")]
    NonFiniteWeight {
        /// Layer index, from 0.
        layer: usize,
        /// Direction.
        direction: Direction,
        /// The tensor, by its name in the source format.
        tensor: Tensor,
        /// Index of the offending value inside the tensor.
        index: usize,
        /// The value itself.
        value: f32,
    },
    /// A shape parameter this version does not support.
    #[error("unsupported {what} {value}: {reason}")]
    Unsupported {
        /// The parameter (`"hidden size"`, `"layer count"`, ...).
        what: &'static str,
        /// Its value.
        value: usize,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A batch larger than the one the backend was prepared for.
    #[error("batch {batch} exceeds the prepared maximum {max}")]
    BatchTooLarge {
        /// The batch asked for.
        batch: usize,
        /// The maximum batch the backend was prepared for.
        max: usize,
    },
    /// A size computation overflowed `usize`.
    #[error("size overflow computing {what}")]
    Overflow {
        /// What was being computed.
        what: &'static str,
    },
    /// No plan fits the device (for example no cooperative launch and no resident kernel).
    #[error("no plan fits the device: {reason}")]
    NoPlan {
        /// Why nothing fits.
        reason: &'static str,
    },
    /// A choice forced through plan overrides cannot run on this device or in this math mode
    /// (a resident recurrence whose shared memory does not fit, a TF32 projection in FP32 mode).
    #[error("forced {what} cannot run: {reason}")]
    ForcedChoice {
        /// What was forced (`"resident recurrence"`, `"tf32 projection"`).
        what: &'static str,
        /// Why it cannot run.
        reason: &'static str,
    },
    /// The device query failed.
    #[error("device query failed: {reason}")]
    DeviceQuery {
        /// What the query reported.
        reason: &'static str,
    },
    /// `forward` was called before `prepare`.
    #[error("the backend has not been prepared: call prepare first")]
    NotPrepared,
    /// A preparation for batches up to `max_batch` needs more device memory than is free
    /// (with `crate::memory::DRIVER_RESERVE_BYTES` left to the driver).
    #[error(
        "batches up to {max_batch} windows need {needed_mib} MiB of device memory but {free_mib} MiB \
         are free: prepare for at most {fits} windows (or run the batch in chunks)"
    )]
    DeviceMemory {
        /// The batch asked for.
        max_batch: usize,
        /// MiB the preparation needs (rounded up).
        needed_mib: u64,
        /// MiB free on the device (rounded down).
        free_mib: u64,
        /// The largest batch that fits (0: not even one window).
        fits: usize,
    },
}

impl BackendError for CoreError {
    fn kind(&self) -> ErrorKind {
        match self {
            CoreError::Shape { .. }
            | CoreError::Weights { .. }
            | CoreError::LayerCount { .. }
            | CoreError::NonFiniteWeight { .. }
            | CoreError::BatchTooLarge { .. }
            | CoreError::DeviceMemory { .. }
            | CoreError::NotPrepared => ErrorKind::InvalidInput,
            CoreError::Unsupported { .. }
            | CoreError::NoPlan { .. }
            | CoreError::ForcedChoice { .. } => ErrorKind::Unsupported,
            CoreError::Overflow { .. } => ErrorKind::InvalidInput,
            CoreError::DeviceQuery { .. } => ErrorKind::Device,
        }
    }
}

/// `a * b`, or [`CoreError::Overflow`] naming `what`.
pub fn checked_mul(a: usize, b: usize, what: &'static str) -> Result<usize, CoreError> {
    a.checked_mul(b).ok_or(CoreError::Overflow { what })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_problem() {
        let e = CoreError::Weights {
            layer: 2,
            direction: Direction::Reverse,
            tensor: Tensor::WeightHh,
            expected: 65536,
            got: 65535,
        };
        assert_eq!(
            e.to_string(),
            "layer 2 reverse weight_hh: expected 65536 values, got 65535"
        );
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            CoreError::Unsupported {
                what: "hidden size",
                value: 64,
                reason: "only 128 is built"
            }
            .kind(),
            ErrorKind::Unsupported
        );
    }

    #[test]
    fn checked_mul_reports_overflow() {
        assert_eq!(checked_mul(3, 4, "x"), Ok(12));
        assert_eq!(
            checked_mul(usize::MAX, 2, "input length"),
            Err(CoreError::Overflow {
                what: "input length"
            })
        );
    }
}
