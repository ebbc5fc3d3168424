//! Plan selection for every table entry, batch and math mode through a mocked device query,
//! plus odd devices and overrides. The golden table of recurrence kinds is in
//! `core/tests/plan_golden.rs`.

use super::*;
use crate::device::{MockDeviceQuery, table};
use crate::error::{BackendError, ErrorKind};
use crate::occupancy::blocks_per_sm;

/// The batches DESIGN §3 asks every table entry to be planned for.
const BATCHES: [usize; 10] = [1, 2, 7, 8, 9, 32, 33, 64, 256, 1024];

fn query(facts: DeviceFacts) -> MockDeviceQuery {
    let mut q = MockDeviceQuery::new();
    q.expect_facts().times(1).returning(move || Ok(facts));
    q
}

/// Every invariant a plan must keep on the device `facts` describes.
fn check_invariants(name: &str, facts: &DeviceFacts, resources: &KernelResources, plan: &Plan) {
    let ctx = format!("{name} batch {} {}", plan.batch, plan.math);
    let kind = plan.recurrence.choice;
    let usage = plan.recurrence_usage(resources);

    // The recurrence kernel fits an SM, within the opt-in shared memory limit.
    assert_eq!(
        plan.recurrence_occupancy,
        blocks_per_sm(facts, usage),
        "{ctx}"
    );
    assert!(plan.recurrence_occupancy.blocks_per_sm >= 1, "{ctx}");
    assert!(
        usage.shared_bytes().unwrap() <= facts.shared_bytes_per_block_optin,
        "{ctx}"
    );
    if kind != RecurrenceKind::Cluster {
        assert_eq!(
            plan.co_resident_blocks,
            plan.recurrence_occupancy.blocks_per_sm as usize * facts.sm_count as usize,
            "{ctx}"
        );
    }

    match plan.schedule.choice {
        RecurrenceSchedule::Cluster(s) => {
            assert_eq!(kind, RecurrenceKind::Cluster, "{ctx}");
            assert!(!kind.is_cooperative());
            assert_eq!(plan.cluster_schedule(), Some(&s), "{ctx}");
            assert!(facts.compute_capability >= (9, 0), "{ctx}");
            assert!(
                crate::geometry::CLUSTER_SIZES.contains(&s.cluster_size),
                "{ctx}"
            );
            assert!(s.cluster_size <= facts.max_cluster_size as usize, "{ctx}");
            let w = s.windows_per_cluster;
            assert_eq!(
                usage,
                resources.cluster_kernel(s.cluster_size, w).unwrap(),
                "{ctx}"
            );
            let tile = crate::plan::tile_slot(w).is_some();
            let capacity = if tile {
                ClusterCapacity::of_tile(facts, resources, w).clusters
            } else {
                cluster_capacity(facts, resources, s.cluster_size)
            };
            assert!(capacity > 0, "{ctx}");
            assert_eq!(plan.co_resident_blocks, capacity * s.cluster_size, "{ctx}");
            assert!(
                crate::geometry::cluster_kernel_built(s.cluster_size, w),
                "{ctx}"
            );
            let clusters = 2 * plan.batch.div_ceil(w);
            assert_eq!(s.grid_blocks, clusters * s.cluster_size, "{ctx}");
            assert_eq!(s.clusters(), clusters, "{ctx}");
            // Waves: every cluster runs in one, no wave is empty, none holds more than fit.
            assert!(s.clusters_per_wave <= capacity, "{ctx}");
            assert!(s.waves * s.clusters_per_wave >= s.clusters(), "{ctx}");
            assert!(
                s.waves == 0 || (s.waves - 1) * capacity < s.clusters(),
                "{ctx}"
            );
            // The rules (not forced): 4 while each CTA of all 2 * batch clusters of 4 has an SM
            // of its own, else 2; two windows per 2-CTA cluster once one-window clusters need
            // more than one wave.
            if plan.recurrence.reason != Reason::ForcedRecurrence(kind)
                && !matches!(plan.recurrence.reason, Reason::ForcedClusterSize { .. })
            {
                let four = cluster_capacity(facts, resources, 4);
                let per_sm = crate::occupancy::blocks_per_sm(facts, &resources.cluster4)
                    .blocks_per_sm
                    .max(1) as usize;
                let two = cluster_capacity(facts, resources, 2);
                let want = if four > 0 && 2 * plan.batch <= four / per_sm || two == 0 {
                    4
                } else {
                    2
                };
                assert_eq!(s.cluster_size, want, "{ctx}");
                // One window while one-window clusters fit one wave; beyond, the cheapest of two
                // windows and the tiles that run here by waves times CLUSTER_WAVE_LAYER_US.
                let want_windows = if s.cluster_size == 2 && 2 * plan.batch > two {
                    let mut best = (2, usize::MAX);
                    for (windows, us) in CLUSTER_WAVE_LAYER_US {
                        let cap = if windows == 2 {
                            two
                        } else {
                            ClusterCapacity::of_tile(facts, resources, windows).clusters
                        };
                        if cap > 0 {
                            let cost = (2 * plan.batch.div_ceil(windows)).div_ceil(cap) * us;
                            if cost < best.1 {
                                best = (windows, cost);
                            }
                        }
                    }
                    best.0
                } else {
                    1
                };
                assert_eq!(w, want_windows, "{ctx}");
            }
            // Every (window, direction) exactly once.
            let mut covered = vec![[0u8; 2]; plan.batch];
            for c in 0..s.clusters() {
                let (first, d) = s.window_direction(c).unwrap();
                for c in covered.iter_mut().skip(first).take(w) {
                    c[d] += 1;
                }
            }
            assert_eq!(s.window_direction(s.clusters()), None, "{ctx}");
            assert!(
                covered.iter().all(|c| *c == [1, 1]),
                "{ctx}: windows not covered once"
            );
            assert!(plan.concurrent_directions.choice, "{ctx}");
        }
        RecurrenceSchedule::Resident { grid_blocks } => {
            assert_eq!(kind, RecurrenceKind::Resident, "{ctx}");
            assert_eq!(grid_blocks, 2 * plan.batch, "{ctx}");
            assert!(plan.concurrent_directions.choice, "{ctx}");
        }
        RecurrenceSchedule::Cooperative(s) => {
            assert!(kind.is_cooperative() && s.kind == kind, "{ctx}");
            assert!(
                facts.cooperative_launch,
                "{ctx}: cooperative plan without cooperative launch"
            );
            // No grid beyond the capacity; concurrent only when both directions fit together.
            assert!(
                s.peak_resident_blocks() <= plan.co_resident_blocks,
                "{ctx}: {s:?}"
            );
            assert_eq!(plan.concurrent_directions.choice, s.concurrent, "{ctx}");
            let launches = s.launches_per_direction();
            for launch in 0..launches {
                let blocks = s.grid_blocks(launch);
                assert!(blocks <= plan.co_resident_blocks, "{ctx}");
                if s.concurrent {
                    assert!(2 * blocks <= plan.co_resident_blocks, "{ctx}");
                }
            }
            if s.concurrent {
                assert!(launches <= 1, "{ctx}");
            }
            // Every window exactly once.
            let mut covered = vec![0u8; plan.batch];
            for launch in 0..launches {
                for tile in s.launch_tiles(launch) {
                    for w in s.tile_windows(tile, plan.batch) {
                        covered[w] += 1;
                    }
                }
            }
            assert!(
                covered.iter().all(|&c| c == 1),
                "{ctx}: windows not covered once"
            );
            // Wide tiles only of the allowed heights; tiled tiles of 8.
            match kind {
                RecurrenceKind::Wide => {
                    assert!(crate::geometry::WIDE_TILE_HEIGHTS.contains(&s.tile_height))
                }
                _ => assert_eq!(s.tile_height, crate::geometry::TILED_WINDOWS),
            }
        }
    }

    // Projection: fits an SM and the opt-in limit; TF32 only in TF32 mode where allowed; else
    // 3xTF32 at every batch where listed (so a window's bits never depend on the batch); else
    // the FP32 SIMT tile by rows.
    let tile = plan.projection.choice;
    let proj = resources.projection(tile);
    assert!(plan.projection_occupancy.blocks_per_sm >= 1, "{ctx}");
    assert!(
        proj.shared_bytes().unwrap() <= facts.shared_bytes_per_block_optin,
        "{ctx}"
    );
    let rows = plan.batch * plan.frames;
    match (plan.math, tf32_allowed_here(facts)) {
        (MathMode::Tf32, true) if plan.projection.reason != Reason::ForcedProjection(tile) => {
            let want = if projection::wgmma_available(facts.compute_capability) {
                ProjectionTile::Tf32Wgmma
            } else {
                ProjectionTile::Tf32
            };
            assert_eq!(tile, want, "{ctx}");
        }
        (MathMode::Tf32, true) => assert!(tile.is_tf32(), "{ctx}"),
        _ if projection::TF32X3_ARCHITECTURES.contains(&facts.compute_capability) => {
            if plan.projection.reason != Reason::ForcedProjection(tile) {
                let want = if projection::wgmma_available(facts.compute_capability) {
                    ProjectionTile::Tf32x3Wgmma
                } else if rows >= projection::TF32X3_LARGE_MIN_ROWS {
                    ProjectionTile::Tf32x3
                } else {
                    ProjectionTile::Tf32x3Small
                };
                assert_eq!(tile, want, "{ctx}");
            }
        }
        _ => {
            let want = if rows < LARGE_TILE_MIN_ROWS
                || projection::SMALL_TILE_ARCHITECTURES.contains(&facts.compute_capability)
            {
                ProjectionTile::Small64
            } else {
                ProjectionTile::Large128
            };
            if plan.projection.reason != Reason::ForcedProjection(tile) {
                assert_eq!(tile, want, "{ctx}");
            }
        }
    }

    // TF32 numerics on a device with clusters and the cluster recurrence: section 9 on the
    // kernel fixed::pick names for the batch and the SMs (never a batch-dependent product
    // otherwise); else no fixed-point kernel, saying why.
    let want_fixed = (tile.tf32_numerics()
        && facts.max_cluster_size as usize >= crate::fixed::MAX_CLUSTER_SIZE
        && plan.recurrence.choice == RecurrenceKind::Cluster)
        .then(|| crate::fixed::pick(plan.batch, facts.sm_count as usize));
    assert_eq!(plan.fixed_point.choice, want_fixed, "{ctx}");
    assert_eq!(
        matches!(plan.fixed_point.reason, Reason::FixedPoint { .. }),
        want_fixed.is_some(),
        "{ctx}"
    );
    if plan.math == MathMode::Fp32 {
        assert_eq!(
            plan.fixed_point.reason,
            Reason::NoFixedPoint(super::FixedPointRefusal::Fp32Numerics),
            "{ctx}"
        );
    }

    // One line per decision, each naming something.
    let text = plan.to_string();
    assert_eq!(text.lines().count(), 5, "{ctx}: {text}");
    assert!(text.lines().all(|l| l.len() > 20), "{ctx}: {text}");
}

