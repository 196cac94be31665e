//! What every wall shape answers ([`WallShape`]) and the f32 steps that keep a stored
//! position on the fluid side: below the shapes (`shapes`, `sphere`), which implement it.

/// A wall geometry. Lengths in cells; the fluid is where `signed_distance > 0`.
pub trait WallShape {
    /// Distance from `r` to the wall surface: positive in the fluid, negative inside the wall.
    fn signed_distance(&self, r: [f64; 3]) -> f64;

    /// Unit normal of the surface nearest `r`, pointing into the fluid.
    fn normal(&self, r: [f64; 3]) -> [f64; 3];

    /// Velocity of the surface nearest `r`.
    fn wall_velocity(&self, r: [f64; 3]) -> [f64; 3];

    /// Which surface is nearest `r` (0 or 1; the momentum given to each is kept apart).
    fn surface(&self, r: [f64; 3]) -> usize;

    /// The first time t in [0, dt] at which the straight path `r + v t` reaches the surface
    /// on its way out of the fluid (0 for a point a rounding error outside that moves
    /// outwards), or None if the path stays in the fluid for `dt`. Exact for the straight
    /// path, computed in f64.
    fn time_of_impact(&self, r: [f64; 3], v: [f64; 3], dt: f64) -> Option<f64>;

    /// Whether the collision cell `[lo, lo + 1)` (unshifted coordinates) lies partly in the
    /// fluid and partly in the wall.
    fn cuts_cell(&self, lo: [f64; 3]) -> bool;

    /// A stored (f32) position moved onto the fluid side if rounding put it a hair inside the
    /// wall; positions in the fluid are returned unchanged.
    fn keep_inside(&self, p: [f32; 3]) -> [f32; 3];

    /// Volume of the fluid region in a box of edges `len`.
    fn fluid_volume(&self, len: [f64; 3]) -> f64;

    /// Axes the walls close (0 x, 1 y, 2 z): no periodic wrapping there.
    fn closed_axes(&self) -> [bool; 3];

    /// A lower bound of the distance from `r` (in the fluid) to the solid, where one is cheap
    /// (None: not known). A particle whose clearance exceeds its travel in a step by
    /// [`REACH_MARGIN`] has no impact and stays in the fluid: its streaming skips the path.
    fn clearance(&self, _r: [f64; 3]) -> Option<f64> {
        None
    }

    /// A lower bound of [`WallShape::clearance`] over the unit cell `[lo, lo + 1)` (None where
    /// the shape has no clearance). By default the clearance at the centre less the half
    /// diagonal: every shape's clearance changes by at most the distance moved (a distance,
    /// or a gap or an interpolant over a bound of its slope). The GPUs keep it per cell, so
    /// that a particle far from the walls skips its own clearance.
    fn cell_clearance(&self, lo: [f64; 3]) -> Option<f64> {
        let centre = lo.map(|x| x + 0.5);
        self.clearance(centre).map(|c| c - HALF_DIAGONAL)
    }
}

/// Half the diagonal of a unit cell: the farthest a point of the cell is from its centre.
pub const HALF_DIAGONAL: f64 = 0.866_025_403_784_438_6;

/// How much farther than it can travel in a step a particle must be from the walls for its
/// streaming to skip the walls' path: far above the rounding of a time of impact (~1e-12) and of
/// an f32 position (~1e-5 at 256 cells). The kernels read it as `MPC_WALLS_REACH_MARGIN`
/// (`backend::cuda::contract`).
pub const REACH_MARGIN: f64 = 1e-3;

/// The f32 next to `x` (≥ 0) in the direction of `target`.
#[inline]
pub fn f32_step_towards(x: f32, target: f64) -> f32 {
    if (x as f64) > target {
        if x > 0.0 {
            f32::from_bits(x.to_bits() - 1)
        } else {
            x
        }
    } else if (x as f64) < target {
        f32::from_bits(x.to_bits() + 1)
    } else {
        x
    }
}

/// The f32 next to `x` (> 0) away from `from`.
#[inline]
pub fn f32_step_away(x: f32, from: f64) -> f32 {
    if (x as f64) > from {
        f32::from_bits(x.to_bits() + 1)
    } else if (x as f64) < from && x > 0.0 {
        f32::from_bits(x.to_bits() - 1)
    } else {
        x
    }
}

/// The nearest and the farthest distance from 0 of the points of [d, d + 1]: a cell's extent
/// along one axis, offset from a centre or an axis (`cuts_cell` of the round shapes).
#[inline]
pub fn cell_extent_distances(d: f64) -> (f64, f64) {
    let d1 = d + 1.0;
    let near = if d > 0.0 {
        d
    } else if d1 < 0.0 {
        -d1
    } else {
        0.0
    };
    let (x, y) = (d.abs(), d1.abs());
    (near, if x > y { x } else { y })
}
