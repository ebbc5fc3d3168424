//! Every constant a kernel needs, in one place.
//!
//! The CUDA sources hard-code none of these: [`defines`] turns each into a `-D` option
//! (`BILSTM_` + the constant's upper-snake name) when a kernel is compiled, and a CPU-only
//! test in `bilstm-kernels` checks that every `BILSTM_*` name a source uses is defined here.

/// Hidden units per direction. The only size built (DESIGN §1).
pub const HIDDEN: usize = 128;
/// Gates per unit (`i, f, g, o`).
pub const GATES: usize = 4;
/// Gate rows per direction: `GATES * HIDDEN`.
pub const GATE_ROWS: usize = GATES * HIDDEN;
/// Input widths are padded to a multiple of this (DESIGN §2: 60 becomes 64).
pub const K_PAD: usize = 16;
/// Largest layer-0 input width accepted.
pub const MAX_FEATURES: usize = 1024;
/// Each packed tensor starts on a multiple of this many f32 (256 bytes).
pub const TENSOR_ALIGN_FLOATS: usize = 64;

/// Threads per block of the wide and tiled recurrences and the FP32 projections.
pub const BLOCK_THREADS: usize = 256;
/// Threads per warp.
pub const WARP_THREADS: usize = 32;

/// Wide recurrence: blocks per tile (each owns `WIDE_UNITS_PER_BLOCK` units).
pub const WIDE_BLOCKS_PER_TILE: usize = 16;
/// Wide recurrence: hidden units owned by one block (`HIDDEN / WIDE_BLOCKS_PER_TILE`).
pub const WIDE_UNITS_PER_BLOCK: usize = HIDDEN / WIDE_BLOCKS_PER_TILE;
/// Wide recurrence: the tile heights (windows per tile) the schedule may pick, smallest first.
/// Upstream's choice (DESIGN §4); the H200 has not yet ranked them.
pub const WIDE_TILE_HEIGHTS: [usize; 3] = [8, 16, 32];
/// Wide recurrence: the largest tile height (the kernel's register arrays are sized by it).
pub const WIDE_MAX_TILE_HEIGHT: usize = 32;

/// Tiled recurrence: windows per tile.
pub const TILED_WINDOWS: usize = 8;
/// Tiled recurrence: blocks per tile.
pub const TILED_BLOCKS_PER_TILE: usize = 8;
/// Tiled recurrence: hidden units owned by one block.
pub const TILED_UNITS_PER_BLOCK: usize = HIDDEN / TILED_BLOCKS_PER_TILE;

/// Resident recurrence: threads per block (one block per window and direction). Each thread
/// holds [`RESIDENT_CHAINS_PER_THREAD`] dot-product chains (16 terms of k) of the 16 gate rows
/// (4 units) its group of `DOT_CHAINS / RESIDENT_CHAINS_PER_THREAD` = 8 lanes owns: 256
/// weights, half of them in registers (up to 255 registers a thread with 256 threads) and half
/// read from dynamic shared memory every step. Measured on the H200 (2026-11-29): 512 threads
/// of one chain each (8 warps more, all of them running the cell update) took 1.81 us per step
/// at batch 1.
pub const RESIDENT_THREADS: usize = 256;
/// Resident recurrence: dot-product chains per thread (consecutive chains, added in the thread:
/// the first level of the fixed tree).
pub const RESIDENT_CHAINS_PER_THREAD: usize = 2;
/// Resident recurrence: bytes of R kept in dynamic shared memory (the other half of R lives
/// in registers).
pub const RESIDENT_R_SHARED_BYTES: usize = GATE_ROWS * HIDDEN * 4 / 2;
/// Resident recurrence: dynamic shared bytes in all: half of R, a double-buffered hidden
/// vector (`2 * HIDDEN` floats, so each step needs one block barrier) and one step's
/// projection (`GATE_ROWS` floats), copied in with `cp.async` while the dot products run so
/// that no register holds it meanwhile.
pub const RESIDENT_SHARED_BYTES: usize = RESIDENT_R_SHARED_BYTES + 2 * HIDDEN * 4 + GATE_ROWS * 4;

