//! One step of all slabs, driven by one host thread: every GPU's work is queued
//! asynchronously, and the host waits only for the migration counts after pass 1 and for the
//! step's reports at the end.
//!
//! 1. every GPU: pass 1 (`stream.rs`: fused collision n, stream, bin, sum; emigrants packed);
//! 2. exchange (`migrate.rs`, `transfer.rs`): the counts come back, the packets cross, each
//!    GPU unpacks its arrivals into its cell sums;
//! 3. every GPU: solutes (routed to their slabs by `solute_routes.rs` beside pass 1, or the
//!    bundled engine's per-slab copies), cell pass, collision (or deferred), reorder; the
//!    reports and flags come back and are summed, the particle count checked.

use std::time::Instant;

use super::solute_routes::RouteSource;
use super::MultiCudaBackend;
use crate::backend::cuda::device::drv;
use crate::backend::cuda::observe::report_from_words;
use crate::backend::{DeviceSolutes, SlabSolutes, SoluteBatch, StepReport};
use crate::error::{MpcError, Result};
use crate::physics::StepPlan;

/// Phases timed by [`MultiCudaBackend::set_profiling`].
pub const MULTI_PHASE_NAMES: [&str; 3] = ["pass 1", "exchange", "cells+collide+reorder"];
/// The phases of a step with routed solutes timed apart from [`MULTI_PHASE_NAMES`]'s (whose
/// "cells+collide+reorder" is then the fluid's collision, reorder and reports only): checked
/// and counted (before pass 1), binned on their slabs (after the exchange), the cell pass,
/// collided (and scattered on the home GPU), and the velocities' return into the caller's
/// arrays (after the reports). Over MPI ranks with device solutes split on each rank's GPU
/// (`rank_split.rs`) three more, on the host's path around the step (the fluid's pass 1 runs
/// meanwhile): the split counted and checked with the ranks' agreement, packed with the
/// foreign solutes across the ranks and the arrivals uploaded, and the velocities scattered
/// and returned across the ranks (for host arrays with their copy down, which runs beside
/// that return).
pub const SOLUTE_PHASE_NAMES: [&str; SOLUTE_PHASES] = [
    "solutes counted",
    "solutes binned",
    "cell pass",
    "solutes collided",
    "velocities returned",
    "rank split counted",
    "rank split crossed",
    "rank split returned",
];
pub const SOLUTE_PHASES: usize = 8;
/// [`SOLUTE_PHASE_NAMES`]'s rank-split entries.
pub(super) const RANK_SPLIT_COUNTED: usize = 5;
pub(super) const RANK_SPLIT_CROSSED: usize = 6;
pub(super) const RANK_SPLIT_RETURNED: usize = 7;

