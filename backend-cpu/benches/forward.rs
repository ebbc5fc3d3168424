//! Criterion benchmarks of the CPU backend: one forward pass of the built-in model (pyannote
//! shape, 589 frames) at batches 1, 8 and 32 with two threads, and batch 1 with one thread,
//! for every instruction set the host has (`forward/<isa>/threads<n>/batch<b>`, `<isa>` as
//! `BILSTM_CPU_ISA` names it: `avx2`, `avx512vl`, `avx512`); the portable kernels only at
//! batch 1 on one thread (they are many times slower without FMA instructions).
//!
//! `cargo bench -p bilstm-cpu` (add `-- --quick` for a short run, or a filter such as
//! `-- avx512/`). Criterion reports the time per forward and windows per second (throughput in
//! elements = windows). The comparison with ONNX Runtime on the same machine is
//! `scripts/cpu-vs-ort`.

#![allow(
    missing_docs,
    reason = "criterion_group! generates undocumented public functions"
)]
#![allow(
    clippy::unwrap_used,
    reason = "a benchmark: a failed unwrap aborts the run with the error"
)]

use std::hint::black_box;
use std::time::Duration;

use bilstm_core::owned::{OwnedStack, random_input};
use bilstm_core::{Backend, BackendConfig};
use bilstm_cpu::{CpuBackend, Isa};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn forward(c: &mut Criterion) {
    let model = OwnedStack::builtin();
    let weights = model.weights().unwrap();
    let shape = model.shape;
    let mut group = c.benchmark_group("forward");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    let cases = Isa::available().into_iter().flat_map(|isa| {
        let all: &[(usize, usize)] = if isa.is_avx2_fma() {
            &[(2, 1), (1, 1), (2, 8), (2, 32)]
        } else {
            &[(1, 1)]
        };
        all.iter()
            .map(move |&(threads, batch)| (isa, threads, batch))
    });
    for (isa, threads, batch) in cases {
        let mut cpu = CpuBackend::with_isa(threads, isa);
        cpu.prepare(&weights, &BackendConfig::pyannote(batch))
            .unwrap();
        let input = random_input(&shape, batch, 1);
        let mut output = vec![0.0f32; shape.output_len(batch).unwrap()];
        group.throughput(Throughput::Elements(batch as u64));
        group.bench_with_input(
            BenchmarkId::new(
                format!("{}/threads{threads}", isa.name()),
                format!("batch{batch}"),
            ),
            &batch,
            |b, &batch| {
                b.iter(|| {
                    cpu.forward(black_box(&input), batch, &mut output).unwrap();
                    black_box(&output);
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, forward);
criterion_main!(benches);
