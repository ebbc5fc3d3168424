// projection_tf32.cu: the input projection of one layer on TF32 tensor cores (MathMode::Tf32
// only), both directions in one launch:
//   gates[d][row, col] = sum over k < in_width of tf32(x[row, k]) * Wt_d[col, k]   (d = blockIdx.z)
// where Wt_d is direction d's packed GATE-MAJOR input weights [GATE_ROWS, weights_row_stride],
// already rounded to TF32 on the host (bilstm_core::layout::round_to_tf32: nearest, ties to
// even). The output layout is the FP32 projection's: [rows, GATE_ROWS] per direction, packed
// gate columns.
//
// Launch contract
// - Entry: bilstm_projection_tf32. Not cooperative. Needs compute capability 8.0 or later
//   (mma.sync TF32, cp.async); compiled for an older architecture the entry is a trap, so the
//   host never launches it there.
// - Grid: (ceil(rows / BILSTM_PROJ_TF32_TILE_ROWS), BILSTM_GATE_ROWS / BILSTM_PROJ_TF32_TILE_COLS,
//   2): x tiles rows, y tiles gate columns, z is the direction (0 forward, 1 reverse).
//   Block: (BILSTM_BLOCK_THREADS, 1, 1). Dynamic shared bytes: BILSTM_PROJ_TF32_SHARED_BYTES
//   (more than 48 KiB: the function's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES is raised
//   to it once after loading); no static shared memory.
// - Parameters: bl_projection_tf32_params (56 bytes), mirrored by
//   bilstm_kernels::params::ProjectionTf32Params.
// - Preconditions: x is 4-byte aligned and holds rows * in_width floats (row-major, any width
//   1 ..= MAX_FEATURES; nothing past a row is read); weights[d] is 16-byte aligned and holds
//   GATE_ROWS * weights_row_stride floats, weights_row_stride a multiple of 4 and >= in_width;
//   out + d * out_direction_stride holds rows * GATE_ROWS floats for d = 0, 1, with out 8-byte
//   aligned and out_direction_stride even; the output overlaps neither x nor the weights;
//   rows >= 1, in_width >= 1.
// - Postconditions: every out[d][row, col] for row < rows is written exactly once; nothing else.
// - Numerics: activations are rounded to TF32 in the kernel, to nearest with ties to EVEN, as
//   the host rounds the weights: `cvt.rn.tf32.f32` from 9.0 on (PTX ISA 7.8 added .rn/.rz for
//   .tf32, sm_90 and later); on 8.x, where PTX has only cvt.rna (ties away from zero), the same
//   rounding in integer arithmetic (bl_tf32_rne: the host's round_to_tf32 bit for bit; NaN stays
//   NaN, infinities stay, a carry past the largest finite value gives infinity). Weights are used
//   as stored (the tensor cores ignore the low 13 bits of a TF32 operand). Terms k >= in_width
//   are exact zeros: both operands are zero-filled there, the weights' padding is never read.
//   Each output accumulates in FP32 from 0.0f, one mma.sync m16n8k8 per 8 values of k in
//   ascending order; inside a step the tensor core's order and rounding are the hardware's and
//   fixed, so the same input gives the same bits on every run. Bits differ from the FP32 tiles'
//   and may differ between architectures. Within a step, mma k-index j (0..3) carries k0 + 2j
//   and j + 4 carries k0 + 2j + 1, in A and B alike (the same 8 terms), so each thread fetches
//   its pair with one 64-bit shared load.
// - Defines read: BILSTM_HIDDEN (guard), BILSTM_BLOCK_THREADS, BILSTM_WARP_THREADS,
//   BILSTM_GATE_ROWS, BILSTM_PROJ_TF32_TILE_ROWS, BILSTM_PROJ_TF32_TILE_COLS,
//   BILSTM_PROJ_TF32_K_TILE, BILSTM_PROJ_TF32_ROW_FLOATS, BILSTM_PROJ_TF32_SHARED_BYTES.
//
// Design: 8 warps tile the 128 x 256 output as 2 x 4 square warp tiles of 64 x 64, each 4 x 8
// mma tiles of 16 x 8 (128 FP32 accumulators per thread). K tiles of BILSTM_PROJ_TF32_K_TILE
// values of both operands are copied global -> shared with cp.async into a double buffer (the
// copy of tile t + 1 runs while tile t is multiplied), zero-filled past in_width and past the
// last row. Shared rows hold the K values of one activation row (A) or one gate column (B),
// BILSTM_PROJ_TF32_ROW_FLOATS apart: an odd multiple of 8 floats, so the 64-bit fragment loads of
// a half-warp (8 rows x 4 pairs) touch 32 distinct banks. Each thread rounds the activation
// chunks it copied itself, in place, after its cp.async group completes (cp.async makes them
// visible to the copying thread) and before the barrier that publishes the tile: each value is
// rounded once, not once per warp that reads it. Rows of x are copied in 16-byte chunks when
// in_width is a multiple of 4 and x is 16-byte aligned, else in 4-byte pieces.

