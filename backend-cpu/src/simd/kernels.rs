//! The two kernels of a direction, generic over [`Lanes`]: the input projection (a
//! register-blocked, cache-blocked SGEMM) and the recurrence (per step, a small GEMM over the
//! batch, then the gates' pointwise math, vectorised).
//!
//! # Layouts (built by `crate::panel` at prepare)
//! - Gate columns are in the CPU's *panel order*: 16 panels of 8 units; inside panel `p`,
//!   column `p·32 + gate·8 + j` is gate `[i, f, g, o][gate]` of unit `8p + j`. One 8-lane vector
//!   then holds one gate of eight units, so the cell update needs no shuffles.
//! - Projection weights: `cols / 16` column strips, each `[width][16]` (K rows of 16 columns,
//!   contiguous: a strip is 16 KiB for width 256 and stays in L1).
//! - Recurrent weights: `cols / 16` strips `[H][16]` (8 KiB each, contiguous;
//!   a step streams R from L2 in long sequential runs).
//! - Projection inputs: each L2 block's full register tiles of rows are packed once per call
//!   into the caller's panel (`[K][rows of the tile]`; the backend's, one a direction, is
//!   allocated at prepare), which every strip then reads.
//!
//! # Numerics (fixed: the CPU backend's bits depend on it)
//! Every projection value is one FMA chain in ascending `k` starting from `0.0`; every gate
//! pre-activation is one FMA chain `proj + Σ h[k]·R[k, col]` in ascending `k` starting from
//! the projection value (skipped at step 0, where `h = 0`), then `+ bias` (DESIGN §2). Then
//! [`cell_n`]: `c' = σ(a_f)·c + σ(a_i)·tanh(a_g)` and `h = σ(a_o)·tanh(c')` in the fixed
//! sequence of operations documented there. No sum is ever split or reordered by the
//! blocking, the batch, the window's position or the thread, so the bits depend on none of
//! them.

use super::math::cell_n;
use super::{Lanes, ProjectTile, RecurrentTile, SingleTile, Tiles, Wide};

/// Hidden units per direction (the only size core accepts).
pub(crate) const H: usize = 128;
/// Gate columns per direction.
pub(crate) const COLS: usize = 4 * H;
pub(crate) use bilstm_core::layout::PANEL_COLS;
/// Columns in one projection strip (one [`Wide`] row: two 256-bit or one 512-bit vector).
pub(crate) const STRIP_COLS: usize = 16;
/// Columns in one recurrent-weight strip (two vectors; a strip `[H][16]` is 8 KiB, contiguous).
///
/// Measured on the development machine (Zen 4, 2 threads, 2026-11-29, `bench/NOTES.md`):
/// against 64-column blocks `[H][64]` (256 contiguous bytes per `k`), 16-column strips made
/// the recurrence at batch 32 about 4% faster (the 6-window tiles read 64 bytes per `k`, and
/// with 64-column blocks those lines sat 256 bytes apart, in a quarter of L1's sets) and left
/// batch 1 unchanged once the AVX-512VL build had its registers (12.95 vs 13.0 ms of
/// recurrence per forward, summed over threads).
pub(crate) const R_STRIP_COLS: usize = 16;
/// Strips per projection register tile of the 512-bit build's `p6x32` tile (6 rows x 2 strips
/// = 12 `zmm` accumulators; [`ProjectTile`] has the variants and `Tiles::default` the choice).
pub(crate) const ZMM_PROJECT_STRIPS: usize = 2;
/// Strips per recurrent-product tile of the 512-bit build for 6 windows (`r6x64`, and the
/// 6-window remainder of the wider tiles), 1 window (the `s128` strip tile), 2 and 3 to 5
/// windows ([`recurrence`]'s `SG, S1, S2, S3`; [`RecurrentTile`] and [`SingleTile`] have the
/// variants and `Tiles::default` the choice).
pub(crate) const ZMM_RECURRENT_STRIPS: [usize; 4] = [4, 8, 4, 4];
/// Rows of the default projection register tile (and of the tile that covers the remainder
/// of a taller one).
const TILE_ROWS: usize = 6;
/// Rows of the projection's L2 block (the `x` rows one pass over all strips reuses) in
/// register tiles; also the most full tiles a block packs into its panel (a block of whole
/// groups holds at most `BLOCK_TILES * MR` rows, so at most this many full tiles).
const BLOCK_TILES: usize = 16;
/// How far ahead (in rows of `k`) the prefetching one-window tile ([`SingleTile::Seq256Prefetch`])
/// asks for R: 2 rows of 1 KiB.
const PREFETCH_ROWS: usize = 2;
/// How many 64-byte lines of R the prefetching one-window tile asks for before a step's gate
/// math, so the next step's product starts on lines already in L1 (4 KiB).
const PREFETCH_HEAD: usize = 64;

/// One projection: `out[row, col] = Σ_k x[row, k] · W[k, col]` for `rows` rows, where the
/// input row is the concatenation of two parts (`x[0]` row then `x[1]` row: the previous
/// layer's forward and reverse hidden states, so no merged copy is needed; layer 0 has an
/// empty second part).
pub(crate) struct Projection<'a> {
    /// The two input parts, `[rows, widths[p]]` each.
    pub x: [&'a [f32]; 2],
    /// Width of each part (K = their sum).
    pub widths: [usize; 2],
    /// Rows per group.
    pub rows: usize,
    /// Groups of rows (one per window when a chunk of frames is projected).
    pub groups: usize,
    /// Distance in rows between the starts of two groups in `x` (`frames`), at least `rows`.
    pub group_stride: usize,
    /// Distance in rows between the starts of two groups in the output, at least `rows`
    /// (a chunk's gates buffer holds only the chunk's frames of each window).
    pub out_stride: usize,
    /// Weight strips, `COLS / STRIP_COLS` of `[K][16]`.
    pub strips: &'a [f32],
}

/// Runs a [`Projection`]: row `r` of group `g` goes to row `g * out_stride + r` of `out`
/// (`[_, COLS]`, panel order). The register tile is `MR` rows x `NS` strips of `W` (`NS` divides
/// the 32 strips; a remainder of 6 rows or more takes 6-row tiles first). `panel` is scratch
/// for the packed input rows ([`panel_len`] values never grow). Wrong lengths write nothing
/// (the caller sizes everything; debug builds assert).
#[inline(always)]
pub(crate) fn project<V: Lanes, W: Wide, const MR: usize, const NS: usize>(
    p: &Projection<'_>,
    out: &mut [f32],
    panel: &mut Vec<f32>,
) {
    let (rows, groups, stride, out_stride) = (p.rows, p.groups, p.group_stride, p.out_stride);
    if groups == 0 || rows == 0 {
        return;
    }
    let width = p.widths[0] + p.widths[1];
    let span = (groups - 1) * stride + rows;
    let out_span = (groups - 1) * out_stride + rows;
    let ok = p.x[0].len() >= span * p.widths[0]
        && p.x[1].len() >= span * p.widths[1]
        && out.len() >= out_span * COLS
        && p.strips.len() >= COLS * width
        && width > 0
        && (groups <= 1 || (stride >= rows && out_stride >= rows));
    debug_assert!(ok);
    if !ok {
        return;
    }
    let (strip_rows, _) = p.strips[..COLS * width].as_chunks::<STRIP_COLS>();
    // The block's full MR-row tiles, packed once (at the first strip) into `panel` and read by
    // every strip; a panel shorter than `panel_len` grows (the backend's, sized at prepare by
    // [`panel_len`], never does), and without room for the rows (an allocation refused) the
    // tiles read them in place.
    const { assert!(MR <= MAX_TILE_ROWS, "panel_len covers every tile") };
    let needed = BLOCK_TILES * MR * width;
    let packed = panel.len() >= needed
        || panel
            .try_reserve_exact(needed - panel.len())
            .map(|()| panel.resize(needed, 0.0))
            .is_ok();
    // L2 blocks of about BLOCK_ROWS rows: whole groups when groups are short, else slices
    // of one group.
    let block_rows = BLOCK_TILES * MR;
    let groups_per_block = (block_rows / rows.max(1)).clamp(1, groups);
    let rows_per_block = if groups_per_block > 1 {
        rows
    } else {
        block_rows
    };
    for g0 in (0..groups).step_by(groups_per_block) {
        let g_end = (g0 + groups_per_block).min(groups);
        for r0 in (0..rows).step_by(rows_per_block) {
            let r_end = (r0 + rows_per_block).min(rows);
            for (s, strip) in strip_rows.chunks_exact(width * NS).enumerate() {
                let col0 = s * NS * STRIP_COLS;
                // The block's full tiles in order: the same numbering for every strip.
                let mut t = 0;
                for g in g0..g_end {
                    let (base, out_base) = (g * stride, g * out_stride);
                    if s == 0 {
                        // The first strip pass reads the input rows from memory (the previous
                        // layer wrote them long ago): ask for the next group's now.
                        let next = (g + 1 < groups).then(|| (g + 1) * stride + r0);
                        prefetch_rows::<V>(p, next, r_end - r0);
                    }
                    let mut r = r0;
                    while r + MR <= r_end {
                        let at = [base + r, out_base + r];
                        match panel.get_mut(t * MR * width..(t + 1) * MR * width) {
                            Some(rows) if packed && t < BLOCK_TILES => {
                                if s == 0 {
                                    pack_rows::<MR>(p, at[0], rows);
                                }
                                packed_tile::<W, MR, NS>(rows, at[1], strip, out, col0);
                            }
                            _ => tile::<W, MR, NS>(p, at, strip, out, col0),
                        }
                        t += 1;
                        r += MR;
                    }
                    while MR > TILE_ROWS && r + TILE_ROWS <= r_end {
                        let at = [base + r, out_base + r];
                        tile::<W, TILE_ROWS, NS>(p, at, strip, out, col0);
                        r += TILE_ROWS;
                    }
                    let at = [base + r, out_base + r];
                    match r_end - r {
                        1 => tile::<W, 1, NS>(p, at, strip, out, col0),
                        2 => tile::<W, 2, NS>(p, at, strip, out, col0),
                        3 => tile::<W, 3, NS>(p, at, strip, out, col0),
                        4 => tile::<W, 4, NS>(p, at, strip, out, col0),
                        5 => tile::<W, 5, NS>(p, at, strip, out, col0),
                        _ => {}
                    }
                }
            }
        }
    }
}

