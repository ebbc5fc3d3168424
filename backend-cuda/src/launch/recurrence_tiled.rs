//! Launch of `bilstm_recurrence_tiled` (kernels/cuda/recurrence_tiled.cu), cooperatively.

use bilstm_core::geometry::{TILED_BLOCKS_PER_TILE, TILED_UNITS_PER_BLOCK, TILED_WINDOWS};
use bilstm_kernels::params::RecurrenceCoopParams;
use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig};

use super::coop::{CoopArgs, check_coop};
use super::{KernelArg, LaunchMode, launch_kernel};
use crate::error::CudaError;

pub(crate) const KERNEL: &str = "bilstm_recurrence_tiled";

/// What one launch of the tiled recurrence reads and writes (the layout is
/// `ExchangeLayout::tiled`).
pub(crate) type TiledArgs = CoopArgs;

/// Checks `args` against the kernel's launch contract and builds its parameters and grid.
///
/// # Errors
/// [`CudaError::Contract`] naming the first broken precondition.
pub(crate) fn check(args: &TiledArgs) -> Result<(RecurrenceCoopParams, u32), CudaError> {
    let l = &args.layout;
    if l.windows_per_tile != TILED_WINDOWS
        || l.blocks_per_tile != TILED_BLOCKS_PER_TILE
        || l.units_per_block != TILED_UNITS_PER_BLOCK
    {
        return Err(CudaError::Contract {
            kernel: KERNEL,
            what: "a tiled exchange layout (ExchangeLayout::tiled)",
            needed: TILED_WINDOWS as u64,
            have: l.windows_per_tile as u64,
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
    args: &TiledArgs,
) -> Result<(), CudaError> {
    let (params, grid) = check(args)?;
    let params = KernelArg(params);
    let cfg = LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (bilstm_kernels::RECURRENCE_TILED.block_threads, 1, 1),
        shared_mem_bytes: bilstm_kernels::RECURRENCE_TILED.dynamic_shared_bytes,
    };
    // SAFETY: `func` is bilstm_recurrence_tiled loaded from recurrence_tiled.cu (the backend
    // looks it up by KernelId::RecurrenceTiled); its only parameter is
    // bl_recurrence_coop_params (coop.cuh), mirrored by `KernelArg<RecurrenceCoopParams>`.
    // `check` verified its contract: the exchange layout is ExchangeLayout::tiled (8 windows, 8
    // blocks, 16 units; tile_height 8 is passed) with the strides passed, and its tiles cover the batch and this launch's tiles;
    // proj holds batch * frames * 512 floats, recurrent 512 * 128, bias 512 (all 16-byte
    // aligned), out batch * frames * 256, the exchange base is aligned to EXCHANGE_ALIGN_BYTES
    // and holds layout.words() words, error holds ERROR_WORDS ints; every flag fits 32 bits; the
    // grid is tiles * 8 blocks of 256 threads, no dynamic shared memory, and at most
    // `co_resident_blocks` (occupancy x SMs), and the launch is cooperative, so all blocks of a
    // tile are resident together and their spins terminate (bounded by spin_timeout_ns in any
    // case). The exchange and error words were zeroed by launch::clear on the main stream before
    // this layer's projection, which this stream waits for.
    unsafe { launch_kernel(func, stream, KERNEL, &params, cfg, LaunchMode::Cooperative) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::Span;
    use bilstm_core::Direction;
    use bilstm_core::exchange::ExchangeLayout;

    fn args() -> TiledArgs {
        let layout = ExchangeLayout::tiled(3).unwrap();
        let big = 1usize << 30;
        let span = |len| Span { addr: 1 << 21, len };
        TiledArgs {
            proj: span(big),
            recurrent: span(big),
            bias: span(big),
            out: span(big),
            exchange: span(layout.words()),
            error: span(4),
            layout,
            batch: 20,
            frames: 589,
            layer: 2,
            direction: Direction::Forward,
            tiles: 1..3,
            co_resident_blocks: 264,
            spin_timeout_ns: 1,
            stall_block: None,
            state: None,
            tf32_numerics: false,
        }
    }

    #[test]
    fn a_valid_launch_builds_matching_params() {
        let (p, grid) = check(&args()).unwrap();
        assert_eq!(grid, 16);
        assert_eq!(
            (p.tile_height, p.tile_offset, p.direction, p.stall_block),
            (8, 1, 0, -1)
        );
        let l = ExchangeLayout::tiled(3).unwrap();
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
        assert_eq!((p.batch, p.frames, p.layer), (20, 589, 2));
    }

    #[test]
    fn broken_preconditions_are_refused() {
        let mut a = args();
        a.co_resident_blocks = 15;
        assert!(matches!(
            check(&a),
            Err(CudaError::Contract {
                what: "co-resident blocks for the cooperative grid",
                ..
            })
        ));
        let mut a = args();
        a.layout = ExchangeLayout::wide(8, 3).unwrap();
        assert!(check(&a).is_err());
        let mut a = args();
        a.batch = 25; // 3 tiles hold 24 windows
        assert!(check(&a).is_err());
        let mut a = args();
        a.tiles = 2..4;
        assert!(check(&a).is_err());
        let mut a = args();
        a.exchange.addr += 8;
        assert!(check(&a).is_err());
        let mut a = args();
        a.proj.len = 20 * 589 * 512 - 1;
        assert!(check(&a).is_err());
        let mut a = args();
        a.stall_block = Some(16);
        assert!(check(&a).is_err());
        let mut a = args();
        a.frames = usize::MAX / 4;
        assert!(check(&a).is_err());
    }
}
