//! A lane-by-lane model of `recurrence_wide.cu`'s dot-product reduction (CPU only): the
//! transpose-reduce over the 16 chains of a half-warp and the gather of a unit's four gates
//! across the halves must give every owning lane exactly the fixed pairwise tree of
//! `numerics.cuh` for its window and gate, for tile heights 8, 16 and 32, and so must the
//! one-window path (`bl_recurrence_wide_one`: a butterfly over window 0 only), bit for bit equal
//! to the general path's writer. TF32 mode (`numerics.cuh` section 8) likewise: lane
//! `8 g + m` computes the 16-term chain m of gate g's row, three levels sum the 8 chains of its
//! group and two gather levels bring a window's four gates together, which must give every
//! owning lane `tree8` of the 8 chains of its window and gate, in the window FP32 mode's lane
//! owns, on both paths. The load phase of `exchange.cuh` (`bl_exchange_issue` /
//! `bl_exchange_await`) must read every word it needs exactly once, and re-polling must wait
//! only as long as the slowest word.
//!
//! The model restates the kernel's index arithmetic (it cannot run CUDA); keep the two in step.

mod lane_model;

use lane_model::{
    BLOCK_THREADS, HIDDEN, LANES, STAGE_PADDED_ROW, assert_tf32_shapes_visible, bit_reverse,
    check_staged_row, check_tf32_loads, exchange_element, exchange_words_per_thread, gates_tf32,
    gather_level, load_phase_store_ways, reduce_chains_tf32, reduce_level, repoll, shfl_xor,
    tf32_dot, tf32_lane_chain, tree16, value,
};

/// Units per producer block (`WIDE_UNITS_PER_BLOCK`).
const UPB: usize = 8;
/// Floats between FP32 mode's staged rows (`BL_WIDE_H_STRIDE`).
const H_STRIDE: usize = HIDDEN + UPB;
/// Floats between TF32 mode's padded staged rows (`BL_WIDE_TF32_H_STRIDE`).
const TF32_H_STRIDE: usize = STAGE_PADDED_ROW + UPB;
/// Windows of a stage (`WIDE_MAX_TILE_HEIGHT`).
const MAX_TILE_HEIGHT: usize = 32;

/// `bl_coop_reduce_chains<TH>` (`coop.cuh`); `th == 1` is the one-window path's butterfly.
fn reduce_chains(v: &mut [[f32; 32]; LANES], th: usize) {
    reduce_level(v, th, 1);
    reduce_level(v, (th / 2).max(1), 2);
    reduce_level(v, (th / 4).max(1), 4);
    reduce_level(v, (th / 8).max(1), 8);
}

/// The kernel's owned window and writer flag of a lane.
fn owner(th: usize, lane: usize) -> (usize, bool) {
    let (half, q) = (lane / 16, lane % 16);
    match th {
        32 => (2 * bit_reverse(q, 4) + half, true),
        16 => (bit_reverse(q, 4), half == 0),
        _ => (bit_reverse(q & 7, 3), half == 0 && q < 8),
    }
}

