// exchange.cuh: the hidden-state exchange between the blocks of a cooperative recurrence
// (DESIGN.md section 4), mirroring bilstm_core::exchange function for function.
//
// A producer publishes each hidden value of step `step` as one aligned 64-bit word: high half
// the flag bl_exchange_flag(layer, frames, step) = layer * frames + step + 1 (never 0), low
// half the f32 bits (bl_exchange_word, = exchange::word). It stores the word with a relaxed
// GPU-scope 64-bit store; a consumer spins on a relaxed 64-bit load of the same address until
// the high half equals the flag it waits for. Single-copy atomicity of the 64-bit access keeps
// flag and value together, so no fence and no counter are needed. Step `step` writes parity
// slot step % 2. The whole span is zeroed (clear.cu) before every forward pass, and flags
// include the layer, so one clear per pass suffices and no stale word can match.
//
// Word index from the aligned base (exchange::ExchangeLayout::word_index):
//   direction * direction_stride + tile * tile_stride + slot * slot_stride
//   + block * block_stride + window * units_per_block + unit

#ifndef BILSTM_HIDDEN
#error "bilstm kernels are compiled with the -D options of bilstm_core::geometry::defines()"
#endif

static_assert(BILSTM_EXCHANGE_WORD_BYTES == sizeof(bl_u64), "one exchange word is 64 bits");
static_assert(BILSTM_EXCHANGE_SLOTS == 2, "parity slots: step t writes slot t % 2");

// The strides of one launch geometry, in words (bilstm_core::exchange::ExchangeLayout).
struct bl_exchange_layout {
    bl_u32 units_per_block;
    bl_u32 block_stride;
    bl_u32 slot_stride;
    bl_u32 tile_stride;
    bl_u32 direction_stride;
};

// exchange::ExchangeLayout::word_index.
__device__ __forceinline__ bl_u64 bl_word_index(const bl_exchange_layout& layout, bl_u32 direction,
                                                bl_u32 tile, bl_u32 slot, bl_u32 block,
                                                bl_u32 window, bl_u32 unit) {
    return (bl_u64)direction * layout.direction_stride + (bl_u64)tile * layout.tile_stride +
           (bl_u64)slot * layout.slot_stride + (bl_u64)block * layout.block_stride +
           (bl_u64)window * layout.units_per_block + unit;
}

// exchange::flag: layer * frames + step + 1 (the host checks that it fits 32 bits).
__device__ __forceinline__ bl_u32 bl_exchange_flag(bl_u32 layer, bl_u32 frames, bl_u32 step) {
    return layer * frames + step + 1u;
}

// exchange::word: flag in the high 32 bits, the value's bits in the low 32.
__device__ __forceinline__ bl_u64 bl_exchange_word(bl_u32 flag, float value) {
    return ((bl_u64)flag << 32) | (bl_u64)__float_as_uint(value);
}

// The flag of a word.
__device__ __forceinline__ bl_u32 bl_exchange_word_flag(bl_u64 word) {
    return (bl_u32)(word >> 32);
}

// The value of a word.
__device__ __forceinline__ float bl_exchange_word_value(bl_u64 word) {
    return __uint_as_float((bl_u32)(word & 0xffffffffull));
}

// Records the first lost partner in `error`: {BL_ERROR_PARTNER_LOST, layer, direction, step}
// (only the first block to report writes the details).
__device__ __forceinline__ void bl_exchange_report_lost(int* error, bl_u32 layer, bl_u32 direction,
                                                        bl_u32 step) {
    if (atomicCAS(error, BL_ERROR_NONE, BL_ERROR_PARTNER_LOST) == BL_ERROR_NONE) {
        error[1] = (int)layer;
        error[2] = (int)direction;
        error[3] = (int)step;
    }
}

