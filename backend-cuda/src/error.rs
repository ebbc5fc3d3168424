//! [`CudaError`]: everything the CUDA backend can fail with, and its [`ErrorKind`].

use bilstm_core::{BackendError, CoreError, Direction, ErrorKind};
use cudarc::driver::DriverError;

/// An error of the CUDA backend.
///
/// Each variant says what was being done; [`BackendError::kind`] maps it onto the shared
/// [`ErrorKind`] (`Auto` falls back to the CPU on [`ErrorKind::Unavailable`] only).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CudaError {
    /// A shape, weight, size or plan error from the core crate (mostly
    /// [`ErrorKind::InvalidInput`]).
    #[error(transparent)]
    Core(#[from] CoreError),
    /// No usable CUDA here: no driver library, no GPU, no NVRTC library, or a library that
    /// could not be loaded. Kind [`ErrorKind::Unavailable`].
    #[error("CUDA is unavailable: {reason}")]
    Unavailable {
        /// What is missing.
        reason: String,
    },
    /// The device lacks something bilstm needs (compute capability 7.0, cooperative launch).
    /// Kind [`ErrorKind::Unsupported`].
    #[error("the device does not support {what}: {reason}")]
    Unsupported {
        /// The missing capability.
        what: &'static str,
        /// Details (the device's value).
        reason: String,
    },
    /// A CUDA driver call failed. Kind [`ErrorKind::Device`].
    #[error("CUDA driver error while {what}: {source}")]
    Driver {
        /// What was being done.
        what: &'static str,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// NVRTC rejected a kernel source. Kind [`ErrorKind::Unavailable`]: the installed NVRTC
    /// cannot build bilstm's kernels for this device, so the GPU cannot be used.
    #[error("NVRTC failed to compile {kernel} (options {options:?}):\n{log}")]
    Compile {
        /// The source file (`"recurrence_wide.cu"`).
        kernel: &'static str,
        /// The NVRTC options used.
        options: Vec<String>,
        /// NVRTC's log (or the NVRTC error when there is no log).
        log: String,
    },
    /// The driver refused a kernel launch (for a cooperative kernel, typically a grid larger
    /// than the device holds at once). Kind [`ErrorKind::Device`].
    #[error("launch of {kernel} failed: {source}")]
    Launch {
        /// The kernel's entry point.
        kernel: &'static str,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// A buffer handed to [`crate::CudaBackend::forward_foreign`] is not what the pass needs
    /// (not device memory of this GPU, too short, misaligned, overlapping). Kind
    /// [`ErrorKind::InvalidInput`].
    #[error("foreign buffer {what}: {problem}")]
    Foreign {
        /// Which buffer (`"input"`, `"output"`, `"h_n"`, `"c_n"`).
        what: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// A launch's arguments broke the kernel's contract (checked before launching). A bug in
    /// bilstm: kind [`ErrorKind::Internal`].
    #[error("launch of {kernel} refused: {what} (needed {needed}, have {have})")]
    Contract {
        /// The kernel's entry point.
        kernel: &'static str,
        /// The broken precondition.
        what: &'static str,
        /// What the contract needs.
        needed: u64,
        /// What the launch had.
        have: u64,
    },
    /// A block of a cooperative recurrence waited longer than the spin timeout for a partner
    /// block's hidden state (the partner was never scheduled or died); the kernel stopped
    /// instead of hanging. Kind [`ErrorKind::Timeout`].
    #[error("{kernel}: a partner block never published (layer {layer}, {direction}, step {step})")]
    PartnerLost {
        /// The kernel's entry point.
        kernel: &'static str,
        /// The layer that was running.
        layer: usize,
        /// Its direction.
        direction: Direction,
        /// The step the block waited at.
        step: usize,
    },
    /// A kernel reported an error code this version does not know. Kind
    /// [`ErrorKind::Internal`].
    #[error("{kernel} reported unknown error code {code}")]
    KernelReport {
        /// The kernel's entry point.
        kernel: &'static str,
        /// The code in `error[0]`.
        code: i32,
    },
    /// The core occupancy calculator and the driver disagree about a compiled kernel. Kind
    /// [`ErrorKind::Internal`] (core's rules or the kernel's usage figures are wrong).
    #[error("occupancy of {kernel}: core computes {core} blocks per SM, the driver {driver}")]
    OccupancyMismatch {
        /// The kernel's entry point.
        kernel: &'static str,
        /// `bilstm_core::occupancy::blocks_per_sm`.
        core: u32,
        /// `cuOccupancyMaxActiveBlocksPerMultiprocessor`.
        driver: u32,
    },
    /// A device buffer passed to `forward_device` is too short or lives in another context.
    /// Kind [`ErrorKind::InvalidInput`].
    #[error("device buffer {what}: {reason}")]
    DeviceBuffer {
        /// Which buffer (`"input"`, `"output"`).
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A setting named a value that does not exist (a measurement switch given an unknown
    /// name, say). Kind [`ErrorKind::InvalidInput`].
    #[error("{setting}: no such value {value:?} (expected {expected})")]
    UnknownSetting {
        /// The setting (`"fixed-point recurrence"`).
        setting: &'static str,
        /// The value given.
        value: String,
        /// The values it accepts.
        expected: &'static str,
    },
    /// An invariant of the backend did not hold. Kind [`ErrorKind::Internal`].
    #[error("internal error: {what}")]
    Internal {
        /// What went wrong.
        what: String,
    },
}

impl CudaError {
    /// A [`CudaError::Driver`] for `what`.
    pub(crate) fn driver(what: &'static str) -> impl FnOnce(DriverError) -> CudaError {
        move |source| CudaError::Driver { what, source }
    }
}

impl BackendError for CudaError {
    fn kind(&self) -> ErrorKind {
        match self {
            CudaError::Core(e) => e.kind(),
            CudaError::Unavailable { .. } | CudaError::Compile { .. } => ErrorKind::Unavailable,
            CudaError::Unsupported { .. } => ErrorKind::Unsupported,
            CudaError::Driver { .. } | CudaError::Launch { .. } => ErrorKind::Device,
            CudaError::PartnerLost { .. } => ErrorKind::Timeout,
            CudaError::DeviceBuffer { .. }
            | CudaError::Foreign { .. }
            | CudaError::UnknownSetting { .. } => ErrorKind::InvalidInput,
            CudaError::Contract { .. }
            | CudaError::KernelReport { .. }
            | CudaError::OccupancyMismatch { .. }
            | CudaError::Internal { .. } => ErrorKind::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let lost = CudaError::PartnerLost {
            kernel: "bilstm_recurrence_wide",
            layer: 2,
            direction: Direction::Reverse,
            step: 7,
        };
        assert_eq!(lost.kind(), ErrorKind::Timeout);
        let unknown = CudaError::UnknownSetting {
            setting: "fixed-point recurrence",
            value: "16".into(),
            expected: crate::backend::FIXED_RECURRENCE_NAMES,
        };
        assert_eq!(unknown.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            unknown.to_string(),
            "fixed-point recurrence: no such value \"16\" (expected 8, 8c2, 8c4, 1c2, 1c4, 1c8, 4, 4c2, 4c4, 4c8, 2c4, 2c8, auto or off)"
        );
        assert_eq!(
            lost.to_string(),
            "bilstm_recurrence_wide: a partner block never published (layer 2, reverse, step 7)"
        );
        assert_eq!(
            CudaError::Unavailable {
                reason: "no driver".into()
            }
            .kind(),
            ErrorKind::Unavailable
        );
        assert_eq!(
            CudaError::Compile {
                kernel: "clear.cu",
                options: vec![],
                log: String::new()
            }
            .kind(),
            ErrorKind::Unavailable
        );
        assert_eq!(
            CudaError::from(CoreError::NotPrepared).kind(),
            ErrorKind::InvalidInput
        );
        assert_eq!(
            CudaError::Unsupported {
                what: "cooperative launch",
                reason: "attribute is 0".into()
            }
            .kind(),
            ErrorKind::Unsupported
        );
    }
}
