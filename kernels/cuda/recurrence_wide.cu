// recurrence_wide.cu: the wide cooperative recurrence: one launch runs all steps of one
// direction of one layer for a range of tiles; blocks of a tile exchange hidden states
// through the flag-in-word protocol of exchange.cuh.
//
// Launch contract
// - Entry: bilstm_recurrence_wide(const bl_recurrence_wide_params p). COOPERATIVE: every block
//   of a tile spins on its partners, so the whole grid must be co-resident
//   (cuLaunchCooperativeKernel; the host keeps the grid within occupancy x SMs).
// - Grid: (tiles_in_launch * BILSTM_WIDE_BLOCKS_PER_TILE, 1, 1); block b of a tile is blockIdx.x
//   % BILSTM_WIDE_BLOCKS_PER_TILE, the tile is tile_offset + blockIdx.x /
//   BILSTM_WIDE_BLOCKS_PER_TILE. Block: (BILSTM_BLOCK_THREADS, 1, 1). Dynamic shared bytes: 0
//   (static: two hidden-state stages of BILSTM_WIDE_MAX_TILE_HEIGHT x (BILSTM_HIDDEN +
//   BILSTM_WIDE_UNITS_PER_BLOCK) floats, 34,816 bytes).
// - Parameters: bl_recurrence_wide_params (104 bytes), mirrored by
//   bilstm_kernels::params::RecurrenceWideParams.
// - Preconditions: tile_height is 8, 16 or 32 (<= BILSTM_WIDE_MAX_TILE_HEIGHT; the same compiled
//   kernel serves all three); proj holds batch * frames * BILSTM_GATE_ROWS floats of this
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
// - Numerics: numerics.cuh (DESIGN section 4), identical in every recurrence kernel; see the
//   dot-product tree below for how the shuffles realise the fixed pairwise tree.
// - Defines read: BILSTM_HIDDEN, BILSTM_GATES, BILSTM_GATE_ROWS, BILSTM_BLOCK_THREADS,
//   BILSTM_WARP_THREADS, BILSTM_WIDE_BLOCKS_PER_TILE, BILSTM_WIDE_UNITS_PER_BLOCK,
//   BILSTM_WIDE_MAX_TILE_HEIGHT, BILSTM_DOT_CHAINS, BILSTM_DOT_CHAIN_TERMS,
//   BILSTM_EXCHANGE_WORD_BYTES, BILSTM_EXCHANGE_SLOTS.
//
// Thread mapping (block b owns units 8b .. 8b+7 = packed gate rows 32b .. 32b+31):
// - warp w (0..7) owns unit U = 8b + w, i.e. its four gate rows 4U .. 4U+3;
// - lane l = 16 s + q: half s (0, 1), chain q (0..15, covering k = 8q .. 8q+7);
// - each thread holds two (row, chain) pairs p = 0, 1: row 4U + 2p + s, i.e. gates i (p 0, s 0),
//   f (p 0, s 1), g (p 1, s 0), o (p 1, s 1); its 2 x 8 recurrent weights stay in registers
//   for all steps (32 rows x 128 = 256 threads x 16 floats).
// Per step s >= 1 (step 0 has h = 0: the dot is +0.0f and nothing is read):
// 1. each lane loads the projection float4 (i, f, g, o of unit U) of the window it will own;
// 2. load phase: the block's 256 threads read the 128 x tile_height words of step s - 1
//    (slot (s - 1) % 2; thread t takes words t, t + 256, ... of the slot, i.e. producer block,
//    window, unit in that order), spin on each until its flag is layer * frames + s, and stage
//    the values in h_s[(s - 1) % 2][window][unit] (zeros for windows >= batch): exchange.cuh's
//    bl_exchange_load_step, shared with recurrence_tiled.cu;
// 3. __syncthreads_or(aborted): the one barrier of the step (h_s is double-buffered, so the
//    next step's load phase never overwrites what this step reads);
// 4. each thread computes its two chains for every window of the tile (h from shared memory);
// 5. the 16 chains of a row live in the 16 lanes of a half-warp; a transpose-reduce sums them:
//    at level offset o = 1, 2, 4, 8 each lane keeps half of its windows (the upper half when
//    q & o) and adds the partner lane's (q ^ o) partial sums of those windows. Level 1 adds
//    chains q and q^1, level 2 adds those pairs, ... : exactly the tree
//    ((c0+c1)+(c2+c3))+((c4+c5)+(c6+c7)) ... of numerics.cuh (addition order inside each
//    + is irrelevant: IEEE addition is commutative). Afterwards lane q holds full dots for
//    windows 2 rev4(q) + {0, 1} (tile height 32), rev4(q) (16) or rev3(q & 7) (8; there the last
//    level adds whole halves and both lanes hold the sum);
// 6. one shuffle per pair across the halves (lane ^ 16) gives each lane all four gates of one
//    window: tile height 32: half s owns window 2 rev4(q) + s; 16: both halves own rev4(q); 8:
//    lanes q and q ^ 8 of both halves own rev3(q & 7). Redundant owners compute bitwise the
//    same cell; one of them (the writer: s == 0, and q < 8 for height 8) stores;
// 7. pre-activations (proj + dot) + bias, the cell update (state c in a register of the
//    owning lane), h written to out and published to slot s % 2 with a relaxed 64-bit store.

