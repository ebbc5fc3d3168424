//! # bilstm-cuda
//!
//! The CUDA backend of bilstm: the kernels of `bilstm-kernels`, compiled with NVRTC at prepare
//! time for the GPU's exact architecture, launched through cudarc (driver API, loaded
//! dynamically: building this crate needs no CUDA, and running without a driver, GPU or NVRTC
//! gives a [`CudaError`] of kind `Unavailable`, never a panic).
//!
//! - [`CudaBackend`] implements [`bilstm_core::Backend`]; [`CudaBackend::forward_device`]
//!   runs on buffers already on the GPU.
//! - [`mod@compile`] turns a kernel source into PTX (with in-process and on-disk caches); it needs
//!   only NVRTC, no driver, so CPU-only CI compiles every kernel.
//! - [`device_count`] and [`DeviceInfo`] describe the GPUs; [`KernelResources`] reports what
//!   each compiled kernel really uses and how many of its blocks an SM holds.
//!
//! The forward pass, streams and buffers are described in [`backend`] and [`buffers`]'s
//! module docs; every kernel's launch contract opens its `.cu` file in `kernels/cuda/`.
//!
//! # Unsafe code
//! Only in `launch/` (one `unsafe` launch per kernel after safe precondition checks, the
//! `DeviceRepr` impls of the parameter structs, and the library probes in `launch/sys.rs`),
//! each block with a `SAFETY` comment naming its obligations.

pub mod backend;
pub mod buffers;
pub mod compile;
pub mod device;
pub mod error;
pub(crate) mod launch;
pub mod phases;
pub mod timing;

pub use backend::{
    CudaBackend, DEFAULT_SPIN_TIMEOUT, ForwardGraph, ForwardSummary, SPIN_TIMEOUT_ENV,
    StallInjection,
};
pub use bilstm_core::plan::{Overrides, Plan, ProjectionTile, RecurrenceKind};
pub use compile::{
    CompiledPtx, PtxOrigin, compile, compile_with_cache, nvrtc_options, nvrtc_version,
};
pub use device::{DeviceInfo, KernelResources, MIN_COMPUTE_CAPABILITY, device_count, launch_shape};
pub use error::CudaError;
pub use phases::LayerPhases;
