// numerics.cuh: the arithmetic every recurrence kernel shares (DESIGN.md section 4).
//
// Every recurrence kernel (wide now; tiled and resident later) computes a gate exactly as
// written here, so their outputs are bitwise identical. The file is compiled with
// --fmad=false: the compiler contracts no multiply-add on its own, and every FMA below is an
// explicit __fmaf_rn (fma.rn.f32). Hex bit patterns of constants are given in comments.
//
// 1. Recurrent dot product of one gate row with h (HIDDEN = 128 terms): DOT_CHAINS = 16
//    partial chains; chain j covers k = 8j .. 8j+7 in ascending k, starting from 0.0f:
//        c_j = fma(R[8j+7], h[8j+7], ... fma(R[8j+1], h[8j+1], fma(R[8j], h[8j], 0.0f)))
//    and the 16 chains are summed by the fixed pairwise tree
//        dot = (((c0+c1)+(c2+c3)) + ((c4+c5)+(c6+c7))) + (((c8+c9)+(c10+c11)) + ((c12+c13)+(c14+c15)))
//    (bl_dot_tree16). A kernel may evaluate the tree with shuffles across lanes: IEEE
//    addition is commutative, so a + b and b + a give the same bits; only the tree's shape
//    matters, and each kernel documents how its shuffles realise this one.
//    At step 0, h = 0 and the dot is +0.0f (what the chains give for finite R); kernels skip
//    the arithmetic and use +0.0f.
// 2. Gate pre-activation: (proj + dot) + bias (bl_preactivation): the input projection
//    (from the projection kernel) plus the recurrent dot first, the packed combined bias
//    (Wb + Rb) last, as ONNX Runtime's CPU kernel does.
// 3. exp: bl_expf, the accurate-expf construction (clamp, split ln 2, ex2.approx of the
//    remainder, exact scaling by 2^n). n = rint(x log2 e) is found by adding and subtracting
//    1.5 * 2^23 (no FRND, no float-to-int conversion; see bl_expf).
// 4. reciprocal: rcp.approx.ftz plus one Newton step (bl_rcp_ftz; see there where its bits
//    differ from the non-ftz estimate's: only sigmoid results that would be subnormal).
// 5. sigmoid(x) = bl_rcp_ftz(1 + bl_expf(-x)); tanh: Cephes polynomial below |x| = 0.625, else
//    sign(x) * (1 - 2 * bl_rcp_ftz(bl_expf(2|x|) + 1)); both paths computed, one selected.
// 6. Cell: c' = fma(f, c, i * g) (i * g rounded first, then one fused multiply-add), and
//    h = o * tanh(c').
//
// 7. TF32 mode's gates (FAST = true below; the recurrences' `tf32_numerics` parameter, set where
//    the pass's projection is a TF32 tile): sigmoid(x) = rcp.approx.ftz(1 + ex2.approx.ftz(x *
//    -log2 e)) and tanh(x) = fma(-2, rcp.approx.ftz(1 + ex2.approx.ftz(x * 2 log2 e)), 1), bare
//    hardware estimates with no clamp, no Cody-Waite reduction, no Newton step (bl_sigmoid_fast,
//    bl_tanh_fast); the cell as in 6. Their error (at most a few 1e-7 absolute, swept over every
//    float by gpu_numerics) is far below what TF32 projections cost (about 1e-3 relative), and
//    they take 5 and 6 instructions against about 17 and 30: the step loops are issue-bound
//    (bench/NOTES.md, session 19). Every recurrence kernel computes them exactly so, so TF32
//    mode's bits do not depend on the kernel or the batch either; FP32 mode never uses them.
//
// 8. TF32 mode's recurrent dot product where no fixed-point kernel runs (FAST = true; devices
//    without clusters, non-cluster recurrences, and the backend's fixed-point switch set to
//    off; on devices with clusters TF32 mode's plans run section 9 instead):
//    BILSTM_TF32_DOT_CHAINS = 8 partial chains
//    of BILSTM_TF32_DOT_CHAIN_TERMS = 16 terms; chain m covers k = 16m .. 16m+15 in ascending k,
//    starting from 0.0f (bl_dot_chain<16>), and the 8 chains are summed by the fixed pairwise
//    tree
//        dot = ((c0+c1)+(c2+c3)) + ((c4+c5)+(c6+c7))
//    (bl_dot_tree8): section 1's tree without its first level, whose 64 additions a lane and
//    step were 4.5 % of the 8-window quads' issued instructions (H200 session 19, ncu: 1,436 a
//    warp and step; a timing build with one 16-term chain a lane: TF32 batch 1024 21.74 ms
//    against 22.69). Its rounding error is that of FP32 summation over 16 terms, far below the
//    TF32 projections' (about 1e-3 relative). Every recurrence kernel computes TF32 mode's dot
//    exactly so (each documents how its lanes realise the tree), so TF32 bits stay kernel- and
//    batch-independent; FP32 mode keeps section 1.
//
// Issue 10 step 1 rewrote bl_expf, added bl_rcp_ftz and made bl_tanhf branch-free with the
// same bits for every one of the 2^32 float inputs; backend-cuda/tests/numerics_reference.cuh
// keeps the previous implementations verbatim (renamed) and backend-cuda/tests/gpu_numerics.rs
// compares old and new over all 2^32 inputs on the GPU. Session 11 gave sigmoid the ftz
// reciprocal estimate too: its results that were subnormal (x below about -87.34) are now +0,
// the one documented difference, which the sweep checks against the old results with exactly
// those flushed (every other bit pattern, and tanh, exp and the cell otherwise, unchanged).
//
// Special values: a NaN pre-activation gives a NaN gate (the clamps below keep NaN); +-inf
// saturate (sigmoid to 0 or 1, tanh to -1 or +1), so h stays finite unless a NaN entered.

