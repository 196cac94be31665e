//! The step pipeline of one GPU: every kind of step as the list of its passes, in order, on the
//! main stream. Each pass lives in the module of its kernels or in its feature's type: pass 1
//! `stream.rs` (stream, bin, sum; the fused methods apply the previous collision here, a slab
//! packs its emigrants), the solutes [`SoluteCoupling`] (`solutes.rs`; host arrays' transfers
//! `host_staging.rs`, device arrays' checks `device_solutes.rs`), pass 3 `cells.rs` (collision
//! parameters), pass 4 `collide.rs` (or deferred), `reorder.rs`. Three pipelines:
//! - the fluid alone ([`CudaBackend::enqueue_step`]);
//! - host solutes, split in two so that the transfers overlap the fluid's passes
//!   ([`CudaBackend::begin_coupled_step`], [`CudaBackend::finish_coupled_step`]);
//! - the caller's device solutes ([`CudaBackend::begin_fluid_here`],
//!   [`CudaBackend::step_device_solutes_here`]).
//!
//! Several GPUs run the same passes per slab with the migration between pass 1 and the rest
//! (`multi/step.rs`). Profiling synchronises and times each pass.
//!
//! [`SoluteCoupling`]: super::solute_coupling::SoluteCoupling

use std::time::Instant;

use super::cell_sums::CellSumMethod;
use super::device::drv;
use super::host_staging::{tested_on_the_gpu, SoluteTransfer};
use super::params::KernelParams;
use super::CudaBackend;
use crate::backend::{DeviceSolutes, SoluteBatch, StepReport};
use crate::error::{MpcError, Result};
use crate::physics::StepPlan;

/// Phases timed by [`CudaBackend::set_profiling`].
pub const PHASE_NAMES: [&str; 5] = [
    "stream+bin+sums",
    "solutes",
    "cell params",
    "collide",
    "reorder",
];
pub(super) const PHASES: usize = PHASE_NAMES.len();

/// Per-phase timers of [`CudaBackend::set_profiling`].
#[derive(Default)]
pub(super) struct PhaseTimer {
    /// When set, every phase is synchronised and timed into `seconds`.
    on: bool,
    seconds: [f64; PHASES],
    mark: Option<Instant>,
}

/// The fluid alone.
impl CudaBackend {
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
        self.phase_stop();
        Ok(())
    }

    /// [`crate::backend::Backend::step`]: a fluid-only step, or a coupled one split into
    /// `begin_coupled` and `finish_coupled`.
    pub(super) fn run_step(
        &mut self,
        plan: &StepPlan,
        solutes: Option<&mut SoluteBatch<'_>>,
    ) -> Result<StepReport> {
        match solutes {
            Some(b) if !b.is_empty() => {
                self.begin_coupled_step(plan, b.pos, b.vel, b.mass)?;
                self.finish_coupled_step(plan, b)
            }
            _ => {
                self.enqueue_step(plan)?;
                self.read_report()
            }
        }
    }
}

