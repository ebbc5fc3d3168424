// recurrence_tiled.cu: the tiled cooperative recurrence: one launch runs all steps of one
// direction of one layer for a range of eight-window tiles; the 8 blocks of a tile split the
// 128 hidden units between them (16 each), hold R once across the tile in registers and trade
// hidden states through the flag-in-word protocol of exchange.cuh.
//
// Launch contract
// - Entry: bilstm_recurrence_tiled(const bl_recurrence_coop_params p). COOPERATIVE: every block
//   of a tile spins on its partners, so the whole grid must be co-resident
//   (cuLaunchCooperativeKernel; the host keeps the grid within occupancy x SMs).
// - Grid: (tiles_in_launch * BILSTM_TILED_BLOCKS_PER_TILE, 1, 1); block b of a tile is
//   blockIdx.x % BILSTM_TILED_BLOCKS_PER_TILE, the tile is tile_offset + blockIdx.x /
//   BILSTM_TILED_BLOCKS_PER_TILE. Block: (BILSTM_BLOCK_THREADS, 1, 1). Dynamic shared bytes: 0
//   (static: two hidden-state stages of BILSTM_TILED_WINDOWS x (BILSTM_HIDDEN +
//   BILSTM_TILED_UNITS_PER_BLOCK) floats, 9,216 bytes; TF32 mode's padded rows of exchange.cuh
//   are 144 floats too, so both modes use the same array and stride).
// - Parameters: bl_recurrence_coop_params (coop.cuh, 120 bytes; shared with
//   recurrence_wide.cu), mirrored by bilstm_kernels::params::RecurrenceCoopParams.
// - Preconditions: tile_height == BILSTM_TILED_WINDOWS (any other value: every block returns at
//   once, writing nothing); proj holds batch * frames * BILSTM_GATE_ROWS floats of this direction (row =
//   window * frames + frame, packed gate columns unit * 4 + gate); recurrent holds this
//   direction's packed recurrent rows [BILSTM_GATE_ROWS, BILSTM_HIDDEN]; bias its packed
//   combined bias [BILSTM_GATE_ROWS] (all 16-byte aligned); out holds batch * frames * 2 *
//   BILSTM_HIDDEN floats; exchange is the aligned base of a span laid out by
//   ExchangeLayout::tiled(tiles) (the strides passed here), zeroed on this stream since the last
//   pass that used these flags (clear.cu); error points at 4 ints, error[0] zeroed with the
//   exchange; layer * frames + frames fits 32 bits; tile_offset + tiles_in_launch <= tiles and
//   tiles * BILSTM_TILED_WINDOWS >= batch.
// - Postconditions: for every window w < batch of the launched tiles and every step s, with
//   frame t = s (direction 0) or frames - 1 - s (direction 1): out[(w * frames + t) * 256 +
//   direction * 128 + unit] = h_s(unit) for all 128 units; the exchange holds flagged words of
//   the last two steps. Windows >= batch (the last tile's tail) are neither read nor written
//   nor published, and no block waits for them. If a block waits longer than spin_timeout_ns
//   for a partner's word (or sees error[0] != 0 set by another block), it stops after the
//   step's barrier; the first block to time out writes error = {BL_ERROR_PARTNER_LOST, layer,
//   direction, step} and the outputs of this launch are unspecified.
// - Numerics: numerics.cuh (DESIGN section 4), identical in every recurrence kernel, so the
//   output bits equal recurrence_wide.cu's and recurrence_resident.cu's. With tf32_numerics = 0
//   (FP32 mode) the recurrent dot is section 1's (16 chains of 8 terms) and the gate
//   activations sections 3-5's; otherwise (TF32 mode) the dot is section 8's (8 chains of 16
//   terms) and the activations section 7's. The mode is picked once at entry; the host sets
//   tf32_numerics where the pass's projection is a TF32 tile (ProjectionTile::tf32_numerics). Each
//   mode's tree is realised by the same transpose-reduce as the wide kernel's 8-window tiles
//   (below).
// - Defines read: BILSTM_HIDDEN, BILSTM_GATES, BILSTM_GATE_ROWS, BILSTM_BLOCK_THREADS,
//   BILSTM_WARP_THREADS, BILSTM_TILED_WINDOWS, BILSTM_TILED_BLOCKS_PER_TILE,
//   BILSTM_TILED_UNITS_PER_BLOCK, BILSTM_DOT_CHAINS, BILSTM_DOT_CHAIN_TERMS,
//   BILSTM_TF32_DOT_CHAINS, BILSTM_TF32_DOT_CHAIN_TERMS, BILSTM_EXCHANGE_WORD_BYTES,
//   BILSTM_EXCHANGE_SLOTS.
//
// Thread mapping (block b owns units 16b .. 16b+15 = packed gate rows 64b .. 64b+63):
// - warp w (0..7) owns the two units U_a = 16b + 2w + a (a = 0, 1): 8 gate rows;
// - lane l = 16 s + q: half s (0, 1), chain q (0..15, covering k = 8q .. 8q+7);
// - each thread holds four (row, chain) pairs x = 2a + p (a, p in 0, 1): row 4 U_a + 2p + s, i.e.
//   half 0 holds gates i (p 0) and g (p 1) of both units, half 1 gates f and o; their 4 x 8
//   recurrent weights stay in registers for all steps (64 rows x 128 = 256 threads x 32 floats);
// - TF32 mode: lane l = 8 g + m (g = 2 s + (q >> 3), m = q & 7): gate g (0..3), chain m (0..7,
//   covering k = 16m .. 16m+15); each thread holds two (row, chain) pairs a = 0, 1: row
//   4 U_a + g, its 2 x 16 weights in the same registers (r[2a]: k = 16m .. 16m+7, r[2a + 1]:
//   the rest).
// Per step s >= 1 (step 0 has h = 0: the dot is +0.0f and nothing is read; the lane only loads
// its gate inputs):
// 1. load phase (coop.cuh's bl_coop_receive, shared with recurrence_wide.cu): the block's 256
//    threads issue the loads of the 8 x 128 words of step s - 1 (slot (s - 1) % 2; thread t
//    takes words t + 256 i, i.e. producer block, window, unit in that order); then the lane
//    loads the projection float4 (i, f, g, o) of the cell it owns (below), behind the exchange
//    loads; then passes re-load every word whose flag is not yet layer * frames + s, all
//    together, until all are, staging the values in h_s[(s - 1) % 2][window][unit] (zeros for
//    windows >= batch); TF32 mode stages them in exchange.cuh's padded rows (unit u at
//    (u / 32) * 36 + u % 32);
// 2. __syncthreads_or(aborted): the one barrier of the step (h_s is double-buffered, so the
//    next step's load phase never overwrites what this step reads);
// 3. each thread computes its four chains for each of the 8 windows (h from shared memory;
//    TF32 mode: its two chains, bl_dot_chain<16>'s FMAs as two 8-term parts, the second
//    continuing from the first, their 16 values of h four LDS.128 that the padded rows make
//    conflict-free);
// 4. the 16 chains of a row live in the 16 lanes of a half-warp; the transpose-reduce of
//    recurrence_wide.cu for 8-window tiles (coop.cuh's bl_coop_reduce_chains) sums them: at level offset o = 1, 2, 4 each lane keeps
//    half of its windows (the upper half when q & o) and adds the partner lane's (q ^ o) partial
//    sums of those windows; at o = 8 both lanes add their single values. Level 1 adds chains q
//    and q ^ 1, level 2 those pairs, ...: exactly the tree ((c0+c1)+(c2+c3))+((c4+c5)+(c6+c7))
//    ... of numerics.cuh (IEEE addition is commutative, so the order inside each + is
//    irrelevant). Afterwards lanes q and q ^ 8 both hold full dots for window rev3(q & 7).
//    TF32 mode: the 8 chains of a row live in the 8 lanes m of a group g; the transpose-reduce
//    at offsets 1, 2, 4 (coop.cuh's bl_coop_reduce_chains_tf32; 8, 4, 2 values) sums them: level
//    1 adds chains m and m ^ 1, level 2 those pairs, level 4 those quads: exactly section 8's
//    tree ((c0+c1)+(c2+c3))+((c4+c5)+(c6+c7)). Afterwards lane m holds gate g's dots of U_0 and
//    U_1 for window rev3(m). kernels/tests/tiled_mapping.rs replays both modes lane by lane on
//    the CPU;
// 5. two shuffles across the halves (lane ^ 16) give half s all four gates of unit U_s: half 0
//    sends (i, g) of U_1 and receives (f, o) of U_0; half 1 the other way round. Lane (s, q) owns
//    the cell (U_s, window rev3(q & 7)); lanes q and q ^ 8 compute bitwise the same cell and the
//    one with q < 8 (the writer) stores.
//    TF32 mode: three shuffles (coop.cuh's bl_coop_gather_level) trade dots between the groups
//    without adding: at lane ^ 16 (gate bit 1, = s) a lane keeps U_s's dot and sends U_(1-s)'s,
//    receiving gate g ^ 2's of U_s; at lane ^ 8 (gate bit 0) it receives gates g ^ 1 and g ^ 3 of
//    U_s. Lane l owns the same cell as in FP32 mode, (U_s, window rev3(m)) with m = q & 7, and
//    the same writer (lanes l and l ^ 8 compute it; g even, i.e. q < 8, stores);
// 6. pre-activations (proj + dot) + bias, the cell update (state c in a register of the owning
//    lane), h written to out and published to slot s % 2 with a relaxed 64-bit store (coop.cuh's
//    bl_coop_cell, shared with recurrence_wide.cu).

