//! MD solutes in an MPC solvent: N MD steps, then one MPC step with the solutes embedded in the
//! collision through [`Solvent::step_with_solutes`] (the same public API external MD codes
//! use). The solvent time step is h = N·dt.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::config::MdConfig;
use super::engine::Md;
use super::gpu::{GpuMd, MdBackend};
use super::observe::{write_xyz_frame, ChainObserver, ChainSample};
use crate::error::{MpcError, Result};
use crate::solvent::Solvent;

pub const MD_CSV: &str = "md.csv";
pub const TRAJECTORY_XYZ: &str = "trajectory.xyz";
pub const MD_SUMMARY_JSON: &str = "md_summary.json";

/// The MD side of a coupled run.
pub struct Coupling {
    /// The CPU engine; with a GPU engine it holds the host copy of the system (positions and
    /// velocities synced after every block of MD steps) and is not stepped.
    pub md: Md,
    /// The GPU engine (`md.backend` Auto with a usable GPU, or Cuda).
    pub gpu: Option<GpuMd>,
    /// The GPU engine hands its beads to a fluid on the same GPU as device pointers (no host
    /// round trip); `md.sys` is then refreshed only when it is observed.
    device_resident: bool,
    pub steps_per_collision: u32,
    observer: ChainObserver,
    csv: Option<(PathBuf, BufWriter<std::fs::File>)>,
    xyz: Option<(PathBuf, BufWriter<std::fs::File>)>,
    observable_interval: u64,
    trajectory_interval: u64,
    last: ChainSample,
}

