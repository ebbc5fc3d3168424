//! Per-phase timing of forward passes (issue 10 step 5): for each layer, the device time of
//! its input projection and of its recurrence, from CUDA events on the main stream.
//!
//! Off by default. [`CudaBackend::set_phase_timing`] creates the events (after
//! [`bilstm_core::Backend::prepare`]: they are sized for the prepared stack's layers) and
//! every pass enqueued by [`CudaBackend::forward`](bilstm_core::Backend::forward) or
//! [`CudaBackend::forward_device`] then records, on the main stream:
//! - `boundary[l]` before layer `l`'s projection (for `l > 0` this is also after layer `l - 1`'s
//!   recurrence: the main stream has joined the side stream there),
//! - `projected[l]` after layer `l`'s projection, before its recurrence,
//! - `boundary[layers]` after the last layer.
//!
//! So layer `l`'s projection takes `boundary[l] .. projected[l]` and its recurrence
//! `projected[l] .. boundary[l + 1]` (both directions, any kind: the resident launch, the
//! cooperative launches on both streams with the join). The sum over layers is the pass
//! minus the clear launch before layer 0 and the error-word read after the last layer.
//! [`CudaBackend::last_phases`] reads the figures of the last complete pass.
//!
//! Graph capture: marks are not recorded while the main stream is capturing (a captured event
//! record carries no timestamp), so a captured graph holds no phase events and its replays
//! record none; [`CudaBackend::last_phases`] keeps describing the last pass that was not
//! captured. Recording the events costs a few host calls per layer and adds nothing between
//! kernels on the device beyond the event records themselves; leave it off when timing
//! whole passes.

use std::sync::atomic::{AtomicBool, Ordering};

use bilstm_core::{Backend, CoreError};
use cudarc::driver::sys::{CUevent_flags, CUstreamCaptureStatus};
use cudarc::driver::{CudaEvent, CudaStream};

use crate::backend::CudaBackend;
use crate::error::CudaError;

/// The device time of one layer's two phases, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerPhases {
    /// The layer (0 = the one reading the input features).
    pub layer: usize,
    /// Its input projection (both directions, one launch).
    pub projection_ms: f64,
    /// Its recurrence (both directions, from the end of the projection to the join).
    pub recurrence_ms: f64,
}

impl LayerPhases {
    /// Projection plus recurrence.
    pub fn total_ms(&self) -> f64 {
        self.projection_ms + self.recurrence_ms
    }
}

/// The events of phase timing (see the module docs); inert while off.
#[derive(Debug, Default)]
pub(crate) struct PhaseTimer {
    /// `layers + 1` events, or none while off.
    boundaries: Vec<CudaEvent>,
    /// `layers` events, or none while off.
    projected: Vec<CudaEvent>,
    /// Whether every event of the last enqueued pass was recorded (set at the pass end,
    /// cleared at its start).
    complete: AtomicBool,
}

impl PhaseTimer {
    fn on(&self) -> bool {
        !self.boundaries.is_empty()
    }

