//! One step on one GPU as a sequence of launches on the main stream, each pass in the module
//! of its kernels: pass 1 `stream.rs` (stream, bin, sum; the fused methods apply the previous
//! collision here), solutes `solutes.rs`, pass 3 `cells.rs` (collision parameters), pass 4
//! `collide.rs` (or deferred), `reorder.rs`. Coupled steps run the same sequence with the
//! solute transfers of `host_staging.rs` or the caller's arrays (`device_solutes.rs`) around it;
//! several GPUs run it per slab with a migration after pass 1 (`multi/step.rs`). Profiling
//! synchronises and times each pass.

use std::time::Instant;

use super::CudaBackend;
use crate::backend::{SoluteBatch, StepReport};
use crate::error::Result;
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
        self.timer.mark = None;
        Ok(())
    }

    /// [`crate::backend::Backend::step`]: a fluid-only step, or a coupled one split into
    /// `begin_coupled` and `finish_coupled` (`host_staging.rs`).
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
