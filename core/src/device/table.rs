//! A table of real GPUs with their published attributes, so a plan can be computed (and
//! tested) for any of them without the device.
//!
//! # Sources
//! Per compute capability, from the CUDA C++ Programming Guide (12.8/12.9 edition),
//! "Technical Specifications per Compute Capability" (KB = 1024 bytes there):
//!
//! | cc | threads/SM | blocks/SM | shared/SM (max carveout) | shared/block (opt-in) | reserved/block |
//! |---|---|---|---|---|---|
//! | 7.5 | 1024 | 16 | 64 KB | 64 KB | 0 |
//! | 8.0 | 2048 | 32 | 164 KB | 163 KB | 1 KB |
//! | 8.6 | 1536 | 16 | 100 KB | 99 KB | 1 KB |
//! | 8.7 | 1536 | 16 | 164 KB | 163 KB | 1 KB |
//! | 8.9 | 1536 | 24 | 100 KB | 99 KB | 1 KB |
//! | 9.0 | 2048 | 32 | 228 KB | 227 KB | 1 KB |
//! | 10.0 | 2048 | 32 | 228 KB | 227 KB | 1 KB |
//! | 12.0 | 1536 | 24 | 100 KB | 99 KB | 1 KB |
//!
//! Every one has 64 K 32-bit registers per SM and per block. The reserved kilobyte is the
//! guide's "1 KB of shared memory not made available to a thread block is reserved for system
//! use" (8.x, 9.0, 10.0; the same holds for 12.0, whose opt-in limit is 1 KB below its SM
//! capacity); 7.5 lets a block address all 64 KB. All of these support cooperative launch
//! (compute capability 6.0 and newer). Thread-block clusters exist from 9.0 on (9.0, 10.0 and
//! 12.0 here), with the portable size limit of 8 CTAs ([`super::PORTABLE_CLUSTER_SIZE`]).
//!
//! SM counts and L2 sizes are product facts, each cited on its entry. The H200 entry was read
//! off the device itself (`cudaDeviceGetAttribute`, driver 580.159.04, 2026-11-29).

use super::{DeviceFacts, PORTABLE_CLUSTER_SIZE};

/// One GPU of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableEntry {
    /// Short lower-case name (`"h200"`, `"a100"`, `"rtx4090"`).
    pub name: &'static str,
    /// The product's full name.
    pub product: &'static str,
    /// Its attributes.
    pub facts: DeviceFacts,
}

const KIB: u32 = 1024;
const MIB: u32 = 1024 * 1024;
/// 64 K 32-bit registers per SM and per block on every architecture of the table.
const REGISTERS: u32 = 64 * KIB;

/// The per-architecture attributes of the table above, for `sm_count` SMs and `l2_bytes` of L2.
const fn facts(compute_capability: (u32, u32), sm_count: u32, l2_bytes: u32) -> DeviceFacts {
    let (max_threads_per_sm, max_blocks_per_sm, shared_kib_per_sm, reserved) =
        match compute_capability {
            (7, 5) => (1024, 16, 64, 0),
            (8, 0) => (2048, 32, 164, KIB),
            (8, 7) => (1536, 16, 164, KIB),
            (8, 9) | (12, 0) => (1536, 24, 100, KIB),
            (9, 0) | (10, 0) => (2048, 32, 228, KIB),
            // 8.6. The table's tests check that every entry's architecture has a row above or is
            // 8.6, so no entry lands here by mistake.
            _ => (1536, 16, 100, KIB),
        };
    let shared_bytes_per_sm = shared_kib_per_sm * KIB;
    DeviceFacts {
        compute_capability,
        sm_count,
        max_threads_per_sm,
        max_blocks_per_sm,
        registers_per_sm: REGISTERS,
        registers_per_block: REGISTERS,
        shared_bytes_per_sm,
        // 7.5: the whole 64 KB; later: 1 KB below the SM's capacity.
        shared_bytes_per_block_optin: shared_bytes_per_sm - reserved,
        reserved_shared_bytes_per_block: reserved,
        l2_bytes,
        cooperative_launch: true,
        max_cluster_size: if compute_capability.0 >= 9 {
            PORTABLE_CLUSTER_SIZE
        } else {
            0
        },
    }
}

