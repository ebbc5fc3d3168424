// projection_tf32x3.cu: the input projection of one layer at FP32 accuracy on TF32 tensor cores
// ("3xTF32", MathMode::Fp32), both directions in one launch:
//   gates[d][row, col] = sum over k < in_width of x[row, k] * W_d[k, col]   (d = blockIdx.z)
// where W_d is direction d's packed K-MAJOR FP32 input weights [padded_in, GATE_ROWS] (the FP32
// SIMT tiles' operand; nothing extra is packed). Each operand value v is split in the kernel into
// a TF32 high part and a TF32 remainder (bl_tf32_split in mma.cuh: hi = tf32(v), lo = tf32(v -
// hi)) and every 8-value k-step sums three mma.sync products. The output layout is the FP32
// projection's: [rows, GATE_ROWS] per direction, packed gate columns.
//
// Launch contract
// - Entry: bilstm_projection_tf32x3. Not cooperative. Needs compute capability 8.0 or later
//   (mma.sync TF32, cp.async); compiled for an older architecture the entry is a trap, so the
//   host never launches it there.
// - Grid: (ceil(rows / BILSTM_PROJ_TF32_TILE_ROWS), BILSTM_GATE_ROWS / BILSTM_PROJ_TF32_TILE_COLS,
//   2): x tiles rows, y tiles gate columns, z is the direction (0 forward, 1 reverse).
//   Block: (BILSTM_BLOCK_THREADS, 1, 1). Dynamic shared bytes: BILSTM_PROJ_TF32X3_SHARED_BYTES
//   (more than 48 KiB: the function's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES is raised
//   to it once after loading); no static shared memory.
// - Parameters: bl_projection_params (48 bytes, the FP32 tiles' struct of projection.cu),
//   mirrored by bilstm_kernels::params::ProjectionParams.
// - Preconditions: x is 4-byte aligned and holds rows * in_width floats (row-major, any width
//   1 ..= MAX_FEATURES; nothing past a row is read); weights[d] is 16-byte aligned and holds
//   padded_in(in_width) * GATE_ROWS floats (rows k < in_width are read, nothing past them);
//   out + d * out_direction_stride holds rows * GATE_ROWS floats for d = 0, 1, with out 8-byte
//   aligned and out_direction_stride even; the output overlaps neither x nor the weights;
//   rows >= 1, in_width >= 1.
// - Postconditions: every out[d][row, col] for row < rows is written exactly once; nothing else.
// - Numerics: both operands are split at fragment-load time by bl_tf32_split (round to nearest,
//   ties to even; mirrored by bilstm_core::layout::split_tf32). Each output accumulates in FP32
//   from 0.0f over k-steps of 8 in ascending k; in each k-step, in this FIXED order, acc +=
//   lo(x) * hi(W), then acc += hi(x) * lo(W), then acc += hi(x) * hi(W) (the small products
//   first; lo * lo is dropped, below 2^-22 relative). Every output row runs the same instruction
//   sequence whatever the row count or the row's place in a tile, so a window's bits never
//   depend on the batch; inside an mma.sync the order and rounding are the hardware's and fixed,
//   so repeated runs give the same bits. Bits differ from the FP32 SIMT tiles' and may differ
//   between architectures. Terms k >= in_width are exact zeros (both operands zero-filled). NaN
//   or infinity in x propagates through hi(x) * hi(W) alone (lo(x) is +0 there, and an
//   infinite or NaN hi(x) is replaced by +0 in hi(x) * lo(W), whose lo(W) may have the other
//   sign); W is finite (packing refuses anything else). Within a step, mma
//   k-index j (0..3) carries k0 + 2j and j + 4 carries k0 + 2j + 1, in A and B alike.
// - Defines read: BILSTM_HIDDEN (guard), BILSTM_BLOCK_THREADS, BILSTM_WARP_THREADS,
//   BILSTM_GATE_ROWS, BILSTM_PROJ_TF32_TILE_ROWS, BILSTM_PROJ_TF32_TILE_COLS,
//   BILSTM_PROJ_TF32_K_TILE, BILSTM_PROJ_TF32_ROW_FLOATS, BILSTM_PROJ_TF32X3_B_ROW_FLOATS,
//   BILSTM_PROJ_TF32X3_SHARED_BYTES.
//
// Design: the TF32 kernel's tiling (projection_tf32.cu): 8 warps tile the 128 x 256 output as
// 2 x 4 square warp tiles of 64 x 64, each 4 x 8 mma tiles of 16 x 8 (128 FP32 accumulators per
// thread); K tiles of BILSTM_PROJ_TF32_K_TILE values are copied global -> shared with cp.async
// into a double buffer. A (activations) is stored as rows of K values, BILSTM_PROJ_TF32_ROW_FLOATS
// apart (64-bit fragment loads, conflict-free); B (weights) keeps its K-major global layout in
// shared memory, one row of BILSTM_PROJ_TF32_TILE_COLS gate columns per k,
// BILSTM_PROJ_TF32X3_B_ROW_FLOATS apart (4 mod 32 words, so a warp's 32-bit fragment loads of
// 4 k-pairs x 8 columns touch 32 distinct banks). Operands are kept in FP32 in shared memory and
// split in registers: the split costs ALU issue slots that overlap the tensor-core pipe (three
// mma.sync per fragment pair), and the shared footprint stays below the 99 KiB opt-in limit of
// 8.6 / 8.9, so the kernel runs on every architecture from 8.0.

