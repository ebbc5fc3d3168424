// recurrence_cluster.cu: the Hopper cluster recurrence (compute capability 9.0 and later). One
// thread-block cluster of S CTAs (S = 2 or 4) runs all steps of W windows (W = 1, or 2 with S = 2)
// in one direction of one layer with that direction's whole recurrent matrix in registers, split
// over the cluster's CTAs;
// each new hidden value is pushed by its producer lane into every CTA of the cluster with
// st.async, completing bytes on that CTA's mbarrier, and each warp waits on its own CTA's
// mbarrier: no block or cluster barrier in the step loop, no global exchange, no cooperative
// launch (DESIGN.md section 7).
//
// Launch contract
// - Entries: bilstm_recurrence_cluster2 (S = 2, W = 1), bilstm_recurrence_cluster4 (S = 4,
//   W = 1) and bilstm_recurrence_cluster2w2 (S = 2, W = 2), R in registers; the register quads
//   bilstm_recurrence_cluster2w4 and 2w8 (S = 2, W = 4 and 8, R in registers, see "The
//   four-window register kernels" below); the window tile bilstm_recurrence_cluster2w16 (S = 2,
//   W = 16, R in shared memory, see "The window-tile kernels" below); the fixed-point
//   recurrences (TF32 mode only; the plan's fixed_point decision picks them where clusters
//   exist, numerics.cuh section 9): the tensor-core
//   bilstm_recurrence_fixed8 / fixed8c2 / fixed8c4 (their own contract is at "The fixed-point
//   tensor-core recurrence" below) and fixed4 / fixed4c2 / fixed4c4 / fixed4c8 / fixed2c4 /
//   fixed2c8 (at "The fixed-point tensor-core recurrence of 4-window tiles"), and the integer-pipe
//   bilstm_recurrence_fixed1c2 / fixed1c4 / fixed1c8 (at "The SIMT fixed-point recurrence");
//   each (const bl_recurrence_cluster_params p). Not cooperative: clusters never wait for each other, so clusters beyond the device's
//   capacity run in later waves.
// - Grid: (2 * ceil(batch / W) * S, 1, 1) with the cluster dimension (S, 1, 1) given at launch
//   (CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION); cluster x = blockIdx.x / S runs windows (x / 2) W ..
//   (x / 2) W + W - 1 that exist in direction x % 2 (both directions of a layer in one launch; a
//   last cluster with fewer windows computes a copy of its last window in the missing slot and
//   writes nothing for it). Block: (BILSTM_CLUSTER_THREADS, 1, 1). No dynamic shared memory;
//   static shared: two hidden vectors of W padded rows of BILSTM_QUAD_H_ROW_FLOATS floats and
//   two 8-byte mbarriers (1,296 bytes for W = 1, 2,576 for W = 2). The register quads: no
//   dynamic shared memory; static, two hidden vectors of W rows of BILSTM_QUAD_H_ROW_FLOATS
//   floats (the padded row) and two mbarriers a quad (5,136 bytes for W = 4, 10,272 for W = 8).
//   The window tile (W = 16): dynamic shared BILSTM_HIDDEN * BILSTM_GATE_ROWS / 2 floats
//   (131,072 bytes, geometry CLUSTER_TILE_SHARED_BYTES; the host raises the function's limit
//   first) and static, two hidden slots of BILSTM_HIDDEN x W floats and two mbarriers (16,400
//   bytes). geometry CLUSTER_TILE_DYNAMIC_SHARED holds the dynamic bytes of W = 4 / 8 / 16.
// - Parameters: bl_recurrence_cluster_params (120 bytes), mirrored by
//   bilstm_kernels::params::RecurrenceClusterParams.
// - Preconditions: as recurrence_resident.cu (proj[d] holds batch * frames * BILSTM_GATE_ROWS
//   floats of direction d, recurrent[d] the packed rows [BILSTM_GATE_ROWS, BILSTM_HIDDEN], bias[d]
//   the packed combined bias, all 16-byte aligned; out holds batch * frames * 2 * BILSTM_HIDDEN
//   floats, is 16-byte aligned and overlaps no input; batch >= 1, frames >= 1), plus: error points to
//   BILSTM error words zeroed on this stream before the launch (clear.cu); compute capability
//   9.0 or later (compiled for an older architecture the entries are a trap and must not be
//   launched).
// - Postconditions: as recurrence_resident.cu: for every window w < batch, direction d and step
//   s, with frame t = s (d = 0) or frames - 1 - s (d = 1): out[(w * frames + t) * 256 + d * 128 +
//   unit] = h_s(unit) (bl_tf32_rne(h_s(unit)) where out_tf32 is nonzero: TF32 mode, a layer whose
//   next projection reads its input as stored; the final states stay exact); nothing else is
//   written, except error[0..4) when a partner is lost: a wait longer than spin_timeout_ns ends
//   the kernel with error[0] = BL_ERROR_PARTNER_LOST and {layer, direction, step} in
//   error[1..4) instead of a hang.
// - Progress (progress not null; the host path's zero-copy last layer, whose out is page-locked
//   host memory): progress[w * 2 + d] is written, for every window w < batch and direction d,
//   with the number of steps n whose rows out[(w * frames + t) * 256 + d * 128 + 0 .. 128) are
//   visible to the host (system scope) by then: n = k * BILSTM_CLUSTER_PROGRESS_STEPS for k >= 1
//   as the steps pass, and n = frames after the last (the quads and the window tile report only
//   n = frames, after the last step). The values only grow; the host zeroes the
//   words before the launch. A kernel that ends with a lost partner may stop reporting early.
// - Numerics: numerics.cuh (DESIGN section 4), identical in every recurrence kernel, so the
//   output bits equal the wide, tiled and resident kernels'; the dot-product tree is realised by
//   the shuffle levels below.
//   With tf32_numerics = 0 FP32 mode's dot (section 1) and gate activations (sections 3-5); else
//   TF32 mode's (sections 8 and 7), picked once at entry; the host sets tf32_numerics where the
//   pass's projection is a TF32 tile (ProjectionTile::tf32_numerics).
// - Test hook: stall_cta >= 0 names a CTA (blockIdx.x) of layer `layer` that never publishes its
//   hidden values, so its partners must time out; -1 in production.
// - Defines read: BILSTM_HIDDEN, BILSTM_GATES, BILSTM_GATE_ROWS, BILSTM_CLUSTER_THREADS,
//   BILSTM_CLUSTER_GROUP_LANES, BILSTM_DOT_CHAINS, BILSTM_DOT_CHAIN_TERMS, BILSTM_WARP_THREADS,
//   BILSTM_TF32_DOT_CHAINS, BILSTM_TF32_DOT_CHAIN_TERMS, BILSTM_QUAD_GROUP_LANES,
//   BILSTM_QUAD_PIECE_FLOATS, BILSTM_QUAD_H_ROW_FLOATS, BILSTM_FIXED_THREADS, BILSTM_FIXED_WINDOWS,
//   BILSTM_FIXED_H_ROW_BYTES.
//
// Thread mapping of the one- and two-window kernels (S CTAs of 256 threads; the numbers below are
// what the defines give; FP32 mode first, TF32 mode's differences after it):
// - a row group is 16 consecutive threads (half a warp); the cluster's 16 S groups split the 512
//   packed gate rows: group g = rank * 16 + threadIdx.x / 16 owns rows ROWS g .. ROWS g + ROWS -
//   1 with ROWS = 512 / (16 S) (16 for S = 2, 8 for S = 4), i.e. units ROWS/4 g .. ;
// - lane j = threadIdx.x % 16 of a group holds chain j (terms k = 8j .. 8j+7) of each of its
//   group's rows in registers (ROWS x 8 floats: 128 registers for S = 2, 64 for S = 4) and
//   applies them to each of the cluster's W windows in turn (everything below is per window);
// - per step it reads h[8j .. 8j+7] (two float4 from its CTA's copy of the hidden state) and
//   computes its chain of every row, ascending k from 0.0f;
// - a transpose-reduce finishes the fixed tree: at lane offsets o = 1, 2, 4 (and 8 for S = 2)
//   each lane keeps half of its rows (the upper half when j & o) and adds the partner lane's
//   (j ^ o) copy of them, with no select: lane j keeps row i ^ rev_L(j mod ROWS) in register
//   slot i, so the rows it keeps are always the lower slots; for S = 4 a last butterfly at
//   offset 8 adds the two halves. Offset 1
//   adds chains (2m, 2m+1), offset 2 those pairs, offset 4 the quads, offset 8 the halves:
//   exactly ((c0+c1)+(c2+c3))+((c4+c5)+(c6+c7)) + ... of numerics.cuh (IEEE addition is
//   commutative, so the operand order inside each + is irrelevant). Afterwards lane j holds the
//   full dot of row rev_L(j) (its L = log2(ROWS) low bits reversed): gate 2 b_{L-2} + b_{L-1},
//   unit rev_{L-2}(j mod ROWS/4) of the group; kernels/tests/cluster_mapping.rs replays this;
// - TF32 mode (section 8's 8 chains of 16 terms): a row group is 8 consecutive threads, the
//   cluster's 32 S groups own ROWS = 512 / (32 S) rows each (8 for S = 2, 4 for S = 4), lane j
//   holds chain j (terms k = 16j .. 16j+15) of each (ROWS x 16 floats: the same 128 or 64
//   registers) and reads h[16j .. 16j+15] (four float4); the reduce has the lane offsets 1, 2, 4
//   only: transpose levels while rows remain (offsets 1, 2, 4 for S = 2; 1, 2 then a butterfly at
//   offset 4 for S = 4), i.e. ((c0+c1)+(c2+c3))+((c4+c5)+(c6+c7)); the rest (row order, cell
//   lanes, gate offsets) follows from the same formulas with these ROWS and L;
// - the cell lanes j < ROWS/4 hold gate i of their unit and take f, g, o from lanes j ^ 2^(L-1),
//   j ^ 2^(L-2) and j ^ (2^(L-1) + 2^(L-2)) by shuffles; they keep the cell state c, the packed
//   bias (a float4) and the next step's projection (loaded one step ahead) in registers;
// - each cell lane pushes h with st.async into slot s % 2 of every CTA's hidden vectors,
//   completing 4 bytes on that CTA's mbarrier bar[s % 2];
// - the writer warp (warp 0 of the rank-0 CTA) writes the output: at step s it reads h_{s-1}
//   from its CTA's slot after its dot products (lane l: units 4l .. 4l + 3, one float4, from
//   the padded row in TF32 mode) and
//   stores it after its own pushes as one 512-byte row per window (one warp-wide 16-byte store:
//   whole lines, which matters when out is host memory on the bus); h of the last step is
//   written after the loop, once the last phase completed. It reports progress (above) every
//   BILSTM_CLUSTER_PROGRESS_STEPS steps: __syncwarp, then lane 0 fences at system scope and
//   stores the count.
// Per step s: thread 0 arms bar[s % 2] for the step's 128 W values (arrive.expect_tx of 512 W
// bytes; the previous phase of that barrier, step s - 2, is complete because thread 0 waited for
// it in step s - 1; pushes that land before the arming leave the transaction count below zero
// for a while, which the mbarrier allows, and the phase cannot complete before the arrival).
// Each warp waits for phase (s - 1) / 2 of bar[(s - 1) % 2] (acquire, cluster scope), reads
// h_{s-1}, computes, pushes. Slot reuse is safe without a barrier: a push of h_{s+1} into slot
// (s + 1) % 2 needs h_s of every unit, and every warp (each owns cell lanes) reads h_{s-1} from
// that slot before it produces its part of h_s. At the end thread 0 waits for the last step's
// phase (every push into this CTA has landed) and the cluster meets once at a cluster barrier, so
// no CTA leaves while a partner may still write into its shared memory.

#ifndef BILSTM_HIDDEN
#error "bilstm kernels are compiled with the -D options of bilstm_core::geometry::defines()"
#endif

#include "common.cuh"
#include "numerics.cuh"
#include "exchange.cuh"
#include "mbarrier.cuh"

struct bl_recurrence_cluster_params {
    const float* proj[2];
    const float* recurrent[2];
    const float* bias[2];
    float* out;
    int* error;
    bl_u64 spin_timeout_ns;
    bl_u32 batch;
    bl_u32 frames;
    bl_u32 layer;
    int stall_cta;
    // This layer's final states [2][batch][BILSTM_HIDDEN] (direction-major), or null.
    float* state_h;
    float* state_c;
    // Progress words [batch][2] (window-major, then direction) in host memory the host reads
    // while the layer runs, or null (see "Progress" in the contract above).
    bl_u32* progress;
    // Nonzero: every output value is stored rounded to TF32 (bl_output_value; TF32 mode, a
    // layer whose next projection reads its input as stored). The final states stay exact.
    // The register-quad and 16-window kernels only; the one- and two-window kernels trap on it.
    bl_u32 out_tf32;
    // Nonzero: TF32 mode's recurrence numerics (numerics.cuh sections 7 and 8: the estimate
    // gates and the 8-chain dot), zero: FP32 mode's. Every kernel of this file reads it once, at
    // entry.
    bl_u32 tf32_numerics;
};
static_assert(sizeof(bl_recurrence_cluster_params) == 120,
              "mirrors bilstm_kernels::params::RecurrenceClusterParams");

constexpr int BL_CL_THREADS = BILSTM_CLUSTER_THREADS;
constexpr int BL_CL_TERMS = BILSTM_DOT_CHAIN_TERMS;
// Bytes pushed into each CTA per step: one f32 per unit.
constexpr bl_u32 BL_CL_STEP_BYTES = BILSTM_HIDDEN * (bl_u32)sizeof(float);

static_assert(BILSTM_CLUSTER_GROUP_LANES == BILSTM_DOT_CHAINS, "FP32 mode's row groups: lane j holds chain j");

// The padded row of h in shared memory (geometry QUAD_PIECE_FLOATS, QUAD_H_ROW_FLOATS): eight
// pieces of 16 units, 20 floats apart, so that eight lanes reading their own piece with 16-byte
// loads hit distinct banks (bank 20 m mod 32 differs for m < 8). The register quads read it so
// (lane m: units 16 m .. 16 m + 15), and so do the one- and two-window kernels in TF32 mode,
// whose 8-lane groups read one 16-term chain of h a lane: unpadded, lanes m and m + 2 of a load
// phase would share banks (16 m mod 32 takes two values), 4-way conflicts.
constexpr int BL_CL_PIECE = BILSTM_TF32_DOT_CHAIN_TERMS;
constexpr int BL_CL_PIECE_STRIDE = BILSTM_QUAD_PIECE_FLOATS;
constexpr int BL_CL_H_ROW = BILSTM_QUAD_H_ROW_FLOATS;
static_assert(BL_CL_PIECE == 2 * BL_CL_TERMS && BL_CL_H_ROW == (BILSTM_HIDDEN / BL_CL_PIECE) * BL_CL_PIECE_STRIDE,
              "eight pieces of 16 units");
static_assert(BL_CL_PIECE_STRIDE % 32 == 20 && BL_CL_H_ROW % 32 == 0,
              "pieces 20 floats apart: banks 20 m mod 32 differ for m < 8, in every window");

// The float index of unit u in a padded row of h.
__device__ __forceinline__ bl_u32 bl_cl_h_index(bl_u32 u) {
    return (u / BL_CL_PIECE) * BL_CL_PIECE_STRIDE + u % BL_CL_PIECE;
}
static_assert(BL_CL_TERMS == 8, "a chain is two float4 of h");
static_assert(BL_CL_THREADS % BILSTM_WARP_THREADS == 0, "whole warps");
static_assert(BILSTM_GATES == 4, "gates i, f, g, o");

#if __CUDA_ARCH__ >= 900

// The CTA's rank in its cluster.
__device__ __forceinline__ bl_u32 bl_cl_rank() {
    bl_u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// The 32-bit shared::cta address of a shared-memory object.
__device__ __forceinline__ bl_u32 bl_cl_smem(const void* p) {
    bl_u32 a;
    asm("{\n\t.reg .u64 t;\n\tcvta.to.shared.u64 t, %1;\n\tcvt.u32.u64 %0, t;\n\t}"
        : "=r"(a)
        : "l"(p));
    return a;
}

// The shared::cluster address of the object at shared::cta address `a` in the CTA of rank `rank`.
__device__ __forceinline__ bl_u32 bl_cl_mapa(bl_u32 a, bl_u32 rank) {
    bl_u32 r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}

// Pushes one f32 to shared::cluster address `dst`, completing 4 bytes on mbarrier `bar` (a
// shared::cluster address in the same CTA as dst).
__device__ __forceinline__ void bl_cl_push(bl_u32 dst, float value, bl_u32 bar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];"
                 :
                 : "r"(dst), "r"(__float_as_uint(value)), "r"(bar)
                 : "memory");
}

