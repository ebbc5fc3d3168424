//! The generic [`bilstm::Backend`] contract suite run for the CUDA backend on GPU 0. Needs a
//! CUDA GPU: run with `cargo test --test gpu_backend_contract -- --ignored` on the GPU machine.

#![cfg(feature = "cuda")]

use bilstm::{Auto, CudaBackend};
use bilstm_test_support::contract;

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_backend_keeps_the_backend_contract() {
    #[allow(clippy::unwrap_used, reason = "a GPU test: no GPU is a failure here")]
    contract(|| CudaBackend::new(0).unwrap());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn auto_on_a_gpu_keeps_the_backend_contract() {
    #[allow(clippy::unwrap_used, reason = "a GPU test: no GPU is a failure here")]
    contract(|| {
        let auto = Auto::new().unwrap();
        assert_eq!(auto.selection().backend, bilstm::BackendKind::Cuda);
        auto
    });
}
