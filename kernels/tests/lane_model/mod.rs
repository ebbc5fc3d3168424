//! Shared pieces of the lane-by-lane CPU models of the recurrence kernels' dot-product
//! reductions (`wide_mapping.rs`, `tiled_mapping.rs`, `resident_mapping.rs`, ...): the fixed
//! trees of `numerics.cuh`, a warp shuffle, bit reversal, the cooperative kernels' TF32-mode
//! levels (`coop.cuh`), their load phase and staged rows with its shared-memory banks
//! (`exchange.cuh`) and order-sensitive test values.

#![allow(dead_code)]

/// Lanes per warp.
pub const LANES: usize = 32;

/// `bl_dot_tree16`: the fixed pairwise tree over 16 chains.
pub fn tree16(c: &[f32; 16]) -> f32 {
    let p0 = (c[0] + c[1]) + (c[2] + c[3]);
    let p1 = (c[4] + c[5]) + (c[6] + c[7]);
    let p2 = (c[8] + c[9]) + (c[10] + c[11]);
    let p3 = (c[12] + c[13]) + (c[14] + c[15]);
    (p0 + p1) + (p2 + p3)
}

/// `bl_dot_tree8`: TF32 mode's fixed pairwise tree over 8 chains (`numerics.cuh` section 8).
pub fn tree8(c: &[f32; 8]) -> f32 {
    ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7]))
}

/// `bl_dot_chain<N>`: one ascending FMA chain over `r`, `h`, from `start`.
pub fn chain(r: &[f32], h: &[f32], start: f32) -> f32 {
    r.iter().zip(h).fold(start, |c, (a, b)| a.mul_add(*b, c))
}

/// `__shfl_xor_sync` over a warp: lane `l` gets `v[l ^ offset]`.
pub fn shfl_xor(v: &[f32; LANES], offset: usize) -> [f32; LANES] {
    std::array::from_fn(|l| v[l ^ offset])
}

/// `bl_bit_reverse`: the low `bits` bits of `x`, reversed.
pub fn bit_reverse(x: usize, bits: u32) -> usize {
    (x as u32).reverse_bits().wrapping_shr(32 - bits) as usize
}

/// `numerics.cuh` section 8, TF32 mode's recurrent dot of row `r` with `h` (`HIDDEN` terms
/// each): `tree8` of the 8 chains of 16 terms, chain m over k = 16m .. 16m+15 from 0.0.
pub fn tf32_dot(r: &[f32], h: &[f32]) -> f32 {
    tree8(&std::array::from_fn(|m| {
        chain(&r[16 * m..16 * m + 16], &h[16 * m..16 * m + 16], 0.0)
    }))
}

/// `bl_coop_dot_chain_tf32` (`coop.cuh`): chain `m` of row `r` with `h` as a cooperative
/// kernel's lane computes it, the 8 terms of its second part continuing from its first part's.
pub fn tf32_lane_chain(r: &[f32], h: &[f32], m: usize) -> f32 {
    let (a, b) = (16 * m, 16 * m + 8);
    chain(&r[b..b + 8], &h[b..b + 8], chain(&r[a..b], &h[a..b], 0.0))
}

/// Whether three other ways of summing row `r` with `h` give other bits than [`tf32_dot`]: the
/// 8 chains added in the tree with its levels swapped (`((c0+c4)+(c2+c6))+((c1+c5)+(c3+c7))`:
/// shuffle offsets 4, 2, 1 instead of 1, 2, 4), added left to right, and FP32 mode's dot
/// ([`tree16`] of 16 chains of 8 terms).
pub fn tf32_other_shapes_differ(r: &[f32], h: &[f32]) -> [bool; 3] {
    let c: [f32; 8] =
        std::array::from_fn(|m| chain(&r[16 * m..16 * m + 16], &h[16 * m..16 * m + 16], 0.0));
    let swapped = ((c[0] + c[4]) + (c[2] + c[6])) + ((c[1] + c[5]) + (c[3] + c[7]));
    let left_to_right = c.iter().fold(0.0f32, |s, &x| s + x);
    let fp32 = tree16(&std::array::from_fn(|j| {
        chain(&r[8 * j..8 * j + 8], &h[8 * j..8 * j + 8], 0.0)
    }));
    let want = tree8(&c).to_bits();
    [swapped, left_to_right, fp32].map(|x| x.to_bits() != want)
}

