//! A lane-by-lane model of `recurrence_tiled.cu`'s dot-product reduction (CPU only): the
//! transpose-reduce over the 16 chains of a half-warp for 8 windows, then the gather of a unit's
//! four gates across the halves, must give every owning lane exactly the fixed pairwise tree of
//! `numerics.cuh` for its unit, window and gate, and every (unit, window) cell of a warp must
//! have exactly one writer.
//!
//! The model restates the kernel's index arithmetic (it cannot run CUDA); keep the two in step.

mod lane_model;

use lane_model::{LANES, bit_reverse, reduce_level, shfl_xor, tree16, value};

/// Windows per tile (`TILED_WINDOWS`).
const TH: usize = 8;

#[test]
fn every_owning_lane_gets_the_tree_of_its_unit_window_and_gate() {
    assert_eq!(TH, bilstm_core::geometry::TILED_WINDOWS);
    assert_eq!(bilstm_core::geometry::TILED_UNITS_PER_BLOCK, 16);
    // chain(a, gate, window, q): chain q of gate `gate` of the warp's unit a for `window`.
    let chain = |a: usize, gate: usize, window: usize, q: usize| {
        value((a * 10_000 + gate * 1000 + window * 16 + q) as u64)
    };
    // Pair x = 2a + pp of lane (half s, chain q) holds gate 2 pp + s of unit a.
    let mut acc = [[[0.0f32; TH]; LANES]; 4];
    for (x, acc_x) in acc.iter_mut().enumerate() {
        let (a, pp) = (x / 2, x % 2);
        for (lane, lane_acc) in acc_x.iter_mut().enumerate() {
            let (s, q) = (lane / 16, lane % 16);
            for (n, slot) in lane_acc.iter_mut().enumerate() {
                *slot = chain(a, 2 * pp + s, n, q);
            }
        }
        // bl_coop_reduce_chains<8> (coop.cuh): offsets 1, 2, 4, 8 over 8, 4, 2, 1 values.
        reduce_level(acc_x, 8, 1);
        reduce_level(acc_x, 4, 2);
        reduce_level(acc_x, 2, 4);
        reduce_level(acc_x, 1, 8);
    }
    let v = |x: usize, lane: usize| acc[x][lane][0];
    // The gather across the halves.
    let send0: [f32; LANES] = std::array::from_fn(|l| if l / 16 == 1 { v(0, l) } else { v(2, l) });
    let send1: [f32; LANES] = std::array::from_fn(|l| if l / 16 == 1 { v(1, l) } else { v(3, l) });
    let recv0 = shfl_xor(&send0, 16);
    let recv1 = shfl_xor(&send1, 16);
    let mut writers = [[0usize; TH]; 2];
    for lane in 0..LANES {
        let (half, q) = (lane / 16, lane % 16);
        let gates = if half == 1 {
            [recv0[lane], v(2, lane), recv1[lane], v(3, lane)]
        } else {
            [v(0, lane), recv0[lane], v(1, lane), recv1[lane]]
        };
        // The kernel's ownership: unit `half`, window rev3(q & 7), writer q < 8.
        let unit = half;
        let window = bit_reverse(q & (TH - 1), 3);
        for (gate, &got) in gates.iter().enumerate() {
            let chains: [f32; 16] = std::array::from_fn(|c| chain(unit, gate, window, c));
            assert_eq!(
                got.to_bits(),
                tree16(&chains).to_bits(),
                "lane {lane}, unit {unit}, window {window}, gate {gate}"
            );
        }
        if q < TH {
            writers[unit][window] += 1;
        }
    }
    assert!(
        writers.iter().flatten().all(|&w| w == 1),
        "each (unit, window) has one writer: {writers:?}"
    );
}
