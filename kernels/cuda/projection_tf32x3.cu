// projection_tf32x3.cu: the input projection of one layer at FP32 accuracy on TF32 tensor cores
// ("3xTF32", MathMode::Fp32), both directions in one launch:
//   gates[d][row, col] = sum over k < in_width of x[row, k] * W_d[k, col]   (d = blockIdx.z)
// where W_d is direction d's K-MAJOR input weights, packed already split
// (PackedOffsets::input_x3: [2, padded_in, GATE_ROWS], the TF32 high parts hi(W) then the TF32
// remainders lo(W), bilstm_core::layout::split_tf32). Each activation x is split in the kernel
// the same way (bl_tf32_split in mma.cuh: hi = tf32(v), lo = tf32(v - hi)) and every 8-value
// k-step sums three mma.sync products. The output layout is the FP32 projection's:
// [rows, GATE_ROWS] per direction, packed gate columns.
//
// Launch contract
// - Entries: bilstm_projection_tf32x3 (the large tile: TILE_ROWS x TILE_COLS =
//   BILSTM_PROJ_TF32X3_TILE_ROWS x BILSTM_PROJ_TF32X3_TILE_COLS in warp tiles of
//   BILSTM_PROJ_TF32X3_WARP_ROWS x BILSTM_PROJ_TF32X3_WARP_COLS, weight rows of B_ROW_FLOATS =
//   BILSTM_PROJ_TF32X3_B_ROW_FLOATS, SHARED = BILSTM_PROJ_TF32X3_SHARED_BYTES) and
//   bilstm_projection_tf32x3_small (the same from the defines named _SMALL_ below); and
//   bilstm_projection_tf32x3_wgmma and its TF32 twin bilstm_projection_tf32_wgmma (MathMode::Tf32),
//   compute capability 9.0 only, whose own contract (grid, weight image, numerics) is at their
//   definition below.
//   Not cooperative. Need compute capability 8.0 or later (mma.sync TF32, cp.async); compiled for
//   an older architecture each entry is a trap, so the host never launches them there.
// - Grid: (ceil(rows / TILE_ROWS), BILSTM_GATE_ROWS / TILE_COLS, 2): x tiles rows, y tiles gate
//   columns, z is the direction (0 forward, 1 reverse). Block: (BILSTM_BLOCK_THREADS, 1, 1).
//   Dynamic shared bytes: SHARED (above 48 KiB the function's
//   CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES is raised to it once after loading); no
//   static shared memory.
// - Parameters: bl_projection_params (48 bytes, the FP32 tiles' struct of projection.cu),
//   mirrored by bilstm_kernels::params::ProjectionParams.
// - Preconditions: x is 4-byte aligned and holds rows * in_width floats (row-major, any width
//   1 ..= MAX_FEATURES; nothing past a row is read); weights[d] is 16-byte aligned and holds
//   2 * padded_in(in_width) * GATE_ROWS floats, padded_in(w) = w rounded up to BILSTM_K_PAD
//   (rows k < in_width of each half are read, nothing else);
//   out + d * out_direction_stride holds rows * GATE_ROWS floats for d = 0, 1, with out 8-byte
//   aligned and out_direction_stride even; the output overlaps neither x nor the weights;
//   rows >= 1, in_width >= 1.
// - Postconditions: every out[d][row, col] for row < rows is written exactly once; nothing else.
// - Numerics (both entries alike, so they give identical bits): x is split at fragment-load
//   time by bl_tf32_split (round to nearest, ties to even), W arrives split by
//   bilstm_core::layout::split_tf32 (which bl_tf32_split mirrors bit for bit). Each output is an FP32 sum from 0.0f over k-steps of 8 in
//   ascending k, each added with one round-to-nearest FP32 add: acc = acc + step, where step
//   starts at 0.0f and the tensor cores accumulate into it, in this FIXED order, lo(x) * hi(W),
//   then hi(x) * lo(W), then hi(x) * hi(W) (lo * lo is dropped, below 2^-22 relative). The
//   fresh step accumulator matters: the tensor cores' own accumulation does not round to
//   nearest, and chaining all 32 k-steps through it measured 4.7e-6 on the stack (8x the SIMT
//   tiles'). Every output row runs the same instruction sequence whatever the row count, the
//   tile size or the row's place in a tile, so a window's bits never depend on the batch or the
//   entry; inside an mma.sync the order and rounding are the hardware's and fixed, so repeated
//   runs give the same bits. Bits differ from the FP32 SIMT tiles' and may differ between
//   architectures. Terms k >= in_width are exact zeros (both operands zero-filled). NaN or
//   infinity in x propagates through hi(x) * hi(W) alone (lo(x) is +0 there, and an infinite
//   or NaN hi(x) is replaced by +0 in hi(x) * lo(W), whose lo(W) may have the other sign); W is
//   finite (packing refuses anything else). Within a step, mma k-index j (0..3) carries
//   k0 + 2j and j + 4 carries k0 + 2j + 1, in A and B alike.
// - Defines read: BILSTM_HIDDEN (guard), BILSTM_BLOCK_THREADS, BILSTM_WARP_THREADS,
//   BILSTM_GATE_ROWS, BILSTM_K_PAD, BILSTM_PROJ_TF32_K_TILE, BILSTM_PROJ_TF32_ROW_FLOATS,
//   BILSTM_PROJ_TF32X3_TILE_ROWS, BILSTM_PROJ_TF32X3_TILE_COLS, BILSTM_PROJ_TF32X3_WARP_ROWS,
//   BILSTM_PROJ_TF32X3_WARP_COLS, BILSTM_PROJ_TF32X3_B_ROW_FLOATS, BILSTM_PROJ_TF32X3_SHARED_BYTES,
//   BILSTM_PROJ_TF32X3_SMALL_TILE_ROWS, BILSTM_PROJ_TF32X3_SMALL_TILE_COLS,
//   BILSTM_PROJ_TF32X3_SMALL_WARP_ROWS, BILSTM_PROJ_TF32X3_SMALL_WARP_COLS,
//   BILSTM_PROJ_TF32X3_SMALL_B_ROW_FLOATS, BILSTM_PROJ_TF32X3_SMALL_SHARED_BYTES.
//
// Design: one template body, two tile sizes, 8 warps each (on 9.0 the large tile unrolls its
// k-loop by two: K_UNROLL). The large tile is 128 x 128 in warp
// tiles of 32 x 64 (2 x 8 mma tiles of 16 x 8, 64 FP32 accumulators per thread; 245 registers on 9.0,
// one block per SM on 9.0); the small one 64 x 128 in warp tiles of 32 x 32 (32 accumulators,
// 119 registers, two blocks per SM), which gives small batches more blocks. (The TF32 kernel's
// 64 x 64 warp tiles do not fit the fresh step accumulators: ptxas spilled at 255 registers.)
// K tiles of BILSTM_PROJ_TF32_K_TILE values are copied global -> shared with cp.async into a
// double buffer; the k-steps of a K tile run one at a time (not unrolled: unrolled, the small
// tile spilled on sm_80). A (activations) is stored as rows of K values,
// BILSTM_PROJ_TF32_ROW_FLOATS apart (64-bit fragment loads, conflict-free); B (weights) keeps its
// K-major global layout in shared memory, one row of TILE_COLS gate columns per k, B_ROW_FLOATS
// apart (4 mod 32 words, so a warp's 32-bit fragment loads of 4 k-pairs x 8 columns touch 32
// distinct banks), the remainders' tile right after the high parts'. The weights come split
// from packing: splitting them in registers took ALU issue slots on every warp that reads a
// fragment (H200, batch 32, 128x128 tile: 0.260 ms a layer with in-kernel splits, 0.240
// pre-split). x is kept in FP32 in shared memory and split in registers. Shared memory: 58,368
// bytes (large) and 46,080 (small), within the 99 KiB opt-in of 8.6 / 8.9. (K tiles of 32
// instead of 16 made the small tile spill at its 128-register cap.)

#ifndef BILSTM_HIDDEN
#error "bilstm kernels are compiled with the -D options of bilstm_core::geometry::defines()"
#endif

#include "common.cuh"
#include "mma.cuh"
#include "mbarrier.cuh"

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
constexpr int BL_X3_WARPS = BILSTM_BLOCK_THREADS / BILSTM_WARP_THREADS;

static_assert(BILSTM_BLOCK_THREADS % BILSTM_WARP_THREADS == 0, "whole warps");

