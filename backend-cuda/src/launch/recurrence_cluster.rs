//! Launch of `bilstm_recurrence_cluster2` / `bilstm_recurrence_cluster4`
//! (kernels/cuda/recurrence_cluster.cu): both directions of one layer in one cluster launch
//! (`cuLaunchKernelEx` with `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`), and the driver's count of
//! clusters a device holds at once (`cuOccupancyMaxActiveClusters`).

use std::ffi::c_void;

use bilstm_kernels::params::{ERROR_WORDS, RecurrenceClusterParams};
use bilstm_kernels::{Kernel, LaunchKind};
use cudarc::driver::sys;
use cudarc::driver::{CudaFunction, CudaStream, DeviceRepr};

use super::{
    KernelArg, Span, StateSpans, check_direction_tensors, check_output, product, require, to_u32,
};
use crate::error::CudaError;

// SAFETY: `RecurrenceClusterParams` is `#[repr(C)]`, `Copy`, holds only integers (device
// addresses as u64), and its layout equals `bl_recurrence_cluster_params` in
// kernels/cuda/recurrence_cluster.cu (size asserted on both sides: 120 bytes; offsets pinned by
// bilstm_kernels' params tests). `KernelArg` is `repr(transparent)`, so it has the same layout.
unsafe impl DeviceRepr for KernelArg<RecurrenceClusterParams> {}

/// What one launch of a cluster recurrence reads and writes (index 0 forward, 1 reverse).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClusterArgs {
    /// Each direction's projection `[batch * frames, 512]`.
    pub proj: [Span; 2],
    /// Each direction's packed recurrent rows `[512, 128]`.
    pub recurrent: [Span; 2],
    /// Each direction's packed combined bias `[512]`.
    pub bias: [Span; 2],
    /// The layer output `[batch, frames, 256]`.
    pub out: Span,
    /// The error words, zeroed on this stream before the launch.
    pub error: Span,
    /// Windows.
    pub batch: usize,
    /// Frames per window.
    pub frames: usize,
    /// The layer (reported with a lost partner).
    pub layer: usize,
    /// The bound of every wait for a partner.
    pub spin_timeout_ns: u64,
    /// Clusters of this kernel the device holds at once (`cuOccupancyMaxActiveClusters`): at
    /// least 1, or the launch could never start.
    pub max_active_clusters: u32,
    /// Test hook: the CTA that never publishes (`None` in production).
    pub stall_cta: Option<u32>,
    /// Where this layer's final states go (`None`: nowhere).
    pub state: Option<StateSpans>,
    /// Progress words `[batch, 2]` (u32) the kernel reports finished steps in, or `None` (the
    /// contract's "Progress"; only for a layer whose output is device-mapped host memory).
    pub progress: Option<Span>,
    /// Store the outputs rounded to TF32 (the next layer's projection reads them as stored);
    /// kernels of at least [`QUAD_MIN_WINDOWS`] windows a cluster only.
    pub out_tf32: bool,
    /// TF32 mode's recurrence numerics (`numerics.cuh` sections 7 and 8: gate activations and
    /// the 8-chain dot; [`crate::pass`] sets it where the pass's projection is a TF32 tile),
    /// else FP32 mode's.
    pub tf32_numerics: bool,
}

/// The fewest windows a cluster of the kernels that can store TF32 outputs
/// (`bilstm_recurrence_cluster2w4`, `2w8`, `2w16`; the one- and two-window kernels trap on
/// `out_tf32`), and so of the plans whose TF32 passes run the resident projection
/// (`bilstm_projection_tf32_resident`, pass.rs). The register-quad kernels store TF32 outputs
/// at no measured cost, while in the one- and two-window kernels the writer warp's rounding sits
/// on the step's critical path. H200, 2026-12-02 session 14 (calls 3 and 4, whole forward):
/// with the rounding select in every kind, batch 1 was 1.345 ms against 1.310-1.320 (FP32,
/// out_tf32 = 0) and its TF32 recurrence 1.260 against 1.241; batch 256 (8-window quads) TF32
/// recurrence 4.779 against 4.776, projection 1.358 against 1.396.
pub(crate) const QUAD_MIN_WINDOWS: usize = 4;

/// The cluster size and windows per cluster of `kernel`, or [`CudaError::Internal`] if it is not
/// a cluster kernel.
fn cluster_shape(kernel: &Kernel) -> Result<(u32, u32), CudaError> {
    match kernel.launch {
        LaunchKind::Cluster { size, windows } if size >= 1 && windows >= 1 => Ok((size, windows)),
        _ => Err(CudaError::Internal {
            what: format!("{} is not a cluster kernel", kernel.entry),
        }),
    }
}