// log2(e) rounded to f32: 0x3fb8aa3b.
#define BL_LOG2E 1.44269502162933349609375f
// ln(2) split for the Cody-Waite reduction: hi = ln 2 rounded to f32 (0x3f317218), lo = the
// rest rounded to f32 (0xb102e308); hi + lo equals ln 2 to about 1e-16 (2^-53).
#define BL_LN2_HI 0.693147182464599609375f
#define BL_LN2_LO -1.9046542121259336e-09f
// The exp input clamp: e^-87 and e^88 are normal f32 values, and n = rint(x log2 e) stays in
// -126 ..= 127, so 2^n is a normal f32 built from exponent bits alone.
#define BL_EXP_MIN -87.0f
#define BL_EXP_MAX 88.0f
// Below this |x| tanh uses the Cephes polynomial (Cephes tanhf.c: "|x| < 0.625").
#define BL_TANH_POLY_LIMIT 0.625f
// Cephes tanhf.c coefficients (S. L. Moshier, Cephes Math Library 2.2, tanhf.c:
// tanh(x) = x + x^3 P(x^2) for |x| < 0.625, relative error about 1.3e-7 in IEEE single).
#define BL_TANH_P0 -5.70498872745e-3f
#define BL_TANH_P1 2.06390887954e-2f
#define BL_TANH_P2 -5.37397155531e-2f
#define BL_TANH_P3 1.33314422036e-1f
#define BL_TANH_P4 -3.33332819422e-1f

// 2^x by the hardware's ex2.approx.ftz.f32 (|x| <= 0.5 here: no subnormal in or out, so the
// flush-to-zero variant gives the same result as the plain one).
__device__ __forceinline__ float bl_ex2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// 1.5 * 2^23 (0x4b400000): a float in [2^23, 2^24) has ulp 1, so adding this constant to a
// value p with |p| < 2^22 rounds p to an integer in the last mantissa bits.
#define BL_ROUND_MAGIC 12582912.0f
// BL_ROUND_MAGIC's bits.
#define BL_ROUND_MAGIC_BITS 0x4b400000

