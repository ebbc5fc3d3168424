// common.cuh: what every bilstm kernel shares: the geometry guard, fixed-width aliases and the
// few inline-PTX primitives NVRTC has no header for.
//
// NVRTC is given no include path, so this file (like every kernel) uses no CUDA header: no
// cuda_fp16.h, no cooperative_groups.h, no <cstdint>. Built-ins it relies on: float4,
// __fmaf_rn, rintf, fabsf, copysignf, __float_as_uint, __uint_as_float, __shfl_xor_sync,
// __syncthreads_or, __brev, atomicCAS. The Rust side (bilstm_kernels::expand_source) pastes
// this header in place of its #include line, once per translation unit.
//
// Names defined here start with `bl_` (functions, types) or `BL_` (constants): the prefix
// `BILSTM_` is reserved for the -D defines of bilstm_core::geometry::defines(), which a CPU
// test checks.

#ifndef BILSTM_HIDDEN
#error "bilstm kernels are compiled with the -D options of bilstm_core::geometry::defines()"
#endif

typedef unsigned int bl_u32;
typedef unsigned long long bl_u64;
typedef long long bl_i64;

static_assert(sizeof(bl_u32) == 4, "bl_u32 is 32 bits");
static_assert(sizeof(bl_u64) == 8, "bl_u64 is 64 bits");
static_assert(sizeof(void*) == 8, "device pointers are 64 bits (the params structs assume it)");

// Every thread of a warp takes part in each shuffle of these kernels.
#define BL_FULL_MASK 0xffffffffu

// Shared-memory rows that are read as float4 are padded by one 16-byte vector where a plain
// power-of-two row would make a warp's stores hit one bank several times.
#define BL_SMEM_PAD_FLOATS 4

// Error codes written to the first word of a kernel's `error` array (mirrored by
// bilstm_kernels::params::ERROR_* in Rust; a CPU test compares the two).
#define BL_ERROR_NONE 0
#define BL_ERROR_PARTNER_LOST 1

// A relaxed, GPU-scope 64-bit load (single-copy atomic: the flag and the value in one word
// always come from the same store).
__device__ __forceinline__ bl_u64 bl_ld_relaxed_u64(const bl_u64* address) {
    bl_u64 value;
    asm volatile("ld.relaxed.gpu.b64 %0, [%1];" : "=l"(value) : "l"(address) : "memory");
    return value;
}

// A relaxed, GPU-scope 64-bit store (see bl_ld_relaxed_u64).
__device__ __forceinline__ void bl_st_relaxed_u64(bl_u64* address, bl_u64 value) {
    asm volatile("st.relaxed.gpu.b64 [%0], %1;" : : "l"(address), "l"(value) : "memory");
}

// A relaxed, GPU-scope 32-bit load (used to peek at the error word while spinning).
__device__ __forceinline__ int bl_ld_relaxed_i32(const int* address) {
    int value;
    asm volatile("ld.relaxed.gpu.b32 %0, [%1];" : "=r"(value) : "l"(address) : "memory");
    return value;
}

// The GPU's global nanosecond timer (%globaltimer): what bounds every spin.
__device__ __forceinline__ bl_u64 bl_globaltimer_ns() {
    bl_u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Eight consecutive floats from `src` (16-byte aligned; shared memory in every caller) into
// `v`, as two float4 loads: a dot-product chain's terms of h.
__device__ __forceinline__ void bl_load8(float (&v)[8], const float* src) {
    const float4 a = reinterpret_cast<const float4*>(src)[0];
    const float4 b = reinterpret_cast<const float4*>(src)[1];
    v[0] = a.x;
    v[1] = a.y;
    v[2] = a.z;
    v[3] = a.w;
    v[4] = b.x;
    v[5] = b.y;
    v[6] = b.z;
    v[7] = b.w;
}

// One unit's final state of one window and direction into a layer's block of h_n / c_n,
// [2][batch][BILSTM_HIDDEN] (direction-major), when the caller asked for one (state_h not null).
__device__ __forceinline__ void bl_store_final_state(float* state_h, float* state_c, bl_u32 direction,
                                                     bl_u32 batch, bl_u64 window, bl_u32 unit, float h,
                                                     float c) {
    if (state_h != nullptr) {
        const bl_u64 at = ((bl_u64)direction * batch + window) * BILSTM_HIDDEN + unit;
        state_h[at] = h;
        state_c[at] = c;
    }
}

// Reverses the low `bits` bits of `x` (bits in 1..=32).
__device__ __forceinline__ bl_u32 bl_bit_reverse(bl_u32 x, int bits) {
    return __brev(x) >> (32 - bits);
}

// The integer square root of n >= 0 (the largest r with r * r <= n), at compile time: the side
// of a square thread grid.
constexpr int bl_isqrt(int n) {
    int r = 0;
    while ((r + 1) * (r + 1) <= n) {
        ++r;
    }
    return r;
}
