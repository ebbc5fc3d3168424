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
    let usage = resources.recurrence(kind);

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
    assert_eq!(
        plan.co_resident_blocks,
        plan.recurrence_occupancy.blocks_per_sm as usize * facts.sm_count as usize,
        "{ctx}"
    );

    match plan.schedule.choice {
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

    // Projection: fits an SM and the opt-in limit; TF32 only in TF32 mode where allowed;
    // FP32 tile by rows.
    let tile = plan.projection.choice;
    let proj = resources.projection(tile);
    assert!(plan.projection_occupancy.blocks_per_sm >= 1, "{ctx}");
    assert!(
        proj.shared_bytes().unwrap() <= facts.shared_bytes_per_block_optin,
        "{ctx}"
    );
    let rows = plan.batch * plan.frames;
    match (plan.math, tf32_allowed_here(facts)) {
        (MathMode::Tf32, true) => assert_eq!(tile, ProjectionTile::Tf32, "{ctx}"),
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

    // One line per decision, each naming something.
    let text = plan.to_string();
    assert_eq!(text.lines().count(), 4, "{ctx}: {text}");
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
    assert_eq!(p.recurrence.choice, RecurrenceKind::Resident);
    assert_eq!(p.resident_grid_blocks(), Some(64));
    assert_eq!(p.co_resident_blocks, 132);
    // Measured on the H200: the 64x64 tile at every batch.
    assert_eq!(p.projection.choice, ProjectionTile::Small64);
    let lines: Vec<_> = p.explain().iter().map(ToString::to_string).collect();
    assert!(
        lines[0]
            .starts_with("recurrence: resident: 1 block/SM fits (134144 B shared with half of R"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("schedule: resident: one grid of 64 blocks"),
        "{}",
        lines[1]
    );
    assert!(lines[2].starts_with("streams: concurrent"), "{}", lines[2]);
    assert!(
        lines[3].starts_with("projection: fp32 64x64: 18848 rows; on 9.0"),
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
    // The resident kernel needs none.
    let h200 = DeviceFacts {
        cooperative_launch: false,
        ..table::find("h200").unwrap().facts
    };
    for batch in BATCHES {
        let p = select_on(&query(h200), &r, &shape, batch, MathMode::Fp32).unwrap();
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
    // Forced small tiles at a large batch.
    let small = Overrides {
        recurrence: None,
        projection: Some(ProjectionTile::Small64),
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
    };
    assert!(matches!(
        force(&no_coop, 1, MathMode::Fp32, wide),
        Err(CoreError::ForcedChoice { .. })
    ));
}

#[test]
fn real_kernel_figures_change_the_plan() {
    // If the compiled resident kernel (256 threads) needed 256 registers it could not launch
    // (255 per thread at most): the H200 then plans tiled.
    let mut r = KernelResources::nominal();
    r.resident.registers_per_thread = 256;
    let h200 = table::find("h200").unwrap().facts;
    let p = select(&h200, &r, &StackShape::pyannote(), 32, MathMode::Fp32).unwrap();
    assert_eq!(p.recurrence.choice, RecurrenceKind::Tiled);
    assert_eq!(
        p.recurrence.reason,
        Reason::ByBatch {
            chosen: RecurrenceKind::Tiled,
            batch: 32,
            resident_limit: crate::occupancy::Limit::PerBlockLimit
        }
    );
}
