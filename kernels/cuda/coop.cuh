// coop.cuh: what the two cooperative recurrences (recurrence_wide.cu, recurrence_tiled.cu)
// share: their parameter struct, a block's place in its tile, and the parts of a step that are
// the same in both: the load phase of exchange.cuh with the gate-input load issued behind the
// exchange loads, the cell with its output store and publish, and the shuffle levels that sum a
// row's chains (FP32 mode: 16 chains of 8 terms over a half-warp; TF32 mode: 8 chains of 16
// terms over an 8-lane group, numerics.cuh section 8) and gather a cell's four gates.

#ifndef BILSTM_HIDDEN
#error "bilstm kernels are compiled with the -D options of bilstm_core::geometry::defines()"
#endif

// The parameters of bilstm_recurrence_wide and bilstm_recurrence_tiled, mirrored by
// bilstm_kernels::params::RecurrenceCoopParams (120 bytes, every offset tested there).
struct bl_recurrence_coop_params {
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
    // Windows per tile: 8, 16 or 32 (wide), BILSTM_TILED_WINDOWS (tiled).
    bl_u32 tile_height;
    bl_u32 tile_offset;
    bl_u32 block_stride;
    bl_u32 slot_stride;
    bl_u32 tile_stride;
    bl_u32 direction_stride;
    // Test-only fault injection: the block with this blockIdx.x returns at once and never
    // publishes (so its partners must report BL_ERROR_PARTNER_LOST); -1 in production.
    int stall_block;
    // Nonzero: TF32 mode's recurrence numerics (numerics.cuh sections 7 and 8: the estimate
    // gates and the 8-chain dot), zero: FP32 mode's; the entries read it once.
    bl_u32 tf32_numerics;
    // This layer's final states [2][batch][BILSTM_HIDDEN] (direction-major), or null.
    float* state_h;
    float* state_c;
};
static_assert(sizeof(bl_recurrence_coop_params) == 120,
              "mirrors bilstm_kernels::params::RecurrenceCoopParams");

// A block's place in the launch: its producer index in the tile, its tile, the windows of the
// tile that exist (the last tile may be partial) and the exchange strides.
struct bl_coop_block {
    bl_u32 block;
    bl_u32 tile;
    bl_u32 valid_windows;
    bl_exchange_layout layout;
};

// The place of this block, for a kernel of BLOCKS_PER_TILE blocks of UPB units per tile.
template <int BLOCKS_PER_TILE, int UPB>
__device__ __forceinline__ bl_coop_block bl_coop_block_of(const bl_recurrence_coop_params& p) {
    bl_coop_block b;
    b.block = blockIdx.x % BLOCKS_PER_TILE;
    b.tile = p.tile_offset + blockIdx.x / BLOCKS_PER_TILE;
    const bl_u32 first = b.tile * p.tile_height;
    b.valid_windows = p.batch > first ? min(p.tile_height, p.batch - first) : 0u;
    b.layout = {(bl_u32)UPB, p.block_stride, p.slot_stride, p.tile_stride, p.direction_stride};
    return b;
}

// The frame of step `step` (direction 0 forward, 1 reverse).
__device__ __forceinline__ bl_u32 bl_coop_frame(const bl_recurrence_coop_params& p, bl_u32 step) {
    return p.direction == 0 ? step : p.frames - 1 - step;
}

// The gate inputs (i, f, g, o) of `unit` at projection row `row` when `valid`, else zeros.
__device__ __forceinline__ float4 bl_coop_gate_inputs(const bl_recurrence_coop_params& p, bool valid,
                                                      bl_u64 row, bl_u32 unit) {
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (valid) {
        v = *reinterpret_cast<const float4*>(p.proj + row * BILSTM_GATE_ROWS + unit * BILSTM_GATES);
    }
    return v;
}

