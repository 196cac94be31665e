//! MD solutes in an MPC solvent: N MD steps, then one MPC step with the solutes embedded in the
//! collision through [`Solvent::step_with_solutes`] (the same public API external MD codes
//! use). The solvent time step is h = N·dt. Under shear both sides use the same Lees-Edwards
//! offset at every hand-over (`md::settings::ShearFlow`); on measured steps the solutes'
//! stress is taken before the collision, from the last MD force evaluation and the velocities
//! (`md::rheology`), and summed with the fluid's. [`Coupling`] is a [`JobStep`]: its
//! checkpoints hold the MD engine with the fluid, and [`Coupling::resume`] continues one.

mod engine;
mod output;
mod summary;

use std::path::Path;

pub use engine::{GpuEngine, MdEngine};
pub use output::{CsvRow, MD_CSV, TRAJECTORY_GSD, TRAJECTORY_XYZ};
pub use summary::SolutionSummary;

use super::engine::{Md, MdState};
use super::from_config::MdConfig;
use super::gpu::{GpuMd, MdBackend, SlabMd};
use super::observe::{ChainObserver, ChainSample};
use super::rheology::SoluteStats;
use super::system::System;
use crate::checkpoint::MdCheckpoint;
use crate::error::{MpcError, Result};
use crate::run::{JobStep, Summary};
use crate::solvent::Solvent;
use output::CoupledOutput;

pub const MD_SUMMARY_JSON: &str = "md_summary.json";

/// The MD side of a coupled run.
pub struct Coupling {
    /// The engine that integrates the beads (CPU, or GPU: `md.backend`).
    engine: Box<dyn MdEngine>,
    pub steps_per_collision: u32,
    cfg: MdConfig,
    observer: ChainObserver,
    out: Option<CoupledOutput>,
    last: ChainSample,
    shear_rate: f64,
    /// The solutes' pressure tensor of the last measured step (before its collision).
    last_pressure: Option<[f64; 6]>,
    stats: SoluteStats,
    /// The output directory's lock while this run writes there.
    lock: Option<crate::output_dir::OutputLock>,
    /// The solvent's run, whose directory the MD files go into.
    run_id: String,
    /// The fluid streams while the MD steps run, where the engine can
    /// ([`MdEngine::overlaps_fluid`]).
    overlap: bool,
}

impl Coupling {
    /// An MD engine for `md` on top of `solvent` (same box, kT, seed, shear), without output
    /// files.
    pub fn new(md_cfg: &MdConfig, solvent: &Solvent) -> Result<Coupling> {
        let md = md_cfg.build(solvent.config())?;
        Self::assemble(md_cfg, solvent, md, None)
    }

    /// [`Coupling::new`] with the engine `md` already built from `md_cfg`
    /// ([`MdConfig::build_with`]).
    pub fn with_md(md_cfg: &MdConfig, solvent: &Solvent, md: Md) -> Result<Coupling> {
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
        let observer = match ck {
            Some(c) => ChainObserver::from_start(c.chain_start.iter().copied().collect()),
            None => ChainObserver::new(&md.sys),
        };
        let last = observer.sample(&md.sys);
        let state = ck.map(|c| &c.state);
        let engine: Box<dyn MdEngine> = match Self::slab_engine(md_cfg, solvent, &md, state)? {
            Some(e) => Box::new(e),
            None => match Self::gpu_engine(md_cfg, solvent, &md, state)? {
                Some(g) => Box::new(GpuEngine::new(g, solvent.cuda_ordinal())),
                None => Box::new(md),
            },
        };
        Ok(Coupling {
            engine,
            steps_per_collision: md_cfg.steps_per_collision,
            cfg: md_cfg.clone(),
            observer,
            out: None,
            last,
            shear_rate: solvent.config().shear_rate,
            last_pressure: None,
            stats: ck.map_or_else(SoluteStats::new, |c| c.stats.clone()),
            lock: None,
            run_id: solvent.run_id().to_string(),
            overlap: true,
        })
    }

    /// The GPU engine decomposed over the fluid's slabs, when the fluid is cut into slabs on
    /// GPUs (of this process, or over MPI ranks: each rank integrates its slabs' beads) and
    /// the MD runs on a GPU with the beads on the device (not `MPCBOX_COUPLING=host`, nor
    /// `MPCBOX_MD_SLABS=off`, which keeps the MD on the first GPU, or, over ranks, whole on
    /// every rank's CPU); restored from `state`.
    fn slab_engine(
        md_cfg: &MdConfig,
        solvent: &Solvent,
        md: &Md,
        state: Option<&MdState>,
    ) -> Result<Option<SlabMd>> {
        let Some(places) = solvent.slab_places().filter(|p| p.len() > 1) else {
            return Ok(None);
        };
        let knobs = crate::knobs::knobs();
        if knobs.is("MPCBOX_COUPLING", "host")
            || knobs.is("MPCBOX_MD_SLABS", "off")
            || !md_cfg.backend.use_gpu()?
        {
            return Ok(None);
        }
        let mut e = SlabMd::new(
            md.sys.clone(),
            md.ff.clone(),
            md.thermostat,
            md.settings().clone(),
            md.walls().cloned(),
            &places,
        )?;
        if let Some(st) = state {
            e.restore(st)?;
        }
        Ok(Some(e))
    }

