//! Solutes in a multi-GPU run, held on the *home* GPU (the run's first): the caller's device
//! arrays, or host arrays uploaded once. Every GPU bins the solutes straight from the home
//! GPU's memory (peer reads over NVLink) and adds those in its own cells; the GPU owning a
//! solute's cell collides it and writes the velocity back into the home array (peer write),
//! the others leave it alone. Host solutes cross PCIe once each way instead of once per GPU,
//! and device solutes not at all. Needs peer access from every GPU to the home GPU; without
//! it, host solutes go to every GPU through the host (the older path) and device solutes are
//! refused.
//!
//! Without peer access, [`CudaBackend::upload_solutes_blocking`] copies the solutes to every
//! GPU, each GPU collides those in its own cells and writes zeros for the others, and the host
//! adds the GPUs' outputs (exact: one term is non-zero).
//!
//! Over MPI ranks the solutes come as host arrays: each goes to the rank owning its cell
//! (`backend::slabbed::route_solutes`), that rank's GPUs collide it as above, and its velocity
//! goes back. Device-resident solutes are refused there (they would be on one rank's GPU).

use cudarc::driver::DevicePtr;

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
                "device-resident solutes over {} MPI ranks: each rank's GPUs hold only their                  slabs; fix: hand the solutes over as host arrays (mpcbox_step_with_solutes,                  Solvent::step_with_solutes), routed to their cells' ranks",
                self.transport.ranks()
            )));
        }
        Ok(())
    }

    /// Where every GPU reads this step's solutes from: the caller's device arrays, or host
    /// solutes uploaded once to the home GPU when every GPU can reach it (None: host solutes
    /// uploaded to every GPU here, or no solutes).
    pub(super) fn place_solutes(
        &mut self,
        solutes: &StepSolutes<'_, '_>,
    ) -> Result<Option<DeviceSolutes>> {
        match solutes {
            StepSolutes::Device(d) => Ok(Some(*d)),
            StepSolutes::Host(b) if self.home_reachable => {
                Ok(Some(self.upload_solutes_home(b.pos, &*b.vel, b.mass)?))
            }
            StepSolutes::Host(b) => {
                for s in &mut self.slabs {
                    s.upload_solutes_blocking(b.pos, &*b.vel, b.mass)?;
                }
                Ok(None)
            }
            StepSolutes::None | StepSolutes::PerSlab(_) => Ok(None),
        }
    }

    /// Host solutes on every GPU: their velocities are the sum of the GPUs' outputs (exactly
    /// one GPU owns each solute, the others wrote zeros).
    pub(super) fn sum_solute_velocities(&mut self, b: &mut SoluteBatch<'_>) -> Result<()> {
        let ns = b.len();
        let out = b.vel.as_flattened_mut();
        out.fill(0.0);
        for s in &mut self.slabs {
            s.download_solute_velocities(ns, &mut self.solute_scratch)?;
            for (o, v) in out.iter_mut().zip(&self.solute_scratch) {
                *o += *v;
            }
        }
        Ok(())
    }

    /// Check device-resident solutes: on the home GPU, like one GPU's check; their pool (if
    /// they come from a stream-ordered pool) is opened to the other GPUs.
    pub(super) fn check_device_solutes_multi(&mut self, s: &DeviceSolutes) -> Result<()> {
        if !self.home_reachable {
            return Err(MpcError::Device(
                "device-resident solutes on several GPUs need peer access from every GPU to the \
                 first (NVLink or PCIe peer-to-peer), which these GPUs lack; fix: hand the \
                 solutes over as host arrays, or run the fluid on one GPU"
                    .into(),
            ));
        }
        self.slabs[0].check_device_solutes_here(s)?;
        // other GPUs only: slabs on the home GPU share its memory
        let home = self.slabs[0].dev.ordinal;
        let mut readers: Vec<usize> = self.slabs[1..].iter().map(|b| b.dev.ordinal).collect();
        readers.retain(|&r| r != home);
        readers.dedup();
        for ptr in [s.pos, s.vel, s.mass] {
            super::transfer::open_pool_of(ptr, &readers)?;
        }
        Ok(())
    }

    /// The home GPU's solute buffers holding `pos`, `vel`, `mass` (one PCIe transfer, through
    /// the home GPU's pinned staging filled on the host pool), as device solutes every GPU
    /// reads. The copies are queued on the home GPU's main stream, before its kernels.
    pub(super) fn upload_solutes_home(
        &mut self,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<DeviceSolutes> {
        let ns = pos.len();
        let home = &mut self.slabs[0];
        home.ensure_solute_capacity(ns)?;
        home.ensure_coupled_io(ns)?;
        let stream = home.dev.stream.clone();
        let io = home.coupled.as_mut().expect("made above");
        let sb = home.solutes.as_mut().expect("made above");
        // the previous step's copies out of the staging buffers are complete: the step ended
        // with every GPU synchronised
        crate::host_pool::copy(
            io.pos.as_mut_slice().map_err(drv("pinned"))?,
            pos.as_flattened(),
        );
        crate::host_pool::copy(
            io.vel.as_mut_slice().map_err(drv("pinned"))?,
            vel.as_flattened(),
        );
        crate::host_pool::copy(io.mass.as_mut_slice().map_err(drv("pinned"))?, mass);
        stream
            .memcpy_htod(&io.pos, &mut sb.pos.slice_mut(..3 * ns))
            .map_err(drv("solute upload"))?;
        stream
            .memcpy_htod(&io.vel, &mut sb.vel.slice_mut(..3 * ns))
            .map_err(drv("solute upload"))?;
        stream
            .memcpy_htod(&io.mass, &mut sb.mass.slice_mut(..ns))
            .map_err(drv("solute upload"))?;
        let addr = |b: &cudarc::driver::CudaSlice<f64>| b.device_ptr(&stream).0;
        Ok(DeviceSolutes {
            pos: addr(&sb.pos),
            vel: addr(&sb.vel),
            mass: addr(&sb.mass),
            n: ns,
            stream: 0,
        })
    }

    /// After every GPU has finished the step: the collided velocities from the home buffers,
    /// through the pinned staging.
    pub(super) fn download_solutes_home(&mut self, out: &mut [[f64; 3]]) -> Result<()> {
        let ns = out.len();
        let home = &mut self.slabs[0];
        let (Some(io), Some(sb)) = (home.coupled.as_mut(), home.solutes.as_ref()) else {
            return Err(MpcError::Device("solute buffers missing".into()));
        };
        home.dev
            .stream
            .memcpy_dtoh(&sb.vel.slice(..3 * ns), &mut io.out)
            .map_err(drv("solute download"))?;
        // explicit wait: event tracking is off, so the pinned buffer records no event
        home.dev
            .stream
            .synchronize()
            .map_err(drv("solute download"))?;
        let staged = io.out.as_slice().map_err(drv("solute download"))?;
        crate::host_pool::copy(out.as_flattened_mut(), &staged[..3 * ns]);
        Ok(())
    }
}

