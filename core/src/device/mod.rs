//! Device facts, the device-query trait, and a table of real GPUs.
//!
//! [`DeviceFacts`] is everything plan selection reads about a GPU. In production the CUDA
//! backend fills it from the driver (one `cuDeviceGetAttribute` per field, named on each
//! field below); in tests it comes from [`table`] or from a `MockDeviceQuery` (mockall,
//! generated for [`DeviceQuery`] in this crate's unit tests).

pub mod table;

/// What plan selection needs to know about a GPU (CUDA device attributes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceFacts {
    /// Compute capability `(major, minor)` (`CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR`,
    /// `_MINOR`).
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors (`CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`).
    pub sm_count: u32,
    /// Maximum resident threads per SM (`CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR`).
    pub max_threads_per_sm: u32,
    /// Maximum resident blocks per SM (`CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR`).
    pub max_blocks_per_sm: u32,
    /// 32-bit registers per SM (`CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR`).
    pub registers_per_sm: u32,
    /// 32-bit registers one block may use (`CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK`).
    pub registers_per_block: u32,
    /// Shared memory per SM in bytes, the largest carveout
    /// (`CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR`).
    pub shared_bytes_per_sm: u32,
    /// Shared memory one block may use after opting in, in bytes
    /// (`CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`).
    pub shared_bytes_per_block_optin: u32,
    /// Shared memory the system reserves per resident block, in bytes
    /// (`CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK`: 1024 from 8.0, 0 before).
    pub reserved_shared_bytes_per_block: u32,
    /// L2 cache in bytes (`CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE`).
    pub l2_bytes: u32,
    /// Whether cooperative launches are supported (`CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH`).
    pub cooperative_launch: bool,
    /// The largest portable thread-block cluster size (CTAs per cluster), 0 where clusters are
    /// unsupported. The driver has no attribute for the size itself: the CUDA backend gives
    /// [`PORTABLE_CLUSTER_SIZE`] when `CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH` is nonzero, else 0.
    pub max_cluster_size: u32,
}

/// The portable thread-block cluster size limit: every device with cluster launch (compute
/// capability 9.0 and later) runs clusters of up to 8 CTAs without opting in to a
/// non-portable size (CUDA C++ Programming Guide, "Thread Block Clusters").
pub const PORTABLE_CLUSTER_SIZE: u32 = 8;

/// A source of [`DeviceFacts`]: the driver in production, the table or a mock in tests.
#[cfg_attr(test, mockall::automock)]
pub trait DeviceQuery {
    /// Facts of the device that would run the stack.
    ///
    /// # Errors
    /// [`crate::CoreError::DeviceQuery`] when the device cannot be queried.
    fn facts(&self) -> Result<DeviceFacts, crate::CoreError>;
}

/// The table entry as a query (always succeeds): lets code written against [`DeviceQuery`]
/// plan for a table GPU.
impl DeviceQuery for table::TableEntry {
    fn facts(&self) -> Result<DeviceFacts, crate::CoreError> {
        Ok(self.facts)
    }
}
