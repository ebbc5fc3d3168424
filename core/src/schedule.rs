//! Schedules of the cooperative recurrences.
