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

/// The values of host solutes `range` (arrays of equal length): finite positions within
/// [`MAX_SOLUTE_COORDINATE`], finite velocities, finite masses > 0. One pass on the bounded
/// host pool (`crate::host`): an MD code may hand over millions of solutes every step. The
/// first solute with a bad value is named, with its first problem.
pub fn check_host_solutes(
    pos: &[[f64; 3]],
    vel: &[[f64; 3]],
    mass: &[f64],
    range: std::ops::Range<usize>,
) -> crate::error::Result<()> {
    let problem = |i: usize| -> Option<usize> {
        let (p, v, m) = (&pos[i], &vel[i], mass[i]);
        if !p.iter().all(|c| c.is_finite()) {
            Some(0)
        } else if p.iter().any(|c| c.abs() > MAX_SOLUTE_COORDINATE) {
            Some(1)
        } else if !v.iter().all(|c| c.is_finite()) {
            Some(2)
        } else if !(m.is_finite() && m > 0.0) {
            Some(3)
        } else {
            None
        }
    };
    let first = range.start;
    let Some(i) = crate::host_pool::find_first_index(range.len(), |k| problem(first + k).is_some())
        .map(|k| first + k)
    else {
        return Ok(());
    };
    let (field, problem, fix) = match problem(i) {
        Some(0) => (
            "positions",
            format!("solute {i} has a non-finite position {:?}", pos[i]),
            "pass finite positions",
        ),
        Some(1) => (
            "positions",
            format!(
                "solute {i} is at {:?}, over {MAX_SOLUTE_COORDINATE:e} cells from the origin",
                pos[i]
            ),
            "pass positions in the MPC box's units (cell size a = 1); coordinates outside the \
             box are wrapped",
        ),
        Some(2) => (
            "velocities",
            format!("solute {i} has a non-finite velocity {:?}", vel[i]),
            "pass finite velocities",
        ),
        _ => (
            "masses",
            format!("solute {i} has mass {}", mass[i]),
            "pass finite masses > 0",
        ),
    };
    Err(crate::error::MpcError::Solute {
        field: field.into(),
        problem,
        fix: fix.into(),
    })
}

/// One position, one velocity and one mass per solute: arrays of `pos`, `vel` and `mass`
/// entries.
pub fn check_solute_lengths(pos: usize, vel: usize, mass: usize) -> crate::error::Result<()> {
    if vel == pos && mass == pos {
        return Ok(());
    }
    Err(crate::error::MpcError::Solute {
        field: "lengths".into(),
        problem: format!("{pos} positions, {vel} velocities, {mass} masses"),
        fix: "pass one position, one velocity and one mass per solute".into(),
    })
}

/// No solute inside a wall (a box without walls has none).
pub fn check_solutes_outside_walls(
    phys: &crate::physics::Physics,
    pos: &[[f64; 3]],
) -> crate::error::Result<()> {
    let Some(w) = &phys.walls else { return Ok(()) };
    let Some(i) = crate::host_pool::find_first(pos, |p| w.solute_in_wall(phys, *p)) else {
        return Ok(());
    };
    Err(crate::error::MpcError::Solute {
        field: "positions".into(),
        problem: format!("solute {i} at {:?} is inside the wall", pos[i]),
        fix: "keep solutes in the channel (the bundled MD engine's wall potential does; across \
              the channel there is no periodic image to wrap into)"
            .into(),
    })
}

/// Solute masses the fixed-point cell sums hold: each at most `cap` (`None`: f64 sums, no cap).
pub fn check_solute_masses_fit(mass: &[f64], cap: Option<f64>) -> crate::error::Result<()> {
    let Some(cap) = cap else { return Ok(()) };
    let Some(i) = crate::host_pool::find_first(mass, |m| *m > cap) else {
        return Ok(());
    };
    Err(crate::error::MpcError::Solute {
        field: "masses".into(),
        problem: format!(
            "solute {i} has mass {}, beyond the {cap} the fixed-point cell sums hold ({} fluid \
             masses, or the heaviest md bead)",
            mass[i],
            crate::fixed_sums::SOLUTE_MASS_RATIO
        ),
        fix: "use lighter solutes, or sum in f64 with MPCBOX_CELL_SUMS=float (runs then agree \
              only to rounding across thread, slab and GPU counts)"
            .into(),
    })
}

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
