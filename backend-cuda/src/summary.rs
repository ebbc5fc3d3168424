//! [`ForwardSummary`]: what a forward pass ran (plan, kernel, schedule, tile).

use bilstm_core::coop::CoopSchedule;
use bilstm_core::plan::{Plan, ProjectionTile, RecurrenceKind, RecurrenceSchedule};

/// What a forward pass ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardSummary {
    /// The batch.
    pub batch: usize,
    /// The plan it ran (recurrence kind, schedule, projection tile, with reasons).
    pub plan: Plan,
    /// The recurrence kernel (`plan.recurrence.choice`).
    pub recurrence: RecurrenceKind,
    /// The cooperative schedule of a wide or tiled recurrence. For the resident recurrence it
    /// describes the one resident grid in the same terms: `batch` one-window "tiles" of two
    /// blocks (one per direction), both directions at once, one launch.
    pub schedule: CoopSchedule,
    /// The projection tile (`plan.projection.choice`).
    pub projection_tile: ProjectionTile,
    /// Blocks of the recurrence kernel the device holds at once (`plan.co_resident_blocks`).
    pub co_resident_blocks: usize,
}

impl ForwardSummary {
    pub(crate) fn of(plan: Plan) -> Self {
        let schedule = match plan.schedule.choice {
            RecurrenceSchedule::Cooperative(s) => s,
            RecurrenceSchedule::Resident { grid_blocks } => CoopSchedule {
                kind: RecurrenceKind::Resident,
                tile_height: 1,
                blocks_per_tile: 2,
                tiles: grid_blocks / 2,
                concurrent: true,
                tiles_per_launch: grid_blocks / 2,
            },
            RecurrenceSchedule::Cluster(c) => CoopSchedule {
                kind: RecurrenceKind::Cluster,
                tile_height: 1,
                blocks_per_tile: 2 * c.cluster_size,
                tiles: c.clusters() / 2,
                concurrent: true,
                tiles_per_launch: c.clusters() / 2,
            },
        };
        ForwardSummary {
            batch: plan.batch,
            plan,
            recurrence: plan.recurrence.choice,
            schedule,
            projection_tile: plan.projection.choice,
            co_resident_blocks: plan.co_resident_blocks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bilstm_core::device::table;
    use bilstm_core::plan::{self, Overrides};
    use bilstm_core::{MathMode, StackShape};

    #[test]
    fn summaries_describe_resident_grids_as_one_window_tiles() {
        let h200 = table::find("h200").unwrap().facts;
        let shape = StackShape::pyannote();
        let r = plan::KernelResources::nominal();
        // An H200 without cluster launch, so that the resident kernel runs.
        let h200 = bilstm_core::device::DeviceFacts {
            max_cluster_size: 0,
            ..h200
        };
        let p = plan::select(&h200, &r, &shape, 33, MathMode::Fp32).unwrap();
        assert_eq!(p.recurrence.choice, RecurrenceKind::Resident);
        let s = ForwardSummary::of(p);
        assert_eq!(
            (
                s.schedule.tiles,
                s.schedule.blocks_per_tile,
                s.schedule.tile_height
            ),
            (33, 2, 1)
        );
        assert_eq!(s.schedule.launches_per_direction(), 1);
        let forced = Overrides {
            recurrence: Some(RecurrenceKind::Tiled),
            projection: None,
            cluster_size: None,
            cluster_windows: None,
        };
        let p = plan::select_with(&h200, &r, &shape, 33, MathMode::Fp32, &forced).unwrap();
        let s = ForwardSummary::of(p);
        assert_eq!(s.recurrence, RecurrenceKind::Tiled);
        assert_eq!(Some(&s.schedule), p.coop_schedule());
    }
}
