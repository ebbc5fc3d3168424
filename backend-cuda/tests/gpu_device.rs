//! GPU: device facts, the compiled kernels' real resources against core's occupancy
//! calculator, and the schedules forward passes run.

mod gpu_support;

use bilstm_core::StackShape;
use bilstm_core::owned::random_input;
use bilstm_core::schedule::choose_wide_schedule;
use bilstm_cuda::device_count;
use gpu_support::{INPUT_SEED, gpu, prepared, run, stack};

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
    // Core's plan with the real figures (this backend runs the wide recurrence whatever it says).
    let real = b.plan_resources().expect("plan resources");
    for batch in [1, 32, 256] {
        let plan = bilstm_core::plan::select(
            &b.device().facts,
            &real,
            &shape,
            batch,
            bilstm_core::MathMode::Fp32,
        );
        match plan {
            Ok(plan) => eprintln!("core plan, batch {batch}: {plan:?}"),
            Err(e) => eprintln!("core plan, batch {batch}: {e}"),
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn forward_passes_follow_core_schedules() {
    let shape = StackShape::pyannote().with_frames(4);
    let st = stack(&shape);
    let mut b = prepared(&st, 1024);
    for batch in [1, 2, 7, 8, 9, 32, 33, 64, 256, 1024] {
        let input = random_input(&shape, batch, INPUT_SEED);
        let _ = run(&mut b, &shape, &input, batch);
        let s = b.last_forward().expect("summary");
        assert_eq!(
            s.schedule,
            choose_wide_schedule(batch, s.co_resident_blocks).expect("schedule")
        );
        eprintln!(
            "batch {batch:>4}: tile height {:>2}, {:>2} tiles, concurrent {}, {} launch(es) per direction, projection {:?}, capacity {}",
            s.schedule.tile_height,
            s.schedule.tiles,
            s.schedule.concurrent,
            s.schedule.launches_per_direction(),
            s.projection_tile,
            s.co_resident_blocks
        );
    }
}
