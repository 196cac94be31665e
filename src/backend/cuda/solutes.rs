//! Solutes in the collision (`kernels/solutes.cu`), passes of [`SoluteCoupling`]: binned on the shifted grid with their
//! masses and Lees-Edwards images, added to the cell sums, collided with their cell's
//! parameters. Two sources: mpcbox's own solute buffers (host solutes uploaded by
//! `host_staging.rs` or `multi/solutes.rs`), or device arrays (the caller's, checked by
//! `device_solutes.rs`, or the home GPU's in a multi-GPU run).

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, PushKernelArg};

use super::device::{drv, grid, CudaDevice};
use super::fluid_view::FluidView;
use super::params::KernelParams;
use super::rules::RuleBuffers;
use super::solute_coupling::{SoluteBuffers, SoluteCoupling};
use crate::backend::{DeviceSolutes, SoluteSubset, MAX_SOLUTE_COORDINATE};
use crate::error::{MpcError, Result};

impl SoluteCoupling {
    /// Step 3: bin the first `ns` solutes of the own buffers and add them to the cell sums.
    pub(super) fn bin_own(
        &mut self,
        fluid: FluidView<'_>,
        rules: Option<&mut RuleBuffers>,
        p: &KernelParams,
        ns: usize,
    ) -> Result<()> {
        if ns == 0 {
            return Ok(());
        }
        let dev = fluid.dev;
        if let Some(r) = rules {
            let (own, cell, image) = own_solutes(self.buffers.as_ref(), &dev.stream, ns)?;
            return r.bin_solutes(dev, &mut fluid.cell.sums, p, &own, cell, image);
        }
        let s = dev.stream.clone();
        let sb = self
            .buffers
            .as_mut()
            .ok_or_else(|| MpcError::Device("solute buffers missing".into()))?;
        // SAFETY: mpc_solute_bin(MpcParams, const double *spos, *svel, *smass, u32 *scell, int
        // *simage, double *cells, const u32 *subset, u32 *first_bad, double limit): the argument
        // types match (subset null: every solute; first_bad null: values tested on the host);
        // the solute buffers hold at least
        // p.n_solutes = ns solutes (capacity >= ns; pos/vel 3 doubles each), uploaded on this
        // stream or on the upload stream this stream has joined; cells p.n_cells × 8 doubles.
        unsafe {
            s.launch_builder(&dev.k.solute_bin)
                .arg(p)
                .arg(&sb.pos)
                .arg(&sb.vel)
                .arg(&sb.mass)
                .arg(&mut sb.cell)
                .arg(&mut sb.image)
                .arg(&mut fluid.cell.sums)
                .arg(&ALL_SOLUTES)
                .arg(&NO_CHECK)
                .arg(&0.0f64)
                .launch(grid(ns))
                .map_err(drv("solute bin"))?;
        }
        Ok(())
    }