/// Cluster recurrence (compute capability 9.0 and later): threads per CTA. A thread-block
/// cluster of [`CLUSTER_SIZES`] CTAs runs one (window, direction); its CTAs split the 512 gate
/// rows, so all of R lives in registers (DESIGN §7).
pub const CLUSTER_THREADS: usize = 256;
/// Cluster recurrence: lanes of one row group. Lane `j` of a group holds chain `j` (terms
/// `k = 8j .. 8j+7`) of each of the group's rows, so a group is [`DOT_CHAINS`] lanes and four
/// shuffle levels finish the fixed tree.
pub const CLUSTER_GROUP_LANES: usize = DOT_CHAINS;
/// Cluster recurrence: steps between two progress reports of a last layer that writes into
/// host memory (the host path's zero-copy output, `backend-cuda/src/host.rs`): every this many
/// steps, and after the last, the writer warp makes its rows visible to the host
/// (`fence.sc.sys`) and stores the count of steps written into the window's and direction's
/// progress word, so that the host copies finished rows while the layer still runs. Each report
/// holds the writer warp at its fence until its writes are visible to the host (not timed on
/// its own), so reports are sparse: 9 in a 589-frame window. With them the batch-32 host pass
/// left 0.07-0.4 ms of copying after the pass (H200, 2026-12-01, `bench/NOTES.md` session 4).
pub const CLUSTER_PROGRESS_STEPS: usize = 64;
/// Cluster recurrence: the cluster sizes (CTAs per window and direction) built, one kernel entry
/// each (`bilstm_recurrence_cluster2`, `bilstm_recurrence_cluster4`). Rows per group:
/// `GATE_ROWS / (size * CLUSTER_THREADS / CLUSTER_GROUP_LANES)` = 16 (size 2) or 8 (size 4),
/// i.e. 128 or 64 registers of R per thread.
pub const CLUSTER_SIZES: [usize; 2] = [2, 4];
/// Cluster recurrence: the largest cluster size built.
pub const CLUSTER_MAX_SIZE: usize = 4;
/// Cluster recurrence: the cluster size whose kernel is also built for
/// [`CLUSTER_MAX_WINDOWS`] windows per cluster (`bilstm_recurrence_cluster2w2`: each lane applies
/// its registers of R to both windows' hidden states every step).
pub const CLUSTER_MULTI_WINDOW_SIZE: usize = 2;
/// Cluster recurrence: the most windows one cluster of the register kernels runs side by side.
pub const CLUSTER_MAX_WINDOWS: usize = 2;
/// Cluster recurrence: the window tiles of the multi-window 2-CTA kernels, the windows of one
/// direction each cluster runs: `bilstm_recurrence_cluster2w4` and `_cluster2w8` keep R in
/// registers (as the one-window kernel) and reduce a quad of four windows' dots together so
/// that every lane runs one cell (`_cluster2w8` takes two quads in turn);
/// `bilstm_recurrence_cluster2w16` keeps its rows of R transposed in shared memory
/// ([`CLUSTER_TILE_SHARED_BYTES`]), each thread all four gates of one unit in a quarter of the
/// windows.
pub const CLUSTER_TILE_WINDOWS: [usize; 3] = [4, 8, 16];
/// Cluster recurrence, the shared-memory window tile: dynamic shared bytes of a CTA, its half of
/// R transposed (`HIDDEN` x `GATE_ROWS / 2` floats: 128 KiB).
pub const CLUSTER_TILE_SHARED_BYTES: usize = HIDDEN * (GATE_ROWS / 2) * 4;
/// Cluster recurrence: dynamic shared bytes of each window-tile kernel (same index as
/// [`CLUSTER_TILE_WINDOWS`]): none for the register quads, [`CLUSTER_TILE_SHARED_BYTES`] for the
/// shared-memory tile.
pub const CLUSTER_TILE_DYNAMIC_SHARED: [usize; CLUSTER_TILE_WINDOWS.len()] =
    [0, 0, CLUSTER_TILE_SHARED_BYTES];

/// The register quads (`bilstm_recurrence_cluster2w4` / `2w8`): lanes of a row group (each lane
/// holds two of a row's [`DOT_CHAINS`] chains, so 8 lanes cover `HIDDEN`).
pub const QUAD_GROUP_LANES: usize = DOT_CHAINS / 2;
/// The register quads: floats between two lanes' pieces of a window's hidden state in the
/// shared slots (a piece is a lane's `2 * DOT_CHAIN_TERMS` = 16 units, padded to 20 so that
/// the eight lanes of a 16-byte load phase hit distinct banks: 20 m mod 32 differs for m < 8).
pub const QUAD_PIECE_FLOATS: usize = 2 * DOT_CHAIN_TERMS + 4;
/// The register quads: floats of one window's hidden state in the shared slots.
pub const QUAD_H_ROW_FLOATS: usize = QUAD_GROUP_LANES * QUAD_PIECE_FLOATS;

/// The fixed-point tensor-core recurrence (`bilstm_recurrence_fixed8`): threads of
/// a tile's CTAs together (one CTA; `FIXED_THREADS / S` each in the S-CTA cluster kernels), 16
/// warps, each owning 8 units (two m16 tiles of gate rows, R as A fragments in 64 registers a
/// thread). H200, 2026-12-03 session 23 (TF32, 589 frames, medians
/// of 20): 16 warps against 8 (each owning 16 units) 11.10 against 11.72 ms at batch 1024 with 8
/// windows a CTA, 11.07 against 11.66 with 16; batch 1 3.09 against 3.52 ms.
pub const FIXED_THREADS: usize = 512;
/// The fixed-point recurrence: windows a tile (the `mma.m16n8k32` N; one tile per CTA, or per
/// cluster in the cluster kernels).
pub const FIXED_WINDOWS: usize = 8;
/// The fixed-point recurrence: bytes a window's row of a byte plane of h takes in shared memory
/// (128 units padded by 16: rows 36 words apart, so the 8 rows of an `ldmatrix` phase hit
/// distinct banks).
pub const FIXED_H_ROW_BYTES: usize = HIDDEN + 16;
/// The fixed-point recurrence's 4-window tiles (`bilstm_recurrence_fixed4*`):
/// windows a tile, whose two byte planes each make the 8 columns of the `mma.m16n8k32` N.
pub const FIXED4_WINDOWS: usize = 4;
/// The fixed-point recurrence's 2-window tiles (`bilstm_recurrence_fixed2c4` / `2c8`): the
/// 4-window kernels' code with two windows a tile (the MMA's other four columns zero).
pub const FIXED2_WINDOWS: usize = 2;

