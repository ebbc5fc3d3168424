//! The unsafe driver and NVRTC calls that are not kernel launches.
//!
//! cudarc loads libcuda and libnvrtc on first use and panics when a library is missing; the
//! probes here ask first, so the backend can answer `Unavailable` instead.

use std::sync::Arc;

use cudarc::driver::CudaContext;

/// Whether the CUDA driver library (libcuda) can be loaded.
pub(crate) fn driver_library_present() -> bool {
    // SAFETY: `is_culib_present` only tries `libloading::Library::new` on cudarc's candidate
    // names and drops what it loaded; it calls no CUDA function, so it has no precondition
    // beyond loading a shared library (whose initialisers are the driver's own).
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Whether the NVRTC library (libnvrtc) can be loaded.
pub(crate) fn nvrtc_library_present() -> bool {
    // SAFETY: as in `driver_library_present`: a library probe that calls no NVRTC function.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// NVRTC's version `(major, minor)`.
///
/// # Errors
/// The NVRTC status when the call fails.
pub(crate) fn nvrtc_version() -> Result<(i32, i32), cudarc::nvrtc::result::NvrtcError> {
    let mut major = 0i32;
    let mut minor = 0i32;
    // SAFETY: both pointers are to live, writable i32 locals; callers check
    // `nvrtc_library_present` first, so loading the symbol does not panic (and the caller
    // wraps the call in catch_unwind as a last line of defence).
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }.result()?;
    Ok((major, minor))
}

/// Stops cudarc from recording read/write events on buffers allocated from now on in `ctx`:
/// the backend orders all its work itself (one main stream, one side stream joined by
/// explicit events), and cudarc's per-buffer events would otherwise serialise the two
/// directions' concurrent kernels (both write the same layer output) and add event records to
/// every launch.
pub(crate) fn disable_event_tracking(ctx: &Arc<CudaContext>) {
    // SAFETY: the obligations of `disable_event_tracking` are (1) no buffer is freed before a
    // use on another stream has finished, (2) no buffer is used on another stream before its
    // allocation on the allocating stream finished, (3) no concurrent writes to one buffer
    // from several streams. The backend allocates every buffer on the main stream at prepare
    // time and synchronises it before any use; the side stream only runs kernels after
    // waiting on an event recorded on the main stream, and the main stream waits on the side
    // stream's event before anything later (so (1) holds when buffers are dropped after the
    // final synchronize of each forward); the two directions' recurrences write disjoint
    // columns of the layer output (3). See backend.rs, `enqueue`.
    unsafe { ctx.disable_event_tracking() }
}
