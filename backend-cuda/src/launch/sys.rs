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

/// Where a device address lies, as the driver sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PointerInfo {
    /// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE` is `CU_MEMORYTYPE_DEVICE`.
    pub device_memory: bool,
    /// `CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL`.
    pub ordinal: i32,
    /// Bytes from the address to the end of its allocation
    /// (`RANGE_START_ADDR + RANGE_SIZE - address`).
    pub bytes_left: u64,
}

/// What the driver knows of the device address `address`, in the current context.
///
/// # Errors
/// The driver's status when it does not know the address (not a CUDA allocation).
pub(crate) fn pointer_info(address: u64) -> Result<PointerInfo, cudarc::driver::DriverError> {
    use cudarc::driver::sys::{CUmemorytype, CUpointer_attribute};
    let mut memory_type: u32 = 0;
    let mut ordinal: i32 = -1;
    let mut start: u64 = 0;
    let mut size: usize = 0;
    // SAFETY: each call writes one attribute of the documented type into a live local of that
    // type and size (MEMORY_TYPE: a 32-bit CUmemorytype, DEVICE_ORDINAL: int, RANGE_START_ADDR:
    // CUdeviceptr = u64, RANGE_SIZE: size_t); `address` is only looked up, never dereferenced.
    // The caller made the backend's context current (CudaStream::context().bind_to_thread()).
    unsafe {
        cudarc::driver::sys::cuPointerGetAttribute(
            (&mut memory_type as *mut u32).cast(),
            CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            address,
        )
        .result()?;
        cudarc::driver::sys::cuPointerGetAttribute(
            (&mut ordinal as *mut i32).cast(),
            CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            address,
        )
        .result()?;
        cudarc::driver::sys::cuPointerGetAttribute(
            (&mut start as *mut u64).cast(),
            CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
            address,
        )
        .result()?;
        cudarc::driver::sys::cuPointerGetAttribute(
            (&mut size as *mut usize).cast(),
            CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
            address,
        )
        .result()?;
    }
    let end = start.saturating_add(size as u64);
    Ok(PointerInfo {
        device_memory: memory_type == CUmemorytype::CU_MEMORYTYPE_DEVICE as u32,
        ordinal,
        bytes_left: end.saturating_sub(address),
    })
}

/// Records `event` on the raw stream `stream` (a `CUstream` someone else owns; 0 is the legacy
/// default stream).
///
/// # Errors
/// The driver's status (an invalid stream handle, for one).
///
/// # Safety
/// `stream` must be 0 or a live `CUstream` of the event's context: the driver cannot tell a
/// destroyed handle from a live one.
pub(crate) unsafe fn record_on_raw_stream(
    event: &cudarc::driver::CudaEvent,
    stream: u64,
) -> Result<(), cudarc::driver::DriverError> {
    // SAFETY: the event is a live cudarc event; the stream's validity is the caller's
    // obligation (this function's # Safety).
    unsafe {
        cudarc::driver::sys::cuEventRecord(
            event.cu_event(),
            stream as usize as cudarc::driver::sys::CUstream,
        )
    }
    .result()
}

/// The device address of page-locked host memory at `host` allocated with
/// `CU_MEMHOSTALLOC_DEVICEMAP` (with unified addressing, the same value).
///
/// # Errors
/// The driver's status (memory not mapped for the device, no context).
///
/// # Safety
/// `host` must point into a live `cuMemHostAlloc` allocation of the current context made with
/// `CU_MEMHOSTALLOC_DEVICEMAP`.
pub(crate) unsafe fn mapped_device_address<T>(
    host: *mut T,
) -> Result<u64, cudarc::driver::DriverError> {
    let mut address: u64 = 0;
    // SAFETY: the driver writes one CUdeviceptr (u64) into a live local; `host` is a mapped
    // allocation of the current context (this function's # Safety); flags must be 0.
    unsafe {
        cudarc::driver::sys::cuMemHostGetDevicePointer_v2(&mut address, host.cast(), 0).result()?;
    }
    Ok(address)
}

/// Records `event` on `stream`: an ordinary record, or while `stream` is being captured an
/// external event-record node of the graph (`CU_EVENT_RECORD_EXTERNAL`), so that replays record
/// the event where the pass reaches it (an ordinary record under capture only orders the
/// captured work, and the event would never be recorded).
///
/// # Errors
/// The driver's status when the capture query or the record fails.
pub(crate) fn record_event(
    event: &cudarc::driver::CudaEvent,
    stream: &cudarc::driver::CudaStream,
) -> Result<(), cudarc::driver::DriverError> {
    use cudarc::driver::sys::{CUevent_record_flags, CUstreamCaptureStatus};
    let capturing =
        stream.capture_status()? == CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if !capturing {
        return event.record(stream);
    }
    stream.context().bind_to_thread()?;
    // SAFETY: both handles come from live cudarc objects of the context just bound (the event
    // and the stream outlive this call); the stream is being captured, the one state in which
    // CU_EVENT_RECORD_EXTERNAL is valid.
    unsafe {
        cudarc::driver::sys::cuEventRecordWithFlags(
            event.cu_event(),
            stream.cu_stream(),
            CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL as u32,
        )
    }
    .result()
}

