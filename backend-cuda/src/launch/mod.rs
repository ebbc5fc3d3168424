//! Kernel launches: the only place with `unsafe` code in this crate.
//!
//! Each launch function is safe to call: it first checks every precondition of the kernel's
//! launch contract it can check on the host (buffer lengths against the sizes the kernel will
//! touch, alignment, grid against co-resident capacity) and returns
//! [`CudaError::Contract`] when one fails; only then comes the single `unsafe` launch, whose
//! `SAFETY` comment names each obligation and where it is met.
//!
//! [`sys`] holds the few other unsafe driver calls (library probes, event tracking, NVRTC's
//! version).

pub(crate) mod clear;
pub(crate) mod coop;
pub(crate) mod projection;
pub(crate) mod projection_tf32;
pub(crate) mod projection_tf32x3;
pub(crate) mod recurrence_cluster;
pub(crate) mod recurrence_resident;
pub(crate) mod recurrence_tiled;
pub(crate) mod recurrence_wide;
pub(crate) mod sys;

use bilstm_core::geometry::{GATE_ROWS, HIDDEN};
use bilstm_kernels::params::{ClearParams, ProjectionParams};
use cudarc::driver::{CudaFunction, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg};

use crate::error::CudaError;

/// A kernel's parameter struct, passed by value as the kernel's only argument.
///
/// A local newtype so this crate may implement cudarc's `DeviceRepr` for the parameter
/// structs of `bilstm-kernels` (the orphan rule forbids implementing it on them directly).
#[repr(transparent)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct KernelArg<T>(pub T);

// SAFETY: `ClearParams` is `#[repr(C)]`, `Copy`, holds only integers (device addresses as
// u64), and its layout equals `bl_clear_params` in kernels/cuda/clear.cu (size asserted on
// both sides: 32 bytes; offsets pinned by bilstm_kernels' params tests). `KernelArg` is
// `repr(transparent)`, so it has the same layout.
unsafe impl DeviceRepr for KernelArg<ClearParams> {}
// SAFETY: as above, `ProjectionParams` mirrors `bl_projection_params` in projection.cu and in
// projection_tf32x3.cu (48 bytes, asserted in both; offsets tested).
unsafe impl DeviceRepr for KernelArg<ProjectionParams> {}

/// A device buffer as a kernel sees it: its address and how many elements it holds from there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    /// Device address of the first element.
    pub addr: u64,
    /// Elements available from `addr`.
    pub len: usize,
}

impl Span {
    /// The span `offset..` of this one (elements of `elem_bytes` bytes), if inside.
    pub(crate) fn offset(self, offset: usize, elem_bytes: usize) -> Option<Span> {
        let rest = self.len.checked_sub(offset)?;
        let bytes = u64::try_from(offset.checked_mul(elem_bytes)?).ok()?;
        Some(Span {
            addr: self.addr.checked_add(bytes)?,
            len: rest,
        })
    }
}

/// Returns [`CudaError::Contract`] unless `have >= needed`.
pub(crate) fn require(
    kernel: &'static str,
    what: &'static str,
    needed: usize,
    have: usize,
) -> Result<(), CudaError> {
    if have >= needed {
        Ok(())
    } else {
        Err(CudaError::Contract {
            kernel,
            what,
            needed: needed as u64,
            have: have as u64,
        })
    }
}

/// Returns [`CudaError::Contract`] unless `addr` is a non-null multiple of `align`.
pub(crate) fn require_aligned(
    kernel: &'static str,
    what: &'static str,
    addr: u64,
    align: u64,
) -> Result<(), CudaError> {
    if addr != 0 && align != 0 && addr.is_multiple_of(align) {
        Ok(())
    } else {
        Err(CudaError::Contract {
            kernel,
            what,
            needed: align,
            have: addr % align.max(1),
        })
    }
}

/// `a * b` as `usize`, or [`CudaError::Contract`] on overflow.
pub(crate) fn product(
    kernel: &'static str,
    what: &'static str,
    factors: &[usize],
) -> Result<usize, CudaError> {
    factors
        .iter()
        .try_fold(1usize, |acc, &f| acc.checked_mul(f))
        .ok_or(CudaError::Contract {
            kernel,
            what,
            needed: u64::MAX,
            have: 0,
        })
}

/// `value` as `u32`, or [`CudaError::Contract`] naming `what` when it does not fit.
pub(crate) fn to_u32(
    kernel: &'static str,
    what: &'static str,
    value: usize,
) -> Result<u32, CudaError> {
    u32::try_from(value).map_err(|_| CudaError::Contract {
        kernel,
        what,
        needed: value as u64,
        have: u32::MAX as u64,
    })
}

/// Checks one direction's recurrence inputs: the projection holds `rows * 512` floats, the
/// packed recurrent rows `512 * 128`, the packed bias 512, all 16-byte aligned (the kernels
/// read them as float4).
///
/// # Errors
/// [`CudaError::Contract`] naming the first broken precondition.
pub(crate) fn check_direction_tensors(
    kernel: &'static str,
    rows: usize,
    proj: Span,
    recurrent: Span,
    bias: Span,
) -> Result<(), CudaError> {
    let proj_len = product(kernel, "projection values", &[rows, GATE_ROWS])?;
    require(kernel, "projection values", proj_len, proj.len)?;
    require_aligned(kernel, "projection alignment", proj.addr, 16)?;
    require(
        kernel,
        "recurrent weights",
        GATE_ROWS * HIDDEN,
        recurrent.len,
    )?;
    require_aligned(kernel, "recurrent weights alignment", recurrent.addr, 16)?;
    require(kernel, "bias values", GATE_ROWS, bias.len)?;
    require_aligned(kernel, "bias alignment", bias.addr, 16)
}

