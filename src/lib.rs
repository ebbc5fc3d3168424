//! # bilstm
//!
//! Fast, bit-reproducible bidirectional LSTM stacks (pyannote's speaker-segmentation stack:
//! input 60, hidden 128 per direction, 4 layers, 589-frame windows) on NVIDIA GPUs and CPUs.
//!
//! This facade re-exports the pieces a caller needs and adds [`Auto`], which runs on CUDA
//! when a usable driver and GPU are present and on the CPU otherwise, and says which.
//!
//! ```
//! use bilstm::{Auto, Backend, BackendConfig, owned::{OwnedStack, random_input}};
//! # fn main() -> Result<(), bilstm::Error> {
//! let model = OwnedStack::builtin();                   // the real shape, seeded weights
//! let weights = model.weights()?;
//! let shape = model.shape.with_frames(8);              // short windows keep the doc-test quick
//! let mut backend = Auto::cpu();                       // or Auto::new() to prefer CUDA
//! backend.prepare(&weights, &BackendConfig { shape, max_batch: 2, math: bilstm::MathMode::Fp32 })?;
//! let input = random_input(&shape, 2, 1);
//! let mut output = vec![0.0; shape.output_len(2)?];
//! backend.forward(&input, 2, &mut output)?;
//! assert!(output.iter().all(|v| v.is_finite()));
//! println!("ran on {}", backend.selection());
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod auto;
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
mod error;
mod fsio;
pub mod model;
pub mod npy;

pub use auto::{Auto, BackendKind, Selection};
pub use bilstm_core as core;
pub use bilstm_core::{
    Backend, BackendConfig, BackendError, CoreError, Direction, ErrorKind, GateOrder, MathMode,
    OnnxLayer, StackShape, StackWeights, TorchLayer, owned,
};
pub use bilstm_cpu::{CpuBackend, CpuError, Isa};
#[cfg(feature = "cuda")]
pub use bilstm_cuda::{CudaBackend, CudaError};
pub use error::Error;
