//! A lane-by-lane model of `recurrence_resident.cu`'s dot-product reduction (CPU only): each
//! thread adds its two chains (the tree's first level), a transpose-reduce over the 8 lanes of a
//! group finishes the tree for its 16 gate rows (the first lane level interleaved with the
//! shared-memory rows, as the kernel does it), and one exchange with lane p ^ 4 brings a unit's
//! four gates to its cell lane. In TF32 mode a thread's 16 terms are one chain (`numerics.cuh`
//! section 8) and the same three lane levels are its 8-chain tree. Each cell lane must hold
//! exactly the mode's fixed pairwise tree for every gate of its unit, and every unit must have
//! exactly one cell lane.
//!
//! The model restates the kernel's index arithmetic (it cannot run CUDA); keep the two in step.

// The model indexes lanes and rows the way the kernel does.
#![allow(clippy::needless_range_loop)]

mod lane_model;

use bilstm_core::geometry::{
    DOT_CHAIN_TERMS, DOT_CHAINS, GATE_ROWS, GATES, HIDDEN, RESIDENT_CHAINS_PER_THREAD,
    RESIDENT_R_SHARED_BYTES, RESIDENT_THREADS,
};
use lane_model::{LANES, bit_reverse, reduce_level, shfl_xor, tree8, tree16, value};

/// Lanes per row group, groups, rows per group and the register / shared split, as the kernel
/// derives them from the defines.
const GROUP_LANES: usize = DOT_CHAINS / RESIDENT_CHAINS_PER_THREAD;
const GROUPS: usize = RESIDENT_THREADS / GROUP_LANES;
const ROWS: usize = GATE_ROWS / GROUPS;
const TERMS: usize = RESIDENT_CHAINS_PER_THREAD * DOT_CHAIN_TERMS;
const SHARED_ROWS: usize = RESIDENT_R_SHARED_BYTES / (4 * TERMS * RESIDENT_THREADS);
const REG_ROWS: usize = ROWS - SHARED_ROWS;

#[test]
fn the_geometry_splits_r_in_halves_of_whole_rows() {
    assert_eq!(
        (GROUP_LANES, GROUPS, ROWS, SHARED_ROWS, REG_ROWS),
        (8, 32, 16, 8, 8)
    );
    assert_eq!(
        GROUPS * ROWS * HIDDEN * 4,
        2 * RESIDENT_R_SHARED_BYTES,
        "half of R in shared memory"
    );
    assert_eq!(ROWS % GATES, 0);
    assert_eq!(LANES % GROUP_LANES, 0);
}

#[test]
fn every_cell_lane_gets_the_tree_of_each_gate_of_its_unit() {
    check(false);
    check(true);
}

/// Runs warp 3 through the kernel's reduce in FP32 mode (`tf32` false) or TF32 mode.
fn check(tf32: bool) {
    // The four groups of one warp (the model runs warp 3: groups 12..15).
    let warp = 3;
    let groups_per_warp = LANES / GROUP_LANES;
    let group_of = |lane: usize| warp * groups_per_warp + lane / GROUP_LANES;
    // chain(row, c): FP32 mode's chain c (0..16) of packed row `row` (within the layer).
    let chain = |row: usize, c: usize| value((row * 16 + c) as u64 + 7);
    // tf32_chain(row, p): TF32 mode's chain p (0..8).
    let tf32_chain = |row: usize, p: usize| value((row * 8 + p) as u64 + 19);
    // The thread's value of a row: FP32 mode chains 2p and 2p + 1 added in the thread, TF32 mode
    // its one chain.
    let pair = |row: usize, p: usize| {
        if tf32 {
            tf32_chain(row, p)
        } else {
            chain(row, 2 * p) + chain(row, 2 * p + 1)
        }
    };
    let tree_of = |row: usize| {
        if tf32 {
            tree8(&std::array::from_fn(|p| tf32_chain(row, p)))
        } else {
            tree16(&std::array::from_fn(|c| chain(row, c)))
        }
    };
    let mut acc = [[0.0f32; ROWS]; LANES];
    for (lane, v) in acc.iter_mut().enumerate() {
        let p = lane % GROUP_LANES;
        for (i, slot) in v.iter_mut().enumerate().take(REG_ROWS) {
            *slot = pair(group_of(lane) * ROWS + i, p);
        }
    }
    // Lane level 1 interleaved with the shared rows: pair (i, i + 8).
    for i in 0..SHARED_ROWS {
        let upper_row: [f32; LANES] =
            std::array::from_fn(|l| pair(group_of(l) * ROWS + REG_ROWS + i, l % GROUP_LANES));
        let upper1: [bool; LANES] = std::array::from_fn(|l| (l % GROUP_LANES) & 1 != 0);
        let send: [f32; LANES] =
            std::array::from_fn(|l| if upper1[l] { acc[l][i] } else { upper_row[l] });
        let keep: [f32; LANES] =
            std::array::from_fn(|l| if upper1[l] { upper_row[l] } else { acc[l][i] });
        let recv = shfl_xor(&send, 1);
        for l in 0..LANES {
            acc[l][i] = keep[l] + recv[l];
        }
    }
    reduce_level(&mut acc, 8, 2);
    reduce_level(&mut acc, 4, 4);
    // Lane p holds rows 2 rev3(p) + {0, 1} of its group.
    for (lane, v) in acc.iter().enumerate() {
        let p = lane % GROUP_LANES;
        for j in 0..2 {
            let row = group_of(lane) * ROWS + 2 * bit_reverse(p, 3) + j;
            assert_eq!(
                v[j].to_bits(),
                tree_of(row).to_bits(),
                "tf32 {tf32} lane {lane}, row {row}"
            );
        }
    }
    let d0: [f32; LANES] = std::array::from_fn(|l| acc[l][0]);
    let d1: [f32; LANES] = std::array::from_fn(|l| acc[l][1]);
    let (g, o) = (shfl_xor(&d0, 4), shfl_xor(&d1, 4));
    let mut cells = vec![0usize; groups_per_warp * ROWS / GATES];
    for lane in 0..LANES {
        let p = lane % GROUP_LANES;
        if p >= ROWS / GATES {
            continue;
        }
        let unit = group_of(lane) * (ROWS / GATES) + 2 * (p & 1) + ((p >> 1) & 1);
        for (gate, got) in [d0[lane], d1[lane], g[lane], o[lane]]
            .into_iter()
            .enumerate()
        {
            let row = unit * GATES + gate;
            assert_eq!(
                got.to_bits(),
                tree_of(row).to_bits(),
                "tf32 {tf32} lane {lane}, unit {unit}, gate {gate}"
            );
        }
        cells[unit - warp * groups_per_warp * (ROWS / GATES)] += 1;
    }
    assert!(
        cells.iter().all(|&c| c == 1),
        "one cell lane per unit: {cells:?}"
    );
}