// The load phase of one step of a cooperative recurrence (wide and tiled) reads the words the
// tile's producers published for step - 1 in the slot at `base`, for WINDOWS windows of every
// producer: the slot holds, per producer block (block_stride words apart), tile height x UPB
// words in (window, unit) order, and the load phase covers windows 0 .. WINDOWS - 1 of them
// (WINDOWS = the tile height, or 1 for the wide kernel's one-window path; word (window, unit) of
// a producer is at window x UPB + unit whatever the tile height). Element e of the
// HIDDEN x WINDOWS words (producer e / (WINDOWS x UPB), window (e / UPB) % WINDOWS, unit e % UPB)
// is read by thread e % BILSTM_BLOCK_THREADS as its word e / BILSTM_BLOCK_THREADS, and its value
// staged in stage[window][bl_stage_h_index<PADDED>(producer * UPB + unit)] (rows H_STRIDE floats
// apart; the layout below). It runs in two halves, so that the caller can issue other loads (the
// gate inputs) behind the critical exchange loads:
// 1. bl_exchange_issue: every word of the thread is loaded, all before any is awaited; words of
//    windows >= valid_windows are neither read nor awaited (their staged value is 0);
// 2. bl_exchange_await: passes over the thread's words; each pass stages every word that
//    carries the wanted flag and then re-loads every word that does not yet, all at once, so a
//    stale word costs one more round trip for all of them together (not one per word in turn).
//
// Staged row layout (unit u of the layer):
// - unpadded (FP32 mode): u at u;
// - padded (TF32 mode): spans of 32 units, 36 floats apart: u at (u / 32) * 36 + u % 32, a row
//   of 144 floats. TF32 mode's 8-lane groups read chain m's units 16m .. 16m+15 (two chains a
//   span) as four 16-byte loads at float 16m + 4 (m / 2) + 4t of the row: banks
//   16 (m % 2) + 4 (m / 2) + 4t (mod 32), eight distinct 4-bank groups for m = 0..7, so each
//   load phase is conflict-free (unpadded, 16m + 4t: two groups, 4-way conflicts).
// The stores of one pass of a warp are 32 consecutive elements: with WINDOWS >= 8, the UPB units
// of one producer in 32 / UPB consecutive windows; on the one-window path units 32w .. 32w+31.
// UPB divides 32, so a producer's units lie in one span and are UPB consecutive floats in either
// layout, and a stride H_STRIDE = UPB x odd starts the 32 / UPB windows' rows at distinct
// multiples of UPB banks: 32 distinct banks; units 32w .. 32w+31 are one span, 32 consecutive
// floats. (The quads' 20-float pieces, recurrence_cluster.cu, read as well, but they put a
// one-window warp's two pieces 20 floats apart, its stores 2-way on 4 banks, and take rows of
// 160 floats.)
constexpr int BL_STAGE_SPAN = BILSTM_WARP_THREADS;
constexpr int BL_STAGE_SPAN_STRIDE = BL_STAGE_SPAN + 4;
constexpr int BL_STAGE_PADDED_ROW = (BILSTM_HIDDEN / BL_STAGE_SPAN) * BL_STAGE_SPAN_STRIDE;
static_assert(BL_STAGE_SPAN == 2 * BILSTM_TF32_DOT_CHAIN_TERMS && BILSTM_HIDDEN % BL_STAGE_SPAN == 0,
              "two TF32 chains a span, whole spans a row");
static_assert(BL_STAGE_SPAN_STRIDE % 32 == 4 && (BILSTM_HIDDEN / BL_STAGE_SPAN) * 4 <= 16,
              "spans one 4-bank group apart: the groups 4 (m / 2) stay below the second chain's 16");

// The float index of unit u in a staged row.
template <bool PADDED>
__device__ __forceinline__ int bl_stage_h_index(int u) {
    return PADDED ? (u / BL_STAGE_SPAN) * BL_STAGE_SPAN_STRIDE + u % BL_STAGE_SPAN : u;
}

// Words per thread of a load phase over WINDOWS windows.
template <int WINDOWS>
constexpr int bl_exchange_words_per_thread() {
    return (WINDOWS * BILSTM_HIDDEN + BILSTM_BLOCK_THREADS - 1) / BILSTM_BLOCK_THREADS;
}

// Element e of a load phase: its producer, window and unit, and its word's offset from the
// slot base.
template <int WINDOWS, int UPB>
struct bl_exchange_element {
    int producer;
    int window;
    int unit;

    __device__ __forceinline__ explicit bl_exchange_element(int e)
        : producer(e / (WINDOWS * UPB)), window((e / UPB) % WINDOWS), unit(e % UPB) {}

    __device__ __forceinline__ bl_u64 offset(bl_u32 block_stride) const {
        return (bl_u64)producer * block_stride + (bl_u64)(window * UPB + unit);
    }
};

