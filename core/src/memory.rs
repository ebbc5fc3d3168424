//! Device memory of one GPU preparation: what each buffer of a stack prepared for batches up to
//! `max_batch` takes (the CUDA backend allocates exactly these element counts), and the largest
//! batch a given number of bytes holds.
//!
//! | buffer | elements |
//! |---|---|
//! | packed weights | [`crate::layout::StackPacking::len`] f32 |
//! | input | `max_batch * frames * features` f32 |
//! | projections | `2 * max(max_batch * frames * 512, 4)` f32 (forward then reverse) |
//! | layer outputs | `2 * max_batch * frames * 256` f32 (ping-pong) |
//! | exchange | [`exchange_words`] + the alignment slack, u64 |
//! | error words | [`ERROR_WORDS`] i32 |
//! | final states | `2 * 2 * layers * max_batch * 128` f32 (`h_n` and `c_n`) |

use core::fmt;

use crate::error::{CoreError, checked_mul};
use crate::exchange::ExchangeLayout;
use crate::geometry::{
    EXCHANGE_ALIGN_BYTES, EXCHANGE_WORD_BYTES, GATE_ROWS, TILED_WINDOWS, WIDE_TILE_HEIGHTS,
};
use crate::layout::StackPacking;
use crate::shape::StackShape;

/// The kernels' error report: `i32` words (code, layer, direction, step);
/// `bilstm_kernels::params::ERROR_WORDS` is this constant.
pub const ERROR_WORDS: usize = 4;

/// Bytes of device memory a preparation leaves to the driver beyond its own buffers (kernel
/// modules, graphs, launch state): a margin, not a measurement. [`fits`] asks for it.
pub const DRIVER_RESERVE_BYTES: u64 = 256 << 20;

/// The exchange words (from the aligned base) that every cooperative schedule of a batch up to
/// `max_batch` fits in, whichever recurrence a plan (or an override) picks: the largest of
/// `ExchangeLayout::wide(h, ceil(max_batch / h)).words()` over the tile heights `h` and
/// `ExchangeLayout::tiled(ceil(max_batch / 8)).words()` (a layout only grows with its tile
/// count).
///
/// # Errors
/// [`CoreError::Overflow`].
pub fn exchange_words(max_batch: usize) -> Result<usize, CoreError> {
    let mut words = ExchangeLayout::tiled(max_batch.div_ceil(TILED_WINDOWS).max(1))?.words();
    for h in WIDE_TILE_HEIGHTS {
        let layout = ExchangeLayout::wide(h, max_batch.div_ceil(h).max(1))?;
        words = words.max(layout.words());
    }
    Ok(words)
}

/// The element counts of every device buffer of one preparation (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceBuffers {
    /// Packed weights, f32.
    pub weights: usize,
    /// The stack input of a host forward, f32.
    pub input: usize,
    /// Floats from the forward to the reverse half of the projections.
    pub proj_direction_stride: usize,
    /// Both directions' projections, f32.
    pub proj: usize,
    /// One layer output, f32 (there are two).
    pub layer_out: usize,
    /// Usable exchange words from the aligned base, u64.
    pub exchange_words: usize,
    /// The exchange allocation: the usable words plus the alignment slack, u64.
    pub exchange_alloc: usize,
    /// Error words, i32.
    pub error: usize,
    /// One of the final-state buffers (`h_n` or `c_n`), f32.
    pub state: usize,
}

impl DeviceBuffers {
    /// The buffers of `shape` prepared for batches up to `max_batch`.
    ///
    /// # Errors
    /// [`CoreError::Unsupported`] for a shape this version cannot run; [`CoreError::Overflow`].
    pub fn of(shape: &StackShape, max_batch: usize) -> Result<DeviceBuffers, CoreError> {
        let weights = StackPacking::new(shape)?.len();
        let rows = checked_mul(max_batch, shape.frames, "forward rows")?;
        let proj_direction_stride = checked_mul(rows, GATE_ROWS, "projection buffer")?.max(4);
        let exchange_words = exchange_words(max_batch)?;
        let align_words = EXCHANGE_ALIGN_BYTES / EXCHANGE_WORD_BYTES;
        Ok(DeviceBuffers {
            weights,
            input: shape.input_len(max_batch)?,
            proj_direction_stride,
            proj: checked_mul(proj_direction_stride, 2, "projection buffer")?,
            layer_out: shape.output_len(max_batch)?,
            exchange_words,
            exchange_alloc: exchange_words
                .checked_add(align_words)
                .ok_or(CoreError::Overflow {
                    what: "exchange span",
                })?,
            error: ERROR_WORDS,
            state: shape.state_len(max_batch)?,
        })
    }

