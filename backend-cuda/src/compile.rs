//! NVRTC compilation of the kernel sources, with an in-process and an on-disk PTX cache.
//!
//! A kernel source (`bilstm_kernels`) is expanded ([`bilstm_kernels::expand_source`]) and
//! compiled for one virtual architecture `compute_XY` (the device's exact compute capability)
//! with [`nvrtc_options`]: every `-D` of `bilstm_core::geometry::defines()`, `--fmad=false`
//! (the kernels write every FMA explicitly; the compiler must contract nothing), explicit IEEE
//! division and square root, no flush-to-zero, `-default-device` and `--std=c++17`. The driver
//! turns the PTX into machine code when the module is loaded.
//!
//! # Caches
//! - In process: PTX by (source file, architecture, options), for the life of the process.
//! - On disk: `<dir>/<source>-compute_XY-<hash>.ptx`, the hash (FNV-1a, 64 bits) covering the
//!   expanded source, the options and the NVRTC version. `<dir>` is `$BILSTM_CACHE_DIR`, else
//!   `$XDG_CACHE_HOME/bilstm`, else `$HOME/.cache/bilstm`; `BILSTM_CACHE_DIR=off` disables it.
//!   Files are written to a temporary name and renamed, so readers never see half a file. A
//!   cache that cannot be read or written is skipped silently: a cache failure is never an
//!   error.
//!
//! NVRTC 13.0 emits PTX ISA 9.0, which driver 580 loads; newer NVRTC releases emit newer PTX
//! that older drivers reject (DESIGN.md section 4).

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use bilstm_kernels::Kernel;
use cudarc::nvrtc::{CompileError, CompileOptions, compile_ptx_with_opts};

use crate::error::CudaError;
use crate::launch::sys;

/// Where a kernel's PTX came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PtxOrigin {
    /// NVRTC compiled it just now.
    Compiled,
    /// The in-process cache.
    Memory,
    /// The on-disk cache.
    Disk,
}

/// A compiled kernel source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledPtx {
    /// The source file (`"recurrence_wide.cu"`).
    pub source_name: &'static str,
    /// The compute capability compiled for.
    pub arch: (u32, u32),
    /// The NVRTC options used.
    pub options: Vec<String>,
    /// The PTX text.
    pub ptx: Arc<str>,
    /// Where it came from.
    pub origin: PtxOrigin,
}

/// The NVRTC options for `arch` (compute capability `(major, minor)`). On the architectures of
/// [`bilstm_core::plan::WGMMA_ARCHITECTURES`] (9.0) the virtual architecture is the
/// arch-specific `compute_90a`, whose PTX runs on exactly that compute capability and may use
/// `wgmma.mma_async` (`bilstm_projection_tf32x3_wgmma`); the other kernels' PTX is the same
/// either way.
pub fn nvrtc_options(arch: (u32, u32)) -> Vec<String> {
    let suffix = if bilstm_core::plan::wgmma_available(arch) {
        "a"
    } else {
        ""
    };
    let mut options = vec![
        format!("--gpu-architecture=compute_{}{}{suffix}", arch.0, arch.1),
        "--fmad=false".to_string(),
        "--ftz=false".to_string(),
        "--prec-div=true".to_string(),
        "--prec-sqrt=true".to_string(),
        "-default-device".to_string(),
        "--std=c++17".to_string(),
    ];
    options.extend(
        bilstm_core::geometry::defines()
            .iter()
            .map(|(name, value)| format!("-D{name}={value}")),
    );
    options
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// Checks that NVRTC can be loaded and returns its version `(major, minor)`.
///
/// # Errors
/// [`CudaError::Unavailable`] when libnvrtc cannot be found or loaded, or its version query
/// fails.
pub fn nvrtc_version() -> Result<(i32, i32), CudaError> {
    static VERSION: OnceLock<Result<(i32, i32), String>> = OnceLock::new();
    let result = VERSION.get_or_init(|| {
        if !sys::nvrtc_library_present() {
            return Err("the NVRTC library (libnvrtc.so.13 or similar) was not found: install the CUDA \
                        toolkit's NVRTC or `pip install nvidia-cuda-nvrtc` and add its lib folder to \
                        LD_LIBRARY_PATH (scripts/nvrtc-env does this)"
                .to_string());
        }
        match catch_unwind(sys::nvrtc_version) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(format!("nvrtcVersion failed: {e}")),
            Err(payload) => Err(format!("loading NVRTC panicked: {}", panic_message(payload.as_ref()))),
        }
    });
    result
        .clone()
        .map_err(|reason| CudaError::Unavailable { reason })
}