// e^x: clamp x to [-87, 88] (NaN passes through), n = rint(x * log2 e), r = x - n ln 2 with
// ln 2 = hi + lo (two FMAs), e^r = 2^(r * log2 e) by ex2.approx, then the exact scaling by
// 2^n, built from exponent bits: (n + 127) << 23.
//
// Rounding without FRND and F2I: p = x * log2 e (one rounded multiply, __fmul_rn, as before),
// t = p + 1.5 * 2^23 (one rounded add, __fadd_rn: never contracted into an FMA). After the
// clamp |p| <= 88 * log2 e < 127, so the exact sum lies in [2^23, 2^24), where floats are the
// integers: t = 1.5 * 2^23 + rint(p), rounded to nearest with ties to even. Ties agree with
// rintf's because 1.5 * 2^23 is even: the parity of 1.5 * 2^23 + k is that of k. Hence
// n = t - 1.5 * 2^23 is exact and equals rintf(p), except that rintf gives -0.0 for p in
// [-0.5, -0.0] where this gives +0.0. That sign never shows: with n = +-0, fma(-n, HI, x)
// and fma(-n, LO, r) return x and r unchanged for nonzero x, and for x = +-0 both r's are
// zeros, whose ex2 is 1.0 either way; the scale is 2^0 in both. t's bits are
// 0x4b400000 + n (0x400000 + n stays inside the mantissa), so (bits(t) + 127) << 23 keeps the
// low 9 bits of 0x400000 + n + 127, which are n + 127 in 1 ..= 254 (n in -126 ..= 127 after the
// clamp): the same exponent field as ((int)n + 127) << 23, with integer operations only.
// NaN x: p, t, n, r and er are NaN, so the result is NaN (its payload may differ from before;
// the scale's bits are whatever t's were).
__device__ __forceinline__ float bl_expf(float x) {
    x = (x < BL_EXP_MIN) ? BL_EXP_MIN : x;
    x = (x > BL_EXP_MAX) ? BL_EXP_MAX : x;
    const float t = __fadd_rn(__fmul_rn(x, BL_LOG2E), BL_ROUND_MAGIC);
    const float n = __fsub_rn(t, BL_ROUND_MAGIC);
    float r = __fmaf_rn(-n, BL_LN2_HI, x);
    r = __fmaf_rn(-n, BL_LN2_LO, r);
    const float er = bl_ex2_approx(r * BL_LOG2E);
    const float scale = __uint_as_float((__float_as_uint(t) + 127u) << 23);
    return er * scale;
}

// 1 / x: the hardware estimate rcp.approx.ftz.f32 (a bare MUFU.RCP), then one Newton step
// y' = y + y (1 - x y) as two FMAs: e = fma(-x, y, 1), y' = fma(y, e, y). For arguments z in
// [1, 2^126] the estimate is the non-ftz one's (.ftz changes only subnormal inputs and results:
// PTX ISA, rcp.approx; ptxas 13.0 lowers the non-ftz form for such z to the same MUFU.RCP scaled
// by exactly 1.0) and the Newton step (non-ftz FMAs) is shared, so the bits are the same. For
// z > 2^126 the non-ftz estimate would be a subnormal y ~ 1/z and this one is 0 (then e = 1 and
// the result is +0):
// - bl_sigmoid (z = 1 + e^-x, up to 1 + e^88 = 1.65e38 > 2^126): sigmoid(x) is +0 where the
//   non-ftz form gave a subnormal (x below about -87.34), the only inputs where its bits differ
//   from the non-ftz reciprocal's (backend-cuda/tests/gpu_numerics.rs sweeps all 2^32 floats;
//   the CPU backend's saturated sigmoid is 1.4e-11 since session 12, its own clamp). Session 11
//   (H200, call 3, FP32 whole forward, 3 rounds against the non-ftz form in the same call):
//   batch 1024 31.39 / 31.34 / 31.42 ms against 31.91 / 31.83 / 31.87, batch 256 7.91 against
//   8.05 (the non-ftz estimate's two compares, two selects and two multiplies in each of 6
//   sigmoids a step).
// - bl_tanhf uses r in fma(-2, r, 1), and 2r < 2^-125 is far below half an ulp of 1 (2^-24), so
//   1 - 2r rounds to 1.0 whether r is the subnormal or 0: no bit differs.
// - z is never subnormal here (z >= 1 in bl_sigmoid, z = e^(2|x|) + 1 >= 2 in bl_tanhf).
__device__ __forceinline__ float bl_rcp_ftz(float x) {
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    const float e = __fmaf_rn(-x, y, 1.0f);
    return __fmaf_rn(y, e, y);
}