// The tile geometry of one entry: ROWS x COLS outputs per block in warp tiles of WM x WN, K
// tiles of KT values (activation rows LDA floats apart, weight rows LDB) per cp.async stage,
// SHARED_BYTES of dynamic shared memory.
template <int ROWS, int COLS, int WM, int WN, int KT, int LDA, int LDB, int SHARED_BYTES>
struct bl_x3_tile {
    static constexpr int WARPS_M = ROWS / WM;
    static constexpr int WARPS_N = COLS / WN;
    static constexpr int MT = WM / BL_X3_MMA_M;  // mma tiles per warp, down
    static constexpr int NT = WN / BL_X3_MMA_N;  // mma tiles per warp, across
    static constexpr int A_ROW_CHUNKS = KT / BL_CP_VEC;
    static constexpr int B_ROW_CHUNKS = COLS / BL_CP_VEC;
    static constexpr int A_CHUNKS = ROWS * A_ROW_CHUNKS / BILSTM_BLOCK_THREADS;
    static constexpr int B_CHUNKS = KT * B_ROW_CHUNKS / BILSTM_BLOCK_THREADS;
    static constexpr int A_FLOATS = ROWS * LDA;
    static constexpr int B_FLOATS = KT * LDB;  // one weight part's K tile
    static constexpr int K_TILE = KT;
    // k-steps of a K tile unrolled together (1: one at a time): two for the large tile on 9.0
    // and later (245 registers there; 8.x spills with it, the small tile everywhere).
#if __CUDA_ARCH__ >= 900
    static constexpr int K_UNROLL = ROWS == 128 ? 2 : 1;
#else
    static constexpr int K_UNROLL = 1;
#endif
    static constexpr int A_ROW = LDA;
    static constexpr int B_ROW = LDB;

    static_assert(KT % BL_X3_MMA_K == 0 && KT % BL_CP_VEC == 0, "whole K steps and chunks");
    static_assert(LDA >= KT && LDA % BL_CP_VEC == 0, "16-byte aligned A rows");
    static_assert(LDA % 16 == 8, "an odd multiple of 8 floats: conflict-free 64-bit A loads");
    static constexpr int STAGE_FLOATS = A_FLOATS + 2 * B_FLOATS;

    static_assert(WARPS_M * WM == ROWS, "warp tiles cover the rows");
    static_assert(WARPS_N * WN == COLS, "warp tiles cover the columns");
    static_assert(WARPS_M * WARPS_N == BL_X3_WARPS, "one warp tile per warp");
    static_assert(WM % BL_X3_MMA_M == 0 && WN % BL_X3_MMA_N == 0, "whole mma tiles");
    static_assert(BILSTM_GATE_ROWS % COLS == 0, "whole column tiles");
    static_assert(LDB >= COLS && LDB % BL_CP_VEC == 0, "16-byte aligned B rows");
    static_assert(LDB % 16 == 4 || LDB % 16 == 12, "k-pairs 8 banks apart: conflict-free B loads");
    static_assert(A_CHUNKS * BILSTM_BLOCK_THREADS == ROWS * A_ROW_CHUNKS, "A loads evenly");
    static_assert(B_CHUNKS * BILSTM_BLOCK_THREADS == KT * B_ROW_CHUNKS, "B loads evenly");
    static_assert(2 * STAGE_FLOATS * 4 == SHARED_BYTES, "a double buffer of both operands");
};

#if __CUDA_ARCH__ >= 800
// The body of both entries: the projection tile (blockIdx.x, blockIdx.y) of direction
// blockIdx.z, T a bl_x3_tile.
template <typename T>
__device__ __forceinline__ void bl_projection_tf32x3(const bl_projection_params& p, float* bl_x3_shared) {
    const int tid = threadIdx.x;
    const int lane = tid % BILSTM_WARP_THREADS;
    const int warp = tid / BILSTM_WARP_THREADS;
    const int group = lane / 4;  // the mma fragments' groupID
    const int pair = lane % 4;   // and threadID_in_group
    const int warp_m = warp / T::WARPS_N;
    const int warp_n = warp % T::WARPS_N;
    const bl_u64 m0 = (bl_u64)blockIdx.x * (bl_u64)(T::WARPS_M * T::MT * BL_X3_MMA_M);
    const int n0 = blockIdx.y * (T::WARPS_N * T::NT * BL_X3_MMA_N);
    const bl_u32 direction = blockIdx.z;
    const float* __restrict__ w = direction == 0 ? p.weights[0] : p.weights[1];
    float* __restrict__ out = p.out + (bl_u64)direction * p.out_direction_stride;
    const float* __restrict__ x = p.x;
    const bl_u32 in_width = p.in_width;
    const bl_u64 rows = p.rows;
    constexpr int LDB = T::B_ROW;
    constexpr int BL_X3_KT = T::K_TILE;
    constexpr int BL_X3_LDA = T::A_ROW;
    // The remainders follow the high parts: [2, padded_in, GATE_ROWS] (PackedOffsets::input_x3).
    const bl_u64 lo_offset =
        (bl_u64)((in_width + BILSTM_K_PAD - 1) / BILSTM_K_PAD * BILSTM_K_PAD) * BILSTM_GATE_ROWS;
    // Every row of x starts 16-byte aligned: copy whole chunks (each wholly inside or outside
    // the row, since in_width is a multiple of 4).
    const bool x_chunks = in_width % BL_CP_VEC == 0 && ((bl_u64)x) % 16 == 0;
    const bl_u32 shared_base = bl_shared_address(bl_x3_shared);

    // Starts the copy of the K tile at k0 into `stage` and commits it as one group.
    auto issue = [&](bl_u32 k0, int stage) {
        const bl_u32 a_base = shared_base + (bl_u32)(stage * T::STAGE_FLOATS * 4);
        const bl_u32 b_base = a_base + T::A_FLOATS * 4;
        bl_copy_activations<T::WARPS_M * T::MT * BL_X3_MMA_M, BL_X3_KT, BL_X3_LDA>(a_base, x, m0, rows, in_width,
                                                                                   k0, x_chunks, tid);
#pragma unroll
        for (int i = 0; i < T::B_CHUNKS; ++i) {
            const int e = tid + i * BILSTM_BLOCK_THREADS;
            const int kr = e / T::B_ROW_CHUNKS;
            const int c = e % T::B_ROW_CHUNKS;
            const bl_u32 k = k0 + kr;
            const bool live = k < in_width;
            const float* src = live ? w + (bl_u64)k * BILSTM_GATE_ROWS + n0 + c * BL_CP_VEC : w;
            const bl_u32 dst = b_base + (bl_u32)((kr * LDB + c * BL_CP_VEC) * 4);
            bl_cp_async_16(dst, src, live ? 16u : 0u);
            bl_cp_async_16(dst + T::B_FLOATS * 4, live ? src + lo_offset : w, live ? 16u : 0u);
        }
        bl_cp_async_commit();
    };

    float acc[T::MT][T::NT][4];
#pragma unroll
    for (int mi = 0; mi < T::MT; ++mi) {
#pragma unroll
        for (int ni = 0; ni < T::NT; ++ni) {
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

        const float* a_s = bl_x3_shared + stage * T::STAGE_FLOATS + warp_m * T::MT * BL_X3_MMA_M * BL_X3_LDA;
        const float* b_s = bl_x3_shared + stage * T::STAGE_FLOATS + T::A_FLOATS + warp_n * T::NT * BL_X3_MMA_N;
        // One k-step at a time (not unrolled: overlapping two k-steps' fragments costs more
        // registers than the small tile's two blocks per SM allow).
#pragma unroll T::K_UNROLL
        for (int kk = 0; kk < BL_X3_KT; kk += BL_X3_MMA_K) {
            bl_u32 a_hi[T::MT][4];
            bl_u32 a_lo[T::MT][4];
            bl_u32 a_fin[T::MT][4];
#pragma unroll
            for (int mi = 0; mi < T::MT; ++mi) {
                const float* top = a_s + (mi * BL_X3_MMA_M + group) * BL_X3_LDA + kk + 2 * pair;
                const float2 upper = *reinterpret_cast<const float2*>(top);
                const float2 lower = *reinterpret_cast<const float2*>(top + 8 * BL_X3_LDA);
                bl_tf32_split(upper.x, a_hi[mi][0], a_lo[mi][0]);  // row group,     k-index pair
                bl_tf32_split(lower.x, a_hi[mi][1], a_lo[mi][1]);  // row group + 8, k-index pair
                bl_tf32_split(upper.y, a_hi[mi][2], a_lo[mi][2]);  // row group,     k-index pair + 4
                bl_tf32_split(lower.y, a_hi[mi][3], a_lo[mi][3]);  // row group + 8, k-index pair + 4
                // An infinite x contributes through hi(x) * hi(W) alone: hi(x) * lo(W) with
                // lo(W) of the other sign (or zero) would add the opposite infinity (or NaN).
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    a_fin[mi][q] = bl_tf32_finite_or_zero(a_hi[mi][q]);
                }
            }
            // One column fragment at a time (fewer live registers). Each k-step's three
            // products go into a fresh accumulator that starts at 0 (the order of the Numerics
            // note, kept by the data dependence), which one FP32 add (round to nearest) then
            // adds to the running sum: the tensor cores' accumulation does not round to
            // nearest, and 32 k-steps of it into one running sum cost 8x FP32's error.
#pragma unroll
            for (int ni = 0; ni < T::NT; ++ni) {
                // The weights arrive split (high parts, then remainders T::B_FLOATS further).
                const float* col = b_s + (kk + 2 * pair) * LDB + ni * BL_X3_MMA_N + group;
                bl_u32 b_hi[2];
                bl_u32 b_lo[2];
                b_hi[0] = __float_as_uint(col[0]);                  // column group, k-index pair
                b_hi[1] = __float_as_uint(col[LDB]);                // column group, k-index pair + 4
                b_lo[0] = __float_as_uint(col[T::B_FLOATS]);
                b_lo[1] = __float_as_uint(col[T::B_FLOATS + LDB]);
#pragma unroll
                for (int mi = 0; mi < T::MT; ++mi) {
                    float step[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                    bl_mma_tf32(step, a_lo[mi], b_hi);
                    bl_mma_tf32(step, a_fin[mi], b_lo);
                    bl_mma_tf32(step, a_hi[mi], b_hi);
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        acc[mi][ni][q] = __fadd_rn(acc[mi][ni][q], step[q]);
                    }
                }
            }
        }
        // Everyone is done with this stage before iteration kt + 1 copies tile kt + 2 into it.
        __syncthreads();
    }

    // Accumulator q of tile (mi, ni): row group + 8 * (q / 2), column 2 * pair + q % 2.
#pragma unroll
    for (int mi = 0; mi < T::MT; ++mi) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const bl_u64 row = m0 + warp_m * T::MT * BL_X3_MMA_M + mi * BL_X3_MMA_M + group + 8 * half;
            if (row < rows) {
                float* o = out + row * BILSTM_GATE_ROWS + n0 + warp_n * T::NT * BL_X3_MMA_N + 2 * pair;
#pragma unroll
                for (int ni = 0; ni < T::NT; ++ni) {
                    float2 v;
                    v.x = acc[mi][ni][2 * half];
                    v.y = acc[mi][ni][2 * half + 1];
                    *reinterpret_cast<float2*>(o + ni * BL_X3_MMA_N) = v;
                }
            }
        }
    }
}
#endif  // __CUDA_ARCH__ >= 800

