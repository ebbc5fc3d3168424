//! `bilstm devices`: the local GPUs (or why there are none), the CPU backend's threads and
//! instruction set, and the device table.

use std::io::Write;

use bilstm_core::device::table;

use super::CliError;

/// Runs `bilstm devices`.
///
/// # Errors
/// A failed write to stdout. A missing or failing GPU is reported in the listing, not as an
/// error.
pub(crate) fn devices(out: &mut dyn Write) -> Result<(), CliError> {
    local_gpus(out)?;
    let cpu = bilstm_cpu::CpuBackend::new();
    let available: Vec<String> = bilstm_cpu::Isa::available()
        .iter()
        .map(ToString::to_string)
        .collect();
    writeln!(
        out,
        "CPU backend: {} thread(s), {} (available: {}; {}=1|2, {}=portable|avx2|avx512vl|avx512)",
        cpu.threads(),
        cpu.isa(),
        available.join(", "),
        bilstm_cpu::THREADS_ENV,
        bilstm_cpu::ISA_ENV,
    )?;
    writeln!(
        out,
        "device table (bilstm plan --device NAME, or --device all):"
    )?;
    writeln!(out, "  {:<10} {:>4} {:>4}  product", "name", "cc", "SMs")?;
    for e in table::all() {
        let (major, minor) = e.facts.compute_capability;
        writeln!(
            out,
            "  {:<10} {:>4} {:>4}  {}",
            e.name,
            format!("{major}.{minor}"),
            e.facts.sm_count,
            e.product
        )?;
    }
    Ok(())
}

/// Lists every GPU the driver reports, or says why there is none.
#[cfg(feature = "cuda")]
fn local_gpus(out: &mut dyn Write) -> Result<(), CliError> {
    let count = match bilstm_cuda::device_count() {
        Ok(0) => {
            writeln!(out, "local GPUs: none (the CUDA driver reports no device)")?;
            return Ok(());
        }
        Ok(n) => n,
        Err(e) => {
            writeln!(out, "local GPUs: none ({e})")?;
            return Ok(());
        }
    };
    writeln!(out, "local GPUs:")?;
    for ordinal in 0..count {
        match bilstm_cuda::CudaBackend::new(ordinal) {
            Ok(gpu) => writeln!(out, "  {}", gpu.describe())?,
            Err(e) => writeln!(out, "  device {ordinal}: unusable ({e})")?,
        }
    }
    Ok(())
}

/// Without the `cuda` feature there is no GPU to list.
#[cfg(not(feature = "cuda"))]
fn local_gpus(out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(out, "local GPUs: none ({})", crate::Error::CudaNotBuilt)?;
    Ok(())
}