fn tf32_allowed_here(facts: &DeviceFacts) -> bool {
    projection::tf32_allowed(facts.compute_capability).is_ok()
}

#[test]
fn every_table_entry_batch_and_math_mode_plans() {
    let resources = KernelResources::nominal();
    let shape = StackShape::pyannote();
    for entry in table::all() {
        for batch in BATCHES {
            for math in MathMode::ALL {
                let q = query(entry.facts);
                let plan = select_on(&q, &resources, &shape, batch, math)
                    .unwrap_or_else(|e| panic!("{} batch {batch} {math}: {e}", entry.name));
                assert_eq!((plan.batch, plan.frames, plan.math), (batch, 589, math));
                check_invariants(entry.name, &entry.facts, &resources, &plan);
            }
        }
    }
}

#[test]
fn plans_are_deterministic_and_batch_zero_is_empty() {
    let resources = KernelResources::nominal();
    let shape = StackShape::pyannote();
    for entry in table::all() {
        let a = select(&entry.facts, &resources, &shape, 33, MathMode::Fp32).unwrap();
        let b = select(&entry.facts, &resources, &shape, 33, MathMode::Fp32).unwrap();
        assert_eq!(a, b);
        let empty = select(&entry.facts, &resources, &shape, 0, MathMode::Tf32).unwrap();
        match empty.schedule.choice {
            RecurrenceSchedule::Resident { grid_blocks } => assert_eq!(grid_blocks, 0),
            RecurrenceSchedule::Cooperative(s) => assert_eq!(s.launches_per_direction(), 0),
            RecurrenceSchedule::Cluster(s) => {
                assert_eq!((s.grid_blocks, s.clusters_per_wave, s.waves), (0, 0, 0));
            }
        }
    }
}

