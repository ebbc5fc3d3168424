//! A lane-by-lane model of `recurrence_wide.cu`'s dot-product reduction (CPU only): the
//! transpose-reduce over the 16 chains of a half-warp and the gather of a unit's four gates
//! across the halves must give every owning lane exactly the fixed pairwise tree of
//! `numerics.cuh` for its window and gate, for tile heights 8, 16 and 32, and so must the
//! one-window path (`bl_recurrence_wide_one`: a butterfly over window 0 only), bit for bit equal
//! to the general path's writer. The load phase of `exchange.cuh` (`bl_exchange_issue` /
//! `bl_exchange_await`) must read every word it needs exactly once, and re-polling must wait
//! only as long as the slowest word.
//!
//! The model restates the kernel's index arithmetic (it cannot run CUDA); keep the two in step.

mod lane_model;

use lane_model::{
    BLOCK_THREADS, HIDDEN, LANES, bit_reverse, exchange_element, exchange_words_per_thread,
    reduce_level, repoll, shfl_xor, tree16, value,
};

/// Units per producer block (`WIDE_UNITS_PER_BLOCK`).
const UPB: usize = 8;

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
        let mut writers = vec![0usize; th];
        for lane in 0..32 {
            let half = lane / 16;
            let gates = if half == 1 {
                [recv[0][lane], mine[0][lane], recv[1][lane], mine[1][lane]]
            } else {
                [mine[0][lane], recv[0][lane], mine[1][lane], recv[1][lane]]
            };
            let (window, writer) = owner(th, lane);
            assert!(window < th);
            for (gate, &got) in gates.iter().enumerate() {
                let chains: [f32; 16] = std::array::from_fn(|q| chain(gate, window, q));
                let want = tree16(&chains);
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
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
            let writer = (0..LANES)
                .find(|&l| owner(th, l) == (0, true))
                .expect("window 0 has a writer");
            assert_eq!(
                general[writer].map(f32::to_bits),
                one[0].map(f32::to_bits),
                "seed {seed}, tile height {th}"
            );
        }
    }
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