#[test]
fn every_owning_lane_gets_the_tree_of_its_window_and_gate() {
    for th in [8usize, 16, 32] {
        // chain[gate][window][q]: partial chain q of gate `gate` for window `window`.
        let chain = |gate: usize, window: usize, q: usize| {
            value((gate * 1000 + window * 16 + q) as u64 + th as u64 * 100_000)
        };
        // Pair p of lane (half s, chain q) holds gate 2p + s.
        let mut acc = [[[0.0f32; 32]; 32]; 2];
        for (p, acc_p) in acc.iter_mut().enumerate() {
            for (lane, lane_acc) in acc_p.iter_mut().enumerate() {
                let (s, q) = (lane / 16, lane % 16);
                for (n, slot) in lane_acc.iter_mut().enumerate().take(th) {
                    *slot = chain(2 * p + s, n, q);
                }
            }
            reduce_chains(acc_p, th);
        }
        // Gather across the halves.
        let pick = |p: usize, lane: usize, mine: bool| -> f32 {
            let half = lane / 16;
            if th == 32 {
                let idx = if mine { half } else { 1 - half };
                acc[p][lane][idx]
            } else {
                acc[p][lane][0]
            }
        };
        let mine: [[f32; 32]; 2] =
            std::array::from_fn(|p| std::array::from_fn(|l| pick(p, l, true)));
        let send: [[f32; 32]; 2] =
            std::array::from_fn(|p| std::array::from_fn(|l| pick(p, l, false)));
        let recv = [shfl_xor(&send[0], 16), shfl_xor(&send[1], 16)];
        let gates: [[f32; 4]; LANES] = std::array::from_fn(|lane| {
            if lane / 16 == 1 {
                [recv[0][lane], mine[0][lane], recv[1][lane], mine[1][lane]]
            } else {
                [mine[0][lane], recv[0][lane], mine[1][lane], recv[1][lane]]
            }
        });
        check_owners(th, &gates, |window, gate| {
            tree16(&std::array::from_fn(|q| chain(gate, window, q)))
        });
    }
}

/// The lane that writes window 0 at tile height `th` (there is exactly one).
fn window0_writer(th: usize) -> usize {
    let writers: Vec<usize> = (0..LANES).filter(|&l| owner(th, l) == (0, true)).collect();
    assert_eq!(
        writers.len(),
        1,
        "tile height {th}: window 0's writers {writers:?}"
    );
    writers[0]
}

/// The general path's writer of window 0 has the one-window path's bits.
fn assert_same_gates(general: &[f32; 4], one: &[f32; 4], seed: u64, th: usize) {
    assert_eq!(
        general.map(f32::to_bits),
        one.map(f32::to_bits),
        "seed {seed}, tile height {th}"
    );
}

/// Each lane's four gates (`gates[lane]`) against `want(window, gate)` for the window the lane
/// owns (`owner`: the same in both modes), and exactly one writer per window of the tile.
fn check_owners(th: usize, gates: &[[f32; 4]; LANES], want: impl Fn(usize, usize) -> f32) {
    let mut writers = vec![0usize; th];
    for (lane, got) in gates.iter().enumerate() {
        let (window, writer) = owner(th, lane);
        assert!(window < th);
        for (gate, &got) in got.iter().enumerate() {
            assert_eq!(
                got.to_bits(),
                want(window, gate).to_bits(),
                "th {th}, lane {lane}, window {window}, gate {gate}"
            );
        }
        if writer {
            writers[window] += 1;
        }
    }
    assert!(
        writers.iter().all(|&w| w == 1),
        "th {th}: each window has one writer: {writers:?}"
    );
}

#[test]
fn the_values_make_the_summation_order_visible() {
    // Sanity: for these values plain left-to-right summation usually differs from the tree,
    // so the test above really pins the tree (and not just the set of terms).
    let differing = (0..64u64)
        .filter(|&s| {
            let c: [f32; 16] = std::array::from_fn(|q| value(q as u64 + 16 * s));
            c.iter().fold(0.0f32, |a, &b| a + b).to_bits() != tree16(&c).to_bits()
        })
        .count();
    assert!(
        differing > 16,
        "only {differing} of 64 sets are order-sensitive"
    );
}

