//! CUDA C++ kernel sources of bilstm and their launch contracts.