#ifndef BILSTM_HIDDEN
#error "bilstm kernels are compiled with the -D options of bilstm_core::geometry::defines()"
#endif

#include "common.cuh"
#include "mma.cuh"

struct bl_projection_tf32_params {
    const float* x;
    const float* weights[2];
    float* out;
    bl_u64 out_direction_stride;
    bl_u32 rows;
    bl_u32 in_width;
    bl_u32 weights_row_stride;
    bl_u32 reserved;
};
static_assert(sizeof(bl_projection_tf32_params) == 56, "mirrors bilstm_kernels::params::ProjectionTf32Params");

// The mma.sync shape (a fact of the instruction, not a tuning choice).
constexpr int BL_MMA_M = 16;
constexpr int BL_MMA_N = 8;
constexpr int BL_MMA_K = 8;

constexpr int BL_TF32_ROWS = BILSTM_PROJ_TF32_TILE_ROWS;
constexpr int BL_TF32_COLS = BILSTM_PROJ_TF32_TILE_COLS;
constexpr int BL_TF32_KT = BILSTM_PROJ_TF32_K_TILE;
constexpr int BL_TF32_LD = BILSTM_PROJ_TF32_ROW_FLOATS;
constexpr int BL_TF32_WARPS = BILSTM_BLOCK_THREADS / BILSTM_WARP_THREADS;
// Square warp tiles: (ROWS / WS) * (COLS / WS) warps.
constexpr int BL_TF32_WS = bl_isqrt(BL_TF32_ROWS * BL_TF32_COLS / BL_TF32_WARPS);
constexpr int BL_TF32_WARPS_M = BL_TF32_ROWS / BL_TF32_WS;
constexpr int BL_TF32_WARPS_N = BL_TF32_COLS / BL_TF32_WS;
constexpr int BL_TF32_MT = BL_TF32_WS / BL_MMA_M;  // mma tiles per warp, down
constexpr int BL_TF32_NT = BL_TF32_WS / BL_MMA_N;  // mma tiles per warp, across
constexpr int BL_TF32_ROW_CHUNKS = BL_TF32_KT / BL_CP_VEC;
constexpr int BL_TF32_A_CHUNKS = BL_TF32_ROWS * BL_TF32_ROW_CHUNKS / BILSTM_BLOCK_THREADS;
constexpr int BL_TF32_B_CHUNKS = BL_TF32_COLS * BL_TF32_ROW_CHUNKS / BILSTM_BLOCK_THREADS;
constexpr int BL_TF32_A_FLOATS = BL_TF32_ROWS * BL_TF32_LD;
constexpr int BL_TF32_STAGE_FLOATS = (BL_TF32_ROWS + BL_TF32_COLS) * BL_TF32_LD;

static_assert(BILSTM_BLOCK_THREADS % BILSTM_WARP_THREADS == 0, "whole warps");
static_assert(BL_TF32_WARPS_M * BL_TF32_WS == BL_TF32_ROWS, "warp tiles cover the rows");
static_assert(BL_TF32_WARPS_N * BL_TF32_WS == BL_TF32_COLS, "warp tiles cover the columns");
static_assert(BL_TF32_WARPS_M * BL_TF32_WARPS_N == BL_TF32_WARPS, "one warp tile per warp");
static_assert(BL_TF32_WS % BL_MMA_M == 0 && BL_TF32_WS % BL_MMA_N == 0, "whole mma tiles");
static_assert(BILSTM_GATE_ROWS % BL_TF32_COLS == 0, "whole column tiles");
static_assert(BL_TF32_KT % BL_MMA_K == 0 && BL_TF32_KT % BL_CP_VEC == 0, "whole K steps and chunks");
static_assert(BL_TF32_LD >= BL_TF32_KT && BL_TF32_LD % BL_CP_VEC == 0, "16-byte aligned shared rows");
static_assert(BL_TF32_LD % 16 == 8, "an odd multiple of 8 floats: conflict-free 64-bit fragment loads");
static_assert(BL_TF32_A_CHUNKS * BILSTM_BLOCK_THREADS == BL_TF32_ROWS * BL_TF32_ROW_CHUNKS, "A loads evenly");
static_assert(BL_TF32_B_CHUNKS * BILSTM_BLOCK_THREADS == BL_TF32_COLS * BL_TF32_ROW_CHUNKS, "B loads evenly");
static_assert(2 * BL_TF32_STAGE_FLOATS * 4 == BILSTM_PROJ_TF32_SHARED_BYTES, "a double buffer of both operands");