    /// Bytes of each part, in the order of [`DeviceMemory`]'s fields.
    pub fn memory(&self) -> DeviceMemory {
        // Every allocation holds at least one element (a zero-byte one has no address).
        let f32s = |n: usize| n.max(1) as u64 * 4;
        DeviceMemory {
            weights: f32s(self.weights),
            input: f32s(self.input),
            proj: f32s(self.proj),
            layer_out: 2 * f32s(self.layer_out),
            exchange: self.exchange_alloc.max(1) as u64 * EXCHANGE_WORD_BYTES as u64,
            error: self.error.max(1) as u64 * 4,
            states: 2 * f32s(self.state),
        }
    }
}

/// Bytes of device memory one preparation allocates, by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceMemory {
    /// Packed weights of the whole stack.
    pub weights: u64,
    /// The stack input of a host forward.
    pub input: u64,
    /// One layer's input projections, both directions.
    pub proj: u64,
    /// The two ping-pong layer outputs.
    pub layer_out: u64,
    /// The cooperative recurrences' hidden-state exchange.
    pub exchange: u64,
    /// The kernels' error words.
    pub error: u64,
    /// The final hidden and cell states.
    pub states: u64,
}

impl DeviceMemory {
    /// Of `shape` prepared for batches up to `max_batch`.
    ///
    /// # Errors
    /// As [`DeviceBuffers::of`].
    pub fn of(shape: &StackShape, max_batch: usize) -> Result<DeviceMemory, CoreError> {
        Ok(DeviceBuffers::of(shape, max_batch)?.memory())
    }

    /// All parts together.
    pub fn total(&self) -> u64 {
        self.weights
            .saturating_add(self.input)
            .saturating_add(self.proj)
            .saturating_add(self.layer_out)
            .saturating_add(self.exchange)
            .saturating_add(self.error)
            .saturating_add(self.states)
    }
}

/// Mebibytes of `bytes`, for messages.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

impl fmt::Display for DeviceMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.1} MiB (weights {:.1}, input {:.1}, projections {:.1}, layer outputs {:.1}, \
             exchange {:.1}, final states {:.1})",
            mib(self.total()),
            mib(self.weights),
            mib(self.input),
            mib(self.proj),
            mib(self.layer_out),
            mib(self.exchange),
            mib(self.states)
        )
    }
}

