//! Which recurrence kernel runs: the cluster kernel where the device has thread-block
//! clusters and a cluster fits, else resident where R fits one SM, else tiled or wide by batch.

use core::fmt;

use super::{Decision, KernelResources, Reason, RecurrenceKind};
use crate::device::DeviceFacts;
use crate::error::CoreError;
use crate::geometry::{
    CLUSTER_MAX_WINDOWS, CLUSTER_MULTI_WINDOW_SIZE, CLUSTER_SIZES, CLUSTER_TILE_WINDOWS,
    TILED_BLOCKS_PER_TILE, WIDE_BLOCKS_PER_TILE,
};
use crate::occupancy::{Limit, Occupancy, blocks_per_sm};

/// Thread-block clusters, and so the cluster recurrence, exist from this compute capability on
/// (CUDA C++ Programming Guide, "Thread Block Clusters": compute capability 9.0).
pub const CLUSTER_MIN_COMPUTE_CAPABILITY: (u32, u32) = (9, 0);

/// The cluster size (CTAs per window and direction) while all `2 * batch` clusters of this size
/// fit the device at once with one CTA per SM: the driver's co-resident clusters over the CTAs
/// an SM holds (H200: 62 / 2 = 31 clusters, batch 15).
///
/// Measured on the H200 (2026-12-01, `bench/NOTES.md` "cluster harness": one layer, both
/// directions, 589 steps, ms per launch, the integrated kernels' PTX): batch 1 and 8: 4-CTA
/// 0.348 / 0.350 vs 2-CTA 0.408 / 0.411 (0.59 vs 0.69 us/step); batch 16 (32 clusters, more
/// than 31: two CTAs share SMs): 4-CTA 0.529 vs 2-CTA 0.407; batch 31: 0.574 vs 0.401.
pub const CLUSTER_ONE_WAVE_SIZE: usize = 4;

/// The cluster size once the `2 * batch` clusters of [`CLUSTER_ONE_WAVE_SIZE`] would share SMs.
///
/// Measured on the H200 (2026-12-01, same harness): 2-CTA clusters 0.401-0.408 ms per layer from
/// batch 1 to 33 (66 co-resident clusters: one wave), 4-CTA 0.828 at batch 32 (two waves).
pub const CLUSTER_WAVES_SIZE: usize = 2;

/// Why a cluster runs the number of windows it does ([`choose_cluster_windows`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClusterWindows {
    /// One window per cluster: all `clusters` one-window clusters fit one wave of `capacity`.
    OneWave {
        /// One-window clusters: `2 * batch`.
        clusters: usize,
        /// Co-resident clusters.
        capacity: usize,
    },
    /// One window per cluster: only [`CLUSTER_MULTI_WINDOW_SIZE`]-CTA clusters are built for
    /// more windows.
    OnlySize {
        /// The cluster size in use.
        cluster_size: usize,
    },
    /// [`CLUSTER_MAX_WINDOWS`] windows per cluster: one-window clusters would need more than one
    /// wave, and no window tile's waves cost less ([`CLUSTER_WAVE_LAYER_US`]).
    Several {
        /// Windows per cluster.
        windows: usize,
        /// One-window clusters it would take: `2 * batch`.
        clusters_one: usize,
        /// Co-resident clusters.
        capacity: usize,
    },
    /// A window-tile kernel (the register quads of 4 or 8 windows, or the 16-window tile with R
    /// in shared memory): cheaper than two-window clusters by [`CLUSTER_WAVE_LAYER_US`].
    Tile {
        /// Windows per cluster.
        windows: usize,
        /// Waves of its clusters.
        waves: usize,
        /// Its co-resident clusters.
        capacity: usize,
        /// Its estimated microseconds a layer.
        layer_us: usize,
        /// Two-window clusters' estimate.
        two_window_us: usize,
    },
    /// Forced through [`super::Overrides::cluster_windows`].
    Forced {
        /// Windows per cluster.
        windows: usize,
    },
}

impl fmt::Display for ClusterWindows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ClusterWindows::OneWave { clusters, capacity } => write!(
                f,
                "one window per cluster (all {clusters} fit one wave of {capacity})"
            ),
            ClusterWindows::OnlySize { cluster_size } => write!(
                f,
                "one window per cluster (only {CLUSTER_MULTI_WINDOW_SIZE}-CTA clusters run more; \
                 these have {cluster_size})"
            ),
            ClusterWindows::Several {
                windows,
                clusters_one,
                capacity,
            } => write!(
                f,
                "{windows} windows per cluster (one-window clusters would need {} waves of \
                 {capacity}; H200: batch 64 in 0.649 ms a layer vs 0.798, batch 1024 in 10.26 vs \
                 12.51 resident)",
                waves(clusters_one, capacity)
            ),
            ClusterWindows::Tile {
                windows,
                waves,
                capacity,
                layer_us,
                two_window_us,
            } => {
                // R lives where the kernel keeps it: shared memory when it takes dynamic shared
                // bytes (the 16-window tile), registers otherwise (the quads).
                let in_shared = super::tile_slot(windows)
                    .is_some_and(|t| crate::geometry::CLUSTER_TILE_DYNAMIC_SHARED[t] > 0);
                write!(
                    f,
                    "{windows} windows per cluster, R in {} ({waves} wave(s) of {capacity}: about \
                     {}.{:02} ms a layer against {}.{:02} with two-window clusters; H200 per-wave \
                     layer times",
                    if in_shared {
                        "shared memory"
                    } else {
                        "registers"
                    },
                    layer_us / 1000,
                    layer_us % 1000 / 10,
                    two_window_us / 1000,
                    two_window_us % 1000 / 10
                )?;
                // The measured costs the rule compares (CLUSTER_WAVE_LAYER_US), in ms rounded
                // to hundredths.
                for (i, &(_, us)) in CLUSTER_WAVE_LAYER_US.iter().enumerate() {
                    let centi = (us + 5) / 10;
                    let sep = if i == 0 { " " } else { " / " };
                    write!(f, "{sep}{}.{:02}", centi / 100, centi % 100)?;
                }
                f.write_str(" ms for")?;
                for (i, &(w, _)) in CLUSTER_WAVE_LAYER_US.iter().enumerate() {
                    write!(f, "{}{w}", if i == 0 { " " } else { " / " })?;
                }
                f.write_str(" windows)")
            }
            ClusterWindows::Forced { windows } => {
                write!(f, "{windows} window(s) per cluster, forced by override")
            }
        }
    }
}

/// Waves of `capacity` that `clusters` take (0 capacity: 0).
const fn waves(clusters: usize, capacity: usize) -> usize {
    match capacity {
        0 => 0,
        c => clusters.div_ceil(c),
    }
}

/// A windows-per-cluster choice and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WindowsDecision {
    /// Windows per cluster.
    pub windows: usize,
    /// Why.
    pub why: ClusterWindows,
}

