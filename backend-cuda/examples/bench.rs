//! Times `CudaBackend::forward_device` (data already on the GPU) with CUDA events and prints
//! one JSON line per batch:
//!
//! ```text
//! cargo run --release -p bilstm-cuda --example bench -- --batches 1,32,256 [--frames 589]
//!     [--iters 30] [--warmup 5] [--tile auto|small|large]
//! ```
//!
//! Weights: the built-in model (U(-0.3, 0.3)); inputs: seeded standard normal (non-zero).
//! Each figure is the median of `--iters` passes after `--warmup` passes; a pass's time runs
//! from an event recorded before the pass to one recorded after it (the pass ends with the
//! 16-byte read of the kernels' error words, included). The host forward (upload, pass,
//! download) is timed too, with the wall clock.

use std::time::Instant;

use bilstm_core::owned::{OwnedStack, random_input};
use bilstm_core::{Backend, BackendConfig, MathMode};
use bilstm_cuda::{CudaBackend, CudaError, ProjectionTile};
use cudarc::driver::sys::CUevent_flags;

struct Args {
    batches: Vec<usize>,
    frames: usize,
    iters: usize,
    warmup: usize,
    tile: Option<ProjectionTile>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        batches: vec![1, 32, 256],
        frames: 589,
        iters: 30,
        warmup: 5,
        tile: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<usize>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--batches" => a.batches = value.split(',').map(num).collect::<Result<_, _>>()?,
            "--frames" => a.frames = num(&value)?,
            "--iters" => a.iters = num(&value)?.max(1),
            "--warmup" => a.warmup = num(&value)?,
            "--tile" => {
                a.tile = match value.as_str() {
                    "auto" => None,
                    "small" => Some(ProjectionTile::Small64),
                    "large" => Some(ProjectionTile::Large128),
                    other => return Err(format!("--tile {other}: auto, small or large")),
                }
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(a)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse()?;
    let model = OwnedStack::builtin();
    let shape = model.shape.with_frames(args.frames);
    let stack = if args.frames == model.shape.frames {
        model
    } else {
        OwnedStack::random(&shape, bilstm_core::owned::BUILTIN_SEED, 0.3)
    };
    let max_batch = args.batches.iter().copied().max().unwrap_or(1);
    let mut gpu = CudaBackend::new(0)?;
    gpu.set_projection_tile(args.tile);
    gpu.prepare(
        &stack.weights()?,
        &BackendConfig {
            shape,
            max_batch,
            math: MathMode::Fp32,
        },
    )?;
    let name = gpu.device().name.clone();
    let stream = gpu.stream().clone();
    let ctx = gpu.context().clone();
    for &batch in &args.batches {
        let input = random_input(&shape, batch, 1);
        let d_in = stream.clone_htod(&input).map_err(|e| CudaError::Driver {
            what: "upload",
            source: e,
        })?;
        let mut d_out = stream
            .alloc_zeros::<f32>(shape.output_len(batch)?.max(1))
            .map_err(|e| CudaError::Driver {
                what: "alloc",
                source: e,
            })?;
        for _ in 0..args.warmup {
            gpu.forward_device(&d_in, batch, &mut d_out)?;
        }
        let start = ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| CudaError::Driver {
                what: "event",
                source: e,
            })?;
        let end = ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| CudaError::Driver {
                what: "event",
                source: e,
            })?;
        let mut times = Vec::with_capacity(args.iters);
        for _ in 0..args.iters {
            start.record(&stream).map_err(|e| CudaError::Driver {
                what: "record",
                source: e,
            })?;
            gpu.forward_device(&d_in, batch, &mut d_out)?;
            end.record(&stream).map_err(|e| CudaError::Driver {
                what: "record",
                source: e,
            })?;
            end.synchronize().map_err(|e| CudaError::Driver {
                what: "sync",
                source: e,
            })?;
            times.push(f64::from(start.elapsed_ms(&end).map_err(|e| {
                CudaError::Driver {
                    what: "elapsed",
                    source: e,
                }
            })?));
        }
        let min = times.iter().copied().fold(f64::INFINITY, f64::min);
        let max = times.iter().copied().fold(0.0, f64::max);
        let med = median(&mut times);
        let mut host_out = vec![0.0f32; shape.output_len(batch)?];
        let mut host = Vec::new();
        for _ in 0..args.iters.min(10) {
            let t = Instant::now();
            gpu.forward(&input, batch, &mut host_out)?;
            host.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let host_med = median(&mut host);
        let s = gpu.last_forward().ok_or("no forward summary")?;
        let steps = (shape.layers * shape.frames) as f64;
        println!(
            "{{\"bench\":\"bilstm-cuda forward_device\",\"device\":\"{name}\",\"batch\":{batch},\"frames\":{},\"median_ms\":{med:.4},\"min_ms\":{min:.4},\"max_ms\":{max:.4},\"iters\":{},\"us_per_step\":{:.4},\"windows_per_s\":{:.1},\"tile_height\":{},\"tiles\":{},\"concurrent\":{},\"launches_per_direction\":{},\"projection_tile\":\"{:?}\",\"co_resident_blocks\":{},\"host_forward_median_ms\":{host_med:.4}}}",
            shape.frames,
            args.iters,
            med * 1e3 / steps,
            batch as f64 * 1e3 / med,
            s.schedule.tile_height,
            s.schedule.tiles,
            s.schedule.concurrent,
            s.schedule.launches_per_direction(),
            s.projection_tile,
            s.co_resident_blocks,
        );
    }
    if let Some(resources) = gpu.kernel_resources() {
        for r in resources {
            println!(
                "{{\"kernel\":\"{}\",\"registers\":{},\"static_shared_bytes\":{},\"local_bytes\":{},\"blocks_per_sm\":{},\"core_blocks_per_sm\":{}}}",
                r.kernel,
                r.registers_per_thread,
                r.static_shared_bytes,
                r.local_bytes_per_thread,
                r.blocks_per_sm,
                r.core_blocks_per_sm
            );
        }
    }
    Ok(())
}