// Half 1 of the load phase: issues this thread's loads into `words` and returns the bit mask of
// the words it must await (bit i: words[i]). Windows >= valid_windows are staged as 0 here.
template <int WINDOWS, int UPB, int H_STRIDE, bool PADDED>
__device__ __forceinline__ bl_u32 bl_exchange_issue(
    const bl_u64* base, bl_u32 block_stride, bl_u32 valid_windows,
    bl_u64 (&words)[bl_exchange_words_per_thread<WINDOWS>()], float (*stage)[H_STRIDE]) {
    constexpr int WORDS = bl_exchange_words_per_thread<WINDOWS>();
    constexpr int TOTAL = WINDOWS * BILSTM_HIDDEN;
    static_assert(WORDS <= 32, "the pending words fit a 32-bit mask");
    static_assert(H_STRIDE >= (PADDED ? BL_STAGE_PADDED_ROW : BILSTM_HIDDEN) && H_STRIDE % 4 == 0,
                  "float4 rows hold the layout");
    static_assert(BL_STAGE_SPAN % UPB == 0 && H_STRIDE % UPB == 0 && (H_STRIDE / UPB) % 2 == 1 &&
                      (WINDOWS == 1 || WINDOWS * UPB % BILSTM_WARP_THREADS == 0),
                  "a warp's 32 stores of a pass hit 32 distinct banks");
    bl_u32 pending = 0u;
#pragma unroll
    for (int i = 0; i < WORDS; ++i) {
        const int e = (int)threadIdx.x + i * BILSTM_BLOCK_THREADS;
        words[i] = 0ull;
        if (TOTAL % BILSTM_BLOCK_THREADS == 0 || e < TOTAL) {
            const bl_exchange_element<WINDOWS, UPB> el(e);
            if ((bl_u32)el.window < valid_windows) {
                words[i] = bl_ld_relaxed_u64(base + el.offset(block_stride));
                pending |= 1u << i;
            } else {
                stage[el.window][bl_stage_h_index<PADDED>(el.producer * UPB + el.unit)] = 0.0f;
            }
        }
    }
    return pending;
}

// Half 2 of the load phase: re-polls every word of `pending` in each pass until all carry the
// flag `want`, staging each as it arrives. Every 16th pass reads %globaltimer and the error word:
// a wait beyond `timeout_ns` (measured from the first such check of this step) ends the wait
// and records the lost partner {layer, direction, step}; a non-zero error[0] (another block
// gave up) ends it without recording. Returns whether this thread gave up: the caller ends the
// step with __syncthreads_or of it and leaves the kernel when any thread did.
template <int WINDOWS, int UPB, int H_STRIDE, bool PADDED>
__device__ __forceinline__ bool bl_exchange_await(
    const bl_u64* base, bl_u32 block_stride, bl_u64 (&words)[bl_exchange_words_per_thread<WINDOWS>()],
    bl_u32 pending, bl_u32 want, bl_u64 timeout_ns, int* error, bl_u32 layer, bl_u32 direction,
    bl_u32 step, float (*stage)[H_STRIDE]) {
    constexpr int WORDS = bl_exchange_words_per_thread<WINDOWS>();
    bl_u64 wait_start = 0ull;
    bl_u32 passes = 0u;
    bool aborted = false;
    bool timed_out = false;
    for (;;) {
#pragma unroll
        for (int i = 0; i < WORDS; ++i) {
            if ((pending & (1u << i)) != 0u && bl_exchange_word_flag(words[i]) == want) {
                const bl_exchange_element<WINDOWS, UPB> el(
                    (int)threadIdx.x + i * BILSTM_BLOCK_THREADS);
                stage[el.window][bl_stage_h_index<PADDED>(el.producer * UPB + el.unit)] =
                    bl_exchange_word_value(words[i]);
                pending &= ~(1u << i);
            }
        }
        if (pending == 0u) {
            break;
        }
        ++passes;
        if ((passes & 15u) == 0u) {
            const bl_u64 now = bl_globaltimer_ns();
            if (wait_start == 0ull) {
                wait_start = now;
            } else if (now - wait_start > timeout_ns) {
                aborted = true;
                timed_out = true;
                break;
            }
            if (bl_ld_relaxed_i32(error) != BL_ERROR_NONE) {
                aborted = true;
                break;
            }
        }
#pragma unroll
        for (int i = 0; i < WORDS; ++i) {
            if ((pending & (1u << i)) != 0u) {
                const bl_exchange_element<WINDOWS, UPB> el(
                    (int)threadIdx.x + i * BILSTM_BLOCK_THREADS);
                words[i] = bl_ld_relaxed_u64(base + el.offset(block_stride));
            }
        }
    }
    if (timed_out) {
        bl_exchange_report_lost(error, layer, direction, step);
    }
    return aborted;
}