/// Microseconds one wave of 2-CTA clusters takes for one layer (589 steps), for the register
/// kernel with [`CLUSTER_MAX_WINDOWS`] windows and the window-tile kernels of 4, 8 and 16
/// windows: the per-wave costs [`choose_cluster_windows`] compares.
///
/// Measured on the H200 (`bench --phases`, recurrence ms per layer over the waves of the grid):
/// two windows 0.592 (2026-12-01 session 6 calls 4-5, batch 64, one wave of 64 clusters; 0.593
/// in session 8 call 5); 16 windows (R in shared memory) 2.766 (session 6: batch 256, one wave
/// of 32, 2.760; batch 1024, two waves, 5.544); the register quads of session 8: 4 windows
/// 0.707-0.718 (calls 5-7, batch 128, one wave of 64; batch 256, two waves, 1.409-1.431), 8
/// windows (two quads in turn) 1.373-1.389 (calls 6-7, batch 256, one wave of 64; the
/// shared-memory 8-window tile they replaced took 1.938); the quads with 8-lane row groups of
/// session 10 (2026-12-02 call 8): 4 windows 0.700 (batch 128, one wave of 64), 8 windows 1.294
/// (batch 256, one wave of 64; batch 1024, four waves, 5.154); session 11 (2026-12-02 call 4,
/// the two quads half a step apart, advanced pointers, the ftz sigmoid): 4 windows 0.690
/// (batch 128), 8 windows 1.194 (batch 256; batch 1024, four waves, 4.763).
pub const CLUSTER_WAVE_LAYER_US: [(usize, usize); 4] =
    [(CLUSTER_MAX_WINDOWS, 592), (4, 690), (8, 1194), (16, 2766)];

/// Chooses how many windows each cluster of `capacity`'s size runs for `batch` windows: one
/// while all `2 * batch` one-window clusters fit one wave, else (2-CTA clusters only) the
/// cheapest of [`CLUSTER_MAX_WINDOWS`] windows with the register kernel and the window-tile
/// kernels of 8 and 16 windows (`tiles`, their capacities), by waves times
/// [`CLUSTER_WAVE_LAYER_US`] (ties to fewer windows); other sizes run one window.
///
/// Measured on the H200 (2026-12-01, `bench/NOTES.md`, whole forwards in ms, FP32): 2-CTA
/// clusters with two windows 0.647-0.649 a layer from batch 1 to 65 (one wave up to 66
/// clusters), one window 0.401-0.408 up to batch 33 and 0.795-0.799 from 48 to 65 (two waves);
/// the whole stack with 2 / 8 / 16 windows a cluster: batch 128 7.58 / 10.62 / 13.84, 192
/// 11.34 / 12.00 / 15.28, 256 15.09 / 13.43 / 16.69, 384 22.57 / 23.91 / 19.49, 512 30.11 /
/// 26.71 / 22.27, 768 45.08 / 40.09 / 38.63, 1024 59.96 / 53.32 / 44.24 (session 6 call 5):
/// the rule picks the fastest at every one of these batches.
pub const fn choose_cluster_windows(
    capacity: &ClusterCapacity,
    tiles: &[ClusterCapacity; CLUSTER_TILE_WINDOWS.len()],
    batch: usize,
) -> WindowsDecision {
    let clusters = batch.saturating_mul(2);
    if capacity.cluster_size != CLUSTER_MULTI_WINDOW_SIZE {
        return WindowsDecision {
            windows: 1,
            why: ClusterWindows::OnlySize {
                cluster_size: capacity.cluster_size,
            },
        };
    }
    if clusters <= capacity.clusters {
        return WindowsDecision {
            windows: 1,
            why: ClusterWindows::OneWave {
                clusters,
                capacity: capacity.clusters,
            },
        };
    }
    // The register kernel's two windows, then each tile that runs here.
    let two_us = wave_cost(
        batch,
        CLUSTER_MAX_WINDOWS,
        capacity.clusters,
        CLUSTER_WAVE_LAYER_US[0].1,
    );
    let mut best = (CLUSTER_MAX_WINDOWS, two_us, capacity.clusters);
    let mut i = 1;
    while i < CLUSTER_WAVE_LAYER_US.len() {
        let (windows, us) = CLUSTER_WAVE_LAYER_US[i];
        let cap = match super::tile_slot(windows) {
            Some(t) => tiles[t].clusters,
            None => 0,
        };
        let cost = wave_cost(batch, windows, cap, us);
        if cost < best.1 {
            best = (windows, cost, cap);
        }
        i += 1;
    }
    if best.0 == CLUSTER_MAX_WINDOWS {
        return WindowsDecision {
            windows: CLUSTER_MAX_WINDOWS,
            why: ClusterWindows::Several {
                windows: CLUSTER_MAX_WINDOWS,
                clusters_one: clusters,
                capacity: capacity.clusters,
            },
        };
    }
    WindowsDecision {
        windows: best.0,
        why: ClusterWindows::Tile {
            windows: best.0,
            waves: waves(2 * batch.div_ceil(best.0), best.2),
            capacity: best.2,
            layer_us: best.1,
            two_window_us: two_us,
        },
    }
}

/// Estimated microseconds a layer: waves of `capacity` clusters that `batch` windows in clusters
/// of `windows` take, times `wave_us`; `usize::MAX` when none fits.
const fn wave_cost(batch: usize, windows: usize, capacity: usize, wave_us: usize) -> usize {
    if capacity == 0 {
        return usize::MAX;
    }
    waves(batch.div_ceil(windows).saturating_mul(2), capacity).saturating_mul(wave_us)
}

/// Checks windows per cluster forced through [`super::Overrides::cluster_windows`]: 1 for any
/// size, [`CLUSTER_MAX_WINDOWS`] and each of [`crate::geometry::CLUSTER_TILE_WINDOWS`] with
/// [`CLUSTER_MULTI_WINDOW_SIZE`]-CTA clusters only ([`crate::geometry::cluster_kernel_built`]).
///
/// # Errors
/// [`CoreError::ForcedChoice`] for any other count.
pub const fn check_forced_cluster_windows(
    cluster_size: usize,
    windows: usize,
) -> Result<WindowsDecision, CoreError> {
    if crate::geometry::cluster_kernel_built(cluster_size, windows) {
        Ok(WindowsDecision {
            windows,
            why: ClusterWindows::Forced { windows },
        })
    } else {
        Err(CoreError::ForcedChoice {
            what: "windows per cluster",
            reason: "1, or 2, 4, 8 or 16 with 2-CTA clusters (the kernels built)",
        })
    }
}

/// Where a cluster capacity comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CapacitySource {
    /// Core's estimate: blocks per SM times SMs, divided by the cluster size. An upper bound:
    /// a cluster's CTAs must share one GPC, which the estimate ignores (H200: 66 4-CTA clusters
    /// estimated, 62 reported by the driver for the prototype).
    Estimate,
    /// The driver's `cuOccupancyMaxActiveClusters` for the compiled kernel
    /// ([`KernelResources::max_active_clusters`]).
    Driver,
}

impl fmt::Display for CapacitySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CapacitySource::Estimate => "estimate, an upper bound",
            CapacitySource::Driver => "driver",
        })
    }
}

/// How many clusters of one size the device holds at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClusterCapacity {
    /// CTAs per cluster (one of [`CLUSTER_SIZES`]).
    pub cluster_size: usize,
    /// Co-resident clusters (0: this size cannot run here), from [`cluster_capacity`].
    pub clusters: usize,
    /// Whether `clusters` is the driver's figure or core's estimate.
    pub source: CapacitySource,
    /// One CTA's occupancy by core's occupancy rules.
    pub occupancy: Occupancy,
}