#ifndef BILSTM_HIDDEN
#error "bilstm kernels are compiled with the -D options of bilstm_core::geometry::defines()"
#endif

#include "common.cuh"
#include "mma.cuh"

struct bl_projection_params {
    const float* x;
    const float* weights[2];
    float* out;
    bl_u64 out_direction_stride;
    bl_u32 rows;
    bl_u32 in_width;
};
static_assert(sizeof(bl_projection_params) == 48, "mirrors bilstm_kernels::params::ProjectionParams");

// The mma.sync shape (a fact of the instruction, not a tuning choice).
constexpr int BL_X3_MMA_M = 16;
constexpr int BL_X3_MMA_N = 8;
constexpr int BL_X3_MMA_K = 8;

constexpr int BL_X3_ROWS = BILSTM_PROJ_TF32_TILE_ROWS;
constexpr int BL_X3_COLS = BILSTM_PROJ_TF32_TILE_COLS;
constexpr int BL_X3_KT = BILSTM_PROJ_TF32_K_TILE;
constexpr int BL_X3_LDA = BILSTM_PROJ_TF32_ROW_FLOATS;
constexpr int BL_X3_LDB = BILSTM_PROJ_TF32X3_B_ROW_FLOATS;
constexpr int BL_X3_WARPS = BILSTM_BLOCK_THREADS / BILSTM_WARP_THREADS;
// Square warp tiles: (ROWS / WS) * (COLS / WS) warps.
constexpr int BL_X3_WS = bl_isqrt(BL_X3_ROWS * BL_X3_COLS / BL_X3_WARPS);
constexpr int BL_X3_WARPS_M = BL_X3_ROWS / BL_X3_WS;
constexpr int BL_X3_WARPS_N = BL_X3_COLS / BL_X3_WS;
constexpr int BL_X3_MT = BL_X3_WS / BL_X3_MMA_M;  // mma tiles per warp, down
constexpr int BL_X3_NT = BL_X3_WS / BL_X3_MMA_N;  // mma tiles per warp, across
constexpr int BL_X3_VEC = 4;                      // floats per 16-byte cp.async chunk
constexpr int BL_X3_A_ROW_CHUNKS = BL_X3_KT / BL_X3_VEC;
constexpr int BL_X3_B_ROW_CHUNKS = BL_X3_COLS / BL_X3_VEC;
constexpr int BL_X3_A_CHUNKS = BL_X3_ROWS * BL_X3_A_ROW_CHUNKS / BILSTM_BLOCK_THREADS;
constexpr int BL_X3_B_CHUNKS = BL_X3_KT * BL_X3_B_ROW_CHUNKS / BILSTM_BLOCK_THREADS;
constexpr int BL_X3_A_FLOATS = BL_X3_ROWS * BL_X3_LDA;
constexpr int BL_X3_STAGE_FLOATS = BL_X3_A_FLOATS + BL_X3_KT * BL_X3_LDB;

static_assert(BILSTM_BLOCK_THREADS % BILSTM_WARP_THREADS == 0, "whole warps");
static_assert(BL_X3_WARPS_M * BL_X3_WS == BL_X3_ROWS, "warp tiles cover the rows");
static_assert(BL_X3_WARPS_N * BL_X3_WS == BL_X3_COLS, "warp tiles cover the columns");
static_assert(BL_X3_WARPS_M * BL_X3_WARPS_N == BL_X3_WARPS, "one warp tile per warp");
static_assert(BL_X3_WS % BL_X3_MMA_M == 0 && BL_X3_WS % BL_X3_MMA_N == 0, "whole mma tiles");
static_assert(BILSTM_GATE_ROWS % BL_X3_COLS == 0, "whole column tiles");
static_assert(BL_X3_KT % BL_X3_MMA_K == 0 && BL_X3_KT % BL_X3_VEC == 0, "whole K steps and chunks");
static_assert(BL_X3_LDA >= BL_X3_KT && BL_X3_LDA % BL_X3_VEC == 0, "16-byte aligned A rows");
static_assert(BL_X3_LDA % 16 == 8, "an odd multiple of 8 floats: conflict-free 64-bit A loads");
static_assert(BL_X3_LDB >= BL_X3_COLS && BL_X3_LDB % BL_X3_VEC == 0, "16-byte aligned B rows");
static_assert(BL_X3_LDB % 16 == 4 || BL_X3_LDB % 16 == 12, "k-pairs 8 banks apart: conflict-free B loads");
static_assert(BL_X3_A_CHUNKS * BILSTM_BLOCK_THREADS == BL_X3_ROWS * BL_X3_A_ROW_CHUNKS, "A loads evenly");
static_assert(BL_X3_B_CHUNKS * BILSTM_BLOCK_THREADS == BL_X3_KT * BL_X3_B_ROW_CHUNKS, "B loads evenly");
static_assert(2 * BL_X3_STAGE_FLOATS * 4 == BILSTM_PROJ_TF32X3_SHARED_BYTES, "a double buffer of both operands");

