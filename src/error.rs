//! [`Error`]: the facade's error, wrapping each crate's own.

use bilstm_core::{BackendError, CoreError, ErrorKind};
use bilstm_cpu::CpuError;

/// Any bilstm error. [`BackendError::kind`] says what kind of failure it is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Shapes, weights, sizes, plans.
    #[error(transparent)]
    Core(#[from] CoreError),
    /// The CPU backend.
    #[error(transparent)]
    Cpu(#[from] CpuError),
    /// The CUDA backend.
    #[cfg(feature = "cuda")]
    #[error(transparent)]
    Cuda(#[from] bilstm_cuda::CudaError),
    /// A model file could not be loaded ([`crate::model`]). Boxed: the error names files,
    /// nodes and tensors, and would otherwise make every `Result<_, Error>` large.
    #[error(transparent)]
    Model(#[from] Box<crate::model::ModelError>),
    /// CUDA was asked for but this build has no CUDA backend (the `cuda` feature is off).
    #[error("CUDA is unavailable: bilstm was built without the `cuda` feature")]
    CudaNotBuilt,
}

impl From<crate::model::ModelError> for Error {
    fn from(e: crate::model::ModelError) -> Self {
        Error::Model(Box::new(e))
    }
}

impl BackendError for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Core(e) => e.kind(),
            Error::Cpu(e) => e.kind(),
            #[cfg(feature = "cuda")]
            Error::Cuda(e) => e.kind(),
            Error::Model(e) => e.kind(),
            Error::CudaNotBuilt => ErrorKind::Unavailable,
        }
    }
}