impl ClusterCapacity {
    /// The capacity for clusters of `cluster_size` CTAs on `facts` with `resources`.
    pub const fn of(facts: &DeviceFacts, resources: &KernelResources, cluster_size: usize) -> Self {
        let occupancy = match resources.cluster(cluster_size) {
            Some(usage) => blocks_per_sm(facts, usage),
            None => Occupancy {
                blocks_per_sm: 0,
                limited_by: Limit::PerBlockLimit,
            },
        };
        ClusterCapacity {
            cluster_size,
            clusters: cluster_capacity(facts, resources, cluster_size),
            source: match resources.driver_clusters(cluster_size) {
                Some(_) => CapacitySource::Driver,
                None => CapacitySource::Estimate,
            },
            occupancy,
        }
    }

    /// The capacity for the window-tile kernel of `windows` windows (2-CTA clusters) on `facts`
    /// with `resources`: the driver's figure when measured
    /// ([`KernelResources::tile_max_active_clusters`]), else core's estimate (one CTA per SM
    /// where its 128 KiB of R and hidden state fit: 0 on GPUs with less shared memory per SM);
    /// 0 where the device has no 2-CTA clusters or `windows` is not a tile.
    pub const fn of_tile(facts: &DeviceFacts, resources: &KernelResources, windows: usize) -> Self {
        let size = CLUSTER_MULTI_WINDOW_SIZE;
        let occupancy = match resources.cluster_kernel(size, windows) {
            Some(usage) if super::tile_slot(windows).is_some() => blocks_per_sm(facts, usage),
            _ => Occupancy {
                blocks_per_sm: 0,
                limited_by: Limit::PerBlockLimit,
            },
        };
        let driver = resources.driver_tile_clusters(windows);
        let clusters = if !device_has_clusters_of(facts, size) {
            0
        } else {
            match driver {
                Some(c) => c as usize,
                None => occupancy.co_resident_blocks(facts.sm_count) / size,
            }
        };
        ClusterCapacity {
            cluster_size: size,
            clusters,
            source: match driver {
                Some(_) => CapacitySource::Driver,
                None => CapacitySource::Estimate,
            },
            occupancy,
        }
    }

    /// CTAs of whole co-resident clusters: `clusters * cluster_size`.
    pub const fn ctas(&self) -> usize {
        self.clusters.saturating_mul(self.cluster_size)
    }
}

/// Whether the device runs clusters of `cluster_size` CTAs at all: compute capability at least
/// [`CLUSTER_MIN_COMPUTE_CAPABILITY`], `cluster_size` built ([`CLUSTER_SIZES`]) and within
/// [`DeviceFacts::max_cluster_size`].
const fn device_has_clusters_of(facts: &DeviceFacts, cluster_size: usize) -> bool {
    let (major, minor) = facts.compute_capability;
    let (min_major, min_minor) = CLUSTER_MIN_COMPUTE_CAPABILITY;
    (major > min_major || (major == min_major && minor >= min_minor))
        && super::cluster_slot(cluster_size).is_some()
        && cluster_size <= facts.max_cluster_size as usize
}

/// Co-resident clusters of `cluster_size` CTAs of the cluster recurrence on the device `facts`
/// describes, with `resources`: 0 where the device has no such clusters (before
/// [`CLUSTER_MIN_COMPUTE_CAPABILITY`], above [`DeviceFacts::max_cluster_size`], a size not in
/// [`CLUSTER_SIZES`]); else the driver's figure when the backend measured it
/// ([`KernelResources::max_active_clusters`], `Some(0)`: cannot run); else core's estimate
/// `blocks_per_sm * sm_count / cluster_size` ([`CapacitySource::Estimate`], an upper bound).
pub const fn cluster_capacity(
    facts: &DeviceFacts,
    resources: &KernelResources,
    cluster_size: usize,
) -> usize {
    if !device_has_clusters_of(facts, cluster_size) {
        return 0;
    }
    if let Some(clusters) = resources.driver_clusters(cluster_size) {
        return clusters as usize;
    }
    match resources.cluster(cluster_size) {
        Some(usage) => {
            blocks_per_sm(facts, usage).co_resident_blocks(facts.sm_count) / cluster_size
        }
        None => 0,
    }
}

/// Why the cluster recurrence does not run on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClusterRefusal {
    /// Compute capability below [`CLUSTER_MIN_COMPUTE_CAPABILITY`]: no clusters.
    Architecture {
        /// The device's compute capability.
        compute_capability: (u32, u32),
    },
    /// The device reports no cluster launch ([`DeviceFacts::max_cluster_size`] is 0).
    NoClusterLaunch,
    /// The device's largest cluster is smaller than every size built.
    MaxClusterSize {
        /// [`DeviceFacts::max_cluster_size`].
        max_cluster_size: u32,
    },
    /// No cluster of any size fits the device.
    NoCapacity {
        /// Whether the driver said so or core's estimate.
        source: CapacitySource,
        /// What keeps a 2-CTA cluster's CTA off an SM by core's rules.
        limited_by: Limit,
    },
}

impl fmt::Display for ClusterRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (min_major, min_minor) = CLUSTER_MIN_COMPUTE_CAPABILITY;
        match *self {
            ClusterRefusal::Architecture {
                compute_capability: (major, minor),
            } => write!(
                f,
                "no thread-block clusters before {min_major}.{min_minor} (this is {major}.{minor})"
            ),
            ClusterRefusal::NoClusterLaunch => f.write_str("the device reports no cluster launch"),
            ClusterRefusal::MaxClusterSize { max_cluster_size } => write!(
                f,
                "the device's largest cluster ({max_cluster_size} CTAs) is below {}",
                CLUSTER_SIZES[0]
            ),
            ClusterRefusal::NoCapacity {
                source: CapacitySource::Driver,
                ..
            } => f.write_str("the driver says 0 clusters of 2 or 4 CTAs fit"),
            ClusterRefusal::NoCapacity {
                source: CapacitySource::Estimate,
                limited_by,
            } => write!(
                f,
                "no cluster of 2 or 4 CTAs fits (estimate; limited by {limited_by})"
            ),
        }
    }
}

impl ClusterRefusal {
    /// The refusal as a fixed message, for [`CoreError::ForcedChoice`].
    const fn message(self) -> &'static str {
        match self {
            ClusterRefusal::Architecture { .. } => {
                "thread-block clusters need compute capability 9.0 or newer"
            }
            ClusterRefusal::NoClusterLaunch => "the device reports no cluster launch",
            ClusterRefusal::MaxClusterSize { .. } => {
                "the device's largest cluster is below the sizes built"
            }
            ClusterRefusal::NoCapacity {
                source: CapacitySource::Driver,
                ..
            } => "the driver says 0 clusters fit",
            ClusterRefusal::NoCapacity {
                source: CapacitySource::Estimate,
                ..
            } => "no cluster fits the device (estimate)",
        }
    }
}