#ifndef BILSTM_HIDDEN
#error "bilstm kernels are compiled with the -D options of bilstm_core::geometry::defines()"
#endif

#include "common.cuh"
#include "numerics.cuh"
#include "exchange.cuh"
#include "coop.cuh"

constexpr int BL_TILED_WARPS = BILSTM_BLOCK_THREADS / BILSTM_WARP_THREADS;
constexpr int BL_TILED_UPB = BILSTM_TILED_UNITS_PER_BLOCK;
constexpr int BL_TILED_TH = BILSTM_TILED_WINDOWS;
constexpr int BL_TILED_HALF = BILSTM_WARP_THREADS / 2;
// Units per warp (one per half-warp in the cell phase) and (row, chain) pairs per thread.
constexpr int BL_TILED_UNITS_PER_WARP = BL_TILED_UPB / BL_TILED_WARPS;
constexpr int BL_TILED_PAIRS = BL_TILED_UNITS_PER_WARP * 2;
// Row stride of the staged hidden state in both modes: one producer's units of padding (16 x an
// odd number), so the stores of a warp's 32 consecutive words (16 units x 2 windows) fall in 32
// distinct banks; TF32 mode's padded rows (exchange.cuh, 144 floats) fit it.
constexpr int BL_TILED_H_STRIDE = BILSTM_HIDDEN + BL_TILED_UPB;
// Lane bits of the window index after the reduction (8 windows: 3 bits).
constexpr int BL_TILED_WINDOW_BITS = 3;
// TF32 mode: lanes of a row's 8 chains (an 8-lane group; lane = 8 gate + chain) and the
// 16-term (row, chain) pairs of a thread, one per unit of the warp.
constexpr int BL_TILED_TF32_GROUP = BILSTM_TF32_DOT_CHAINS;
constexpr int BL_TILED_TF32_PAIRS = BL_TILED_UNITS_PER_WARP;

