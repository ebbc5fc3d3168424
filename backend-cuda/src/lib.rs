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
//! - [`device_count`] and [`DeviceInfo`] describe the GPUs; [`CompiledKernel`] reports what
//!   each compiled kernel really uses and how many of its blocks an SM holds.
//!
//! The forward pass, streams and buffers are described in [`backend`] and [`buffers`]'s
//! module docs; every kernel's launch contract opens its `.cu` file in `kernels/cuda/`.
//!
//! # Unsafe code
//! In `launch/` (one `unsafe` launch per kernel after safe precondition checks, the
//! `DeviceRepr` impls of the parameter structs, and the driver calls of `launch/sys.rs`), plus
//! [`CudaBackend::forward_foreign`], which is itself `unsafe`: a caller's raw stream handle
//! cannot be checked, so that obligation passes to the caller (its two blocks call
//! `launch/sys.rs`). Each block has a `SAFETY` comment naming its obligations.

pub mod backend;
pub mod buffers;
pub mod compile;
pub mod copy_pool;
pub mod device;
pub mod error;
pub mod foreign;
pub mod graph;
pub mod hooks;
pub mod host;
pub(crate) mod launch;
pub(crate) mod pass;
pub mod phases;
pub mod summary;
pub mod timing;

pub use backend::{
    CudaBackend, DEFAULT_SPIN_TIMEOUT, FIXED_RECURRENCE_ENV, RESIDENT_PROJECTION_ENV,
    SPIN_TIMEOUT_ENV,
};
pub use bilstm_core::plan::{Overrides, Plan, ProjectionTile, RecurrenceKind};
pub use compile::{
    CompiledPtx, PtxOrigin, cache_dir, compile, compile_with_cache, nvrtc_options, nvrtc_version,
};
pub use device::{CompiledKernel, DeviceInfo, MIN_COMPUTE_CAPABILITY, device_count, launch_shape};
pub use error::CudaError;
pub use foreign::ForeignBuffers;
pub use graph::ForwardGraph;
pub use hooks::StallInjection;
pub use phases::LayerPhases;
pub use summary::ForwardSummary;
