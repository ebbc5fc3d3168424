//! A table of real GPUs with their published attributes.

use super::DeviceFacts;

/// One GPU of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableEntry {
    /// Short lower-case name (`"h200"`, `"a100"`, `"rtx4090"`).
    pub name: &'static str,
    /// The product's full name.
    pub product: &'static str,
    /// Its attributes.
    pub facts: DeviceFacts,
}

/// Every entry of the table.
pub fn all() -> &'static [TableEntry] {
    &[]
}

/// The entry named `name` (case-insensitive).
pub fn find(name: &str) -> Option<&'static TableEntry> {
    all().iter().find(|e| e.name.eq_ignore_ascii_case(name))
}