#ifndef BILSTM_HIDDEN
#error "bilstm kernels are compiled with the -D options of bilstm_core::geometry::defines()"
#endif

#include "common.cuh"
#include "numerics.cuh"
#include "exchange.cuh"

struct bl_recurrence_wide_params {
    const float* proj;
    const float* recurrent;
    const float* bias;
    float* out;
    bl_u64* exchange;
    int* error;
    bl_u64 spin_timeout_ns;
    bl_u32 batch;
    bl_u32 frames;
    bl_u32 layer;
    bl_u32 direction;
    bl_u32 tile_height;
    bl_u32 tile_offset;
    bl_u32 block_stride;
    bl_u32 slot_stride;
    bl_u32 tile_stride;
    bl_u32 direction_stride;
    // Test-only fault injection: the block with this blockIdx.x returns at once and never
    // publishes (so its partners must report BL_ERROR_PARTNER_LOST); -1 in production.
    int stall_block;
    bl_u32 reserved;
};
static_assert(sizeof(bl_recurrence_wide_params) == 104,
              "mirrors bilstm_kernels::params::RecurrenceWideParams");

constexpr int BL_WIDE_WARPS = BILSTM_BLOCK_THREADS / BILSTM_WARP_THREADS;
constexpr int BL_WIDE_UPB = BILSTM_WIDE_UNITS_PER_BLOCK;
// Row stride of the staged hidden state: one producer's units of padding, so the stores of a
// warp's 32 consecutive words (8 units x 4 windows) fall in 32 distinct banks.
constexpr int BL_WIDE_H_STRIDE = BILSTM_HIDDEN + BL_WIDE_UPB;
constexpr int BL_WIDE_HALF = BILSTM_WARP_THREADS / 2;
// Lane bits of the chain index (16 chains: 4 bits).
constexpr int BL_WIDE_CHAIN_BITS = 4;

static_assert(BL_WIDE_WARPS == BL_WIDE_UPB, "one warp per owned unit");
static_assert(BILSTM_GATES == 4, "a unit's four gates are two pairs of two half-warps");
static_assert(BILSTM_DOT_CHAINS == BL_WIDE_HALF, "the 16 chains of a row fill a half-warp");
static_assert(BILSTM_DOT_CHAINS == (1 << BL_WIDE_CHAIN_BITS), "16 chains");
static_assert(BILSTM_DOT_CHAINS * BILSTM_DOT_CHAIN_TERMS == BILSTM_HIDDEN, "chains cover k");
static_assert(BILSTM_DOT_CHAIN_TERMS == 8, "a chain is two float4 of h");
static_assert(BL_WIDE_UPB * BILSTM_WIDE_BLOCKS_PER_TILE == BILSTM_HIDDEN, "blocks cover the units");
static_assert(BILSTM_WIDE_MAX_TILE_HEIGHT == 32, "tile heights 8, 16 and 32 are instantiated");
static_assert(BL_WIDE_H_STRIDE % 4 == 0, "float4 rows");

// The transpose-reduce level with partner offset OFFSET over N windows: keep the upper half
// of v[0 .. N) when `upper`, else the lower half, and add the partner's copy of it. The
// result is in v[0 .. N / 2) (N == 1: v[0] += partner's v[0], both lanes get the sum).
template <int N, int OFFSET>
__device__ __forceinline__ void bl_reduce_level(float (&v)[BILSTM_WIDE_MAX_TILE_HEIGHT], bool upper) {
    if constexpr (N == 1) {
        v[0] = v[0] + __shfl_xor_sync(BL_FULL_MASK, v[0], OFFSET);
    } else {
#pragma unroll
        for (int i = 0; i < N / 2; ++i) {
            const float lo = v[i];
            const float hi = v[i + N / 2];
            const float send = upper ? lo : hi;
            const float keep = upper ? hi : lo;
            v[i] = keep + __shfl_xor_sync(BL_FULL_MASK, send, OFFSET);
        }
    }
}