// Thread 0 initialises N step mbarriers (at bar_addr0, bar_addr0 + 8, ..., one arrival each;
// two for a slot pair, two a quad for the quads) and makes them visible to the cluster; the
// caller's cluster barrier follows.
template <int N = 2>
__device__ __forceinline__ void bl_cl_init_step_barriers(int tid, bl_u32 bar_addr0) {
    if (tid == 0) {
#pragma unroll
        for (int b = 0; b < N; ++b) {
            bl_mbar_init(bar_addr0 + 8u * (bl_u32)b, 1);
        }
        bl_mbar_fence_init();
    }
}

// A whole-cluster barrier (every thread of every CTA), release/acquire.
__device__ __forceinline__ void bl_cl_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" : : : "memory");
}

// The bounded wait for phase parity `parity` of `bar`: true when it completed; false after
// `timeout_ns` (then *timed_out is set) or once another CTA reported an error.
__device__ __forceinline__ bool bl_cl_wait(bl_u32 bar, bl_u32 parity, bl_u64 timeout_ns,
                                           const int* error, bool* timed_out) {
    if (bl_mbar_try_wait(bar, parity)) {
        return true;
    }
    const bl_u64 start = bl_globaltimer_ns();
    for (bl_u32 spins = 1;; ++spins) {
        if (bl_mbar_try_wait(bar, parity)) {
            return true;
        }
        if ((spins & 15u) == 0u) {
            if (bl_globaltimer_ns() - start > timeout_ns) {
                *timed_out = true;
                return false;
            }
            if (bl_ld_relaxed_i32(error) != BL_ERROR_NONE) {
                return false;
            }
        }
    }
}

// One transpose-reduce level with lane offset OFFSET over the first N of the ROWS values: keep
// v[0 .. N/2) and add the partner's v[N/2 .. N). No select: each lane stores its rows in the
// order that makes the rows it keeps the lower half at every level (slot i holds row
// i ^ rev_L(lane), see the R load), so the partner's upper half is always the same rows.
template <int ROWS, int N, int OFFSET>
__device__ __forceinline__ void bl_cl_reduce_level(float (&v)[ROWS]) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
        v[i] = v[i] + __shfl_xor_sync(BL_FULL_MASK, v[i + N / 2], OFFSET);
    }
}

// Chain `lane` of TERMS terms (k = TERMS lane .. TERMS lane + TERMS - 1) of packed row `row` of R
// into registers.
template <int TERMS>
__device__ __forceinline__ void bl_cl_load_chain(float (&ri)[TERMS], const float* recurrent, bl_u32 row, int lane) {
    static_assert(TERMS % 4 == 0, "whole float4");
    const float4* src = reinterpret_cast<const float4*>(recurrent + (bl_u64)row * BILSTM_HIDDEN + lane * TERMS);
#pragma unroll
    for (int q = 0; q < TERMS / 4; ++q) {
        const float4 a = __ldg(src + q);
        ri[4 * q + 0] = a.x;
        ri[4 * q + 1] = a.y;
        ri[4 * q + 2] = a.z;
        ri[4 * q + 3] = a.w;
    }
}

// The one progress report of the kernels that report only the end (the quads and the window
// tile; host-memory output only): after the closing cluster barrier, which orders every thread's
// stores before it, a system-scope fence and `frames` for each valid window of the cluster.
__device__ __forceinline__ void bl_cl_report_end(bl_u32* progress, bl_u32 first_window, bl_u32 valid,
                                                 bl_u32 direction, bl_u32 frames) {
    __threadfence_system();
    for (bl_u32 w = 0; w < valid; ++w) {
        asm volatile("st.relaxed.sys.b32 [%0], %1;"
                     :
                     : "l"(progress + ((bl_u64)(first_window + w) * 2u + direction)), "r"(frames)
                     : "memory");
    }
}

// The writer warp's store of one step's rows: lane l writes units 4l .. 4l + 3 of this
// direction's half of row `frame` of every valid window (row[w] holds them for window w).
template <int W>
__device__ __forceinline__ void bl_cl_write_rows(const bl_recurrence_cluster_params& p, const float4 (&row)[W],
                                                 const bl_u64 (&window_row)[W], bl_u32 valid, bl_u32 frame,
                                                 bl_u32 direction, int lane32) {
    static_assert(BILSTM_HIDDEN == 4 * BILSTM_WARP_THREADS, "one float4 per lane covers a direction's row");
#pragma unroll
    for (int w = 0; w < W; ++w) {
        if ((bl_u32)w < valid) {
            float* dst = p.out + (window_row[w] + frame) * (2 * BILSTM_HIDDEN) + direction * BILSTM_HIDDEN;
            reinterpret_cast<float4*>(dst)[lane32] = row[w];
        }
    }
}

// The writer warp's progress report: every lane's stores so far are ordered before lane 0's
// system-scope fence (bar.warp.sync orders the warp's memory operations), which orders them
// before the count that lane 0 then stores for each valid window of the cluster.
__device__ __forceinline__ void bl_cl_report(bl_u32* progress, bl_u32 first_window, bl_u32 valid,
                                             bl_u32 direction, bl_u32 steps, int lane32) {
    __syncwarp();
    if (lane32 == 0) {
        __threadfence_system();
        for (bl_u32 w = 0; w < valid; ++w) {
            asm volatile("st.relaxed.sys.b32 [%0], %1;"
                         :
                         : "l"(progress + ((bl_u64)(first_window + w) * 2u + direction)), "r"(steps)
                         : "memory");
        }
    }
}

// A kernel body's static shared memory, one object of type T: declared in this function, once
// per T, so that an entry which instantiates a body for both gate variants (FAST) still holds
// one copy (the contract's static bytes).
template <typename T>
__device__ __forceinline__ T& bl_cl_static_shared() {
    __shared__ T shared;
    return shared;
}

// The static shared memory of bl_recurrence_cluster<S, W, FAST>: h_s[slot][window] is a padded
// row (bl_cl_h_index) in TF32 mode; FP32 mode uses its first 128 floats, unit u at u.
template <int W>
struct __align__(16) bl_cl_shared {
    float h_s[2][W][BL_CL_H_ROW];
    bl_u64 bar[2];
};

// One lane level of the one-window kernels' reduce (lane offset OFFSET) over the N rows still
// live: a transpose-reduce level (bl_cl_reduce_level) while N >= 2, else a butterfly of the
// single value (both lanes get the sum: the groups' halves hold the same rows).
template <int ROWS, int N, int OFFSET>
__device__ __forceinline__ void bl_cl_lane_level(float (&v)[ROWS]) {
    if constexpr (N >= 2) {
        bl_cl_reduce_level<ROWS, N, OFFSET>(v);
    } else {
        v[0] = v[0] + __shfl_xor_sync(BL_FULL_MASK, v[0], OFFSET);
    }
}

// One lane's gate activation in the one-window cluster kernels' layout: the lane applies its
// gate's function to `pre` (tanh where is_g, the sigmoid for i, f, o; both run and a select keeps
// the lane's own: one straight path for the warp), and every lane receives, by shuffles, the
// activated f, g and o of the lanes F_OFFSET, G_OFFSET and F_OFFSET | G_OFFSET away (what the
// cell lane, which holds gate i, needs).
template <bool FAST, int F_OFFSET, int G_OFFSET>
__device__ __forceinline__ void bl_cl_lane_gates(float pre, bool is_g, float& act_i, float& act_f, float& act_g,
                                                 float& act_o) {
    const float as_tanh = bl_gate_tanh<FAST>(pre);
    const float as_sigmoid = bl_gate_sigmoid<FAST>(pre);
    act_i = is_g ? as_tanh : as_sigmoid;
    act_f = __shfl_xor_sync(BL_FULL_MASK, act_i, F_OFFSET);
    act_g = __shfl_xor_sync(BL_FULL_MASK, act_i, G_OFFSET);
    act_o = __shfl_xor_sync(BL_FULL_MASK, act_i, F_OFFSET | G_OFFSET);
}

template <int S, int W, bool FAST>
__device__ __forceinline__ void bl_recurrence_cluster(const bl_recurrence_cluster_params& p) {
    // A row group's lanes hold one chain each: FP32 mode's 16 chains of 8 terms (numerics.cuh
    // section 1) or TF32 mode's 8 of 16 (section 8).
    constexpr int LANES = FAST ? BILSTM_TF32_DOT_CHAINS : BILSTM_DOT_CHAINS;
    constexpr int TERMS = BILSTM_HIDDEN / LANES;
    constexpr int GROUPS_PER_CTA = BL_CL_THREADS / LANES;
    constexpr int ROWS = BILSTM_GATE_ROWS / (S * GROUPS_PER_CTA);
    constexpr int LEVELS = ROWS == 16 ? 4 : (ROWS == 8 ? 3 : 2);
    constexpr int UNITS_PER_GROUP = ROWS / BILSTM_GATES;
    static_assert(LANES == 16 || LANES == 8, "one lane level per halving of the chains: offsets 1 .. LANES / 2");
    static_assert(ROWS == 16 || ROWS == 8 || ROWS == 4, "cluster sizes 2 and 4");
    static_assert((1 << LEVELS) == ROWS && ROWS <= LANES, "one transpose level per halving of the rows");
    static_assert(TERMS % 4 == 0, "a chain is whole float4 of h");
    static_assert(W >= 1 && W <= 4, "windows per cluster");
    // Lane offsets of gates f and g from the cell lane (which holds gate i).
    constexpr int F_OFFSET = 1 << (LEVELS - 1);
    constexpr int G_OFFSET = 1 << (LEVELS - 2);
    // Bytes pushed into each CTA per step: one f32 per unit and window.
    constexpr bl_u32 STEP_BYTES = (bl_u32)W * BL_CL_STEP_BYTES;

    auto& h_s = bl_cl_static_shared<bl_cl_shared<W>>().h_s;
    auto& bar = bl_cl_static_shared<bl_cl_shared<W>>().bar;

    const bl_u32 rank = bl_cl_rank();
    const bl_u32 cluster = blockIdx.x / S;
    const bl_u32 first_window = (cluster / 2) * W;
    const bl_u32 direction = cluster % 2;
    if (first_window >= p.batch) {
        return;  // never with the documented grid; the whole cluster leaves before any barrier
    }
    // Windows of this cluster that exist; the others (only in the last clusters when W does not
    // divide the batch) compute a copy of the last real window and write nothing.
    const bl_u32 valid = p.batch - first_window < (bl_u32)W ? p.batch - first_window : (bl_u32)W;
    const int tid = threadIdx.x;
    const int lane = tid % LANES;
    const int lane32 = tid % BILSTM_WARP_THREADS;
    // Warp 0 of the rank-0 CTA writes the output (see the thread mapping).
    const bool writer = rank == 0u && tid < BILSTM_WARP_THREADS;
    const bl_u32 group = rank * GROUPS_PER_CTA + tid / LANES;
    const bl_u32 frames = p.frames;
    const bool stalled = p.stall_cta == (int)blockIdx.x;
    // Selected, not indexed: a run-time index into a parameter array would copy the array to
    // local memory.
    const float* recurrent = direction == 0 ? p.recurrent[0] : p.recurrent[1];
    const float* proj = direction == 0 ? p.proj[0] : p.proj[1];
    const float* bias_in = direction == 0 ? p.bias[0] : p.bias[1];

    // Chain `lane` (terms TERMS lane .. TERMS lane + TERMS - 1) of the group's rows, slot i
    // holding row i ^ rev_L(lane mod ROWS): at reduce level k (lane offset 2^k) a lane with bit k set keeps
    // the upper half of the rows still live, and this order puts exactly those in the lower
    // slots (the partner's order is the same with that half swapped), so the reduce needs no
    // select; slot 0 ends with row rev_L(lane), as before, and every + adds the same two chains.
    const int order = (int)bl_bit_reverse((bl_u32)(lane & (ROWS - 1)), LEVELS);
    float r[ROWS][TERMS];
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
        const bl_u32 row = group * ROWS + (bl_u32)(i ^ order);
        bl_cl_load_chain<TERMS>(r[i], recurrent, row, lane);
    }

    // The cell lanes: lane j < UNITS_PER_GROUP owns unit rev_{LEVELS-2}(j) of the group, in each
    // of the cluster's windows. Every lane j holds the full dot of one row of that unit (j mod
    // UNITS_PER_GROUP), gate 2 b_{L-2}(j) + b_{L-1}(j): it loads that gate's projection and
    // bias and applies that gate's activation itself (all lanes at once), and the cell lane
    // gathers the four activated gates.
    const bool cell_lane = lane < UNITS_PER_GROUP;
    const int cell = lane % UNITS_PER_GROUP;
    const int unit_in_group = LEVELS == 4 ? ((cell & 1) << 1) | (cell >> 1) : cell;
    const bl_u32 unit = group * UNITS_PER_GROUP + unit_in_group;
    // Where h of a unit lies in a slot's row: padded in TF32 mode (bl_cl_h_index), else at the
    // unit's index; the cell lane pushes its unit's there, lane j reads its chain's 16 (8) units
    // from H_LANE_STRIDE j on, and writer lane l reads units 4l .. 4l + 3 (one float4, in one
    // piece either way).
    constexpr int H_LANE_STRIDE = FAST ? BL_CL_PIECE_STRIDE : TERMS;
    static_assert(!FAST || TERMS == BL_CL_PIECE, "TF32 mode: a lane's chain is one piece");
    const bl_u32 h_index = FAST ? bl_cl_h_index(unit) : unit;
    const bl_u32 writer_index = FAST ? bl_cl_h_index(4u * (bl_u32)lane32) : 4u * (bl_u32)lane32;
    const int gate = 2 * ((lane >> (LEVELS - 2)) & 1) + ((lane >> (LEVELS - 1)) & 1);
    const bool is_g = gate == 2;
    const float* gates_at = proj + unit * BILSTM_GATES + gate;
    bl_u64 window_row[W];
#pragma unroll
    for (int w = 0; w < W; ++w) {
        const bl_u32 window = first_window + ((bl_u32)w < valid ? (bl_u32)w : valid - 1u);
        window_row[w] = (bl_u64)window * frames;
    }
    const float bias = __ldg(bias_in + unit * BILSTM_GATES + gate);
    float gates_next[W];
    {
        const bl_u32 frame0 = direction == 0 ? 0u : frames - 1u;
#pragma unroll
        for (int w = 0; w < W; ++w) {
            gates_next[w] = __ldg(gates_at + (window_row[w] + frame0) * BILSTM_GATE_ROWS);
        }
    }

    const bl_u32 bar_addr0 = bl_cl_smem(&bar[0]);
    const bl_u32 h_addr0 = bl_cl_smem(&h_s[0][0][0]);
    bl_cl_init_step_barriers(tid, bar_addr0);
    // Every CTA's barriers are initialised before any push reaches them.
    bl_cl_cluster_sync();

    float c[W];
