//! MD solutes in an MPC solvent: N MD steps, then one MPC step with the solutes embedded in the
//! collision through [`Solvent::step_with_solutes`] (the same public API external MD codes
//! use). The solvent time step is h = N·dt. Under shear both sides use the same Lees-Edwards
//! offset at every hand-over (`md::settings::ShearFlow`); on measured steps the solutes'
//! stress is taken before the collision, from the last MD force evaluation and the velocities
//! (`md::rheology`), and summed with the fluid's. [`Coupling`] is a [`JobStep`]: its
//! checkpoints hold the MD engine with the fluid, and [`Coupling::resume`] continues one.

mod output;
mod summary;

use std::path::Path;

pub use output::{CsvRow, MD_CSV, TRAJECTORY_GSD, TRAJECTORY_XYZ};
pub use summary::SolutionSummary;

use super::config::MdConfig;
use super::engine::{Md, MdState};
use super::gpu::{GpuMd, MdBackend};
use super::observe::{ChainObserver, ChainSample};
use super::rheology::{conformation, pressure_tensor, SoluteStats};
use crate::checkpoint::{Checkpoint, MdCheckpoint};
use crate::error::{MpcError, Result};
use crate::run::{JobStep, Summary};
use crate::solvent::Solvent;
use output::CoupledOutput;

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
    cfg: MdConfig,
    observer: ChainObserver,
    out: Option<CoupledOutput>,
    last: ChainSample,
    shear_rate: f64,
    /// The solutes' pressure tensor of the last measured step (before its collision).
    last_pressure: Option<[f64; 6]>,
    stats: SoluteStats,
}

impl Coupling {
    /// An MD engine for `md` on top of `solvent` (same box, kT, seed, shear), without output
    /// files.
    pub fn new(md_cfg: &MdConfig, solvent: &Solvent) -> Result<Coupling> {
        let md = md_cfg.build(solvent.config())?;
        Self::assemble(md_cfg, solvent, md, None)
    }

    /// Continue a coupled run from a checkpoint `ck` of it (same config): the engine's
    /// particles, forces, step and lists, the chain observer's reference and the averages.
    pub fn resume(md_cfg: &MdConfig, solvent: &Solvent, ck: &MdCheckpoint) -> Result<Coupling> {
        let mut md = md_cfg.build(solvent.config())?;
        md.restore(&ck.state)?;
        Self::assemble(md_cfg, solvent, md, Some(ck))
    }

    fn assemble(
        md_cfg: &MdConfig,
        solvent: &Solvent,
        md: Md,
        ck: Option<&MdCheckpoint>,
    ) -> Result<Coupling> {
        let gpu = Self::gpu_engine(md_cfg, solvent, &md, ck.map(|c| &c.state))?;
        let fluid_gpu = solvent.cuda_ordinal();
        let device_resident = gpu.as_ref().is_some_and(|g| Some(g.ordinal()) == fluid_gpu)
            && std::env::var("MPCBOX_COUPLING").as_deref() != Ok("host");
        let observer = match ck {
            Some(c) => ChainObserver::from_start(c.chain_start.iter().copied().collect()),
            None => ChainObserver::new(&md.sys),
        };
        let last = observer.sample(&md.sys);
        Ok(Coupling {
            md,
            gpu,
            device_resident,
            steps_per_collision: md_cfg.steps_per_collision,
            cfg: md_cfg.clone(),
            observer,
            out: None,
            last,
            shear_rate: solvent.config().shear_rate,
            last_pressure: None,
            stats: ck.map_or_else(SoluteStats::new, |c| c.stats.clone()),
        })
    }

