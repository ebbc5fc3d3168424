//! The golden table: which recurrence kernel each table GPU runs at each batch, with the
//! nominal kernel resources, FP32 and TF32 alike.
//!
//! This table changes only on purpose: when a plan rule, a threshold, a table entry or the
//! nominal resources change, update it in the same commit and say why (with the measurement)
//! in CHANGELOG.md.

use bilstm_core::device::table;
use bilstm_core::plan::{self, KernelResources, ProjectionTile, RecurrenceKind};
use bilstm_core::{MathMode, StackShape};

const W: RecurrenceKind = RecurrenceKind::Wide;
const T: RecurrenceKind = RecurrenceKind::Tiled;
const R: RecurrenceKind = RecurrenceKind::Resident;

/// The batches of DESIGN §3.
const BATCHES: [usize; 10] = [1, 2, 7, 8, 9, 32, 33, 64, 256, 1024];

/// (device, the recurrence at each of [`BATCHES`]).
///
/// Resident wherever the compiled resident kernel (256 threads x 238 registers, 134,144 dynamic
/// shared bytes) fits one SM (164 KB and 228 KB parts); elsewhere wide below 9 windows and tiled
/// from 9. On 9.0 (h100, h200) the resident rows are measured (H200, 2026-11-29: the resident
/// kernel was the fastest of the three at every batch 1..1024, `bench/NOTES.md`); the other
/// rows follow the rules from each GPU's resources and were not measured here.
const GOLDEN: [(&str, [RecurrenceKind; 10]); 13] = [
    //            1  2  7  8  9  32 33 64 256 1024
    ("t4", [W, W, W, W, T, T, T, T, T, T]),
    ("a10", [W, W, W, W, T, T, T, T, T, T]),
    ("a100", [R, R, R, R, R, R, R, R, R, R]),
    ("rtx3090", [W, W, W, W, T, T, T, T, T, T]),
    ("orin", [R, R, R, R, R, R, R, R, R, R]),
    ("l4", [W, W, W, W, T, T, T, T, T, T]),
    ("rtx4060ti", [W, W, W, W, T, T, T, T, T, T]),
    ("rtx4090", [W, W, W, W, T, T, T, T, T, T]),
    ("h100", [R, R, R, R, R, R, R, R, R, R]),
    ("h200", [R, R, R, R, R, R, R, R, R, R]),
    ("b200", [R, R, R, R, R, R, R, R, R, R]),
    ("rtx5060ti", [W, W, W, W, T, T, T, T, T, T]),
    ("rtx5090", [W, W, W, W, T, T, T, T, T, T]),
];

#[test]
fn golden_recurrence_kinds() {
    let resources = KernelResources::nominal();
    let shape = StackShape::pyannote();
    for (name, kinds) in GOLDEN {
        let entry = table::find(name).unwrap_or_else(|| panic!("{name} is not in the table"));
        for (batch, want) in BATCHES.into_iter().zip(kinds) {
            for math in MathMode::ALL {
                let p = plan::select(&entry.facts, &resources, &shape, batch, math)
                    .unwrap_or_else(|e| panic!("{name} batch {batch} {math}: {e}"));
                assert_eq!(
                    p.recurrence.choice, want,
                    "{name} batch {batch} {math}:\n{p}"
                );
            }
        }
    }
}

#[test]
fn golden_covers_the_whole_table() {
    assert_eq!(GOLDEN.len(), table::all().len());
    for entry in table::all() {
        assert!(
            GOLDEN.iter().any(|(name, _)| *name == entry.name),
            "{} has no golden row",
            entry.name
        );
    }
}

#[test]
fn golden_projection_tiles_at_batch_32() {
    // FP32 mode: 32 x 589 rows take 128x128 tiles everywhere except on 9.0 (h100, h200), where
    // the 64x64 tile was measured as fast or faster at every batch (H200, 2026-11-29). TF32
    // mode: the tensor-core tile except on 7.5 (no TF32), 8.9 and 12.0 (upstream lost accuracy).
    let shape = StackShape::pyannote();
    for entry in table::all() {
        let fp32 = plan::select(
            &entry.facts,
            &KernelResources::nominal(),
            &shape,
            32,
            MathMode::Fp32,
        )
        .unwrap();
        let want_fp32 = match entry.name {
            "h100" | "h200" => ProjectionTile::Small64,
            _ => ProjectionTile::Large128,
        };
        assert_eq!(fp32.projection.choice, want_fp32, "{}", entry.name);
        let tf32 = plan::select(
            &entry.facts,
            &KernelResources::nominal(),
            &shape,
            32,
            MathMode::Tf32,
        )
        .unwrap();
        let want = match entry.name {
            "t4" | "l4" | "rtx4060ti" | "rtx4090" | "rtx5060ti" | "rtx5090" => {
                ProjectionTile::Large128
            }
            _ => ProjectionTile::Tf32,
        };
        assert_eq!(tf32.projection.choice, want, "{}", entry.name);
    }
}

#[test]
fn a_table_entry_is_a_device_query() {
    let shape = StackShape::pyannote();
    let h200 = table::find("h200").expect("in the table");
    let by_query = plan::select_on(h200, &KernelResources::nominal(), &shape, 7, MathMode::Tf32)
        .expect("plans");
    let by_facts = plan::select(
        &h200.facts,
        &KernelResources::nominal(),
        &shape,
        7,
        MathMode::Tf32,
    )
    .expect("plans");
    assert_eq!(by_query, by_facts);
}