/// The tensor map of `bilstm_projection_tf32_resident`'s activation copies (its contract in
/// kernels/cuda/projection_tf32x3.cu): FP32, 2-D, dimensions `{in_width, rows}` over the
/// row-major input at device address `x`, row stride `in_width * 4` bytes, boxes of 32 values x
/// 64 rows, 128-byte swizzle, out-of-bounds elements zero, L2 promotion of 256 bytes.
///
/// # Errors
/// [`CudaError::Contract`] for sizes the encoding cannot take (checked here: a zero size, a
/// width whose row stride is not a multiple of 16 bytes, an address not 16-byte aligned);
/// [`CudaError::Driver`] when the driver refuses the encoding.
pub(crate) fn activation_map(
    x: u64,
    rows: usize,
    in_width: usize,
) -> Result<bilstm_kernels::params::TensorMap, crate::error::CudaError> {
    const KERNEL: &str = "bilstm_projection_tf32_resident";
    super::require(KERNEL, "tensor map rows", 1, rows)?;
    super::require(KERNEL, "tensor map width", 1, in_width)?;
    super::require_multiple(KERNEL, "tensor map row stride", in_width * 4, 16)?;
    encode_f32_map(
        x,
        &[in_width as u64, rows as u64],
        &[in_width as u64 * 4],
        &[
            bilstm_core::geometry::PROJ_WG_K_TILE as u32,
            bilstm_core::geometry::PROJ_RES_BLOCK_ROWS as u32,
        ],
    )
}

/// The tensor map of `bilstm_projection_tf32_resident`'s output stores: FP32, 3-D, dimensions
/// `{512, rows, 2}` (gate columns, rows, directions) over the projection buffer at device
/// address `out`, strides `512 * 4` and `direction_stride * 4` bytes, boxes of 32 columns x 64
/// rows x 1, 128-byte swizzle (stores outside the dimensions are dropped).
///
/// # Errors
/// As [`activation_map`]: a direction stride not a multiple of 4 floats, an address not
/// 16-byte aligned, a zero size; the driver's refusal.
pub(crate) fn gates_map(
    out: u64,
    rows: usize,
    direction_stride: usize,
) -> Result<bilstm_kernels::params::TensorMap, crate::error::CudaError> {
    const KERNEL: &str = "bilstm_projection_tf32_resident";
    let gate_rows = bilstm_core::geometry::GATE_ROWS;
    super::require(KERNEL, "tensor map rows", 1, rows)?;
    super::require_multiple(KERNEL, "tensor map direction stride", direction_stride, 4)?;
    encode_f32_map(
        out,
        &[gate_rows as u64, rows as u64, 2],
        &[gate_rows as u64 * 4, direction_stride as u64 * 4],
        // 32 columns: one 128-byte swizzle row of FP32; the rows of a warpgroup's block.
        &[32, bilstm_core::geometry::PROJ_RES_BLOCK_ROWS as u32, 1],
    )
}

/// Encodes a tiled FP32 tensor map of rank `dims.len()` (2 or 3) over device address `address`:
/// `strides` the byte strides of dimensions 1.., `boxes` the box extents, element strides 1, no
/// interleave, 128-byte swizzle, L2 promotion of 256 bytes, out-of-bounds elements zero.
fn encode_f32_map(
    address: u64,
    dims: &[u64],
    strides: &[u64],
    boxes: &[u32],
) -> Result<bilstm_kernels::params::TensorMap, crate::error::CudaError> {
    use cudarc::driver::sys::{
        CUtensorMap, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
        CUtensorMapL2promotion, CUtensorMapSwizzle,
    };
    const KERNEL: &str = "bilstm_projection_tf32_resident";
    let rank = dims.len();
    if !(2..=3).contains(&rank) || strides.len() + 1 != rank || boxes.len() != rank {
        return Err(crate::error::CudaError::Internal {
            what: format!("a tensor map of rank {rank} with {} strides", strides.len()),
        });
    }
    super::require_aligned(KERNEL, "tensor map address", address, 16)?;
    let element_strides = [1u32; 3];
    let mut map = CUtensorMap { opaque: [0; 16] };
    // SAFETY: `map` is a live, writable CUtensorMap; `dims` and `boxes` hold `rank` values,
    // `strides` rank - 1 and `element_strides` at least rank (checked above): what a rank-`rank`
    // encoding reads. `address` is only recorded in the map, never dereferenced here (the
    // kernel's copies stay within dims, which the caller's buffer holds). cudarc loads the
    // symbol from the driver library the backend already opened (the caller holds a context).
    let status = unsafe {
        cudarc::driver::sys::cuTensorMapEncodeTiled(
            &mut map,
            CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            rank as u32,
            address as *mut core::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    status
        .result()
        .map_err(crate::error::CudaError::driver("encoding a tensor map"))?;
    Ok(bilstm_kernels::params::TensorMap { words: map.opaque })
}
