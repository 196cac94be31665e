//! What each [`CellSumMethod`] (the `tuning.cuda_method` choice, defined in `config::tuning`)
//! means for the CUDA backend: whether the collision is deferred into the next pass and the
//! device bytes it needs. Its device side (warp, block and atomic aggregation into the cells)
//! is `kernels/cell_sums.cuh`.

use super::buffers::{BYTES_PER_CELL, BYTES_PER_PARTICLE};
pub use crate::config::CellSumMethod;

impl CellSumMethod {
    /// Whether the collision of one step is deferred into the next step's pass 1.
    pub(super) fn is_fused(self) -> bool {
        matches!(self, CellSumMethod::Fused | CellSumMethod::FusedShared)
    }

    /// Device bytes per particle and per cell of this method.
    pub fn bytes_per_particle_and_cell(self) -> (u64, u64) {
        let (ep, ec) = self.extra_bytes();
        (BYTES_PER_PARTICLE + ep, BYTES_PER_CELL + ec)
    }

    /// Extra bytes per particle and per cell beyond the common footprint.
    pub(super) fn extra_bytes(self) -> (u64, u64) {
        match self {
            CellSumMethod::Atomics | CellSumMethod::Warp | CellSumMethod::Shared => (0, 0),
            // next[] per particle; the list heads share the per-cell counter array
            CellSumMethod::List => (4, 0),
            // a second cell buffer
            CellSumMethod::Fused | CellSumMethod::FusedShared => (0, 64),
        }
    }
}