/// Whether a cluster kernel is built for clusters of `size` CTAs running `windows` windows each:
/// one window with every size of [`CLUSTER_SIZES`], and with [`CLUSTER_MULTI_WINDOW_SIZE`]-CTA
/// clusters also [`CLUSTER_MAX_WINDOWS`] and every [`CLUSTER_TILE_WINDOWS`].
///
/// ```
/// use bilstm_core::geometry::cluster_kernel_built;
/// assert!(cluster_kernel_built(4, 1) && cluster_kernel_built(2, 16));
/// assert!(!cluster_kernel_built(4, 2) && !cluster_kernel_built(2, 3));
/// ```
pub const fn cluster_kernel_built(size: usize, windows: usize) -> bool {
    let mut i = 0;
    let mut size_ok = false;
    while i < CLUSTER_SIZES.len() {
        size_ok |= CLUSTER_SIZES[i] == size;
        i += 1;
    }
    if !size_ok {
        return false;
    }
    if windows == 1 {
        return true;
    }
    if size != CLUSTER_MULTI_WINDOW_SIZE {
        return false;
    }
    let mut j = 0;
    let mut tile = false;
    while j < CLUSTER_TILE_WINDOWS.len() {
        tile |= CLUSTER_TILE_WINDOWS[j] == windows;
        j += 1;
    }
    windows == CLUSTER_MAX_WINDOWS || tile
}

/// FP32 projection: output tile edge of the small tile.
pub const PROJ_SMALL_TILE: usize = 64;
/// FP32 projection: output tile edge of the large tile.
pub const PROJ_LARGE_TILE: usize = 128;
/// FP32 projection: K values per register-prefetched tile.
pub const PROJ_K_TILE: usize = 8;
/// TF32 projection: output tile rows.
pub const PROJ_TF32_TILE_ROWS: usize = 128;
/// TF32 projection: output tile columns.
pub const PROJ_TF32_TILE_COLS: usize = 256;
/// TF32 projection: K values of both operands per cp.async stage (two `mma.sync` k-steps of 8).
pub const PROJ_TF32_K_TILE: usize = 16;
/// TF32 projection: floats between consecutive rows of a stage in shared memory: the K tile plus
/// 8 floats of padding. An odd multiple of 8, so that the 64-bit fragment loads of a half-warp
/// (8 rows x 4 pairs) hit 32 distinct banks.
pub const PROJ_TF32_ROW_FLOATS: usize = PROJ_TF32_K_TILE + 8;
/// TF32 projection: dynamic shared bytes, a double buffer of both operands' K tiles:
/// `2 * (TILE_ROWS + TILE_COLS) * ROW_FLOATS * 4` = 72 KiB. Upstream used 60 KiB (rows of 20
/// floats and 32-bit fragment loads); the 64-bit loads need rows of 24.
pub const PROJ_TF32_SHARED_BYTES: usize =
    2 * (PROJ_TF32_TILE_ROWS + PROJ_TF32_TILE_COLS) * PROJ_TF32_ROW_FLOATS * 4;
/// 3xTF32 projection, large tile: K values of both operands per cp.async stage (four k-steps
/// of 8: one block barrier per four k-steps; the small tile keeps [`PROJ_TF32_K_TILE`]).
pub const PROJ_TF32X3_K_TILE: usize = 32;
/// 3xTF32 projection, large tile: floats between consecutive activation rows of a stage in
/// shared memory: the K tile plus 8 (an odd multiple of 8: conflict-free 64-bit fragment loads).
pub const PROJ_TF32X3_ROW_FLOATS: usize = PROJ_TF32X3_K_TILE + 8;
/// 3xTF32 projection (FP32-accurate), large tile (`bilstm_projection_tf32x3`): output tile
/// rows. Its own tiles, not the TF32 kernel's 128x256: the fresh per-k-step accumulator of
/// 3xTF32 needs registers that 64x64 warp tiles have not got (ptxas 13.0, sm_90: 255 registers
/// and 84 bytes of spills).
pub const PROJ_TF32X3_TILE_ROWS: usize = 128;
/// 3xTF32 projection, large tile: output tile columns.
pub const PROJ_TF32X3_TILE_COLS: usize = 128;
/// 3xTF32 projection, large tile: rows of one warp's tile (8 warps: 2 x 4 warp tiles).
pub const PROJ_TF32X3_WARP_ROWS: usize = 32;
/// 3xTF32 projection, large tile: columns of one warp's tile.
pub const PROJ_TF32X3_WARP_COLS: usize = 64;
/// 3xTF32 projection, large tile: floats between consecutive k rows of a stage's weight tile,
/// which keeps the K-major layout of the packed FP32 weights: the tile's columns plus 4 floats
/// of padding. 4 mod 32 words, so that a warp's 32-bit B fragment loads (4 k-pairs x 8
/// columns) hit 32 distinct banks.
pub const PROJ_TF32X3_B_ROW_FLOATS: usize = PROJ_TF32X3_TILE_COLS + 4;
/// 3xTF32 projection, large tile: dynamic shared bytes, a double buffer of the activation tile
/// (rows of [`PROJ_TF32X3_ROW_FLOATS`]) and the two K-major weight tiles, high parts and
/// remainders (rows of [`PROJ_TF32X3_B_ROW_FLOATS`]): 108,544 bytes (over the 99 KiB opt-in of
/// 8.6 and 8.9, where the plan falls back to the 64x128 tile).
pub const PROJ_TF32X3_SHARED_BYTES: usize = 2
    * (PROJ_TF32X3_TILE_ROWS * PROJ_TF32X3_ROW_FLOATS
        + 2 * PROJ_TF32X3_K_TILE * PROJ_TF32X3_B_ROW_FLOATS)
    * 4;
