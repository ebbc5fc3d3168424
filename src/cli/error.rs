//! [`CliError`]: everything a command can fail with, each printed as one `error: ...` line.

use std::io;

use crate::npy::NpyError;

/// Why a command failed. `Display` is the message printed after `error: `.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// The library refused or failed: a model file, weights, shapes, a backend (the CUDA
    /// message says why CUDA is unavailable). Boxed: the library's error is large.
    #[error(transparent)]
    Library(Box<crate::Error>),
    /// An `.npy` input or output.
    #[error(transparent)]
    Npy(#[from] NpyError),
    /// Input the stack cannot run, found after the file was read (a window of no frames).
    #[error("{0}")]
    Input(String),
    /// Writing results to stdout failed.
    #[error("cannot write to stdout: {0}")]
    Output(io::Error),
}

impl From<crate::Error> for CliError {
    fn from(e: crate::Error) -> Self {
        CliError::Library(Box::new(e))
    }
}

impl From<bilstm_core::CoreError> for CliError {
    fn from(e: bilstm_core::CoreError) -> Self {
        crate::Error::from(e).into()
    }
}

impl From<bilstm_cpu::CpuError> for CliError {
    fn from(e: bilstm_cpu::CpuError) -> Self {
        crate::Error::from(e).into()
    }
}

#[cfg(feature = "cuda")]
impl From<bilstm_cuda::CudaError> for CliError {
    fn from(e: bilstm_cuda::CudaError) -> Self {
        crate::Error::from(e).into()
    }
}

impl From<io::Error> for CliError {
    /// An I/O error without a path is a failed write of results to stdout (file I/O goes
    /// through [`NpyError`], which names the file).
    fn from(e: io::Error) -> Self {
        CliError::Output(e)
    }
}