#[test]
fn h200_at_batch_32_explains_itself() {
    let h200 = table::find("h200").unwrap().facts;
    let p = select(
        &h200,
        &KernelResources::nominal(),
        &StackShape::pyannote(),
        32,
        MathMode::Fp32,
    )
    .unwrap();
    // Nominal resources: 64 four-CTA clusters would share SMs (one CTA per SM for 33 of them by
    // core's estimate), so 2-CTA clusters, all 64 in one wave of the estimated 66.
    assert_eq!(p.recurrence.choice, RecurrenceKind::Cluster);
    assert_eq!(
        p.cluster_schedule(),
        Some(&ClusterSchedule {
            cluster_size: 2,
            windows_per_cluster: 1,
            grid_blocks: 128,
            clusters_per_wave: 64,
            waves: 1
        })
    );
    assert_eq!(p.resident_grid_blocks(), None);
    assert_eq!(p.co_resident_blocks, 132);
    // The measured 9.0 rule: the warpgroup-MMA 3xTF32 tile at every batch.
    assert_eq!(p.projection.choice, ProjectionTile::Tf32x3Wgmma);
    let lines: Vec<_> = p.explain().iter().map(ToString::to_string).collect();
    assert!(
        lines[0].starts_with(
            "recurrence: cluster: 2-CTA clusters, 64 clusters (one per window and direction), 66 \
             co-resident (estimate, an upper bound), 1 wave; 64 4-CTA clusters would share SMs"
        ),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with(
            "schedule: cluster: one grid of 128 CTAs in clusters of 2, one window per cluster (all \
             64 fit one wave of 66); 64 clusters per wave, 1 wave (estimate, an upper bound), not \
             cooperative"
        ),
        "{}",
        lines[1]
    );
    assert_eq!(
        lines[2],
        "streams: concurrent: one cluster grid of 128 CTAs holds both directions"
    );
    assert!(
        lines[3].starts_with(
            "projection: 3xtf32 wgmma 128x128: FP32-accurate tensor-core products (error within \
             the FP32 budget) at every batch on 9.0, one of TF32X3_ARCHITECTURES and \
             WGMMA_ARCHITECTURES (warpgroup MMA: faster than the mma.sync tiles at every row \
             count measured); 18848 rows"
        ),
        "{}",
        lines[3]
    );
}