using bl_x3_large = bl_x3_tile<BILSTM_PROJ_TF32X3_TILE_ROWS, BILSTM_PROJ_TF32X3_TILE_COLS,
                               BILSTM_PROJ_TF32X3_WARP_ROWS, BILSTM_PROJ_TF32X3_WARP_COLS,
                               BILSTM_PROJ_TF32X3_K_TILE, BILSTM_PROJ_TF32X3_ROW_FLOATS,
                               BILSTM_PROJ_TF32X3_B_ROW_FLOATS, BILSTM_PROJ_TF32X3_SHARED_BYTES>;
using bl_x3_small = bl_x3_tile<BILSTM_PROJ_TF32X3_SMALL_TILE_ROWS, BILSTM_PROJ_TF32X3_SMALL_TILE_COLS,
                               BILSTM_PROJ_TF32X3_SMALL_WARP_ROWS, BILSTM_PROJ_TF32X3_SMALL_WARP_COLS,
                               BILSTM_PROJ_TF32_K_TILE, BILSTM_PROJ_TF32_ROW_FLOATS,
                               BILSTM_PROJ_TF32X3_SMALL_B_ROW_FLOATS, BILSTM_PROJ_TF32X3_SMALL_SHARED_BYTES>;

extern "C" __global__ void __launch_bounds__(BILSTM_BLOCK_THREADS, 1)
    bilstm_projection_tf32x3(const bl_projection_params p) {
#if __CUDA_ARCH__ >= 800
    extern __shared__ __align__(16) float bl_x3_shared[];
    bl_projection_tf32x3<bl_x3_large>(p, bl_x3_shared);
#else
    // No TF32 tensor cores before 8.0: the host refuses to launch this entry there (see the
    // launch contract); reaching this is a contract violation, so fail loudly.
    (void)p;
    asm volatile("trap;");
#endif
}

extern "C" __global__ void __launch_bounds__(BILSTM_BLOCK_THREADS, 2)
    bilstm_projection_tf32x3_small(const bl_projection_params p) {
#if __CUDA_ARCH__ >= 800
    extern __shared__ __align__(16) float bl_x3_shared[];
    bl_projection_tf32x3<bl_x3_small>(p, bl_x3_shared);
#else
    (void)p;
    asm volatile("trap;");
#endif
}

// ---- The Hopper entries: bilstm_projection_tf32x3_wgmma and bilstm_projection_tf32_wgmma ----
// Launch contract of these entries (the other two's above apply where not restated):
// - Needs compute capability 9.0 compiled for compute_90a (wgmma.mma_async and the
//   arch-specific features of sm_90a; the host compiles 9.0 devices' modules so); elsewhere the
//   entry is a trap and the host never launches it.
// - Grid: (G, 1, 1), any G >= 1 (the host: min(tiles, SMs), one block an SM); persistent: block
//   b runs work tiles b, b + G, ... of tiles = 2 * C * ceil(rows / BILSTM_PROJ_WG_TILE_ROWS) (at
//   most 2^28, rows being u32), tile t being row tile t / (2 C), direction (t / C) % 2 and column
//   group t % C, where C = BILSTM_GATE_ROWS / COLS column groups of COLS columns:
//   COLS = BILSTM_PROJ_WG_TILE_COLS (C = 4) for the 3xTF32 entry, BILSTM_PROJ_WG_TF32_TILE_COLS
//   (two column tiles, C = 2) for the TF32 twin (the tiles reading the same activations are
//   neighbours, so concurrent blocks share them in L2). Block:
//   (BILSTM_BLOCK_THREADS, 1, 1) = two warpgroups. Dynamic shared bytes:
//   BILSTM_PROJ_WG_SHARED_BYTES (raised once after loading): BILSTM_PROJ_WG_STAGES stages, then
//   2 * STAGES mbarriers; based 1024-byte aligned (no static shared memory; the kernel traps
//   otherwise). The pipeline's mbarrier waits are unbounded: every arrival they wait for comes
//   from the block's own warps or from the bulk-copy engine (a fault ends the whole kernel), so
//   no partner can be lost as between the cluster recurrence's CTAs.
// - Parameters: bl_projection_params, with weights[d] the warpgroup image of direction d
//   (PackedOffsets::input_x3_wgmma, bilstm_core::layout::pack_input_x3_wgmma_into): per part
//   (TF32 high parts, then remainders), per column tile, per K tile of BILSTM_PROJ_WG_K_TILE,
//   BILSTM_PROJ_WG_B_TILE_FLOATS floats laid out as the 128-byte-swizzled K-major shared image
//   the instruction reads (gate column n of the tile in row n, k in the row's 32 slots, slot
//   8c + j holding k = 8c + 2j for j < 4 and 8c + 2(j - 4) + 1 for j >= 4, 16-byte chunk q of
//   row n stored at chunk q ^ (n mod 8)); 2 * 4 * proj_wg_padded_in(in_width) * 128 floats a
//   direction, 16-byte aligned (each part's K tile of a column tile, 16,384 contiguous bytes, is
//   one bulk copy). x, out, rows, in_width as above.
// - Numerics: x is split by bl_tf32_split as above. Each output is an FP32 sum from 0.0f over K
//   tiles of 32 in ascending k, each added with one round-to-nearest FP32 add: acc = acc + tile,
//   where tile starts at 0.0f and the tensor cores accumulate into it, for the tile's four
//   k-steps in ascending order, lo(x) * hi(W), then hi(x) * lo(W) (hi(x) replaced by +0 where
//   not finite), then hi(x) * hi(W). The same instruction sequence runs for every row, so a
//   window's bits never depend on the batch; they differ from the mma.sync entries' (which add
//   every k-step) and only this entry runs FP32 projections on 9.0 (bilstm_core's plan).
// - bilstm_projection_tf32_wgmma (TF32 mode on 9.0; same block, shared bytes, parameters and
//   weight image, of which it reads the high parts only; work tiles of 256 columns, grid as
//   above): gates = sum over k of tf32(x) * tf32(W), every k-step's product (one m64n256k8 a
//   warpgroup: the stage's two weight slots hold the high parts of column tiles 2 g and 2 g + 1,
//   one 256-row swizzled image) chained into one tensor-core accumulator from 0 in ascending k
//   (the TF32 tile's numerics; its own bits). H200 session 11 call 6 against 128-column work
//   tiles (TF32 whole forward): batch 256 6.19 ms against 6.61, batch 1024 24.43 against 26.22,
//   batch 1 1.311 against 1.300 (20 work tiles instead of 40 at 589 rows). Also tried (call 7)
//   and dropped: two K tiles' products before each wait (the step's code inlined twice, 204
//   registers): 6.19 / 24.49, no faster.

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// A shared-memory matrix descriptor for wgmma: K-major operand in the 128-byte swizzle of
// 8-row x 128-byte atoms, 1,024 bytes between atoms (the stride dimension; the leading one is
// unused when the K extent read, 32 bytes, lies within the swizzle width). `address` is the
// shared-window byte address of the k-step's first element: atom-aligned plus 32 bytes a k-step.
__device__ __forceinline__ bl_u64 bl_wg_desc_sw128(bl_u32 address) {
    return (bl_u64)((address & 0x3FFFFu) >> 4) | ((bl_u64)1 << 16) | ((bl_u64)(1024 >> 4) << 32) |
           ((bl_u64)1 << 62);
}

