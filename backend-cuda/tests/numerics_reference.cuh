// numerics_reference.cuh: TEST ONLY. The gate math of kernels/cuda/numerics.cuh as it was
// before issue 10 step 1 (rintf + float-to-int in exp, rcp.approx.f32 everywhere, tanh by a
// branch), verbatim except that the names bl_* became blref_*. tests/gpu_numerics.rs compiles
// it next to today's numerics.cuh and checks that both give the same bits for every one of
// the 2^32 float inputs. Constants (BL_*) and bl_ex2_approx come from numerics.cuh, unchanged.
// One deliberate change since (session 11): today's sigmoid gives +0 where the old one gave a
// subnormal (x below about -87.34; the ftz reciprocal estimate), so the cell below and the
// sweep's sigmoid slot compare against blref_sigmoid_flushed (the old result with exactly
// those values flushed to +0); blref_sigmoid itself stays verbatim for the sweep's control.

// e^x: clamp x to [-87, 88] (NaN passes through), n = rint(x * log2 e), r = x - n ln 2 with
// ln 2 = hi + lo (two FMAs), e^r = 2^(r * log2 e) by ex2.approx, then the exact scaling by
// 2^n, built from exponent bits: (n + 127) << 23.
__device__ __forceinline__ float blref_expf(float x) {
    x = (x < BL_EXP_MIN) ? BL_EXP_MIN : x;
    x = (x > BL_EXP_MAX) ? BL_EXP_MAX : x;
    const float n = rintf(x * BL_LOG2E);
    float r = __fmaf_rn(-n, BL_LN2_HI, x);
    r = __fmaf_rn(-n, BL_LN2_LO, r);
    const float er = bl_ex2_approx(r * BL_LOG2E);
    // For NaN x, n is NaN and the conversion gives some integer: er is NaN, so is the result.
    const int ni = (int)n;
    const float scale = __uint_as_float((bl_u32)(ni + 127) << 23);
    return er * scale;
}

// 1 / x: the hardware estimate rcp.approx.f32, then one Newton step
// y' = y + y (1 - x y) as two FMAs: e = fma(-x, y, 1), y' = fma(y, e, y).
__device__ __forceinline__ float blref_rcp(float x) {
    float y;
    asm("rcp.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    const float e = __fmaf_rn(-x, y, 1.0f);
    return __fmaf_rn(y, e, y);
}

// The logistic sigmoid: blref_rcp(1 + blref_expf(-x)).
__device__ __forceinline__ float blref_sigmoid(float x) {
    return blref_rcp(1.0f + blref_expf(-x));
}

// The old sigmoid with its subnormal results (below 2^-126, never negative) flushed to +0;
// NaN passes through (the comparison is false).
__device__ __forceinline__ float blref_sigmoid_flushed(float x) {
    const float s = blref_sigmoid(x);
    return s < 1.17549435082228750797e-38f ? 0.0f : s;
}

// tanh: for |x| < 0.625 the Cephes odd polynomial, Horner with FMAs:
//   s = x * x; p = fma(fma(fma(fma(P0, s, P1), s, P2), s, P3), s, P4); tanh = fma(p * s, x, x)
// else sign(x) * (1 - 2 * blref_rcp(blref_expf(2|x|) + 1)), the last step as fma(-2, r, 1).
__device__ __forceinline__ float blref_tanhf(float x) {
    const float a = fabsf(x);
    if (a < BL_TANH_POLY_LIMIT) {
        const float s = x * x;
        float p = __fmaf_rn(BL_TANH_P0, s, BL_TANH_P1);
        p = __fmaf_rn(p, s, BL_TANH_P2);
        p = __fmaf_rn(p, s, BL_TANH_P3);
        p = __fmaf_rn(p, s, BL_TANH_P4);
        return __fmaf_rn(p * s, x, x);
    }
    const float r = blref_rcp(blref_expf(2.0f * a) + 1.0f);
    return copysignf(__fmaf_rn(-2.0f, r, 1.0f), x);
}

// One LSTM cell update from the four pre-activations (packed gate order i, f, g, o):
// i, f, o = sigmoid; g = tanh; c = fma(f, c, i * g); returns h = o * tanh(c).
__device__ __forceinline__ float blref_lstm_cell(float pre_i, float pre_f, float pre_g, float pre_o,
                                              float* c) {
    const float i = blref_sigmoid_flushed(pre_i);
    const float f = blref_sigmoid_flushed(pre_f);
    const float g = blref_tanhf(pre_g);
    const float o = blref_sigmoid_flushed(pre_o);
    *c = __fmaf_rn(f, *c, i * g);
    return o * blref_tanhf(*c);
}
