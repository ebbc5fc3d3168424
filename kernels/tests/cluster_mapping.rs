//! A lane-by-lane model of `recurrence_cluster.cu`'s dot-product reduction (CPU only), for both
//! cluster sizes: lane `j` of a 16-lane row group computes chain `j` of each of the group's rows,
//! a transpose-reduce at lane offsets 1, 2, 4 (and 8 for 16 rows; a butterfly at 8 for 8 rows)
//! finishes the fixed tree, and three exchanges bring a unit's four gates to its cell lane. Each
//! cell lane must hold exactly the fixed pairwise tree of `numerics.cuh` for every gate of its
//! unit, every unit of the cluster must have exactly one cell lane, and the CTAs of a cluster must
//! own disjoint units covering all of them.
//!
//! The model restates the kernel's index arithmetic (it cannot run CUDA); keep the two in step.

// The model indexes lanes and rows the way the kernel does.
#![allow(clippy::needless_range_loop)]

mod lane_model;

use bilstm_core::geometry::{
    CLUSTER_GROUP_LANES, CLUSTER_SIZES, CLUSTER_THREADS, DOT_CHAIN_TERMS, GATE_ROWS, GATES, HIDDEN,
};
use lane_model::{LANES, bit_reverse, reduce_level_lower, shfl_xor, tree16, value};

/// Row groups per CTA.
const GROUPS_PER_CTA: usize = CLUSTER_THREADS / CLUSTER_GROUP_LANES;

/// Rows per group for cluster size `s` (the kernel's `ROWS`).
fn rows(s: usize) -> usize {
    GATE_ROWS / (s * GROUPS_PER_CTA)
}

/// The cell lanes' units: `(rank, thread) -> unit` for every cell lane of a cluster of size `s`,
/// as the kernel computes it.
fn cell_units(s: usize) -> Vec<usize> {
    let rows = rows(s);
    let levels = rows.trailing_zeros();
    let units_per_group = rows / GATES;
    let mut units = Vec::new();
    for rank in 0..s {
        for tid in 0..CLUSTER_THREADS {
            let lane = tid % CLUSTER_GROUP_LANES;
            if lane >= units_per_group {
                continue;
            }
            let group = rank * GROUPS_PER_CTA + tid / CLUSTER_GROUP_LANES;
            let cell = lane % units_per_group;
            let unit_in_group = if levels == 4 {
                ((cell & 1) << 1) | (cell >> 1)
            } else {
                cell
            };
            units.push(group * units_per_group + unit_in_group);
        }
    }
    units
}

#[test]
fn the_geometry_covers_r_in_whole_units() {
    for s in CLUSTER_SIZES {
        let r = rows(s);
        assert!(r == 8 || r == 16, "size {s}: {r} rows a group");
        assert_eq!(s * GROUPS_PER_CTA * r, GATE_ROWS);
        assert_eq!(r % GATES, 0);
        assert_eq!(CLUSTER_GROUP_LANES * DOT_CHAIN_TERMS, HIDDEN);
        // R in registers: rows x 8 floats per thread.
        assert_eq!(r * DOT_CHAIN_TERMS, if s == 2 { 128 } else { 64 });
    }
}

#[test]
fn every_unit_has_exactly_one_cell_lane() {
    for s in CLUSTER_SIZES {
        let mut units = cell_units(s);
        assert_eq!(units.len(), HIDDEN, "size {s}");
        units.sort_unstable();
        assert_eq!(units, (0..HIDDEN).collect::<Vec<_>>(), "size {s}");
    }
}

/// Runs one warp (two groups) of cluster size `s` through the kernel's reduction and checks the
/// cell lanes against the tree.
fn check_warp<const W: usize>(s: usize, warp: usize) {
    let rows = rows(s);
    assert_eq!(rows, W);
    let levels = rows.trailing_zeros();
    let units_per_group = rows / GATES;
    let f_offset = 1usize << (levels - 1);
    let g_offset = 1usize << (levels - 2);
    // chains[row][j]: chain j of packed gate row `row` (order-sensitive values).
    let chain = |row: usize, j: usize| value((row * 16 + j) as u64 + 1000 * s as u64);
    let group_of = |lane: usize| warp * (LANES / CLUSTER_GROUP_LANES) + lane / CLUSTER_GROUP_LANES;
    // Lane j keeps row i ^ rev_L(j mod W) in slot i (the kernel's `order`).
    let mut v = [[0.0f32; W]; LANES];
    for l in 0..LANES {
        let j = l % CLUSTER_GROUP_LANES;
        let order = bit_reverse(j & (W - 1), levels);
        for i in 0..W {
            v[l][i] = chain(group_of(l) * W + (i ^ order), j);
        }
    }
    reduce_level_lower(&mut v, W, 1);
    reduce_level_lower(&mut v, W / 2, 2);
    reduce_level_lower(&mut v, W / 4, 4);
    if levels == 4 {
        reduce_level_lower(&mut v, 2, 8);
    } else {
        reduce_level_lower(&mut v, 1, 8);
    }
    let first: [f32; LANES] = std::array::from_fn(|l| v[l][0]);
    // Lane j holds row rev_L(j) of its group.
    for l in 0..LANES {
        let j = l % CLUSTER_GROUP_LANES;
        let row = group_of(l) * W + bit_reverse(j % W, levels);
        let c: [f32; 16] = std::array::from_fn(|k| chain(row, k));
        assert_eq!(
            first[l].to_bits(),
            tree16(&c).to_bits(),
            "size {s} lane {l}"
        );
    }
    let f = shfl_xor(&first, f_offset);
    let g = shfl_xor(&first, g_offset);
    let o = shfl_xor(&first, f_offset | g_offset);
    for l in 0..LANES {
        let j = l % CLUSTER_GROUP_LANES;
        if j >= units_per_group {
            continue;
        }
        let unit_in_group = if levels == 4 {
            ((j & 1) << 1) | (j >> 1)
        } else {
            j
        };
        let unit = group_of(l) * units_per_group + unit_in_group;
        for (gate, got) in [first[l], f[l], g[l], o[l]].into_iter().enumerate() {
            let row = unit * GATES + gate;
            let c: [f32; 16] = std::array::from_fn(|k| chain(row, k));
            assert_eq!(
                got.to_bits(),
                tree16(&c).to_bits(),
                "size {s} lane {l} unit {unit} gate {gate}"
            );
        }
    }
}

#[test]
fn every_cell_lane_gets_the_tree_of_each_gate_of_its_unit() {
    for warp in [0, 3, 7] {
        check_warp::<16>(2, warp);
        check_warp::<8>(4, warp);
    }
}
