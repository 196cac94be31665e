//! Wall geometries. A shape is one type implementing [`WallShape`]: where the wall is (signed
//! distance, normal), how it moves (wall velocity), when a straight path reaches it (time of
//! impact), and the two questions of the grid (is a collision cell cut by the wall; how an
//! f32-rounded position is kept on the fluid side). [`Shape`] is the tagged union of the
//! shapes a config can name; `kernels/walls.cuh` mirrors every formula operation by operation.
//!
//! Every shape keeps at least half a cell of clearance to the box faces across the channel, so
//! that the shifted grid (shift in [−a/2, a/2)) never wraps a fluid particle periodically
//! across a wall: the box's extra cell layer is the one the shifted grid needs.

pub use super::cosine::CosineWalls;
pub use super::field::DistanceField;
pub use super::geometry::{cell_extent_distances, f32_step_away, f32_step_towards, WallShape};
pub use super::pore::PlanarPore;
pub use super::sphere::Sphere;

/// The axis a slit's plates are normal to (config `Slit(normal: Z)`; y by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SlitNormal {
    /// Plates normal to y: the channel across y (the slit of every config before `normal`).
    #[default]
    Y,
    /// Plates normal to z: the channel across z, y periodic (and Lees-Edwards-free).
    Z,
}

impl SlitNormal {
    /// The index of the axis (1 y, 2 z).
    #[inline]
    pub fn axis(self) -> usize {
        match self {
            SlitNormal::Y => 1,
            SlitNormal::Z => 2,
        }
    }

    /// Whether this is the default (y), left out of a config written back as RON.
    pub fn is_y(&self) -> bool {
        *self == SlitNormal::Y
    }

    /// The axis name as in a config field (`cells.1`: "y").
    pub fn name(self) -> &'static str {
        match self {
            SlitNormal::Y => "y",
            SlitNormal::Z => "z",
        }
    }
}

/// Parallel plates normal to y (or z) at `bottom` and `top` along that axis, each moving
/// along x.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slit {
    pub normal: SlitNormal,
    /// Positions of the plates along the normal axis (bottom < top).
    pub bottom: f64,
    pub top: f64,
    /// x velocities of the bottom and top plates.
    pub velocity: [f64; 2],
    /// The smallest and largest f32 in [bottom, top] (stored positions are clamped to them).
    pub bottom_f32: f32,
    pub top_f32: f32,
}

impl Slit {
    /// Plates normal to `normal`, `height` apart, centred in a box `len` cells long along
    /// that axis.
    pub fn centred(height: f64, normal: SlitNormal, len: f64, velocity: [f64; 2]) -> Slit {
        let bottom = 0.5 * (len - height);
        let top = bottom + height;
        let mut bottom_f32 = bottom as f32;
        if (bottom_f32 as f64) < bottom {
            bottom_f32 = f32::from_bits(bottom_f32.to_bits() + 1);
        }
        let mut top_f32 = top as f32;
        if (top_f32 as f64) > top {
            top_f32 = f32::from_bits(top_f32.to_bits() - 1);
        }
        Slit {
            normal,
            bottom,
            top,
            velocity,
            bottom_f32,
            top_f32,
        }
    }

    pub fn height(&self) -> f64 {
        self.top - self.bottom
    }

    /// The axis the plates are normal to (1 y, 2 z).
    #[inline]
    pub fn axis(&self) -> usize {
        self.normal.axis()
    }

    /// Whether the coordinate `x` along the normal is in the lower half (nearer the bottom
    /// plate).
    #[inline]
    fn lower(&self, x: f64) -> bool {
        x < 0.5 * (self.bottom + self.top)
    }
}

impl WallShape for Slit {
    #[inline]
    fn signed_distance(&self, r: [f64; 3]) -> f64 {
        let x = r[self.axis()];
        let a = x - self.bottom;
        let b = self.top - x;
        if a < b {
            a
        } else {
            b
        }
    }

    #[inline]
    fn normal(&self, r: [f64; 3]) -> [f64; 3] {
        let a = self.axis();
        let mut n = [0.0; 3];
        n[a] = if self.lower(r[a]) { 1.0 } else { -1.0 };
        n
    }

    #[inline]
    fn wall_velocity(&self, r: [f64; 3]) -> [f64; 3] {
        [self.velocity[self.surface(r)], 0.0, 0.0]
    }

    #[inline]
    fn surface(&self, r: [f64; 3]) -> usize {
        if self.lower(r[self.axis()]) {
            0
        } else {
            1
        }
    }

    #[inline]
    fn time_of_impact(&self, r: [f64; 3], v: [f64; 3], dt: f64) -> Option<f64> {
        let a = self.axis();
        let t = if v[a] < 0.0 {
            (self.bottom - r[a]) / v[a]
        } else if v[a] > 0.0 {
            (self.top - r[a]) / v[a]
        } else {
            return None;
        };
        if t > dt {
            None
        } else if t < 0.0 {
            Some(0.0)
        } else {
            Some(t)
        }
    }

