//! A lane-by-lane model of `recurrence_wide.cu`'s dot-product reduction (CPU only): the
//! transpose-reduce over the 16 chains of a half-warp and the gather of a unit's four gates
//! across the halves must give every owning lane exactly the fixed pairwise tree of
//! `numerics.cuh` for its window and gate, for tile heights 8, 16 and 32.
//!
//! The model restates the kernel's index arithmetic (it cannot run CUDA); keep the two in step.

/// `bl_dot_tree16`.
fn tree16(c: &[f32; 16]) -> f32 {
    let p0 = (c[0] + c[1]) + (c[2] + c[3]);
    let p1 = (c[4] + c[5]) + (c[6] + c[7]);
    let p2 = (c[8] + c[9]) + (c[10] + c[11]);
    let p3 = (c[12] + c[13]) + (c[14] + c[15]);
    (p0 + p1) + (p2 + p3)
}

/// `__shfl_xor_sync` over a warp: lane l gets `v[l ^ offset]`.
fn shfl_xor(v: &[f32; 32], offset: usize) -> [f32; 32] {
    std::array::from_fn(|l| v[l ^ offset])
}

/// `bl_reduce_level<N, OFFSET>` applied to every lane's array.
fn reduce_level(v: &mut [[f32; 32]; 32], n: usize, offset: usize) {
    if n == 1 {
        let mine: [f32; 32] = std::array::from_fn(|l| v[l][0]);
        let other = shfl_xor(&mine, offset);
        for l in 0..32 {
            v[l][0] = mine[l] + other[l];
        }
        return;
    }
    for i in 0..n / 2 {
        let upper: [bool; 32] = std::array::from_fn(|l| (l % 16) & offset != 0);
        let send: [f32; 32] =
            std::array::from_fn(|l| if upper[l] { v[l][i] } else { v[l][i + n / 2] });
        let keep: [f32; 32] =
            std::array::from_fn(|l| if upper[l] { v[l][i + n / 2] } else { v[l][i] });
        let recv = shfl_xor(&send, offset);
        for l in 0..32 {
            v[l][i] = keep[l] + recv[l];
        }
    }
}

fn reduce_chains(v: &mut [[f32; 32]; 32], th: usize) {
    reduce_level(v, th, 1);
    reduce_level(v, (th / 2).max(1), 2);
    reduce_level(v, (th / 4).max(1), 4);
    reduce_level(v, (th / 8).max(1), 8);
}

fn bit_reverse(x: usize, bits: u32) -> usize {
    (x as u32).reverse_bits().wrapping_shr(32 - bits) as usize
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

/// Deterministic, varied f32s (so a different summation order shows in the bits).
fn value(seed: u64) -> f32 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let unit = (z >> 40) as f32 / (1u64 << 24) as f32;
    (unit - 0.5) * 2.0f32.powi((z % 23) as i32 - 11)
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
