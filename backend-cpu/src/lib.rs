//! CPU backend of bilstm.