static_assert(BL_TILED_UNITS_PER_WARP == 2, "each half-warp owns one unit in the cell phase");
static_assert(BILSTM_GATES == 4, "a unit's four gates are two pairs of two half-warps");
static_assert(BILSTM_DOT_CHAINS == BL_TILED_HALF, "the 16 chains of a row fill a half-warp");
static_assert(BILSTM_DOT_CHAINS * BILSTM_DOT_CHAIN_TERMS == BILSTM_HIDDEN, "chains cover k");
static_assert(BILSTM_DOT_CHAIN_TERMS == 8, "a chain is two float4 of h");
static_assert(BL_TILED_TH == (1 << BL_TILED_WINDOW_BITS), "the reduction is written for 8 windows");
static_assert(BL_TILED_UPB * BILSTM_TILED_BLOCKS_PER_TILE == BILSTM_HIDDEN, "blocks cover the units");
static_assert(BL_TILED_TH * BILSTM_HIDDEN % BILSTM_BLOCK_THREADS == 0, "the load phase splits evenly");
static_assert(BL_STAGE_PADDED_ROW <= BL_TILED_H_STRIDE, "TF32 mode's padded rows fit the stride");
static_assert(BL_TILED_TF32_GROUP * BILSTM_GATES == BILSTM_WARP_THREADS,
              "TF32 mode: 4 gate rows x 8 chains of each unit fill a warp");