/// The reduction and gather of the general path for tile height `th`, with partial chains
/// `chain(gate, window, q)`: the four gates each lane ends with.
fn general_path(th: usize, chain: &dyn Fn(usize, usize, usize) -> f32) -> [[f32; 4]; LANES] {
    let mut acc = [[[0.0f32; 32]; LANES]; 2];
    for (p, acc_p) in acc.iter_mut().enumerate() {
        for (lane, lane_acc) in acc_p.iter_mut().enumerate() {
            let (s, q) = (lane / 16, lane % 16);
            for (n, slot) in lane_acc.iter_mut().enumerate().take(th) {
                *slot = chain(2 * p + s, n, q);
            }
        }
        reduce_chains(acc_p, th);
    }
    let pick = |p: usize, lane: usize, mine: bool| -> f32 {
        let half = lane / 16;
        if th == 32 {
            acc[p][lane][if mine { half } else { 1 - half }]
        } else {
            acc[p][lane][0]
        }
    };
    gather(
        std::array::from_fn(|p| std::array::from_fn(|l| pick(p, l, true))),
        std::array::from_fn(|p| std::array::from_fn(|l| pick(p, l, false))),
    )
}

/// `bl_wide_gather`: pair 0 holds gate 0 + half, pair 1 gate 2 + half.
fn gather(mine: [[f32; LANES]; 2], send: [[f32; LANES]; 2]) -> [[f32; 4]; LANES] {
    let recv = [shfl_xor(&send[0], 16), shfl_xor(&send[1], 16)];
    std::array::from_fn(|lane| {
        if lane / 16 == 1 {
            [recv[0][lane], mine[0][lane], recv[1][lane], mine[1][lane]]
        } else {
            [mine[0][lane], recv[0][lane], mine[1][lane], recv[1][lane]]
        }
    })
}

/// `bl_recurrence_wide_one`'s reduction: each lane's two chains of window 0 only, reduced with
/// tile height 1 (a butterfly), then the same gather.
fn one_window_path(chain: &dyn Fn(usize, usize, usize) -> f32) -> [[f32; 4]; LANES] {
    let mut acc = [[[0.0f32; 32]; LANES]; 2];
    for (p, acc_p) in acc.iter_mut().enumerate() {
        for (lane, lane_acc) in acc_p.iter_mut().enumerate() {
            let (s, q) = (lane / 16, lane % 16);
            lane_acc[0] = chain(2 * p + s, 0, q);
        }
        reduce_chains(acc_p, 1);
    }
    let v: [[f32; LANES]; 2] = std::array::from_fn(|p| std::array::from_fn(|l| acc[p][l][0]));
    gather(v, v)
}

#[test]
fn the_one_window_path_gives_the_owner_the_tree_and_the_general_paths_bits() {
    for seed in 0..64u64 {
        let chain = move |gate: usize, window: usize, q: usize| {
            value(seed * 7919 + (gate * 1000 + window * 16 + q) as u64)
        };
        let one = one_window_path(&chain);
        // Lane 0 (the owner and writer) has the fixed tree of every gate of window 0; in fact
        // every lane does (the butterfly leaves the sum everywhere).
        for (lane, gates) in one.iter().enumerate() {
            for (gate, &got) in gates.iter().enumerate() {
                let chains: [f32; 16] = std::array::from_fn(|q| chain(gate, 0, q));
                assert_eq!(
                    got.to_bits(),
                    tree16(&chains).to_bits(),
                    "seed {seed} lane {lane} gate {gate}"
                );
            }
        }
        // The general path's writer of window 0 gets the same bits at every tile height.
        for th in [8usize, 16, 32] {
            let general = general_path(th, &chain);
            assert_same_gates(&general[window0_writer(th)], &one[0], seed, th);
        }
    }
}

/// TF32 mode's test data of one warp (unit U): its four gate rows `r[gate]` and the staged h of
/// `windows` windows, `HIDDEN` order-sensitive values each.
fn tf32_data(seed: u64, windows: usize) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let row = |i: usize| -> Vec<f32> {
        (0..HIDDEN)
            .map(|k| value(seed * 1_000_003 + (i * HIDDEN + k) as u64))
            .collect()
    };
    (
        (0..4).map(row).collect(),
        (4..4 + windows).map(row).collect(),
    )
}

