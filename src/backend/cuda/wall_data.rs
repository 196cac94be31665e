//! The walls' data on one GPU, made and uploaded when the backend opens (the geometry does not
//! move during a run): a distance field's node values (every slab holds the whole grid, in the
//! cells' order) and its byte of clearance per cell of the box (`Walls::cell_clearances`), which
//! the streaming kernels read before the field itself.

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DriverError};
use rayon::prelude::*;

use crate::error::{MpcError, Result};
use crate::physics::walls::Shape;
use crate::physics::Physics;

/// The walls' data of a run, on the host before the upload.
pub(super) struct WallDataOnHost {
    /// A distance field's node values in the cells' order ([`nodes_in_cell_order`]).
    grid: Option<Vec<f32>>,
    clearance: Option<Vec<u8>>,
}

impl WallDataOnHost {
    /// What `phys`'s walls put on a GPU.
    pub(super) fn of(phys: &Physics) -> WallDataOnHost {
        let walls = phys.walls.as_ref();
        WallDataOnHost {
            grid: walls.and_then(|w| match &w.shape {
                Shape::Field(f) => Some(nodes_in_cell_order(&f.values, f.nodes)),
                _ => None,
            }),
            clearance: crate::timing::phase("the walls' clearance per cell", || {
                walls.and_then(|w| w.cell_clearances(phys.cells))
            }),
        }
    }

    /// Device bytes of the upload.
    pub(super) fn bytes(&self) -> u64 {
        self.grid.as_ref().map_or(0, |g| 4 * g.len() as u64)
            + self.clearance.as_ref().map_or(0, |c| c.len() as u64)
    }

    /// Upload onto stream `s`.
    pub(super) fn upload(
        &self,
        s: &std::sync::Arc<CudaStream>,
        oom: impl Fn(DriverError) -> MpcError,
    ) -> Result<WallData> {
        Ok(WallData {
            grid: match &self.grid {
                Some(v) => Some(s.clone_htod(&v[..]).map_err(&oom)?),
                None => None,
            },
            clearance: match &self.clearance {
                Some(v) => Some(s.clone_htod(&v[..]).map_err(&oom)?),
                None => None,
            },
        })
    }
}

/// The walls' data on a GPU (both None without walls, or for shapes that need neither).
#[derive(Default)]
pub(super) struct WallData {
    grid: Option<CudaSlice<f32>>,
    clearance: Option<CudaSlice<u8>>,
}

impl WallData {
    /// Device address of the distance field's nodes (0 without one).
    pub(super) fn grid_address(&self, s: &std::sync::Arc<CudaStream>) -> u64 {
        self.grid.as_ref().map_or(0, |g| g.device_ptr(s).0)
    }

    /// Device address of the clearance per cell (0 where the kernels compute each particle's).
    pub(super) fn clearance_address(&self, s: &std::sync::Arc<CudaStream>) -> u64 {
        self.clearance.as_ref().map_or(0, |c| c.device_ptr(s).0)
    }
}

/// A field's node values (C order: z fastest, then y, then x) in the cells' order (x fastest,
/// then z, then y), as `mpc_field_stencil` reads them: a warp's particles lie in neighbouring
/// cells along x, so they read neighbouring nodes (in C order they lie a plane apart, and every
/// thread's read was a sector of its own). The values are the same, so the bits are too.
fn nodes_in_cell_order(values: &[f32], nodes: [usize; 3]) -> Vec<f32> {
    let [nx, ny, nz] = nodes;
    let mut out = vec![0.0f32; values.len()];
    crate::host_pool::install(values.len(), || {
        out.par_chunks_mut(nx * nz)
            .enumerate()
            .for_each(|(j, layer)| {
                for k in 0..nz {
                    for i in 0..nx {
                        layer[i + nx * k] = values[(i * ny + j) * nz + k];
                    }
                }
            });
    });
    out
}

#[cfg(test)]
mod tests {
    use super::nodes_in_cell_order;

    /// Node (i, j, k) moves from (i·ny + j)·nz + k to i + nx·(k + nz·j), on a box of three
    /// different edges.
    #[test]
    fn nodes_move_to_the_cells_order() {
        let nodes = [3usize, 4, 5];
        let c_order: Vec<f32> = (0..60).map(|n| n as f32).collect();
        let moved = nodes_in_cell_order(&c_order, nodes);
        for i in 0..3 {
            for j in 0..4 {
                for k in 0..5 {
                    assert_eq!(moved[i + 3 * (k + 5 * j)], c_order[(i * 4 + j) * 5 + k]);
                }
            }
        }
    }
}
