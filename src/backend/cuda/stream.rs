//! Pass 1 of a step (`kernels/stream.cu`): every fluid particle is streamed, binned on the
//! shifted grid and summed into its cell, one kernel per [`CellSumMethod`]; the fused methods
//! apply the previous step's deferred collision in the same pass. In slab mode the pass also
//! packs the particles that leave this GPU's layers (`multi/migrate.rs`).

use cudarc::driver::PushKernelArg;

use super::device::{drv, grid};
use super::params::KernelParams;
use super::params::MigrationArgs;
use super::{CellSumMethod, CudaBackend};
use crate::error::{MpcError, Result};

impl CudaBackend {
    /// Steps 1-2 on the main stream: zero the report, stream, bin and sum the fluid (for the
    /// fused method also the pending collision of the previous step). Ends profiling phase 0.
    pub(super) fn fluid_pass(&mut self, p: &KernelParams) -> Result<()> {
        let s = self.dev.stream.clone();
        s.memset_zeros(&mut self.obs.report)
            .map_err(drv("memset"))?;
        let margs = match self.slab.as_mut() {
            Some(sl) => sl.begin_pass_one(&self.dev.stream)?,
            None => Default::default(),
        };
        let pending = self.pending.take();
        match (self.method, pending) {
            (_, pending) if self.rules.is_some() => {
                let (fluid, features) = self.parts();
                let r = features.rules.expect("a rule's buffers");
                r.pass1(fluid, pending, p, &margs)?
            }
            (CellSumMethod::Fused | CellSumMethod::FusedShared, Some(pc)) => {
                self.collide_stream_bin(&pc, p, &margs)?
            }
            (CellSumMethod::List, _) if self.slab.is_some() => {
                return Err(MpcError::Device(
                    "the list cell-sum method runs on one GPU only; fix: unset \
                     MPCBOX_CUDA_METHOD or set it to fused"
                        .into(),
                ));
            }
            (CellSumMethod::List, _) => self.stream_bin_list(p)?,
            (
                CellSumMethod::Atomics
                | CellSumMethod::Warp
                | CellSumMethod::Shared
                | CellSumMethod::Fused
                | CellSumMethod::FusedShared,
                _,
            ) => self.stream_bin_sum(p, &margs)?,
        }
        if let Some(sl) = self.slab.as_mut() {
            sl.end_pass_one(&self.dev.stream)?;
        }
        self.phase_end(0)?;
        Ok(())
    }

    /// Whether the method aggregates each block's sums in shared memory (the `_shared` kernels).
    fn block_aggregation(&self) -> bool {
        matches!(
            self.method,
            CellSumMethod::Shared | CellSumMethod::FusedShared
        )
    }

    /// Fused methods with a pending collision: collide step n (parameters `pc`, cell parameters
    /// in the current cell buffer), then stream, bin and sum step n+1 into the other buffer
    /// (zeroed here, or zeroed and holding solutes already: `sums_prebinned`), which becomes
    /// the current one.
    fn collide_stream_bin(
        &mut self,
        pc: &KernelParams,
        p: &KernelParams,
        margs: &MigrationArgs,
    ) -> Result<()> {
        let s = self.dev.stream.clone();
        let f = if self.block_aggregation() {
            &self.dev.k.collide_stream_bin_shared
        } else {
            &self.dev.k.collide_stream_bin
        };
        let alt =
            self.cell.alt.as_mut().ok_or_else(|| {
                MpcError::Device("fused method without a second cell buffer".into())
            })?;
        if !std::mem::take(&mut self.sums_prebinned) {
            s.memset_zeros(alt).map_err(drv("memset"))?;
        }
        let [px, py, pz] = &mut self.fluid.pos;
        let [vx, vy, vz] = &mut self.fluid.vel;
        // SAFETY: mpc_collide_stream_bin[_shared](MpcParams pc, MpcParams p, float *px, *py, *pz,
        // double *vx, *vy, *vz, u32 *cellw, const double *cells_prev, double *cells_next, double
        // *report, MpcMigration m): the argument types match; the particle arrays hold
        // p.n_fluid = self.n slots, both cell buffers p.n_cells × 8 doubles (distinct
        // allocations), report REPORT_WORDS × REPORT_COPIES doubles, block b adding into copy
        // b % REPORT_COPIES (between walls `p.walls.momentum` points at copy 0's words 4..10); `margs` holds this slab's live migration buffers (or
        // zeros on one GPU, then never dereferenced). One thread per slot, main stream.
        unsafe {
            s.launch_builder(f)
                .arg(pc)
                .arg(p)
                .arg(px)
                .arg(py)
                .arg(pz)
                .arg(vx)
                .arg(vy)
                .arg(vz)
                .arg(&mut self.fluid.cellw)
                .arg(&self.cell.sums)
                .arg(&mut *alt)
                .arg(&mut self.obs.report)
                .arg(margs)
                .launch(grid(self.n))
                .map_err(drv("collide/stream/bin"))?;
        }
        std::mem::swap(&mut self.cell.sums, alt);
        Ok(())
    }

