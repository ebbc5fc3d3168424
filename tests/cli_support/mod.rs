//! Shared helpers of the `cli_*` tests: run the built `bilstm` binary, build `.npy` files.

#![allow(dead_code)]
// each test file uses a different subset
// Test helpers: a failure here is a failed test (clippy's test allowances cover #[test] fns only).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};

use bilstm::owned::OwnedStack;
use bilstm::{Backend, BackendConfig, CpuBackend, MathMode};

/// What one run of the binary gave.
pub struct Run {
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Stdout as text.
    pub stdout: String,
    /// Stderr as text.
    pub stderr: String,
}

/// Runs `bilstm` with `args`.
pub fn bilstm(args: &[&str]) -> Run {
    bilstm_env(args, &[])
}

/// Runs `bilstm` with `args` and the environment variables `envs` set.
pub fn bilstm_env(args: &[&str], envs: &[(&str, &str)]) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(env!("CARGO_BIN_EXE_bilstm"))
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .expect("the bilstm binary runs");
    Run {
        code: status.code(),
        stdout: String::from_utf8(stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(stderr).expect("stderr is UTF-8"),
    }
}

impl Run {
    /// Asserts exit code 0 and returns self.
    pub fn ok(self) -> Self {
        assert_eq!(self.code, Some(0), "stderr:\n{}", self.stderr);
        self
    }

    /// Asserts the exit `code`, exactly one `error: ` line on stderr containing every fragment
    /// of `wants`, nothing on stdout; returns the error line.
    pub fn fails(&self, code: i32, wants: &[&str]) -> String {
        assert_eq!(
            self.code,
            Some(code),
            "stdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        assert!(self.stdout.is_empty(), "stdout: {}", self.stdout);
        let errors: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| l.starts_with("error: "))
            .collect();
        assert_eq!(errors.len(), 1, "stderr:\n{}", self.stderr);
        assert!(!self.stderr.contains("panicked"), "{}", self.stderr);
        for want in wants {
            assert!(
                errors[0].contains(want),
                "{want:?} missing from {:?}",
                errors[0]
            );
        }
        errors[0].to_string()
    }
}

/// An `.npy` file's bytes as numpy writes them (format 1.0): `descr` such as `<f4`, the shape
/// as a Python tuple such as `(2, 7, 60)`, then `data`.
pub fn npy_bytes(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let dict = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
        if fortran { "True" } else { "False" }
    );
    let mut header = dict.into_bytes();
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(b' ');
    }
    header.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&u16::try_from(header.len()).unwrap().to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(data);
    out
}

/// Little-endian bytes of f32 values.
pub fn f32_le(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Writes `[batch, frames, 60]` `<f4` input to `path`, numpy's layout, from `values`.
pub fn write_input(path: &Path, batch: usize, frames: usize, values: &[f32]) {
    assert_eq!(values.len(), batch * frames * 60);
    let shape = format!("({batch}, {frames}, 60)");
    std::fs::write(path, npy_bytes("<f4", false, &shape, &f32_le(values))).unwrap();
}

/// The CPU backend's output of the built-in model on `input` (`batch` windows of `frames`).
pub fn cpu_output(input: &[f32], batch: usize, frames: usize) -> Vec<f32> {
    let model = OwnedStack::builtin();
    let shape = model.shape.with_frames(frames);
    let mut cpu = CpuBackend::new();
    cpu.prepare(
        &model.weights().unwrap(),
        &BackendConfig {
            shape,
            max_batch: batch,
            math: MathMode::Fp32,
        },
    )
    .unwrap();
    let mut out = vec![0.0; shape.output_len(batch).unwrap()];
    cpu.forward(input, batch, &mut out).unwrap();
    out
}

/// The bits of f32 values.
pub fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// Whether this machine has a usable CUDA GPU (tests that expect "no GPU" check it).
pub fn gpu_present() -> bool {
    #[cfg(feature = "cuda")]
    {
        bilstm::CudaBackend::new(0).is_ok()
    }
    #[cfg(not(feature = "cuda"))]
    {
        false
    }
}
