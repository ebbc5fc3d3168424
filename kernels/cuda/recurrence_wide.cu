// recurrence_wide.cu: the wide cooperative recurrence: one launch runs all steps of one
// direction of one layer for a range of tiles; blocks of a tile exchange hidden states
// through the flag-in-word protocol of exchange.cuh.
//
// Launch contract
// - Entry: bilstm_recurrence_wide(const bl_recurrence_coop_params p). COOPERATIVE: every block
//   of a tile spins on its partners, so the whole grid must be co-resident
//   (cuLaunchCooperativeKernel; the host keeps the grid within occupancy x SMs).
// - Grid: (tiles_in_launch * BILSTM_WIDE_BLOCKS_PER_TILE, 1, 1); block b of a tile is blockIdx.x
//   % BILSTM_WIDE_BLOCKS_PER_TILE, the tile is tile_offset + blockIdx.x /
//   BILSTM_WIDE_BLOCKS_PER_TILE. Block: (BILSTM_BLOCK_THREADS, 1, 1). Dynamic shared bytes: 0
//   (static: two hidden-state stages of BILSTM_WIDE_MAX_TILE_HEIGHT rows, sized for TF32 mode's
//   rows of 152 floats (exchange.cuh's padded row of 144 + BILSTM_WIDE_UNITS_PER_BLOCK); FP32
//   mode's rows are BILSTM_HIDDEN + BILSTM_WIDE_UNITS_PER_BLOCK = 136 floats: 38,912 bytes).
// - Parameters: bl_recurrence_coop_params (coop.cuh, 120 bytes; shared with
//   recurrence_tiled.cu), mirrored by bilstm_kernels::params::RecurrenceCoopParams.
// - Preconditions: tile_height is 8, 16 or 32 (<= BILSTM_WIDE_MAX_TILE_HEIGHT; the same compiled
//   kernel serves all three; any other value: every block returns at once, writing nothing); proj holds batch * frames * BILSTM_GATE_ROWS floats of this
//   direction (row = window * frames + frame, packed gate columns unit * 4 + gate); recurrent
//   holds this direction's packed recurrent rows [BILSTM_GATE_ROWS, BILSTM_HIDDEN]; bias its
//   packed combined bias [BILSTM_GATE_ROWS] (16-byte aligned); out holds batch * frames * 2 *
//   BILSTM_HIDDEN floats; exchange is the aligned base of a span laid out by
//   ExchangeLayout::wide(tile_height, tiles) (the strides passed here), zeroed on this stream
//   since the last pass that used these flags (clear.cu); error points at 4 ints, error[0]
//   zeroed with the exchange; layer * frames + frames fits 32 bits; tile_offset +
//   tiles_in_launch <= tiles and tiles * tile_height >= batch.
// - Postconditions: for every window w < batch of the launched tiles and every step s, with
//   frame t = s (direction 0) or frames - 1 - s (direction 1): out[(w * frames + t) * 256 +
//   direction * 128 + unit] = h_s(unit) for all 128 units; the exchange holds flagged words of
//   the last two steps. Windows >= batch (the last tile's tail) are neither read nor written
//   nor published, and no block waits for them. If a block waits longer than spin_timeout_ns
//   for a partner's word (or sees error[0] != 0 set by another block), it stops; the first
//   block to time out writes error = {BL_ERROR_PARTNER_LOST, layer, direction, step} and the
//   outputs of this launch are unspecified.
// - Numerics: numerics.cuh (DESIGN section 4), identical in every recurrence kernel. With
//   tf32_numerics = 0 (FP32 mode) the recurrent dot is section 1's (16 chains of 8 terms) and the
//   gate activations sections 3-5's; otherwise (TF32 mode) the dot is section 8's (8 chains of
//   16 terms) and the activations section 7's. The mode is picked once at entry; the host sets
//   tf32_numerics where the pass's projection is a TF32 tile (ProjectionTile::tf32_numerics). See the
//   thread mapping below for how each mode's shuffles realise its fixed pairwise tree.
// - Defines read: BILSTM_HIDDEN, BILSTM_GATES, BILSTM_GATE_ROWS, BILSTM_BLOCK_THREADS,
//   BILSTM_WARP_THREADS, BILSTM_WIDE_BLOCKS_PER_TILE, BILSTM_WIDE_UNITS_PER_BLOCK,
//   BILSTM_WIDE_MAX_TILE_HEIGHT, BILSTM_DOT_CHAINS, BILSTM_DOT_CHAIN_TERMS,
//   BILSTM_TF32_DOT_CHAINS, BILSTM_TF32_DOT_CHAIN_TERMS, BILSTM_EXCHANGE_WORD_BYTES,
//   BILSTM_EXCHANGE_SLOTS.
//
// Thread mapping (block b owns units 8b .. 8b+7 = packed gate rows 32b .. 32b+31):
// - warp w (0..7) owns unit U = 8b + w, i.e. its four gate rows 4U .. 4U+3;
// - lane l = 16 s + q: half s (0, 1), chain q (0..15, covering k = 8q .. 8q+7);
// - each thread holds two (row, chain) pairs p = 0, 1: row 4U + 2p + s, i.e. gates i (p 0, s 0),
//   f (p 0, s 1), g (p 1, s 0), o (p 1, s 1); its 2 x 8 recurrent weights stay in registers
//   for all steps (32 rows x 128 = 256 threads x 16 floats);
// - TF32 mode: lane l = 8 g + m (g = 2 s + (q >> 3), m = q & 7): gate g (0..3), chain m
//   (0..7, covering k = 16m .. 16m+15); each thread holds one (row, chain) pair, row 4U + g,
//   its 16 weights in the same registers (r[0]: k = 16m .. 16m+7, r[1]: the rest).
// Per step s >= 1 (step 0 has h = 0: the dot is +0.0f and nothing is read; the lane only loads
// its gate inputs):
// 1. load phase (coop.cuh's bl_coop_receive, shared with recurrence_tiled.cu): the block's 256
//    threads issue the loads of the 128 x tile_height words of step s - 1 (slot (s - 1) % 2;
//    thread t takes words t, t + 256, ... of the slot, i.e. producer block, window, unit in that
//    order); then each lane loads the projection float4 (i, f, g, o of unit U) of the window it
//    owns, behind the exchange loads; then passes re-load every word whose flag is not yet
//    layer * frames + s, all together, until all are, staging the values in
//    h_s[(s - 1) % 2][window][unit] (zeros for windows >= batch); TF32 mode stages them in
//    exchange.cuh's padded rows (unit u at (u / 32) * 36 + u % 32, rows 152 floats apart);
// 2. __syncthreads_or(aborted): the one barrier of the step (h_s is double-buffered, so the
//    next step's load phase never overwrites what this step reads);
// 3. each thread computes its two chains for every window of the tile (h from shared memory;
//    TF32 mode: its one chain, bl_dot_chain<16>'s FMAs as two 8-term parts, the second
//    continuing from the first, its 16 values of h four LDS.128 that the padded rows make
//    conflict-free);
// 4. the 16 chains of a row live in the 16 lanes of a half-warp; a transpose-reduce sums them:
//    at level offset o = 1, 2, 4, 8 each lane keeps half of its windows (the upper half when
//    q & o) and adds the partner lane's (q ^ o) partial sums of those windows. Level 1 adds
//    chains q and q^1, level 2 adds those pairs, ... : exactly the tree
//    ((c0+c1)+(c2+c3))+((c4+c5)+(c6+c7)) ... of numerics.cuh (addition order inside each
//    + is irrelevant: IEEE addition is commutative). Afterwards lane q holds full dots for
//    windows 2 rev4(q) + {0, 1} (tile height 32), rev4(q) (16) or rev3(q & 7) (8; there the last
//    level adds whole halves and both lanes hold the sum).
//    TF32 mode: the 8 chains of a row live in the 8 lanes m of a group g; the same
//    transpose-reduce at offsets 1, 2, 4 (coop.cuh's bl_coop_reduce_chains_tf32): level 1 adds
//    chains m and m^1, level 2 those pairs, level 4 those quads: exactly section 8's tree
//    ((c0+c1)+(c2+c3))+((c4+c5)+(c6+c7)). Afterwards lane m holds gate g's dots for windows
//    (TH / 8) rev3(m) + j, j < TH / 8, at tile height TH;
// 5. one shuffle per pair across the halves (lane ^ 16) gives each lane all four gates of one
//    window: tile height 32: half s owns window 2 rev4(q) + s; 16: both halves own rev4(q); 8:
//    lanes q and q ^ 8 of both halves own rev3(q & 7). Redundant owners compute bitwise the
//    same cell; one of them (the writer: s == 0, and q < 8 for height 8) stores.
//    TF32 mode: two gather levels (bl_wide_gather_tf32; 4 shuffles at height 32, 3 at 16 and
//    8) trade dots between the groups without adding: at lane ^ 8 (gate bit 0) a lane keeps the
//    upper half of its windows when g & 1, else the lower, and receives gate g ^ 1's dots of
//    them; at lane ^ 16 (gate bit 1) it keeps the upper of the two left (height 32) when g & 2
//    and receives gates g ^ 2 and g ^ 3 (a level with one window left trades it whole). Each
//    lane thus owns window 4 rev3(m) + 2 (g & 1) + (g >> 1) (32), 2 rev3(m) + (g & 1) (16) or
//    rev3(m) (8): the window the same lane owns in FP32 mode, with the same writer;
// 6. pre-activations (proj + dot) + bias, the cell update (state c in a register of the
//    owning lane), h written to out and published to slot s % 2 with a relaxed 64-bit store
//    (coop.cuh's bl_coop_cell, shared with recurrence_tiled.cu).
// One-window path (a tile whose only existing window is its first, e.g. batch 1, or the last
// tile of batch 9 at height 8): the load phase reads only window 0's 128 words (threads 0..127,
// one word each); each thread computes its two chains for window 0 only (2 LDS.128 + 16 FFMA
// instead of 2 x tile height LDS.128); a butterfly (offsets 1, 2, 4, 8; each lane adds its
// partner's value) gives every lane of a half-warp the full tree sum of its row, which is
// bitwise the same as the transpose-reduce's (each level adds the same two subtree sums, and
// IEEE addition is commutative); the shuffle across the halves gathers the four gates, and only
// lane 0 of each warp (the writer of (unit U, window 0) in the general path too) loads the gate
// inputs and runs the cell. TF32 mode: each thread computes its one chain for window 0 (4
// LDS.128 + 16 FFMA), a butterfly at offsets 1, 2, 4 gives every lane of a group section 8's
// tree of its row, and the gather levels at lane ^ 8 and lane ^ 16 trade whole values.
// kernels/tests/wide_mapping.rs replays both paths of both modes lane by lane.

