//! A lane-by-lane model of `recurrence_cluster.cu`'s four-window register kernels
//! (`bl_recurrence_cluster_quad`: `bilstm_recurrence_cluster2w4`, and `_cluster2w8` with two
//! quads taken in turn), CPU only: lane `m` of an 8-lane row group computes chains `2 m` and
//! `2 m + 1` of its group's 8 rows for each of a quad's four windows and adds the two (the tree's
//! first level), reads window `((q ^ b1(m)) << 1) | (s ^ b0(m))` into pair slot `q`, member `s`,
//! holds the rows of unit `us ^ b2(m)` in unit slot `us`, reduces each pair over lane offset 1
//! and then all over offsets 2 and 4, keeping the lower half each time. In TF32 mode the lane's
//! 16 terms are one chain (`numerics.cuh` section 8) and the same three levels are its tree.
//! Every lane must end with exactly the mode's fixed pairwise tree for the four gates of one
//! (window, unit):
//! window `m & 3`, unit `2 g + b2(m)` of its group `g`; and the lanes of a cluster must cover
//! every (window, unit) of the quad exactly once.
//!
//! The model restates the kernel's index arithmetic (it cannot run CUDA); keep the two in step.

// The model indexes lanes and slots the way the kernel does.
#![allow(clippy::needless_range_loop)]

mod lane_model;

use bilstm_core::geometry::{
    CLUSTER_THREADS, GATE_ROWS, GATES, HIDDEN, QUAD_GROUP_LANES, QUAD_H_ROW_FLOATS,
    QUAD_PIECE_FLOATS,
};
use lane_model::{LANES, reduce_level_lower, shfl_xor, tree8, tree16, value};

/// CTAs of the quad kernels' clusters.
const CTAS: usize = 2;
/// Lanes of a row group (the kernel's `BL_QD_LANES`).
const GROUP_LANES: usize = QUAD_GROUP_LANES;
/// Rows a group (the kernel's `BL_QD_ROWS`).
const ROWS: usize = 8;
/// Windows a quad.
const QUAD: usize = 4;
/// Row groups per CTA.
const GROUPS_PER_CTA: usize = CLUSTER_THREADS / GROUP_LANES;

/// The kernel's per-lane bits: window bit 0, window bit 1, the unit-slot mask.
fn bits(m: usize) -> (usize, usize, usize) {
    (m & 1, (m >> 1) & 1, (m >> 2) & 1)
}

/// Chain `j` (0..16) of packed row `row` in window `w` (order-sensitive values).
fn chain(row: usize, w: usize, j: usize) -> f32 {
    value(((row * QUAD + w) * 16 + j) as u64 + 77)
}

/// TF32 mode's chain `m` (0..8, one 16-term chain of `numerics.cuh` section 8) of packed row
/// `row` in window `w`.
fn tf32_chain(row: usize, w: usize, m: usize) -> f32 {
    value(((row * QUAD + w) * 8 + m) as u64 + 91)
}

/// What lane `m` of a group computes in a math mode for packed row `row` in window `w`: FP32
/// mode chains `2 m` and `2 m + 1` added in the lane, TF32 mode its one chain.
fn lane_value(tf32: bool, row: usize, w: usize, m: usize) -> f32 {
    if tf32 {
        tf32_chain(row, w, m)
    } else {
        chain(row, w, 2 * m) + chain(row, w, 2 * m + 1)
    }
}

/// The mode's fixed tree for packed row `row` in window `w`.
fn tree_of(tf32: bool, row: usize, w: usize) -> f32 {
    if tf32 {
        tree8(&std::array::from_fn(|m| tf32_chain(row, w, m)))
    } else {
        tree16(&std::array::from_fn(|k| chain(row, w, k)))
    }
}