    /// The GPU engine when `md.backend` asks for one, on the fluid's (first) GPU so that the
    /// beads can stay there; restored from `state` on resume.
    fn gpu_engine(
        md_cfg: &MdConfig,
        solvent: &Solvent,
        md: &Md,
        state: Option<&MdState>,
    ) -> Result<Option<GpuMd>> {
        if crate::ranks::size() > 1 {
            // without the fluid's GPU slabs every rank integrates all beads and must agree on
            // them bit for bit: the CPU engine does (the GPU's sums in atomic order would not)
            if md_cfg.backend == MdBackend::Cuda {
                return Err(crate::error::MpcError::Config(crate::error::ConfigError {
                    field: "md.backend".into(),
                    problem: format!(
                        "Cuda over {} MPI ranks without the decomposed engine (the fluid is \
                         not cut into GPU slabs, or MPCBOX_COUPLING=host / MPCBOX_MD_SLABS=off \
                         is set): the bundled MD would run whole on every rank",
                        crate::ranks::size()
                    ),
                    fix: "the fluid on GPUs (device: Cuda([..]) or AllGpus) without those \
                          settings, or md.backend: Cpu or Auto (the MD then runs on every \
                          rank's CPU)"
                        .into(),
                }));
            }
            return Ok(None);
        }
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
        .and_then(|mut g| g.set_walls(md.walls().cloned()).map(|_| g));
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
        // every rank takes part in a decomposed engine's gather (once per change)
        self.engine.system()?;
        if !crate::ranks::is_root() {
            return Ok(self); // over MPI ranks rank 0 writes the files
        }
        // the run's output directory has one owner (taken again by the job loop)
        self.lock = Some(crate::output_dir::OutputLock::acquire(dir)?);
        // and holds no other run's files (the caller claims it first to overwrite them)
        crate::output_dir::claim(dir, "output.directory", &self.run_id, false)?;
        let h = self.engine.settings().dt * self.steps_per_collision as f64;
        let resume = resume_step.map(|k| (k, k as f64 * h));
        let mut out = CoupledOutput::open(dir, self.engine.system()?, csv, traj, resume)?;
        if traj.is_some() && resume_step.is_none() {
            out.write_frame(self.engine.system()?, 0, 0.0)?;
        }
        self.out = Some(out);
        Ok(self)
    }

    /// How the beads reach the fluid: "device-resident (GPU N)", "GPU MD, host round trip" or
    /// "CPU MD".
    pub fn path_description(&self) -> String {
        self.engine.path_description()
    }

    /// Hand the beads over through host memory even when they could stay on the GPU (for
    /// comparisons; `MPCBOX_COUPLING=host` does the same for a whole run).
    pub fn use_host_round_trip(&mut self) {
        self.engine.use_host_round_trip();
    }

    /// The engine (for its settings, list builds, device).
    pub fn engine(&self) -> &dyn MdEngine {
        self.engine.as_ref()
    }

    /// The engine, to drive its steps apart from the coupled loop (benchmarks' breakdowns).
    pub fn engine_mut(&mut self) -> &mut dyn MdEngine {
        self.engine.as_mut()
    }

    /// Whether the MD runs on a GPU.
    pub fn md_on_gpu(&self) -> bool {
        self.engine.gpu_ordinal().is_some()
    }

    /// The MD system as it is now (downloaded from the GPU engine when needed).
    pub fn system(&mut self) -> Result<&System> {
        self.engine.system()
    }

    /// The beads' kinetic temperature now (3N − 3 degrees of freedom).
    pub fn temperature(&mut self) -> Result<f64> {
        let dof = (3 * self.engine.len()).saturating_sub(3).max(1) as f64;
        Ok(2.0 * self.engine.kinetic_energy()? / dof)
    }

    /// Let the fluid stream while the MD steps run, where the engine can (`on`, the default
    /// unless `MPCBOX_MD_OVERLAP=off`), or step them one after the other: the same physics,
    /// so tests compare the two.
    pub fn set_fluid_overlap(&mut self, on: bool) {
        self.overlap = on;
    }

    /// Whether the next step lets the fluid stream while the MD steps run.
    pub fn overlaps_fluid(&self) -> bool {
        self.overlap && self.engine.overlaps_fluid()
    }

