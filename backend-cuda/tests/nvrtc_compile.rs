//! CPU-only: every kernel compiles with NVRTC for every architecture bilstm targets, and (when
//! `ptxas` is available) the kernels assemble for sm_90 and sm_80 without spilling or a stack frame.
//!
//! Needs NVRTC only (no driver, no GPU): `source scripts/nvrtc-env` provides NVRTC 13.0 and
//! ptxas 13.0 from PyPI. Without NVRTC the tests pass with a note, except when `CI` or
//! `BILSTM_REQUIRE_NVRTC` is set: then a missing NVRTC fails them.

// Test helpers: a missing required NVRTC is a failed test.
#![allow(clippy::panic)]

use std::path::PathBuf;
use std::process::Command;

use bilstm_cuda::{compile_with_cache, nvrtc_version};
use bilstm_kernels::ALL;

/// Compute capabilities compiled for: Turing, Ampere (A100, RTX 30), Ada, Hopper, Blackwell
/// (B200, RTX 50).
const ARCHS: [(u32, u32); 7] = [(7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)];

fn flag_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// `true` when NVRTC is there; `false` (after a note) when it is missing and not required.
fn nvrtc_or_skip() -> bool {
    match nvrtc_version() {
        Ok((major, minor)) => {
            eprintln!("NVRTC {major}.{minor}");
            true
        }
        Err(e) if flag_set("CI") || flag_set("BILSTM_REQUIRE_NVRTC") => {
            panic!(
                "NVRTC is required here (CI or BILSTM_REQUIRE_NVRTC is set) but unavailable: {e}"
            )
        }
        Err(e) => {
            eprintln!("skipping: {e} (set BILSTM_REQUIRE_NVRTC=1 to make this a failure)");
            false
        }
    }
}

#[test]
fn every_kernel_compiles_for_every_architecture() {
    if !nvrtc_or_skip() {
        return;
    }
    for arch in ARCHS {
        for id in ALL {
            let k = id.kernel();
            let compiled = compile_with_cache(k, arch, None)
                .unwrap_or_else(|e| panic!("{id} for {arch:?}: {e}"));
            let ptx = &compiled.ptx;
            assert!(
                ptx.contains(&format!(".entry {}(", k.entry)),
                "{id} for {arch:?}: entry missing"
            );
            assert!(
                ptx.contains(&format!(".target sm_{}{}", arch.0, arch.1)),
                "{id}: wrong target"
            );
            assert!(
                !ptx.contains(".local"),
                "{id} for {arch:?}: the PTX uses local memory"
            );
        }
    }
}

fn ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BILSTM_PTXAS").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("ptxas"))
        .find(|p| p.is_file())
}

/// `ptxas -v` figures of one function.
#[derive(Debug, Default)]
struct Assembled {
    registers: u32,
    spill_stores: u32,
    spill_loads: u32,
    stack_frame: u32,
}

fn number_before(line: &str, label: &str) -> Option<u32> {
    let at = line.find(label)?;
    line[..at].split_whitespace().last()?.parse().ok()
}

/// Parses ptxas' verbose report into (function, figures).
fn parse_verbose(report: &str) -> Vec<(String, Assembled)> {
    let mut out: Vec<(String, Assembled)> = Vec::new();
    for line in report.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            out.push((name, Assembled::default()));
        } else if let Some((_, a)) = out.last_mut() {
            if let Some(v) = number_before(line, "bytes spill stores") {
                a.spill_stores = v;
            }
            if let Some(v) = number_before(line, "bytes spill loads") {
                a.spill_loads = v;
            }
            if let Some(v) = number_before(line, "bytes stack frame") {
                a.stack_frame = v;
            }
            if let Some(v) = number_before(line, "registers") {
                a.registers = v;
            }
        }
    }
    out
}