#ifndef BILSTM_HIDDEN
#error "bilstm kernels are compiled with the -D options of bilstm_core::geometry::defines()"
#endif

#include "common.cuh"
#include "numerics.cuh"
#include "exchange.cuh"
#include "coop.cuh"

constexpr int BL_WIDE_WARPS = BILSTM_BLOCK_THREADS / BILSTM_WARP_THREADS;
constexpr int BL_WIDE_UPB = BILSTM_WIDE_UNITS_PER_BLOCK;
// Row strides of the staged hidden state: the mode's row (exchange.cuh) plus one producer's
// units, 8 x an odd number, so the stores of a warp's 32 consecutive words (8 units x 4
// windows) fall in 32 distinct banks: FP32 mode 128 + 8, TF32 mode 144 + 8 (its padded rows).
constexpr int BL_WIDE_H_STRIDE = BILSTM_HIDDEN + BL_WIDE_UPB;
constexpr int BL_WIDE_TF32_H_STRIDE = BL_STAGE_PADDED_ROW + BL_WIDE_UPB;
constexpr int bl_wide_h_stride(bool fast) {
    return fast ? BL_WIDE_TF32_H_STRIDE : BL_WIDE_H_STRIDE;
}
// A mode's two stages, h_s[slot][window][bl_stage_h_index<FAST>(unit)], in the entry's one array
// (sized for the longer TF32 rows; FP32 mode uses its first 2 x 32 x 136 floats, as before).
template <bool FAST>
using bl_wide_stages = float (*)[BILSTM_WIDE_MAX_TILE_HEIGHT][bl_wide_h_stride(FAST)];
constexpr int BL_WIDE_HALF = BILSTM_WARP_THREADS / 2;
// Lane bits of the chain index (16 chains: 4 bits).
constexpr int BL_WIDE_CHAIN_BITS = 4;
// TF32 mode: lanes of a row's 8 chains (an 8-lane group; lane = 8 gate + chain).
constexpr int BL_WIDE_TF32_GROUP = BILSTM_TF32_DOT_CHAINS;