/// The solutes of one multi-GPU step.
pub(super) enum StepSolutes<'a, 'b> {
    None,
    Host(&'a mut SoluteBatch<'b>),
    Device(DeviceSolutes),
    /// One copy per slab on its GPU (`Backend::step_slab_solutes`).
    PerSlab(&'a [SlabSolutes]),
}

impl StepSolutes<'_, '_> {
    fn len(&self) -> usize {
        match self {
            StepSolutes::None => 0,
            StepSolutes::Host(b) => b.len(),
            StepSolutes::Device(d) => d.n,
            StepSolutes::PerSlab(d) => d.first().map_or(0, |d| d.solutes.n),
        }
    }
}

impl MultiCudaBackend {
    /// One step of all slabs. Solutes from outside (device arrays, host arrays) are routed to
    /// the slabs owning their cells (`solute_routes.rs`): for device arrays of a step not begun
    /// before pass 1, so that a bad value stops the step before the fluid moves; otherwise
    /// beside pass 1 (host arrays were checked on the host).
    pub(super) fn run_step(
        &mut self,
        plan: &StepPlan,
        solutes: StepSolutes<'_, '_>,
    ) -> Result<StepReport> {
        let ns = solutes.len();
        let mut t = Instant::now();
        // 1. pass 1 everywhere (collide n if deferred, stream, bin, pack emigrants), unless
        // begun for this step; a begun pass is let go of only once the solutes passed their
        // test, so that a refused step stays begun
        let begun = match self.fluid_begun {
            Some(step) if step == plan.step => true,
            Some(step) => {
                return Err(MpcError::Device(format!(
                    "step {step} was begun and step {} finished (please report it)",
                    plan.step
                )))
            }
            None => false,
        };
        let routed = match &solutes {
            StepSolutes::Device(d) if ns > 0 => {
                // checked and counted before pass 1 (a bad value changes nothing), packed and
                // sent beside it
                let home = self.solutes_home(d)?;
                let target = self.stage_solutes(home, RouteSource::Device(*d))?;
                self.count_staged(plan, &target)?;
                self.fluid_begun = None;
                self.mark_solutes_if(true, 0, &mut t)?;
                if !begun {
                    self.queue_pass_one(plan, ns)?;
                }
                self.pack_staged(plan, &target)?;
                Some(target)
            }
            StepSolutes::Host(b) if ns > 0 => {
                // tested as they are staged (a bad value changes nothing), then the fluid
                // streams while the copies up finish and the solutes are routed
                let source = RouteSource::Host {
                    pos: b.pos,
                    vel: &*b.vel,
                    mass: b.mass,
                    mass_cap: self.phys.sums.as_ref().map(|s| s.max_solute_mass),
                };
                let target = self.stage_solutes(0, source)?;
                let straight = self.routes.as_ref().is_some_and(|r| r.host_went_straight());
                if straight {
                    // page-locked arrays went up untested: counted (and tested) first
                    self.count_staged(plan, &target)?;
                }
                if !begun {
                    self.queue_pass_one(plan, ns)?;
                }
                if !straight {
                    self.count_staged(plan, &target)?;
                }
                self.fluid_begun = None;
                self.mark_solutes_if(true, 0, &mut t)?;
                self.pack_staged(plan, &target)?;
                Some(target)
            }
            _ => {
                self.fluid_begun = None;
                if !begun {
                    self.queue_pass_one(plan, ns)?;
                }
                None
            }
        };
        self.synchronize_all()?;
        let (sent, tops) = self.read_migration_counts()?;
        self.mark(0, &mut t)?;
        // 2. exchange: copies, then each slab unpacks what its neighbours sent
        self.exchange(plan, ns, &sent, &tops)?;
        self.mark(1, &mut t)?;
        // 3. solutes, cell parameters, collision (or deferred), reorder
        let per_slab = match solutes {
            StepSolutes::PerSlab(d) => Some(d),
            _ => None,
        };
        self.finish_slabs(plan, ns, per_slab, routed.as_ref(), &mut t)?;
        if let (Some(target), Some(routes)) = (&routed, self.routes.as_mut()) {
            let callers = matches!(solutes, StepSolutes::Device(_));
            routes.return_velocities(&self.slabs, target, callers)?;
        }
        let (report, live) = self.collect_reports()?;
        self.mark(2, &mut t)?;
        if let (StepSolutes::Host(b), Some(_)) = (solutes, &routed) {
            let routes = self.routes.as_mut().expect("routed");
            routes.download_host(b.vel)?;
        }
        self.check_particle_count(plan, live)?;
        self.mark_solutes_if(routed.is_some(), 4, &mut t)?;
        Ok(report)
    }

    /// Pass 1 queued on every slab (the host does not wait).
    fn queue_pass_one(&mut self, plan: &StepPlan, ns: usize) -> Result<()> {
        for s in &mut self.slabs {
            let p = s.params(plan, ns);
            s.fluid_pass(&p)?;
        }
        Ok(())
    }

    /// `Backend::begin_fluid_step`: pass 1 of step `plan` queued on every slab, for
    /// [`MultiCudaBackend::run_step`] to go on from.
    pub(super) fn begin_pass_one(&mut self, plan: &StepPlan, ns: usize) -> Result<bool> {
        if self.fluid_begun.is_some() {
            return Err(MpcError::Device(
                "a step was begun and not finished; fix: finish it before beginning another".into(),
            ));
        }
        self.queue_pass_one(plan, ns)?;
        self.fluid_begun = Some(plan.step);
        Ok(true)
    }

