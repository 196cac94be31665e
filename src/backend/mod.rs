//! The backend seam: one trait, implemented by the CPU reference backend and the CUDA backend.
//!
//! A backend owns the fluid particles (they never leave it during a run) and executes steps
//! planned by [`crate::physics::Physics::plan`]. Everything a backend returns is a reduction;
//! the whole state comes back only for checkpoints and tests ([`Backend::download`]).
//! Which backend a config gets is [`factory::open`]'s choice; this file imports no backend.

pub mod cpu;
pub mod cuda;
pub mod factory;
pub mod slab_cut;
pub mod slabbed;
mod solutes;

pub use slab_cut::{min_slab_layers, slab_bounds, slab_bounds_for};

pub use solutes::{
    check_host_solutes, check_solute_lengths, check_solute_masses_fit, check_solutes_outside_walls,
    DeviceSolutes, SlabSolutes, SoluteBatch, SoluteSubset, MAX_SOLUTE_COORDINATE,
};

use crate::error::Result;
use crate::physics::StepPlan;
use crate::state::FluidState;

/// One y slab of a fluid cut over GPUs: its GPU, its cell layers `[lo, hi)` (cells are the
/// unit of length, so these are also its y range) and the MPI rank holding it (0 in one
/// process). `ordinal` names a GPU of the rank holding the slab: only this process's slabs
/// are opened here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlabPlace {
    pub ordinal: usize,
    pub layers: [u32; 2],
    pub rank: usize,
}

/// Raw sums of one step, normalised by the caller.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepReport {
    /// Σ over cells of the kinetic energy relative to the cell velocity, before the collision.
    pub relative_energy: f64,
    /// Σ over cells of (Nc − 1) for occupied cells: 3/2 of it are the degrees of freedom.
    pub relative_dof: f64,
    /// Σ m vy (vx − u(ȳ)) over fluid particles during streaming (when measured).
    pub kinetic_stress_sum: f64,
    /// Σ Δpx · (y − y_cell) over the particles in the collision, fluid and solutes (when
    /// measured).
    pub collisional_stress_sum: f64,
    /// Momentum the fluid (and solutes) gave each wall surface during the step: bounce-backs
    /// and the collisions with virtual wall particles (`physics::walls`); zero without walls.
    pub wall_momentum: crate::physics::WallMomentum,
}

/// Instantaneous fluid moments, reduced on the backend.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FluidMoments {
    pub particles: u64,
    pub momentum: [f64; 3],
    pub kinetic_energy: f64,
    /// Σ vx and count per y layer of one cell (Ly bins).
    pub profile_sum: Vec<f64>,
    pub profile_count: Vec<u64>,
}

/// The call that hands host solutes to a backend ([`Backend::tests_host_solute_values`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostHandover {
    /// A one-call step (`Backend::step`).
    OneCall,
    /// The split form's begin (`Backend::begin_coupled`); a backend that tests the values as it
    /// stages them may stage only at the finish.
    Begin,
}

pub trait Backend: Send {
    /// A short description, e.g. "cpu (2 threads)" or "cuda:0 <the GPU's name>".
    fn describe(&self) -> String;

    fn n_fluid(&self) -> usize;

    /// One MPC step: stream the fluid, bin fluid and solutes on the shifted grid, collide,
    /// update solute velocities in place.
    fn step(
        &mut self,
        plan: &StepPlan,
        solutes: Option<&mut SoluteBatch<'_>>,
    ) -> Result<StepReport>;

    /// Momentum, kinetic energy and the vx(y) profile of the fluid as it is now.
    fn moments(&mut self) -> Result<FluidMoments>;

    /// A copy of the whole fluid state (checkpoints, tests).
    fn download(&mut self) -> Result<FluidState>;

    /// This process's particles (its slabs' parts with their global ids): its block of a
    /// checkpoint that every MPI rank writes, so no rank ever holds the whole box. In one
    /// process without slabs, the whole fluid.
    fn local_fluid(&mut self) -> Result<crate::checkpoint::LocalFluid> {
        Ok(crate::checkpoint::LocalFluid::Whole(self.download()?))
    }