// The load phase of step `step` >= 1 over WINDOWS windows of every producer (exchange.cuh), with
// this lane's gate inputs for the step (bl_coop_gate_inputs(p, gate_valid, row, unit)) loaded
// after the exchange loads are issued and before they are awaited, then the step's one
// barrier. FAST (TF32 mode): h is staged in padded rows (exchange.cuh's bl_stage_h_index).
// Returns true when some thread of the block gave up: the caller must leave the kernel.
template <int WINDOWS, int UPB, int H_STRIDE, bool FAST>
__device__ __forceinline__ bool bl_coop_receive(const bl_recurrence_coop_params& p,
                                                const bl_coop_block& b, bl_u32 step,
                                                float (*stage)[H_STRIDE], bool gate_valid,
                                                bl_u64 row, bl_u32 unit, float4& gates_in) {
    const bl_u32 want = bl_exchange_flag(p.layer, p.frames, step - 1);
    const bl_u32 slot = (step - 1) & 1u;
    const bl_u64* base = p.exchange + bl_word_index(b.layout, p.direction, b.tile, slot, 0, 0, 0);
    bl_u64 words[bl_exchange_words_per_thread<WINDOWS>()];
    const bl_u32 pending = bl_exchange_issue<WINDOWS, UPB, H_STRIDE, FAST>(base, b.layout.block_stride,
                                                                            b.valid_windows, words, stage);
    gates_in = bl_coop_gate_inputs(p, gate_valid, row, unit);
    const bool aborted = bl_exchange_await<WINDOWS, UPB, H_STRIDE, FAST>(
        base, b.layout.block_stride, words, pending, want, p.spin_timeout_ns, p.error, p.layer,
        p.direction, step, stage);
    return __syncthreads_or(aborted) != 0;
}

// The end of a step for one cell: pre-activations (gate input + dot) + bias, the cell update
// (state `c` in this lane's register) and, when `stores`, h written to out[row] and published
// as (unit_in_block, window) of this block in slot step % 2. FAST: TF32 mode's activations.
template <bool FAST>
__device__ __forceinline__ void bl_coop_cell(const bl_recurrence_coop_params& p, const bl_coop_block& b,
                                             bl_u32 step, bl_u64 row, bl_u32 unit,
                                             bl_u32 unit_in_block, bl_u32 window, float4 gates_in,
                                             float4 dots, float4 bias, float& c, bool stores) {
    const float h = bl_lstm_cell_g<FAST>(bl_preactivation(gates_in.x, dots.x, bias.x),
                                         bl_preactivation(gates_in.y, dots.y, bias.y),
                                         bl_preactivation(gates_in.z, dots.z, bias.z),
                                         bl_preactivation(gates_in.w, dots.w, bias.w), &c);
    if (stores) {
        p.out[row * (2 * BILSTM_HIDDEN) + p.direction * BILSTM_HIDDEN + unit] = h;
        if (step + 1u == p.frames) {
            // The last step: the window's final state (row = window * frames + frame).
            bl_store_final_state(p.state_h, p.state_c, p.direction, p.batch, row / p.frames, unit, h, c);
        }
        bl_u64* address =
            p.exchange + bl_word_index(b.layout, p.direction, b.tile, step & 1u, b.block, window, unit_in_block);
        bl_st_relaxed_u64(address, bl_exchange_word(bl_exchange_flag(p.layer, p.frames, step), h));
    }
}

// The recurrent weights of one (row, chain) pair: terms 8q .. 8q+7 of packed row `row`.
__device__ __forceinline__ void bl_coop_chain_weights(const bl_recurrence_coop_params& p, bl_u32 row,
                                                      int q, float (&r)[BILSTM_DOT_CHAIN_TERMS]) {
    static_assert(BILSTM_DOT_CHAIN_TERMS == 8, "a chain is two float4 of R");
    const float4* src = reinterpret_cast<const float4*>(p.recurrent + (bl_u64)row * BILSTM_HIDDEN +
                                                        q * BILSTM_DOT_CHAIN_TERMS);
    const float4 a = src[0];
    const float4 b = src[1];
    r[0] = a.x;
    r[1] = a.y;
    r[2] = a.z;
    r[3] = a.w;
    r[4] = b.x;
    r[5] = b.y;
    r[6] = b.z;
    r[7] = b.w;
}