    /// `Backend::step_slab_solutes`: one copy of the solutes per slab, checked on its GPU.
    pub(super) fn step_with_slab_copies(
        &mut self,
        plan: &StepPlan,
        solutes: &[SlabSolutes],
    ) -> Result<StepReport> {
        let n = solutes.first().map_or(0, |s| s.solutes.n);
        if solutes.len() != self.slabs.len() || solutes.iter().any(|s| s.solutes.n != n) {
            return Err(MpcError::Device(format!(
                "per-slab solutes: {} copies for {} slabs, or copies of different lengths; fix: \
                 one copy of all solutes per slab of this process (Solvent::slab_places)",
                solutes.len(),
                self.slabs.len()
            )));
        }
        for (s, d) in self.slabs.iter_mut().zip(solutes) {
            let cap = s.solute_mass_cap();
            s.solutes.check_slab(&s.dev, d, cap)?;
        }
        self.run_step(plan, StepSolutes::PerSlab(solutes))
    }

    /// Step 3 on every GPU: solutes (its routed share, or the slab's own device copy of the
    /// bundled engine), cell pass, solute and fluid collision, reorder.
    fn finish_slabs(
        &mut self,
        plan: &StepPlan,
        ns: usize,
        per_slab: Option<&[SlabSolutes]>,
        routed: Option<&DeviceSolutes>,
        t: &mut Instant,
    ) -> Result<()> {
        let routes = self.routes.as_ref().zip(routed);
        // each slab's solutes: its routed share (with the caller's indices), or its copy
        let mut own = Vec::with_capacity(self.slabs.len());
        for k in 0..self.slabs.len() {
            own.push(match (routes, per_slab) {
                (Some((r, _)), _) => r
                    .slab_solutes(&self.slabs, k)?
                    .map(|(d, index)| (d, None, index)),
                (None, Some(d)) if ns > 0 => Some((d[k].solutes, d[k].subset, None)),
                _ => None,
            });
        }
        // each pass on every slab before the next (the order on each GPU is the same), so that
        // profiling times the routed solutes' passes apart: binning, the cell pass, the
        // solutes' collision and return to the caller, then the fluid's collision and reorder
        let timed = routed.is_some();
        for (k, s) in self.slabs.iter_mut().enumerate() {
            if let Some((d, subset, _)) = own[k] {
                // a routed share holds d.n solutes; a slab's copy of the engine's, ns
                let q = s.params(plan, ns).with_solutes(d.n);
                let (fluid, f) = s.parts();
                f.solutes.bin_from(fluid, f.rules, &q, &d, subset, false)?;
            }
        }
        self.mark_solutes_if(timed, 1, t)?;
        for s in self.slabs.iter_mut() {
            let p = s.params(plan, ns);
            s.cell_pass(&p)?;
        }
        self.mark_solutes_if(timed, 2, t)?;
        let routes = self.routes.as_ref().zip(routed);
        for (k, s) in self.slabs.iter_mut().enumerate() {
            if let Some((d, subset, index)) = own[k] {
                let q = s.params(plan, ns).with_solutes(d.n);
                let (fluid, f) = s.parts();
                f.solutes.collide_owned(fluid, f.rules, &q, &d, subset)?;
                if let Some((r, target)) = routes {
                    r.scatter_slab(k, s, &d, index, target)?;
                }
            }
        }
        self.mark_solutes_if(timed, 3, t)?;
        for s in self.slabs.iter_mut() {
            let p = s.params(plan, ns);
            s.fluid_collide(plan, &p)?;
            s.reorder_if(plan)?;
        }
        Ok(())
    }

