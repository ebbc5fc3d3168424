// tf32_gates_sweep.cu: TEST ONLY (tests/gpu_numerics.rs). TF32 mode's gate activations
// (numerics.cuh section 7: bl_sigmoid_fast, bl_tanh_fast) against the true functions in double
// precision, for every one of the 2^32 float bit patterns; FP32 mode's (bl_sigmoid, bl_tanhf)
// the same way, for comparison. The host prepends common.cuh and numerics.cuh.
//
// Slots of `max_error` (the largest absolute error over the non-NaN inputs, as the bits of a
// non-negative float, so that unsigned order is float order) and of `bad` (inputs whose result
// breaks a rule: a NaN input must give NaN, any other input a value inside [0, 1] for the
// sigmoid and [-1, 1] for tanh):
//   0 bl_sigmoid_fast   1 bl_tanh_fast   2 bl_sigmoid   3 bl_tanhf
// `first_bad[slot]` keeps one offending input's bits (any one). Launch: any 1-D grid
// (grid-stride over the 2^32 patterns); the buffers zeroed by the host.

#define BLG_SLOTS 4

__device__ __forceinline__ void blg_check(int slot, float got, double truth, bool nan_in, float lo,
                                          float hi, float* worst, bl_u64* bad, bl_u32* first_bad,
                                          bl_u32 bits) {
    const bool got_nan = got != got;
    if (nan_in != got_nan || (!nan_in && (got < lo || got > hi))) {
        bad[slot] += 1;
        first_bad[slot] = bits;
        return;
    }
    if (!nan_in) {
        const float e = (float)fabs((double)got - truth);
        worst[slot] = fmaxf(worst[slot], e);
    }
}

extern "C" __global__ void bl_tf32_gates_sweep(bl_u32* max_error, bl_u64* bad_counts, bl_u32* first_bad) {
    float worst[BLG_SLOTS];
    bl_u64 bad[BLG_SLOTS];
    bl_u32 first[BLG_SLOTS];
#pragma unroll
    for (int k = 0; k < BLG_SLOTS; ++k) {
        worst[k] = 0.0f;
        bad[k] = 0;
        first[k] = 0;
    }
    const bl_u64 stride = (bl_u64)gridDim.x * blockDim.x;
    for (bl_u64 i = (bl_u64)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32); i += stride) {
        const bl_u32 bits = (bl_u32)i;
        const float x = __uint_as_float(bits);
        const bool nan_in = x != x;
        const double xd = (double)x;
        // 1 / (1 + e^-x) and tanh in double: exact to far below a float's ulp.
        const double sig = nan_in ? 0.0 : 1.0 / (1.0 + exp(-xd));
        const double th = nan_in ? 0.0 : tanh(xd);
        blg_check(0, bl_sigmoid_fast(x), sig, nan_in, 0.0f, 1.0f, worst, bad, first, bits);
        blg_check(1, bl_tanh_fast(x), th, nan_in, -1.0f, 1.0f, worst, bad, first, bits);
        blg_check(2, bl_sigmoid(x), sig, nan_in, 0.0f, 1.0f, worst, bad, first, bits);
        blg_check(3, bl_tanhf(x), th, nan_in, -1.0f, 1.0f, worst, bad, first, bits);
    }
#pragma unroll
    for (int k = 0; k < BLG_SLOTS; ++k) {
        atomicMax(&max_error[k], __float_as_uint(worst[k]));
        if (bad[k] != 0) {
            atomicAdd(&bad_counts[k], bad[k]);
            first_bad[k] = first[k];
        }
    }
}