__device__ __forceinline__ void bl_wg_fence() {
    asm volatile("wgmma.fence.sync.aligned;" : : : "memory");
}

__device__ __forceinline__ void bl_wg_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" : : : "memory");
}

// Waits until every wgmma group this warp committed has completed.
__device__ __forceinline__ void bl_wg_wait_all() {
    asm volatile("wgmma.wait_group.sync.aligned 0;" : : : "memory");
}

// The 64 accumulator registers %0 .. %63 of an m64n128 wgmma asm statement (the operands
// BL_WG_D8(0) .. BL_WG_D8(56) below).
#define BL_WG_D64_REGS \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
// Eight accumulator operands d[i] .. d[i + 7] of a wgmma asm statement (read and written).
#define BL_WG_D8(i)                                                                                  \
    "+f"(d[(i)]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]), "+f"(d[(i) + 5]), \
        "+f"(d[(i) + 6]), "+f"(d[(i) + 7])

// d = a * B + (accumulate ? d : 0) for the warpgroup's 64 x 128 tile, one k-step of 8: a the
// mma.m16n8k8 TF32 A fragment of this warp's 16 rows, B the 8 x 128 K-major weights at `b`.
// Asynchronous: d is valid after bl_wg_commit and bl_wg_wait_all.
__device__ __forceinline__ void bl_wgmma_tf32(float (&d)[64], const bl_u32 (&a)[4], bl_u64 b, bl_u32 accumulate) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %68, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
        BL_WG_D64_REGS
        "{%64, %65, %66, %67}, %69, p, 1, 1;\n\t}"
        : BL_WG_D8(0), BL_WG_D8(8), BL_WG_D8(16), BL_WG_D8(24), BL_WG_D8(32), BL_WG_D8(40), BL_WG_D8(48), BL_WG_D8(56)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(accumulate), "l"(b));
}

// As bl_wgmma_tf32 for the warpgroup's 64 x 256 tile (B: 8 x 256 K-major weights at `b`, two
// column tiles' swizzled images one after the other), the TF32 twin's product.
__device__ __forceinline__ void bl_wgmma_tf32_n256(float (&d)[128], const bl_u32 (&a)[4], bl_u64 b,
                                                   bl_u32 accumulate) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %133, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
        "{%128, %129, %130, %131}, %132, p, 1, 1;\n\t}"
        : BL_WG_D8(0), BL_WG_D8(8), BL_WG_D8(16), BL_WG_D8(24), BL_WG_D8(32), BL_WG_D8(40), BL_WG_D8(48), BL_WG_D8(56),
          BL_WG_D8(64), BL_WG_D8(72), BL_WG_D8(80), BL_WG_D8(88), BL_WG_D8(96), BL_WG_D8(104), BL_WG_D8(112), BL_WG_D8(120)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

constexpr int BL_WG_ROWS = BILSTM_PROJ_WG_TILE_ROWS;
constexpr int BL_WG_COLS = BILSTM_PROJ_WG_TILE_COLS;
constexpr int BL_WG_KT = BILSTM_PROJ_WG_K_TILE;
constexpr int BL_WG_STAGES = BILSTM_PROJ_WG_STAGES;
constexpr int BL_WG_LDA = BILSTM_PROJ_WG_ROW_FLOATS;
constexpr int BL_WG_B_FLOATS = BILSTM_PROJ_WG_B_TILE_FLOATS;
constexpr int BL_WG_A_FLOATS = BL_WG_ROWS * BL_WG_LDA;
constexpr int BL_WG_STAGE_FLOATS = BL_WG_A_FLOATS + 2 * BL_WG_B_FLOATS;
constexpr int BL_WG_COL_TILES = BILSTM_GATE_ROWS / BL_WG_COLS;
static_assert(BL_WG_STAGES * BL_WG_STAGE_FLOATS * 4 + 2 * BL_WG_STAGES * 8 == BILSTM_PROJ_WG_SHARED_BYTES,
              "shared bytes: the stages, then two mbarriers a stage");
static_assert(BL_WG_ROWS == 2 * 64 && BILSTM_BLOCK_THREADS == 256, "two warpgroups of 64 rows");
static_assert(BL_WG_COLS == 128 && BL_WG_KT == 32, "m64n128k8 products, one swizzle row a K tile");
static_assert(BL_WG_COL_TILES * BL_WG_COLS == BILSTM_GATE_ROWS, "whole column tiles");
static_assert(BL_WG_LDA % 16 == 8, "conflict-free 64-bit A fragment loads");
static_assert((BL_WG_A_FLOATS * 4) % 1024 == 0 && (BL_WG_STAGE_FLOATS * 4) % 1024 == 0,
              "weight tiles on 1,024-byte swizzle atoms");
