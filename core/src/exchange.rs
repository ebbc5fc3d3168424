//! Hidden-state exchange layouts of the wide and tiled recurrences (DESIGN §4).
//!
//! A producer block publishes each hidden value it computes at step `t` as one aligned
//! 64-bit word: high half the step flag ([`flag`]), low half the f32 bits ([`word`]). A
//! consumer spins on a relaxed load of the same word until the flag matches. Two parity slots
//! let step `t + 1` be written while `t` is still read. Each producer owns whole
//! [`crate::geometry::EXCHANGE_LINE_BYTES`] lines; slots, tiles and directions are separated by a padding line,
//! and the whole span is a multiple of [`EXCHANGE_ALIGN_BYTES`] so its base can be aligned.
//!
//! Word index of a value (in 8-byte words from the aligned base):
//! `direction * direction_stride + tile * tile_stride + slot * slot_stride
//!  + block * block_stride + window * units_per_block + unit`.

use crate::error::{CoreError, checked_mul};
use crate::geometry::{
    EXCHANGE_ALIGN_BYTES, EXCHANGE_LINE_WORDS, EXCHANGE_SLOTS, EXCHANGE_WORD_BYTES,
    TILED_BLOCKS_PER_TILE, TILED_UNITS_PER_BLOCK, TILED_WINDOWS, WIDE_BLOCKS_PER_TILE,
    WIDE_UNITS_PER_BLOCK,
};
use crate::shape::Direction;

/// The word map of one recurrence launch geometry (both directions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExchangeLayout {
    /// Windows per tile.
    pub windows_per_tile: usize,
    /// Producer blocks per tile.
    pub blocks_per_tile: usize,
    /// Hidden units each block owns.
    pub units_per_block: usize,
    /// Tiles per direction.
    pub tiles: usize,
    /// Words from one producer block's first word to the next's (whole lines).
    pub block_stride: usize,
    /// Words from slot 0 to slot 1 of a tile.
    pub slot_stride: usize,
    /// Words from one tile to the next.
    pub tile_stride: usize,
    /// Words from the forward to the reverse direction.
    pub direction_stride: usize,
}

impl ExchangeLayout {
    /// A layout for `tiles` tiles of `windows_per_tile` windows, `blocks_per_tile` blocks
    /// owning `units_per_block` units each.
    ///
    /// # Errors
    /// [`CoreError::Overflow`] when the span does not fit `usize`; [`CoreError::Unsupported`]
    /// for a zero dimension.
    pub fn new(
        windows_per_tile: usize,
        blocks_per_tile: usize,
        units_per_block: usize,
        tiles: usize,
    ) -> Result<Self, CoreError> {
        for (what, value) in [
            ("exchange windows per tile", windows_per_tile),
            ("exchange blocks per tile", blocks_per_tile),
            ("exchange units per block", units_per_block),
        ] {
            if value == 0 {
                return Err(CoreError::Unsupported {
                    what,
                    value,
                    reason: "must be positive",
                });
            }
        }
        let what = "exchange layout";
        let block_words = checked_mul(windows_per_tile, units_per_block, what)?;
        let block_stride = block_words.div_ceil(EXCHANGE_LINE_WORDS) * EXCHANGE_LINE_WORDS;
        let slot_stride = checked_mul(blocks_per_tile, block_stride, what)?
            .checked_add(EXCHANGE_LINE_WORDS)
            .ok_or(CoreError::Overflow { what })?;
        let tile_stride = checked_mul(EXCHANGE_SLOTS, slot_stride, what)?;
        let direction_stride = checked_mul(tiles, tile_stride, what)?
            .checked_add(EXCHANGE_LINE_WORDS)
            .ok_or(CoreError::Overflow { what })?;
        let layout = ExchangeLayout {
            windows_per_tile,
            blocks_per_tile,
            units_per_block,
            tiles,
            block_stride,
            slot_stride,
            tile_stride,
            direction_stride,
        };
        layout.span_bytes()?;
        Ok(layout)
    }

    /// The wide recurrence's layout for `tiles` tiles of `tile_height` windows.
    ///
    /// # Errors
    /// As [`ExchangeLayout::new`].
    pub fn wide(tile_height: usize, tiles: usize) -> Result<Self, CoreError> {
        Self::new(
            tile_height,
            WIDE_BLOCKS_PER_TILE,
            WIDE_UNITS_PER_BLOCK,
            tiles,
        )
    }

    /// The tiled recurrence's layout for `tiles` eight-window tiles.
    ///
    /// # Errors
    /// As [`ExchangeLayout::new`].
    pub fn tiled(tiles: usize) -> Result<Self, CoreError> {
        Self::new(
            TILED_WINDOWS,
            TILED_BLOCKS_PER_TILE,
            TILED_UNITS_PER_BLOCK,
            tiles,
        )
    }

    /// Index (in words from the aligned base) of the word `block` publishes for
    /// `(window, unit)` (both relative to the tile and block) in `slot` of `tile`.
    pub const fn word_index(
        &self,
        direction: Direction,
        tile: usize,
        slot: usize,
        block: usize,
        window: usize,
        unit: usize,
    ) -> usize {
        direction.index() * self.direction_stride
            + tile * self.tile_stride
            + slot * self.slot_stride
            + block * self.block_stride
            + window * self.units_per_block
            + unit
    }

