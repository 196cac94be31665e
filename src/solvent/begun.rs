//! Steps begun before their solutes are known. The fluid's part of a step needs no solutes
//! (its deferred collision, streaming, binning), so a GPU backend queues it at once and it runs
//! while the MD code moves the solutes; the call that hands them over (host arrays, device
//! arrays or per-slab copies) finishes the step. Until then nothing else may step, read or
//! checkpoint the fluid: it is mid-step.
//!
//! A finish that refuses its input (a bad value, a count other than the one begun for) leaves
//! the step begun, to be finished with good input; the backends test the input before they
//! let go of their begun pass. A finish that fails after that (the device failing) leaves a
//! fluid that streamed without its collision: every later call is refused, naming the failure.

use super::Solvent;
use crate::backend::{Backend, StepReport};
use crate::error::{MpcError, Result};
use crate::physics::StepPlan;

impl Solvent {
    /// Begin the next step: the fluid's part that needs no solutes is queued on its GPU(s)
    /// and runs while the caller moves its `n_solutes` solutes (an MD code's steps on the
    /// host or on its own streams). The step is finished by the next call that hands over
    /// that many solutes: [`Solvent::step_with_solutes`] (host arrays, also one per rank),
    /// [`Solvent::step_with_device_solutes`] or [`Solvent::step_with_slab_solutes`]. Nothing
    /// else may step, read or checkpoint the fluid in between. Returns whether the step was
    /// begun (false: this backend does the whole step in the finishing call, or there are no
    /// solutes; the finishing call is the same either way). The solutes are tested when the
    /// step finishes: a bad one is refused and the step stays begun, to be finished with good
    /// ones.
    pub fn begin_fluid_step(&mut self, n_solutes: usize) -> Result<bool> {
        self.refuse_begun()?;
        if n_solutes == 0 {
            return Ok(false);
        }
        let (plan, sample) = self.next_plan();
        if !self.backend.begin_fluid_step(&plan, n_solutes)? {
            return Ok(false);
        }
        self.fluid_begun = Some((plan, sample, n_solutes));
        Ok(true)
    }

    /// [`Solvent::begin_fluid_step`], the name it had when only device solutes finished it.
    pub fn begin_device_step(&mut self, n_solutes: usize) -> Result<bool> {
        self.begin_fluid_step(n_solutes)
    }

    /// The plan of the step that `n` solutes finish: the one begun, or the next. The begun
    /// step stays begun until [`Solvent::finish_with`] has finished it.
    pub(super) fn plan_for(&self, n: usize) -> Result<(StepPlan, bool)> {
        match self.fluid_begun {
            None => Ok(self.next_plan()),
            Some((plan, sample, begun)) if begun == n => Ok((plan, sample)),
            Some((_, _, begun)) => Err(MpcError::Solute {
                field: "solute count".into(),
                problem: format!("the step was begun for {begun} solutes and finished with {n}"),
                fix: format!(
                    "finish it with the {begun} solutes it was begun for (begin_fluid_step \
                     takes the count the finishing call will hand over)"
                ),
            }),
        }
    }

    /// Run the backend's part of step `plan` (`run`), begun or not, and book it. When it fails
    /// with the step begun, the step stays begun if the backend still holds its begun pass
    /// (the input was refused before it let go); otherwise the fluid streamed without its
    /// collision and the solvent refuses every later call.
    pub(super) fn finish_with(
        &mut self,
        plan: StepPlan,
        sample: bool,
        run: impl FnOnce(&mut dyn Backend) -> Result<StepReport>,
    ) -> Result<StepReport> {
        let begun = self.fluid_begun.is_some();
        match run(&mut *self.backend) {
            Ok(report) => {
                self.fluid_begun = None;
                self.complete(&plan, sample, report)
            }
            Err(e) => {
                if begun && !self.backend.fluid_is_begun() {
                    self.fluid_begun = None;
                    self.unfinished = Some(format!(
                        "step {}'s fluid streamed, but its finish failed: {e}",
                        plan.step + 1
                    ));
                }
                Err(e)
            }
        }
    }

    /// [`Solvent::plan_for`] for a call that hands solutes over: refused while a split step is
    /// pending or after a begun one failed to finish.
    pub(super) fn plan_for_solutes(&self, n: usize) -> Result<(StepPlan, bool)> {
        self.refuse_split()?;
        self.refuse_unfinished()?;
        self.plan_for(n)
    }

    /// An error while a step is begun and not finished (split or fluid form).
    pub(super) fn refuse_begun(&self) -> Result<()> {
        self.refuse_split()?;
        self.refuse_fluid_begun()
    }

    /// An error while a split step (`begin_step`) waits for its `finish_step`.
    pub(super) fn refuse_split(&self) -> Result<()> {
        match self.pending {
            Some(_) => Err(MpcError::Device(
                "a coupled step was begun and not finished; fix: call finish_step before stepping again".into(),
            )),
            None => Ok(()),
        }
    }

    /// An error while a step's fluid part is queued (the fluid is mid-step), or after one
    /// failed to finish.
    pub(super) fn refuse_fluid_begun(&self) -> Result<()> {
        self.refuse_unfinished()?;
        if self.fluid_begun.is_some() {
            return Err(MpcError::Device(
                "a step was begun (begin_fluid_step) and not finished; fix: finish it by \
                 handing over its solutes (step_with_solutes, step_with_device_solutes or \
                 step_with_slab_solutes)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// An error once a begun step failed to finish: the fluid is mid-step for good.
    pub(super) fn refuse_unfinished(&self) -> Result<()> {
        match &self.unfinished {
            Some(why) => Err(MpcError::Device(format!(
                "{why}; fix: resume the run from its last checkpoint"
            ))),
            None => Ok(()),
        }
    }
}