/// The tiled recurrence from this batch on; the wide one below it. Only for GPUs where the
/// resident kernel does not fit an SM (7.5, 8.6, 8.9, 12.0 in the table), none of which anyone
/// here can measure: the rule stays upstream's, derived there from measurements.
///
/// Upstream: tiled beat wide from 9 windows on an RTX 4060 Ti (8.9) and an RTX 5060 Ti (12.0).
/// Cross-check on the H200 (2026-11-29, both kinds forced, ms per forward, 589 frames, FP32,
/// `bench/NOTES.md`): wide 6.26 vs tiled 6.44 at batch 8, wide 6.65 vs tiled 6.45 at batch 9,
/// wide 7.63 vs tiled 7.80 at 32, wide 14.14 vs tiled 9.13 at 64, wide 67.97 vs tiled 26.98 at
/// 256: the two are within 3% up to batch 32 and tiled wins by far from 64, consistent with
/// the threshold. Re-run `backend-cuda/examples/bench.rs --kinds wide,tiled` before changing it.
pub const TILED_MIN_BATCH: usize = 9;

/// The resident recurrence runs wherever at least this many of its blocks fit an SM.
///
/// Measured on the H200 (9.0, 2026-11-29, `bench/NOTES.md`; ms per forward of the pyannote
/// stack, 589 frames, FP32, each kind forced, CUDA events around `forward_device`): the resident
/// kernel is the fastest at every batch measured, 1 to 1024:
///
/// | batch | resident | tiled | wide |
/// |---:|---:|---:|---:|
/// | 1 | 3.84 | 6.09 | 6.35 |
/// | 9 | 4.15 | 6.45 | 6.65 |
/// | 32 | 5.00 | 7.80 | 7.63 |
/// | 128 | 12.56 | 13.50 | 34.04 |
/// | 1024 | 99.36 | 107.41 | 270.88 |
///
/// So on 9.0 the rule "resident wherever it fits" is a measured one ([`MEASURED_ARCHITECTURES`]).
/// Elsewhere (A100, Orin, B200 in the table) it is derived from resources: the kernel fits
/// there and needs neither cooperative launch nor exchange; upstream measured it on an A100
/// (8.0): resident beat tiled at batch 32 (0.97 vs 1.38 ms per layer) and wide by at least 18%
/// from batch 2. Not measured here.
pub const RESIDENT_MIN_BLOCKS_PER_SM: u32 = 1;

/// Compute capabilities whose recurrence rule was measured in this project (the H200 figures
/// of [`RESIDENT_MIN_BLOCKS_PER_SM`]). Plans for the other table entries follow the same rules
/// from their resources and say so in their reason.
pub const MEASURED_ARCHITECTURES: [(u32, u32); 1] = [(9, 0)];

/// Blocks one tile of a cooperative kind needs (0 for the resident and cluster kinds, which
/// have no tiles).
pub const fn blocks_per_tile(kind: RecurrenceKind) -> usize {
    match kind {
        RecurrenceKind::Wide => WIDE_BLOCKS_PER_TILE,
        RecurrenceKind::Tiled => TILED_BLOCKS_PER_TILE,
        RecurrenceKind::Resident | RecurrenceKind::Cluster => 0,
    }
}

/// The occupancy of each recurrence kernel on one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecurrenceOccupancy {
    /// The wide kernel's.
    pub wide: Occupancy,
    /// The tiled kernel's.
    pub tiled: Occupancy,
    /// The resident kernel's.
    pub resident: Occupancy,
    /// Shared bytes (static plus dynamic) one resident block asks for.
    pub resident_shared_bytes: u32,
    /// The cluster kernel's capacity for each size of [`CLUSTER_SIZES`] (same index).
    pub clusters: [ClusterCapacity; CLUSTER_SIZES.len()],
    /// The window-tile kernels' capacities (2-CTA clusters of each of [`CLUSTER_TILE_WINDOWS`],
    /// same index).
    pub tiles: [ClusterCapacity; CLUSTER_TILE_WINDOWS.len()],
}

impl RecurrenceOccupancy {
    /// Each recurrence kernel's occupancy on `facts` with `resources`.
    pub const fn of(facts: &DeviceFacts, resources: &KernelResources) -> Self {
        RecurrenceOccupancy {
            wide: blocks_per_sm(facts, &resources.wide),
            tiled: blocks_per_sm(facts, &resources.tiled),
            resident: blocks_per_sm(facts, &resources.resident),
            resident_shared_bytes: match resources.resident.shared_bytes() {
                Some(bytes) => bytes,
                None => u32::MAX,
            },
            clusters: [
                ClusterCapacity::of(facts, resources, CLUSTER_SIZES[0]),
                ClusterCapacity::of(facts, resources, CLUSTER_SIZES[1]),
            ],
            tiles: [
                ClusterCapacity::of_tile(facts, resources, CLUSTER_TILE_WINDOWS[0]),
                ClusterCapacity::of_tile(facts, resources, CLUSTER_TILE_WINDOWS[1]),
                ClusterCapacity::of_tile(facts, resources, CLUSTER_TILE_WINDOWS[2]),
            ],
        }
    }

    /// The capacity of the cluster kernel for clusters of `cluster_size` CTAs running `windows`
    /// windows each: the window-tile kernel's for a tile of [`CLUSTER_TILE_WINDOWS`] (2-CTA
    /// clusters only), else the size's ([`RecurrenceOccupancy::cluster`]).
    pub const fn cluster_kernel(
        &self,
        cluster_size: usize,
        windows: usize,
    ) -> Option<&ClusterCapacity> {
        match super::tile_slot(windows) {
            Some(i) if cluster_size == CLUSTER_MULTI_WINDOW_SIZE => Some(&self.tiles[i]),
            Some(_) => None,
            None => self.cluster(cluster_size),
        }
    }

    /// The occupancy of `kind`'s kernel; for the cluster kind, the largest size's
    /// ([`RecurrenceOccupancy::cluster`] gives each size's).
    pub const fn get(&self, kind: RecurrenceKind) -> Occupancy {
        match kind {
            RecurrenceKind::Wide => self.wide,
            RecurrenceKind::Tiled => self.tiled,
            RecurrenceKind::Resident => self.resident,
            RecurrenceKind::Cluster => self.clusters[CLUSTER_SIZES.len() - 1].occupancy,
        }
    }

    /// The capacity for clusters of `cluster_size` CTAs; `None` for a size not in
    /// [`CLUSTER_SIZES`].
    pub const fn cluster(&self, cluster_size: usize) -> Option<&ClusterCapacity> {
        match super::cluster_slot(cluster_size) {
            Some(i) => Some(&self.clusters[i]),
            None => None,
        }
    }

    /// Co-resident clusters of `cluster_size` CTAs (0 for a size not built).
    const fn clusters_of(&self, cluster_size: usize) -> usize {
        match self.cluster(cluster_size) {
            Some(c) => c.clusters,
            None => 0,
        }
    }

    /// Blocks of `kind`'s kernel the whole device holds at once.
    pub const fn capacity(&self, kind: RecurrenceKind, sm_count: u32) -> usize {
        self.get(kind).co_resident_blocks(sm_count)
    }
}

/// Whether one tile of a cooperative `kind` fits the device's co-resident capacity.
const fn cooperative_fits(
    facts: &DeviceFacts,
    occupancy: &RecurrenceOccupancy,
    kind: RecurrenceKind,
) -> bool {
    facts.cooperative_launch
        && occupancy.get(kind).blocks_per_sm > 0
        && occupancy.capacity(kind, facts.sm_count) >= blocks_per_tile(kind)
}

