//! `bilstm plan`: the plan for the local GPU, a device-table GPU, or every table GPU.

use std::io::Write;

use bilstm_core::device::DeviceFacts;
use bilstm_core::device::table::{self, TableEntry};
use bilstm_core::plan::{self, ForcedRecurrence, KernelResources, Overrides, Plan};
use bilstm_core::{MathMode, StackShape};
use clap::Args;

use super::{CliError, MathArg, positive};

/// `bilstm plan` options.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Which GPU: `local` (this machine's GPU 0), a device-table short name (`h200`, `a100`,
    /// `t4`, `rtx4090`, ...; `bilstm devices` lists them) or `all` of the table. Default: the
    /// local GPU when one is usable, else the whole table.
    #[arg(long, value_name = "NAME", value_parser = parse_device)]
    pub device: Option<DeviceArg>,
    /// Windows per forward pass.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = positive)]
    pub batch: usize,
    /// Arithmetic of the input projections.
    #[arg(long, value_enum, default_value_t = MathArg::Fp32)]
    pub math: MathArg,
    /// Frames per window.
    #[arg(long, value_name = "F", default_value_t = StackShape::pyannote().frames, value_parser = positive)]
    pub frames: usize,
    /// Print each decision's reason, one line per decision, under its GPU's row.
    #[arg(long)]
    pub explain: bool,
    /// Force the recurrence kernel: `wide`, `tiled`, `resident`, `cluster` (cluster size by the
    /// rules), `cluster2` or `cluster4` (clusters of 2 or 4 CTAs), `cluster2w2`, `cluster2w4`,
    /// `cluster2w8`, `cluster2w16` (2-CTA clusters of that many windows); `auto`: the rules'
    /// choice.
    /// A GPU that cannot run it shows "no plan" and why.
    #[arg(long, value_name = "KIND", default_value = "auto", value_parser = parse_recurrence)]
    pub recurrence: ForcedRecurrence,
}

/// Parses `--recurrence`: a name of [`ForcedRecurrence::NAMES`] (any case).
fn parse_recurrence(s: &str) -> Result<ForcedRecurrence, String> {
    ForcedRecurrence::parse(s).ok_or_else(|| {
        format!(
            "unknown recurrence; valid names: {}",
            ForcedRecurrence::NAMES.join(", ")
        )
    })
}

/// `--device`: which GPU to plan for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceArg {
    /// This machine's GPU 0.
    Local,
    /// Every device-table entry.
    All,
    /// One device-table entry.
    Table(&'static TableEntry),
}

