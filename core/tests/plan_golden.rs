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
const C: RecurrenceKind = RecurrenceKind::Cluster;

/// The batches of DESIGN §3.
const BATCHES: [usize; 10] = [1, 2, 7, 8, 9, 32, 33, 64, 256, 1024];

/// (device, the recurrence at each of [`BATCHES`]).
///
/// Cluster on every GPU with thread-block clusters (9.0, 10.0, 12.0: h100, h200, b200,
/// rtx5060ti, rtx5090), where a 2- or 4-CTA cluster of the cluster kernel fits (nominal
/// resources: it does on all of them). Changed on purpose with the cluster kernel (issue 10):
/// the H200 prototype ran 0.56-0.65 us/step against the resident kernel's 1.26-1.59 (DESIGN
/// §7); re-measure on the integrated kernel. Elsewhere resident wherever the compiled resident
/// kernel (256 threads x 238 registers, 134,144 dynamic shared bytes) fits one SM (164 KB
/// parts: a100, orin); elsewhere wide below 9 windows and tiled from 9. The resident rule was
/// measured on 9.0 (H200, 2026-11-29: the fastest of resident, tiled and wide at every batch
/// 1..1024, `bench/NOTES.md`); the other rows follow the rules from each GPU's resources and
/// were not measured here.
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
    ("h100", [C, C, C, C, C, C, C, C, C, C]),
    ("h200", [C, C, C, C, C, C, C, C, C, C]),
    ("b200", [C, C, C, C, C, C, C, C, C, C]),
    ("rtx5060ti", [C, C, C, C, C, C, C, C, C, C]),
    ("rtx5090", [C, C, C, C, C, C, C, C, C, C]),
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

/// (device, the cluster size and windows per cluster at each of [`BATCHES`]) for the GPUs with
/// clusters, nominal resources (capacities estimated: 4-CTA clusters while each CTA of the
/// `2 * batch` clusters has an SM of its own, else 2-CTA clusters, two windows each once
/// one-window clusters need two waves, and the window tiles where fewer waves cost less
/// (`CLUSTER_WAVE_LAYER_US`): the register quads of 4 and 8 windows on every part (no dynamic
/// shared memory), the 16-window tile only where its 128 KiB of shared memory fit an SM (9.0,
/// 10.0; not the 12.0 parts, 100 KiB) and never cheaper than the quads with these costs). 2-CTA capacity (one CTA per SM): H100/H200 66,
/// B200 74, RTX 5060 Ti 18, RTX 5090 85; 4-CTA clusters with an SM per CTA: 33, 37, 9, 42.
const GOLDEN_CLUSTER_SIZES: [(&str, [(usize, usize); 10]); 5] = [
    //      1       2       7       8       9       32      33      64      256     1024
    (
        "h100",
        [
            (4, 1),
            (4, 1),
            (4, 1),
            (4, 1),
            (4, 1),
            (2, 1),
            (2, 1),
            (2, 2),
            (2, 8),
            (2, 8),
        ],
    ),
    (
        "h200",
        [
            (4, 1),
            (4, 1),
            (4, 1),
            (4, 1),
            (4, 1),
            (2, 1),
            (2, 1),
            (2, 2),
            (2, 8),
            (2, 8),
        ],
    ),
    (
        "b200",
        [
            (4, 1),
            (4, 1),
            (4, 1),
            (4, 1),
            (4, 1),
            (2, 1),
            (2, 1),
            (2, 2),
            (2, 8),
            (2, 8),
        ],
    ),
    (
        "rtx5060ti",
        [
            (4, 1),
            (4, 1),
            (2, 1),
            (2, 1),
            (2, 1),
            (2, 4),
            (2, 4),
            (2, 8),
            (2, 8),
            (2, 8),
        ],
    ),
    (
        "rtx5090",
        [
            (4, 1),
            (4, 1),
            (4, 1),
            (4, 1),
            (4, 1),
            (2, 1),
            (2, 1),
            (2, 2),
            (2, 8),
            (2, 8),
        ],
    ),
];