    /// Reports and flags: queued on every GPU, then waited for (one wait per GPU) and summed
    /// (over the ranks too), with the live particles of the box; an error if a particle
    /// arrived in a cell its GPU does not own.
    fn collect_reports(&mut self) -> Result<(StepReport, usize)> {
        for s in &mut self.slabs {
            s.queue_tail_copies()?;
        }
        let mut report = StepReport::default();
        for s in &mut self.slabs {
            s.synchronize()?;
            let sl = s.slab();
            let r = report_from_words(sl.report_host.as_slice().map_err(drv("report"))?);
            report.relative_energy += r.relative_energy;
            report.relative_dof += r.relative_dof;
            report.kinetic_stress_sum += r.kinetic_stress_sum;
            report.collisional_stress_sum += r.collisional_stress_sum;
            for (t, w) in report.wall_momentum.iter_mut().zip(r.wall_momentum) {
                for k in 0..3 {
                    t[k] += w[k];
                }
            }
            if sl.counters_host.as_slice().map_err(drv("counters"))?[3] & 2 != 0 {
                return Err(MpcError::Device(format!(
                    "{}: a particle arrived in a cell this GPU does not own (it crossed a whole \
                     slab in one step); fix: a smaller time step h or fewer GPUs",
                    s.dev.describe()
                )));
            }
        }
        let live: usize = self.slabs.iter().map(|s| s.live()).sum();
        if self.transport.ranks() == 1 {
            return Ok((report, live));
        }
        // one sum over the ranks: the report's figures and the live count
        let mut v = crate::backend::slabbed::report_to_vec(&report);
        v.push(live as f64);
        self.transport.sum(&mut v)?;
        let live = v.pop().expect("pushed") as usize;
        Ok((crate::backend::slabbed::report_from_vec(&v), live))
    }

    /// Every particle is on exactly one GPU: the live counts (`live`, over all ranks) add up
    /// to the total.
    fn check_particle_count(&self, plan: &StepPlan, live: usize) -> Result<()> {
        if live != self.n_total {
            return Err(MpcError::Device(format!(
                "multi-GPU step {}: {live} fluid particles on the GPUs, {} expected (a \
                 migration lost or duplicated particles)",
                plan.step, self.n_total
            )));
        }
        Ok(())
    }

    pub(super) fn synchronize_all(&self) -> Result<()> {
        for s in &self.slabs {
            s.synchronize()?;
        }
        Ok(())
    }

    /// Profiling: wait for every GPU and the solutes' routing and add the time since `t` to
    /// the solutes' `phase` (see [`SOLUTE_PHASE_NAMES`]).
    fn mark_solutes_if(&mut self, routed: bool, phase: usize, t: &mut Instant) -> Result<()> {
        if self.profiling && routed {
            if let Some(r) = &self.routes {
                r.quiesce()?;
            }
            self.synchronize_all()?;
            self.solute_phase_seconds[phase] += t.elapsed().as_secs_f64();
            *t = Instant::now();
        }
        Ok(())
    }

    /// Profiling: wait for every GPU and add the time since `t` to `phase`.
    /// Over ranks every rank waits for the others too, so that a phase's time includes the
    /// slowest rank's and the next phase starts together.
    fn mark(&mut self, phase: usize, t: &mut Instant) -> Result<()> {
        if self.profiling {
            self.synchronize_all()?;
            if self.transport.ranks() > 1 {
                self.transport.sum(&mut [0.0])?;
            }
            self.phase_seconds[phase] += t.elapsed().as_secs_f64();
            *t = Instant::now();
        }
        Ok(())
    }
}

impl crate::backend::cuda::CudaBackend {
    /// Queue the step's report and the migration flags to pinned host memory.
    fn queue_tail_copies(&mut self) -> Result<()> {
        let s = self.dev.stream.clone();
        let sl = self.slab.as_mut().expect("slab mode");
        s.memcpy_dtoh(&self.obs.report, &mut sl.report_host)
            .map_err(drv("report copy"))?;
        s.memcpy_dtoh(&sl.counters, &mut sl.counters_host)
            .map_err(drv("counters"))?;
        Ok(())
    }
}
