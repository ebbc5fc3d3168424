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

// The bounded spin of a consumer (bl_exchange_load_step below): the state one thread carries
// through the waits of one step.
struct bl_spin_state {
    // %globaltimer when this thread first found a word not yet published (0: not yet).
    bl_u64 wait_start;
    // Polls so far; the timer and the error word are read every 16th poll.
    bl_u32 spins;
    // The thread gave up (timeout, or another block reported an error).
    bool aborted;
};

// Waits until the word at `address` carries flag `want`, starting from the already loaded
// `word`, and returns the last word read. Every 16th poll reads %globaltimer and the error
// word: a wait beyond `timeout_ns` (measured from the first poll of this step) sets
// `state.aborted` and `*timed_out`; a non-zero error[0] (another block gave up) sets
// `state.aborted` only. After an abort the caller must stop waiting and leave the kernel
// after the step's barrier.
__device__ __forceinline__ bl_u64 bl_exchange_wait(const bl_u64* address, bl_u64 word, bl_u32 want,
                                                   bl_u64 timeout_ns, const int* error,
                                                   bl_spin_state& state, bool* timed_out) {
    while (bl_exchange_word_flag(word) != want) {
        ++state.spins;
        if ((state.spins & 15u) == 0u) {
            const bl_u64 now = bl_globaltimer_ns();
            if (state.wait_start == 0) {
                state.wait_start = now;
            } else if (now - state.wait_start > timeout_ns) {
                state.aborted = true;
                *timed_out = true;
                break;
            }
            if (bl_ld_relaxed_i32(error) != BL_ERROR_NONE) {
                state.aborted = true;
                break;
            }
        }
        word = bl_ld_relaxed_u64(address);
    }
    return word;
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

// The load phase of one step of a cooperative recurrence (wide and tiled): the block's
// BILSTM_BLOCK_THREADS threads read every word the tile's producers published for step - 1
// in the slot at `base` (WORDS per thread: thread t takes words t, t + BILSTM_BLOCK_THREADS,
// ... of the slot, in (producer, window, unit) order, SLOT_WORDS = windows x UPB words per
// producer), all loads issued before the first wait; each word is then awaited with the
// bounded spin (bl_exchange_wait) until it carries `want`, and its value staged in
// stage[window][producer * UPB + unit]. Windows >= valid_windows are neither read nor awaited
// (their staged value is 0). A thread that times out records the lost partner {layer,
// direction, step}. Returns whether this thread gave up: the caller ends the step with
// __syncthreads_or of it and leaves the kernel when any thread did.
template <int WORDS, int UPB, int SLOT_WORDS, int H_STRIDE>
__device__ __forceinline__ bool bl_exchange_load_step(const bl_u64* base, bl_u32 block_stride,
                                                      bl_u32 valid_windows, bl_u32 want,
                                                      bl_u64 timeout_ns, int* error, bl_u32 layer,
                                                      bl_u32 direction, bl_u32 step,
                                                      float (*stage)[H_STRIDE]) {
    const int tid = threadIdx.x;
    bl_u64 words[WORDS];
#pragma unroll
    for (int i = 0; i < WORDS; ++i) {
        const int e = tid + i * BILSTM_BLOCK_THREADS;
        const int producer = e / SLOT_WORDS;
        const int window = (e % SLOT_WORDS) / UPB;
        const int u = e % UPB;
        words[i] = 0ull;
        if ((bl_u32)window < valid_windows) {
            words[i] = bl_ld_relaxed_u64(base + (bl_u64)producer * block_stride + window * UPB + u);
        }
    }
    bl_spin_state spin = {0ull, 0u, false};
    bool timed_out = false;
#pragma unroll
    for (int i = 0; i < WORDS; ++i) {
        const int e = tid + i * BILSTM_BLOCK_THREADS;
        const int producer = e / SLOT_WORDS;
        const int window = (e % SLOT_WORDS) / UPB;
        const int u = e % UPB;
        float value = 0.0f;
        if ((bl_u32)window < valid_windows && !spin.aborted) {
            const bl_u64* address = base + (bl_u64)producer * block_stride + window * UPB + u;
            const bl_u64 word =
                bl_exchange_wait(address, words[i], want, timeout_ns, error, spin, &timed_out);
            value = bl_exchange_word_value(word);
        }
        stage[window][producer * UPB + u] = value;
    }
    if (timed_out) {
        bl_exchange_report_lost(error, layer, direction, step);
    }
    return spin.aborted;
}