#pragma unroll
    for (int w = 0; w < W; ++w) {
        c[w] = 0.0f;
    }
    bool aborted = false;
    bool timed_out = false;
    bl_u32 step = 0;
    for (; step < frames; ++step) {
        const bl_u32 slot = step & 1u;
        float gates_in[W];
#pragma unroll
        for (int w = 0; w < W; ++w) {
            gates_in[w] = gates_next[w];
        }
        if (step + 1u < frames) {
            const bl_u32 next = direction == 0 ? step + 1u : frames - 2u - step;
#pragma unroll
            for (int w = 0; w < W; ++w) {
                gates_next[w] = __ldg(gates_at + (window_row[w] + next) * BILSTM_GATE_ROWS);
            }
        }
        if (tid == 0) {
            bl_mbar_arrive_expect(bar_addr0 + 8u * slot, STEP_BYTES);
        }

        // The writer warp's copy of h_{s-1} (step > 0), stored after the pushes.
        float4 row[W];
        // The recurrent dot of this lane's gate row in each window; +0.0f at step 0.
        float dot[W];
#pragma unroll
        for (int w = 0; w < W; ++w) {
            dot[w] = 0.0f;
        }
        if (step > 0) {
            const bl_u32 prev = slot ^ 1u;
            const bool ok = bl_cl_wait(bar_addr0 + 8u * prev, ((step - 1u) >> 1) & 1u,
                                       p.spin_timeout_ns, p.error, &timed_out);
            if (__any_sync(BL_FULL_MASK, !ok)) {
                aborted = true;
                break;
            }
#pragma unroll
            for (int w = 0; w < W; ++w) {
                float h[TERMS];
                const float4* h4 = reinterpret_cast<const float4*>(&h_s[prev][w][lane * H_LANE_STRIDE]);
#pragma unroll
                for (int q = 0; q < TERMS / 4; ++q) {
                    const float4 a = h4[q];
                    h[4 * q + 0] = a.x;
                    h[4 * q + 1] = a.y;
                    h[4 * q + 2] = a.z;
                    h[4 * q + 3] = a.w;
                }
                float v[ROWS];
#pragma unroll
                for (int i = 0; i < ROWS; ++i) {
                    v[i] = bl_dot_chain<TERMS>(r[i], h);
                }
                bl_cl_lane_level<ROWS, ROWS, 1>(v);
                bl_cl_lane_level<ROWS, ROWS / 2, 2>(v);
                bl_cl_lane_level<ROWS, (ROWS / 4 > 1 ? ROWS / 4 : 1), 4>(v);
                if constexpr (LANES == 16) {
                    bl_cl_lane_level<ROWS, (ROWS / 8 > 1 ? ROWS / 8 : 1), 8>(v);
                }
                dot[w] = v[0];
            }
            // The writer warp's copy of h_{s-1}: after the dot products' reads (not queued
            // ahead of them) but before this warp's pushes (a read after them could race with
            // the pushes of h_{s+1}, see the slot-reuse note above).
            if (writer) {
#pragma unroll
                for (int w = 0; w < W; ++w) {
                    row[w] = *reinterpret_cast<const float4*>(&h_s[prev][w][writer_index]);
                }
            }
        }

        // Every lane activates its gate (bl_lstm_cell's functions: tanh for g, the sigmoid for
        // i, f, o), then the cell lane takes f, g and o from their lanes. Both functions run on
        // every lane and a select keeps the lane's own: one straight path for the warp (a
        // branch by gate ran the two paths one after the other: slower, wip/lane-activations).
        float act_i[W], act_f[W], act_g[W], act_o[W];
#pragma unroll
        for (int w = 0; w < W; ++w) {
            bl_cl_lane_gates<FAST, F_OFFSET, G_OFFSET>(bl_preactivation(gates_in[w], dot[w], bias), is_g, act_i[w],
                                                       act_f[w], act_g[w], act_o[w]);
        }
        if (cell_lane) {
#pragma unroll
            for (int w = 0; w < W; ++w) {
                const float h = bl_lstm_cell_activated_g<FAST>(act_i[w], act_f[w], act_g[w], act_o[w], &c[w]);
                if (!stalled) {
                    const bl_u32 dst =
                        h_addr0 + ((slot * W + w) * BL_CL_H_ROW + h_index) * (bl_u32)sizeof(float);
                    const bl_u32 done = bar_addr0 + 8u * slot;
#pragma unroll
                    for (int q = 0; q < S; ++q) {
                        bl_cl_push(bl_cl_mapa(dst, (bl_u32)q), h, bl_cl_mapa(done, (bl_u32)q));
                    }
                }
                if ((bl_u32)w < valid && step + 1u == frames) {
                    bl_store_final_state(p.state_h, p.state_c, direction, p.batch,
                                         first_window + (bl_u32)w, unit, h, c[w]);
                }
            }
        }
        // The output row of h_{s-1} and any progress report after this warp's pushes, so that
        // neither holds them up.
        if (writer && step > 0u) {
            const bl_u32 prev_frame = direction == 0 ? step - 1u : frames - step;
            bl_cl_write_rows<W>(p, row, window_row, valid, prev_frame, direction, lane32);
            if (p.progress != nullptr && step % BILSTM_CLUSTER_PROGRESS_STEPS == 0u) {
                bl_cl_report(p.progress, first_window, valid, direction, step, lane32);
            }
        }
    }

    if (timed_out) {
        bl_exchange_report_lost(p.error, p.layer, direction, step);
    }
    // Every push into this CTA has landed before it may leave: the last step's phase. The writer
    // warp waits for it too, then writes the last step's rows and reports the end.
    if ((tid == 0 || writer) && !aborted && frames > 0) {
        bool late = false;
        const bl_u32 last = frames - 1u;
        const bool landed = bl_cl_wait(bar_addr0 + 8u * (last & 1u), (last >> 1) & 1u,
                                       p.spin_timeout_ns, p.error, &late);
        if (!landed && late && tid == 0) {
            bl_exchange_report_lost(p.error, p.layer, direction, frames);
        }
        if (writer && __all_sync(BL_FULL_MASK, landed)) {
            float4 row[W];
#pragma unroll
            for (int w = 0; w < W; ++w) {
                row[w] = *reinterpret_cast<const float4*>(&h_s[last & 1u][w][writer_index]);
            }
            const bl_u32 last_frame = direction == 0 ? last : 0u;
            bl_cl_write_rows<W>(p, row, window_row, valid, last_frame, direction, lane32);
            if (p.progress != nullptr) {
                bl_cl_report(p.progress, first_window, valid, direction, frames, lane32);
            }
        }
    }
    bl_cl_cluster_sync();
}

// ---- The window-tile kernel (bilstm_recurrence_cluster2w16) -------------------------------------
// A 2-CTA cluster per direction and tile of W = 4 * WPT windows. CTA rank r keeps the rows of
// units 64 r .. 64 r + 63 (all four gates of each: 256 packed rows) transposed in dynamic shared
// memory, R^T[k][row] (row = unit_local * 4 + gate, 1 KiB per k), so registers are free for
// the windows. Thread t (warp v = t / 32, lane l = t % 32) owns unit_local = 8 v + l % 8 and
// the WPT windows g WPT .. g WPT + WPT - 1 of the tile, g = l / 8: all four gates of its unit in
// each of its windows, 4 WPT dot products. Per k it reads one float4 of R^T (its unit's four
// gates; a quarter-warp reads 128 contiguous bytes) and WPT floats of h (h_t[slot][k][window]:
// its windows side by side; a quarter-warp reads the same ones), and updates 4 WPT chains. Each
// chain is numerics.cuh's: ascending k from 0.0f, eight terms (sixteen in TF32 mode, section 8);
// chain j of every dot is folded into the fixed pairwise tree as soon as it is done (a stack of
// partial sums a dot, one a tree level), so every dot has exactly bl_dot_tree16's bits
// (bl_dot_tree8's in TF32 mode). The cell update is bl_lstm_cell on the thread's
// own four pre-activations (no lane exchange). The thread pushes its WPT hidden values of the
// step (contiguous in h_t) with one vector st.async into each CTA, completing 4 WPT bytes on
// that CTA's mbarrier, and stores them to the output itself (WPT 4-byte stores). Waits, slot
// reuse, the lost-partner timeout and the stall hook are the one-window kernel's. Progress: a
// layer that writes host memory is reported once, after the last step (every CTA's stores are
// ordered before it by the closing cluster barrier and a system-scope fence).
// The static shared memory of bl_recurrence_cluster_tile<WPT, FAST> (bl_cl_static_shared).
template <int W>
struct __align__(16) bl_cl_tile_shared {
    float h_t[2][BILSTM_HIDDEN][W];
    bl_u64 bar[2];
};

template <int WPT, bool FAST>
__device__ __forceinline__ void bl_recurrence_cluster_tile(const bl_recurrence_cluster_params& p) {
    constexpr int S = 2;
    constexpr int W = 4 * WPT;
    constexpr int UNITS = BILSTM_HIDDEN / S;             // units per CTA: 64
    constexpr int ROWS = UNITS * BILSTM_GATES;           // R^T row length: 256
    constexpr bl_u32 STEP_BYTES = (bl_u32)(W * BILSTM_HIDDEN * sizeof(float));
    static_assert(WPT == 4, "four windows a thread: the 16-window tile (4 and 8 run the quads)");
    static_assert(BL_CL_THREADS == UNITS * 4, "one thread per unit and window group");
    // The dot's chains: FP32 mode's 16 of 8 terms (numerics.cuh section 1), TF32 mode's 8 of 16
    // (section 8); the tree has CHAIN_LEVELS levels.
    constexpr int CHAINS = FAST ? BILSTM_TF32_DOT_CHAINS : BILSTM_DOT_CHAINS;
    constexpr int TERMS = FAST ? BILSTM_TF32_DOT_CHAIN_TERMS : BILSTM_DOT_CHAIN_TERMS;
    constexpr int CHAIN_LEVELS = FAST ? 3 : 4;
    static_assert(CHAINS == (1 << CHAIN_LEVELS) && CHAINS * TERMS == BILSTM_HIDDEN, "chains cover k");

    extern __shared__ __align__(16) float r_t[];          // [BILSTM_HIDDEN][ROWS]
    auto& h_t = bl_cl_static_shared<bl_cl_tile_shared<W>>().h_t;
    auto& bar = bl_cl_static_shared<bl_cl_tile_shared<W>>().bar;

    const bl_u32 rank = bl_cl_rank();
    const bl_u32 cluster = blockIdx.x / S;
    const bl_u32 first_window = (cluster / 2) * W;
    const bl_u32 direction = cluster % 2;
    if (first_window >= p.batch) {
        return;
    }
    const bl_u32 valid = p.batch - first_window < (bl_u32)W ? p.batch - first_window : (bl_u32)W;
    const int tid = threadIdx.x;
    const int lane32 = tid % BILSTM_WARP_THREADS;
    const int unit_local = (tid / BILSTM_WARP_THREADS) * 8 + lane32 % 8;
    const int group = lane32 / 8;
    const bl_u32 unit = rank * UNITS + (bl_u32)unit_local;
    const bl_u32 frames = p.frames;
    const bool stalled = p.stall_cta == (int)blockIdx.x;
    const float* recurrent = direction == 0 ? p.recurrent[0] : p.recurrent[1];
    const float* proj = direction == 0 ? p.proj[0] : p.proj[1];
    const float* bias_in = direction == 0 ? p.bias[0] : p.bias[1];

    // R^T of this CTA's rows: thread t copies row t's 128 values (rows 256 rank + t), one column
    // of r_t.
    {
        const float4* src = reinterpret_cast<const float4*>(recurrent + ((bl_u64)rank * ROWS + tid) * BILSTM_HIDDEN);
#pragma unroll 4
        for (int q = 0; q < BILSTM_HIDDEN / 4; ++q) {
            const float4 v = __ldg(src + q);
            r_t[(4 * q + 0) * ROWS + tid] = v.x;
            r_t[(4 * q + 1) * ROWS + tid] = v.y;
            r_t[(4 * q + 2) * ROWS + tid] = v.z;
            r_t[(4 * q + 3) * ROWS + tid] = v.w;
        }
    }

    bl_u64 window_row[WPT];
#pragma unroll
    for (int w = 0; w < WPT; ++w) {
        const bl_u32 slot_w = (bl_u32)(group * WPT + w);
        const bl_u32 window = first_window + (slot_w < valid ? slot_w : valid - 1u);
        window_row[w] = (bl_u64)window * frames;
    }
    const float4 bias = __ldg(reinterpret_cast<const float4*>(bias_in) + unit);
    float4 gates_next[WPT];
    {
        const bl_u32 frame0 = direction == 0 ? 0u : frames - 1u;
#pragma unroll
        for (int w = 0; w < WPT; ++w) {
            gates_next[w] = __ldg(reinterpret_cast<const float4*>(proj + (window_row[w] + frame0) * BILSTM_GATE_ROWS) + unit);
        }
    }

    const bl_u32 bar_addr0 = bl_cl_smem(&bar[0]);
    const bl_u32 h_addr0 = bl_cl_smem(&h_t[0][0][0]);
    bl_cl_init_step_barriers(tid, bar_addr0);
    // Every CTA's barriers are initialised (and this CTA's R^T written) before any push.
    __syncthreads();
    bl_cl_cluster_sync();

    float c[WPT];
#pragma unroll
    for (int w = 0; w < WPT; ++w) {
        c[w] = 0.0f;
    }
    bool aborted = false;
    bool timed_out = false;
    bl_u32 step = 0;
    for (; step < frames; ++step) {
        const bl_u32 slot = step & 1u;
        float4 gates_in[WPT];
#pragma unroll
        for (int w = 0; w < WPT; ++w) {
            gates_in[w] = gates_next[w];
        }
        if (step + 1u < frames) {
            const bl_u32 next = direction == 0 ? step + 1u : frames - 2u - step;
#pragma unroll
            for (int w = 0; w < WPT; ++w) {
                gates_next[w] = __ldg(reinterpret_cast<const float4*>(proj + (window_row[w] + next) * BILSTM_GATE_ROWS) + unit);
            }
        }
        if (tid == 0) {
            bl_mbar_arrive_expect(bar_addr0 + 8u * slot, STEP_BYTES);
        }
        // dot[gate][window]: +0.0f at step 0.
        float dot[4][WPT];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
#pragma unroll
            for (int w = 0; w < WPT; ++w) {
                dot[q][w] = 0.0f;
            }
        }
        if (step > 0) {
            const bl_u32 prev = slot ^ 1u;
            const bool ok = bl_cl_wait(bar_addr0 + 8u * prev, ((step - 1u) >> 1) & 1u,
                                       p.spin_timeout_ns, p.error, &timed_out);
            if (__any_sync(BL_FULL_MASK, !ok)) {
                aborted = true;
                break;
            }
            // The tree's partial sums: part[L] holds a finished subtree of 2^L chains (level L + 1
            // of the tree) until its right sibling is done; the last level's sum is the dot.
            float part[CHAIN_LEVELS - 1][4][WPT];
#pragma unroll
            for (int j = 0; j < CHAINS; ++j) {
                float ch[4][WPT];
#pragma unroll
                for (int q = 0; q < 4; ++q) {
#pragma unroll
                    for (int w = 0; w < WPT; ++w) {
                        ch[q][w] = 0.0f;
                    }
                }
#pragma unroll
                for (int m = 0; m < TERMS; ++m) {
                    const int k = j * TERMS + m;
                    const float4 rv = *reinterpret_cast<const float4*>(&r_t[k * ROWS + unit_local * 4]);
                    const float4 h4 = *reinterpret_cast<const float4*>(&h_t[prev][k][group * WPT]);
                    const float hv[WPT] = {h4.x, h4.y, h4.z, h4.w};
#pragma unroll
                    for (int w = 0; w < WPT; ++w) {
                        ch[0][w] = __fmaf_rn(rv.x, hv[w], ch[0][w]);
                        ch[1][w] = __fmaf_rn(rv.y, hv[w], ch[1][w]);
                        ch[2][w] = __fmaf_rn(rv.z, hv[w], ch[2][w]);
                        ch[3][w] = __fmaf_rn(rv.w, hv[w], ch[3][w]);
                    }
                }
                // Fold chain j into the tree (bl_dot_tree16, or bl_dot_tree8 in TF32 mode): while
                // bit L of j is set, the subtree just finished is the right sibling of part[L].
#pragma unroll
                for (int q = 0; q < 4; ++q) {
#pragma unroll
                    for (int w = 0; w < WPT; ++w) {
                        float x = ch[q][w];
                        bool open = true;
#pragma unroll
                        for (int L = 0; L < CHAIN_LEVELS - 1; ++L) {
                            if (open) {
                                if ((j >> L) & 1) {
                                    x = part[L][q][w] + x;
                                } else {
                                    part[L][q][w] = x;
                                    open = false;
                                }
                            }
                        }
                        if (open) {
                            dot[q][w] = ((j >> (CHAIN_LEVELS - 1)) & 1) ? dot[q][w] + x : x;
                        }
                    }
                }
            }
        }

        float h[WPT];
#pragma unroll
        for (int w = 0; w < WPT; ++w) {
            h[w] = bl_lstm_cell_g<FAST>(bl_preactivation(gates_in[w].x, dot[0][w], bias.x),
                                        bl_preactivation(gates_in[w].y, dot[1][w], bias.y),
                                        bl_preactivation(gates_in[w].z, dot[2][w], bias.z),
                                        bl_preactivation(gates_in[w].w, dot[3][w], bias.w), &c[w]);
        }
        if (!stalled) {
            const bl_u32 dst = h_addr0 + ((slot * BILSTM_HIDDEN + unit) * W + (bl_u32)(group * WPT)) * (bl_u32)sizeof(float);
            const bl_u32 done = bar_addr0 + 8u * slot;
#pragma unroll
            for (int q = 0; q < S; ++q) {
                const bl_u32 to = bl_cl_mapa(dst, (bl_u32)q);
                const bl_u32 on = bl_cl_mapa(done, (bl_u32)q);
                asm volatile(
                    "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];"
                    :
                    : "r"(to), "r"(__float_as_uint(h[0])), "r"(__float_as_uint(h[1])), "r"(__float_as_uint(h[2])),
                      "r"(__float_as_uint(h[3])), "r"(on)
                    : "memory");
            }
        }
        const bl_u32 frame = direction == 0 ? step : frames - 1u - step;
#pragma unroll
        for (int w = 0; w < WPT; ++w) {
            if ((bl_u32)(group * WPT + w) < valid) {
                p.out[(window_row[w] + frame) * (2 * BILSTM_HIDDEN) + direction * BILSTM_HIDDEN + unit] =
                    bl_output_value(h[w], p.out_tf32);
                if (step + 1u == frames) {
                    bl_store_final_state(p.state_h, p.state_c, direction, p.batch,
                                         first_window + (bl_u32)(group * WPT + w), unit, h[w], c[w]);
                }
            }
        }
    }

    if (timed_out) {
        bl_exchange_report_lost(p.error, p.layer, direction, step);
    }
    // Every push into this CTA has landed before it may leave: the last step's phase.
    if (tid == 0 && !aborted && frames > 0) {
        bool late = false;
        const bl_u32 last = frames - 1u;
        const bool landed = bl_cl_wait(bar_addr0 + 8u * (last & 1u), (last >> 1) & 1u,
                                       p.spin_timeout_ns, p.error, &late);
        if (!landed && late) {
            bl_exchange_report_lost(p.error, p.layer, direction, frames);
        }
    }
    bl_cl_cluster_sync();
    // Progress (host-memory output only): one report after the last step, once every thread of
    // both CTAs has stored its rows (the cluster barrier above orders them before this).
    if (p.progress != nullptr && rank == 0u && tid == 0 && !aborted) {
        bl_cl_report_end(p.progress, first_window, valid, direction, frames);
    }
}

