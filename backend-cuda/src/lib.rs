//! CUDA backend of bilstm.
