//! Which recurrence kernel runs: resident where R fits one SM, else tiled or wide by batch.

use super::{Decision, KernelResources, Reason, RecurrenceKind};
use crate::device::DeviceFacts;
use crate::error::CoreError;
use crate::geometry::{TILED_BLOCKS_PER_TILE, WIDE_BLOCKS_PER_TILE};
use crate::occupancy::{Occupancy, blocks_per_sm};

/// The tiled recurrence from this batch on; the wide one below it. Only for GPUs where the
/// resident kernel does not fit an SM (7.5, 8.6, 8.9, 12.0 in the table), none of which anyone
/// here can measure: the rule stays upstream's, derived there from measurements.
///
/// Upstream: tiled beat wide from 9 windows on an RTX 4060 Ti (8.9) and an RTX 5060 Ti (12.0).
/// Cross-check on the H200 (2026-11-29, both kinds forced, ms per forward, 589 frames, FP32,
/// `bench/NOTES.md`): wide 6.26 vs tiled 6.44 at batch 8, wide 6.65 vs tiled 6.45 at batch 9,
/// wide 7.63 vs tiled 7.80 at 32, wide 14.14 vs tiled 9.13 at 64, wide 67.97 vs tiled 26.98 at
/// 256: the two are within 3% up to batch 32 and tiled wins by far from 64, consistent with
/// the threshold. Re-run `backend-cuda/examples/bench.rs --kinds wide,tiled` before changing it.
pub const TILED_MIN_BATCH: usize = 9;

/// The resident recurrence runs wherever at least this many of its blocks fit an SM.
///
/// Measured on the H200 (9.0, 2026-11-29, `bench/NOTES.md`; ms per forward of the pyannote
/// stack, 589 frames, FP32, each kind forced, CUDA events around `forward_device`): the resident
/// kernel is the fastest at every batch measured, 1 to 1024:
///
/// | batch | resident | tiled | wide |
/// |---:|---:|---:|---:|
/// | 1 | 3.84 | 6.09 | 6.35 |
/// | 9 | 4.15 | 6.45 | 6.65 |
/// | 32 | 5.00 | 7.80 | 7.63 |
/// | 128 | 12.56 | 13.50 | 34.04 |
/// | 1024 | 99.36 | 107.41 | 270.88 |
///
/// So on 9.0 the rule "resident wherever it fits" is a measured one ([`MEASURED_ARCHITECTURES`]).
/// Elsewhere (A100, Orin, B200 in the table) it is derived from resources: the kernel fits
/// there and needs neither cooperative launch nor exchange; upstream measured it on an A100
/// (8.0): resident beat tiled at batch 32 (0.97 vs 1.38 ms per layer) and wide by at least 18%
/// from batch 2. Not measured here.
pub const RESIDENT_MIN_BLOCKS_PER_SM: u32 = 1;

/// Compute capabilities whose recurrence rule was measured in this project (the H200 figures
/// of [`RESIDENT_MIN_BLOCKS_PER_SM`]). Plans for the other table entries follow the same rules
/// from their resources and say so in their reason.
pub const MEASURED_ARCHITECTURES: [(u32, u32); 1] = [(9, 0)];

/// Blocks one tile of a cooperative kind needs (0 for the resident kind, which has no tiles).
pub const fn blocks_per_tile(kind: RecurrenceKind) -> usize {
    match kind {
        RecurrenceKind::Wide => WIDE_BLOCKS_PER_TILE,
        RecurrenceKind::Tiled => TILED_BLOCKS_PER_TILE,
        RecurrenceKind::Resident => 0,
    }
}

/// The occupancy of each recurrence kernel on one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecurrenceOccupancy {
    /// The wide kernel's.
    pub wide: Occupancy,
    /// The tiled kernel's.
    pub tiled: Occupancy,
    /// The resident kernel's.
    pub resident: Occupancy,
    /// Shared bytes (static plus dynamic) one resident block asks for.
    pub resident_shared_bytes: u32,
}

