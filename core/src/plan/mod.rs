//! Plan selection: pure functions of device facts, kernel resources, batch and math mode.

use crate::device::DeviceFacts;
use crate::error::CoreError;
use crate::shape::MathMode;
use core::fmt;

/// Which recurrence kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecurrenceKind {
    /// Cooperative, 16 blocks per tile of 8/16/32 windows.
    Wide,
    /// Cooperative, 8 blocks per 8-window tile.
    Tiled,
    /// One block per (window, direction), R on one SM.
    Resident,
}

impl fmt::Display for RecurrenceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RecurrenceKind::Wide => "wide",
            RecurrenceKind::Tiled => "tiled",
            RecurrenceKind::Resident => "resident",
        })
    }
}

/// A decision and why it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision<T> {
    /// What was chosen.
    pub choice: T,
}

/// Resources of the compiled kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelResources {}

impl KernelResources {
    /// Design estimates.
    pub fn nominal() -> Self {
        KernelResources {}
    }
}

/// A plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The recurrence.
    pub recurrence: Decision<RecurrenceKind>,
}

/// Selects a plan.
///
/// # Errors
/// None yet.
pub fn select(_: &DeviceFacts, _: &KernelResources, _: usize, _: MathMode) -> Result<Plan, CoreError> {
    Ok(Plan { recurrence: Decision { choice: RecurrenceKind::Wide } })
}
