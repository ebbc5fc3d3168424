// recurrence_tiled.cu: the tiled cooperative recurrence: one launch runs all steps of one
// direction of one layer for a range of eight-window tiles; the 8 blocks of a tile split the
// 128 hidden units between them (16 each), hold R once across the tile in registers and trade
// hidden states through the flag-in-word protocol of exchange.cuh.
//
// Launch contract
// - Entry: bilstm_recurrence_tiled(const bl_recurrence_tiled_params p). COOPERATIVE: every block
//   of a tile spins on its partners, so the whole grid must be co-resident
//   (cuLaunchCooperativeKernel; the host keeps the grid within occupancy x SMs).
// - Grid: (tiles_in_launch * BILSTM_TILED_BLOCKS_PER_TILE, 1, 1); block b of a tile is
//   blockIdx.x % BILSTM_TILED_BLOCKS_PER_TILE, the tile is tile_offset + blockIdx.x /
//   BILSTM_TILED_BLOCKS_PER_TILE. Block: (BILSTM_BLOCK_THREADS, 1, 1). Dynamic shared bytes: 0
//   (static: two hidden-state stages of BILSTM_TILED_WINDOWS x (BILSTM_HIDDEN +
//   BILSTM_TILED_UNITS_PER_BLOCK) floats, 9,216 bytes).
// - Parameters: bl_recurrence_tiled_params (96 bytes), mirrored by
//   bilstm_kernels::params::RecurrenceTiledParams.
// - Preconditions: proj holds batch * frames * BILSTM_GATE_ROWS floats of this direction (row =
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
//   output bits equal recurrence_wide.cu's and recurrence_resident.cu's; the dot-product tree is
//   realised by the same transpose-reduce as the wide kernel's 8-window tiles (below).
// - Defines read: BILSTM_HIDDEN, BILSTM_GATES, BILSTM_GATE_ROWS, BILSTM_BLOCK_THREADS,
//   BILSTM_WARP_THREADS, BILSTM_TILED_WINDOWS, BILSTM_TILED_BLOCKS_PER_TILE,
//   BILSTM_TILED_UNITS_PER_BLOCK, BILSTM_DOT_CHAINS, BILSTM_DOT_CHAIN_TERMS,
//   BILSTM_EXCHANGE_WORD_BYTES, BILSTM_EXCHANGE_SLOTS.
//
// Thread mapping (block b owns units 16b .. 16b+15 = packed gate rows 64b .. 64b+63):
// - warp w (0..7) owns the two units U_a = 16b + 2w + a (a = 0, 1): 8 gate rows;
// - lane l = 16 s + q: half s (0, 1), chain q (0..15, covering k = 8q .. 8q+7);
// - each thread holds four (row, chain) pairs x = 2a + p (a, p in 0, 1): row 4 U_a + 2p + s, i.e.
//   half 0 holds gates i (p 0) and g (p 1) of both units, half 1 gates f and o; their 4 x 8
//   recurrent weights stay in registers for all steps (64 rows x 128 = 256 threads x 32 floats).
// Per step s >= 1 (step 0 has h = 0: the dot is +0.0f and nothing is read):
// 1. the lane loads the projection float4 (i, f, g, o) of the cell it owns (below);
// 2. load phase: the block's 256 threads read the 8 x 128 words of step s - 1 (slot
//    (s - 1) % 2; thread t takes words t + 256 i, i.e. producer block, window, unit in that
//    order), spin on each until its flag is layer * frames + s (bl_exchange_wait), and stage the
//    values in h_s[(s - 1) % 2][window][unit] (zeros for windows >= batch);
// 3. __syncthreads_or(aborted): the one barrier of the step (h_s is double-buffered, so the
//    next step's load phase never overwrites what this step reads);
// 4. each thread computes its four chains for each of the 8 windows (h from shared memory);
// 5. the 16 chains of a row live in the 16 lanes of a half-warp; the transpose-reduce of
//    recurrence_wide.cu for 8-window tiles sums them: at level offset o = 1, 2, 4 each lane keeps
//    half of its windows (the upper half when q & o) and adds the partner lane's (q ^ o) partial
//    sums of those windows; at o = 8 both lanes add their single values. Level 1 adds chains q
//    and q ^ 1, level 2 those pairs, ...: exactly the tree ((c0+c1)+(c2+c3))+((c4+c5)+(c6+c7))
//    ... of numerics.cuh (IEEE addition is commutative, so the order inside each + is
//    irrelevant). Afterwards lanes q and q ^ 8 both hold full dots for window rev3(q & 7);
//    kernels/tests/tiled_mapping.rs replays this lane by lane on the CPU;
// 6. two shuffles across the halves (lane ^ 16) give half s all four gates of unit U_s: half 0
//    sends (i, g) of U_1 and receives (f, o) of U_0; half 1 the other way round. Lane (s, q) owns
//    the cell (U_s, window rev3(q & 7)); lanes q and q ^ 8 compute bitwise the same cell and the
//    one with q < 8 (the writer) stores;
// 7. pre-activations (proj + dot) + bias, the cell update (state c in a register of the owning
//    lane), h written to out and published to slot s % 2 with a relaxed 64-bit store.

