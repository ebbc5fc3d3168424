//! Launch of `bilstm_projection_tf32` (kernels/cuda/projection_tf32.cu): the input projection
//! of both directions of one layer on TF32 tensor cores, for `MathMode::Tf32`.
//!
//! The arguments are the FP32 projection's [`ProjectionArgs`], except that `weights` are each
//! direction's packed gate-major TF32 weights (`PackedOffsets::input_tf32`, `[512,
//! padded_in(in_width)]`) instead of the K-major ones. [`check`] turns them into the kernel's
//! parameters and launch configuration, refusing anything the launch contract forbids; it needs
//! no GPU, so its refusals are unit-tested here. The kernel's 72 KiB of dynamic shared memory
//! exceed the 48 KiB a function may use by default: `Kernels::load` raises the function's limit
//! (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`, from `device::launch_shape`) once.

use bilstm_core::geometry::{GATE_ROWS, PROJ_TF32_TILE_COLS, PROJ_TF32_TILE_ROWS};
use bilstm_core::layout::padded_in;
use bilstm_kernels::params::ProjectionTf32Params;
use cudarc::driver::{CudaFunction, CudaStream, DeviceRepr, LaunchConfig};

use super::projection::{IoAlignment, ProjectionArgs, check_io, require_tensor_cores};
use super::{KernelArg, LaunchMode, launch_kernel, require, require_multiple, to_u32};
use crate::error::CudaError;

/// The kernel's entry point.
pub(crate) const KERNEL: &str = "bilstm_projection_tf32";

// SAFETY: `ProjectionTf32Params` is `#[repr(C)]`, `Copy`, holds only integers (device addresses
// as u64), and its layout equals `bl_projection_tf32_params` in kernels/cuda/projection_tf32.cu
// (size asserted on both sides: 56 bytes; offsets pinned by bilstm_kernels' params tests).
// `KernelArg` is `repr(transparent)`, so it has the same layout.
unsafe impl DeviceRepr for KernelArg<ProjectionTf32Params> {}

/// Checks `args` against the launch contract on a device of `compute_capability` and returns
/// the kernel's parameters and launch configuration.
///
/// # Errors
/// [`CudaError::Unsupported`] below compute capability 8.0; [`CudaError::Contract`] when a
/// buffer is shorter than the kernel touches or misaligned, a size is zero or overflows, or the
/// grid is too large.
pub(crate) fn check(
    compute_capability: (u32, u32),
    args: &ProjectionArgs,
) -> Result<(KernelArg<ProjectionTf32Params>, LaunchConfig), CudaError> {
    let kernel = KERNEL;
    require_tensor_cores("the TF32 projection tile", compute_capability)?;
    // Weights are read as 16-byte cp.async chunks, the output stored as float2.
    let align = IoAlignment {
        weights_bytes: 16,
        stride_floats: 2,
        out_bytes: 8,
        weight_parts: 1,
        k_pad: bilstm_core::geometry::K_PAD,
    };
    let (rows_u32, in_width_u32) = check_io(kernel, args, align)?;
    let rows = args.rows;
    let in_width = args.in_width;
    let stride = padded_in(in_width);
    let stride_u32 = to_u32(kernel, "weight row stride fits u32", stride)?;
    require_multiple(kernel, "weight row stride multiple of 4", stride, 4)?;

    let row_tiles = rows.div_ceil(PROJ_TF32_TILE_ROWS);
    require(kernel, "grid.x", row_tiles, i32::MAX as usize)?;
    let params = KernelArg(ProjectionTf32Params {
        x: args.x.addr,
        weights: [args.weights[0].addr, args.weights[1].addr],
        out: args.out.addr,
        out_direction_stride: args.direction_stride as u64,
        rows: rows_u32,
        in_width: in_width_u32,
        weights_row_stride: stride_u32,
        reserved: 0,
    });
    let cfg = LaunchConfig {
        grid_dim: (
            row_tiles as u32,
            (GATE_ROWS / PROJ_TF32_TILE_COLS) as u32,
            2,
        ),
        block_dim: (bilstm_kernels::PROJECTION_TF32.block_threads, 1, 1),
        shared_mem_bytes: bilstm_kernels::PROJECTION_TF32.dynamic_shared_bytes,
    };
    Ok((params, cfg))
}

