//! A lane-by-lane model of `recurrence_cluster.cu`'s dot-product reduction in its one- and
//! two-window kernels (CPU only), for both cluster sizes and both math modes: lane `j` of a row
//! group (16 lanes in FP32 mode, 8 in TF32 mode) computes chain `j` of each of the group's rows,
//! a transpose-reduce at lane offsets 1, 2, 4 (and 8 for 16 lanes) while rows remain and a
//! butterfly at the remaining offsets finishes the fixed tree (`bl_dot_tree16`, or
//! `bl_dot_tree8` in TF32 mode), and three exchanges bring a unit's four gates to its cell lane.
//! Each cell lane must hold exactly that tree for every gate of its unit, every unit of the
//! cluster must have exactly one cell lane, and the CTAs of a cluster must own disjoint units
//! covering all of them.
//!
//! The model restates the kernel's index arithmetic (it cannot run CUDA); keep the two in step.

// The model indexes lanes and rows the way the kernel does.
#![allow(clippy::needless_range_loop)]

mod lane_model;

use bilstm_core::geometry::{
    CLUSTER_GROUP_LANES, CLUSTER_SIZES, CLUSTER_THREADS, DOT_CHAIN_TERMS, DOT_CHAINS, GATE_ROWS,
    GATES, HIDDEN, TF32_DOT_CHAIN_TERMS, TF32_DOT_CHAINS,
};
use lane_model::{LANES, bit_reverse, reduce_level_lower, shfl_xor, tree8, tree16, value};

/// A math mode's dot-product numerics as the kernel's row groups realise them.
#[derive(Clone, Copy, Debug)]
struct Mode {
    /// Lanes of a row group = chains of a dot (`LANES` in the kernel).
    lanes: usize,
    /// Terms of a chain (`TERMS`).
    terms: usize,
    /// The fixed tree over the chains.
    tree: fn(&[f32]) -> f32,
}

/// FP32 mode: `numerics.cuh` section 1.
const FP32: Mode = Mode {
    lanes: DOT_CHAINS,
    terms: DOT_CHAIN_TERMS,
    tree: |c| {
        let mut chains = [0.0f32; 16];
        chains.copy_from_slice(c);
        tree16(&chains)
    },
};
/// TF32 mode: `numerics.cuh` section 8.
const TF32: Mode = Mode {
    lanes: TF32_DOT_CHAINS,
    terms: TF32_DOT_CHAIN_TERMS,
    tree: |c| {
        let mut chains = [0.0f32; 8];
        chains.copy_from_slice(c);
        tree8(&chains)
    },
};

impl Mode {
    /// Row groups per CTA.
    fn groups_per_cta(self) -> usize {
        CLUSTER_THREADS / self.lanes
    }

    /// Rows per group for cluster size `s` (the kernel's `ROWS`).
    fn rows(self, s: usize) -> usize {
        GATE_ROWS / (s * self.groups_per_cta())
    }
}