#ifndef BILSTM_HIDDEN
#error "bilstm kernels are compiled with the -D options of bilstm_core::geometry::defines()"
#endif

#include "common.cuh"
#include "numerics.cuh"
#include "exchange.cuh"

struct bl_recurrence_tiled_params {
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
    bl_u32 tile_offset;
    bl_u32 block_stride;
    bl_u32 slot_stride;
    bl_u32 tile_stride;
    bl_u32 direction_stride;
    // Test-only fault injection: the block with this blockIdx.x returns at once and never
    // publishes (so its partners must report BL_ERROR_PARTNER_LOST); -1 in production.
    int stall_block;
};
static_assert(sizeof(bl_recurrence_tiled_params) == 96,
              "mirrors bilstm_kernels::params::RecurrenceTiledParams");

constexpr int BL_TILED_WARPS = BILSTM_BLOCK_THREADS / BILSTM_WARP_THREADS;
constexpr int BL_TILED_UPB = BILSTM_TILED_UNITS_PER_BLOCK;
constexpr int BL_TILED_TH = BILSTM_TILED_WINDOWS;
constexpr int BL_TILED_HALF = BILSTM_WARP_THREADS / 2;
// Units per warp (one per half-warp in the cell phase) and (row, chain) pairs per thread.
constexpr int BL_TILED_UNITS_PER_WARP = BL_TILED_UPB / BL_TILED_WARPS;
constexpr int BL_TILED_PAIRS = BL_TILED_UNITS_PER_WARP * 2;
// Row stride of the staged hidden state: one producer's units of padding, so the stores of a
// warp's 32 consecutive words (16 units x 2 windows) fall in 32 distinct banks.
constexpr int BL_TILED_H_STRIDE = BILSTM_HIDDEN + BL_TILED_UPB;
constexpr int BL_TILED_WORDS_PER_THREAD = BL_TILED_TH * BILSTM_HIDDEN / BILSTM_BLOCK_THREADS;
constexpr int BL_TILED_SLOT_WORDS_PER_BLOCK = BL_TILED_TH * BL_TILED_UPB;
// Lane bits of the window index after the reduction (8 windows: 3 bits).
constexpr int BL_TILED_WINDOW_BITS = 3;

static_assert(BL_TILED_UNITS_PER_WARP == 2, "each half-warp owns one unit in the cell phase");
static_assert(BILSTM_GATES == 4, "a unit's four gates are two pairs of two half-warps");
static_assert(BILSTM_DOT_CHAINS == BL_TILED_HALF, "the 16 chains of a row fill a half-warp");
static_assert(BILSTM_DOT_CHAINS * BILSTM_DOT_CHAIN_TERMS == BILSTM_HIDDEN, "chains cover k");
static_assert(BILSTM_DOT_CHAIN_TERMS == 8, "a chain is two float4 of h");
static_assert(BL_TILED_TH == (1 << BL_TILED_WINDOW_BITS), "the reduction is written for 8 windows");
static_assert(BL_TILED_UPB * BILSTM_TILED_BLOCKS_PER_TILE == BILSTM_HIDDEN, "blocks cover the units");
static_assert(BL_TILED_TH * BILSTM_HIDDEN % BILSTM_BLOCK_THREADS == 0, "the load phase splits evenly");
static_assert(BL_TILED_H_STRIDE % 4 == 0, "float4 rows");