/// `bl_wide_gather_tf32<N>`: level lane ^ 8 (upper: gate bit 0) over `n` windows, then level
/// lane ^ 16 (upper: gate bit 1) over the kept ones, on this gate's dots and on gate ^ 1's.
fn tf32_gather(n: usize, mut d: [[f32; 32]; LANES]) -> [[f32; 4]; LANES] {
    let kept = (n / 2).max(1);
    let gate_bit = |bit: usize| -> [bool; LANES] { std::array::from_fn(|l| (l / 8) & bit != 0) };
    let mut d1 = [[0.0f32; 2]; LANES];
    let mut d2 = [[0.0f32; 1]; LANES];
    let mut d3 = [[0.0f32; 1]; LANES];
    gather_level(&mut d, &mut d1, n, 8, &gate_bit(1));
    gather_level(&mut d, &mut d2, kept, 16, &gate_bit(2));
    gather_level(&mut d1, &mut d3, kept, 16, &gate_bit(2));
    std::array::from_fn(|l| gates_tf32(l / 8, [d[l][0], d1[l][0], d2[l][0], d3[l][0]]))
}

/// TF32 mode's general path for tile height `th` (`bl_recurrence_wide<TH, true>`): lane
/// `8 g + m` computes chain m of row `r[g]` for every window, `bl_coop_reduce_chains_tf32<TH>`,
/// then the gather: the four gates each lane ends with.
fn tf32_general_path(th: usize, r: &[Vec<f32>], h: &[Vec<f32>]) -> [[f32; 4]; LANES] {
    let mut acc = [[0.0f32; 32]; LANES];
    for (lane, lane_acc) in acc.iter_mut().enumerate() {
        let (g, m) = (lane / 8, lane % 8);
        for (n, slot) in lane_acc.iter_mut().enumerate().take(th) {
            *slot = tf32_lane_chain(&r[g], &h[n], m);
        }
    }
    reduce_chains_tf32(&mut acc, th);
    tf32_gather(th / 8, acc)
}

/// TF32 mode's one-window path (`bl_recurrence_wide_one<true>`): each lane's chain of window 0,
/// the butterfly (tile height 1), then the gather with one window.
fn tf32_one_window_path(r: &[Vec<f32>], h: &[Vec<f32>]) -> [[f32; 4]; LANES] {
    let mut acc = [[0.0f32; 32]; LANES];
    for (lane, lane_acc) in acc.iter_mut().enumerate() {
        lane_acc[0] = tf32_lane_chain(&r[lane / 8], &h[0], lane % 8);
    }
    reduce_chains_tf32(&mut acc, 1);
    tf32_gather(1, acc)
}

#[test]
fn tf32_every_owning_lane_gets_the_tree8_of_its_window_and_gate() {
    for th in [8usize, 16, 32] {
        for seed in 0..8u64 {
            let (r, h) = tf32_data(seed * 100 + th as u64, th);
            let gates = tf32_general_path(th, &r, &h);
            check_owners(th, &gates, |window, gate| tf32_dot(&r[gate], &h[window]));
        }
    }
}

#[test]
fn tf32_the_one_window_path_gives_every_lane_the_tree8_and_the_general_paths_bits() {
    for seed in 0..64u64 {
        let (r, h) = tf32_data(seed, 32);
        let one = tf32_one_window_path(&r, &h);
        // Every lane (lane 0 is the owner and writer) has the tree of every gate of window 0.
        for (lane, gates) in one.iter().enumerate() {
            for (gate, &got) in gates.iter().enumerate() {
                assert_eq!(
                    got.to_bits(),
                    tf32_dot(&r[gate], &h[0]).to_bits(),
                    "seed {seed} lane {lane} gate {gate}"
                );
            }
        }
        for th in [8usize, 16, 32] {
            let general = tf32_general_path(th, &r, &h[..th]);
            assert_same_gates(&general[window0_writer(th)], &one[0], seed, th);
        }
    }
}

