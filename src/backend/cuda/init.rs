//! A fresh fluid generated on the GPU (`kernels/init.cu`), equal bit for bit to
//! `FluidState::initial`: the same per-particle Philox streams, the CPU's chunked mean and
//! energy sums reproduced chunk by chunk, then the same shift and scale.

use cudarc::driver::LaunchConfig;

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