// All four levels for a tile of TH windows (offsets 1, 2, 4, 8: chain bit 0 first).
template <int TH>
__device__ __forceinline__ void bl_reduce_chains(float (&v)[BILSTM_WIDE_MAX_TILE_HEIGHT], int q) {
    bl_reduce_level<TH, 1>(v, (q & 1) != 0);
    bl_reduce_level<(TH / 2 > 1 ? TH / 2 : 1), 2>(v, (q & 2) != 0);
    bl_reduce_level<(TH / 4 > 1 ? TH / 4 : 1), 4>(v, (q & 4) != 0);
    bl_reduce_level<(TH / 8 > 1 ? TH / 8 : 1), 8>(v, (q & 8) != 0);
}

template <int TH>
__device__ __forceinline__ void bl_recurrence_wide(const bl_recurrence_wide_params& p,
                                                   float (*h_s)[BILSTM_WIDE_MAX_TILE_HEIGHT][BL_WIDE_H_STRIDE]) {
    constexpr int WORDS_PER_THREAD = TH * BILSTM_HIDDEN / BILSTM_BLOCK_THREADS;
    constexpr int SLOT_WORDS_PER_BLOCK = TH * BL_WIDE_UPB;
    static_assert(TH * BILSTM_HIDDEN % BILSTM_BLOCK_THREADS == 0, "the load phase splits evenly");

    const int tid = threadIdx.x;
    const int warp = tid / BILSTM_WARP_THREADS;
    const int lane = tid % BILSTM_WARP_THREADS;
    const int half = lane / BL_WIDE_HALF;
    const int q = lane % BL_WIDE_HALF;
    const bl_u32 block = blockIdx.x % BILSTM_WIDE_BLOCKS_PER_TILE;
    const bl_u32 tile = p.tile_offset + blockIdx.x / BILSTM_WIDE_BLOCKS_PER_TILE;
    const bl_u32 unit = block * BL_WIDE_UPB + warp;
    const bl_u32 frames = p.frames;
    const bl_u32 batch = p.batch;
    const bl_u32 direction = p.direction;
    const bl_exchange_layout layout = {(bl_u32)BL_WIDE_UPB, p.block_stride, p.slot_stride,
                                       p.tile_stride, p.direction_stride};

    // The recurrent weights of this thread's two (row, chain) pairs, for all steps.
    float r[2][BILSTM_DOT_CHAIN_TERMS];
#pragma unroll
    for (int pair = 0; pair < 2; ++pair) {
        const bl_u32 row = unit * BILSTM_GATES + 2 * pair + half;
        const float4* src = reinterpret_cast<const float4*>(
            p.recurrent + (bl_u64)row * BILSTM_HIDDEN + q * BILSTM_DOT_CHAIN_TERMS);
        const float4 a = src[0];
        const float4 b = src[1];
        r[pair][0] = a.x;
        r[pair][1] = a.y;
        r[pair][2] = a.z;
        r[pair][3] = a.w;
        r[pair][4] = b.x;
        r[pair][5] = b.y;
        r[pair][6] = b.z;
        r[pair][7] = b.w;
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
    const bl_u32 own_window = tile * TH + own;
    const bool own_valid = own_window < batch;
    const bool stores = writer && own_valid;
    // Windows of this tile that exist (the last tile may be partial).
    const bl_u32 tile_first = tile * TH;
    const bl_u32 valid_windows = batch > tile_first ? min((bl_u32)TH, batch - tile_first) : 0u;

    float c = 0.0f;
    for (bl_u32 step = 0; step < frames; ++step) {
        const bl_u32 frame = direction == 0 ? step : frames - 1 - step;
        const bl_u64 row = (bl_u64)own_window * frames + frame;
        float4 proj = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (own_valid) {
            proj = *reinterpret_cast<const float4*>(p.proj + row * BILSTM_GATE_ROWS + unit * BILSTM_GATES);
        }

        // Recurrent dots of the four gates of (unit, own window); +0.0f at step 0.
        float dot_i = 0.0f, dot_f = 0.0f, dot_g = 0.0f, dot_o = 0.0f;
        if (step > 0) {
            // Load phase: the words of step - 1 from all producers of this tile.
            const bl_u32 want = bl_exchange_flag(p.layer, frames, step - 1);
            const bl_u32 slot = (step - 1) & 1;
            float(*stage)[BL_WIDE_H_STRIDE] = h_s[slot];
            const bl_u64* base = p.exchange + bl_word_index(layout, direction, tile, slot, 0, 0, 0);
            const bool aborted =
                bl_exchange_load_step<WORDS_PER_THREAD, BL_WIDE_UPB, SLOT_WORDS_PER_BLOCK,
                                      BL_WIDE_H_STRIDE>(base, layout.block_stride, valid_windows,
                                                        want, p.spin_timeout_ns, p.error, p.layer,
                                                        direction, step, stage);
            if (__syncthreads_or(aborted)) {
                return;
            }

            // Two chains (one per pair) for every window of the tile.
            float acc0[BILSTM_WIDE_MAX_TILE_HEIGHT];
            float acc1[BILSTM_WIDE_MAX_TILE_HEIGHT];
#pragma unroll
            for (int n = 0; n < TH; ++n) {
                const float4* hrow = reinterpret_cast<const float4*>(&stage[n][q * BILSTM_DOT_CHAIN_TERMS]);
                const float4 ha = hrow[0];
                const float4 hb = hrow[1];
                const float h[BILSTM_DOT_CHAIN_TERMS] = {ha.x, ha.y, ha.z, ha.w, hb.x, hb.y, hb.z, hb.w};
                acc0[n] = bl_dot_chain8(r[0], h);
                acc1[n] = bl_dot_chain8(r[1], h);
            }
            bl_reduce_chains<TH>(acc0, q);
            bl_reduce_chains<TH>(acc1, q);

            // Gather the four gates of the owned window across the halves (lane ^ 16).
            float mine0, mine1, send0, send1;
            if constexpr (TH == 32) {
                mine0 = half ? acc0[1] : acc0[0];
                mine1 = half ? acc1[1] : acc1[0];
                send0 = half ? acc0[0] : acc0[1];
                send1 = half ? acc1[0] : acc1[1];
            } else {
                mine0 = acc0[0];
                mine1 = acc1[0];
                send0 = acc0[0];
                send1 = acc1[0];
            }
            const float recv0 = __shfl_xor_sync(BL_FULL_MASK, send0, BL_WIDE_HALF);
            const float recv1 = __shfl_xor_sync(BL_FULL_MASK, send1, BL_WIDE_HALF);
            // Pair 0 holds gate 0 + half (i or f), pair 1 gate 2 + half (g or o).
            dot_i = half ? recv0 : mine0;
            dot_f = half ? mine0 : recv0;
            dot_g = half ? recv1 : mine1;
            dot_o = half ? mine1 : recv1;
        }

        const float h = bl_lstm_cell(bl_preactivation(proj.x, dot_i, bias.x),
                                     bl_preactivation(proj.y, dot_f, bias.y),
                                     bl_preactivation(proj.z, dot_g, bias.z),
                                     bl_preactivation(proj.w, dot_o, bias.w), &c);
        if (stores) {
            p.out[row * (2 * BILSTM_HIDDEN) + direction * BILSTM_HIDDEN + unit] = h;
            bl_u64* address = p.exchange + bl_word_index(layout, direction, tile, step & 1, block,
                                                         (bl_u32)own, (bl_u32)warp);
            bl_st_relaxed_u64(address, bl_exchange_word(bl_exchange_flag(p.layer, frames, step), h));
        }
    }
}

extern "C" __global__ void __launch_bounds__(BILSTM_BLOCK_THREADS)
    bilstm_recurrence_wide(const bl_recurrence_wide_params p) {
    __shared__ __align__(16) float h_s[2][BILSTM_WIDE_MAX_TILE_HEIGHT][BL_WIDE_H_STRIDE];
    if ((int)blockIdx.x == p.stall_block) {
        return;
    }
    switch (p.tile_height) {
        case 8:
            bl_recurrence_wide<8>(p, h_s);
            break;
        case 16:
            bl_recurrence_wide<16>(p, h_s);
            break;
        case 32:
            bl_recurrence_wide<32>(p, h_s);
            break;
        default:
            break;
    }
}