impl RecurrenceOccupancy {
    /// Each recurrence kernel's occupancy on `facts` with `resources`.
    pub const fn of(facts: &DeviceFacts, resources: &KernelResources) -> Self {
        RecurrenceOccupancy {
            wide: blocks_per_sm(facts, &resources.wide),
            tiled: blocks_per_sm(facts, &resources.tiled),
            resident: blocks_per_sm(facts, &resources.resident),
            resident_shared_bytes: match resources.resident.shared_bytes() {
                Some(bytes) => bytes,
                None => u32::MAX,
            },
        }
    }

    /// The occupancy of `kind`'s kernel.
    pub const fn get(&self, kind: RecurrenceKind) -> Occupancy {
        match kind {
            RecurrenceKind::Wide => self.wide,
            RecurrenceKind::Tiled => self.tiled,
            RecurrenceKind::Resident => self.resident,
        }
    }

    /// Blocks of `kind`'s kernel the whole device holds at once.
    pub const fn capacity(&self, kind: RecurrenceKind, sm_count: u32) -> usize {
        self.get(kind).co_resident_blocks(sm_count)
    }
}

/// Whether one tile of a cooperative `kind` fits the device's co-resident capacity.
const fn cooperative_fits(
    facts: &DeviceFacts,
    occupancy: &RecurrenceOccupancy,
    kind: RecurrenceKind,
) -> bool {
    facts.cooperative_launch
        && occupancy.get(kind).blocks_per_sm > 0
        && occupancy.capacity(kind, facts.sm_count) >= blocks_per_tile(kind)
}

/// Chooses the recurrence kernel for `batch` windows.
///
/// 1. Resident when at least [`RESIDENT_MIN_BLOCKS_PER_SM`] of its blocks fit an SM (it needs
///    no cooperative launch).
/// 2. Otherwise a cooperative kernel, which needs [`DeviceFacts::cooperative_launch`]: tiled
///    from [`TILED_MIN_BATCH`] windows, wide below; if one tile of that kind exceeds the
///    co-resident capacity, the other kind when its tile fits.
///
/// # Errors
/// [`CoreError::NoPlan`] when the resident kernel does not fit and no cooperative kernel can
/// run (no cooperative launch, or not even one tile fits).
pub fn choose_recurrence(
    facts: &DeviceFacts,
    occupancy: &RecurrenceOccupancy,
    batch: usize,
) -> Result<Decision<RecurrenceKind>, CoreError> {
    let resident = occupancy.resident;
    if resident.blocks_per_sm >= RESIDENT_MIN_BLOCKS_PER_SM {
        return Ok(Decision {
            choice: RecurrenceKind::Resident,
            reason: Reason::ResidentFits {
                blocks_per_sm: resident.blocks_per_sm,
                shared_bytes: occupancy.resident_shared_bytes,
                measured_here: MEASURED_ARCHITECTURES.contains(&facts.compute_capability),
            },
        });
    }
    if !facts.cooperative_launch {
        return Err(CoreError::NoPlan {
            reason: "the resident recurrence does not fit an SM and the device has no cooperative launch",
        });
    }
    let preferred = if batch >= TILED_MIN_BATCH {
        RecurrenceKind::Tiled
    } else {
        RecurrenceKind::Wide
    };
    if cooperative_fits(facts, occupancy, preferred) {
        return Ok(Decision {
            choice: preferred,
            reason: Reason::ByBatch {
                chosen: preferred,
                batch,
                resident_limit: resident.limited_by,
            },
        });
    }
    let other = match preferred {
        RecurrenceKind::Tiled => RecurrenceKind::Wide,
        _ => RecurrenceKind::Tiled,
    };
    if cooperative_fits(facts, occupancy, other) {
        return Ok(Decision {
            choice: other,
            reason: Reason::CooperativeFallback {
                chosen: other,
                preferred,
                needed: blocks_per_tile(preferred),
                capacity: occupancy.capacity(preferred, facts.sm_count),
            },
        });
    }
    Err(CoreError::NoPlan {
        reason: "the resident recurrence does not fit an SM and no cooperative tile fits the co-resident capacity",
    })
}