static_assert(BL_TILED_TF32_PAIRS * 2 == BL_TILED_PAIRS, "TF32 mode: the same 32 weights a thread");

template <bool FAST>
__device__ __forceinline__ void bl_recurrence_tiled(const bl_recurrence_coop_params& p,
                                                    float (&h_s)[2][BL_TILED_TH][BL_TILED_H_STRIDE]) {
    const int tid = threadIdx.x;
    const int warp = tid / BILSTM_WARP_THREADS;
    const int lane = tid % BILSTM_WARP_THREADS;
    const int half = lane / BL_TILED_HALF;
    const int q = lane % BL_TILED_HALF;
    // TF32 mode's lane roles: lane = 8 gate + chain.
    const int gate = lane / BL_TILED_TF32_GROUP;
    const int chain = lane % BL_TILED_TF32_GROUP;
    const bl_coop_block b = bl_coop_block_of<BILSTM_TILED_BLOCKS_PER_TILE, BL_TILED_UPB>(p);
    // The warp's first unit (in the block and in the layer).
    const bl_u32 warp_unit_in_block = (bl_u32)warp * BL_TILED_UNITS_PER_WARP;
    const bl_u32 warp_unit = b.block * BL_TILED_UPB + warp_unit_in_block;

    // The recurrent weights of this thread's four (row, chain) pairs, for all steps:
    // pair x = 2a + pp is row 4 (warp_unit + a) + 2 pp + half, terms 8q .. 8q+7. TF32 mode: two
    // 16-term pairs a = 0, 1, row 4 (warp_unit + a) + gate, terms 16 chain .. 16 chain + 15 in
    // r[2a] (the first 8) and r[2a + 1].
    float r[BL_TILED_PAIRS][BILSTM_DOT_CHAIN_TERMS];
    if constexpr (FAST) {
#pragma unroll
        for (int a = 0; a < BL_TILED_TF32_PAIRS; ++a) {
            bl_coop_chain_weights_tf32(p, (warp_unit + a) * BILSTM_GATES + gate, chain, r[2 * a], r[2 * a + 1]);
        }
    } else {
#pragma unroll
        for (int x = 0; x < BL_TILED_PAIRS; ++x) {
            const int a = x / 2;
            const int pp = x % 2;
            bl_coop_chain_weights(p, (warp_unit + a) * BILSTM_GATES + 2 * pp + half, q, r[x]);
        }
    }

    // The cell this lane owns: unit warp_unit + half, window rev3(q & 7); q < 8 stores.
    const bl_u32 own_unit_in_block = warp_unit_in_block + half;
    const bl_u32 own_unit = warp_unit + half;
    const int own = (int)bl_bit_reverse(q & (BL_TILED_TH - 1), BL_TILED_WINDOW_BITS);
    const bool writer = q < BL_TILED_TH;
    const float4 bias = *reinterpret_cast<const float4*>(p.bias + own_unit * BILSTM_GATES);
    const bl_u32 own_window = b.tile * BL_TILED_TH + own;
    const bool own_valid = own_window < p.batch;
    const bool stores = writer && own_valid;

    float c = 0.0f;
    for (bl_u32 step = 0; step < p.frames; ++step) {
        const bl_u64 row = (bl_u64)own_window * p.frames + bl_coop_frame(p, step);
        float4 gates_in;
        // Recurrent dots of the four gates of the owned cell; +0.0f at step 0.
        float4 dots = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (step == 0) {
            gates_in = bl_coop_gate_inputs(p, own_valid, row, own_unit);
        } else {
            float(*stage)[BL_TILED_H_STRIDE] = h_s[(step - 1) & 1u];
            if (bl_coop_receive<BL_TILED_TH, BL_TILED_UPB, BL_TILED_H_STRIDE, FAST>(
                    p, b, step, stage, own_valid, row, own_unit, gates_in)) {
                return;
            }

            if constexpr (FAST) {
                // TF32 mode: two chains (one per pair) for each window of the tile, the 8 chains
                // of a row summed over the 8-lane group: then acc[a][0] is the dot of gate `gate`
                // of U_a for window rev3(chain).
                float acc[BL_TILED_TF32_PAIRS][BL_TILED_TH];
#pragma unroll
                for (int n = 0; n < BL_TILED_TH; ++n) {
                    float h0[BILSTM_DOT_CHAIN_TERMS];
                    float h1[BILSTM_DOT_CHAIN_TERMS];
                    bl_coop_chain_h_tf32<BL_TILED_H_STRIDE>(stage, n, chain, h0, h1);
#pragma unroll
                    for (int a = 0; a < BL_TILED_TF32_PAIRS; ++a) {
                        acc[a][n] = bl_coop_dot_chain_tf32(r[2 * a], r[2 * a + 1], h0, h1);
                    }
                }
#pragma unroll
                for (int a = 0; a < BL_TILED_TF32_PAIRS; ++a) {
                    bl_coop_reduce_chains_tf32<BL_TILED_TH>(acc[a], chain);
                }
                // Gather the four gates of unit U_half: lane ^ 16 (gate bit 1, = half) keeps U_half's
                // dot and receives gate ^ 2's of U_half (d2), lane ^ 8 (gate bit 0) those of gate ^ 1
                // (d1) and gate ^ 3 (d3).
                float units[BL_TILED_TF32_PAIRS] = {acc[0][0], acc[1][0]};
                float d1[1];
                float d2[1];
                float d3[1];
                bl_coop_gather_level<BL_TILED_TF32_PAIRS, 2 * BL_TILED_TF32_GROUP>(units, d2, half != 0);
                bl_coop_gather_level<1, BL_TILED_TF32_GROUP>(units, d1, (gate & 1) != 0);
                bl_coop_gather_level<1, BL_TILED_TF32_GROUP>(d2, d3, (gate & 1) != 0);
                dots = bl_coop_gates_tf32(gate, units[0], d1[0], d2[0], d3[0]);
            } else {
                // Four chains (one per pair) for each window of the tile.
                float acc[BL_TILED_PAIRS][BL_TILED_TH];
#pragma unroll
                for (int n = 0; n < BL_TILED_TH; ++n) {
                    float h[BILSTM_DOT_CHAIN_TERMS];
                    bl_coop_chain_h<BL_TILED_H_STRIDE>(stage, n, q, h);
#pragma unroll
                    for (int x = 0; x < BL_TILED_PAIRS; ++x) {
                        acc[x][n] = bl_dot_chain<BILSTM_DOT_CHAIN_TERMS>(r[x], h);
                    }
                }
#pragma unroll
                for (int x = 0; x < BL_TILED_PAIRS; ++x) {
                    bl_coop_reduce_chains<BL_TILED_TH>(acc[x], q);
                }

                // Gather the four gates of unit U_half across the halves (lane ^ 16). Pair x = 2a + pp
                // holds gate 2 pp + half of unit U_a.
                const float send0 = half ? acc[0][0] : acc[2][0];  // half 1: f of U_0; half 0: i of U_1
                const float send1 = half ? acc[1][0] : acc[3][0];  // half 1: o of U_0; half 0: g of U_1
                const float recv0 = __shfl_xor_sync(BL_FULL_MASK, send0, BL_TILED_HALF);
                const float recv1 = __shfl_xor_sync(BL_FULL_MASK, send1, BL_TILED_HALF);
                dots = make_float4(half ? recv0 : acc[0][0], half ? acc[2][0] : recv0,
                                   half ? recv1 : acc[1][0], half ? acc[3][0] : recv1);
            }
        }
        bl_coop_cell<FAST>(p, b, step, row, own_unit, own_unit_in_block, (bl_u32)own, gates_in, dots, bias, c,
                           stores);
    }
}

// The numerics (gate activations and dot) are picked once (tf32_numerics), so the step loop
// carries no select.
extern "C" __global__ void __launch_bounds__(BILSTM_BLOCK_THREADS, 2)
    bilstm_recurrence_tiled(const bl_recurrence_coop_params p) {
    __shared__ __align__(16) float h_s[2][BL_TILED_TH][BL_TILED_H_STRIDE];
    if ((int)blockIdx.x == p.stall_block || p.tile_height != (bl_u32)BL_TILED_TH) {
        return;
    }
    if (p.tf32_numerics != 0u) {
        bl_recurrence_tiled<true>(p, h_s);
    } else {
        bl_recurrence_tiled<false>(p, h_s);
    }
}