/// Chooses the cluster size of the cluster recurrence for `batch` windows (`2 * batch`
/// clusters, one per window and direction), or says why the device runs no clusters.
///
/// A size can run when the compute capability is at least [`CLUSTER_MIN_COMPUTE_CAPABILITY`],
/// [`DeviceFacts::max_cluster_size`] allows it and its capacity ([`cluster_capacity`]) is not
/// 0. Then [`CLUSTER_ONE_WAVE_SIZE`] while all `2 * batch` of its clusters fit one wave, else
/// [`CLUSTER_WAVES_SIZE`] (in as many waves as it takes); if only one size can run, that one.
/// The reason quotes the clusters, the capacity and whether the driver gave it or core
/// estimated it.
///
/// # Errors
/// The [`ClusterRefusal`] when no size can run.
pub fn choose_cluster_size(
    facts: &DeviceFacts,
    occupancy: &RecurrenceOccupancy,
    batch: usize,
) -> Result<Decision<usize>, ClusterRefusal> {
    if facts.compute_capability < CLUSTER_MIN_COMPUTE_CAPABILITY {
        return Err(ClusterRefusal::Architecture {
            compute_capability: facts.compute_capability,
        });
    }
    if facts.max_cluster_size == 0 {
        return Err(ClusterRefusal::NoClusterLaunch);
    }
    if CLUSTER_SIZES
        .iter()
        .all(|&size| size > facts.max_cluster_size as usize)
    {
        return Err(ClusterRefusal::MaxClusterSize {
            max_cluster_size: facts.max_cluster_size,
        });
    }
    let clusters = batch.saturating_mul(2);
    // 4-CTA clusters only while each of their CTAs has an SM to itself.
    let one_wave = match occupancy.cluster(CLUSTER_ONE_WAVE_SIZE) {
        Some(c) if c.occupancy.blocks_per_sm > 1 => c.clusters / c.occupancy.blocks_per_sm as usize,
        Some(c) => c.clusters,
        None => 0,
    };
    let waves = occupancy.clusters_of(CLUSTER_WAVES_SIZE);
    let size = if one_wave > 0 && clusters <= one_wave {
        CLUSTER_ONE_WAVE_SIZE
    } else if waves > 0 {
        CLUSTER_WAVES_SIZE
    } else if one_wave > 0 {
        CLUSTER_ONE_WAVE_SIZE
    } else {
        let (source, limited_by) = match occupancy.cluster(CLUSTER_WAVES_SIZE) {
            Some(c) => (c.source, c.occupancy.limited_by),
            None => (CapacitySource::Estimate, Limit::PerBlockLimit),
        };
        return Err(ClusterRefusal::NoCapacity { source, limited_by });
    };
    let (capacity, source) = match occupancy.cluster(size) {
        Some(c) => (c.clusters, c.source),
        None => (0, CapacitySource::Estimate),
    };
    Ok(Decision {
        choice: size,
        reason: Reason::ClusterFits {
            cluster_size: size,
            clusters,
            capacity,
            source,
            one_wave_capacity: one_wave,
        },
    })
}

/// Chooses the recurrence kernel for `batch` windows.
///
/// 1. Cluster wherever a cluster of some size can run ([`choose_cluster_size`]): compute
///    capability 9.0 and later with cluster launch and room for a cluster.
/// 2. Else resident when at least [`RESIDENT_MIN_BLOCKS_PER_SM`] of its blocks fit an SM (it
///    needs no cooperative launch).
/// 3. Otherwise a cooperative kernel, which needs [`DeviceFacts::cooperative_launch`]: tiled
///    from [`TILED_MIN_BATCH`] windows, wide below; if one tile of that kind exceeds the
///    co-resident capacity, the other kind when its tile fits.
///
/// The reasons of 2 and 3 also say why no cluster runs.
///
/// # Errors
/// [`CoreError::NoPlan`] when no cluster, no resident block and no cooperative tile can run
/// (no cooperative launch, or not even one tile fits).
pub fn choose_recurrence(
    facts: &DeviceFacts,
    occupancy: &RecurrenceOccupancy,
    batch: usize,
) -> Result<Decision<RecurrenceKind>, CoreError> {
    let no_cluster = match choose_cluster_size(facts, occupancy, batch) {
        Ok(d) => {
            return Ok(Decision {
                choice: RecurrenceKind::Cluster,
                reason: d.reason,
            });
        }
        Err(why) => why,
    };
    let resident = occupancy.resident;
    if resident.blocks_per_sm >= RESIDENT_MIN_BLOCKS_PER_SM {
        return Ok(Decision {
            choice: RecurrenceKind::Resident,
            reason: Reason::ResidentFits {
                blocks_per_sm: resident.blocks_per_sm,
                shared_bytes: occupancy.resident_shared_bytes,
                measured_here: MEASURED_ARCHITECTURES.contains(&facts.compute_capability),
                no_cluster,
            },
        });
    }
    if !facts.cooperative_launch {
        return Err(CoreError::NoPlan {
            reason: "the resident recurrence does not fit an SM and the device has no cooperative launch",
        });
    }
    let preferred = if batch >= TILED_MIN_BATCH {
        RecurrenceKind::Tiled
    } else {
        RecurrenceKind::Wide
    };
    if cooperative_fits(facts, occupancy, preferred) {
        return Ok(Decision {
            choice: preferred,
            reason: Reason::ByBatch {
                chosen: preferred,
                batch,
                resident_limit: resident.limited_by,
                no_cluster,
            },
        });
    }
    let other = match preferred {
        RecurrenceKind::Tiled => RecurrenceKind::Wide,
        _ => RecurrenceKind::Tiled,
    };
    if cooperative_fits(facts, occupancy, other) {
        return Ok(Decision {
            choice: other,
            reason: Reason::CooperativeFallback {
                chosen: other,
                preferred,
                needed: blocks_per_tile(preferred),
                capacity: occupancy.capacity(preferred, facts.sm_count),
                no_cluster,
            },
        });
    }
    Err(CoreError::NoPlan {
        reason: "the resident recurrence does not fit an SM and no cooperative tile fits the co-resident capacity",
    })
}

/// Checks a recurrence forced through [`super::Overrides`].
///
/// # Errors
/// [`CoreError::ForcedChoice`] when the resident kernel does not fit an SM, a cooperative
/// kernel lacks cooperative launch or room for one tile, or the cluster kernel cannot run
/// (no size passes [`choose_cluster_size`]'s conditions).
pub fn check_forced_recurrence(
    facts: &DeviceFacts,
    occupancy: &RecurrenceOccupancy,
    kind: RecurrenceKind,
) -> Result<Decision<RecurrenceKind>, CoreError> {
    let reason = Reason::ForcedRecurrence(kind);
    match kind {
        RecurrenceKind::Resident if occupancy.resident.blocks_per_sm == 0 => {
            Err(CoreError::ForcedChoice {
                what: "resident recurrence",
                reason: "its registers and shared memory do not fit one SM",
            })
        }
        RecurrenceKind::Resident => Ok(Decision {
            choice: kind,
            reason,
        }),
        RecurrenceKind::Wide | RecurrenceKind::Tiled if !facts.cooperative_launch => {
            Err(CoreError::ForcedChoice {
                what: "cooperative recurrence",
                reason: "the device has no cooperative launch",
            })
        }
        RecurrenceKind::Wide | RecurrenceKind::Tiled
            if !cooperative_fits(facts, occupancy, kind) =>
        {
            Err(CoreError::ForcedChoice {
                what: "cooperative recurrence",
                reason: "one tile exceeds the co-resident capacity",
            })
        }
        RecurrenceKind::Wide | RecurrenceKind::Tiled => Ok(Decision {
            choice: kind,
            reason,
        }),
        RecurrenceKind::Cluster => match choose_cluster_size(facts, occupancy, 0) {
            Ok(_) => Ok(Decision {
                choice: kind,
                reason,
            }),
            Err(why) => Err(CoreError::ForcedChoice {
                what: "cluster recurrence",
                reason: why.message(),
            }),
        },
    }
}

