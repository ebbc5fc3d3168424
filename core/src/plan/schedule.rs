//! The schedule of the chosen recurrence: a cooperative schedule ([`crate::schedule`]) for
//! the wide and tiled kernels, one grid of `2 * batch` blocks for the resident kernel.

use super::{Decision, Reason, RecurrenceKind};
use crate::error::{CoreError, checked_mul};
use crate::schedule::{CoopSchedule, choose_tiled_schedule, choose_wide_schedule};

/// How the chosen recurrence is launched for one layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecurrenceSchedule {
    /// Wide or tiled: cooperative launches of whole tiles.
    Cooperative(CoopSchedule),
    /// Resident: one ordinary launch of one block per (window, direction); blocks beyond
    /// the device's capacity run in later waves (no block waits for another).
    Resident {
        /// Blocks in the grid: `2 * batch`.
        grid_blocks: usize,
    },
}

impl RecurrenceSchedule {
    /// The cooperative schedule, if the recurrence is cooperative.
    pub const fn coop(&self) -> Option<&CoopSchedule> {
        match self {
            RecurrenceSchedule::Cooperative(s) => Some(s),
            RecurrenceSchedule::Resident { .. } => None,
        }
    }
}

/// The schedule of `kind` for `batch` windows, given `co_resident_blocks` = the kind's
/// kernel's blocks per SM times the SM count.
///
/// Wide and tiled follow [`choose_wide_schedule`] and [`choose_tiled_schedule`]; the resident
/// kernel gets one grid of `2 * batch` blocks.
///
/// # Errors
/// [`CoreError::NoPlan`] when not one cooperative tile fits; [`CoreError::Overflow`] for an
/// absurd batch.
pub fn choose_coop_schedule(
    kind: RecurrenceKind,
    batch: usize,
    co_resident_blocks: usize,
) -> Result<Decision<RecurrenceSchedule>, CoreError> {
    let schedule = match kind {
        RecurrenceKind::Resident => {
            let grid_blocks = checked_mul(batch, 2, "resident grid")?;
            let reason = Reason::ResidentGrid {
                blocks: grid_blocks,
                capacity: co_resident_blocks,
            };
            return Ok(Decision {
                choice: RecurrenceSchedule::Resident { grid_blocks },
                reason,
            });
        }
        RecurrenceKind::Wide => choose_wide_schedule(batch, co_resident_blocks)?,
        RecurrenceKind::Tiled => choose_tiled_schedule(batch, co_resident_blocks)?,
    };
    let reason = Reason::Cooperative {
        kind,
        tile_height: schedule.tile_height,
        tiles: schedule.tiles,
        concurrent: schedule.concurrent,
        launches: schedule.launches_per_direction(),
        peak_blocks: schedule.peak_resident_blocks(),
        capacity: co_resident_blocks,
    };
    Ok(Decision {
        choice: RecurrenceSchedule::Cooperative(schedule),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_grid_is_two_blocks_per_window() {
        let d = choose_coop_schedule(RecurrenceKind::Resident, 32, 132).unwrap();
        assert_eq!(d.choice, RecurrenceSchedule::Resident { grid_blocks: 64 });
        assert_eq!(d.choice.coop(), None);
        assert_eq!(
            d.reason,
            Reason::ResidentGrid {
                blocks: 64,
                capacity: 132
            }
        );
        // Beyond the capacity it still runs (in waves).
        assert_eq!(
            choose_coop_schedule(RecurrenceKind::Resident, 1024, 132)
                .unwrap()
                .choice,
            RecurrenceSchedule::Resident { grid_blocks: 2048 }
        );
        assert!(matches!(
            choose_coop_schedule(RecurrenceKind::Resident, usize::MAX, 132),
            Err(CoreError::Overflow { .. })
        ));
    }

    #[test]
    fn cooperative_kinds_use_their_schedules() {
        let d = choose_coop_schedule(RecurrenceKind::Wide, 1, 164).unwrap();
        let s = *d.choice.coop().unwrap();
        assert_eq!(s, choose_wide_schedule(1, 164).unwrap());
        assert_eq!(
            d.reason,
            Reason::Cooperative {
                kind: RecurrenceKind::Wide,
                tile_height: 8,
                tiles: 1,
                concurrent: true,
                launches: 1,
                peak_blocks: 32,
                capacity: 164
            }
        );
        let d = choose_coop_schedule(RecurrenceKind::Tiled, 1024, 164).unwrap();
        assert_eq!(
            *d.choice.coop().unwrap(),
            choose_tiled_schedule(1024, 164).unwrap()
        );
        assert!(matches!(
            choose_coop_schedule(RecurrenceKind::Tiled, 9, 7),
            Err(CoreError::NoPlan { .. })
        ));
    }
}