#[test]
fn rtx4090_switches_from_wide_to_tiled_at_9() {
    let f = table::find("rtx4090").unwrap().facts;
    let r = KernelResources::nominal();
    let shape = StackShape::pyannote();
    let p8 = select(&f, &r, &shape, 8, MathMode::Fp32).unwrap();
    let s8 = *p8.coop_schedule().unwrap();
    assert_eq!(
        (s8.kind, s8.tile_height, s8.tiles, s8.concurrent),
        (RecurrenceKind::Wide, 8, 1, true)
    );
    let p9 = select(&f, &r, &shape, 9, MathMode::Fp32).unwrap();
    let s9 = *p9.coop_schedule().unwrap();
    assert_eq!(
        (s9.kind, s9.tiles, s9.concurrent),
        (RecurrenceKind::Tiled, 2, true)
    );
    // 1024 windows: 128 tiles x 8 blocks per direction exceed 256 co-resident: in turn.
    let p = select(&f, &r, &shape, 1024, MathMode::Fp32).unwrap();
    let s = *p.coop_schedule().unwrap();
    assert_eq!(p.co_resident_blocks, 256);
    assert_eq!(
        (s.concurrent, s.tiles_per_launch, s.launches_per_direction()),
        (false, 32, 4)
    );
}

#[test]
fn device_without_cooperative_launch() {
    let r = KernelResources::nominal();
    let shape = StackShape::pyannote();
    // The cluster and resident kernels need none.
    let h200 = DeviceFacts {
        cooperative_launch: false,
        ..table::find("h200").unwrap().facts
    };
    for batch in BATCHES {
        let p = select_on(&query(h200), &r, &shape, batch, MathMode::Fp32).unwrap();
        assert_eq!(p.recurrence.choice, RecurrenceKind::Cluster);
        let no_clusters = DeviceFacts {
            max_cluster_size: 0,
            ..h200
        };
        let p = select_on(&query(no_clusters), &r, &shape, batch, MathMode::Fp32).unwrap();
        assert_eq!(p.recurrence.choice, RecurrenceKind::Resident);
    }
    // Without a resident kernel there is no plan, and the error says it is unsupported.
    let ada = DeviceFacts {
        cooperative_launch: false,
        ..table::find("rtx4090").unwrap().facts
    };
    let e = select_on(&query(ada), &r, &shape, 4, MathMode::Fp32).unwrap_err();
    assert!(matches!(e, CoreError::NoPlan { .. }));
    assert_eq!(e.kind(), ErrorKind::Unsupported);
}

#[test]
fn devices_with_one_or_two_sms() {
    let r = KernelResources::nominal();
    let shape = StackShape::pyannote();
    for sms in [1, 2] {
        // Resident devices plan at any batch (the grid runs in waves).
        let h = DeviceFacts {
            sm_count: sms,
            max_cluster_size: 0,
            ..table::find("h200").unwrap().facts
        };
        for batch in BATCHES {
            let p = select_on(&query(h), &r, &shape, batch, MathMode::Tf32).unwrap();
            assert_eq!(p.resident_grid_blocks(), Some(2 * batch));
            assert_eq!(p.co_resident_blocks, sms as usize);
            check_invariants("h200-small", &h, &r, &p);
        }
        // Cooperative devices: 2 blocks per SM hold no 8-block tile.
        let a = DeviceFacts {
            sm_count: sms,
            ..table::find("a10").unwrap().facts
        };
        let e = select_on(&query(a), &r, &shape, 32, MathMode::Fp32).unwrap_err();
        assert!(matches!(e, CoreError::NoPlan { .. }), "{e}");
        // Cluster devices: one SM holds no cluster (estimate: 1 CTA of 2, 2 CTAs of 4 per SM),
        // two SMs hold one cluster of either size, but 4-CTA clusters would share the SMs:
        // 2-CTA clusters, one per wave, several windows each from batch 1 on (2 clusters > 1:
        // two, or a window tile where fewer waves of it cost less, checked by the invariants).
        let c = DeviceFacts {
            sm_count: sms,
            ..table::find("h200").unwrap().facts
        };
        for batch in BATCHES {
            let p = select_on(&query(c), &r, &shape, batch, MathMode::Fp32).unwrap();
            check_invariants("h200-small-clusters", &c, &r, &p);
            match p.cluster_schedule() {
                None => assert_eq!(sms, 1),
                Some(s) => assert_eq!(
                    (sms, s.cluster_size, s.clusters_per_wave, s.waves),
                    (2, 2, 1, 2 * batch.div_ceil(s.windows_per_cluster))
                ),
            }
        }
    }
    // 4 SMs (8 co-resident): tiled tiles fit, wide ones do not, so batch 1 runs tiled.
    let a4 = DeviceFacts {
        sm_count: 4,
        ..table::find("a10").unwrap().facts
    };
    let p = select(&a4, &r, &shape, 1, MathMode::Fp32).unwrap();
    assert_eq!(p.recurrence.choice, RecurrenceKind::Tiled);
    assert!(matches!(
        p.recurrence.reason,
        Reason::CooperativeFallback { .. }
    ));
    // 8 SMs: the wide kernel (one block per SM) holds 8 blocks, no 16-block tile: batch 1
    // falls back to tiled (two blocks per SM: 16).
    let a8 = DeviceFacts {
        sm_count: 8,
        ..table::find("a10").unwrap().facts
    };
    let p = select(&a8, &r, &shape, 1, MathMode::Fp32).unwrap();
    assert_eq!(p.recurrence.choice, RecurrenceKind::Tiled);
    // 16 SMs (16 wide blocks): a wide tile fits but not both directions: in turn, one tile per
    // launch.
    let a16 = DeviceFacts {
        sm_count: 16,
        ..table::find("a10").unwrap().facts
    };
    for batch in BATCHES {
        let p = select(&a16, &r, &shape, batch, MathMode::Fp32).unwrap();
        check_invariants("a10-16sm", &a16, &r, &p);
    }
    let s = *select(&a16, &r, &shape, 1, MathMode::Fp32)
        .unwrap()
        .coop_schedule()
        .unwrap();
    assert_eq!(
        (s.kind, s.tile_height, s.concurrent, s.tiles_per_launch),
        (RecurrenceKind::Wide, 32, false, 1)
    );
}

