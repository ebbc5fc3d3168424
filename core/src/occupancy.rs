//! The CUDA occupancy rules, per architecture.