/// Checks `args` against the kernel's launch contract and builds its parameters and grid (in
/// CTAs).
///
/// # Errors
/// [`CudaError::Contract`] naming the first broken precondition.
pub(crate) fn check(
    kernel: &Kernel,
    args: &ClusterArgs,
) -> Result<(RecurrenceClusterParams, u32), CudaError> {
    let name = kernel.entry;
    let (size, windows) = cluster_shape(kernel)?;
    require(name, "batch", 1, args.batch)?;
    if args.out_tf32 && !kernel.id.is_fixed_point() {
        // Only the register-quad, 16-window and fixed-point kernels round their outputs; the
        // others trap.
        require(
            name,
            "windows a cluster for TF32 outputs",
            QUAD_MIN_WINDOWS,
            windows as usize,
        )?;
    }
    require(name, "frames", 1, args.frames)?;
    require(
        name,
        "clusters the device holds at once",
        1,
        args.max_active_clusters as usize,
    )?;
    let clusters = args.batch.div_ceil(windows as usize);
    let grid = product(name, "grid CTAs", &[clusters, 2, size as usize])?;
    let grid = u32::try_from(grid)
        .ok()
        .filter(|&g| g <= i32::MAX as u32)
        .ok_or(CudaError::Contract {
            kernel: name,
            what: "grid CTAs fit grid.x",
            needed: grid as u64,
            have: i32::MAX as u64,
        })?;
    let frames = to_u32(name, "frames fit u32", args.frames)?;
    let layer = to_u32(name, "layer fits u32", args.layer)?;
    let rows = product(name, "projection rows", &[args.batch, args.frames])?;
    for d in 0..2 {
        check_direction_tensors(name, rows, args.proj[d], args.recurrent[d], args.bias[d])?;
    }
    check_output(name, rows, args.out)?;
    // The writer warp stores whole 16-byte pieces of each row.
    super::require_aligned(name, "output alignment", args.out.addr, 16)?;
    let progress = match args.progress {
        None => 0,
        Some(words) => {
            require(name, "progress words", 2 * args.batch, words.len)?;
            super::require_aligned(name, "progress words alignment", words.addr, 4)?;
            words.addr
        }
    };
    require(name, "error words", ERROR_WORDS, args.error.len)?;
    super::require_aligned(name, "error words alignment", args.error.addr, 4)?;
    let stall_cta = match args.stall_cta {
        None => -1,
        Some(cta) => i32::try_from(cta).map_err(|_| CudaError::Contract {
            kernel: name,
            what: "stalled CTA fits i32",
            needed: u64::from(cta),
            have: i32::MAX as u64,
        })?,
    };
    let (state_h, state_c) = super::check_state(name, args.batch, args.state)?;
    let params = RecurrenceClusterParams {
        proj: [args.proj[0].addr, args.proj[1].addr],
        recurrent: [args.recurrent[0].addr, args.recurrent[1].addr],
        bias: [args.bias[0].addr, args.bias[1].addr],
        out: args.out.addr,
        error: args.error.addr,
        spin_timeout_ns: args.spin_timeout_ns,
        batch: to_u32(name, "batch fits u32", args.batch)?,
        frames,
        layer,
        stall_cta,
        state_h,
        state_c,
        progress,
        out_tf32: u32::from(args.out_tf32),
        tf32_numerics: u32::from(args.tf32_numerics),
    };
    Ok((params, grid))
}

/// The launch configuration of the cluster kernel `kernel`: `grid` CTAs of its block size in
/// clusters of `size`, its dynamic shared memory, on `stream`. `attr` must outlive every use of
/// the returned configuration (it points at it).
fn config(
    kernel: &Kernel,
    grid: u32,
    size: u32,
    stream: &CudaStream,
    attr: &mut sys::CUlaunchAttribute,
) -> sys::CUlaunchConfig {
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 {
        x: size,
        y: 1,
        z: 1,
    };
    sys::CUlaunchConfig {
        gridDimX: grid,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: kernel.block_threads,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: kernel.dynamic_shared_bytes,
        hStream: stream.cu_stream(),
        attrs: attr,
        numAttrs: 1,
    }
}

/// An empty launch attribute (every byte zero), filled by [`config`].
fn blank_attribute() -> sys::CUlaunchAttribute {
    sys::CUlaunchAttribute {
        id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_IGNORE,
        pad: [0; 4],
        value: sys::CUlaunchAttributeValue { pad: [0; 64] },
    }
}

