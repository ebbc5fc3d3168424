//! Today's gate math (`kernels/cuda/numerics.cuh`) against the previous one
//! (`tests/numerics_reference.cuh`, verbatim but renamed) for EVERY one of the 2^32 float bit
//! patterns: `bl_expf`, `bl_sigmoid`, `bl_tanhf` and `bl_lstm_cell` (h and c, three random
//! states per input) must give the same bits (two NaNs count as equal), the old sigmoid's
//! subnormal results flushed to +0 (session 11's ftz estimate; the control slot compares the
//! unflushed old sigmoid and must differ exactly there). Issue 10 step 1
//! rewrote the exp rounding (FMUL + FADD of 1.5 * 2^23 instead of FRND + F2I), gave tanh the
//! flush-to-zero reciprocal estimate and made it branch-free; this is the proof that no bit
//! moved on the GPU that runs it.
//!
//! - `sweep_kernel_compiles_for_sm_90` and `recurrence_kernels_round_without_cvt` need NVRTC
//!   only (CPU; skipped with a note when NVRTC is missing, failed when `CI` or
//!   `BILSTM_REQUIRE_NVRTC` is set).
//! - `old_and_new_gate_math_agree_on_every_float` needs a GPU (`--include-ignored`); about a
//!   second on an H200.

// Test helpers: a failed expectation is a failed test.
#![allow(clippy::panic, clippy::expect_used, clippy::unwrap_used)]

use bilstm_cuda::{nvrtc_options, nvrtc_version};
use bilstm_kernels::expand_source;
use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{CompileOptions, compile_ptx_with_opts};

const REFERENCE: &str = include_str!("numerics_reference.cuh");
const GATES_SWEEP: &str = include_str!("tf32_gates_sweep.cu");
const GATES_ENTRY: &str = "bl_tf32_gates_sweep";
/// Slots of the TF32 gate sweep (tf32_gates_sweep.cu).
const GATE_SLOTS: [&str; 4] = ["bl_sigmoid_fast", "bl_tanh_fast", "bl_sigmoid", "bl_tanhf"];
/// The largest absolute error TF32 mode's activations may have against the true functions
/// (numerics.cuh section 7): far below TF32's own rounding (2^-11 relative, about 4.9e-4).
const FAST_GATE_MAX_ERROR: f32 = 1e-6;
const SWEEP: &str = include_str!("numerics_sweep.cu");
const ENTRY: &str = "bl_numerics_sweep";
/// Slots of the sweep's counters (numerics_sweep.cu).
const SLOTS: [&str; 7] = [
    "bl_expf",
    "bl_sigmoid",
    "bl_tanhf",
    "bl_lstm_cell h",
    "bl_lstm_cell c",
    "sigmoid, ftz estimate rescaled above 2^126 (informational)",
    "sigmoid, bare ftz estimate (control: must differ)",
];
/// Slots that must show no mismatch.
const ASSERTED: usize = 5;
const CONTROL: usize = 6;
/// Input bit patterns recorded per slot (BLT_FIRST).
const FIRST: usize = 8;

fn flag_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// `true` when NVRTC is there; `false` (after a note) when it is missing and not required.
fn nvrtc_or_skip() -> bool {
    match nvrtc_version() {
        Ok(_) => true,
        Err(e) if flag_set("CI") || flag_set("BILSTM_REQUIRE_NVRTC") => {
            panic!("NVRTC is required here but unavailable: {e}")
        }
        Err(e) => {
            eprintln!("skipping: {e}");
            false
        }
    }
}

/// The sweep's full source: common.cuh, numerics.cuh, the reference, the kernel.
fn sweep_source() -> String {
    let headers = expand_source("#include \"common.cuh\"\n#include \"numerics.cuh\"\n")
        .expect("the production headers expand");
    format!("{headers}\n{REFERENCE}\n{SWEEP}")
}

/// PTX of `source` for `arch` with the production kernels' NVRTC options.
fn compile(source: &str, name: &str, arch: (u32, u32)) -> String {
    let opts = CompileOptions {
        options: nvrtc_options(arch),
        name: Some(name.to_string()),
        ..Default::default()
    };
    match compile_ptx_with_opts(source, opts) {
        Ok(ptx) => ptx.to_src(),
        Err(e) => panic!("{name} for {arch:?}: {e:?}"),
    }
}

/// The TF32 gate sweep's full source: common.cuh, numerics.cuh, the kernel.
fn gates_sweep_source() -> String {
    let headers = expand_source("#include \"common.cuh\"\n#include \"numerics.cuh\"\n")
        .expect("the production headers expand");
    format!("{headers}\n{GATES_SWEEP}")
}

#[test]
fn gates_sweep_kernel_compiles_for_sm_90() {
    if !nvrtc_or_skip() {
        return;
    }
    let ptx = compile(&gates_sweep_source(), "tf32_gates_sweep.cu", (9, 0));
    assert!(
        ptx.contains(&format!(".entry {GATES_ENTRY}(")),
        "entry missing"
    );
    // TF32 mode's activations are the bare estimates: ex2 and rcp without a Newton step.
    assert!(ptx.contains("ex2.approx.ftz.f32") && ptx.contains("rcp.approx.ftz.f32"));
}