static_assert(BL_WG_ROWS * (BL_WG_KT / 4) % BILSTM_BLOCK_THREADS == 0, "A chunks evenly");
static_assert(2 * BL_WG_B_FLOATS / 4 % BILSTM_BLOCK_THREADS == 0, "B chunks evenly");
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The body of both warpgroup entries: PRODUCTS = 3 is the 3xTF32 projection (the numerics of
// this entry's contract above); PRODUCTS = 1 the TF32 one (bilstm_projection_tf32_wgmma): A is
// tf32(x) (bl_tf32_rne, ties to even, as the TF32 tile), B the image's high parts (the TF32
// rounding of the weights, as the TF32 tile's), every k-step's product chained into the one
// accumulator in ascending k (no remainders, no FP32 adds), as the TF32 tile does.
//
// Persistent pipeline. Block b runs the work tiles b, b + gridDim.x, ... of the `tiles` = 8 (3xTF32;
// TF32: 4) * row tiles ((row tile, direction, column group), column group fastest: the tiles
// reading the same activation rows are neighbours), each tile's K tiles in order; the (tile, K tile) steps of
// a block form one sequence whose step f uses stage f % STAGES, and the copies of step f + 2 are
// issued at the start of step f, across tile boundaries (a tile's first copies are in flight
// while the previous tile finishes and stores). No block barrier after the start:
// - A (activations): each warp copies the 16 rows it reads itself (cp.async, one group a step),
//   so it waits for its own copies (cp.async.wait_group, then __syncwarp for its lanes').
// - B (weights): thread 0 copies the K tile's two weight slots (3xTF32: both parts of the column
//   tile; TF32: the high parts of the group's two column tiles) with the bulk-copy engine onto mbarrier
//   full[stage] (one arrival with the byte count); every warp waits for that phase. Before it
//   refills a stage, thread 0 waits on empty[stage], where each of the 8 warps arrives once its
//   warpgroup's products of the stage's previous step have completed. With 4 stages and copies
//   two steps ahead, the stage refilled at step f was last read at step f - 2, which the other
//   warpgroup has finished unless it lags by two steps.
// So the two warpgroups run apart. H200, batch 1024, layer 1 (ncu, session 9): the block-barrier
// version took 4.10 ms with the tensor pipe 48 % busy; this pipeline 3.53 ms (bench --phases),
// the tensor pipe ~53 % busy. Tried in session 9 and no faster (calls 4-6, whole FP32 forward at
// batch 1024 against this version's 33.99 ms): the warpgroups taking turns on the tensor cores
// through named barriers (34.31 ms; layer 1's projection 3.64), and with that one fence a step
// with all four k-steps' fragments made first (34.55; without the turns 34.11). A TF32 variant
// that let a step's products run on while the next step's fragments were written failed
// memcheck's accuracy check: wgmma reads A's registers asynchronously, so no fragment register
// may be rewritten before the group that reads it is waited for (PTX ISA, wgmma.mma_async).
template <int PRODUCTS>
__device__ __forceinline__ void bl_projection_wgmma(const bl_projection_params& p, float* bl_wg_shared) {
    static_assert(PRODUCTS == 1 || PRODUCTS == 3, "TF32 or 3xTF32");
    static_assert(BL_WG_STAGES == 4, "copies two steps ahead, one step of slack between warpgroups");
    static_assert(BL_WG_ROWS / 2 == 4 * 16, "a warpgroup's 64 rows: 16 a warp");
    // Columns of a work tile: one column tile (3xTF32: both weight parts fill the stage's two
    // weight slots) or two (TF32: the high parts of two neighbouring column tiles, one m64n256
    // product a k-step), and the column groups of a direction.
    constexpr int COLS = PRODUCTS == 3 ? BL_WG_COLS : BILSTM_PROJ_WG_TF32_TILE_COLS;
    static_assert(BILSTM_PROJ_WG_TF32_TILE_COLS == 2 * BL_WG_COLS, "two column tiles, the stage's two slots");
    constexpr bl_u32 GROUPS = (bl_u32)(BILSTM_GATE_ROWS / COLS);
    constexpr int ACCS = COLS / 2;  // accumulators a thread: 64 rows x COLS / 128 threads
    constexpr bl_u32 B_BYTES = BL_WG_B_FLOATS * 4;
    constexpr bl_u32 TILES_PER_ROW_TILE = 2 * GROUPS;
    const int tid = threadIdx.x;
    const int lane = tid % BILSTM_WARP_THREADS;
    const int warp = tid / BILSTM_WARP_THREADS;
    const int wgroup = warp / 4;    // warpgroup: rows 64 wgroup ..
    const int wrow = (warp % 4) * 16;  // this warp's 16 rows of the warpgroup's 64
    const int my_row = wgroup * 64 + wrow;  // this warp's first row in the tile
    const int group = lane / 4;
    const int pair = lane % 4;
    const float* __restrict__ x = p.x;
    const bl_u32 in_width = p.in_width;
    const bl_u64 rows = p.rows;
    const bl_u32 k_tiles = (in_width + BL_WG_KT - 1) / BL_WG_KT;
    const bl_u32 tiles = (bl_u32)((rows + BL_WG_ROWS - 1) / BL_WG_ROWS) * TILES_PER_ROW_TILE;
    if (blockIdx.x >= tiles) {
        return;  // the whole block: nothing to do (the host never launches more blocks than tiles)
    }
    // Each direction's image: [part][column tile][K tile][BL_WG_B_FLOATS].
    const bl_u64 part_floats = (bl_u64)BL_WG_COL_TILES * k_tiles * BL_WG_B_FLOATS;
    const bool x_chunks = in_width % BL_CP_VEC == 0 && ((bl_u64)x) % 16 == 0;
    const bl_u32 shared_base = bl_shared_address(bl_wg_shared);
    // The weight tiles sit on 1,024-byte swizzle atoms only if the dynamic shared memory does
    // (there is no static shared memory; the entries declare it 1,024-byte aligned): a wrong
    // base would give wrong products silently, so stop loudly instead.
    if ((shared_base & 1023u) != 0u) {
        asm volatile("trap;");
    }
    // After the stages: the mbarriers full[s] (at full0 + 8 s) and empty[s] (empty0 + 8 s).
    const bl_u32 full0 = shared_base + (bl_u32)(BL_WG_STAGES * BL_WG_STAGE_FLOATS * 4);
    const bl_u32 empty0 = full0 + 8u * BL_WG_STAGES;
    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < BL_WG_STAGES; ++s) {
            bl_mbar_init(full0 + 8u * s, 1);
            bl_mbar_init(empty0 + 8u * s, BILSTM_BLOCK_THREADS / BILSTM_WARP_THREADS);
        }
        bl_mbar_fence_init();
    }
    __syncthreads();

    // The copies of step f (tile t, K tile kt) into stage f % STAGES: this warp's rows, and (thread
    // 0) the weights once the stage's previous step is released; one cp.async group either way.
    auto issue = [&](bl_u32 t, bl_u32 kt, bl_u64 f) {
        const bl_u32 stage = (bl_u32)(f % BL_WG_STAGES);
        const bl_u32 a_base = shared_base + stage * (bl_u32)(BL_WG_STAGE_FLOATS * 4);
        const bl_u64 m0 = (bl_u64)(t / TILES_PER_ROW_TILE) * BL_WG_ROWS + (bl_u64)my_row;
        bl_copy_activations<16, BL_WG_KT, BL_WG_LDA, BILSTM_WARP_THREADS>(
            a_base + (bl_u32)(my_row * BL_WG_LDA * 4), x, m0, rows, in_width, kt * BL_WG_KT, x_chunks, lane);
        bl_cp_async_commit();
        if (tid == 0) {
            const bl_u32 full = full0 + 8u * stage;
            if (f >= (bl_u64)BL_WG_STAGES) {
                // Every warp has released step f - STAGES (phase f / STAGES - 1 of empty[stage]).
                while (!bl_mbar_try_wait(empty0 + 8u * stage, (bl_u32)(f / BL_WG_STAGES - 1u) & 1u)) {
                }
            }
            bl_mbar_arrive_expect(full, 2 * B_BYTES);
            const bl_u32 direction = (t / GROUPS) % 2u;
            const bl_u32 col_group = t % GROUPS;
            const float* w = direction == 0 ? p.weights[0] : p.weights[1];
#pragma unroll
            for (int slot = 0; slot < 2; ++slot) {
                // 3xTF32: slot = weight part of the column tile; TF32: high parts of column tiles
                // 2 g and 2 g + 1, so the slots hold one 256-row K-major image.
                const bl_u64 part = PRODUCTS == 3 ? (bl_u64)slot : 0u;
                const bl_u64 col_tile = PRODUCTS == 3 ? col_group : 2u * col_group + (bl_u32)slot;
                bl_bulk_copy_g2s(a_base + (bl_u32)(BL_WG_A_FLOATS * 4) + (bl_u32)slot * B_BYTES,
                                 w + part * part_floats + (col_tile * k_tiles + kt) * BL_WG_B_FLOATS, B_BYTES, full);
            }
        }
    };
    // The producer's position: the next step to copy (tile pt, K tile pkt, step pf).
    bl_u32 pt = blockIdx.x;
    bl_u32 pkt = 0;
    bl_u64 pf = 0;
    auto produce = [&]() {
        if (pt < tiles) {
            issue(pt, pkt, pf);
            if (++pkt == k_tiles) {
                pkt = 0;
                pt += gridDim.x;
            }
        } else {
            bl_cp_async_commit();  // an empty group keeps the wait counts uniform
        }
        ++pf;
    };

    float acc[ACCS];
    float tile[PRODUCTS == 3 ? 64 : 1];  // 3xTF32's fresh K-tile sum (TF32: unused)
#pragma unroll
    for (int i = 0; i < ACCS; ++i) {
        acc[i] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < (PRODUCTS == 3 ? 64 : 1); ++i) {
        tile[i] = 0.0f;
    }
    produce();
    produce();
    bl_u64 f = 0;
    for (bl_u32 t = blockIdx.x; t < tiles; t += gridDim.x) {
        for (bl_u32 kt = 0; kt < k_tiles; ++kt, ++f) {
            produce();  // step f + 2
            // This warp's rows of step f have landed (steps f + 1 and f + 2 may be in flight) and
            // are visible to all its lanes; the weights of step f too.
            bl_cp_async_wait<2>();
            __syncwarp();
            const bl_u32 stage = (bl_u32)(f % BL_WG_STAGES);
            while (!bl_mbar_try_wait(full0 + 8u * stage, (bl_u32)(f / BL_WG_STAGES) & 1u)) {
            }
            const float* a_s = bl_wg_shared + stage * BL_WG_STAGE_FLOATS + my_row * BL_WG_LDA;
            const bl_u32 b_hi = shared_base + (bl_u32)((stage * BL_WG_STAGE_FLOATS + BL_WG_A_FLOATS) * 4);
            const bl_u32 b_lo = b_hi + BL_WG_B_FLOATS * 4;
#pragma unroll
            for (int c = 0; c < BL_WG_KT / BL_X3_MMA_K; ++c) {
                // A fragment (mma.m16n8k8 layout): k-index pair carries k 8c + 2 pair, pair + 4
                // carries 8c + 2 pair + 1 (the weight image's slot order), one 64-bit load a row.
                const float2 upper = *reinterpret_cast<const float2*>(a_s + group * BL_WG_LDA + 8 * c + 2 * pair);
                const float2 lower = *reinterpret_cast<const float2*>(a_s + (group + 8) * BL_WG_LDA + 8 * c + 2 * pair);
                const bl_u64 w_hi = bl_wg_desc_sw128(b_hi + (bl_u32)(c * BL_X3_MMA_K * 4));
                if constexpr (PRODUCTS == 1) {
                    const bl_u32 a_tf32[4] = {__float_as_uint(bl_tf32_rne(upper.x)), __float_as_uint(bl_tf32_rne(lower.x)),
                                              __float_as_uint(bl_tf32_rne(upper.y)), __float_as_uint(bl_tf32_rne(lower.y))};
                    bl_wg_fence();
                    bl_wgmma_tf32_n256(acc, a_tf32, w_hi, 1u);
                    bl_wg_commit();
                } else {
                    bl_u32 a_hi[4];
                    bl_u32 a_lo[4];
                    bl_u32 a_fin[4];
                    bl_tf32_split(upper.x, a_hi[0], a_lo[0]);
                    bl_tf32_split(lower.x, a_hi[1], a_lo[1]);
                    bl_tf32_split(upper.y, a_hi[2], a_lo[2]);
                    bl_tf32_split(lower.y, a_hi[3], a_lo[3]);
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        a_fin[q] = bl_tf32_finite_or_zero(a_hi[q]);
                    }
                    const bl_u64 w_lo = bl_wg_desc_sw128(b_lo + (bl_u32)(c * BL_X3_MMA_K * 4));
                    bl_wg_fence();
                    bl_wgmma_tf32(tile, a_lo, w_hi, c == 0 ? 0u : 1u);
                    bl_wgmma_tf32(tile, a_fin, w_lo, 1u);
                    bl_wgmma_tf32(tile, a_hi, w_hi, 1u);
                    bl_wg_commit();
                }
            }
            // This warpgroup's products of the stage are done (and no wgmma reads a fragment
            // register any more): release the stage, and for 3xTF32 add the step's sum.
            bl_wg_wait_all();
            if (lane == 0) {
                bl_mbar_arrive(empty0 + 8u * stage);
            }
            if constexpr (PRODUCTS == 3) {
#pragma unroll
                for (int i = 0; i < 64; ++i) {
                    acc[i] = __fadd_rn(acc[i], tile[i]);
                }
            }
        }

        // Accumulator 4 j + q: row group + 8 (q / 2) of this warp's 16, column 8 j + 2 pair + q % 2.
        const bl_u64 row = (bl_u64)(t / TILES_PER_ROW_TILE) * BL_WG_ROWS + (bl_u64)my_row + (bl_u64)group;
        const bl_u32 direction = (t / GROUPS) % 2u;
        float* o = p.out + (bl_u64)direction * p.out_direction_stride + row * BILSTM_GATE_ROWS + (t % GROUPS) * COLS +
                   2 * pair;
