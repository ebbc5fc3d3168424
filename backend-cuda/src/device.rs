//! The GPU: driver probing, the context and streams, device facts, and the loaded kernels with
//! their real resource usage.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use bilstm_core::device::{DeviceFacts, PORTABLE_CLUSTER_SIZE};
use bilstm_core::occupancy::{self, KernelUsage};
use bilstm_kernels::KernelId;
use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::Ptx;

use crate::compile::{self, PtxOrigin};
use crate::error::CudaError;
use crate::launch::sys;

/// The oldest compute capability the kernels support: core's (one definition, in
/// `bilstm_core::plan`).
pub use bilstm_core::plan::MIN_COMPUTE_CAPABILITY;

/// What the backend knows about its GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// CUDA device ordinal.
    pub ordinal: usize,
    /// The device's name (`"NVIDIA H200"`).
    pub name: String,
    /// Its attributes, as plan selection sees them.
    pub facts: DeviceFacts,
    /// Device memory in bytes.
    pub total_memory_bytes: usize,
}

/// Checks that the CUDA driver library can be loaded and returns the number of GPUs.
///
/// # Errors
/// [`CudaError::Unavailable`] when libcuda is missing or the driver cannot be initialised.
pub fn device_count() -> Result<usize, CudaError> {
    if !sys::driver_library_present() {
        return Err(CudaError::Unavailable {
            reason: "no CUDA driver library (libcuda.so) was found".into(),
        });
    }
    match catch_unwind(CudaContext::device_count) {
        Ok(Ok(n)) => Ok(usize::try_from(n).unwrap_or(0)),
        Ok(Err(e)) => Err(CudaError::Unavailable {
            reason: format!("the CUDA driver could not be initialised: {e}"),
        }),
        Err(_) => Err(CudaError::Unavailable {
            reason: "loading the CUDA driver panicked".into(),
        }),
    }
}

/// The open device: context, the main and side streams, and its facts.
#[derive(Debug)]
pub(crate) struct Device {
    pub ctx: Arc<CudaContext>,
    pub main: Arc<CudaStream>,
    pub side: Arc<CudaStream>,
    /// The pipelined host path's copies (uploads and downloads of chunks), beside the compute
    /// on `main`.
    pub copy: Arc<CudaStream>,
    pub info: DeviceInfo,
}

fn attribute(ctx: &CudaContext, attr: CUdevice_attribute) -> Result<u32, CudaError> {
    let v = ctx
        .attribute(attr)
        .map_err(CudaError::driver("reading a device attribute"))?;
    u32::try_from(v).map_err(|_| CudaError::Internal {
        what: format!("device attribute {attr:?} is negative ({v})"),
    })
}