/// 3xTF32 projection, small tile (`bilstm_projection_tf32x3_small`): output tile rows. Same
/// numerics and bits as the large tile; more blocks for small row counts.
pub const PROJ_TF32X3_SMALL_TILE_ROWS: usize = 64;
/// 3xTF32 projection, small tile: output tile columns.
pub const PROJ_TF32X3_SMALL_TILE_COLS: usize = 128;
/// 3xTF32 projection, small tile: rows of one warp's tile (8 warps: 2 x 4 warp tiles).
pub const PROJ_TF32X3_SMALL_WARP_ROWS: usize = 32;
/// 3xTF32 projection, small tile: columns of one warp's tile.
pub const PROJ_TF32X3_SMALL_WARP_COLS: usize = 32;
/// 3xTF32 projection, small tile: floats between consecutive k rows of a stage's weight tile
/// (the tile's columns plus 4: 4 mod 32 words, conflict-free B fragment loads).
pub const PROJ_TF32X3_SMALL_B_ROW_FLOATS: usize = PROJ_TF32X3_SMALL_TILE_COLS + 4;
/// 3xTF32 projection, small tile: dynamic shared bytes, a double buffer of the activation
/// tile and both weight tiles (46,080 bytes).
pub const PROJ_TF32X3_SMALL_SHARED_BYTES: usize = 2
    * (PROJ_TF32X3_SMALL_TILE_ROWS * PROJ_TF32_ROW_FLOATS
        + 2 * PROJ_TF32_K_TILE * PROJ_TF32X3_SMALL_B_ROW_FLOATS)
    * 4;

/// 3xTF32 projection on Hopper's warpgroup MMA (`bilstm_projection_tf32x3_wgmma`, compute
/// capability 9.0 only, `wgmma.mma_async` of `sm_90a`): output tile rows (two warpgroups of 64
/// rows).
pub const PROJ_WG_TILE_ROWS: usize = 128;
/// Warpgroup-MMA 3xTF32 projection: output tile columns (one `m64n128k8` product a warpgroup).
pub const PROJ_WG_TILE_COLS: usize = 128;
/// Its TF32 twin (`bilstm_projection_tf32_wgmma`): output tile columns, two column tiles of the
/// weight image (one `m64n256k8` product a warpgroup and k-step, the stage's two weight slots
/// holding the two tiles' high parts). H200, 2026-12-02 session 11 call 6 (TF32 whole forward,
/// three rounds against 128-column tiles in the same call): batch 256 6.18-6.20 ms against
/// 6.60-6.61, batch 1024 24.43-24.49 against 26.22-26.23, batch 32 1.68-1.69 against 1.71-1.72,
/// batch 1 1.311 against 1.300 (half as many work tiles at 589 rows).
pub const PROJ_WG_TF32_TILE_COLS: usize = 2 * PROJ_WG_TILE_COLS;
/// Warpgroup-MMA 3xTF32 projection: K values per cp.async stage, the width of one 128-byte
/// swizzle row of the weight image (four k-steps of 8). The packed weight image pads the input
/// width to a multiple of it ([`proj_wg_padded_in`]).
pub const PROJ_WG_K_TILE: usize = 32;
/// Warpgroup-MMA 3xTF32 projection: pipeline stages (four: the copies of step f + 2 are issued
/// at step f, and the stage they refill, last read at step f - 2, leaves one step of slack
/// between the block's two warpgroups, which run apart).
pub const PROJ_WG_STAGES: usize = 4;
/// Warpgroup-MMA 3xTF32 projection: floats between consecutive activation rows of a stage (the
/// K tile plus 8: conflict-free 64-bit fragment loads).
pub const PROJ_WG_ROW_FLOATS: usize = PROJ_WG_K_TILE + 8;
/// Warpgroup-MMA 3xTF32 projection: floats of one weight part's K tile of one column tile
/// (`TILE_COLS x K_TILE`, the 128-byte-swizzled image `bilstm_core::layout::pack_input_x3_wgmma_into`
/// lays out).
pub const PROJ_WG_B_TILE_FLOATS: usize = PROJ_WG_TILE_COLS * PROJ_WG_K_TILE;
/// Warpgroup-MMA 3xTF32 projection: dynamic shared bytes, [`PROJ_WG_STAGES`] stages of the
/// activation tile and both weight parts' tiles, then two 8-byte mbarriers a stage (213,056
/// bytes; one block per SM).
pub const PROJ_WG_SHARED_BYTES: usize =
    PROJ_WG_STAGES * (PROJ_WG_TILE_ROWS * PROJ_WG_ROW_FLOATS + 2 * PROJ_WG_B_TILE_FLOATS) * 4
        + 2 * PROJ_WG_STAGES * 8;