// One transpose-reduce level with partner offset OFFSET over N windows (N = 8, 4, 2: keep the
// upper half of v[0 .. N) when `upper`, else the lower half, and add the partner's copy of it;
// N = 1: v[0] += the partner's v[0], both lanes get the sum). The result is in v[0 .. N / 2).
template <int N, int OFFSET>
__device__ __forceinline__ void bl_tiled_reduce_level(float (&v)[BL_TILED_TH], bool upper) {
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

// The four levels (offsets 1, 2, 4, 8: chain bit 0 first); the dot of window rev3(q & 7) ends
// in v[0].
__device__ __forceinline__ void bl_tiled_reduce_chains(float (&v)[BL_TILED_TH], int q) {
    bl_tiled_reduce_level<8, 1>(v, (q & 1) != 0);
    bl_tiled_reduce_level<4, 2>(v, (q & 2) != 0);
    bl_tiled_reduce_level<2, 4>(v, (q & 4) != 0);
    bl_tiled_reduce_level<1, 8>(v, (q & 8) != 0);
}

extern "C" __global__ void __launch_bounds__(BILSTM_BLOCK_THREADS, 2)
    bilstm_recurrence_tiled(const bl_recurrence_tiled_params p) {
    __shared__ __align__(16) float h_s[2][BL_TILED_TH][BL_TILED_H_STRIDE];
    if ((int)blockIdx.x == p.stall_block) {
        return;
    }
    const int tid = threadIdx.x;
    const int warp = tid / BILSTM_WARP_THREADS;
    const int lane = tid % BILSTM_WARP_THREADS;
    const int half = lane / BL_TILED_HALF;
    const int q = lane % BL_TILED_HALF;
    const bl_u32 block = blockIdx.x % BILSTM_TILED_BLOCKS_PER_TILE;
    const bl_u32 tile = p.tile_offset + blockIdx.x / BILSTM_TILED_BLOCKS_PER_TILE;
    // The warp's first unit (in the block and in the layer).
    const bl_u32 warp_unit_in_block = (bl_u32)warp * BL_TILED_UNITS_PER_WARP;
    const bl_u32 warp_unit = block * BL_TILED_UPB + warp_unit_in_block;
    const bl_u32 frames = p.frames;
    const bl_u32 batch = p.batch;
    const bl_u32 direction = p.direction;
    const bl_exchange_layout layout = {(bl_u32)BL_TILED_UPB, p.block_stride, p.slot_stride,
                                       p.tile_stride, p.direction_stride};

    // The recurrent weights of this thread's four (row, chain) pairs, for all steps:
    // pair x = 2a + pp is row 4 (warp_unit + a) + 2 pp + half, terms 8q .. 8q+7.
    float r[BL_TILED_PAIRS][BILSTM_DOT_CHAIN_TERMS];
#pragma unroll
    for (int x = 0; x < BL_TILED_PAIRS; ++x) {
        const int a = x / 2;
        const int pp = x % 2;
        const bl_u32 row = (warp_unit + a) * BILSTM_GATES + 2 * pp + half;
        const float4* src = reinterpret_cast<const float4*>(
            p.recurrent + (bl_u64)row * BILSTM_HIDDEN + q * BILSTM_DOT_CHAIN_TERMS);
        const float4 lo = src[0];
        const float4 hi = src[1];
        r[x][0] = lo.x;
        r[x][1] = lo.y;
        r[x][2] = lo.z;
        r[x][3] = lo.w;
        r[x][4] = hi.x;
        r[x][5] = hi.y;
        r[x][6] = hi.z;
        r[x][7] = hi.w;
    }

    // The cell this lane owns: unit warp_unit + half, window rev3(q & 7); q < 8 stores.
    const bl_u32 own_unit_in_block = warp_unit_in_block + half;
    const bl_u32 own_unit = warp_unit + half;
    const int own = (int)bl_bit_reverse(q & (BL_TILED_TH - 1), BL_TILED_WINDOW_BITS);
    const bool writer = q < BL_TILED_TH;
    const float4 bias = *reinterpret_cast<const float4*>(p.bias + own_unit * BILSTM_GATES);
    const bl_u32 tile_first = tile * BL_TILED_TH;
    const bl_u32 own_window = tile_first + own;
    const bool own_valid = own_window < batch;
    const bool stores = writer && own_valid;
    // Windows of this tile that exist (the last tile may be partial).
    const bl_u32 valid_windows = batch > tile_first ? min((bl_u32)BL_TILED_TH, batch - tile_first) : 0u;

    float c = 0.0f;
    for (bl_u32 step = 0; step < frames; ++step) {
        const bl_u32 frame = direction == 0 ? step : frames - 1 - step;
        const bl_u64 row = (bl_u64)own_window * frames + frame;
        float4 proj = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (own_valid) {
            proj = *reinterpret_cast<const float4*>(p.proj + row * BILSTM_GATE_ROWS + own_unit * BILSTM_GATES);
        }

        // Recurrent dots of the four gates of the owned cell; +0.0f at step 0.
        float dot_i = 0.0f, dot_f = 0.0f, dot_g = 0.0f, dot_o = 0.0f;
        if (step > 0) {
            // Load phase: the words of step - 1 from all producers of this tile.
            const bl_u32 want = bl_exchange_flag(p.layer, frames, step - 1);
            const bl_u32 slot = (step - 1) & 1;
            float(*stage)[BL_TILED_H_STRIDE] = h_s[slot];
            const bl_u64* base = p.exchange + bl_word_index(layout, direction, tile, slot, 0, 0, 0);
            const bool aborted =
                bl_exchange_load_step<BL_TILED_WORDS_PER_THREAD, BL_TILED_UPB,
                                      BL_TILED_SLOT_WORDS_PER_BLOCK, BL_TILED_H_STRIDE>(
                    base, layout.block_stride, valid_windows, want, p.spin_timeout_ns, p.error,
                    p.layer, direction, step, stage);
            if (__syncthreads_or(aborted)) {
                return;
            }

            // Four chains (one per pair) for each window of the tile.
            float acc[BL_TILED_PAIRS][BL_TILED_TH];
#pragma unroll
            for (int n = 0; n < BL_TILED_TH; ++n) {
                const float4* hrow = reinterpret_cast<const float4*>(&stage[n][q * BILSTM_DOT_CHAIN_TERMS]);
                const float4 ha = hrow[0];
                const float4 hb = hrow[1];
                const float h[BILSTM_DOT_CHAIN_TERMS] = {ha.x, ha.y, ha.z, ha.w, hb.x, hb.y, hb.z, hb.w};
#pragma unroll
                for (int x = 0; x < BL_TILED_PAIRS; ++x) {
                    acc[x][n] = bl_dot_chain8(r[x], h);
                }
            }
#pragma unroll
            for (int x = 0; x < BL_TILED_PAIRS; ++x) {
                bl_tiled_reduce_chains(acc[x], q);
            }

            // Gather the four gates of unit U_half across the halves (lane ^ 16). Pair x = 2a + pp
            // holds gate 2 pp + half of unit U_a.
            const float send0 = half ? acc[0][0] : acc[2][0];  // half 1: f of U_0; half 0: i of U_1
            const float send1 = half ? acc[1][0] : acc[3][0];  // half 1: o of U_0; half 0: g of U_1
            const float recv0 = __shfl_xor_sync(BL_FULL_MASK, send0, BL_TILED_HALF);
            const float recv1 = __shfl_xor_sync(BL_FULL_MASK, send1, BL_TILED_HALF);
            dot_i = half ? recv0 : acc[0][0];
            dot_f = half ? acc[2][0] : recv0;
            dot_g = half ? recv1 : acc[1][0];
            dot_o = half ? acc[3][0] : recv1;
        }

        const float h = bl_lstm_cell(bl_preactivation(proj.x, dot_i, bias.x),
                                     bl_preactivation(proj.y, dot_f, bias.y),
                                     bl_preactivation(proj.z, dot_g, bias.z),
                                     bl_preactivation(proj.w, dot_o, bias.w), &c);
        if (stores) {
            p.out[row * (2 * BILSTM_HIDDEN) + direction * BILSTM_HIDDEN + own_unit] = h;
            bl_u64* address = p.exchange + bl_word_index(layout, direction, tile, step & 1, block,
                                                         (bl_u32)own, own_unit_in_block);
            bl_st_relaxed_u64(address, bl_exchange_word(bl_exchange_flag(p.layer, frames, step), h));
        }
    }
}
