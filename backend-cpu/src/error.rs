//! [`CpuError`]: what can go wrong in the CPU backend, and its [`ErrorKind`].

use bilstm_core::{BackendError, CoreError, Direction, ErrorKind};

/// Errors of the CPU backend.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CpuError {
    /// A check in core failed: wrong lengths, a batch above the prepared maximum, forward
    /// before prepare, weights of the wrong shape or with non-finite values, a shape this
    /// version cannot run, a size overflow. Its kind is the core error's kind.
    #[error(transparent)]
    Core(#[from] CoreError),
    /// Host memory for a prepared buffer could not be reserved (kind
    /// [`ErrorKind::Device`]: the CPU's memory is this backend's device memory).
    #[error("could not allocate {bytes} bytes for {what}")]
    Allocation {
        /// The buffer (`"projection gates"`, ...).
        what: &'static str,
        /// Its size in bytes (saturated at `usize::MAX`).
        bytes: usize,
    },
    /// The worker thread running one direction panicked: a bug in bilstm (kind
    /// [`ErrorKind::Internal`]). The output is unspecified; the backend stays usable.
    #[error("the worker thread running layer {layer} {direction} panicked")]
    WorkerPanicked {
        /// Layer index, from 0.
        layer: usize,
        /// The direction the worker ran.
        direction: Direction,
    },
}

impl BackendError for CpuError {
    fn kind(&self) -> ErrorKind {
        match self {
            CpuError::Core(e) => e.kind(),
            CpuError::Allocation { .. } => ErrorKind::Device,
            CpuError::WorkerPanicked { .. } => ErrorKind::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_messages() {
        let e = CpuError::from(CoreError::BatchTooLarge { batch: 9, max: 8 });
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert_eq!(e.to_string(), "batch 9 exceeds the prepared maximum 8");
        let e = CpuError::Allocation {
            what: "projection gates",
            bytes: 1 << 40,
        };
        assert_eq!(e.kind(), ErrorKind::Device);
        assert_eq!(
            e.to_string(),
            "could not allocate 1099511627776 bytes for projection gates"
        );
        let e = CpuError::WorkerPanicked {
            layer: 2,
            direction: Direction::Reverse,
        };
        assert_eq!(e.kind(), ErrorKind::Internal);
        assert_eq!(
            e.to_string(),
            "the worker thread running layer 2 reverse panicked"
        );
        let unsupported = CoreError::Unsupported {
            what: "hidden size",
            value: 64,
            reason: "x",
        };
        assert_eq!(CpuError::from(unsupported).kind(), ErrorKind::Unsupported);
    }
}
