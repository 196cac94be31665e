//! The walls' data on one GPU, made and uploaded when the backend opens (the geometry does not
//! move during a run): a distance field's node values (every slab holds the whole grid, in the
//! cells' order) and its byte of clearance per cell of the box (`Walls::cell_clearances`), which
//! the streaming kernels read before the field itself.

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DriverError};
use rayon::prelude::*;

use std::sync::{Arc, Mutex};

use crate::error::{MpcError, Result};
use crate::physics::walls::{Shape, Walls};
use crate::physics::Physics;

/// The walls' data of a run, on the host before the upload (shared: every slab of a run
/// uploads the same).
pub(super) struct WallDataOnHost {
    /// A distance field's node values in the cells' order ([`nodes_in_cell_order`]).
    grid: Option<Arc<[f32]>>,
    clearance: Option<Arc<[u8]>>,
}

/// The last run's walls, box and data: the slabs of a run (one backend each, on one or several
/// GPUs) open with the same walls, and the data is made once for them all (kept until walls of
/// another box or shape replace it).
type LastMade = (Walls, [u32; 3], Arc<WallDataOnHost>);
static LAST_MADE: Mutex<Option<LastMade>> = Mutex::new(None);

impl WallDataOnHost {
    /// What `phys`'s walls put on a GPU: made once per walls and box, then shared.
    pub(super) fn of(phys: &Physics) -> Arc<WallDataOnHost> {
        let Some(walls) = phys.walls.as_ref() else {
            return Arc::new(WallDataOnHost {
                grid: None,
                clearance: None,
            });
        };
        // held while the data is made, so that slabs opening at once wait and share it
        let mut last = LAST_MADE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((w, cells, data)) = last.as_ref() {
            if w == walls && *cells == phys.cells {
                return data.clone();
            }
        }
        let data = Arc::new(WallDataOnHost {
            grid: match &walls.shape {
                Shape::Field(f) => Some(nodes_in_cell_order(&f.values, f.nodes).into()),
                _ => None,
            },
            clearance: crate::timing::phase("the walls' clearance per cell", || {
                walls.cell_clearances(phys.cells).map(Into::into)
            }),
        });
        *last = Some((walls.clone(), phys.cells, data.clone()));
        data
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

    /// The slabs of a run share one making of the data; other walls make their own, and a run
    /// without walls has none.
    #[test]
    fn the_slabs_of_a_run_share_one_making() {
        use super::WallDataOnHost;
        use crate::config::Config;
        use crate::physics::Physics;
        let physics = |walls: &str| {
            let cfg = Config::from_ron_str(&format!(
                "(cells: (16, 16, 16), particles_per_cell: 10, time_step: 0.1, seed: 3, \
                  steps: 1, collision: Srd(angle_deg: 130.0){walls})"
            ))
            .unwrap();
            Physics::from_config(&cfg)
        };
        let field = physics(
            ", walls: DistanceField(file: \"examples/sphere_bed.npy\", spacing: 1.0, kind: Mask)",
        );
        let first = WallDataOnHost::of(&field);
        assert!(first.grid.is_some() && first.clearance.is_some());
        assert!(std::sync::Arc::ptr_eq(
            &first,
            &WallDataOnHost::of(&field.clone())
        ));
        let slit = WallDataOnHost::of(&physics(", walls: Slit()"));
        assert!(slit.grid.is_none() && slit.clearance.is_none());
        let again = WallDataOnHost::of(&field);
        assert!(!std::sync::Arc::ptr_eq(&first, &again));
        assert_eq!(first.grid, again.grid);
        assert_eq!(first.clearance, again.clearance);
        assert_eq!(WallDataOnHost::of(&physics("")).bytes(), 0);
    }

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