extern "C" __global__ void __launch_bounds__(BILSTM_BLOCK_THREADS, 1)
    bilstm_projection_tf32(const bl_projection_tf32_params p) {
#if __CUDA_ARCH__ >= 800
    extern __shared__ __align__(16) float bl_tf32_shared[];

    const int tid = threadIdx.x;
    const int lane = tid % BILSTM_WARP_THREADS;
    const int warp = tid / BILSTM_WARP_THREADS;
    const int group = lane / 4;          // the mma fragments' groupID
    const int pair = lane % 4;           // and threadID_in_group
    const int warp_m = warp / BL_TF32_WARPS_N;
    const int warp_n = warp % BL_TF32_WARPS_N;
    const bl_u64 m0 = (bl_u64)blockIdx.x * BL_TF32_ROWS;
    const int n0 = blockIdx.y * BL_TF32_COLS;
    const bl_u32 direction = blockIdx.z;
    const float* __restrict__ w = direction == 0 ? p.weights[0] : p.weights[1];
    float* __restrict__ out = p.out + (bl_u64)direction * p.out_direction_stride;
    const float* __restrict__ x = p.x;
    const bl_u32 in_width = p.in_width;
    const bl_u64 rows = p.rows;
    const bl_u64 w_stride = p.weights_row_stride;
    // Every row of x starts 16-byte aligned: copy whole chunks (each wholly inside or outside
    // the row, since in_width is a multiple of 4).
    const bool x_chunks = in_width % BL_CP_VEC == 0 && ((bl_u64)x) % 16 == 0;
    const bl_u32 shared_base = bl_shared_address(bl_tf32_shared);

    // Starts the copy of the K tile at k0 into `stage` and commits it as one group.
    auto issue = [&](bl_u32 k0, int stage) {
        const bl_u32 a_base = shared_base + (bl_u32)(stage * BL_TF32_STAGE_FLOATS * 4);
        const bl_u32 b_base = a_base + BL_TF32_A_FLOATS * 4;
        bl_copy_activations<BL_TF32_ROWS, BL_TF32_KT, BL_TF32_LD>(a_base, x, m0, rows, in_width, k0, x_chunks, tid);
#pragma unroll
        for (int i = 0; i < BL_TF32_B_CHUNKS; ++i) {
            const int e = tid + i * BILSTM_BLOCK_THREADS;
            const int col = e / BL_TF32_ROW_CHUNKS;
            const int c = e % BL_TF32_ROW_CHUNKS;
            const bl_u32 k = k0 + c * BL_CP_VEC;
            const bl_u32 live = k < in_width ? min((bl_u32)BL_CP_VEC, in_width - k) : 0u;
            const float* src = live != 0 ? w + (bl_u64)(n0 + col) * w_stride + k : w;
            bl_cp_async_16(b_base + (bl_u32)((col * BL_TF32_LD + c * BL_CP_VEC) * 4), src, live * 4);
        }
        bl_cp_async_commit();
    };

    // Rounds, in place, the activation chunks this thread copied into `stage`.
    auto round_own_chunks = [&](int stage) {
        float* a_s = bl_tf32_shared + stage * BL_TF32_STAGE_FLOATS;
#pragma unroll
        for (int i = 0; i < BL_TF32_A_CHUNKS; ++i) {
            const int e = tid + i * BILSTM_BLOCK_THREADS;
            float4* v = reinterpret_cast<float4*>(a_s + (e / BL_TF32_ROW_CHUNKS) * BL_TF32_LD +
                                                  (e % BL_TF32_ROW_CHUNKS) * BL_CP_VEC);
            float4 q = *v;
            q.x = bl_tf32_rne(q.x);
            q.y = bl_tf32_rne(q.y);
            q.z = bl_tf32_rne(q.z);
            q.w = bl_tf32_rne(q.w);
            *v = q;
        }
    };

    float acc[BL_TF32_MT][BL_TF32_NT][4];
#pragma unroll
    for (int mi = 0; mi < BL_TF32_MT; ++mi) {
#pragma unroll
        for (int ni = 0; ni < BL_TF32_NT; ++ni) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                acc[mi][ni][q] = 0.0f;
            }
        }
    }

    const bl_u32 k_tiles = (in_width + BL_TF32_KT - 1) / BL_TF32_KT;
    issue(0, 0);
    for (bl_u32 kt = 0; kt < k_tiles; ++kt) {
        const int stage = kt & 1;
        if (kt + 1 < k_tiles) {
            // The other stage was last read in iteration kt - 1, before its closing barrier.
            issue((kt + 1) * BL_TF32_KT, stage ^ 1);
            bl_cp_async_wait<1>();
        } else {
            bl_cp_async_wait<0>();
        }
        round_own_chunks(stage);
        __syncthreads();

        const float* a_s = bl_tf32_shared + stage * BL_TF32_STAGE_FLOATS + warp_m * BL_TF32_WS * BL_TF32_LD;
        const float* b_s =
            bl_tf32_shared + stage * BL_TF32_STAGE_FLOATS + BL_TF32_A_FLOATS + warp_n * BL_TF32_WS * BL_TF32_LD;
#pragma unroll
        for (int kk = 0; kk < BL_TF32_KT; kk += BL_MMA_K) {
            bl_u32 a[BL_TF32_MT][4];
            bl_u32 b[BL_TF32_NT][2];
#pragma unroll
            for (int mi = 0; mi < BL_TF32_MT; ++mi) {
                const float* top = a_s + (mi * BL_MMA_M + group) * BL_TF32_LD + kk + 2 * pair;
                const float2 lo = *reinterpret_cast<const float2*>(top);
                const float2 hi = *reinterpret_cast<const float2*>(top + 8 * BL_TF32_LD);
                a[mi][0] = __float_as_uint(lo.x);  // row group,     k-index pair
                a[mi][1] = __float_as_uint(hi.x);  // row group + 8, k-index pair
                a[mi][2] = __float_as_uint(lo.y);  // row group,     k-index pair + 4
                a[mi][3] = __float_as_uint(hi.y);  // row group + 8, k-index pair + 4
            }
#pragma unroll
            for (int ni = 0; ni < BL_TF32_NT; ++ni) {
                const float2 v =
                    *reinterpret_cast<const float2*>(b_s + (ni * BL_MMA_N + group) * BL_TF32_LD + kk + 2 * pair);
                b[ni][0] = __float_as_uint(v.x);  // column group, k-index pair
                b[ni][1] = __float_as_uint(v.y);  // column group, k-index pair + 4
            }
#pragma unroll
            for (int mi = 0; mi < BL_TF32_MT; ++mi) {
#pragma unroll
                for (int ni = 0; ni < BL_TF32_NT; ++ni) {
                    bl_mma_tf32(acc[mi][ni], a[mi], b[ni]);
                }
            }
        }
        // Everyone is done with this stage before iteration kt + 1 copies tile kt + 2 into it.
        __syncthreads();
    }

    // Accumulator q of tile (mi, ni): row group + 8 * (q / 2), column 2 * pair + q % 2.
#pragma unroll
    for (int mi = 0; mi < BL_TF32_MT; ++mi) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const bl_u64 row = m0 + warp_m * BL_TF32_WS + mi * BL_MMA_M + group + 8 * half;
            if (row < rows) {
                float* o = out + row * BILSTM_GATE_ROWS + n0 + warp_n * BL_TF32_WS + 2 * pair;
#pragma unroll
                for (int ni = 0; ni < BL_TF32_NT; ++ni) {
                    float2 v;
                    v.x = acc[mi][ni][2 * half];
                    v.y = acc[mi][ni][2 * half + 1];
                    *reinterpret_cast<float2*>(o + ni * BL_MMA_N) = v;
                }
            }
        }
    }
#else
    // No TF32 tensor cores before 8.0: the host refuses to launch this entry there (see the
    // launch contract); reaching this is a contract violation, so fail loudly.
    (void)p;
    asm volatile("trap;");
#endif
}
