//! The CUDA backend: the whole MPC step on one GPU, mirroring [`crate::backend::cpu`].
//!
//! Fluid particles live on the GPU for the whole run (positions 3×f32, velocities 3×f64, one
//! packed cell word per particle: cell index in the low 30 bits, Lees-Edwards image + 1 in the
//! top 2). One step, all on the device, with only the four numbers of the [`StepReport`] copied
//! back:
//!
//! 1. zero the cell buffer (8 doubles per cell);
//! 2. **stream + bin + sum** (one thread per particle): stream, bin on the shifted grid, store
//!    the cell word, add `m v`, `m v²` and 1 to the cell with f64 `atomicAdd` (five atomics: the
//!    fluid mass is m × count; solutes add their mass and count to separate slots)
//!    ([`CellSumMethod::Atomics`], talk 003's "easy approach"); or first add within each warp
//!    the lanes that share a cell ([`CellSumMethod::Warp`]); or push the particle onto a
//!    linked cell list with `atomicExch` and sum the lists one thread per cell
//!    ([`CellSumMethod::List`]); or ([`CellSumMethod::Fused`]) do the previous step's
//!    collision in the same pass (rotation(n) + streaming(n+1), two cell buffers alternating);
//! 3. solutes (uploaded each step) are binned and added with atomics;
//! 4. **cell pass** (one thread per cell): sums → cell velocity, Philox rotation axis, MBS
//!    factor, written over the sums in place; Σ E_rel and Σ (Nc − 1) reduced per block;
//! 5. **collide** (one thread per particle), collisional stress reduced per block; solutes too,
//!    their velocities copied back;
//! 6. optionally **reorder** by cell: counting sort (count, scan, scatter), each cell's segment
//!    sorted so that the permutation equals the CPU backend's, then a gather per array.
//!
//! A fresh fluid is generated on the GPU (`mpc_init_particles`, then the CPU's chunked mean and
//! energy sums reproduced chunk by chunk), equal bit for bit to `FluidState::initial`; a given
//! state (resume, tests) is uploaded.
//!
//! The kernels (`kernels/*.cu`, `*.cuh`) mirror `physics.rs` and `rng.rs` operation by
//! operation and are compiled by NVRTC with `--fmad=false`: per-cell draws equal the CPU's bit
//! for bit, and velocities differ from the CPU backend only by the summation order of the cell
//! sums (atomics), i.e. at the rounding level.

mod device_solutes;
pub mod kernels;
pub mod multi;
mod multi_solutes;
pub mod transfer;

pub use device_solutes::DeviceSoluteArrays;

use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr, LaunchConfig,
    PushKernelArg,
};

use super::{Backend, FluidMoments, SoluteBatch, StepReport};
use crate::config::Config;
use crate::error::{MpcError, Result};
use crate::physics::{Physics, StepPlan};
use crate::state::FluidState;

/// Threads per block of the per-particle and per-cell kernels.
const BLOCK: u32 = 256;
/// Largest cell count: the cell index takes 30 bits of the packed cell word.
pub const MAX_CUDA_CELLS: u64 = 1 << 30;
/// Largest particle count: indices (and thread indices rounded up to a block) are 32-bit, and
/// u32::MAX ends a cell list.
pub const MAX_CUDA_PARTICLES: u64 = u32::MAX as u64 - 1024;
/// Device memory kept free beside the footprint (context, modules, driver pools).
pub const RESERVE_BYTES: u64 = 512 << 20;
/// Threads of the scan over cells (each handles a contiguous chunk).
const SCAN_CHUNKS: usize = 65_536;

/// How the per-cell sums are formed and the passes arranged (selectable with
/// `MPCBOX_CUDA_METHOD=atomics|warp|shared|list|fused|fused-shared`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellSumMethod {
    /// Five f64 atomics per particle into the cell buffer, in the streaming kernel (talk 003's
    /// "easy approach").
    Atomics,
    /// As `Atomics`, but the lanes of a warp that share a cell first add in registers
    /// (`__match_any_sync` + shuffles), so one lane per cell and warp does the five atomics.
    Warp,
    /// Linked cell lists (`atomicExch` on a head per cell), then one thread per cell sums its
    /// list (talk 003's "faster" method).
    List,
    /// `Warp`, then the warp leaders add into a per-block hash table of cells in shared memory
    /// (geometry-aware hash, talk 003's partial lists in shared memory), and each block does one
    /// set of atomics per distinct cell.
    Shared,
    /// `Warp` sums, and the collision of step n fused with the streaming of step n+1 (one pass
    /// over the particles per step) whenever step n's collisional stress is not measured; two
    /// cell buffers alternate.
    Fused,
    /// `Fused` with the `Shared` block aggregation.
    FusedShared,
}

impl CellSumMethod {
    pub const ALL: [CellSumMethod; 6] = [
        CellSumMethod::Atomics,
        CellSumMethod::Warp,
        CellSumMethod::Shared,
        CellSumMethod::List,
        CellSumMethod::Fused,
        CellSumMethod::FusedShared,
    ];

    /// The default: the fastest measured on an H200 (mpcbox-bench-gpu, 64³ to 256³ cells ×
    /// 10): `Fused`, as fast as `Warp` when the stress is measured every step and about 1.2×
    /// faster otherwise; `Warp` is about 1.5× faster than `Atomics`.
    pub const DEFAULT: CellSumMethod = CellSumMethod::Fused;

    pub fn name(self) -> &'static str {
        match self {
            CellSumMethod::Atomics => "atomics",
            CellSumMethod::Warp => "warp",
            CellSumMethod::Shared => "shared",
            CellSumMethod::List => "list",
            CellSumMethod::Fused => "fused",
            CellSumMethod::FusedShared => "fused-shared",
        }
    }

    pub fn parse(s: &str) -> Option<CellSumMethod> {
        match s.trim().to_ascii_lowercase().as_str() {
            "atomics" | "atomic" => Some(CellSumMethod::Atomics),
            "warp" => Some(CellSumMethod::Warp),
            "list" | "lists" | "linked" => Some(CellSumMethod::List),
            "shared" => Some(CellSumMethod::Shared),
            "fused" => Some(CellSumMethod::Fused),
            "fused-shared" | "fused_shared" => Some(CellSumMethod::FusedShared),
            _ => None,
        }
    }

    /// The method named by `MPCBOX_CUDA_METHOD`, else the default (the fastest measured).
    pub fn from_env() -> CellSumMethod {
        match std::env::var("MPCBOX_CUDA_METHOD") {
            Ok(v) => CellSumMethod::parse(&v).unwrap_or_else(|| {
                tracing::warn!(
                    "MPCBOX_CUDA_METHOD={v:?} is unknown (atomics, warp, shared, list, fused, fused-shared); using {}",
                    CellSumMethod::DEFAULT.name()
                );
                CellSumMethod::DEFAULT
            }),
            Err(_) => CellSumMethod::DEFAULT,
        }
    }

    /// Device bytes per particle and per cell of this method.
    pub fn bytes_per_particle_and_cell(self) -> (u64, u64) {
        let (ep, ec) = self.extra_bytes();
        (BYTES_PER_PARTICLE + ep, BYTES_PER_CELL + ec)
    }

    /// Extra bytes per particle and per cell beyond the common footprint.
    fn extra_bytes(self) -> (u64, u64) {
        match self {
            CellSumMethod::Atomics | CellSumMethod::Warp | CellSumMethod::Shared => (0, 0),
            // next[] per particle; the list heads share the per-cell counter array
            CellSumMethod::List => (4, 0),
            // a second cell buffer
            CellSumMethod::Fused | CellSumMethod::FusedShared => (0, 64),
        }
    }
}

/// Bytes per particle of the CUDA backend: position 3×4, velocity 3×8, cell word 4, and an
/// 8-byte scratch slot used by the reorder (permutation, then one array at a time).
pub const BYTES_PER_PARTICLE: u64 = 12 + 24 + 4 + 8;
/// Bytes per cell common to every method: 8 doubles (sums, then collision parameters in
/// place) and a u32 counter (reorder counts/offsets; list heads). The fused methods add a
/// second 64-byte cell buffer.
pub const BYTES_PER_CELL: u64 = 8 * 8 + 4;

