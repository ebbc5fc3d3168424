// projection.cu: the FP32 input projection of one layer, both directions in one launch:
//   gates[d][row, 0 .. GATE_ROWS) = x[row, 0 .. in_width) . W_d      (d = blockIdx.z)
// where W_d is direction d's packed K-major input weights [padded_in, GATE_ROWS].
//
// Launch contract
// - Entries: bilstm_projection_small (BILSTM_PROJ_SMALL_TILE square output tile) and
//   bilstm_projection_large (BILSTM_PROJ_LARGE_TILE). Not cooperative.
// - Grid: (ceil(rows / TILE), BILSTM_GATE_ROWS / TILE, 2): x tiles rows, y tiles gate columns,
//   z is the direction (0 forward, 1 reverse). Block: (BILSTM_BLOCK_THREADS, 1, 1).
//   Dynamic shared bytes: 0 (static: double-buffered K tiles, under 17 KiB).
// - Parameters: bl_projection_params (48 bytes), mirrored by
//   bilstm_kernels::params::ProjectionParams.
// - Preconditions: x holds rows * in_width floats (row-major; rows may have any width
//   1 ..= MAX_FEATURES, no padding is read past a row); weights[d] holds
//   padded_in * BILSTM_GATE_ROWS floats with padded_in >= in_width; out + d *
//   out_direction_stride holds rows * BILSTM_GATE_ROWS floats for d = 0, 1; out and
//   out_direction_stride are multiples of 4 floats (16-byte stores); the output does not
//   overlap x or the weights; rows >= 1, in_width >= 1.
// - Postconditions: every out[d][row, col] for row < rows is written exactly once; nothing else.
// - Numerics: each output is ONE chain of FMAs over k = 0, 1, ..., in_width - 1 in ascending
//   order starting from 0.0f: acc = fma(x[row, k], W_d[k, col], acc). No split-K, no
//   reassociation, no padded term: both tiles give bitwise identical results (the tile only
//   changes which thread computes an output, never how). Compiled with --fmad=false.
// - Defines read: BILSTM_HIDDEN (guard), BILSTM_BLOCK_THREADS, BILSTM_GATE_ROWS,
//   BILSTM_PROJ_SMALL_TILE, BILSTM_PROJ_LARGE_TILE, BILSTM_PROJ_K_TILE.
//
// Thread mapping: the 256 threads form a 16 x 16 grid (ty, tx); each computes a (TILE / 16)^2
// block of outputs, as float4-wide groups strided by 64 so that shared-memory reads of a warp
// never hit one bank twice: rows g * 64 + ty * 4 + i and columns g * 64 + tx * 4 + j. K tiles of
// BILSTM_PROJ_K_TILE are prefetched into registers while the current tile is consumed from
// shared memory (double buffer, one barrier per K tile).

#ifndef BILSTM_HIDDEN
#error "bilstm kernels are compiled with the -D options of bilstm_core::geometry::defines()"
#endif

#include "common.cuh"

struct bl_projection_params {
    const float* x;
    const float* weights[2];
    float* out;
    bl_u64 out_direction_stride;
    bl_u32 rows;
    bl_u32 in_width;
};
static_assert(sizeof(bl_projection_params) == 48, "mirrors bilstm_kernels::params::ProjectionParams");

// Threads per tile edge and the float4 width of each thread's output groups.
constexpr int BL_PROJ_SIDE = bl_isqrt(BILSTM_BLOCK_THREADS);
constexpr int BL_PROJ_VEC = 4;
static_assert(BL_PROJ_SIDE * BL_PROJ_SIDE == BILSTM_BLOCK_THREADS, "a square thread grid");
static_assert(BILSTM_GATE_ROWS % BILSTM_PROJ_LARGE_TILE == 0, "whole column tiles");
static_assert(BILSTM_GATE_ROWS % BILSTM_PROJ_SMALL_TILE == 0, "whole column tiles");