#[test]
fn sweep_kernel_compiles_for_sm_90() {
    if !nvrtc_or_skip() {
        return;
    }
    let ptx = compile(&sweep_source(), "numerics_sweep.cu", (9, 0));
    assert!(ptx.contains(&format!(".entry {ENTRY}(")), "entry missing");
    // Both generations are really in there: the old rounding and the new estimate.
    assert!(ptx.contains("cvt.rni"), "the reference's rintf is gone");
    assert!(
        ptx.contains("rcp.approx.ftz.f32"),
        "tanh's ftz estimate is missing"
    );
    assert!(
        ptx.contains("rcp.approx.f32"),
        "the reference's non-ftz estimate is missing"
    );
    // With ptxas at hand (scripts/nvrtc-env sets BILSTM_PTXAS), it must also assemble.
    let Some(ptxas) = std::env::var_os("BILSTM_PTXAS").filter(|p| !p.is_empty()) else {
        eprintln!("no BILSTM_PTXAS: not assembled");
        return;
    };
    let dir = std::env::temp_dir().join(format!("bilstm-sweep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("numerics_sweep.ptx");
    std::fs::write(&file, ptx.as_bytes()).unwrap();
    let out = std::process::Command::new(&ptxas)
        .args(["-arch=sm_90a", "-v"]) // 9.0 modules are compute_90a (nvrtc_options)
        .arg(&file)
        .arg("-o")
        .arg(dir.join("numerics_sweep.cubin"))
        .output()
        .expect("running ptxas");
    let report = String::from_utf8_lossy(&out.stderr).into_owned();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "ptxas failed:\n{report}");
    eprintln!("{report}");
}

/// The production recurrence kernels round for exp without FRND or float-to-int conversion
/// (issue 10 step 1): no `cvt.rni` / `cvt.rzi` in their PTX. (The `cvt` of the integer
/// loop counters would be `cvt.u64`/`cvt.s64` etc., not these.)
#[test]
fn recurrence_kernels_round_without_cvt() {
    if !nvrtc_or_skip() {
        return;
    }
    for id in bilstm_kernels::ALL {
        let k = id.kernel();
        if !k.source.contains("numerics.cuh") {
            continue;
        }
        let ptx = bilstm_cuda::compile_with_cache(k, (9, 0), None)
            .unwrap_or_else(|e| panic!("{id}: {e}"))
            .ptx;
        let rni = ptx.matches("cvt.rni").count();
        let rzi = ptx.matches("cvt.rzi").count();
        let ftz = ptx.matches("rcp.approx.ftz.f32").count();
        eprintln!("{id}: cvt.rni {rni}, cvt.rzi {rzi}, rcp.approx.ftz.f32 {ftz}");
        assert_eq!((rni, rzi), (0, 0), "{id} still rounds with cvt");
        assert!(ftz > 0, "{id}: the gates do not use the ftz estimate");
        assert!(
            !ptx.contains("rcp.approx.f32"),
            "{id}: a non-ftz reciprocal estimate is left (sigmoid's is the ftz one)"
        );
    }
}

/// A sweep kernel compiled for GPU 0 and loaded, with the launch shape both sweeps use (8
/// blocks of 256 threads an SM, grid-stride over the 2^32 patterns).
struct Sweep {
    stream: std::sync::Arc<cudarc::driver::CudaStream>,
    function: cudarc::driver::CudaFunction,
    config: LaunchConfig,
    /// `sm_XY`, for the report.
    arch: String,
}

impl Sweep {
    fn load(source: &str, name: &str, entry: &str) -> Sweep {
        let ctx = CudaContext::new(0).unwrap_or_else(|e| panic!("GPU tests need a CUDA GPU: {e}"));
        let (major, minor) = ctx.compute_capability().expect("compute capability");
        let arch = (
            u32::try_from(major).expect("major"),
            u32::try_from(minor).expect("minor"),
        );
        let ptx = compile(source, name, arch);
        let module = ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
            .unwrap_or_else(|e| panic!("loading {name}: {e}"));
        let function = module
            .load_function(entry)
            .unwrap_or_else(|e| panic!("{name}: entry {entry}: {e}"));
        let sms = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .expect("SM count");
        Sweep {
            stream: ctx.default_stream(),
            function,
            config: LaunchConfig {
                grid_dim: (u32::try_from(sms).expect("SMs") * 8, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            },
            arch: format!("sm_{major}{minor}"),
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn old_and_new_gate_math_agree_on_every_float() {
    let sweep = Sweep::load(&sweep_source(), "numerics_sweep.cu", ENTRY);
    let (stream, f, cfg) = (&sweep.stream, &sweep.function, sweep.config);
    let mut counts = stream.alloc_zeros::<u64>(SLOTS.len()).expect("counts");
    let mut first = stream
        .alloc_zeros::<u32>(SLOTS.len() * FIRST)
        .expect("first mismatches");
    let mut taken = stream.alloc_zeros::<u32>(SLOTS.len()).expect("taken");
    let started = std::time::Instant::now();
    let mut launch = stream.launch_builder(f);
    launch.arg(&mut counts).arg(&mut first).arg(&mut taken);
    // SAFETY: bl_numerics_sweep(bl_u64* counts, bl_u32* first, bl_u32* taken) takes exactly
    // these three device pointers, in this order; it touches counts[0..7], first[0..7 * 8] and
    // taken[0..7] only (numerics_sweep.cu: slot < BLT_SLOTS = 7, index < BLT_FIRST = 8), the
    // sizes allocated above, and the buffers outlive the launch (read back below on the same
    // stream, which orders the reads after the kernel).
    unsafe { launch.launch(cfg) }.expect("launching the sweep");
    let counts = stream.clone_dtoh(&counts).expect("reading counts");
    let first = stream.clone_dtoh(&first).expect("reading first mismatches");
    eprintln!(
        "sweep of 2^32 floats on {}: {:.2} s",
        sweep.arch,
        started.elapsed().as_secs_f64()
    );
    for (slot, name) in SLOTS.iter().enumerate() {
        let shown = usize::try_from(counts[slot]).unwrap_or(FIRST).min(FIRST);
        let inputs: Vec<String> = first[slot * FIRST..slot * FIRST + shown]
            .iter()
            .map(|&b| format!("{b:#010x} ({:e})", f32::from_bits(b)))
            .collect();
        eprintln!(
            "mismatches {name}: {} {}",
            counts[slot],
            if inputs.is_empty() {
                String::new()
            } else {
                format!("e.g. {}", inputs.join(", "))
            }
        );
    }
    let control = f32::from_bits(first[CONTROL * FIRST]);
    assert!(
        counts[CONTROL] > 0 && control < -87.0,
        "the control found no difference (or one where none is expected: {control:e}): \
         the sweep does not see mismatches"
    );
    for (slot, name) in SLOTS.iter().enumerate().take(ASSERTED) {
        assert_eq!(
            counts[slot], 0,
            "{name}: bits changed (see the inputs above)"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tf32_gate_math_stays_within_its_error_on_every_float() {
    let sweep = Sweep::load(&gates_sweep_source(), "tf32_gates_sweep.cu", GATES_ENTRY);
    let (stream, f, cfg) = (&sweep.stream, &sweep.function, sweep.config);
    let n = GATE_SLOTS.len();
    let mut max_error = stream.alloc_zeros::<u32>(n).expect("max errors");
    let mut bad = stream.alloc_zeros::<u64>(n).expect("bad counts");
    let mut first_bad = stream.alloc_zeros::<u32>(n).expect("first bad inputs");
    let started = std::time::Instant::now();
    let mut launch = stream.launch_builder(f);
    launch.arg(&mut max_error).arg(&mut bad).arg(&mut first_bad);
    // SAFETY: bl_tf32_gates_sweep(bl_u32* max_error, bl_u64* bad_counts, bl_u32* first_bad)
    // takes exactly these three device pointers, in this order, and touches indices 0..4 of each
    // (tf32_gates_sweep.cu: slot < BLG_SLOTS = 4), the sizes allocated above; the buffers
    // outlive the launch (read back below on the same stream, ordered after the kernel).
    unsafe { launch.launch(cfg) }.expect("launching the gate sweep");
    let max_error = stream.clone_dtoh(&max_error).expect("reading max errors");
    let bad = stream.clone_dtoh(&bad).expect("reading bad counts");
    let first_bad = stream
        .clone_dtoh(&first_bad)
        .expect("reading first bad inputs");
    eprintln!(
        "gate sweep of 2^32 floats on {}: {:.2} s",
        sweep.arch,
        started.elapsed().as_secs_f64()
    );
    for (slot, name) in GATE_SLOTS.iter().enumerate() {
        eprintln!(
            "{name}: max |error| {:e} against the true function (double), {} bad results{}",
            f32::from_bits(max_error[slot]),
            bad[slot],
            if bad[slot] > 0 {
                format!(", e.g. input {:#010x}", first_bad[slot])
            } else {
                String::new()
            }
        );
    }
    for (slot, name) in GATE_SLOTS.iter().enumerate() {
        assert_eq!(bad[slot], 0, "{name}: NaN handling or range broken");
    }
    for (slot, name) in GATE_SLOTS.iter().enumerate().take(2) {
        let e = f32::from_bits(max_error[slot]);
        assert!(
            e <= FAST_GATE_MAX_ERROR,
            "{name}: max |error| {e:e} over {FAST_GATE_MAX_ERROR:e}"
        );
    }
    // The sweep sees errors at all: FP32 mode's accurate functions are not exact either.
    assert!(
        max_error[2] > 0 && max_error[3] > 0,
        "no error measured at all"
    );
}
