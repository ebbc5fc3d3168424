// mma.cuh: what the tensor-core projections (projection_tf32.cu, projection_tf32x3.cu) share:
// shared-window addresses, cp.async copies (and the activation-tile copy built on them), TF32
// splitting (the rounding, bl_tf32_rne, is numerics.cuh's), and one m16n8k8 TF32 mma.sync. Everything here needs compute
// capability 8.0 or later and is compiled only there (#if __CUDA_ARCH__ >= 800); the kernels
// trap below that.

#ifndef BILSTM_HIDDEN
#error "bilstm kernels are compiled with the -D options of bilstm_core::geometry::defines()"
#endif

#include "common.cuh"
#include "numerics.cuh"

// The largest finite TF32 value, (2 - 2^-10) * 2^127 (bits 0x7f7fe000).
#define BL_TF32_MAX_FINITE 0x1.ffcp+127f

// Floats per 16-byte cp.async chunk (the tiles' layouts use it on every architecture).
constexpr int BL_CP_VEC = 4;

#if __CUDA_ARCH__ >= 800

// The 32-bit shared-window address of a generic pointer into shared memory.
__device__ __forceinline__ bl_u32 bl_shared_address(const void* p) {
    bl_u32 address;
    asm("{\n\t.reg .u64 a;\n\tcvta.to.shared.u64 a, %1;\n\tcvt.u32.u64 %0, a;\n\t}" : "=r"(address) : "l"(p));
    return address;
}

// Copies `bytes` (0 or 16) from global `src` (16-byte aligned) to shared `dst` and zero-fills
// the rest of the 16 bytes; asynchronous until the group is waited for.
__device__ __forceinline__ void bl_cp_async_16(bl_u32 dst, const float* src, bl_u32 bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" : : "r"(dst), "l"(src), "r"(bytes) : "memory");
}

// As bl_cp_async_16 for one float (`bytes` 0 or 4; src 4-byte aligned).
__device__ __forceinline__ void bl_cp_async_4(bl_u32 dst, const float* src, bl_u32 bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" : : "r"(dst), "l"(src), "r"(bytes) : "memory");
}

__device__ __forceinline__ void bl_cp_async_commit() {
    asm volatile("cp.async.commit_group;" : : : "memory");
}

// Waits until at most `PENDING` of this thread's committed groups are still in flight; the
// completed copies are then visible to this thread.
template <int PENDING>
__device__ __forceinline__ void bl_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" : : "n"(PENDING) : "memory");
}

// Starts the copy of an activation tile into shared memory at `a_base`: ROWS rows of KT values
// from row m0 and column k0 of x ([rows, in_width], row-major), rows LDA floats apart, in 16-byte
// chunks spread over the block (x_chunks: every row starts 16-byte aligned and in_width is a
// multiple of 4, so a chunk lies wholly inside or outside a row) or else 4-byte copies; values
// past the last row or column are zero-filled. THREADS threads share the copy (the block, or
// one warp copying the rows it reads), `tid` numbering them. Every tensor-core projection uses it
// (projection_tf32.cu, projection_tf32x3.cu).
template <int ROWS, int KT, int LDA, int THREADS = BILSTM_BLOCK_THREADS>
__device__ __forceinline__ void bl_copy_activations(bl_u32 a_base, const float* __restrict__ x, bl_u64 m0,
                                                       bl_u64 rows, bl_u32 in_width, bl_u32 k0, bool x_chunks,
                                                       int tid) {
    constexpr int ROW_CHUNKS = KT / BL_CP_VEC;
    static_assert(ROWS * ROW_CHUNKS % THREADS == 0, "A chunks evenly");
#pragma unroll
    for (int i = 0; i < ROWS * ROW_CHUNKS / THREADS; ++i) {
        const int e = tid + i * THREADS;
        const int r = e / ROW_CHUNKS;
        const int c = e % ROW_CHUNKS;
        const bl_u64 row = m0 + r;
        const bl_u32 k = k0 + c * BL_CP_VEC;
        const bl_u32 dst = a_base + (bl_u32)((r * LDA + c * BL_CP_VEC) * 4);
        if (x_chunks) {
            const bool live = row < rows && k < in_width;
            bl_cp_async_16(dst, live ? x + row * in_width + k : x, live ? 16u : 0u);
        } else {
#pragma unroll
            for (int j = 0; j < BL_CP_VEC; ++j) {
                const bool live = row < rows && k + j < in_width;
                bl_cp_async_4(dst + j * 4, live ? x + row * in_width + k + j : x, live ? 4u : 0u);
            }
        }
    }
}

// d += a * b on the tensor cores (one m16n8k8 TF32 step, FP32 accumulate).
__device__ __forceinline__ void bl_mma_tf32(float (&d)[4], const bl_u32 (&a)[4], const bl_u32 (&b)[2]) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Splits v into a TF32 high part and a TF32 remainder, v ~= hi + lo (3xTF32): hi = tf32(v),
// lo = tf32(v - hi), both to nearest with ties to even (bl_tf32_rne). hi is masked to its 19
// stored bits so that v - hi is exact in FP32; |v - (hi + lo)| <= 2^-22 |v| for
// |v| >= 2^-115 (where lo is normal). Where
// hi is not finite (v NaN or infinite, or finite within 2^-11 of FLT_MAX so that it rounds to
// infinity) lo is +0, so hi + lo == hi. Mirrors bilstm_core::layout::split_tf32 bit for bit.
__device__ __forceinline__ void bl_tf32_split(float v, bl_u32& hi, bl_u32& lo) {
    const float h = __uint_as_float(__float_as_uint(bl_tf32_rne(v)) & 0xffffe000u);
    const float rest = fabsf(h) <= BL_TF32_MAX_FINITE ? v - h : 0.0f;
    hi = __float_as_uint(h);
    lo = __float_as_uint(bl_tf32_rne(rest)) & 0xffffe000u;
}

// `v` (TF32 bits) where it is finite, else +0 (for 3xTF32's hi(x) * lo(W) product).
__device__ __forceinline__ bl_u32 bl_tf32_finite_or_zero(bl_u32 v) {
    return (v & 0x7f800000u) == 0x7f800000u ? 0u : v;
}

#endif  // __CUDA_ARCH__ >= 800