// ---- The four-window register kernels (bilstm_recurrence_cluster2w4 / 2w8) ----------------------
// A 2-CTA cluster per direction and G quads of 4 windows (G = 1: 2w4; G = 2: 2w8, the quads
// taken in turn each step, each with its own pair of mbarriers, so one quad's exchange is in
// flight while the other computes), R in registers: row group g = rank * 32 + threadIdx.x / 8
// (8 lanes) owns the packed rows 8 g .. 8 g + 7, units 2 g and 2 g + 1; lane m = threadIdx.x % 8
// holds chains 2 m and 2 m + 1 (terms 16 m .. 16 m + 15) of each, and adds the two in a register
// (the tree's first level: pairs of chains); in TF32 mode the same 16 terms are chain m of
// numerics.cuh section 8 (one 16-term chain, continued from its first 8 terms), and the three
// shuffle levels below are that tree's three levels. The four windows' dots are reduced
// together, so that every lane ends with the four gates of one (window, unit) and runs that cell itself: no
// lane idles in the gate math and no shuffle gathers gates. Value (window w, unit-in-group u,
// gate q) of the 32 pair sums a lane computes each step is reduced over the lane offsets 1, 2,
// 4 (the rest of the fixed tree of numerics.cuh: quads of chains, eights, halves) splitting,
// level by level, on window bit 0, window bit 1, the unit bit: lane m keeps window m & 3, unit
// b2(m) of its group, all four gates. No select: lane m reads window
// ((q ^ b1(m)) << 1) | (s ^ b0(m)) into pair slot q, member s, and holds the rows of unit
// us ^ b2(m) in unit slot us, so what it keeps is always the lower half of its slots and what it
// sends the upper half (the partner's order is the same with that bit flipped). Pair by pair:
// the two windows of a pair are reduced over offset 1 before the next pair's products. h slots
// hold each window's 128 units in eight 16-unit pieces 20 floats apart (a lane's four 16-byte
// loads of its piece: the eight lanes of a load phase hit distinct banks). Each lane pushes its h
// to both CTAs (slot s % 2, window m & 3, its unit; 2,048 bytes a step complete each CTA's
// mbarrier), stores it to the output and keeps c in a register. Waits, slot reuse (per quad),
// the lost-partner timeout, the stall hook and the progress report (once, after the last step)
// are the window-tile kernel's. H200 (2026-12-01 session 8 calls 5-7, `bench --phases`, with
// 16-lane groups, one chain a lane: four shuffle levels): 0.71 ms a layer for a wave of 64
// quads (batch 128), 1.38 for a wave of 64 two-quad clusters (batch 256); session 10 (ncu,
// batch 256, layer 1): issue-bound, 1,761 warp instructions a warp and step of which 120
// shuffles, which the 8-lane groups cut to 56 (16 more 16-byte loads). The two-quad kernel
// runs its quads half a step apart (each quad's cell between the other quad's product pairs;
// see the loop) and advances per-quad pointers to its gates and outputs instead of recomputing
// 64-bit addresses each step: H200 session 11 calls 2-3 (FP32 whole forward, three rounds in
// one call against the previous kernel): batch 1024 31.87 ms with the half-step pipeline alone,
// 31.30 with the pointers too, against 32.43; batch 256 8.05 / 7.91 against 8.21; ncu (batch
// 256, layer 1, the pipeline alone): issue active 79.1 %, 1.26 ms. In the two-quad kernel
// (G = 2) each lane maps its push targets once (shared::cluster addresses within one shared
// object are the mapped base plus the offset) and loads a quad's gates of step s + 1 right after
// its cell of step s (a step ahead of their use, with no register copy rotating a prefetch):
// TF32 step loop 1,434 -> 1,404 static instructions, 255 -> 245 registers; the one-quad kernel
// (G = 1) keeps a mapa per push and the top-of-step prefetch, which the same changes slowed by
// 11 % at TF32 batch 128 (2026-12-03 session 21, bench/NOTES.md). Bits equal to every other
// kernel's (gpu_batches); kernels/tests/quad_mapping.rs replays the reduce.
// Lanes of a quad kernel's row group and rows a group (geometry QUAD_GROUP_LANES); its h rows
// are the padded rows above (BL_CL_H_ROW, bl_cl_h_index).
constexpr int BL_QD_LANES = BILSTM_QUAD_GROUP_LANES;
constexpr int BL_QD_ROWS = 8;
static_assert(BILSTM_HIDDEN == BL_QD_LANES * BL_CL_PIECE, "eight lanes cover h");

// The static shared memory of bl_recurrence_cluster_quad<G, FAST> (bl_cl_static_shared):
// h_s[slot][quad][window in quad][padded unit]; bar[slot * G + quad].
template <int G>
struct __align__(16) bl_qd_shared {
    float h_s[2][G][4][BL_CL_H_ROW];
    bl_u64 bar[2 * G];
};

template <int G, bool FAST>
__device__ __forceinline__ void bl_recurrence_cluster_quad(const bl_recurrence_cluster_params& p) {
    constexpr int S = 2;
    constexpr int Q = 4;          // windows a group (a quad)
    constexpr int W = Q * G;      // windows a cluster
    constexpr int ROWS = BL_QD_ROWS;
    constexpr int GROUPS_PER_CTA = BL_CL_THREADS / BL_QD_LANES;
    constexpr bl_u32 GROUP_BYTES = (bl_u32)Q * BL_CL_STEP_BYTES;
    static_assert(G == 1 || G == 2, "one quad, or two taken in turn");
    static_assert(BILSTM_GATE_ROWS / (S * GROUPS_PER_CTA) == ROWS, "8 rows a group");
    static_assert(ROWS == 2 * BILSTM_GATES, "two units of four gates a group");

    auto& h_s = bl_cl_static_shared<bl_qd_shared<G>>().h_s;
    auto& bar = bl_cl_static_shared<bl_qd_shared<G>>().bar;

    const bl_u32 rank = bl_cl_rank();
    const bl_u32 cluster = blockIdx.x / S;
    const bl_u32 first_window = (cluster / 2) * W;
    const bl_u32 direction = cluster % 2;
    if (first_window >= p.batch) {
        return;
    }
    const bl_u32 valid = p.batch - first_window < (bl_u32)W ? p.batch - first_window : (bl_u32)W;
    const int tid = threadIdx.x;
    const int lane = tid % BL_QD_LANES;
    const bl_u32 group = rank * GROUPS_PER_CTA + tid / BL_QD_LANES;
    const bl_u32 frames = p.frames;
    const bool stalled = p.stall_cta == (int)blockIdx.x;
    const float* recurrent = direction == 0 ? p.recurrent[0] : p.recurrent[1];
    const float* proj = direction == 0 ? p.proj[0] : p.proj[1];
    const float* bias_in = direction == 0 ? p.bias[0] : p.bias[1];

    const int wb0 = lane & 1;
    const int wb1 = (lane >> 1) & 1;
    const int ub = (lane >> 2) & 1;
    // Slot i = 4 us + gate: chains 2 lane and 2 lane + 1 of row (2 group + (us ^ ub)) * 4 + gate.
    float r[ROWS][2][BL_CL_TERMS];
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
        const bl_u32 row = group * ROWS + (bl_u32)((((i >> 2) ^ ub) << 2) | (i & 3));
        bl_cl_load_chain(r[i][0], recurrent, row, 2 * lane);
        bl_cl_load_chain(r[i][1], recurrent, row, 2 * lane + 1);
    }

    // This lane's cells: window `mine` of each quad (a copy of the last real window where it
    // does not exist), unit `unit`.
    const int mine = lane & 3;
    const bl_u32 unit = group * (ROWS / BILSTM_GATES) + (bl_u32)ub;
    const float4 bias = __ldg(reinterpret_cast<const float4*>(bias_in) + unit);
    // Per quad: this step's gates (gates[g], loaded right after the previous step's cell, a
    // step ahead of their use, so that no register copy rotates them) and the next output of
    // this lane, each advanced one frame (in this direction's order) a use; out_ptr passes the
    // window's last frame after its last store and is never dereferenced there.
    const float4* gate_ptr[G];
    float* out_ptr[G];
    const long long gate_step = direction == 0 ? BILSTM_GATE_ROWS / 4 : -(BILSTM_GATE_ROWS / 4);
    const long long out_step = direction == 0 ? 2 * BILSTM_HIDDEN : -(2 * BILSTM_HIDDEN);
    bool real[G];
    float4 gates[G];
    float c[G];
    {
        const bl_u32 frame0 = direction == 0 ? 0u : frames - 1u;
#pragma unroll
        for (int g = 0; g < G; ++g) {
            const bl_u32 slot_w = (bl_u32)(g * Q + mine);
            real[g] = slot_w < valid;
            const bl_u64 row0 = (bl_u64)(first_window + (real[g] ? slot_w : valid - 1u)) * frames + frame0;
            gate_ptr[g] = reinterpret_cast<const float4*>(proj + row0 * BILSTM_GATE_ROWS) + unit;
            out_ptr[g] = p.out + row0 * (2 * BILSTM_HIDDEN) + direction * BILSTM_HIDDEN + unit;
            gates[g] = __ldg(gate_ptr[g]);
            c[g] = 0.0f;
        }
    }

    const bl_u32 bar_addr0 = bl_cl_smem(&bar[0]);
    const bl_u32 h_addr0 = bl_cl_smem(&h_s[0][0][0][0]);
    const bl_u32 my_index = bl_cl_h_index(unit);
    // G = 2: this lane's push targets in each CTA q, mapped once: slot 0, quad 0, window `mine`,
    // its unit (the other slots and quads are fixed offsets from it; shared::cluster addresses
    // within one shared object are its mapped base plus the offset), and that CTA's first
    // mbarrier. G = 1 maps each push (H200 session 21 call 3: the one-quad kernel with the
    // G = 2 step changes ran TF32 batch 128 in 3.52 ms against 3.16).
    bl_u32 push0[S];
    bl_u32 push_bar0[S];
    if constexpr (G == 2) {
#pragma unroll
        for (int q = 0; q < S; ++q) {
            push0[q] = bl_cl_mapa(h_addr0 + ((bl_u32)mine * BL_CL_H_ROW + my_index) * (bl_u32)sizeof(float), (bl_u32)q);
            push_bar0[q] = bl_cl_mapa(bar_addr0, (bl_u32)q);
        }
    }
    bl_cl_init_step_barriers<2 * G>(tid, bar_addr0);
    bl_cl_cluster_sync();

    bool aborted = false;
    bool timed_out = false;
    // Thread 0 arms both quads' mbarriers of step s's slot (each expects GROUP_BYTES of pushes).
    auto arm = [&](bl_u32 s) {
        if (tid == 0) {
#pragma unroll
            for (int g = 0; g < G; ++g) {
                bl_mbar_arrive_expect(bar_addr0 + 8u * ((s & 1u) * G + (bl_u32)g), GROUP_BYTES);
            }
        }
    };
    // Quad g's gates of step s + 1 (if any): G = 2 right after its cell of step s
    // (cell_then_next_gates), G = 1 at the top of step s (after copying those of step s).
    auto next_gates = [&](int g, bl_u32 s) {
        if (s + 1u < frames) {
            gate_ptr[g] += gate_step;
            gates[g] = __ldg(gate_ptr[g]);
        }
    };
    // Waits (bounded) for every push of quad g's step s - 1 (s >= 1); false on the lost-partner
    // timeout or another CTA's error, for every lane of the warp alike.
    auto wait_quad = [&](int g, bl_u32 s) -> bool {
        const bool ok = bl_cl_wait(bar_addr0 + 8u * (((s - 1u) & 1u) * G + (bl_u32)g), ((s - 1u) >> 1) & 1u,
                                   p.spin_timeout_ns, p.error, &timed_out);
        return !__any_sync(BL_FULL_MASK, !ok);
    };
    // Pair q of quad g's products from slot `from` (windows ((q ^ wb1) << 1) | (s ^ wb0), s = 0, 1),
    // reduced over offset 1 (window bit 0: keep member 0, add the partner's member 1) into
    // v[q * ROWS ..].
    auto products_pair = [&](int g, bl_u32 from, int q, float (&v)[2 * ROWS]) {
        float a[2 * ROWS];
#pragma unroll
        for (int s = 0; s < 2; ++s) {
            const int w = ((q ^ wb1) << 1) | (s ^ wb0);
            const float* piece = &h_s[from][g][w][lane * BL_CL_PIECE_STRIDE];
            float h0[BL_CL_TERMS];
            bl_load8(h0, piece);
            float c0[ROWS];
#pragma unroll
            for (int i = 0; i < ROWS; ++i) {
                c0[i] = bl_dot_chain<BL_CL_TERMS>(r[i][0], h0);
            }
            float h1[BL_CL_TERMS];
            bl_load8(h1, piece + BL_CL_TERMS);
#pragma unroll
            for (int i = 0; i < ROWS; ++i) {
                if constexpr (FAST) {
                    // TF32 mode: the lane's 16 terms are one chain (chain `lane` of section 8),
                    // continued from its first 8 terms' value.
                    a[s * ROWS + i] = bl_dot_chain<BL_CL_TERMS>(r[i][1], h1, c0[i]);
                } else {
                    // FP32 mode: chains 2 lane and 2 lane + 1, the tree's first level.
                    a[s * ROWS + i] = c0[i] + bl_dot_chain<BL_CL_TERMS>(r[i][1], h1);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            v[q * ROWS + i] = a[i] + __shfl_xor_sync(BL_FULL_MASK, a[ROWS + i], 1);
        }
    };
    // Offsets 2 (window bit 1) and 4 (the unit bit): v[0 .. 4) are then this lane's four dots.
    auto reduce_rest = [&](float (&v)[2 * ROWS]) {
        bl_cl_reduce_level<2 * ROWS, 2 * ROWS, 2>(v);
        bl_cl_reduce_level<2 * ROWS, ROWS, 4>(v);
    };
    // This lane's cell of quad g from its gates and four dots (c[g] updated): the new h.
    auto cell = [&](int g, const float4& in, const float (&d)[2 * ROWS]) -> float {
        return bl_lstm_cell_g<FAST>(bl_preactivation(in.x, d[0], bias.x), bl_preactivation(in.y, d[1], bias.y),
                                    bl_preactivation(in.z, d[2], bias.z), bl_preactivation(in.w, d[3], bias.w),
                                    &c[g]);
    };
    // G = 2: quad g's cell of step s from its gates (the new h), then its gates of step s + 1.
    auto cell_then_next_gates = [&](int g, bl_u32 s, const float (&d)[2 * ROWS]) -> float {
        const float h = cell(g, gates[g], d);
        next_gates(g, s);
        return h;
    };
    // Quad g's h of step s: pushed to both CTAs' slot s % 2 (completing its mbarrier there) and
    // stored to the output (real windows only).
    auto publish = [&](int g, bl_u32 s, float h) {
        if (!stalled) {
            const bl_u32 idx = (s & 1u) * G + (bl_u32)g;  // slot s % 2, quad g
            if constexpr (G == 2) {
                const bl_u32 offset = idx * (bl_u32)(Q * BL_CL_H_ROW * sizeof(float));
#pragma unroll
                for (int q = 0; q < S; ++q) {
                    bl_cl_push(push0[q] + offset, h, push_bar0[q] + 8u * idx);
                }
            } else {
                const bl_u32 dst =
                    h_addr0 + ((idx * Q + (bl_u32)mine) * BL_CL_H_ROW + my_index) * (bl_u32)sizeof(float);
                const bl_u32 done = bar_addr0 + 8u * idx;
#pragma unroll
                for (int q = 0; q < S; ++q) {
                    bl_cl_push(bl_cl_mapa(dst, (bl_u32)q), h, bl_cl_mapa(done, (bl_u32)q));
                }
            }
        }
        if (real[g]) {
            *out_ptr[g] = bl_output_value(h, p.out_tf32);
        }
        out_ptr[g] += out_step;
    };
    float h_last[G];
    bl_u32 step = 0;
    if constexpr (G == 1) {
        for (; step < frames; ++step) {
            arm(step);
            const float4 in = gates[0];
            next_gates(0, step);
            // The four gates' recurrent dots of this lane's cell; +0.0f at step 0.
            float v[2 * ROWS];
#pragma unroll
            for (int i = 0; i < 2 * ROWS; ++i) {
                v[i] = 0.0f;
            }
            if (step > 0) {
                if (!wait_quad(0, step)) {
                    aborted = true;
                    break;
                }
                products_pair(0, (step - 1u) & 1u, 0, v);
                products_pair(0, (step - 1u) & 1u, 1, v);
                reduce_rest(v);
            }
            h_last[0] = cell(0, in, v);
            publish(0, step, h_last[0]);
        }
    } else {
        // Two quads, software-pipelined by half a step: in step s, after quad 0's wait, quad 1's
        // cell of step s - 1 runs between quad 0's product pairs, and after quad 1's wait, quad
        // 0's cell of step s between quad 1's, so each cell's dependent chain (exp, reciprocal,
        // tanh) overlaps the other quad's FMAs instead of running while both warps of a
        // scheduler wait on it; each h is pushed after the first pair of the other quad's
        // products. Same arithmetic per value, so the same bits. Slot reuse stays safe: a lane
        // pushes quad 1's h of step s - 1 (into slot (s - 1) % 2) after its own reads of quad 1's
        // slot (s - 2) % 2, and reaches the next writes of that slot (step s + 1) only through
        // the wait for every lane's push of step s; thread 0 re-arms a slot's mbarrier at step s
        // after its wait for the phase of step s - 2, which needs every push of that step.
        float pend[2 * ROWS];  // ... and its dots (the first four)
        // Step 0: no dots (h = 0); quad 0's cell now, quad 1's pending.
        if (frames > 0) {
            arm(0);
#pragma unroll
            for (int i = 0; i < 2 * ROWS; ++i) {
                pend[i] = 0.0f;
            }
            h_last[0] = cell_then_next_gates(0, 0, pend);
            publish(0, 0, h_last[0]);
            step = 1;
        }
        for (; step < frames; ++step) {
            const bl_u32 from = (step - 1u) & 1u;
            arm(step);
            float v0[2 * ROWS];
            if (!wait_quad(0, step)) {
                aborted = true;
                break;
            }
            const float h1 = cell_then_next_gates(1, step - 1u, pend);
            products_pair(0, from, 0, v0);
            publish(1, step - 1u, h1);
            products_pair(0, from, 1, v0);
            reduce_rest(v0);

            if (!wait_quad(1, step)) {
                aborted = true;
                break;
            }
            h_last[0] = cell_then_next_gates(0, step, v0);
            products_pair(1, from, 0, pend);
            publish(0, step, h_last[0]);
            products_pair(1, from, 1, pend);
            reduce_rest(pend);
        }
        if (!aborted && frames > 0) {
            h_last[1] = cell(1, gates[1], pend);
            publish(1, frames - 1u, h_last[1]);
        }
    }
    if (!aborted && frames > 0) {
#pragma unroll
        for (int g = 0; g < G; ++g) {
            if (real[g]) {
                bl_store_final_state(p.state_h, p.state_c, direction, p.batch, first_window + (bl_u32)(g * Q + mine),
                                     unit, h_last[g], c[g]);
            }
        }
    }

    if (timed_out) {
        bl_exchange_report_lost(p.error, p.layer, direction, step);
    }
    // Every push into this CTA has landed before it may leave: each quad's last phase.
    if (tid == 0 && !aborted && frames > 0) {
        const bl_u32 last = frames - 1u;
#pragma unroll
        for (int g = 0; g < G; ++g) {
            bool late = false;
            const bool landed = bl_cl_wait(bar_addr0 + 8u * ((last & 1u) * G + (bl_u32)g), (last >> 1) & 1u,
                                           p.spin_timeout_ns, p.error, &late);
            if (!landed && late) {
                bl_exchange_report_lost(p.error, p.layer, direction, frames);
            }
        }
    }
    bl_cl_cluster_sync();
    if (p.progress != nullptr && rank == 0u && tid == 0 && !aborted) {
        bl_cl_report_end(p.progress, first_window, valid, direction, frames);
    }
}

// ---- The fixed-point tensor-core recurrence (bilstm_recurrence_fixed8 / 8c2 / 8c4) --------------
// Launch contract (the file's, with these differences): a cluster of S CTAs per direction and
// tile of W = 8 windows: fixed8 (S = 1), fixed8c2 (S = 2), fixed8c4 (S = 4) (a 16-window
// one-CTA kernel, measured 2 % faster than fixed8 at batch 1024 in session 23, was dropped: at
// 512 threads its registers spilled); grid (2 * ceil(batch / 8) * S, 1, 1) with the cluster
// dimension (S, 1, 1), cluster x = blockIdx.x / S runs windows (x / 2) 8 .. (x / 2) 8 + 7 that
// exist in direction x % 2; block (BILSTM_FIXED_THREADS / S, 1, 1); no dynamic shared memory,
// static bl_fx_shared (two slots of two byte planes of 8 rows of BILSTM_FIXED_H_ROW_BYTES bytes
// and two mbarriers: 4,624 bytes). TF32 mode only (tf32_numerics must be nonzero, else a
// trap): numerics.cuh section 9 for the recurrent product,
// sections 2, 6 and 7 for the rest, so every window's bits are the same in every entry and at
// every batch (not those of the other kernels' section 8). S = 1: nothing waits on another CTA
// (stall_cta is ignored). S > 1: each CTA pushes its units' bytes of h into every CTA of the
// cluster with st.async and waits for the step's 256 W bytes on its own mbarrier, bounded by
// spin_timeout_ns (a lost partner: error words as the other cluster kernels; stall_cta never
// pushes). out_tf32 is honoured; final states as the other kernels; progress reported once,
// after the last step. Compute capability 9.0 or later (mma.sync m16n8k32 with s8/u8 operands;
// built inside this file's sm_90 section).
//
// Thread mapping (S = 1; with S > 1 CTA rank r holds units 128 r / S + the same, with 16 / S
// warps): warp w (of 16) owns units 8 w .. 8 w + 7 as two m16 tiles of gate rows: tile 0
// rows 0..7 gate i, rows 8..15 gate f; tile 1 rows 0..7 gate g, rows 8..15 gate o (row r of a tile:
// unit 8 w + r % 8). Its R is quantised at entry into A fragments (a[tile][k chunk of 32][byte
// plane][4 registers], 64 registers). Per step and tile of 8 windows, h_{s-1} comes from the
// shared byte planes by ldmatrix (B fragments: window = column, 16 k a row of an 8x8 b16
// matrix), and per k chunk and tile four mma.sync m16n8k32 add the byte products into three
// exact sums (A: high x high; B: high x low and low x high; C: low x low). The accumulator
// layout then gives lane (gid = lane / 4, tig = lane % 4) all four gates of unit 8 w + gid in
// windows 2 tig and 2 tig + 1 of the tile: the lane runs those two cells, stores h (the real
// windows), and writes q_h's two bytes into the other slot's planes (S = 1: one block barrier
// a step), or (S > 1) four lanes gather four units' bytes into one word by shuffles and each
// pushes its word into every CTA.
constexpr int BL_FX_WARPS = BILSTM_FIXED_THREADS / BILSTM_WARP_THREADS;
constexpr int BL_FX_STRIDE = BILSTM_FIXED_H_ROW_BYTES;
static_assert(BL_FX_WARPS * 8 == BILSTM_HIDDEN, "a warp owns 8 units: two m16 tiles of gate rows");
static_assert(BL_FX_STRIDE % 16 == 0 && (BL_FX_STRIDE / 4) % 32 == 4,
              "rows 16-byte aligned and 4 banks apart: an ldmatrix phase's 8 rows hit distinct banks");
static_assert(BILSTM_HIDDEN == 128, "four k chunks of 32");

constexpr int BL_FX_WINDOWS = BILSTM_FIXED_WINDOWS;  // windows a tile: the MMA's N
struct __align__(16) bl_fx_shared {
    unsigned char h[2][2][BL_FX_WINDOWS][BL_FX_STRIDE];  // [slot][plane: 0 high (s8), 1 low (u8)][window][unit]
    bl_u64 bar[2];                                // clusters of S > 1: slot s's pushes (step s)
};

// d += a b over one m16n8k32 tile with the given byte types (exact 32-bit integer sums).
#define BL_FX_MMA(NAME, AT, BT)                                                                                \
    __device__ __forceinline__ void NAME(int (&d)[4], const bl_u32 (&a)[4], bl_u32 b0, bl_u32 b1) {          \
        asm("mma.sync.aligned.m16n8k32.row.col.s32." AT "." BT ".s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
            "{%0,%1,%2,%3};"                                                                                  \
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])                                                  \
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));                                  \
    }
