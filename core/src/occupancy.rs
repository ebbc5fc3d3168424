//! The CUDA occupancy rules, per architecture: how many blocks of a kernel one SM holds.
//!
//! A pure re-statement of the rules the CUDA runtime applies in
//! `cudaOccupancyMaxActiveBlocksPerMultiprocessor` (driver: `cuOccupancyMaxActiveBlocksPerMultiprocessor`),
//! written from the documented limits, for compute capability 7.0 and newer:
//!
//! 1. **Per-block limits.** A block of more than [`MAX_THREADS_PER_BLOCK`] threads (or of none),
//!    more than [`MAX_REGISTERS_PER_THREAD`] registers per thread, more shared memory than the
//!    opt-in limit ([`DeviceFacts::shared_bytes_per_block_optin`], static plus dynamic), or more
//!    warps than the per-block register file holds (rule 3 applied to
//!    [`DeviceFacts::registers_per_block`]) cannot launch: 0 blocks.
//! 2. **Warps.** `warps = ceil(threads / 32)`; an SM holds `max_threads_per_sm / 32` warps.
//! 3. **Registers.** Each warp's registers are rounded up to [`REGISTER_ALLOCATION_UNIT`]; the
//!    register file is split evenly between [`SM_SUB_PARTITIONS`] sub-partitions and a warp's
//!    registers come from one of them, so an SM holds
//!    `floor(registers_per_sm / 4 / registers_per_warp) * 4` warps' worth.
//! 4. **Shared memory.** A block takes `round_up(static + dynamic, granularity)` plus the
//!    system's reserved bytes ([`DeviceFacts::reserved_shared_bytes_per_block`], 1 KiB from 8.0),
//!    out of [`DeviceFacts::shared_bytes_per_sm`] (the largest carveout: the driver picks the
//!    carveout when none is preferred). The granularity is [`shared_allocation_granularity`].
//! 5. **Blocks.** At most [`DeviceFacts::max_blocks_per_sm`].
//!
//! The answer is the smallest of rules 2–5, with the rule that bound it.
//!
//! # Evidence
//! On the H200 (9.0, driver 580.159.04, CUDA 13.0, 2026-11-29) this module's rules agreed with
//! `cudaOccupancyMaxActiveBlocksPerMultiprocessor` on all 10,692 probed cases (22 kernels of
//! 10 to 255 registers and 0 to 48 KiB static shared, 1 to 1024 threads, 0 to 232,449 dynamic
//! shared bytes) plus 36 cases that pin the 128-byte granularity; `core/tests/occupancy_h200.rs`
//! replays a subset. Dropping the reserved kilobyte broke 575 of them, dropping the
//! sub-partition rounding 620. Other architectures are not yet cross-checked on hardware.
//!
//! # Caveat
//! A kernel given a *preferred* carveout smaller than the maximum gets less shared memory per
//! SM (seen on the H200: 64 threads with 1 KiB dynamic shared memory gave 4 blocks at carveout
//! 0 instead of 32). The CUDA backend leaves the carveout at its default.

use crate::device::DeviceFacts;
use core::fmt;

/// Threads per warp on every architecture.
pub const WARP_THREADS: u32 = 32;
/// Most threads one block may have (every architecture from 2.0 on).
pub const MAX_THREADS_PER_BLOCK: u32 = 1024;
/// Most registers one thread may use (CUDA C++ Programming Guide, "Technical Specifications per
/// Compute Capability": 255 for 7.5 through 12.0).
pub const MAX_REGISTERS_PER_THREAD: u32 = 255;
/// Registers are allocated per warp in units of this many (the CUDA Occupancy Calculator's
/// "register allocation unit size", 256 for 3.0 and newer).
pub const REGISTER_ALLOCATION_UNIT: u32 = 256;
/// Sub-partitions (warp schedulers) per SM, each owning a quarter of the register file
/// (CUDA C++ Programming Guide: "4 warp schedulers" for 7.x, 8.x, 9.0, 10.0 and 12.0; the
/// Occupancy Calculator's "warp allocation granularity" of 4).
pub const SM_SUB_PARTITIONS: u32 = 4;

