//! CPU-only (runs everywhere): without a CUDA driver or GPU the backend answers with an error
//! of kind `Unavailable` (or `Unsupported` for a GPU it cannot use), never a panic; with one,
//! it opens.

use bilstm_core::{BackendError, ErrorKind};
use bilstm_cuda::{CudaBackend, device_count};

#[test]
fn no_gpu_is_an_error_not_a_panic() {
    match device_count() {
        Ok(n) => eprintln!("CUDA driver present, {n} device(s)"),
        Err(e) => assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}"),
    }
    match CudaBackend::new(0) {
        Ok(b) => eprintln!("opened {}", b.device().name),
        Err(e) => {
            eprintln!("as expected without a GPU: {e}");
            assert!(
                matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Unsupported),
                "{e}"
            );
        }
    }
    // Asking twice gives the same answer (nothing is left half-initialised).
    assert_eq!(
        CudaBackend::new(0).is_ok(),
        device_count().is_ok_and(|n| n > 0)
    );
}