impl CudaBackend {
    /// Slab mode: copy all solutes to this GPU (it bins only those in its cells).
    pub(super) fn upload_solutes_blocking(
        &mut self,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<()> {
        let ns = pos.len();
        self.ensure_solute_capacity(ns)?;
        let s = self.dev.stream.clone();
        let sb = self.solutes.as_mut().expect("made above");
        s.memcpy_htod(pos.as_flattened(), &mut sb.pos.slice_mut(..3 * ns))
            .map_err(drv("solute upload"))?;
        s.memcpy_htod(vel.as_flattened(), &mut sb.vel.slice_mut(..3 * ns))
            .map_err(drv("solute upload"))?;
        s.memcpy_htod(mass, &mut sb.mass.slice_mut(..ns))
            .map_err(drv("solute upload"))?;
        Ok(())
    }

    /// Slab mode: this GPU's solute velocities (zeros for solutes another GPU owns).
    fn download_solute_velocities(&mut self, ns: usize, out: &mut Vec<f64>) -> Result<()> {
        out.resize(3 * ns, 0.0);
        let sb = self
            .solutes
            .as_ref()
            .ok_or_else(|| MpcError::Device("solute buffers missing".into()))?;
        self.dev
            .stream
            .memcpy_dtoh(&sb.vel.slice(..3 * ns), &mut out[..])
            .map_err(drv("solute download"))?;
        Ok(())
    }
}