/// Host solutes: pass 1 while they go up, the rest while their velocities come down.
impl CudaBackend {
    /// [`crate::backend::Backend::begin_coupled`]: the solutes' values tested before the fluid
    /// moves (`Backend::tests_host_solute_values`), the fluid's pass 1, and the solutes sent
    /// up; see [`SoluteTransfer`] for the two ways. Page-locked arrays go up first by DMA and
    /// are tested on the GPU, so pass 1 follows the upload; other arrays were checked on the host
    /// before (`Solvent`), and the copies run beside pass 1 (testing them as they are staged,
    /// with pass 1 after, was slower: docs/coupling-costs.md).
    pub(super) fn begin_coupled_step(
        &mut self,
        plan: &StepPlan,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<()> {
        if self.solutes.in_flight.is_some() {
            return Err(MpcError::Device(
                "begin_coupled twice without finish_coupled".into(),
            ));
        }
        let ns = pos.len();
        let p = self.params(plan, ns);
        if ns > 0 {
            self.solutes.ensure_capacity(&self.dev.stream, ns)?;
            self.solutes.ensure_host_io(&self.dev.ctx, ns)?;
        }
        // The previous step's solute kernels are finished (finish_coupled read the report), so
        // the device buffers may be overwritten. A step begun (`begin_fluid_here`) has its
        // pass 1 queued already: the copies and the test run beside it, and the begun pass is
        // taken only once the values passed, so that a refused step stays begun.
        let p = if ns == 0 {
            self.take_begun_fluid(plan, ns)?
        } else if tested_on_the_gpu(pos, vel, mass) {
            // up by DMA and tested on the GPU, then the fluid moves
            let cap = p.solute_mass_cap();
            self.solutes
                .upload_page_locked(&self.dev, pos, vel, mass, cap)?;
            self.take_begun_fluid(plan, ns)?
        } else {
            // checked on the host before (`Solvent`), so the fluid streams while the copies run
            let p = self.take_begun_fluid(plan, ns)?;
            match SoluteTransfer::from_env() {
                SoluteTransfer::Pinned => self.solutes.upload_pinned(pos, vel, mass)?,
                SoluteTransfer::Pageable => self.solutes.upload_pageable(pos, vel, mass)?,
            }
            p
        };
        self.solutes.in_flight = Some((p, ns));
        Ok(())
    }

    /// [`crate::backend::Backend::finish_coupled`]: the solutes binned and collided as soon as
    /// they are up; their velocities go down on the download stream while the fluid collides
    /// on the main stream.
    pub(super) fn finish_coupled_step(
        &mut self,
        plan: &StepPlan,
        solutes: &mut SoluteBatch<'_>,
    ) -> Result<StepReport> {
        let Some((p, ns)) = self.solutes.in_flight.take() else {
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
            self.solutes.main_waits_for_upload(&self.dev.stream)?;
        }
        let (fluid, f) = self.parts();
        f.solutes.bin_own(fluid, f.rules, &p, ns)?;
        self.cell_pass(&p)?;
        if ns == 0 {
            self.fluid_collide(plan, &p)?;
            self.reorder_if(plan)?;
            return self.read_report();
        }
        let (fluid, f) = self.parts();
        f.solutes.collide_own(fluid, f.rules, &p, ns)?;
        self.solutes.download_waits_for(&self.dev.stream)?;
        self.fluid_collide(plan, &p)?;
        self.reorder_if(plan)?;
        self.solutes
            .download_velocities_into(solutes.vel.as_flattened_mut())?;
        self.read_report()
    }
}

/// The caller's device solutes: checked before (`check_device_solutes`), read and written in
/// place, ordered with the caller's stream by events.
impl CudaBackend {
    /// [`crate::backend::Backend::begin_fluid_step`] on this GPU: the fluid pass queued on the
    /// main stream (the caller's streams run on meanwhile).
    pub(super) fn begin_fluid_here(&mut self, plan: &StepPlan, n_solutes: usize) -> Result<bool> {
        self.solutes.check_idle()?;
        let p = self.params(plan, n_solutes);
        self.fluid_pass(&p)?;
        self.solutes.fluid_begun = Some(p);
        Ok(true)
    }

    /// The parameters of step `plan` with its fluid pass queued: the one begun for it
    /// ([`CudaBackend::begin_fluid_here`]), or queued now.
    pub(super) fn take_begun_fluid(&mut self, plan: &StepPlan, ns: usize) -> Result<KernelParams> {
        let p = self.params(plan, ns);
        match self.solutes.fluid_begun.take() {
            Some(begun) if begun.same_step(&p) => Ok(begun),
            Some(_) => Err(MpcError::Device(
                "the fluid step begun and the one finished differ (please report it)".into(),
            )),
            None => {
                self.fluid_pass(&p)?;
                Ok(p)
            }
        }
    }

    /// [`crate::backend::Backend::step_device_solutes`] on this GPU, for solutes checked by
    /// `check_device_solutes`: the fluid streams, the solutes are binned and summed from the
    /// caller's arrays, the cells collide, and the solute velocities are overwritten in place;
    /// the caller's stream is ordered after that update.
    pub(super) fn step_device_solutes_here(
        &mut self,
        plan: &StepPlan,
        s: &DeviceSolutes,
    ) -> Result<StepReport> {
        self.phase_start()?;
        let p = if self.bins_before_pass_one(s.n) {
            // binned and tested before pass 1: a bad value stops the step with nothing changed
            let p = self.params(plan, s.n);
            self.bin_and_test_before_pass_one(&p, s)?;
            self.phase_end(1)?;
            self.fluid_pass(&p)?; // ends phase 0
            p
        } else {
            let p = self.take_begun_fluid(plan, s.n)?; // ends phase 0 if queued here
            let (fluid, f) = self.parts();
            f.solutes.bin_from(fluid, f.rules, &p, s, None, false)?;
            self.phase_end(1)?;
            p
        };
        self.cell_pass(&p)?;
        self.phase_end(2)?;
        let (fluid, f) = self.parts();
        f.solutes.collide_owned(fluid, f.rules, &p, s, None)?;
        self.solutes.release_to_caller(&self.dev, s)?;
        self.phase_end(1)?;
        self.fluid_collide(plan, &p)?;
        self.phase_end(3)?;
        self.reorder_if(plan)?;
        self.phase_end(4)?;
        self.phase_stop();
        self.read_report()
    }
}

/// The caller's device solutes binned before pass 1, their values tested as they are read: one
/// pass over the caller's arrays instead of a check, then the binning.
impl CudaBackend {
    /// [`crate::backend::Backend::check_device_solutes`] on this GPU: the pointers, and the
    /// values by the check kernel unless the step's binning tests them before pass 1.
    pub(super) fn check_device_solutes_here(&mut self, s: &DeviceSolutes) -> Result<()> {
        self.phase_start()?;
        if self.bins_before_pass_one(s.n) {
            // the values: by the binning (`step_device_solutes_here`, the same choice)
            self.solutes.check_pointers(&self.dev, s)?;
        } else {
            self.solutes
                .check_device(&self.dev, s, self.solute_mass_cap())?;
        }
        self.phase_end(1)?; // the solutes' phase
        self.phase_stop();
        Ok(())
    }