/// Device bytes for `n` particles and `ncells` cells with a method (without the reserve).
pub fn device_bytes(n: u64, ncells: u64, method: CellSumMethod) -> u64 {
    let (ep, ec) = method.extra_bytes();
    n * (BYTES_PER_PARTICLE + ep) + ncells * (BYTES_PER_CELL + ec) + SCAN_CHUNKS as u64 * 4
}

/// Whether the CUDA driver library can be loaded.
pub fn driver_present() -> bool {
    std::panic::catch_unwind(|| unsafe { cudarc::driver::sys::is_culib_present() }).unwrap_or(false)
}

/// Whether the NVRTC library can be loaded.
pub fn nvrtc_present() -> bool {
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

pub(crate) fn drv(what: &str) -> impl FnOnce(cudarc::driver::DriverError) -> MpcError + '_ {
    move |e| MpcError::Device(format!("CUDA {what}: {e:?}"))
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

/// Refuse a system that cannot fit (before any allocation, host or device).
fn check_fits(device: &str, n: u64, ncells: u64, method: CellSumMethod, free: u64) -> Result<u64> {
    if ncells > MAX_CUDA_CELLS {
        return Err(MpcError::Device(format!(
            "{ncells} cells exceed the CUDA backend's limit of {MAX_CUDA_CELLS} (30-bit cell \
             index); fix: use a smaller box or device: Cpu"
        )));
    }
    if n > MAX_CUDA_PARTICLES {
        return Err(MpcError::Device(format!(
            "{n} fluid particles exceed the CUDA backend's limit of {MAX_CUDA_PARTICLES} (32-bit \
             indices); fix: use a smaller box or fewer particles per cell"
        )));
    }
    let needed = device_bytes(n, ncells, method);
    if needed + RESERVE_BYTES > free {
        let (bp, bc) = method.bytes_per_particle_and_cell();
        let fit = free.saturating_sub(RESERVE_BYTES + ncells * bc) / bp;
        return Err(MpcError::OutOfMemory {
            device: device.to_string(),
            needed_bytes: needed + RESERVE_BYTES,
            available_bytes: free,
            fix: format!(
                "this GPU holds about {fit} fluid particles with this box ({} B/particle, {} \
                 B/cell, {} MiB reserve); use fewer cells or particles per cell, or device: Cpu",
                bp,
                bc,
                RESERVE_BYTES >> 20
            ),
        });
    }
    Ok(needed)
}

/// Kernel parameters, passed by value; mirrors `struct MpcParams` in `kernels/mpc.cuh`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct KernelParams {
    length: [f64; 3],
    h: f64,
    mass: f64,
    kt: f64,
    cos_angle: f64,
    sin_angle: f64,
    accel: [f64; 3],
    shear_rate: f64,
    le_velocity: f64,
    shift: [f64; 3],
    le_offset: f64,
    seed: u64,
    step: u64,
    cells: [u32; 3],
    thermostat: u32,
    measure_stress: u32,
    n_fluid: u32,
    n_solutes: u32,
    n_cells: u32,
    cell_offset: u32,
    slab: u32,
}

// SAFETY: plain-old-data with the C layout of `MpcParams`.
unsafe impl DeviceRepr for KernelParams {}

const _: () = assert!(std::mem::size_of::<KernelParams>() == 192);

/// Where emigrating particles go (slab mode); mirrors `struct MpcMigration` in `kernels/migrate.cuh`.
/// Zero on one GPU. Raw device addresses: the buffers live as long as the backend.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct MigrationArgs {
    send: [u64; 2],
    counters: u64,
    holes: u64,
    ids: u64,
    send_capacity: u32,
    pad: u32,
}

// SAFETY: plain-old-data with the C layout of `MpcMigration`.
unsafe impl DeviceRepr for MigrationArgs {}

const _: () = assert!(std::mem::size_of::<MigrationArgs>() == 48);

struct Kernels {
    immigrate: CudaFunction,
    stream_bin_atomic: CudaFunction,
    stream_bin_list: CudaFunction,
    stream_bin_warp: CudaFunction,
    collide_stream_bin: CudaFunction,
    list_sums: CudaFunction,
    solute_bin: CudaFunction,
    cell_params: CudaFunction,
    collide: CudaFunction,
    solute_collide: CudaFunction,
    moments: CudaFunction,
    count_cells: CudaFunction,
    scan_chunk_sums: CudaFunction,
    scan_partials: CudaFunction,
    scan_apply: CudaFunction,
    scatter: CudaFunction,
    sort_segments: CudaFunction,
    gather_f32: CudaFunction,
    gather_f64: CudaFunction,
    debug_cell_draws: CudaFunction,
    debug_det_ln: CudaFunction,
    debug_initial_particle: CudaFunction,
    fill_u32: CudaFunction,
    init_particles: CudaFunction,
    chunk_sums: CudaFunction,
    shift_scale: CudaFunction,
    add_flow: CudaFunction,
    check_solutes: CudaFunction,
    solute_collide_owned: CudaFunction,
}

impl Kernels {
    fn load(ctx: &Arc<CudaContext>) -> Result<(Arc<CudaModule>, Kernels)> {
        let module = load_module(ctx, kernels::cubin_for)?;
        let f = |name: &str| kernel(&module, name);
        let k = Kernels {
            immigrate: f("mpc_immigrate")?,
            stream_bin_atomic: f("mpc_stream_bin_atomic")?,
            stream_bin_list: f("mpc_stream_bin_list")?,
            stream_bin_warp: f("mpc_stream_bin_warp")?,
            collide_stream_bin: f("mpc_collide_stream_bin")?,
            list_sums: f("mpc_list_sums")?,
            solute_bin: f("mpc_solute_bin")?,
            cell_params: f("mpc_cell_params")?,
            collide: f("mpc_collide")?,
            solute_collide: f("mpc_solute_collide")?,
            moments: f("mpc_moments")?,
            count_cells: f("mpc_count_cells")?,
            scan_chunk_sums: f("mpc_scan_chunk_sums")?,
            scan_partials: f("mpc_scan_partials")?,
            scan_apply: f("mpc_scan_apply")?,
            scatter: f("mpc_scatter")?,
            sort_segments: f("mpc_sort_segments")?,
            gather_f32: f("mpc_gather_f32")?,
            gather_f64: f("mpc_gather_f64")?,
            debug_cell_draws: f("mpc_debug_cell_draws")?,
            debug_det_ln: f("mpc_debug_det_ln")?,
            debug_initial_particle: f("mpc_debug_initial_particle")?,
            fill_u32: f("mpc_fill_u32")?,
            init_particles: f("mpc_init_particles")?,
            chunk_sums: f("mpc_chunk_sums")?,
            shift_scale: f("mpc_shift_scale")?,
            add_flow: f("mpc_add_flow")?,
            check_solutes: f("mpc_check_solutes")?,
            solute_collide_owned: f("mpc_solute_collide_owned")?,
        };
        Ok((module, k))
    }
}

