// recurrence_resident.cu: the SM-resident recurrence: one block per (window, direction) runs all
// steps of one layer with that direction's whole recurrent matrix on its SM (half in registers,
// half in dynamic shared memory) and the hidden state in shared memory: one block barrier per
// step, no traffic between SMs, no exchange buffer, no spin.
//
// Launch contract
// - Entry: bilstm_recurrence_resident(const bl_recurrence_resident_params p). Not cooperative:
//   no block waits for another, so blocks beyond the device's capacity simply run in later
//   waves.
// - Grid: (2 * batch, 1, 1); block x runs window x / 2 in direction x % 2 (both directions of a
//   layer in one launch). Block: (BILSTM_RESIDENT_THREADS, 1, 1). Dynamic shared bytes:
//   exactly BILSTM_RESIDENT_SHARED_BYTES (134,144: half of R, BILSTM_RESIDENT_R_SHARED_BYTES,
//   then two hidden vectors of BILSTM_HIDDEN floats, then one step's BILSTM_GATE_ROWS
//   projection floats), which the host first allows with
//   cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES). No static shared memory.
// - Parameters: bl_recurrence_resident_params (88 bytes), mirrored by
//   bilstm_kernels::params::RecurrenceResidentParams.
// - Preconditions: for d = 0, 1: proj[d] holds batch * frames * BILSTM_GATE_ROWS floats of
//   direction d (row = window * frames + frame, packed gate columns unit * 4 + gate);
//   recurrent[d] holds direction d's packed recurrent rows [BILSTM_GATE_ROWS, BILSTM_HIDDEN];
//   bias[d] its packed combined bias [BILSTM_GATE_ROWS] (all 16-byte aligned); out holds batch *
//   frames * 2 * BILSTM_HIDDEN floats and overlaps none of the inputs; batch >= 1, frames >= 1.
// - Postconditions: for every window w < batch, direction d and step s, with frame t = s
//   (d = 0) or frames - 1 - s (d = 1): out[(w * frames + t) * 256 + d * 128 + unit] = h_s(unit)
//   for all 128 units; nothing else is written.
// - Numerics: numerics.cuh (DESIGN section 4), identical in every recurrence kernel, so the
//   output bits equal recurrence_wide.cu's and recurrence_tiled.cu's; the dot-product tree is
//   realised by a transpose-reduce over the 8 lanes of a row group (below; TF32 mode's 8-chain
//   tree of section 8 likewise). The dot and gate activations are FP32 mode's (sections 1,
//   3-5) with tf32_numerics = 0 and TF32 mode's (sections 8, 7) otherwise, picked once at entry;
//   the host sets tf32_numerics where the pass's projection is a TF32 tile
//   (ProjectionTile::tf32_numerics).
// - Defines read: BILSTM_HIDDEN, BILSTM_GATES, BILSTM_GATE_ROWS, BILSTM_WARP_THREADS,
//   BILSTM_RESIDENT_THREADS, BILSTM_RESIDENT_CHAINS_PER_THREAD, BILSTM_RESIDENT_R_SHARED_BYTES,
//   BILSTM_RESIDENT_SHARED_BYTES, BILSTM_DOT_CHAINS, BILSTM_DOT_CHAIN_TERMS,
//   BILSTM_TF32_DOT_CHAIN_TERMS.
//
// Thread mapping (256 threads; the numbers below are what the defines give):
// - thread t belongs to group g = t / 8 (0..31) and is its lane p = t % 8; it holds
//   BILSTM_RESIDENT_CHAINS_PER_THREAD = 2 chains, 2p and 2p + 1 (terms k = 16p .. 16p+15); group g
//   owns the 16 packed gate rows 16g .. 16g+15, i.e. the four units 4g .. 4g+3;
// - thread t holds its 16 terms of all 16 rows of its group: rows 16g + i for i < 8 in registers
//   (r[i][0..16), 128 floats) and rows 16g + 8 + i in shared memory, stored as float4
//   r_s[(4 i + m) * 256 + t] = R[16g + 8 + i][16p + 4m .. 16p + 4m + 3] (m = 0..3), so each
//   shared load of a warp reads 32 consecutive float4: no bank conflict. Together: 512 rows x
//   128 terms, half in registers, half (128 KiB) in shared memory;
// - the hidden state h_{s-1} lives in h_s[(s - 1) % 2][0 .. 128) (double-buffered);
// - p_s[unit] (a float4) stages the projection of the cell lane's unit for the current step.
// Per step s (step 0 has h = 0: the dot is +0.0f and nothing is read):
// 1. each cell lane (p < 4) starts a cp.async copy of this step's projection float4 into
//    p_s[unit] (sm_80 and later; no register is held while the dot products run) and waits for
//    it just before step 5 (on older architectures it loads the float4 there instead; they
//    cannot hold this kernel's shared memory anyway);
// 2. each thread reads h[16p .. 16p+15] (four float4; the four groups of a warp read the same
//    addresses) and computes, for each of its 16 rows, chains c_2p and c_2p+1 (ascending k from
//    0.0f) and their sum c_2p + c_2p+1: the first level of the fixed tree, in the thread (TF32
//    mode: its 16 terms are chain p of numerics.cuh section 8, one ascending chain, and the
//    three lane levels below are that tree's three levels);
// 3. the 8 pair sums of a row live in the 8 lanes of a group; a transpose-reduce adds them: at
//    lane offset o = 1, 2, 4 each lane keeps half of its rows (the upper half when p & o) and
//    adds the partner lane's (p ^ o) partial sums of those rows. Offset 1 adds pairs p and
//    p ^ 1 (chains 4j .. 4j+3), offset 2 those quads, offset 4 the two halves: exactly the
//    tree ((c0+c1)+(c2+c3))+((c4+c5)+(c6+c7)) ... of numerics.cuh (IEEE addition is
//    commutative, so the order inside each + is irrelevant). Afterwards lane p holds the full
//    dots of rows 16g + 2 rev3(p) + j, j = 0, 1, i.e. gates 2 p2 + j of unit 4g + 2 p0 + p1
//    (p = 4 p2 + 2 p1 + p0); kernels/tests/resident_mapping.rs replays this lane by lane on the
//    CPU;
// 4. lane p < 4 holds gates i and f of its unit, lane p ^ 4 gates g and o: two shuffles bring
//    them to lane p, which owns the cell (state c in a register);
// 5. pre-activations (proj + dot) + bias, the cell update; h to out and to h_s[s % 2];
// 6. __syncthreads(): the one barrier of the step (h_s is double-buffered, so the next step's
//    stores never overwrite what this step still reads). The shared half of R is filled before
//    the loop; step 0 reads none of it, and its barrier orders the fill before step 1.