#[test]
fn kernels_assemble_without_spills() {
    if !nvrtc_or_skip() {
        return;
    }
    let Some(ptxas) = ptxas() else {
        eprintln!(
            "skipping: no ptxas (set BILSTM_PTXAS or put ptxas on PATH; scripts/nvrtc-env does)"
        );
        return;
    };
    let dir = std::env::temp_dir().join(format!("bilstm-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for arch in [(9, 0), (8, 0)] {
        for id in ALL {
            let k = id.kernel();
            let compiled = compile_with_cache(k, arch, None).unwrap();
            let file = dir.join(format!("{}-{}{}.ptx", id.name(), arch.0, arch.1));
            std::fs::write(&file, compiled.ptx.as_bytes()).unwrap();
            // 9.0's modules are compiled for compute_90a (bilstm_cuda::compile::nvrtc_options).
            let suffix = if bilstm_core::plan::wgmma_available(arch) {
                "a"
            } else {
                ""
            };
            let output = Command::new(&ptxas)
                .arg(format!("-arch=sm_{}{}{suffix}", arch.0, arch.1))
                .arg("-v")
                .arg(&file)
                .arg("-o")
                .arg(dir.join("out.cubin"))
                .output()
                .unwrap_or_else(|e| panic!("running {}: {e}", ptxas.display()));
            let report = String::from_utf8_lossy(&output.stderr).into_owned()
                + &String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success(),
                "ptxas failed on {id} for sm_{}{}:\n{report}",
                arch.0,
                arch.1
            );
            let functions = parse_verbose(&report);
            let mine: Vec<_> = functions
                .iter()
                .filter(|(name, _)| name == k.entry)
                .collect();
            assert_eq!(
                mine.len(),
                1,
                "{id}: no ptxas report for {}:\n{report}",
                k.entry
            );
            for (name, a) in mine {
                eprintln!(
                    "sm_{}{} {name}: {} registers, {} bytes stack, {} bytes spill stores, {} bytes spill loads",
                    arch.0, arch.1, a.registers, a.stack_frame, a.spill_stores, a.spill_loads
                );
                assert_eq!(
                    (a.spill_stores, a.spill_loads),
                    (0, 0),
                    "{name} spills on sm_{}{}:\n{report}",
                    arch.0,
                    arch.1
                );
                // A stack frame is local memory too (an array indexed by a run-time value):
                // gpu_device's occupancy test refuses any local bytes on the GPU.
                assert_eq!(
                    a.stack_frame, 0,
                    "{name} has a stack frame on sm_{}{}:\n{report}",
                    arch.0, arch.1
                );
                assert!(
                    a.registers > 0,
                    "{name}: no register count parsed:\n{report}"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_verbose_parser_reads_ptxas_lines() {
    let report = "ptxas info    : Compiling entry function 'bilstm_clear' for 'sm_90'\n\
                  ptxas info    : Function properties for bilstm_clear\n\
                  \x20   8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
                  ptxas info    : Used 16 registers, used 0 barriers, 384 bytes cmem[0]\n";
    let f = parse_verbose(report);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].0, "bilstm_clear");
    assert_eq!(
        (
            f[0].1.registers,
            f[0].1.stack_frame,
            f[0].1.spill_stores,
            f[0].1.spill_loads
        ),
        (16, 8, 4, 12)
    );
}

/// The TF32 projection per architecture: the real kernel (`mma.sync` TF32, `cp.async`) from 8.0
/// on, activations rounded with `cvt.rn.tf32.f32` from 9.0 on (PTX has `.rn` for `.tf32` only
/// there; 8.x rounds in integer arithmetic, the same ties-to-even), and a trap stub before 8.0
/// (no TF32 tensor cores; the host never launches it there, but every kernel is compiled and
/// loaded on every supported device).
#[test]
fn the_tf32_projection_is_real_from_8_0_and_rounds_to_nearest_even() {
    if !nvrtc_or_skip() {
        return;
    }
    let k = bilstm_kernels::KernelId::ProjectionTf32.kernel();
    let mma = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32";
    for arch in ARCHS {
        let ptx = compile_with_cache(k, arch, None)
            .unwrap_or_else(|e| panic!("{arch:?}: {e}"))
            .ptx;
        let real = arch >= (8, 0);
        assert_eq!(ptx.contains(mma), real, "{arch:?}: mma.sync");
        assert_eq!(ptx.contains("cp.async.cg.shared.global"), real, "{arch:?}");
        assert_eq!(ptx.contains("trap;"), !real, "{arch:?}: trap stub");
        assert_eq!(
            ptx.contains("cvt.rn.tf32.f32"),
            arch >= (9, 0),
            "{arch:?}: hardware round-to-nearest-even"
        );
        assert!(!ptx.contains("cvt.rna"), "{arch:?}: ties-away rounding");
    }
}

/// The 3xTF32 projection per architecture: the real kernels from 8.0 on, with three `mma.sync`
/// TF32 products per fragment pair (one k-step's loop body per entry in the PTX, two for the
/// large entry from 9.0 on: 3 x the warp tile's mma tiles per k-step, for the large and the small
/// entry, which share the module), the same
/// ties-to-even rounding as the TF32 tile (no `cvt.rna`), and trap stubs before 8.0; the
/// warpgroup entries (same module) real on 9.0 only (three `wgmma` products for each of a K
/// tile's four k-steps; one 256-column product for the TF32 twin) and trap stubs elsewhere.
#[test]
fn the_tf32x3_projection_is_real_from_8_0_with_three_products() {
    if !nvrtc_or_skip() {
        return;
    }
    let k = bilstm_kernels::KernelId::ProjectionTf32x3.kernel();
    let mma = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32";
    for arch in ARCHS {
        let ptx = compile_with_cache(k, arch, None)
            .unwrap_or_else(|e| panic!("{arch:?}: {e}"))
            .ptx;
        let real = arch >= (8, 0);
        let wgmma = bilstm_core::plan::wgmma_available(arch);
        // Where the warpgroup entries are real, the module's only traps are their guards
        // against a dynamic shared base off the 1,024-byte swizzle atoms (one an entry; the
        // resident entry's also refuses a broken grid or width); elsewhere they are trap stubs
        // (and so are the mma.sync entries before 8.0).
        let traps = ptx.matches("trap;").count();
        if wgmma {
            assert_eq!(traps, 3, "{arch:?}: only the three entries' guards trap");
        } else {
            assert!(traps >= 3, "{arch:?}: trap stubs ({traps} traps)");
        }
        assert_eq!(
            ptx.matches("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32")
                .count(),
            // 3xTF32: three products for each of a K tile's four k-steps; the resident TF32
            // entry: one (both operands in shared memory) for each of them.
            if wgmma { 3 * 4 + 4 } else { 0 },
            "{arch:?}: 3xTF32 and resident TF32 wgmma products"
        );
        // The resident entry's activations arrive and its outputs leave by TMA (its only
        // tensor copies); no other entry has any.
        let tma_loads = ptx
            .matches("cp.async.bulk.tensor.2d.shared::cluster.global")
            .count();
        let tma_stores = ptx
            .matches("cp.async.bulk.tensor.3d.global.shared::cta")
            .count();
        assert_eq!(
            (tma_loads > 0, tma_stores > 0),
            (wgmma, wgmma),
            "{arch:?}: {tma_loads} TMA loads, {tma_stores} TMA stores"
        );
        assert_eq!(
            ptx.matches("wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32")
                .count(),
            // TF32: one 256-column product for each of a K tile's four k-steps.
            if wgmma { 4 } else { 0 },
            "{arch:?}: TF32 wgmma products"
        );
        if real {
            use bilstm_core::geometry as g;
            let tiles = |rows: usize, cols: usize| (rows / 16) * (cols / 8);
            let large = tiles(g::PROJ_TF32X3_WARP_ROWS, g::PROJ_TF32X3_WARP_COLS);
            let small = tiles(
                g::PROJ_TF32X3_SMALL_WARP_ROWS,
                g::PROJ_TF32X3_SMALL_WARP_COLS,
            );
            // The large tile's k-loop runs two k-steps per iteration from 9.0 on.
            let large_unroll = if arch >= (9, 0) { 2 } else { 1 };
            assert_eq!(
                ptx.matches(mma).count(),
                3 * (large * large_unroll + small),
                "{arch:?}: mma count"
            );
            assert_eq!(ptx.matches(".entry bilstm_projection_tf32x3").count(), 3);
            assert!(ptx.contains("cp.async.cg.shared.global"), "{arch:?}");
            assert!(!ptx.contains("cvt.rna"), "{arch:?}: ties-away rounding");
        } else {
            assert!(!ptx.contains(mma), "{arch:?}");
        }
    }
}