/// Checks a cluster size forced through [`super::Overrides::cluster_size`] for the cluster
/// recurrence; returns the size and its reason ([`Reason::ForcedClusterSize`]).
///
/// # Errors
/// [`CoreError::ForcedChoice`] for a size not in [`CLUSTER_SIZES`], a device without clusters
/// (before [`CLUSTER_MIN_COMPUTE_CAPABILITY`]), a size above [`DeviceFacts::max_cluster_size`],
/// or a size of which no cluster fits ([`cluster_capacity`] is 0).
pub fn check_forced_cluster_size(
    facts: &DeviceFacts,
    occupancy: &RecurrenceOccupancy,
    cluster_size: usize,
) -> Result<Decision<usize>, CoreError> {
    let what = "cluster size";
    let Some(capacity) = occupancy.cluster(cluster_size) else {
        return Err(CoreError::ForcedChoice {
            what,
            reason: "not a cluster size built (2 or 4 CTAs)",
        });
    };
    if facts.compute_capability < CLUSTER_MIN_COMPUTE_CAPABILITY {
        return Err(CoreError::ForcedChoice {
            what,
            reason: "thread-block clusters need compute capability 9.0 or newer",
        });
    }
    if cluster_size > facts.max_cluster_size as usize {
        return Err(CoreError::ForcedChoice {
            what,
            reason: "above the device's largest cluster size",
        });
    }
    if capacity.clusters == 0 {
        return Err(CoreError::ForcedChoice {
            what,
            reason: "no cluster of this size fits the device",
        });
    }
    Ok(Decision {
        choice: cluster_size,
        reason: Reason::ForcedClusterSize {
            cluster_size,
            capacity: capacity.clusters,
            source: capacity.source,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::table;
    use crate::occupancy::Limit;

    fn occ(blocks_per_sm: u32, limited_by: Limit) -> Occupancy {
        Occupancy {
            blocks_per_sm,
            limited_by,
        }
    }

    /// A device with `sms` SMs and cooperative launch as given; occupancies set by hand.
    fn device(sms: u32, cooperative: bool) -> DeviceFacts {
        DeviceFacts {
            sm_count: sms,
            cooperative_launch: cooperative,
            ..table::find("rtx4090").unwrap().facts
        }
    }

    const NO_RESIDENT: Occupancy = Occupancy {
        blocks_per_sm: 0,
        limited_by: Limit::PerBlockLimit,
    };

    const NO_TILES: [ClusterCapacity; 3] = [NO_CLUSTERS[0]; 3];

    const NO_CLUSTERS: [ClusterCapacity; 2] = [
        ClusterCapacity {
            cluster_size: 2,
            clusters: 0,
            source: CapacitySource::Estimate,
            occupancy: NO_RESIDENT,
        },
        ClusterCapacity {
            cluster_size: 4,
            clusters: 0,
            source: CapacitySource::Estimate,
            occupancy: NO_RESIDENT,
        },
    ];

    /// Ada has no clusters.
    const ADA: ClusterRefusal = ClusterRefusal::Architecture {
        compute_capability: (8, 9),
    };

    fn kinds(
        facts: &DeviceFacts,
        o: &RecurrenceOccupancy,
        batch: usize,
    ) -> Result<RecurrenceKind, CoreError> {
        choose_recurrence(facts, o, batch).map(|d| d.choice)
    }

    #[test]
    fn resident_wins_wherever_it_fits() {
        let o = RecurrenceOccupancy {
            wide: occ(2, Limit::Registers),
            tiled: occ(2, Limit::Registers),
            resident: occ(1, Limit::Registers),
            resident_shared_bytes: 134_144,
            clusters: NO_CLUSTERS,
            tiles: NO_TILES,
        };
        for batch in [0, 1, 8, 9, 1024] {
            assert_eq!(
                kinds(&device(132, true), &o, batch),
                Ok(RecurrenceKind::Resident)
            );
            // Not cooperative: no cooperative launch needed.
            assert_eq!(
                kinds(&device(1, false), &o, batch),
                Ok(RecurrenceKind::Resident)
            );
        }
    }

    #[test]
    fn only_measured_architectures_say_so() {
        let nominal = crate::plan::KernelResources::nominal();
        for (name, measured) in [
            ("h200", true),
            ("h100", true),
            ("a100", false),
            ("b200", false),
        ] {
            // Without cluster launch, so that the resident kernel runs on 9.0 and 10.0 too.
            let f = DeviceFacts {
                max_cluster_size: 0,
                ..table::find(name).unwrap().facts
            };
            let o = RecurrenceOccupancy::of(&f, &nominal);
            let d = choose_recurrence(&f, &o, 32).unwrap();
            assert_eq!(d.choice, RecurrenceKind::Resident, "{name}");
            let no_cluster = if f.compute_capability.0 >= 9 {
                ClusterRefusal::NoClusterLaunch
            } else {
                ClusterRefusal::Architecture {
                    compute_capability: f.compute_capability,
                }
            };
            assert!(
                matches!(d.reason, Reason::ResidentFits { measured_here, no_cluster: n, .. }
                    if measured_here == measured && n == no_cluster),
                "{name}: {:?}",
                d.reason
            );
        }
    }

    #[test]
    fn batch_splits_wide_and_tiled() {
        let o = RecurrenceOccupancy {
            wide: occ(2, Limit::Registers),
            tiled: occ(2, Limit::Registers),
            resident: NO_RESIDENT,
            resident_shared_bytes: 134_144,
            clusters: NO_CLUSTERS,
            tiles: NO_TILES,
        };
        let d = device(128, true);
        for batch in [0, 1, 2, 7, 8] {
            assert_eq!(
                kinds(&d, &o, batch),
                Ok(RecurrenceKind::Wide),
                "batch {batch}"
            );
        }
        for batch in [9, 32, 33, 1024] {
            assert_eq!(
                kinds(&d, &o, batch),
                Ok(RecurrenceKind::Tiled),
                "batch {batch}"
            );
        }
        let r = choose_recurrence(&d, &o, 9).unwrap().reason;
        assert_eq!(
            r,
            Reason::ByBatch {
                chosen: RecurrenceKind::Tiled,
                batch: 9,
                resident_limit: Limit::PerBlockLimit,
                no_cluster: ADA,
            }
        );
    }

    #[test]
    fn small_devices_fall_back_or_refuse() {
        let o = RecurrenceOccupancy {
            wide: occ(2, Limit::Registers),
            tiled: occ(2, Limit::Registers),
            resident: NO_RESIDENT,
            resident_shared_bytes: 134_144,
            clusters: NO_CLUSTERS,
            tiles: NO_TILES,
        };
        // 4 SMs x 2 = 8 co-resident: a wide tile (16) does not fit, a tiled tile (8) does.
        let d = choose_recurrence(&device(4, true), &o, 1).unwrap();
        assert_eq!(d.choice, RecurrenceKind::Tiled);
        assert_eq!(
            d.reason,
            Reason::CooperativeFallback {
                chosen: RecurrenceKind::Tiled,
                preferred: RecurrenceKind::Wide,
                needed: 16,
                capacity: 8,
                no_cluster: ADA,
            }
        );
        // 3 SMs x 2 = 6: nothing fits.
        assert!(matches!(
            kinds(&device(3, true), &o, 1),
            Err(CoreError::NoPlan { .. })
        ));
        assert!(matches!(
            kinds(&device(2, true), &o, 32),
            Err(CoreError::NoPlan { .. })
        ));
        // Tiled kernel that cannot launch at all: batch 9+ falls back to wide.
        let o2 = RecurrenceOccupancy {
            tiled: NO_RESIDENT,
            ..o
        };
        assert_eq!(kinds(&device(128, true), &o2, 32), Ok(RecurrenceKind::Wide));
    }

    #[test]
    fn cooperative_kernels_need_cooperative_launch() {
        let o = RecurrenceOccupancy {
            wide: occ(2, Limit::Registers),
            tiled: occ(2, Limit::Registers),
            resident: NO_RESIDENT,
            resident_shared_bytes: 134_144,
            clusters: NO_CLUSTERS,
            tiles: NO_TILES,
        };
        let e = choose_recurrence(&device(128, false), &o, 4).unwrap_err();
        assert!(matches!(e, CoreError::NoPlan { .. }));
    }

    #[test]
    fn forced_recurrences_are_checked() {
        let fits = RecurrenceOccupancy {
            wide: occ(2, Limit::Registers),
            tiled: occ(2, Limit::Registers),
            resident: occ(1, Limit::Registers),
            resident_shared_bytes: 134_144,
            clusters: NO_CLUSTERS,
            tiles: NO_TILES,
        };
        let no_resident = RecurrenceOccupancy {
            resident: NO_RESIDENT,
            ..fits
        };
        let d = device(128, true);
        assert!(matches!(
            check_forced_recurrence(&d, &no_resident, RecurrenceKind::Resident),
            Err(CoreError::ForcedChoice {
                what: "resident recurrence",
                ..
            })
        ));
        assert_eq!(
            check_forced_recurrence(&d, &fits, RecurrenceKind::Wide)
                .unwrap()
                .choice,
            RecurrenceKind::Wide
        );
        assert!(matches!(
            check_forced_recurrence(&device(128, false), &fits, RecurrenceKind::Tiled),
            Err(CoreError::ForcedChoice { .. })
        ));
        assert!(matches!(
            check_forced_recurrence(&device(7, true), &fits, RecurrenceKind::Wide),
            Err(CoreError::ForcedChoice { .. })
        ));
        assert_eq!(
            check_forced_recurrence(&device(1, false), &fits, RecurrenceKind::Resident)
                .unwrap()
                .reason,
            Reason::ForcedRecurrence(RecurrenceKind::Resident)
        );
    }

    /// The H200 with the nominal resources but the cluster capacities the prototype's driver
    /// query reported (DESIGN §7): 66 2-CTA and 62 4-CTA clusters.
    fn h200_driver(two: Option<u32>, four: Option<u32>) -> (DeviceFacts, RecurrenceOccupancy) {
        let f = table::find("h200").unwrap().facts;
        let r = KernelResources {
            max_active_clusters: [two, four],
            ..KernelResources::nominal()
        };
        (f, RecurrenceOccupancy::of(&f, &r))
    }

    fn size(
        facts: &DeviceFacts,
        o: &RecurrenceOccupancy,
        batch: usize,
    ) -> Result<usize, ClusterRefusal> {
        choose_cluster_size(facts, o, batch).map(|d| d.choice)
    }

    #[test]
    fn cluster_size_switches_at_the_wave_boundary() {
        let (f, o) = h200_driver(Some(66), Some(62));
        // 62 four-CTA clusters fit at two CTAs per SM, 31 at one: 2 * 15 = 30 clusters of 4 have
        // an SM per CTA, 32 do not.
        for (batch, want) in [
            (0, 4),
            (1, 4),
            (8, 4),
            (15, 4),
            (16, 2),
            (31, 2),
            (32, 2),
            (1024, 2),
        ] {
            assert_eq!(size(&f, &o, batch), Ok(want), "batch {batch}");
            assert_eq!(
                kinds(&f, &o, batch),
                Ok(RecurrenceKind::Cluster),
                "batch {batch}"
            );
        }
        assert_eq!(
            choose_cluster_size(&f, &o, 15).unwrap().reason,
            Reason::ClusterFits {
                cluster_size: 4,
                clusters: 30,
                capacity: 62,
                source: CapacitySource::Driver,
                one_wave_capacity: 31,
            }
        );
        let r = choose_recurrence(&f, &o, 32).unwrap().reason;
        assert_eq!(
            r,
            Reason::ClusterFits {
                cluster_size: 2,
                clusters: 64,
                capacity: 66,
                source: CapacitySource::Driver,
                one_wave_capacity: 31,
            }
        );
        let line = r.to_string();
        assert!(
            line.starts_with("cluster: 2-CTA clusters, 64 clusters"),
            "{line}"
        );
        assert!(line.contains("66 co-resident (driver), 1 wave;"), "{line}");
        assert!(
            line.contains("64 4-CTA clusters would share SMs (one CTA per SM up to 31"),
            "{line}"
        );
    }

    #[test]
    fn cluster_capacity_is_estimated_without_the_driver() {
        let f = table::find("h200").unwrap().facts;
        let r = KernelResources::nominal();
        // 195 registers: one CTA per SM, 132 / 2; 117 registers: two per SM, 264 / 4.
        assert_eq!(cluster_capacity(&f, &r, 2), 66);
        assert_eq!(cluster_capacity(&f, &r, 4), 66);
        let o = RecurrenceOccupancy::of(&f, &r);
        assert_eq!(o.cluster(4).unwrap().source, CapacitySource::Estimate);
        assert_eq!(o.cluster(4).unwrap().ctas(), 264);
        // One CTA per SM: 33 clusters of 4, batch 16.
        assert_eq!(size(&f, &o, 16), Ok(4));
        assert_eq!(size(&f, &o, 17), Ok(2));
        let line = choose_cluster_size(&f, &o, 1).unwrap().reason.to_string();
        assert!(line.contains("(estimate, an upper bound)"), "{line}");
        // The driver's figure replaces the estimate; sizes not built and devices without
        // clusters hold none, whatever the driver says.
        let measured = KernelResources {
            max_active_clusters: [Some(66), Some(62)],
            ..r
        };
        assert_eq!(cluster_capacity(&f, &measured, 4), 62);
        assert_eq!(cluster_capacity(&f, &measured, 3), 0);
        assert_eq!(cluster_capacity(&f, &measured, 8), 0);
        let a100 = table::find("a100").unwrap().facts;
        assert_eq!(cluster_capacity(&a100, &measured, 2), 0);
        let small = DeviceFacts {
            max_cluster_size: 2,
            ..f
        };
        assert_eq!(cluster_capacity(&small, &measured, 2), 66);
        assert_eq!(cluster_capacity(&small, &measured, 4), 0);
    }

    #[test]
    fn without_clusters_the_old_rules_run_and_say_why() {
        let nominal = KernelResources::nominal();
        // Before 9.0.
        let a100 = table::find("a100").unwrap().facts;
        let o = RecurrenceOccupancy::of(&a100, &nominal);
        let d = choose_recurrence(&a100, &o, 1).unwrap();
        assert_eq!(d.choice, RecurrenceKind::Resident);
        assert!(
            d.reason
                .to_string()
                .ends_with("not cluster: no thread-block clusters before 9.0 (this is 8.0)"),
            "{}",
            d.reason
        );
        // 9.0 without cluster launch.
        let h200 = table::find("h200").unwrap().facts;
        let no_launch = DeviceFacts {
            max_cluster_size: 0,
            ..h200
        };
        let o = RecurrenceOccupancy::of(&no_launch, &nominal);
        assert_eq!(
            size(&no_launch, &o, 1),
            Err(ClusterRefusal::NoClusterLaunch)
        );
        assert_eq!(kinds(&no_launch, &o, 1), Ok(RecurrenceKind::Resident));
        // A largest cluster below every size built.
        let one = DeviceFacts {
            max_cluster_size: 1,
            ..h200
        };
        let o = RecurrenceOccupancy::of(&one, &nominal);
        assert_eq!(
            size(&one, &o, 1),
            Err(ClusterRefusal::MaxClusterSize {
                max_cluster_size: 1
            })
        );
        // The driver says no cluster fits.
        let (f, o) = h200_driver(Some(0), Some(0));
        let e = size(&f, &o, 1).unwrap_err();
        assert!(matches!(
            e,
            ClusterRefusal::NoCapacity {
                source: CapacitySource::Driver,
                ..
            }
        ));
        let d = choose_recurrence(&f, &o, 1).unwrap();
        assert_eq!(d.choice, RecurrenceKind::Resident);
        assert!(
            d.reason
                .to_string()
                .ends_with("not cluster: the driver says 0 clusters of 2 or 4 CTAs fit"),
            "{}",
            d.reason
        );
        // Kernels too big for an SM: the estimate says none fits.
        let mut big = nominal;
        big.cluster2.registers_per_thread = 256;
        big.cluster4.registers_per_thread = 256;
        let o = RecurrenceOccupancy::of(&h200, &big);
        assert_eq!(
            size(&h200, &o, 1),
            Err(ClusterRefusal::NoCapacity {
                source: CapacitySource::Estimate,
                limited_by: Limit::PerBlockLimit
            })
        );
        // An Ada device without resident or cooperative kernels: no plan at all.
        let o = RecurrenceOccupancy {
            wide: NO_RESIDENT,
            tiled: NO_RESIDENT,
            resident: NO_RESIDENT,
            resident_shared_bytes: 134_144,
            clusters: NO_CLUSTERS,
            tiles: NO_TILES,
        };
        assert!(matches!(
            kinds(&device(128, true), &o, 1),
            Err(CoreError::NoPlan { .. })
        ));
    }

    #[test]
    fn one_cluster_size_alone_runs_at_every_batch() {
        // Only 4-CTA clusters: in waves beyond one.
        let (f, o) = h200_driver(Some(0), Some(62));
        for batch in [1, 31, 32, 1024] {
            assert_eq!(size(&f, &o, batch), Ok(4), "batch {batch}");
        }
        let line = choose_cluster_size(&f, &o, 64).unwrap().reason.to_string();
        assert!(line.contains("3 waves; no 2-CTA cluster fits"), "{line}");
        // Only 2-CTA clusters, even where 4 would fit one wave.
        let (f, o) = h200_driver(Some(66), Some(0));
        for batch in [0, 1, 31, 32, 1024] {
            assert_eq!(size(&f, &o, batch), Ok(2), "batch {batch}");
        }
        let line = choose_cluster_size(&f, &o, 1).unwrap().reason.to_string();
        assert!(line.ends_with("no 4-CTA cluster fits"), "{line}");
        // A device whose largest cluster is 2.
        let two = DeviceFacts {
            max_cluster_size: 2,
            ..table::find("h200").unwrap().facts
        };
        let o = RecurrenceOccupancy::of(&two, &KernelResources::nominal());
        assert_eq!(size(&two, &o, 1), Ok(2));
    }

    #[test]
    fn forced_clusters_are_checked() {
        let nominal = KernelResources::nominal();
        let h200 = table::find("h200").unwrap().facts;
        let o = RecurrenceOccupancy::of(&h200, &nominal);
        assert_eq!(
            check_forced_recurrence(&h200, &o, RecurrenceKind::Cluster).unwrap(),
            Decision {
                choice: RecurrenceKind::Cluster,
                reason: Reason::ForcedRecurrence(RecurrenceKind::Cluster)
            }
        );
        for size in [2, 4] {
            let d = check_forced_cluster_size(&h200, &o, size).unwrap();
            assert_eq!(d.choice, size);
            assert_eq!(
                d.reason,
                Reason::ForcedClusterSize {
                    cluster_size: size,
                    capacity: 66,
                    source: CapacitySource::Estimate
                }
            );
        }
        let refused =
            |f: &DeviceFacts, o: &RecurrenceOccupancy, size| match check_forced_cluster_size(
                f, o, size,
            ) {
                Err(CoreError::ForcedChoice { what, reason }) => {
                    assert_eq!(what, "cluster size");
                    reason
                }
                other => panic!("size {size}: {other:?}"),
            };
        for size in [0, 1, 3, 8] {
            assert!(refused(&h200, &o, size).contains("not a cluster size built"));
        }
        let two = DeviceFacts {
            max_cluster_size: 2,
            ..h200
        };
        assert!(refused(&two, &RecurrenceOccupancy::of(&two, &nominal), 4).contains("largest"));
        let (f, o0) = h200_driver(Some(66), Some(0));
        assert!(refused(&f, &o0, 4).contains("no cluster of this size"));
        assert_eq!(check_forced_cluster_size(&f, &o0, 2).unwrap().choice, 2);
        // Devices without clusters refuse the kind.
        let a100 = table::find("a100").unwrap().facts;
        let oa = RecurrenceOccupancy::of(&a100, &nominal);
        assert!(refused(&a100, &oa, 2).contains("9.0"));
        assert_eq!(
            check_forced_recurrence(&a100, &oa, RecurrenceKind::Cluster),
            Err(CoreError::ForcedChoice {
                what: "cluster recurrence",
                reason: "thread-block clusters need compute capability 9.0 or newer"
            })
        );
        let (f, none) = h200_driver(Some(0), Some(0));
        assert_eq!(
            check_forced_recurrence(&f, &none, RecurrenceKind::Cluster),
            Err(CoreError::ForcedChoice {
                what: "cluster recurrence",
                reason: "the driver says 0 clusters fit"
            })
        );
    }
}