/// The most rows a projection register tile has (the 512-bit build's 12-row tile).
const MAX_TILE_ROWS: usize = 12;

/// Values a projection panel ([`project`]'s `panel`) needs for inputs of up to `width` columns
/// with any tile: with that many, [`project`] never grows it.
pub(crate) fn panel_len(width: usize) -> usize {
    BLOCK_TILES
        .saturating_mul(MAX_TILE_ROWS)
        .saturating_mul(width)
}

/// Packs `MR` input rows from `row` (both parts, part 0's columns first, so `k` runs as in
/// [`tile`]) k-major: `panel[k * MR + i]` is row `row + i`'s value `k`, so a tile's `MR`
/// broadcasts of one `k` read one contiguous run.
#[inline(always)]
fn pack_rows<const MR: usize>(p: &Projection<'_>, row: usize, panel: &mut [f32]) {
    let mut k0 = 0;
    for (x, &pw) in p.x.iter().zip(&p.widths) {
        let Some(src) = x.get(row * pw..(row + MR) * pw) else {
            k0 += pw;
            continue;
        };
        let rows: [&[f32]; MR] = std::array::from_fn(|i| &src[i * pw..(i + 1) * pw]);
        let Some(dst) = panel.get_mut(k0 * MR..(k0 + pw) * MR) else {
            return;
        };
        // k outer, rows inner: contiguous writes. Row by row, the writes of stride MR compiled
        // to `vscatterqps` in the 512-bit build: 2.4 % of `project`'s samples at batch 32 on the
        // Xeon development machine (session 12), and `project` / `recurrence` samples 1.320
        // against 1.260 this way (`perf record`, one thread, `bilstm bench --batches 32`).
        let (dst, _) = dst.as_chunks_mut::<MR>();
        for (k, d) in dst.iter_mut().enumerate() {
            for (i, v) in d.iter_mut().enumerate() {
                *v = rows[i][k];
            }
        }
        k0 += pw;
    }
}

/// [`tile`] on rows packed by [`pack_rows`] (`panel`: K runs of `MR` values): the same FMA
/// chain per value (ascending `k` from `0.0`), so the same bits; the `MR` broadcasts of a `k`
/// come from one cache line instead of `MR` row streams. Measured on the development machine
/// (2026-12-02, AMD EPYC Zen 3, AVX2, one thread, batch 32, `bilstm bench --backend cpu`): 820 to
/// 871 ms a forward against 840 to 969 unpacked, three alternating rounds.
#[inline(always)]
fn packed_tile<W: Wide, const MR: usize, const NS: usize>(
    panel: &[f32],
    out_row: usize,
    strips: &[[f32; STRIP_COLS]],
    out: &mut [f32],
    col0: usize,
) {
    let width = strips.len() / NS;
    let (rows, _) = panel.as_chunks::<MR>();
    let parts: [&[[f32; STRIP_COLS]]; NS] =
        std::array::from_fn(|q| strips.get(q * width..(q + 1) * width).unwrap_or(&[]));
    if rows.len() < width || parts.iter().any(|part| part.len() != width) {
        return;
    }
    let mut acc = [[W::splat(0.0); NS]; MR];
    for (k, xr) in rows[..width].iter().enumerate() {
        fma_k(&mut acc, &parts, k, |i| xr[i]);
    }
    store_tile(&acc, out_row, out, col0);
}

/// One `k` of a projection tile, shared by [`tile`] and [`packed_tile`]: the `NS` weight
/// vectors of row `k` of `parts`, and for each of the `MR` rows one FMA into each strip's
/// accumulator with `x(i)` (row `i`'s value `k`) broadcast.
#[inline(always)]
fn fma_k<W: Wide, const MR: usize, const NS: usize>(
    acc: &mut [[W; NS]; MR],
    parts: &[&[[f32; STRIP_COLS]]; NS],
    k: usize,
    x: impl Fn(usize) -> f32,
) {
    let w: [W; NS] = load_each(parts, k);
    for (i, a) in acc.iter_mut().enumerate() {
        let xb = W::splat(x(i));
        for (aq, &wq) in a.iter_mut().zip(&w) {
            *aq = xb.mul_add(wq, *aq);
        }
    }
}

/// Row `k` of each of `N` strips as vectors. A plain loop: `std::array::from_fn` here was
/// compiled out of line for some tile shapes, its loads then calls without the kernels'
/// target features (`perf`, batch 3 on the 512-bit kernels, 2026-12-03: `try_from_fn` and
/// `_mm512_loadu_ps` 31 % of the samples).
#[inline(always)]
fn load_each<W: Wide, S: AsRef<[[f32; STRIP_COLS]]>, const N: usize>(
    rows: &[S; N],
    k: usize,
) -> [W; N] {
    let mut v = [W::splat(0.0); N];
    for (vq, rq) in v.iter_mut().zip(rows) {
        if let Some(row) = rq.as_ref().get(k) {
            *vq = W::load(row);
        }
    }
    v
}

/// Stores a tile's accumulators: row `i`, strip `q` to output row `out_row + i`, columns
/// `col0 + 16 q ..` (out of range: nothing).
#[inline(always)]
fn store_tile<W: Wide, const MR: usize, const NS: usize>(
    acc: &[[W; NS]; MR],
    out_row: usize,
    out: &mut [f32],
    col0: usize,
) {
    for (i, a) in acc.iter().enumerate() {
        for (q, aq) in a.iter().enumerate() {
            let o = (out_row + i) * COLS + col0 + q * STRIP_COLS;
            if let Some(dst) = out
                .get_mut(o..)
                .and_then(|o| o.first_chunk_mut::<STRIP_COLS>())
            {
                aq.store(dst);
            }
        }
    }
}

/// [`project`] with the 512-bit build's register tile `tile` (every variant is compiled in;
/// the choice is one branch per call).
#[inline(always)]
pub(crate) fn project_tiled<V: Lanes, W: Wide>(
    tile: ProjectTile,
    p: &Projection<'_>,
    out: &mut [f32],
    panel: &mut Vec<f32>,
) {
    match tile {
        ProjectTile::R6x32 => project::<V, W, 6, ZMM_PROJECT_STRIPS>(p, out, panel),
        ProjectTile::R12x32 => project::<V, W, 12, 2>(p, out, panel),
        ProjectTile::R6x64 => project::<V, W, 6, 4>(p, out, panel),
    }
}

/// Prefetches `rows` input rows from `row` (both parts), one hint per 64-byte line.
#[inline(always)]
fn prefetch_rows<V: Lanes>(p: &Projection<'_>, row: Option<usize>, rows: usize) {
    let Some(row) = row else {
        return;
    };
    for (x, &pw) in p.x.iter().zip(&p.widths) {
        if let Some(span) = x.get(row * pw..(row + rows) * pw) {
            for line in (0..span.len()).step_by(16) {
                V::prefetch(&span[line..]);
            }
        }
    }
}

/// `MR` rows from input row `at[0]` times `NS` consecutive 16-column strips (`strips`: NS
/// runs of K strip rows) into output rows from `at[1]`; the K loop runs over part 0's columns
/// then part 1's, one FMA chain per value (lane `l` of strip `q` is column `16q + l`, whatever
/// `W`'s width).
#[inline(always)]
fn tile<W: Wide, const MR: usize, const NS: usize>(
    p: &Projection<'_>,
    at: [usize; 2],
    strips: &[[f32; STRIP_COLS]],
    out: &mut [f32],
    col0: usize,
) {
    let width = strips.len() / NS;
    let mut acc = [[W::splat(0.0); NS]; MR];
    let mut k0 = 0;
    for (x, &pw) in p.x.iter().zip(&p.widths) {
        if pw == 0 {
            continue;
        }
        let xs: [&[f32]; MR] = std::array::from_fn(|i| &x[(at[0] + i) * pw..(at[0] + i + 1) * pw]);
        let parts: [&[[f32; STRIP_COLS]]; NS] =
            std::array::from_fn(|q| &strips[q * width + k0..q * width + k0 + pw]);
        if parts.iter().any(|part| part.len() != pw) || xs.iter().any(|r| r.len() != pw) {
            return;
        }
        (0..pw).for_each(|k| fma_k(&mut acc, &parts, k, |i| xs[i][k]));
        k0 += pw;
    }
    store_tile(&acc, at[1], out, col0);
}

/// One direction's recurrence over `batch` windows of `frames` frames.
pub(crate) struct Recurrence<'a> {
    /// Forward walks frames up, reverse down.
    pub forward: bool,
    /// Frames per window.
    pub frames: usize,
    /// Windows.
    pub batch: usize,
    /// The steps to run (step `s` is frame `s` forward, `frames - 1 - s` reverse); the state
    /// in `h` and `c` carries over from the previous call, and is zeroed when the range starts
    /// at step 0.
    pub steps: std::ops::Range<usize>,
    /// The frames the gates buffer holds for each window (every step's frame must be among
    /// them): the gates of frame `t` of window `w` are row `w * len + t - start`.
    pub gates_frames: std::ops::Range<usize>,
    /// Recurrent weights, `COLS / R_STRIP_COLS` strips of `[H][R_STRIP_COLS]` (panel order).
    pub strips: &'a [f32],
    /// The same weights in the sequential layout of a one-window tile that reads one
    /// ([`SingleTile::seq_strips`], built by [`pack_seq`]), or empty (then that tile reads
    /// [`Recurrence::strips`] as [`SingleTile::Strips128`] does).
    pub seq_strips: &'a [f32],
    /// Combined bias `[COLS]`, panel order.
    pub bias: &'a [f32],
}

/// What a [`Recurrence`] reads and writes.
pub(crate) struct State<'a> {
    /// Input projections `[batch * gates_frames.len(), COLS]`, panel order (rows as
    /// [`Recurrence::gates_frames`] says); each step overwrites its rows with the
    /// pre-activations before the bias.
    pub gates: &'a mut [f32],
    /// Every step's hidden state `[batch * frames, H]`, row `window * frames + t`.
    pub hseq: &'a mut [f32],
    /// The previous step's hidden state `[batch, H]` (scratch).
    pub h: &'a mut [f32],
    /// The cell state `[batch, H]` (scratch, zeroed first).
    pub c: &'a mut [f32],
}

