//! Launch of `bilstm_recurrence_wide` (kernels/cuda/recurrence_wide.cu), cooperatively.

use bilstm_core::geometry::{WIDE_BLOCKS_PER_TILE, WIDE_TILE_HEIGHTS, WIDE_UNITS_PER_BLOCK};
use bilstm_kernels::params::RecurrenceCoopParams;
use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig};

use super::coop::{CoopArgs, check_coop};
use super::{KernelArg, LaunchMode, launch_kernel};
use crate::error::CudaError;

pub(crate) const KERNEL: &str = "bilstm_recurrence_wide";

/// What one launch of the wide recurrence reads and writes (the layout is
/// `ExchangeLayout::wide`).
pub(crate) type WideArgs = CoopArgs;

/// Checks `args` against the kernel's launch contract and builds its parameters and grid.
///
/// # Errors
/// [`CudaError::Contract`] naming the first broken precondition.
pub(crate) fn check(args: &WideArgs) -> Result<(RecurrenceCoopParams, u32), CudaError> {
    let l = &args.layout;
    let th = l.windows_per_tile;
    if !WIDE_TILE_HEIGHTS.contains(&th)
        || l.blocks_per_tile != WIDE_BLOCKS_PER_TILE
        || l.units_per_block != WIDE_UNITS_PER_BLOCK
    {
        return Err(CudaError::Contract {
            kernel: KERNEL,
            what: "a wide exchange layout of tile height 8, 16 or 32",
            needed: 32,
            have: th as u64,
        });
    }
    let c = check_coop(KERNEL, args)?;
    Ok((c.params(KERNEL, args)?, c.grid))
}

/// Launches one direction of one layer over `args.tiles`, cooperatively.
///
/// # Errors
/// [`CudaError::Contract`] from [`check`]; [`CudaError::Launch`] when the driver refuses the
/// cooperative launch.
pub(crate) fn launch(
    func: &CudaFunction,
    stream: &CudaStream,
    args: &WideArgs,
) -> Result<(), CudaError> {
    let (params, grid) = check(args)?;
    let params = KernelArg(params);
    let cfg = LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (bilstm_kernels::RECURRENCE_WIDE.block_threads, 1, 1),
        shared_mem_bytes: bilstm_kernels::RECURRENCE_WIDE.dynamic_shared_bytes,
    };
    // SAFETY: `func` is bilstm_recurrence_wide loaded from recurrence_wide.cu; its only
    // parameter is bl_recurrence_coop_params (coop.cuh), mirrored by
    // `KernelArg<RecurrenceCoopParams>`.
    // `check` verified its contract: tile height 8/16/32 with the wide exchange layout whose
    // strides are passed; proj holds batch * frames * 512 floats, recurrent 512 * 128, bias 512
    // (all 16-byte aligned), out batch * frames * 256, the exchange base is aligned to
    // EXCHANGE_ALIGN_BYTES and holds layout.words() words, error holds ERROR_WORDS ints; every
    // flag fits 32 bits; the grid is tiles * 16 blocks of 256 threads, no dynamic shared
    // memory, and at most `co_resident_blocks` (occupancy x SMs), and the launch is cooperative,
    // so all blocks of a tile are resident together and their spins terminate (bounded by
    // spin_timeout_ns in any case). The exchange and error words were zeroed by launch::clear
    // on the main stream before this layer's projection, which this stream waits for.
    unsafe { launch_kernel(func, stream, KERNEL, &params, cfg, LaunchMode::Cooperative) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::Span;
    use bilstm_core::Direction;
    use bilstm_core::exchange::ExchangeLayout;

    fn args() -> WideArgs {
        let layout = ExchangeLayout::wide(8, 2).unwrap();
        let big = 1usize << 30;
        WideArgs {
            proj: Span {
                addr: 1 << 21,
                len: big,
            },
            recurrent: Span {
                addr: 1 << 21,
                len: big,
            },
            bias: Span {
                addr: 1 << 21,
                len: big,
            },
            out: Span {
                addr: 1 << 21,
                len: big,
            },
            exchange: Span {
                addr: 1 << 21,
                len: layout.words(),
            },
            error: Span {
                addr: 1 << 21,
                len: 4,
            },
            layout,
            batch: 9,
            frames: 589,
            layer: 3,
            direction: Direction::Reverse,
            tiles: 0..2,
            co_resident_blocks: 132,
            spin_timeout_ns: 1,
            stall_block: None,
            state: None,
            tf32_numerics: false,
        }
    }

    #[test]
    fn a_valid_launch_builds_matching_params() {
        let (p, grid) = check(&args()).unwrap();
        assert_eq!(grid, 32);
        assert_eq!(
            (p.tile_height, p.tile_offset, p.direction, p.stall_block),
            (8, 0, 1, -1)
        );
        assert_eq!(p.tf32_numerics, 0);
        let mut a = args();
        a.tf32_numerics = true;
        assert_eq!(check(&a).unwrap().0.tf32_numerics, 1);
        let l = ExchangeLayout::wide(8, 2).unwrap();
        assert_eq!(
            (
                p.block_stride,
                p.slot_stride,
                p.tile_stride,
                p.direction_stride
            ),
            (
                l.block_stride as u32,
                l.slot_stride as u32,
                l.tile_stride as u32,
                l.direction_stride as u32
            )
        );
    }

    #[test]
    fn broken_preconditions_are_refused() {
        let mut a = args();
        a.co_resident_blocks = 31;
        assert!(matches!(
            check(&a),
            Err(CudaError::Contract {
                what: "co-resident blocks for the cooperative grid",
                ..
            })
        ));
        let mut a = args();
        a.tiles = 1..3;
        assert!(check(&a).is_err());
        let mut a = args();
        a.exchange.addr += 8;
        assert!(check(&a).is_err());
        let mut a = args();
        a.proj.len = 9 * 589 * 512 - 1;
        assert!(check(&a).is_err());
        let mut a = args();
        a.exchange.len -= 1;
        assert!(check(&a).is_err());
        let mut a = args();
        a.layout = ExchangeLayout::new(8, 8, 16, 2).unwrap();
        assert!(check(&a).is_err());
        let mut a = args();
        a.stall_block = Some(32);
        assert!(check(&a).is_err());
        let mut a = args();
        a.frames = usize::MAX / 4;
        assert!(check(&a).is_err());
    }
}