// The logistic sigmoid: bl_rcp_ftz(1 + bl_expf(-x)) (+0 below x = -87.34, never subnormal).
__device__ __forceinline__ float bl_sigmoid(float x) {
    return bl_rcp_ftz(1.0f + bl_expf(-x));
}

// tanh: for |x| < 0.625 the Cephes odd polynomial, Horner with FMAs:
//   s = x * x; p = fma(fma(fma(fma(P0, s, P1), s, P2), s, P3), s, P4); tanh = fma(p * s, x, x)
// else sign(x) * (1 - 2 * bl_rcp_ftz(bl_expf(2|x|) + 1)), the last step as fma(-2, r, 1).
// Both are computed and one is selected (no branch: a warp's lanes never diverge here). The
// unused path may produce inf or NaN; it is discarded. NaN x: a < 0.625 is false, so the
// exp path is chosen and gives NaN, as before.
__device__ __forceinline__ float bl_tanhf(float x) {
    const float a = fabsf(x);
    const float s = x * x;
    float p = __fmaf_rn(BL_TANH_P0, s, BL_TANH_P1);
    p = __fmaf_rn(p, s, BL_TANH_P2);
    p = __fmaf_rn(p, s, BL_TANH_P3);
    p = __fmaf_rn(p, s, BL_TANH_P4);
    const float poly = __fmaf_rn(p * s, x, x);
    const float r = bl_rcp_ftz(bl_expf(2.0f * a) + 1.0f);
    const float big = copysignf(__fmaf_rn(-2.0f, r, 1.0f), x);
    return (a < BL_TANH_POLY_LIMIT) ? poly : big;
}

// One N-term chain of the recurrent dot product (N = 8 in FP32 mode, section 1; 16 in TF32
// mode, section 8): ascending k, starting from `start` (0.0f for a chain's first terms; a kernel whose lane holds a chain's terms in two parts continues the
// chain from the first part's value: the same FMAs in the same order).
template <int N>
__device__ __forceinline__ float bl_dot_chain(const float (&r)[N], const float (&h)[N], float start = 0.0f) {
    float c = start;
#pragma unroll
    for (int m = 0; m < N; ++m) {
        c = __fmaf_rn(r[m], h[m], c);
    }
    return c;
}

// The fixed pairwise tree over TF32 mode's 8 chains (section 8), for kernels that hold all
// chains in one thread.
__device__ __forceinline__ float bl_dot_tree8(const float c[BILSTM_TF32_DOT_CHAINS]) {
    static_assert(BILSTM_TF32_DOT_CHAINS == 8, "the documented tree has 8 leaves");
    return ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7]));
}