/// The largest `max_batch` (at least 0, at most `limit`) whose preparation of `shape` needs at
/// most `bytes` of device memory ([`DeviceMemory::total`]); 0 when not even one window fits.
/// The need grows with the batch, so a bisection finds it.
pub fn max_batch_within(shape: &StackShape, bytes: u64, limit: usize) -> usize {
    let fits = |batch: usize| DeviceMemory::of(shape, batch).is_ok_and(|m| m.total() <= bytes);
    if limit == 0 || !fits(1) {
        return 0;
    }
    let (mut lo, mut hi) = (1usize, limit);
    if fits(hi) {
        return hi;
    }
    // fits(lo) && !fits(hi)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Checks that a preparation of `shape` for batches up to `max_batch` fits `free` bytes of
/// device memory with [`DRIVER_RESERVE_BYTES`] to spare.
///
/// # Errors
/// [`CoreError::DeviceMemory`] naming what is needed, what is free and the largest batch that
/// fits; the errors of [`DeviceMemory::of`].
pub fn fits(shape: &StackShape, max_batch: usize, free: u64) -> Result<DeviceMemory, CoreError> {
    let need = DeviceMemory::of(shape, max_batch)?;
    let usable = free.saturating_sub(DRIVER_RESERVE_BYTES);
    if need.total() <= usable {
        return Ok(need);
    }
    Err(CoreError::DeviceMemory {
        max_batch,
        needed_mib: need.total().div_ceil(1 << 20),
        free_mib: mib(free) as u64,
        fits: max_batch_within(shape, usable, max_batch),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pyannote_stack_at_batch_32_needs_what_the_buffers_hold() {
        let shape = StackShape::pyannote();
        let b = DeviceBuffers::of(&shape, 32).unwrap();
        let rows = 32 * 589;
        assert_eq!(b.input, rows * 60);
        assert_eq!(b.proj_direction_stride, rows * 512);
        assert_eq!(b.proj, 2 * rows * 512);
        assert_eq!(b.layer_out, rows * 256);
        assert_eq!(b.state, 2 * 4 * 32 * 128);
        assert_eq!(b.error, 4);
        assert_eq!(b.weights, StackPacking::new(&shape).unwrap().len());
        let m = b.memory();
        assert_eq!(m.proj, rows as u64 * 512 * 2 * 4);
        assert_eq!(m.layer_out, 2 * rows as u64 * 256 * 4);
        assert_eq!(
            m.total(),
            m.weights + m.input + m.proj + m.layer_out + m.exchange + m.error + m.states
        );
        // 77 MB of projections and 39 MB of layer outputs dominate batch 32.
        assert!((100.0..200.0).contains(&mib(m.total())), "{m}");
        let text = m.to_string();
        assert!(
            text.contains("MiB") && text.contains("projections"),
            "{text}"
        );
    }

    #[test]
    fn memory_grows_with_the_batch_and_the_bisection_finds_the_edge() {
        let shape = StackShape::pyannote();
        let mut last = 0;
        for batch in [1, 2, 8, 32, 33, 64, 1024] {
            let t = DeviceMemory::of(&shape, batch).unwrap().total();
            assert!(t > last, "batch {batch}");
            last = t;
        }
        let at_100 = DeviceMemory::of(&shape, 100).unwrap().total();
        assert_eq!(max_batch_within(&shape, at_100, 10_000), 100);
        assert_eq!(max_batch_within(&shape, at_100 - 1, 10_000), 99);
        assert_eq!(max_batch_within(&shape, at_100, 50), 50);
        assert_eq!(max_batch_within(&shape, 1024, 10_000), 0);
        assert_eq!(max_batch_within(&shape, u64::MAX, 0), 0);
    }

    #[test]
    fn a_batch_that_does_not_fit_is_refused_with_the_figures() {
        let shape = StackShape::pyannote();
        let need = DeviceMemory::of(&shape, 4096).unwrap().total();
        let free = need / 2;
        let e = fits(&shape, 4096, free).unwrap_err();
        let CoreError::DeviceMemory {
            max_batch,
            needed_mib,
            free_mib,
            fits: can,
        } = e
        else {
            panic!("{e:?}");
        };
        assert_eq!(max_batch, 4096);
        assert_eq!(needed_mib, need.div_ceil(1 << 20));
        assert_eq!(free_mib, mib(free) as u64);
        assert!(can > 0 && can < 4096);
        let usable = free - DRIVER_RESERVE_BYTES;
        assert!(DeviceMemory::of(&shape, can).unwrap().total() <= usable);
        assert!(DeviceMemory::of(&shape, can + 1).unwrap().total() > usable);
        let text = e.to_string();
        assert!(
            text.contains("4096") && text.contains("MiB") && text.contains(&can.to_string()),
            "{text}"
        );
        // With room to spare it passes and reports the need.
        assert_eq!(
            fits(&shape, 32, u64::MAX).unwrap(),
            DeviceMemory::of(&shape, 32).unwrap()
        );
        // Not even the reserve free: nothing fits.
        let e = fits(&shape, 1, DRIVER_RESERVE_BYTES).unwrap_err();
        assert!(
            matches!(e, CoreError::DeviceMemory { fits: 0, .. }),
            "{e:?}"
        );
    }
}
