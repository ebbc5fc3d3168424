// clear.cu: zeroes the hidden-state exchange and the error words before a forward pass.
//
// Launch contract
// - Entry: bilstm_clear(const bl_clear_params p). Not cooperative.
// - Grid: (g, 1, 1) with g >= 1 blocks (the host uses ceil(word_count / threads), capped);
//   block: (BILSTM_BLOCK_THREADS, 1, 1); dynamic shared bytes: 0.
// - Parameters: bl_clear_params (32 bytes), mirrored by bilstm_kernels::params::ClearParams.
// - Preconditions: `words` points at `word_count` writable, 8-byte aligned u64 words (the
//   aligned exchange base; word_count = ExchangeLayout::words()); `error` at `error_count`
//   writable ints, error_count <= BILSTM_BLOCK_THREADS. No other kernel touches either
//   buffer while this runs (stream order).
// - Postconditions: words[0 .. word_count) == 0 and error[0 .. error_count) == 0, visible to
//   every kernel launched after it in stream order.
// - Numerics: none.
// - Defines read: BILSTM_HIDDEN (guard), BILSTM_BLOCK_THREADS.

#ifndef BILSTM_HIDDEN
#error "bilstm kernels are compiled with the -D options of bilstm_core::geometry::defines()"
#endif

#include "common.cuh"

struct bl_clear_params {
    bl_u64* words;
    bl_u64 word_count;
    int* error;
    bl_u32 error_count;
    bl_u32 reserved;
};
static_assert(sizeof(bl_clear_params) == 32, "mirrors bilstm_kernels::params::ClearParams");

extern "C" __global__ void __launch_bounds__(BILSTM_BLOCK_THREADS)
    bilstm_clear(const bl_clear_params p) {
    const bl_u64 stride = (bl_u64)gridDim.x * blockDim.x;
    for (bl_u64 i = (bl_u64)blockIdx.x * blockDim.x + threadIdx.x; i < p.word_count; i += stride) {
        p.words[i] = 0ull;
    }
    if (blockIdx.x == 0 && threadIdx.x < p.error_count) {
        p.error[threadIdx.x] = BL_ERROR_NONE;
    }
}