/// Checks a recurrence forced through [`super::Overrides`].
///
/// # Errors
/// [`CoreError::ForcedChoice`] when the resident kernel does not fit an SM, or a cooperative
/// kernel lacks cooperative launch or room for one tile.
pub fn check_forced_recurrence(
    facts: &DeviceFacts,
    occupancy: &RecurrenceOccupancy,
    kind: RecurrenceKind,
) -> Result<Decision<RecurrenceKind>, CoreError> {
    let reason = Reason::ForcedRecurrence(kind);
    match kind {
        RecurrenceKind::Resident if occupancy.resident.blocks_per_sm == 0 => {
            Err(CoreError::ForcedChoice {
                what: "resident recurrence",
                reason: "its registers and shared memory do not fit one SM",
            })
        }
        RecurrenceKind::Resident => Ok(Decision {
            choice: kind,
            reason,
        }),
        RecurrenceKind::Wide | RecurrenceKind::Tiled if !facts.cooperative_launch => {
            Err(CoreError::ForcedChoice {
                what: "cooperative recurrence",
                reason: "the device has no cooperative launch",
            })
        }
        RecurrenceKind::Wide | RecurrenceKind::Tiled
            if !cooperative_fits(facts, occupancy, kind) =>
        {
            Err(CoreError::ForcedChoice {
                what: "cooperative recurrence",
                reason: "one tile exceeds the co-resident capacity",
            })
        }
        RecurrenceKind::Wide | RecurrenceKind::Tiled => Ok(Decision {
            choice: kind,
            reason,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::table;
    use crate::occupancy::Limit;

    fn occ(blocks_per_sm: u32, limited_by: Limit) -> Occupancy {
        Occupancy {
            blocks_per_sm,
            limited_by,
        }
    }

    /// A device with `sms` SMs and cooperative launch as given; occupancies set by hand.
    fn device(sms: u32, cooperative: bool) -> DeviceFacts {
        DeviceFacts {
            sm_count: sms,
            cooperative_launch: cooperative,
            ..table::find("rtx4090").unwrap().facts
        }
    }

    const NO_RESIDENT: Occupancy = Occupancy {
        blocks_per_sm: 0,
        limited_by: Limit::PerBlockLimit,
    };

    fn kinds(
        facts: &DeviceFacts,
        o: &RecurrenceOccupancy,
        batch: usize,
    ) -> Result<RecurrenceKind, CoreError> {
        choose_recurrence(facts, o, batch).map(|d| d.choice)
    }

    #[test]
    fn resident_wins_wherever_it_fits() {
        let o = RecurrenceOccupancy {
            wide: occ(2, Limit::Registers),
            tiled: occ(2, Limit::Registers),
            resident: occ(1, Limit::Registers),
            resident_shared_bytes: 134_144,
        };
        for batch in [0, 1, 8, 9, 1024] {
            assert_eq!(
                kinds(&device(132, true), &o, batch),
                Ok(RecurrenceKind::Resident)
            );
            // Not cooperative: no cooperative launch needed.
            assert_eq!(
                kinds(&device(1, false), &o, batch),
                Ok(RecurrenceKind::Resident)
            );
        }
    }

    #[test]
    fn only_measured_architectures_say_so() {
        let nominal = crate::plan::KernelResources::nominal();
        for (name, measured) in [
            ("h200", true),
            ("h100", true),
            ("a100", false),
            ("b200", false),
        ] {
            let f = table::find(name).unwrap().facts;
            let o = RecurrenceOccupancy::of(&f, &nominal);
            let d = choose_recurrence(&f, &o, 32).unwrap();
            assert_eq!(d.choice, RecurrenceKind::Resident, "{name}");
            assert!(
                matches!(d.reason, Reason::ResidentFits { measured_here, .. } if measured_here == measured),
                "{name}: {:?}",
                d.reason
            );
        }
    }

    #[test]
    fn batch_splits_wide_and_tiled() {
        let o = RecurrenceOccupancy {
            wide: occ(2, Limit::Registers),
            tiled: occ(2, Limit::Registers),
            resident: NO_RESIDENT,
            resident_shared_bytes: 134_144,
        };
        let d = device(128, true);
        for batch in [0, 1, 2, 7, 8] {
            assert_eq!(
                kinds(&d, &o, batch),
                Ok(RecurrenceKind::Wide),
                "batch {batch}"
            );
        }
        for batch in [9, 32, 33, 1024] {
            assert_eq!(
                kinds(&d, &o, batch),
                Ok(RecurrenceKind::Tiled),
                "batch {batch}"
            );
        }
        let r = choose_recurrence(&d, &o, 9).unwrap().reason;
        assert_eq!(
            r,
            Reason::ByBatch {
                chosen: RecurrenceKind::Tiled,
                batch: 9,
                resident_limit: Limit::PerBlockLimit
            }
        );
    }

    #[test]
    fn small_devices_fall_back_or_refuse() {
        let o = RecurrenceOccupancy {
            wide: occ(2, Limit::Registers),
            tiled: occ(2, Limit::Registers),
            resident: NO_RESIDENT,
            resident_shared_bytes: 134_144,
        };
        // 4 SMs x 2 = 8 co-resident: a wide tile (16) does not fit, a tiled tile (8) does.
        let d = choose_recurrence(&device(4, true), &o, 1).unwrap();
        assert_eq!(d.choice, RecurrenceKind::Tiled);
        assert_eq!(
            d.reason,
            Reason::CooperativeFallback {
                chosen: RecurrenceKind::Tiled,
                preferred: RecurrenceKind::Wide,
                needed: 16,
                capacity: 8
            }
        );
        // 3 SMs x 2 = 6: nothing fits.
        assert!(matches!(
            kinds(&device(3, true), &o, 1),
            Err(CoreError::NoPlan { .. })
        ));
        assert!(matches!(
            kinds(&device(2, true), &o, 32),
            Err(CoreError::NoPlan { .. })
        ));
        // Tiled kernel that cannot launch at all: batch 9+ falls back to wide.
        let o2 = RecurrenceOccupancy {
            tiled: NO_RESIDENT,
            ..o
        };
        assert_eq!(kinds(&device(128, true), &o2, 32), Ok(RecurrenceKind::Wide));
    }

    #[test]
    fn cooperative_kernels_need_cooperative_launch() {
        let o = RecurrenceOccupancy {
            wide: occ(2, Limit::Registers),
            tiled: occ(2, Limit::Registers),
            resident: NO_RESIDENT,
            resident_shared_bytes: 134_144,
        };
        let e = choose_recurrence(&device(128, false), &o, 4).unwrap_err();
        assert!(matches!(e, CoreError::NoPlan { .. }));
    }

    #[test]
    fn forced_recurrences_are_checked() {
        let fits = RecurrenceOccupancy {
            wide: occ(2, Limit::Registers),
            tiled: occ(2, Limit::Registers),
            resident: occ(1, Limit::Registers),
            resident_shared_bytes: 134_144,
        };
        let no_resident = RecurrenceOccupancy {
            resident: NO_RESIDENT,
            ..fits
        };
        let d = device(128, true);
        assert!(matches!(
            check_forced_recurrence(&d, &no_resident, RecurrenceKind::Resident),
            Err(CoreError::ForcedChoice {
                what: "resident recurrence",
                ..
            })
        ));
        assert_eq!(
            check_forced_recurrence(&d, &fits, RecurrenceKind::Wide)
                .unwrap()
                .choice,
            RecurrenceKind::Wide
        );
        assert!(matches!(
            check_forced_recurrence(&device(128, false), &fits, RecurrenceKind::Tiled),
            Err(CoreError::ForcedChoice { .. })
        ));
        assert!(matches!(
            check_forced_recurrence(&device(7, true), &fits, RecurrenceKind::Wide),
            Err(CoreError::ForcedChoice { .. })
        ));
        assert_eq!(
            check_forced_recurrence(&device(1, false), &fits, RecurrenceKind::Resident)
                .unwrap()
                .reason,
            Reason::ForcedRecurrence(RecurrenceKind::Resident)
        );
    }
}