/// Shared memory is allocated to a block in units of this many bytes: 256 before compute
/// capability 8.0, 128 from 8.0 on (CUDA Occupancy Calculator's "shared memory allocation
/// unit size"; 128 confirmed on the H200, where 6,272 dynamic bytes allow 32 blocks and 6,273
/// allow 31).
pub const fn shared_allocation_granularity(compute_capability: (u32, u32)) -> u32 {
    if compute_capability.0 >= 8 { 128 } else { 256 }
}

/// What one block of a kernel uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelUsage {
    /// Threads per block.
    pub threads: u32,
    /// Registers per thread (as the compiler reports them: `cudaFuncAttributes::numRegs`).
    pub registers_per_thread: u32,
    /// Statically declared shared memory per block, in bytes.
    pub static_shared_bytes: u32,
    /// Dynamic shared memory per block requested at launch, in bytes.
    pub dynamic_shared_bytes: u32,
}

impl KernelUsage {
    /// Static plus dynamic shared bytes (without the system's reserved bytes), or `None` when
    /// the sum overflows `u32`.
    pub const fn shared_bytes(&self) -> Option<u32> {
        self.static_shared_bytes
            .checked_add(self.dynamic_shared_bytes)
    }

    /// Warps per block: `ceil(threads / 32)`.
    pub const fn warps(&self) -> u32 {
        self.threads.div_ceil(WARP_THREADS)
    }
}

/// The rule that bounds the number of resident blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// The SM's resident warps (threads).
    Warps,
    /// The SM's register file.
    Registers,
    /// The SM's shared memory.
    SharedMemory,
    /// The SM's resident-block limit.
    Blocks,
    /// One block alone exceeds a per-block limit (threads, registers per thread or per block,
    /// opt-in shared memory): it cannot launch at all.
    PerBlockLimit,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::Warps => "warps",
            Limit::Registers => "registers",
            Limit::SharedMemory => "shared memory",
            Limit::Blocks => "blocks per SM",
            Limit::PerBlockLimit => "a per-block limit",
        })
    }
}

/// How many blocks of a kernel one SM holds at once, and why not more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Occupancy {
    /// Resident blocks per SM (0: the kernel cannot run on this device).
    pub blocks_per_sm: u32,
    /// The rule that gave `blocks_per_sm`; on a tie, the first of blocks, warps, registers,
    /// shared memory.
    pub limited_by: Limit,
}

impl Occupancy {
    /// Blocks the whole device holds at once: `blocks_per_sm * sm_count`, the budget every
    /// cooperative grid (or grids that must be co-resident together) has to fit.
    pub const fn co_resident_blocks(&self, sm_count: u32) -> usize {
        // u32 * u32 fits u64; usize is at least 32 bits on every CUDA host, and saturating
        // keeps a 32-bit host safe.
        let total = self.blocks_per_sm as u64 * sm_count as u64;
        if total > usize::MAX as u64 {
            usize::MAX
        } else {
            total as usize
        }
    }

    const fn none() -> Self {
        Occupancy {
            blocks_per_sm: 0,
            limited_by: Limit::PerBlockLimit,
        }
    }
}

/// Registers one warp of `usage` takes: `registers_per_thread * 32` rounded up to
/// [`REGISTER_ALLOCATION_UNIT`].
pub const fn registers_per_warp(usage: &KernelUsage) -> u32 {
    // registers_per_thread is checked against 255 before this matters; saturate otherwise.
    let raw = usage.registers_per_thread.saturating_mul(WARP_THREADS);
    raw.div_ceil(REGISTER_ALLOCATION_UNIT)
        .saturating_mul(REGISTER_ALLOCATION_UNIT)
}

/// Warps a register file of `registers` holds for warps of `per_warp` registers each, filling
/// the [`SM_SUB_PARTITIONS`] quarters separately.
const fn warps_in_register_file(registers: u32, per_warp: u32) -> u32 {
    if per_warp == 0 {
        return u32::MAX;
    }
    (registers / SM_SUB_PARTITIONS / per_warp) * SM_SUB_PARTITIONS
}

