//! One GPU: whether CUDA can be used here at all (driver and NVRTC libraries, device count), the
//! context and its stream, and the fluid kernels loaded once per device into a store of
//! handles ([`FluidKernels`], one field per kernel, declared once with its name).

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig};

use super::kernels;
use super::launch::kernel_table;
use super::params::{KernelParams, MigrationArgs};
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

// Every fluid kernel with its parameters (`launch::kernel_table!`: the typed launchers, and the
// list `tests` compare with the sources), grouped by the kernels file that defines it; each
// file's kernels are launched by the module of the same name (`stream.cu` by `stream.rs`,
// `migrate.cu` by `multi/migrate.rs`, ...).
kernel_table! {
    /// Every fluid kernel of one device, loaded once when the device opens.
    pub(super) struct FluidKernels;

    "stream.cu" {
        stream_bin_atomic: "mpc_stream_bin_atomic"(
            p: Val<KernelParams>, px: Out<f32>, py: Out<f32>, pz: Out<f32>, vx: Out<f64>,
            vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells: Out<f64>, report: Out<f64>,
            m: Val<MigrationArgs>,
        ),
        stream_bin_warp: "mpc_stream_bin_warp"(
            p: Val<KernelParams>, px: Out<f32>, py: Out<f32>, pz: Out<f32>, vx: Out<f64>,
            vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells: Out<f64>, report: Out<f64>,
            m: Val<MigrationArgs>,
        ),
        stream_bin_shared: "mpc_stream_bin_shared"(
            p: Val<KernelParams>, px: Out<f32>, py: Out<f32>, pz: Out<f32>, vx: Out<f64>,
            vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells: Out<f64>, report: Out<f64>,
            m: Val<MigrationArgs>,
        ),
        collide_stream_bin: "mpc_collide_stream_bin"(
            pc: Val<KernelParams>, p: Val<KernelParams>, px: Out<f32>, py: Out<f32>, pz: Out<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells_prev: In<f64>,
            cells_next: Out<f64>, report: Out<f64>, m: Val<MigrationArgs>,
        ),
        collide_stream_bin_shared: "mpc_collide_stream_bin_shared"(
            pc: Val<KernelParams>, p: Val<KernelParams>, px: Out<f32>, py: Out<f32>, pz: Out<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells_prev: In<f64>,
            cells_next: Out<f64>, report: Out<f64>, m: Val<MigrationArgs>,
        ),
        fill_u32: "mpc_fill_u32"(dst: Out<u32>, value: Val<u32>, n: Val<u32>),
        stream_bin_list: "mpc_stream_bin_list"(
            p: Val<KernelParams>, px: Out<f32>, py: Out<f32>, pz: Out<f32>, vx: Out<f64>,
            vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, head: Out<u32>, next: Out<u32>,
            report: Out<f64>,
        ),
        list_sums: "mpc_list_sums"(
            p: Val<KernelParams>, head: In<u32>, next: In<u32>, vx: In<f64>, vy: In<f64>,
            vz: In<f64>, cellw: In<u32>, cells: Out<f64>,
        ),
    }
    "solutes.cu" {
        solute_bin: "mpc_solute_bin"(
            p: Val<KernelParams>, spos: In<f64>, svel: In<f64>, smass: In<f64>, scell: Out<u32>,
            simage: Out<i32>, cells: Out<f64>, subset: In<u32>,
        ),
        solute_collide: "mpc_solute_collide"(
            p: Val<KernelParams>, scell: In<u32>, simage: In<i32>, cells: In<f64>, svel: Out<f64>,
            spos: In<f64>, smass: In<f64>, report: Out<f64>,
        ),
        solute_collide_owned: "mpc_solute_collide_owned"(
            p: Val<KernelParams>, scell: In<u32>, simage: In<i32>, cells: In<f64>, svel: Out<f64>,
            spos: In<f64>, smass: In<f64>, report: Out<f64>, subset: In<u32>,
        ),
    }
    "device_solutes.cu" {
        check_solutes: "mpc_check_solutes"(
            spos: In<f64>, svel: In<f64>, smass: In<f64>, n: Val<u32>, limit: Val<f64>,
            first_bad: Out<u32>, subset: In<u32>,
        ),
    }
    "cells.cu" {
        cell_params: "mpc_cell_params"(p: Val<KernelParams>, cells: Out<f64>, report: Out<f64>),
    }
    "collide.cu" {
        collide: "mpc_collide"(
            p: Val<KernelParams>, px: In<f32>, py: In<f32>, pz: In<f32>, vx: Out<f64>,
            vy: Out<f64>, vz: Out<f64>, cellw: In<u32>, cells: In<f64>, report: Out<f64>,
        ),
    }
    "rules.cu" {
        rules_stream_bin: "mpc_rules_stream_bin"(
            p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>, py: Out<f32>, pz: Out<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells: Out<f64>,
            ext: Out<f64>, report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_stream_bin_shared: "mpc_rules_stream_bin_shared"(
            p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>, py: Out<f32>, pz: Out<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells: Out<f64>,
            ext: Out<f64>, report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_collide_stream_bin: "mpc_rules_collide_stream_bin"(
            pc: Val<KernelParams>, p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>,
            py: Out<f32>, pz: Out<f32>, vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>,
            cells_prev: In<f64>, ext_prev: In<f64>, cells_next: Out<f64>, ext_next: Out<f64>,
            report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_collide_stream_bin_shared: "mpc_rules_collide_stream_bin_shared"(
            pc: Val<KernelParams>, p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>,
            py: Out<f32>, pz: Out<f32>, vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>,
            cells_prev: In<f64>, ext_prev: In<f64>, cells_next: Out<f64>, ext_next: Out<f64>,
            report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_cell_params: "mpc_rules_cell_params"(
            p: Val<KernelParams>, rule: Val<u32>, cells: Out<f64>, ext: Out<f64>, report: Out<f64>,
        ),
        rules_collide: "mpc_rules_collide"(
            p: Val<KernelParams>, rule: Val<u32>, px: In<f32>, py: In<f32>, pz: In<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: In<u32>, cells: In<f64>, ext: In<f64>,
            report: Out<f64>,
        ),
        rules_solute_bin: "mpc_rules_solute_bin"(
            p: Val<KernelParams>, rule: Val<u32>, spos: In<f64>, svel: In<f64>, smass: In<f64>,
            scell: Out<u32>, simage: Out<i32>, cells: Out<f64>, ext: Out<f64>,
        ),
        rules_solute_collide: "mpc_rules_solute_collide"(
            p: Val<KernelParams>, rule: Val<u32>, spos: In<f64>, smass: In<f64>, scell: In<u32>,
            simage: In<i32>, cells: In<f64>, ext: In<f64>, svel: Out<f64>, owned_only: Val<u32>,
            report: Out<f64>,
        ),
        rules_stream_bin_srd_a: "mpc_rules_stream_bin_srd_a"(
            p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>, py: Out<f32>, pz: Out<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells: Out<f64>,
            ext: Out<f64>, report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_stream_bin_at: "mpc_rules_stream_bin_at"(
            p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>, py: Out<f32>, pz: Out<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells: Out<f64>,
            ext: Out<f64>, report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_stream_bin_at_a: "mpc_rules_stream_bin_at_a"(
            p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>, py: Out<f32>, pz: Out<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells: Out<f64>,
            ext: Out<f64>, report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_collide_stream_bin_srd_a: "mpc_rules_collide_stream_bin_srd_a"(
            pc: Val<KernelParams>, p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>,
            py: Out<f32>, pz: Out<f32>, vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>,
            cells_prev: In<f64>, ext_prev: In<f64>, cells_next: Out<f64>, ext_next: Out<f64>,
            report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_collide_stream_bin_at: "mpc_rules_collide_stream_bin_at"(
            pc: Val<KernelParams>, p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>,
            py: Out<f32>, pz: Out<f32>, vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>,
            cells_prev: In<f64>, ext_prev: In<f64>, cells_next: Out<f64>, ext_next: Out<f64>,
            report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_collide_stream_bin_at_a: "mpc_rules_collide_stream_bin_at_a"(
            pc: Val<KernelParams>, p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>,
            py: Out<f32>, pz: Out<f32>, vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>,
            cells_prev: In<f64>, ext_prev: In<f64>, cells_next: Out<f64>, ext_next: Out<f64>,
            report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_cell_params_srd_a: "mpc_rules_cell_params_srd_a"(
            p: Val<KernelParams>, rule: Val<u32>, cells: Out<f64>, ext: Out<f64>, report: Out<f64>,
        ),
        rules_cell_params_at: "mpc_rules_cell_params_at"(
            p: Val<KernelParams>, rule: Val<u32>, cells: Out<f64>, ext: Out<f64>, report: Out<f64>,
        ),
        rules_cell_params_at_a: "mpc_rules_cell_params_at_a"(
            p: Val<KernelParams>, rule: Val<u32>, cells: Out<f64>, ext: Out<f64>, report: Out<f64>,
        ),
        rules_collide_srd_a: "mpc_rules_collide_srd_a"(
            p: Val<KernelParams>, rule: Val<u32>, px: In<f32>, py: In<f32>, pz: In<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: In<u32>, cells: In<f64>, ext: In<f64>,
            report: Out<f64>,
        ),
        rules_collide_at: "mpc_rules_collide_at"(
            p: Val<KernelParams>, rule: Val<u32>, px: In<f32>, py: In<f32>, pz: In<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: In<u32>, cells: In<f64>, ext: In<f64>,
            report: Out<f64>,
        ),
        rules_collide_at_a: "mpc_rules_collide_at_a"(
            p: Val<KernelParams>, rule: Val<u32>, px: In<f32>, py: In<f32>, pz: In<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: In<u32>, cells: In<f64>, ext: In<f64>,
            report: Out<f64>,
        ),
    }
    "migrate.cu" {
        immigrate: "mpc_immigrate"(
            p: Val<KernelParams>, recv: In<u64>, count: Val<u32>, first: Val<u32>, fill: Val<u32>,
            hole_top: Val<u32>, n_old: Val<u32>, px: Out<f32>, py: Out<f32>, pz: Out<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, ids: Out<u32>,
            holes: In<u32>, cells: Out<f64>, counters: Out<u32>, rule: Val<u32>, ext: Out<f64>,
        ),
    }
    "observe.cu" {
        moments: "mpc_moments"(
            p: Val<KernelParams>, py: In<f32>, pz: In<f32>, vx: In<f64>, vy: In<f64>, vz: In<f64>,
            cellw: In<u32>, out_: Out<f64>, prof_sum: Out<f64>, prof_cnt: Out<u64>,
            use_shared: Val<u32>, per_block: Val<u32>,
        ),
        accumulate_fields: "mpc_accumulate_fields"(
            p: Val<KernelParams>, px: In<f32>, py: In<f32>, pz: In<f32>, vx: In<f64>, vy: In<f64>,
            vz: In<f64>, cellw: In<u32>, fields: Out<f64>, first: Val<u32>, layers: Val<u32>,
            halo: Val<u32>,
        ),
    }
    "reorder.cu" {
        count_cells: "mpc_count_cells"(
            cellw: In<u32>, counts: Out<u32>, n: Val<u32>, ncells: Val<u32>,
        ),
        scan_chunk_sums: "mpc_scan_chunk_sums"(
            in_: In<u32>, partial: Out<u32>, n: Val<u32>, chunk: Val<u32>, nchunks: Val<u32>,
        ),
        scan_partials: "mpc_scan_partials"(partial: Out<u32>, nchunks: Val<u32>),
        scan_apply: "mpc_scan_apply"(
            inout: Out<u32>, partial: In<u32>, n: Val<u32>, chunk: Val<u32>, nchunks: Val<u32>,
        ),
        scatter: "mpc_scatter"(
            cellw: In<u32>, cursor: Out<u32>, perm: Out<u32>, n: Val<u32>, ncells: Val<u32>,
        ),
        sort_segments: "mpc_sort_segments"(ends: In<u32>, perm: Out<u32>, ncells: Val<u32>),
        gather_f32: "mpc_gather_f32"(perm: In<u32>, src: In<f32>, dst: Out<f32>, n: Val<u32>),
        gather_f64: "mpc_gather_f64"(perm: In<u32>, src: In<f64>, dst: Out<f64>, n: Val<u32>),
    }
    "debug.cu" {
        debug_cell_draws: "mpc_debug_cell_draws"(
            seed: Val<u64>, step: Val<u64>, cells: In<u32>, counts: In<u32>, kt: Val<f64>,
            axes: Out<f64>, energies: Out<f64>, n: Val<u32>,
        ),
        debug_det_ln: "mpc_debug_det_ln"(x: In<f64>, y: Out<f64>, n: Val<u32>),
        debug_at_draws: "mpc_debug_at_draws"(
            seed: Val<u64>, step: Val<u64>, cells: In<u32>, keys: In<u64>, masses: In<f64>,
            kt: Val<f64>, draws: Out<f64>, n: Val<u32>,
        ),
        debug_initial_particle: "mpc_debug_initial_particle"(
            seed: Val<u64>, lx: Val<f64>, ly: Val<f64>, lz: Val<f64>, sigma: Val<f64>,
            pos: Out<f32>, vel: Out<f64>, n: Val<u32>,
        ),
    }
    "init.cu" {
        init_particles: "mpc_init_particles"(
            seed: Val<u64>, lx: Val<f64>, ly: Val<f64>, lz: Val<f64>, sigma: Val<f64>,
            px: Out<f32>, py: Out<f32>, pz: Out<f32>, vx: Out<f64>, vy: Out<f64>, vz: Out<f64>,
            n: Val<u32>,
        ),
        chunk_sums: "mpc_chunk_sums"(
            vx: In<f64>, vy: In<f64>, vz: In<f64>, partial: Out<f64>, n: Val<u32>, chunk: Val<u32>,
            nchunks: Val<u32>,
        ),
        shift_scale: "mpc_shift_scale"(
            v: Out<f64>, sub: Val<f64>, mul: Val<f64>, op: Val<u32>, n: Val<u32>,
        ),
        add_flow: "mpc_add_flow"(p: Val<KernelParams>, py: In<f32>, vx: Out<f64>),
    }
}

/// Every kernel entry point the backend loads (checked against the sources in tests).
#[cfg(test)]
pub fn kernel_names() -> Vec<&'static str> {
    FluidKernels::signatures()
        .into_iter()
        .map(|(_, n, _)| n)
        .collect()
}

/// Each kernels file with the entry points the table lists for it.
#[cfg(test)]
fn kernels_by_file() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for (file, name, _) in FluidKernels::signatures() {
        match out.iter_mut().find(|(f, _)| *f == file) {
            Some((_, names)) => names.push(name),
            None => out.push((file, vec![name])),
        }
    }
    out
}

/// A CUDA context and the compiled kernels on one GPU; shared by the backend and the debug
/// entry points used by the tests.
pub struct CudaDevice {
    pub(super) ctx: Arc<CudaContext>,
    pub(super) stream: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    pub(super) k: FluidKernels,
    pub(super) name: String,
    pub(super) ordinal: usize,
    /// The kernels were compiled with the walls' code (`MPC_WALLS`, `kernels/walls.cuh`).
    pub(super) walls: bool,
}

impl CudaDevice {
    /// Open GPU `ordinal`: context, stream, kernels (compiled once per process).
    pub fn open(ordinal: usize) -> Result<CudaDevice> {
        CudaDevice::open_variant(ordinal, false)
    }

    /// Open GPU `ordinal` with the kernels a run of `phys` needs: those with the walls' code
    /// when it has walls (a second compilation, kept apart so that the kernels of a run
    /// without walls are exactly those without the walls' code and registers).
    pub fn open_for(ordinal: usize, phys: &crate::physics::Physics) -> Result<CudaDevice> {
        CudaDevice::open_variant(ordinal, phys.walls.is_some())
    }

    fn open_variant(ordinal: usize, walls: bool) -> Result<CudaDevice> {
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
    fn open_checked(ordinal: usize, walls: bool) -> Result<CudaDevice> {
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
        let stream = ctx.default_stream();
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        let compile = if walls {
            kernels::walls_cubin_for
        } else {
            kernels::cubin_for
        };
        let module = load_module(&ctx, compile)?;
        let k = FluidKernels::load(&module)?;
        Ok(CudaDevice {
            ctx,
            stream,
            _module: module,
            k,
            name,
            ordinal,
            walls,
        })
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

    /// Host-to-device copy bandwidth from pinned host memory in bytes/s (one direction), for a
    /// buffer of `bytes` over `reps` copies (after one warm-up copy): the reference of the
    /// coupled step's solute uploads.
    pub fn pinned_host_bandwidth(&self, bytes: usize, reps: usize) -> Result<f64> {
        let s = &self.stream;
        let n = bytes / 8;
        // SAFETY: pinned host memory of `n` f64, only read by the copies below, each
        // synchronised before the buffer can be dropped.
        let host = unsafe { self.ctx.alloc_pinned::<f64>(n) }.map_err(drv("pinned"))?;
        let mut dst = s.alloc_zeros::<f64>(n).map_err(drv("alloc"))?;
        s.memcpy_htod(&host, &mut dst).map_err(drv("copy"))?;
        s.synchronize().map_err(drv("sync"))?;
        let t0 = std::time::Instant::now();
        for _ in 0..reps {
            s.memcpy_htod(&host, &mut dst).map_err(drv("copy"))?;
        }
        s.synchronize().map_err(drv("sync"))?;
        Ok((n * 8) as f64 * reps as f64 / t0.elapsed().as_secs_f64())
    }
}

/// What a failed allocation becomes (the out-of-memory error of the checked footprint).
pub(super) type OnAllocError<'a> = &'a dyn Fn(cudarc::driver::DriverError) -> MpcError;

/// The kernel store against the embedded sources: every listed kernel is defined once, in
/// the file the store names, by the module of that file's name.
#[cfg(test)]
mod tests {
    use super::*;

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

    /// Every fluid kernel's parameters in the table (what its typed launcher takes) are those
    /// its CUDA source declares, type for type.
    #[test]
    fn the_kernel_table_matches_the_kernels_signatures() {
        let sources = super::super::launch::cuda_signatures(&kernels::full_source());
        let problems = super::super::launch::check_table(&FluidKernels::signatures(), &sources);
        assert!(
            problems.is_empty(),
            "the fluid kernel table (device.rs) and kernels/ disagree:\n{}\nfix: declare the \
             kernel's parameters in the table as the source does",
            problems.join("\n")
        );
    }
}