#[test]
fn golden_cluster_sizes() {
    let resources = KernelResources::nominal();
    let shape = StackShape::pyannote();
    for (name, sizes) in GOLDEN_CLUSTER_SIZES {
        let entry = table::find(name).unwrap_or_else(|| panic!("{name} is not in the table"));
        for (batch, want) in BATCHES.into_iter().zip(sizes) {
            let p = plan::select(&entry.facts, &resources, &shape, batch, MathMode::Fp32)
                .unwrap_or_else(|e| panic!("{name} batch {batch}: {e}"));
            let s = p
                .cluster_schedule()
                .unwrap_or_else(|| panic!("{name}: {p}"));
            assert_eq!(
                (s.cluster_size, s.windows_per_cluster),
                want,
                "{name} batch {batch}:\n{p}"
            );
        }
    }
    // With the H200 driver's figures (66 two-CTA, 62 four-CTA clusters: 31 with an SM per CTA;
    // bench/NOTES.md, cluster harness) the sizes at these batches are the same.
    let h200 = table::find("h200").expect("in the table");
    let measured = KernelResources {
        max_active_clusters: [Some(66), Some(62)],
        ..resources
    };
    let want = [4, 4, 4, 4, 4, 2, 2, 2, 2, 2];
    for (batch, want) in BATCHES.into_iter().zip(want) {
        let p = plan::select(&h200.facts, &measured, &shape, batch, MathMode::Fp32).unwrap();
        assert_eq!(p.cluster_schedule().map(|s| s.cluster_size), Some(want));
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
    // FP32 mode: 32 x 589 rows take 128x128 SIMT tiles everywhere except on 9.0 (h100, h200),
    // where the warpgroup-MMA 3xTF32 tile runs (TF32X3_ARCHITECTURES and WGMMA_ARCHITECTURES;
    // H200, 2026-12-01, session 7: 1.97 vs the mma.sync 3xTF32 tile's 2.24 ms at batch 32,
    // error 8.5e-7 against f64, FP32 budget 2e-6). TF32
    // mode: the tensor-core tile except on 7.5 (no TF32), 8.9 and 12.0 (upstream lost accuracy); on
    // 9.0 its warpgroup-MMA twin.
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
            "h100" | "h200" => ProjectionTile::Tf32x3Wgmma,
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
            // 9.0: the TF32 tile on warpgroup MMA (WGMMA_ARCHITECTURES).
            "h100" | "h200" => ProjectionTile::Tf32Wgmma,
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

/// (device, the fixed-point kernel TF32 mode runs at each of [`BATCHES`]; `-` none) for every
/// table GPU: section 9 (`bilstm_core::fixed::pick`) on the GPUs with thread-block clusters
/// and a TF32 projection (h100, h200, b200; the 12.0 parts refuse the TF32 tile, so their TF32
/// mode has FP32 numerics), none elsewhere (section 8), and never in FP32 mode. Changed on purpose in session 27 (issue
/// 14): TF32 mode's recurrent product became section 9 where clusters exist (H200, same call as
/// cuDNN TF32: batch 1024 10.71 ms against section 8's 21.30; bench/NOTES.md, session 26-27).
const GOLDEN_FIXED: [(&str, [&str; 10]); 13] = [
    ("t4", ["-", "-", "-", "-", "-", "-", "-", "-", "-", "-"]),
    ("a10", ["-", "-", "-", "-", "-", "-", "-", "-", "-", "-"]),
    ("a100", ["-", "-", "-", "-", "-", "-", "-", "-", "-", "-"]),
    (
        "rtx3090",
        ["-", "-", "-", "-", "-", "-", "-", "-", "-", "-"],
    ),
    ("orin", ["-", "-", "-", "-", "-", "-", "-", "-", "-", "-"]),
    ("l4", ["-", "-", "-", "-", "-", "-", "-", "-", "-", "-"]),
    (
        "rtx4060ti",
        ["-", "-", "-", "-", "-", "-", "-", "-", "-", "-"],
    ),
    (
        "rtx4090",
        ["-", "-", "-", "-", "-", "-", "-", "-", "-", "-"],
    ),
    (
        "h100",
        [
            "fixed1c8", "fixed1c8", "fixed1c8", "fixed1c4", "fixed1c4", "fixed1c2", "fixed1c2",
            "fixed4c2", "fixed4", "fixed8",
        ],
    ),
    (
        "h200",
        [
            "fixed1c8", "fixed1c8", "fixed1c8", "fixed1c4", "fixed1c4", "fixed1c2", "fixed1c2",
            "fixed4c2", "fixed4", "fixed8",
        ],
    ),
    (
        "b200",
        [
            "fixed1c8", "fixed1c8", "fixed1c8", "fixed1c8", "fixed1c4", "fixed2c4", "fixed2c4",
            "fixed4c2", "fixed4", "fixed8",
        ],
    ),
    (
        "rtx5060ti",
        ["-", "-", "-", "-", "-", "-", "-", "-", "-", "-"],
    ),
    (
        "rtx5090",
        ["-", "-", "-", "-", "-", "-", "-", "-", "-", "-"],
    ),
];

#[test]
fn golden_fixed_point_kernels() {
    let resources = KernelResources::nominal();
    let shape = StackShape::pyannote();
    for (name, picks) in GOLDEN_FIXED {
        let entry = table::find(name).unwrap_or_else(|| panic!("{name} is not in the table"));
        for (batch, want) in BATCHES.into_iter().zip(picks) {
            let fp32 = plan::select(&entry.facts, &resources, &shape, batch, MathMode::Fp32)
                .unwrap_or_else(|e| panic!("{name} batch {batch}: {e}"));
            assert_eq!(fp32.fixed_point.choice, None, "{name} batch {batch} fp32");
            let p = plan::select(&entry.facts, &resources, &shape, batch, MathMode::Tf32)
                .unwrap_or_else(|e| panic!("{name} batch {batch}: {e}"));
            let got = p.fixed_point.choice.map_or("-", |f| f.name());
            assert_eq!(got, want, "{name} batch {batch} tf32:\n{p}");
        }
    }
}