static_assert(BL_WIDE_WARPS == BL_WIDE_UPB, "one warp per owned unit");
static_assert(BILSTM_GATES == 4, "a unit's four gates are two pairs of two half-warps");
static_assert(BILSTM_DOT_CHAINS == BL_WIDE_HALF, "the 16 chains of a row fill a half-warp");
static_assert(BILSTM_DOT_CHAINS == (1 << BL_WIDE_CHAIN_BITS), "16 chains");
static_assert(BILSTM_DOT_CHAINS * BILSTM_DOT_CHAIN_TERMS == BILSTM_HIDDEN, "chains cover k");
static_assert(BILSTM_DOT_CHAIN_TERMS == 8, "a chain is two float4 of h");
static_assert(BL_WIDE_UPB * BILSTM_WIDE_BLOCKS_PER_TILE == BILSTM_HIDDEN, "blocks cover the units");
static_assert(BILSTM_WIDE_MAX_TILE_HEIGHT == 32, "tile heights 8, 16 and 32 are instantiated");
static_assert(BL_WIDE_TF32_H_STRIDE >= BL_WIDE_H_STRIDE, "the entry's array is sized for TF32 mode");
static_assert(BL_WIDE_TF32_GROUP * BILSTM_GATES == BILSTM_WARP_THREADS,
              "TF32 mode: a unit's 4 rows x 8 chains fill a warp");