    /// The GPU engine when `md.backend` asks for one, on the fluid's (first) GPU so that the
    /// beads can stay there; restored from `state` on resume.
    fn gpu_engine(
        md_cfg: &MdConfig,
        solvent: &Solvent,
        md: &Md,
        state: Option<&MdState>,
    ) -> Result<Option<GpuMd>> {
        if !md_cfg.backend.use_gpu()? {
            return Ok(None);
        }
        // same particle order as the CPU engine (after its initial reordering, or restored)
        let g = GpuMd::new(
            md.sys.clone(),
            md.ff.clone(),
            md.thermostat,
            md.settings().clone(),
            solvent.cuda_ordinal().unwrap_or(0),
        )
        .and_then(|mut g| g.set_walls(md.walls().copied()).map(|_| g));
        match g {
            Ok(mut g) => {
                if let Some(st) = state {
                    g.restore(st)?;
                }
                Ok(Some(g))
            }
            Err(e) if md_cfg.backend == MdBackend::Auto => {
                tracing::warn!("MD on the CPU: the GPU MD engine could not start: {e}");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Write `md.csv` and the trajectory into `dir` from now on (fresh files).
    pub fn with_output(self, dir: &Path) -> Result<Coupling> {
        self.with_output_from(dir, None)
    }

    /// Write into `dir`; `resume_step`: continue the files of a run resumed at that MPC step
    /// (the GSD file drops frames written after it; CSV and XYZ are appended to).
    pub fn with_output_from(mut self, dir: &Path, resume_step: Option<u64>) -> Result<Coupling> {
        let traj = (self.cfg.trajectory_interval > 0).then_some(self.cfg.trajectory_format);
        let csv = self.cfg.observable_interval > 0;
        self.sync_host()?;
        let mut out = CoupledOutput::open(dir, &self.md.sys, csv, traj, resume_step)?;
        if traj.is_some() && resume_step.is_none() {
            out.write_frame(&self.md.sys, 0, 0.0)?;
        }
        self.out = Some(out);
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

    /// Bring `md.sys` up to date with the GPU engine (positions, velocities, images, offset).
    fn sync_host(&mut self) -> Result<()> {
        if let Some(g) = &mut self.gpu {
            let s = g.system()?;
            let sys = &mut self.md.sys;
            sys.pos.copy_from_slice(&s.pos);
            sys.vel.copy_from_slice(&s.vel);
            sys.image.copy_from_slice(&s.image);
            sys.lees_edwards = s.lees_edwards;
        }
        Ok(())
    }

    /// The MD system as it is now (downloaded from the GPU engine when needed).
    pub fn system(&mut self) -> Result<&super::System> {
        self.sync_host()?;
        Ok(&self.md.sys)
    }

    /// N MD steps (energies and virial at the last one when `measure`), leaving `md.sys`
    /// current when measured or when the CPU engine runs.
    fn run_md(&mut self, measure: bool) -> Result<()> {
        let n = self.steps_per_collision as u64;
        match &mut self.gpu {
            // energies only where measured or observed: they would cross PCIe every collision
            Some(g) if self.device_resident && !measure => g.advance(n)?,
            Some(g) => {
                g.run(n)?;
                self.sync_host()?;
            }
            None => self.md.run(n)?,
        }
        Ok(())
    }

    /// The MPC collision of fluid and solutes.
    fn collide(&mut self, solvent: &mut Solvent) -> Result<()> {
        match &mut self.gpu {
            Some(g) if self.device_resident => {
                solvent.step_with_device_solutes(&g.device_solutes())?;
                g.velocities_changed()?;
            }
            Some(g) => {
                let mass = self.md.sys.masses();
                let sys = &mut self.md.sys;
                solvent.step_with_solutes(&sys.pos, &mut sys.vel, &mass)?;
                g.set_velocities(&sys.vel)?;
            }
            None => {
                let mass = self.md.sys.masses();
                let sys = &mut self.md.sys;
                solvent.step_with_solutes(&sys.pos, &mut sys.vel, &mass)?;
                self.md.velocities_changed()?;
            }
        }
        Ok(())
    }

    /// The solutes' (pressure tensor, its kinetic part) now, from the last force evaluation.
    fn solute_pressure(&self) -> ([f64; 6], [f64; 6]) {
        let virial = match &self.gpu {
            Some(g) => g.report().virial_tensor,
            None => self.md.report().virial_tensor,
        };
        let sys = &self.md.sys;
        (
            pressure_tensor(sys, self.shear_rate, virial),
            pressure_tensor(sys, self.shear_rate, [0.0; 6]),
        )
    }

    /// One coupled step: N MD steps, then the MPC collision of fluid and solutes.
    pub fn step(&mut self, solvent: &mut Solvent) -> Result<()> {
        // the solutes' stress on the fluid's measured steps and on this engine's observed ones
        let next = solvent.step_count() + 1;
        let observed = self.cfg.observable_interval > 0 && next % self.cfg.observable_interval == 0;
        let measure = solvent.stress_measured_next() || (self.shear_rate != 0.0 && observed);
        let sample = solvent.sampled_next() && solvent.stress_measured_next();
        self.run_md(measure)?;
        let pressure = measure.then(|| self.solute_pressure());
        let conf = measure.then(|| conformation(&self.md.sys));
        self.collide(solvent)?;
        self.last_pressure = pressure.map(|p| p.0);
        if let (true, Some((p, kin)), Some(c)) = (sample, pressure, conf) {
            let rate = self.shear_rate;
            let (fk, fc) = solvent.last_stress_xy().unwrap_or((0.0, 0.0));
            self.stats.viscosity_solute.push(-p[3] / rate);
            self.stats.viscosity_solute_kinetic.push(-kin[3] / rate);
            self.stats
                .viscosity_solution
                .push(-(fk + fc) / rate - p[3] / rate);
            self.stats.push_conformation(&c);
        }
        self.observe(solvent, measure)
    }

    /// `md.csv` rows and trajectory frames of the step just done.
    fn observe(&mut self, solvent: &Solvent, measured: bool) -> Result<()> {
        let k = solvent.step_count();
        let time = solvent.time();
        let every = |i: u64| i > 0 && k % i == 0;
        let observe = every(self.cfg.observable_interval);
        let frame = every(self.cfg.trajectory_interval);
        if self.device_resident && (observe || frame) {
            self.sync_host()?;
            if let Some(g) = &mut self.gpu {
                g.compute_forces()?; // energy and virial of this configuration
            }
        }
        if observe {
            self.last = self.observer.sample(&self.md.sys);
            let row = CsvRow {
                step: k,
                time,
                kinetic_energy: self.md.kinetic_energy(),
                potential_energy: self.potential_energy(),
                momentum: self.md.momentum(),
                chains: self.last,
                conformation: conformation(&self.md.sys),
                stress_xy: if measured {
                    self.last_pressure.map(|p| p[3])
                } else {
                    None
                },
            };
            if let Some(o) = &mut self.out {
                o.write_row(&row)?;
            }
        }
        if frame {
            if let Some(o) = &mut self.out {
                o.write_frame(&self.md.sys, k, time)?;
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

    /// The solutes' time averages so far.
    pub fn solute_stats(&self) -> &SoluteStats {
        &self.stats
    }

    /// The MD side of a checkpoint now.
    pub fn md_checkpoint(&mut self) -> Result<MdCheckpoint> {
        let state = match &mut self.gpu {
            Some(g) => g.state()?,
            None => self.md.state(),
        };
        Ok(MdCheckpoint {
            state,
            chain_start: self
                .observer
                .start()
                .iter()
                .map(|(&m, &c)| (m, c))
                .collect(),
            stats: self.stats.clone(),
        })
    }

    /// The solution's viscosity and its parts (None without shear).
    pub fn solution_summary(&self, solvent: &Solvent) -> Option<SolutionSummary> {
        if self.shear_rate == 0.0 {
            return None;
        }
        let cfg = solvent.config();
        let theory = crate::physics::theory::srd_viscosity(
            cfg.particles_per_cell as f64,
            cfg.kt,
            cfg.time_step,
            cfg.mass,
            cfg.rotation_angle(),
        );
        Some(SolutionSummary::new(
            self.shear_rate,
            solvent.stats(),
            &self.stats,
            theory,
            self.cfg.relaxation_time,
        ))
    }

    /// Flush files and write `md_summary.json`.
    pub fn finish(&mut self, dir: &Path) -> Result<ChainSample> {
        if let Some(o) = &mut self.out {
            o.flush()?;
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
            "conformation": conformation(&self.md.sys),
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

/// A coupled job for [`crate::run::run_job_steps`]: its checkpoints carry the MD state and its
/// summary the solution's viscosity.
impl JobStep for Coupling {
    fn advance(&mut self, solvent: &mut Solvent) -> Result<()> {
        self.step(solvent)
    }

    fn checkpoint(&mut self, solvent: &mut Solvent) -> Result<Checkpoint> {
        let mut ck = solvent.checkpoint()?;
        ck.md = Some(self.md_checkpoint()?);
        Ok(ck)
    }

    fn summarize(&mut self, solvent: &Solvent, summary: &mut Summary) -> Result<()> {
        summary.solution = self.solution_summary(solvent).map(|s| serde_json::json!(s));
        Ok(())
    }
}