/// Runs warp `warp` (global, four groups) through one quad step in a math mode and returns, per
/// lane, the four values it keeps and its (window, unit).
fn run_warp(tf32: bool, warp: usize) -> Vec<([f32; GATES], usize, usize)> {
    let group_of = |l: usize| warp * (LANES / GROUP_LANES) + l / GROUP_LANES;
    // Slot us * 4 + gate of lane l holds row (2 group + (us ^ ub)) * 4 + gate.
    let row_of = |l: usize, i: usize| {
        let (_, _, ub) = bits(l % GROUP_LANES);
        group_of(l) * ROWS + ((((i >> 2) ^ ub) << 2) | (i & 3))
    };
    let mut v = [[0.0f32; 2 * ROWS]; LANES];
    for q in 0..2 {
        let mut a = [[0.0f32; 2 * ROWS]; LANES];
        for l in 0..LANES {
            let m = l % GROUP_LANES;
            let (wb0, wb1, _) = bits(m);
            for s in 0..2 {
                let w = ((q ^ wb1) << 1) | (s ^ wb0);
                for i in 0..ROWS {
                    let row = row_of(l, i);
                    a[l][s * ROWS + i] = lane_value(tf32, row, w, m);
                }
            }
        }
        // Offset 1: keep member 0, add the partner's member 1.
        for i in 0..ROWS {
            let upper: [f32; LANES] = std::array::from_fn(|l| a[l][ROWS + i]);
            let partner = shfl_xor(&upper, 1);
            for l in 0..LANES {
                v[l][q * ROWS + i] = a[l][i] + partner[l];
            }
        }
    }
    reduce_level_lower(&mut v, 2 * ROWS, 2);
    reduce_level_lower(&mut v, ROWS, 4);
    (0..LANES)
        .map(|l| {
            let m = l % GROUP_LANES;
            let (_, _, ub) = bits(m);
            let unit = group_of(l) * (ROWS / GATES) + ub;
            (std::array::from_fn(|g| v[l][g]), m & 3, unit)
        })
        .collect()
}

#[test]
fn the_quad_geometry_covers_r_in_whole_units() {
    assert_eq!(CTAS * GROUPS_PER_CTA * ROWS, GATE_ROWS);
    assert_eq!(ROWS, 2 * GATES);
    // Eight lanes of 16 terms cover h.
    assert_eq!(GROUP_LANES * 16, HIDDEN);
    // A CTA's lanes: one cell each, four windows of its 64 units.
    assert_eq!(CLUSTER_THREADS, QUAD * HIDDEN / CTAS);
}

#[test]
fn every_lane_gets_the_tree_of_each_gate_of_its_window_and_unit() {
    let warps = CTAS * CLUSTER_THREADS / LANES;
    for tf32 in [false, true] {
        let mut seen = vec![0u32; QUAD * HIDDEN];
        for warp in 0..warps {
            for (l, (got, w, unit)) in run_warp(tf32, warp).into_iter().enumerate() {
                seen[w * HIDDEN + unit] += 1;
                for (gate, g) in got.into_iter().enumerate() {
                    let row = unit * GATES + gate;
                    assert_eq!(
                        g.to_bits(),
                        tree_of(tf32, row, w).to_bits(),
                        "tf32 {tf32} warp {warp} lane {l}: window {w} unit {unit} gate {gate}"
                    );
                }
            }
        }
        assert!(
            seen.iter().all(|&n| n == 1),
            "every (window, unit) of the quad has exactly one lane"
        );
    }
}

/// The padded shared row of h (`bl_qd_index`): every unit has its own float, the eight pieces
/// lie 20 floats apart, and the eight lanes of a 16-byte load phase (lane `m` reads its piece
/// `m`, any window) hit eight distinct 4-bank groups.
#[test]
fn the_padded_h_row_is_one_to_one_and_conflict_free() {
    let index = |u: usize| (u / 16) * QUAD_PIECE_FLOATS + u % 16;
    let mut seen = std::collections::HashSet::new();
    for u in 0..HIDDEN {
        assert!(seen.insert(index(u)), "unit {u}");
        assert!(index(u) < QUAD_H_ROW_FLOATS);
    }
    for t in 0..4 {
        let banks: std::collections::HashSet<usize> = (0..GROUP_LANES)
            .map(|m| (index(16 * m) + 4 * t) % 32 / 4)
            .collect();
        assert_eq!(banks.len(), GROUP_LANES, "load {t}");
    }
}
