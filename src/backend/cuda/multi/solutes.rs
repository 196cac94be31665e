//! Which solutes a multi-GPU step takes and their checks. Solutes from outside (device arrays
//! on one of the run's GPUs, or host arrays) are routed to the slabs owning their cells and
//! back (`solute_routes.rs`); the bundled MD engine hands each slab its own copy
//! (`Backend::step_slab_solutes`).
//!
//! Over MPI ranks host solutes first go to the rank owning their cell
//! (`backend::slabbed::route_solutes`), that rank routes them to its slabs as above, and their
//! velocities go back. Device-resident solutes are refused there (they would be on one rank's
//! GPU).

use super::solute_routes::{RouteSource, SoluteRoutes};
use super::step::StepSolutes;
use super::MultiCudaBackend;
use crate::backend::cuda::device::drv;
use crate::backend::cuda::CudaBackend;
use crate::backend::slabbed::{return_solute_velocities, route_solutes, SoluteMode};
use crate::backend::{DeviceSolutes, SoluteBatch, StepReport};
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

    /// Device-resident solutes live on one GPU of one process: over MPI ranks they are
    /// refused (before anything changes), naming the host arrays as the way.
    pub(super) fn refuse_device_solutes_over_ranks(&self) -> Result<()> {
        if self.transport.ranks() > 1 {
            return Err(MpcError::Device(format!(
                "device-resident solutes over {} MPI ranks: each rank's GPUs hold only their \
                 slabs; fix: hand the solutes over as host arrays (mpcbox_step_with_solutes, \
                 Solvent::step_with_solutes), routed to their cells' ranks",
                self.transport.ranks()
            )));
        }
        Ok(())
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
    /// the fluid moves unless the step was begun (`Solvent::begin_device_step`), by the count pass.
    pub(super) fn check_device_solutes_multi(&mut self, s: &DeviceSolutes) -> Result<()> {
        let home = self.solutes_home(s)?;
        self.slabs[home].check_solute_pointers(s)
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
