//! Pass 4 of a step (`kernels/collide.cu`): the fluid particles' collision, now or (fused
//! methods) deferred into the next step's pass 1 when this step's stress is not measured.

use super::device::{drv, grid};
use super::params::KernelParams;
use super::{CudaBackend, Features};
use crate::error::Result;
use crate::physics::StepPlan;

impl CudaBackend {
    /// Queue the fluid collision with parameters `p` and the cell parameters in `cell.sums`.
    pub(super) fn launch_collide(&mut self, p: &KernelParams) -> Result<()> {
        if let (fluid, Features { rules: Some(r), .. }) = self.parts() {
            return r.launch_collide(fluid, p);
        }
        let s = self.dev.stream.clone();
        let [px, py, pz] = &self.fluid.pos;
        let [vx, vy, vz] = &mut self.fluid.vel;
        // SAFETY: the particle arrays hold p.n_fluid = self.n slots whose cell words index the cell
        // parameters (p.n_cells × 8 doubles) written by the cell pass before on this stream.
        unsafe {
            self.dev
                .k
                .collide(
                    &s,
                    grid(self.n),
                    p,
                    px,
                    py,
                    pz,
                    vx,
                    vy,
                    vz,
                    &self.fluid.cellw,
                    &self.cell.sums,
                    &mut self.obs.report,
                )
                .map_err(drv("collide"))?;
        }
        Ok(())
    }

    /// Fused method: apply a pending fluid collision now.
    pub fn flush(&mut self) -> Result<()> {
        if let Some(pp) = self.pending.take() {
            self.launch_collide(&pp)?;
        }
        Ok(())
    }

    /// Step 5, fluid: collide now, or (fused method) defer into the next step's pass unless
    /// this step's stress is measured or the fluid is reordered now.
    pub(super) fn fluid_collide(&mut self, plan: &StepPlan, p: &KernelParams) -> Result<()> {
        let fused = self.method.is_fused();
        let defer = fused && !plan.measure_stress && !(plan.reorder && self.n > 0);
        if defer {
            self.pending = Some(*p);
            Ok(())
        } else {
            self.launch_collide(p)
        }
    }
}
