//! A fresh fluid generated on the GPU (`kernels/init.cu`), equal bit for bit to
//! `FluidState::initial`: the same per-particle Philox streams, the CPU's chunked mean and
//! energy sums reproduced chunk by chunk, then the same shift and scale.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::device::{drv, grid};
use super::CudaBackend;
use crate::config::{Config, InitialFlow};
use crate::error::{MpcError, Result};
use crate::state::REDUCTION_CHUNK;

impl CudaBackend {
    /// Fill the fluid with the initial state of `cfg`, generated on the GPU with the same
    /// per-particle Philox streams and the same chunked reductions as `FluidState::initial`.
    pub(super) fn generate_initial_state(&mut self, cfg: &Config) -> Result<()> {
        let n = self.n;
        if n as u64 != cfg.n_fluid() {
            return Err(MpcError::Device("initial state size mismatch".into()));
        }
        self.pending = None;
        self.launch_init_particles(cfg)?;
        if n > 1 {
            self.remove_mean_and_set_temperature(cfg)?;
        }
        if cfg.initial_flow == InitialFlow::Steady && cfg.shear_rate != 0.0 {
            self.add_steady_flow()?;
        }
        self.synchronize()
    }

    /// Positions uniform in the box and thermal velocities, one Philox stream per particle.
    fn launch_init_particles(&mut self, cfg: &Config) -> Result<()> {
        let s = self.dev.stream.clone();
        let nu = self.n as u32;
        let sigma = (cfg.kt / cfg.mass).sqrt();
        let len = self.phys.length;
        let [px, py, pz] = &mut self.fluid.pos;
        let [vx, vy, vz] = &mut self.fluid.vel;
        // SAFETY: every array holds at least n = self.n slots; threads
        // past n return.
        unsafe {
            self.dev
                .k
                .init_particles(
                    &s,
                    grid(self.n),
                    &cfg.seed,
                    &len[0],
                    &len[1],
                    &len[2],
                    &sigma,
                    px,
                    py,
                    pz,
                    vx,
                    vy,
                    vz,
                    &nu,
                )
                .map_err(drv("initial state"))?;
        }
        Ok(())
    }

    /// As `FluidState::initial`: subtract the mean velocity, then scale to the temperature.
    fn remove_mean_and_set_temperature(&mut self, cfg: &Config) -> Result<()> {
        let (mean, _) = self.mean_velocity_and_energy(REDUCTION_CHUNK)?;
        for (c, m) in mean.into_iter().enumerate() {
            self.shift_scale(c, m, 1.0, 0)?;
        }
        let (_, ke) = self.mean_velocity_and_energy(REDUCTION_CHUNK)?;
        let target = 1.5 * (self.n as f64 - 1.0) * cfg.kt / cfg.mass;
        if ke > 0.0 {
            let f = (target / ke).sqrt();
            for c in 0..3 {
                self.shift_scale(c, 0.0, f, 1)?;
            }
        }
        Ok(())
    }

    /// The steady shear profile added to vx (`InitialFlow::Steady`).
    fn add_steady_flow(&mut self) -> Result<()> {
        let s = self.dev.stream.clone();
        let p = self.params(&self.phys.plan(0, false, false), 0);
        // SAFETY: the parameters by value (p.n_fluid = self.n), both arrays hold self.n slots;
        // threads past it return.
        unsafe {
            self.dev
                .k
                .add_flow(
                    &s,
                    grid(self.n),
                    &p,
                    &self.fluid.pos[1],
                    &mut self.fluid.vel[0],
                )
                .map_err(drv("initial flow"))?;
        }
        Ok(())
    }

