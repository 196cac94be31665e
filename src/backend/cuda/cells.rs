//! Pass 3 of a step (`kernels/cells.cu`): one thread per cell turns the cell's sums into its
//! collision parameters in place (cell velocity, rotation axis, thermostat factor) and adds
//! the cell's relative energy and degrees of freedom to the report.

use super::device::{drv, grid};
use super::params::KernelParams;
use super::{CudaBackend, Features};
use crate::error::Result;

impl CudaBackend {
    /// Step 4, one thread per cell: sums to collision parameters.
    pub(super) fn cell_pass(&mut self, p: &KernelParams) -> Result<()> {
        if let (fluid, Features { rules: Some(r), .. }) = self.parts() {
            return r.cell_pass(fluid, p);
        }
        let s = self.dev.stream.clone();
        // SAFETY: the parameters by value, the cell buffer of p.n_cells = self.ncells cells × 8
        // doubles, report REPORT_WORDS × REPORT_COPIES doubles, block b adding into copy b %
        // REPORT_COPIES (between walls `p.walls.momentum` points at copy 0's words 4..10); one
        // thread per cell, threads past n_cells only join the block reduction.
        unsafe {
            self.dev
                .k
                .cell_params(
                    &s,
                    grid(self.ncells),
                    p,
                    &mut self.cell.sums,
                    &mut self.obs.report,
                )
                .map_err(drv("cell params"))?;
        }
        Ok(())
    }
}
