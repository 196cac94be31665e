//! Solutes in the collision (`kernels/solutes.cu`): binned on the shifted grid with their
//! masses and Lees-Edwards images, added to the cell sums, collided with their cell's
//! parameters. Two sources: mpcbox's own solute buffers (host solutes uploaded by
//! `host_staging.rs` or `multi/solutes.rs`), or device arrays (the caller's, checked by
//! `device_solutes.rs`, or the home GPU's in a multi-GPU run).

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, PushKernelArg};

use super::buffers::SoluteBuffers;

use super::device::{drv, grid};
use super::params::KernelParams;
use super::CudaBackend;
use crate::backend::{DeviceSolutes, SoluteSubset};
use crate::error::{MpcError, Result};

impl CudaBackend {
    /// Step 3: bin the uploaded solutes and add them to the cell sums.
    pub(super) fn solute_bin(&mut self, p: &KernelParams, ns: usize) -> Result<()> {
        if ns == 0 {
            return Ok(());
        }
        if let Some(r) = self.rules.as_mut() {
            let (own, cell, image) =
                own_solutes(self.solutes.buffers.as_ref(), &self.dev.stream, ns)?;
            return r.bin_solutes(&self.dev, &mut self.cell.sums, p, &own, cell, image);
        }
        let s = self.dev.stream.clone();
        let sb = self
            .solutes
            .buffers
            .as_mut()
            .ok_or_else(|| MpcError::Device("solute buffers missing".into()))?;
        // SAFETY: mpc_solute_bin(MpcParams, const double *spos, *svel, *smass, u32 *scell, int
        // *simage, double *cells, const u32 *subset): the argument types match (subset null:
        // every solute); the solute buffers hold at least
        // p.n_solutes = ns solutes (capacity >= ns; pos/vel 3 doubles each), uploaded on this
        // stream or on the upload stream this stream has joined; cells p.n_cells × 8 doubles.
        unsafe {
            s.launch_builder(&self.dev.k.solute_bin)
                .arg(p)
                .arg(&sb.pos)
                .arg(&sb.vel)
                .arg(&sb.mass)
                .arg(&mut sb.cell)
                .arg(&mut sb.image)
                .arg(&mut self.cell.sums)
                .arg(&ALL_SOLUTES)
                .launch(grid(ns))
                .map_err(drv("solute bin"))?;
        }
        Ok(())
    }

    /// Step 5, solutes: collide in place on the device.
    pub(super) fn solute_collide(&mut self, p: &KernelParams, ns: usize) -> Result<()> {
        if let Some(r) = self.rules.as_ref() {
            let (own, cell, image) =
                own_solutes(self.solutes.buffers.as_ref(), &self.dev.stream, ns)?;
            let (sums, report) = (&self.cell.sums, &mut self.obs.report);
            return r.collide_solutes(&self.dev, sums, report, p, &own, cell, image, false);
        }
        let s = self.dev.stream.clone();
        let sb = self
            .solutes
            .buffers
            .as_mut()
            .ok_or_else(|| MpcError::Device("solute buffers missing".into()))?;
        // SAFETY: mpc_solute_collide(MpcParams, const u32 *scell, const int *simage, const
        // double *cells, double *svel, const double *spos, const double *smass, double *report):
        // the cells and images written by `solute_bin` on this stream for p.n_solutes = ns
        // solutes (capacity >= ns), the cell parameters, the velocities and positions (3
        // doubles per solute), the masses, and the step's report (REPORT_WORDS × REPORT_COPIES
        // doubles, zeroed in pass 1 on this stream, read after the step).
        unsafe {
            s.launch_builder(&self.dev.k.solute_collide)
                .arg(p)
                .arg(&sb.cell)
                .arg(&sb.image)
                .arg(&self.cell.sums)
                .arg(&mut sb.vel)
                .arg(&sb.pos)
                .arg(&sb.mass)
                .arg(&mut self.obs.report)
                .launch(grid(ns))
                .map_err(drv("solute collide"))?;
        }
        Ok(())
    }