#[test]
fn a_failing_query_propagates_as_a_device_error() {
    let mut q = MockDeviceQuery::new();
    q.expect_facts().times(1).returning(|| {
        Err(CoreError::DeviceQuery {
            reason: "CUDA_ERROR_NO_DEVICE",
        })
    });
    let e = select_on(
        &q,
        &KernelResources::nominal(),
        &StackShape::pyannote(),
        1,
        MathMode::Fp32,
    )
    .unwrap_err();
    assert_eq!(
        e,
        CoreError::DeviceQuery {
            reason: "CUDA_ERROR_NO_DEVICE"
        }
    );
    assert_eq!(e.kind(), ErrorKind::Device);
}

#[test]
fn old_architectures_bad_shapes_and_absurd_batches_are_refused() {
    let r = KernelResources::nominal();
    let shape = StackShape::pyannote();
    let pascal = DeviceFacts {
        compute_capability: (6, 1),
        ..table::find("t4").unwrap().facts
    };
    let e = select_on(&query(pascal), &r, &shape, 1, MathMode::Fp32).unwrap_err();
    assert!(
        matches!(
            e,
            CoreError::Unsupported {
                what: "compute capability",
                value: 61,
                ..
            }
        ),
        "{e}"
    );
    let no_sms = DeviceFacts {
        sm_count: 0,
        ..table::find("h200").unwrap().facts
    };
    assert_eq!(
        select(&no_sms, &r, &shape, 1, MathMode::Fp32)
            .unwrap_err()
            .kind(),
        ErrorKind::Unsupported
    );
    let h200 = table::find("h200").unwrap().facts;
    let wide = StackShape {
        hidden: 64,
        ..shape
    };
    assert!(matches!(
        select(&h200, &r, &wide, 1, MathMode::Fp32),
        Err(CoreError::Unsupported { .. })
    ));
    assert!(matches!(
        select(&h200, &r, &shape, usize::MAX, MathMode::Fp32),
        Err(CoreError::Overflow { .. })
    ));
}

#[test]
fn frames_move_the_projection_threshold() {
    // An architecture with the row rule (the H200 runs 64x64 at every row count).
    let a100 = table::find("a100").unwrap().facts;
    let r = KernelResources::nominal();
    // batch 3 x 589 = 1767 rows: small; batch 4 x 589 = 2356: large.
    let pick = |batch, frames| {
        select(
            &a100,
            &r,
            &StackShape::pyannote().with_frames(frames),
            batch,
            MathMode::Fp32,
        )
        .unwrap()
        .projection
        .choice
    };
    assert_eq!(pick(3, 589), ProjectionTile::Small64);
    assert_eq!(pick(4, 589), ProjectionTile::Large128);
    assert_eq!(pick(1, 2047), ProjectionTile::Small64);
    assert_eq!(pick(1, 2048), ProjectionTile::Large128);
    assert_eq!(pick(64, 1), ProjectionTile::Small64);
}

#[test]
fn window_tiles_are_forced_where_their_shared_memory_fits() {
    let r = KernelResources::nominal();
    let shape = StackShape::pyannote();
    let tile = |windows| Overrides {
        recurrence: Some(RecurrenceKind::Cluster),
        projection: None,
        cluster_size: Some(2),
        cluster_windows: Some(windows),
    };
    // The H200 (228 KiB a SM): every tile, every batch, one CTA per SM (66 clusters).
    let h200 = table::find("h200").unwrap().facts;
    for windows in crate::geometry::CLUSTER_TILE_WINDOWS {
        for batch in BATCHES {
            let p = select_with(&h200, &r, &shape, batch, MathMode::Fp32, &tile(windows)).unwrap();
            let s = p.cluster_schedule().unwrap();
            assert_eq!((s.cluster_size, s.windows_per_cluster), (2, windows));
            assert_eq!(s.waves, (2 * batch.div_ceil(windows)).div_ceil(66));
            assert_eq!(p.co_resident_blocks, 132);
            check_invariants("h200-tile", &h200, &r, &p);
        }
    }
    // The RTX 5090 (12.0, 100 KiB a SM): the 16-window tile does not fit (the register quads
    // need no dynamic shared memory), and forcing it says so.
    let rtx5090 = table::find("rtx5090").unwrap().facts;
    let e = select_with(&rtx5090, &r, &shape, 1024, MathMode::Fp32, &tile(16)).unwrap_err();
    assert_eq!(
        e,
        CoreError::NoPlan {
            reason: "a window-tile cluster kernel (128 KiB of R in shared memory a CTA) fits no \
                     SM of the device",
        }
    );
    // Windows per cluster that no kernel runs are refused.
    for windows in [3, 32] {
        let e = select_with(&h200, &r, &shape, 64, MathMode::Fp32, &tile(windows)).unwrap_err();
        assert!(
            matches!(
                e,
                CoreError::ForcedChoice {
                    what: "windows per cluster",
                    ..
                }
            ),
            "{e}"
        );
    }
}

