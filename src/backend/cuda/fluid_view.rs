//! One GPU's backend seen as its fluid and its features. The fluid (`FluidView`: the device,
//! the particles' and cells' buffers, the step's report) is what every pass reads or writes;
//! each feature is a type with its own state and file, whose passes take the view:
//! the collision rules beside SRD (`rules.rs`, [`RuleBuffers`]), the solutes' coupling
//! (`solute_coupling.rs`, `solutes.rs`, `host_staging.rs`, `device_solutes.rs`:
//! [`SoluteCoupling`]), the migration between slabs (`multi/migrate.rs`, [`Slab`]) and the
//! observables (`observe.rs`). `CudaBackend::parts` lends the view beside the features
//! (`Features`, `mod.rs`); `step.rs` is the pipeline that calls them in order.

use cudarc::driver::CudaSlice;

use super::buffers::{CellBuffers, FluidBuffers};
use super::cell_sums::CellSumMethod;
use super::device::CudaDevice;

/// What a feature's pass borrows of the backend: the device (its main stream and kernels), the
/// cell-sum method, the fluid's and the cells' buffers, the step's report, the particle slots
/// and cells in use.
pub(super) struct FluidView<'a> {
    pub(super) dev: &'a CudaDevice,
    pub(super) method: CellSumMethod,
    pub(super) fluid: &'a mut FluidBuffers,
    pub(super) cell: &'a mut CellBuffers,
    /// REPORT_WORDS × REPORT_COPIES doubles (`observe::Observables::report`).
    pub(super) report: &'a mut CudaSlice<f64>,
    /// Particle slots (`p.n_fluid`).
    pub(super) n: usize,
    /// Cells in the cell buffers (`p.n_cells`).
    pub(super) ncells: usize,
}