    /// One coupled step: N MD steps, then the MPC collision of fluid and solutes. On measured
    /// steps the solutes' stress and conformation are taken before the collision, as
    /// reductions on the engine's device. With an engine that overlaps the fluid, the fluid's
    /// streaming is queued first and runs on the GPUs while the MD steps do.
    pub fn step(&mut self, solvent: &mut Solvent) -> Result<()> {
        // the solutes' stress on the fluid's measured steps and on this engine's observed ones
        let next = solvent.step_count() + 1;
        let observed =
            self.cfg.observable_interval > 0 && next.is_multiple_of(self.cfg.observable_interval);
        let measure = solvent.stress_measured_next() || (self.shear_rate != 0.0 && observed);
        let sample = solvent.sampled_next() && solvent.stress_measured_next();
        // the fluid streams towards this collision while the MD steps run
        let beside = self.overlap
            && self.engine.overlaps_fluid()
            && solvent.begin_fluid_step(self.engine.len())?;
        self.engine.set_beside_fluid(beside);
        self.engine
            .advance(self.steps_per_collision as u64, measure)?;
        // the conformation first: a decomposed engine gathers the beads for it, and the
        // pressure then reads them where they are
        let conf = match sample {
            true => Some(self.engine.conformation()?),
            false => None,
        };
        let pressure = match measure {
            true => Some(self.engine.solute_pressure(self.shear_rate)?),
            false => None,
        };
        self.engine.collide(solvent)?;
        self.last_pressure = pressure.map(|p| p.0);
        if let (Some((p, kin)), Some(c)) = (pressure, conf) {
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
        let every = |i: u64| i > 0 && k.is_multiple_of(i);
        let observe = every(self.cfg.observable_interval);
        let frame = every(self.cfg.trajectory_interval);
        if observe {
            self.engine.refresh_energies()?; // energy and virial of this configuration
            let conformation = self.engine.conformation()?;
            let (kinetic_energy, momentum) = self.engine.kinetic_energy_and_momentum()?;
            self.last = self.engine.chain_sample(&self.observer)?;
            let row = CsvRow {
                step: k,
                time,
                kinetic_energy,
                potential_energy: self.potential_energy(),
                momentum,
                chains: self.last,
                conformation,
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
            // every rank takes part in a decomposed engine's gather; rank 0 writes
            let sys = self.engine.system()?;
            if let Some(o) = &mut self.out {
                o.write_frame(sys, k, time)?;
            }
        }
        Ok(())
    }

    /// Potential energy of the last evaluation.
    pub fn potential_energy(&self) -> f64 {
        self.engine.report().potential_energy()
    }

    /// MD steps done.
    pub fn md_steps(&self) -> u64 {
        self.engine.step_count()
    }

    /// Chain observables now.
    pub fn chain_sample(&mut self) -> Result<ChainSample> {
        self.engine.chain_sample(&self.observer)
    }

    /// The solutes' time averages so far.
    pub fn solute_stats(&self) -> &SoluteStats {
        &self.stats
    }

    /// The MD side of a checkpoint now.
    pub fn md_checkpoint(&mut self) -> Result<MdCheckpoint> {
        Ok(MdCheckpoint {
            state: self.engine.state()?,
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
        self.engine.refresh_energies()?;
        let summary = serde_json::json!({
            "md_particles": self.engine.len(),
            "md_steps": self.md_steps(),
            "md_backend": self.engine.describe(),
            "md_dt": self.engine.settings().dt,
            "steps_per_collision": self.steps_per_collision,
            "md_list_builds": self.engine.list_builds(),
            "neighbor": if self.engine.uses_verlet_list() { "verlet" } else { "all-pairs" },
            "chains": s,
            "conformation": self.engine.conformation()?,
            "md_kinetic_energy": self.engine.kinetic_energy()?,
            "md_potential_energy": self.potential_energy(),
        });
        let p = dir.join(MD_SUMMARY_JSON);
        if !crate::ranks::is_root() {
            return Ok(s);
        }
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

    /// The output written so far is on disk first: a resume from this checkpoint keeps what
    /// precedes it and drops what follows.
    fn md_checkpoint(&mut self) -> Result<Option<MdCheckpoint>> {
        if let Some(o) = &mut self.out {
            o.flush()?;
        }
        Coupling::md_checkpoint(self).map(Some)
    }

    fn output_times(&self) -> crate::report::OutputTimes {
        self.out
            .as_ref()
            .map(|o| o.times().clone())
            .unwrap_or_default()
    }

    fn summarize(&mut self, solvent: &Solvent, summary: &mut Summary) -> Result<()> {
        summary.solution = self.solution_summary(solvent).map(|s| serde_json::json!(s));
        Ok(())
    }
}
