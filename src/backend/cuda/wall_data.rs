//! The walls' data on one GPU, made and uploaded when the backend opens (the geometry does not
//! move during a run): a distance field's node values (every slab holds the whole grid) and,
//! for the shapes whose clearance is dear per particle, a byte of clearance per cell of the box
//! (`Walls::cell_clearances`), which the streaming kernels read before any wall formula.

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DriverError};

use crate::error::{MpcError, Result};
use crate::physics::walls::Shape;
use crate::physics::Physics;

/// The walls' data of a run, on the host before the upload.
pub(super) struct WallDataOnHost {
    grid: Option<std::sync::Arc<[f32]>>,
    clearance: Option<Vec<u8>>,
}

impl WallDataOnHost {
    /// What `phys`'s walls put on a GPU.
    pub(super) fn of(phys: &Physics) -> WallDataOnHost {
        let walls = phys.walls.as_ref();
        WallDataOnHost {
            grid: walls.and_then(|w| match &w.shape {
                Shape::Field(f) => Some(f.values.clone()),
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
