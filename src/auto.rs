//! [`Auto`]: CUDA when a usable driver and GPU are present, else the CPU, and it says which.

use core::fmt;

use bilstm_core::{Backend, BackendConfig, BackendError, ErrorKind, StackWeights};
use bilstm_cpu::CpuBackend;

use crate::Error;

/// Which backend runs: the facade's backends by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackendKind {
    /// [`CpuBackend`].
    Cpu,
    /// The CUDA backend (`bilstm::CudaBackend` with the `cuda` feature).
    Cuda,
}

impl BackendKind {
    /// `"cpu"` or `"cuda"`: the name [`Backend::name`] returns.
    pub const fn as_str(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
        }
    }
}

/// Compares with a name (`kind == "cpu"`), as the `&str` this type replaced did.
impl PartialEq<&str> for BackendKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which backend [`Auto`] runs on, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// CUDA or the CPU.
    pub backend: BackendKind,
    /// Why: the GPU found, or why CUDA was not usable.
    pub reason: String,
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.backend, self.reason)
    }
}

enum Inner {
    #[cfg(feature = "cuda")]
    Cuda(Box<bilstm_cuda::CudaBackend>),
    Cpu(Box<CpuBackend>),
}

/// A backend chosen at run time: CUDA when usable, else the CPU.
///
/// Falls back to the CPU only when CUDA is [`ErrorKind::Unavailable`] (no driver, no GPU, no
/// NVRTC, a build without the `cuda` feature) — at construction or at the first
/// [`Backend::prepare`]. Every other failure reaches the caller. [`Auto::selection`] says
/// which backend runs and why.
pub struct Auto {
    inner: Inner,
    selection: Selection,
}

impl Auto {
    /// Prefers CUDA (device 0); falls back to the CPU when CUDA is unavailable.
    ///
    /// # Errors
    /// A CUDA failure of any kind other than [`ErrorKind::Unavailable`] (a driver error on a
    /// present GPU, say).
    pub fn new() -> Result<Self, Error> {
        Self::try_cuda()
    }

    /// The CPU backend, whatever hardware is present.
    pub fn cpu() -> Self {
        Auto {
            inner: Inner::Cpu(Box::new(CpuBackend::new())),
            selection: Selection {
                backend: BackendKind::Cpu,
                reason: "asked for the CPU".into(),
            },
        }
    }

    /// The CUDA backend on device 0, with no fallback.
    ///
    /// # Errors
    /// Every CUDA failure, [`Error::CudaNotBuilt`] without the `cuda` feature.
    pub fn cuda() -> Result<Self, Error> {
        Self::cuda_on(0)
    }

    /// The CUDA backend on GPU `ordinal` (0 for the first), with no fallback.
    ///
    /// # Errors
    /// Every CUDA failure (an ordinal past the last GPU included), [`Error::CudaNotBuilt`]
    /// without the `cuda` feature.
    pub fn cuda_on(ordinal: usize) -> Result<Self, Error> {
        #[cfg(feature = "cuda")]
        {
            let backend = bilstm_cuda::CudaBackend::new(ordinal)?;
            let reason = backend.describe();
            Ok(Auto {
                inner: Inner::Cuda(Box::new(backend)),
                selection: Selection {
                    backend: BackendKind::Cuda,
                    reason,
                },
            })
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = ordinal;
            Err(Error::CudaNotBuilt)
        }
    }

    fn try_cuda() -> Result<Self, Error> {
        match Self::cuda() {
            Ok(auto) => Ok(auto),
            Err(e) if e.kind() == ErrorKind::Unavailable => Ok(Self::fallback(&e)),
            Err(e) => Err(e),
        }
    }

    fn fallback(why: &Error) -> Self {
        Auto {
            inner: Inner::Cpu(Box::new(CpuBackend::new())),
            selection: Selection {
                backend: BackendKind::Cpu,
                reason: format!("CUDA unavailable: {why}"),
            },
        }
    }

    /// Which backend runs, and why.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// The CUDA backend itself when CUDA runs (for its own API: plans, device memory passes
    /// such as `forward_foreign`); `None` on the CPU.
    #[cfg(feature = "cuda")]
    pub fn cuda_backend(&self) -> Option<&bilstm_cuda::CudaBackend> {
        match &self.inner {
            Inner::Cuda(cuda) => Some(cuda),
            Inner::Cpu(_) => None,
        }
    }

    /// The CUDA backend itself, mutably, when CUDA runs; `None` on the CPU.
    #[cfg(feature = "cuda")]
    pub fn cuda_backend_mut(&mut self) -> Option<&mut bilstm_cuda::CudaBackend> {
        match &mut self.inner {
            Inner::Cuda(cuda) => Some(cuda),
            Inner::Cpu(_) => None,
        }
    }

    /// The CPU backend, when that is what runs.
    pub fn as_cpu(&self) -> Option<&CpuBackend> {
        match &self.inner {
            Inner::Cpu(cpu) => Some(cpu),
            #[cfg(feature = "cuda")]
            Inner::Cuda(_) => None,
        }
    }

    /// The CUDA backend, when that is what runs (its plan, device and timing API).
    #[cfg(feature = "cuda")]
    pub fn as_cuda(&self) -> Option<&bilstm_cuda::CudaBackend> {
        match &self.inner {
            Inner::Cuda(cuda) => Some(cuda),
            Inner::Cpu(_) => None,
        }
    }

    /// The CUDA backend, mutably, when that is what runs.
    #[cfg(feature = "cuda")]
    pub fn as_cuda_mut(&mut self) -> Option<&mut bilstm_cuda::CudaBackend> {
        match &mut self.inner {
            Inner::Cuda(cuda) => Some(cuda),
            Inner::Cpu(_) => None,
        }
    }
}

impl Backend for Auto {
    type Error = Error;

    fn name(&self) -> &'static str {
        self.selection.backend.as_str()
    }

    fn prepare(&mut self, weights: &StackWeights<'_>, config: &BackendConfig) -> Result<(), Error> {
        match &mut self.inner {
            #[cfg(feature = "cuda")]
            Inner::Cuda(cuda) => match cuda.prepare(weights, config) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == ErrorKind::Unavailable => {
                    *self = Self::fallback(&Error::Cuda(e));
                    self.prepare(weights, config)
                }
                Err(e) => Err(e.into()),
            },
            Inner::Cpu(cpu) => cpu.prepare(weights, config).map_err(Error::from),
        }
    }

    fn forward(&mut self, input: &[f32], batch: usize, output: &mut [f32]) -> Result<(), Error> {
        match &mut self.inner {
            #[cfg(feature = "cuda")]
            Inner::Cuda(cuda) => cuda.forward(input, batch, output).map_err(Error::from),
            Inner::Cpu(cpu) => cpu.forward(input, batch, output).map_err(Error::from),
        }
    }

    fn forward_with_state(
        &mut self,
        input: &[f32],
        batch: usize,
        output: &mut [f32],
        h_n: &mut [f32],
        c_n: &mut [f32],
    ) -> Result<(), Error> {
        match &mut self.inner {
            #[cfg(feature = "cuda")]
            Inner::Cuda(cuda) => cuda
                .forward_with_state(input, batch, output, h_n, c_n)
                .map_err(Error::from),
            Inner::Cpu(cpu) => cpu
                .forward_with_state(input, batch, output, h_n, c_n)
                .map_err(Error::from),
        }
    }

    fn config(&self) -> Option<&BackendConfig> {
        match &self.inner {
            #[cfg(feature = "cuda")]
            Inner::Cuda(cuda) => cuda.config(),
            Inner::Cpu(cpu) => cpu.config(),
        }
    }
}
