//! A lane-by-lane model of `recurrence_tiled.cu`'s dot-product reduction (CPU only): the
//! transpose-reduce over the 16 chains of a half-warp for 8 windows, then the gather of a unit's
//! four gates across the halves, must give every owning lane exactly the fixed pairwise tree of
//! `numerics.cuh` for its unit, window and gate, and every (unit, window) cell of a warp must
//! have exactly one writer. TF32 mode (`numerics.cuh` section 8) likewise: lane `8 g + m`
//! computes the 16-term chain m of gate g's rows of both units, three levels sum the 8 chains of
//! its group and three shuffles gather a unit's four gates, which must give every owning lane
//! `tree8` of the 8 chains of its unit, window and gate, in the cell FP32 mode's lane owns.
//!
//! The model restates the kernel's index arithmetic (it cannot run CUDA); keep the two in step.

mod lane_model;

use lane_model::{
    HIDDEN, LANES, assert_tf32_shapes_visible, bit_reverse, check_staged_row, check_tf32_loads,
    gates_tf32, gather_level, load_phase_store_ways, reduce_chains_tf32, reduce_level, shfl_xor,
    tf32_dot, tf32_lane_chain, tree16, value,
};

/// Windows per tile (`TILED_WINDOWS`).
const TH: usize = 8;
/// Units per producer block (`TILED_UNITS_PER_BLOCK`).
const UPB: usize = 16;
/// Floats between staged rows in both modes (`BL_TILED_H_STRIDE`).
const H_STRIDE: usize = HIDDEN + UPB;

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

/// The rows `r[a][gate]` of a warp's units U_0 and U_1 and the staged h of its windows.
type Tf32Data = (Vec<Vec<Vec<f32>>>, Vec<Vec<f32>>);

/// TF32 mode's test data of one warp: the four gate rows of each of its two units and the
/// staged h of the 8 windows, `HIDDEN` order-sensitive values each.
fn tf32_data(seed: u64) -> Tf32Data {
    let row = |i: usize| -> Vec<f32> {
        (0..HIDDEN)
            .map(|k| value(seed * 1_000_003 + (i * HIDDEN + k) as u64))
            .collect()
    };
    let r = (0..2)
        .map(|a| (0..4).map(|gate| row(4 * a + gate)).collect())
        .collect();
    (r, (8..8 + TH).map(row).collect())
}

/// TF32 mode's reduction and gather (`bl_recurrence_tiled<true>`): lane `8 g + m` computes
/// chain m of row `r[a][g]` for each window and unit a, `bl_coop_reduce_chains_tf32<8>` on each
/// unit's dots, then level lane ^ 16 (upper: half = gate bit 1) over the two units and level
/// lane ^ 8 on the kept unit's dots of this gate and of gate ^ 2: the four gates each lane ends
/// with.
fn tf32_tiled(r: &[Vec<Vec<f32>>], h: &[Vec<f32>]) -> [[f32; 4]; LANES] {
    let mut acc = [[[0.0f32; TH]; LANES]; 2];
    for (a, acc_a) in acc.iter_mut().enumerate() {
        for (lane, lane_acc) in acc_a.iter_mut().enumerate() {
            let (g, m) = (lane / 8, lane % 8);
            for (n, slot) in lane_acc.iter_mut().enumerate() {
                *slot = tf32_lane_chain(&r[a][g], &h[n], m);
            }
        }
        reduce_chains_tf32(acc_a, TH);
    }
    let mut units: [[f32; 2]; LANES] = std::array::from_fn(|l| [acc[0][l][0], acc[1][l][0]]);
    let half: [bool; LANES] = std::array::from_fn(|l| l / 16 == 1);
    let odd: [bool; LANES] = std::array::from_fn(|l| (l / 8) & 1 != 0);
    let mut d1 = [[0.0f32; 1]; LANES];
    let mut d2 = [[0.0f32; 1]; LANES];
    let mut d3 = [[0.0f32; 1]; LANES];
    gather_level(&mut units, &mut d2, 2, 16, &half);
    gather_level(&mut units, &mut d1, 1, 8, &odd);
    gather_level(&mut d2, &mut d3, 1, 8, &odd);
    std::array::from_fn(|l| gates_tf32(l / 8, [units[l][0], d1[l][0], d2[l][0], d3[l][0]]))
}

#[test]
fn tf32_every_owning_lane_gets_the_tree8_of_its_unit_window_and_gate() {
    for seed in 0..16u64 {
        let (r, h) = tf32_data(seed);
        let gates = tf32_tiled(&r, &h);
        let mut writers = [[0usize; TH]; 2];
        for (lane, got) in gates.iter().enumerate() {
            // FP32 mode's ownership, the same in TF32 mode: unit `half`, window rev3(q & 7),
            // writer q < 8.
            let (half, q) = (lane / 16, lane % 16);
            let window = bit_reverse(q & (TH - 1), 3);
            for (gate, &got) in got.iter().enumerate() {
                assert_eq!(
                    got.to_bits(),
                    tf32_dot(&r[half][gate], &h[window]).to_bits(),
                    "seed {seed}, lane {lane}, unit {half}, window {window}, gate {gate}"
                );
            }
            if q < TH {
                writers[half][window] += 1;
            }
        }
        assert!(
            writers.iter().flatten().all(|&w| w == 1),
            "each (unit, window) has one writer: {writers:?}"
        );
    }
}

#[test]
fn tf32_the_values_make_the_tree_shape_visible() {
    // Sanity: for the test's data, the tree with its levels swapped, left-to-right summation
    // and FP32 mode's dot often give other bits than section 8's tree, so the test above pins
    // the tree's shape and the chains.
    let data: Vec<Tf32Data> = (0..16u64).map(tf32_data).collect();
    assert_tf32_shapes_visible(data.iter().flat_map(|(r, h)| {
        r.iter()
            .flatten()
            .flat_map(move |row| h.iter().map(move |window| (&row[..], &window[..])))
    }));
}

/// The staged hidden state (`exchange.cuh`'s layouts at the kernel's one stride): in both modes
/// every unit has its own float in its row (TF32 mode's padded row fills the stride); TF32
/// mode's padded rows give each 16-byte load phase of its 8-lane groups 8 distinct 4-bank
/// groups; every warp's stores of a load phase hit 32 distinct banks in both modes.
#[test]
fn the_staged_rows_are_one_to_one_and_conflict_free() {
    assert_eq!(UPB, bilstm_core::geometry::TILED_UNITS_PER_BLOCK);
    for padded in [false, true] {
        check_staged_row(padded, H_STRIDE);
        assert_eq!(
            load_phase_store_ways(TH, UPB, H_STRIDE, padded),
            1,
            "padded {padded}"
        );
    }
    check_tf32_loads();
    assert_eq!(
        2 * TH * H_STRIDE * 4,
        bilstm_core::plan::TILED_STATIC_SHARED_BYTES
    );
}