    /// Atomics, warp and shared methods (and the fused ones with nothing pending): stream,
    /// bin and sum into the zeroed cell buffer (zeroed here unless `sums_prebinned`).
    fn stream_bin_sum(&mut self, p: &KernelParams, margs: &MigrationArgs) -> Result<()> {
        let s = self.dev.stream.clone();
        if !std::mem::take(&mut self.sums_prebinned) {
            s.memset_zeros(&mut self.cell.sums).map_err(drv("memset"))?;
        }
        let k = &self.dev.k;
        let f = match self.method {
            CellSumMethod::Atomics => &k.stream_bin_atomic,
            CellSumMethod::Warp
            | CellSumMethod::Shared
            | CellSumMethod::Fused
            | CellSumMethod::FusedShared => {
                if self.block_aggregation() {
                    &k.stream_bin_shared
                } else {
                    &k.stream_bin_warp
                }
            }
            CellSumMethod::List => unreachable!("the list method bins in stream_bin_list"),
        };
        let [px, py, pz] = &mut self.fluid.pos;
        let [vx, vy, vz] = &mut self.fluid.vel;
        // SAFETY: mpc_stream_bin_{atomic,warp,shared}(MpcParams, float *px, *py, *pz, double *vx,
        // *vy, *vz, u32 *cellw, double *cells, double *report, MpcMigration): the argument types
        // match each of the three kernels; the particle arrays hold p.n_fluid = self.n slots,
        // cells p.n_cells × 8 doubles, report REPORT_WORDS × REPORT_COPIES (walls: as in `collide_stream_bin`);
        // `margs` as in `collide_stream_bin`.
        unsafe {
            s.launch_builder(f)
                .arg(p)
                .arg(px)
                .arg(py)
                .arg(pz)
                .arg(vx)
                .arg(vy)
                .arg(vz)
                .arg(&mut self.fluid.cellw)
                .arg(&mut self.cell.sums)
                .arg(&mut self.obs.report)
                .arg(margs)
                .launch(grid(self.n))
                .map_err(drv("stream/bin"))?;
        }
        Ok(())
    }

    /// List method (one GPU): empty the list heads, stream and bin pushing each particle on
    /// its cell's list, then one thread per cell sums its list.
    fn stream_bin_list(&mut self, p: &KernelParams) -> Result<()> {
        let s = self.dev.stream.clone();
        let k = &self.dev.k;
        let empty = u32::MAX;
        let ncu = self.ncells as u32;
        let next = self
            .fluid
            .next
            .as_mut()
            .ok_or_else(|| MpcError::Device("list method without next[]".into()))?;
        let [px, py, pz] = &mut self.fluid.pos;
        let [vx, vy, vz] = &mut self.fluid.vel;
        // SAFETY: the three kernels run in order on the main stream and their argument types
        // match: mpc_fill_u32(u32 *dst, u32 value, u32 n) on the ncells + 1 counters (n =
        // ncells); mpc_stream_bin_list(MpcParams, float *px, *py, *pz, double *vx, *vy, *vz, u32
        // *cellw, u32 *head, u32 *next, double *report) over p.n_fluid = self.n slots, heads
        // indexed by cells < ncells; mpc_list_sums(MpcParams, const u32 *head, const u32 *next,
        // const double *vx, *vy, *vz, const u32 *cellw, double *cells) over ncells cells of 8
        // doubles, following lists of slot indices < self.n ended by u32::MAX.
        unsafe {
            k.fill_u32(&s, grid(self.ncells), &mut self.cell.counter, &empty, &ncu)
                .map_err(drv("fill"))?;
            k.stream_bin_list(
                &s,
                grid(self.n),
                p,
                &mut *px,
                &mut *py,
                &mut *pz,
                &mut *vx,
                &mut *vy,
                &mut *vz,
                &mut self.fluid.cellw,
                &mut self.cell.counter,
                &mut *next,
                &mut self.obs.report,
            )
            .map_err(drv("stream/bin"))?;
            k.list_sums(
                &s,
                grid(self.ncells),
                p,
                &self.cell.counter,
                &*next,
                &*vx,
                &*vy,
                &*vz,
                &self.fluid.cellw,
                &mut self.cell.sums,
            )
            .map_err(drv("list sums"))?;
        }
        Ok(())
    }
}