/// Asserts that for more than a quarter of the (row, h) sets each of
/// [`tf32_other_shapes_differ`]'s three other summations gives other bits than [`tf32_dot`], so
/// that a lane model's bitwise check pins the tree's shape and the chains, not just the set of
/// terms.
pub fn assert_tf32_shapes_visible<'a>(sets: impl IntoIterator<Item = (&'a [f32], &'a [f32])>) {
    let mut differing = [0usize; 3];
    let mut count = 0;
    for (row, window) in sets {
        for (n, d) in differing
            .iter_mut()
            .zip(tf32_other_shapes_differ(row, window))
        {
            *n += usize::from(d);
        }
        count += 1;
    }
    assert!(
        differing.iter().all(|&d| d * 4 > count),
        "only {differing:?} of {count} sets are order-sensitive"
    );
}

/// A level's pair `i` of `v[l][0 .. n)`: what each lane sends (the lower half's value when
/// `upper[l]`, else the upper half's) and what it keeps (the other).
fn send_keep<const W: usize>(
    v: &[[f32; W]; LANES],
    i: usize,
    n: usize,
    upper: &[bool; LANES],
) -> ([f32; LANES], [f32; LANES]) {
    let (lo, hi) = (i, i + n / 2);
    (
        std::array::from_fn(|l| if upper[l] { v[l][lo] } else { v[l][hi] }),
        std::array::from_fn(|l| if upper[l] { v[l][hi] } else { v[l][lo] }),
    )
}

/// One transpose-reduce level over `n` values per lane with partner offset `offset` (the
/// kernels' `*_reduce_level<N, OFFSET>`): lanes whose chain index (`lane % 16`) has the
/// `offset` bit keep the upper half of `v[0 .. n)`, the others the lower half, and add the
/// partner's copy of it; `n == 1` adds the partner's single value.
pub fn reduce_level<const W: usize>(v: &mut [[f32; W]; LANES], n: usize, offset: usize) {
    if n == 1 {
        let mine: [f32; LANES] = std::array::from_fn(|l| v[l][0]);
        let other = shfl_xor(&mine, offset);
        for l in 0..LANES {
            v[l][0] = mine[l] + other[l];
        }
        return;
    }
    let upper: [bool; LANES] = std::array::from_fn(|l| (l % 16) & offset != 0);
    for i in 0..n / 2 {
        let (send, keep) = send_keep(v, i, n, &upper);
        let recv = shfl_xor(&send, offset);
        for l in 0..LANES {
            v[l][i] = keep[l] + recv[l];
        }
    }
}

/// `bl_coop_reduce_chains_tf32<TH>` (`coop.cuh`): TF32 mode's levels over the 8 chains of an
/// 8-lane group (chain `lane % 8`; [`reduce_level`]'s `lane % 16` has the same bits 0..2),
/// offsets 1, 2, 4 over `th`, `th / 2`, `th / 4` values (at least 1: `th == 1` is a butterfly).
pub fn reduce_chains_tf32<const W: usize>(v: &mut [[f32; W]; LANES], th: usize) {
    reduce_level(v, th, 1);
    reduce_level(v, (th / 2).max(1), 2);
    reduce_level(v, (th / 4).max(1), 4);
}

/// `bl_coop_gather_level<N, OFFSET>` (`coop.cuh`, TF32 mode): lane `l` keeps the upper half of
/// `v[l][0 .. n)` when `upper[l]`, else the lower half (into `v[l][0 .. n / 2)`), and receives
/// the partner's (`l ^ offset`) values of the kept half into `t[l][0 .. n / 2)`; `n == 1`:
/// `t[l][0]` is the partner's `v[l][0]`.
pub fn gather_level<const W: usize, const T: usize>(
    v: &mut [[f32; W]; LANES],
    t: &mut [[f32; T]; LANES],
    n: usize,
    offset: usize,
    upper: &[bool; LANES],
) {
    if n == 1 {
        let mine: [f32; LANES] = std::array::from_fn(|l| v[l][0]);
        let recv = shfl_xor(&mine, offset);
        for l in 0..LANES {
            t[l][0] = recv[l];
        }
        return;
    }
    for i in 0..n / 2 {
        let (send, keep) = send_keep(v, i, n, upper);
        let recv = shfl_xor(&send, offset);
        for l in 0..LANES {
            v[l][i] = keep[l];
            t[l][i] = recv[l];
        }
    }
}

