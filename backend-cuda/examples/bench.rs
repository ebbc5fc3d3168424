//! Times `CudaBackend::forward_device` (data already on the GPU) with CUDA events, for every
//! requested recurrence kind, projection tile, math mode and batch, and prints one JSON line
//! per case:
//!
//! ```text
//! cargo run --release -p bilstm-cuda --example bench -- --batches 1,32,256
//!     [--kinds auto,wide,tiled,resident,cluster,cluster2,cluster4,cluster2w2,cluster2w8,...]
//!     [--tiles auto,small,large,tf32,3xtf32,3xtf32s,3xtf32wg,tf32wg] [--maths fp32,tf32]
//!     [--frames 589] [--iters 30] [--warmup 3] [--case-ms 1500] [--no-graph] [--host] [--phases]
//! ```
//!
//! Weights: the built-in model (U(-0.3, 0.3)); inputs: seeded standard normal (non-zero).
//! A case forces its kind and tile through `CudaBackend::set_overrides` (`auto`: the plan's
//! own choice; `cluster2`/`cluster4`: the cluster kind with that cluster size, `cluster2wN`:
//! 2-CTA clusters of N windows (2, 4, 8, 16), `cluster`: the size by the plan's rule); a combination the device cannot run prints a line with its
//! `"error"`. Each
//! figure is the median of the timed passes after `--warmup` passes; a pass's time runs from
//! an event recorded before the pass to one recorded after it (the pass ends with the 16-byte
//! read of the kernels' error words after a cooperative recurrence, included). Passes per case:
//! `--iters`, fewer when one pass is long (at least 3, about `--case-ms` in all). Unless
//! `--no-graph`, the same pass is also captured in a CUDA graph and its replays timed
//! (`graph_median_ms`). `--host` adds the host forward (upload, pass, download), wall clock.
//! `--phases` adds, per layer, the median projection and recurrence time of separate
//! phase-timed passes (`bilstm_cuda::phases`; key `"phases"`: a list of `{"layer",
//! "projection_ms", "recurrence_ms"}`) and prints a table per case after all JSON lines.

use std::time::Instant;

use bilstm_core::owned::{OwnedStack, random_input};
use bilstm_core::plan::ForcedRecurrence;
use bilstm_core::{Backend, BackendConfig, MathMode};
use bilstm_cuda::phases::{phases_json, phases_table, time_phases};
use bilstm_cuda::{CudaBackend, CudaError, LayerPhases, Overrides, ProjectionTile};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice};

struct Args {
    batches: Vec<usize>,
    kinds: Vec<ForcedRecurrence>,
    tiles: Vec<Option<ProjectionTile>>,
    maths: Vec<MathMode>,
    frames: usize,
    iters: usize,
    warmup: usize,
    case_ms: f64,
    graph: bool,
    host: bool,
    phases: bool,
}

fn list<T>(flag: &str, value: &str, one: impl Fn(&str) -> Option<T>) -> Result<Vec<T>, String> {
    value
        .split(',')
        .map(|v| one(v.trim()).ok_or_else(|| format!("{flag}: {v:?} is not valid")))
        .collect()
}

fn parse() -> Result<Args, String> {
    parse_from(std::env::args().skip(1))
}