    #[inline]
    fn cuts_cell(&self, lo: [f64; 3]) -> bool {
        let lo = lo[self.axis()];
        let hi = lo + 1.0;
        (lo < self.bottom && self.bottom < hi) || (lo < self.top && self.top < hi)
    }

    #[inline]
    fn keep_inside(&self, p: [f32; 3]) -> [f32; 3] {
        let mut q = p;
        let x = &mut q[self.axis()];
        if *x < self.bottom_f32 {
            *x = self.bottom_f32;
        } else if *x > self.top_f32 {
            *x = self.top_f32;
        }
        q
    }

    fn fluid_volume(&self, len: [f64; 3]) -> f64 {
        // the periodic axes beside x: z between y-normal plates, y between z-normal ones
        let across = match self.normal {
            SlitNormal::Y => len[2],
            SlitNormal::Z => len[1],
        };
        len[0] * self.height() * across
    }

    fn closed_axes(&self) -> [bool; 3] {
        let a = self.axis();
        [false, a == 1, a == 2]
    }

    /// The signed distance: Euclidean.
    fn clearance(&self, r: [f64; 3]) -> Option<f64> {
        Some(self.signed_distance(r))
    }
}

/// A cylindrical pipe along x: axis at (y, z) = `centre`, radius `radius`, wall moving along x.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pipe {
    pub centre: [f64; 2],
    pub radius: f64,
    /// x velocity of the wall.
    pub velocity: f64,
}

impl Pipe {
    /// Offset (y, z) of `r` from the axis.
    #[inline]
    fn offset(&self, r: [f64; 3]) -> (f64, f64) {
        (r[1] - self.centre[0], r[2] - self.centre[1])
    }

    /// Squared distance of `r` from the axis minus R² (negative in the fluid).
    #[inline]
    fn excess(&self, dy: f64, dz: f64) -> f64 {
        dy * dy + dz * dz - self.radius * self.radius
    }
}

impl WallShape for Pipe {
    #[inline]
    fn signed_distance(&self, r: [f64; 3]) -> f64 {
        let (dy, dz) = self.offset(r);
        self.radius - (dy * dy + dz * dz).sqrt()
    }

    #[inline]
    fn normal(&self, r: [f64; 3]) -> [f64; 3] {
        let (dy, dz) = self.offset(r);
        let d = (dy * dy + dz * dz).sqrt();
        if d > 0.0 {
            [0.0, -dy / d, -dz / d]
        } else {
            [0.0, -1.0, 0.0]
        }
    }

    #[inline]
    fn wall_velocity(&self, _r: [f64; 3]) -> [f64; 3] {
        [self.velocity, 0.0, 0.0]
    }

    #[inline]
    fn surface(&self, _r: [f64; 3]) -> usize {
        0
    }

    /// The larger root of |ρ + v⊥ t|² = R² (ρ the offset from the axis), in the form without
    /// cancellation: (−B + √D)/A for B ≤ 0, C/(−B − √D) for B > 0, with A = |v⊥|², B = ρ·v⊥,
    /// C = |ρ|² − R², D = B² − A C.
    #[inline]
    fn time_of_impact(&self, r: [f64; 3], v: [f64; 3], dt: f64) -> Option<f64> {
        let (dy, dz) = self.offset(r);
        let a = v[1] * v[1] + v[2] * v[2];
        if a == 0.0 {
            return None;
        }
        let b = dy * v[1] + dz * v[2];
        let c = self.excess(dy, dz);
        let d = b * b - a * c;
        if d < 0.0 {
            return None;
        }
        let sd = d.sqrt();
        let t = if b <= 0.0 {
            (sd - b) / a
        } else {
            c / (-b - sd)
        };
        if t > dt {
            None
        } else if t < 0.0 {
            Some(0.0)
        } else {
            Some(t)
        }
    }

    /// The square [lo, lo + 1) in (y, z) is cut when the circle passes between its nearest
    /// and its farthest point from the axis.
    #[inline]
    fn cuts_cell(&self, lo: [f64; 3]) -> bool {
        let (y0, z0) = self.offset(lo);
        let (ny, fy) = cell_extent_distances(y0);
        let (nz, fz) = cell_extent_distances(z0);
        let r2 = self.radius * self.radius;
        ny * ny + nz * nz < r2 && r2 < fy * fy + fz * fz
    }