    /// Whether marks are recorded on `stream` now: timing is on and the stream is not being
    /// captured into a graph.
    fn recording(&self, stream: &CudaStream) -> Result<bool, CudaError> {
        if !self.on() {
            return Ok(false);
        }
        let status = stream
            .capture_status()
            .map_err(CudaError::driver("querying the stream's capture status"))?;
        Ok(status == CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }

    fn record(events: &[CudaEvent], index: usize, stream: &CudaStream) -> Result<(), CudaError> {
        match events.get(index) {
            Some(e) => e
                .record(stream)
                .map_err(CudaError::driver("recording a phase event")),
            // A stack with more layers than the events were made for: not timed.
            None => Ok(()),
        }
    }

    /// Marks the start of `layer` (before its projection) on the main stream.
    pub(crate) fn layer_start(&self, layer: usize, main: &CudaStream) -> Result<(), CudaError> {
        if !self.recording(main)? {
            return Ok(());
        }
        if layer == 0 {
            self.complete.store(false, Ordering::Relaxed);
        }
        Self::record(&self.boundaries, layer, main)
    }

    /// Marks the end of `layer`'s projection on the main stream.
    pub(crate) fn projected(&self, layer: usize, main: &CudaStream) -> Result<(), CudaError> {
        if !self.recording(main)? {
            return Ok(());
        }
        Self::record(&self.projected, layer, main)
    }

    /// Marks the end of a pass of `layers` layers on the main stream (after the last join).
    pub(crate) fn pass_end(&self, layers: usize, main: &CudaStream) -> Result<(), CudaError> {
        if !self.recording(main)? {
            return Ok(());
        }
        Self::record(&self.boundaries, layers, main)?;
        self.complete
            .store(layers + 1 == self.boundaries.len(), Ordering::Relaxed);
        Ok(())
    }

    /// The phases of the last complete pass; `None` while off or before any complete pass.
    fn read(&self) -> Result<Option<Vec<LayerPhases>>, CudaError> {
        if !self.on() || !self.complete.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let elapsed = |a: &CudaEvent, b: &CudaEvent| {
            a.elapsed_ms(b)
                .map(f64::from)
                .map_err(CudaError::driver("reading a phase event's time"))
        };
        let mut out = Vec::with_capacity(self.projected.len());
        for (layer, mid) in self.projected.iter().enumerate() {
            let (Some(start), Some(end)) =
                (self.boundaries.get(layer), self.boundaries.get(layer + 1))
            else {
                return Ok(None);
            };
            out.push(LayerPhases {
                layer,
                projection_ms: elapsed(start, mid)?,
                recurrence_ms: elapsed(mid, end)?,
            });
        }
        Ok(Some(out))
    }
}

impl CudaBackend {
    /// Turns per-phase timing on or off (see [`crate::phases`]). Turning it on creates
    /// `2 * layers + 1` timing events for the prepared stack (again at each call, so call it
    /// after a [`Backend::prepare`] that changed the number of layers); off drops them.
    ///
    /// # Errors
    /// [`CoreError::NotPrepared`] when turning it on before [`Backend::prepare`];
    /// [`CudaError::Driver`] when an event cannot be created.
    pub fn set_phase_timing(&mut self, on: bool) -> Result<(), CudaError> {
        if !on {
            self.phases = PhaseTimer::default();
            return Ok(());
        }
        let layers = self.config().ok_or(CoreError::NotPrepared)?.shape.layers;
        let ctx = self.context().clone();
        let new = || {
            ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(CudaError::driver("creating a phase event"))
        };
        let boundaries = (0..=layers).map(|_| new()).collect::<Result<Vec<_>, _>>()?;
        let projected = (0..layers).map(|_| new()).collect::<Result<Vec<_>, _>>()?;
        self.phases = PhaseTimer {
            boundaries,
            projected,
            complete: AtomicBool::new(false),
        };
        Ok(())
    }

    /// Whether per-phase timing is on.
    pub fn phase_timing(&self) -> bool {
        self.phases.on()
    }