impl Coupling {
    /// An MD engine for `md` on top of `solvent` (same box, kT, seed), without output files.
    pub fn new(md_cfg: &MdConfig, solvent: &Solvent) -> Result<Coupling> {
        let md = md_cfg.build(solvent.config())?;
        // The GPU engine runs on the fluid's (first) GPU, so the beads can stay there.
        let fluid_gpu = solvent.cuda_ordinal();
        let gpu = if md_cfg.backend.use_gpu()? {
            // same particle order as the CPU engine (after its initial reordering)
            match GpuMd::new(
                md.sys.clone(),
                md.ff.clone(),
                md.thermostat,
                md.settings().clone(),
                fluid_gpu.unwrap_or(0),
            )
            .and_then(|mut g| g.set_walls(md.walls().copied()).map(|_| g))
            {
                Ok(g) => Some(g),
                Err(e) if md_cfg.backend == MdBackend::Auto => {
                    tracing::warn!("MD on the CPU: the GPU MD engine could not start: {e}");
                    None
                }
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        let device_resident = gpu.as_ref().is_some_and(|g| Some(g.ordinal()) == fluid_gpu)
            && std::env::var("MPCBOX_COUPLING").as_deref() != Ok("host");
        let observer = ChainObserver::new(&md.sys);
        let last = observer.sample(&md.sys);
        Ok(Coupling {
            md,
            gpu,
            device_resident,
            steps_per_collision: md_cfg.steps_per_collision,
            observer,
            csv: None,
            xyz: None,
            observable_interval: md_cfg.observable_interval,
            trajectory_interval: md_cfg.trajectory_interval,
            last,
        })
    }

    /// Write `md.csv` and `trajectory.xyz` into `dir` from now on.
    pub fn with_output(mut self, dir: &Path) -> Result<Coupling> {
        std::fs::create_dir_all(dir).map_err(|e| MpcError::io(dir, e))?;
        let open = |name: &str| -> Result<(PathBuf, BufWriter<std::fs::File>)> {
            let p = dir.join(name);
            let f = std::fs::File::create(&p).map_err(|e| MpcError::io(&p, e))?;
            Ok((p, BufWriter::new(f)))
        };
        if self.observable_interval > 0 {
            let (p, mut w) = open(MD_CSV)?;
            writeln!(
                w,
                "mpc_step,time,md_kinetic_energy,md_potential_energy,md_momentum_x,md_momentum_y,md_momentum_z,rg_mean,rg2_mean,com_msd,max_bond"
            )
            .map_err(|e| MpcError::io(&p, e))?;
            self.csv = Some((p, w));
        }
        if self.trajectory_interval > 0 {
            let (p, mut w) = open(TRAJECTORY_XYZ)?;
            write_xyz_frame(&mut w, &self.md.sys, 0.0).map_err(|e| MpcError::io(&p, e))?;
            self.xyz = Some((p, w));
        }
        Ok(self)
    }

    /// How the beads reach the fluid: "device-resident (GPU N)", "host round trip" or "CPU".
    pub fn path_description(&self) -> String {
        match &self.gpu {
            Some(g) if self.device_resident => format!("device-resident (GPU {})", g.ordinal()),
            Some(_) => "GPU MD, host round trip".into(),
            None => "CPU MD".into(),
        }
    }

    /// Hand the beads over through host memory even when they could stay on the GPU (for
    /// comparisons; `MPCBOX_COUPLING=host` does the same for a whole run).
    pub fn use_host_round_trip(&mut self) {
        self.device_resident = false;
    }

    /// Bring `md.sys` up to date with the GPU engine (positions, velocities, images).
    fn sync_host(&mut self) -> Result<()> {
        if let Some(g) = &mut self.gpu {
            let s = g.system()?;
            let sys = &mut self.md.sys;
            sys.pos.copy_from_slice(&s.pos);
            sys.vel.copy_from_slice(&s.vel);
            sys.image.copy_from_slice(&s.image);
        }
        Ok(())
    }

    /// The MD system as it is now (downloaded from the GPU engine when needed).
    pub fn system(&mut self) -> Result<&super::System> {
        self.sync_host()?;
        Ok(&self.md.sys)
    }

    /// One coupled step: N MD steps, then the MPC collision of fluid and solutes.
    pub fn step(&mut self, solvent: &mut Solvent) -> Result<()> {
        match &mut self.gpu {
            Some(g) if self.device_resident => {
                // energies only where observed (below): they would cross PCIe every collision
                g.advance(self.steps_per_collision as u64)?;
                solvent.step_with_device_solutes(&g.device_solutes())?;
                g.velocities_changed()?;
            }
            Some(g) => {
                g.run(self.steps_per_collision as u64)?;
                let mass = self.md.sys.masses();
                let s = g.system()?;
                let sys = &mut self.md.sys;
                sys.pos.copy_from_slice(&s.pos);
                sys.vel.copy_from_slice(&s.vel);
                sys.image.copy_from_slice(&s.image);
                solvent.step_with_solutes(&sys.pos, &mut sys.vel, &mass)?;
                g.set_velocities(&sys.vel)?;
            }
            None => {
                self.md.run(self.steps_per_collision as u64)?;
                let mass = self.md.sys.masses();
                let sys = &mut self.md.sys;
                solvent.step_with_solutes(&sys.pos, &mut sys.vel, &mass)?;
                self.md.velocities_changed()?;
            }
        }
        let k = solvent.step_count();
        let time = solvent.time();
        let observe = self.observable_interval > 0 && k % self.observable_interval == 0;
        let frame = self.trajectory_interval > 0 && k % self.trajectory_interval == 0;
        if self.device_resident && (observe || frame) {
            self.sync_host()?;
            if let Some(g) = &mut self.gpu {
                g.compute_forces()?; // energy and virial of this configuration
            }
        }
        if observe {
            self.last = self.observer.sample(&self.md.sys);
            let p = self.md.momentum();
            let s = self.last;
            let ke = self.md.kinetic_energy();
            let pe = self.potential_energy();
            if let Some((path, w)) = &mut self.csv {
                writeln!(
                    w,
                    "{k},{time},{ke:e},{pe:e},{:e},{:e},{:e},{:.6},{:.6},{:.6},{:.6}",
                    p[0], p[1], p[2], s.rg_mean, s.rg2_mean, s.com_msd, s.max_bond
                )
                .map_err(|e| MpcError::io(path, e))?;
            }
        }
        if frame {
            if let Some((path, w)) = &mut self.xyz {
                write_xyz_frame(w, &self.md.sys, time).map_err(|e| MpcError::io(path, e))?;
            }
        }
        Ok(())
    }

    /// Potential energy of the last evaluation (GPU engine when there is one).
    pub fn potential_energy(&self) -> f64 {
        match &self.gpu {
            Some(g) => g.potential_energy(),
            None => self.md.potential_energy(),
        }
    }

    /// MD steps done.
    pub fn md_steps(&self) -> u64 {
        match &self.gpu {
            Some(g) => g.step_count(),
            None => self.md.step_count(),
        }
    }

    /// Chain observables now.
    pub fn chain_sample(&mut self) -> Result<ChainSample> {
        self.sync_host()?;
        Ok(self.observer.sample(&self.md.sys))
    }

    /// Flush files and write `md_summary.json`.
    pub fn finish(&mut self, dir: &Path) -> Result<ChainSample> {
        for (p, w) in [&mut self.csv, &mut self.xyz].into_iter().flatten() {
            w.flush().map_err(|e| MpcError::io(p, e))?;
        }
        let s = self.chain_sample()?;
        if let (true, Some(g)) = (self.device_resident, &mut self.gpu) {
            g.compute_forces()?;
        }
        let summary = serde_json::json!({
            "md_particles": self.md.sys.len(),
            "md_steps": self.md_steps(),
            "md_backend": self.gpu.as_ref().map_or("cpu".to_string(), |g| g.describe()),
            "md_dt": self.md.settings().dt,
            "steps_per_collision": self.steps_per_collision,
            "neighbor": if self.md.uses_verlet_list() { "verlet" } else { "all-pairs" },
            "chains": s,
            "md_kinetic_energy": self.md.kinetic_energy(),
            "md_potential_energy": self.potential_energy(),
        });
        let p = dir.join(MD_SUMMARY_JSON);
        std::fs::create_dir_all(dir).map_err(|e| MpcError::io(dir, e))?;
        std::fs::write(
            &p,
            serde_json::to_string_pretty(&summary).expect("json") + "\n",
        )
        .map_err(|e| MpcError::io(&p, e))?;
        Ok(s)
    }
}