/// TF32 projection with resident weights (`bilstm_projection_tf32_resident`, compute capability
/// 9.0, layers whose input the previous layer's recurrence stored rounded to TF32): rows of one
/// warpgroup's work block (one `m64n128k8` product a k-step, A and B both read from shared
/// memory; the kernel asserts 64). H200, 2026-12-02 session 14 call 3 (TF32, batch 256, layer 1,
/// two rounds): 64 rows with 4 stages 0.365-0.366 ms; two 64-row chains a warpgroup (128 rows, 2
/// stages; that code path since removed) 0.389-0.390.
pub const PROJ_RES_BLOCK_ROWS: usize = 64;
/// Resident TF32 projection: the most K tiles ([`PROJ_WG_K_TILE`] each) a block keeps resident:
/// one 128-column tile's TF32 weights for an input of up to 256 values (128 KiB).
pub const PROJ_RES_MAX_K_TILES: usize = 8;
/// Resident TF32 projection: activation stages a warpgroup (each one K tile of its rows, loaded
/// by TMA); with fewer than 5 the copy into a stage is issued at the end of the step after the
/// one that last read it, so `PROJ_RES_STAGES - 1` steps are in flight (what shared memory
/// leaves beside the weights for [`PROJ_RES_WARPGROUPS`] warpgroups).
pub const PROJ_RES_STAGES: usize = 4;
/// Resident TF32 projection: column tiles (two directions of four 128-column tiles); the grid is
/// a multiple of it, block `b` holding column tile `b % PROJ_RES_COL_TILES`.
pub const PROJ_RES_COL_TILES: usize = 2 * GATE_ROWS / PROJ_WG_TILE_COLS;
/// Resident TF32 projection: dynamic shared bytes: the resident weights, every warpgroup's
/// activation stages, then the mbarriers (the weights' one, then `full` and `empty` for each
/// warpgroup's stages), padded to 256 bytes (229,632 bytes: one block an SM).
pub const PROJ_RES_SHARED_BYTES: usize = PROJ_RES_MAX_K_TILES * PROJ_WG_B_TILE_FLOATS * 4
    + PROJ_RES_WARPGROUPS * PROJ_RES_STAGES * PROJ_RES_BLOCK_ROWS * PROJ_WG_K_TILE * 4
    + (8 + 2 * PROJ_RES_WARPGROUPS * PROJ_RES_STAGES * 8).div_ceil(256) * 256;
/// Resident TF32 projection: warpgroups a block, each streaming its own row blocks through its
/// own [`PROJ_RES_STAGES`] stages and storing its tiles with its threads' own 8-byte stores (or
/// by TMA: [`PROJ_RES_STORE_BY_TMA`]). H200, 2026-12-02 session 16 call 5 (TF32, `--phases`,
/// three rounds against two warpgroups whose
/// epilogue went half through a TMA-store staging): layer 1 0.329-0.331 ms against 0.362-0.364
/// at batch 256, 1.283-1.286 against 1.415 at 1024; four warpgroups of 3 stages 0.359-0.361 /
/// 1.419-1.421 (the stages' depth matters as much as the warpgroups').
pub const PROJ_RES_WARPGROUPS: usize = 3;
/// Resident TF32 projection: threads a block.
pub const PROJ_RES_THREADS: usize = 128 * PROJ_RES_WARPGROUPS;
/// Resident TF32 projection, flag of its last parameter: the kernel rounds its input to TF32 in
/// shared memory (layer 0: the model's input, not stored rounded by a recurrence).
pub const PROJ_RES_ROUND_INPUT: usize = 1;
/// Resident TF32 projection, flag of its last parameter: each warpgroup stores its output tiles
/// through shared memory by TMA (64 x 128 floats, 32 KiB a warpgroup, in the weight space the
/// input's K tiles leave free: inputs of at most [`PROJ_RES_TMA_STORE_MAX_K_TILES`] K tiles)
/// instead of its threads' own stores. H200, 2026-12-02 session 16 call 9 (TF32, `--phases`,
/// three rounds, same bits): layer 0 (K = 60) 0.205-0.208 ms at batch 256 against 0.255-0.261
/// with the threads' stores, 0.830-0.835 against 0.996-1.011 at 1024.
pub const PROJ_RES_STORE_BY_TMA: usize = 2;
/// Resident TF32 projection: the most K tiles of an input whose outputs can leave by TMA (the
/// weight space of [`PROJ_RES_MAX_K_TILES`] tiles then also holds every warpgroup's 32 KiB
/// staging): 2 (inputs of up to 64 values, layer 0).
pub const PROJ_RES_TMA_STORE_MAX_K_TILES: usize = PROJ_RES_MAX_K_TILES
    - PROJ_RES_WARPGROUPS * PROJ_RES_BLOCK_ROWS * PROJ_WG_TILE_COLS / PROJ_WG_B_TILE_FLOATS;
