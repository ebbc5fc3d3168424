//! The occupancy rules against what the CUDA runtime answered on a real H200.
//!
//! `data/h200_occupancy.csv` holds `cudaOccupancyMaxActiveBlocksPerMultiprocessor` results for
//! kernels of 10 to 255 registers, 0 to 48 KiB static shared memory, 1 to 1024 threads and 0 to
//! 232,449 dynamic shared bytes (its header says how they were made). Every row must match.

use bilstm_core::device::table;
use bilstm_core::occupancy::{KernelUsage, blocks_per_sm};

const DATA: &str = include_str!("data/h200_occupancy.csv");

#[test]
fn rules_match_the_h200_runtime() {
    let h200 = table::find("h200").expect("the table has the H200").facts;
    let mut checked = 0;
    for (n, line) in DATA.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let v: Vec<u32> = line
            .split(',')
            .map(|f| f.parse().expect("a number"))
            .collect();
        let [
            threads,
            registers_per_thread,
            static_shared_bytes,
            dynamic_shared_bytes,
            expected,
        ] = v[..]
        else {
            panic!("line {}: {line:?} has not 5 fields", n + 1);
        };
        let usage = KernelUsage {
            threads,
            registers_per_thread,
            static_shared_bytes,
            dynamic_shared_bytes,
        };
        let got = blocks_per_sm(&h200, &usage);
        assert_eq!(
            got.blocks_per_sm,
            expected,
            "line {}: {usage:?} gave {got:?}",
            n + 1
        );
        checked += 1;
    }
    assert!(checked > 2000, "only {checked} cases");
}
