//! Pass 3 of a step (`kernels/cells.cu`): one thread per cell turns the cell's sums into its
//! collision parameters in place (cell velocity, rotation axis, thermostat factor) and adds
//! the cell's relative energy and degrees of freedom to the report.
//!
//! Between no-slip walls the cells a wall may cut under some grid shift
//! ([`crate::physics::walls::Walls::cells_walls_may_cut`], fixed for a run) are left to a
//! second kernel over their list, which adds the virtual particles: the fill is a long
//! out-of-line call, and a kernel's register count covers its callees, so calling it from the
//! pass over every cell cost that pass half its occupancy.

use cudarc::driver::{CudaSlice, DevicePtr};

use super::device::{drv, grid};
use super::launch::DevPtr;
use super::params::KernelParams;
use super::{CudaBackend, Features};
use crate::error::{MpcError, Result};

/// The cells of this GPU that a no-slip wall may cut: a bit per local cell (which the cell
/// pass skips) and their local indices (which the cut-cell pass runs over).
pub(super) struct CutCells {
    /// The slab (first global cell, cells) the list was made for.
    made_for: (u32, usize),
    mask: CudaSlice<u32>,
    list: CudaSlice<u32>,
    count: u32,
}

/// The cut cells as the kernels take them: null and 0 without no-slip walls.
#[derive(Clone, Copy)]
pub(super) struct CutCellArgs {
    pub(super) mask: DevPtr<u32>,
    pub(super) list: DevPtr<u32>,
    pub(super) count: u32,
}

/// Device bytes the cut cells of `ncells` cells may take (every cell listed, at worst).
pub(super) fn cut_cells_bytes(phys: &crate::physics::Physics, ncells: usize) -> u64 {
    match &phys.walls {
        Some(w) if w.no_slip => (4 * ncells + 4 * ncells.div_ceil(32)) as u64,
        _ => 0,
    }
}

impl CudaBackend {
    /// This GPU's cut cells, made and uploaded on first use (and again after the slab or the
    /// physics changed): null without no-slip walls.
    pub(super) fn cut_cell_args(&mut self) -> Result<CutCellArgs> {
        let none = CutCellArgs {
            mask: DevPtr::null(),
            list: DevPtr::null(),
            count: 0,
        };
        let Some(walls) = self.phys.walls.as_ref().filter(|w| w.no_slip) else {
            return Ok(none);
        };
        let first = self.slab.as_ref().map_or(0, |sl| sl.cell_offset);
        let made_for = (first, self.ncells);
        if self.cut_cells.as_ref().map(|c| c.made_for) != Some(made_for) {
            self.cut_cells = None;
            let cells = self.phys.cells;
            let layer = (cells[0] * cells[2]) as usize;
            let y0 = first / layer as u32;
            let layers = y0..y0 + (self.ncells / layer) as u32;
            let listed = crate::timing::phase("list the cells the walls may cut", || {
                walls.cells_walls_may_cut(cells, layers)
            });
            let mut mask = vec![0u32; self.ncells.div_ceil(32).max(1)];
            let mut list: Vec<u32> = Vec::with_capacity(listed.len().max(1));
            for g in listed {
                let c = g - first;
                mask[c as usize / 32] |= 1 << (c % 32);
                list.push(c);
            }
            let count = list.len() as u32;
            if list.is_empty() {
                list.push(0); // never read (count 0): a buffer of one word
            }
            let s = &self.dev.stream;
            let oom = |e| MpcError::Device(format!("upload of the walls' cut cells: {e:?}"));
            self.cut_cells = Some(CutCells {
                made_for,
                mask: s.clone_htod(&mask).map_err(oom)?,
                list: s.clone_htod(&list).map_err(oom)?,
                count,
            });
        }
        let c = self.cut_cells.as_ref().expect("made above");
        let s = &self.dev.stream;
        let (mask, _sync) = c.mask.device_ptr(s);
        let (list, _sync) = c.list.device_ptr(s);
        Ok(CutCellArgs {
            mask: DevPtr::new(mask),
            list: DevPtr::new(list),
            count: c.count,
        })
    }

    /// Step 4, one thread per cell: sums to collision parameters (then, between no-slip walls,
    /// one thread per cut cell).
    pub(super) fn cell_pass(&mut self, p: &KernelParams) -> Result<()> {
        let cut = self.cut_cell_args()?;
        if let (fluid, Features { rules: Some(r), .. }) = self.parts() {
            return r.cell_pass(fluid, p, cut);
        }
        let s = self.dev.stream.clone();
        // SAFETY: the parameters by value, the cell buffer of p.n_cells = self.ncells cells × 8
        // doubles, report REPORT_WORDS × REPORT_COPIES doubles, block b adding into copy b %
        // REPORT_COPIES (between walls `p.walls.momentum` points at copy 0's words 4..10); one
        // thread per cell, threads past n_cells only join the block reduction. The mask is
        // null or holds a bit for each of the ncells cells (`cut_cell_args`); it lives in
        // self.cut_cells, and a replaced list is freed in this stream's order (cudarc frees a
        // CudaSlice on its stream), after these kernels.
        unsafe {
            self.dev
                .k
                .cell_params(
                    &s,
                    grid(self.ncells),
                    p,
                    &mut self.cell.sums,
                    &mut self.obs.report,
                    &cut.mask,
                )
                .map_err(drv("cell params"))?;
        }
        if cut.count > 0 {
            // SAFETY: after the pass above on the same stream (which read the listed cells'
            // sums for the report and left them); `count` local cell indices < ncells, distinct,
            // one thread each, so each cell is written by one thread.
            unsafe {
                self.dev
                    .k
                    .cut_cell_params(
                        &s,
                        grid(cut.count as usize),
                        p,
                        &mut self.cell.sums,
                        &cut.list,
                        &cut.count,
                    )
                    .map_err(drv("cut cell params"))?;
            }
        }
        Ok(())
    }
}