/// The cell lanes' units: `(rank, thread) -> unit` for every cell lane of a cluster of size `s`,
/// as the kernel computes it.
fn cell_units(mode: Mode, s: usize) -> Vec<usize> {
    let rows = mode.rows(s);
    let levels = rows.trailing_zeros();
    let units_per_group = rows / GATES;
    let mut units = Vec::new();
    for rank in 0..s {
        for tid in 0..CLUSTER_THREADS {
            let lane = tid % mode.lanes;
            if lane >= units_per_group {
                continue;
            }
            let group = rank * mode.groups_per_cta() + tid / mode.lanes;
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
    assert_eq!(CLUSTER_GROUP_LANES, FP32.lanes);
    for mode in [FP32, TF32] {
        assert_eq!(mode.lanes * mode.terms, HIDDEN);
        for s in CLUSTER_SIZES {
            let r = mode.rows(s);
            assert!(
                [4, 8, 16].contains(&r),
                "{mode:?} size {s}: {r} rows a group"
            );
            assert!(
                r <= mode.lanes,
                "one transpose level per halving of the rows"
            );
            assert_eq!(s * mode.groups_per_cta() * r, GATE_ROWS);
            assert_eq!(r % GATES, 0);
            // R in registers: rows x terms floats per thread, the same in both modes.
            assert_eq!(r * mode.terms, if s == 2 { 128 } else { 64 });
        }
    }
}

#[test]
fn every_unit_has_exactly_one_cell_lane() {
    for mode in [FP32, TF32] {
        for s in CLUSTER_SIZES {
            let mut units = cell_units(mode, s);
            assert_eq!(units.len(), HIDDEN, "{mode:?} size {s}");
            units.sort_unstable();
            assert_eq!(units, (0..HIDDEN).collect::<Vec<_>>(), "{mode:?} size {s}");
        }
    }
}

/// Runs one warp (two or four groups) of cluster size `s` through the kernel's reduction in
/// `mode` and checks the cell lanes against the mode's tree.
fn check_warp<const W: usize>(mode: Mode, s: usize, warp: usize) {
    let rows = mode.rows(s);
    assert_eq!(rows, W);
    let levels = rows.trailing_zeros();
    let units_per_group = rows / GATES;
    let f_offset = 1usize << (levels - 1);
    let g_offset = 1usize << (levels - 2);
    // chains[row][j]: chain j of packed gate row `row` (order-sensitive values).
    let chain = |row: usize, j: usize| value((row * 16 + j) as u64 + 1000 * s as u64);
    let group_of = |lane: usize| warp * (LANES / mode.lanes) + lane / mode.lanes;
    // Lane j keeps row i ^ rev_L(j mod W) in slot i (the kernel's `order`).
    let mut v = [[0.0f32; W]; LANES];
    for l in 0..LANES {
        let j = l % mode.lanes;
        let order = bit_reverse(j & (W - 1), levels);
        for i in 0..W {
            v[l][i] = chain(group_of(l) * W + (i ^ order), j);
        }
    }
    // The kernel's bl_cl_lane_level at offsets 1 .. lanes / 2: transpose while rows remain, then
    // a butterfly.
    let mut offset = 1;
    while offset < mode.lanes {
        reduce_level_lower(&mut v, (W / offset).max(1), offset);
        offset *= 2;
    }
    let first: [f32; LANES] = std::array::from_fn(|l| v[l][0]);
    let tree_of = |row: usize| {
        let c: Vec<f32> = (0..mode.lanes).map(|k| chain(row, k)).collect();
        (mode.tree)(&c)
    };
    // Lane j holds row rev_L(j) of its group.
    for l in 0..LANES {
        let j = l % mode.lanes;
        let row = group_of(l) * W + bit_reverse(j % W, levels);
        assert_eq!(
            first[l].to_bits(),
            tree_of(row).to_bits(),
            "{mode:?} size {s} lane {l}"
        );
    }
    let f = shfl_xor(&first, f_offset);
    let g = shfl_xor(&first, g_offset);
    let o = shfl_xor(&first, f_offset | g_offset);
    for l in 0..LANES {
        let j = l % mode.lanes;
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
            assert_eq!(
                got.to_bits(),
                tree_of(row).to_bits(),
                "{mode:?} size {s} lane {l} unit {unit} gate {gate}"
            );
        }
    }
}

#[test]
fn every_cell_lane_gets_the_tree_of_each_gate_of_its_unit() {
    for warp in [0, 3, 7] {
        check_warp::<16>(FP32, 2, warp);
        check_warp::<8>(FP32, 4, warp);
        check_warp::<8>(TF32, 2, warp);
        check_warp::<4>(TF32, 4, warp);
    }
}

/// The test values tell tree shapes apart: for most rows, summing the chains left to right
/// gives other bits than the fixed trees, so a lane mapping that realised another shape would
/// fail above.
#[test]
fn the_test_values_tell_tree_shapes_apart() {
    for (mode, s) in [(FP32, 2), (TF32, 4)] {
        let differing = (0..GATE_ROWS)
            .filter(|&row| {
                let c: Vec<f32> = (0..mode.lanes)
                    .map(|j| value((row * 16 + j) as u64 + 1000 * s as u64))
                    .collect();
                let left_to_right = c.iter().fold(0.0f32, |a, b| a + b);
                left_to_right.to_bits() != (mode.tree)(&c).to_bits()
            })
            .count();
        assert!(differing > GATE_ROWS / 4, "{mode:?}: {differing} rows");
    }
}
