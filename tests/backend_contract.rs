//! The generic [`bilstm::Backend`] contract suite (`bilstm-test-support`) run for the CPU
//! backend and for `Auto` (CUDA where a GPU is usable, else the CPU).

use bilstm::{Auto, CpuBackend};
use bilstm_test_support::contract;

#[test]
fn cpu_backend_keeps_the_backend_contract() {
    contract(CpuBackend::new);
}

#[test]
fn auto_cpu_keeps_the_backend_contract() {
    contract(Auto::cpu);
}

#[test]
fn auto_keeps_the_backend_contract() {
    #[allow(
        clippy::unwrap_used,
        reason = "a test: Auto::new falls back to the CPU"
    )]
    contract(|| Auto::new().unwrap());
}