// The fixed pairwise tree over the 16 chains, for kernels that hold all chains in one thread.
__device__ __forceinline__ float bl_dot_tree16(const float c[BILSTM_DOT_CHAINS]) {
    static_assert(BILSTM_DOT_CHAINS == 16, "the documented tree has 16 leaves");
    const float p0 = (c[0] + c[1]) + (c[2] + c[3]);
    const float p1 = (c[4] + c[5]) + (c[6] + c[7]);
    const float p2 = (c[8] + c[9]) + (c[10] + c[11]);
    const float p3 = (c[12] + c[13]) + (c[14] + c[15]);
    return (p0 + p1) + (p2 + p3);
}

// A gate's pre-activation: (proj + dot) + bias.
__device__ __forceinline__ float bl_preactivation(float proj, float dot, float bias) {
    return (proj + dot) + bias;
}

// 1 / (1 + 2^t) from the bare hardware estimates (TF32 mode's gates, section 7):
// rcp.approx.ftz(1 + ex2.approx.ftz(t)). t = +inf (or above about 128) gives ex2 = +inf and +0;
// t = -inf gives 1; NaN stays NaN.
__device__ __forceinline__ float bl_rcp_one_plus_ex2(float t) {
    float e;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(t));
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(__fadd_rn(1.0f, e)));
    return y;
}

// TF32 mode's sigmoid (section 7): 1 / (1 + 2^(x * -log2 e)). x = -inf or below about -88.7
// gives +0, x = +inf gives 1, NaN stays NaN.
__device__ __forceinline__ float bl_sigmoid_fast(float x) {
    return bl_rcp_one_plus_ex2(__fmul_rn(x, -BL_LOG2E));
}

// TF32 mode's tanh (section 7): 1 - 2 / (1 + 2^(2 x log2 e)) as fma(-2, r, 1). +inf (or x
// above about 44.4) gives 1, -inf gives -1, 0 gives +0 (r = 0.5), NaN stays NaN.
__device__ __forceinline__ float bl_tanh_fast(float x) {
    return __fmaf_rn(-2.0f, bl_rcp_one_plus_ex2(__fmul_rn(x, 2.0f * BL_LOG2E)), 1.0f);
}

// The gate activations of a recurrence kernel: FP32 mode's (FAST = false: bl_sigmoid,
// bl_tanhf) or TF32 mode's (FAST = true: bl_sigmoid_fast, bl_tanh_fast).
template <bool FAST>
__device__ __forceinline__ float bl_gate_sigmoid(float x) {
    return FAST ? bl_sigmoid_fast(x) : bl_sigmoid(x);
}

template <bool FAST>
__device__ __forceinline__ float bl_gate_tanh(float x) {
    return FAST ? bl_tanh_fast(x) : bl_tanhf(x);
}

// The cell update from the four activated gates (i, f, o the sigmoid, g the tanh of their
// pre-activations), for kernels whose lanes activate the gates apart (recurrence_cluster.cu):
// c = fma(f, c, i * g) (i * g rounded first), h = o * tanh(c), with FP32 mode's tanh (FAST =
// false, sections 5-6) or TF32 mode's (FAST = true, section 7).
template <bool FAST>
__device__ __forceinline__ float bl_lstm_cell_activated_g(float i, float f, float g, float o, float* c) {
    *c = __fmaf_rn(f, *c, i * g);
    return o * bl_gate_tanh<FAST>(*c);
}

// One LSTM cell update from the four pre-activations (packed gate order i, f, g, o): i, f, o =
// sigmoid, g = tanh, then bl_lstm_cell_activated_g; FAST picks the activations as there.
template <bool FAST>
__device__ __forceinline__ float bl_lstm_cell_g(float pre_i, float pre_f, float pre_g, float pre_o, float* c) {
    return bl_lstm_cell_activated_g<FAST>(bl_gate_sigmoid<FAST>(pre_i), bl_gate_sigmoid<FAST>(pre_f),
                                          bl_gate_tanh<FAST>(pre_g), bl_gate_sigmoid<FAST>(pre_o), c);
}