BL_FX_MMA(bl_fx_mma_ss, "s8", "s8")
BL_FX_MMA(bl_fx_mma_su, "s8", "u8")
BL_FX_MMA(bl_fx_mma_us, "u8", "s8")
BL_FX_MMA(bl_fx_mma_uu, "u8", "u8")
#undef BL_FX_MMA

// Four 8x8 b16 matrices from shared memory (this lane gives row lane % 8 of matrix lane / 8).
__device__ __forceinline__ void bl_fx_ldsm4(bl_u32 (&r)[4], bl_u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

// One byte to shared::cta address `addr`.
__device__ __forceinline__ void bl_fx_st8(bl_u32 addr, bl_u32 v) {
    asm volatile("st.shared.u8 [%0], %1;" : : "r"(addr), "r"(v) : "memory");
}

// The fixed-point cluster kernels' exit (S > 1): a lost partner seen in the step loop (timed_out,
// at `step`) is reported; thread 0 waits, bounded, for the last step's phase on the step
// mbarriers at `bar0` (every push into this CTA has landed before it may leave), reporting a
// partner lost then; the cluster meets once.
__device__ __forceinline__ void bl_fx_leave_cluster(const bl_recurrence_cluster_params& p, int tid, bl_u32 bar0,
                                                    bl_u32 direction, bl_u32 step, bl_u32 frames, bool timed_out,
                                                    bool aborted) {
    if (timed_out) {
        bl_exchange_report_lost(p.error, p.layer, direction, step);
    }
    if (tid == 0 && !aborted && frames > 0) {
        const bl_u32 last = frames - 1u;
        bool late = false;
        const bool landed = bl_cl_wait(bar0 + 8u * (last & 1u), (last >> 1) & 1u, p.spin_timeout_ns, p.error, &late);
        if (!landed && late) {
            bl_exchange_report_lost(p.error, p.layer, direction, frames);
        }
    }
    bl_cl_cluster_sync();
}

// A row's scales from this lane's largest magnitude `m` of it, the row's other parts held by
// lanes tig ^ 1 and tig ^ 2: the dot's scale 2^(e - 30) and the quantiser's 2^(15 - e).
__device__ __forceinline__ void bl_fx_row_scales(float m, float& scale, float& up) {
    m = fmaxf(m, __shfl_xor_sync(BL_FULL_MASK, m, 1));
    m = fmaxf(m, __shfl_xor_sync(BL_FULL_MASK, m, 2));
    const int e = bl_fx_row_exponent(m);
    scale = bl_fx_scale(e);
    up = bl_fx_up(e);
}

// The start of step `step` in a cluster (S > 1; nothing for S = 1): thread 0 arms the step's
// slot mbarrier for `step_bytes`, then every thread waits, bounded, for the previous step's
// phase. False (in every lane) when a wait failed: a lost partner (`*timed_out` set in the
// lanes that saw it) or another CTA's error.
template <int S>
__device__ __forceinline__ bool bl_fx_step_begin(const bl_recurrence_cluster_params& p, int tid, bl_u32 bar0,
                                                 bl_u32 step, bl_u32 step_bytes, bool* timed_out) {
    if constexpr (S > 1) {
        if (tid == 0) {
            bl_mbar_arrive_expect(bar0 + 8u * (step & 1u), step_bytes);
        }
        if (step > 0) {
            const bool ok =
                bl_cl_wait(bar0 + 8u * ((step - 1u) & 1u), ((step - 1u) >> 1) & 1u, p.spin_timeout_ns, p.error, timed_out);
            if (__any_sync(BL_FULL_MASK, !ok)) {
                return false;
            }
        }
    }
    return true;
}

// The end of a tensor-core fixed-point kernel, after its final states: S > 1, the cluster exit
// (bl_fx_leave_cluster); S = 1, a block barrier that orders every thread's output stores before
// thread 0's fence; then rank 0's thread 0 reports the tile's windows done.
template <int S>
__device__ __forceinline__ void bl_fx_tile_end(const bl_recurrence_cluster_params& p, bl_u32 rank, int tid,
                                               bl_u32 direction, bl_u32 first_window, bl_u32 valid,
                                               bl_u32 frames, bl_u32 bar0, bl_u32 step, bool timed_out,
                                               bool aborted) {
    if constexpr (S > 1) {
        bl_fx_leave_cluster(p, tid, bar0, direction, step, frames, timed_out, aborted);
    } else {
        __syncthreads();
    }
    if (p.progress != nullptr && rank == 0u && tid == 0 && !aborted) {
        bl_cl_report_end(p.progress, first_window, valid, direction, frames);
    }
}

// S CTAs a cluster (1, 2 or 4) split the 128 units: CTA rank r owns units 128 r / S ..
// 128 (r + 1) / S - 1 with 16 / S warps of 8 units.
template <int S>
__device__ __forceinline__ void bl_recurrence_fixed(const bl_recurrence_cluster_params& p) {
    constexpr int W = BL_FX_WINDOWS;
    constexpr int MT = 2;  // m16 tiles a warp: gates (i, f) and (g, o) of its 8 units
    constexpr int UNITS = BILSTM_HIDDEN / S;
    static_assert(S == 1 || S == 2 || S == 4, "clusters of 1, 2 or 4 CTAs");
    auto& sh = bl_cl_static_shared<bl_fx_shared>();
    const bl_u32 cluster = blockIdx.x / (bl_u32)S;
    const bl_u32 rank = S == 1 ? 0u : bl_cl_rank();
    const bl_u32 direction = cluster % 2u;
    const bl_u32 first_window = (cluster / 2u) * (bl_u32)W;
    if (first_window >= p.batch) {
        return;  // never with the documented grid; the whole cluster leaves before any barrier
    }
    const bl_u32 valid = p.batch - first_window < (bl_u32)W ? p.batch - first_window : (bl_u32)W;
    const int tid = threadIdx.x;
    const int warp = tid / BILSTM_WARP_THREADS;
    const int lane = tid % BILSTM_WARP_THREADS;
    const int gid = lane >> 2;
    const int tig = lane & 3;
    const bl_u32 frames = p.frames;
    const bool stalled = p.stall_cta == (int)blockIdx.x;
    const float* recurrent = direction == 0 ? p.recurrent[0] : p.recurrent[1];
    const float* proj = direction == 0 ? p.proj[0] : p.proj[1];
    const float* bias_in = direction == 0 ? p.bias[0] : p.bias[1];
    // This lane's unit: its R rows are the four gates of it, its cells are that unit.
    const bl_u32 unit = rank * (bl_u32)UNITS + (bl_u32)(8 * warp + gid);

    // R as A fragments: a[mt][kc][plane][reg]; registers 0 / 1 are rows gid / gid + 8 at
    // k = 32 kc + 4 tig + 0..3, registers 2 / 3 the same rows at k + 16 (byte i = k + i).
    bl_u32 a[MT][4][2][4];
    float scale[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const bl_u32 row = unit * BILSTM_GATES + (bl_u32)(2 * mt + half);
            const float* src = recurrent + (bl_u64)row * BILSTM_HIDDEN;
            float v[4][2][4];
            float m = 0.0f;
#pragma unroll
            for (int kc = 0; kc < 4; ++kc) {
#pragma unroll
                for (int part = 0; part < 2; ++part) {
                    const float4 x = __ldg(reinterpret_cast<const float4*>(src + kc * 32 + part * 16 + tig * 4));
                    v[kc][part][0] = x.x;
                    v[kc][part][1] = x.y;
                    v[kc][part][2] = x.z;
                    v[kc][part][3] = x.w;
                    m = fmaxf(m, fmaxf(fmaxf(fabsf(x.x), fabsf(x.y)), fmaxf(fabsf(x.z), fabsf(x.w))));
                }
            }
            // The row's largest magnitude: the four lanes of a gid share the row.
            float up;
            bl_fx_row_scales(m, scale[mt][half], up);
#pragma unroll
            for (int kc = 0; kc < 4; ++kc) {
#pragma unroll
                for (int part = 0; part < 2; ++part) {
                    bl_u32 hi;
                    bl_u32 lo;
                    bl_fx_pack4(v[kc][part], up, hi, lo);
                    a[mt][kc][0][part * 2 + half] = hi;
                    a[mt][kc][1][part * 2 + half] = lo;
                }
            }
        }
    }

    const float4 bias = __ldg(reinterpret_cast<const float4*>(bias_in) + unit);
    // This lane's cells: windows 2 tig + j of the tile (a copy of the last real window where
    // that one does not exist, computed and never stored).
    bl_u64 window_row[2];  // the cell window's first projection / output row
    bool real[2];
    float c[2];
    float h_last[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        const bl_u32 slot_w = (bl_u32)(2 * tig + j);
        real[j] = slot_w < valid;
        window_row[j] = (bl_u64)(first_window + (real[j] ? slot_w : valid - 1u)) * frames;
        c[j] = 0.0f;
        h_last[j] = 0.0f;
    }
    const bl_u32 h_base = bl_cl_smem(&sh.h[0][0][0][0]);
    constexpr bl_u32 PLANE = (bl_u32)(W * BL_FX_STRIDE);
    // ldmatrix row address of this lane: matrix lane / 8 (16 k each), row (window) lane % 8.
    const bl_u32 ld_off = (bl_u32)((lane & 7) * BL_FX_STRIDE + (lane >> 3) * 16);
    // Clusters: every CTA receives all 128 units' two bytes of each window a step.
    constexpr bl_u32 STEP_BYTES = (bl_u32)(2 * BILSTM_HIDDEN * W);
    const bl_u32 bar0 = bl_cl_smem(&sh.bar[0]);
    // The word this lane pushes (S > 1): item r = gid % 4 of its group of four units
    // (units 4 (gid / 4) .. + 3 of the warp): plane r / 2, window 2 tig + r % 2.
    const int item = gid & 3;
    const bl_u32 word_off =
        (bl_u32)((item >> 1) * (int)PLANE + (2 * tig + (item & 1)) * BL_FX_STRIDE) + (unit - (bl_u32)(gid & 3));
    if constexpr (S > 1) {
        bl_cl_init_step_barriers(tid, bar0);
        bl_cl_cluster_sync();
    }
    bool aborted = false;
    bool timed_out = false;

    bl_u32 step = 0;
    for (; step < frames; ++step) {
        const bl_u32 frame = direction == 0 ? step : frames - 1u - step;
        // h_{s-1} in slot (s - 1) % 2, h_s into slot s % 2. S = 1: the block barrier at the
        // end of each step orders every write of a slot before the next step's reads and every
        // read of it before the writes two steps on. S > 1: every byte of slot s % 2 arrives by
        // st.async on bar[s % 2] (armed here for the step), each step waits for the previous
        // one's phase; a CTA pushes into slot (s + 1) % 2 only after its wait for every CTA's
        // step-s pushes, each made after that CTA's own reads of the slot (step s).
        const bl_u32 from = h_base + ((step + 1u) & 1u) * 2u * PLANE;
        const bl_u32 to = h_base + (step & 1u) * 2u * PLANE;
        if (!bl_fx_step_begin<S>(p, tid, bar0, step, STEP_BYTES, &timed_out)) {
            aborted = true;
            break;
        }
        float4 gin[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            gin[j] = __ldg(reinterpret_cast<const float4*>(proj + (window_row[j] + frame) * BILSTM_GATE_ROWS) +
                           unit);
        }
        float dot[MT][4];
        if (step == 0) {
            // h = 0: the dot is +0.0f (what the sums give).
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    dot[mt][i] = 0.0f;
                }
            }
        } else {
            // The three exact sums of each tile (numerics.cuh section 9: A, B, C).
            int acc[3][MT][4];
#pragma unroll
            for (int s3 = 0; s3 < 3; ++s3) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        acc[s3][mt][i] = 0;
                    }
                }
            }
