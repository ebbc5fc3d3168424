//! Device facts, the device-query trait, and a table of real GPUs.

pub mod table;

/// What plan selection needs to know about a GPU (CUDA device attributes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceFacts {
    /// Compute capability `(major, minor)`.
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Maximum resident threads per SM.
    pub max_threads_per_sm: u32,
    /// Maximum resident blocks per SM.
    pub max_blocks_per_sm: u32,
    /// 32-bit registers per SM.
    pub registers_per_sm: u32,
    /// 32-bit registers one block may use.
    pub registers_per_block: u32,
    /// Shared memory per SM in bytes (the largest carveout).
    pub shared_bytes_per_sm: u32,
    /// Shared memory one block may use after opting in, in bytes.
    pub shared_bytes_per_block_optin: u32,
    /// Shared memory the system reserves per resident block, in bytes.
    pub reserved_shared_bytes_per_block: u32,
    /// L2 cache in bytes.
    pub l2_bytes: u32,
    /// Whether cooperative launches are supported.
    pub cooperative_launch: bool,
}

/// A source of [`DeviceFacts`]: the driver in production, the table or a mock in tests.
#[cfg_attr(test, mockall::automock)]
pub trait DeviceQuery {
    /// Facts of the device that would run the stack.
    ///
    /// # Errors
    /// [`crate::CoreError::DeviceQuery`] when the device cannot be queried.
    fn facts(&self) -> Result<DeviceFacts, crate::CoreError>;
}