extern "C" __global__ void __launch_bounds__(BILSTM_BLOCK_THREADS, 1)
    bilstm_projection_tf32x3(const bl_projection_params p) {
#if __CUDA_ARCH__ >= 800
    extern __shared__ __align__(16) float bl_x3_shared[];

    const int tid = threadIdx.x;
    const int lane = tid % BILSTM_WARP_THREADS;
    const int warp = tid / BILSTM_WARP_THREADS;
    const int group = lane / 4;  // the mma fragments' groupID
    const int pair = lane % 4;   // and threadID_in_group
    const int warp_m = warp / BL_X3_WARPS_N;
    const int warp_n = warp % BL_X3_WARPS_N;
    const bl_u64 m0 = (bl_u64)blockIdx.x * BL_X3_ROWS;
    const int n0 = blockIdx.y * BL_X3_COLS;
    const bl_u32 direction = blockIdx.z;
    const float* __restrict__ w = direction == 0 ? p.weights[0] : p.weights[1];
    float* __restrict__ out = p.out + (bl_u64)direction * p.out_direction_stride;
    const float* __restrict__ x = p.x;
    const bl_u32 in_width = p.in_width;
    const bl_u64 rows = p.rows;
    // Every row of x starts 16-byte aligned: copy whole chunks (each wholly inside or outside
    // the row, since in_width is a multiple of 4).
    const bool x_chunks = in_width % BL_X3_VEC == 0 && ((bl_u64)x) % 16 == 0;
    const bl_u32 shared_base = bl_shared_address(bl_x3_shared);

    // Starts the copy of the K tile at k0 into `stage` and commits it as one group.
    auto issue = [&](bl_u32 k0, int stage) {
        const bl_u32 a_base = shared_base + (bl_u32)(stage * BL_X3_STAGE_FLOATS * 4);
        const bl_u32 b_base = a_base + BL_X3_A_FLOATS * 4;
#pragma unroll
        for (int i = 0; i < BL_X3_A_CHUNKS; ++i) {
            const int e = tid + i * BILSTM_BLOCK_THREADS;
            const int r = e / BL_X3_A_ROW_CHUNKS;
            const int c = e % BL_X3_A_ROW_CHUNKS;
            const bl_u64 row = m0 + r;
            const bl_u32 k = k0 + c * BL_X3_VEC;
            const bl_u32 dst = a_base + (bl_u32)((r * BL_X3_LDA + c * BL_X3_VEC) * 4);
            if (x_chunks) {
                const bool live = row < rows && k < in_width;
                bl_cp_async_16(dst, live ? x + row * in_width + k : x, live ? 16u : 0u);
            } else {
#pragma unroll
                for (int j = 0; j < BL_X3_VEC; ++j) {
                    const bool live = row < rows && k + j < in_width;
                    bl_cp_async_4(dst + j * 4, live ? x + row * in_width + k + j : x, live ? 4u : 0u);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < BL_X3_B_CHUNKS; ++i) {
            const int e = tid + i * BILSTM_BLOCK_THREADS;
            const int kr = e / BL_X3_B_ROW_CHUNKS;
            const int c = e % BL_X3_B_ROW_CHUNKS;
            const bl_u32 k = k0 + kr;
            const bool live = k < in_width;
            const float* src = live ? w + (bl_u64)k * BILSTM_GATE_ROWS + n0 + c * BL_X3_VEC : w;
            bl_cp_async_16(b_base + (bl_u32)((kr * BL_X3_LDB + c * BL_X3_VEC) * 4), src, live ? 16u : 0u);
        }
        bl_cp_async_commit();
    };

    float acc[BL_X3_MT][BL_X3_NT][4];
#pragma unroll
    for (int mi = 0; mi < BL_X3_MT; ++mi) {
#pragma unroll
        for (int ni = 0; ni < BL_X3_NT; ++ni) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                acc[mi][ni][q] = 0.0f;
            }
        }
    }

    const bl_u32 k_tiles = (in_width + BL_X3_KT - 1) / BL_X3_KT;
    issue(0, 0);
    for (bl_u32 kt = 0; kt < k_tiles; ++kt) {
        const int stage = kt & 1;
        if (kt + 1 < k_tiles) {
            // The other stage was last read in iteration kt - 1, before its closing barrier.
            issue((kt + 1) * BL_X3_KT, stage ^ 1);
            bl_cp_async_wait<1>();
        } else {
            bl_cp_async_wait<0>();
        }
        __syncthreads();

        const float* a_s = bl_x3_shared + stage * BL_X3_STAGE_FLOATS + warp_m * BL_X3_WS * BL_X3_LDA;
        const float* b_s = bl_x3_shared + stage * BL_X3_STAGE_FLOATS + BL_X3_A_FLOATS + warp_n * BL_X3_WS;
#pragma unroll
        for (int kk = 0; kk < BL_X3_KT; kk += BL_X3_MMA_K) {
            bl_u32 a_hi[BL_X3_MT][4];
            bl_u32 a_lo[BL_X3_MT][4];
#pragma unroll
            for (int mi = 0; mi < BL_X3_MT; ++mi) {
                const float* top = a_s + (mi * BL_X3_MMA_M + group) * BL_X3_LDA + kk + 2 * pair;
                const float2 upper = *reinterpret_cast<const float2*>(top);
                const float2 lower = *reinterpret_cast<const float2*>(top + 8 * BL_X3_LDA);
                bl_tf32_split(upper.x, a_hi[mi][0], a_lo[mi][0]);  // row group,     k-index pair
                bl_tf32_split(lower.x, a_hi[mi][1], a_lo[mi][1]);  // row group + 8, k-index pair
                bl_tf32_split(upper.y, a_hi[mi][2], a_lo[mi][2]);  // row group,     k-index pair + 4
                bl_tf32_split(lower.y, a_hi[mi][3], a_lo[mi][3]);  // row group + 8, k-index pair + 4
            }
            // One column fragment at a time (fewer live registers); per accumulator the three
            // products keep the fixed order of the Numerics note, and the data dependence through
            // acc keeps it whatever the compiler interleaves across tiles.
#pragma unroll
            for (int ni = 0; ni < BL_X3_NT; ++ni) {
                const float* col = b_s + (kk + 2 * pair) * BL_X3_LDB + ni * BL_X3_MMA_N + group;
                bl_u32 b_hi[2];
                bl_u32 b_lo[2];
                bl_tf32_split(col[0], b_hi[0], b_lo[0]);          // column group, k-index pair
                bl_tf32_split(col[BL_X3_LDB], b_hi[1], b_lo[1]);  // column group, k-index pair + 4
#pragma unroll
                for (int mi = 0; mi < BL_X3_MT; ++mi) {
                    bl_mma_tf32(acc[mi][ni], a_lo[mi], b_hi);
                }
#pragma unroll
                for (int mi = 0; mi < BL_X3_MT; ++mi) {
                    // An infinite x contributes through hi(x) * hi(W) alone: hi(x) * lo(W) with
                    // lo(W) of the other sign would add the opposite infinity (NaN).
                    bl_u32 a_fin[4];
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        a_fin[q] = bl_tf32_finite_or_zero(a_hi[mi][q]);
                    }
                    bl_mma_tf32(acc[mi][ni], a_fin, b_lo);
                }
#pragma unroll
                for (int mi = 0; mi < BL_X3_MT; ++mi) {
                    bl_mma_tf32(acc[mi][ni], a_hi[mi], b_hi);
                }
            }
        }
        // Everyone is done with this stage before iteration kt + 1 copies tile kt + 2 into it.
        __syncthreads();
    }

    // Accumulator q of tile (mi, ni): row group + 8 * (q / 2), column 2 * pair + q % 2.
#pragma unroll
    for (int mi = 0; mi < BL_X3_MT; ++mi) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const bl_u64 row = m0 + warp_m * BL_X3_WS + mi * BL_X3_MMA_M + group + 8 * half;
            if (row < rows) {
                float* o = out + row * BILSTM_GATE_ROWS + n0 + warp_n * BL_X3_WS + 2 * pair;
#pragma unroll
                for (int ni = 0; ni < BL_X3_NT; ++ni) {
                    float2 v;
                    v.x = acc[mi][ni][2 * half];
                    v.y = acc[mi][ni][2 * half + 1];
                    *reinterpret_cast<float2*>(o + ni * BL_X3_MMA_N) = v;
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
