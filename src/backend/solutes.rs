//! The solutes a backend's collision takes: host arrays ([`SoluteBatch`]), device arrays on
//! the fluid's GPU ([`DeviceSolutes`]), or one device copy per slab with the list of those in
//! and near it ([`SlabSolutes`]).

/// Solute particles embedded in one collision: positions in, velocities in and out, masses.
pub struct SoluteBatch<'a> {
    pub pos: &'a [[f64; 3]],
    pub vel: &'a mut [[f64; 3]],
    pub mass: &'a [f64],
}

impl SoluteBatch<'_> {
    pub fn len(&self) -> usize {
        self.pos.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pos.is_empty()
    }
}

/// Solute coordinates beyond this (in cells) are rejected as a units mistake; anything closer is
/// wrapped into the box periodically (Lees-Edwards images in y).
pub const MAX_SOLUTE_COORDINATE: f64 = 1e9;

/// Solutes whose arrays live in the memory of the backend's GPU (an MD code running on the same
/// GPU): nothing crosses PCIe. Pointers are CUDA device addresses (`CUdeviceptr`) in the same
/// process; layouts as the host API: `pos` and `vel` hold 3n f64 (x0, y0, z0, x1, ...), `mass`
/// n f64. `vel` is overwritten with the collided velocities.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceSolutes {
    pub pos: u64,
    pub vel: u64,
    pub mass: u64,
    pub n: usize,
    /// The caller's CUDA stream (`CUstream` as an integer; 0 = the legacy default stream). The
    /// step waits for the work queued on it before it reads the solutes, and work queued on it
    /// after the call sees the new velocities; the host is not blocked for that ordering.
    pub stream: u64,
}

/// The solutes that may lie in one slab's cells, as indices into its copy of all solutes: a
/// device array of `len` u32 on the slab's GPU (`index` its `CUdeviceptr`). Listing them lets
/// each slab check, bin and collide only its share instead of every solute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SoluteSubset {
    pub index: u64,
    pub len: usize,
}

/// One slab's copy of the solutes for [`super::Backend::step_slab_solutes`]: every solute, current
/// at least for those in and near the slab, and optionally the list of those that may lie in
/// its cells (None: the slab scans them all). A solute in the slab's cells but not listed would
/// not collide: the list must hold every one of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlabSolutes {
    pub solutes: DeviceSolutes,
    pub subset: Option<SoluteSubset>,
}