#pragma unroll
            for (int kc2 = 0; kc2 < 2; ++kc2) {
                // B fragments of k chunks 2 kc2 and 2 kc2 + 1: bh / bl[2 sub], [2 sub + 1].
                bl_u32 bh[4];
                bl_u32 bl[4];
                const bl_u32 at = from + ld_off + (bl_u32)(kc2 * 64);
                bl_fx_ldsm4(bh, at);
                bl_fx_ldsm4(bl, at + PLANE);
#pragma unroll
                for (int sub = 0; sub < 2; ++sub) {
                    const int kc = 2 * kc2 + sub;
                    // Ordered so that the two products into B are four instructions apart.
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        bl_fx_mma_ss(acc[0][mt], a[mt][kc][0], bh[2 * sub], bh[2 * sub + 1]);
                    }
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        bl_fx_mma_su(acc[1][mt], a[mt][kc][0], bl[2 * sub], bl[2 * sub + 1]);
                    }
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        bl_fx_mma_uu(acc[2][mt], a[mt][kc][1], bl[2 * sub], bl[2 * sub + 1]);
                    }
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        bl_fx_mma_us(acc[1][mt], a[mt][kc][1], bh[2 * sub], bh[2 * sub + 1]);
                    }
                }
            }
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    dot[mt][i] = bl_fx_dot(acc[0][mt][i], acc[1][mt][i], acc[2][mt][i], scale[mt][i >> 1]);
                }
            }
        }
        // Window 2 tig + j of the tile: gate i / f from tile 0's elements j / 2 + j, g / o
        // from tile 1's.
        bl_u32 bytes[4];  // item r: the high (r < 2) or low byte of window 2 tig + r % 2
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const float h = bl_lstm_cell_g<true>(bl_preactivation(gin[j].x, dot[0][j], bias.x),
                                                 bl_preactivation(gin[j].y, dot[0][2 + j], bias.y),
                                                 bl_preactivation(gin[j].z, dot[1][j], bias.z),
                                                 bl_preactivation(gin[j].w, dot[1][2 + j], bias.w), &c[j]);
            h_last[j] = h;
            if (real[j]) {
                p.out[(window_row[j] + frame) * (2 * BILSTM_HIDDEN) + direction * BILSTM_HIDDEN + unit] =
                    bl_output_value(h, p.out_tf32);
            }
            const int q = bl_fx_quantise_h(h);
            bytes[j] = (bl_u32)(q >> 8) & 0xffu;
            bytes[2 + j] = (bl_u32)q & 0xffu;
        }
        if constexpr (S == 1) {
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const bl_u32 dst = to + (bl_u32)((2 * tig + j) * BL_FX_STRIDE) + unit;
                bl_fx_st8(dst, bytes[j]);
                bl_fx_st8(dst + PLANE, bytes[2 + j]);
            }
        } else {
            // Four lanes (gid 4 g4 .. 4 g4 + 3, one tig) hold four consecutive units' bytes of
            // the same four items; lane item r gathers item r of all four (round k: every
            // lane sends its item (r - k) % 4 and receives its own item from lane r + k),
            // then pushes that word into every CTA of the cluster.
            bl_u32 word = 0u;
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const int send_item = (item - k) & 3;
                const bl_u32 send = send_item == 0 ? bytes[0]
                                    : send_item == 1 ? bytes[1]
                                    : send_item == 2 ? bytes[2]
                                                     : bytes[3];
                const int src = (item + k) & 3;
                const bl_u32 got = __shfl_sync(BL_FULL_MASK, send, ((gid & ~3) + src) * 4 + tig);
                word |= got << (8 * src);
            }
            if (!stalled) {
                const bl_u32 dst = to + word_off;
                const bl_u32 done = bar0 + 8u * (step & 1u);
#pragma unroll
                for (int q = 0; q < S; ++q) {
                    bl_cl_push(bl_cl_mapa(dst, (bl_u32)q), __uint_as_float(word), bl_cl_mapa(done, (bl_u32)q));
                }
            }
        }
        if constexpr (S == 1) {
            __syncthreads();
        }
    }
    if (!aborted && frames > 0) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            if (real[j]) {
                bl_store_final_state(p.state_h, p.state_c, direction, p.batch, first_window + (bl_u32)(2 * tig + j),
                                     unit, h_last[j], c[j]);
            }
        }
    }
    bl_fx_tile_end<S>(p, rank, tid, direction, first_window, valid, frames, bar0, step, timed_out, aborted);
}

// d = c + the sum of the four byte products of a and b, signedness per operand (exact).
#define BL_FX_DP4A(NAME, AT, BT)                                                            \
    __device__ __forceinline__ int NAME(bl_u32 a, bl_u32 b, int c) {                       \
        int d;                                                                               \
        asm("dp4a." AT "." BT " %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));       \
        return d;                                                                            \
    }
BL_FX_DP4A(bl_fx_dp4a_ss, "s32", "s32")
BL_FX_DP4A(bl_fx_dp4a_su, "s32", "u32")
BL_FX_DP4A(bl_fx_dp4a_us, "u32", "s32")
BL_FX_DP4A(bl_fx_dp4a_uu, "u32", "u32")
#undef BL_FX_DP4A

// ---- The fixed-point tensor-core recurrence of 4-window tiles (bilstm_recurrence_fixed4*) -------
// numerics.cuh section 9 (the same bits as fixed8 and fixed1c*) on the tensor cores for small
// and middle batches: a tile of W = 4 windows a cluster of S CTAs (fixed4: S = 1, fixed4c2 /
// 4c4 / 4c8: S = 2 / 4 / 8), BILSTM_FIXED_THREADS / S threads a CTA, 8 units a warp. The MMA's
// 8 columns are the tile's (window, plane) pairs: column 2 w + p holds plane p of window w's
// q_h, p = 0 the signed high byte h1, p = 1 the low byte h0 stored as h0 - 128 (a signed byte:
// h0 ^ 0x80), so that one s8 x s8 and one u8 x s8 m16n8k32 per k chunk and m16 tile give all
// four byte products (fixed8 needs four for its 8 windows: the same tensor work a window). The
// low plane's offset comes back exactly: sum q1 h0 = D + 128 sum q1 and sum q0 h0 = D + 128
// sum q0, so T = B 2^8 + C adds the row's constant 2^15 sum q1 + 2^7 sum q0 (modulo 2^32,
// computed at entry).
// Launch contract (the file's, with these differences): tiles of WT = 4 windows (fixed4*) or
// WT = 2 (fixed2c4 / fixed2c8: the same kernel with the tile's last two columns left zero);
// grid (2 * ceil(batch / WT) * S, 1, 1) with the cluster dimension (S, 1, 1); cluster x =
// blockIdx.x / S runs windows (x / 2) WT .. (x / 2) WT + WT - 1 that exist in direction x % 2;
// block (BILSTM_FIXED_THREADS / S, 1, 1); no
// dynamic shared memory, static bl_fx4_shared (two slots of [window][plane][unit] bytes and two
// mbarriers: 2,064 bytes). TF32 mode only (tf32_numerics nonzero, else a trap); out_tf32
// honoured; final states as the other kernels; progress reported once, after the last step.
// S = 1: one block barrier a step, nothing waits on another CTA (stall_cta ignored). S > 1:
// per step and valid window, the lanes of each warp gather their 8 units' bytes of each plane
// into 8 bytes and push them with st.async into every CTA of the cluster; each CTA waits,
// bounded by spin_timeout_ns, for the step's 256 bytes a valid window on its own mbarrier (a lost
// partner: error words as the other cluster kernels; stall_cta never pushes). Windows past the
// batch are never stored, and never pushed (S > 1: their columns stay zero bytes); S = 1 writes
// their bytes too, into their own columns only (each column feeds only its own window's sums).
// Thread mapping: warp w of CTA rank r owns units u0 = 128 r / S + 8 w .. u0 + 7 as two m16
// tiles of gate rows: tile t row j < 8 is gate j / 4 (i, f) of unit u0 + 4 t + j % 4, row
// j >= 8 gate 2 + (j - 8) / 4 (g, o) of the same unit. The k order inside the fragments is a
// permutation (the sums are exact in any order): fragment k 4 tig + i of chunk kc is unit
// 32 tig + 8 kc + i, fragment k 16 + 4 tig + i unit 32 tig + 8 kc + 4 + i, so that lane (gid,
// tig) reads its B operand as 32 contiguous bytes (two 16-byte loads a step) and its R row
// entries as 8 float4 at entry. After the products lane (gid, tig) holds rows gid and gid + 8
// of both tiles for window tig: lanes gid < 4 keep tile 0 and lanes gid >= 4 tile 1, swapping
// the other two gates with lane ^ 16, so that lane (gid, tig) runs the cell of unit u0 + gid
// in window tig.
constexpr int BL_FX4_WINDOWS = BILSTM_FIXED4_WINDOWS;
static_assert(BL_FX4_WINDOWS == 4, "the 8 MMA columns are 4 windows x 2 byte planes");
struct __align__(16) bl_fx4_shared {
    unsigned char h[2][BL_FX4_WINDOWS][2][BILSTM_HIDDEN];  // [slot][window][plane: h1, h0 - 128][unit]
    bl_u64 bar[2];
};

// Pushes two words to shared::cluster address `dst` (8-byte aligned), completing 8 bytes on
// mbarrier `bar` (a shared::cluster address in the same CTA as dst).
__device__ __forceinline__ void bl_cl_push2(bl_u32 dst, bl_u32 lo, bl_u32 hi, bl_u32 bar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];"
                 :
                 : "r"(dst), "r"(lo), "r"(hi), "r"(bar)
                 : "memory");
}