/// Shared bytes one block of `usage` takes out of the SM: static plus dynamic rounded up to
/// the granularity, plus the reserved bytes. `None` on overflow.
pub const fn shared_bytes_per_block(facts: &DeviceFacts, usage: &KernelUsage) -> Option<u32> {
    let granularity = shared_allocation_granularity(facts.compute_capability);
    let Some(bytes) = usage.shared_bytes() else {
        return None;
    };
    let Some(rounded) = bytes.checked_next_multiple_of(granularity) else {
        return None;
    };
    rounded.checked_add(facts.reserved_shared_bytes_per_block)
}

/// Resident blocks of a kernel using `usage` per SM of the device `facts` describes.
///
/// Registers per thread of 0 mean "not known": the register rule is then skipped (as the CUDA
/// Occupancy Calculator does). Never panics; a block that cannot launch gives 0 blocks with
/// [`Limit::PerBlockLimit`].
pub const fn blocks_per_sm(facts: &DeviceFacts, usage: &KernelUsage) -> Occupancy {
    // 1. Per-block limits.
    if usage.threads == 0 || usage.threads > MAX_THREADS_PER_BLOCK {
        return Occupancy::none();
    }
    if usage.registers_per_thread > MAX_REGISTERS_PER_THREAD {
        return Occupancy::none();
    }
    let Some(requested_shared) = usage.shared_bytes() else {
        return Occupancy::none();
    };
    if requested_shared > facts.shared_bytes_per_block_optin {
        return Occupancy::none();
    }
    let warps = usage.warps();
    let per_warp = registers_per_warp(usage);
    if warps > warps_in_register_file(facts.registers_per_block, per_warp) {
        return Occupancy::none();
    }

    // 2.-5. Per-SM limits; the first smallest wins.
    let by_blocks = facts.max_blocks_per_sm;
    let by_warps = facts.max_threads_per_sm / WARP_THREADS / warps;
    let by_registers = {
        let w = warps_in_register_file(facts.registers_per_sm, per_warp);
        if w == u32::MAX { u32::MAX } else { w / warps }
    };
    let by_shared = match shared_bytes_per_block(facts, usage) {
        None => 0,
        Some(0) => u32::MAX,
        Some(bytes) => facts.shared_bytes_per_sm / bytes,
    };

    let mut best = Occupancy {
        blocks_per_sm: by_blocks,
        limited_by: Limit::Blocks,
    };
    if by_warps < best.blocks_per_sm {
        best = Occupancy {
            blocks_per_sm: by_warps,
            limited_by: Limit::Warps,
        };
    }
    if by_registers < best.blocks_per_sm {
        best = Occupancy {
            blocks_per_sm: by_registers,
            limited_by: Limit::Registers,
        };
    }
    if by_shared < best.blocks_per_sm {
        best = Occupancy {
            blocks_per_sm: by_shared,
            limited_by: Limit::SharedMemory,
        };
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hopper (9.0) limits as the H200 reports them: the device table's entry (whose own
    /// test pins every figure to the H200's `cudaDeviceGetAttribute` values).
    fn hopper() -> DeviceFacts {
        crate::device::table::find("h200")
            .expect("the table has the H200")
            .facts
    }

    /// Turing (7.5): 1024 threads and 16 blocks per SM, 64 KiB shared, no reserved bytes.
    const TURING: DeviceFacts = DeviceFacts {
        compute_capability: (7, 5),
        sm_count: 40,
        max_threads_per_sm: 1024,
        max_blocks_per_sm: 16,
        registers_per_sm: 65536,
        registers_per_block: 65536,
        shared_bytes_per_sm: 65536,
        shared_bytes_per_block_optin: 65536,
        reserved_shared_bytes_per_block: 0,
        l2_bytes: 4 << 20,
        cooperative_launch: true,
        max_cluster_size: 0,
    };

    /// Ada (8.9): 1536 threads and 24 blocks per SM, 100 KiB shared.
    const ADA: DeviceFacts = DeviceFacts {
        compute_capability: (8, 9),
        sm_count: 34,
        max_threads_per_sm: 1536,
        max_blocks_per_sm: 24,
        registers_per_sm: 65536,
        registers_per_block: 65536,
        shared_bytes_per_sm: 102_400,
        shared_bytes_per_block_optin: 101_376,
        reserved_shared_bytes_per_block: 1024,
        l2_bytes: 32 << 20,
        cooperative_launch: true,
        max_cluster_size: 0,
    };

    const fn k(
        threads: u32,
        registers: u32,
        static_shared: u32,
        dynamic_shared: u32,
    ) -> KernelUsage {
        KernelUsage {
            threads,
            registers_per_thread: registers,
            static_shared_bytes: static_shared,
            dynamic_shared_bytes: dynamic_shared,
        }
    }

    fn occ(facts: &DeviceFacts, usage: KernelUsage) -> (u32, Limit) {
        let o = blocks_per_sm(facts, &usage);
        (o.blocks_per_sm, o.limited_by)
    }

    #[test]
    fn hand_worked_hopper_register_cases() {
        // 256 threads x 64 regs: 2048 regs/warp, 8 warps/quarter = 32 warps/SM = 4 blocks.
        assert_eq!(occ(&hopper(), k(256, 64, 0, 0)), (4, Limit::Registers));
        // 512 threads x 128 regs: 4096 regs/warp, 4 warps/quarter = 16 warps = 1 block.
        assert_eq!(occ(&hopper(), k(512, 128, 0, 0)), (1, Limit::Registers));
        // 255 regs: 8160 -> 8192 regs/warp, 2 warps/quarter = 8 warps: 256 threads fit once,
        // 288 threads (9 warps) exceed the per-block register file.
        assert_eq!(occ(&hopper(), k(256, 255, 0, 0)), (1, Limit::Registers));
        assert_eq!(occ(&hopper(), k(288, 255, 0, 0)), (0, Limit::PerBlockLimit));
        // 96 regs: 3072/warp, 5 warps/quarter = 20 warps: 256 threads -> 2 blocks.
        assert_eq!(occ(&hopper(), k(256, 96, 0, 0)), (2, Limit::Registers));
        // 88 regs: 2816/warp, 5 per quarter: 20 warps; 640 threads fit, 672 do not (the
        // driver reports maxThreadsPerBlock 640 for such a kernel; a flat 65536/2816 = 23
        // warps would wrongly allow 736).
        assert_eq!(occ(&hopper(), k(640, 88, 0, 0)), (1, Limit::Registers));
        assert_eq!(occ(&hopper(), k(672, 88, 0, 0)), (0, Limit::PerBlockLimit));
        // 32 regs: warps bind first (64 warps / 8 = 8 blocks; registers allow 8 as well: tie
        // goes to warps).
        assert_eq!(occ(&hopper(), k(256, 32, 0, 0)), (8, Limit::Warps));
        // Small blocks hit the 32-block limit.
        assert_eq!(occ(&hopper(), k(32, 16, 0, 0)), (32, Limit::Blocks));
        // 0 registers: the register rule is skipped.
        assert_eq!(occ(&hopper(), k(1024, 0, 0, 0)), (2, Limit::Warps));
    }

    #[test]
    fn hand_worked_shared_memory_cases() {
        // The first resident recurrence (512 threads, 128 regs, 134,144 dynamic bytes + 1 KiB
        // reserved = 135,168 of 233,472): one block (registers tie at 1; registers come first).
        assert_eq!(
            occ(&hopper(), k(512, 128, 0, 134_144)),
            (1, Limit::Registers)
        );
        // The resident recurrence as built (256 threads, 238 regs: 7,680 per warp, 2 warps per
        // quarter): one block, registers and shared memory tie.
        assert_eq!(
            occ(&hopper(), k(256, 238, 0, 134_144)),
            (1, Limit::Registers)
        );
        // Same shared memory with fewer registers: shared memory binds.
        assert_eq!(
            occ(&hopper(), k(128, 32, 0, 134_144)),
            (1, Limit::SharedMemory)
        );
        // The opt-in maximum fits exactly once; one byte more cannot launch.
        assert_eq!(
            occ(&hopper(), k(128, 32, 0, 232_448)),
            (1, Limit::SharedMemory)
        );
        assert_eq!(
            occ(&hopper(), k(128, 32, 0, 232_449)),
            (0, Limit::PerBlockLimit)
        );
        assert_eq!(
            occ(&hopper(), k(128, 32, 48 * 1024, 232_448 - 48 * 1024)),
            (1, Limit::SharedMemory)
        );
        assert_eq!(
            occ(&hopper(), k(128, 32, 48 * 1024, 232_448 - 48 * 1024 + 1)),
            (0, Limit::PerBlockLimit)
        );
        // 128-byte granularity: 6272 + 1024 = 7296 -> 32 blocks; 6273 rounds to 6400 -> 31.
        assert_eq!(occ(&hopper(), k(32, 16, 0, 6272)), (32, Limit::Blocks));
        assert_eq!(
            occ(&hopper(), k(32, 16, 0, 6273)),
            (31, Limit::SharedMemory)
        );
        // 1 byte of shared memory costs 128 + 1024 reserved.
        assert_eq!(occ(&hopper(), k(32, 16, 0, 1)), (32, Limit::Blocks));
        // 48 KiB static: (49152 + 1024) -> 4 blocks of 233,472.
        assert_eq!(
            occ(&hopper(), k(64, 32, 49_152, 0)),
            (4, Limit::SharedMemory)
        );
        // Ada: 99 KiB opt-in; 100 KiB per SM holds one such block.
        assert_eq!(occ(&ADA, k(256, 32, 0, 101_376)), (1, Limit::SharedMemory));
        assert_eq!(
            occ(&ADA, k(512, 128, 0, 134_144)),
            (0, Limit::PerBlockLimit)
        );
        // Turing: 256-byte granularity, no reserved bytes: 4097 bytes take 4352 -> 15 blocks.
        assert_eq!(occ(&TURING, k(64, 32, 0, 4096)), (16, Limit::Blocks));
        assert_eq!(occ(&TURING, k(64, 32, 0, 4097)), (15, Limit::SharedMemory));
        assert_eq!(occ(&TURING, k(64, 32, 0, 65536)), (1, Limit::SharedMemory));
    }

    #[test]
    fn warps_and_threads_per_architecture() {
        // Turing holds 32 warps: a 1024-thread block once, a 512-thread block twice.
        assert_eq!(occ(&TURING, k(1024, 32, 0, 0)), (1, Limit::Warps));
        assert_eq!(occ(&TURING, k(512, 32, 0, 0)), (2, Limit::Warps));
        // Ada holds 48 warps: 256 threads -> 6 blocks; 33 threads take 2 warps -> 24 (blocks).
        assert_eq!(occ(&ADA, k(256, 32, 0, 0)), (6, Limit::Warps));
        assert_eq!(occ(&ADA, k(33, 32, 0, 0)), (24, Limit::Blocks));
        // The wide/tiled recurrences' nominal 256 x 96 give 2 blocks everywhere.
        for facts in [&hopper(), &ADA, &TURING] {
            assert_eq!(blocks_per_sm(facts, &k(256, 96, 16384, 0)).blocks_per_sm, 2);
        }
    }

    #[test]
    fn impossible_blocks_give_zero() {
        for usage in [
            k(0, 32, 0, 0),
            k(1025, 32, 0, 0),
            k(32, 256, 0, 0),
            k(32, 32, u32::MAX, 1),
        ] {
            assert_eq!(
                occ(&hopper(), usage),
                (0, Limit::PerBlockLimit),
                "{usage:?}"
            );
        }
        // Shared memory within opt-in but beyond the SM (a mock device) gives 0 by shared memory.
        let odd = DeviceFacts {
            shared_bytes_per_sm: 1000,
            ..hopper()
        };
        assert_eq!(occ(&odd, k(32, 32, 0, 1000)), (0, Limit::SharedMemory));
    }

    #[test]
    fn co_resident_blocks_multiply_by_sms() {
        let o = blocks_per_sm(&hopper(), &k(256, 96, 0, 0));
        assert_eq!(o.co_resident_blocks(hopper().sm_count), 264);
        let huge = Occupancy {
            blocks_per_sm: u32::MAX,
            limited_by: Limit::Blocks,
        };
        assert!(huge.co_resident_blocks(u32::MAX) > 0);
        assert_eq!(registers_per_warp(&k(32, 255, 0, 0)), 8192);
        assert_eq!(registers_per_warp(&k(32, 72, 0, 0)), 2304);
        assert_eq!(
            shared_bytes_per_block(&hopper(), &k(32, 0, 0, 0)),
            Some(1024)
        );
        assert_eq!(shared_bytes_per_block(&TURING, &k(32, 0, 0, 1)), Some(256));
    }
}