/// Runs a [`Recurrence`]. Wrong lengths write nothing (the caller sizes everything; debug
/// builds assert).
///
/// Each step is a small GEMM `gates[rows of t] += h · R` over register tiles of windows x
/// 16-column strips of `W`: `WG` windows x `SG` strips (the default builds: 6 windows x `SG`
/// strips (256-bit: 1 strip = 12 accumulators, or 2
/// = 24 where there are 32 registers; 512-bit: 4 strips = 24) when the batch allows, so the
/// FMA latency is hidden, then (for `WG` over 6) 6-window tiles of 4 strips, then the remaining
/// 1 window x `S1` strips (or `single`'s sequential layout), 2 x `S2` or 3 to 5 x `S3`
/// strips; group by group, each group
/// streaming R from L2 (the strip-outer order, reusing each R strip from L1 across groups,
/// measured slower); then the pointwise pass (bias, gates, cell) per window and panel. Doing
/// the previous group's pointwise pass in pieces between a group's tiles also measured slower
/// (batch 32: 270-279 against 265-268 ms, 2026-11-29).
#[inline(always)]
pub(crate) fn recurrence<
    W: Wide,
    const WG: usize,
    const SG: usize,
    const S1: usize,
    const S2: usize,
    const S3: usize,
>(
    a: &Recurrence<'_>,
    st: State<'_>,
    single: SingleTile,
) {
    let (batch, frames) = (a.batch, a.frames);
    let rows = batch * frames;
    let (g0, g_len) = (a.gates_frames.start, a.gates_frames.len());
    let steps = a.steps.start..a.steps.end.min(frames);
    let frame = |step: usize| if a.forward { step } else { frames - 1 - step };
    // Every step's frame is held: the steps' frames form one contiguous range.
    let held = steps_held(a);
    let (Ok(strips), Ok(bias)) = (
        <&[f32; H * COLS]>::try_from(a.strips),
        <&[f32; COLS]>::try_from(a.bias),
    ) else {
        debug_assert!(false, "recurrence weights have the wrong length");
        return;
    };
    let ok = held
        && st.gates.len() >= batch * g_len * COLS
        && st.hseq.len() >= rows * H
        && st.h.len() >= batch * H
        && st.c.len() >= batch * H;
    debug_assert!(ok);
    if !ok {
        return;
    }
    let (strips, _) = strips.as_chunks::<{ H * R_STRIP_COLS }>();
    let (bias, _) = bias.as_chunks::<PANEL_COLS>();
    // The one-window tile's layout: the sequential blocks when they were packed for it.
    let seq = match (single.seq_strips(), a.seq_strips.len() == H * COLS) {
        (Some(ns), true) => Some((ns, a.seq_strips.as_chunks::<R_STRIP_COLS>().0)),
        _ => None,
    };
    // Whether the window tiles leave one window over (it takes the one-window tile).
    let one_left = {
        let left = batch % WG;
        (if WG > 6 { left % 6 } else { left }) == 1
    };
    let prefetch_head = single == SingleTile::Seq256Prefetch && one_left;
    let c = &mut st.c[..batch * H];
    if a.steps.start == 0 {
        c.fill(0.0);
    }
    let h = &mut st.h[..batch * H];
    let (h_rows, _) = h.as_chunks_mut::<H>();
    for step in steps {
        let t = frame(step);
        let gt = t - g0;
        if step > 0 {
            let cx = Gemm {
                h: h_rows,
                strips,
                g_len,
                gt,
            };
            let mut w = batch / WG * WG;
            for w0 in (0..w).step_by(WG) {
                cx.all_strips::<W, WG, SG>(w0, st.gates);
            }
            while WG > 6 && w + 6 <= batch {
                cx.all_strips::<W, 6, { ZMM_RECURRENT_STRIPS[0] }>(w, st.gates);
                w += 6;
            }
            match batch - w {
                1 => match seq {
                    Some((8, r)) => cx.seq::<W, 8, false>(w, r, st.gates),
                    Some((16, r)) if single == SingleTile::Seq256Prefetch => {
                        cx.seq::<W, 16, true>(w, r, st.gates);
                    }
                    Some((16, r)) => cx.seq::<W, 16, false>(w, r, st.gates),
                    _ => cx.all_strips::<W, 1, S1>(w, st.gates),
                },
                2 => cx.all_strips::<W, 2, S2>(w, st.gates),
                3 => cx.all_strips::<W, 3, S3>(w, st.gates),
                4 => cx.all_strips::<W, 4, S3>(w, st.gates),
                5 => cx.all_strips::<W, 5, S3>(w, st.gates),
                _ => {}
            }
        }
        if let (Some((_, r)), true) = (seq, prefetch_head) {
            // The next step's product starts at R's first lines: ask for them now, while the
            // gate math runs.
            for line in r.iter().take(PREFETCH_HEAD) {
                W::prefetch_l1(line);
            }
        }
        for w in 0..batch {
            let (g_row, row) = (w * g_len + gt, w * frames + t);
            cells::<W>(
                &st.gates[g_row * COLS..(g_row + 1) * COLS],
                bias,
                &mut c[w * H..(w + 1) * H],
                &mut st.hseq[row * H..(row + 1) * H],
            );
        }
        // Every tile has read this step's h: publish the new one.
        for (wi, h_w) in h_rows.iter_mut().enumerate() {
            let row = wi * frames + t;
            h_w.copy_from_slice(&st.hseq[row * H..(row + 1) * H]);
        }
    }
}

/// [`recurrence`] with the 512-bit build's tiles (every variant compiled in; the choice is one
/// branch per call, the one-window layout one per step).
#[inline(always)]
pub(crate) fn recurrence_tiled<W: Wide>(tiles: Tiles, a: &Recurrence<'_>, st: State<'_>) {
    const S: [usize; 4] = ZMM_RECURRENT_STRIPS;
    let single = tiles.single;
    match tiles.recurrent {
        RecurrentTile::W6x64 => {
            recurrence::<W, 6, { S[0] }, { S[1] }, { S[2] }, { S[3] }>(a, st, single);
        }
        RecurrentTile::W8x32 => recurrence::<W, 8, 2, { S[1] }, { S[2] }, { S[3] }>(a, st, single),
        RecurrentTile::W12x32 => {
            recurrence::<W, 12, 2, { S[1] }, { S[2] }, { S[3] }>(a, st, single);
        }
    }
}

/// Strips in one block of the fused one-window product: R in the sequential layout of blocks
/// `[H][128]` ([`pack_seq`] with 8, as [`SingleTile::Seq128`]).
const FUSED_STRIPS: usize = 8;

/// The next chunk's input projection that [`recurrence_fused`] computes beside a chunk's
/// steps: one group of rows (`next.groups == 1`), written to `out` (`[next.rows, COLS]`,
/// panel order).
pub(crate) struct Fused<'a> {
    /// The projection.
    pub next: Projection<'a>,
    /// Its output.
    pub out: &'a mut [f32],
}

/// [`recurrence`] of one window (batch 1) and, between its steps' products, the projection
/// `f` ([`SingleTile::fuses`]). Each step's product runs in four blocks of 128 columns
/// (8 accumulators, R from the sequential layout `[H][128]`); beside each block, one tile of
/// `MR` rows x `NS` 16-column strips of `f` (K = 2H: two projection `k` per product `k`; the
/// `MR` rows packed k-major once a group, part 0 then part 1). The product
/// streams R from L2 (256 KiB a step) and leaves the FMA units half idle; the tile's weights
/// and rows come from L1 and fill them. Measured on the development machine (Zen 4, 2026-12-03,
/// `bench/NOTES.md`, a stand-alone C model of this loop): 3.70-3.79 us a step against 4.84-5.08
/// for the product then the projection.
///
/// The tiles run in order (`MR`-row group by group, strips in order) as long as the steps'
/// products last (step 0 has none); the rest of `f`, a partial last group included (padded,
/// only its rows stored), runs after the steps with [`tile_packed`]. Every value is the same FMA chain as in [`recurrence`] and
/// [`project`] (product: ascending `k` from the gates value; projection: ascending `k` from
/// `0.0`, part 0 then part 1), so the bits are theirs. Only for what [`fused_applies`] to
/// (callers check; anything else writes nothing, debug builds assert).
#[inline(always)]
pub(crate) fn recurrence_fused<W: Wide, const MR: usize, const NS: usize>(
    a: &Recurrence<'_>,
    st: State<'_>,
    f: Fused<'_>,
) {
    if !fused_applies(a, &f) {
        debug_assert!(
            false,
            "fused recurrence: one window, K = 2H and the [H][128] layout"
        );
        return;
    }
    let p = &f.next;
    let frames = a.frames;
    let (g0, g_len) = (a.gates_frames.start, a.gates_frames.len());
    let steps = a.steps.start..a.steps.end.min(frames);
    let frame = |step: usize| if a.forward { step } else { frames - 1 - step };
    let ok = steps_held(a)
        && st.gates.len() >= g_len * COLS
        && st.hseq.len() >= frames * H
        && st.h.len() >= H
        && st.c.len() >= H;
    let (Ok(bias), Some(h), true) = (
        <&[f32; COLS]>::try_from(a.bias),
        st.h.first_chunk_mut::<H>(),
        ok,
    ) else {
        debug_assert!(false, "fused recurrence: wrong lengths");
        return;
    };
    let (bias, _) = bias.as_chunks::<PANEL_COLS>();
    let (seq_rows, _) = a.seq_strips.as_chunks::<R_STRIP_COLS>();
    let (seq_k, _) = seq_rows.as_chunks::<FUSED_STRIPS>();
    // Four blocks [H][8 strips].
    let (blocks, _) = seq_k.as_chunks::<H>();
    // Projection strips [2H][16].
    let (w_rows, _) = p.strips.as_chunks::<STRIP_COLS>();
    let (w_strips, _) = w_rows.as_chunks::<{ 2 * H }>();
    let (x0, _) = p.x[0].as_chunks::<H>();
    let (x1, _) = p.x[1].as_chunks::<H>();
    // The current group's input rows, k-major (`xp[k][i]`: row i's value k, part 0 then part
    // 1), so a tile's 8 broadcasts of one k read one 32-byte run.
    let mut xp = [[0.0f32; MR]; 2 * H];
    let pack = |xp: &mut [[f32; MR]; 2 * H], r0: usize| {
        // Rows past the projection's end stay as they are: their values are never stored.
        let rows = x0.iter().zip(x1).skip(r0).take(MR);
        for (i, (a, b)) in rows.enumerate() {
            let (xa, xb) = xp.split_at_mut(H);
            for (((&va, &vb), da), db) in a.iter().zip(b).zip(xa).zip(xb) {
                da[i] = va;
                db[i] = vb;
            }
        }
    };
    let c = &mut st.c[..H];
    if a.steps.start == 0 {
        c.fill(0.0);
    }
    // Tile slots: group g of MR rows, strips from NS * s.
    let n_strips = COLS / STRIP_COLS / NS;
    let slots = p.rows / MR * n_strips;
    let mut slot = 0;
    let tile_w = |s: usize| -> [&[[f32; STRIP_COLS]; 2 * H]; NS] {
        std::array::from_fn(|q| &w_strips[s * NS + q])
    };
    for step in steps {
        let t = frame(step);
        let gt = t - g0;
        let Some(g_row) = st.gates.get_mut(gt * COLS..(gt + 1) * COLS) else {
            return;
        };
        if step > 0 {
            let (g_blocks, _) = g_row.as_chunks_mut::<{ FUSED_STRIPS * R_STRIP_COLS }>();
            for (gb, rb) in g_blocks.iter_mut().zip(blocks) {
                if slot >= slots {
                    seq_block::<W, FUSED_STRIPS, false>(h, rb, &[], gb.as_chunks_mut().0);
                    continue;
                }
                let (g, s) = (slot / n_strips, slot % n_strips);
                if s == 0 {
                    pack(&mut xp, g * MR);
                }
                let q = block_with_tile::<W, MR, NS>(h, rb, gb, &xp, tile_w(s));
                store_rows::<W, MR, NS>(&q, MR, g * MR, s, f.out);
                slot += 1;
            }
        }
        let Some(out) = st.hseq.get_mut(t * H..(t + 1) * H) else {
            return;
        };
        cells::<W>(g_row, bias, c, out);
        h.copy_from_slice(out);
    }
    // The tiles the steps left, then the rows past the last full group (padded tile).
    for slot in slot..p.rows.div_ceil(MR) * n_strips {
        let (g, s) = (slot / n_strips, slot % n_strips);
        if s == 0 {
            pack(&mut xp, g * MR);
        }
        let q = tile_packed::<W, MR, NS>(&xp, tile_w(s));
        let rows = (p.rows - g * MR).min(MR);
        store_rows::<W, MR, NS>(&q, rows, g * MR, s, f.out);
    }
}

