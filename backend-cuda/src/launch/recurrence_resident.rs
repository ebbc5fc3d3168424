//! Launch of `bilstm_recurrence_resident` (kernels/cuda/recurrence_resident.cu): both
//! directions of one layer in one ordinary launch.

use bilstm_kernels::params::RecurrenceResidentParams;
use cudarc::driver::{CudaFunction, CudaStream, DeviceRepr, LaunchConfig};

use super::{
    KernelArg, LaunchMode, Span, StateSpans, check_direction_tensors, check_output, check_state,
    launch_kernel, product, require, to_u32,
};
use crate::error::CudaError;

pub(crate) const KERNEL: &str = "bilstm_recurrence_resident";

// SAFETY: `RecurrenceResidentParams` is `#[repr(C)]`, `Copy`, holds only integers (device
// addresses as u64), and its layout equals `bl_recurrence_resident_params` in
// kernels/cuda/recurrence_resident.cu (size asserted on both sides: 88 bytes; offsets pinned by
// bilstm_kernels' params tests). `KernelArg` is `repr(transparent)`, so it has the same layout.
unsafe impl DeviceRepr for KernelArg<RecurrenceResidentParams> {}

/// What one launch of the resident recurrence reads and writes (index 0 forward, 1 reverse).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResidentArgs {
    /// Each direction's projection `[batch * frames, 512]`.
    pub proj: [Span; 2],
    /// Each direction's packed recurrent rows `[512, 128]`.
    pub recurrent: [Span; 2],
    /// Each direction's packed combined bias `[512]`.
    pub bias: [Span; 2],
    /// The layer output `[batch, frames, 256]`.
    pub out: Span,
    /// Windows.
    pub batch: usize,
    /// Frames per window.
    pub frames: usize,
    /// Blocks of this kernel one SM holds (`cuOccupancyMaxActiveBlocksPerMultiprocessor` with
    /// the kernel's dynamic shared memory, after the attribute was set at load time).
    pub blocks_per_sm: u32,
    /// Where this layer's final states go (`None`: nowhere).
    pub state: Option<StateSpans>,
    /// TF32 mode's recurrence numerics (`numerics.cuh` sections 7 and 8: gate activations and
    /// the 8-chain dot), else FP32 mode's.
    pub tf32_numerics: bool,
}

/// Checks `args` against the kernel's launch contract and builds its parameters and grid.
///
/// # Errors
/// [`CudaError::Contract`] naming the first broken precondition.
pub(crate) fn check(args: &ResidentArgs) -> Result<(RecurrenceResidentParams, u32), CudaError> {
    require(KERNEL, "batch", 1, args.batch)?;
    require(KERNEL, "frames", 1, args.frames)?;
    // The shared memory attribute was granted and a block fits an SM (else the launch would
    // fail; this names why).
    require(
        KERNEL,
        "blocks per SM with the dynamic shared memory",
        1,
        args.blocks_per_sm as usize,
    )?;
    let grid = product(KERNEL, "grid blocks", &[args.batch, 2])?;
    let grid = u32::try_from(grid)
        .ok()
        .filter(|&g| g <= i32::MAX as u32)
        .ok_or(CudaError::Contract {
            kernel: KERNEL,
            what: "grid blocks fit grid.x",
            needed: grid as u64,
            have: i32::MAX as u64,
        })?;
    let frames = to_u32(KERNEL, "frames fit u32", args.frames)?;
    let rows = product(KERNEL, "projection rows", &[args.batch, args.frames])?;
    for d in 0..2 {
        check_direction_tensors(KERNEL, rows, args.proj[d], args.recurrent[d], args.bias[d])?;
    }
    check_output(KERNEL, rows, args.out)?;
    let (state_h, state_c) = check_state(KERNEL, args.batch, args.state)?;
    let params = RecurrenceResidentParams {
        proj: [args.proj[0].addr, args.proj[1].addr],
        recurrent: [args.recurrent[0].addr, args.recurrent[1].addr],
        bias: [args.bias[0].addr, args.bias[1].addr],
        out: args.out.addr,
        batch: grid / 2,
        frames,
        state_h,
        state_c,
        tf32_numerics: u32::from(args.tf32_numerics),
        reserved: 0,
    };
    Ok((params, grid))
}

/// Launches both directions of one layer (an ordinary launch; blocks beyond the device's
/// capacity run in later waves).
///
/// # Errors
/// [`CudaError::Contract`] from [`check`]; [`CudaError::Launch`] when the driver refuses.
pub(crate) fn launch(
    func: &CudaFunction,
    stream: &CudaStream,
    args: &ResidentArgs,
) -> Result<(), CudaError> {
    let (params, grid) = check(args)?;
    let params = KernelArg(params);
    let cfg = LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (bilstm_kernels::RECURRENCE_RESIDENT.block_threads, 1, 1),
        shared_mem_bytes: bilstm_kernels::RECURRENCE_RESIDENT.dynamic_shared_bytes,
    };
    // SAFETY: `func` is bilstm_recurrence_resident loaded from recurrence_resident.cu (the
    // backend looks it up by KernelId::RecurrenceResident); its only parameter is
    // bl_recurrence_resident_params, mirrored by `KernelArg<RecurrenceResidentParams>`. `check`
    // verified its contract: batch and frames positive and within u32 (the grid, 2 * batch
    // blocks, within grid.x); for both directions proj holds batch * frames * 512 floats,
    // recurrent 512 * 128 and bias 512, all 16-byte aligned; out holds batch * frames * 256
    // floats. The block is RESIDENT_THREADS threads with exactly RESIDENT_SHARED_BYTES of
    // dynamic shared memory, which `Kernels::load` allowed with
    // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (blocks_per_sm >= 1 is the driver's own
    // figure after that). Not cooperative: no block waits for another, so any grid size is
    // safe. The output (a layer buffer or the caller's output) is distinct from the projection
    // and the weights, and stream order finishes the projection (and earlier readers of the
    // output) before this kernel runs.
    unsafe { launch_kernel(func, stream, KERNEL, &params, cfg, LaunchMode::Ordinary) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> ResidentArgs {
        let big = 1usize << 30;
        let span = |len| Span { addr: 1 << 21, len };
        ResidentArgs {
            proj: [span(big), span(big)],
            recurrent: [span(big), span(big)],
            bias: [span(big), span(big)],
            out: span(big),
            batch: 33,
            frames: 589,
            blocks_per_sm: 1,
            state: None,
            tf32_numerics: false,
        }
    }

    #[test]
    fn a_valid_launch_builds_matching_params() {
        let (p, grid) = check(&args()).unwrap();
        assert_eq!(grid, 66);
        assert_eq!((p.batch, p.frames, p.tf32_numerics), (33, 589, 0));
        let mut a = args();
        a.tf32_numerics = true;
        assert_eq!(check(&a).unwrap().0.tf32_numerics, 1);
        assert_eq!(p.proj, [1 << 21, 1 << 21]);
    }

    #[test]
    fn broken_preconditions_are_refused() {
        let mut a = args();
        a.blocks_per_sm = 0;
        assert!(check(&a).is_err());
        let mut a = args();
        a.batch = 0;
        assert!(check(&a).is_err());
        let mut a = args();
        a.proj[1].len = 33 * 589 * 512 - 1;
        assert!(check(&a).is_err());
        let mut a = args();
        a.bias[0].addr += 4;
        assert!(check(&a).is_err());
        let mut a = args();
        a.out.len = 33 * 589 * 256 - 1;
        assert!(check(&a).is_err());
        let mut a = args();
        a.batch = usize::MAX / 2;
        assert!(check(&a).is_err());
    }
}