// Two chains (pairs 0 and 1 of this lane) of every window 0 .. TH - 1 of the staged h.
template <int TH>
__device__ __forceinline__ void bl_wide_chains(const float (*stage)[BL_WIDE_H_STRIDE], int q,
                                               const float (&r)[2][BILSTM_DOT_CHAIN_TERMS],
                                               float (&acc0)[BILSTM_WIDE_MAX_TILE_HEIGHT],
                                               float (&acc1)[BILSTM_WIDE_MAX_TILE_HEIGHT]) {
#pragma unroll
    for (int n = 0; n < TH; ++n) {
        float h[BILSTM_DOT_CHAIN_TERMS];
        bl_coop_chain_h<BL_WIDE_H_STRIDE>(stage, n, q, h);
        acc0[n] = bl_dot_chain<BILSTM_DOT_CHAIN_TERMS>(r[0], h);
        acc1[n] = bl_dot_chain<BILSTM_DOT_CHAIN_TERMS>(r[1], h);
    }
}

// TF32 mode: the chain of every window 0 .. TH - 1 of the staged h that this lane holds.
template <int TH>
__device__ __forceinline__ void bl_wide_chains_tf32(const float (*stage)[BL_WIDE_TF32_H_STRIDE], int chain,
                                                    const float (&r)[2][BILSTM_DOT_CHAIN_TERMS],
                                                    float (&acc)[BILSTM_WIDE_MAX_TILE_HEIGHT]) {
#pragma unroll
    for (int n = 0; n < TH; ++n) {
        float h0[BILSTM_DOT_CHAIN_TERMS];
        float h1[BILSTM_DOT_CHAIN_TERMS];
        bl_coop_chain_h_tf32<BL_WIDE_TF32_H_STRIDE>(stage, n, chain, h0, h1);
        acc[n] = bl_coop_dot_chain_tf32(r[0], r[1], h0, h1);
    }
}

