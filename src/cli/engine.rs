//! The backend a command runs on: the CPU or the CUDA backend, chosen by `--backend`.
//!
//! `auto` follows [`crate::Auto`]'s rule exactly: CUDA on GPU 0 when it opens and prepares,
//! the CPU when CUDA is [`ErrorKind::Unavailable`] (no driver, no GPU, no NVRTC, a build
//! without the `cuda` feature), any other CUDA failure reported. The command line keeps the
//! chosen backend as itself rather than behind `Auto`, because `run` prints the CUDA plan and
//! `bench` times passes with device events, both through the CUDA backend's own API. The
//! [`Selection`] says which backend runs and why (`cuda (NVIDIA H200 (device 0, ...))`,
//! `cpu (asked for the CPU)`, `cpu (no usable GPU: CUDA is unavailable: ...)`).

use bilstm_core::{Backend, BackendConfig, BackendError, ErrorKind, StackWeights};
use bilstm_cpu::CpuBackend;

use super::{BackendChoice, CliError};
use crate::Selection;

/// The backend itself.
pub(crate) enum Engine {
    /// The CPU backend.
    Cpu(Box<CpuBackend>),
    /// The CUDA backend on GPU 0.
    #[cfg(feature = "cuda")]
    Cuda(Box<bilstm_cuda::CudaBackend>),
}

/// The backend a command runs on, and why it was chosen.
pub(crate) struct Selected {
    /// The backend.
    pub engine: Engine,
    /// Which backend and why (as [`crate::Auto::selection`] says it, with the fallback worded
    /// `no usable GPU: ...`).
    pub selection: Selection,
    /// Whether an [`ErrorKind::Unavailable`] CUDA failure at prepare falls back to the CPU
    /// (`--backend auto`).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    may_fall_back: bool,
}

impl Selected {
    /// Opens the backend `choice` asks for.
    ///
    /// # Errors
    /// `cuda`: every CUDA failure (no GPU: [`crate::CudaError::Unavailable`]; a build without
    /// CUDA: [`crate::Error::CudaNotBuilt`]). `auto`: CUDA failures other than unavailability.
    pub fn open(choice: BackendChoice) -> Result<Self, CliError> {
        match choice {
            BackendChoice::Cpu => Ok(Self::cpu("asked for the CPU".into())),
            BackendChoice::Cuda => Self::cuda(),
            BackendChoice::Auto => match Self::cuda() {
                Ok(selected) => Ok(Selected {
                    may_fall_back: true,
                    ..selected
                }),
                Err(CliError::Library(e)) if e.kind() == ErrorKind::Unavailable => {
                    Ok(Self::cpu(format!("no usable GPU: {e}")))
                }
                Err(e) => Err(e),
            },
        }
    }

    fn cpu(reason: String) -> Self {
        Selected {
            engine: Engine::Cpu(Box::new(CpuBackend::new())),
            selection: Selection {
                backend: "cpu",
                reason,
            },
            may_fall_back: false,
        }
    }

    #[cfg(feature = "cuda")]
    fn cuda() -> Result<Self, CliError> {
        let backend = bilstm_cuda::CudaBackend::new(0)?;
        let reason = backend.describe();
        Ok(Selected {
            engine: Engine::Cuda(Box::new(backend)),
            selection: Selection {
                backend: "cuda",
                reason,
            },
            may_fall_back: false,
        })
    }

    #[cfg(not(feature = "cuda"))]
    fn cuda() -> Result<Self, CliError> {
        Err(crate::Error::CudaNotBuilt.into())
    }

    /// Prepares the backend; under `--backend auto` a CUDA backend that turns out unavailable
    /// here (NVRTC missing, say) is replaced by the CPU backend, as `Auto` does.
    ///
    /// # Errors
    /// The backend's prepare error.
    pub fn prepare(
        &mut self,
        weights: &StackWeights<'_>,
        config: &BackendConfig,
    ) -> Result<(), CliError> {
        match &mut self.engine {
            Engine::Cpu(cpu) => cpu.prepare(weights, config).map_err(CliError::from),
            #[cfg(feature = "cuda")]
            Engine::Cuda(cuda) => match cuda.prepare(weights, config) {
                Ok(()) => Ok(()),
                Err(e) if self.may_fall_back && e.kind() == ErrorKind::Unavailable => {
                    *self = Self::cpu(format!("no usable GPU: {e}"));
                    self.prepare(weights, config)
                }
                Err(e) => Err(e.into()),
            },
        }
    }

    /// Runs `batch` windows (see [`Backend::forward`]).
    ///
    /// # Errors
    /// The backend's forward error.
    pub fn forward(
        &mut self,
        input: &[f32],
        batch: usize,
        output: &mut [f32],
    ) -> Result<(), CliError> {
        match &mut self.engine {
            Engine::Cpu(cpu) => cpu.forward(input, batch, output).map_err(CliError::from),
            #[cfg(feature = "cuda")]
            Engine::Cuda(cuda) => cuda.forward(input, batch, output).map_err(CliError::from),
        }
    }

    /// `"cpu"` or `"cuda"`.
    pub fn name(&self) -> &'static str {
        self.selection.backend
    }

    /// The device that runs: the GPU's name, or `"cpu"`.
    pub fn device_name(&self) -> String {
        match &self.engine {
            Engine::Cpu(_) => "cpu".into(),
            #[cfg(feature = "cuda")]
            Engine::Cuda(cuda) => cuda.device().name.clone(),
        }
    }

    /// What runs, in a few words: `cpu x2 threads avx2+fma`, or the recurrence kernel, its schedule and
    /// the projection tile of the last CUDA pass (before any pass: the GPU's name).
    pub fn kernel_label(&self) -> String {
        match &self.engine {
            Engine::Cpu(cpu) => {
                let n = cpu.threads();
                format!(
                    "cpu x{n} thread{} {}",
                    if n == 1 { "" } else { "s" },
                    cpu.isa()
                )
            }
            #[cfg(feature = "cuda")]
            Engine::Cuda(cuda) => {
                super::plan::last_forward_label(cuda).unwrap_or_else(|| cuda.device().name.clone())
            }
        }
    }

    /// The plan the CUDA backend runs for `batch` windows (its compiled kernels' resources,
    /// the prepared shape and math mode); `None` on the CPU.
    #[cfg(feature = "cuda")]
    pub fn cuda_plan(&self, batch: usize) -> Option<Result<bilstm_core::plan::Plan, CliError>> {
        let Engine::Cuda(cuda) = &self.engine else {
            return None;
        };
        Some(cuda.plan(batch).map_err(CliError::from))
    }

    /// Without CUDA there is no GPU plan.
    #[cfg(not(feature = "cuda"))]
    pub fn cuda_plan(&self, _batch: usize) -> Option<Result<bilstm_core::plan::Plan, CliError>> {
        None
    }
}