/// Clusters of `kernel` (with its cluster size) the device of `stream` holds at once, by
/// `cuOccupancyMaxActiveClusters`; 0 when a cluster cannot run at all.
///
/// # Errors
/// [`CudaError::Driver`] when the driver refuses the query (for example a device without
/// cluster launch).
pub(crate) fn max_active_clusters(
    kernel: &Kernel,
    func: &CudaFunction,
    stream: &CudaStream,
) -> Result<u32, CudaError> {
    let (size, _) = cluster_shape(kernel)?;
    let mut attr = blank_attribute();
    // One full wave of clusters is enough for the driver to answer; the grid only needs to be a
    // multiple of the cluster size.
    let cfg = config(kernel, size, size, stream, &mut attr);
    let mut clusters: std::ffi::c_int = 0;
    stream
        .context()
        .bind_to_thread()
        .map_err(CudaError::driver("binding the context for a cluster query"))?;
    // SAFETY: `clusters` is a live, writable c_int; `cfg` is a fully initialised launch
    // configuration whose `attrs` points at `attr`, alive until this call returns; the function
    // handle and the stream come from live cudarc objects of the context bound above.
    unsafe { sys::cuOccupancyMaxActiveClusters(&mut clusters, func.cu_function(), &cfg) }
        .result()
        .map_err(CudaError::driver("asking the driver how many clusters fit"))?;
    Ok(u32::try_from(clusters).unwrap_or(0))
}