    /// Per-layer projection and recurrence times of the last complete forward pass (waits for
    /// its events); `None` while phase timing is off, before a pass completed with it on, or
    /// when the last pass failed half-way. A captured graph's replays are not timed (see
    /// [`crate::phases`]).
    ///
    /// # Errors
    /// [`CudaError::Driver`] when an event's time cannot be read.
    pub fn last_phases(&self) -> Result<Option<Vec<LayerPhases>>, CudaError> {
        self.phases.read()
    }
}

/// Runs `warmup` untimed and then `iters` phase-timed forward passes of `batch` windows
/// (input as [`crate::timing::time_forward_device`]'s) and returns, per layer, the median
/// projection and recurrence time. Phase timing is on for these passes only; it is left as it
/// was found (events recreated when it was on).
///
/// # Errors
/// As [`crate::timing::time_forward_device`], plus those of [`CudaBackend::set_phase_timing`];
/// [`CudaError::Internal`] when a pass leaves no phases.
pub fn time_phases(
    backend: &mut CudaBackend,
    batch: usize,
    iters: usize,
    warmup: usize,
) -> Result<Vec<LayerPhases>, CudaError> {
    let (d_in, mut d_out) = crate::timing::timing_buffers(backend, batch)?;
    let was_on = backend.phase_timing();
    backend.set_phase_timing(true)?;
    let result = (|| {
        for _ in 0..warmup {
            backend.forward_device(&d_in, batch, &mut d_out)?;
        }
        let mut runs = Vec::with_capacity(iters);
        for _ in 0..iters.max(1) {
            backend.forward_device(&d_in, batch, &mut d_out)?;
            runs.push(backend.last_phases()?.ok_or_else(|| CudaError::Internal {
                what: "a phase-timed pass left no phases".into(),
            })?);
        }
        Ok(median_phases(&runs))
    })();
    backend.set_phase_timing(was_on)?;
    result
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

/// Per layer, the median projection and the median recurrence time over `runs` (each a
/// pass's phases, layers in order; layers missing from some runs use the runs that have
/// them).
pub fn median_phases(runs: &[Vec<LayerPhases>]) -> Vec<LayerPhases> {
    let layers = runs.iter().map(Vec::len).max().unwrap_or(0);
    (0..layers)
        .map(|layer| {
            let of = |f: fn(&LayerPhases) -> f64| {
                median(runs.iter().filter_map(|r| r.get(layer)).map(f).collect())
            };
            LayerPhases {
                layer,
                projection_ms: of(|p| p.projection_ms),
                recurrence_ms: of(|p| p.recurrence_ms),
            }
        })
        .collect()
}

/// The phases as a JSON array: `[{"layer":0,"projection_ms":0.0123,"recurrence_ms":0.9}, ...]`
/// (4 decimals; the key `"phases"` of the bench's JSON lines).
pub fn phases_json(phases: &[LayerPhases]) -> String {
    let items: Vec<String> = phases
        .iter()
        .map(|p| {
            format!(
                "{{\"layer\":{},\"projection_ms\":{:.4},\"recurrence_ms\":{:.4}}}",
                p.layer, p.projection_ms, p.recurrence_ms
            )
        })
        .collect();
    format!("[{}]", items.join(","))
}

/// A text table of the phases of one case, headed by `title`: one row per layer (projection,
/// recurrence, both, and the recurrence's share), then a total row.
pub fn phases_table(title: &str, phases: &[LayerPhases]) -> String {
    let mut out = format!(
        "{title}\n{:>6} {:>14} {:>14} {:>10} {:>8}\n",
        "layer", "projection ms", "recurrence ms", "total ms", "rec %"
    );
    let share = |p: &LayerPhases| {
        let t = p.total_ms();
        if t > 0.0 {
            100.0 * p.recurrence_ms / t
        } else {
            0.0
        }
    };
    for p in phases {
        out.push_str(&format!(
            "{:>6} {:>14.4} {:>14.4} {:>10.4} {:>7.1}%\n",
            p.layer,
            p.projection_ms,
            p.recurrence_ms,
            p.total_ms(),
            share(p)
        ));
    }
    let total = LayerPhases {
        layer: 0,
        projection_ms: phases.iter().map(|p| p.projection_ms).sum(),
        recurrence_ms: phases.iter().map(|p| p.recurrence_ms).sum(),
    };
    out.push_str(&format!(
        "{:>6} {:>14.4} {:>14.4} {:>10.4} {:>7.1}%\n",
        "all",
        total.projection_ms,
        total.recurrence_ms,
        total.total_ms(),
        share(&total)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake() -> Vec<LayerPhases> {
        vec![
            LayerPhases {
                layer: 0,
                projection_ms: 0.05,
                recurrence_ms: 0.95,
            },
            LayerPhases {
                layer: 1,
                projection_ms: 0.25,
                recurrence_ms: 0.75,
            },
        ]
    }

    #[test]
    fn json_has_one_object_per_layer_with_the_three_keys() {
        assert_eq!(
            phases_json(&fake()),
            "[{\"layer\":0,\"projection_ms\":0.0500,\"recurrence_ms\":0.9500},\
             {\"layer\":1,\"projection_ms\":0.2500,\"recurrence_ms\":0.7500}]"
        );
        assert_eq!(phases_json(&[]), "[]");
    }

    #[test]
    fn table_has_a_row_per_layer_and_a_total() {
        let t = phases_table("batch 1", &fake());
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}");
        assert_eq!(lines[0], "batch 1");
        assert!(lines[1].contains("projection ms") && lines[1].contains("recurrence ms"));
        assert!(lines[2].trim_start().starts_with("0 ") && lines[2].contains("0.9500"));
        assert!(lines[2].ends_with("95.0%"), "{}", lines[2]);
        // Totals: 0.3 + 1.7 = 2.0, recurrence 85 %.
        assert!(lines[4].trim_start().starts_with("all"));
        assert!(lines[4].contains("0.3000") && lines[4].contains("1.7000"));
        assert!(lines[4].contains("2.0000") && lines[4].ends_with("85.0%"));
    }

    #[test]
    fn medians_are_taken_per_layer_and_phase() {
        let run = |a: f64, b: f64| {
            vec![LayerPhases {
                layer: 0,
                projection_ms: a,
                recurrence_ms: b,
            }]
        };
        let m = median_phases(&[run(3.0, 10.0), run(1.0, 30.0), run(2.0, 20.0)]);
        assert_eq!(
            m,
            vec![LayerPhases {
                layer: 0,
                projection_ms: 2.0,
                recurrence_ms: 20.0
            }]
        );
        assert!(median_phases(&[]).is_empty());
        let even = median_phases(&[run(1.0, 1.0), run(2.0, 4.0)]);
        assert_eq!((even[0].projection_ms, even[0].recurrence_ms), (1.5, 2.5));
    }

    #[test]
    fn an_idle_timer_reports_nothing() {
        let t = PhaseTimer::default();
        assert!(!t.on());
        assert_eq!(t.read().ok(), Some(None));
    }
}