#[test]
fn overrides_force_checked_choices() {
    let r = KernelResources::nominal();
    let shape = StackShape::pyannote();
    let h200 = table::find("h200").unwrap().facts;
    let rtx4090 = table::find("rtx4090").unwrap().facts;
    let force = |facts: &DeviceFacts, batch, math, overrides: Overrides| {
        select_with(facts, &r, &shape, batch, math, &overrides)
    };

    // Every kind can be forced on the H200 (for bitwise cross-checks between kernels).
    for kind in RecurrenceKind::ALL {
        for batch in BATCHES {
            let p = force(
                &h200,
                batch,
                MathMode::Fp32,
                Overrides {
                    recurrence: Some(kind),
                    projection: None,
                    cluster_size: None,
                    cluster_windows: None,
                },
            )
            .unwrap();
            assert_eq!(p.recurrence.choice, kind);
            assert_eq!(p.recurrence.reason, Reason::ForcedRecurrence(kind));
            check_invariants("h200-forced", &h200, &r, &p);
        }
    }
    // Resident where its shared memory does not fit.
    let e = force(
        &rtx4090,
        1,
        MathMode::Fp32,
        Overrides {
            recurrence: Some(RecurrenceKind::Resident),
            projection: None,
            cluster_size: None,
            cluster_windows: None,
        },
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            CoreError::ForcedChoice {
                what: "resident recurrence",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    // TF32 in FP32 mode, and TF32 on Turing.
    let tf32 = Overrides {
        recurrence: None,
        projection: Some(ProjectionTile::Tf32),
        cluster_size: None,
        cluster_windows: None,
    };
    assert!(matches!(
        force(&h200, 32, MathMode::Fp32, tf32),
        Err(CoreError::ForcedChoice { .. })
    ));
    let t4 = table::find("t4").unwrap().facts;
    assert!(matches!(
        force(&t4, 32, MathMode::Tf32, tf32),
        Err(CoreError::ForcedChoice { .. })
    ));
    // 3xTF32 runs in either math mode, but not on Turing.
    let tf32x3 = Overrides {
        projection: Some(ProjectionTile::Tf32x3),
        ..Overrides::default()
    };
    for math in [MathMode::Fp32, MathMode::Tf32] {
        let p = force(&h200, 32, math, tf32x3).unwrap();
        assert_eq!(
            p.projection.reason,
            Reason::ForcedProjection(ProjectionTile::Tf32x3)
        );
    }
    assert!(matches!(
        force(&t4, 32, MathMode::Fp32, tf32x3),
        Err(CoreError::ForcedChoice { .. })
    ));
    // Forced small tiles at a large batch.
    let small = Overrides {
        recurrence: None,
        projection: Some(ProjectionTile::Small64),
        cluster_size: None,
        cluster_windows: None,
    };
    let p = force(&h200, 1024, MathMode::Fp32, small).unwrap();
    assert_eq!(p.projection.choice, ProjectionTile::Small64);
    assert_eq!(
        p.projection.reason,
        Reason::ForcedProjection(ProjectionTile::Small64)
    );
    // Cooperative kinds on a device without cooperative launch.
    let no_coop = DeviceFacts {
        cooperative_launch: false,
        ..h200
    };
    let wide = Overrides {
        recurrence: Some(RecurrenceKind::Wide),
        projection: None,
        cluster_size: None,
        cluster_windows: None,
    };
    assert!(matches!(
        force(&no_coop, 1, MathMode::Fp32, wide),
        Err(CoreError::ForcedChoice { .. })
    ));
}

#[test]
fn real_kernel_figures_change_the_plan() {
    // If the compiled resident kernel (256 threads) needed 256 registers it could not launch
    // (255 per thread at most): an H200 without cluster launch then plans tiled.
    let mut r = KernelResources::nominal();
    r.resident.registers_per_thread = 256;
    let h200 = DeviceFacts {
        max_cluster_size: 0,
        ..table::find("h200").unwrap().facts
    };
    let p = select(&h200, &r, &StackShape::pyannote(), 32, MathMode::Fp32).unwrap();
    assert_eq!(p.recurrence.choice, RecurrenceKind::Tiled);
    assert_eq!(
        p.recurrence.reason,
        Reason::ByBatch {
            chosen: RecurrenceKind::Tiled,
            batch: 32,
            resident_limit: crate::occupancy::Limit::PerBlockLimit,
            no_cluster: ClusterRefusal::NoClusterLaunch,
        }
    );
}

#[test]
fn h200_with_the_drivers_cluster_capacity_runs_2_cta_clusters_at_batch_32() {
    // The H200 driver's query (bench/NOTES.md, cluster harness): 66 two-CTA and 62 four-CTA
    // clusters co-resident (31 with an SM per CTA), so batch 16 to 33 takes 2-CTA clusters in
    // one wave and from 34 two windows per 2-CTA cluster, from 67 the window tiles (66
    // co-resident: one CTA per SM) where fewer of their waves cost less: the register quads of 4
    // and 8 windows, whose per-wave costs (session 8 calls 5-7) beat the 16-window tile at every
    // batch measured.
    let h200 = table::find("h200").unwrap().facts;
    let r = KernelResources {
        max_active_clusters: [Some(66), Some(62)],
        ..KernelResources::nominal()
    };
    let shape = StackShape::pyannote();
    for (batch, size, windows, waves) in [
        (1, 4, 1, 1),
        (15, 4, 1, 1),
        (16, 2, 1, 1),
        (31, 2, 1, 1),
        (32, 2, 1, 1),
        (33, 2, 1, 1),
        (34, 2, 2, 1),
        (64, 2, 2, 1),
        (66, 2, 2, 1),
        (67, 2, 4, 1),
        (128, 2, 4, 1),
        (132, 2, 4, 1),
        (133, 2, 8, 1),
        (192, 2, 8, 1),
        (256, 2, 8, 1),
        (264, 2, 8, 1),
        (384, 2, 4, 3),
        (512, 2, 8, 2),
        (768, 2, 8, 3),
        (1024, 2, 8, 4),
    ] {
        let p = select_on(&query(h200), &r, &shape, batch, MathMode::Fp32).unwrap();
        let s = *p.cluster_schedule().unwrap();
        assert_eq!(
            (s.cluster_size, s.windows_per_cluster, s.waves),
            (size, windows, waves),
            "batch {batch}"
        );
        assert_eq!(
            p.co_resident_blocks,
            if size == 4 { 248 } else { 132 },
            "batch {batch}"
        );
        check_invariants("h200-driver", &h200, &r, &p);
    }
    let p = select(&h200, &r, &shape, 32, MathMode::Fp32).unwrap();
    let line = p.explain()[0].to_string();
    assert!(
        line.starts_with("recurrence: cluster: 2-CTA clusters, 64 clusters (one per window and direction), 66 co-resident (driver), 1 wave; 64 4-CTA clusters would share SMs (one CTA per SM up to 31"),
        "{line}"
    );
    // The driver says no cluster fits: the resident kernel, saying why.
    let none = KernelResources {
        max_active_clusters: [Some(0), Some(0)],
        ..r
    };
    let p = select(&h200, &none, &shape, 32, MathMode::Fp32).unwrap();
    assert_eq!(p.resident_grid_blocks(), Some(64));
    assert!(
        p.recurrence
            .reason
            .to_string()
            .ends_with("not cluster: the driver says 0 clusters of 2 or 4 CTAs fit"),
        "{}",
        p.recurrence.reason
    );
}

#[test]
fn a_9_0_device_without_cluster_launch_runs_the_old_rules() {
    let r = KernelResources::nominal();
    let shape = StackShape::pyannote();
    let no_clusters = DeviceFacts {
        max_cluster_size: 0,
        ..table::find("h200").unwrap().facts
    };
    for batch in BATCHES {
        for math in MathMode::ALL {
            let p = select_on(&query(no_clusters), &r, &shape, batch, math).unwrap();
            assert_eq!(p.recurrence.choice, RecurrenceKind::Resident);
            assert_eq!(p.resident_grid_blocks(), Some(2 * batch));
            assert_eq!(p.co_resident_blocks, 132);
            assert!(
                p.recurrence
                    .reason
                    .to_string()
                    .ends_with("not cluster: the device reports no cluster launch"),
                "{}",
                p.recurrence.reason
            );
            check_invariants("h200-no-clusters", &no_clusters, &r, &p);
        }
    }
    // Forcing the cluster kind or a size there is refused.
    let forced = Overrides {
        recurrence: Some(RecurrenceKind::Cluster),
        ..Overrides::default()
    };
    assert_eq!(
        select_with(&no_clusters, &r, &shape, 1, MathMode::Fp32, &forced),
        Err(CoreError::ForcedChoice {
            what: "cluster recurrence",
            reason: "the device reports no cluster launch"
        })
    );
}

#[test]
fn forced_cluster_sizes_are_checked() {
    let r = KernelResources::nominal();
    let shape = StackShape::pyannote();
    let h200 = table::find("h200").unwrap().facts;
    let force = |facts: &DeviceFacts, batch, overrides: Overrides| {
        select_with(facts, &r, &shape, batch, MathMode::Fp32, &overrides)
    };
    // A size with the cluster kind forced, or with the rules choosing it.
    for recurrence in [Some(RecurrenceKind::Cluster), None] {
        for size in [2, 4] {
            for batch in BATCHES {
                let p = force(
                    &h200,
                    batch,
                    Overrides {
                        recurrence,
                        cluster_size: Some(size),
                        cluster_windows: None,
                        projection: None,
                    },
                )
                .unwrap();
                assert_eq!(p.cluster_schedule().unwrap().cluster_size, size);
                assert!(matches!(
                    p.recurrence.reason,
                    Reason::ForcedClusterSize { cluster_size, .. } if cluster_size == size
                ));
                check_invariants("h200-forced-size", &h200, &r, &p);
            }
        }
    }
    // Forced kind without a size: the size rule.
    let p = force(
        &h200,
        1,
        ForcedRecurrence::parse("cluster")
            .unwrap()
            .apply(Overrides::default()),
    )
    .unwrap();
    assert_eq!(p.cluster_schedule().unwrap().cluster_size, 4);
    assert_eq!(
        p.recurrence.reason,
        Reason::ForcedRecurrence(RecurrenceKind::Cluster)
    );
    // A size without the cluster kind, a size not built, a device without clusters.
    let refused = |facts: &DeviceFacts, overrides: Overrides| match force(facts, 8, overrides) {
        Err(e @ CoreError::ForcedChoice { .. }) => {
            assert_eq!(e.kind(), ErrorKind::Unsupported);
            e.to_string()
        }
        other => panic!("{overrides:?}: {other:?}"),
    };
    let resident2 = Overrides {
        recurrence: Some(RecurrenceKind::Resident),
        cluster_size: Some(2),
        cluster_windows: None,
        projection: None,
    };
    assert!(refused(&h200, resident2).contains("needs the cluster recurrence"));
    let three = Overrides {
        cluster_size: Some(3),
        cluster_windows: None,
        ..Overrides::default()
    };
    assert!(refused(&h200, three).contains("not a cluster size built"));
    let a100 = table::find("a100").unwrap().facts;
    let two = Overrides {
        cluster_size: Some(2),
        cluster_windows: None,
        ..Overrides::default()
    };
    // On the A100 the rules choose resident, so a bare size is refused as such.
    assert!(refused(&a100, two).contains("needs the cluster recurrence"));
    let cluster2 = ForcedRecurrence::parse("cluster2")
        .unwrap()
        .apply(Overrides::default());
    assert!(refused(&a100, cluster2).contains("9.0"));
    let small = DeviceFacts {
        max_cluster_size: 2,
        ..h200
    };
    let cluster4 = ForcedRecurrence::parse("CLUSTER4")
        .unwrap()
        .apply(Overrides::default());
    assert!(refused(&small, cluster4).contains("largest cluster"));
}

#[test]
fn forced_recurrence_names_round_trip() {
    for name in ForcedRecurrence::NAMES {
        let f = ForcedRecurrence::parse(name).unwrap();
        assert_eq!(f.to_string(), name);
        assert_eq!(ForcedRecurrence::parse(&name.to_uppercase()), Some(f));
    }
    for kind in RecurrenceKind::ALL {
        assert_eq!(RecurrenceKind::parse(&kind.to_string()), Some(kind));
        assert!(ForcedRecurrence::NAMES.contains(&kind.name()));
    }
    assert_eq!(RecurrenceKind::Cluster.to_string(), "cluster");
    assert!(!RecurrenceKind::Cluster.is_cooperative());
    for bad in [
        "",
        "cluster3",
        "cluster8",
        "clusterx",
        "cluster-2",
        "clu",
        "residentx",
    ] {
        assert_eq!(ForcedRecurrence::parse(bad), None, "{bad:?}");
    }
    let o = ForcedRecurrence::parse("auto").unwrap().apply(Overrides {
        recurrence: Some(RecurrenceKind::Wide),
        cluster_size: Some(2),
        cluster_windows: None,
        projection: Some(ProjectionTile::Small64),
    });
    assert_eq!(
        o,
        Overrides {
            recurrence: None,
            cluster_size: None,
            cluster_windows: None,
            projection: Some(ProjectionTile::Small64)
        }
    );
}

#[test]
fn window_tile_reasons_say_where_r_lives_and_the_costs_compared() {
    let tile = |windows| ClusterWindows::Tile {
        windows,
        waves: 2,
        capacity: 66,
        layer_us: 2760,
        two_window_us: 4736,
    };
    let costs =
        "H200 per-wave layer times 0.59 / 0.69 / 1.19 / 2.77 ms for 2 / 4 / 8 / 16 windows)";
    for (windows, place) in [(4, "registers"), (8, "registers"), (16, "shared memory")] {
        let text = tile(windows).to_string();
        assert!(
            text.starts_with(&format!(
                "{windows} windows per cluster, R in {place} (2 wave(s) of 66: about 2.76 ms a \
                 layer against 4.73 with two-window clusters; "
            )),
            "{text}"
        );
        assert!(text.ends_with(costs), "{text}");
    }
}