    /// Steps y and z one f32 apart towards the axis until the position is in the fluid (one
    /// step moves it at least as far as the rounding that put it outside; at most 8 steps).
    #[inline]
    fn keep_inside(&self, p: [f32; 3]) -> [f32; 3] {
        let mut q = p;
        for _ in 0..8 {
            let (dy, dz) = self.offset([q[0] as f64, q[1] as f64, q[2] as f64]);
            if self.excess(dy, dz) <= 0.0 {
                break;
            }
            q[1] = f32_step_towards(q[1], self.centre[0]);
            q[2] = f32_step_towards(q[2], self.centre[1]);
        }
        q
    }

    fn fluid_volume(&self, len: [f64; 3]) -> f64 {
        len[0] * std::f64::consts::PI * self.radius * self.radius
    }

    fn closed_axes(&self) -> [bool; 3] {
        [false, true, true]
    }

    /// The signed distance: Euclidean.
    fn clearance(&self, r: [f64; 3]) -> Option<f64> {
        Some(self.signed_distance(r))
    }
}

/// The shapes a config can name (a tagged union, as `MpcWalls` in `kernels/walls.cuh`).
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    Slit(Slit),
    Pipe(Pipe),
    /// A sphere with the fluid inside or outside ([`super::sphere`]).
    Sphere(Sphere),
    /// A slit of finite length between two reservoirs ([`super::pore`]).
    PlanarPore(PlanarPore),
    /// Cosine walls across y: a wavy channel or an expansion-contraction ([`super::cosine`]).
    Cosine(CosineWalls),
    /// A signed distance given as data ([`super::field`]).
    Field(DistanceField),
}

macro_rules! dispatch {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            Shape::Slit($s) => $e,
            Shape::Pipe($s) => $e,
            Shape::Sphere($s) => $e,
            Shape::PlanarPore($s) => $e,
            Shape::Cosine($s) => $e,
            Shape::Field($s) => $e,
        }
    };
}

impl WallShape for Shape {
    #[inline]
    fn signed_distance(&self, r: [f64; 3]) -> f64 {
        dispatch!(self, s => s.signed_distance(r))
    }
    #[inline]
    fn normal(&self, r: [f64; 3]) -> [f64; 3] {
        dispatch!(self, s => s.normal(r))
    }
    #[inline]
    fn wall_velocity(&self, r: [f64; 3]) -> [f64; 3] {
        dispatch!(self, s => s.wall_velocity(r))
    }
    #[inline]
    fn surface(&self, r: [f64; 3]) -> usize {
        dispatch!(self, s => s.surface(r))
    }
    #[inline]
    fn time_of_impact(&self, r: [f64; 3], v: [f64; 3], dt: f64) -> Option<f64> {
        dispatch!(self, s => s.time_of_impact(r, v, dt))
    }
    #[inline]
    fn cuts_cell(&self, lo: [f64; 3]) -> bool {
        dispatch!(self, s => s.cuts_cell(lo))
    }
    #[inline]
    fn keep_inside(&self, p: [f32; 3]) -> [f32; 3] {
        dispatch!(self, s => s.keep_inside(p))
    }
    fn fluid_volume(&self, len: [f64; 3]) -> f64 {
        dispatch!(self, s => s.fluid_volume(len))
    }
    fn closed_axes(&self) -> [bool; 3] {
        dispatch!(self, s => s.closed_axes())
    }
    #[inline]
    fn clearance(&self, r: [f64; 3]) -> Option<f64> {
        dispatch!(self, s => s.clearance(r))
    }

