//! The backend a command runs on: [`crate::Auto`], opened as `--backend` asks.
//!
//! One rule for the CPU fallback: `auto` is [`Auto::new`] (CUDA on GPU 0 when it opens and
//! prepares, the CPU when CUDA is [`bilstm_core::ErrorKind::Unavailable`], any other CUDA
//! failure reported), `cpu` is [`Auto::cpu`], `cuda` is [`Auto::cuda`] (no fallback). What
//! only the CUDA backend offers (the plan, the device's name, device-event timing) is reached
//! through [`Auto::as_cuda`]. The [`crate::Selection`] says which backend runs and why
//! (`cuda (NVIDIA H200 (device 0, ...))`, `cpu (asked for the CPU)`,
//! `cpu (CUDA unavailable: ...)`).

use bilstm_core::{Backend, BackendConfig, StackWeights};

use super::{BackendChoice, CliError};
use crate::{Auto, Selection};

/// The backend a command runs on.
pub(crate) struct Selected {
    /// The backend, with the fallback rule of [`Auto`].
    pub auto: Auto,
}

impl Selected {
    /// Opens the backend `choice` asks for.
    ///
    /// # Errors
    /// `cuda`: every CUDA failure (no GPU: [`crate::CudaError::Unavailable`]; a build without
    /// CUDA: [`crate::Error::CudaNotBuilt`]). `auto`: CUDA failures other than unavailability.
    pub fn open(choice: BackendChoice) -> Result<Self, CliError> {
        let auto = match choice {
            BackendChoice::Cpu => Auto::cpu(),
            BackendChoice::Cuda => Auto::cuda()?,
            BackendChoice::Auto => Auto::new()?,
        };
        Ok(Selected { auto })
    }

    /// Which backend runs and why.
    pub fn selection(&self) -> &Selection {
        self.auto.selection()
    }

    /// Prepares the backend (see [`Auto`]'s `prepare`: under `auto`, a CUDA backend found
    /// unavailable here is replaced by the CPU backend).
    ///
    /// # Errors
    /// The backend's prepare error.
    pub fn prepare(
        &mut self,
        weights: &StackWeights<'_>,
        config: &BackendConfig,
    ) -> Result<(), CliError> {
        self.auto.prepare(weights, config).map_err(CliError::from)
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
        self.auto
            .forward(input, batch, output)
            .map_err(CliError::from)
    }

    /// On CUDA: the largest batch, at most `limit`, that the free device memory holds for
    /// `shape` (`CudaBackend::max_batch_fitting`); `None` on the CPU.
    pub fn max_batch_fitting(
        &self,
        shape: &bilstm_core::StackShape,
        limit: usize,
    ) -> Option<Result<usize, CliError>> {
        #[cfg(feature = "cuda")]
        if let Some(cuda) = self.auto.as_cuda() {
            return Some(
                cuda.max_batch_fitting(shape, limit)
                    .map_err(|e| CliError::from(crate::Error::from(e))),
            );
        }
        let _ = (shape, limit);
        None
    }

    /// `"cpu"` or `"cuda"`.
    pub fn name(&self) -> &'static str {
        self.auto.name()
    }

    /// The device that runs: the GPU's name, or `"cpu"`.
    pub fn device_name(&self) -> String {
        #[cfg(feature = "cuda")]
        if let Some(cuda) = self.auto.as_cuda() {
            return cuda.device().name.clone();
        }
        "cpu".into()
    }

    /// What runs, in a few words: `cpu x2 threads avx2+fma` (with ` tiles NAME` on the 512-bit
    /// kernels: `BILSTM_CPU_TILES`), or the recurrence kernel, its
    /// schedule and the projection tile of the last CUDA pass (before any pass: the GPU's
    /// name).
    pub fn kernel_label(&self) -> String {
        #[cfg(feature = "cuda")]
        if let Some(cuda) = self.auto.as_cuda() {
            return super::plan::last_forward_label(cuda)
                .unwrap_or_else(|| cuda.device().name.clone());
        }
        match self.auto.as_cpu() {
            Some(cpu) => {
                let n = cpu.threads();
                // The 512-bit kernels' register tiles (BILSTM_CPU_TILES), where they apply.
                let tiles = if cpu.isa().is_512_bit() {
                    format!(" tiles {}", cpu.tiles())
                } else {
                    String::new()
                };
                format!(
                    "cpu x{n} thread{} {}{tiles}",
                    if n == 1 { "" } else { "s" },
                    cpu.isa()
                )
            }
            None => self.name().into(),
        }
    }

    /// After [`Selected::prepare`] on CUDA: a note when NVRTC compiled kernels just now (a
    /// one-time cost: later runs take the PTX from the disk cache), naming the cache folder;
    /// `None` when everything came from a cache, or on the CPU.
    #[cfg(feature = "cuda")]
    pub fn compile_note(&self) -> Option<String> {
        let cuda = self.auto.as_cuda()?;
        let resources = cuda.kernel_resources()?;
        let compiled = resources
            .iter()
            .filter(|r| r.ptx_origin == bilstm_cuda::PtxOrigin::Compiled)
            .count();
        if compiled == 0 {
            return None;
        }
        let (major, minor) = cuda.device().facts.compute_capability;
        Some(match bilstm_cuda::cache_dir() {
            Some(dir) => format!(
                "compiled {compiled} CUDA kernels for compute_{major}{minor} with NVRTC (one time: \
                 cached in {}; BILSTM_CACHE_DIR moves it)",
                dir.display()
            ),
            None => format!(
                "compiled {compiled} CUDA kernels for compute_{major}{minor} with NVRTC (no disk \
                 cache: BILSTM_CACHE_DIR=off or no HOME)"
            ),
        })
    }

    /// Without CUDA nothing is compiled.
    #[cfg(not(feature = "cuda"))]
    pub fn compile_note(&self) -> Option<String> {
        None
    }

    /// The plan the CUDA backend runs for `batch` windows (its compiled kernels' resources,
    /// the prepared shape and math mode); `None` on the CPU.
    #[cfg(feature = "cuda")]
    pub fn cuda_plan(&self, batch: usize) -> Option<Result<bilstm_core::plan::Plan, CliError>> {
        let cuda = self.auto.as_cuda()?;
        Some(cuda.plan(batch).map_err(CliError::from))
    }

    /// Without CUDA there is no GPU plan.
    #[cfg(not(feature = "cuda"))]
    pub fn cuda_plan(&self, _batch: usize) -> Option<Result<bilstm_core::plan::Plan, CliError>> {
        None
    }
}