fn grid(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: ((n as u32).div_ceil(BLOCK).max(1), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A CUDA context and the compiled kernels on one GPU; shared by the backend and the debug
/// entry points used by the tests.
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    k: Kernels,
    name: String,
    ordinal: usize,
}

impl CudaDevice {
    /// Open GPU `ordinal`: context, stream, kernels (compiled once per process).
    pub fn open(ordinal: usize) -> Result<CudaDevice> {
        probe().map_err(|e| MpcError::Device(format!("CUDA unavailable: {e}")))?;
        let opened = std::panic::catch_unwind(|| -> Result<CudaDevice> {
            let count = CudaContext::device_count().map_err(drv("device count"))?;
            if ordinal >= count as usize {
                return Err(MpcError::Device(format!(
                    "CUDA device {ordinal} does not exist ({count} present); fix: name a device \
                     in 0..{count}"
                )));
            }
            let ctx = CudaContext::new(ordinal).map_err(drv("context"))?;
            // One stream, ordered: no per-buffer event tracking needed.
            unsafe { ctx.disable_event_tracking() };
            let stream = ctx.default_stream();
            let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
            let (module, k) = Kernels::load(&ctx)?;
            Ok(CudaDevice {
                ctx,
                stream,
                _module: module,
                k,
                name,
                ordinal,
            })
        });
        match opened {
            Ok(r) => r,
            Err(_) => Err(MpcError::Device(
                "the CUDA library panicked while opening the device (driver too old for CUDA \
                 13?); fix: update the NVIDIA driver or use device: Cpu"
                    .into(),
            )),
        }
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

    /// Debug entry point: rotation axes and MBS thermostat energies of `cells[i]` holding
    /// `counts[i]` particles (energy 0 for fewer than two), computed on the GPU.
    pub fn cell_draws(
        &self,
        seed: u64,
        step: u64,
        cells: &[u32],
        counts: &[u32],
        kt: f64,
    ) -> Result<(Vec<[f64; 3]>, Vec<f64>)> {
        assert_eq!(cells.len(), counts.len());
        let n = cells.len();
        let s = &self.stream;
        let d_cells = s.clone_htod(cells).map_err(drv("copy"))?;
        let d_counts = s.clone_htod(counts).map_err(drv("copy"))?;
        let mut axes = s.alloc_zeros::<f64>(3 * n.max(1)).map_err(drv("alloc"))?;
        let mut energies = s.alloc_zeros::<f64>(n.max(1)).map_err(drv("alloc"))?;
        let nn = n as u32;
        unsafe {
            s.launch_builder(&self.k.debug_cell_draws)
                .arg(&seed)
                .arg(&step)
                .arg(&d_cells)
                .arg(&d_counts)
                .arg(&kt)
                .arg(&mut axes)
                .arg(&mut energies)
                .arg(&nn)
                .launch(grid(n))
                .map_err(drv("launch"))?;
        }
        let a = s.clone_dtoh(&axes).map_err(drv("copy"))?;
        let e = s.clone_dtoh(&energies).map_err(drv("copy"))?;
        Ok((
            (0..n)
                .map(|i| [a[3 * i], a[3 * i + 1], a[3 * i + 2]])
                .collect(),
            e[..n].to_vec(),
        ))
    }

    /// Debug entry point: `det_ln` on the GPU.
    pub fn det_ln(&self, xs: &[f64]) -> Result<Vec<f64>> {
        let n = xs.len();
        let s = &self.stream;
        let dx = s.clone_htod(xs).map_err(drv("copy"))?;
        let mut dy = s.alloc_zeros::<f64>(n.max(1)).map_err(drv("alloc"))?;
        let nn = n as u32;
        unsafe {
            s.launch_builder(&self.k.debug_det_ln)
                .arg(&dx)
                .arg(&mut dy)
                .arg(&nn)
                .launch(grid(n))
                .map_err(drv("launch"))?;
        }
        let y = s.clone_dtoh(&dy).map_err(drv("copy"))?;
        Ok(y[..n].to_vec())
    }

    /// Debug entry point: `state::initial_particle` for particles 0..n on the GPU.
    pub fn initial_particles(
        &self,
        seed: u64,
        len: [f64; 3],
        sigma: f64,
        n: usize,
    ) -> Result<Vec<([f32; 3], [f64; 3])>> {
        let s = &self.stream;
        let mut pos = s.alloc_zeros::<f32>(3 * n.max(1)).map_err(drv("alloc"))?;
        let mut vel = s.alloc_zeros::<f64>(3 * n.max(1)).map_err(drv("alloc"))?;
        let nn = n as u32;
        unsafe {
            s.launch_builder(&self.k.debug_initial_particle)
                .arg(&seed)
                .arg(&len[0])
                .arg(&len[1])
                .arg(&len[2])
                .arg(&sigma)
                .arg(&mut pos)
                .arg(&mut vel)
                .arg(&nn)
                .launch(grid(n))
                .map_err(drv("launch"))?;
        }
        let p = s.clone_dtoh(&pos).map_err(drv("copy"))?;
        let v = s.clone_dtoh(&vel).map_err(drv("copy"))?;
        Ok((0..n)
            .map(|i| {
                (
                    [p[3 * i], p[3 * i + 1], p[3 * i + 2]],
                    [v[3 * i], v[3 * i + 1], v[3 * i + 2]],
                )
            })
            .collect())
    }
}

/// Solute buffers, grown on demand.
struct SoluteBuffers {
    capacity: usize,
    pos: CudaSlice<f64>,
    vel: CudaSlice<f64>,
    mass: CudaSlice<f64>,
    /// Cell of each solute (not packed: a solute's image may span many periods).
    cell: CudaSlice<u32>,
    /// Lees-Edwards image of each solute (`Physics::locate_solute`).
    image: CudaSlice<i32>,
}

/// The split coupled step's transfer machinery: its own non-blocking streams, so the solute
/// upload overlaps the fluid streaming and the download overlaps the fluid collision, and
/// pinned host buffers of exactly the solute count (a copy from pageable memory would block).
struct CoupledIo {
    upload: Arc<CudaStream>,
    download: Arc<CudaStream>,
    n: usize,
    pos: cudarc::driver::PinnedHostSlice<f64>,
    vel: cudarc::driver::PinnedHostSlice<f64>,
    mass: cudarc::driver::PinnedHostSlice<f64>,
    out: cudarc::driver::PinnedHostSlice<f64>,
}

/// How solutes cross PCIe in a coupled step (`MPCBOX_CUDA_SOLUTE_IO=pinned|pageable`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoluteTransfer {
    /// Host copy (all cores) into pinned staging, then asynchronous DMA on the upload stream.
    Pinned,
    /// Direct copies from the caller's (pageable) arrays on the upload/download streams; the
    /// host waits for each, while the fluid kernels run on the main stream.
    Pageable,
}

impl SoluteTransfer {
    pub fn from_env() -> SoluteTransfer {
        // Pinned is the default: on an H200 it was 1.3-1.5x faster at 0.7 solutes per cell.
        match std::env::var("MPCBOX_CUDA_SOLUTE_IO").as_deref() {
            Ok("pageable") => SoluteTransfer::Pageable,
            _ => SoluteTransfer::Pinned,
        }
    }
}

/// Copy `src` into `dst` (equal lengths) on the bounded host pool ([`crate::host`]): host
/// copies into pinned staging are on the critical path of a coupled step.
fn parallel_copy(dst: &mut [f64], src: &[f64]) {
    crate::host::copy(dst, src);
}

pub struct CudaBackend {
    dev: CudaDevice,
    phys: Physics,
    method: CellSumMethod,
    n: usize,
    ncells: usize,
    pos: [CudaSlice<f32>; 3],
    vel: [CudaSlice<f64>; 3],
    /// Packed cell word per fluid particle.
    cellw: CudaSlice<u32>,
    /// 8 doubles per cell: sums, then parameters.
    cells: CudaSlice<f64>,
    /// Fused method: the other cell buffer (the two alternate).
    cells_alt: Option<CudaSlice<f64>>,
    /// Fused method: the parameters of the step whose fluid collision is still pending (its
    /// cell parameters are in `cells`).
    pending: Option<KernelParams>,
    /// One u32 per cell: reorder counts/offsets, list heads.
    counter: CudaSlice<u32>,
    /// 8 bytes per particle: reorder scratch.
    temp: CudaSlice<f64>,
    /// List method: next particle in the cell (u32::MAX ends a list).
    next: Option<CudaSlice<u32>>,
    scan_partial: CudaSlice<u32>,
    report: CudaSlice<f64>,
    moment_sums: CudaSlice<f64>,
    prof_sum: CudaSlice<f64>,
    prof_cnt: CudaSlice<u64>,
    solutes: Option<SoluteBuffers>,
    /// Streams and pinned buffers of the split coupled step (made at its first use).
    coupled: Option<CoupledIo>,
    /// A coupled step begun (`begin_coupled`) and not finished: its parameters and solute count.
    in_flight: Option<(KernelParams, usize)>,
    /// Device-resident solutes: their cells, images, check buffer and ordering events.
    device_solutes: Option<device_solutes::DeviceSoluteState>,
    device_bytes: u64,
    /// Slab mode (one of several GPUs): layers held, migration buffers, particle ids.
    slab: Option<multi::Slab>,
    /// When set, every phase is synchronised and timed into `phase_seconds`.
    profiling: bool,
    phase_seconds: [f64; PHASES],
    phase_mark: Option<std::time::Instant>,
}

/// Phases timed by [`CudaBackend::set_profiling`].
pub const PHASE_NAMES: [&str; 5] = [
    "stream+bin+sums",
    "solutes",
    "cell params",
    "collide",
    "reorder",
];
const PHASES: usize = 5;

impl CudaBackend {
    /// Open GPU `ordinal` for the config `cfg`; the fluid is `state`, or the initial state of
    /// `cfg` generated on the GPU (equal bit for bit to `FluidState::initial(cfg)`), after the
    /// memory check passed.
    pub fn open(
        cfg: &Config,
        phys: &Physics,
        state: Option<&FluidState>,
        ordinal: usize,
        method: CellSumMethod,
    ) -> Result<CudaBackend> {
        let dev = CudaDevice::open(ordinal)?;
        let n = state.map_or(cfg.n_fluid(), |s| s.len() as u64);
        let (free, _) = dev.free_memory()?;
        check_fits(&dev.describe(), n, cfg.n_cells(), method, free)?;
        match state {
            Some(s) => CudaBackend::with_device(dev, phys.clone(), s, method),
            None => {
                let mut be = CudaBackend::allocate(dev, phys.clone(), n as usize, method)?;
                be.generate_initial_state(cfg)?;
                Ok(be)
            }
        }
    }

    /// Fill the fluid with the initial state of `cfg`, generated on the GPU with the same
    /// per-particle Philox streams and the same chunked reductions as `FluidState::initial`.
    fn generate_initial_state(&mut self, cfg: &Config) -> Result<()> {
        use crate::config::InitialFlow;
        use crate::state::REDUCTION_CHUNK;
        let n = self.n;
        if n as u64 != cfg.n_fluid() {
            return Err(MpcError::Device("initial state size mismatch".into()));
        }
        self.pending = None;
        let s = self.dev.stream.clone();
        let nu = n as u32;
        let sigma = (cfg.kt / cfg.mass).sqrt();
        let len = self.phys.length;
        let k = &self.dev.k;
        {
            let [px, py, pz] = &mut self.pos;
            let [vx, vy, vz] = &mut self.vel;
            unsafe {
                s.launch_builder(&k.init_particles)
                    .arg(&cfg.seed)
                    .arg(&len[0])
                    .arg(&len[1])
                    .arg(&len[2])
                    .arg(&sigma)
                    .arg(px)
                    .arg(py)
                    .arg(pz)
                    .arg(vx)
                    .arg(vy)
                    .arg(vz)
                    .arg(&nu)
                    .launch(grid(n))
                    .map_err(drv("initial state"))?;
            }
        }
        if n > 1 {
            let (mean, _) = self.mean_velocity_and_energy(REDUCTION_CHUNK)?;
            for (c, m) in mean.into_iter().enumerate() {
                self.shift_scale(c, m, 1.0, 0)?;
            }
            let (_, ke) = self.mean_velocity_and_energy(REDUCTION_CHUNK)?;
            let target = 1.5 * (n as f64 - 1.0) * cfg.kt / cfg.mass;
            if ke > 0.0 {
                let f = (target / ke).sqrt();
                for c in 0..3 {
                    self.shift_scale(c, 0.0, f, 1)?;
                }
            }
        }
        if cfg.initial_flow == InitialFlow::Steady && cfg.shear_rate != 0.0 {
            let p = self.params(&self.phys.plan(0, false, false), 0);
            unsafe {
                s.launch_builder(&self.dev.k.add_flow)
                    .arg(&p)
                    .arg(&self.pos[1])
                    .arg(&mut self.vel[0])
                    .launch(grid(n))
                    .map_err(drv("initial flow"))?;
            }
        }
        self.synchronize()
    }

    /// `FluidState::mean_velocity_and_energy` on the GPU: chunk sums, added on the host in order.
    fn mean_velocity_and_energy(&mut self, chunk: usize) -> Result<([f64; 3], f64)> {
        let n = self.n;
        let nchunks = n.div_ceil(chunk).max(1);
        let s = self.dev.stream.clone();
        let mut partial = s.alloc_zeros::<f64>(4 * nchunks).map_err(drv("alloc"))?;
        let (nu, cu, ncu) = (n as u32, chunk as u32, nchunks as u32);
        unsafe {
            s.launch_builder(&self.dev.k.chunk_sums)
                .arg(&self.vel[0])
                .arg(&self.vel[1])
                .arg(&self.vel[2])
                .arg(&mut partial)
                .arg(&nu)
                .arg(&cu)
                .arg(&ncu)
                .launch(LaunchConfig {
                    grid_dim: ((nchunks as u32).div_ceil(64), 1, 1),
                    block_dim: (64, 1, 1),
                    shared_mem_bytes: 0,
                })
                .map_err(drv("chunk sums"))?;
        }
        let parts = s.clone_dtoh(&partial).map_err(drv("copy"))?;
        let mut t = [0.0; 4];
        for p in parts.chunks_exact(4).take(n.div_ceil(chunk)) {
            for k in 0..4 {
                t[k] += p[k];
            }
        }
        let nf = n.max(1) as f64;
        Ok(([t[0] / nf, t[1] / nf, t[2] / nf], t[3]))
    }

    fn shift_scale(&mut self, component: usize, sub: f64, mul: f64, op: u32) -> Result<()> {
        let s = self.dev.stream.clone();
        let nu = self.n as u32;
        unsafe {
            s.launch_builder(&self.dev.k.shift_scale)
                .arg(&mut self.vel[component])
                .arg(&sub)
                .arg(&mul)
                .arg(&op)
                .arg(&nu)
                .launch(grid(self.n))
                .map_err(drv("initial state"))?;
        }
        Ok(())
    }

    /// A backend on GPU `ordinal` holding `state`, default cell-sum method.
    pub fn new(phys: Physics, state: &FluidState, ordinal: usize) -> Result<CudaBackend> {
        let dev = CudaDevice::open(ordinal)?;
        CudaBackend::with_device(dev, phys, state, CellSumMethod::from_env())
    }

    pub fn with_method(
        phys: Physics,
        state: &FluidState,
        ordinal: usize,
        method: CellSumMethod,
    ) -> Result<CudaBackend> {
        let dev = CudaDevice::open(ordinal)?;
        CudaBackend::with_device(dev, phys, state, method)
    }

    fn with_device(
        dev: CudaDevice,
        phys: Physics,
        state: &FluidState,
        method: CellSumMethod,
    ) -> Result<CudaBackend> {
        state
            .validate(&phys)
            .map_err(|e| MpcError::Device(format!("initial fluid state: {e}")))?;
        let mut be = CudaBackend::allocate(dev, phys, state.len(), method)?;
        be.upload(state)?;
        Ok(be)
    }

    /// Allocate every buffer for `n` fluid particles (contents unset) after the memory check.
    fn allocate(
        dev: CudaDevice,
        phys: Physics,
        n: usize,
        method: CellSumMethod,
    ) -> Result<CudaBackend> {
        let ncells = phys.n_cells();
        CudaBackend::allocate_cells(dev, phys, n, ncells, method)
    }

    /// As `allocate` with `ncells` cells in the cell buffer (a slab's layers in slab mode).
    fn allocate_cells(
        dev: CudaDevice,
        phys: Physics,
        n: usize,
        ncells: usize,
        method: CellSumMethod,
    ) -> Result<CudaBackend> {
        let (free, _) = dev.free_memory()?;
        let needed = check_fits(&dev.describe(), n as u64, ncells as u64, method, free)?;
        let s = dev.stream.clone();
        let alloc_err = |e: cudarc::driver::DriverError| MpcError::OutOfMemory {
            device: dev.describe(),
            needed_bytes: needed,
            available_bytes: free,
            fix: format!("allocation failed ({e:?}); use a smaller system or device: Cpu"),
        };
        let nn = n.max(1);
        let ly = phys.cells[1] as usize;
        // SAFETY (alloc): every buffer is written before it is read (state upload or
        // generation by the caller, the per-step memsets and kernels).
        let pos = unsafe {
            [
                s.alloc::<f32>(nn).map_err(alloc_err)?,
                s.alloc::<f32>(nn).map_err(alloc_err)?,
                s.alloc::<f32>(nn).map_err(alloc_err)?,
            ]
        };
        let vel = unsafe {
            [
                s.alloc::<f64>(nn).map_err(alloc_err)?,
                s.alloc::<f64>(nn).map_err(alloc_err)?,
                s.alloc::<f64>(nn).map_err(alloc_err)?,
            ]
        };
        let be = CudaBackend {
            cellw: unsafe { s.alloc::<u32>(nn) }.map_err(alloc_err)?,
            cells: s.alloc_zeros::<f64>(8 * ncells).map_err(alloc_err)?,
            cells_alt: match method {
                CellSumMethod::Fused | CellSumMethod::FusedShared => {
                    Some(s.alloc_zeros::<f64>(8 * ncells).map_err(alloc_err)?)
                }
                _ => None,
            },
            pending: None,
            // one more bin: free slots (slab mode) sort last
            counter: s.alloc_zeros::<u32>(ncells + 1).map_err(alloc_err)?,
            temp: unsafe { s.alloc::<f64>(nn) }.map_err(alloc_err)?,
            next: match method {
                CellSumMethod::List => Some(unsafe { s.alloc::<u32>(nn) }.map_err(alloc_err)?),
                _ => None,
            },
            scan_partial: s.alloc_zeros::<u32>(SCAN_CHUNKS).map_err(alloc_err)?,
            report: s.alloc_zeros::<f64>(4).map_err(alloc_err)?,
            moment_sums: s.alloc_zeros::<f64>(4).map_err(alloc_err)?,
            prof_sum: s.alloc_zeros::<f64>(ly).map_err(alloc_err)?,
            prof_cnt: s.alloc_zeros::<u64>(ly).map_err(alloc_err)?,
            solutes: None,
            coupled: None,
            in_flight: None,
            device_solutes: None,
            slab: None,
            profiling: false,
            phase_seconds: [0.0; PHASES],
            phase_mark: None,
            pos,
            vel,
            n,
            ncells,
            method,
            phys,
            device_bytes: needed,
            dev,
        };
        Ok(be)
    }

    /// Change the run constants (thermostat, shear, force, ...) keeping the fluid; the box
    /// must stay the same (benchmarks switch variants this way).
    pub fn set_physics(&mut self, phys: Physics) -> Result<()> {
        if phys.cells != self.phys.cells {
            return Err(MpcError::Device(
                "set_physics cannot change the box; fix: open a new backend".into(),
            ));
        }
        self.flush()?;
        self.phys = phys;
        Ok(())
    }

    pub fn physics(&self) -> &Physics {
        &self.phys
    }

    pub fn method(&self) -> CellSumMethod {
        self.method
    }

    pub fn device(&self) -> &CudaDevice {
        &self.dev
    }

    /// Device bytes allocated for the fluid and cells.
    pub fn device_bytes(&self) -> u64 {
        self.device_bytes
    }

    /// Wait for all queued work.
    pub fn synchronize(&self) -> Result<()> {
        self.dev.stream.synchronize().map_err(drv("synchronize"))
    }

    fn params(&self, plan: &StepPlan, n_solutes: usize) -> KernelParams {
        let p = &self.phys;
        KernelParams {
            length: p.length,
            h: p.h,
            mass: p.mass,
            kt: p.kt,
            cos_angle: p.cos_angle,
            sin_angle: p.sin_angle,
            accel: p.acceleration,
            shear_rate: p.shear_rate,
            le_velocity: p.le_velocity,
            shift: plan.shift,
            le_offset: plan.le_offset,
            seed: p.seed,
            step: plan.step,
            cells: p.cells,
            thermostat: p.thermostat as u32,
            measure_stress: plan.measure_stress as u32,
            n_fluid: self.n as u32,
            n_solutes: n_solutes as u32,
            n_cells: self.ncells as u32,
            cell_offset: self.slab.as_ref().map_or(0, |sl| sl.cell_offset),
            slab: self.slab.is_some() as u32,
        }
    }

    fn ensure_solute_capacity(&mut self, ns: usize) -> Result<()> {
        if self.solutes.as_ref().is_some_and(|b| b.capacity >= ns) {
            return Ok(());
        }
        let cap = ns.next_power_of_two().max(64);
        let s = &self.dev.stream;
        self.solutes = Some(SoluteBuffers {
            capacity: cap,
            pos: s.alloc_zeros::<f64>(3 * cap).map_err(drv("solute alloc"))?,
            vel: s.alloc_zeros::<f64>(3 * cap).map_err(drv("solute alloc"))?,
            mass: s.alloc_zeros::<f64>(cap).map_err(drv("solute alloc"))?,
            cell: s.alloc_zeros::<u32>(cap).map_err(drv("solute alloc"))?,
            image: s.alloc_zeros::<i32>(cap).map_err(drv("solute alloc"))?,
        });
        Ok(())
    }

    /// Exclusive prefix sum of `counter[0..ncells]` in place.
    fn scan_counter(&mut self) -> Result<()> {
        let s = self.dev.stream.clone();
        let nc = self.ncells + 1;
        let chunk = nc.div_ceil(SCAN_CHUNKS).max(1);
        let nchunks = nc.div_ceil(chunk);
        let (ncu, chu, nchu) = (nc as u32, chunk as u32, nchunks as u32);
        unsafe {
            s.launch_builder(&self.dev.k.scan_chunk_sums)
                .arg(&self.counter)
                .arg(&mut self.scan_partial)
                .arg(&ncu)
                .arg(&chu)
                .arg(&nchu)
                .launch(grid(nchunks))
                .map_err(drv("scan"))?;
            s.launch_builder(&self.dev.k.scan_partials)
                .arg(&mut self.scan_partial)
                .arg(&nchu)
                .launch(LaunchConfig {
                    grid_dim: (1, 1, 1),
                    block_dim: (1024, 1, 1),
                    shared_mem_bytes: 0,
                })
                .map_err(drv("scan"))?;
            s.launch_builder(&self.dev.k.scan_apply)
                .arg(&mut self.counter)
                .arg(&self.scan_partial)
                .arg(&ncu)
                .arg(&chu)
                .arg(&nchu)
                .launch(grid(nchunks))
                .map_err(drv("scan"))?;
        }
        Ok(())
    }

    /// Reorder fluid particles by cell (stable: ascending old index within a cell, as on CPU).
    fn reorder(&mut self) -> Result<()> {
        let s = self.dev.stream.clone();
        let n = self.n;
        let nu = n as u32;
        let ncu = self.ncells as u32;
        let k = &self.dev.k;
        s.memset_zeros(&mut self.counter).map_err(drv("memset"))?;
        unsafe {
            s.launch_builder(&k.count_cells)
                .arg(&self.cellw)
                .arg(&mut self.counter)
                .arg(&nu)
                .arg(&ncu)
                .launch(grid(n))
                .map_err(drv("reorder"))?;
        }
        self.scan_counter()?;
        let k = &self.dev.k;
        unsafe {
            // the permutation goes to `temp` (as u32), then into `cellw`
            s.launch_builder(&k.scatter)
                .arg(&self.cellw)
                .arg(&mut self.counter)
                .arg(&mut self.temp)
                .arg(&nu)
                .arg(&ncu)
                .launch(grid(n))
                .map_err(drv("reorder"))?;
            s.launch_builder(&k.sort_segments)
                .arg(&self.counter)
                .arg(&mut self.temp)
                .arg(&ncu)
                .launch(grid(self.ncells))
                .map_err(drv("reorder"))?;
            let perm = self
                .temp
                .transmute::<u32>(n)
                .ok_or_else(|| MpcError::Device("reorder scratch too small".into()))?;
            s.memcpy_dtod(&perm, &mut self.cellw.slice_mut(..n))
                .map_err(drv("reorder copy"))?;
        }
        for c in 0..3 {
            unsafe {
                s.launch_builder(&k.gather_f64)
                    .arg(&self.cellw)
                    .arg(&self.vel[c])
                    .arg(&mut self.temp)
                    .arg(&nu)
                    .launch(grid(n))
                    .map_err(drv("reorder"))?;
            }
            std::mem::swap(&mut self.vel[c], &mut self.temp);
        }
        for c in 0..3 {
            unsafe {
                s.launch_builder(&k.gather_f32)
                    .arg(&self.cellw)
                    .arg(&self.pos[c])
                    .arg(&mut self.temp)
                    .arg(&nu)
                    .launch(grid(n))
                    .map_err(drv("reorder"))?;
                let src = self
                    .temp
                    .transmute::<f32>(n)
                    .ok_or_else(|| MpcError::Device("reorder scratch too small".into()))?;
                s.memcpy_dtod(&src, &mut self.pos[c].slice_mut(..n))
                    .map_err(drv("reorder copy"))?;
            }
        }
        if let Some(sl) = self.slab.as_mut() {
            // the ids travel with their particles; free slots sorted last are dropped
            unsafe {
                let ids = sl
                    .ids
                    .transmute::<f32>(n)
                    .ok_or_else(|| MpcError::Device("slab id buffer too small".into()))?;
                s.launch_builder(&k.gather_f32)
                    .arg(&self.cellw)
                    .arg(&ids)
                    .arg(&mut self.temp)
                    .arg(&nu)
                    .launch(grid(n))
                    .map_err(drv("reorder"))?;
                let src = self
                    .temp
                    .transmute::<u32>(n)
                    .ok_or_else(|| MpcError::Device("reorder scratch too small".into()))?;
                s.memcpy_dtod(&src, &mut sl.ids.slice_mut(..n))
                    .map_err(drv("reorder copy"))?;
            }
            self.n -= sl.free_slots;
            sl.free_slots = 0;
        }
        Ok(())
    }

    /// Time every phase (synchronising after each; slower) or not; resets the timers.
    pub fn set_profiling(&mut self, on: bool) {
        self.profiling = on;
        self.phase_seconds = [0.0; PHASES];
    }

    /// Seconds spent per phase (see [`PHASE_NAMES`]) since profiling was switched on.
    pub fn phase_seconds(&self) -> [f64; PHASES] {
        self.phase_seconds
    }

    fn phase_start(&mut self) -> Result<()> {
        if self.profiling {
            self.synchronize()?;
            self.phase_mark = Some(std::time::Instant::now());
        }
        Ok(())
    }

    fn phase_end(&mut self, phase: usize) -> Result<()> {
        if self.profiling {
            self.synchronize()?;
            if let Some(t) = self.phase_mark.take() {
                self.phase_seconds[phase] += t.elapsed().as_secs_f64();
            }
            self.phase_mark = Some(std::time::Instant::now());
        }
        Ok(())
    }

    /// Queue the fluid collision with parameters `p` and the cell parameters in `cells`.
    fn launch_collide(&mut self, p: &KernelParams) -> Result<()> {
        let s = self.dev.stream.clone();
        let [px, py, pz] = &self.pos;
        let [vx, vy, vz] = &mut self.vel;
        unsafe {
            s.launch_builder(&self.dev.k.collide)
                .arg(p)
                .arg(px)
                .arg(py)
                .arg(pz)
                .arg(vx)
                .arg(vy)
                .arg(vz)
                .arg(&self.cellw)
                .arg(&self.cells)
                .arg(&mut self.report)
                .launch(grid(self.n))
                .map_err(drv("collide"))?;
        }
        Ok(())
    }

    /// Fused method: apply a pending fluid collision now.
    pub fn flush(&mut self) -> Result<()> {
        if let Some(pp) = self.pending.take() {
            self.launch_collide(&pp)?;
        }
        Ok(())
    }

    /// Queue one step of the fluid alone without reading anything back (the benchmark uses
    /// this directly). Coupled steps go through `begin_coupled` / `finish_coupled`.
    pub fn enqueue_step(&mut self, plan: &StepPlan) -> Result<()> {
        let p = self.params(plan, 0);
        self.phase_start()?;
        self.fluid_pass(&p)?; // ends phase 0
        self.phase_end(1)?; // no solutes here
        self.cell_pass(&p)?;
        self.phase_end(2)?;
        self.fluid_collide(plan, &p)?;
        self.phase_end(3)?;
        self.reorder_if(plan)?;
        self.phase_end(4)?;
        self.phase_mark = None;
        Ok(())
    }

    /// Steps 1-2 on the main stream: zero the report, stream, bin and sum the fluid (for the
    /// fused method also the pending collision of the previous step).
    fn fluid_pass(&mut self, p: &KernelParams) -> Result<()> {
        let s = self.dev.stream.clone();
        let n = self.n;
        let p = *p;
        s.memset_zeros(&mut self.report).map_err(drv("memset"))?;
        let margs = self.begin_migration()?;
        // 1-2: stream, bin, cell sums
        let pending = self.pending.take();
        let agg: u32 = matches!(
            self.method,
            CellSumMethod::Shared | CellSumMethod::FusedShared
        ) as u32;
        match self.method {
            CellSumMethod::Fused | CellSumMethod::FusedShared if pending.is_some() => {
                let pc = pending.unwrap_or_default();
                let alt = self.cells_alt.as_mut().ok_or_else(|| {
                    MpcError::Device("fused method without a second cell buffer".into())
                })?;
                s.memset_zeros(alt).map_err(drv("memset"))?;
                let k = &self.dev.k;
                let [px, py, pz] = &mut self.pos;
                let [vx, vy, vz] = &mut self.vel;
                unsafe {
                    s.launch_builder(&k.collide_stream_bin)
                        .arg(&pc)
                        .arg(&p)
                        .arg(px)
                        .arg(py)
                        .arg(pz)
                        .arg(vx)
                        .arg(vy)
                        .arg(vz)
                        .arg(&mut self.cellw)
                        .arg(&self.cells)
                        .arg(&mut *alt)
                        .arg(&mut self.report)
                        .arg(&agg)
                        .arg(&margs)
                        .launch(grid(n))
                        .map_err(drv("collide/stream/bin"))?;
                }
                std::mem::swap(&mut self.cells, alt);
            }
            CellSumMethod::Atomics
            | CellSumMethod::Warp
            | CellSumMethod::Shared
            | CellSumMethod::Fused
            | CellSumMethod::FusedShared => {
                s.memset_zeros(&mut self.cells).map_err(drv("memset"))?;
                let k = &self.dev.k;
                let f = if self.method == CellSumMethod::Atomics {
                    &k.stream_bin_atomic
                } else {
                    &k.stream_bin_warp
                };
                let [px, py, pz] = &mut self.pos;
                let [vx, vy, vz] = &mut self.vel;
                unsafe {
                    let mut b = s.launch_builder(f);
                    b.arg(&p)
                        .arg(px)
                        .arg(py)
                        .arg(pz)
                        .arg(vx)
                        .arg(vy)
                        .arg(vz)
                        .arg(&mut self.cellw)
                        .arg(&mut self.cells)
                        .arg(&mut self.report);
                    if self.method != CellSumMethod::Atomics {
                        b.arg(&agg);
                    }
                    b.arg(&margs);
                    b.launch(grid(n)).map_err(drv("stream/bin"))?;
                }
            }
            CellSumMethod::List if self.slab.is_some() => {
                return Err(MpcError::Device(
                    "the list cell-sum method runs on one GPU only; fix: unset \
                     MPCBOX_CUDA_METHOD or set it to fused"
                        .into(),
                ));
            }
            CellSumMethod::List => {
                let k = &self.dev.k;
                let empty = u32::MAX;
                let ncu = self.ncells as u32;
                let next = self
                    .next
                    .as_mut()
                    .ok_or_else(|| MpcError::Device("list method without next[]".into()))?;
                let [px, py, pz] = &mut self.pos;
                let [vx, vy, vz] = &mut self.vel;
                unsafe {
                    s.launch_builder(&k.fill_u32)
                        .arg(&mut self.counter)
                        .arg(&empty)
                        .arg(&ncu)
                        .launch(grid(self.ncells))
                        .map_err(drv("fill"))?;
                    s.launch_builder(&k.stream_bin_list)
                        .arg(&p)
                        .arg(&mut *px)
                        .arg(&mut *py)
                        .arg(&mut *pz)
                        .arg(&mut *vx)
                        .arg(&mut *vy)
                        .arg(&mut *vz)
                        .arg(&mut self.cellw)
                        .arg(&mut self.counter)
                        .arg(&mut *next)
                        .arg(&mut self.report)
                        .launch(grid(n))
                        .map_err(drv("stream/bin"))?;
                    s.launch_builder(&k.list_sums)
                        .arg(&p)
                        .arg(&self.counter)
                        .arg(&*next)
                        .arg(&*vx)
                        .arg(&*vy)
                        .arg(&*vz)
                        .arg(&self.cellw)
                        .arg(&mut self.cells)
                        .launch(grid(self.ncells))
                        .map_err(drv("list sums"))?;
                }
            }
        }
        self.end_migration()?;
        self.phase_end(0)?;
        Ok(())
    }

    /// Step 3: bin the uploaded solutes and add them to the cell sums.
    fn solute_bin(&mut self, p: &KernelParams, ns: usize) -> Result<()> {
        if ns == 0 {
            return Ok(());
        }
        let s = self.dev.stream.clone();
        let sb = self
            .solutes
            .as_mut()
            .ok_or_else(|| MpcError::Device("solute buffers missing".into()))?;
        unsafe {
            s.launch_builder(&self.dev.k.solute_bin)
                .arg(p)
                .arg(&sb.pos)
                .arg(&sb.vel)
                .arg(&sb.mass)
                .arg(&mut sb.cell)
                .arg(&mut sb.image)
                .arg(&mut self.cells)
                .launch(grid(ns))
                .map_err(drv("solute bin"))?;
        }
        Ok(())
    }

    /// Step 4, one thread per cell: sums to collision parameters.
    fn cell_pass(&mut self, p: &KernelParams) -> Result<()> {
        let s = self.dev.stream.clone();
        unsafe {
            s.launch_builder(&self.dev.k.cell_params)
                .arg(p)
                .arg(&mut self.cells)
                .arg(&mut self.report)
                .launch(grid(self.ncells))
                .map_err(drv("cell params"))?;
        }
        Ok(())
    }

    /// Step 5, solutes: collide in place on the device.
    fn solute_collide(&mut self, p: &KernelParams, ns: usize) -> Result<()> {
        let s = self.dev.stream.clone();
        let sb = self
            .solutes
            .as_mut()
            .ok_or_else(|| MpcError::Device("solute buffers missing".into()))?;
        unsafe {
            s.launch_builder(&self.dev.k.solute_collide)
                .arg(p)
                .arg(&sb.cell)
                .arg(&sb.image)
                .arg(&self.cells)
                .arg(&mut sb.vel)
                .launch(grid(ns))
                .map_err(drv("solute collide"))?;
        }
        Ok(())
    }

    /// Step 5, fluid: collide now, or (fused method) defer into the next step's pass unless
    /// this step's stress is measured or the fluid is reordered now.
    fn fluid_collide(&mut self, plan: &StepPlan, p: &KernelParams) -> Result<()> {
        let fused = matches!(
            self.method,
            CellSumMethod::Fused | CellSumMethod::FusedShared
        );
        let defer = fused && !plan.measure_stress && !(plan.reorder && self.n > 0);
        if defer {
            self.pending = Some(*p);
            Ok(())
        } else {
            self.launch_collide(p)
        }
    }

    /// Step 6: reorder the fluid by cell when the plan asks.
    fn reorder_if(&mut self, plan: &StepPlan) -> Result<()> {
        if plan.reorder && self.n > 0 {
            self.reorder()?;
        }
        Ok(())
    }

    /// Streams and exact-size pinned buffers for `ns` solutes.
    fn ensure_coupled_io(&mut self, ns: usize) -> Result<()> {
        if self.coupled.as_ref().is_some_and(|c| c.n == ns) {
            return Ok(());
        }
        let ctx = self.dev.ctx.clone();
        let (upload, download) = match self.coupled.take() {
            Some(c) => (c.upload, c.download),
            None => (
                ctx.new_stream().map_err(drv("stream"))?,
                ctx.new_stream().map_err(drv("stream"))?,
            ),
        };
        let pin = |len: usize, host_reads: bool| {
            // write-combined pages are fast to fill and to send, slow for the host to read
            let flags = if host_reads {
                0
            } else {
                cudarc::driver::sys::CU_MEMHOSTALLOC_WRITECOMBINED
            };
            unsafe { ctx.alloc_pinned_with_flags::<f64>(len.max(1), flags) }
                .map_err(drv("pinned host memory"))
        };
        self.coupled = Some(CoupledIo {
            upload,
            download,
            n: ns,
            pos: pin(3 * ns, false)?,
            vel: pin(3 * ns, false)?,
            mass: pin(ns, false)?,
            out: pin(3 * ns, true)?,
        });
        Ok(())
    }

    /// The report of the last enqueued step (waits for it).
    pub fn read_report(&self) -> Result<StepReport> {
        let mut r = [0.0f64; 4];
        self.dev
            .stream
            .memcpy_dtoh(&self.report, &mut r)
            .map_err(drv("report copy"))?;
        Ok(StepReport {
            relative_energy: r[0],
            relative_dof: r[1],
            kinetic_stress_sum: r[2],
            collisional_stress_sum: r[3],
        })
    }
}

impl Backend for CudaBackend {
    fn describe(&self) -> String {
        format!("{} ({} cell sums)", self.dev.describe(), self.method.name())
    }

    fn n_fluid(&self) -> usize {
        self.n
    }

    /// H200, 128³ × 10, fused: every 5 steps 15.5, every 10 17.8, every 20 18.5 G particle-steps/s.
    fn preferred_reorder_interval(&self) -> u64 {
        20
    }

    fn step(
        &mut self,
        plan: &StepPlan,
        solutes: Option<&mut SoluteBatch<'_>>,
    ) -> Result<StepReport> {
        match solutes {
            Some(b) if !b.is_empty() => {
                self.begin_coupled(plan, b.pos, b.vel, b.mass)?;
                self.finish_coupled(plan, b)
            }
            _ => {
                self.enqueue_step(plan)?;
                self.read_report()
            }
        }
    }

    fn cuda_ordinal(&self) -> Option<usize> {
        Some(self.dev.ordinal)
    }

    fn check_device_solutes(&mut self, solutes: &super::DeviceSolutes) -> Result<()> {
        self.check_device_solutes_here(solutes)
    }

    fn step_device_solutes(
        &mut self,
        plan: &StepPlan,
        solutes: &super::DeviceSolutes,
    ) -> Result<StepReport> {
        self.step_device_solutes_here(plan, solutes)
    }

    /// The solutes go to the GPU here (their copy), so `finish_coupled` needs only the
    /// velocity array to fill.
    fn keeps_coupled_inputs(&self) -> bool {
        true
    }

    /// Send the solutes up on the upload stream while the fluid streams on the main stream;
    /// see [`SoluteTransfer`] for the two ways.
    fn begin_coupled(
        &mut self,
        plan: &StepPlan,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<()> {
        if self.in_flight.is_some() {
            return Err(MpcError::Device(
                "begin_coupled twice without finish_coupled".into(),
            ));
        }
        let ns = pos.len();
        let p = self.params(plan, ns);
        if ns == 0 {
            self.fluid_pass(&p)?;
            self.in_flight = Some((p, 0));
            return Ok(());
        }
        self.ensure_solute_capacity(ns)?;
        self.ensure_coupled_io(ns)?;
        let mode = SoluteTransfer::from_env();
        // The previous step's solute kernels are finished (finish_coupled read the report), so
        // the device buffers may be overwritten.
        match mode {
            SoluteTransfer::Pinned => {
                // fluid kernels first (asynchronous): the GPU streams the fluid while the host
                // fills the pinned staging and the copy engine sends it up
                self.fluid_pass(&p)?;
                let io = self.coupled.as_mut().expect("made above");
                let sb = self.solutes.as_mut().expect("made above");
                // The pinned buffers' own events are not recorded while event tracking is off:
                // wait for the previous upload explicitly before refilling them.
                io.upload.synchronize().map_err(drv("upload stream"))?;
                parallel_copy(
                    io.pos.as_mut_slice().map_err(drv("pinned"))?,
                    pos.as_flattened(),
                );
                parallel_copy(
                    io.vel.as_mut_slice().map_err(drv("pinned"))?,
                    vel.as_flattened(),
                );
                parallel_copy(io.mass.as_mut_slice().map_err(drv("pinned"))?, mass);
                io.upload
                    .memcpy_htod(&io.pos, &mut sb.pos.slice_mut(..3 * ns))
                    .map_err(drv("solute upload"))?;
                io.upload
                    .memcpy_htod(&io.vel, &mut sb.vel.slice_mut(..3 * ns))
                    .map_err(drv("solute upload"))?;
                io.upload
                    .memcpy_htod(&io.mass, &mut sb.mass.slice_mut(..ns))
                    .map_err(drv("solute upload"))?;
            }
            SoluteTransfer::Pageable => {
                // fluid kernels first (asynchronous), then the copies, which return when done:
                // the GPU streams the fluid while the host feeds the copy engine
                self.fluid_pass(&p)?;
                let io = self.coupled.as_ref().expect("made above");
                let sb = self.solutes.as_mut().expect("made above");
                io.upload
                    .memcpy_htod(pos.as_flattened(), &mut sb.pos.slice_mut(..3 * ns))
                    .map_err(drv("solute upload"))?;
                io.upload
                    .memcpy_htod(vel.as_flattened(), &mut sb.vel.slice_mut(..3 * ns))
                    .map_err(drv("solute upload"))?;
                io.upload
                    .memcpy_htod(mass, &mut sb.mass.slice_mut(..ns))
                    .map_err(drv("solute upload"))?;
            }
        }
        self.in_flight = Some((p, ns));
        Ok(())
    }

    /// Bin and collide the solutes as soon as they are up; their velocities go down on the
    /// download stream while the fluid collides on the main stream.
    fn finish_coupled(
        &mut self,
        plan: &StepPlan,
        solutes: &mut SoluteBatch<'_>,
    ) -> Result<StepReport> {
        let Some((p, ns)) = self.in_flight.take() else {
            return Err(MpcError::Device(
                "finish_coupled without begin_coupled".into(),
            ));
        };
        if ns != solutes.vel.len() {
            return Err(MpcError::Device(format!(
                "finish_coupled for {} solutes, begun with {ns}",
                solutes.vel.len()
            )));
        }
        if ns > 0 {
            let io = self.coupled.as_ref().expect("made in begin_coupled");
            self.dev.stream.join(&io.upload).map_err(drv("event"))?;
        }
        self.solute_bin(&p, ns)?;
        self.cell_pass(&p)?;
        if ns == 0 {
            self.fluid_collide(plan, &p)?;
            self.reorder_if(plan)?;
            return self.read_report();
        }
        self.solute_collide(&p, ns)?;
        let solutes_done = self.dev.stream.record_event(None).map_err(drv("event"))?;
        self.fluid_collide(plan, &p)?;
        self.reorder_if(plan)?;
        let io = self.coupled.as_mut().expect("made in begin_coupled");
        let sb = self.solutes.as_ref().expect("made in begin_coupled");
        io.download.wait(&solutes_done).map_err(drv("event"))?;
        match SoluteTransfer::from_env() {
            SoluteTransfer::Pinned => {
                io.download
                    .memcpy_dtoh(&sb.vel.slice(..3 * ns), &mut io.out)
                    .map_err(drv("solute download"))?;
                // explicit wait: the pinned buffer's event is not recorded with tracking off
                io.download.synchronize().map_err(drv("solute download"))?;
                let out = io.out.as_slice().map_err(drv("solute download"))?;
                parallel_copy(solutes.vel.as_flattened_mut(), &out[..3 * ns]);
            }
            SoluteTransfer::Pageable => {
                // returns when the copy is done, while the fluid collision runs on
                io.download
                    .memcpy_dtoh(&sb.vel.slice(..3 * ns), solutes.vel.as_flattened_mut())
                    .map_err(drv("solute download"))?;
            }
        }
        self.read_report()
    }

    fn moments(&mut self) -> Result<FluidMoments> {
        self.flush()?;
        let s = self.dev.stream.clone();
        let ly = self.phys.cells[1] as usize;
        s.memset_zeros(&mut self.moment_sums)
            .map_err(drv("memset"))?;
        s.memset_zeros(&mut self.prof_sum).map_err(drv("memset"))?;
        s.memset_zeros(&mut self.prof_cnt).map_err(drv("memset"))?;
        let shared = (ly * 16) as u32;
        let use_shared: u32 = (shared <= 40 * 1024) as u32;
        let mut cfg = grid(self.n);
        if use_shared == 1 {
            cfg.shared_mem_bytes = shared;
        }
        let p = self.params(&self.phys.plan(0, false, false), 0);
        unsafe {
            s.launch_builder(&self.dev.k.moments)
                .arg(&p)
                .arg(&self.pos[1])
                .arg(&self.vel[0])
                .arg(&self.vel[1])
                .arg(&self.vel[2])
                .arg(&self.cellw)
                .arg(&mut self.moment_sums)
                .arg(&mut self.prof_sum)
                .arg(&mut self.prof_cnt)
                .arg(&use_shared)
                .launch(cfg)
                .map_err(drv("moments"))?;
        }
        let m = s.clone_dtoh(&self.moment_sums).map_err(drv("copy"))?;
        let profile_sum = s.clone_dtoh(&self.prof_sum).map_err(drv("copy"))?;
        let profile_count = s.clone_dtoh(&self.prof_cnt).map_err(drv("copy"))?;
        Ok(FluidMoments {
            particles: self.live() as u64,
            momentum: [m[0], m[1], m[2]],
            kinetic_energy: m[3],
            profile_sum,
            profile_count,
        })
    }

    fn download(&mut self) -> Result<FluidState> {
        self.flush()?;
        let s = &self.dev.stream;
        let n = self.n;
        let mut st = FluidState::default();
        for k in 0..3 {
            let mut p = s.clone_dtoh(&self.pos[k]).map_err(drv("download"))?;
            p.truncate(n);
            st.pos[k] = p;
            let mut v = s.clone_dtoh(&self.vel[k]).map_err(drv("download"))?;
            v.truncate(n);
            st.vel[k] = v;
        }
        Ok(st)
    }

    fn upload(&mut self, state: &FluidState) -> Result<()> {
        state
            .validate(&self.phys)
            .map_err(|e| MpcError::Device(format!("uploaded fluid state: {e}")))?;
        if state.len() != self.n {
            return Err(MpcError::Device(format!(
                "uploaded fluid state has {} particles, the CUDA backend holds {}; fix: upload a \
                 state of the same size or open a new backend",
                state.len(),
                self.n
            )));
        }
        // a pending collision belonged to the state being replaced
        self.pending = None;
        let s = &self.dev.stream;
        let n = self.n;
        for k in 0..3 {
            s.memcpy_htod(&state.pos[k][..], &mut self.pos[k].slice_mut(..n))
                .map_err(drv("upload"))?;
            s.memcpy_htod(&state.vel[k][..], &mut self.vel[k].slice_mut(..n))
                .map_err(drv("upload"))?;
        }
        s.synchronize().map_err(drv("upload"))?;
        Ok(())
    }
}

/// Open the CUDA backend for `device` (already resolved to one ordinal).
pub fn open_backend(
    cfg: &Config,
    phys: &Physics,
    state: Option<&FluidState>,
    ordinal: usize,
) -> Result<Box<dyn Backend>> {
    let method = CellSumMethod::from_env();
    let be = CudaBackend::open(cfg, phys, state, ordinal, method)?;
    tracing::info!(
        "CUDA backend on {} ({} cell sums, {} particles, {} device bytes)",
        be.dev.describe(),
        method.name(),
        be.n,
        be.device_bytes
    );
    Ok(Box::new(be))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footprint_is_at_most_50_bytes_per_particle() {
        assert_eq!(BYTES_PER_PARTICLE, 48);
        assert_eq!(BYTES_PER_CELL, 68);
        assert!(
            device_bytes(10, 1, CellSumMethod::List) > device_bytes(10, 1, CellSumMethod::Atomics)
        );
        for m in CellSumMethod::ALL {
            let (bp, bc) = m.bytes_per_particle_and_cell();
            assert!(bp <= 52 && bc <= 132, "{m:?}: {bp} B/particle, {bc} B/cell");
            assert_eq!(CellSumMethod::parse(m.name()), Some(m));
        }
        assert_eq!(
            CellSumMethod::DEFAULT.bytes_per_particle_and_cell(),
            (48, 132)
        );
    }

    #[test]
    fn oversize_is_refused_with_a_fix() {
        let e = check_fits(
            "test gpu",
            3_000_000_000,
            300_000_000,
            CellSumMethod::Atomics,
            80 << 30,
        )
        .unwrap_err();
        match e {
            MpcError::OutOfMemory {
                fix, needed_bytes, ..
            } => {
                assert!(needed_bytes > 80 << 30);
                assert!(fix.contains("fewer"), "{fix}");
            }
            other => panic!("expected OutOfMemory, got {other:?}"),
        }
        assert!(check_fits("g", 1000, 100, CellSumMethod::Atomics, 80 << 30).is_ok());
        assert!(matches!(
            check_fits("g", 10, (1 << 30) + 1, CellSumMethod::Atomics, u64::MAX),
            Err(MpcError::Device(_))
        ));
        assert!(matches!(
            check_fits("g", 1 << 33, 1 << 20, CellSumMethod::Atomics, u64::MAX),
            Err(MpcError::Device(_))
        ));
    }

    #[test]
    fn methods_parse() {
        assert_eq!(CellSumMethod::parse("list"), Some(CellSumMethod::List));
        assert_eq!(
            CellSumMethod::parse(" Atomics"),
            Some(CellSumMethod::Atomics)
        );
        assert_eq!(CellSumMethod::parse("x"), None);
    }
}