    #[inline]
    fn cell_clearance(&self, lo: [f64; 3]) -> Option<f64> {
        dispatch!(self, s => s.cell_clearance(lo))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe() -> Pipe {
        Pipe {
            centre: [5.0, 5.0],
            radius: 4.0,
            velocity: 0.0,
        }
    }

    #[test]
    fn slit_geometry() {
        let s = Slit::centred(9.0, SlitNormal::Y, 10.0, [0.1, -0.2]);
        assert_eq!((s.bottom, s.top), (0.5, 9.5));
        assert_eq!(s.signed_distance([0.0, 1.5, 0.0]), 1.0);
        assert_eq!(s.signed_distance([0.0, 9.75, 0.0]), -0.25);
        assert_eq!(s.normal([0.0, 9.0, 0.0]), [0.0, -1.0, 0.0]);
        assert_eq!(s.wall_velocity([0.0, 1.0, 0.0]), [0.1, 0.0, 0.0]);
        assert_eq!(s.wall_velocity([0.0, 8.0, 0.0]), [-0.2, 0.0, 0.0]);
        assert_eq!(
            s.time_of_impact([0.0, 1.0, 0.0], [0.0, -1.0, 0.0], 1.0),
            Some(0.5)
        );
        assert_eq!(
            s.time_of_impact([0.0, 1.0, 0.0], [0.0, -1.0, 0.0], 0.4),
            None
        );
        assert_eq!(
            s.time_of_impact([0.0, 0.4, 0.0], [0.0, -1.0, 0.0], 0.4),
            Some(0.0)
        );
        assert!(s.cuts_cell([0.0, 0.2, 0.0]) && !s.cuts_cell([0.0, 0.5, 0.0]));
        assert!(s.cuts_cell([0.0, 8.7, 0.0]) && !s.cuts_cell([0.0, 8.5, 0.0]));
        let odd = Slit::centred(8.3, SlitNormal::Y, 10.0, [0.0; 2]);
        assert!(odd.bottom_f32 as f64 >= odd.bottom && odd.top_f32 as f64 <= odd.top);
        assert_eq!(odd.keep_inside([1.0, 0.0, 2.0])[1], odd.bottom_f32);
    }

    /// A z slit is the y slit with y and z exchanged: every formula, point by point.
    #[test]
    fn a_z_slit_is_the_y_slit_turned() {
        let y = Slit::centred(8.3, SlitNormal::Y, 10.0, [0.1, -0.2]);
        let z = Slit::centred(8.3, SlitNormal::Z, 10.0, [0.1, -0.2]);
        let turn = |r: [f64; 3]| [r[0], r[2], r[1]];
        let points = [
            [0.3, 1.7, 9.2],
            [4.0, 9.3, 0.2],
            [1.0, 0.6, 5.0],
            [2.0, 5.0, 5.0],
        ];
        let velocities = [[0.1, -2.0, 0.5], [0.0, 0.7, -0.3], [1.0, 0.0, 0.0]];
        for r in points {
            let rz = turn(r);
            assert_eq!(y.signed_distance(r), z.signed_distance(rz));
            assert_eq!(turn(y.normal(r)), z.normal(rz));
            assert_eq!(y.wall_velocity(r), z.wall_velocity(rz));
            assert_eq!(y.surface(r), z.surface(rz));
            assert_eq!(y.cuts_cell(r), z.cuts_cell(rz));
            for v in velocities {
                assert_eq!(
                    y.time_of_impact(r, v, 0.5),
                    z.time_of_impact(rz, turn(v), 0.5)
                );
            }
            let p = r.map(|c| c as f32);
            let kept = y.keep_inside(p);
            assert_eq!(
                [kept[0], kept[2], kept[1]],
                z.keep_inside([p[0], p[2], p[1]])
            );
        }
        assert_eq!(z.closed_axes(), [false, false, true]);
        assert!((z.fluid_volume([4.0, 6.0, 10.0]) - 4.0 * 8.3 * 6.0).abs() < 1e-12);
        assert!((y.fluid_volume([4.0, 6.0, 10.0]) - 4.0 * 8.3 * 10.0).abs() < 1e-12);
    }

    #[test]
    fn pipe_time_of_impact_is_the_exit_root() {
        let p = pipe();
        // from the axis straight up: hits at y = 9 after 4 / 2 = 2
        assert_eq!(
            p.time_of_impact([0.0, 5.0, 5.0], [3.0, 2.0, 0.0], 5.0),
            Some(2.0)
        );
        // on the surface moving inwards: crosses the pipe (chord of length 8)
        let t = p.time_of_impact([0.0, 9.0, 5.0], [0.0, -1.0, 0.0], 10.0);
        assert_eq!(t, Some(8.0));
        // on the surface moving out: now
        assert_eq!(
            p.time_of_impact([0.0, 9.0, 5.0], [0.0, 1.0, 0.0], 1.0),
            Some(0.0)
        );
        // a general path lands on the circle
        let (r, v) = ([0.0, 6.3, 3.9], [0.0, 0.7, -1.3]);
        let t = p.time_of_impact(r, v, 100.0).unwrap();
        let hit = [0.0, r[1] + v[1] * t, r[2] + v[2] * t];
        assert!(p.signed_distance(hit).abs() < 1e-14);
        assert_eq!(
            p.time_of_impact([0.0, 5.0, 5.0], [1.0, 0.0, 0.0], 1e9),
            None
        );
    }

    #[test]
    fn pipe_cells_and_rounding() {
        let p = pipe();
        assert!(!p.cuts_cell([0.0, 4.5, 4.5])); // around the axis
        assert!(p.cuts_cell([0.0, 8.5, 4.5])); // straddles y = 9
        assert!(!p.cuts_cell([0.0, 0.0, 0.0])); // corner of the box, all wall
        assert!(p.cuts_cell([0.0, 1.3, 2.0]));
        // a point rounded outside comes back in, one f32 step at a time
        let out = [1.0f32, 9.000_001, 5.0];
        assert!(p.signed_distance(out.map(|c| c as f64)) < 0.0);
        let q = p.keep_inside(out);
        assert!(p.signed_distance(q.map(|c| c as f64)) >= 0.0);
        assert_eq!(p.keep_inside([1.0, 5.0, 5.0]), [1.0, 5.0, 5.0]);
    }
}