/// Launches both directions of one layer: `2 * ceil(batch / windows)` clusters of the kernel's
/// size and windows (an ordinary launch with a cluster dimension; clusters beyond the device's
/// capacity run in later waves).
///
/// # Errors
/// [`CudaError::Contract`] from [`check`]; [`CudaError::Launch`] when the driver refuses.
pub(crate) fn launch(
    kernel: &Kernel,
    func: &CudaFunction,
    stream: &CudaStream,
    args: &ClusterArgs,
) -> Result<(), CudaError> {
    let (params, grid) = check(kernel, args)?;
    let (size, _) = cluster_shape(kernel)?;
    let mut params = KernelArg(params);
    let mut attr = blank_attribute();
    let cfg = config(kernel, grid, size, stream, &mut attr);
    let mut arg_ptrs: [*mut c_void; 1] = [(&mut params as *mut KernelArg<_>).cast()];
    stream
        .context()
        .bind_to_thread()
        .map_err(|source| CudaError::Launch {
            kernel: kernel.entry,
            source,
        })?;
    // SAFETY: `func` is the entry `kernel.entry` of recurrence_cluster.cu (the backend looks it
    // up by the same KernelId); its only parameter is bl_recurrence_cluster_params, mirrored by
    // `KernelArg<RecurrenceClusterParams>`, and `arg_ptrs[0]` points at that struct, alive until
    // the call returns (the driver copies parameters at launch). `check` verified the contract:
    // batch and frames positive and within u32, the grid (2 * ceil(batch / windows) * size
    // CTAs) within grid.x and a multiple of the cluster size; for both directions proj holds batch * frames * 512
    // floats, recurrent 512 * 128 and bias 512, all 16-byte aligned; out holds batch * frames *
    // 256 floats; the error words exist and were zeroed on this stream by launch::clear (the
    // caller enqueues it first); at least one cluster fits the device (the driver's own
    // figure). The block is the handle's block_threads (CLUSTER_THREADS) with its dynamic shared
    // bytes (none) and the
    // cluster dimension is (size, 1, 1) through `attr`, alive for the call. The kernel is
    // compiled for the device's architecture, and plans pick it only from compute capability
    // 9.0 (older builds are a trap). Clusters never wait for each other, so any grid size is
    // safe; the waits inside a cluster are bounded by spin_timeout_ns. The output is distinct
    // from the inputs, and stream order finishes the projection before this kernel runs.
    let status = unsafe {
        sys::cuLaunchKernelEx(
            &cfg,
            func.cu_function(),
            arg_ptrs.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    status.result().map_err(|source| CudaError::Launch {
        kernel: kernel.entry,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bilstm_kernels::{
        RECURRENCE_CLUSTER2, RECURRENCE_CLUSTER2W2, RECURRENCE_CLUSTER2W4, RECURRENCE_CLUSTER2W8,
        RECURRENCE_CLUSTER2W16, RECURRENCE_CLUSTER4, RECURRENCE_RESIDENT,
    };

    fn args() -> ClusterArgs {
        let big = 1usize << 30;
        let span = |len| Span { addr: 1 << 21, len };
        ClusterArgs {
            proj: [span(big), span(big)],
            recurrent: [span(big), span(big)],
            bias: [span(big), span(big)],
            out: span(big),
            error: span(ERROR_WORDS),
            batch: 33,
            frames: 589,
            layer: 2,
            spin_timeout_ns: 1_000,
            max_active_clusters: 60,
            stall_cta: None,
            state: None,
            progress: None,
            out_tf32: false,
            tf32_numerics: false,
        }
    }

    #[test]
    fn a_valid_launch_builds_matching_params() {
        let (p, grid) = check(&RECURRENCE_CLUSTER4, &args()).unwrap();
        assert_eq!(grid, 33 * 2 * 4);
        assert_eq!((p.batch, p.frames, p.layer, p.stall_cta), (33, 589, 2, -1));
        assert_eq!((p.out_tf32, p.tf32_numerics), (0, 0));
        let (p, grid) = check(&RECURRENCE_CLUSTER2, &args()).unwrap();
        assert_eq!(grid, 33 * 2 * 2);
        assert_eq!(p.batch, 33);
        // Two windows per cluster: 17 pairs (the last one half empty).
        let (p, grid) = check(&RECURRENCE_CLUSTER2W2, &args()).unwrap();
        assert_eq!(grid, 17 * 2 * 2);
        assert_eq!(p.batch, 33);
        let mut a = args();
        a.stall_cta = Some(5);
        assert_eq!(check(&RECURRENCE_CLUSTER2, &a).unwrap().0.stall_cta, 5);
        assert_eq!(p.progress, 0);
        a.progress = Some(Span {
            addr: 1 << 22,
            len: 66,
        });
        assert_eq!(check(&RECURRENCE_CLUSTER2, &a).unwrap().0.progress, 1 << 22);
    }

    #[test]
    fn every_cluster_kernel_takes_tf32_numerics() {
        let mut a = args();
        a.tf32_numerics = true;
        for k in [
            &RECURRENCE_CLUSTER2,
            &RECURRENCE_CLUSTER4,
            &RECURRENCE_CLUSTER2W2,
            &RECURRENCE_CLUSTER2W4,
            &RECURRENCE_CLUSTER2W8,
            &RECURRENCE_CLUSTER2W16,
        ] {
            let (p, _) = check(k, &a).unwrap();
            assert_eq!((p.tf32_numerics, p.out_tf32), (1, 0), "{}", k.entry);
        }
    }

    #[test]
    fn only_the_register_quad_kernels_take_tf32_outputs() {
        let mut a = args();
        a.out_tf32 = true;
        for k in [
            &RECURRENCE_CLUSTER2W4,
            &RECURRENCE_CLUSTER2W8,
            &RECURRENCE_CLUSTER2W16,
        ] {
            assert_eq!(check(k, &a).unwrap().0.out_tf32, 1, "{}", k.entry);
        }
        for k in [
            &RECURRENCE_CLUSTER2,
            &RECURRENCE_CLUSTER4,
            &RECURRENCE_CLUSTER2W2,
        ] {
            match check(k, &a) {
                Err(CudaError::Contract { what, .. }) => {
                    assert_eq!(what, "windows a cluster for TF32 outputs", "{}", k.entry)
                }
                other => panic!("{}: {other:?}", k.entry),
            }
        }
    }

    #[test]
    fn broken_preconditions_are_refused() {
        let k = &RECURRENCE_CLUSTER4;
        assert!(matches!(
            check(&RECURRENCE_RESIDENT, &args()),
            Err(CudaError::Internal { .. })
        ));
        let mut a = args();
        a.max_active_clusters = 0;
        assert!(check(k, &a).is_err());
        let mut a = args();
        a.batch = 0;
        assert!(check(k, &a).is_err());
        let mut a = args();
        a.frames = 0;
        assert!(check(k, &a).is_err());
        let mut a = args();
        a.proj[1].len = 33 * 589 * 512 - 1;
        assert!(check(k, &a).is_err());
        let mut a = args();
        a.recurrent[0].addr += 4;
        assert!(check(k, &a).is_err());
        let mut a = args();
        a.out.len = 33 * 589 * 256 - 1;
        assert!(check(k, &a).is_err());
        let mut a = args();
        a.error.len = ERROR_WORDS - 1;
        assert!(check(k, &a).is_err());
        let mut a = args();
        a.batch = usize::MAX / 4;
        assert!(check(k, &a).is_err());
        let mut a = args();
        a.stall_cta = Some(u32::MAX);
        assert!(check(k, &a).is_err());
        // The writer warp's 16-byte stores; two progress words per window.
        let mut a = args();
        a.out.addr += 8;
        assert!(matches!(
            check(k, &a),
            Err(CudaError::Contract {
                what: "output alignment",
                ..
            })
        ));
        let mut a = args();
        a.progress = Some(Span {
            addr: 1 << 22,
            len: 65,
        });
        assert!(matches!(
            check(k, &a),
            Err(CudaError::Contract {
                what: "progress words",
                needed: 66,
                have: 65,
                ..
            })
        ));
    }
}