/// Launches the TF32 projection of both directions of one layer on `stream`.
///
/// `func` must be `bilstm_projection_tf32`, loaded for this device with its dynamic shared
/// limit raised to `PROJ_TF32_SHARED_BYTES` (as `Kernels::load` does); `compute_capability` is
/// the device's.
///
/// # Errors
/// As [`check`]; [`CudaError::Launch`] when the driver refuses the launch.
pub(crate) fn launch(
    func: &CudaFunction,
    stream: &CudaStream,
    compute_capability: (u32, u32),
    args: &ProjectionArgs,
) -> Result<(), CudaError> {
    let (params, cfg) = check(compute_capability, args)?;
    // SAFETY: `func` is bilstm_projection_tf32 from projection_tf32.cu (the backend loads it by
    // that name; its only parameter is bl_projection_tf32_params, mirrored by
    // `KernelArg<ProjectionTf32Params>`). `check` established the launch contract: compute
    // capability >= 8.0 (so the entry is the real kernel, not the trap); x holds rows * in_width
    // floats and is 4-byte aligned; each direction's weights hold 512 * padded_in floats from a
    // 16-byte aligned base, with padded_in a multiple of 4 and >= in_width; the output holds
    // direction_stride + rows * 512 floats from an 8-byte aligned base, direction_stride >= rows
    // * 512 and even; rows and in_width are positive and fit u32; the grid is (ceil(rows / 128),
    // 512 / 256, 2) with 256-thread blocks and exactly PROJ_TF32_SHARED_BYTES of dynamic shared
    // memory (which Kernels::load allowed the function; were it not, the driver
    // refuses the launch, it does not run it). The output (the backend's projection buffer) is
    // distinct from the input (the stack input or the other layer buffer) and the weights, and
    // stream order finishes the previous readers of the output (the last layer's recurrences)
    // before this kernel runs.
    unsafe { launch_kernel(func, stream, KERNEL, &params, cfg, LaunchMode::Ordinary) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::Span;

    fn args(rows: usize, in_width: usize) -> ProjectionArgs {
        let stride = padded_in(in_width) * GATE_ROWS;
        ProjectionArgs {
            x: Span {
                addr: 1 << 20,
                len: rows * in_width,
            },
            weights: [
                Span {
                    addr: 1 << 30,
                    len: stride,
                },
                Span {
                    addr: (1 << 30) + 4096 * 1024,
                    len: stride,
                },
            ],
            out: Span {
                addr: 1 << 32,
                len: 2 * rows * GATE_ROWS,
            },
            direction_stride: rows * GATE_ROWS,
            rows,
            in_width,
        }
    }

    #[test]
    fn a_valid_launch_gets_the_contract_grid() {
        let (p, cfg) = check((9, 0), &args(589, 60)).unwrap();
        assert_eq!(cfg.grid_dim, (5, 2, 2));
        assert_eq!(cfg.block_dim, (256, 1, 1));
        assert_eq!(
            cfg.shared_mem_bytes as usize,
            bilstm_core::geometry::PROJ_TF32_SHARED_BYTES
        );
        assert_eq!(p.0.weights_row_stride, 64);
        assert_eq!((p.0.rows, p.0.in_width), (589, 60));
        assert_eq!(p.0.out_direction_stride, 589 * 512);
        let (p, cfg) = check((8, 0), &args(128 * 3 + 1, 256)).unwrap();
        assert_eq!(cfg.grid_dim.0, 4);
        assert_eq!(p.0.weights_row_stride, 256);
        let (p, _) = check((8, 6), &args(3, 61)).unwrap();
        assert_eq!(p.0.weights_row_stride, 64);
    }

    #[test]
    fn older_devices_are_refused() {
        for cc in [(7, 0), (7, 5)] {
            assert!(matches!(
                check(cc, &args(589, 60)),
                Err(CudaError::Unsupported { .. })
            ));
        }
    }

    #[test]
    fn contract_violations_are_refused() {
        let refused = |a: ProjectionArgs, what: &str| match check((9, 0), &a) {
            Err(CudaError::Contract { what: w, .. }) => assert_eq!(w, what),
            other => panic!("{what}: {other:?}"),
        };
        let mut a = args(10, 60);
        a.rows = 0;
        refused(a, "rows");
        let mut a = args(10, 60);
        a.in_width = 0;
        refused(a, "input width");
        let mut a = args(10, 60);
        a.x.len -= 1;
        refused(a, "input values");
        let mut a = args(10, 60);
        a.x.addr += 2;
        refused(a, "input alignment");
        let mut a = args(10, 60);
        a.weights[1].len -= 1;
        refused(a, "weight values");
        let mut a = args(10, 60);
        a.weights[0].addr += 4;
        refused(a, "weights alignment");
        let mut a = args(10, 60);
        a.direction_stride -= 2;
        refused(a, "direction stride");
        let mut a = args(10, 60);
        a.direction_stride += 1;
        a.out.len += 1;
        refused(a, "direction stride multiple");
        let mut a = args(10, 60);
        a.out.len -= 1;
        refused(a, "output values");
        let mut a = args(10, 60);
        a.out.addr += 4;
        refused(a, "output alignment");
        let mut a = args(10, 60);
        a.rows = usize::MAX;
        refused(a, "rows fit u32");
    }

    /// GPU: the kernel alone, against exact and f64 references, the FP32 large tile and itself,
    /// plus timings (run on the GPU machine: `bilstm_cuda_unit --include-ignored tf32`).
    mod gpu {
        use std::sync::Arc;

        use bilstm_core::layout::round_to_tf32;
        use bilstm_core::plan::ProjectionTile;
        use bilstm_core::rng::SplitMix64;
        use cudarc::driver::{CudaFunction, CudaSlice, CudaStream};
        use cudarc::nvrtc::Ptx;

        use super::super::{ProjectionArgs, launch};
        use crate::buffers::span;
        use crate::device::Device;
        use crate::launch::projection;
        use bilstm_core::geometry::GATE_ROWS;
        use bilstm_core::layout::padded_in;

        struct Gpu {
            device: Device,
            tf32: CudaFunction,
            large: CudaFunction,
            small: CudaFunction,
        }

        fn gpu() -> Gpu {
            let device = Device::open(0).expect("a CUDA GPU (these tests never skip)");
            let cc = device.info.facts.compute_capability;
            assert!(
                cc >= (8, 0),
                "TF32 needs compute capability 8.0, got {cc:?}"
            );
            let load = |k: &bilstm_kernels::Kernel| {
                let ptx = crate::compile::compile(k, cc).expect("compile");
                let module = device
                    .ctx
                    .load_module(Ptx::from_src(&*ptx.ptx))
                    .expect("load");
                module.load_function(k.entry).expect("entry")
            };
            let tf32 = load(&bilstm_kernels::PROJECTION_TF32);
            tf32.set_attribute(
                cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bilstm_core::geometry::PROJ_TF32_SHARED_BYTES as i32,
            )
            .expect("dynamic shared");
            let large = load(&bilstm_kernels::PROJECTION_LARGE);
            let small = load(&bilstm_kernels::PROJECTION_SMALL);
            Gpu {
                device,
                tf32,
                large,
                small,
            }
        }

        /// One projection problem on the device: x, both weight layouts, outputs.
        struct Problem {
            rows: usize,
            in_width: usize,
            x_host: Vec<f32>,
            /// Per direction, source layout `[512, in_width]` (unrounded).
            w_host: [Vec<f32>; 2],
            x: CudaSlice<f32>,
            x_offset: usize,
            w_tf32: [CudaSlice<f32>; 2],
            w_kmajor: [CudaSlice<f32>; 2],
        }

        fn upload(stream: &Arc<CudaStream>, v: &[f32]) -> CudaSlice<f32> {
            stream.clone_htod(v).expect("upload")
        }

        fn problem(
            stream: &Arc<CudaStream>,
            rows: usize,
            in_width: usize,
            x_offset: usize,
            x_host: Vec<f32>,
            w_host: [Vec<f32>; 2],
        ) -> Problem {
            let padded = padded_in(in_width);
            let mut x_dev = vec![0.0f32; x_offset];
            x_dev.extend_from_slice(&x_host);
            let mut w_tf32 = Vec::new();
            let mut w_kmajor = Vec::new();
            for w in &w_host {
                // Gate-major TF32 with NaN padding: the kernel must never read it.
                let mut g = vec![f32::NAN; GATE_ROWS * padded];
                let mut k = vec![0.0f32; padded * GATE_ROWS];
                for col in 0..GATE_ROWS {
                    for kk in 0..in_width {
                        let v = w[col * in_width + kk];
                        g[col * padded + kk] = round_to_tf32(v);
                        k[kk * GATE_ROWS + col] = v;
                    }
                }
                w_tf32.push(upload(stream, &g));
                w_kmajor.push(upload(stream, &k));
            }
            let [t0, t1]: [CudaSlice<f32>; 2] = w_tf32.try_into().expect("two");
            let [k0, k1]: [CudaSlice<f32>; 2] = w_kmajor.try_into().expect("two");
            Problem {
                rows,
                in_width,
                x: upload(stream, &x_dev),
                x_offset,
                x_host,
                w_host,
                w_tf32: [t0, t1],
                w_kmajor: [k0, k1],
            }
        }

        fn random_problem(
            stream: &Arc<CudaStream>,
            rows: usize,
            in_width: usize,
            x_offset: usize,
            seed: u64,
        ) -> Problem {
            let mut rng = SplitMix64::new(seed);
            let mut x = vec![0.0f32; rows * in_width];
            rng.fill_uniform_f32(&mut x, -2.0, 2.0);
            let mut w = [
                vec![0.0f32; GATE_ROWS * in_width],
                vec![0.0f32; GATE_ROWS * in_width],
            ];
            for d in &mut w {
                rng.fill_uniform_f32(d, -0.3, 0.3);
            }
            problem(stream, rows, in_width, x_offset, x, w)
        }

        /// Runs the TF32 kernel into a fresh buffer whose direction stride is `rows * 512 + 6`
        /// (even, not a multiple of 4), pre-filled with a NaN pattern; returns it whole.
        fn run_tf32(g: &Gpu, p: &Problem) -> (Vec<f32>, usize) {
            let stream = &g.device.main;
            let stride = p.rows * GATE_ROWS + 6;
            let out = upload(stream, &vec![f32::from_bits(0x7fc0_dead); 2 * stride + 10]);
            let x = span(&p.x, stream).offset(p.x_offset, 4).expect("x offset");
            let args = ProjectionArgs {
                x,
                weights: [span(&p.w_tf32[0], stream), span(&p.w_tf32[1], stream)],
                out: span(&out, stream),
                direction_stride: stride,
                rows: p.rows,
                in_width: p.in_width,
            };
            launch(
                &g.tf32,
                stream,
                g.device.info.facts.compute_capability,
                &args,
            )
            .expect("tf32 launch");
            (stream.clone_dtoh(&out).expect("download"), stride)
        }

        fn run_fp32(g: &Gpu, p: &Problem, tile: ProjectionTile) -> Vec<f32> {
            let stream = &g.device.main;
            let x_host_aligned = upload(stream, &p.x_host);
            let stride = p.rows * GATE_ROWS;
            let out = upload(stream, &vec![0.0f32; 2 * stride]);
            let args = ProjectionArgs {
                x: span(&x_host_aligned, stream),
                weights: [span(&p.w_kmajor[0], stream), span(&p.w_kmajor[1], stream)],
                out: span(&out, stream),
                direction_stride: stride,
                rows: p.rows,
                in_width: p.in_width,
            };
            let func = if tile == ProjectionTile::Large128 {
                &g.large
            } else {
                &g.small
            };
            projection::launch(func, stream, tile, &args).expect("fp32 launch");
            stream.clone_dtoh(&out).expect("download")
        }

        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn tf32_projection_matches_exact_and_f64_references() {
            let g = gpu();
            let stream = g.device.main.clone();
            eprintln!(
                "{} ({:?})",
                g.device.info.name, g.device.info.facts.compute_capability
            );
            // (rows, in_width, x offset in floats): layer 0 and later layers of pyannote, row
            // tails, a single row, odd widths and a misaligned x (the 4-byte copy path).
            let cases = [
                (589, 60, 0),
                (9 * 589, 256, 0),
                (1, 60, 0),
                (77, 61, 0),
                (300, 64, 1),
                (50, 1, 0),
                (130, 1024, 0),
                (200, 17, 3),
            ];
            for (i, &(rows, in_width, x_offset)) in cases.iter().enumerate() {
                let p = random_problem(&stream, rows, in_width, x_offset, 100 + i as u64);
                let (got, stride) = run_tf32(&g, &p);
                let (again, _) = run_tf32(&g, &p);
                assert!(
                    got.iter()
                        .zip(&again)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "case {i}: two runs differ"
                );
                let fp32 = run_fp32(&g, &p, ProjectionTile::Large128);
                let (mut worst_exact, mut num, mut den, mut num32) = (0.0f64, 0.0, 0.0, 0.0);
                for d in 0..2 {
                    let w = &p.w_host[d];
                    for row in 0..rows {
                        for col in 0..GATE_ROWS {
                            let (mut exact, mut abs, mut full) = (0.0f64, 0.0f64, 0.0f64);
                            for k in 0..in_width {
                                let xv = p.x_host[row * in_width + k];
                                let wv = w[col * in_width + k];
                                let t = f64::from(round_to_tf32(xv)) * f64::from(round_to_tf32(wv));
                                exact += t;
                                abs += t.abs();
                                full += f64::from(xv) * f64::from(wv);
                            }
                            let v = f64::from(got[d * stride + row * GATE_ROWS + col]);
                            let v32 = f64::from(fp32[d * rows * GATE_ROWS + row * GATE_ROWS + col]);
                            worst_exact = worst_exact.max((v - exact).abs() / abs.max(1e-30));
                            num += (v - full) * (v - full);
                            num32 += (v - v32) * (v - v32);
                            den += full * full;
                        }
                    }
                    // Nothing past the rows of either direction is written.
                    for (j, v) in got[d * stride + rows * GATE_ROWS..(d + 1) * stride]
                        .iter()
                        .enumerate()
                    {
                        assert_eq!(v.to_bits(), 0x7fc0_dead, "case {i}: gap word {j} written");
                    }
                }
                assert!(
                    got[2 * stride..].iter().all(|v| v.to_bits() == 0x7fc0_dead),
                    "case {i}: tail written"
                );
                let rel = (num / den).sqrt();
                let rel32 = (num32 / den).sqrt();
                eprintln!(
                    "rows {rows:>5}, width {in_width:>4}, x offset {x_offset}: vs exact TF32 products \
                     max {worst_exact:.2e} of sum|terms|; rel L2 vs f64 {rel:.3e}; vs FP32 large tile {rel32:.3e}"
                );
                // FP32 accumulation of exact TF32 products: a few units of 2^-24 per step.
                assert!(
                    worst_exact < 2e-6 * (in_width as f64 / 8.0 + 2.0),
                    "case {i}"
                );
                assert!(rel < 2e-3 && rel32 < 2e-3, "case {i}");
            }
        }

        /// One-hot weights turn the projection into a gather, `out[row, col] = tf32(x[row, col
        /// % in_width])` exactly: this checks the in-kernel rounding (nearest, ties to even, as
        /// `round_to_tf32`) bit for bit, the fragment-to-column mapping, and that NaN and Inf
        /// rows stay non-finite without touching other rows.
        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn tf32_activation_rounding_is_nearest_even_bit_for_bit() {
            let g = gpu();
            let stream = g.device.main.clone();
            for in_width in [64usize, 61] {
                let rows = 256;
                let mut rng = SplitMix64::new(7);
                let mut x = vec![0.0f32; rows * in_width];
                for (i, v) in x.iter_mut().enumerate() {
                    let sign = (rng.next_u64() as u32) & 0x8000_0000;
                    let exponent = 100 + (rng.next_u64() % 50) as u32;
                    let mantissa = match i % 6 {
                        // Exact ties, kept LSB even and odd.
                        0 => ((rng.next_u64() as u32) & 0x007f_c000) | 0x1000,
                        1 => ((rng.next_u64() as u32) & 0x007f_c000) | 0x3000,
                        // Just off a tie.
                        2 => ((rng.next_u64() as u32) & 0x007f_e000) | 0x0fff,
                        3 => ((rng.next_u64() as u32) & 0x007f_e000) | 0x1001,
                        // Carry into the exponent.
                        4 => 0x007f_f000,
                        _ => (rng.next_u64() as u32) & 0x007f_ffff,
                    };
                    *v = f32::from_bits(sign | (exponent << 23) | mantissa);
                }
                x[(rows - 2) * in_width] = f32::NAN;
                x[(rows - 1) * in_width] = f32::INFINITY;
                let one_hot = || {
                    let mut w = vec![0.0f32; GATE_ROWS * in_width];
                    for col in 0..GATE_ROWS {
                        w[col * in_width + col % in_width] = 1.0;
                    }
                    w
                };
                let p = problem(&stream, rows, in_width, 0, x, [one_hot(), one_hot()]);
                let (got, stride) = run_tf32(&g, &p);
                let mut ties = 0;
                for d in 0..2 {
                    for row in 0..rows {
                        for col in 0..GATE_ROWS {
                            let v = got[d * stride + row * GATE_ROWS + col];
                            if row >= rows - 2 {
                                assert!(!v.is_finite(), "row {row} col {col}: {v}");
                                continue;
                            }
                            let k = col % in_width;
                            let xv = p.x_host[row * in_width + k];
                            let want = round_to_tf32(xv);
                            assert_eq!(
                                v.to_bits(),
                                want.to_bits(),
                                "width {in_width}, direction {d}, row {row}, col {col}: x {:#010x} -> {:#010x}, want {:#010x}",
                                xv.to_bits(),
                                v.to_bits(),
                                want.to_bits()
                            );
                            ties += usize::from(xv.to_bits() & 0x1fff == 0x1000);
                        }
                    }
                }
                eprintln!("width {in_width}: every output bit-exact ({ties} exact ties)");
            }
        }

        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn tf32_projection_timing() {
            let g = gpu();
            let stream = g.device.main.clone();
            let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
            for (batch, in_width) in [(32usize, 60usize), (32, 256), (256, 60), (256, 256)] {
                let rows = batch * 589;
                let p = random_problem(&stream, rows, in_width, 0, 5);
                let stride = rows * GATE_ROWS;
                let out = upload(&stream, &vec![0.0f32; 2 * stride]);
                let x = span(&p.x, &stream);
                let o = span(&out, &stream);
                let cc = g.device.info.facts.compute_capability;
                let mut line = format!("projection timing batch {batch:>3} width {in_width:>3}:");
                for name in ["tf32", "fp32 128x128", "fp32 64x64"] {
                    let run = || match name {
                        "tf32" => launch(
                            &g.tf32,
                            &stream,
                            cc,
                            &ProjectionArgs {
                                x,
                                weights: [span(&p.w_tf32[0], &stream), span(&p.w_tf32[1], &stream)],
                                out: o,
                                direction_stride: stride,
                                rows,
                                in_width,
                            },
                        ),
                        _ => {
                            let (f, tile) = if name == "fp32 64x64" {
                                (&g.small, ProjectionTile::Small64)
                            } else {
                                (&g.large, ProjectionTile::Large128)
                            };
                            projection::launch(
                                f,
                                &stream,
                                tile,
                                &ProjectionArgs {
                                    x,
                                    weights: [
                                        span(&p.w_kmajor[0], &stream),
                                        span(&p.w_kmajor[1], &stream),
                                    ],
                                    out: o,
                                    direction_stride: stride,
                                    rows,
                                    in_width,
                                },
                            )
                        }
                    };
                    for _ in 0..3 {
                        run().expect("warm-up");
                    }
                    let start = g.device.ctx.new_event(flags).expect("event");
                    let end = g.device.ctx.new_event(flags).expect("event");
                    let iters = 20;
                    start.record(&stream).expect("record");
                    for _ in 0..iters {
                        run().expect("launch");
                    }
                    end.record(&stream).expect("record");
                    let ms = f64::from(start.elapsed_ms(&end).expect("elapsed")) / iters as f64;
                    let tflops =
                        2.0 * 2.0 * (rows * GATE_ROWS * in_width) as f64 / (ms * 1e-3) / 1e12;
                    line.push_str(&format!("  {name} {ms:.3} ms ({tflops:.1} TFLOP/s)"));
                }
                eprintln!("{line}");
            }
        }
    }
}