#pragma unroll
        for (int j = 0; j < COLS / 8; ++j) {
            if (row < rows) {
                *reinterpret_cast<float2*>(o + 8 * j) = make_float2(acc[4 * j], acc[4 * j + 1]);
            }
            if (row + 8 < rows) {
                *reinterpret_cast<float2*>(o + 8 * BILSTM_GATE_ROWS + 8 * j) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
            }
            acc[4 * j] = 0.0f;
            acc[4 * j + 1] = 0.0f;
            acc[4 * j + 2] = 0.0f;
            acc[4 * j + 3] = 0.0f;
        }
    }
    bl_cp_async_wait<0>();
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

extern "C" __global__ void __launch_bounds__(BILSTM_BLOCK_THREADS, 1)
    bilstm_projection_tf32x3_wgmma(const bl_projection_params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) float bl_wg_shared[];
    bl_projection_wgmma<3>(p, bl_wg_shared);
#else
    // Not compiled for sm_90a: the host never launches this entry here (launch contract).
    (void)p;
    asm volatile("trap;");
#endif
}

extern "C" __global__ void __launch_bounds__(BILSTM_BLOCK_THREADS, 1)
    bilstm_projection_tf32_wgmma(const bl_projection_params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) float bl_wg_shared[];
    bl_projection_wgmma<1>(p, bl_wg_shared);
#else
    (void)p;
    asm volatile("trap;");
#endif
}

// ---- bilstm_projection_tf32_resident: TF32 mode on 9.0, weights resident, activations by TMA ----
// Launch contract (where not restated, as the warpgroup entries' above):
// - Needs compute capability 9.0 compiled for compute_90a (wgmma.mma_async, cp.async.bulk.tensor);
//   elsewhere the entry is a trap and the host never launches it.
// - Grid: (BILSTM_PROJ_RES_COL_TILES * J, 1, 1) for any J >= 1 (the host: J = min(ceil(blocks /
//   W), SMs / COL_TILES), blocks = ceil(rows / BILSTM_PROJ_RES_BLOCK_ROWS), W the warpgroups a
//   block); persistent: block b holds column tile c = b % COL_TILES resident (direction c / 4,
//   gate columns 128 (c % 4) .. + 128 of that direction) and belongs to set j = b / COL_TILES;
//   its warpgroup g runs the row blocks W j + g + W J i, i = 0, 1, ..., each block's K tiles in
//   order. Block: (BILSTM_PROJ_RES_THREADS, 1, 1) = W warpgroups. Dynamic shared bytes:
//   BILSTM_PROJ_RES_SHARED_BYTES (raised once after loading), 1,024-byte aligned (no static
//   shared memory; the kernel traps otherwise, and on a grid that is not a multiple of
//   COL_TILES or an input wider than the resident image): the resident weights
//   (BILSTM_PROJ_RES_MAX_K_TILES K tiles of 16 KiB), each warpgroup's BILSTM_PROJ_RES_STAGES
//   activation stages (BLOCK_ROWS rows x 32 values in the 128-byte swizzle), then the
//   mbarriers. Waits are unbounded: every arrival comes from the block's own warps or from the
//   copy engines (a fault ends the whole kernel).
// - Parameters: bl_projection_params, weights[d] being direction d's natural-order TF32 image
//   (PackedOffsets::input_tf32_wgmma, bilstm_core::layout::pack_input_tf32_wgmma_into: per column
//   tile, per K tile, 128 gate columns x 32 k in the 128-byte swizzle, k at its natural slot,
//   proj_wg_padded_in(in_width) * 512 floats a direction, 16-byte aligned); then two
//   bl_tensor_map (__grid_constant__ CUtensorMap) the host encodes per launch: `map` over x
//   (FP32, 2-D, dimensions {in_width, rows}, row stride in_width * 4 bytes, box {32,
//   BLOCK_ROWS}, 128-byte swizzle, out-of-bounds elements zero) and `out_map` over the output
//   (FP32, 3-D, dimensions {512, rows, 2}, strides 512 * 4 and out_direction_stride * 4 bytes,
//   box {32, 64, 1}, 128-byte swizzle: stores past `rows` are dropped; read only with
//   BILSTM_PROJ_RES_STORE_BY_TMA); then `flags` (u32): BILSTM_PROJ_RES_ROUND_INPUT, the kernel
//   rounds every activation to TF32 in shared memory (layer 0, the model's own input), else x
//   must already hold TF32 values (low 13 bits zero: the producing recurrence stores them
//   rounded to nearest, ties to even, with out_tf32; the tensor cores ignore any other low
//   bits); BILSTM_PROJ_RES_STORE_BY_TMA, the output tiles leave through shared memory by TMA
//   (an input of at most MAX_K_TILES - 2 W K tiles, whose weights leave room in the weight space
//   for every warpgroup's 32 KiB staging; the kernel traps otherwise).
// - Preconditions: 1 <= in_width <= 32 * BILSTM_PROJ_RES_MAX_K_TILES and a multiple of 4 (the
//   map's stride), whole row blocks below 2^31 rows (TMA coordinates are signed 32-bit), x and
//   out 16-byte aligned, out_direction_stride a multiple of 4; otherwise as the other entries.
// - Numerics: gates = sum over k of tf32(x) * tf32(W), one m64n128k8 product a k-step of 8 (k in
//   natural order within the step), chained in one tensor-core accumulator from 0 in ascending
//   k: the TF32 twin's products over the same values (same terms per k-step, same chain; the
//   same rounding, bl_tf32_rne, whether the recurrence stored x rounded or this kernel rounds
//   it), with the same bits on the H200 (session 14: CLI checksums at batches 1-1024 and GPU
//   test gpu_tf32 `resident_and_streaming_tf32_projections_give_the_same_bits`; the eight
//   products of a k-step sum alike in either order).
// - Postconditions: every out[d][row, col] for row < rows is written exactly once, by the
//   threads' own 8-byte stores or by the tensor-copy engine (complete when the kernel is),
//   nothing else.
// - Design: W = BILSTM_PROJ_RES_THREADS / 128 warpgroups, each its own pipeline of row blocks
//   and its own stages, so that while one stores a tile the others' products and copies run.
//   With BILSTM_PROJ_RES_ROUND_INPUT a warpgroup rounds each stage in place after its copy lands
//   (16-byte pieces, the same number a thread), then fence.proxy.async and its named barrier
//   before the products. After a block's last K tile its 64 x 128 accumulators go straight to
//   global memory (16 8-byte stores a thread and row pair), or with
//   BILSTM_PROJ_RES_STORE_BY_TMA into the warpgroup's staging (four swizzled 32-column boxes),
//   fence.proxy.async, its barrier, and four TMA stores by its first thread, which waits for
//   their reads before the next block's epilogue (H200 session 16 call 9: layer 0 at batch 256
//   0.205-0.208 ms against 0.255-0.261 with the threads' stores, same bits; layers 1-3 have no
//   room for it). H200 session 16 call 5 (TF32, `--phases`, three rounds; bits SAME at batches
//   1-1024): three warpgroups with 4 stages and the threads' stores, layer 1 at batch 256
//   0.329-0.331 ms, at 1024 1.283-1.286, against two warpgroups
//   storing half of each tile through a TMA-store staging (which the third warpgroup's stages
//   replaced in shared memory) 0.362-0.364 / 1.415; four warpgroups with 3 stages 0.359-0.361
//   / 1.419-1.421. Session 15 call 1: writing the output alone would take 0.14 ms at batch 256
//   (`fill_`, 4.4 TB/s) and cuBLAS's TF32 GEMM of the same shape 0.338 ms.
struct __align__(64) bl_tensor_map {
    bl_u64 words[16];
};
static_assert(sizeof(bl_tensor_map) == 128, "mirrors CUtensorMap (bilstm_kernels::params::TensorMap)");

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// A warpgroup's block: 64 rows, one m64 product chain; one TMA box (32 values x 64 rows) a step.
constexpr int BL_RES_ROWS = BILSTM_PROJ_RES_BLOCK_ROWS;
constexpr int BL_RES_MAX_KT = BILSTM_PROJ_RES_MAX_K_TILES;
constexpr int BL_RES_STAGES = BILSTM_PROJ_RES_STAGES;
// A stage is refilled LAG steps after the step that last read it (two where the ring is deep
// enough: the producer then never waits for warps still finishing the step before).
constexpr int BL_RES_LAG = BL_RES_STAGES >= 5 ? 2 : 1;
constexpr bl_u32 BL_RES_COL_TILES = BILSTM_PROJ_RES_COL_TILES;
constexpr bl_u32 BL_RES_A_BYTES = BL_RES_ROWS * BL_WG_KT * 4;
constexpr bl_u32 BL_RES_B_BYTES = BL_WG_COLS * BL_WG_KT * 4;
// Warpgroups a block, each streaming its own row blocks through its own stages.
constexpr int BL_RES_WGS = BILSTM_PROJ_RES_THREADS / 128;
// The flags (the entry's last parameter): round the input to TF32 in shared memory; store the
// output tiles through shared memory by TMA (needs the weight space of BILSTM_PROJ_RES_MAX_K_TILES
// K tiles to hold the input's K tiles and every warpgroup's staging).
constexpr bl_u32 BL_RES_ROUND_INPUT = BILSTM_PROJ_RES_ROUND_INPUT;
constexpr bl_u32 BL_RES_STORE_BY_TMA = BILSTM_PROJ_RES_STORE_BY_TMA;
// A warpgroup's output staging: its 64 x 128 tile as four TMA-store boxes of 32 columns, each 64
// rows of 128 bytes in the 128-byte swizzle.
constexpr bl_u32 BL_RES_OUT_BOX_BYTES = 64 * 32 * 4;
constexpr bl_u32 BL_RES_OUT_BYTES = 4 * BL_RES_OUT_BOX_BYTES;
// Where the mbarriers start: after the weights and every warpgroup's stages.
constexpr bl_u32 BL_RES_BAR_AT = BL_RES_MAX_KT * BL_RES_B_BYTES + BL_RES_WGS * BL_RES_STAGES * BL_RES_A_BYTES;
static_assert(BL_RES_BAR_AT + 8 + 2 * BL_RES_WGS * BL_RES_STAGES * 8 <= BILSTM_PROJ_RES_SHARED_BYTES,
              "shared bytes: the weights, the stages, then the mbarriers");