#ifndef BILSTM_HIDDEN
#error "bilstm kernels are compiled with the -D options of bilstm_core::geometry::defines()"
#endif

#include "common.cuh"
#include "numerics.cuh"

struct bl_recurrence_resident_params {
    const float* proj[2];
    const float* recurrent[2];
    const float* bias[2];
    float* out;
    bl_u32 batch;
    bl_u32 frames;
    // This layer's final states [2][batch][BILSTM_HIDDEN] (direction-major), or null.
    float* state_h;
    float* state_c;
    // Nonzero: TF32 mode's recurrence numerics (numerics.cuh sections 7 and 8), zero: FP32
    // mode's.
    bl_u32 tf32_numerics;
    bl_u32 reserved;
};
static_assert(sizeof(bl_recurrence_resident_params) == 88,
              "mirrors bilstm_kernels::params::RecurrenceResidentParams");

constexpr int BL_RES_THREADS = BILSTM_RESIDENT_THREADS;
// Chains per thread, lanes per row group, row groups, rows per group.
constexpr int BL_RES_CPT = BILSTM_RESIDENT_CHAINS_PER_THREAD;
constexpr int BL_RES_LANES = BILSTM_DOT_CHAINS / BL_RES_CPT;
constexpr int BL_RES_GROUPS = BL_RES_THREADS / BL_RES_LANES;
constexpr int BL_RES_ROWS = BILSTM_GATE_ROWS / BL_RES_GROUPS;
// Terms of k per thread, and float4 vectors of them.
constexpr int BL_RES_TERMS = BL_RES_CPT * BILSTM_DOT_CHAIN_TERMS;
constexpr int BL_RES_VECS = BL_RES_TERMS / 4;
// Rows per group whose terms a thread reads from shared memory, and those it keeps in registers.
constexpr int BL_RES_SHARED_ROWS =
    BILSTM_RESIDENT_R_SHARED_BYTES / (int)(sizeof(float) * BL_RES_TERMS * BL_RES_THREADS);