// One LSTM cell update from the four pre-activations (packed gate order i, f, g, o):
// i, f, o = sigmoid; g = tanh; c = fma(f, c, i * g); returns h = o * tanh(c) (FP32 mode's
// activations).
__device__ __forceinline__ float bl_lstm_cell(float pre_i, float pre_f, float pre_g, float pre_o,
                                              float* c) {
    return bl_lstm_cell_g<false>(pre_i, pre_f, pre_g, pre_o, c);
}

// Rounds to TF32 (10 fraction bits), to nearest with ties to even; the result is an f32 value.
__device__ __forceinline__ float bl_tf32_rne(float v) {
#if __CUDA_ARCH__ >= 900
    bl_u32 r;
    asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
    return __uint_as_float(r);
#else
    const bl_u32 bits = __float_as_uint(v);
    if ((bits & 0x7f800000u) == 0x7f800000u) {
        // Infinity stays; NaN keeps its sign and high payload and gets the quiet bit, so that
        // dropping the low 13 bits cannot turn it into infinity.
        return __uint_as_float((bits & 0x007fffffu) == 0 ? bits : ((bits & 0xffffe000u) | 0x00400000u));
    }
    // Adding 0xfff plus the kept LSB rounds to nearest, ties to even; a carry into the exponent
    // is the correct rounding (up to infinity).
    const bl_u32 lsb = (bits >> 13) & 1u;
    return __uint_as_float((bits + 0xfffu + lsb) & 0xffffe000u);
#endif
}

// The value a recurrence stores as a layer output: h itself, or with `to_tf32` (TF32 mode, a
// layer whose next projection reads its input as stored: bilstm_projection_tf32_resident)
// bl_tf32_rne(h), the very value the other TF32 projections round that input to.
// Branch-free (a select, not a branch: the register-quad kernel's step loop stays as tight as
// without it).
__device__ __forceinline__ float bl_output_value(float h, bl_u32 to_tf32) {
    const float rounded = bl_tf32_rne(h);
    float out;
    asm("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %3, 0;\n\tselp.f32 %0, %1, %2, p;\n\t}"
        : "=f"(out)
        : "f"(rounded), "f"(h), "r"(to_tf32));
    return out;
}

// 9. The fixed-point recurrent product (bilstm_recurrence_fixed*): TF32 mode's recurrent product
//    on devices with thread-block clusters (compute capability 9.0 and later; the plan's
//    fixed_point decision, bilstm_core::plan::choose_fixed_point, since session 27): each row r
//    of R is scaled by 2^(15 - e_r),
//    e_r = bl_fx_row_exponent(max_k |R[r][k]|), and rounded to a 16-bit integer q
//    (bl_fx_quantise); h is rounded to q_h = rint(h 2^15), at most 32767 in magnitude
//    (bl_fx_quantise_h). Both split into a signed high byte and an unsigned low byte
//    (q = 256 q1 + q0); the byte products summed over k are exact integers in any order and
//    grouping: A = sum q1 h1 (|A| <= 2^21), B = sum q1 h0 + sum q0 h1 (|B| <= 8,355,840),
//    C = sum q0 h0 (0 <= C <= 8,323,200), so B 2^8 + C fits 32 bits (at most 2,147,418,240).
//    The dot is (A 2^16 + rn(B 2^8 + C)) rounded, times 2^(e_r - 30) (bl_fx_dot); the rest
//    (sections 2, 6, 7) as TF32 mode. Its error against the exact product is far below TF32
//    mode's (relative L2 against f64 unchanged at 4 digits: 1.136e-3 / 1.096e-3 / 1.098e-3 at
//    batches 1 / 8 / 33, H200 session 23). bilstm_core::fixed (core/src/fixed.rs) states the
//    same integer arithmetic on the host and tests these bounds at every byte's extremes.

// The exponent e of a row's largest magnitude m (finite, >= 0): m < 2^e; at least -96 so that
// 2^(e - 30) stays a normal float.
__device__ __forceinline__ int bl_fx_row_exponent(float m) {
    const int e = (int)((__float_as_uint(m) >> 23) & 0xffu) - 126;
    return e < -96 ? -96 : e;
}

