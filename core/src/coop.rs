//! Schedules of the cooperative recurrences (wide and tiled): tile heights, launches and
//! whether the two directions of a layer run at once.
//!
//! A cooperative recurrence spins on its partners' published hidden values (DESIGN §4), so
//! every block of a launch must be resident at the same time, and when both directions run
//! at once (the reverse on a side stream) both launches must fit *together*. The budget is
//! `resident_blocks` = the kernel's [`blocks_per_sm`](crate::occupancy::blocks_per_sm) times
//! the SM count (the joint co-resident capacity). A schedule never exceeds it:
//!
//! - concurrent: `2 * grid_blocks(launch) <= resident_blocks` for every launch;
//! - otherwise: `grid_blocks(launch) <= resident_blocks`, the directions one after the other.
//!
//! Tiles cover windows in order: tile `t` holds windows `t * tile_height ..` up to the batch
//! ([`CoopSchedule::tile_windows`]); launch `i` of a direction covers the tiles
//! [`CoopSchedule::launch_tiles`]`(i)`, so the launches of one direction cover every window
//! exactly once.

use core::ops::Range;

use crate::error::{CoreError, checked_mul};
use crate::geometry::{
    TILED_BLOCKS_PER_TILE, TILED_WINDOWS, WIDE_BLOCKS_PER_TILE, WIDE_MAX_TILE_HEIGHT,
    WIDE_TILE_HEIGHTS,
};
use crate::plan::RecurrenceKind;

/// Schedule of a cooperative recurrence (wide or tiled) for one layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CoopSchedule {
    /// [`RecurrenceKind::Wide`] or [`RecurrenceKind::Tiled`].
    pub kind: RecurrenceKind,
    /// Windows per tile (wide: 8, 16 or 32; tiled: 8).
    pub tile_height: usize,
    /// Blocks per tile (wide: 16, tiled: 8; from [`crate::geometry`]).
    pub blocks_per_tile: usize,
    /// Tiles per direction: `ceil(batch / tile_height)`.
    pub tiles: usize,
    /// Both directions at once (the reverse on a side stream).
    pub concurrent: bool,
    /// Each launch covers at most this many tiles of one direction (0 only when `tiles` is 0).
    pub tiles_per_launch: usize,
}

impl CoopSchedule {
    /// Launches per direction per layer: `ceil(tiles / tiles_per_launch)` (0 for batch 0).
    pub const fn launches_per_direction(&self) -> usize {
        if self.tiles == 0 || self.tiles_per_launch == 0 {
            0
        } else {
            self.tiles.div_ceil(self.tiles_per_launch)
        }
    }

    /// The tiles launch `launch` covers (empty past the last launch).
    pub fn launch_tiles(&self, launch: usize) -> Range<usize> {
        let start = launch.saturating_mul(self.tiles_per_launch).min(self.tiles);
        let end = start.saturating_add(self.tiles_per_launch).min(self.tiles);
        start..end
    }

    /// Blocks of launch `launch`: its tiles times [`CoopSchedule::blocks_per_tile`].
    pub fn grid_blocks(&self, launch: usize) -> usize {
        self.launch_tiles(launch)
            .len()
            .saturating_mul(self.blocks_per_tile)
    }

    /// The most blocks resident at once: twice the largest launch when the directions run
    /// concurrently, else the largest launch.
    pub fn peak_resident_blocks(&self) -> usize {
        let largest = self.grid_blocks(0);
        if self.concurrent {
            largest.saturating_mul(2)
        } else {
            largest
        }
    }

    /// The windows of tile `tile` for a batch of `batch` windows (the last tile may be short;
    /// windows past the batch are not computed).
    pub fn tile_windows(&self, tile: usize, batch: usize) -> Range<usize> {
        let start = tile.saturating_mul(self.tile_height).min(batch);
        let end = start.saturating_add(self.tile_height).min(batch);
        start..end
    }
}