static_assert(BL_RES_ROWS == 64 && BL_WG_COLS == 128 && BL_WG_KT == 32,
              "m64n128k8 products, one 128-byte row a K tile");
static_assert(BL_RES_WGS * 128 == BILSTM_PROJ_RES_THREADS && BL_RES_A_BYTES % (16 * 128) == 0,
              "whole warpgroups; a stage rounds in 16-byte pieces, the same number a thread");
static_assert(BL_RES_A_BYTES % 1024 == 0 && BL_RES_B_BYTES % 1024 == 0, "1,024-byte swizzle atoms");
static_assert(BL_RES_STAGES > BL_RES_LAG, "a stage ahead of the one being refilled");
static_assert(BL_RES_COL_TILES * BL_WG_COLS == 2 * BILSTM_GATE_ROWS, "both directions' column tiles");

// d = A * B + (accumulate ? d : 0) for a warpgroup's 64 x 128 tile, one k-step of 8, both operands
// K-major 128-byte-swizzled shared images (descriptors a and b). Asynchronous, as bl_wgmma_tf32.
__device__ __forceinline__ void bl_wgmma_tf32_ss(float (&d)[64], bl_u64 a, bl_u64 b, bl_u32 accumulate) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
        BL_WG_D64_REGS
        "%64, %65, p, 1, 1;\n\t}"
        : BL_WG_D8(0), BL_WG_D8(8), BL_WG_D8(16), BL_WG_D8(24), BL_WG_D8(32), BL_WG_D8(40), BL_WG_D8(48), BL_WG_D8(56)
        : "l"(a), "l"(b), "r"(accumulate));
}

// Waits until at most one wgmma group this warp committed is pending.
__device__ __forceinline__ void bl_wg_wait_one() {
    asm volatile("wgmma.wait_group.sync.aligned 1;" : : : "memory");
}

// Copies the box at coordinates (c0, c1) of `map` into shared `dst` (1,024-byte aligned) with
// the tensor-copy engine, completing its bytes on the mbarrier `bar` of this CTA.
__device__ __forceinline__ void bl_tma_load_2d(bl_u32 dst, const bl_tensor_map* map, int c0, int c1, bl_u32 bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
        :
        : "r"(dst), "l"(reinterpret_cast<bl_u64>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

// Stores the box at `src` (shared, 1,024-byte aligned) to coordinates (c0, c1, c2) of `map`
// with the tensor-copy engine (elements outside the map's bounds are not written); one bulk
// group of this thread's.
__device__ __forceinline__ void bl_tma_store_3d(const bl_tensor_map* map, int c0, int c1, int c2, bl_u32 src) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3}], [%4];"
                 :
                 : "l"(reinterpret_cast<bl_u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(src)
                 : "memory");
}

__device__ __forceinline__ void bl_bulk_commit() {
    asm volatile("cp.async.bulk.commit_group;" : : : "memory");
}

// Waits until every bulk group this thread committed has finished reading shared memory.
__device__ __forceinline__ void bl_bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read 0;" : : : "memory");
}

// Waits until every bulk group this thread committed has completed (its writes done).
__device__ __forceinline__ void bl_bulk_wait() {
    asm volatile("cp.async.bulk.wait_group 0;" : : : "memory");
}

// Orders this thread's shared-memory writes (generic proxy) before later async-proxy reads.
__device__ __forceinline__ void bl_fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;" : : : "memory");
}

// The named barrier of warpgroup `wgroup`'s 128 threads (1 or 2). The ids are immediates: with
// a register id ptxas reserves all 16 of a block's barriers, and an SM holds 64 (the driver then
// allowed 4 blocks an SM where registers allow 20; gpu_device's occupancy check, session 14).
__device__ __forceinline__ void bl_wg_barrier(bl_u32 wgroup) {
    static_assert(BL_RES_WGS <= 3, "a named barrier a warpgroup: ids 1 .. 3");
    if (wgroup == 0u) {
        asm volatile("bar.sync 1, 128;" : : : "memory");
    } else if (wgroup == 1u) {
        asm volatile("bar.sync 2, 128;" : : : "memory");
    } else {
        asm volatile("bar.sync 3, 128;" : : : "memory");
    }
}

