// mbarrier.cuh: the shared-memory mbarrier operations and the bulk global -> shared copy that
// the Hopper kernels share (recurrence_cluster.cu's step barriers, projection_tf32x3.cu's
// warpgroup pipeline). Compute capability 9.0 and later only (#if __CUDA_ARCH__ >= 900):
// try_wait, expect_tx, the cluster-scoped fence and cp.async.bulk are sm_90 instructions.
// Addresses are 32-bit shared::cta window addresses (bl_shared_address / bl_cl_smem), which
// are also valid shared::cluster addresses of the executing CTA.

#ifndef BILSTM_HIDDEN
#error "bilstm kernels are compiled with the -D options of bilstm_core::geometry::defines()"
#endif

#include "common.cuh"

#if __CUDA_ARCH__ >= 900

// Initialises the mbarrier at `bar` for `count` arrivals a phase (phase 0 pending).
__device__ __forceinline__ void bl_mbar_init(bl_u32 bar, bl_u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" : : "r"(bar), "r"(count) : "memory");
}

// Makes this thread's mbarrier initialisations visible to the cluster (to every thread of the
// CTA, and to the async proxy) before the barrier that follows them.
__device__ __forceinline__ void bl_mbar_fence_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" : : : "memory");
}

// This thread's arrival on `bar`, announcing `bytes` of transactions for the current phase.
__device__ __forceinline__ void bl_mbar_arrive_expect(bl_u32 bar, bl_u32 bytes) {
    asm volatile(
        "{\n\t.reg .b64 state;\n\t"
        "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 state, [%0], %1;\n\t}"
        :
        : "r"(bar), "r"(bytes)
        : "memory");
}

// This thread's arrival on `bar` (release: its earlier memory operations are ordered before it).
__device__ __forceinline__ void bl_mbar_arrive(bl_u32 bar) {
    asm volatile(
        "{\n\t.reg .b64 state;\n\t"
        "mbarrier.arrive.release.cta.shared::cta.b64 state, [%0];\n\t}"
        :
        : "r"(bar)
        : "memory");
}

// Whether the phase of `bar` with parity `parity` has completed (acquire, cluster scope: what
// every arriving thread and every completed transaction wrote is visible afterwards).
__device__ __forceinline__ bool bl_mbar_try_wait(bl_u32 bar, bl_u32 parity) {
    bl_u32 done;
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    return done != 0u;
}

// Copies `bytes` (a multiple of 16) from global `src` (16-byte aligned) to shared `dst`
// (16-byte aligned) with the bulk-copy engine, completing `bytes` of transactions on the
// mbarrier `bar` of this CTA when they have landed (async proxy; whoever waits on `bar`'s phase
// sees them).
__device__ __forceinline__ void bl_bulk_copy_g2s(bl_u32 dst, const float* src, bl_u32 bytes, bl_u32 bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
        :
        : "r"(dst), "l"(src), "r"(bytes), "r"(bar)
        : "memory");
}

#endif  // __CUDA_ARCH__ >= 900