    /// Bin the solutes of `s` (arrays on this GPU, or on a peer GPU this one may read) and add
    /// those in this GPU's cells to the cell sums: every solute, or those `subset` lists (the
    /// only ones that may lie in this GPU's cells; the rules' kernels scan them all).
    pub(super) fn bin_solutes_from(
        &mut self,
        p: &KernelParams,
        s: &DeviceSolutes,
        subset: Option<SoluteSubset>,
    ) -> Result<()> {
        if self.rules.is_some() {
            let (cell, image) = self.device_solute_indices(s.n)?;
            let r = self.rules.as_mut().expect("a rule's buffers");
            return r.bin_solutes(&self.dev, &mut self.cell.sums, p, s, cell, image);
        }
        self.ensure_device_solute_state(s.n)?;
        let (slots, listed) = solute_slots(s, subset);
        if slots == 0 {
            return Ok(());
        }
        let q = p.with_solutes(slots);
        let main = self.dev.stream.clone();
        let st = self.solutes.device.as_mut().expect("made above");
        // SAFETY: mpc_solute_bin(MpcParams, const double* spos, const double* svel, const double*
        // smass, unsigned* scell, int* simage, double* cells, const unsigned* subset): the params
        // by value with n_solutes = the slots, the caller's arrays (checked: 3n, 3n, n doubles,
        // readable by this GPU, the caller's work on them finished before the check returned),
        // index arrays of capacity >= n >= slots, the cell buffer, and the subset (checked: that
        // many indices < n on this GPU) or null for all n.
        unsafe {
            main.launch_builder(&self.dev.k.solute_bin)
                .arg(&q)
                .arg(&s.pos)
                .arg(&s.vel)
                .arg(&s.mass)
                .arg(&mut st.cell)
                .arg(&mut st.image)
                .arg(&mut self.cell.sums)
                .arg(&listed)
                .launch(grid(slots))
                .map_err(drv("solute bin"))?;
        }
        Ok(())
    }

    /// Collide the solutes this GPU binned into its cells and write their velocities into
    /// `s.vel` (possibly peer memory); solutes of other GPUs' cells are left to their owner.
    /// `subset` as binned.
    pub(super) fn collide_owned_solutes(
        &mut self,
        p: &KernelParams,
        s: &DeviceSolutes,
        subset: Option<SoluteSubset>,
    ) -> Result<()> {
        if self.rules.is_some() {
            let (cell, image) = self.device_solute_indices(s.n)?;
            let r = self.rules.as_ref().expect("a rule's buffers");
            let (sums, report) = (&self.cell.sums, &mut self.obs.report);
            return r.collide_solutes(&self.dev, sums, report, p, s, cell, image, true);
        }
        let (slots, listed) = solute_slots(s, subset);
        let q = p.with_solutes(slots);
        let main = self.dev.stream.clone();
        let st =
            self.solutes.device.as_ref().ok_or_else(|| {
                MpcError::Device("solutes collided before they were binned".into())
            })?;
        // SAFETY: mpc_solute_collide_owned(MpcParams, const unsigned* scell, const int* simage,
        // const double* cells, double* svel, const double* spos, const double* smass, double*
        // report, const unsigned* subset): the index arrays written by the bin kernel on this
        // stream for the same slots, the cell parameters, the caller's velocity, position and
        // mass arrays (3n, 3n, n doubles, checked readable by this GPU, as the bin kernel read
        // them), the step's report (REPORT_WORDS × REPORT_COPIES doubles, zeroed in pass 1 on
        // this stream), and the subset the bin kernel read (or null); each solute is written
        // by the one GPU that owns its cell. With no slots every thread only adds nothing to the report.
        unsafe {
            main.launch_builder(&self.dev.k.solute_collide_owned)
                .arg(&q)
                .arg(&st.cell)
                .arg(&st.image)
                .arg(&self.cell.sums)
                .arg(&s.vel)
                .arg(&s.pos)
                .arg(&s.mass)
                .arg(&mut self.obs.report)
                .arg(&listed)
                .launch(grid(slots))
                .map_err(drv("solute collide"))?;
        }
        Ok(())
    }

    /// The cell and image arrays of device-resident solutes (made by `bin_solutes_from`).
    fn device_solute_indices(&mut self, n: usize) -> Result<(u64, u64)> {
        self.ensure_device_solute_state(n)?;
        let st = &self.dev.stream;
        let d = self.solutes.device.as_ref().expect("made above");
        Ok((d.cell.device_ptr(st).0, d.image.device_ptr(st).0))
    }
}

/// mpcbox's own solute buffers `solutes` (the first `ns`) as [`DeviceSolutes`] with their cell
/// and image arrays (the rules' solute kernels take addresses).
fn own_solutes(
    solutes: Option<&SoluteBuffers>,
    st: &Arc<CudaStream>,
    ns: usize,
) -> Result<(DeviceSolutes, u64, u64)> {
    let sb = solutes.ok_or_else(|| MpcError::Device("solute buffers missing".into()))?;
    // raw addresses: event tracking is off, the guards do nothing
    let solutes = DeviceSolutes {
        pos: sb.pos.device_ptr(st).0,
        vel: sb.vel.device_ptr(st).0,
        mass: sb.mass.device_ptr(st).0,
        n: ns,
        stream: 0,
    };
    Ok((solutes, sb.cell.device_ptr(st).0, sb.image.device_ptr(st).0))
}

/// The null `subset` argument of the solute kernels: every solute.
static ALL_SOLUTES: u64 = 0;

/// The slots of the solute kernels and their `subset` argument: every solute (null), or the
/// listed ones.
pub(super) fn solute_slots(s: &DeviceSolutes, subset: Option<SoluteSubset>) -> (usize, u64) {
    match subset {
        Some(x) => (x.len, x.index),
        None => (s.n, ALL_SOLUTES),
    }
}