constexpr int BL_RES_REG_ROWS = BL_RES_ROWS - BL_RES_SHARED_ROWS;
// Lanes of a group that own a cell (one per unit of the group).
constexpr int BL_RES_CELL_LANES = BL_RES_ROWS / BILSTM_GATES;

static_assert(BL_RES_CPT == 2, "the in-thread sum of chains 2p and 2p+1 is the tree's first level");
static_assert(BL_RES_LANES == 8, "three lane levels (offsets 1, 2, 4) finish the tree");
static_assert(BILSTM_DOT_CHAINS * BILSTM_DOT_CHAIN_TERMS == BILSTM_HIDDEN, "chains cover k");
static_assert(BILSTM_DOT_CHAIN_TERMS == 8, "a chain is two float4 of h");
static_assert(BL_RES_THREADS % BILSTM_WARP_THREADS == 0, "whole warps");
static_assert(BILSTM_WARP_THREADS % BL_RES_LANES == 0, "groups never straddle warps");
static_assert(BL_RES_GROUPS * BL_RES_ROWS == BILSTM_GATE_ROWS, "groups cover the rows");
static_assert(BL_RES_ROWS == 16, "the reduction leaves rows 2 rev3(p) + {0, 1} of 16 per lane");
static_assert(BL_RES_SHARED_ROWS * BL_RES_TERMS * BL_RES_THREADS * (int)sizeof(float) ==
                  BILSTM_RESIDENT_R_SHARED_BYTES,
              "the shared half of R is whole rows of every group");
static_assert(BL_RES_REG_ROWS == BL_RES_ROWS / 2, "level 1 pairs a register row with a shared row");
static_assert(BL_RES_CELL_LANES == 4, "four units per group: lanes 0..3 own the cells");
static_assert(BILSTM_GATES == 4, "gates i, f, g, o");
static_assert(BILSTM_RESIDENT_SHARED_BYTES == BILSTM_RESIDENT_R_SHARED_BYTES +
                                                  2 * BILSTM_HIDDEN * (int)sizeof(float) +
                                                  BILSTM_GATE_ROWS * (int)sizeof(float),
              "dynamic shared memory: half of R, two hidden vectors, one step's projection");

#if __CUDA_ARCH__ >= 800
// Starts a 16-byte asynchronous copy global -> shared (cp.async.cg: cached in L2 only; the
// projection is read once) and commits it as a group of its own.
__device__ __forceinline__ void bl_res_stage_proj(float4* dst, const float4* src) {
    bl_u32 address;
    asm("{\n\t.reg .u64 a;\n\tcvta.to.shared.u64 a, %1;\n\tcvt.u32.u64 %0, a;\n\t}"
        : "=r"(address)
        : "l"(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" : : "r"(address), "l"(src) : "memory");
    asm volatile("cp.async.commit_group;" : : : "memory");
}

// Waits for this thread's copy and reads it (only the issuing thread reads its slot).
__device__ __forceinline__ float4 bl_res_take_proj(const float4* dst, const float4* src) {
    (void)src;
    asm volatile("cp.async.wait_all;" : : : "memory");
    return *dst;
}
#else
// Before sm_80 there is no cp.async: load at the point of use.
__device__ __forceinline__ void bl_res_stage_proj(float4* dst, const float4* src) {
    (void)dst;
    (void)src;
}

__device__ __forceinline__ float4 bl_res_take_proj(const float4* dst, const float4* src) {
    (void)dst;
    return *src;
}
#endif

// One transpose-reduce level with lane offset OFFSET over N rows (N = 8, 4): keep the upper
// half of v[0 .. N) when `upper`, else the lower half, and add the partner's copy of it. The
// result is in v[0 .. N / 2).
template <int N, int OFFSET>
__device__ __forceinline__ void bl_res_reduce_level(float (&v)[BL_RES_ROWS], bool upper) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
        const float lo = v[i];
        const float hi = v[i + N / 2];
        const float send = upper ? lo : hi;
        const float keep = upper ? hi : lo;
        v[i] = keep + __shfl_xor_sync(BL_FULL_MASK, send, OFFSET);
    }
}