#[test]
fn tf32_the_values_make_the_tree_shape_visible() {
    // Sanity: for the TF32 tests' data, the tree with its levels swapped, left-to-right
    // summation and FP32 mode's dot often give other bits than section 8's tree, so the tests
    // above pin the tree's shape and the chains (and not just the set of terms).
    let data: Vec<_> = (0..8u64)
        .map(|seed| tf32_data(seed * 100 + 32, 32))
        .collect();
    assert_tf32_shapes_visible(data.iter().flat_map(|(r, h)| {
        r.iter()
            .flat_map(move |row| h.iter().map(move |window| (&row[..], &window[..])))
    }));
}

#[test]
fn the_load_phase_reads_every_word_once() {
    // Tile heights 8, 16, 32 with the wide units per block, 8 with the tiled ones, and the
    // one-window path (1 window of a tile of any height).
    for (windows, upb) in [(1usize, UPB), (8, UPB), (16, UPB), (32, UPB), (8, 16)] {
        let producers = HIDDEN / upb;
        let block_stride = 4096;
        let mut seen = vec![0usize; producers * windows * upb];
        let words = exchange_words_per_thread(windows);
        for t in 0..BLOCK_THREADS {
            for i in 0..words {
                if let Some(((producer, window, unit), offset)) =
                    exchange_element(t + i * BLOCK_THREADS, windows, upb, block_stride)
                {
                    assert!(producer < producers && window < windows && unit < upb);
                    assert_eq!(offset, producer * block_stride + window * upb + unit);
                    seen[(producer * windows + window) * upb + unit] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "windows {windows}, upb {upb}");
        assert!(words <= 32, "the pending mask holds every word");
    }
    // The one-window path reads one word on each of threads 0..127 and none on 128..255.
    assert_eq!(exchange_words_per_thread(1), 1);
    assert!(exchange_element(HIDDEN, 1, UPB, 1).is_none());
}

#[test]
fn re_polling_waits_for_the_slowest_word_only() {
    // Word i ready from its ready_at[i]-th load: a word-by-word wait costs the sum of the
    // delays in the worst case; the re-poll passes cost their maximum, and stage every word.
    for ready_at in [
        vec![0, 0, 0, 0],
        vec![3, 0, 2, 1],
        vec![0, 5, 5, 0],
        vec![1; 16],
        vec![7],
    ] {
        let (staged, passes) = repoll(&ready_at);
        assert_eq!(
            passes,
            ready_at.iter().copied().max().unwrap_or(0),
            "{ready_at:?}"
        );
        let want: Vec<f32> = (0..ready_at.len()).map(|i| i as f32).collect();
        assert_eq!(staged, want);
    }
}

/// The staged hidden state (`exchange.cuh`'s layouts at the kernel's strides): in both modes
/// every unit has its own float in its row; TF32 mode's padded rows give each 16-byte load
/// phase of its 8-lane groups 8 distinct 4-bank groups; every warp's stores of a load phase hit
/// 32 distinct banks in both modes, at tile heights 8, 16 and 32 and on the one-window path;
/// the entry's one array holds two stages of 32 rows of the longer stride.
#[test]
fn the_staged_rows_are_one_to_one_and_conflict_free() {
    assert_eq!(MAX_TILE_HEIGHT, bilstm_core::geometry::WIDE_MAX_TILE_HEIGHT);
    assert_eq!(UPB, bilstm_core::geometry::WIDE_UNITS_PER_BLOCK);
    for (padded, stride) in [(false, H_STRIDE), (true, TF32_H_STRIDE)] {
        check_staged_row(padded, stride);
        for windows in [1, 8, 16, 32] {
            assert_eq!(
                load_phase_store_ways(windows, UPB, stride, padded),
                1,
                "padded {padded}, windows {windows}"
            );
        }
    }
    check_tf32_loads();
    assert_eq!(
        2 * MAX_TILE_HEIGHT * H_STRIDE.max(TF32_H_STRIDE) * 4,
        bilstm_core::plan::WIDE_STATIC_SHARED_BYTES
    );
}