    /// This process's particles as its checkpoint block, read from the live fluid while the
    /// run waits: a backend that can, hands them over a window at a time (the default: its
    /// [`Backend::local_fluid`], whole in host memory).
    fn fluid_source(&mut self) -> Result<Box<dyn crate::checkpoint::BlockSource + '_>> {
        Ok(Box::new(self.local_fluid()?))
    }

    /// A copy of this process's particles that the checkpoint writer's thread reads while the
    /// run steps on: in spare device memory, or in host memory if it takes at most
    /// `host_bytes`. None: no room for one (the checkpoint is then written from the live
    /// fluid, [`Backend::fluid_source`]). The default copies [`Backend::local_fluid`] when
    /// the whole box fits `host_bytes`.
    fn fluid_snapshot(
        &mut self,
        host_bytes: u64,
    ) -> Result<Option<Box<dyn crate::checkpoint::BlockSource + Send>>> {
        let bytes = self.n_fluid() as u64 * crate::checkpoint::PARTICLE_BYTES;
        if !crate::checkpoint::copy_fits(bytes, host_bytes) {
            return Ok(None);
        }
        Ok(Some(Box::new(self.local_fluid()?)))
    }

    /// Replace the fluid state (resume, tests).
    fn upload(&mut self, state: &FluidState) -> Result<()>;

    /// Add the fluid as it is now into the flow-field sums ([`crate::fields`]): per cell of the
    /// unshifted grid, [`crate::fields::FIELD_SUMS`] values (N, Σv, Σv²), kept on the backend.
    fn accumulate_fields(&mut self) -> Result<()>;

    /// The flow-field sums accumulated since the last call (cells in the global order), which
    /// then start again from zero.
    fn take_field_sums(&mut self) -> Result<Vec<f64>>;

    /// Steps between reorderings of the fluid by cell when the config leaves it unset: the
    /// interval measured fastest on this kind of backend.
    fn preferred_reorder_interval(&self) -> u64 {
        4
    }

    /// True when the backend tests these host solutes' values (finite, within
    /// [`MAX_SOLUTE_COORDINATE`], masses > 0 and within the cell sums' cap) in the call of
    /// `handover` before anything changes, naming a bad one as [`check_host_solutes`] does: the
    /// caller then checks the lengths only, and the values are read once instead of twice.
    fn tests_host_solute_values(
        &self,
        _handover: HostHandover,
        _pos: &[[f64; 3]],
        _vel: &[[f64; 3]],
        _mass: &[f64],
    ) -> bool {
        false
    }

    /// Over MPI ranks that each hand over their own solutes, before the ranks agree on a
    /// one-call step's input: a backend may take this rank's host solutes now (up to its
    /// device) and test their values there, instead of the host's check. `Ok(true)`: taken,
    /// every value good (the caller then checks the lengths only, and the step that follows
    /// with the same arrays uses what was taken); an error names a bad value as
    /// [`check_host_solutes`] does; `Ok(false)`: not taken (the caller checks them on the
    /// host). The fluid does not change either way. The default takes nothing.
    fn take_host_solutes_tested(
        &mut self,
        _pos: &[[f64; 3]],
        _vel: &[[f64; 3]],
        _mass: &[f64],
    ) -> Result<bool> {
        Ok(false)
    }

    /// Time each phase of a step (waiting for the devices after each, so slower) or not;
    /// resets the timers. A backend without phase timers ignores it.
    fn time_phases(&mut self, _on: bool) {}

    /// Seconds per named phase since [`Backend::time_phases`] switched timing on (empty for a
    /// backend without phase timers).
    fn timed_phases(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// Over MPI ranks: each rank hands over its own solutes, wherever they are (routed to the
    /// rank that owns their cells and back), instead of every rank the same ones. A backend of
    /// one process has nothing to route.
    fn set_solutes_per_rank(&mut self, _on: bool) -> Result<()> {
        Ok(())
    }

    /// This rank's check of the input of a step (`mine`) agreed with every rank's, where ranks
    /// hand over their own solutes: all stop at the same step when one was given bad input
    /// (`ranks::agree_on_input`), instead of the others waiting for it in the step's
    /// collectives. A backend of one process (or of ranks that all pass the same solutes,
    /// which fail alike) returns `mine`.
    fn agree_on_input(&self, mine: Result<()>) -> Result<()> {
        mine
    }

    /// First half of a coupled step: a backend may start streaming the fluid and uploading the
    /// solutes asynchronously here. The default does nothing; the work happens in
    /// [`Backend::finish_coupled`].
    fn begin_coupled(
        &mut self,
        _plan: &StepPlan,
        _pos: &[[f64; 3]],
        _vel: &[[f64; 3]],
        _mass: &[f64],
    ) -> Result<()> {
        Ok(())
    }

    /// Queue the fluid's part of step `plan` that needs no solutes (the deferred collision of
    /// the fluid, streaming, binning) without waiting for it, so that device-resident solutes
    /// can be moved meanwhile (on the host or on other streams); the next `step`,
    /// `step_device_solutes` or `step_slab_solutes` with the same plan finishes the step.
    /// Returns whether it was begun; the default does nothing (false) and the finishing call
    /// does the whole step.
    fn begin_fluid_step(&mut self, _plan: &StepPlan, _n_solutes: usize) -> Result<bool> {
        Ok(false)
    }

    /// Whether a step begun by [`Backend::begin_fluid_step`] is still waiting for its finish.
    /// A finishing call that refuses its input must leave it so (it tests the input before it
    /// lets go of the begun pass), so that the step can be finished with good input.
    fn fluid_is_begun(&self) -> bool {
        false
    }

    /// Whether `begin_coupled` takes its own copy of the solutes (then `finish_coupled` gets
    /// only the velocity array to write, with empty `pos` and `mass`). The default backend
    /// does its work in `finish_coupled` and needs the inputs there.
    fn keeps_coupled_inputs(&self) -> bool {
        false
    }

    /// The CUDA GPU this backend's fluid lives on (the first of several), None on the CPU.
    fn cuda_ordinal(&self) -> Option<usize> {
        None
    }

    /// Check device-resident solutes before anything changes: the pointers are device memory of
    /// this backend's GPU(s), large enough for `n`, and the values are valid (finite positions
    /// within the coordinate limit, finite velocities, masses > 0). A backend may leave the
    /// values to the step that follows, if it tests them there before anything changes (one
    /// GPU bins the solutes before pass 1, testing each value as it reads it). The default
    /// refuses: the backend holds no GPU memory.
    fn check_device_solutes(&mut self, _solutes: &DeviceSolutes) -> Result<()> {
        Err(crate::error::MpcError::Device(format!(
            "{} takes no device-resident solutes; fix: hand the solutes over as host arrays \
             (step_with_solutes) or run the fluid on a CUDA GPU (device: Cuda([0]))",
            self.describe()
        )))
    }

    /// One MPC step with device-resident solutes, checked with
    /// [`Backend::check_device_solutes`]: their velocities are collided in place on the GPU.
    fn step_device_solutes(
        &mut self,
        _plan: &StepPlan,
        solutes: &DeviceSolutes,
    ) -> Result<StepReport> {
        self.check_device_solutes(solutes)?;
        Err(crate::error::MpcError::Device(
            "device-resident solutes are not implemented by this backend".into(),
        ))
    }

    /// The y slabs of a fluid cut over GPUs (None: the fluid is one piece).
    fn slab_places(&self) -> Option<Vec<SlabPlace>> {
        None
    }

    /// One MPC step with device-resident solutes held once per slab of this process
    /// ([`Backend::slab_places`] order, those of this rank), each copy on its slab's GPU and current for the solutes in and near the slab:
    /// each slab bins and collides the solutes in its own cells from its own copy and writes
    /// their velocities there (no GPU reads another's solutes). The copies are checked as
    /// [`Backend::check_device_solutes`] does before anything changes. The default refuses:
    /// the fluid is one piece.
    fn step_slab_solutes(
        &mut self,
        _plan: &StepPlan,
        _solutes: &[SlabSolutes],
    ) -> Result<StepReport> {
        Err(crate::error::MpcError::Device(format!(
            "{} is not cut into slabs: it takes one set of device solutes \
             (step_with_device_solutes)",
            self.describe()
        )))
    }

    /// Second half of a coupled step begun with [`Backend::begin_coupled`] with the same plan
    /// and solutes: finish the step and write the solute velocities into `solutes.vel`.
    fn finish_coupled(
        &mut self,
        plan: &StepPlan,
        solutes: &mut SoluteBatch<'_>,
    ) -> Result<StepReport> {
        self.step(plan, Some(solutes))
    }
}

/// The GPU of each y slab: `slabs` (0: one per GPU; at least one per GPU) over `gpus` in
/// contiguous blocks, slab k on `gpus[k G / S]`.
pub fn slab_gpus(gpus: &[usize], slabs: usize) -> Vec<usize> {
    let s = slabs.max(gpus.len());
    (0..s).map(|k| gpus[k * gpus.len() / s]).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn slabs_spread_over_the_gpus_in_contiguous_blocks() {
        use super::slab_gpus;
        assert_eq!(slab_gpus(&[0], 0), [0]);
        assert_eq!(slab_gpus(&[0, 1], 0), [0, 1]);
        assert_eq!(slab_gpus(&[0], 4), [0, 0, 0, 0]);
        assert_eq!(slab_gpus(&[0, 1], 4), [0, 0, 1, 1]);
        assert_eq!(slab_gpus(&[2, 3], 3), [2, 2, 3]);
        assert_eq!(slab_gpus(&[0, 1, 2, 3], 8), [0, 0, 1, 1, 2, 2, 3, 3]);
        assert_eq!(slab_gpus(&[0, 1, 2], 2), [0, 1, 2]);
    }
}
