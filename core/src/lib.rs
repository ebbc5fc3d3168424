//! # bilstm-core
//!
//! The pure, `no_std` heart of bilstm: the shape of a bidirectional LSTM stack, the weight
//! views of its two source formats (ONNX and PyTorch) and their packing into the layout every
//! backend and kernel reads, the f64 reference stack, the geometry constants the CUDA kernels
//! are compiled with, exchange layouts and schedules, a table of real GPUs, the CUDA occupancy
//! rules, plan selection, and the [`Backend`] trait that callers program against.
//!
//! Nothing here talks to a driver or allocates: every function fills caller slices or returns
//! plain data, so users can run the layout math and plan selection in unit tests on any host.
//!
//! ```
//! use bilstm_core::{StackShape, plan, device, MathMode};
//! let shape = StackShape::pyannote();
//! assert_eq!((shape.features, shape.hidden, shape.layers, shape.frames), (60, 128, 4, 589));
//! let h200 = device::table::find("h200").unwrap();
//! let p = plan::select(&h200.facts, &plan::KernelResources::nominal(), &shape, 32, MathMode::Fp32).unwrap();
//! println!("{}", p.recurrence.choice);
//! ```
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![forbid(unsafe_code)]

pub mod accuracy;
pub mod backend;
pub mod coop;
pub mod device;
pub mod error;
pub mod exchange;
pub mod fixed;
pub mod geometry;
pub mod layout;
pub mod memory;
pub mod numerics;
pub mod occupancy;
#[cfg(any(test, feature = "std"))]
pub mod owned;
pub mod plan;
pub mod reference;
pub mod rng;
pub mod shape;

pub use backend::{Backend, BackendConfig};
pub use coop::CoopSchedule;
pub use device::{DeviceFacts, DeviceQuery};
pub use error::{BackendError, CoreError, ErrorKind};
pub use layout::{DirectionWeights, GateOrder, LayerWeights, OnnxLayer, StackWeights, TorchLayer};
pub use occupancy::{KernelUsage, Occupancy};
pub use plan::{KernelResources, Overrides, Plan, ProjectionTile, RecurrenceKind};
pub use shape::{Direction, MathMode, StackShape};
