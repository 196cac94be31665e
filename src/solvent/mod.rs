//! [`Solvent`]: the fluid as a black box. Built from a config, it owns a backend and advances
//! one MPC step per call, optionally with solutes embedded in the collision. The CLI, the C and
//! Python bindings and the bundled MD engine all drive the fluid through this type.

use crate::backend::{
    self, Backend, DeviceSolutes, FluidMoments, HostHandover, SoluteBatch, StepReport,
};
use crate::config::Config;
use crate::error::{MpcError, Result};
use crate::physics::{Physics, StepPlan};
use crate::state::FluidState;
use crate::stats::RunStats;

mod begun;
mod checkpoints;
mod profile;
mod solute_checks;

/// Instantaneous observables of the fluid.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Observables {
    pub step: u64,
    pub time: f64,
    pub particles: u64,
    pub momentum: [f64; 3],
    pub kinetic_energy: f64,
    /// kT from velocities relative to the cell velocity, before the last collision.
    pub temperature: f64,
    /// Π_xy (kinetic, collisional) of the last step, when it was measured.
    pub stress_xy: Option<(f64, f64)>,
    /// Between walls: the force the fluid exerted on each wall surface during the last step
    /// (momentum given per unit time; slit: bottom, top; pipe: the wall, then zeros).
    pub wall_force: Option<[[f64; 3]; 2]>,
}

pub use crate::backend::MAX_SOLUTE_COORDINATE;

pub struct Solvent {
    config: Config,
    phys: Physics,
    backend: Box<dyn Backend>,
    step: u64,
    stats: RunStats,
    last: StepReport,
    last_measured: bool,
    /// Config fields a resume was allowed to change (recorded in the summary).
    changed_on_resume: Vec<String>,
    pending: Option<PendingStep>,
    /// A step whose fluid part is queued ([`Solvent::begin_fluid_step`]): its plan, whether
    /// it is sampled, and the number of solutes that will finish it.
    fluid_begun: Option<(StepPlan, bool, usize)>,
    /// Why a begun step's fluid streamed but its finish failed past the point where it could
    /// be tried again: every later step and read is refused (`begun.rs`).
    unfinished: Option<String>,
    /// Samples in the backend's flow-field sums since they were last taken.
    field_samples: u64,
    /// The run this fluid belongs to: its checkpoints and output directories carry it.
    run_id: String,
    /// The phase profile asked for by `MPCBOX_TIME_PHASES` (`profile.rs`).
    profile: Option<profile::PhaseProfile>,
}

/// A coupled step between `begin_step` and `finish_step`.
struct PendingStep {
    plan: StepPlan,
    sample: bool,
    /// Number of solutes handed over.
    n: usize,
    pos: Vec<[f64; 3]>,
    vel: Vec<[f64; 3]>,
    mass: Vec<f64>,
}

impl Solvent {
    /// A fresh fluid on the device the config asks for.
    pub fn new(config: Config) -> Result<Solvent> {
        config.validate()?;
        let phys = Physics::from_config(&config);
        let backend = backend::factory::open(&config, &phys, None)?;
        Self::assemble(config, phys, backend, 0, None)
    }

    /// A solvent on a backend built by the caller (tests, benchmarks).
    pub fn with_backend(config: Config, backend: Box<dyn Backend>) -> Result<Solvent> {
        config.validate()?;
        let phys = Physics::from_config(&config);
        Self::assemble(config, phys, backend, 0, None)
    }

