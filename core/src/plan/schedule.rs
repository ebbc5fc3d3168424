//! The schedule of the chosen recurrence: a cooperative schedule ([`crate::coop`]) for
//! the wide and tiled kernels, one grid of `2 * batch` blocks for the resident kernel, one grid
//! of `2 * batch` clusters for the cluster kernel.

use super::recurrence::{ClusterCapacity, WindowsDecision};
use super::{Decision, Reason, RecurrenceKind};
use crate::coop::{CoopSchedule, choose_tiled_schedule, choose_wide_schedule};
use crate::error::{CoreError, checked_mul};

/// The cluster recurrence's launch for one layer: one ordinary (not cooperative) launch of
/// `2 * ceil(batch / windows_per_cluster)` clusters of `cluster_size` CTAs, both directions;
/// clusters beyond the device's capacity run in later waves (no cluster waits for another).
///
/// Cluster `c` (CTAs `c * cluster_size ..`) runs windows `(c / 2) * windows_per_cluster ..` (as
/// many as exist) in direction `c % 2` ([`ClusterSchedule::window_direction`], as
/// `kernels/cuda/recurrence_cluster.cu` states).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClusterSchedule {
    /// CTAs per cluster (one of [`crate::geometry::CLUSTER_SIZES`]).
    pub cluster_size: usize,
    /// Windows each cluster runs side by side (1, or [`crate::geometry::CLUSTER_MAX_WINDOWS`] with 2-CTA
    /// clusters).
    pub windows_per_cluster: usize,
    /// CTAs in the grid: `2 * ceil(batch / windows_per_cluster) * cluster_size`.
    pub grid_blocks: usize,
    /// Clusters running at once: the co-resident clusters, at most the grid's.
    pub clusters_per_wave: usize,
    /// Waves: the grid's clusters over the co-resident clusters, rounded up (0 for batch 0).
    pub waves: usize,
}

impl ClusterSchedule {
    /// Clusters in the grid: `2 * ceil(batch / windows_per_cluster)`.
    pub const fn clusters(&self) -> usize {
        match self.grid_blocks.checked_div(self.cluster_size) {
            Some(n) => n,
            None => 0,
        }
    }

    /// The first window and the direction cluster `cluster` runs (direction 0 forward, 1
    /// reverse), or `None` past the grid; it runs windows `first .. first +
    /// windows_per_cluster` that exist.
    pub const fn window_direction(&self, cluster: usize) -> Option<(usize, usize)> {
        if cluster < self.clusters() {
            Some(((cluster / 2) * self.windows_per_cluster, cluster % 2))
        } else {
            None
        }
    }
}

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
    /// Cluster: one ordinary launch of one cluster per (window, direction), in waves.
    Cluster(ClusterSchedule),
}

impl RecurrenceSchedule {
    /// The cooperative schedule, if the recurrence is cooperative.
    pub const fn coop(&self) -> Option<&CoopSchedule> {
        match self {
            RecurrenceSchedule::Cooperative(s) => Some(s),
            RecurrenceSchedule::Resident { .. } | RecurrenceSchedule::Cluster(_) => None,
        }
    }

    /// The cluster schedule, if the recurrence is the cluster kind.
    pub const fn cluster(&self) -> Option<&ClusterSchedule> {
        match self {
            RecurrenceSchedule::Cluster(s) => Some(s),
            RecurrenceSchedule::Cooperative(_) | RecurrenceSchedule::Resident { .. } => None,
        }
    }
}

/// The cluster recurrence's schedule for `batch` windows with clusters of `capacity`'s size,
/// each running `windows` windows (from [`super::choose_cluster_windows`]):
/// `2 * ceil(batch / windows)` clusters, `capacity.clusters` of them at once.
///
/// # Errors
/// [`CoreError::NoPlan`] when no cluster of that size fits (capacity 0) and the batch is not
/// empty, or for 0 windows; [`CoreError::Overflow`] for an absurd batch.
pub fn choose_cluster_schedule(
    capacity: &ClusterCapacity,
    batch: usize,
    windows: &WindowsDecision,
) -> Result<Decision<RecurrenceSchedule>, CoreError> {
    let windows_per_cluster = windows.windows;
    if windows_per_cluster == 0 {
        return Err(CoreError::NoPlan {
            reason: "a cluster must run at least one window",
        });
    }
    let clusters = checked_mul(batch.div_ceil(windows_per_cluster), 2, "cluster grid")?;
    let grid_blocks = checked_mul(clusters, capacity.cluster_size, "cluster grid")?;
    if clusters > 0 && capacity.clusters == 0 {
        return Err(CoreError::NoPlan {
            reason: "no cluster of the chosen size fits the device",
        });
    }
    let clusters_per_wave = clusters.min(capacity.clusters);
    let waves = if clusters == 0 {
        0
    } else {
        clusters.div_ceil(capacity.clusters)
    };
    let schedule = ClusterSchedule {
        cluster_size: capacity.cluster_size,
        windows_per_cluster,
        grid_blocks,
        clusters_per_wave,
        waves,
    };
    Ok(Decision {
        choice: RecurrenceSchedule::Cluster(schedule),
        reason: Reason::ClusterGrid {
            cluster_size: capacity.cluster_size,
            windows: windows.why,
            grid_blocks,
            clusters_per_wave,
            waves,
            source: capacity.source,
        },
    })
}

/// The schedule of `kind` for `batch` windows, given `co_resident_blocks` = the kind's
/// kernel's blocks per SM times the SM count.
///
/// Wide and tiled follow [`choose_wide_schedule`] and [`choose_tiled_schedule`]; the resident
/// kernel gets one grid of `2 * batch` blocks. The cluster kernel's schedule needs its cluster
/// capacity: [`choose_cluster_schedule`].
///
/// # Errors
/// [`CoreError::NoPlan`] when not one cooperative tile fits, or for the cluster kind (use
/// [`choose_cluster_schedule`]); [`CoreError::Overflow`] for an absurd batch.
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
        RecurrenceKind::Cluster => {
            return Err(CoreError::NoPlan {
                reason: "the cluster recurrence is scheduled by choose_cluster_schedule",
            });
        }
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
