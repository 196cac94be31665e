//! Which solutes a multi-GPU step takes and their checks. Solutes from outside (device arrays
//! on one of the run's GPUs, or host arrays) are routed to the slabs owning their cells and
//! back (`solute_routes.rs`); the bundled MD engine hands each slab its own copy
//! (`Backend::step_slab_solutes`).
//!
//! Over MPI ranks host solutes first go to the rank owning their cell
//! (`backend::slabbed::route_solutes`), that rank routes them to its slabs as above, and their
//! velocities go back. Device-resident solutes over ranks (each rank's own, on its GPU) are
//! copied to this rank's pinned host memory, checked (every rank agreeing), routed as host
//! solutes are, and their velocities copied back into the caller's array
//! ([`MultiCudaBackend::step_device_over_ranks`]).

use std::sync::Arc;

use cudarc::driver::{result, CudaContext, PinnedHostSlice};

use super::solute_routes::{RouteSource, SoluteRoutes};
use super::step::StepSolutes;
use super::MultiCudaBackend;
use crate::backend::cuda::device::drv;
use crate::backend::cuda::CudaBackend;
use crate::backend::slabbed::{return_solute_velocities, route_solutes, SoluteMode};
use crate::backend::{Backend, DeviceSolutes, SoluteBatch, StepReport};
use crate::error::{MpcError, Result};
use crate::physics::StepPlan;

impl MultiCudaBackend {
    /// One step of a box cut over MPI ranks with host solutes: each goes to the rank owning
    /// its cell, this rank's slabs collide those routed here, the velocities come back.
    pub(super) fn step_over_ranks(
        &mut self,
        plan: &StepPlan,
        solutes: Option<&mut SoluteBatch<'_>>,
    ) -> Result<StepReport> {
        let mode = if self.solutes_per_rank {
            SoluteMode::PerRank
        } else {
            SoluteMode::Replicated
        };
        let (phys, bounds, slab_rank) = (&self.phys, &self.bounds, &self.slab_rank);
        let layer = phys.cells[0] * phys.cells[2];
        let batch = solutes.as_deref().filter(|b| !b.is_empty());
        let mut held = route_solutes(&*self.transport, mode, batch, |p| {
            let cell = phys.locate_solute(plan, p).cell;
            slab_rank[super::slab::owner(bounds, cell / layer)]
        })?;
        let report = match held.batch() {
            Some(mut b) => self.run_step(plan, StepSolutes::Host(&mut b))?,
            None => self.run_step(plan, StepSolutes::None)?,
        };
        let batch = solutes.filter(|b| !b.is_empty());
        return_solute_velocities(&*self.transport, mode, &held, batch)?;
        Ok(report)
    }

    /// One step over MPI ranks with this rank's device-resident solutes `s`: copied to the
    /// host on the caller's stream, checked (pointers, then values; every rank stops at this
    /// step if one was handed bad solutes, before anything changes), routed to the ranks of
    /// their cells as host solutes are, and their new velocities copied back into the caller's
    /// array on its stream (the host waits for the copies).
    pub(super) fn step_device_over_ranks(
        &mut self,
        plan: &StepPlan,
        s: &DeviceSolutes,
    ) -> Result<StepReport> {
        let mine = self.copy_rank_solutes_in(s);
        self.agree_on_input(mine)?;
        let mut copy = self.rank_copy.take().expect("made by copy_rank_solutes_in");
        let stepped = match copy.batch(s.n) {
            Ok(mut batch) => self.step_over_ranks(plan, Some(&mut batch)),
            Err(e) => Err(e),
        };
        let done = stepped.and_then(|report| copy.copy_velocities_out(s).map(|()| report));
        self.rank_copy = Some(copy);
        done
    }