    fn assemble(
        config: Config,
        phys: Physics,
        backend: Box<dyn Backend>,
        step: u64,
        stats: Option<RunStats>,
    ) -> Result<Solvent> {
        let stats = stats.unwrap_or_else(|| RunStats::new(phys.profile_bins()));
        let mut solvent = Solvent {
            config,
            phys,
            backend,
            step,
            stats,
            last: StepReport::default(),
            last_measured: false,
            changed_on_resume: Vec::new(),
            pending: None,
            fluid_begun: None,
            unfinished: None,
            field_samples: 0,
            run_id: crate::output_dir::new_run_id(),
            profile: profile::PhaseProfile::from_env()?,
        };
        solvent.profile_tick(); // MPCBOX_TIME_PHASES=0 (or a step already past): from now
        Ok(solvent)
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn physics(&self) -> &Physics {
        &self.phys
    }

    /// The CUDA GPU the fluid lives on (the first one of several), or None on the CPU: where
    /// device-resident solutes must live.
    pub fn cuda_ordinal(&self) -> Option<usize> {
        self.backend.cuda_ordinal()
    }

    pub fn backend_description(&self) -> String {
        self.backend.describe()
    }

    /// Time each phase of the following steps (the devices waited for after each phase, so
    /// the steps are slower), or stop; the timers start again from zero. For benchmarks.
    pub fn time_phases(&mut self, on: bool) {
        self.backend.time_phases(on);
    }

    /// Seconds per named phase since [`Solvent::time_phases`] switched timing on (empty where
    /// the backend has no phase timers).
    pub fn timed_phases(&self) -> Vec<(&'static str, f64)> {
        self.backend.timed_phases()
    }

    /// Steps completed.
    pub fn step_count(&self) -> u64 {
        self.step
    }

    pub fn time(&self) -> f64 {
        self.step as f64 * self.phys.h
    }

    pub fn n_fluid(&self) -> usize {
        self.backend.n_fluid()
    }

    pub fn stats(&self) -> &RunStats {
        &self.stats
    }

    /// Whether step `step` enters the time averages.
    fn is_sample(&self, step: u64) -> bool {
        let o = &self.config.output;
        step >= o.equilibration_steps
            && (step - o.equilibration_steps).is_multiple_of(o.sample_interval)
    }

    /// Whether step `step` writes an observables row.
    pub fn is_observable_step(&self, step: u64) -> bool {
        let k = self.config.output.observable_interval;
        k > 0 && (step + 1).is_multiple_of(k)
    }

    /// Record the config fields a resume changed on purpose (`--allow-change`).
    pub fn set_changed_on_resume(&mut self, fields: Vec<String>) {
        self.changed_on_resume = fields;
    }

    /// The config fields a resume changed on purpose.
    pub fn changed_on_resume(&self) -> &[String] {
        &self.changed_on_resume
    }

    /// Whether the next step measures the xy stress (under shear, on sampled and observed
    /// steps): when a coupled MD engine measures the solutes' stress too.
    pub fn stress_measured_next(&self) -> bool {
        self.next_plan().0.measure_stress
    }

    /// Whether the next step enters the time averages.
    pub fn sampled_next(&self) -> bool {
        self.is_sample(self.step)
    }

    /// Π_xy (kinetic, collisional) of the last step when it was measured (no reduction on
    /// the backend, unlike [`Solvent::observables`]).
    pub fn last_stress_xy(&self) -> Option<(f64, f64)> {
        self.last_measured.then(|| self.stress_of(&self.last))
    }

    /// One MPC step of the plain fluid.
    pub fn step(&mut self) -> Result<StepReport> {
        self.advance(None, Ok(()))
    }

    /// One MPC step with solutes in the collision: `vel` is updated in place. Bad input is
    /// rejected before anything changes.
    pub fn step_with_solutes(
        &mut self,
        pos: &[[f64; 3]],
        vel: &mut [[f64; 3]],
        mass: &[f64],
    ) -> Result<StepReport> {
        // over ranks that each pass their own solutes, a bad one stops every rank (in advance)
        let checked = self.check_host_input(HostHandover::OneCall, pos, vel, mass);
        if pos.is_empty() || checked.is_err() {
            return self.advance(None, checked);
        }
        let mut batch = SoluteBatch { pos, vel, mass };
        self.advance(Some(&mut batch), checked)
    }

    /// Over MPI ranks (`mpirun`, the `mpi` feature): `true` when each rank passes its own
    /// solutes to [`Solvent::step_with_solutes`] (an MD code with its own decomposition: each
    /// solute goes to the rank owning its cell and its new velocity comes back), `false` (the
    /// default) when every rank passes the same ones (the bundled MD engine). Every rank must
    /// call every step, with or without solutes. Nothing changes on one process.
    pub fn set_solutes_per_rank(&mut self, on: bool) -> Result<()> {
        self.backend.set_solutes_per_rank(on)
    }

    /// [`Solvent::step_with_solutes`] for solutes that live on the fluid's GPU (an MD code on the
    /// same GPU, CuPy/PyTorch arrays, a C code's device buffers): no host round trip. Bad input
    /// (host or foreign pointers, short buffers, NaN/inf, masses ≤ 0) is rejected before
    /// anything changes. Ordered with the caller's work on `solutes.stream`.
    pub fn step_with_device_solutes(&mut self, solutes: &DeviceSolutes) -> Result<StepReport> {
        self.refuse_split()?;
        if solutes.n == 0 && self.fluid_begun.is_none() {
            return self.advance(None, Ok(()));
        }
        self.refuse_unfinished()?;
        self.backend.check_device_solutes(solutes)?;
        let (plan, sample) = match self.plan_for(solutes.n) {
            Ok(planned) => planned,
            // over ranks the others test their input in the step, agreed with every rank: this
            // rank's refusal joins that agreement instead of leaving them waiting in it
            Err(e) => return Err(self.refusal_agreed(e)),
        };
        self.finish_with(plan, sample, |b| b.step_device_solutes(&plan, solutes))
    }

    /// The y slabs of a fluid cut over GPUs, every slab of the box with the rank holding it
    /// (None: one piece).
    pub fn slab_places(&self) -> Option<Vec<backend::SlabPlace>> {
        self.backend.slab_places()
    }

    /// One MPC step with device-resident solutes held once per slab of this process
    /// ([`Solvent::slab_places`] order, those of this rank): each slab collides the solutes in
    /// its cells from its own copy, on its own GPU (`Backend::step_slab_solutes`). For an MD
    /// engine decomposed with the fluid.
    pub fn step_with_slab_solutes(
        &mut self,
        solutes: &[backend::SlabSolutes],
    ) -> Result<StepReport> {
        self.refuse_split()?;
        let n = solutes.first().map_or(0, |s| s.solutes.n);
        if n == 0 && self.fluid_begun.is_none() {
            return self.advance(None, Ok(()));
        }
        self.refuse_unfinished()?;
        let (plan, sample) = self.plan_for(n)?;
        self.finish_with(plan, sample, |b| b.step_slab_solutes(&plan, solutes))
    }

    /// The plan of the next step and whether it is sampled.
    fn next_plan(&self) -> (StepPlan, bool) {
        let step = self.step;
        let sample = self.is_sample(step);
        let measure = self.phys.shear_rate != 0.0 && (sample || self.is_observable_step(step));
        let reorder = {
            let k = self
                .config
                .tuning
                .reorder_interval
                .unwrap_or_else(|| self.backend.preferred_reorder_interval());
            // the initial fluid lies in memory in random order: sorted by cell at once, the
            // first steps of a run run at the rate of the later ones
            k > 0 && (step == 0 || (step + 1).is_multiple_of(k))
        };
        (self.phys.plan(step, measure, reorder), sample)
    }

    /// One step with `solutes` (checked: `checked`), the check agreed over ranks first: the
    /// step begun for them ([`Solvent::begin_fluid_step`]) or the next one; a step without
    /// solutes refuses a begun one.
    fn advance(
        &mut self,
        solutes: Option<&mut SoluteBatch<'_>>,
        checked: Result<()>,
    ) -> Result<StepReport> {
        let planned = checked.and_then(|()| match solutes.as_ref() {
            Some(b) => self.plan_for_solutes(b.len()),
            None => self.refuse_begun().map(|()| self.next_plan()),
        });
        let (plan, sample) = match planned {
            Ok(planned) => planned,
            Err(e) => return Err(self.refusal_agreed(e)),
        };
        self.backend.agree_on_input(Ok(()))?;
        self.finish_with(plan, sample, |b| b.step(&plan, solutes))
    }

    /// A refusal of this rank's input, agreed with every rank's check of theirs (one process:
    /// the refusal itself).
    fn refusal_agreed(&self, refused: MpcError) -> MpcError {
        match self.backend.agree_on_input(Err(refused)) {
            Err(e) => e,
            Ok(()) => {
                MpcError::Device("a refused input was agreed as good (please report it)".into())
            }
        }
    }

    /// Bookkeeping after the backend has run a step.
    fn complete(
        &mut self,
        plan: &StepPlan,
        sample: bool,
        report: StepReport,
    ) -> Result<StepReport> {
        self.step += 1;
        self.profile_tick();
        self.last = report;
        self.last_measured = plan.measure_stress;
        // every step after equilibration: the force on a wall fluctuates strongly from step
        // to step (each bounce gives it 2 m v)
        if self.phys.walls.is_some() && plan.step >= self.config.output.equilibration_steps {
            self.stats
                .push_wall_force(&report.wall_momentum, self.phys.h);
        }
        if sample {
            if report.relative_dof > 0.0 {
                self.stats
                    .temperature
                    .push(report.relative_energy / (1.5 * report.relative_dof));
            }
            if plan.measure_stress {
                let (kin, coll) = self.stress_of(&report);
                self.stats
                    .viscosity_kinetic
                    .push(-kin / self.phys.shear_rate);
                self.stats
                    .viscosity_collisional
                    .push(-coll / self.phys.shear_rate);
            }
            let m = self.backend.moments()?;
            for (b, s) in self.stats.profile_sum.iter_mut().enumerate() {
                if m.profile_count[b] > 0 {
                    *s += m.profile_sum[b] / m.profile_count[b] as f64;
                }
            }
            self.stats.profile_samples += 1;
            if self.config.output.field_interval > 0 {
                self.backend.accumulate_fields()?;
                self.field_samples += 1;
            }
        }
        Ok(report)
    }

    /// Split form of [`Solvent::step_with_solutes`], first half: hand over the solutes. On a
    /// GPU the upload overlaps the fluid streaming; the MD code may work on other things until
    /// [`Solvent::finish_step`]. Bad input is rejected here and nothing changes.
    pub fn begin_step(&mut self, pos: &[[f64; 3]], vel: &[[f64; 3]], mass: &[f64]) -> Result<()> {
        self.refuse_fluid_begun()?;
        if self.pending.is_some() {
            return Err(MpcError::Device(
                "begin_step called twice; fix: call finish_step after each begin_step".into(),
            ));
        }
        // every check here unless begin_coupled tests the values itself, so that bad input
        // fails at the begin, as documented (a backend that tests values as it stages them may
        // not stage until the finish)
        self.check_host_input(HostHandover::Begin, pos, vel, mass)?;
        let (plan, sample) = self.next_plan();
        self.backend.begin_coupled(&plan, pos, vel, mass)?;
        // A backend that copied the solutes (to the GPU) needs nothing kept here.
        let keep = !self.backend.keeps_coupled_inputs();
        self.pending = Some(PendingStep {
            plan,
            sample,
            n: pos.len(),
            pos: if keep { pos.to_vec() } else { Vec::new() },
            vel: if keep { vel.to_vec() } else { Vec::new() },
            mass: if keep { mass.to_vec() } else { Vec::new() },
        });
        Ok(())
    }

    /// Second half: finish the step begun with [`Solvent::begin_step`] and write the new solute
    /// velocities into `vel_out` (as many as were handed over).
    pub fn finish_step(&mut self, vel_out: &mut [[f64; 3]]) -> Result<StepReport> {
        let Some(p) = self.pending.as_ref() else {
            return Err(MpcError::Device(
                "finish_step without begin_step; fix: call begin_step first".into(),
            ));
        };
        if vel_out.len() != p.n {
            return Err(MpcError::Solute {
                field: "vel_out".into(),
                problem: format!("{} slots for {} solutes", vel_out.len(), p.n),
                fix: "pass an output array as long as the solute arrays given to begin_step".into(),
            });
        }
        let mut p = self.pending.take().expect("checked above");
        // Always through finish_coupled (also for zero solutes): begin_coupled may already
        // have streamed the fluid.
        let report = if self.backend.keeps_coupled_inputs() {
            let mut batch = SoluteBatch {
                pos: &[],
                vel: vel_out,
                mass: &[],
            };
            self.backend.finish_coupled(&p.plan, &mut batch)?
        } else {
            let mut batch = SoluteBatch {
                pos: &p.pos,
                vel: &mut p.vel,
                mass: &p.mass,
            };
            let r = self.backend.finish_coupled(&p.plan, &mut batch)?;
            vel_out.copy_from_slice(&p.vel);
            r
        };
        self.complete(&p.plan, p.sample, report)
    }

    /// Π_xy (kinetic, collisional) of a step report.
    fn stress_of(&self, r: &StepReport) -> (f64, f64) {
        let v = self.phys.volume();
        (
            r.kinetic_stress_sum / v,
            r.collisional_stress_sum / (v * self.phys.h),
        )
    }

    /// The flow fields averaged over the samples since the last call (density, velocity and
    /// temperature per cell; `output.field_interval` > 0 turns the sampling on), then start a
    /// new average. Without samples the fields are empty (every cell NaN).
    pub fn take_fields(&mut self) -> Result<crate::fields::FlowFields> {
        let sums = self.backend.take_field_sums()?;
        let samples = std::mem::take(&mut self.field_samples);
        let mut fields =
            crate::fields::FlowFields::from_sums(self.phys.cells, samples, &sums, self.phys.mass);
        fields.solid = self
            .phys
            .walls
            .as_ref()
            .map(|w| crate::fields::solid_fraction(&w.shape, self.phys.cells));
        Ok(fields)
    }

    /// Samples waiting in the flow-field sums.
    pub fn field_samples(&self) -> u64 {
        self.field_samples
    }

    pub fn moments(&mut self) -> Result<FluidMoments> {
        self.refuse_fluid_begun()?;
        self.backend.moments()
    }

    /// Observables of the fluid now (one reduction on the backend).
    pub fn observables(&mut self) -> Result<Observables> {
        self.refuse_fluid_begun()?;
        let m = self.backend.moments()?;
        let (temperature, stress_xy) = self.last_collision();
        Ok(Observables {
            step: self.step,
            time: self.time(),
            particles: m.particles,
            momentum: m.momentum,
            kinetic_energy: m.kinetic_energy,
            temperature,
            stress_xy,
            wall_force: self
                .phys
                .walls
                .is_some()
                .then(|| self.last.wall_momentum.map(|w| w.map(|c| c / self.phys.h))),
        })
    }

    /// What the last collision measured: kT (NaN before the first) and the xy stresses
    /// (kinetic, collisional) when it sampled them; the part of [`Solvent::observables`] that
    /// needs no sum over the fluid's particles.
    pub fn last_collision(&self) -> (f64, Option<(f64, f64)>) {
        let temperature = if self.last.relative_dof > 0.0 {
            self.last.relative_energy / (1.5 * self.last.relative_dof)
        } else {
            f64::NAN
        };
        (
            temperature,
            self.last_measured.then(|| self.stress_of(&self.last)),
        )
    }

    pub fn fluid_state(&mut self) -> Result<FluidState> {
        self.refuse_fluid_begun()?;
        self.backend.download()
    }

    pub fn set_fluid_state(&mut self, state: &FluidState) -> Result<()> {
        self.refuse_fluid_begun()?;
        if state.len() != self.backend.n_fluid() {
            return Err(MpcError::Device(format!(
                "fluid state has {} particles, this solvent {}",
                state.len(),
                self.backend.n_fluid()
            )));
        }
        self.backend.upload(state)
    }
}
