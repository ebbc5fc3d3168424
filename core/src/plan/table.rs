//! The plan table: one `Display` for the rows `bilstm plan` and `examples/plan.rs` print, so the
//! two never disagree: device, compute capability, SMs, recurrence kernel, schedule, projection
//! tile (and the fixed-point kernel where TF32 mode runs one), and with `explain` one line per
//! decision ([`Plan::explain`]).
//!
//! ```
//! use bilstm_core::{MathMode, StackShape, device::table, plan};
//! let h200 = table::find("h200").unwrap();
//! let p = plan::select(&h200.facts, &plan::KernelResources::nominal(), &StackShape::pyannote(), 1, MathMode::Fp32);
//! println!("{}", plan::TABLE_HEADING);
//! let row = plan::PlanRow { device: h200.name, facts: &h200.facts, plan: p.as_ref().map_err(|e| e as _), explain: false };
//! assert!(row.to_string().starts_with("h200          9.0  132  cluster    4-CTA clusters x2"));
//! ```

use core::fmt;

use super::{Plan, RecurrenceSchedule};
use crate::device::DeviceFacts;

/// The column headings of the plan table.
pub const TABLE_HEADING: TableHeading = TableHeading;

/// The column headings of the plan table (its `Display`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableHeading;

impl fmt::Display for TableHeading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<12} {:>4} {:>4}  {:<10} {:<56} projection",
            "device", "cc", "SMs", "recurrence", "schedule"
        )
    }
}

/// One GPU's row of the plan table: its plan, or why it has none.
#[derive(Clone, Copy)]
pub struct PlanRow<'a> {
    /// The device's short name (`"h200"`, `"local"`).
    pub device: &'a str,
    /// Its facts (compute capability, SMs).
    pub facts: &'a DeviceFacts,
    /// Its plan, or the error that says why it has none.
    pub plan: Result<&'a Plan, &'a dyn fmt::Display>,
    /// With one line per decision ([`Plan::explain`]) under the row.
    pub explain: bool,
}

impl fmt::Debug for PlanRow<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlanRow")
            .field("device", &self.device)
            .field("plan", &self.plan.map_err(|_| "no plan"))
            .field("explain", &self.explain)
            .finish()
    }
}

impl fmt::Display for PlanRow<'_> {
    /// The row (and with `explain`, the reasons indented by four spaces on the lines after).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor) = self.facts.compute_capability;
        // Padded as one field (a Formatter's width applies to one write).
        let mut cc = heapless::String::<16>::new();
        let _ = fmt::write(&mut cc, format_args!("{major}.{minor}"));
        match self.plan {
            Ok(p) => {
                let mut recurrence = heapless::String::<16>::new();
                let _ = fmt::write(&mut recurrence, format_args!("{}", p.recurrence.choice));
                let mut schedule = heapless::String::<96>::new();
                let _ = fmt::write(&mut schedule, format_args!("{}", ScheduleSummary(p)));
                write!(
                    f,
                    "{:<12} {:>4} {:>4}  {:<10} {:<56} {}",
                    self.device,
                    cc.as_str(),
                    self.facts.sm_count,
                    recurrence.as_str(),
                    schedule.as_str(),
                    p.projection.choice
                )?;
                if let Some(pick) = p.fixed_point.choice {
                    write!(f, ", section 9 on {}", pick.name())?;
                }
                if self.explain {
                    for line in p.explain() {
                        write!(f, "\n    {line}")?;
                    }
                }
                Ok(())
            }
            Err(e) => write!(
                f,
                "{:<12} {:>4} {:>4}  no plan: {e}",
                self.device,
                cc.as_str(),
                self.facts.sm_count
            ),
        }
    }
}

/// A plan's schedule in a few words (the table's schedule column): tiles and launches of a
/// cooperative recurrence, the resident grid, or the cluster grid.
#[derive(Debug, Clone, Copy)]
pub struct ScheduleSummary<'a>(pub &'a Plan);

impl fmt::Display for ScheduleSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural =
            |n: usize, one: &'static str, many: &'static str| if n == 1 { one } else { many };
        match self.0.schedule.choice {
            RecurrenceSchedule::Resident { grid_blocks } => write!(
                f,
                "grid of {grid_blocks} blocks, {} resident at once",
                self.0.co_resident_blocks
            ),
            RecurrenceSchedule::Cooperative(s) => {
                let launches = s.launches_per_direction();
                write!(
                    f,
                    "{}-window tiles x{}, {}, {launches} launch{}/direction",
                    s.tile_height,
                    s.tiles,
                    if s.concurrent {
                        "concurrent"
                    } else {
                        "in turn"
                    },
                    plural(launches, "", "es")
                )
            }
            RecurrenceSchedule::Cluster(s) => {
                write!(f, "{}-CTA clusters x{}", s.cluster_size, s.clusters())?;
                if s.windows_per_cluster > 1 {
                    write!(f, " of {} windows", s.windows_per_cluster)?;
                }
                write!(
                    f,
                    ", {} per wave, {} wave{}",
                    s.clusters_per_wave,
                    s.waves,
                    plural(s.waves, "", "s")
                )
            }
        }
    }
}
