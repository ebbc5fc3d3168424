//! GPU: device facts, the compiled kernels' real resources against core's occupancy
//! calculator, and the schedules forward passes run.

mod gpu_support;

use bilstm_core::StackShape;
use bilstm_core::coop::{choose_tiled_schedule, choose_wide_schedule};
use bilstm_core::owned::random_input;
use bilstm_cuda::{RecurrenceKind, device_count};
use gpu_support::{INPUT_SEED, force, gpu, prepared, run, stack};

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_facts_are_read_from_the_driver() {
    let n = device_count().expect("driver");
    assert!(n >= 1, "no GPU");
    let b = gpu();
    let info = b.device();
    eprintln!(
        "{} ({} of {n}): {:?}, {} MiB",
        info.name,
        info.ordinal,
        info.facts,
        info.total_memory_bytes >> 20
    );
    let f = info.facts;
    assert!(f.compute_capability >= (7, 0));
    assert!(f.sm_count > 0 && f.max_threads_per_sm >= 1024 && f.registers_per_sm >= 65536);
    assert!(f.shared_bytes_per_block_optin >= 48 * 1024);
    assert!(f.cooperative_launch, "bilstm needs cooperative launch");
    eprintln!("spin timeout {:?}", b.spin_timeout());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn kernel_resources_match_core_occupancy() {
    let shape = StackShape::pyannote().with_frames(4);
    let b = prepared(&stack(&shape), 1);
    let resources = b.kernel_resources().expect("resources after prepare");
    assert_eq!(resources.len(), bilstm_kernels::ALL.len());
    for r in resources {
        eprintln!(
            "{}: {} registers, {} B static shared, {} B local, max {} threads, {} blocks/SM (core {}), PTX {:?}",
            r.kernel,
            r.registers_per_thread,
            r.static_shared_bytes,
            r.local_bytes_per_thread,
            r.max_threads_per_block,
            r.blocks_per_sm,
            r.core_blocks_per_sm,
            r.ptx_origin
        );
        assert_eq!(
            r.blocks_per_sm, r.core_blocks_per_sm,
            "{}: core occupancy disagrees with the driver",
            r.kernel
        );
        assert!(r.blocks_per_sm >= 1, "{} cannot run", r.kernel);
        assert_eq!(
            r.local_bytes_per_thread, 0,
            "{} spills to local memory",
            r.kernel
        );
    }
    // Beyond the launch shapes: every kernel at other block sizes, and the kernels with dynamic
    // shared memory at sizes up to their own. A function may use at most 48 KiB of static plus
    // dynamic shared memory unless allowed more (the backend allows exactly its launch size);
    // beyond that the driver answers 0, a per-function attribute core does not model, so those
    // cases are skipped.
    let resident = resources
        .iter()
        .find(|r| r.kernel == bilstm_kernels::KernelId::RecurrenceResident)
        .expect("resident resources");
    let mut checked = 0;
    for r in resources {
        for threads in [32, 128, 256, 512, 1024] {
            if threads > r.max_threads_per_block {
                continue;
            }
            let dynamic_sizes: &[u32] = if r.dynamic_shared_bytes > 0 {
                &[0, 4096, r.dynamic_shared_bytes / 2, r.dynamic_shared_bytes]
            } else {
                &[0, 4096, 40_000]
            };
            let allowed = if r.dynamic_shared_bytes > 0 {
                r.dynamic_shared_bytes
            } else {
                (48 * 1024u32).saturating_sub(r.static_shared_bytes)
            };
            for &dynamic in dynamic_sizes.iter().filter(|&&d| d <= allowed) {
                let (driver, core) = b
                    .occupancy(r.kernel, threads, dynamic)
                    .expect("occupancy query");
                assert_eq!(
                    driver, core,
                    "{}: {threads} threads, {dynamic} B dynamic shared: driver {driver}, core {core}",
                    r.kernel
                );
                checked += 1;
            }
        }
    }
    eprintln!(
        "core's occupancy matched the driver in {checked} extra cases; resident: {} B dynamic, {} block/SM",
        resident.dynamic_shared_bytes, resident.blocks_per_sm
    );
    assert!(resident.dynamic_shared_bytes > 128 * 1024);
    // Core's plans with the real figures.
    let real = b.plan_resources().expect("plan resources");
    for batch in [1, 32, 256] {
        let plan = bilstm_core::plan::select(
            &b.device().facts,
            &real,
            &shape,
            batch,
            bilstm_core::MathMode::Fp32,
        )
        .expect("plan");
        assert_eq!(Some(plan), b.plan(batch).ok());
        eprintln!("plan on this GPU, batch {batch}:\n{plan}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn forward_passes_follow_the_plans() {
    let shape = StackShape::pyannote().with_frames(4);
    let st = stack(&shape);
    let mut b = prepared(&st, 1024);
    // One pass per forward: the host path would otherwise run batches above its chunk as
    // chunk-sized passes, each with the chunk's plan (tests/gpu_pipeline.rs covers those).
    b.set_host_chunk(0);
    for kind in [
        None,
        Some(RecurrenceKind::Wide),
        Some(RecurrenceKind::Tiled),
        Some(RecurrenceKind::Resident),
    ] {
        force(&mut b, kind);
        for batch in [1, 2, 7, 8, 9, 32, 33, 64, 256, 1024] {
            let input = random_input(&shape, batch, INPUT_SEED);
            let _ = run(&mut b, &shape, &input, batch);
            let s = b.last_forward().expect("summary");
            assert_eq!(s.plan, b.plan(batch).expect("plan"));
            if let Some(k) = kind {
                assert_eq!(s.recurrence, k);
            }
            if let Some(c) = s.plan.coop_schedule() {
                let want = match c.kind {
                    RecurrenceKind::Wide => choose_wide_schedule(batch, s.co_resident_blocks),
                    _ => choose_tiled_schedule(batch, s.co_resident_blocks),
                };
                assert_eq!(Ok(*c), want);
            }
            eprintln!(
                "{:>8} batch {batch:>4}: {} | {}",
                s.recurrence, s.plan.schedule.reason, s.projection_tile
            );
        }
    }
}