    /// Words in the layout (both directions, trailing padding included).
    pub const fn words(&self) -> usize {
        2 * self.direction_stride
    }

    /// Bytes to allocate: the words rounded up to [`EXCHANGE_ALIGN_BYTES`], plus one more
    /// alignment unit so an aligned base can be found in any allocation of this size.
    ///
    /// # Errors
    /// [`CoreError::Overflow`].
    pub fn span_bytes(&self) -> Result<usize, CoreError> {
        let what = "exchange span";
        let bytes = checked_mul(self.words(), EXCHANGE_WORD_BYTES, what)?;
        bytes
            .div_ceil(EXCHANGE_ALIGN_BYTES)
            .checked_add(1)
            .and_then(|units| units.checked_mul(EXCHANGE_ALIGN_BYTES))
            .ok_or(CoreError::Overflow { what })
    }
}

/// The flag published with every value of `step` of `layer`: `layer * frames + step + 1`
/// (never 0, so a zeroed buffer matches no step).
///
/// # Errors
/// [`CoreError::Overflow`] when the flag does not fit 32 bits.
pub fn flag(layer: usize, frames: usize, step: usize) -> Result<u32, CoreError> {
    layer
        .checked_mul(frames)
        .and_then(|v| v.checked_add(step))
        .and_then(|v| v.checked_add(1))
        .and_then(|v| u32::try_from(v).ok())
        .ok_or(CoreError::Overflow {
            what: "exchange flag",
        })
}

/// One exchange word: `flag` in the high 32 bits, `value`'s bits in the low 32.
pub const fn word(flag: u32, value: f32) -> u64 {
    ((flag as u64) << 32) | value.to_bits() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::{EXCHANGE_LINE_BYTES, WIDE_TILE_HEIGHTS};

    fn check(layout: &ExchangeLayout) {
        let mut owner = std::collections::HashMap::new();
        let mut seen = std::collections::HashSet::new();
        for d in Direction::ALL {
            for tile in 0..layout.tiles {
                for slot in 0..EXCHANGE_SLOTS {
                    let slot_start = layout.word_index(d, tile, slot, 0, 0, 0);
                    for block in 0..layout.blocks_per_tile {
                        for w in 0..layout.windows_per_tile {
                            for u in 0..layout.units_per_block {
                                let i = layout.word_index(d, tile, slot, block, w, u);
                                assert!(seen.insert(i), "word {i} used twice");
                                assert!(
                                    i >= slot_start
                                        && i < slot_start + layout.slot_stride
                                            - EXCHANGE_LINE_WORDS
                                );
                                assert!(i < layout.words());
                                let line = i * EXCHANGE_WORD_BYTES / EXCHANGE_LINE_BYTES;
                                let who = (d, tile, slot, block);
                                assert_eq!(
                                    *owner.entry(line).or_insert(who),
                                    who,
                                    "line {line} shared"
                                );
                            }
                        }
                    }
                }
            }
        }
        // Neighbouring slots, tiles and directions never share or touch a line.
        assert!(layout.span_bytes().unwrap() >= layout.words() * 8 + EXCHANGE_ALIGN_BYTES);
        assert_eq!(layout.span_bytes().unwrap() % EXCHANGE_ALIGN_BYTES, 0);
    }

    #[test]
    fn wide_layouts_are_distinct_and_line_owned() {
        for h in WIDE_TILE_HEIGHTS {
            for tiles in [1, 2, 5] {
                check(&ExchangeLayout::wide(h, tiles).unwrap());
            }
        }
    }

    #[test]
    fn tiled_layouts_are_distinct_and_line_owned() {
        for tiles in [1, 3, 128] {
            check(&ExchangeLayout::tiled(tiles).unwrap());
        }
        // Odd geometries still give whole lines per producer.
        check(&ExchangeLayout::new(3, 5, 7, 2).unwrap());
    }

    #[test]
    fn wide_8_window_geometry() {
        let l = ExchangeLayout::wide(8, 2).unwrap();
        assert_eq!(l.block_stride, 64); // 8 windows x 8 units = 64 words = 4 lines
        assert_eq!(l.slot_stride, 16 * 64 + 16);
        assert_eq!(
            l.word_index(Direction::Reverse, 0, 0, 0, 0, 0),
            l.direction_stride
        );
    }

    #[test]
    fn flags_and_words() {
        assert_eq!(flag(0, 589, 0), Ok(1));
        assert_eq!(flag(3, 589, 588), Ok(3 * 589 + 589));
        assert!(flag(usize::MAX / 2, 589, 0).is_err());
        assert_eq!(word(7, 1.0), (7u64 << 32) | 0x3f80_0000);
        assert_eq!(word(1, -0.0) & 0xffff_ffff, 0x8000_0000);
        assert!(ExchangeLayout::new(0, 1, 1, 1).is_err());
    }
}