// One warpgroup's pipeline over its row blocks (see the contract above). Steps f = (block i, K
// tile kt) in order use stage f % STAGES of the warpgroup's ring; at the end of step f the
// warpgroup's first thread issues the TMA copy of step f + STAGES - LAG into the stage step
// f - LAG used, once every warp of the warpgroup has released it (empty barrier, one arrival a
// warp, made after `wgmma.wait_group 1` shows that step's products complete). Products run one
// group ahead: the group of step f is committed before the warps wait for step f - 1's.
__device__ __forceinline__ void bl_projection_resident(const bl_projection_params& p, const bl_tensor_map* map,
                                                       const bl_tensor_map* out_map, bl_u32 flags, float* smem) {
    const bl_u32 round_input = flags & BL_RES_ROUND_INPUT;
    const bool tma_out = (flags & BL_RES_STORE_BY_TMA) != 0u;
    const int tid = threadIdx.x;
    const int lane = tid % BILSTM_WARP_THREADS;
    const int warp = tid / BILSTM_WARP_THREADS;
    const bl_u32 wgroup = (bl_u32)(warp / 4);
    const bool producer = tid % 128 == 0;
    const bl_u32 col = blockIdx.x % BL_RES_COL_TILES;
    const bl_u32 direction = col / (BL_RES_COL_TILES / 2);
    const bl_u32 col_tile = col % (BL_RES_COL_TILES / 2);
    const bl_u32 sets = gridDim.x / BL_RES_COL_TILES;
    const bl_u32 set = blockIdx.x / BL_RES_COL_TILES;
    const bl_u32 k_tiles = (p.in_width + BL_WG_KT - 1) / BL_WG_KT;
    const bl_u32 blocks = (p.rows + BL_RES_ROWS - 1) / BL_RES_ROWS;
    const bl_u32 first = BL_RES_WGS * set + wgroup;
    const bl_u32 stride = BL_RES_WGS * sets;
    const bl_u32 my_blocks = first < blocks ? (blocks - 1 - first) / stride + 1 : 0;
    const bl_u32 steps = my_blocks * k_tiles;

    const bl_u32 base = bl_shared_address(smem);
    if ((base & 1023u) != 0u || sets == 0u || set >= sets || k_tiles > (bl_u32)BL_RES_MAX_KT ||
        (tma_out && k_tiles * BL_RES_B_BYTES + BL_RES_WGS * BL_RES_OUT_BYTES > BL_RES_MAX_KT * BL_RES_B_BYTES)) {
        asm volatile("trap;");  // a broken launch contract: stop loudly rather than compute garbage
    }
    const bl_u32 a_ring = base + BL_RES_MAX_KT * BL_RES_B_BYTES + wgroup * (bl_u32)(BL_RES_STAGES * BL_RES_A_BYTES);
    const bl_u32 weights_bar = base + BL_RES_BAR_AT;
    // With BL_RES_STORE_BY_TMA: this warpgroup's output staging in the weight space the input's
    // K tiles leave unused (the guard above checks the room).
    const bl_u32 staging = base + k_tiles * BL_RES_B_BYTES + wgroup * BL_RES_OUT_BYTES;
    const bl_u32 full0 = weights_bar + 8u + wgroup * (bl_u32)(BL_RES_STAGES * 8);
    const bl_u32 empty0 = weights_bar + 8u + (bl_u32)(BL_RES_WGS * BL_RES_STAGES * 8) + wgroup * (bl_u32)(BL_RES_STAGES * 8);
    if (tid == 0) {
        bl_mbar_init(weights_bar, 1);
        for (int s = 0; s < BL_RES_WGS * BL_RES_STAGES; ++s) {
            bl_mbar_init(weights_bar + 8u + 8u * s, 1);                                 // full
            bl_mbar_init(weights_bar + 8u + 8u * (BL_RES_WGS * BL_RES_STAGES + s), 4);  // empty
        }
        bl_mbar_fence_init();
    }
    __syncthreads();
    if (tid == 0) {
        // The column tile's K tiles of the image: contiguous 16 KiB each, one bulk copy apiece.
        bl_mbar_arrive_expect(weights_bar, k_tiles * BL_RES_B_BYTES);
        const float* w = (direction == 0 ? p.weights[0] : p.weights[1]) + (bl_u64)col_tile * k_tiles * (BL_RES_B_BYTES / 4);
        for (bl_u32 kt = 0; kt < k_tiles; ++kt) {
            bl_bulk_copy_g2s(base + kt * BL_RES_B_BYTES, w + (bl_u64)kt * (BL_RES_B_BYTES / 4), BL_RES_B_BYTES,
                             weights_bar);
        }
    }
    auto issue = [&](bl_u32 g) {
        const bl_u32 stage = g % BL_RES_STAGES;
        const bl_u32 block = first + (g / k_tiles) * stride;
        const bl_u32 full = full0 + 8u * stage;
        bl_mbar_arrive_expect(full, BL_RES_A_BYTES);
        bl_tma_load_2d(a_ring + stage * BL_RES_A_BYTES, map, (int)((g % k_tiles) * BL_WG_KT), (int)(block * BL_RES_ROWS),
                       full);
    };
    if (producer) {
        for (bl_u32 g = 0; g < steps && g < (bl_u32)(BL_RES_STAGES - BL_RES_LAG); ++g) {
            issue(g);
        }
    }
    while (!bl_mbar_try_wait(weights_bar, 0u)) {
    }

    const int group = lane / 4;
    const int pair = lane % 4;
    const int my_row = (warp % 4) * 16 + group;  // this thread's first row in the block
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) {
        acc[i] = 0.0f;
    }
    bl_u32 f = 0;
    for (bl_u32 i = 0; i < my_blocks; ++i) {
        for (bl_u32 kt = 0; kt < k_tiles; ++kt, ++f) {
            const bl_u32 stage = f % BL_RES_STAGES;
            while (!bl_mbar_try_wait(full0 + 8u * stage, (f / BL_RES_STAGES) & 1u)) {
            }
            const bl_u32 a = a_ring + stage * BL_RES_A_BYTES;
            const bl_u32 b = base + kt * BL_RES_B_BYTES;
            if (round_input != 0u) {
                // An input not stored rounded (layer 0): the warpgroup rounds the stage's values
                // to TF32 in place (bl_tf32_rne, as the TF32 twin rounds its activations; the
                // swizzle moves whole 16-byte chunks, so each value stays where it is), then
                // hands them to the tensor cores (async proxy) behind its barrier.
                float4* const v = reinterpret_cast<float4*>(smem + (a - base) / 4u);
#pragma unroll
                for (int q = 0; q < (int)(BL_RES_A_BYTES / 16u / 128u); ++q) {
                    float4 x = v[(tid % 128) + 128 * q];
                    x = make_float4(bl_tf32_rne(x.x), bl_tf32_rne(x.y), bl_tf32_rne(x.z), bl_tf32_rne(x.w));
                    v[(tid % 128) + 128 * q] = x;
                }
                bl_fence_proxy_async_shared();
                bl_wg_barrier(wgroup);
            }
            bl_wg_fence();
#pragma unroll
            for (int c = 0; c < BL_WG_KT / 8; ++c) {
                bl_wgmma_tf32_ss(acc, bl_wg_desc_sw128(a + (bl_u32)(c * 32)), bl_wg_desc_sw128(b + (bl_u32)(c * 32)),
                                 (kt | (bl_u32)c) != 0u ? 1u : 0u);
            }
            bl_wg_commit();
            // Step f - 1's products are complete: its stage may be refilled.
            bl_wg_wait_one();
            if (f >= 1u && lane == 0) {
                bl_mbar_arrive(empty0 + 8u * ((f - 1u) % BL_RES_STAGES));
            }
            const bl_u32 g = f + (bl_u32)(BL_RES_STAGES - BL_RES_LAG);
            if (producer && g < steps) {
                if (f >= (bl_u32)BL_RES_LAG) {
                    // Every warp has released step f - LAG (its use (f - LAG) / STAGES of the stage).
                    const bl_u32 done = f - (bl_u32)BL_RES_LAG;
                    while (!bl_mbar_try_wait(empty0 + 8u * (done % BL_RES_STAGES), (done / BL_RES_STAGES) & 1u)) {
                    }
                }
                issue(g);
            }
        }
        bl_wg_wait_all();
        // The epilogue: the block's 64 x 128 tile. Accumulator 4 j + q: row my_row + 8 (q / 2),
        // column 8 j + 2 pair + q % 2.
        const bl_u32 row0 = (first + i * stride) * BL_RES_ROWS;
        if (tma_out) {
            // The tile through this warpgroup's staging (four swizzled boxes of 32 columns),
            // stored by TMA (rows past `rows` are not written): box j / 4, row r, 16-byte chunk
            // (2 (j % 4) + pair / 2) ^ (r % 8), bytes 8 (pair % 2) .. + 8. The staging is
            // rewritten only after the previous block's stores have read it.
            if (producer) {
                bl_bulk_wait_read();
            }
            bl_wg_barrier(wgroup);
#pragma unroll
            for (int j = 0; j < 16; ++j) {
#pragma unroll
                for (int up = 0; up < 2; ++up) {
                    const bl_u32 r = (bl_u32)(my_row + 8 * up);
                    const bl_u32 chunk = (bl_u32)(2 * (j % 4) + pair / 2) ^ (r % 8u);
                    const bl_u32 at =
                        staging + (bl_u32)(j / 4) * BL_RES_OUT_BOX_BYTES + r * 128u + chunk * 16u + (bl_u32)(pair % 2) * 8u;
                    asm volatile("st.shared.v2.f32 [%0], {%1, %2};"
                                 :
                                 : "r"(at), "f"(acc[4 * j + 2 * up]), "f"(acc[4 * j + 2 * up + 1])
                                 : "memory");
                }
            }
            bl_fence_proxy_async_shared();
            bl_wg_barrier(wgroup);
            if (producer) {
                const int col0 = (int)(col_tile * BL_WG_COLS);
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    bl_tma_store_3d(out_map, col0 + 32 * q, (int)row0, (int)direction,
                                    staging + (bl_u32)q * BL_RES_OUT_BOX_BYTES);
                }
                bl_bulk_commit();
            }
            continue;
        }
        // Each thread's 8-byte pairs straight to global memory, rows past `rows` skipped.
        {
            float* const cols = p.out + direction * p.out_direction_stride + col_tile * BL_WG_COLS + 2 * pair;
#pragma unroll
            for (int up = 0; up < 2; ++up) {
                const bl_u32 r = row0 + (bl_u32)(my_row + 8 * up);
                if (r < p.rows) {
                    float* const at = cols + (bl_u64)r * BILSTM_GATE_ROWS;
#pragma unroll
                    for (int j = 0; j < 16; ++j) {
                        asm volatile("st.global.v2.f32 [%0], {%1, %2};"
                                     :
                                     : "l"(at + 8 * j), "f"(acc[4 * j + 2 * up]), "f"(acc[4 * j + 2 * up + 1])
                                     : "memory");
                    }
                }
            }
        }
    }
    if (tma_out && producer) {
        bl_bulk_wait();  // the staging stays valid until the last stores have completed
    }
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

extern "C" __global__ void __launch_bounds__(BILSTM_PROJ_RES_THREADS, 1)
    bilstm_projection_tf32_resident(const bl_projection_params p, const __grid_constant__ bl_tensor_map map,
                                    const __grid_constant__ bl_tensor_map out_map, const bl_u32 flags) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) float bl_res_shared[];
    bl_projection_resident(p, &map, &out_map, flags, bl_res_shared);
#else
    (void)p;
    (void)map;
    (void)out_map;
    (void)flags;
    asm volatile("trap;");
#endif
}