/// Most tiles one launch of `blocks_per_tile`-block tiles may hold within `resident_blocks`.
const fn tiles_that_fit(resident_blocks: usize, blocks_per_tile: usize) -> usize {
    resident_blocks / blocks_per_tile
}

/// Blocks both directions' grids need together when each covers all `tiles`.
fn both_directions_blocks(tiles: usize, blocks_per_tile: usize) -> Result<usize, CoreError> {
    checked_mul(
        checked_mul(tiles, blocks_per_tile, "cooperative grid")?,
        2,
        "cooperative grid",
    )
}

/// A sequential schedule: one direction at a time, launches of at most what fits.
fn sequential(
    kind: RecurrenceKind,
    tile_height: usize,
    blocks_per_tile: usize,
    batch: usize,
    resident_blocks: usize,
    no_fit: &'static str,
) -> Result<CoopSchedule, CoreError> {
    let tiles = batch.div_ceil(tile_height);
    let fit = tiles_that_fit(resident_blocks, blocks_per_tile);
    if fit == 0 {
        return Err(CoreError::NoPlan { reason: no_fit });
    }
    Ok(CoopSchedule {
        kind,
        tile_height,
        blocks_per_tile,
        tiles,
        concurrent: false,
        tiles_per_launch: fit.min(tiles),
    })
}

/// The wide recurrence's schedule for `batch` windows within `resident_blocks` co-resident
/// blocks (DESIGN §4, upstream's rule).
///
/// Tile heights 8, 16, 32 ([`WIDE_TILE_HEIGHTS`]) are tried in turn; the first whose two
/// directions' grids (`2 * tiles * 16` blocks) fit runs both directions concurrently, one
/// launch each. Otherwise 32-row tiles run one direction after the other, in launches of at
/// most `floor(resident_blocks / 16)` tiles. Batch 0 gives an empty schedule (no launches).
///
/// # Errors
/// [`CoreError::NoPlan`] when not even one 16-block tile fits; [`CoreError::Overflow`] for an
/// absurd batch.
pub fn choose_wide_schedule(
    batch: usize,
    resident_blocks: usize,
) -> Result<CoopSchedule, CoreError> {
    let blocks_per_tile = WIDE_BLOCKS_PER_TILE;
    for tile_height in WIDE_TILE_HEIGHTS {
        let tiles = batch.div_ceil(tile_height);
        if both_directions_blocks(tiles, blocks_per_tile)? <= resident_blocks {
            return Ok(CoopSchedule {
                kind: RecurrenceKind::Wide,
                tile_height,
                blocks_per_tile,
                tiles,
                concurrent: true,
                tiles_per_launch: tiles,
            });
        }
    }
    sequential(
        RecurrenceKind::Wide,
        WIDE_MAX_TILE_HEIGHT,
        blocks_per_tile,
        batch,
        resident_blocks,
        "one wide tile (16 blocks) exceeds the co-resident capacity",
    )
}