/// The on-disk cache folder from the environment (see the module docs), if any.
pub fn cache_dir() -> Option<PathBuf> {
    match std::env::var_os("BILSTM_CACHE_DIR") {
        Some(v) if v == "off" => None,
        Some(v) if !v.is_empty() => Some(PathBuf::from(v)),
        _ => std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(|x| PathBuf::from(x).join("bilstm"))
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".cache/bilstm"))
            }),
    }
}

/// FNV-1a, 64 bits (stable across Rust versions, unlike `DefaultHasher`).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Separate the parts so ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

type MemoryKey = (&'static str, (u32, u32), Vec<String>);

fn memory_cache() -> &'static Mutex<HashMap<MemoryKey, Arc<str>>> {
    static CACHE: OnceLock<Mutex<HashMap<MemoryKey, Arc<str>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn disk_path(dir: &Path, source_name: &str, arch: (u32, u32), hash: u64) -> PathBuf {
    let stem = source_name.trim_end_matches(".cu");
    dir.join(format!(
        "{stem}-compute_{}{}-{hash:016x}.ptx",
        arch.0, arch.1
    ))
}

/// PTX text as NVRTC makes it: ASCII, no NUL, with a `.version` directive.
fn plausible_ptx(text: &str) -> bool {
    text.is_ascii() && !text.contains('\0') && text.contains(".version") && text.contains(".entry")
}

fn read_disk(path: &Path) -> Option<Arc<str>> {
    let text = std::fs::read_to_string(path).ok()?;
    plausible_ptx(&text).then(|| Arc::from(text))
}

fn write_disk(path: &Path, ptx: &str) {
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = path.with_extension(format!("tmp.{}.{nanos}", std::process::id()));
    if std::fs::write(&tmp, ptx).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Compiles `kernel`'s source for `arch` through both caches (disk cache from [`cache_dir`]).
///
/// # Errors
/// [`CudaError::Unavailable`] when NVRTC is missing or fails to start;
/// [`CudaError::Compile`] with NVRTC's log when the source does not compile.
pub fn compile(kernel: &Kernel, arch: (u32, u32)) -> Result<CompiledPtx, CudaError> {
    compile_with_cache(kernel, arch, cache_dir().as_deref())
}

/// As [`compile`], with an explicit disk cache folder (`None`: no disk cache).
///
/// # Errors
/// As [`compile`].
pub fn compile_with_cache(
    kernel: &Kernel,
    arch: (u32, u32),
    disk: Option<&Path>,
) -> Result<CompiledPtx, CudaError> {
    let options = nvrtc_options(arch);
    let key: MemoryKey = (kernel.source_name, arch, options.clone());
    let done = |ptx: Arc<str>, origin| CompiledPtx {
        source_name: kernel.source_name,
        arch,
        options: options.clone(),
        ptx,
        origin,
    };
    if let Some(ptx) = memory_cache()
        .lock()
        .ok()
        .and_then(|m| m.get(&key).cloned())
    {
        return Ok(done(ptx, PtxOrigin::Memory));
    }
    let version = nvrtc_version()?;
    let source = bilstm_kernels::expand_source(kernel.source).map_err(|e| CudaError::Compile {
        kernel: kernel.source_name,
        options: options.clone(),
        log: e.to_string(),
    })?;
    let version_text = format!("nvrtc {}.{}", version.0, version.1);
    let joined = options.join("\n");
    let hash = fnv1a(&[
        source.as_bytes(),
        joined.as_bytes(),
        version_text.as_bytes(),
    ]);
    let path = disk.map(|d| disk_path(d, kernel.source_name, arch, hash));
    if let Some(ptx) = path.as_deref().and_then(read_disk) {
        remember(key, &ptx);
        return Ok(done(ptx, PtxOrigin::Disk));
    }
    let ptx = compile_uncached(kernel.source_name, &source, &options)?;
    if let Some(p) = &path {
        write_disk(p, &ptx);
    }
    remember(key, &ptx);
    Ok(done(ptx, PtxOrigin::Compiled))
}

fn remember(key: MemoryKey, ptx: &Arc<str>) {
    if let Ok(mut m) = memory_cache().lock() {
        m.insert(key, ptx.clone());
    }
}

/// Runs NVRTC on an already expanded `source` (no cache).
///
/// # Errors
/// As [`compile`].
pub(crate) fn compile_uncached(
    source_name: &'static str,
    source: &str,
    options: &[String],
) -> Result<Arc<str>, CudaError> {
    nvrtc_version()?;
    let opts = CompileOptions {
        options: options.to_vec(),
        name: Some(source_name.to_string()),
        ..Default::default()
    };
    let result = catch_unwind(AssertUnwindSafe(|| compile_ptx_with_opts(source, opts)));
    let ptx = match result {
        Ok(Ok(ptx)) => ptx,
        Ok(Err(CompileError::CompileError { nvrtc, log, .. })) => {
            let log = log.to_string_lossy().into_owned();
            let log = if log.trim().is_empty() {
                format!("{nvrtc}")
            } else {
                log
            };
            return Err(CudaError::Compile {
                kernel: source_name,
                options: options.to_vec(),
                log,
            });
        }
        Ok(Err(other)) => {
            return Err(CudaError::Unavailable {
                reason: format!("NVRTC failed on {source_name}: {other}"),
            });
        }
        Err(payload) => {
            return Err(CudaError::Unavailable {
                reason: format!(
                    "NVRTC panicked on {source_name}: {}",
                    panic_message(payload.as_ref())
                ),
            });
        }
    };
    let bytes = ptx.as_bytes().ok_or_else(|| CudaError::Internal {
        what: "NVRTC returned no PTX image".into(),
    })?;
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let text = std::str::from_utf8(&bytes[..end]).map_err(|_| CudaError::Internal {
        what: format!("NVRTC's PTX for {source_name} is not UTF-8"),
    })?;
    if !plausible_ptx(text) {
        return Err(CudaError::Internal {
            what: format!("NVRTC's output for {source_name} does not look like PTX"),
        });
    }
    Ok(Arc::from(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_carry_every_define_and_the_numerics_flags() {
        let o = nvrtc_options((9, 0));
        assert_eq!(o[0], "--gpu-architecture=compute_90a");
        for flag in [
            "--fmad=false",
            "-default-device",
            "--std=c++17",
            "--ftz=false",
        ] {
            assert!(o.iter().any(|x| x == flag), "{flag}");
        }
        assert!(o.iter().any(|x| x == "-DBILSTM_HIDDEN=128"));
        assert_eq!(
            o.iter().filter(|x| x.starts_with("-DBILSTM_")).count(),
            bilstm_core::geometry::defines().len()
        );
    }

    #[test]
    fn hashes_separate_parts_and_paths_name_the_arch() {
        assert_ne!(fnv1a(&[b"ab", b"c"]), fnv1a(&[b"a", b"bc"]));
        assert_eq!(fnv1a(&[b"x"]), fnv1a(&[b"x"]));
        let p = disk_path(Path::new("/c"), "recurrence_wide.cu", (8, 6), 0xab);
        assert_eq!(
            p,
            Path::new("/c/recurrence_wide-compute_86-00000000000000ab.ptx")
        );
    }

    #[test]
    fn corrupt_cache_files_are_ignored() {
        let dir = std::env::temp_dir().join(format!("bilstm-cache-test-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("x.ptx");
        std::fs::write(&path, "garbage\0").unwrap();
        assert!(read_disk(&path).is_none());
        write_disk(&path, "//\n.version 9.0\n.entry k()\n");
        assert!(read_disk(&path).is_some());
        assert!(read_disk(&dir.join("missing.ptx")).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