/// Stores the first `rows` of a fused tile's accumulators to output rows from `r0`, strip `s`.
#[inline(always)]
fn store_rows<W: Wide, const MR: usize, const NS: usize>(
    q: &[[W; NS]; MR],
    rows: usize,
    r0: usize,
    s: usize,
    out: &mut [f32],
) {
    for (i, qi) in q.iter().enumerate().take(rows) {
        for (j, qj) in qi.iter().enumerate() {
            let o = (r0 + i) * COLS + (s * NS + j) * STRIP_COLS;
            if let Some(dst) = out.get_mut(o..).and_then(|d| d.first_chunk_mut()) {
                qj.store(dst);
            }
        }
    }
}

/// One fused projection tile alone: [`MR`] packed rows `xp` times one strip `w`
/// (`[2H][16]`), one FMA chain per value in ascending `k` from `0.0`.
#[inline(always)]
fn tile_packed<W: Wide, const MR: usize, const NS: usize>(
    xp: &[[f32; MR]; 2 * H],
    w: [&[[f32; STRIP_COLS]; 2 * H]; NS],
) -> [[W; NS]; MR] {
    let mut q = [[W::splat(0.0); NS]; MR];
    for (k, xk) in xp.iter().enumerate() {
        let wv: [W; NS] = load_each(&w, k);
        for (qi, &x) in q.iter_mut().zip(xk) {
            let xb = W::splat(x);
            for (qj, &wj) in qi.iter_mut().zip(&wv) {
                *qj = xb.mul_add(wj, *qj);
            }
        }
    }
    q
}

/// Whether [`recurrence_fused`] takes `a` and `f`: one window, a one-group projection of
/// input width `2H` (layers 1 and up), R in the sequential layout `[H][128]`, and every length
/// as the loop reads it. Otherwise the caller runs [`recurrence`] then [`project`].
pub(crate) fn fused_applies(a: &Recurrence<'_>, f: &Fused<'_>) -> bool {
    let p = &f.next;
    a.batch == 1
        && p.groups == 1
        && p.widths == [H, H]
        && a.seq_strips.len() == H * COLS
        && p.strips.len() == COLS * 2 * H
        && p.x[0].len() >= p.rows * H
        && p.x[1].len() >= p.rows * H
        && f.out.len() >= p.rows * COLS
}

/// [`recurrence_fused`] with the projection tile of the fused one-window `single` tile:
/// [`SingleTile::Fused128`] 8 rows x 1 strip, [`SingleTile::Fused128Wide`] 4 rows x 2 strips
/// (any other: the former).
#[inline(always)]
pub(crate) fn recurrence_fused_tiled<W: Wide>(
    single: SingleTile,
    a: &Recurrence<'_>,
    st: State<'_>,
    f: Fused<'_>,
) {
    match single {
        SingleTile::Fused128Wide => recurrence_fused::<W, 4, 2>(a, st, f),
        _ => recurrence_fused::<W, 8, 1>(a, st, f),
    }
}

/// Whether every step of `a` has its frame's gates in the buffer (the steps' frames form one
/// contiguous range).
fn steps_held(a: &Recurrence<'_>) -> bool {
    let frames = a.frames;
    let steps = a.steps.start..a.steps.end.min(frames);
    let frame = |step: usize| if a.forward { step } else { frames - 1 - step };
    steps.is_empty() || {
        let (first, last) = (frame(steps.start), frame(steps.end - 1));
        let (lo, hi) = (first.min(last), first.max(last));
        lo >= a.gates_frames.start && hi < a.gates_frames.end
    }
}

/// [`seq_block`] of one 128-column block and, interleaved with it, one projection tile: the [`MR`] packed rows
/// `xp` (`[2H][8]`, k-major) times one strip `w` (`[2H][16]`), two projection `k` per product
/// `k`. Returns the tile's accumulators (row `i`: 16 columns), each one FMA chain in ascending
/// `k` from `0.0`, as [`tile_packed`].
#[inline(always)]
fn block_with_tile<W: Wide, const MR: usize, const NS: usize>(
    h: &[f32; H],
    r: &[[[f32; R_STRIP_COLS]; FUSED_STRIPS]; H],
    gates: &mut [f32; FUSED_STRIPS * R_STRIP_COLS],
    xp: &[[f32; MR]; 2 * H],
    w: [&[[f32; STRIP_COLS]; 2 * H]; NS],
) -> [[W; NS]; MR] {
    let (g16, _) = gates.as_chunks_mut::<R_STRIP_COLS>();
    let mut acc = [W::splat(0.0); FUSED_STRIPS];
    for (av, g) in acc.iter_mut().zip(g16.iter()) {
        *av = W::load(g);
    }
    let mut q = [[W::splat(0.0); NS]; MR];
    let (x2, _) = xp.as_chunks::<2>();
    for (k, ((rk, &hk), xk)) in r.iter().zip(h).zip(x2).enumerate() {
        let hb = W::splat(hk);
        for (av, rv) in acc.iter_mut().zip(rk) {
            *av = hb.mul_add(W::load(rv), *av);
        }
        for (e, xe) in xk.iter().enumerate() {
            let wv: [W; NS] = load_each(&w, 2 * k + e);
            for (qi, &x) in q.iter_mut().zip(xe) {
                let xb = W::splat(x);
                for (qj, &wj) in qi.iter_mut().zip(&wv) {
                    *qj = xb.mul_add(wj, *qj);
                }
            }
        }
    }
    for (av, d) in acc.iter().zip(g16) {
        av.store(d);
    }
    q
}

/// The recurrent weights in strips (`[COLS / 16][H][16]`, [`Recurrence::strips`]) repacked
/// into the sequential layout of blocks of `ns` strips, `[COLS / (16 ns)][H][16 ns]`: a
/// one-window tile over `16 ns` columns then reads one contiguous run. Values are only moved.
/// Empty when `ns` does not divide the strips or `strips` has the wrong length.
pub(crate) fn pack_seq(strips: &[f32], ns: usize) -> Vec<f32> {
    let n = COLS / R_STRIP_COLS;
    if strips.len() != H * COLS || ns == 0 || !n.is_multiple_of(ns) {
        return Vec::new();
    }
    let (rows, _) = strips.as_chunks::<R_STRIP_COLS>();
    let mut out = Vec::with_capacity(H * COLS);
    for block in 0..n / ns {
        for k in 0..H {
            for q in 0..ns {
                out.extend_from_slice(&rows[(block * ns + q) * H + k]);
            }
        }
    }
    out
}

/// A buffer of `f32` whose values start on a 64-byte boundary when asked
/// ([`Tiles`]' `a64`): a `Vec` 15 values longer, used from the first aligned value on. Safe
/// code only (the `Vec` is never grown, so its storage never moves).
#[derive(Debug, Default)]
pub(crate) struct AlignedBuf {
    data: Vec<f32>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// Padding values so that a 64-byte boundary falls among the first 16.
    const PAD: usize = 64 / size_of::<f32>() - 1;

    /// `src`'s values, from a 64-byte boundary when `align64`; `None` when the allocation
    /// fails.
    pub(crate) fn copy_of(src: &[f32], align64: bool) -> Option<Self> {
        let pad = if align64 { Self::PAD } else { 0 };
        let mut data = Vec::new();
        data.try_reserve_exact(src.len().checked_add(pad)?).ok()?;
        data.resize(src.len() + pad, 0.0);
        let start = if align64 {
            data.as_ptr().align_offset(64).min(pad)
        } else {
            0
        };
        data[start..start + src.len()].copy_from_slice(src);
        Some(AlignedBuf {
            data,
            start,
            len: src.len(),
        })
    }

    /// The values.
    pub(crate) fn as_slice(&self) -> &[f32] {
        &self.data[self.start..self.start + self.len]
    }

    /// The values, writable.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.data[self.start..self.start + self.len]
    }
}

/// What the recurrent product of one step reads.
struct Gemm<'a> {
    h: &'a [[f32; H]],
    strips: &'a [[f32; H * R_STRIP_COLS]],
    /// Gates rows per window.
    g_len: usize,
    /// This step's gates row within a window.
    gt: usize,
}