/// The input width rounded up to [`PROJ_WG_K_TILE`]: the K extent of the warpgroup-MMA weight
/// image (60 becomes 64, 256 stays 256).
pub const fn proj_wg_padded_in(width: usize) -> usize {
    width.div_ceil(PROJ_WG_K_TILE) * PROJ_WG_K_TILE
}

/// Hidden-state exchange: bytes of one published word (flag in the high half, value low).
pub const EXCHANGE_WORD_BYTES: usize = 8;
/// Hidden-state exchange: a producer owns whole lines of this many bytes.
pub const EXCHANGE_LINE_BYTES: usize = 128;
/// Hidden-state exchange: words per line.
pub const EXCHANGE_LINE_WORDS: usize = EXCHANGE_LINE_BYTES / EXCHANGE_WORD_BYTES;
/// Hidden-state exchange: parity slots (step `t` writes slot `t % 2`).
pub const EXCHANGE_SLOTS: usize = 2;
/// Hidden-state exchange: the base address is aligned to this many bytes (upstream: 2 MiB),
/// so the layout never depends on allocation order.
pub const EXCHANGE_ALIGN_BYTES: usize = 2 * 1024 * 1024;

/// Recurrent dot product: partial FMA chains per gate row (DESIGN §4 numerics).
pub const DOT_CHAINS: usize = 16;
/// Recurrent dot product: terms per chain (`HIDDEN / DOT_CHAINS`).
pub const DOT_CHAIN_TERMS: usize = HIDDEN / DOT_CHAINS;
/// TF32 mode's recurrent dot product: partial FMA chains per gate row (`numerics.cuh` section
/// 8: one tree level fewer than FP32 mode's [`DOT_CHAINS`]). H200 session 19, a timing build of
/// the 8-window quads with one 16-term chain a lane: TF32 batch 1024 21.74 ms against 22.69
/// (64 fewer FADD a lane and step).
pub const TF32_DOT_CHAINS: usize = 8;
/// TF32 mode's recurrent dot product: terms per chain (`HIDDEN / TF32_DOT_CHAINS`).
pub const TF32_DOT_CHAIN_TERMS: usize = HIDDEN / TF32_DOT_CHAINS;

/// Most `-D` defines [`defines`] returns.
pub const MAX_DEFINES: usize = 80;

