//! bilstm: fast, bit-reproducible bidirectional LSTM stacks.
#![forbid(unsafe_code)]
pub use bilstm_core as core;