/// `bl_coop_gates_tf32` (`coop.cuh`): the gates (i, f, g, o) from a lane's dots `d[x]` of gate
/// `gate ^ x`, by the kernel's selects.
pub fn gates_tf32(gate: usize, d: [f32; 4]) -> [f32; 4] {
    let (odd, high) = (gate & 1 != 0, gate & 2 != 0);
    let e = if odd { [d[1], d[0], d[3], d[2]] } else { d };
    if high { [e[2], e[3], e[0], e[1]] } else { e }
}

/// The cluster kernel's select-free level (`bl_cl_reduce_level`): every lane keeps `v[0 .. n/2)`
/// and adds the partner's `v[n/2 .. n)` (each lane's rows stored in the permuted order that makes
/// that the same as [`reduce_level`]'s selection); `n == 1` adds the partner's single value.
pub fn reduce_level_lower<const W: usize>(v: &mut [[f32; W]; LANES], n: usize, offset: usize) {
    if n == 1 {
        return reduce_level(v, 1, offset);
    }
    for i in 0..n / 2 {
        let send: [f32; LANES] = std::array::from_fn(|l| v[l][i + n / 2]);
        let recv = shfl_xor(&send, offset);
        for l in 0..LANES {
            v[l][i] += recv[l];
        }
    }
}

/// Deterministic, varied f32s over many binades (so a different summation order shows in the
/// bits).
pub fn value(seed: u64) -> f32 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let unit = (z >> 40) as f32 / (1u64 << 24) as f32;
    (unit - 0.5) * 2.0f32.powi((z % 23) as i32 - 11)
}

/// Threads per block (`BILSTM_BLOCK_THREADS`).
pub const BLOCK_THREADS: usize = 256;

/// Hidden units (`BILSTM_HIDDEN`).
pub const HIDDEN: usize = 128;

/// `bl_exchange_words_per_thread<WINDOWS>` (`exchange.cuh`): words each thread of a load phase
/// over `windows` windows reads.
pub fn exchange_words_per_thread(windows: usize) -> usize {
    (windows * HIDDEN).div_ceil(BLOCK_THREADS)
}

/// `bl_exchange_element<WINDOWS, UPB>` (`exchange.cuh`): element `e` of a load phase over
/// `windows` windows of producers owning `upb` units each, as (producer, window, unit), and its
/// word offset from the slot base for producer stride `block_stride`; `None` past the
/// `windows * HIDDEN` elements.
pub fn exchange_element(
    e: usize,
    windows: usize,
    upb: usize,
    block_stride: usize,
) -> Option<((usize, usize, usize), usize)> {
    if e >= windows * HIDDEN {
        return None;
    }
    let (producer, window, unit) = (e / (windows * upb), (e / upb) % windows, e % upb);
    Some((
        (producer, window, unit),
        producer * block_stride + window * upb + unit,
    ))
}

/// Replays `bl_exchange_issue` + `bl_exchange_await` for one thread whose word `i` carries the
/// wanted flag from poll `ready_at[i]` on (0: already at the first load): returns the value
/// staged for each word and the passes the await loop made. The values are the words' own
/// (here: `i` as f32), so only the waiting differs from a word-by-word wait.
pub fn repoll(ready_at: &[usize]) -> (Vec<f32>, usize) {
    // polls[i]: how many times word i has been loaded so far (the issue is the first).
    let mut polls = vec![1usize; ready_at.len()];
    let mut pending: Vec<bool> = vec![true; ready_at.len()];
    let mut staged = vec![f32::NAN; ready_at.len()];
    let mut passes = 0;
    loop {
        for i in 0..ready_at.len() {
            // The load that returned is poll number polls[i] - 1 (0-based).
            if pending[i] && polls[i] > ready_at[i] {
                staged[i] = i as f32;
                pending[i] = false;
            }
        }
        if pending.iter().all(|p| !p) {
            return (staged, passes);
        }
        passes += 1;
        for i in 0..ready_at.len() {
            if pending[i] {
                polls[i] += 1;
            }
        }
    }
}