const ENTRIES: [TableEntry; 13] = [
    // Turing whitepaper / T4 datasheet: 40 SMs (2,560 CUDA cores), 4 MB L2 (TU104).
    TableEntry {
        name: "t4",
        product: "NVIDIA T4",
        facts: facts((7, 5), 40, 4 * MIB),
    },
    // A10 datasheet: 9,216 CUDA cores = 72 SMs; GA102's 6 MB L2.
    TableEntry {
        name: "a10",
        product: "NVIDIA A10",
        facts: facts((8, 6), 72, 6 * MIB),
    },
    // A100 whitepaper: 108 SMs, 40 MB L2 (SXM4 80 GB has the same SMs and L2 as 40 GB).
    TableEntry {
        name: "a100",
        product: "NVIDIA A100-SXM4-80GB",
        facts: facts((8, 0), 108, 40 * MIB),
    },
    // Ampere GA102 whitepaper: RTX 3090 has 82 SMs (10,496 CUDA cores), 6 MB L2.
    TableEntry {
        name: "rtx3090",
        product: "NVIDIA GeForce RTX 3090",
        facts: facts((8, 6), 82, 6 * MIB),
    },
    // Jetson AGX Orin technical brief: 2 GPCs, 16 SMs (2,048 CUDA cores), 4 MB L2 (64 GB module).
    TableEntry {
        name: "orin",
        product: "NVIDIA Jetson AGX Orin 64GB",
        facts: facts((8, 7), 16, 4 * MIB),
    },
    // L4 datasheet: 7,424 CUDA cores = 58 SMs; 48 MB L2 (AD104).
    TableEntry {
        name: "l4",
        product: "NVIDIA L4",
        facts: facts((8, 9), 58, 48 * MIB),
    },
    // Ada specs: RTX 4060 Ti has 34 SMs (4,352 CUDA cores), 32 MB L2 (AD106).
    TableEntry {
        name: "rtx4060ti",
        product: "NVIDIA GeForce RTX 4060 Ti",
        facts: facts((8, 9), 34, 32 * MIB),
    },
    // Ada whitepaper: RTX 4090 has 128 SMs (16,384 CUDA cores), 72 MB L2.
    TableEntry {
        name: "rtx4090",
        product: "NVIDIA GeForce RTX 4090",
        facts: facts((8, 9), 128, 72 * MIB),
    },
    // Hopper whitepaper: H100 SXM5 has 132 SMs, 50 MB L2.
    TableEntry {
        name: "h100",
        product: "NVIDIA H100 80GB HBM3 (SXM5)",
        facts: facts((9, 0), 132, 50 * MIB),
    },
    // Read on the device (2026-11-29): 9.0, 132 SMs, 2048 threads and 32 blocks per SM,
    // 233,472 shared bytes per SM, 232,448 opt-in, 1,024 reserved, L2 62,914,560 bytes
    // (60 MiB; PyTorch prints "60MB"), cooperative launch.
    TableEntry {
        name: "h200",
        product: "NVIDIA H200",
        facts: facts((9, 0), 132, 60 * MIB),
    },
    // PyTorch's device properties on a B200: 148 SMs, "L2_cache_size=126MB" (MiB, truncated);
    // the exact byte count is not published, 126 MiB is a lower bound.
    TableEntry {
        name: "b200",
        product: "NVIDIA B200",
        facts: facts((10, 0), 148, 126 * MIB),
    },
    // RTX 5060 Ti specs: 4,608 CUDA cores = 36 SMs; 32 MB L2 (GB206; a 12.0 laptop part's
    // deviceQuery shows 33,554,432 L2 bytes, 102,400 shared bytes per SM, 1536 threads per SM).
    TableEntry {
        name: "rtx5060ti",
        product: "NVIDIA GeForce RTX 5060 Ti",
        facts: facts((12, 0), 36, 32 * MIB),
    },
    // RTX 5090 specs: 170 SMs (21,760 CUDA cores), 96 MB L2 (GB202).
    TableEntry {
        name: "rtx5090",
        product: "NVIDIA GeForce RTX 5090",
        facts: facts((12, 0), 170, 96 * MIB),
    },
];