// t = BL_ROUND_MAGIC + k for an integer k (|k| < 2^22; the sum rounded once, ties to even, as
// the recurrences round everywhere: no cvt) back to k, clamped to 16-bit magnitude (32767).
__device__ __forceinline__ int bl_fx_from_magic(float t) {
    const int q = __float_as_int(t) - BL_ROUND_MAGIC_BITS;
    return q > 32767 ? 32767 : (q < -32767 ? -32767 : q);
}

// A scaled weight (|x| <= 2^15) to the nearest integer, at most 32767 in magnitude.
__device__ __forceinline__ int bl_fx_quantise(float x) {
    return bl_fx_from_magic(x + BL_ROUND_MAGIC);
}

// The scale 2^(15 - e) that takes a row of exponent e to 16-bit integers, and the dot's scale
// 2^(e - 30) back (e in -96 .. 129: both normal floats, built from their exponent bits).
__device__ __forceinline__ float bl_fx_up(int e) {
    return __int_as_float((15 - e + 127) << 23);
}
__device__ __forceinline__ float bl_fx_scale(int e) {
    return __int_as_float((e - 30 + 127) << 23);
}

// Four weights of one row, k ascending, quantised (bl_fx_quantise of w up) and split: their
// signed high bytes packed into `hi`, their unsigned low bytes into `lo`, term i in byte i (the
// operand layout of both mma.sync m16n8k32 A fragments and dp4a).
__device__ __forceinline__ void bl_fx_pack4(const float (&w)[4], float up, bl_u32& hi, bl_u32& lo) {
    hi = 0u;
    lo = 0u;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int q = bl_fx_quantise(w[i] * up);
        hi |= ((bl_u32)(q >> 8) & 0xffu) << (8 * i);
        lo |= ((bl_u32)q & 0xffu) << (8 * i);
    }
}

// h (|h| <= 1, or NaN) to 16-bit fixed point: rint(h 2^15) (one fused multiply-add with the
// magic constant: h 2^15 is exact, the sum is rounded once, to an integer), at most 32767 in
// magnitude; the same values as bl_fx_quantise(h * 32768).
__device__ __forceinline__ int bl_fx_quantise_h(float h) {
    return bl_fx_from_magic(__fmaf_rn(h, 32768.0f, BL_ROUND_MAGIC));
}

// An integer of magnitude below 2^22 as a float, exactly, without the conversion unit.
__device__ __forceinline__ float bl_fx_exact_float(int x) {
    return __int_as_float(x + BL_ROUND_MAGIC_BITS) - BL_ROUND_MAGIC;
}

// The dot from A and T = B 2^8 + C (the 32-bit wrapping sum, exact where |T| < 2^31): T rounded
// once to float (the conversion unit's one instruction), then A 2^16 plus that rounded once,
// times the row's power-of-two scale `scale` (exact). Kernels that sum T directly (the SIMT
// fixed-point kernels: partial B 2^8 + C per lane, added modulo 2^32) call this; on the host,
// bilstm_core::fixed::dot_from_a_t (whose tests replay that grouping).
__device__ __forceinline__ float bl_fx_dot_t(int a, int t, float scale) {
    return __fmaf_rn(bl_fx_exact_float(a), 65536.0f, __int2float_rn(t)) * scale;
}

// The dot from the exact sums A, B, C (|A| < 2^22, |B 2^8 + C| < 2^31): B 2^8 + C exactly in 32
// bits, rounded once to float (the conversion unit's one instruction), then A 2^16 plus that
// rounded once, times the row's power-of-two scale `scale` (exact).
__device__ __forceinline__ float bl_fx_dot(int a, int b, int c, float scale) {
    return bl_fx_dot_t(a, b * 256 + c, scale);
}