// TF32 mode: the four gates (i, f, g, o) of the owned window from the reduced dots d[0 .. N) of
// this lane's gate (N = tile height / 8, or 1 on the one-window path; d[j] is window
// N rev3(chain) + j): level lane ^ 8 (gate bit 0) keeps d[N/2 ..) when gate & 1, else d[.. N/2),
// and receives gate ^ 1's dots of those windows; level lane ^ 16 (gate bit 1) keeps the upper
// of the two left (N 4) when gate & 2, else the lower, and receives gate ^ 2's and gate ^ 3's
// dots of it; a level with one window left trades it whole.
template <int N>
__device__ __forceinline__ float4 bl_wide_gather_tf32(int gate, float (&d)[BILSTM_WIDE_MAX_TILE_HEIGHT]) {
    constexpr int KEPT = N > 1 ? N / 2 : 1;
    float d1[KEPT];
    float d2[1];
    float d3[1];
    bl_coop_gather_level<N, BL_WIDE_TF32_GROUP>(d, d1, (gate & 1) != 0);
    bl_coop_gather_level<KEPT, 2 * BL_WIDE_TF32_GROUP>(d, d2, (gate & 2) != 0);
    bl_coop_gather_level<KEPT, 2 * BL_WIDE_TF32_GROUP>(d1, d3, (gate & 2) != 0);
    return bl_coop_gates_tf32(gate, d[0], d1[0], d2[0], d3[0]);
}

// The four gates (i, f, g, o) of the owned window from the reduced pairs: pair 0 holds gate
// 0 + half (i or f), pair 1 gate 2 + half (g or o); `mine` and `send` are this lane's values of
// its own window and of the window the other half owns.
__device__ __forceinline__ float4 bl_wide_gather(int half, float mine0, float mine1, float send0,
                                                 float send1) {
    const float recv0 = __shfl_xor_sync(BL_FULL_MASK, send0, BL_WIDE_HALF);
    const float recv1 = __shfl_xor_sync(BL_FULL_MASK, send1, BL_WIDE_HALF);
    return make_float4(half ? recv0 : mine0, half ? mine0 : recv0, half ? recv1 : mine1,
                       half ? mine1 : recv1);
}