    /// `FluidState::mean_velocity_and_energy` on the GPU: chunk sums, added on the host in order.
    fn mean_velocity_and_energy(&mut self, chunk: usize) -> Result<([f64; 3], f64)> {
        let n = self.n;
        let nchunks = n.div_ceil(chunk).max(1);
        let s = self.dev.stream.clone();
        let mut partial = s.alloc_zeros::<f64>(4 * nchunks).map_err(drv("alloc"))?;
        let (nu, cu, ncu) = (n as u32, chunk as u32, nchunks as u32);
        let cfg = LaunchConfig {
            grid_dim: ((nchunks as u32).div_ceil(64), 1, 1),
            block_dim: (64, 1, 1),
            shared_mem_bytes: 0,
        };
        let [vx, vy, vz] = &self.fluid.vel;
        // SAFETY: the velocities hold n values, partial 4 × nchunks doubles; one thread per
        // chunk, threads past nchunks return. Read back below on the same stream.
        unsafe {
            self.dev
                .k
                .chunk_sums(&s, cfg, vx, vy, vz, &mut partial, &nu, &cu, &ncu)
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

    /// Velocity component `component`: minus `sub` (op 0) or times `mul` (op 1).
    fn shift_scale(&mut self, component: usize, sub: f64, mul: f64, op: u32) -> Result<()> {
        let s = self.dev.stream.clone();
        let nu = self.n as u32;
        // SAFETY: v holds self.n values; threads past n return.
        unsafe {
            self.dev
                .k
                .shift_scale(
                    &s,
                    grid(self.n),
                    &mut self.fluid.vel[component],
                    &sub,
                    &mul,
                    &op,
                    &nu,
                )
                .map_err(drv("initial state"))?;
        }
        Ok(())
    }
}

/// Particles per block of `mpc_init_count` and `mpc_init_slab` (`MPC_INIT_TILE`).
const INIT_TILE: u64 = 2048;
/// Threads per block of those kernels (`MPC_INIT_THREADS`).
const INIT_THREADS: u32 = 256;

/// The run constants the initial-state kernels draw with.
struct Draw {
    seed: u64,
    length: [f64; 3],
    sigma: f64,
    n: u64,
}

impl Draw {
    fn of(cfg: &Config, phys: &crate::physics::Physics) -> Draw {
        Draw {
            seed: cfg.seed,
            length: phys.length,
            sigma: (cfg.kt / cfg.mass).sqrt(),
            n: cfg.n_fluid(),
        }
    }

    fn blocks(&self) -> u64 {
        self.n.div_ceil(INIT_TILE).max(1)
    }
}

/// A slab's share of the initial state before its GPU holds it: how many particles its layers
/// keep, and where each block of indices puts its first (exclusive prefix of the blocks'
/// counts, on the device for `mpc_init_slab`).
pub(in crate::backend::cuda) struct InitialCount {
    pub(in crate::backend::cuda) kept: u64,
    offsets: cudarc::driver::CudaSlice<u64>,
    layers: [u32; 2],
}

/// The particles of the initial state of `cfg` whose layer lies in `layers` ([lo, hi)), counted
/// on `dev` (every index drawn there: no other GPU or the host is needed).
pub(in crate::backend::cuda) fn count_initial(
    dev: &super::CudaDevice,
    cfg: &Config,
    phys: &crate::physics::Physics,
    layers: [u32; 2],
) -> Result<InitialCount> {
    let d = Draw::of(cfg, phys);
    let blocks = d.blocks();
    if blocks > u32::MAX as u64 {
        return Err(MpcError::Device(format!(
            "{} particles are more than one launch draws; fix: a smaller box",
            d.n
        )));
    }
    let s = dev.stream.clone();
    let mut counts = s
        .alloc_zeros::<u32>(blocks as usize)
        .map_err(drv("alloc"))?;
    let ly = phys.cells[1];
    // SAFETY: mpc_init_count(u64 seed, double lx, ly, lz, u64 n, u32 y_lo, y_hi, ly_cells, u32
    // *counts): the argument types match; counts holds one slot per block of MPC_INIT_TILE
    // indices, the grid's size; indices past n are skipped.
    unsafe {
        s.launch_builder(&dev.k.init_count)
            .arg(&d.seed)
            .arg(&d.length[0])
            .arg(&d.length[1])
            .arg(&d.length[2])
            .arg(&d.n)
            .arg(&layers[0])
            .arg(&layers[1])
            .arg(&ly)
            .arg(&mut counts)
            .launch(LaunchConfig {
                grid_dim: (blocks as u32, 1, 1),
                block_dim: (INIT_THREADS, 1, 1),
                shared_mem_bytes: 0,
            })
            .map_err(drv("initial count"))?;
    }
    let counts = s.clone_dtoh(&counts).map_err(drv("copy"))?;
    let mut offsets = Vec::with_capacity(counts.len());
    let mut kept = 0u64;
    for c in counts {
        offsets.push(kept);
        kept += u64::from(c);
    }
    let offsets = s.clone_htod(&offsets).map_err(drv("copy"))?;
    Ok(InitialCount {
        kept,
        offsets,
        layers,
    })
}

/// [`crate::fluid_parts::chunked_sums`] of the initial thermal velocities less `mean` over the
/// chunks of `REDUCTION_CHUNK` particles, drawn on `devs` (each a contiguous share of the
/// chunks, queued on every GPU before any is read) and added on the host in chunk order: bit
/// for bit the host's sums.
fn initial_sums(devs: &[&super::CudaDevice], d: &Draw, mean: [f64; 3]) -> Result<[f64; 4]> {
    let chunks = d.n.div_ceil(REDUCTION_CHUNK as u64);
    let g = devs.len().max(1) as u64;
    let mut queued = Vec::with_capacity(devs.len());
    for (k, dev) in devs.iter().enumerate() {
        let (lo, hi) = (chunks * k as u64 / g, chunks * (k as u64 + 1) / g);
        let count = (hi - lo) as u32;
        let s = dev.stream.clone();
        let mut partial = s
            .alloc_zeros::<f64>(4 * count.max(1) as usize)
            .map_err(drv("alloc"))?;
        let chunk = REDUCTION_CHUNK as u32;
        if count > 0 {
            // SAFETY: mpc_init_chunk_sums(u64 seed, double lx, ly, lz, sigma, u64 n, u32 chunk,
            // u64 first_chunk, u32 nchunks, double m0, m1, m2, double *partial): the argument
            // types match; partial holds 4 doubles per chunk of this share, one thread each;
            // threads past nchunks return.
            unsafe {
                s.launch_builder(&dev.k.init_chunk_sums)
                    .arg(&d.seed)
                    .arg(&d.length[0])
                    .arg(&d.length[1])
                    .arg(&d.length[2])
                    .arg(&d.sigma)
                    .arg(&d.n)
                    .arg(&chunk)
                    .arg(&lo)
                    .arg(&count)
                    .arg(&mean[0])
                    .arg(&mean[1])
                    .arg(&mean[2])
                    .arg(&mut partial)
                    .launch(LaunchConfig {
                        grid_dim: (count.div_ceil(64), 1, 1),
                        block_dim: (64, 1, 1),
                        shared_mem_bytes: 0,
                    })
                    .map_err(drv("initial sums"))?;
            }
        }
        queued.push((s, partial, count as usize));
    }
    let mut t = [0.0; 4];
    for (s, partial, count) in queued {
        let parts = s.clone_dtoh(&partial).map_err(drv("copy"))?;
        for p in parts.chunks_exact(4).take(count) {
            for k in 0..4 {
                t[k] += p[k];
            }
        }
    }
    Ok(t)
}

/// The mean velocity removed and the factor that sets the temperature, as
/// `FluidState::initial` finds them (None for a single particle: it keeps its draw).
fn settle(devs: &[&super::CudaDevice], cfg: &Config, d: &Draw) -> Result<Option<([f64; 3], f64)>> {
    if d.n <= 1 {
        return Ok(None);
    }
    let nf = d.n as f64;
    let t = initial_sums(devs, d, [0.0; 3])?;
    let mean = [t[0] / nf, t[1] / nf, t[2] / nf];
    let ke = initial_sums(devs, d, mean)?[3];
    let target = 1.5 * (nf - 1.0) * cfg.kt / cfg.mass;
    let scale = if ke > 0.0 { (target / ke).sqrt() } else { 1.0 };
    Ok(Some((mean, scale)))
}

impl CudaBackend {
    /// Slab mode: this slab's share of the initial state of `cfg` (a box without walls), drawn
    /// on its GPU as `count` found it: bit for bit the particles of `FluidState::initial` in
    /// its layers, in ascending index. `devs`: every GPU of this process (they share the
    /// velocity sums).
    fn draw_slab(
        &mut self,
        cfg: &Config,
        count: &InitialCount,
        settled: Option<([f64; 3], f64)>,
    ) -> Result<()> {
        let d = Draw::of(cfg, &self.phys);
        let kept = count.kept as usize;
        let sl = self.slab.as_ref().expect("slab mode");
        let labels = sl.args.ids;
        if kept > sl.capacity {
            return Err(MpcError::Device(format!(
                "{}: {kept} particles exceed the slab's {} slots (please report it)",
                self.dev.describe(),
                sl.capacity
            )));
        }
        self.pending = None;
        let s = self.dev.stream.clone();
        let ly = self.phys.cells[1];
        let (settle, (mean, scale)) = match settled {
            Some(x) => (1u32, x),
            None => (0u32, ([0.0; 3], 1.0)),
        };
        let shear = match cfg.initial_flow == InitialFlow::Steady {
            true => cfg.shear_rate,
            false => 0.0,
        };
        let [px, py, pz] = &mut self.fluid.pos;
        let [vx, vy, vz] = &mut self.fluid.vel;
        // SAFETY: mpc_init_slab(u64 seed, double lx, ly, lz, sigma, u64 n, u32 y_lo, y_hi,
        // ly_cells, const u64 *offsets, u32 settle, double m0, m1, m2, scale, shear, float *px,
        // *py, *pz, double *vx, *vy, *vz, u32 *ids): the argument types match; offsets holds
        // one entry per block, as counted with the same draw and layers, so the kernel writes
        // slots [0, kept), within the capacity checked above, which every array (and the
        // labels, when not null) holds.
        unsafe {
            s.launch_builder(&self.dev.k.init_slab)
                .arg(&d.seed)
                .arg(&d.length[0])
                .arg(&d.length[1])
                .arg(&d.length[2])
                .arg(&d.sigma)
                .arg(&d.n)
                .arg(&count.layers[0])
                .arg(&count.layers[1])
                .arg(&ly)
                .arg(&count.offsets)
                .arg(&settle)
                .arg(&mean[0])
                .arg(&mean[1])
                .arg(&mean[2])
                .arg(&scale)
                .arg(&shear)
                .arg(px)
                .arg(py)
                .arg(pz)
                .arg(vx)
                .arg(vy)
                .arg(vz)
                .arg(&labels)
                .launch(LaunchConfig {
                    grid_dim: (d.blocks() as u32, 1, 1),
                    block_dim: (INIT_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                })
                .map_err(drv("initial slab"))?;
        }
        self.set_slab_particles(kept)
    }
}

/// Each of `slabs` (this process's, one or more per GPU) given its share of the initial state
/// of `cfg`, drawn on its GPU (`counts` from [`count_initial`], in order).
pub(in crate::backend::cuda) fn draw_slabs(
    slabs: &mut [CudaBackend],
    cfg: &Config,
    counts: &[InitialCount],
) -> Result<()> {
    let Some(first) = slabs.first() else {
        return Ok(());
    };
    let d = Draw::of(cfg, &first.phys);
    let settled = {
        let devs: Vec<&super::CudaDevice> = slabs.iter().map(|s| &s.dev).collect();
        settle(&devs, cfg, &d)?
    };
    for (s, c) in slabs.iter_mut().zip(counts) {
        s.draw_slab(cfg, c, settled)?;
    }
    for s in slabs.iter() {
        s.synchronize()?;
    }
    Ok(())
}