template <int S, int WT>
__device__ __forceinline__ void bl_recurrence_fixed4(const bl_recurrence_cluster_params& p) {
    constexpr int W = BL_FX4_WINDOWS;
    // Windows a tile: W (fixed4*), or 2 (fixed2c4 / 2c8: columns 4-7 stay zero bytes and lanes
    // tig 2, 3 run copies, never stored or pushed, as in a partial tile).
    static_assert(WT == W || WT == BILSTM_FIXED2_WINDOWS, "tiles of 4 or 2 windows");
    constexpr int UNITS = BILSTM_HIDDEN / S;
    static_assert(S == 1 || S == 2 || S == 4 || S == 8, "clusters of 1, 2, 4 or 8 CTAs");
    static_assert(UNITS % 8 == 0 && BILSTM_FIXED_THREADS / S == 4 * UNITS, "a warp of 32 lanes a block of 8 units");
    auto& sh = bl_cl_static_shared<bl_fx4_shared>();
    const bl_u32 cluster = blockIdx.x / (bl_u32)S;
    const bl_u32 rank = S == 1 ? 0u : bl_cl_rank();
    const bl_u32 direction = cluster % 2u;
    const bl_u32 first_window = (cluster / 2u) * (bl_u32)WT;
    if (first_window >= p.batch) {
        return;  // never with the documented grid; the whole cluster leaves before any barrier
    }
    const bl_u32 valid = p.batch - first_window < (bl_u32)WT ? p.batch - first_window : (bl_u32)WT;
    const int tid = threadIdx.x;
    const int warp = tid / BILSTM_WARP_THREADS;
    const int lane = tid % BILSTM_WARP_THREADS;
    const int gid = lane >> 2;
    const int tig = lane & 3;
    const bl_u32 frames = p.frames;
    const bool stalled = p.stall_cta == (int)blockIdx.x;
    const float* recurrent = direction == 0 ? p.recurrent[0] : p.recurrent[1];
    const float* proj = direction == 0 ? p.proj[0] : p.proj[1];
    const float* bias_in = direction == 0 ? p.bias[0] : p.bias[1];
    const bl_u32 u0 = rank * (bl_u32)UNITS + (bl_u32)(8 * warp);
    const bl_u32 unit = u0 + (bl_u32)gid;  // this lane's cell

    // R as A fragments a[t][kc][plane][reg] (registers 0 / 1: rows gid / gid + 8 at fragment k
    // 4 tig .. + 3; 2 / 3: at 16 + 4 tig .. + 3), each row's scale and offset constant.
    bl_u32 a[2][4][2][4];
    float scale[2][2];
    bl_u32 offset[2][2];
#pragma unroll
    for (int t = 0; t < 2; ++t) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int gate = half == 0 ? gid / 4 : 2 + gid / 4;
            const bl_u32 row = (u0 + (bl_u32)(4 * t + gid % 4)) * BILSTM_GATES + (bl_u32)gate;
            const float4* src = reinterpret_cast<const float4*>(recurrent + (bl_u64)row * BILSTM_HIDDEN + 32 * tig);
            float v[8][4];
            float m = 0.0f;
#pragma unroll
            for (int q = 0; q < 8; ++q) {
                const float4 x = __ldg(src + q);
                v[q][0] = x.x;
                v[q][1] = x.y;
                v[q][2] = x.z;
                v[q][3] = x.w;
                m = fmaxf(m, fmaxf(fmaxf(fabsf(x.x), fabsf(x.y)), fmaxf(fabsf(x.z), fabsf(x.w))));
            }
            // The row's largest magnitude: its four tig lanes hold 32 terms each.
            float up;
            bl_fx_row_scales(m, scale[t][half], up);
            int sum_hi = 0;
            int sum_lo = 0;
#pragma unroll
            for (int kc = 0; kc < 4; ++kc) {
#pragma unroll
                for (int part = 0; part < 2; ++part) {
                    bl_u32 hi;
                    bl_u32 lo;
                    bl_fx_pack4(v[2 * kc + part], up, hi, lo);
                    a[t][kc][0][2 * part + half] = hi;
                    a[t][kc][1][2 * part + half] = lo;
                    sum_hi = bl_fx_dp4a_ss(hi, 0x01010101u, sum_hi);
                    sum_lo = bl_fx_dp4a_uu(lo, 0x01010101u, sum_lo);
                }
            }
            sum_hi += __shfl_xor_sync(BL_FULL_MASK, sum_hi, 1);
            sum_hi += __shfl_xor_sync(BL_FULL_MASK, sum_hi, 2);
            sum_lo += __shfl_xor_sync(BL_FULL_MASK, sum_lo, 1);
            sum_lo += __shfl_xor_sync(BL_FULL_MASK, sum_lo, 2);
            offset[t][half] = (bl_u32)sum_hi * 32768u + (bl_u32)sum_lo * 128u;
        }
    }

    const float4 bias = __ldg(reinterpret_cast<const float4*>(bias_in) + unit);
    // This lane's cell: window tig of the tile (a copy of the last real window where that one
    // does not exist, computed and never stored or pushed).
    const bool real = (bl_u32)tig < valid;
    const bl_u64 window_row = (bl_u64)(first_window + (real ? (bl_u32)tig : valid - 1u)) * frames;
    const float4* gates_at = reinterpret_cast<const float4*>(proj) + unit;
    float4 gin_next;
    {
        const bl_u32 frame0 = direction == 0 ? 0u : frames - 1u;
        gin_next = frames > 0 ? __ldg(gates_at + (window_row + frame0) * (BILSTM_GATE_ROWS / 4)) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float c = 0.0f;
    float h_last = 0.0f;

    constexpr bl_u32 SLOT = (bl_u32)(W * 2 * BILSTM_HIDDEN);
    const bl_u32 h_base = bl_cl_smem(&sh.h[0][0][0][0]);
    // This lane's B operand: column gid = (window gid / 2, plane gid % 2), units 32 tig .. + 31.
    const bl_u32 ld_off = (bl_u32)((gid >> 1) * 2 * BILSTM_HIDDEN + (gid & 1) * BILSTM_HIDDEN + 32 * tig);
    const bl_u32 bar0 = bl_cl_smem(&sh.bar[0]);
    // Both slots start as zero bytes: with S > 1 the columns of windows past the batch stay so.
    for (int i = tid; i < (int)(2 * SLOT / 4); i += BILSTM_FIXED_THREADS / S) {
        reinterpret_cast<bl_u32*>(&sh.h[0][0][0][0])[i] = 0u;
    }
    if constexpr (S > 1) {
        bl_cl_init_step_barriers(tid, bar0);
        bl_cl_cluster_sync();
    } else {
        __syncthreads();
    }
    // Bytes pushed into each CTA a step: both planes of every unit of every valid window.
    const bl_u32 step_bytes = valid * (bl_u32)(2 * BILSTM_HIDDEN);
    // The pushers (S > 1): lane gid 0 of each tig sends the high plane's 8 bytes of the warp's
    // units, lane gid 4 the low plane's, for window tig.
    const bool pusher = (gid & 3) == 0 && real && !stalled;
    const bl_u32 push_off = (bl_u32)(tig * 2 * BILSTM_HIDDEN + (gid >> 2) * BILSTM_HIDDEN) + u0;
    bool aborted = false;
    bool timed_out = false;

    bl_u32 step = 0;
    for (; step < frames; ++step) {
        const bl_u32 frame = direction == 0 ? step : frames - 1u - step;
        // Slots and their order as bl_recurrence_fixed's.
        const bl_u32 from = h_base + ((step + 1u) & 1u) * SLOT;
        const bl_u32 to = h_base + (step & 1u) * SLOT;
        if (!bl_fx_step_begin<S>(p, tid, bar0, step, step_bytes, &timed_out)) {
            aborted = true;
            break;
        }
        const float4 gin = gin_next;
        if (step + 1u < frames) {
            const bl_u32 next = direction == 0 ? step + 1u : frames - 2u - step;
            gin_next = __ldg(gates_at + (window_row + next) * (BILSTM_GATE_ROWS / 4));
        }
        float dot[2][2];  // [tile][half]
        if (step == 0) {
#pragma unroll
            for (int t = 0; t < 2; ++t) {
                dot[t][0] = 0.0f;
                dot[t][1] = 0.0f;
            }
        } else {
            const uint4 x0 = *reinterpret_cast<const uint4*>(&sh.h[0][0][0][0] + (from - h_base) + ld_off);
            const uint4 x1 = *reinterpret_cast<const uint4*>(&sh.h[0][0][0][0] + (from - h_base) + ld_off + 16);
            const bl_u32 b[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
            int dh[2][4];
            int dl[2][4];
#pragma unroll
            for (int t = 0; t < 2; ++t) {
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    dh[t][i] = 0;
                    dl[t][i] = 0;
                }
            }
#pragma unroll
            for (int kc = 0; kc < 4; ++kc) {
#pragma unroll
                for (int t = 0; t < 2; ++t) {
                    bl_fx_mma_ss(dh[t], a[t][kc][0], b[2 * kc], b[2 * kc + 1]);
                    bl_fx_mma_us(dl[t], a[t][kc][1], b[2 * kc], b[2 * kc + 1]);
                }
            }
            // Element 2 half + 0: (row, high plane), + 1: (row, low plane - 128) of window tig.
#pragma unroll
            for (int t = 0; t < 2; ++t) {
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const bl_u32 tt = ((bl_u32)dh[t][2 * half + 1] + (bl_u32)dl[t][2 * half]) * 256u +
                                      (bl_u32)dl[t][2 * half + 1] + offset[t][half];
                    dot[t][half] = bl_fx_dot_t(dh[t][2 * half], (int)tt, scale[t][half]);
                }
            }
        }
        // Lanes gid < 4 hold gates (i, g) of both tiles' unit gid % 4, lanes gid >= 4 (f, o):
        // the low lanes keep tile 0, the high lanes tile 1.
        const bool low = gid < 4;
        const float send0 = low ? dot[1][0] : dot[0][0];
        const float send1 = low ? dot[1][1] : dot[0][1];
        const float got0 = __shfl_xor_sync(BL_FULL_MASK, send0, 16);
        const float got1 = __shfl_xor_sync(BL_FULL_MASK, send1, 16);
        const float di = low ? dot[0][0] : got0;
        const float dg = low ? dot[0][1] : got1;
        const float df = low ? got0 : dot[1][0];
        const float d_o = low ? got1 : dot[1][1];
        const float h = bl_lstm_cell_g<true>(bl_preactivation(gin.x, di, bias.x), bl_preactivation(gin.y, df, bias.y),
                                             bl_preactivation(gin.z, dg, bias.z), bl_preactivation(gin.w, d_o, bias.w),
                                             &c);
        h_last = h;
        if (real) {
            p.out[(window_row + frame) * (2 * BILSTM_HIDDEN) + direction * BILSTM_HIDDEN + unit] =
                bl_output_value(h, p.out_tf32);
        }
        const int q = bl_fx_quantise_h(h);
        const bl_u32 hb = (bl_u32)(q >> 8) & 0xffu;
        const bl_u32 lb = ((bl_u32)q & 0xffu) ^ 0x80u;
        if constexpr (S == 1) {
            const bl_u32 dst = to + (bl_u32)(tig * 2 * BILSTM_HIDDEN) + unit;
            bl_fx_st8(dst, hb);
            bl_fx_st8(dst + BILSTM_HIDDEN, lb);
            __syncthreads();
        } else {
            // Gather the 8 units' bytes of window tig (lanes 4 gid + tig): pairs, quads, then
            // the high plane to lane gid 0 and the low plane to lane gid 4.
            const bl_u32 v = hb | (lb << 16);
            const bl_u32 u = __shfl_xor_sync(BL_FULL_MASK, v, 4);
            const bl_u32 x = (gid & 1) == 0 ? (v | (u << 8)) : (u | (v << 8));  // h1 g, g+1, h0 g, g+1
            const bl_u32 y = __shfl_xor_sync(BL_FULL_MASK, x, 8);
            const bl_u32 first = (gid & 2) == 0 ? x : y;
            const bl_u32 second = (gid & 2) == 0 ? y : x;
            const bl_u32 hi4 = __byte_perm(first, second, 0x5410);  // h1 of units 4 (gid / 4) .. + 3
            const bl_u32 lo4 = __byte_perm(first, second, 0x7632);  // h0 - 128 of the same
            const bl_u32 got = __shfl_xor_sync(BL_FULL_MASK, low ? lo4 : hi4, 16);
            if (pusher) {
                const bl_u32 w0 = low ? hi4 : got;
                const bl_u32 w1 = low ? got : lo4;
                const bl_u32 dst = to + push_off;
                const bl_u32 done = bar0 + 8u * (step & 1u);
#pragma unroll
                for (int r = 0; r < S; ++r) {
                    bl_cl_push2(bl_cl_mapa(dst, (bl_u32)r), w0, w1, bl_cl_mapa(done, (bl_u32)r));
                }
            }
        }
    }
    if (!aborted && frames > 0 && real) {
        bl_store_final_state(p.state_h, p.state_c, direction, p.batch, first_window + (bl_u32)tig, unit, h_last, c);
    }
    bl_fx_tile_end<S>(p, rank, tid, direction, first_window, valid, frames, bar0, step, timed_out, aborted);
}

// ---- The SIMT fixed-point recurrence (bilstm_recurrence_fixed1c2 / 1c4 / 1c8) ------------------
// numerics.cuh section 9 on the integer pipe, for small batches: the one-window cluster kernels'
// structure (bl_recurrence_cluster<S, 1, true>: S CTAs of BILSTM_CLUSTER_THREADS threads per
// direction and window, 8-lane row groups, lane j holding terms 16 j .. 16 j + 15 of its
// group's ROWS = 512 / (32 S) rows, the transpose-reduce, the cell on lanes j < ROWS / 4) with
// the products of section 9: R quantised as bl_recurrence_fixed quantises it (the same row
// exponents, the same 16-bit integers), kept as packed high (s8) and low (u8) bytes, four terms a
// register; h_{s-1} exchanged as its 16-bit integers q_h; per row and lane dp4a gives the partial
// sums A (high x high), B (high x low, low x high) and C (low x low), the lane forms B 2^8 + C and
// the reduce adds the pairs (A, T) in 32-bit integers (exact in any order; T wraps modulo 2^32
// and its final value fits), so every dot is bl_fx_dot_t of the same A and T as the tensor-core
// kernels': the same bits.
// Entries: bilstm_recurrence_fixed1c2 (S = 2) and fixed1c4 (S = 4) with BILSTM_CLUSTER_THREADS
// threads a CTA, fixed1c8 (S = 8) with BILSTM_CLUSTER_THREADS / 2 (so that ROWS stays 4).
// Launch contract (the file's, with these differences): grid (2 * batch * S, 1, 1), cluster
// (S, 1, 1), cluster x = blockIdx.x / S runs window x / 2 in direction x % 2; block
// (THREADS, 1, 1); no dynamic shared memory, static bl_fx1_shared (two slots of
// 128 16-bit q_h and two mbarriers: 528 bytes). TF32 mode only (tf32_numerics nonzero, else a
// trap); out_tf32 honoured; the cell lanes store their units' outputs themselves; progress
// reported once, after the last step; waits, lost partners and final states as the other
// cluster kernels. Slot layout (so that the 8 lanes of a group read 128 contiguous bytes with
// each of their two 16-byte loads): unit u at 16-bit index 64 ((u % 16) / 8) + 8 (u / 16) + u % 8.
struct __align__(16) bl_fx1_shared {
    unsigned short q[2][BILSTM_HIDDEN];  // [slot][layout index]: q_h as a 16-bit two's complement
    bl_u64 bar[2];
};

__device__ __forceinline__ bl_u32 bl_fx1_index(bl_u32 u) {
    return 64u * ((u % 16u) / 8u) + 8u * (u / 16u) + u % 8u;
}

// One transpose-reduce level (bl_cl_reduce_level's pattern) over the pairs (A, T) of N live rows.
template <int ROWS, int N, int OFFSET>
__device__ __forceinline__ void bl_fx1_level(int (&a)[ROWS], int (&t)[ROWS]) {
    if constexpr (N >= 2) {
#pragma unroll
        for (int i = 0; i < N / 2; ++i) {
            a[i] = a[i] + __shfl_xor_sync(BL_FULL_MASK, a[i + N / 2], OFFSET);
            t[i] = t[i] + __shfl_xor_sync(BL_FULL_MASK, t[i + N / 2], OFFSET);
        }
    } else {
        a[0] = a[0] + __shfl_xor_sync(BL_FULL_MASK, a[0], OFFSET);
        t[0] = t[0] + __shfl_xor_sync(BL_FULL_MASK, t[0], OFFSET);
    }
}

template <int S, int THREADS>
__device__ __forceinline__ void bl_recurrence_fixed_simt(const bl_recurrence_cluster_params& p) {
    constexpr int LANES = BILSTM_TF32_DOT_CHAINS;
    constexpr int TERMS = BILSTM_HIDDEN / LANES;
    constexpr int GROUPS_PER_CTA = THREADS / LANES;
    constexpr int ROWS = BILSTM_GATE_ROWS / (S * GROUPS_PER_CTA);
    constexpr int LEVELS = ROWS == 8 ? 3 : 2;
    constexpr int UNITS_PER_GROUP = ROWS / BILSTM_GATES;
    static_assert(LANES == 8 && TERMS == 16, "8 lanes of 16 terms: two 16-byte loads of q_h a lane");
    static_assert((S == 2 || S == 4) ? THREADS == BL_CL_THREADS : (S == 8 && THREADS == BL_CL_THREADS / 2),
                  "clusters of 2 or 4 CTAs of 256 threads, or of 8 CTAs of 128");
    static_assert((1 << LEVELS) == ROWS, "one transpose level per halving of the rows");
    constexpr int F_OFFSET = 1 << (LEVELS - 1);
    constexpr int G_OFFSET = 1 << (LEVELS - 2);
    // Bytes pushed into each CTA per step: 16 bits per unit.
    constexpr bl_u32 STEP_BYTES = (bl_u32)(BILSTM_HIDDEN * 2);

    auto& sh = bl_cl_static_shared<bl_fx1_shared>();
    const bl_u32 rank = bl_cl_rank();
    const bl_u32 cluster = blockIdx.x / S;
    const bl_u32 window = cluster / 2u;
    const bl_u32 direction = cluster % 2u;
    if (window >= p.batch) {
        return;  // never with the documented grid; the whole cluster leaves before any barrier
    }
    const int tid = threadIdx.x;
    const int lane = tid % LANES;
    const bl_u32 group = rank * GROUPS_PER_CTA + (bl_u32)(tid / LANES);
    const bl_u32 frames = p.frames;
    const bool stalled = p.stall_cta == (int)blockIdx.x;
    const float* recurrent = direction == 0 ? p.recurrent[0] : p.recurrent[1];
    const float* proj = direction == 0 ? p.proj[0] : p.proj[1];
    const float* bias_in = direction == 0 ? p.bias[0] : p.bias[1];

    // Each row's exponent (bl_recurrence_fixed's: the largest magnitude of the whole row), in
    // natural order: row group * ROWS + i; the group's 8 lanes hold the row's 128 terms. Packed
    // a byte a row (e + 96: 0 .. 225) into one register pair, so that picking a row's exponent by
    // a lane-dependent index is a shift, not an indexed (local-memory) array.
    static_assert(ROWS <= 8, "a byte a row in 64 bits");
    bl_u64 e_packed = 0u;
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
        const float4* src =
            reinterpret_cast<const float4*>(recurrent + (bl_u64)(group * ROWS + i) * BILSTM_HIDDEN + lane * TERMS);
        float m = 0.0f;
#pragma unroll
        for (int q = 0; q < TERMS / 4; ++q) {
            const float4 x = __ldg(src + q);
            m = fmaxf(m, fmaxf(fmaxf(fabsf(x.x), fabsf(x.y)), fmaxf(fabsf(x.z), fabsf(x.w))));
        }
        m = fmaxf(m, __shfl_xor_sync(BL_FULL_MASK, m, 1));
        m = fmaxf(m, __shfl_xor_sync(BL_FULL_MASK, m, 2));
        m = fmaxf(m, __shfl_xor_sync(BL_FULL_MASK, m, 4));
        e_packed |= (bl_u64)(bl_fx_row_exponent(m) + 96) << (8 * i);
    }
    const auto exponent_of = [e_packed](int row) { return (int)((e_packed >> (8 * row)) & 0xffu) - 96; };
    // Slot i holds row i ^ order (bl_recurrence_cluster's order: the reduce needs no select);
    // its 16 terms as packed high / low bytes, terms 4 m .. 4 m + 3 in register m. The terms are
    // loaded again (entry only, from L2): keeping the first pass's values would pick them by a
    // lane-dependent index, which is local memory.
    const int order = (int)bl_bit_reverse((bl_u32)(lane & (ROWS - 1)), LEVELS);
    bl_u32 rh[ROWS][TERMS / 4];
    bl_u32 rl[ROWS][TERMS / 4];
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
        const float up = bl_fx_up(exponent_of(i ^ order));
        const float4* src = reinterpret_cast<const float4*>(
            recurrent + (bl_u64)(group * ROWS + (bl_u32)(i ^ order)) * BILSTM_HIDDEN + lane * TERMS);