// The general path: a tile of TH windows, TH of them staged and computed each step.
template <int TH, bool FAST>
__device__ __forceinline__ void bl_recurrence_wide(const bl_recurrence_coop_params& p, const bl_coop_block& b,
                                                   bl_wide_stages<FAST> h_s) {
    static_assert(TH * BILSTM_HIDDEN % BILSTM_BLOCK_THREADS == 0, "the load phase splits evenly");

    const int tid = threadIdx.x;
    const int warp = tid / BILSTM_WARP_THREADS;
    const int lane = tid % BILSTM_WARP_THREADS;
    const int half = lane / BL_WIDE_HALF;
    const int q = lane % BL_WIDE_HALF;
    // TF32 mode's lane roles: lane = 8 gate + chain.
    const int gate = lane / BL_WIDE_TF32_GROUP;
    const int chain = lane % BL_WIDE_TF32_GROUP;
    const bl_u32 unit = b.block * BL_WIDE_UPB + warp;

    // The recurrent weights of this thread's two (row, chain) pairs (TF32 mode: of its one
    // 16-term (row, chain) pair), for all steps.
    float r[2][BILSTM_DOT_CHAIN_TERMS];
    if constexpr (FAST) {
        bl_coop_chain_weights_tf32(p, unit * BILSTM_GATES + gate, chain, r[0], r[1]);
    } else {
#pragma unroll
        for (int pair = 0; pair < 2; ++pair) {
            bl_coop_chain_weights(p, unit * BILSTM_GATES + 2 * pair + half, q, r[pair]);
        }
    }
    const float4 bias = *reinterpret_cast<const float4*>(p.bias + unit * BILSTM_GATES);

    // The window whose cell this lane computes, and whether it stores the result.
    int own;
    bool writer;
    if constexpr (TH == 32) {
        own = 2 * (int)bl_bit_reverse(q, BL_WIDE_CHAIN_BITS) + half;
        writer = true;
    } else if constexpr (TH == 16) {
        own = (int)bl_bit_reverse(q, BL_WIDE_CHAIN_BITS);
        writer = half == 0;
    } else {
        own = (int)bl_bit_reverse(q & 7, 3);
        writer = half == 0 && q < 8;
    }
    const bl_u32 own_window = b.tile * TH + own;
    const bool own_valid = own_window < p.batch;
    const bool stores = writer && own_valid;

    float c = 0.0f;
    for (bl_u32 step = 0; step < p.frames; ++step) {
        const bl_u64 row = (bl_u64)own_window * p.frames + bl_coop_frame(p, step);
        float4 gates_in;
        // Recurrent dots of the four gates of (unit, own window); +0.0f at step 0.
        float4 dots = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (step == 0) {
            gates_in = bl_coop_gate_inputs(p, own_valid, row, unit);
        } else {
            float(*stage)[bl_wide_h_stride(FAST)] = h_s[(step - 1) & 1u];
            if (bl_coop_receive<TH, BL_WIDE_UPB, bl_wide_h_stride(FAST), FAST>(p, b, step, stage, own_valid,
                                                                               row, unit, gates_in)) {
                return;
            }
            if constexpr (FAST) {
                float acc[BILSTM_WIDE_MAX_TILE_HEIGHT];
                bl_wide_chains_tf32<TH>(stage, chain, r, acc);
                bl_coop_reduce_chains_tf32<TH>(acc, chain);
                dots = bl_wide_gather_tf32<TH / BL_WIDE_TF32_GROUP>(gate, acc);
            } else {
                float acc0[BILSTM_WIDE_MAX_TILE_HEIGHT];
                float acc1[BILSTM_WIDE_MAX_TILE_HEIGHT];
                bl_wide_chains<TH>(stage, q, r, acc0, acc1);
                bl_coop_reduce_chains<TH>(acc0, q);
                bl_coop_reduce_chains<TH>(acc1, q);
                // Tile height 32: half s owns window 2 rev4(q) + s, in acc[s] after the reduction;
                // otherwise both halves own the window in acc[0].
                if constexpr (TH == 32) {
                    dots = bl_wide_gather(half, half ? acc0[1] : acc0[0], half ? acc1[1] : acc1[0],
                                          half ? acc0[0] : acc0[1], half ? acc1[0] : acc1[1]);
                } else {
                    dots = bl_wide_gather(half, acc0[0], acc1[0], acc0[0], acc1[0]);
                }
            }
        }
        bl_coop_cell<FAST>(p, b, step, row, unit, (bl_u32)warp, (bl_u32)own, gates_in, dots, bias, c, stores);
    }
}