/// The device table's short names, comma-separated.
pub(crate) fn table_names() -> String {
    table::all()
        .iter()
        .map(|e| e.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses `--device`: `local`, `all` or a table name (any case).
fn parse_device(s: &str) -> Result<DeviceArg, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("local") {
        Ok(DeviceArg::Local)
    } else if s.eq_ignore_ascii_case("all") {
        Ok(DeviceArg::All)
    } else if let Some(entry) = table::find(s) {
        Ok(DeviceArg::Table(entry))
    } else {
        Err(format!(
            "unknown device; valid names: {}, all, local",
            table_names()
        ))
    }
}

/// Runs `bilstm plan`.
///
/// # Errors
/// `--device local` without a usable GPU (the CUDA error); a failure compiling the kernels on
/// the local GPU; a failed write to stdout.
pub(crate) fn plan(args: &PlanArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let shape = StackShape::pyannote().with_frames(args.frames);
    let math = MathMode::from(args.math);
    match args.device {
        Some(DeviceArg::Table(entry)) => table_plans(args, &[*entry], out),
        Some(DeviceArg::All) => table_plans(args, table::all(), out),
        Some(DeviceArg::Local) => {
            let local = local_gpu(&shape, args.batch, math, args.recurrence)?;
            local_plan(args, &local, out)
        }
        None => match local_gpu(&shape, args.batch, math, args.recurrence) {
            Ok(local) => local_plan(args, &local, out),
            Err(why) => {
                note!("no usable GPU ({why}); showing the device table");
                table_plans(args, table::all(), out)
            }
        },
    }
}

/// The local GPU and its plan.
struct LocalGpu {
    /// One line about it ([`crate::CudaBackend::describe`]).
    description: String,
    /// Its driver's facts.
    facts: DeviceFacts,
    /// The plan the CUDA backend would run, or why there is none.
    plan: Result<Plan, String>,
    /// Free and total device memory in bytes, when the driver answered.
    memory: Option<(u64, u64)>,
}

/// Opens GPU 0, compiles the kernels (no weights needed) and asks the CUDA backend for the
/// plan it would run: the driver's facts and the compiled kernels' real resources.
///
/// # Errors
/// No usable GPU, kernels that do not compile, a driver failure (the default `bilstm plan`
/// then shows the device table, saying why). A batch without a plan is not an error here:
/// its row says why.
#[cfg(feature = "cuda")]
fn local_gpu(
    shape: &StackShape,
    batch: usize,
    math: MathMode,
    recurrence: ForcedRecurrence,
) -> Result<LocalGpu, CliError> {
    let mut gpu = bilstm_cuda::CudaBackend::new(0)?;
    // Not prepared: the overrides are only stored, and checked by the plan below.
    gpu.set_overrides(recurrence.apply(Overrides::default()))?;
    let plan = match gpu.plan_for(shape, batch, math) {
        Ok(plan) => Ok(plan),
        // Planning refused the batch (no plan, overflow): the row says so.
        Err(e @ bilstm_cuda::CudaError::Core(_)) => Err(e.to_string()),
        // Compiling the kernels failed, or the driver did.
        Err(e) => return Err(e.into()),
    };
    Ok(LocalGpu {
        description: gpu.describe(),
        facts: gpu.device().facts,
        plan,
        memory: gpu.device_memory().ok(),
    })
}

/// Without the `cuda` feature there is no local GPU.
#[cfg(not(feature = "cuda"))]
fn local_gpu(
    _shape: &StackShape,
    _batch: usize,
    _math: MathMode,
    _recurrence: ForcedRecurrence,
) -> Result<LocalGpu, CliError> {
    Err(crate::Error::CudaNotBuilt.into())
}

/// The device memory line: what a preparation for `batch` windows allocates on the GPU
/// (`bilstm_core::memory`), and, for the local GPU, what is free and how many windows fit.
fn memory_line(
    out: &mut dyn Write,
    shape: &StackShape,
    batch: usize,
    free_total: Option<(u64, u64)>,
) -> Result<(), CliError> {
    use bilstm_core::memory::{DRIVER_RESERVE_BYTES, DeviceMemory, max_batch_within, mib};
    let need = DeviceMemory::of(shape, batch).map_err(crate::Error::from)?;
    match free_total {
        Some((free, total)) => {
            let usable = free.saturating_sub(DRIVER_RESERVE_BYTES);
            writeln!(
                out,
                "device memory for batch {batch}: {need}; free {:.0} of {:.0} MiB: {}",
                mib(free),
                mib(total),
                match max_batch_within(shape, usable, usize::MAX) {
                    0 => "not one window fits".to_string(),
                    n => format!("up to {n} windows fit"),
                }
            )?;
        }
        None => writeln!(out, "device memory for batch {batch}: {need}")?,
    }
    Ok(())
}

/// The column headings of a plan table (core's one format).
fn heading(out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(out, "{}", plan::TABLE_HEADING)?;
    Ok(())
}

/// One GPU's row (and, with `--explain`, its reasons): core's [`plan::PlanRow`].
fn row(
    out: &mut dyn Write,
    name: &str,
    facts: &DeviceFacts,
    plan: &Result<Plan, String>,
    explain: bool,
) -> Result<(), CliError> {
    let row = plan::PlanRow {
        device: name,
        facts,
        plan: plan.as_ref().map_err(|e| e as &dyn std::fmt::Display),
        explain,
    };
    writeln!(out, "{row}")?;
    Ok(())
}

fn table_plans(
    args: &PlanArgs,
    entries: &[TableEntry],
    out: &mut dyn Write,
) -> Result<(), CliError> {
    writeln!(
        out,
        "batch {}, {} frames, {} math; device-table facts, nominal kernel resources",
        args.batch,
        args.frames,
        MathMode::from(args.math)
    )?;
    let shape = StackShape::pyannote().with_frames(args.frames);
    memory_line(out, &shape, args.batch, None)?;
    heading(out)?;
    let overrides = args.recurrence.apply(Overrides::default());
    for entry in entries {
        let plan = plan::select_with(
            &entry.facts,
            &KernelResources::nominal(),
            &shape,
            args.batch,
            args.math.into(),
            &overrides,
        )
        .map_err(|e| e.to_string());
        row(out, entry.name, &entry.facts, &plan, args.explain)?;
    }
    Ok(())
}

fn local_plan(args: &PlanArgs, gpu: &LocalGpu, out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(
        out,
        "batch {}, {} frames, {} math; local GPU: {}; compiled kernels' resources",
        args.batch,
        args.frames,
        MathMode::from(args.math),
        gpu.description
    )?;
    let shape = StackShape::pyannote().with_frames(args.frames);
    memory_line(out, &shape, args.batch, gpu.memory)?;
    heading(out)?;
    row(out, "local", &gpu.facts, &gpu.plan, args.explain)
}

/// What the CUDA backend's last pass ran: recurrence kind, schedule, projection tile.
#[cfg(feature = "cuda")]
pub(crate) fn last_forward_label(gpu: &bilstm_cuda::CudaBackend) -> Option<String> {
    let p = gpu.last_forward()?.plan;
    Some(format!(
        "{} {}; {}",
        p.recurrence.choice,
        plan::ScheduleSummary(&p),
        p.projection.choice
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_parse_by_short_name_in_any_case() {
        assert_eq!(parse_device("all"), Ok(DeviceArg::All));
        assert_eq!(parse_device("LOCAL"), Ok(DeviceArg::Local));
        assert!(matches!(parse_device("H200"), Ok(DeviceArg::Table(e)) if e.name == "h200"));
        let e = parse_device("h300").unwrap_err();
        assert!(
            e.contains("h200") && e.contains("a100") && e.contains("all"),
            "{e}"
        );
    }

    #[test]
    fn recurrence_names_parse_and_force_the_plan() {
        assert_eq!(
            parse_recurrence("Cluster2").map(|f| f.cluster_size),
            Ok(Some(2))
        );
        let e = parse_recurrence("cluster3").unwrap_err();
        assert!(e.contains("cluster4") && e.contains("resident"), "{e}");
        let args = PlanArgs {
            device: Some(DeviceArg::All),
            batch: 1,
            math: MathArg::Fp32,
            frames: 589,
            explain: false,
            recurrence: parse_recurrence("cluster2").unwrap(),
        };
        let mut out = Vec::new();
        plan(&args, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let h200 = text.lines().find(|l| l.starts_with("h200")).unwrap();
        assert!(h200.contains("cluster    2-CTA clusters x2"), "{text}");
        let a100 = text.lines().find(|l| l.starts_with("a100")).unwrap();
        assert!(a100.contains("no plan") && a100.contains("9.0"), "{text}");
    }

    #[test]
    fn every_table_plan_prints_one_row() {
        let args = PlanArgs {
            device: Some(DeviceArg::All),
            batch: 32,
            math: MathArg::Fp32,
            frames: 589,
            explain: true,
            recurrence: ForcedRecurrence::default(),
        };
        let mut out = Vec::new();
        plan(&args, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        for entry in table::all() {
            assert!(
                text.lines().any(|l| l.starts_with(entry.name)),
                "{} missing:\n{text}",
                entry.name
            );
        }
        assert!(text.contains("    recurrence: "), "{text}");
        // The device memory the batch needs, by buffer, from core's accounting.
        let need = bilstm_core::memory::DeviceMemory::of(&StackShape::pyannote(), 32).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("device memory for batch 32: "))
            .unwrap_or_else(|| panic!("no memory line:\n{text}"));
        assert!(
            line.contains(&format!(
                "{:.1} MiB",
                bilstm_core::memory::mib(need.total())
            )) && line.contains("projections"),
            "{line}"
        );
    }
}