/// Reads the facts plan selection needs from the driver.
fn query_facts(ctx: &CudaContext) -> Result<DeviceFacts, CudaError> {
    use CUdevice_attribute as A;
    Ok(DeviceFacts {
        compute_capability: (
            attribute(ctx, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attribute(ctx, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        sm_count: attribute(ctx, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        max_threads_per_sm: attribute(ctx, A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
        max_blocks_per_sm: attribute(ctx, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?,
        registers_per_sm: attribute(ctx, A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
        registers_per_block: attribute(ctx, A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
        shared_bytes_per_sm: attribute(
            ctx,
            A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
        )?,
        shared_bytes_per_block_optin: attribute(
            ctx,
            A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?,
        reserved_shared_bytes_per_block: attribute(
            ctx,
            A::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK,
        )?,
        l2_bytes: attribute(ctx, A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
        cooperative_launch: attribute(ctx, A::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)? != 0,
        // The driver reports whether clusters launch, not their size limit: the portable one.
        max_cluster_size: if attribute(ctx, A::CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)? != 0 {
            PORTABLE_CLUSTER_SIZE
        } else {
            0
        },
    })
}

impl Device {
    /// Opens device `ordinal`: probes the driver, creates (retains) its primary context, turns
    /// off cudarc's per-buffer event tracking, reads its facts and creates two streams.
    ///
    /// # Errors
    /// [`CudaError::Unavailable`] without a driver or GPU (or for an ordinal past the last
    /// GPU); [`CudaError::Unsupported`] below compute capability 7.0;
    /// [`CudaError::Driver`] for other driver failures.
    pub(crate) fn open(ordinal: usize) -> Result<Device, CudaError> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(CudaError::Unavailable {
                reason: format!("no CUDA device {ordinal} ({count} found)"),
            });
        }
        let ctx = match catch_unwind(|| CudaContext::new(ordinal)) {
            Ok(Ok(ctx)) => ctx,
            Ok(Err(e)) => {
                return Err(CudaError::Unavailable {
                    reason: format!("cannot create a context on CUDA device {ordinal}: {e}"),
                });
            }
            Err(_) => {
                return Err(CudaError::Unavailable {
                    reason: "creating a CUDA context panicked".into(),
                });
            }
        };
        sys::disable_event_tracking(&ctx);
        let facts = query_facts(&ctx)?;
        if facts.compute_capability < MIN_COMPUTE_CAPABILITY {
            return Err(CudaError::Unsupported {
                what: "compute capability 7.0",
                reason: format!(
                    "device {ordinal} is {}.{}",
                    facts.compute_capability.0, facts.compute_capability.1
                ),
            });
        }
        let name = ctx
            .name()
            .map_err(CudaError::driver("reading the device name"))?;
        let total_memory_bytes = ctx
            .total_mem()
            .map_err(CudaError::driver("reading the device memory size"))?;
        let main = ctx
            .new_stream()
            .map_err(CudaError::driver("creating the main stream"))?;
        let side = ctx
            .new_stream()
            .map_err(CudaError::driver("creating the side stream"))?;
        let copy = ctx
            .new_stream()
            .map_err(CudaError::driver("creating the copy stream"))?;
        Ok(Device {
            ctx,
            main,
            side,
            copy,
            info: DeviceInfo {
                ordinal,
                name,
                facts,
                total_memory_bytes,
            },
        })
    }
}

/// The block shape a kernel is launched with: threads per block and dynamic shared bytes, as
/// its handle in `bilstm-kernels` states them.
///
/// Every launch in `launch/` uses exactly these figures, and the occupancy checks below use
/// them too, so core's calculator and the driver are compared on what really runs.
pub const fn launch_shape(kernel: KernelId) -> (u32, u32) {
    let k = kernel.kernel();
    (k.block_threads, k.dynamic_shared_bytes)
}

/// What one compiled kernel really uses on this device (from the driver's function
/// attributes), and how many of its blocks an SM holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompiledKernel {
    /// The kernel.
    pub kernel: KernelId,
    /// Threads per block it is launched with ([`launch_shape`]).
    pub threads: u32,
    /// Dynamic shared bytes per block it is launched with ([`launch_shape`]).
    pub dynamic_shared_bytes: u32,
    /// Registers per thread (`CU_FUNC_ATTRIBUTE_NUM_REGS`).
    pub registers_per_thread: u32,
    /// Static shared memory per block in bytes.
    pub static_shared_bytes: u32,
    /// Local memory per thread in bytes (0 unless the compiler spilled).
    pub local_bytes_per_thread: u32,
    /// Largest block this compilation allows.
    pub max_threads_per_block: u32,
    /// Blocks of `threads` threads with `dynamic_shared_bytes` one SM holds
    /// (`cuOccupancyMaxActiveBlocksPerMultiprocessor`); 0 when the device cannot grant the
    /// dynamic shared memory at all (the driver refused the attribute).
    pub blocks_per_sm: u32,
    /// The same figure from `bilstm_core::occupancy::blocks_per_sm`.
    pub core_blocks_per_sm: u32,
    /// Where the PTX came from.
    pub ptx_origin: PtxOrigin,
}

impl CompiledKernel {
    /// The usage as core's occupancy calculator takes it.
    pub fn usage(&self) -> KernelUsage {
        KernelUsage {
            threads: self.threads,
            registers_per_thread: self.registers_per_thread,
            static_shared_bytes: self.static_shared_bytes,
            dynamic_shared_bytes: self.dynamic_shared_bytes,
        }
    }
}

/// The loaded kernels of one device: every entry of [`bilstm_kernels::ALL`], with its real
/// resources.
#[derive(Debug)]
pub(crate) struct Kernels {
    functions: Vec<(KernelId, CudaFunction)>,
    pub resources: Vec<CompiledKernel>,
    /// Clusters of each cluster kernel (every entry of `ALL` launched with a cluster dimension)
    /// the device holds at once (`cuOccupancyMaxActiveClusters`); 0 where the device has no
    /// clusters or no SM holds one of the kernel's CTAs.
    pub max_active_clusters: Vec<(KernelId, u32)>,
}

impl Kernels {
    /// Compiles (or finds in a cache) every kernel for the device, loads it, allows the
    /// dynamic shared memory of the kernels that need more than the default 48 KiB, reads its
    /// resources and cross-checks core's occupancy calculator against the driver.
    ///
    /// # Errors
    /// [`CudaError::Unavailable`] / [`CudaError::Compile`] from NVRTC;
    /// [`CudaError::Driver`] when a module does not load; [`CudaError::OccupancyMismatch`]
    /// when core's occupancy differs from the driver's (set `BILSTM_OCCUPANCY_CHECK=warn` to
    /// record the disagreement in [`CompiledKernel`] instead).
    pub(crate) fn load(device: &Device) -> Result<Kernels, CudaError> {
        let modules = load_modules(device)?;
        let strict = std::env::var("BILSTM_OCCUPANCY_CHECK").map_or(true, |v| v != "warn");
        let mut functions = Vec::with_capacity(bilstm_kernels::ALL.len());
        let mut resources = Vec::with_capacity(bilstm_kernels::ALL.len());
        let mut max_active_clusters = Vec::new();
        for id in bilstm_kernels::ALL {
            let k = id.kernel();
            let (module, origin) = modules
                .iter()
                .find(|(name, _, _)| *name == k.source_name)
                .map(|(_, m, origin)| (m.clone(), *origin))
                .ok_or_else(|| CudaError::Internal {
                    what: format!("module of {} not loaded", k.source_name),
                })?;
            let f = module
                .load_function(k.entry)
                .map_err(CudaError::driver("finding a kernel entry point"))?;
            let r = resources_of(device, id, &f, origin)?;
            if strict && r.blocks_per_sm != r.core_blocks_per_sm {
                return Err(CudaError::OccupancyMismatch {
                    kernel: k.entry,
                    core: r.core_blocks_per_sm,
                    driver: r.blocks_per_sm,
                });
            }
            if k.cluster_size().is_some() {
                // A kernel no SM can hold (the 16-window tile's 128 KiB of shared memory on a GPU
                // with less) runs no cluster; the driver is not asked (it may refuse the
                // launch configuration instead of answering 0).
                let clusters = if device.info.facts.max_cluster_size > 0 && r.blocks_per_sm > 0 {
                    crate::launch::recurrence_cluster::max_active_clusters(k, &f, &device.main)?
                } else {
                    0
                };
                max_active_clusters.push((id, clusters));
            }
            functions.push((id, f));
            resources.push(r);
        }
        Ok(Kernels {
            functions,
            resources,
            max_active_clusters,
        })
    }

    /// The loaded function of `id`.
    ///
    /// # Errors
    /// [`CudaError::Internal`] if `id` was not loaded (every entry of `ALL` is).
    pub(crate) fn get(&self, id: KernelId) -> Result<&CudaFunction, CudaError> {
        self.functions
            .iter()
            .find(|(k, _)| *k == id)
            .map(|(_, f)| f)
            .ok_or_else(|| CudaError::Internal {
                what: format!("kernel {id} is not loaded"),
            })
    }

    /// Clusters of the cluster kernel `id` the device holds at once (0 for other kernels and on
    /// devices without clusters).
    pub(crate) fn max_active_clusters_of(&self, id: KernelId) -> u32 {
        self.max_active_clusters
            .iter()
            .find(|(k, _)| *k == id)
            .map_or(0, |&(_, n)| n)
    }

    /// The resources of `id`.
    pub(crate) fn resources_of(&self, id: KernelId) -> Option<CompiledKernel> {
        self.resources.iter().find(|r| r.kernel == id).copied()
    }

    /// The driver's blocks per SM for `id` at `threads` threads and `dynamic_shared_bytes`
    /// (`cuOccupancyMaxActiveBlocksPerMultiprocessor`), and core's figure for the same usage.
    /// Dynamic shared bytes above what the function was allowed at load time give the
    /// driver's 0.
    ///
    /// # Errors
    /// [`CudaError::Internal`] for a kernel not loaded; [`CudaError::Driver`].
    pub(crate) fn occupancy(
        &self,
        device: &Device,
        id: KernelId,
        threads: u32,
        dynamic_shared_bytes: u32,
    ) -> Result<(u32, u32), CudaError> {
        let f = self.get(id)?;
        let r = self.resources_of(id).ok_or_else(|| CudaError::Internal {
            what: format!("resources of {id} missing"),
        })?;
        let driver = f
            .occupancy_max_active_blocks_per_multiprocessor(
                threads,
                dynamic_shared_bytes as usize,
                None,
            )
            .map_err(CudaError::driver("querying occupancy"))?;
        let usage = KernelUsage {
            threads,
            dynamic_shared_bytes,
            ..r.usage()
        };
        let core = occupancy::blocks_per_sm(&device.info.facts, &usage).blocks_per_sm;
        Ok((driver, core))
    }
}

/// A loaded module: its source file's name, the module, and where its PTX came from.
type LoadedModule = (&'static str, Arc<CudaModule>, PtxOrigin);

/// Every kernel source compiled (or found in a cache) and loaded, one thread per source: NVRTC
/// programs and module loads are independent, so a first run on a fresh machine pays for the
/// slowest source rather than the sum (the H200 machine: 3.46 s for all of them one after
/// another, issue 11).
///
/// # Errors
/// The first source's error, in [`bilstm_kernels::sources`] order.
fn load_modules(device: &Device) -> Result<Vec<LoadedModule>, CudaError> {
    let mut kernels: Vec<&'static bilstm_kernels::Kernel> = Vec::new();
    for id in bilstm_kernels::ALL {
        let k = id.kernel();
        if !kernels.iter().any(|seen| seen.source_name == k.source_name) {
            kernels.push(k);
        }
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = kernels
            .iter()
            .map(|k| {
                scope.spawn(move || load_module(device, k).map(|(m, o)| (k.source_name, m, o)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(CudaError::Internal {
                        what: "a kernel compile thread panicked".into(),
                    })
                })
            })
            .collect()
    })
}

fn load_module(
    device: &Device,
    kernel: &bilstm_kernels::Kernel,
) -> Result<(Arc<CudaModule>, PtxOrigin), CudaError> {
    let arch = device.info.facts.compute_capability;
    let compiled = compile::compile(kernel, arch)?;
    match load_ptx(device, &compiled.ptx) {
        Ok(m) => Ok((m, compiled.origin)),
        Err(e) if compiled.origin != PtxOrigin::Compiled => {
            // A cached PTX the driver rejects (written by another NVRTC, damaged): compile anew.
            let _ = e;
            let source =
                bilstm_kernels::expand_source(kernel.source).map_err(|e| CudaError::Compile {
                    kernel: kernel.source_name,
                    options: compiled.options.clone(),
                    log: e.to_string(),
                })?;
            let ptx = compile::compile_uncached(kernel.source_name, &source, &compiled.options)?;
            Ok((load_ptx(device, &ptx)?, PtxOrigin::Compiled))
        }
        Err(e) => Err(e),
    }
}

fn load_ptx(device: &Device, ptx: &str) -> Result<Arc<CudaModule>, CudaError> {
    // `plausible_ptx` guaranteed no NUL inside, so cudarc's CString conversion cannot panic;
    // catch_unwind stays as the last line of defence.
    match catch_unwind(AssertUnwindSafe(|| {
        device.ctx.load_module(Ptx::from_src(ptx))
    })) {
        Ok(r) => r.map_err(CudaError::driver("loading a compiled module (PTX JIT)")),
        Err(_) => Err(CudaError::Internal {
            what: "loading a module panicked".into(),
        }),
    }
}

fn resources_of(
    device: &Device,
    id: KernelId,
    f: &CudaFunction,
    origin: PtxOrigin,
) -> Result<CompiledKernel, CudaError> {
    let get = |what: &'static str,
               v: Result<i32, cudarc::driver::DriverError>|
     -> Result<u32, CudaError> {
        let v = v.map_err(CudaError::driver(what))?;
        u32::try_from(v).map_err(|_| CudaError::Internal {
            what: format!("{what} is negative ({v})"),
        })
    };
    let (threads, dynamic_shared_bytes) = launch_shape(id);
    let registers_per_thread = get("reading a kernel's register count", f.num_regs())?;
    let static_shared_bytes = get("reading a kernel's shared memory", f.shared_size_bytes())?;
    let local_bytes_per_thread = get("reading a kernel's local memory", f.local_size_bytes())?;
    let max_threads_per_block = get("reading a kernel's block limit", f.max_threads_per_block())?;
    // A kernel with dynamic shared memory must be allowed it first (above 48 KiB the driver
    // refuses launches otherwise). A device whose opt-in limit is smaller refuses the
    // attribute: the kernel cannot run there, and 0 blocks per SM says so (core agrees: the
    // block exceeds the opt-in limit).
    let mut allowed = true;
    if dynamic_shared_bytes > 0 {
        device
            .ctx
            .bind_to_thread()
            .map_err(CudaError::driver("binding the context"))?;
        let bytes = i32::try_from(dynamic_shared_bytes).map_err(|_| CudaError::Internal {
            what: format!("{id}: dynamic shared bytes exceed i32"),
        })?;
        allowed = f
            .set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes,
            )
            .is_ok();
    }
    let blocks_per_sm = if allowed {
        f.occupancy_max_active_blocks_per_multiprocessor(
            threads,
            dynamic_shared_bytes as usize,
            None,
        )
        .map_err(CudaError::driver("querying occupancy"))?
    } else {
        0
    };
    let usage = KernelUsage {
        threads,
        registers_per_thread,
        static_shared_bytes,
        dynamic_shared_bytes,
    };
    let core_blocks_per_sm = occupancy::blocks_per_sm(&device.info.facts, &usage).blocks_per_sm;
    Ok(CompiledKernel {
        kernel: id,
        threads,
        dynamic_shared_bytes,
        registers_per_thread,
        static_shared_bytes,
        local_bytes_per_thread,
        max_threads_per_block,
        blocks_per_sm,
        core_blocks_per_sm,
        ptx_origin: origin,
    })
}