/// Units of a span of TF32 mode's padded staged rows (`BL_STAGE_SPAN`, `exchange.cuh`).
pub const STAGE_SPAN: usize = 32;
/// Floats from one span to the next (`BL_STAGE_SPAN_STRIDE`): a span and one 4-bank group.
pub const STAGE_SPAN_STRIDE: usize = STAGE_SPAN + 4;
/// Floats of a padded row (`BL_STAGE_PADDED_ROW`).
pub const STAGE_PADDED_ROW: usize = HIDDEN / STAGE_SPAN * STAGE_SPAN_STRIDE;

/// `bl_stage_h_index<PADDED>` (`exchange.cuh`): the float index of unit `u` in a staged row,
/// `u` itself unpadded (FP32 mode), `(u / 32) * 36 + u % 32` padded (TF32 mode).
pub fn stage_h_index(padded: bool, u: usize) -> usize {
    if padded {
        (u / STAGE_SPAN) * STAGE_SPAN_STRIDE + u % STAGE_SPAN
    } else {
        u
    }
}

/// Checks a mode's staged rows of `stride` floats: every unit has its own float, all of them
/// inside the row, and rows of 16-byte loads.
pub fn check_staged_row(padded: bool, stride: usize) {
    let mut seen = std::collections::HashSet::new();
    for u in 0..HIDDEN {
        let index = stage_h_index(padded, u);
        assert!(
            seen.insert(index),
            "padded {padded}: unit {u} shares float {index}"
        );
        assert!(
            index < stride,
            "padded {padded}: unit {u} at {index} >= {stride}"
        );
    }
    assert_eq!(stride % 4, 0, "float4 rows");
}

/// The 4-bank groups (16 bytes each, 8 to the 32 banks) that the 8 lanes `m` of one of TF32
/// mode's load phases hit with load `t` (0..3) of their chains (`bl_coop_chain_h_tf32`: chain m
/// is units 16m .. 16m+15, read from `stage_h_index(padded, 16 m)` on as four 16-byte loads;
/// the row's start is the same for every lane, a multiple of 4 floats), after checking that
/// each chain's 16 units are consecutive floats.
pub fn tf32_load_groups(padded: bool, t: usize) -> std::collections::HashSet<usize> {
    (0..8)
        .map(|m| {
            let start = stage_h_index(padded, 16 * m);
            for k in 0..16 {
                assert_eq!(stage_h_index(padded, 16 * m + k), start + k, "chain {m}");
            }
            (start + 4 * t) % 32 / 4
        })
        .collect()
}

/// Checks TF32 mode's reads of h: padded, each load phase's 8 lanes hit 8 distinct 4-bank
/// groups (one wavefront); unpadded they would hit 2 (4-way conflicts).
pub fn check_tf32_loads() {
    for t in 0..4 {
        assert_eq!(tf32_load_groups(true, t).len(), 8, "padded, load {t}");
        assert_eq!(tf32_load_groups(false, t).len(), 2, "unpadded, load {t}");
    }
}

/// The worst bank conflict of a load phase's stores (`bl_exchange_issue` / `bl_exchange_await`
/// over `windows` windows of producers of `upb` units, staged at `stage_h_index(padded, unit)`
/// in rows `stride` floats apart): over every warp and word `i` of its threads, the most distinct
/// floats that one of the 32 banks takes (1: every such store is one wavefront).
pub fn load_phase_store_ways(windows: usize, upb: usize, stride: usize, padded: bool) -> usize {
    let mut worst = 0;
    for warp in 0..BLOCK_THREADS / LANES {
        for i in 0..exchange_words_per_thread(windows) {
            let mut per_bank = vec![std::collections::HashSet::new(); 32];
            for lane in 0..LANES {
                let e = warp * LANES + lane + i * BLOCK_THREADS;
                if let Some(((producer, window, unit), _)) = exchange_element(e, windows, upb, 0) {
                    let float = window * stride + stage_h_index(padded, producer * upb + unit);
                    per_bank[float % 32].insert(float);
                }
            }
            worst = worst.max(per_bank.iter().map(|b| b.len()).max().unwrap_or(0));
        }
    }
    worst
}