template <int TILE>
__device__ __forceinline__ void bl_projection(const bl_projection_params& p) {
    constexpr int KT = BILSTM_PROJ_K_TILE;
    constexpr int GROUP = BL_PROJ_SIDE * BL_PROJ_VEC;  // 64: span of one output group
    constexpr int G = TILE / GROUP;                   // groups per thread and dimension
    constexpr int TM = G * BL_PROJ_VEC;                // outputs per thread and dimension
    constexpr int A_LOADS = TILE * KT / BILSTM_BLOCK_THREADS;
    constexpr int B_LOADS = TILE * KT / BILSTM_BLOCK_THREADS;
    constexpr int A_STRIDE = TILE + BL_SMEM_PAD_FLOATS;
    static_assert(TILE % GROUP == 0, "the tile is whole output groups");
    static_assert(TILE * KT % BILSTM_BLOCK_THREADS == 0, "K tiles load evenly");

    __shared__ __align__(16) float a_s[2][KT][A_STRIDE];
    __shared__ __align__(16) float b_s[2][KT][TILE];

    const int tid = threadIdx.x;
    const int tx = tid % BL_PROJ_SIDE;
    const int ty = tid / BL_PROJ_SIDE;
    const bl_u64 m0 = (bl_u64)blockIdx.x * TILE;
    const int n0 = blockIdx.y * TILE;
    const bl_u32 direction = blockIdx.z;
    const float* __restrict__ w = direction == 0 ? p.weights[0] : p.weights[1];
    float* __restrict__ out = p.out + (bl_u64)direction * p.out_direction_stride;
    const bl_u32 in_width = p.in_width;
    const bl_u64 rows = p.rows;

    float acc[TM][TM];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TM; ++j) {
            acc[i][j] = 0.0f;
        }
    }

    float ra[A_LOADS];
    float rb[B_LOADS];
    // Global -> registers for the K tile starting at k0; zero outside the matrix (those values
    // are never used by the chain: see kcount below).
    auto load_tile = [&](bl_u32 k0) {
#pragma unroll
        for (int a = 0; a < A_LOADS; ++a) {
            const int e = tid + a * BILSTM_BLOCK_THREADS;
            const bl_u64 row = m0 + e / KT;
            const bl_u32 k = k0 + e % KT;
            ra[a] = (row < rows && k < in_width) ? p.x[row * in_width + k] : 0.0f;
        }
#pragma unroll
        for (int b = 0; b < B_LOADS; ++b) {
            const int e = tid + b * BILSTM_BLOCK_THREADS;
            const bl_u32 k = k0 + e / TILE;
            rb[b] = (k < in_width) ? w[(bl_u64)k * BILSTM_GATE_ROWS + n0 + e % TILE] : 0.0f;
        }
    };
    auto store_tile = [&](int buf) {
#pragma unroll
        for (int a = 0; a < A_LOADS; ++a) {
            const int e = tid + a * BILSTM_BLOCK_THREADS;
            a_s[buf][e % KT][e / KT] = ra[a];
        }
#pragma unroll
        for (int b = 0; b < B_LOADS; ++b) {
            const int e = tid + b * BILSTM_BLOCK_THREADS;
            b_s[buf][e / TILE][e % TILE] = rb[b];
        }
    };

    const bl_u32 k_tiles = (in_width + KT - 1) / KT;
    load_tile(0);
    store_tile(0);
    __syncthreads();
    for (bl_u32 t = 0; t < k_tiles; ++t) {
        const int buf = t & 1;
        const bool more = t + 1 < k_tiles;
        if (more) {
            load_tile((t + 1) * KT);
        }
        // Terms of this tile that exist: the chain never includes k >= in_width.
        const bl_u32 kcount = min((bl_u32)KT, in_width - t * KT);
#pragma unroll
        for (int kk = 0; kk < KT; ++kk) {
            if ((bl_u32)kk < kcount) {
                float a[TM];
                float b[TM];
#pragma unroll
                for (int g = 0; g < G; ++g) {
                    const float4 av = *reinterpret_cast<const float4*>(&a_s[buf][kk][g * GROUP + ty * BL_PROJ_VEC]);
                    const float4 bv = *reinterpret_cast<const float4*>(&b_s[buf][kk][g * GROUP + tx * BL_PROJ_VEC]);
                    a[g * 4 + 0] = av.x;
                    a[g * 4 + 1] = av.y;
                    a[g * 4 + 2] = av.z;
                    a[g * 4 + 3] = av.w;
                    b[g * 4 + 0] = bv.x;
                    b[g * 4 + 1] = bv.y;
                    b[g * 4 + 2] = bv.z;
                    b[g * 4 + 3] = bv.w;
                }
#pragma unroll
                for (int i = 0; i < TM; ++i) {
#pragma unroll
                    for (int j = 0; j < TM; ++j) {
                        acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
                    }
                }
            }
        }
        if (more) {
            store_tile(buf ^ 1);
        }
        __syncthreads();
    }

#pragma unroll
    for (int gi = 0; gi < G; ++gi) {
#pragma unroll
        for (int i = 0; i < BL_PROJ_VEC; ++i) {
            const bl_u64 row = m0 + gi * GROUP + ty * BL_PROJ_VEC + i;
            if (row < rows) {
#pragma unroll
                for (int gj = 0; gj < G; ++gj) {
                    const int r = gi * BL_PROJ_VEC + i;
                    const int c = gj * BL_PROJ_VEC;
                    float4 v;
                    v.x = acc[r][c + 0];
                    v.y = acc[r][c + 1];
                    v.z = acc[r][c + 2];
                    v.w = acc[r][c + 3];
                    *reinterpret_cast<float4*>(&out[row * BILSTM_GATE_ROWS + n0 + gj * GROUP + tx * BL_PROJ_VEC]) = v;
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(BILSTM_BLOCK_THREADS)
    bilstm_projection_small(const bl_projection_params p) {
    bl_projection<BILSTM_PROJ_SMALL_TILE>(p);
}

extern "C" __global__ void __launch_bounds__(BILSTM_BLOCK_THREADS)
    bilstm_projection_large(const bl_projection_params p) {
    bl_projection<BILSTM_PROJ_LARGE_TILE>(p);
}