// Chain q's 8 values of h for `window` from the staged hidden state.
template <int H_STRIDE>
__device__ __forceinline__ void bl_coop_chain_h(const float (*stage)[H_STRIDE], int window, int q,
                                                float (&h)[BILSTM_DOT_CHAIN_TERMS]) {
    static_assert(BILSTM_DOT_CHAIN_TERMS == 8, "two float4 a chain");
    bl_load8(h, &stage[window][q * BILSTM_DOT_CHAIN_TERMS]);
}

// One transpose-reduce level over the chains of a row (the 16 of a half-warp, or TF32 mode's 8
// of an 8-lane group), partner offset OFFSET, over N windows held in v[0 .. N): keep the upper
// half of them when `upper`, else the lower half, and add the partner's (lane ^ OFFSET) copy of
// it; the result is in v[0 .. N / 2). N == 1: v[0] += the partner's v[0], both lanes get the sum.
template <int N, int OFFSET, int LEN>
__device__ __forceinline__ void bl_coop_reduce_level(float (&v)[LEN], bool upper) {
    static_assert(N <= LEN, "the windows fit the array");
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

// All four levels for TH windows (offsets 1, 2, 4, 8: chain bit 0 first). Level 1 adds chains
// q and q ^ 1, level 2 those pairs, ...: exactly the fixed tree ((c0+c1)+(c2+c3))+... of
// numerics.cuh (IEEE addition is commutative, so the order inside each + is irrelevant).
// Afterwards lane q holds full dots for windows 2 rev4(q) + {0, 1} (TH 32), rev4(q) (16),
// rev3(q & 7) (8; the last level adds whole halves, lanes q and q ^ 8 both hold the sum) or
// window 0 (1: every level adds whole values, a butterfly; every lane holds the sum).
template <int TH, int LEN>
__device__ __forceinline__ void bl_coop_reduce_chains(float (&v)[LEN], int q) {
    bl_coop_reduce_level<TH, 1>(v, (q & 1) != 0);
    bl_coop_reduce_level<(TH / 2 > 1 ? TH / 2 : 1), 2>(v, (q & 2) != 0);
    bl_coop_reduce_level<(TH / 4 > 1 ? TH / 4 : 1), 4>(v, (q & 4) != 0);
    bl_coop_reduce_level<(TH / 8 > 1 ? TH / 8 : 1), 8>(v, (q & 8) != 0);
}

// TF32 mode (numerics.cuh section 8): the recurrent weights of one (row, chain) pair, terms
// 16m .. 16m+15 of packed row `row`, in two 8-term parts: r0 terms 16m .. 16m+7, r1 the rest.
__device__ __forceinline__ void bl_coop_chain_weights_tf32(const bl_recurrence_coop_params& p, bl_u32 row, int m,
                                                           float (&r0)[BILSTM_DOT_CHAIN_TERMS],
                                                           float (&r1)[BILSTM_DOT_CHAIN_TERMS]) {
    static_assert(BILSTM_TF32_DOT_CHAIN_TERMS == 2 * BILSTM_DOT_CHAIN_TERMS, "a chain is two 8-term parts");
    bl_coop_chain_weights(p, row, 2 * m, r0);
    bl_coop_chain_weights(p, row, 2 * m + 1, r1);
}

// TF32 mode: chain m's 16 values of h for `window` from the staged hidden state (padded rows:
// the chain's units are 16 consecutive floats at bl_stage_h_index<true>(16m)), in the two parts
// of bl_coop_chain_weights_tf32.
template <int H_STRIDE>
__device__ __forceinline__ void bl_coop_chain_h_tf32(const float (*stage)[H_STRIDE], int window, int m,
                                                     float (&h0)[BILSTM_DOT_CHAIN_TERMS],
                                                     float (&h1)[BILSTM_DOT_CHAIN_TERMS]) {
    const float* chain = &stage[window][bl_stage_h_index<true>(m * BILSTM_TF32_DOT_CHAIN_TERMS)];
    bl_load8(h0, chain);
    bl_load8(h1, chain + BILSTM_DOT_CHAIN_TERMS);
}

// TF32 mode: one 16-term chain from its two parts (bl_coop_chain_weights_tf32,
// bl_coop_chain_h_tf32): bl_dot_chain<16>'s FMAs in ascending k from 0.0f, the second part
// continuing from the first part's value.
__device__ __forceinline__ float bl_coop_dot_chain_tf32(const float (&r0)[BILSTM_DOT_CHAIN_TERMS],
                                                        const float (&r1)[BILSTM_DOT_CHAIN_TERMS],
                                                        const float (&h0)[BILSTM_DOT_CHAIN_TERMS],
                                                        const float (&h1)[BILSTM_DOT_CHAIN_TERMS]) {
    return bl_dot_chain<BILSTM_DOT_CHAIN_TERMS>(r1, h1, bl_dot_chain<BILSTM_DOT_CHAIN_TERMS>(r0, h0));
}

// TF32 mode's three levels over the 8 chains of an 8-lane group, lane m holding chain m (offsets
// 1, 2, 4: chain bit 0 first). Level 1 adds chains m and m ^ 1, level 2 those pairs, level 4
// those quads: exactly the tree ((c0+c1)+(c2+c3))+((c4+c5)+(c6+c7)) of numerics.cuh section 8
// (bl_dot_tree8). Afterwards lane m holds full dots for windows (TH / 8) rev3(m) + j, j < TH / 8
// (TH 32, 16, 8), or window 0 (TH 1: a butterfly, every lane holds the sum).
template <int TH, int LEN>
__device__ __forceinline__ void bl_coop_reduce_chains_tf32(float (&v)[LEN], int m) {
    static_assert(BILSTM_TF32_DOT_CHAINS == 8, "three levels");
    bl_coop_reduce_level<TH, 1>(v, (m & 1) != 0);
    bl_coop_reduce_level<(TH / 2 > 1 ? TH / 2 : 1), 2>(v, (m & 2) != 0);
    bl_coop_reduce_level<(TH / 4 > 1 ? TH / 4 : 1), 4>(v, (m & 4) != 0);
}

// One gather level of TF32 mode, partner offset OFFSET: lanes l and l ^ OFFSET hold the dots of
// the same N cells for two different gates; over the cells' dots v[0 .. N) of this lane's gate,
// keep the upper half when `upper`, else the lower half (in v[0 .. N / 2)), and receive the
// partner's dots of the kept half into t[0 .. N / 2). N == 1: both lanes keep v[0], t[0] is the
// partner's v[0].
template <int N, int OFFSET, int LEN, int TLEN>
__device__ __forceinline__ void bl_coop_gather_level(float (&v)[LEN], float (&t)[TLEN], bool upper) {
    static_assert(N <= LEN && (N == 1 || N / 2 <= TLEN), "the cells fit the arrays");
    if constexpr (N == 1) {
        t[0] = __shfl_xor_sync(BL_FULL_MASK, v[0], OFFSET);
    } else {
#pragma unroll
        for (int i = 0; i < N / 2; ++i) {
            const float lo = v[i];
            const float hi = v[i + N / 2];
            v[i] = upper ? hi : lo;
            t[i] = __shfl_xor_sync(BL_FULL_MASK, upper ? lo : hi, OFFSET);
        }
    }
}

// TF32 mode: the four gates (i, f, g, o) of a lane's cell from its dots d_x of gate `gate` ^ x
// (x = 0 .. 3; `gate` is the lane's own): gate k is d_(k ^ gate).
__device__ __forceinline__ float4 bl_coop_gates_tf32(int gate, float d0, float d1, float d2, float d3) {
    const bool odd = (gate & 1) != 0;
    const bool high = (gate & 2) != 0;
    // e_y: the dot of gate `gate` ^ (gate & 1) ^ y, i.e. of gate (gate & 2) ^ y.
    const float e0 = odd ? d1 : d0;
    const float e1 = odd ? d0 : d1;
    const float e2 = odd ? d3 : d2;
    const float e3 = odd ? d2 : d3;
    return make_float4(high ? e2 : e0, high ? e3 : e1, high ? e0 : e2, high ? e1 : e3);
}