#pragma unroll
        for (int q = 0; q < TERMS / 4; ++q) {
            const float4 x = __ldg(src + q);
            const float v[4] = {x.x, x.y, x.z, x.w};
            bl_fx_pack4(v, up, rh[i][q], rl[i][q]);
        }
    }
    // After the reduce, lane j holds the dot of row rev_L(j mod ROWS) of its group (slot 0).
    const int e_mine = exponent_of(order);
    const float scale = bl_fx_scale(e_mine);

    // Cell lanes, units and gates exactly as bl_recurrence_cluster<S, 1, true>.
    const bool cell_lane = lane < UNITS_PER_GROUP;
    const int cell = lane % UNITS_PER_GROUP;
    const bl_u32 unit = group * UNITS_PER_GROUP + (bl_u32)cell;
    const int gate = 2 * ((lane >> (LEVELS - 2)) & 1) + ((lane >> (LEVELS - 1)) & 1);
    const bool is_g = gate == 2;
    const float* gates_at = proj + unit * BILSTM_GATES + gate;
    const bl_u64 window_row = (bl_u64)window * frames;
    const float bias = __ldg(bias_in + unit * BILSTM_GATES + gate);
    float gates_next;
    {
        const bl_u32 frame0 = direction == 0 ? 0u : frames - 1u;
        gates_next = __ldg(gates_at + (window_row + frame0) * BILSTM_GATE_ROWS);
    }
    // The pusher of each pair of units (2 v, 2 v + 1): S = 2, cell lane 0 of the group (lane 1
    // holds the odd unit); S = 4, the cell lane of the even group (the odd group's is 8 lanes on).
    constexpr int PAIR_OFFSET = UNITS_PER_GROUP == 2 ? 1 : LANES;
    const bool pusher = cell_lane && (unit & 1u) == 0u;
    const bl_u32 bar0 = bl_cl_smem(&sh.bar[0]);
    const bl_u32 q0 = bl_cl_smem(&sh.q[0][0]);
    const bl_u32 push_off = 2u * bl_fx1_index(unit);
    bl_cl_init_step_barriers(tid, bar0);
    bl_cl_cluster_sync();

    float c = 0.0f;
    float h_last = 0.0f;
    bool aborted = false;
    bool timed_out = false;
    bl_u32 step = 0;
    for (; step < frames; ++step) {
        const bl_u32 slot = step & 1u;
        const bl_u32 frame = direction == 0 ? step : frames - 1u - step;
        const float gates_in = gates_next;
        if (step + 1u < frames) {
            const bl_u32 next = direction == 0 ? step + 1u : frames - 2u - step;
            gates_next = __ldg(gates_at + (window_row + next) * BILSTM_GATE_ROWS);
        }
        if (tid == 0) {
            bl_mbar_arrive_expect(bar0 + 8u * slot, STEP_BYTES);
        }
        float dot = 0.0f;
        if (step > 0) {
            const bl_u32 prev = slot ^ 1u;
            const bool ok = bl_cl_wait(bar0 + 8u * prev, ((step - 1u) >> 1) & 1u, p.spin_timeout_ns, p.error,
                                       &timed_out);
            if (__any_sync(BL_FULL_MASK, !ok)) {
                aborted = true;
                break;
            }
            // q_h of units 16 lane .. 16 lane + 15: two 16-byte loads, then high / low bytes.
            const uint4 x0 = *reinterpret_cast<const uint4*>(&sh.q[prev][8 * lane]);
            const uint4 x1 = *reinterpret_cast<const uint4*>(&sh.q[prev][64 + 8 * lane]);
            const bl_u32 w[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
            bl_u32 hh[TERMS / 4];
            bl_u32 hl[TERMS / 4];
#pragma unroll
            for (int m = 0; m < TERMS / 4; ++m) {
                hh[m] = __byte_perm(w[2 * m], w[2 * m + 1], 0x7531);
                hl[m] = __byte_perm(w[2 * m], w[2 * m + 1], 0x6420);
            }
            int a[ROWS];
            int t[ROWS];
#pragma unroll
            for (int i = 0; i < ROWS; ++i) {
                int sa = 0;
                int sb = 0;
                int sc = 0;
#pragma unroll
                for (int m = 0; m < TERMS / 4; ++m) {
                    sa = bl_fx_dp4a_ss(rh[i][m], hh[m], sa);
                    sb = bl_fx_dp4a_su(rh[i][m], hl[m], sb);
                    sc = bl_fx_dp4a_uu(rl[i][m], hl[m], sc);
                    sb = bl_fx_dp4a_us(rl[i][m], hh[m], sb);
                }
                a[i] = sa;
                t[i] = (int)((bl_u32)sb * 256u + (bl_u32)sc);
            }
            bl_fx1_level<ROWS, ROWS, 1>(a, t);
            bl_fx1_level<ROWS, ROWS / 2, 2>(a, t);
            bl_fx1_level<ROWS, (ROWS / 4 > 1 ? ROWS / 4 : 1), 4>(a, t);
            dot = bl_fx_dot_t(a[0], t[0], scale);
        }
        float act_i, act_f, act_g, act_o;
        bl_cl_lane_gates<true, F_OFFSET, G_OFFSET>(bl_preactivation(gates_in, dot, bias), is_g, act_i, act_f, act_g,
                                                   act_o);
        const float h = bl_lstm_cell_activated_g<true>(act_i, act_f, act_g, act_o, &c);
        const bl_u32 qh = (bl_u32)bl_fx_quantise_h(h) & 0xffffu;
        const bl_u32 q_odd = __shfl_xor_sync(BL_FULL_MASK, qh, PAIR_OFFSET);
        if (cell_lane) {
            h_last = h;
            p.out[(window_row + frame) * (2 * BILSTM_HIDDEN) + direction * BILSTM_HIDDEN + unit] =
                bl_output_value(h, p.out_tf32);
        }
        if (pusher && !stalled) {
            const bl_u32 word = qh | (q_odd << 16);
            const bl_u32 dst = q0 + slot * (bl_u32)(2 * BILSTM_HIDDEN) + push_off;
            const bl_u32 done = bar0 + 8u * slot;
#pragma unroll
            for (int r = 0; r < S; ++r) {
                bl_cl_push(bl_cl_mapa(dst, (bl_u32)r), __uint_as_float(word), bl_cl_mapa(done, (bl_u32)r));
            }
        }
    }
    if (!aborted && frames > 0 && cell_lane) {
        bl_store_final_state(p.state_h, p.state_c, direction, p.batch, window, unit, h_last, c);
    }
    bl_fx_leave_cluster(p, tid, bar0, direction, step, frames, timed_out, aborted);
    if (p.progress != nullptr && rank == 0u && tid == 0 && !aborted) {
        bl_cl_report_end(p.progress, window, 1u, direction, frames);
    }
}

// The fixed-point entries run TF32 mode only: FP32 mode's numerics are not built for them.
#define BL_FX_BODY(S)                        \
    do {                                     \
        if (p.tf32_numerics == 0u) {         \
            asm volatile("trap;");           \
        }                                    \
        bl_recurrence_fixed<S>(p);           \
    } while (0)
#define BL_FX1_BODY(S, T)                    \
    do {                                     \
        if (p.tf32_numerics == 0u) {         \
            asm volatile("trap;");           \
        }                                    \
        bl_recurrence_fixed_simt<S, T>(p);   \
    } while (0)
#define BL_FX4_BODY(S, WT)                   \
    do {                                     \
        if (p.tf32_numerics == 0u) {         \
            asm volatile("trap;");           \
        }                                    \
        bl_recurrence_fixed4<S, WT>(p);      \
    } while (0)

// Each entry picks its numerics once (tf32_numerics: TF32 mode's, numerics.cuh sections 7 and 8):
// BODY<ARGS..., FAST>(p), so that each step loop is compiled for one of them and carries no
// select.
#define BL_CL_BY_NUMERICS(BODY, ...)              \
    do {                                       \
        if (p.tf32_numerics != 0u) {           \
            BODY<__VA_ARGS__, true>(p);        \
        } else {                               \
            BODY<__VA_ARGS__, false>(p);       \
        }                                      \
    } while (0)
#define BL_CL_QUAD_BODY(G) BL_CL_BY_NUMERICS(bl_recurrence_cluster_quad, G)
#define BL_CL_TILE_BODY(WPT) BL_CL_BY_NUMERICS(bl_recurrence_cluster_tile, WPT)
// The one- and two-window kernels store exact outputs only: out_tf32 is refused (a trap; the
// host never sets it for them, launch/recurrence_cluster.rs), so that their latency-bound step
// loops carry no rounding (H200 session 14: a rounding select in their writer warps cost 2.6 %
// at batch 1 even with out_tf32 = 0).
#define BL_CL_ENTRY_BODY(S, W)                           \
    do {                                                 \
        if (p.out_tf32 != 0u) {                          \
            asm volatile("trap;");                       \
        }                                                \
        BL_CL_BY_NUMERICS(bl_recurrence_cluster, S, W);     \
    } while (0)
#else
// Before sm_90 there are no thread-block clusters: the entries trap (the plan never picks them).
#define BL_CL_ENTRY_BODY(S, W) \
    do {                      \
        (void)p;              \
        asm volatile("trap;"); \
    } while (0)
#define BL_CL_TILE_BODY(WPT) \
    do {                      \
        (void)p;              \
        asm volatile("trap;"); \
    } while (0)
#define BL_CL_QUAD_BODY(G)    \
    do {                      \
        (void)p;              \
        asm volatile("trap;"); \
    } while (0)
#define BL_FX_BODY(S)         \
    do {                      \
        (void)p;              \
        asm volatile("trap;"); \
    } while (0)
#define BL_FX1_BODY(S, T) BL_FX_BODY(S)
#define BL_FX4_BODY(S, WT) BL_FX_BODY(S)
#endif  // __CUDA_ARCH__ >= 900

extern "C" __global__ void __launch_bounds__(BILSTM_CLUSTER_THREADS, 1)
    bilstm_recurrence_cluster2(const bl_recurrence_cluster_params p) {
    BL_CL_ENTRY_BODY(2, 1);
}

extern "C" __global__ void __launch_bounds__(BILSTM_CLUSTER_THREADS, 2)
    bilstm_recurrence_cluster4(const bl_recurrence_cluster_params p) {
    BL_CL_ENTRY_BODY(4, 1);
}

extern "C" __global__ void __launch_bounds__(BILSTM_CLUSTER_THREADS, 1)
    bilstm_recurrence_cluster2w2(const bl_recurrence_cluster_params p) {
    BL_CL_ENTRY_BODY(2, 2);
}

extern "C" __global__ void __launch_bounds__(BILSTM_CLUSTER_THREADS, 1)
    bilstm_recurrence_cluster2w4(const bl_recurrence_cluster_params p) {
    BL_CL_QUAD_BODY(1);
}

extern "C" __global__ void __launch_bounds__(BILSTM_CLUSTER_THREADS, 1)
    bilstm_recurrence_cluster2w8(const bl_recurrence_cluster_params p) {
    BL_CL_QUAD_BODY(2);
}

extern "C" __global__ void __launch_bounds__(BILSTM_CLUSTER_THREADS, 1)
    bilstm_recurrence_cluster2w16(const bl_recurrence_cluster_params p) {
    BL_CL_TILE_BODY(4);
}

extern "C" __global__ void __launch_bounds__(BILSTM_FIXED_THREADS, 1)
    bilstm_recurrence_fixed8(const bl_recurrence_cluster_params p) {
    BL_FX_BODY(1);
}

extern "C" __global__ void __launch_bounds__(BILSTM_FIXED_THREADS / 2, 1)
    bilstm_recurrence_fixed8c2(const bl_recurrence_cluster_params p) {
    BL_FX_BODY(2);
}

extern "C" __global__ void __launch_bounds__(BILSTM_FIXED_THREADS / 4, 1)
    bilstm_recurrence_fixed8c4(const bl_recurrence_cluster_params p) {
    BL_FX_BODY(4);
}

extern "C" __global__ void __launch_bounds__(BILSTM_CLUSTER_THREADS, 1)
    bilstm_recurrence_fixed1c2(const bl_recurrence_cluster_params p) {
    BL_FX1_BODY(2, BILSTM_CLUSTER_THREADS);
}

extern "C" __global__ void __launch_bounds__(BILSTM_CLUSTER_THREADS, 2)
    bilstm_recurrence_fixed1c4(const bl_recurrence_cluster_params p) {
    BL_FX1_BODY(4, BILSTM_CLUSTER_THREADS);
}

extern "C" __global__ void __launch_bounds__(BILSTM_CLUSTER_THREADS / 2, 4)
    bilstm_recurrence_fixed1c8(const bl_recurrence_cluster_params p) {
    BL_FX1_BODY(8, BILSTM_CLUSTER_THREADS / 2);
}

extern "C" __global__ void __launch_bounds__(BILSTM_FIXED_THREADS, 1)
    bilstm_recurrence_fixed4(const bl_recurrence_cluster_params p) {
    BL_FX4_BODY(1, BL_FX4_WINDOWS);
}

extern "C" __global__ void __launch_bounds__(BILSTM_FIXED_THREADS / 2, 1)
    bilstm_recurrence_fixed4c2(const bl_recurrence_cluster_params p) {
    BL_FX4_BODY(2, BL_FX4_WINDOWS);
}

extern "C" __global__ void __launch_bounds__(BILSTM_FIXED_THREADS / 4, 1)
    bilstm_recurrence_fixed4c4(const bl_recurrence_cluster_params p) {
    BL_FX4_BODY(4, BL_FX4_WINDOWS);
}

extern "C" __global__ void __launch_bounds__(BILSTM_FIXED_THREADS / 8, 1)
    bilstm_recurrence_fixed4c8(const bl_recurrence_cluster_params p) {
    BL_FX4_BODY(8, BL_FX4_WINDOWS);
}

extern "C" __global__ void __launch_bounds__(BILSTM_FIXED_THREADS / 4, 1)
    bilstm_recurrence_fixed2c4(const bl_recurrence_cluster_params p) {
    BL_FX4_BODY(4, BILSTM_FIXED2_WINDOWS);
}

extern "C" __global__ void __launch_bounds__(BILSTM_FIXED_THREADS / 8, 1)
    bilstm_recurrence_fixed2c8(const bl_recurrence_cluster_params p) {
    BL_FX4_BODY(8, BILSTM_FIXED2_WINDOWS);
}