// The one-window path: the tile's first window is its only existing one (valid_windows == 1).
// Same dots, tree and cell as the general path (see the thread mapping above), for window 0
// only; lane 0 of each warp owns the cell of (unit, window 0).
template <bool FAST>
__device__ __forceinline__ void bl_recurrence_wide_one(const bl_recurrence_coop_params& p, const bl_coop_block& b,
                                                       bl_wide_stages<FAST> h_s) {
    const int tid = threadIdx.x;
    const int warp = tid / BILSTM_WARP_THREADS;
    const int lane = tid % BILSTM_WARP_THREADS;
    const int half = lane / BL_WIDE_HALF;
    const int q = lane % BL_WIDE_HALF;
    // TF32 mode's lane roles: lane = 8 gate + chain.
    const int gate = lane / BL_WIDE_TF32_GROUP;
    const int chain = lane % BL_WIDE_TF32_GROUP;
    const bl_u32 unit = b.block * BL_WIDE_UPB + warp;

    float r[2][BILSTM_DOT_CHAIN_TERMS];
    if constexpr (FAST) {
        bl_coop_chain_weights_tf32(p, unit * BILSTM_GATES + gate, chain, r[0], r[1]);
    } else {
#pragma unroll
        for (int pair = 0; pair < 2; ++pair) {
            bl_coop_chain_weights(p, unit * BILSTM_GATES + 2 * pair + half, q, r[pair]);
        }
    }
    const bool owner = lane == 0;
    float4 bias = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (owner) {
        bias = *reinterpret_cast<const float4*>(p.bias + unit * BILSTM_GATES);
    }
    const bl_u32 window = b.tile * p.tile_height;

    float c = 0.0f;
    for (bl_u32 step = 0; step < p.frames; ++step) {
        const bl_u64 row = (bl_u64)window * p.frames + bl_coop_frame(p, step);
        float4 gates_in;
        float4 dots = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (step == 0) {
            gates_in = bl_coop_gate_inputs(p, owner, row, unit);
        } else {
            float(*stage)[bl_wide_h_stride(FAST)] = h_s[(step - 1) & 1u];
            if (bl_coop_receive<1, BL_WIDE_UPB, bl_wide_h_stride(FAST), FAST>(p, b, step, stage, owner, row,
                                                                              unit, gates_in)) {
                return;
            }
            // Tile height 1 in the reduction: a butterfly, every lane ends with its row's dot.
            if constexpr (FAST) {
                float acc[BILSTM_WIDE_MAX_TILE_HEIGHT];
                bl_wide_chains_tf32<1>(stage, chain, r, acc);
                bl_coop_reduce_chains_tf32<1>(acc, chain);
                dots = bl_wide_gather_tf32<1>(gate, acc);
            } else {
                float acc0[BILSTM_WIDE_MAX_TILE_HEIGHT];
                float acc1[BILSTM_WIDE_MAX_TILE_HEIGHT];
                bl_wide_chains<1>(stage, q, r, acc0, acc1);
                bl_coop_reduce_chains<1>(acc0, q);
                bl_coop_reduce_chains<1>(acc1, q);
                dots = bl_wide_gather(half, acc0[0], acc1[0], acc0[0], acc1[0]);
            }
        }
        if (owner) {
            bl_coop_cell<FAST>(p, b, step, row, unit, (bl_u32)warp, 0u, gates_in, dots, bias, c, true);
        }
    }
}

// The path for the tile's windows, with the numerics FAST picks (once, at entry).
template <bool FAST>
__device__ __forceinline__ void bl_recurrence_wide_paths(const bl_recurrence_coop_params& p, const bl_coop_block& b,
                                                         bl_wide_stages<FAST> h_s) {
    if (b.valid_windows == 1u) {
        bl_recurrence_wide_one<FAST>(p, b, h_s);
        return;
    }
    switch (p.tile_height) {
        case 8:
            bl_recurrence_wide<8, FAST>(p, b, h_s);
            break;
        case 16:
            bl_recurrence_wide<16, FAST>(p, b, h_s);
            break;
        default:
            bl_recurrence_wide<32, FAST>(p, b, h_s);
            break;
    }
}

extern "C" __global__ void __launch_bounds__(BILSTM_BLOCK_THREADS)
    bilstm_recurrence_wide(const bl_recurrence_coop_params p) {
    __shared__ __align__(16) float h_s[2 * BILSTM_WIDE_MAX_TILE_HEIGHT * BL_WIDE_TF32_H_STRIDE];
    if ((int)blockIdx.x == p.stall_block) {
        return;
    }
    if (p.tile_height != 8u && p.tile_height != 16u && p.tile_height != 32u) {
        return;
    }
    const bl_coop_block b = bl_coop_block_of<BILSTM_WIDE_BLOCKS_PER_TILE, BL_WIDE_UPB>(p);
    if (p.tf32_numerics != 0u) {
        bl_recurrence_wide_paths<true>(p, b, reinterpret_cast<bl_wide_stages<true>>(h_s));
    } else {
        bl_recurrence_wide_paths<false>(p, b, reinterpret_cast<bl_wide_stages<false>>(h_s));
    }
}
