//! GPU: per-phase timing (`CudaBackend::set_phase_timing`, `bilstm_cuda::phases`): every
//! layer's projection and recurrence time is positive and their sum is at most the whole
//! pass's time, for each recurrence kind at batches 1 and 32; a graph captured with phase
//! timing on still runs and records no phases; turning it off reports none.

// Test helpers: a failed expectation is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod gpu_support;

use bilstm_core::StackShape;
use bilstm_core::owned::random_input;
use bilstm_cuda::phases::{phases_table, time_phases};
use bilstm_cuda::{CudaBackend, RecurrenceKind};
use cudarc::driver::CudaSlice;
use cudarc::driver::sys::CUevent_flags;
use gpu_support::{INPUT_SEED, force, prepared, stack};

fn upload(gpu: &CudaBackend, data: &[f32]) -> CudaSlice<f32> {
    gpu.stream().clone_htod(data).expect("upload")
}

/// Event resolution is about half a microsecond; the phases' events lie inside the pass's.
const SLACK_MS: f64 = 0.002;

#[test]
#[ignore = "needs a CUDA GPU"]
fn phases_are_positive_and_fit_inside_the_pass() {
    let shape = StackShape::pyannote();
    let st = stack(&shape);
    let mut gpu = prepared(&st, 32);
    gpu.set_phase_timing(true).expect("phase timing on");
    assert!(gpu.phase_timing());
    let ctx = gpu.context().clone();
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let (start, end) = (ctx.new_event(flags).unwrap(), ctx.new_event(flags).unwrap());
    for kind in [
        RecurrenceKind::Wide,
        RecurrenceKind::Tiled,
        RecurrenceKind::Resident,
    ] {
        force(&mut gpu, Some(kind));
        for batch in [1usize, 32] {
            let input = random_input(&shape, batch, INPUT_SEED);
            let d_in = upload(&gpu, &input);
            let mut d_out = gpu
                .stream()
                .alloc_zeros::<f32>(shape.output_len(batch).unwrap())
                .unwrap();
            // Warm-up, then one pass bracketed by our own events.
            gpu.forward_device(&d_in, batch, &mut d_out)
                .expect("warm-up");
            start.record(gpu.stream()).unwrap();
            gpu.forward_device(&d_in, batch, &mut d_out)
                .expect("timed pass");
            end.record(gpu.stream()).unwrap();
            let total = f64::from(start.elapsed_ms(&end).unwrap());
            let phases = gpu
                .last_phases()
                .expect("reading phases")
                .expect("phases of the last pass");
            eprintln!(
                "{}",
                phases_table(
                    &format!("{kind} batch {batch}: pass {total:.4} ms"),
                    &phases
                )
            );
            assert_eq!(phases.len(), shape.layers);
            for (l, p) in phases.iter().enumerate() {
                assert_eq!(p.layer, l);
                assert!(p.projection_ms > 0.0, "{kind} b{batch}: {p:?}");
                assert!(p.recurrence_ms > 0.0, "{kind} b{batch}: {p:?}");
            }
            let sum: f64 = phases.iter().map(|p| p.total_ms()).sum();
            assert!(
                sum <= total + SLACK_MS,
                "{kind} b{batch}: phases sum to {sum} ms, the pass took {total} ms"
            );
            // The recurrence dominates a pass at these batches (DESIGN section 7).
            let rec: f64 = phases.iter().map(|p| p.recurrence_ms).sum();
            assert!(
                rec > 0.5 * sum,
                "{kind} b{batch}: recurrence {rec} of {sum} ms"
            );

            // A capture with phase timing on works and leaves the last phases alone.
            let graph = gpu
                .capture_forward_device(
                    upload(&gpu, &input),
                    batch,
                    gpu.stream()
                        .alloc_zeros::<f32>(shape.output_len(batch).unwrap())
                        .unwrap(),
                )
                .expect("capture with phase timing on");
            gpu.replay(&graph).expect("replay");
            assert_eq!(gpu.last_phases().unwrap(), Some(phases));
        }
    }
    let medians = time_phases(&mut gpu, 1, 5, 1).expect("time_phases");
    assert_eq!(medians.len(), shape.layers);
    assert!(
        gpu.phase_timing(),
        "time_phases left phase timing as it found it"
    );
    gpu.set_phase_timing(false).unwrap();
    assert!(!gpu.phase_timing());
    assert_eq!(gpu.last_phases().unwrap(), None);
    assert_eq!(time_phases(&mut gpu, 1, 3, 0).unwrap().len(), shape.layers);
    assert!(!gpu.phase_timing());
}