/// Every entry of the table.
pub fn all() -> &'static [TableEntry] {
    &ENTRIES
}

/// The entry named `name` (case-insensitive).
pub fn find(name: &str) -> Option<&'static TableEntry> {
    all().iter().find(|e| e.name.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_lowercase_and_found() {
        for (i, e) in all().iter().enumerate() {
            assert_eq!(e.name, e.name.to_ascii_lowercase());
            assert!(
                all().iter().skip(i + 1).all(|o| o.name != e.name),
                "{} twice",
                e.name
            );
            assert_eq!(find(&e.name.to_ascii_uppercase()), Some(e));
        }
        assert_eq!(find("nope"), None);
        assert!(all().len() >= 13);
    }

    #[test]
    fn every_architecture_is_covered() {
        for cc in [
            (7, 5),
            (8, 0),
            (8, 6),
            (8, 7),
            (8, 9),
            (9, 0),
            (10, 0),
            (12, 0),
        ] {
            assert!(
                all().iter().any(|e| e.facts.compute_capability == cc),
                "{cc:?}"
            );
        }
        for e in all() {
            assert!(
                [
                    (7, 5),
                    (8, 0),
                    (8, 6),
                    (8, 7),
                    (8, 9),
                    (9, 0),
                    (10, 0),
                    (12, 0)
                ]
                .contains(&e.facts.compute_capability),
                "{}: facts() has no row for {:?}",
                e.name,
                e.facts.compute_capability
            );
        }
    }

    #[test]
    fn facts_follow_the_programming_guide() {
        for e in all() {
            let f = e.facts;
            assert_eq!(f.registers_per_sm, 65536, "{}", e.name);
            assert!(f.cooperative_launch);
            assert_eq!(
                f.shared_bytes_per_block_optin + f.reserved_shared_bytes_per_block,
                f.shared_bytes_per_sm
            );
            assert_eq!(
                f.reserved_shared_bytes_per_block,
                if f.compute_capability.0 >= 8 { 1024 } else { 0 }
            );
            assert_eq!(f.max_threads_per_sm % 32, 0);
        }
        let opt_in = |name| find(name).unwrap().facts.shared_bytes_per_block_optin;
        assert_eq!(opt_in("t4"), 65536);
        assert_eq!(opt_in("a100"), 166_912);
        assert_eq!(opt_in("orin"), 166_912);
        assert_eq!(opt_in("rtx3090"), 101_376);
        assert_eq!(opt_in("rtx4090"), 101_376);
        assert_eq!(opt_in("b200"), 232_448);
        assert_eq!(opt_in("rtx5090"), 101_376);
        assert_eq!(find("l4").unwrap().facts.max_blocks_per_sm, 24);
        assert_eq!(find("rtx5060ti").unwrap().facts.max_blocks_per_sm, 24);
        assert_eq!(find("a10").unwrap().facts.max_blocks_per_sm, 16);
    }

    #[test]
    fn h200_matches_the_device() {
        // cudaDeviceGetAttribute on the H200, driver 580.159.04, 2026-11-29.
        let f = find("h200").unwrap().facts;
        assert_eq!(
            f,
            DeviceFacts {
                compute_capability: (9, 0),
                sm_count: 132,
                max_threads_per_sm: 2048,
                max_blocks_per_sm: 32,
                registers_per_sm: 65536,
                registers_per_block: 65536,
                shared_bytes_per_sm: 233_472,
                shared_bytes_per_block_optin: 232_448,
                reserved_shared_bytes_per_block: 1024,
                l2_bytes: 62_914_560,
                cooperative_launch: true,
                max_cluster_size: 8,
            }
        );
    }

    #[test]
    fn clusters_from_9_0_on() {
        for e in all() {
            let want = match e.facts.compute_capability {
                (9, 0) | (10, 0) | (12, 0) => 8,
                _ => 0,
            };
            assert_eq!(e.facts.max_cluster_size, want, "{}", e.name);
        }
    }
}