impl Gemm<'_> {
    /// `WG` windows from `w0` times every column, `NS` strips at a time.
    #[inline(always)]
    fn all_strips<W: Wide, const WG: usize, const NS: usize>(&self, w0: usize, gates: &mut [f32]) {
        for s0 in (0..COLS / R_STRIP_COLS).step_by(NS.max(1)) {
            self.tile::<W, WG, NS>(w0, s0, gates);
        }
    }

    /// `gates[rows of WG windows, NS strips from strip s0] += h · R`, one FMA chain per value
    /// (lane `l` of strip `s0 + q` is column `16 (s0 + q) + l`, whatever `W`'s width).
    #[inline(always)]
    fn tile<W: Wide, const WG: usize, const NS: usize>(
        &self,
        w0: usize,
        s0: usize,
        gates: &mut [f32],
    ) {
        let Some(hs) = self.h.get(w0..w0 + WG) else {
            return;
        };
        let at: [usize; WG] =
            std::array::from_fn(|wi| ((w0 + wi) * self.g_len + self.gt) * COLS + s0 * R_STRIP_COLS);
        let mut acc = [[W::splat(0.0); NS]; WG];
        for (a, &o) in acc.iter_mut().zip(&at) {
            let Some(src) = gates.get(o..o + NS * R_STRIP_COLS) else {
                return;
            };
            let (rows, _) = src.as_chunks::<R_STRIP_COLS>();
            for (av, s) in a.iter_mut().zip(rows) {
                *av = W::load(s);
            }
        }
        let Some(blocks) = self.strips.get(s0..s0 + NS) else {
            return;
        };
        let r: [&[[f32; R_STRIP_COLS]]; NS] = std::array::from_fn(|q| blocks[q].as_chunks().0);
        if r.iter().any(|rows| rows.len() != H) {
            return;
        }
        for k in 0..H {
            let rv: [W; NS] = load_each(&r, k);
            for (a, hw) in acc.iter_mut().zip(hs) {
                let hb = W::splat(hw[k]);
                for (av, &r) in a.iter_mut().zip(&rv) {
                    *av = hb.mul_add(r, *av);
                }
            }
        }
        for (a, &o) in acc.iter().zip(&at) {
            let Some(dst) = gates.get_mut(o..o + NS * R_STRIP_COLS) else {
                return;
            };
            let (rows, _) = dst.as_chunks_mut::<R_STRIP_COLS>();
            for (av, d) in a.iter().zip(rows) {
                av.store(d);
            }
        }
    }
}

impl Gemm<'_> {
    /// Window `w` times every column from the sequential layout `seq` (blocks of `NS` strips,
    /// `[H][NS][16]` each, built by [`pack_seq`]): one block of `16 NS` columns at a time,
    /// one FMA chain per column in ascending `k` (lane `l` of strip `q` of block `b` is
    /// column `16 (NS b + q) + l`, as in the strips). `PF`: prefetch into L1
    /// [`PREFETCH_ROWS`] rows of `k` ahead.
    #[inline(always)]
    fn seq<W: Wide, const NS: usize, const PF: bool>(
        &self,
        w: usize,
        seq: &[[f32; R_STRIP_COLS]],
        gates: &mut [f32],
    ) {
        let Some(hw) = self.h.get(w) else {
            return;
        };
        let row0 = (w * self.g_len + self.gt) * COLS;
        for (b, block) in seq.chunks_exact(H * NS).enumerate() {
            let o = row0 + b * NS * R_STRIP_COLS;
            let Some(dst) = gates.get_mut(o..o + NS * R_STRIP_COLS) else {
                return;
            };
            // The lines PREFETCH_ROWS rows of k ahead (into the next block near the end).
            let (ahead, _) = seq
                .get((b * H + PREFETCH_ROWS) * NS..)
                .unwrap_or_default()
                .as_chunks::<NS>();
            let (rows, _) = block.as_chunks::<NS>();
            seq_block::<W, NS, PF>(hw, rows, ahead, dst.as_chunks_mut().0);
        }
    }
}

/// One block of a one-window product in the sequential layout: `gates` (`NS` strip rows)
/// `+= h · rows` (`rows[k]`: R's row `k` over the block's `NS` strips), one FMA chain per
/// column in ascending `k` from the gates value. `PF`: prefetch `ahead[k]`'s lines into L1 at
/// step `k`.
#[inline(always)]
fn seq_block<W: Wide, const NS: usize, const PF: bool>(
    h: &[f32],
    rows: &[[[f32; R_STRIP_COLS]; NS]],
    ahead: &[[[f32; R_STRIP_COLS]; NS]],
    gates: &mut [[f32; R_STRIP_COLS]],
) {
    let mut acc = [W::splat(0.0); NS];
    for (a, s) in acc.iter_mut().zip(gates.iter()) {
        *a = W::load(s);
    }
    for (k, (rk, &hk)) in rows.iter().zip(h).enumerate() {
        if let (true, Some(lines)) = (PF, ahead.get(k)) {
            for line in lines {
                W::prefetch_l1(line);
            }
        }
        let hb = W::splat(hk);
        for (a, r) in acc.iter_mut().zip(rk) {
            *a = hb.mul_add(W::load(r), *a);
        }
    }
    for (a, d) in acc.iter().zip(gates) {
        a.store(d);
    }
}

/// Panels the pointwise pass handles at once (their independent chains interleave).
const POINTWISE_PANELS: usize = 4;

/// The pointwise pass of one window and step: `gates` (pre-activations without bias, panel
/// order) plus `bias`, then [`cell_n`] (the gate functions and the cell update) into `c` and
/// `h_out`; [`POINTWISE_PANELS`] panels at a time, two panels a [`Wide`] vector (lanes 0..8
/// the first panel's units, 8..16 the second's).
#[inline(always)]
fn cells<W: Wide>(gates: &[f32], bias: &[[f32; PANEL_COLS]], c: &mut [f32], h_out: &mut [f32]) {
    const N: usize = POINTWISE_PANELS / 2;
    let (g_panels, _) = gates.as_chunks::<{ POINTWISE_PANELS * PANEL_COLS }>();
    let (b_panels, _) = bias.as_chunks::<POINTWISE_PANELS>();
    let (c16, _) = c.as_chunks_mut::<{ POINTWISE_PANELS * 8 }>();
    let (h16, _) = h_out.as_chunks_mut::<{ POINTWISE_PANELS * 8 }>();
    for (((gp, bp), cell), out) in g_panels.iter().zip(b_panels).zip(c16).zip(h16) {
        let (g8, _) = gp.as_chunks::<8>();
        let (cell16, _) = cell.as_chunks_mut::<16>();
        // Gate q of panels 2j and 2j + 1: [i, f, g, o][q].
        let mut a = [[W::splat(0.0); N]; 4];
        let mut cv = [W::splat(0.0); N];
        for j in 0..N {
            let (b0, _) = bp[2 * j].as_chunks::<8>();
            let (b1, _) = bp[2 * j + 1].as_chunks::<8>();
            for q in 0..4 {
                let g = W::load_halves(&g8[8 * j + q], &g8[8 * j + 4 + q]);
                a[q][j] = g.add(W::load_halves(&b0[q], &b1[q]));
            }
            cv[j] = W::load(&cell16[j]);
        }
        let (cn, h) = cell_n(a, cv);
        let (out16, _) = out.as_chunks_mut::<16>();
        for j in 0..N {
            cn[j].store(&mut cell16[j]);
            h[j].store(&mut out16[j]);
        }
    }
}