    /// Step 5, solutes: collide the own buffers' first `ns` in place on the device.
    pub(super) fn collide_own(
        &mut self,
        fluid: FluidView<'_>,
        rules: Option<&mut RuleBuffers>,
        p: &KernelParams,
        ns: usize,
    ) -> Result<()> {
        let dev = fluid.dev;
        if let Some(r) = rules {
            let (own, cell, image) = own_solutes(self.buffers.as_ref(), &dev.stream, ns)?;
            let (sums, report) = (&fluid.cell.sums, fluid.report);
            return r.collide_solutes(dev, sums, report, p, &own, cell, image, false);
        }
        let s = dev.stream.clone();
        let sb = self
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
            s.launch_builder(&dev.k.solute_collide)
                .arg(p)
                .arg(&sb.cell)
                .arg(&sb.image)
                .arg(&fluid.cell.sums)
                .arg(&mut sb.vel)
                .arg(&sb.pos)
                .arg(&sb.mass)
                .arg(&mut *fluid.report)
                .launch(grid(ns))
                .map_err(drv("solute collide"))?;
        }
        Ok(())
    }

    /// Bin the solutes of `s` (arrays on this GPU, or on a peer GPU this one may read) and add
    /// those in this GPU's cells to the cell sums: every solute, or those `subset` lists (the
    /// only ones that may lie in this GPU's cells; the rules' kernels scan them all). With
    /// `test_values` (plain SRD) the binning also tests every value into the device state's
    /// first-bad words (`arm_value_test`), and a bad solute adds nothing.
    pub(super) fn bin_from(
        &mut self,
        fluid: FluidView<'_>,
        rules: Option<&mut RuleBuffers>,
        p: &KernelParams,
        s: &DeviceSolutes,
        subset: Option<SoluteSubset>,
        test_values: bool,
    ) -> Result<()> {
        let dev = fluid.dev;
        if let Some(r) = rules {
            let (cell, image) = self.device_indices(dev, s.n)?;
            return r.bin_solutes(dev, &mut fluid.cell.sums, p, s, cell, image);
        }
        let st = self.device_state(dev, s.n)?;
        let (slots, listed) = solute_slots(s, subset);
        if slots == 0 {
            return Ok(());
        }
        let q = p.with_solutes(slots);
        let main = dev.stream.clone();
        let (first_bad, limit) = match test_values {
            true => (st.first_bad.device_ptr(&main).0, MAX_SOLUTE_COORDINATE),
            false => (NO_CHECK, 0.0),
        };
        // SAFETY: mpc_solute_bin(MpcParams, const double* spos, const double* svel, const double*
        // smass, unsigned* scell, int* simage, double* cells, const unsigned* subset, unsigned*
        // first_bad, double limit): the params by value with n_solutes = the slots, the caller's
        // arrays (checked: 3n, 3n, n doubles, readable by this GPU, the caller's queued work on
        // them before this stream's, by the check or `arm_value_test`), index arrays of capacity
        // >= n >= slots, the cell buffer, the subset (checked: that many indices < n on this
        // GPU) or null for all n, and the device state's four first-bad words or null.
        unsafe {
            main.launch_builder(&dev.k.solute_bin)
                .arg(&q)
                .arg(&s.pos)
                .arg(&s.vel)
                .arg(&s.mass)
                .arg(&mut st.cell)
                .arg(&mut st.image)
                .arg(&mut fluid.cell.sums)
                .arg(&listed)
                .arg(&first_bad)
                .arg(&limit)
                .launch(grid(slots))
                .map_err(drv("solute bin"))?;
        }
        Ok(())
    }

    /// Collide the solutes this GPU binned into its cells and write their velocities into
    /// `s.vel` (possibly peer memory); solutes of other GPUs' cells are left to their owner.
    /// `subset` as binned.
    pub(super) fn collide_owned(
        &mut self,
        fluid: FluidView<'_>,
        rules: Option<&mut RuleBuffers>,
        p: &KernelParams,
        s: &DeviceSolutes,
        subset: Option<SoluteSubset>,
    ) -> Result<()> {
        let dev = fluid.dev;
        if let Some(r) = rules {
            let (cell, image) = self.device_indices(dev, s.n)?;
            let (sums, report) = (&fluid.cell.sums, fluid.report);
            return r.collide_solutes(dev, sums, report, p, s, cell, image, true);
        }
        let (slots, listed) = solute_slots(s, subset);
        let q = p.with_solutes(slots);
        let main = dev.stream.clone();
        let st = self
            .device
            .as_ref()
            .ok_or_else(|| MpcError::Device("solutes collided before they were binned".into()))?;
        // SAFETY: mpc_solute_collide_owned(MpcParams, const unsigned* scell, const int* simage,
        // const double* cells, double* svel, const double* spos, const double* smass, double*
        // report, const unsigned* subset): the index arrays written by the bin kernel on this
        // stream for the same slots, the cell parameters, the caller's velocity, position and
        // mass arrays (3n, 3n, n doubles, checked readable by this GPU, as the bin kernel read
        // them), the step's report (REPORT_WORDS × REPORT_COPIES doubles, zeroed in pass 1 on
        // this stream), and the subset the bin kernel read (or null); each solute is written
        // by the one GPU that owns its cell. With no slots every thread only adds nothing to the report.
        unsafe {
            main.launch_builder(&dev.k.solute_collide_owned)
                .arg(&q)
                .arg(&st.cell)
                .arg(&st.image)
                .arg(&fluid.cell.sums)
                .arg(&s.vel)
                .arg(&s.pos)
                .arg(&s.mass)
                .arg(&mut *fluid.report)
                .arg(&listed)
                .launch(grid(slots))
                .map_err(drv("solute collide"))?;
        }
        Ok(())
    }

    /// The cell and image arrays of `n` device-resident solutes (made on first use).
    fn device_indices(&mut self, dev: &CudaDevice, n: usize) -> Result<(u64, u64)> {
        let d = self.device_state(dev, n)?;
        let st = &dev.stream;
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

/// The null `first_bad` argument of the binning: the values were tested before.
static NO_CHECK: u64 = 0;

/// The slots of the solute kernels and their `subset` argument: every solute (null), or the
/// listed ones.
pub(super) fn solute_slots(s: &DeviceSolutes, subset: Option<SoluteSubset>) -> (usize, u64) {
    match subset {
        Some(x) => (x.len, x.index),
        None => (s.n, ALL_SOLUTES),
    }
}
