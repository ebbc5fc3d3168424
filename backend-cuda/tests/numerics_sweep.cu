// numerics_sweep.cu: TEST ONLY (tests/gpu_numerics.rs). Evaluates today's gate math
// (numerics.cuh: bl_*) and the previous one (numerics_reference.cuh: blref_*) for every one of
// the 2^32 float bit patterns and counts, per function, the inputs whose outputs differ in
// their bits (two NaNs count as equal, whatever their payloads). The host prepends
// common.cuh, numerics.cuh and numerics_reference.cuh.
//
// Slots of `counts` (and rows of BLT_FIRST recorded input bit patterns in `first`):
//   0 bl_expf   1 bl_sigmoid (against the old one with its subnormal results flushed to +0,
//     the one documented change: numerics_reference.cuh)   2 bl_tanhf
//   3 bl_lstm_cell's h and 4 its c, with x as pre_i, as pre_g and as the old cell state, the
//     other inputs pseudo-random in [-12, 12) from a hash of x
//   5 informational: sigmoid with the ftz estimate and an explicit rescale above 2^126 (a
//     candidate for a later change; expected 0 on sm_90 with ptxas 13.0's lowering)
//   6 control: sigmoid with the bare ftz estimate (today's bl_sigmoid, restated here) against
//     the old UNFLUSHED sigmoid, which MUST differ (x below about -87.3, where 1 / (1 + e^-x)
//     is subnormal): proves the sweep sees a difference when there is one.
// Launch: any 1-D grid (grid-stride over the 2^32 patterns); counts[BLT_SLOTS],
// first[BLT_SLOTS * BLT_FIRST] and taken[BLT_SLOTS] zeroed by the host. Recorded inputs are the
// first few found, in no particular order.

#define BLT_SLOTS 7
#define BLT_FIRST 8

__device__ __forceinline__ bool blt_same(float a, float b) {
    return (__float_as_uint(a) == __float_as_uint(b)) || (a != a && b != b);
}

// Per-thread mismatch counts (added to the global counts once, at the end) and the
// recording of the first few mismatching inputs per slot (`taken` counts the claimed places;
// a plain read first keeps the atomics few when a slot has millions of mismatches).
struct BltTally {
    bl_u64 count[BLT_SLOTS];
    bl_u32* first;
    bl_u32* taken;
};

__device__ __forceinline__ void blt_check(int slot, float a, float b, bl_u32 bits,
                                          BltTally* t) {
    if (!blt_same(a, b)) {
        t->count[slot] += 1;
        if (*(volatile bl_u32*)&t->taken[slot] < BLT_FIRST) {
            const bl_u32 at = atomicAdd(&t->taken[slot], 1u);
            if (at < BLT_FIRST) {
                t->first[slot * BLT_FIRST + (int)at] = bits;
            }
        }
    }
}

// A 32-bit integer hash (xorshift-multiply), for the cell's other inputs.
__device__ __forceinline__ bl_u32 blt_hash(bl_u32 v) {
    v ^= v >> 16;
    v *= 0x7feb352du;
    v ^= v >> 15;
    v *= 0x846ca68bu;
    v ^= v >> 16;
    return v;
}

// Uniform in [-12, 12) from the top 24 bits of h.
__device__ __forceinline__ float blt_uniform(bl_u32 h) {
    const float u = __uint2float_rn(h >> 8) * (1.0f / 16777216.0f);
    return __fmul_rn(__fsub_rn(__fmul_rn(u, 2.0f), 1.0f), 12.0f);
}

__device__ __forceinline__ float blt_newton(float z, float y) {
    const float e = __fmaf_rn(-z, y, 1.0f);
    return __fmaf_rn(y, e, y);
}

__device__ __forceinline__ float blt_rcp_estimate_ftz(float z) {
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(z));
    return y;
}

// Slot 5: the non-ftz estimate rebuilt from the ftz one for z >= 1 (scale by 1/4 above 2^126).
__device__ __forceinline__ float blt_sigmoid_rescaled(float x) {
    const float z = 1.0f + bl_expf(-x);
    const bool big = z > 8.50705917302346158658e+37f;  // 2^126
    const float s = big ? 0.25f : 1.0f;
    const float y = __fmul_rn(s, blt_rcp_estimate_ftz(__fmul_rn(z, s)));
    return blt_newton(z, y);
}

// Slot 6: the bare ftz estimate.
__device__ __forceinline__ float blt_sigmoid_bare_ftz(float x) {
    const float z = 1.0f + bl_expf(-x);
    return blt_newton(z, blt_rcp_estimate_ftz(z));
}

__device__ __forceinline__ void blt_cell(float pi, float pf, float pg, float po, float c0,
                                         bl_u32 bits, BltTally* t) {
    float c_new = c0;
    float c_old = c0;
    const float h_new = bl_lstm_cell(pi, pf, pg, po, &c_new);
    const float h_old = blref_lstm_cell(pi, pf, pg, po, &c_old);
    blt_check(3, h_new, h_old, bits, t);
    blt_check(4, c_new, c_old, bits, t);
}

extern "C" __global__ void bl_numerics_sweep(bl_u64* counts, bl_u32* first, bl_u32* taken) {
    BltTally t;
#pragma unroll
    for (int k = 0; k < BLT_SLOTS; ++k) {
        t.count[k] = 0;
    }
    t.first = first;
    t.taken = taken;
    const bl_u64 stride = (bl_u64)gridDim.x * blockDim.x;
    for (bl_u64 i = (bl_u64)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32); i += stride) {
        const bl_u32 bits = (bl_u32)i;
        const float x = __uint_as_float(bits);
        blt_check(0, bl_expf(x), blref_expf(x), bits, &t);
        const float sig_old = blref_sigmoid(x);
        blt_check(1, bl_sigmoid(x), blref_sigmoid_flushed(x), bits, &t);
        blt_check(2, bl_tanhf(x), blref_tanhf(x), bits, &t);
        const bl_u32 h = blt_hash(bits);
        const float u0 = blt_uniform(h);
        const float u1 = blt_uniform(blt_hash(h ^ 0x9e3779b9u));
        const float u2 = blt_uniform(blt_hash(h ^ 0x85ebca6bu));
        const float u3 = blt_uniform(blt_hash(h ^ 0xc2b2ae35u));
        blt_cell(x, u0, u1, u2, u3, bits, &t);
        blt_cell(u0, u1, x, u2, u3, bits, &t);
        blt_cell(u0, u1, u2, u3, x, bits, &t);
        blt_check(5, blt_sigmoid_rescaled(x), sig_old, bits, &t);
        blt_check(6, blt_sigmoid_bare_ftz(x), sig_old, bits, &t);
    }
#pragma unroll
    for (int k = 0; k < BLT_SLOTS; ++k) {
        if (t.count[k] != 0) {
            atomicAdd(&counts[k], t.count[k]);
        }
    }
}