/// The cell and exponential functions on sixteen lanes (tests): from `x = [a_i, a_f, a_g,
/// a_o, c]`, `[c', h, e^x[0], e^x[0] - 1]` ([`cell_n`], `exp_n`, `expm1_n`).
#[cfg(test)]
#[inline(always)]
pub(crate) fn eval_math<W: Wide>(x: &[[f32; 16]; 5]) -> [[f32; 16]; 4] {
    let v: [W; 5] = std::array::from_fn(|q| W::load(&x[q]));
    let (cn, h) = cell_n([[v[0]], [v[1]], [v[2]], [v[3]]], [v[4]]);
    let mut out = [[0.0; 16]; 4];
    cn[0].store(&mut out[0]);
    h[0].store(&mut out[1]);
    super::math::exp_n([v[0]])[0].store(&mut out[2]);
    super::math::expm1_n([v[0]])[0].store(&mut out[3]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::{self, Isa, Tiles};
    use bilstm_core::layout::PANEL_UNITS;
    use bilstm_core::rng::SplitMix64;
    use std::fmt;

    /// A set of kernels to check: an instruction set the host has (default tiles), the 512-bit
    /// kernels with other [`Tiles`], or the portable kernels with the 512-bit build's register
    /// tiles (each variant's tiling, on any host).
    #[derive(Clone, Copy, Debug)]
    enum Path {
        Isa(Isa),
        Zmm(Isa, Tiles),
        ZmmTiles(Tiles),
    }

    impl fmt::Display for Path {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                Path::Isa(isa) => write!(f, "{isa}"),
                Path::Zmm(isa, tiles) => write!(f, "{isa} with tiles {tiles}"),
                Path::ZmmTiles(tiles) => write!(f, "portable with the zmm tiles {tiles}"),
            }
        }
    }

    /// Which kernel a path's tiles change.
    #[derive(Clone, Copy)]
    enum Kernel {
        Projection,
        Recurrence,
    }

    /// Every ISA the host has, then every variant of the 512-bit tiles that changes `kernel`
    /// (emulated on any host, and on the 512-bit kernels when the host has them).
    fn paths_for(kernel: Kernel) -> Vec<Path> {
        let mut all: Vec<Path> = Isa::available().into_iter().map(Path::Isa).collect();
        let mut variants: Vec<Tiles> = Vec::new();
        for t in Tiles::all() {
            let key = match kernel {
                Kernel::Projection => Tiles {
                    project: t.project,
                    ..Tiles::default()
                },
                // The alignment is the backend's (its buffers), not the kernels'.
                Kernel::Recurrence => Tiles {
                    project: Default::default(),
                    align64: false,
                    ..t
                },
            };
            if !variants.contains(&key) {
                variants.push(key);
            }
        }
        let zmm = Isa::detect_at_most("avx512").filter(|isa| isa.is_512_bit());
        for &t in &variants {
            all.push(Path::ZmmTiles(t));
            if let Some(isa) = zmm.filter(|_| t != Tiles::default()) {
                all.push(Path::Zmm(isa, t));
            }
        }
        all
    }

    /// `path`'s projection with a panel of its own (empty: `project` grows it).
    fn project_with(path: Path, p: &Projection<'_>, out: &mut [f32]) {
        let panel = &mut Vec::new();
        match path {
            Path::Isa(isa) => simd::project(isa, Tiles::default(), p, out, panel),
            Path::Zmm(isa, tiles) => simd::project(isa, tiles, p, out, panel),
            Path::ZmmTiles(tiles) => simd::zmm_tiles::project(tiles, p, out, panel),
        }
    }

    fn recurrence_with(path: Path, r: &Recurrence<'_>, st: State<'_>) {
        let tiles = match path {
            Path::Isa(_) => Tiles::default(),
            Path::Zmm(_, tiles) | Path::ZmmTiles(tiles) => tiles,
        };
        // The sequential layout, packed as the backend does for the tiles that read it.
        let seq = tiles
            .single
            .seq_strips()
            .map(|ns| pack_seq(r.strips, ns))
            .unwrap_or_default();
        let r = &Recurrence {
            steps: r.steps.clone(),
            gates_frames: r.gates_frames.clone(),
            seq_strips: &seq,
            ..*r
        };
        match path {
            Path::Isa(isa) => simd::recurrence(isa, tiles, r, st),
            Path::Zmm(isa, tiles) => simd::recurrence(isa, tiles, r, st),
            Path::ZmmTiles(tiles) => simd::zmm_tiles::recurrence(tiles, r, st),
        }
    }

    /// Input rows in two parts of `widths` values each, standard normal (part 0 drawn first).
    fn random_parts(rng: &mut SplitMix64, rows: usize, widths: [usize; 2]) -> [Vec<f32>; 2] {
        widths.map(|w| {
            let mut v = vec![0.0f32; rows * w];
            rng.fill_normal_f32(&mut v);
            v
        })
    }

    /// A projection of one group: `rows` rows of `x` into as many dense output rows.
    fn one_group<'a>(
        x: &'a [Vec<f32>; 2],
        widths: [usize; 2],
        rows: usize,
        strips: &'a [f32],
    ) -> Projection<'a> {
        Projection {
            x: [&x[0], &x[1]],
            widths,
            rows,
            groups: 1,
            group_stride: rows,
            out_stride: rows,
            strips,
        }
    }

    /// Every tile variant parses back from its name, and bad specs are refused.
    #[test]
    fn tiles_parse_and_name() {
        assert_eq!(Tiles::all().len(), 108);
        for t in Tiles::all() {
            assert_eq!(Tiles::parse(&t.name()), Some(t), "{t}");
        }
        for name in Tiles::SWEEP {
            let t = Tiles::parse(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(t.name(), name);
        }
        assert_eq!(Tiles::parse(" default "), Some(Tiles::default()));
        assert_eq!(Tiles::parse("p6x64,r8x32,f128,a64"), Some(Tiles::default()));
        for bad in ["", "p12x32,p6x64", "x", "default,q256", "p12x32,"] {
            assert_eq!(Tiles::parse(bad), None, "{bad:?}");
        }
    }

    /// Every row count (tiles of 6 and every remainder, more than one L2 block) gives the
    /// naive ascending FMA chain's bits, on every ISA.
    #[test]
    fn projection_is_one_ascending_fma_chain() {
        let mut rng = SplitMix64::new(4);
        for width in [1, 13, 60] {
            let mut strips = vec![0.0f32; COLS * width];
            rng.fill_uniform_f32(&mut strips, -1.0, 1.0);
            for rows in [1, 5, 6, 7, 13, 18, 23, 97, 203] {
                let mut x = vec![0.0f32; rows * width];
                rng.fill_normal_f32(&mut x);
                let mut want = vec![0.0f32; rows * COLS];
                for r in 0..rows {
                    for col in 0..COLS {
                        let (s, l) = (col / STRIP_COLS, col % STRIP_COLS);
                        let mut acc = 0.0f32;
                        for k in 0..width {
                            let w = strips[(s * width + k) * STRIP_COLS + l];
                            acc = x[r * width + k].mul_add(w, acc);
                        }
                        want[r * COLS + col] = acc;
                    }
                }
                for isa in paths_for(Kernel::Projection) {
                    let mut out = vec![f32::NAN; rows * COLS];
                    let p = Projection {
                        x: [&x, &[]],
                        widths: [width, 0],
                        rows,
                        groups: 1,
                        group_stride: rows,
                        out_stride: rows,
                        strips: &strips,
                    };
                    project_with(isa, &p, &mut out);
                    let same = out
                        .iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{isa}, width {width}, rows {rows}");
                    // The same input split into two parts gives the same bits.
                    let split = width / 3;
                    let (x0, x1): (Vec<f32>, Vec<f32>) = (
                        x.chunks_exact(width)
                            .flat_map(|r| r[..split].to_vec())
                            .collect(),
                        x.chunks_exact(width)
                            .flat_map(|r| r[split..].to_vec())
                            .collect(),
                    );
                    let p = Projection {
                        x: [&x0, &x1],
                        widths: [split, width - split],
                        rows,
                        groups: 1,
                        group_stride: rows,
                        out_stride: rows,
                        strips: &strips,
                    };
                    out.fill(f32::NAN);
                    project_with(isa, &p, &mut out);
                    let same = out
                        .iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{isa}, width {width}, rows {rows}, split {split}");
                    // Groups: rows 1..3 of every 4-row group; the others stay untouched.
                    let groups = rows / 4;
                    let p = Projection {
                        x: [&x[width..], &[]],
                        widths: [width, 0],
                        rows: 2,
                        groups,
                        group_stride: 4,
                        out_stride: 4,
                        strips: &strips,
                    };
                    out.fill(f32::NAN);
                    project_with(isa, &p, &mut out[COLS..]);
                    for (r, (o, w)) in out.chunks(COLS).zip(want.chunks(COLS)).enumerate() {
                        let inside = r % 4 != 0 && r % 4 != 3 && r / 4 < groups;
                        let ok = o.iter().zip(w).all(|(a, b)| {
                            if inside {
                                a.to_bits() == b.to_bits()
                            } else {
                                a.is_nan()
                            }
                        });
                        assert!(ok, "{isa}, width {width}, rows {rows}, grouped row {r}");
                    }
                    // The same groups packed densely into the output (out_stride 2, as a
                    // chunk's gates buffer holds them).
                    let p = Projection { out_stride: 2, ..p };
                    let mut dense = vec![f32::NAN; groups * 2 * COLS];
                    project_with(isa, &p, &mut dense);
                    for g in 0..groups {
                        for r in 0..2 {
                            let (got, src) = ((g * 2 + r) * COLS, (g * 4 + r + 1) * COLS);
                            let same = dense[got..got + COLS]
                                .iter()
                                .zip(&want[src..src + COLS])
                                .all(|(a, b)| a.to_bits() == b.to_bits());
                            assert!(same, "{isa}, width {width}, rows {rows}, dense group {g}");
                        }
                    }
                }
            }
        }
    }

    /// The 512-bit kernels (AVX-512F), with every variant of their tiles ([`Tiles::all`]), give
    /// the bits of the portable ones and of every other set the host has, for the projection
    /// (every tile remainder, both input parts) and the recurrent product (every window-tile
    /// shape: batches 1 to 15, 19 and 32, against the written-out formulas). Runs only on a
    /// host with AVX-512F; prints why it did nothing elsewhere.
    #[test]
    fn avx512_kernels_give_the_same_bits() {
        let Some(zmm) = Isa::detect_at_most("avx512").filter(|isa| isa.is_512_bit()) else {
            println!(
                "skipped: no avx512f on this host (available: {:?})",
                Isa::available()
            );
            return;
        };
        assert!(Isa::available().contains(&zmm));
        let mut rng = SplitMix64::new(77);
        for (w0, w1) in [(60, 0), (128, 128), (7, 0)] {
            let width = w0 + w1;
            let mut strips = vec![0.0f32; COLS * width];
            rng.fill_uniform_f32(&mut strips, -1.0, 1.0);
            for rows in [
                1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 17, 18, 19, 23, 24, 97, 192, 203,
            ] {
                let x = random_parts(&mut rng, rows, [w0, w1]);
                let p = one_group(&x, [w0, w1], rows, &strips);
                let mut want = vec![f32::NAN; rows * COLS];
                simd::project(
                    Isa::portable(),
                    Tiles::default(),
                    &p,
                    &mut want,
                    &mut Vec::new(),
                );
                let isas = Isa::available().into_iter().map(|i| (i, Tiles::default()));
                // Each projection tile (the other choices do not touch the projection).
                let variants = Tiles::TOKENS[0].iter().filter_map(|t| Tiles::parse(t));
                for (isa, tiles) in isas.chain(variants.map(|t| (zmm, t))) {
                    let mut got = vec![f32::NAN; rows * COLS];
                    simd::project(isa, tiles, &p, &mut got, &mut Vec::new());
                    let same = got
                        .iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(
                        same,
                        "projection {isa} tiles {tiles}, widths {w0}+{w1}, rows {rows}"
                    );
                }
            }
        }
        for batch in (1..=15).chain([19, 32]) {
            recurrence_case(batch);
        }
        println!(
            "avx512f kernels: bits identical to {:?}, with each of the {} tile variants",
            Isa::available(),
            Tiles::all().len()
        );
    }

    /// The kernels the timing tests time: every ISA with its default tiles, then the 512-bit
    /// kernels with each variant of the sweep (`BILSTM_CPU_TILES`) but the default.
    fn timed_paths() -> Vec<(Isa, Tiles)> {
        let isas = Isa::available().into_iter().filter(|i| i.is_avx2_fma());
        let zmm = Isa::available().into_iter().filter(|i| i.is_512_bit());
        let variants = zmm.flat_map(|isa| {
            Tiles::SWEEP[1..]
                .iter()
                .filter_map(move |t| Some((isa, Tiles::parse(t)?)))
        });
        isas.map(|i| (i, Tiles::default()))
            .chain(variants)
            .collect()
    }

    /// The projection strips, the recurrent strips and the sequential layout `tiles` reads on
    /// `isa` (empty when none), where the backend would put them for those tiles.
    fn placed(isa: Isa, tiles: Tiles, strips: &[f32], r_strips: &[f32]) -> [AlignedBuf; 3] {
        let seq = tiles
            .single
            .seq_strips()
            .filter(|_| isa.is_512_bit())
            .map(|ns| pack_seq(r_strips, ns))
            .unwrap_or_default();
        [strips, r_strips, seq.as_slice()]
            .map(|v| AlignedBuf::copy_of(v, tiles.align64).unwrap_or_default())
    }

    /// Where a batch-1 forward's time goes on one thread, per instruction set (not a check:
    /// `--ignored --nocapture phase_timings`, on a quiet machine). Per direction and layer:
    /// the projection of 589 rows at K = 60 and K = 256, the recurrence of 589 steps (product
    /// and gate math), and the gate math alone (589 first steps, which skip the product); the
    /// best of 7 runs each, and the forward they add up to (2 directions x 4 layers).
    #[test]
    #[ignore = "timing, not a check: run with --ignored --nocapture"]
    fn phase_timings() {
        use std::time::Instant;
        const FRAMES: usize = 589;
        fn best(mut f: impl FnMut()) -> f64 {
            f();
            (0..7)
                .map(|_| {
                    let t = Instant::now();
                    f();
                    t.elapsed().as_secs_f64() * 1e3
                })
                .fold(f64::INFINITY, f64::min)
        }
        let mut rng = SplitMix64::new(5);
        let mut strips = vec![0.0f32; COLS * 256];
        rng.fill_uniform_f32(&mut strips, -0.1, 0.1);
        let mut r_strips = vec![0.0f32; H * COLS];
        rng.fill_uniform_f32(&mut r_strips, -0.1, 0.1);
        let mut bias = vec![0.0f32; COLS];
        rng.fill_uniform_f32(&mut bias, -0.1, 0.1);
        let mut x = vec![0.0f32; FRAMES * 256];
        rng.fill_normal_f32(&mut x);
        let gates = vec![0.0f32; FRAMES * COLS];
        let (mut hseq, mut h, mut c) = (vec![0.0f32; FRAMES * H], [0.0f32; H], [0.0f32; H]);
        let (mut hb, mut cb) = (vec![0.0f32; FRAMES * H], vec![0.0f32; FRAMES * H]);
        for (isa, tiles) in timed_paths() {
            // The weights and the gates where the backend would put them for these tiles.
            let copy = |v: &[f32]| AlignedBuf::copy_of(v, tiles.align64).unwrap_or_default();
            let [strips, r_strips, seq] = placed(isa, tiles, &strips, &r_strips);
            let (strips, r_strips, seq) = (strips.as_slice(), r_strips.as_slice(), seq.as_slice());
            let mut gates_buf = copy(&gates);
            let gates = gates_buf.as_mut_slice();
            // A panel as the backend's (allocated once, outside the timed calls).
            let mut panel = vec![0.0f32; panel_len(256)];
            let mut proj = |width: usize| {
                let p = Projection {
                    x: [&x[..FRAMES * width], &[]],
                    widths: [width, 0],
                    rows: FRAMES,
                    groups: 1,
                    group_stride: FRAMES,
                    out_stride: FRAMES,
                    strips: &strips[..COLS * width],
                };
                best(|| simd::project(isa, tiles, &p, gates, &mut panel))
            };
            let (p60, p256) = (proj(60), proj(256));
            let rec = Recurrence {
                forward: true,
                frames: FRAMES,
                batch: 1,
                steps: 0..FRAMES,
                gates_frames: 0..FRAMES,
                strips: r_strips,
                seq_strips: seq,
                bias: &bias,
            };
            let recurrence = best(|| {
                let state = State {
                    gates,
                    hseq: &mut hseq,
                    h: &mut h,
                    c: &mut c,
                };
                simd::recurrence(isa, tiles, &rec, state);
            });
            // The gate math alone: step 0 (no product) of FRAMES one-frame windows, whose
            // gates are the rows the recurrence above left (its pre-activations).
            let cells = best(|| {
                let one = Recurrence {
                    steps: 0..1,
                    gates_frames: 0..1,
                    frames: 1,
                    batch: FRAMES,
                    ..rec
                };
                let state = State {
                    gates,
                    hseq: &mut hseq,
                    h: &mut hb,
                    c: &mut cb,
                };
                simd::recurrence(isa, tiles, &one, state);
            });
            // The fused one-window path of layers 1-3 (tile `f128`): the steps with a K = 256
            // projection of as many rows beside them.
            let mut next_out = vec![0.0f32; FRAMES * COLS];
            let fused = best(|| {
                let state = State {
                    gates,
                    hseq: &mut hseq,
                    h: &mut h,
                    c: &mut c,
                };
                let next = Fused {
                    next: Projection {
                        x: [&x[..FRAMES * H], &x[FRAMES * H..2 * FRAMES * H]],
                        widths: [H, H],
                        rows: FRAMES,
                        groups: 1,
                        group_stride: FRAMES,
                        out_stride: FRAMES,
                        strips: &strips[..COLS * 2 * H],
                    },
                    out: &mut next_out,
                };
                simd::recurrence_fused(isa, tiles, &rec, state, next, &mut panel);
            });
            println!(
                "phase timings, batch 1, one thread, {isa}{}: recurrence with a K=256 projection \
                 beside it {fused:.3} ms (recurrence then projection {:.3} ms)",
                if tiles == Tiles::default() {
                    String::new()
                } else {
                    format!(" tiles {tiles}")
                },
                recurrence + p256
            );
            let forward = 2.0 * (p60 + 3.0 * p256) + 8.0 * recurrence;
            println!(
                "phase timings, batch 1, one thread, {isa}{}: projection K=60 {p60:.3} ms, \
                 K=256 {p256:.3} ms; recurrence {recurrence:.3} ms (product {:.3} + gate math \
                 {cells:.3}); per forward: projections {:.2} ms, products {:.2} ms, gate math \
                 {:.2} ms, total {forward:.2} ms",
                if tiles == Tiles::default() {
                    String::new()
                } else {
                    format!(" tiles {tiles}")
                },
                recurrence - cells,
                2.0 * (p60 + 3.0 * p256),
                8.0 * (recurrence - cells),
                8.0 * cells,
            );
        }
    }

    /// Where a batch-`B` direction's time goes on one thread, per instruction set, the way the
    /// backend runs it (not a check: `--ignored --nocapture phase_timings_batch`; `B` from
    /// `BILSTM_PHASE_BATCH`, default 32): one layer-direction at K = 256 over 589 frames in the
    /// backend's chunks of frames, the projection of each chunk then its recurrence steps; the
    /// two phases' times summed over the chunks, the best of 3 runs, and their FLOP rates.
    #[test]
    #[ignore = "timing, not a check: run with --ignored --nocapture"]
    fn phase_timings_batch() {
        use std::time::Instant;
        const FRAMES: usize = 589;
        const K: usize = 256;
        let env = |name: &str| std::env::var(name).ok();
        let batch: usize = env("BILSTM_PHASE_BATCH")
            .and_then(|v| v.parse().ok())
            .filter(|&b| b > 0)
            .unwrap_or(32);
        let backend_chunk = (192 / batch).div_ceil(6).max(1) * 6;
        let chunks: Vec<usize> = env("BILSTM_PHASE_CHUNKS")
            .map(|v| {
                v.split(',')
                    .filter_map(|c| c.trim().parse().ok())
                    .filter(|&c: &usize| c > 0)
                    .collect::<Vec<_>>()
            })
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| vec![backend_chunk]);
        let mut rng = SplitMix64::new(5);
        let mut strips = vec![0.0f32; COLS * K];
        rng.fill_uniform_f32(&mut strips, -0.1, 0.1);
        let mut r_strips = vec![0.0f32; H * COLS];
        rng.fill_uniform_f32(&mut r_strips, -0.1, 0.1);
        let mut bias = vec![0.0f32; COLS];
        rng.fill_uniform_f32(&mut bias, -0.1, 0.1);
        let rows = batch * FRAMES;
        let mut x = vec![0.0f32; rows * K / 2];
        rng.fill_normal_f32(&mut x);
        let x2 = x.clone();
        let mut hseq = vec![0.0f32; rows * H];
        let (mut h, mut c) = (vec![0.0f32; batch * H], vec![0.0f32; batch * H]);
        for (isa, tiles) in timed_paths() {
            let copy = |v: &[f32]| AlignedBuf::copy_of(v, tiles.align64).unwrap_or_default();
            let [sw, rw, seq] = placed(isa, tiles, &strips, &r_strips);
            for &chunk in &chunks {
                let mut gates_buf = copy(&vec![0.0f32; batch * chunk * COLS]);
                let gates = gates_buf.as_mut_slice();
                let mut panel = vec![0.0f32; panel_len(K)];
                let mut best = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
                for _ in 0..3 {
                    let (mut tp, mut tr) = (0.0, 0.0);
                    let t_all = Instant::now();
                    for s0 in (0..FRAMES).step_by(chunk) {
                        let s1 = (s0 + chunk).min(FRAMES);
                        let held = s1 - s0;
                        let t = Instant::now();
                        let p = Projection {
                            x: [&x[s0 * K / 2..], &x2[s0 * K / 2..]],
                            widths: [K / 2, K / 2],
                            rows: held,
                            groups: batch,
                            group_stride: FRAMES,
                            out_stride: held,
                            strips: sw.as_slice(),
                        };
                        simd::project(
                            isa,
                            tiles,
                            &p,
                            &mut gates[..batch * held * COLS],
                            &mut panel,
                        );
                        tp += t.elapsed().as_secs_f64() * 1e3;
                        let t = Instant::now();
                        let rec = Recurrence {
                            forward: true,
                            frames: FRAMES,
                            batch,
                            steps: s0..s1,
                            gates_frames: s0..s1,
                            strips: rw.as_slice(),
                            seq_strips: seq.as_slice(),
                            bias: &bias,
                        };
                        let state = State {
                            gates: &mut gates[..batch * held * COLS],
                            hseq: &mut hseq,
                            h: &mut h,
                            c: &mut c,
                        };
                        simd::recurrence(isa, tiles, &rec, state);
                        tr += t.elapsed().as_secs_f64() * 1e3;
                    }
                    let all = t_all.elapsed().as_secs_f64() * 1e3;
                    if all < best.2 {
                        best = (tp, tr, all);
                    }
                }
                let (tp, tr, all) = best;
                let pf = (rows * K * COLS * 2) as f64 / tp / 1e6;
                let rf = (rows * H * COLS * 2) as f64 / tr / 1e6;
                println!(
                    "phase timings, batch {batch}, one thread, one layer-direction (K = {K}), \
                     {isa}{}, chunks of {chunk} frames: projection {tp:.2} ms ({pf:.1} GFLOP/s), \
                     recurrence {tr:.2} ms ({rf:.1} GFLOP/s of product, gate math included), \
                     total {all:.2} ms",
                    if tiles == Tiles::default() {
                        String::new()
                    } else {
                        format!(" tiles {tiles}")
                    },
                );
            }
        }
    }

    /// The recurrence against the documented formulas written out per value with
    /// `f32::mul_add` and the portable gate functions, for an odd batch (pairs and a single
    /// window), both directions, every ISA.
    #[test]
    fn recurrence_follows_the_documented_formulas() {
        for batch in [1, 2, 3, 8, 13, 14, 15, 19] {
            recurrence_case(batch);
        }
    }

    fn recurrence_case(batch: usize) {
        let frames = if batch > 13 { 3 } else { 5 };
        let mut rng = SplitMix64::new(9);
        let mut proj = vec![0.0f32; batch * frames * COLS];
        rng.fill_normal_f32(&mut proj);
        let mut strips = vec![0.0f32; H * COLS];
        rng.fill_uniform_f32(&mut strips, -0.1, 0.1);
        let rb = R_STRIP_COLS;
        let mut bias = vec![0.0f32; COLS];
        rng.fill_uniform_f32(&mut bias, -0.5, 0.5);
        // One lane of the portable cell: (c', h) from the pre-activations and c.
        let cell = |a: [f32; 4], c: f32| {
            let x = [[a[0]; 16], [a[1]; 16], [a[2]; 16], [a[3]; 16], [c; 16]];
            let out = simd::eval_math(Isa::portable(), &x);
            (out[0][0], out[1][0])
        };
        for forward in [true, false] {
            let mut want = vec![0.0f32; batch * frames * H];
            for w in 0..batch {
                let (mut h, mut c) = (vec![0.0f32; H], vec![0.0f32; H]);
                for step in 0..frames {
                    let t = if forward { step } else { frames - 1 - step };
                    let row = w * frames + t;
                    let mut hn = vec![0.0f32; H];
                    for u in 0..H {
                        let (p, j) = (u / PANEL_UNITS, u % PANEL_UNITS);
                        let a: [f32; 4] = std::array::from_fn(|g| {
                            let col = p * PANEL_COLS + g * PANEL_UNITS + j;
                            let mut acc = proj[row * COLS + col];
                            if step > 0 {
                                for (k, &hk) in h.iter().enumerate() {
                                    let r = strips[(col / rb * H + k) * rb + col % rb];
                                    acc = hk.mul_add(r, acc);
                                }
                            }
                            acc + bias[col]
                        });
                        (c[u], hn[u]) = cell(a, c[u]);
                    }
                    want[row * H..(row + 1) * H].copy_from_slice(&hn);
                    h = hn;
                }
            }
            for isa in paths_for(Kernel::Recurrence) {
                let mut hseq = vec![f32::NAN; batch * frames * H];
                let (mut h, mut c) = (vec![7.0f32; batch * H], vec![7.0f32; batch * H]);
                let rec = Recurrence {
                    forward,
                    frames,
                    batch,
                    steps: 0..frames,
                    gates_frames: 0..frames,
                    strips: &strips,
                    seq_strips: &[],
                    bias: &bias,
                };
                let mut gates = proj.clone();
                let state = State {
                    gates: &mut gates,
                    hseq: &mut hseq,
                    h: &mut h,
                    c: &mut c,
                };
                recurrence_with(isa, &rec, state);
                let same = hseq
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{isa}, batch {batch}, forward {forward}");

                // In two calls, each with a gates buffer holding only its steps' frames
                // (as the backend's chunks do): the same bits.
                let mut hseq = vec![f32::NAN; batch * frames * H];
                for steps in [0..2, 2..frames] {
                    let (t0, t1) = if forward {
                        (steps.start, steps.end)
                    } else {
                        (frames - steps.end, frames - steps.start)
                    };
                    let mut chunk: Vec<f32> = (0..batch)
                        .flat_map(|w| {
                            proj[(w * frames + t0) * COLS..(w * frames + t1) * COLS].to_vec()
                        })
                        .collect();
                    let rec = Recurrence {
                        steps,
                        gates_frames: t0..t1,
                        ..rec
                    };
                    let state = State {
                        gates: &mut chunk,
                        hseq: &mut hseq,
                        h: &mut h,
                        c: &mut c,
                    };
                    recurrence_with(isa, &rec, state);
                }
                assert_eq!(
                    hseq.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{isa}, batch {batch}, forward {forward}, chunked"
                );
            }
        }
    }

    /// The fused one-window recurrence ([`recurrence_fused`], tiles `f128` and `f128w`) gives
    /// the bits of
    /// the recurrence followed by the next chunk's projection: hidden and cell states and
    /// every projected value, for chunks with and without step 0 (which has no product to
    /// fuse with), both directions, projections that end inside the steps, after them and
    /// with a partial group of rows, and an input width the fast loop does not take (layer 0).
    /// On the portable operations with the 512-bit tiling (any host), the 512-bit kernels where
    /// the host has them, and every other set (which runs the two one after the other).
    #[test]
    fn fused_recurrence_gives_the_bits_of_recurrence_then_projection() {
        let mut rng = SplitMix64::new(31);
        let frames = 20;
        let mut strips = vec![0.0f32; H * COLS];
        rng.fill_uniform_f32(&mut strips, -0.1, 0.1);
        let seq = pack_seq(&strips, 8);
        let mut bias = vec![0.0f32; COLS];
        rng.fill_uniform_f32(&mut bias, -0.5, 0.5);
        let mut proj = vec![0.0f32; frames * COLS];
        rng.fill_normal_f32(&mut proj);
        let fused_tiles = Tiles::parse("f128").unwrap();
        assert_eq!(fused_tiles, Tiles::default());
        let zmm = Isa::detect_at_most("avx512").filter(|isa| isa.is_512_bit());
        let mut checked = 0;
        for (w0, w1) in [(H, H), (60, 0)] {
            let width = w0 + w1;
            let mut p_strips = vec![0.0f32; COLS * width];
            rng.fill_uniform_f32(&mut p_strips, -1.0, 1.0);
            for rows in [0, 1, 5, 8, 13, 20, 48] {
                let x = random_parts(&mut rng, rows, [w0, w1]);
                let next = one_group(&x, [w0, w1], rows, &p_strips);
                for forward in [true, false] {
                    for steps in [0..frames, 7..frames] {
                        let rec = Recurrence {
                            forward,
                            frames,
                            batch: 1,
                            steps: steps.clone(),
                            gates_frames: 0..frames,
                            strips: &strips,
                            seq_strips: &seq,
                            bias: &bias,
                        };
                        let mut h0 = vec![0.0f32; H];
                        rng.fill_uniform_f32(&mut h0, -0.5, 0.5);
                        let run = |path: &str, single: SingleTile| {
                            let (mut h, mut c) = (h0.clone(), h0.clone());
                            let mut gates = proj.clone();
                            let mut hseq = vec![f32::NAN; frames * H];
                            let mut out = vec![f32::NAN; rows * COLS];
                            let state = State {
                                gates: &mut gates,
                                hseq: &mut hseq,
                                h: &mut h,
                                c: &mut c,
                            };
                            let fused = Fused {
                                next: Projection { ..next },
                                out: &mut out,
                            };
                            let panel = &mut Vec::new();
                            match path {
                                "reference" => {
                                    simd::recurrence(
                                        Isa::portable(),
                                        Tiles::default(),
                                        &rec,
                                        state,
                                    );
                                    simd::project(
                                        Isa::portable(),
                                        Tiles::default(),
                                        &fused.next,
                                        fused.out,
                                        panel,
                                    );
                                }
                                "zmm tiles" => {
                                    let tiles = Tiles {
                                        single,
                                        ..fused_tiles
                                    };
                                    simd::zmm_tiles::recurrence_fused(tiles, &rec, state, fused)
                                }
                                name => {
                                    let isa = Isa::available()
                                        .into_iter()
                                        .find(|i| i.name() == name)
                                        .unwrap();
                                    let tiles = Tiles {
                                        single,
                                        ..fused_tiles
                                    };
                                    simd::recurrence_fused(isa, tiles, &rec, state, fused, panel);
                                }
                            }
                            let bits =
                                |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                            (bits(&hseq), bits(&h), bits(&c), bits(&out))
                        };
                        let want = run("reference", SingleTile::Fused128);
                        assert!(rows == 0 || want.3.iter().all(|&b| !f32::from_bits(b).is_nan()));
                        let mut paths = vec!["zmm tiles"];
                        paths.extend(Isa::available().iter().map(|i| i.name()));
                        for single in [SingleTile::Fused128, SingleTile::Fused128Wide] {
                            for &path in &paths {
                                assert_eq!(
                                    run(path, single),
                                    want,
                                    "{path} {single:?}, widths {w0}+{w1}, rows {rows}, \
                                     forward {forward}, steps {steps:?}"
                                );
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        println!(
            "fused recurrence: {checked} cases bit-identical (512-bit kernels {})",
            if zmm.is_some() {
                "included"
            } else {
                "absent here"
            }
        );
    }

    /// The host's tiles are the default but for the one-window tile, which is `q128` exactly
    /// when the CPU is Intel's (CPUID's vendor string read against `/proc/cpuinfo`'s).
    #[test]
    fn host_tiles_follow_the_cpu_vendor() {
        let host = Tiles::for_host();
        assert_eq!(
            Tiles {
                single: Tiles::default().single,
                ..host
            },
            Tiles::default()
        );
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
            let intel = info
                .lines()
                .find(|l| l.starts_with("vendor_id"))
                .is_some_and(|l| l.trim_end().ends_with("GenuineIntel"));
            assert_eq!(crate::simd::x86::vendor_is_intel(), intel);
            assert_eq!(host.single == SingleTile::Seq128, intel, "{host}");
            assert_eq!(host.single.fuses(), !intel, "{host}");
        }
    }
}