/// The `-D` defines every kernel is compiled with: `(name, value)`, names `BILSTM_*`.
pub fn defines() -> heapless::Vec<(&'static str, i64), MAX_DEFINES> {
    let all: [(&'static str, usize); 76] = [
        ("BILSTM_HIDDEN", HIDDEN),
        ("BILSTM_GATES", GATES),
        ("BILSTM_GATE_ROWS", GATE_ROWS),
        ("BILSTM_K_PAD", K_PAD),
        ("BILSTM_BLOCK_THREADS", BLOCK_THREADS),
        ("BILSTM_WARP_THREADS", WARP_THREADS),
        ("BILSTM_WIDE_BLOCKS_PER_TILE", WIDE_BLOCKS_PER_TILE),
        ("BILSTM_WIDE_UNITS_PER_BLOCK", WIDE_UNITS_PER_BLOCK),
        ("BILSTM_WIDE_MAX_TILE_HEIGHT", WIDE_MAX_TILE_HEIGHT),
        ("BILSTM_TILED_WINDOWS", TILED_WINDOWS),
        ("BILSTM_TILED_BLOCKS_PER_TILE", TILED_BLOCKS_PER_TILE),
        ("BILSTM_TILED_UNITS_PER_BLOCK", TILED_UNITS_PER_BLOCK),
        ("BILSTM_RESIDENT_THREADS", RESIDENT_THREADS),
        (
            "BILSTM_RESIDENT_CHAINS_PER_THREAD",
            RESIDENT_CHAINS_PER_THREAD,
        ),
        ("BILSTM_RESIDENT_R_SHARED_BYTES", RESIDENT_R_SHARED_BYTES),
        ("BILSTM_RESIDENT_SHARED_BYTES", RESIDENT_SHARED_BYTES),
        ("BILSTM_CLUSTER_THREADS", CLUSTER_THREADS),
        ("BILSTM_CLUSTER_GROUP_LANES", CLUSTER_GROUP_LANES),
        ("BILSTM_CLUSTER_PROGRESS_STEPS", CLUSTER_PROGRESS_STEPS),
        ("BILSTM_QUAD_GROUP_LANES", QUAD_GROUP_LANES),
        ("BILSTM_QUAD_PIECE_FLOATS", QUAD_PIECE_FLOATS),
        ("BILSTM_QUAD_H_ROW_FLOATS", QUAD_H_ROW_FLOATS),
        ("BILSTM_FIXED_THREADS", FIXED_THREADS),
        ("BILSTM_FIXED_WINDOWS", FIXED_WINDOWS),
        ("BILSTM_FIXED_H_ROW_BYTES", FIXED_H_ROW_BYTES),
        ("BILSTM_FIXED4_WINDOWS", FIXED4_WINDOWS),
        ("BILSTM_FIXED2_WINDOWS", FIXED2_WINDOWS),
        ("BILSTM_PROJ_SMALL_TILE", PROJ_SMALL_TILE),
        ("BILSTM_PROJ_LARGE_TILE", PROJ_LARGE_TILE),
        ("BILSTM_PROJ_K_TILE", PROJ_K_TILE),
        ("BILSTM_PROJ_TF32_TILE_ROWS", PROJ_TF32_TILE_ROWS),
        ("BILSTM_PROJ_TF32_TILE_COLS", PROJ_TF32_TILE_COLS),
        ("BILSTM_PROJ_TF32_SHARED_BYTES", PROJ_TF32_SHARED_BYTES),
        ("BILSTM_PROJ_TF32_K_TILE", PROJ_TF32_K_TILE),
        ("BILSTM_PROJ_TF32_ROW_FLOATS", PROJ_TF32_ROW_FLOATS),
        ("BILSTM_PROJ_TF32X3_K_TILE", PROJ_TF32X3_K_TILE),
        ("BILSTM_PROJ_TF32X3_ROW_FLOATS", PROJ_TF32X3_ROW_FLOATS),
        ("BILSTM_PROJ_TF32X3_TILE_ROWS", PROJ_TF32X3_TILE_ROWS),
        ("BILSTM_PROJ_TF32X3_TILE_COLS", PROJ_TF32X3_TILE_COLS),
        ("BILSTM_PROJ_TF32X3_WARP_ROWS", PROJ_TF32X3_WARP_ROWS),
        ("BILSTM_PROJ_TF32X3_WARP_COLS", PROJ_TF32X3_WARP_COLS),
        ("BILSTM_PROJ_TF32X3_B_ROW_FLOATS", PROJ_TF32X3_B_ROW_FLOATS),
        ("BILSTM_PROJ_TF32X3_SHARED_BYTES", PROJ_TF32X3_SHARED_BYTES),
        (
            "BILSTM_PROJ_TF32X3_SMALL_TILE_ROWS",
            PROJ_TF32X3_SMALL_TILE_ROWS,
        ),
        (
            "BILSTM_PROJ_TF32X3_SMALL_TILE_COLS",
            PROJ_TF32X3_SMALL_TILE_COLS,
        ),
        (
            "BILSTM_PROJ_TF32X3_SMALL_WARP_ROWS",
            PROJ_TF32X3_SMALL_WARP_ROWS,
        ),
        (
            "BILSTM_PROJ_TF32X3_SMALL_WARP_COLS",
            PROJ_TF32X3_SMALL_WARP_COLS,
        ),
        (
            "BILSTM_PROJ_TF32X3_SMALL_B_ROW_FLOATS",
            PROJ_TF32X3_SMALL_B_ROW_FLOATS,
        ),
        (
            "BILSTM_PROJ_TF32X3_SMALL_SHARED_BYTES",
            PROJ_TF32X3_SMALL_SHARED_BYTES,
        ),
        ("BILSTM_PROJ_WG_TILE_ROWS", PROJ_WG_TILE_ROWS),
        ("BILSTM_PROJ_WG_TILE_COLS", PROJ_WG_TILE_COLS),
        ("BILSTM_PROJ_WG_TF32_TILE_COLS", PROJ_WG_TF32_TILE_COLS),
        ("BILSTM_PROJ_WG_K_TILE", PROJ_WG_K_TILE),
        ("BILSTM_PROJ_WG_STAGES", PROJ_WG_STAGES),
        ("BILSTM_PROJ_WG_ROW_FLOATS", PROJ_WG_ROW_FLOATS),
        ("BILSTM_PROJ_WG_B_TILE_FLOATS", PROJ_WG_B_TILE_FLOATS),
        ("BILSTM_PROJ_WG_SHARED_BYTES", PROJ_WG_SHARED_BYTES),
        ("BILSTM_PROJ_RES_BLOCK_ROWS", PROJ_RES_BLOCK_ROWS),
        ("BILSTM_PROJ_RES_MAX_K_TILES", PROJ_RES_MAX_K_TILES),
        ("BILSTM_PROJ_RES_STAGES", PROJ_RES_STAGES),
        ("BILSTM_PROJ_RES_COL_TILES", PROJ_RES_COL_TILES),
        ("BILSTM_PROJ_RES_SHARED_BYTES", PROJ_RES_SHARED_BYTES),
        ("BILSTM_PROJ_RES_THREADS", PROJ_RES_THREADS),
        ("BILSTM_PROJ_RES_ROUND_INPUT", PROJ_RES_ROUND_INPUT),
        ("BILSTM_PROJ_RES_STORE_BY_TMA", PROJ_RES_STORE_BY_TMA),
        ("BILSTM_EXCHANGE_WORD_BYTES", EXCHANGE_WORD_BYTES),
        ("BILSTM_EXCHANGE_LINE_BYTES", EXCHANGE_LINE_BYTES),
        ("BILSTM_EXCHANGE_LINE_WORDS", EXCHANGE_LINE_WORDS),
        ("BILSTM_EXCHANGE_SLOTS", EXCHANGE_SLOTS),
        ("BILSTM_EXCHANGE_ALIGN_BYTES", EXCHANGE_ALIGN_BYTES),
        ("BILSTM_DOT_CHAINS", DOT_CHAINS),
        ("BILSTM_DOT_CHAIN_TERMS", DOT_CHAIN_TERMS),
        ("BILSTM_TF32_DOT_CHAINS", TF32_DOT_CHAINS),
        ("BILSTM_TF32_DOT_CHAIN_TERMS", TF32_DOT_CHAIN_TERMS),
        ("BILSTM_MAX_FEATURES", MAX_FEATURES),
        ("BILSTM_TENSOR_ALIGN_FLOATS", TENSOR_ALIGN_FLOATS),
    ];
    let mut out = heapless::Vec::new();
    for (name, value) in all {
        // MAX_DEFINES exceeds the list's length, checked by the tests below.
        let _ = out.push((name, value as i64));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_is_consistent() {
        assert_eq!(WIDE_UNITS_PER_BLOCK * WIDE_BLOCKS_PER_TILE, HIDDEN);
        assert_eq!(TILED_UNITS_PER_BLOCK * TILED_BLOCKS_PER_TILE, HIDDEN);
        assert_eq!(DOT_CHAINS * DOT_CHAIN_TERMS, HIDDEN);
        assert_eq!(TF32_DOT_CHAINS * TF32_DOT_CHAIN_TERMS, HIDDEN);
        assert_eq!(DOT_CHAINS, 2 * TF32_DOT_CHAINS);
        assert_eq!(
            EXCHANGE_LINE_WORDS * EXCHANGE_WORD_BYTES,
            EXCHANGE_LINE_BYTES
        );
        assert_eq!(RESIDENT_R_SHARED_BYTES, 128 * 1024);
        assert_eq!(PROJ_TF32_SHARED_BYTES, 72 * 1024);
        assert_eq!(PROJ_TF32_ROW_FLOATS % 16, 8);
        assert_eq!(PROJ_TF32X3_SHARED_BYTES, 108_544);
        assert_eq!(PROJ_TF32X3_SMALL_SHARED_BYTES, 46_080);
        assert_eq!(PROJ_TF32X3_ROW_FLOATS % 16, 8);
        const { assert!(PROJ_TF32X3_SMALL_SHARED_BYTES <= 48 * 1024) };
        assert!(matches!(PROJ_TF32X3_B_ROW_FLOATS % 16, 4 | 12));
        assert!(matches!(PROJ_TF32X3_SMALL_B_ROW_FLOATS % 16, 4 | 12));
        assert!(WIDE_TILE_HEIGHTS.iter().all(|&h| h <= WIDE_MAX_TILE_HEIGHT));
        for size in CLUSTER_SIZES {
            assert!(size <= CLUSTER_MAX_SIZE);
            let groups = size * CLUSTER_THREADS / CLUSTER_GROUP_LANES;
            assert_eq!(GATE_ROWS % groups, 0);
            // Whole units per group (a unit's four gate rows stay in one group).
            assert_eq!((GATE_ROWS / groups) % GATES, 0);
        }
    }

    #[test]
    fn layer_0_of_pyannote_fits_the_tma_store_epilogue() {
        // Its K tiles and every warpgroup's 64 x 128 staging fit the resident weight space,
        // one more K tile would not.
        let tile_bytes = PROJ_WG_B_TILE_FLOATS * 4;
        let staging = PROJ_RES_WARPGROUPS * PROJ_RES_BLOCK_ROWS * PROJ_WG_TILE_COLS * 4;
        let k_tiles = proj_wg_padded_in(60) / PROJ_WG_K_TILE;
        assert!(k_tiles <= PROJ_RES_TMA_STORE_MAX_K_TILES);
        assert!(
            PROJ_RES_TMA_STORE_MAX_K_TILES * tile_bytes + staging
                <= PROJ_RES_MAX_K_TILES * tile_bytes
        );
        assert!(
            (PROJ_RES_TMA_STORE_MAX_K_TILES + 1) * tile_bytes + staging
                > PROJ_RES_MAX_K_TILES * tile_bytes
        );
    }

    #[test]
    fn defines_are_unique_prefixed_and_complete() {
        let d = defines();
        assert!(d.len() < MAX_DEFINES, "raise MAX_DEFINES");
        assert_eq!(d.len(), 76);
        assert!(d.contains(&("BILSTM_PROJ_RES_SHARED_BYTES", 229_632)));
        assert!(d.contains(&("BILSTM_FIXED_THREADS", 512)));
        for (i, (name, _)) in d.iter().enumerate() {
            assert!(name.starts_with("BILSTM_"));
            assert!(
                d.iter().skip(i + 1).all(|(other, _)| other != name),
                "{name} twice"
            );
        }
        assert!(d.contains(&("BILSTM_HIDDEN", 128)));
    }
}