/// Where a recurrence writes one layer's final states: each of `h` and `c` is that layer's
/// block of `h_n` / `c_n`, `[2, batch, 128]` floats (direction-major).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StateSpans {
    /// Final hidden states.
    pub h: Span,
    /// Final cell states.
    pub c: Span,
}

/// The kernels' `state_h` / `state_c` pointers for `state` (0, 0 for none), after checking
/// that each holds `2 * batch * 128` floats, 4-byte aligned.
///
/// # Errors
/// [`CudaError::Contract`] naming the short or misaligned buffer.
pub(crate) fn check_state(
    kernel: &'static str,
    batch: usize,
    state: Option<StateSpans>,
) -> Result<(u64, u64), CudaError> {
    let Some(s) = state else {
        return Ok((0, 0));
    };
    let len = product(kernel, "final state values", &[2, batch, HIDDEN])?;
    require(kernel, "final hidden state values", len, s.h.len)?;
    require(kernel, "final cell state values", len, s.c.len)?;
    require_aligned(kernel, "final hidden state alignment", s.h.addr, 4)?;
    require_aligned(kernel, "final cell state alignment", s.c.addr, 4)?;
    Ok((s.h.addr, s.c.addr))
}

/// Checks a layer output: `rows * 256` floats, 4-byte aligned.
///
/// # Errors
/// [`CudaError::Contract`] naming the broken precondition.
pub(crate) fn check_output(kernel: &'static str, rows: usize, out: Span) -> Result<(), CudaError> {
    require(
        kernel,
        "output values",
        product(kernel, "output values", &[rows, 2 * HIDDEN])?,
        out.len,
    )?;
    require_aligned(kernel, "output alignment", out.addr, 4)
}

/// Returns [`CudaError::Contract`] unless `value` is a multiple of `multiple` (`require(.., 0,
/// v % m)` would always pass: a remainder must be zero, so the multiple is what is needed).
pub(crate) fn require_multiple(
    kernel: &'static str,
    what: &'static str,
    value: usize,
    multiple: usize,
) -> Result<(), CudaError> {
    if multiple != 0 && value.is_multiple_of(multiple) {
        Ok(())
    } else {
        Err(CudaError::Contract {
            kernel,
            what,
            needed: multiple as u64,
            have: value as u64,
        })
    }
}

/// How a kernel is launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LaunchMode {
    /// `cuLaunchKernel`: blocks beyond the device's capacity run in later waves.
    Ordinary,
    /// `cuLaunchCooperativeKernel`: the whole grid is resident at once, or the driver refuses.
    Cooperative,
}

/// Launches `func` on `stream` with `cfg` and its one by-value parameter struct `params`; a
/// refusal by the driver becomes [`CudaError::Launch`] naming `kernel`.
///
/// # Safety
/// `func` must be the entry point whose only parameter is the C struct that `P` mirrors, and
/// every precondition of that kernel's launch contract must hold for `params`, `cfg` and
/// `mode`: each buffer the parameters point to holds what the kernel touches and stays alive
/// until the kernel ends (stream order), alignments hold, the dynamic shared memory was
/// allowed, and a kernel whose blocks wait for each other is launched cooperatively with a grid
/// the device holds at once. Each caller states in its `SAFETY` comment where each is met.
pub(crate) unsafe fn launch_kernel<P>(
    func: &CudaFunction,
    stream: &CudaStream,
    kernel: &'static str,
    params: &KernelArg<P>,
    cfg: LaunchConfig,
    mode: LaunchMode,
) -> Result<(), CudaError>
where
    KernelArg<P>: DeviceRepr,
{
    let mut builder = stream.launch_builder(func);
    builder.arg(params);
    // SAFETY: forwarded to the caller: this function's `# Safety` section is the launch's
    // contract, and the caller's SAFETY comment says where each part of it is met.
    let launched = unsafe {
        match mode {
            LaunchMode::Ordinary => builder.launch(cfg),
            LaunchMode::Cooperative => builder.launch_cooperative(cfg),
        }
    };
    launched
        .map(drop)
        .map_err(|source| CudaError::Launch { kernel, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_checks() {
        let s = Span {
            addr: 1024,
            len: 10,
        };
        assert_eq!(s.offset(4, 4), Some(Span { addr: 1040, len: 6 }));
        assert_eq!(s.offset(11, 4), None);
        assert!(require("k", "x", 3, 3).is_ok());
        assert!(matches!(
            require("k", "x", 4, 3),
            Err(CudaError::Contract {
                needed: 4,
                have: 3,
                ..
            })
        ));
        assert!(require_aligned("k", "x", 256, 16).is_ok());
        assert!(require_aligned("k", "x", 0, 16).is_err());
        assert!(require_aligned("k", "x", 20, 16).is_err());
        assert_eq!(product("k", "x", &[2, 3, 4]).ok(), Some(24));
        assert!(product("k", "x", &[usize::MAX, 2]).is_err());
    }
}
