//! One GPU: whether CUDA can be used here at all (driver and NVRTC libraries, device count), the
//! context and its stream, and the fluid kernels loaded once per device into a store of
//! handles ([`FluidKernels`], one field per kernel, declared once with its name); the rules'
//! kernels ([`RuleKernels`]) only once a rule beside SRD asks for them.

use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig};

use super::fluid_kernels::FluidKernels;
use super::kernel_units::{kernel_units, KernelModules, KernelSet};
use super::rule_kernels::RuleKernels;
use crate::error::{MpcError, Result};

/// Threads per block of the per-particle and per-cell kernels.
pub(super) const BLOCK: u32 = 256;

/// One thread per element for `n` elements (at least one block).
pub(super) fn grid(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: ((n as u32).div_ceil(BLOCK).max(1), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Whether the CUDA driver library can be loaded.
pub fn driver_present() -> bool {
    // SAFETY: `is_culib_present` only tries to load the shared library (dlopen) and reports
    // whether it succeeded; a panic inside is caught here.
    std::panic::catch_unwind(|| unsafe { cudarc::driver::sys::is_culib_present() }).unwrap_or(false)
}

/// Whether the NVRTC library can be loaded.
pub fn nvrtc_present() -> bool {
    // SAFETY: as in `driver_present`, for the NVRTC library.
    std::panic::catch_unwind(|| unsafe { cudarc::nvrtc::sys::is_culib_present() }).unwrap_or(false)
}

/// Why no CUDA GPU can be used here, or the number of devices.
pub fn probe() -> std::result::Result<usize, String> {
    if !driver_present() {
        return Err("no CUDA driver library (libcuda.so) could be loaded".into());
    }
    if !nvrtc_present() {
        return Err(
            "no NVRTC library (libnvrtc.so.13) could be loaded; fix: install the CUDA 13 \
             toolkit or add its lib64 directory to LD_LIBRARY_PATH"
                .into(),
        );
    }
    match std::panic::catch_unwind(CudaContext::device_count) {
        Ok(Ok(n)) if n > 0 => Ok(n as usize),
        Ok(Ok(_)) => Err("the CUDA driver reports no device".into()),
        Ok(Err(e)) => Err(format!("the CUDA driver failed to initialise: {e:?}")),
        Err(_) => Err("the CUDA driver library panicked while initialising".into()),
    }
}

/// A non-blocking stream of the highest priority on `ctx`: work queued on it (the outside
/// solutes' routing) is scheduled beside the fluid's long pass 1 instead of after it.
pub(in crate::backend::cuda) fn priority_stream(ctx: &Arc<CudaContext>) -> Result<Arc<CudaStream>> {
    ctx.bind_to_thread().map_err(drv("bind"))?;
    let (_, highest) =
        cudarc::driver::result::stream::get_priority_range().map_err(drv("stream priorities"))?;
    ctx.new_stream_with_priority(highest).map_err(drv("stream"))
}

/// A driver error as an [`MpcError`] naming what failed.
pub(crate) fn drv(what: &str) -> impl FnOnce(cudarc::driver::DriverError) -> MpcError + '_ {
    move |source| MpcError::Driver {
        what: what.to_string(),
        source,
    }
}

/// Compile (`compile` gets the device's compute capability) and load a module into `ctx`.
pub(crate) fn load_module(
    ctx: &Arc<CudaContext>,
    compile: impl FnOnce(i32, i32) -> std::result::Result<Vec<u8>, String>,
) -> Result<Arc<CudaModule>> {
    let (major, minor) = ctx
        .compute_capability()
        .map_err(drv("compute capability"))?;
    let cubin = compile(major, minor).map_err(MpcError::Device)?;
    ctx.load_module(cudarc::nvrtc::Ptx::from_binary(cubin))
        .map_err(drv("module load"))
}

/// A kernel of a loaded module, by name.
pub(crate) fn kernel(module: &Arc<CudaModule>, name: &str) -> Result<CudaFunction> {
    module
        .load_function(name)
        .map_err(|e| MpcError::Device(format!("CUDA kernel {name}: {e:?}")))
}

/// Free and total memory of a device, by ordinal.
pub fn device_memory(ordinal: usize) -> Result<(u64, u64)> {
    let ctx = CudaContext::new(ordinal).map_err(drv("context"))?;
    let (free, total) = ctx.mem_get_info().map_err(drv("cuMemGetInfo"))?;
    Ok((free as u64, total as u64))
}

/// The wall shape a run of `phys` needs its kernels compiled for (`CudaDevice::walls`).
pub(super) fn wall_kernels_for(phys: &crate::physics::Physics) -> Option<u32> {
    phys.walls
        .as_ref()
        .map(|w| super::contract::wall_kind(&w.shape))
}

/// A CUDA context and the compiled kernels on one GPU; shared by the backend and the debug
/// entry points used by the tests.
pub struct CudaDevice {
    pub(super) ctx: Arc<CudaContext>,
    pub(super) stream: Arc<CudaStream>,
    /// The modules the kernels of `k` live in (loaded as long as the device is open).
    _modules: KernelModules,
    pub(super) k: FluidKernels,
    /// The rules' kernels and their modules, compiled and loaded the first time a rule beside
    /// SRD asks for them ([`CudaDevice::rule_kernels`]).
    rules: OnceLock<(KernelModules, RuleKernels)>,
    pub(super) name: String,
    pub(super) ordinal: usize,
    /// The wall shape (its kernel code, `contract::wall_kind`) the kernels were compiled for
    /// (`MPC_WALLS_SHAPE`, `kernels/walls.cuh`), or `None`: kernels without the walls' code.
    pub(super) walls: Option<u32>,
}

impl CudaDevice {
    /// Open GPU `ordinal`: context, stream, kernels (compiled once per process).
    pub fn open(ordinal: usize) -> Result<CudaDevice> {
        CudaDevice::open_variant(ordinal, None)
    }

    /// Open GPU `ordinal` with the kernels a run of `phys` needs: with walls, those compiled
    /// for its wall shape alone (one compilation per shape, so that neither a run without
    /// walls nor one shape's run carries another shape's code and registers).
    pub fn open_for(ordinal: usize, phys: &crate::physics::Physics) -> Result<CudaDevice> {
        CudaDevice::open_variant(ordinal, wall_kernels_for(phys))
    }

    fn open_variant(ordinal: usize, walls: Option<u32>) -> Result<CudaDevice> {
        probe().map_err(|e| MpcError::Device(format!("CUDA unavailable: {e}")))?;
        let opened = std::panic::catch_unwind(|| CudaDevice::open_checked(ordinal, walls));
        match opened {
            Ok(r) => r,
            Err(_) => Err(MpcError::Device(
                "the CUDA library panicked while opening the device (driver too old for CUDA \
                 13?); fix: update the NVIDIA driver or use device: Cpu"
                    .into(),
            )),
        }
    }

    /// `open` once the libraries are known to load (may panic inside cudarc on an old driver).
    fn open_checked(ordinal: usize, walls: Option<u32>) -> Result<CudaDevice> {
        let count = CudaContext::device_count().map_err(drv("device count"))?;
        if ordinal >= count as usize {
            return Err(MpcError::Device(format!(
                "CUDA device {ordinal} does not exist ({count} present); fix: name a device \
                 in 0..{count}"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(drv("context"))?;
        // SAFETY: cudarc then records no per-buffer events and the backend orders its streams
        // itself, as cudarc requires: buffers are allocated and freed on the main stream, and
        // every other stream that uses one (host_staging.rs's upload/download streams, the copy
        // streams of multi/, the caller's stream in device_solutes.rs) is ordered after the
        // main stream's work and joined back by an explicit event or a synchronisation, so no
        // buffer is used before its allocation, written by two streams at once, or freed
        // while another stream still uses it.
        unsafe { ctx.disable_event_tracking() };
        // a stream of its own, not the legacy default stream: a caller handing over device
        // solutes on the default stream (CuPy's and PyTorch's, C's 0) makes that stream wait
        // for their velocities, and were it the fluid's main stream the fluid would wait too
        // (on several GPUs, for every slab's return)
        let stream = ctx.new_stream().map_err(drv("stream"))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        let (major, minor) = ctx
            .compute_capability()
            .map_err(drv("compute capability"))?;
        let units = kernel_units(KernelSet::Fluid, major, minor, walls)?;
        let modules = KernelModules::load(&ctx, &units)?;
        let k = FluidKernels::load(|name| modules.function(name))?;
        Ok(CudaDevice {
            ctx,
            stream,
            _modules: modules,
            k,
            rules: OnceLock::new(),
            name,
            ordinal,
            walls,
        })
    }

    /// The rules' kernels (SRD+a, MPC-AT, MPC-AT+a), compiled (once per process) and loaded on
    /// this GPU the first time they are asked for: a plain SRD run never compiles them.
    pub(super) fn rule_kernels(&self) -> Result<&RuleKernels> {
        if let Some((_, k)) = self.rules.get() {
            return Ok(k);
        }
        let (major, minor) = self
            .ctx
            .compute_capability()
            .map_err(drv("compute capability"))?;
        let units = kernel_units(KernelSet::Rules, major, minor, self.walls)?;
        let modules = KernelModules::load(&self.ctx, &units)?;
        let k = RuleKernels::load(|name| modules.function(name))?;
        // a device is used by one thread at a time; were the cell filled meanwhile, the
        // kernels loaded first stay and these are dropped
        let _ = self.rules.set((modules, k));
        self.rules
            .get()
            .map(|(_, k)| k)
            .ok_or_else(|| MpcError::Device("the rule kernels did not load".into()))
    }

    pub fn describe(&self) -> String {
        format!("cuda:{} {}", self.ordinal, self.name)
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    pub fn free_memory(&self) -> Result<(u64, u64)> {
        let (f, t) = self.ctx.mem_get_info().map_err(drv("cuMemGetInfo"))?;
        Ok((f as u64, t as u64))
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Device-to-device copy bandwidth in bytes/s, counting bytes read and written, for
    /// buffers of `bytes` each over `reps` copies (after one warm-up copy).
    pub fn copy_bandwidth(&self, bytes: usize, reps: usize) -> Result<f64> {
        let s = &self.stream;
        let n = bytes / 8;
        let src = s.alloc_zeros::<f64>(n).map_err(drv("alloc"))?;
        let mut dst = s.alloc_zeros::<f64>(n).map_err(drv("alloc"))?;
        s.memcpy_dtod(&src, &mut dst).map_err(drv("copy"))?;
        s.synchronize().map_err(drv("sync"))?;
        let t0 = std::time::Instant::now();
        for _ in 0..reps {
            s.memcpy_dtod(&src, &mut dst).map_err(drv("copy"))?;
        }
        s.synchronize().map_err(drv("sync"))?;
        let dt = t0.elapsed().as_secs_f64();
        Ok(2.0 * (n * 8) as f64 * reps as f64 / dt)
    }

    /// Host-to-device and device-to-host copy rates in bytes/s between pinned host memory
    /// and this GPU, each the best of `reps` copies of `bytes`: the PCIe reference a coupled
    /// step with host solutes is measured against.
    pub fn pinned_copy_rates(&self, bytes: usize, reps: usize) -> Result<(f64, f64)> {
        let s = &self.stream;
        let n = bytes / 8;
        // SAFETY: pinned host memory, uninitialised: only copied to the device and written by
        // copies from it, never read on the host.
        let mut host =
            unsafe { self.ctx.alloc_pinned_with_flags::<f64>(n, 0) }.map_err(drv("pinned"))?;
        let mut dev = s.alloc_zeros::<f64>(n).map_err(drv("alloc"))?;
        let mut best = |up: bool| -> Result<f64> {
            let mut rate = 0.0f64;
            for _ in 0..reps + 1 {
                let t0 = std::time::Instant::now();
                if up {
                    s.memcpy_htod(&host, &mut dev).map_err(drv("copy"))?;
                } else {
                    s.memcpy_dtoh(&dev, &mut host).map_err(drv("copy"))?;
                }
                s.synchronize().map_err(drv("sync"))?;
                rate = rate.max((n * 8) as f64 / t0.elapsed().as_secs_f64());
            }
            Ok(rate)
        };
        let up = best(true)?;
        let down = best(false)?;
        Ok((up, down))
    }
}

/// What a failed allocation becomes (the out-of-memory error of the checked footprint).
pub(super) type OnAllocError<'a> = &'a dyn Fn(cudarc::driver::DriverError) -> MpcError;

/// The kernel store against the embedded sources: every listed kernel is defined once, in
/// the file the store names, by the module of that file's name.
#[cfg(test)]
mod tests {
    use super::super::fluid_kernels::{kernel_names, kernels_by_file};
    use super::super::kernels;

    /// The entry points a source text defines: `extern "C" __global__ void [BOUNDS] name(`,
    /// where BOUNDS is an optional launch-bounds macro.
    fn declared_kernels(text: &str) -> Vec<&str> {
        text.lines()
            .filter_map(|l| l.strip_prefix("extern \"C\" __global__ void "))
            .filter_map(|rest| rest.split('(').next()?.split_whitespace().last())
            .collect()
    }

    #[test]
    fn every_kernel_is_defined_once_and_every_include_is_embedded() {
        let src = kernels::full_source();
        let declared = declared_kernels(&src);
        for name in kernel_names() {
            let count = declared.iter().filter(|d| **d == name).count();
            assert_eq!(count, 1, "kernel {name}");
        }
        let embedded: Vec<&str> = kernels::FLUID_SOURCES.iter().map(|(n, _)| *n).collect();
        for (file, text) in kernels::FLUID_SOURCES {
            for line in text.lines().filter(|l| l.starts_with("#include \"")) {
                let inc = line.trim_start_matches("#include \"").trim_end_matches('"');
                assert!(
                    embedded.contains(&inc),
                    "{file} includes {inc}, which is not embedded"
                );
                let (pos_inc, pos_file) = (
                    embedded.iter().position(|n| *n == inc),
                    embedded.iter().position(|n| n == file),
                );
                assert!(
                    pos_inc < pos_file,
                    "{file} includes {inc}, which comes later"
                );
            }
        }
    }

    /// Each `.cu` file defines exactly the entry points the kernel store lists for it, and its
    /// first line names the module that launches them: `stream.cu` by `stream.rs`,
    /// `migrate.cu` by `multi/migrate.rs`, and so on. Headers define no entry points.
    #[test]
    fn each_kernels_file_is_launched_by_the_module_of_its_name() {
        for (file, text) in kernels::FLUID_SOURCES {
            let mut defined = declared_kernels(text);
            if file.ends_with(".cuh") {
                assert!(defined.is_empty(), "{file} defines kernels {defined:?}");
                continue;
            }
            let by_file = kernels_by_file();
            let (_, listed) = by_file
                .iter()
                .find(|(f, _)| f == file)
                .unwrap_or_else(|| panic!("{file} is not in the kernel table"));
            let mut listed = listed.clone();
            defined.sort_unstable();
            listed.sort_unstable();
            assert_eq!(defined, listed, "kernels of {file}");
            let stem = file.trim_end_matches(".cu");
            let first = text.lines().next().unwrap_or("");
            assert!(
                first.contains(&format!("cuda/{stem}.rs)"))
                    || first.contains(&format!("cuda/multi/{stem}.rs)")),
                "{file} must name its module ({stem}.rs) on its first line: {first}"
            );
        }
        for (file, _) in kernels_by_file() {
            assert!(
                kernels::FLUID_SOURCES.iter().any(|(n, _)| *n == file),
                "{file} is not embedded"
            );
        }
    }

    #[test]
    fn sources_are_embedded_and_declare_every_kernel() {
        let src = kernels::full_source();
        assert!(!src.contains("#pragma once"));
        let declared = declared_kernels(&src);
        for name in kernel_names() {
            assert!(
                declared.contains(&name),
                "kernel {name} missing from kernels/*.cu"
            );
        }
        // the mirrors of the Rust functions are there
        for f in [
            "mpc_philox4x32_10",
            "mpc_det_ln",
            "mpc_gamma",
            "mpc_unit_vector",
            "mpc_stream",
            "mpc_locate",
            "mpc_cell_params",
            "mpc_collide",
            "mpc_kinetic_stress",
        ] {
            assert!(src.contains(f), "{f} missing");
        }
    }
}