fn parse_from(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        batches: vec![1, 32, 256],
        kinds: vec![ForcedRecurrence::default()],
        tiles: vec![None],
        maths: vec![MathMode::Fp32],
        frames: 589,
        iters: 30,
        warmup: 3,
        case_ms: 1500.0,
        graph: true,
        host: false,
        phases: false,
    };
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--no-graph" => {
                a.graph = false;
                continue;
            }
            "--host" => {
                a.host = true;
                continue;
            }
            "--phases" => {
                a.phases = true;
                continue;
            }
            _ => {}
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<usize>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--batches" => a.batches = list(&flag, &value, |v| v.parse().ok())?,
            "--kinds" => a.kinds = list(&flag, &value, ForcedRecurrence::parse)?,
            "--tiles" | "--tile" => {
                a.tiles = list(&flag, &value, |v| match v {
                    "auto" => Some(None),
                    "small" => Some(Some(ProjectionTile::Small64)),
                    "large" => Some(Some(ProjectionTile::Large128)),
                    "tf32" => Some(Some(ProjectionTile::Tf32)),
                    "3xtf32" => Some(Some(ProjectionTile::Tf32x3)),
                    "3xtf32s" => Some(Some(ProjectionTile::Tf32x3Small)),
                    "3xtf32wg" => Some(Some(ProjectionTile::Tf32x3Wgmma)),
                    "tf32wg" => Some(Some(ProjectionTile::Tf32Wgmma)),
                    _ => None,
                })?
            }
            "--maths" => a.maths = list(&flag, &value, MathMode::parse)?,
            "--frames" => a.frames = num(&value)?,
            "--iters" => a.iters = num(&value)?.max(1),
            "--warmup" => a.warmup = num(&value)?,
            "--case-ms" => {
                a.case_ms = value
                    .parse()
                    .map_err(|e| format!("--case-ms {value}: {e}"))?
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

fn driver(what: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> CudaError {
    move |source| CudaError::Driver { what, source }
}

/// Times `pass` `iters` times between two events on the backend's stream, in ms.
fn time_passes(
    gpu: &mut CudaBackend,
    events: &(CudaEvent, CudaEvent),
    iters: usize,
    mut pass: impl FnMut(&mut CudaBackend) -> Result<(), CudaError>,
) -> Result<Vec<f64>, CudaError> {
    let stream = gpu.stream().clone();
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        events.0.record(&stream).map_err(driver("record"))?;
        pass(gpu)?;
        events.1.record(&stream).map_err(driver("record"))?;
        events.1.synchronize().map_err(driver("sync"))?;
        times.push(f64::from(
            events.0.elapsed_ms(&events.1).map_err(driver("elapsed"))?,
        ));
    }
    Ok(times)
}

fn kind_name(k: ForcedRecurrence) -> String {
    k.to_string()
}

fn tile_name(t: Option<ProjectionTile>) -> &'static str {
    match t {
        None => "auto",
        Some(ProjectionTile::Small64) => "small",
        Some(ProjectionTile::Large128) => "large",
        Some(ProjectionTile::Tf32) => "tf32",
        Some(ProjectionTile::Tf32x3) => "3xtf32",
        Some(ProjectionTile::Tf32x3Small) => "3xtf32s",
        Some(ProjectionTile::Tf32x3Wgmma) => "3xtf32wg",
        Some(ProjectionTile::Tf32Wgmma) => "tf32wg",
    }
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

struct Case {
    kind: ForcedRecurrence,
    tile: Option<ProjectionTile>,
    batch: usize,
}

/// Runs one case; returns the JSON fields after the case's own, and the phases with
/// `--phases`.
fn run_case(
    gpu: &mut CudaBackend,
    args: &Args,
    case: &Case,
    events: &(CudaEvent, CudaEvent),
) -> Result<(String, Option<Vec<LayerPhases>>), CudaError> {
    let shape = gpu
        .config()
        .ok_or(bilstm_core::CoreError::NotPrepared)?
        .shape;
    gpu.set_overrides(case.kind.apply(Overrides {
        projection: case.tile,
        ..Overrides::default()
    }))?;
    let batch = case.batch;
    let stream = gpu.stream().clone();
    let input = random_input(&shape, batch, 1);
    let out_len = shape.output_len(batch)?.max(1);
    let d_in: CudaSlice<f32> = stream.clone_htod(&input).map_err(driver("upload"))?;
    let mut d_out = stream
        .alloc_zeros::<f32>(out_len)
        .map_err(driver("alloc"))?;
    let first = Instant::now();
    gpu.forward_device(&d_in, batch, &mut d_out)?;
    let first_ms = first.elapsed().as_secs_f64() * 1e3;
    for _ in 1..args.warmup.max(1) {
        gpu.forward_device(&d_in, batch, &mut d_out)?;
    }
    let iters = ((args.case_ms / first_ms.max(1e-3)) as usize).clamp(3, args.iters.max(3));
    let mut times = time_passes(gpu, events, iters, |g| {
        g.forward_device(&d_in, batch, &mut d_out)
    })?;
    let s = gpu.last_forward().ok_or(CudaError::Internal {
        what: "no forward summary".into(),
    })?;
    let min = times.iter().copied().fold(f64::INFINITY, f64::min);
    let max = times.iter().copied().fold(0.0, f64::max);
    let med = median(&mut times);
    let mut extra = String::new();
    // Phase-timed passes are separate from the timed ones above (their events cost a little).
    let phases = if args.phases {
        let p = time_phases(gpu, batch, iters, 1)?;
        extra.push_str(&format!(",\"phases\":{}", phases_json(&p)));
        Some(p)
    } else {
        None
    };
    if args.graph {
        let g_out = stream
            .alloc_zeros::<f32>(out_len)
            .map_err(driver("alloc"))?;
        let g_in = stream.clone_htod(&input).map_err(driver("upload"))?;
        match gpu.capture_forward_device(g_in, batch, g_out) {
            Ok(graph) => {
                gpu.replay(&graph)?;
                let mut g = time_passes(gpu, events, iters, |b| b.replay(&graph))?;
                extra.push_str(&format!(",\"graph_median_ms\":{:.4}", median(&mut g)));
            }
            Err(e) => extra.push_str(&format!(",\"graph_error\":{}", json_str(&e.to_string()))),
        }
    }
    if args.host {
        let mut host_out = vec![0.0f32; shape.output_len(batch)?];
        let mut host = Vec::new();
        for _ in 0..iters.min(10) {
            let t = Instant::now();
            gpu.forward(&input, batch, &mut host_out)?;
            host.push(t.elapsed().as_secs_f64() * 1e3);
        }
        extra.push_str(&format!(
            ",\"host_forward_median_ms\":{:.4}",
            median(&mut host)
        ));
    }
    if let Some(entry) = gpu.last_fixed_recurrence() {
        extra.push_str(&format!(",\"fixed_recurrence\":{}", json_str(entry)));
    }
    let steps = (shape.layers * shape.frames) as f64;
    let fields = format!(
        "\"recurrence\":\"{}\",\"projection_tile\":\"{}\",\"median_ms\":{med:.4},\"min_ms\":{min:.4},\"max_ms\":{max:.4},\"iters\":{iters},\"us_per_step\":{:.4},\"windows_per_s\":{:.1},\"co_resident_blocks\":{},\"schedule\":{}{extra}",
        s.recurrence,
        tile_name(Some(s.projection_tile)),
        med * 1e3 / steps,
        batch as f64 * 1e3 / med,
        s.co_resident_blocks,
        json_str(&s.plan.schedule.reason.to_string()),
    );
    Ok((fields, phases))
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
    let name = gpu.device().name.clone();
    let ctx = gpu.context().clone();
    let events = (
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver("event"))?,
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver("event"))?,
    );
    let mut tables = Vec::new();
    for &math in &args.maths {
        gpu.set_overrides(Overrides::default())?;
        gpu.prepare(
            &stack.weights()?,
            &BackendConfig {
                shape,
                max_batch,
                math,
            },
        )?;
        for &kind in &args.kinds {
            for &tile in &args.tiles {
                for &batch in &args.batches {
                    let case = Case { kind, tile, batch };
                    let head = format!(
                        "\"bench\":\"bilstm-cuda forward_device\",\"device\":{},\"math\":\"{math}\",\"kind\":\"{}\",\"tile\":\"{}\",\"batch\":{batch},\"frames\":{}",
                        json_str(&name),
                        kind_name(kind),
                        tile_name(tile),
                        shape.frames
                    );
                    match run_case(&mut gpu, &args, &case, &events) {
                        Ok((fields, phases)) => {
                            println!("{{{head},{fields}}}");
                            if let Some(p) = phases {
                                let title = format!(
                                    "phases (median ms per layer): {math}, kind {}, tile {}, batch {batch}",
                                    kind_name(kind),
                                    tile_name(tile)
                                );
                                tables.push(phases_table(&title, &p));
                            }
                        }
                        Err(e) => println!("{{{head},\"error\":{}}}", json_str(&e.to_string())),
                    }
                }
            }
        }
    }
    for t in &tables {
        println!("{t}");
    }
    if let Some(resources) = gpu.kernel_resources() {
        for r in resources {
            println!(
                "{{\"kernel\":\"{}\",\"threads\":{},\"registers\":{},\"static_shared_bytes\":{},\"dynamic_shared_bytes\":{},\"local_bytes\":{},\"blocks_per_sm\":{},\"core_blocks_per_sm\":{}}}",
                r.kernel,
                r.threads,
                r.registers_per_thread,
                r.static_shared_bytes,
                r.dynamic_shared_bytes,
                r.local_bytes_per_thread,
                r.blocks_per_sm,
                r.core_blocks_per_sm
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Result<Args, String> {
        parse_from(v.iter().map(|s| s.to_string()))
    }

    #[test]
    fn phases_is_a_flag_off_by_default() {
        let a = args(&["--batches", "1,32", "--phases", "--no-graph"]).unwrap();
        assert!(a.phases && !a.graph);
        assert_eq!(a.batches, vec![1, 32]);
        assert!(!args(&["--batches", "1"]).unwrap().phases);
        assert!(args(&["--phase"]).is_err());
    }
}
