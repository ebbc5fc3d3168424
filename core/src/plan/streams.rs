//! Whether the two directions of a layer run at once (the reverse on a side stream).

use super::schedule::RecurrenceSchedule;
use super::{Decision, Reason};

/// Whether the directions of a layer run concurrently under `schedule`, with the kernel's
/// `co_resident_blocks`.
///
/// A cooperative schedule runs both directions at once only when both directions' launches
/// fit the joint co-resident capacity together (decided by the schedule, reported here); the
/// resident and cluster recurrences' single grid holds both directions.
pub fn choose_streams(schedule: &RecurrenceSchedule, co_resident_blocks: usize) -> Decision<bool> {
    match schedule {
        RecurrenceSchedule::Resident { grid_blocks } => Decision {
            choice: true,
            reason: Reason::ResidentOneGrid {
                blocks: *grid_blocks,
            },
        },
        RecurrenceSchedule::Cluster(s) => Decision {
            choice: true,
            reason: Reason::ClusterOneGrid {
                blocks: s.grid_blocks,
            },
        },
        RecurrenceSchedule::Cooperative(s) => {
            let both = s.grid_blocks(0).saturating_mul(2);
            let reason = if s.concurrent {
                Reason::DirectionsTogether {
                    blocks: both,
                    capacity: co_resident_blocks,
                }
            } else {
                Reason::DirectionsInTurn {
                    blocks: both,
                    capacity: co_resident_blocks,
                }
            };
            Decision {
                choice: s.concurrent,
                reason,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coop::{choose_tiled_schedule, choose_wide_schedule};

    #[test]
    fn concurrency_follows_the_schedule() {
        let together = RecurrenceSchedule::Cooperative(choose_wide_schedule(8, 264).unwrap());
        let d = choose_streams(&together, 264);
        assert!(d.choice);
        assert_eq!(
            d.reason,
            Reason::DirectionsTogether {
                blocks: 32,
                capacity: 264
            }
        );

        let in_turn = RecurrenceSchedule::Cooperative(choose_tiled_schedule(1024, 264).unwrap());
        let d = choose_streams(&in_turn, 264);
        assert!(!d.choice);
        // 33 tiles x 8 blocks per launch; both directions would need 528.
        assert_eq!(
            d.reason,
            Reason::DirectionsInTurn {
                blocks: 528,
                capacity: 264
            }
        );

        let resident = RecurrenceSchedule::Resident { grid_blocks: 64 };
        assert_eq!(
            choose_streams(&resident, 132).reason,
            Reason::ResidentOneGrid { blocks: 64 }
        );
    }
}