/// The tiled recurrence's schedule for `batch` windows within `resident_blocks` co-resident
/// blocks.
///
/// Eight-window tiles of 8 blocks: both directions concurrently (one launch each) when
/// `2 * tiles * 8` blocks fit, else one direction after the other in launches of at most
/// `floor(resident_blocks / 8)` tiles. Batch 0 gives an empty schedule (no launches).
///
/// # Errors
/// [`CoreError::NoPlan`] when not even one 8-block tile fits; [`CoreError::Overflow`] for an
/// absurd batch.
pub fn choose_tiled_schedule(
    batch: usize,
    resident_blocks: usize,
) -> Result<CoopSchedule, CoreError> {
    let (tile_height, blocks_per_tile) = (TILED_WINDOWS, TILED_BLOCKS_PER_TILE);
    let tiles = batch.div_ceil(tile_height);
    if both_directions_blocks(tiles, blocks_per_tile)? <= resident_blocks {
        return Ok(CoopSchedule {
            kind: RecurrenceKind::Tiled,
            tile_height,
            blocks_per_tile,
            tiles,
            concurrent: true,
            tiles_per_launch: tiles,
        });
    }
    sequential(
        RecurrenceKind::Tiled,
        tile_height,
        blocks_per_tile,
        batch,
        resident_blocks,
        "one tiled tile (8 blocks) exceeds the co-resident capacity",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks every invariant a launch sequence must keep.
    fn check(s: &CoopSchedule, batch: usize, resident_blocks: usize) {
        let launches = s.launches_per_direction();
        let mut covered = std::vec![0u32; batch];
        let mut next_tile = 0;
        for launch in 0..launches {
            let tiles = s.launch_tiles(launch);
            assert_eq!(tiles.start, next_tile, "launches are contiguous");
            assert!(!tiles.is_empty(), "no empty launch");
            next_tile = tiles.end;
            let blocks = s.grid_blocks(launch);
            let needed = if s.concurrent { 2 * blocks } else { blocks };
            assert!(
                needed <= resident_blocks,
                "{s:?}: launch {launch} needs {needed} of {resident_blocks}"
            );
            for tile in tiles {
                for w in s.tile_windows(tile, batch) {
                    covered[w] += 1;
                }
            }
        }
        assert_eq!(next_tile, s.tiles);
        assert!(covered.iter().all(|&c| c == 1), "every window exactly once");
        assert!(s.launch_tiles(launches).is_empty());
        assert_eq!(s.grid_blocks(launches), 0);
        assert!(s.peak_resident_blocks() <= resident_blocks);
        if s.concurrent {
            assert_eq!(
                launches.min(1),
                launches,
                "concurrent means one launch per direction"
            );
        }
    }

    #[test]
    fn wide_picks_the_first_height_that_fits_both_directions() {
        // H200 nominal: 2 blocks/SM x 132 SMs = 264.
        let s = choose_wide_schedule(8, 264).unwrap();
        assert_eq!(
            (
                s.tile_height,
                s.tiles,
                s.concurrent,
                s.launches_per_direction()
            ),
            (8, 1, true, 1)
        );
        // 64 windows: 8 tiles of 8 = 256 blocks for both directions: fits 264.
        let s = choose_wide_schedule(64, 264).unwrap();
        assert_eq!((s.tile_height, s.tiles, s.concurrent), (8, 8, true));
        // 65 windows: 9 tiles of 8 = 288 > 264; 5 tiles of 16 = 160: fits.
        let s = choose_wide_schedule(65, 264).unwrap();
        assert_eq!((s.tile_height, s.tiles, s.concurrent), (16, 5, true));
        // 256 windows: 8 tiles of 32 = 256 blocks for both: fits exactly.
        let s = choose_wide_schedule(256, 256).unwrap();
        assert_eq!(
            (s.tile_height, s.tiles, s.concurrent, s.grid_blocks(0)),
            (32, 8, true, 128)
        );
        for (batch, resident) in [(8, 264), (64, 264), (65, 264), (256, 256), (1, 32), (0, 0)] {
            check(
                &choose_wide_schedule(batch, resident).unwrap(),
                batch,
                resident,
            );
        }
    }

    #[test]
    fn wide_falls_back_to_sequential_32_row_launches() {
        // 257 windows in 256 blocks: 9 tiles of 32 -> 288 > 256 for both; sequential,
        // 16 tiles fit per launch: one launch of 9 tiles per direction.
        let s = choose_wide_schedule(257, 256).unwrap();
        assert_eq!(
            (s.tile_height, s.tiles, s.concurrent, s.tiles_per_launch),
            (32, 9, false, 9)
        );
        assert_eq!(s.launches_per_direction(), 1);
        // 1024 windows in 264 blocks: 32 tiles, 16 per launch (256 blocks) -> 2 launches.
        let s = choose_wide_schedule(1024, 264).unwrap();
        assert_eq!(
            (s.tiles, s.tiles_per_launch, s.launches_per_direction()),
            (32, 16, 2)
        );
        assert_eq!(s.launch_tiles(1), 16..32);
        // A capacity of exactly one tile: launches of one tile.
        let s = choose_wide_schedule(40, 16).unwrap();
        assert_eq!(
            (s.tile_height, s.tiles, s.tiles_per_launch, s.concurrent),
            (32, 2, 1, false)
        );
        // 31 blocks: one tile fits, two (both directions) do not.
        let s = choose_wide_schedule(1, 31).unwrap();
        assert_eq!(
            (s.tile_height, s.concurrent, s.launches_per_direction()),
            (32, false, 1)
        );
        for (batch, resident) in [
            (257, 256),
            (1024, 264),
            (40, 16),
            (1, 31),
            (1000, 17),
            (33, 48),
        ] {
            check(
                &choose_wide_schedule(batch, resident).unwrap(),
                batch,
                resident,
            );
        }
    }

    #[test]
    fn wide_needs_one_tile() {
        assert!(matches!(
            choose_wide_schedule(1, 15),
            Err(CoreError::NoPlan { .. })
        ));
        assert!(matches!(
            choose_wide_schedule(1, 0),
            Err(CoreError::NoPlan { .. })
        ));
        assert_eq!(choose_wide_schedule(1, 16).unwrap().tiles_per_launch, 1);
    }

    #[test]
    fn tiled_concurrent_then_sequential() {
        let s = choose_tiled_schedule(9, 264).unwrap();
        assert_eq!(
            (s.tile_height, s.blocks_per_tile, s.tiles, s.concurrent),
            (8, 8, 2, true)
        );
        // 132 tiles x 8 x 2 = 2112 > 264: sequential, 33 tiles per launch.
        let s = choose_tiled_schedule(1056, 264).unwrap();
        assert_eq!(
            (
                s.tiles,
                s.concurrent,
                s.tiles_per_launch,
                s.launches_per_direction()
            ),
            (132, false, 33, 4)
        );
        // Boundary: 16 tiles need 256 for both directions.
        assert!(choose_tiled_schedule(128, 256).unwrap().concurrent);
        assert!(!choose_tiled_schedule(129, 256).unwrap().concurrent);
        assert!(matches!(
            choose_tiled_schedule(9, 7),
            Err(CoreError::NoPlan { .. })
        ));
        for (batch, resident) in [
            (9, 264),
            (1056, 264),
            (128, 256),
            (129, 256),
            (1024, 8),
            (33, 9),
            (0, 0),
        ] {
            check(
                &choose_tiled_schedule(batch, resident).unwrap(),
                batch,
                resident,
            );
        }
    }

    #[test]
    fn batch_zero_is_empty_not_an_error() {
        for s in [
            choose_wide_schedule(0, 0).unwrap(),
            choose_tiled_schedule(0, 0).unwrap(),
        ] {
            assert_eq!(
                (s.tiles, s.launches_per_direction(), s.grid_blocks(0)),
                (0, 0, 0)
            );
        }
    }

    #[test]
    fn absurd_batches_overflow_cleanly() {
        assert!(matches!(
            choose_wide_schedule(usize::MAX, 264),
            Err(CoreError::Overflow { .. })
        ));
        assert!(matches!(
            choose_tiled_schedule(usize::MAX, 264),
            Err(CoreError::Overflow { .. })
        ));
    }

    #[test]
    fn exhaustive_small_sweep_keeps_invariants() {
        for resident in [16, 17, 31, 32, 48, 64, 100, 264, 296] {
            for batch in 0..300 {
                check(
                    &choose_wide_schedule(batch, resident).unwrap(),
                    batch,
                    resident,
                );
                check(
                    &choose_tiled_schedule(batch, resident).unwrap(),
                    batch,
                    resident,
                );
            }
        }
    }
}