    /// Whether a step with `ns` device solutes bins them before pass 1, testing their values
    /// (`Backend::check_device_solutes` then tests only the pointers): one GPU under plain SRD
    /// (a rule bins into its own sums), pass 1 adding to the cell sums (not the list method,
    /// which stores them), and no step begun (its pass 1 is queued, so the values are tested
    /// first, as on several GPUs).
    fn bins_before_pass_one(&self, ns: usize) -> bool {
        ns > 0
            && self.rules.is_none()
            && self.slab.is_none()
            && self.method != CellSumMethod::List
            && self.solutes.fluid_begun.is_none()
    }

    /// Zero the buffer the next pass 1 sums into, bin the solutes into it testing every value,
    /// and read what the test found (the host waits). A bad value returns its error with the
    /// fluid unchanged: only the buffer pass 1 would have zeroed was written. Else pass 1 adds
    /// the fluid to the solutes' sums (`sums_prebinned`).
    fn bin_and_test_before_pass_one(&mut self, p: &KernelParams, s: &DeviceSolutes) -> Result<()> {
        // pass 1's choice (`fluid_pass`): the other buffer when a fused collision is pending
        let into_alt = self.method.is_fused() && self.pending.is_some();
        if into_alt && self.cell.alt.is_none() {
            return Err(MpcError::Device(
                "fused method without a second cell buffer".into(),
            ));
        }
        self.solutes.arm_value_test(&self.dev, s)?;
        // the binning writes the view's current buffer: the target is swapped in for it
        self.swap_in_alt(into_alt);
        let binned = self.zero_and_bin_tested(p, s);
        self.swap_in_alt(into_alt);
        binned?;
        self.solutes
            .value_test_result(&self.dev, p.solute_mass_cap())?;
        self.sums_prebinned = true;
        Ok(())
    }

    /// The current cell buffer zeroed, then the solutes binned into it with their values tested.
    fn zero_and_bin_tested(&mut self, p: &KernelParams, s: &DeviceSolutes) -> Result<()> {
        let main = self.dev.stream.clone();
        main.memset_zeros(&mut self.cell.sums)
            .map_err(drv("memset"))?;
        let (fluid, f) = self.parts();
        f.solutes.bin_from(fluid, None, p, s, None, true)
    }

    /// Exchange the two cell buffers of the fused method (`swap`), else nothing.
    fn swap_in_alt(&mut self, swap: bool) {
        if let (true, Some(alt)) = (swap, self.cell.alt.as_mut()) {
            std::mem::swap(&mut self.cell.sums, alt);
        }
    }
}

/// Profiling.
impl CudaBackend {
    /// Time every phase (synchronising after each; slower) or not; resets the timers.
    pub fn set_profiling(&mut self, on: bool) {
        self.timer.on = on;
        self.timer.seconds = [0.0; PHASES];
    }

    /// Seconds spent per phase (see [`PHASE_NAMES`]) since profiling was switched on.
    pub fn phase_seconds(&self) -> [f64; PHASES] {
        self.timer.seconds
    }

    pub(super) fn phase_start(&mut self) -> Result<()> {
        if self.timer.on {
            self.synchronize()?;
            self.timer.mark = Some(Instant::now());
        }
        Ok(())
    }

    /// The step's phases are over: the time until the next `phase_start` counts in none.
    pub(super) fn phase_stop(&mut self) {
        self.timer.mark = None;
    }

    pub(super) fn phase_end(&mut self, phase: usize) -> Result<()> {
        if self.timer.on {
            self.synchronize()?;
            if let Some(t) = self.timer.mark.take() {
                self.timer.seconds[phase] += t.elapsed().as_secs_f64();
            }
            self.timer.mark = Some(Instant::now());
        }
        Ok(())
    }
}