    /// This rank's device solutes `s` into its pinned host copy, checked: the pointers (device
    /// memory of one of this rank's GPUs, long enough), then the values as host solutes are.
    fn copy_rank_solutes_in(&mut self, s: &DeviceSolutes) -> Result<()> {
        let home = self.solutes_home(s)?;
        let slab = &mut self.slabs[home];
        slab.solutes.check_pointers(&slab.dev, s)?;
        let ordinal = slab.dev.ordinal;
        let copy = match self.rank_copy.take() {
            Some(c) if c.ordinal == ordinal && c.capacity >= s.n => c,
            _ => RankSoluteCopy::new(&slab.dev.ctx, ordinal, s.n)?,
        };
        let copy = self.rank_copy.insert(copy);
        copy.copy_in(s)?;
        let batch = copy.batch(s.n)?;
        crate::backend::check_host_solutes(batch.pos, batch.vel, batch.mass, 0..s.n)?;
        let cap = self.phys.sums.as_ref().map(|c| c.max_solute_mass);
        crate::backend::check_solute_masses_fit(batch.mass, cap)?;
        crate::backend::check_solutes_outside_walls(&self.phys, batch.pos)
    }

    /// The slab of this process whose GPU holds device arrays `s` (the first on that GPU):
    /// refused, naming the run's GPUs, when they live on a GPU the run does not use.
    pub(super) fn solutes_home(&self, s: &DeviceSolutes) -> Result<usize> {
        self.slabs[0]
            .dev
            .ctx
            .bind_to_thread()
            .map_err(drv("bind"))?;
        let owner = crate::backend::cuda::device_solutes::device_of(s.pos);
        let gpus: Vec<usize> = self.slabs.iter().map(|b| b.dev.ordinal).collect();
        match owner.and_then(|o| gpus.iter().position(|&g| g == o)) {
            Some(k) => Ok(k),
            None => Err(MpcError::Solute {
                field: "positions".into(),
                problem: match owner {
                    Some(o) => {
                        format!("live on GPU {o}, which this run does not use (GPUs {gpus:?})")
                    }
                    None => format!("{:#x} is not device memory of a CUDA GPU", s.pos),
                },
                fix: format!(
                    "allocate the solutes on one of the fluid's GPUs {gpus:?}, or hand them over \
                     as host arrays (step_with_solutes)"
                ),
            }),
        }
    }

    /// Check device-resident solutes before anything changes: the pointers, on the GPU that
    /// holds them (one of the run's). Their values are checked by the step's routing, before
    /// the fluid moves unless the step was begun (`Solvent::begin_fluid_step`), by the count pass.
    pub(super) fn check_device_solutes_multi(&mut self, s: &DeviceSolutes) -> Result<()> {
        let home = self.solutes_home(s)?;
        let slab = &self.slabs[home];
        slab.solutes.check_pointers(&slab.dev, s)
    }

    /// This step's solutes staged for the routing from slab `home`'s GPU (`solute_routes.rs`):
    /// the arrays the routing reads and the velocities' return writes.
    pub(super) fn stage_solutes(
        &mut self,
        home: usize,
        source: RouteSource<'_>,
    ) -> Result<DeviceSolutes> {
        self.routes_at(home)?;
        let routes = self.routes.as_mut().expect("made above");
        routes.stage(&self.slabs, source)
    }

    /// Check and count the staged `solutes` per slab (the host waits for the counts; a bad
    /// value is an error here).
    pub(super) fn count_staged(&mut self, plan: &StepPlan, solutes: &DeviceSolutes) -> Result<()> {
        let (routes, slabs) = self.staged_routes()?;
        routes.check_and_count(slabs, plan, solutes)
    }

    /// Pack the counted `solutes` into their slabs' regions and send them (queued only).
    pub(super) fn pack_staged(&mut self, plan: &StepPlan, solutes: &DeviceSolutes) -> Result<()> {
        let (routes, slabs) = self.staged_routes()?;
        routes.pack_and_send(slabs, plan, solutes)
    }

    /// The routing that staged this step's solutes, and the slabs.
    fn staged_routes(&mut self) -> Result<(&mut SoluteRoutes, &[CudaBackend])> {
        let routes = self
            .routes
            .as_mut()
            .ok_or_else(|| MpcError::Device("solutes routed before staged".into()))?;
        Ok((routes, &self.slabs))
    }

