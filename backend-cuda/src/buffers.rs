//! Every device buffer a forward pass needs, allocated once at prepare time, in the element
//! counts of `bilstm_core::memory::DeviceBuffers` (so the memory a plan reports, and the check
//! `prepare` makes before allocating, are what is allocated).
//!
//! | buffer | elements | role |
//! |---|---|---|
//! | `weights` | `StackPacking::len()` f32 | packed weights of the whole stack, uploaded once |
//! | `input` | `max_batch * frames * features` f32 | the stack input of a host forward |
//! | `proj` | `2 * max_batch * frames * 512` f32 | one layer's input projections, forward then reverse |
//! | `layer_out[2]` | `max_batch * frames * 256` f32 each | layer outputs, ping-pong (the last layer's is the stack output) |
//! | `exchange` | the largest wide or tiled layout of any batch up to `max_batch` (u64) | the hidden-state exchange of the cooperative recurrences (the resident one uses none); its base is aligned to `EXCHANGE_ALIGN_BYTES` inside the allocation |
//! | `error` | `ERROR_WORDS` i32 | the kernels' error report |
//! | `state_h`, `state_c` | `2 * layers * max_batch * 128` f32 each | every layer's and direction's final hidden and cell states, `[layers * 2, batch, 128]` for the batch of the pass (`Backend::forward_with_state`) |

use std::sync::Arc;

use bilstm_core::StackShape;
use bilstm_core::geometry::{EXCHANGE_ALIGN_BYTES, EXCHANGE_WORD_BYTES};
use bilstm_core::memory::DeviceBuffers;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::error::CudaError;
use crate::launch::Span;

/// The device buffers of one preparation.
#[derive(Debug)]
pub(crate) struct Buffers {
    pub weights: CudaSlice<f32>,
    pub input: CudaSlice<f32>,
    pub proj: CudaSlice<f32>,
    /// Floats from the forward to the reverse half of `proj`.
    pub proj_direction_stride: usize,
    pub layer_out: [CudaSlice<f32>; 2],
    pub exchange: CudaSlice<u64>,
    /// Words from the allocation's start to the aligned base.
    pub exchange_offset_words: usize,
    /// Usable words from the aligned base.
    pub exchange_words: usize,
    pub error: CudaSlice<i32>,
    /// Final hidden states `[layers * 2, batch, 128]` of the last pass.
    pub state_h: CudaSlice<f32>,
    /// Final cell states, laid out as `state_h`.
    pub state_c: CudaSlice<f32>,
}

fn alloc<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    len: usize,
) -> Result<CudaSlice<T>, CudaError> {
    // At least one element: a zero-byte allocation has no address to point kernels at.
    stream
        .alloc_zeros::<T>(len.max(1))
        .map_err(CudaError::driver("allocating device memory"))
}

/// The device address of `slice` (event tracking is off in the backend's context, so the
/// guard cudarc returns records nothing).
pub(crate) fn span<T>(slice: &CudaSlice<T>, stream: &CudaStream) -> Span {
    let (addr, _guard) = slice.device_ptr(stream);
    Span {
        addr,
        len: slice.len(),
    }
}

impl Buffers {
    /// Allocates everything for `shape` and batches up to `max_batch`, and uploads `packed`
    /// (the packed weights).
    ///
    /// # Errors
    /// [`CudaError::Driver`] when an allocation or the upload fails; overflow errors.
    pub(crate) fn allocate(
        stream: &Arc<CudaStream>,
        shape: &StackShape,
        max_batch: usize,
        packed: &[f32],
    ) -> Result<Buffers, CudaError> {
        // Core's accounting is what is allocated (`bilstm_core::memory`), so the memory a
        // plan reports and the check before allocating agree with these buffers.
        let sizes = DeviceBuffers::of(shape, max_batch)?;
        if sizes.weights != packed.len() {
            return Err(CudaError::Internal {
                what: format!(
                    "{} packed weights for a layout of {}",
                    packed.len(),
                    sizes.weights
                ),
            });
        }
        let DeviceBuffers {
            input: input_len,
            proj_direction_stride,
            proj: proj_len,
            layer_out: out_len,
            exchange_words,
            exchange_alloc,
            error: error_len,
            state: state_len,
            ..
        } = sizes;

        let mut weights = alloc::<f32>(stream, packed.len())?;
        if !packed.is_empty() {
            stream
                .memcpy_htod(packed, &mut weights)
                .map_err(CudaError::driver("uploading the packed weights"))?;
        }
        let input = alloc::<f32>(stream, input_len)?;
        let proj = alloc::<f32>(stream, proj_len)?;
        let layer_out = [
            alloc::<f32>(stream, out_len)?,
            alloc::<f32>(stream, out_len)?,
        ];
        let exchange = alloc::<u64>(stream, exchange_alloc)?;
        let error = alloc::<i32>(stream, error_len)?;
        let state_h = alloc::<f32>(stream, state_len)?;
        let state_c = alloc::<f32>(stream, state_len)?;
        let base = span(&exchange, stream).addr;
        let align = EXCHANGE_ALIGN_BYTES as u64;
        let aligned = base.div_ceil(align) * align;
        let exchange_offset_words = ((aligned - base) / EXCHANGE_WORD_BYTES as u64) as usize;
        if !(aligned - base).is_multiple_of(EXCHANGE_WORD_BYTES as u64)
            || exchange_offset_words + exchange_words > exchange.len()
        {
            return Err(CudaError::Internal {
                what: format!("exchange allocation at {base:#x} cannot hold an aligned span"),
            });
        }
        stream
            .synchronize()
            .map_err(CudaError::driver("finishing the allocations"))?;
        Ok(Buffers {
            weights,
            input,
            proj,
            proj_direction_stride,
            layer_out,
            exchange,
            exchange_offset_words,
            exchange_words,
            error,
            state_h,
            state_c,
        })
    }

    /// The exchange from its aligned base.
    pub(crate) fn exchange_span(&self, stream: &CudaStream) -> Span {
        let s = span(&self.exchange, stream);
        Span {
            addr: s.addr + (self.exchange_offset_words * EXCHANGE_WORD_BYTES) as u64,
            len: self.exchange_words,
        }
    }
}

#[cfg(test)]
mod tests {
    use bilstm_core::exchange::ExchangeLayout;
    use bilstm_core::geometry::{TILED_WINDOWS, WIDE_TILE_HEIGHTS};

    #[test]
    fn exchange_words_cover_every_tile_height() {
        for max_batch in [0, 1, 7, 8, 9, 32, 33, 64, 256, 1024] {
            let words = bilstm_core::memory::exchange_words(max_batch).unwrap();
            for batch in 1..=max_batch.min(80) {
                for h in WIDE_TILE_HEIGHTS {
                    let l = ExchangeLayout::wide(h, batch.div_ceil(h)).unwrap();
                    assert!(l.words() <= words, "batch {batch} height {h}");
                }
                let l = ExchangeLayout::tiled(batch.div_ceil(TILED_WINDOWS)).unwrap();
                assert!(l.words() <= words, "batch {batch} tiled");
            }
        }
    }
}