// FP32 mode (FAST = false): c_2p + c_2p+1 of one row, the two ascending 8-term chains of the
// thread's 16 terms (w, h), then their sum. TF32 mode (FAST = true): those 16 terms are chain p
// of numerics.cuh section 8, one ascending chain.
template <bool FAST>
__device__ __forceinline__ float bl_res_pair(const float (&w)[BL_RES_TERMS], const float (&h)[BL_RES_TERMS]) {
    if constexpr (FAST) {
        static_assert(BL_RES_TERMS == BILSTM_TF32_DOT_CHAIN_TERMS, "a thread's terms are one TF32 chain");
        return bl_dot_chain<BL_RES_TERMS>(w, h);
    } else {
        float even = 0.0f;
        float odd = 0.0f;
#pragma unroll
        for (int m = 0; m < BILSTM_DOT_CHAIN_TERMS; ++m) {
            even = __fmaf_rn(w[m], h[m], even);
            odd = __fmaf_rn(w[BILSTM_DOT_CHAIN_TERMS + m], h[BILSTM_DOT_CHAIN_TERMS + m], odd);
        }
        return even + odd;
    }
}

template <bool FAST>
__device__ __forceinline__ void bl_recurrence_resident(const bl_recurrence_resident_params& p) {
    extern __shared__ __align__(16) float bl_res_shared[];
    float4* r_s = reinterpret_cast<float4*>(bl_res_shared);
    float* h_s = bl_res_shared + BILSTM_RESIDENT_R_SHARED_BYTES / (int)sizeof(float);
    float4* p_s = reinterpret_cast<float4*>(h_s + 2 * BILSTM_HIDDEN);

    const bl_u32 window = blockIdx.x / 2;
    const bl_u32 direction = blockIdx.x % 2;
    if (window >= p.batch) {
        return;  // never with the documented grid; the whole block leaves before any barrier
    }
    const int tid = threadIdx.x;
    const int lane = tid % BL_RES_LANES;
    const int group = tid / BL_RES_LANES;
    const bl_u32 frames = p.frames;
    // Selected, not indexed: a run-time index into a parameter array would copy the array to
    // local memory.
    const float* recurrent = direction == 0 ? p.recurrent[0] : p.recurrent[1];
    const float* proj = direction == 0 ? p.proj[0] : p.proj[1];
    const float* bias_in = direction == 0 ? p.bias[0] : p.bias[1];

    // Terms 16p .. 16p+15 of rows 16g .. 16g+7 in registers; of rows 16g+8 .. 16g+15 in shared
    // memory.
    float r[BL_RES_REG_ROWS][BL_RES_TERMS];
#pragma unroll
    for (int i = 0; i < BL_RES_REG_ROWS; ++i) {
        const bl_u32 row = group * BL_RES_ROWS + i;
        const float4* src = reinterpret_cast<const float4*>(
            recurrent + (bl_u64)row * BILSTM_HIDDEN + lane * BL_RES_TERMS);
#pragma unroll
        for (int m = 0; m < BL_RES_VECS; ++m) {
            const float4 v = src[m];
            r[i][4 * m + 0] = v.x;
            r[i][4 * m + 1] = v.y;
            r[i][4 * m + 2] = v.z;
            r[i][4 * m + 3] = v.w;
        }
    }
#pragma unroll
    for (int i = 0; i < BL_RES_SHARED_ROWS; ++i) {
        const bl_u32 row = group * BL_RES_ROWS + BL_RES_REG_ROWS + i;
        const float4* src = reinterpret_cast<const float4*>(
            recurrent + (bl_u64)row * BILSTM_HIDDEN + lane * BL_RES_TERMS);
#pragma unroll
        for (int m = 0; m < BL_RES_VECS; ++m) {
            r_s[(i * BL_RES_VECS + m) * BL_RES_THREADS + tid] = src[m];
        }
    }

    // The cell of lane p < 4: unit 4g + 2 p0 + p1. Other lanes compute the index for p & 3 (a
    // valid unit) so their addresses stay in bounds; they never load or store through it.
    const bool cell_lane = lane < BL_RES_CELL_LANES;
    const bl_u32 unit = group * BL_RES_CELL_LANES + 2 * (lane & 1) + ((lane >> 1) & 1);
    // The bias is read at every cell update (an L1 hit) rather than held in registers across
    // the dot products.
    const float4* bias_at = reinterpret_cast<const float4*>(bias_in + unit * BILSTM_GATES);
    const bl_u64 window_row = (bl_u64)window * frames;
    const bl_u64 out_column = (bl_u64)direction * BILSTM_HIDDEN + unit;

    float c = 0.0f;
    for (bl_u32 step = 0; step < frames; ++step) {
        const bl_u32 frame = direction == 0 ? step : frames - 1 - step;
        // Issued first, used after the dot products: the copy's latency hides behind them.
        const float4* gates_src = reinterpret_cast<const float4*>(
            proj + (window_row + frame) * BILSTM_GATE_ROWS + unit * BILSTM_GATES);
        if (cell_lane) {
            bl_res_stage_proj(&p_s[unit], gates_src);
        }

        // Recurrent dots of the four gates of the owned cell; +0.0f at step 0.
        float dot_i = 0.0f, dot_f = 0.0f, dot_g = 0.0f, dot_o = 0.0f;
        if (step > 0) {
            const float4* hv = reinterpret_cast<const float4*>(
                h_s + ((step - 1) & 1) * BILSTM_HIDDEN + lane * BL_RES_TERMS);
            float h[BL_RES_TERMS];
#pragma unroll
            for (int m = 0; m < BL_RES_VECS; ++m) {
                const float4 v = hv[m];
                h[4 * m + 0] = v.x;
                h[4 * m + 1] = v.y;
                h[4 * m + 2] = v.z;
                h[4 * m + 3] = v.w;
            }
            // Register rows first; then each shared row's pair sum goes straight into the
            // first lane level with its partner row i (offset 1 pairs rows i and i + 8).
            float acc[BL_RES_ROWS];
#pragma unroll
            for (int i = 0; i < BL_RES_REG_ROWS; ++i) {
                acc[i] = bl_res_pair<FAST>(r[i], h);
            }
            const bool upper1 = (lane & 1) != 0;
#pragma unroll
            for (int i = 0; i < BL_RES_SHARED_ROWS; ++i) {
                float w[BL_RES_TERMS];
#pragma unroll
                for (int m = 0; m < BL_RES_VECS; ++m) {
                    const float4 v = r_s[(i * BL_RES_VECS + m) * BL_RES_THREADS + tid];
                    w[4 * m + 0] = v.x;
                    w[4 * m + 1] = v.y;
                    w[4 * m + 2] = v.z;
                    w[4 * m + 3] = v.w;
                }
                const float upper_row = bl_res_pair<FAST>(w, h);
                // bl_res_reduce_level<16, 1> for the pair (i, i + 8).
                const float send = upper1 ? acc[i] : upper_row;
                const float keep = upper1 ? upper_row : acc[i];
                acc[i] = keep + __shfl_xor_sync(BL_FULL_MASK, send, 1);
            }
            bl_res_reduce_level<8, 2>(acc, (lane & 2) != 0);
            bl_res_reduce_level<4, 4>(acc, (lane & 4) != 0);
            // Lane p holds rows 2 rev3(p) + {0, 1}: gates (i, f) for p < 4, (g, o) for p ^ 4.
            dot_i = acc[0];
            dot_f = acc[1];
            dot_g = __shfl_xor_sync(BL_FULL_MASK, acc[0], 4);
            dot_o = __shfl_xor_sync(BL_FULL_MASK, acc[1], 4);
        }

        if (cell_lane) {
            const float4 bias = __ldg(bias_at);
            const float4 gates_in = bl_res_take_proj(&p_s[unit], gates_src);
            const float h = bl_lstm_cell_g<FAST>(bl_preactivation(gates_in.x, dot_i, bias.x),
                                                 bl_preactivation(gates_in.y, dot_f, bias.y),
                                                 bl_preactivation(gates_in.z, dot_g, bias.z),
                                                 bl_preactivation(gates_in.w, dot_o, bias.w), &c);
            h_s[(step & 1) * BILSTM_HIDDEN + unit] = h;
            p.out[(window_row + frame) * (2 * BILSTM_HIDDEN) + out_column] = h;
            if (step + 1 == frames) {
                bl_store_final_state(p.state_h, p.state_c, direction, p.batch, window, unit, h, c);
            }
        }
        __syncthreads();
    }
}

// The numerics (gate activations and dot) are picked once (tf32_numerics), so the step loop
// carries no select.
extern "C" __global__ void __launch_bounds__(BILSTM_RESIDENT_THREADS, 1)
    bilstm_recurrence_resident(const bl_recurrence_resident_params p) {
    if (p.tf32_numerics != 0u) {
        bl_recurrence_resident<true>(p);
    } else {
        bl_recurrence_resident<false>(p);
    }
}