    /// The routing with its staging on slab `home`'s GPU (made, or remade when the solutes
    /// moved to another GPU, once every copy of the old one has passed).
    fn routes_at(&mut self, home: usize) -> Result<()> {
        let same =
            |r: &SoluteRoutes| self.slabs[r.home()].dev.ordinal == self.slabs[home].dev.ordinal;
        if !self.routes.as_ref().is_some_and(same) {
            if let Some(old) = self.routes.take() {
                old.quiesce()?;
            }
            let bounds = &self.bounds[self.first..=self.first + self.slabs.len()];
            self.routes = Some(SoluteRoutes::new(&self.slabs, home, bounds)?);
        }
        Ok(())
    }
}

/// A rank's device-resident solutes copied to pinned host memory of their GPU, so that they
/// travel to the ranks of their cells as host solutes do.
pub(super) struct RankSoluteCopy {
    ordinal: usize,
    capacity: usize,
    pos: PinnedHostSlice<f64>,
    vel: PinnedHostSlice<f64>,
    mass: PinnedHostSlice<f64>,
}

impl RankSoluteCopy {
    fn new(ctx: &Arc<CudaContext>, ordinal: usize, n: usize) -> Result<RankSoluteCopy> {
        // room to grow, so that a slowly growing count does not reallocate every step
        let capacity = n + n / 8 + 1;
        // SAFETY: pinned host memory, uninitialised: every element read (by `batch`) was first
        // written by `copy_in`'s copies, which the host waited for.
        let pin = |len: usize| unsafe { ctx.alloc_pinned::<f64>(len) }.map_err(drv("pinned"));
        Ok(RankSoluteCopy {
            ordinal,
            capacity,
            pos: pin(3 * capacity)?,
            vel: pin(3 * capacity)?,
            mass: pin(capacity)?,
        })
    }

    /// The caller's `n` solutes copied here on its stream, after the work queued on it.
    fn copy_in(&mut self, s: &DeviceSolutes) -> Result<()> {
        let n = s.n;
        let stream = s.stream as cudarc::driver::sys::CUstream;
        let into = |b: &mut PinnedHostSlice<f64>, src: u64, len: usize| -> Result<()> {
            let dst = &mut b.as_mut_slice().map_err(drv("pinned"))?[..len];
            // SAFETY: `src` holds `len` doubles of device memory (the pointers were checked);
            // `dst` is pinned host memory of that length, not read until the stream is
            // synchronised below.
            unsafe { result::memcpy_dtoh_async(dst, src, stream) }.map_err(drv("solute copy"))
        };
        into(&mut self.pos, s.pos, 3 * n)?;
        into(&mut self.vel, s.vel, 3 * n)?;
        into(&mut self.mass, s.mass, n)?;
        // SAFETY: the caller's stream handle (0: the legacy default stream), valid during the call.
        unsafe { result::stream::synchronize(stream) }.map_err(drv("solute copy"))
    }

    /// The new velocities into the caller's array on its stream (the host waits for the copy,
    /// so the buffer may be refilled next step whatever stream the caller uses then).
    fn copy_velocities_out(&self, s: &DeviceSolutes) -> Result<()> {
        let stream = s.stream as cudarc::driver::sys::CUstream;
        let vel = &self.vel.as_slice().map_err(drv("pinned"))?[..3 * s.n];
        // SAFETY: `s.vel` holds 3n doubles of device memory (checked); the host buffer lives
        // until the copy has finished (synchronised below).
        unsafe {
            result::memcpy_htod_async(s.vel, vel, stream).map_err(drv("solute copy"))?;
            result::stream::synchronize(stream).map_err(drv("solute copy"))
        }
    }

    /// The first `n` solutes as a batch (velocities written by the collision).
    fn batch(&mut self, n: usize) -> Result<SoluteBatch<'_>> {
        let pos = &self.pos.as_slice().map_err(drv("pinned"))?[..3 * n];
        let mass = &self.mass.as_slice().map_err(drv("pinned"))?[..n];
        let vel = &mut self.vel.as_mut_slice().map_err(drv("pinned"))?[..3 * n];
        Ok(SoluteBatch {
            pos: pos.as_chunks::<3>().0,
            vel: vel.as_chunks_mut::<3>().0,
            mass,
        })
    }
}
