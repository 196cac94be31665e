//! A planar pore at rest: a slit `height` high across y and `length` long along x, centred in
//! the periodic box, between two reservoirs. The solid is the region |x − Lx/2| < length/2 and
//! |y − Ly/2| > height/2 (one block spanning z, joined across the periodic y boundary); the
//! fluid fills the pore and the reservoirs on both sides, which are periodic in y and, through
//! the x boundary, one reservoir. `kernels/walls.cuh` mirrors every formula operation by
//! operation.
//!
//! Coordinates are taken relative to the box centre and folded into [−L/2, L/2] along x and y
//! (one period: the pore is centred, so the nearest block face of a point is that of the
//! box's own block). Every formula is exact for the rectangle: the signed distance is the
//! Euclidean distance to the nearest face or block edge (a reservoir point facing the pore's
//! mouth is nearest the edge), the normal its gradient, and the time of impact of a straight
//! path the slab method's entry time into the block or a periodic image of it.

use super::geometry::{f32_step_away, f32_step_towards, WallShape};

/// The pore of a box with centre (`xc`, `yc`): the block's half-length `half_length` along x
/// and the pore's half-height `half_height` across y.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanarPore {
    pub xc: f64,
    pub yc: f64,
    pub half_length: f64,
    pub half_height: f64,
}

/// `d` (an offset from the box centre, within a period of it) folded into [−c, c] for a period
/// of 2c.
#[inline]
fn fold(d: f64, c: f64) -> f64 {
    if d > c {
        d - 2.0 * c
    } else if d < -c {
        d + 2.0 * c
    } else {
        d
    }
}

/// +1 for d ≥ 0, −1 below.
#[inline]
fn side(d: f64) -> f64 {
    if d < 0.0 {
        -1.0
    } else {
        1.0
    }
}

/// The entry and exit times of the path p + v t through the slab [lo, hi] of one axis (−∞, +∞
/// for a path along the slab; None if it stays outside).
#[inline]
fn slab(p: f64, v: f64, lo: f64, hi: f64) -> Option<(f64, f64)> {
    if v == 0.0 {
        if p < lo || p > hi {
            None
        } else {
            Some((f64::NEG_INFINITY, f64::INFINITY))
        }
    } else {
        let a = (lo - p) / v;
        let b = (hi - p) / v;
        if a < b {
            Some((a, b))
        } else {
            Some((b, a))
        }
    }
}

impl PlanarPore {
    /// Offset of `r` from the box centre, folded into one period along x and y.
    #[inline]
    fn offset(&self, r: [f64; 3]) -> (f64, f64) {
        (fold(r[0] - self.xc, self.xc), fold(r[1] - self.yc, self.yc))
    }

    /// Whether the folded offset lies within the pore's x range and beyond its plates: the open
    /// interior of the solid (its faces count as fluid).
    #[inline]
    fn in_solid(&self, dx: f64, dy: f64) -> bool {
        dx.abs() < self.half_length && dy.abs() > self.half_height
    }

    /// How far the folded offset (|dx|, |dy|) = (`ax`, `ay`) of a fluid point lies beyond the
    /// block's x range and short of its plates: the vector to the block's nearest point.
    #[inline]
    fn excess_of(&self, ax: f64, ay: f64) -> (f64, f64) {
        let ex = if ax > self.half_length {
            ax - self.half_length
        } else {
            0.0
        };
        let ey = if ay < self.half_height {
            self.half_height - ay
        } else {
            0.0
        };
        (ex, ey)
    }

    /// Whether the nearest face of a point of the solid (or of its surface) is a plate (normal
    /// to y) rather than a block end (normal to x).
    #[inline]
    fn plate_nearer(&self, dx: f64, dy: f64) -> bool {
        dy.abs() - self.half_height <= self.half_length - dx.abs()
    }

    /// The block [−half_length, half_length] × (the plates beyond ±half_height, one y period
    /// long) shifted by `sx` along x: the entry time of the path (dx, dy) + v t, with its exit
    /// time, or None if the path misses it.
    #[inline]
    fn block_entry(&self, dx: f64, dy: f64, v: [f64; 3], sx: f64) -> Option<(f64, f64)> {
        let (x0, x1) = slab(dx, v[0], sx - self.half_length, sx + self.half_length)?;
        let far = 2.0 * self.yc - self.half_height;
        let mut best: Option<(f64, f64)> = None;
        for (lo, hi) in [(self.half_height, far), (-far, -self.half_height)] {
            if let Some((y0, y1)) = slab(dy, v[1], lo, hi) {
                let enter = if x0 > y0 { x0 } else { y0 };
                let exit = if x1 < y1 { x1 } else { y1 };
                if enter <= exit && exit >= 0.0 && best.is_none_or(|(b, _)| enter < b) {
                    best = Some((enter, exit));
                }
            }
        }
        best
    }
}

impl WallShape for PlanarPore {
    #[inline]
    fn signed_distance(&self, r: [f64; 3]) -> f64 {
        let (dx, dy) = self.offset(r);
        let (ax, ay) = (dx.abs(), dy.abs());
        if self.in_solid(dx, dy) {
            let to_plate = ay - self.half_height;
            let to_end = self.half_length - ax;
            return -(if to_plate < to_end { to_plate } else { to_end });
        }
        let (ex, ey) = self.excess_of(ax, ay);
        (ex * ex + ey * ey).sqrt()
    }

    /// The gradient of the signed distance: in the fluid away from the surface from the
    /// nearest point of the block (a face, or an edge across from the pore's mouth); inside
    /// the solid and on its surface the nearest face's normal (a plate's at an edge).
    #[inline]
    fn normal(&self, r: [f64; 3]) -> [f64; 3] {
        let (dx, dy) = self.offset(r);
        let (ax, ay) = (dx.abs(), dy.abs());
        if !self.in_solid(dx, dy) {
            let (ex, ey) = self.excess_of(ax, ay);
            let d = (ex * ex + ey * ey).sqrt();
            if d > 0.0 {
                return [side(dx) * ex / d, -side(dy) * ey / d, 0.0];
            }
        }
        if self.plate_nearer(dx, dy) {
            [0.0, -side(dy), 0.0]
        } else {
            [side(dx), 0.0, 0.0]
        }
    }

    #[inline]
    fn wall_velocity(&self, _r: [f64; 3]) -> [f64; 3] {
        [0.0; 3]
    }

    /// 0 the block half below the pore's mid-plane, 1 above it.
    #[inline]
    fn surface(&self, r: [f64; 3]) -> usize {
        let (_, dy) = self.offset(r);
        if dy < 0.0 {
            0
        } else {
            1
        }
    }

    /// The slab method's entry time into the block and its periodic images next along x (a
    /// path longer than the reservoir still meets the next block). A start point inside the
    /// solid (rounding, or the body force's bend of the path against its chord) is a hair past
    /// the face it crossed: it bounces now if it entered more recently than it would leave,
    /// else it is on its way out.
    #[inline]
    fn time_of_impact(&self, r: [f64; 3], v: [f64; 3], dt: f64) -> Option<f64> {
        if v[0] == 0.0 && v[1] == 0.0 {
            return None;
        }
        let (dx, dy) = self.offset(r);
        let period = 2.0 * self.xc;
        let mut first: Option<f64> = None;
        for sx in [-period, 0.0, period] {
            if let Some((enter, exit)) = self.block_entry(dx, dy, v, sx) {
                let t = if enter >= 0.0 {
                    enter
                } else if -enter <= exit {
                    0.0
                } else {
                    continue;
                };
                if first.is_none_or(|f| t < f) {
                    first = Some(t);
                }
            }
        }
        first.filter(|&t| t <= dt)
    }

    /// The cell [lo, lo + 1) meets both the solid's interior and the fluid (on the shifted
    /// grid a cell meets no other period's block or pore: the block keeps half a cell from
    /// the box faces along x, the plates half a cell from those along y).
    #[inline]
    fn cuts_cell(&self, lo: [f64; 3]) -> bool {
        let (x0, y0) = (lo[0] - self.xc, lo[1] - self.yc);
        let (x1, y1) = (x0 + 1.0, y0 + 1.0);
        let (hl, hh) = (self.half_length, self.half_height);
        let meets = x0 < hl && x1 > -hl && (y1 > hh || y0 < -hh);
        let inside = x0 >= -hl && x1 <= hl && (y0 >= hh || y1 <= -hh);
        meets && !inside
    }

    /// A stored position in the solid is put on its nearest face, rounded to f32, and stepped
    /// one f32 at a time into the fluid (at most 8 steps).
    #[inline]
    fn keep_inside(&self, p: [f32; 3]) -> [f32; 3] {
        let mut q = p;
        let (dx, dy) = self.offset(q.map(|c| c as f64));
        if !self.in_solid(dx, dy) {
            return q;
        }
        let plate = self.plate_nearer(dx, dy);
        if plate {
            q[1] = (self.yc + side(dy) * self.half_height) as f32;
        } else {
            q[0] = (self.xc + side(dx) * self.half_length) as f32;
        }
        for _ in 0..8 {
            let (dx, dy) = self.offset(q.map(|c| c as f64));
            if !self.in_solid(dx, dy) {
                break;
            }
            if plate {
                q[1] = f32_step_towards(q[1], self.yc);
            } else {
                q[0] = f32_step_away(q[0], self.xc);
            }
        }
        q
    }

    fn fluid_volume(&self, len: [f64; 3]) -> f64 {
        let solid = 2.0 * self.half_length * (len[1] - 2.0 * self.half_height);
        (len[0] * len[1] - solid) * len[2]
    }

    fn closed_axes(&self) -> [bool; 3] {
        [false; 3]
    }

    /// The signed distance: Euclidean outside the solid (the folded offset's excess over the
    /// nearest block).
    fn clearance(&self, r: [f64; 3]) -> Option<f64> {
        Some(self.signed_distance(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 20 × 16 box: the pore 6 high (y in [5, 11]) and 8 long (x in [6, 14]).
    fn pore() -> PlanarPore {
        PlanarPore {
            xc: 10.0,
            yc: 8.0,
            half_length: 4.0,
            half_height: 3.0,
        }
    }

    #[test]
    fn distances_are_euclidean_to_faces_and_edges() {
        let p = pore();
        // in the pore: to the plate
        assert_eq!(p.signed_distance([10.0, 7.0, 1.0]), 2.0);
        // in a reservoir beside a block: to its end
        assert_eq!(p.signed_distance([4.5, 13.0, 1.0]), 1.5);
        // across from the mouth: to the blocks' edges at (6, 5) and (6, 11)
        assert_eq!(p.signed_distance([2.0, 8.0, 0.0]), 5.0);
        // in the solid: to the nearest face, negative
        assert_eq!(p.signed_distance([10.0, 12.0, 0.0]), -1.0);
        assert_eq!(p.signed_distance([13.5, 14.0, 0.0]), -0.5);
        // across the periodic y boundary the block goes on: a path's point beyond the box is its
        // periodic image
        assert_eq!(p.signed_distance([7.5, 0.5, 0.0]), -1.5);
        assert_eq!(
            p.signed_distance([7.5, -0.3, 0.0]),
            p.signed_distance([7.5, 15.7, 0.0])
        );
        // faces count as fluid
        assert_eq!(p.signed_distance([6.0, 13.0, 0.0]), 0.0);
        assert_eq!(p.signed_distance([8.0, 11.0, 0.0]), 0.0);
        assert_eq!(p.surface([8.0, 4.0, 0.0]), 0);
        assert_eq!(p.surface([8.0, 12.0, 0.0]), 1);
        assert_eq!(p.closed_axes(), [false; 3]);
        let v = p.fluid_volume([20.0, 16.0, 3.0]);
        assert_eq!(v, (320.0 - 8.0 * 10.0) * 3.0);
    }

    /// The normal is the distance's gradient, pointing into the fluid, on every side.
    #[test]
    fn normals_are_the_gradient_of_the_distance() {
        let p = pore();
        let points = [
            [10.0, 6.1, 0.0],
            [9.0, 10.2, 0.0],
            [4.9, 2.0, 0.0],
            [15.3, 14.0, 0.0],
            [3.0, 7.0, 0.0],
            [16.0, 12.5, 0.0],
            [11.0, 12.5, 0.0],
            [13.8, 3.0, 0.0],
        ];
        for r in points {
            let n = p.normal(r);
            let e = 1e-6;
            let grad: Vec<f64> = (0..3)
                .map(|k| {
                    let (mut a, mut b) = (r, r);
                    a[k] += e;
                    b[k] -= e;
                    (p.signed_distance(a) - p.signed_distance(b)) / (2.0 * e)
                })
                .collect();
            for k in 0..3 {
                assert!((n[k] - grad[k]).abs() < 1e-6, "{r:?}: {n:?} vs {grad:?}");
            }
        }
        // on the surface: the face's normal
        assert_eq!(p.normal([8.0, 11.0, 0.0]), [0.0, -1.0, 0.0]);
        assert_eq!(p.normal([14.0, 13.0, 0.0]), [1.0, 0.0, 0.0]);
        assert_eq!(p.normal([6.0, 5.0, 0.0]), [0.0, 1.0, 0.0]);
    }

    #[test]
    fn time_of_impact_lands_on_the_surface() {
        let p = pore();
        // up from the pore's middle: the upper plate after 3 / 2
        assert_eq!(
            p.time_of_impact([10.0, 8.0, 0.0], [0.3, 2.0, 1.0], 5.0),
            Some(1.5)
        );
        // along x from a reservoir into the block's end (y = 13 beside the upper block)
        assert_eq!(
            p.time_of_impact([2.0, 13.0, 0.0], [2.0, 0.0, 0.0], 5.0),
            Some(2.0)
        );
        // through the pore along x: never
        assert_eq!(
            p.time_of_impact([2.0, 8.0, 0.0], [1.0, 0.0, 0.0], 100.0),
            None
        );
        // through the reservoir along y, across the periodic boundary: never
        assert_eq!(
            p.time_of_impact([2.0, 8.0, 0.0], [0.0, 1.0, 0.0], 100.0),
            None
        );
        // leftwards through x = 0 into the block's end as seen through the x boundary
        assert_eq!(
            p.time_of_impact([1.0, 14.0, 0.0], [-1.0, 0.0, 0.0], 10.0),
            Some(7.0)
        );
        // too far for the step
        assert_eq!(
            p.time_of_impact([10.0, 8.0, 0.0], [0.0, 2.0, 0.0], 1.0),
            None
        );
        // general paths hit the surface: at the hit the distance is zero, just before it > 0
        for (r, v) in [
            ([3.1, 6.4, 0.0], [1.3, 2.1, 0.2]),
            ([15.7, 9.9, 0.0], [-1.1, 1.4, 0.0]),
            ([11.0, 6.0, 0.0], [0.7, -1.9, -0.3]),
            ([19.5, 1.0, 0.0], [1.7, 0.4, 0.0]),
        ] {
            let t = p.time_of_impact(r, v, 100.0).expect("a hit");
            let at = |t: f64| [r[0] + v[0] * t, r[1] + v[1] * t, r[2] + v[2] * t];
            assert!(p.signed_distance(at(t)).abs() < 1e-13, "{r:?}: {:?}", at(t));
            assert!(p.signed_distance(at(0.999 * t)) > 0.0);
            // the normal at the hit faces the path
            let n = p.normal(at(t));
            assert!(n[0] * v[0] + n[1] * v[1] < 0.0, "{r:?}: {n:?}");
        }
        // a hair inside the upper plate: moving further in bounces now, moving out does not
        assert_eq!(
            p.time_of_impact([8.0, 11.0 + 1e-12, 0.0], [0.1, 1.0, 0.0], 1.0),
            Some(0.0)
        );
        assert_eq!(
            p.time_of_impact([8.0, 11.0 + 1e-12, 0.0], [0.1, -1.0, 0.0], 1.0),
            None
        );
        // a hair inside a block's end likewise
        assert_eq!(
            p.time_of_impact([14.0 - 1e-12, 13.0, 0.0], [-1.0, 0.2, 0.0], 1.0),
            Some(0.0)
        );
        assert_eq!(
            p.time_of_impact([14.0 - 1e-12, 13.0, 0.0], [1.0, 0.2, 0.0], 1.0),
            None
        );
        // a round trip: bounce back at the hit, and the path returns to its start in the fluid
        let (r, v) = ([3.1, 6.4, 0.0], [1.3, 2.1, 0.0]);
        let t = p.time_of_impact(r, v, 100.0).unwrap();
        let hit = [r[0] + v[0] * t, r[1] + v[1] * t, 0.0];
        let back = [-v[0], -v[1], 0.0];
        assert_eq!(p.time_of_impact(hit, back, t * 0.999), None);
    }

    #[test]
    fn cut_cells_and_rounding() {
        let p = pore();
        assert!(p.cuts_cell([7.0, 10.5, 0.0])); // straddles the upper plate
        assert!(p.cuts_cell([13.5, 12.0, 0.0])); // straddles a block's end
        assert!(p.cuts_cell([5.5, 10.5, 0.0])); // an edge
        assert!(!p.cuts_cell([8.0, 12.0, 0.0])); // all solid
        assert!(!p.cuts_cell([8.0, 6.0, 0.0])); // all pore
        assert!(!p.cuts_cell([2.0, 12.0, 0.0])); // all reservoir
        assert!(!p.cuts_cell([8.0, -0.5, 0.0])); // solid across the y boundary
        assert!(!p.cuts_cell([14.0, 12.0, 0.0])); // touching the end from the fluid side
                                                  // a stored position in the solid comes back onto the nearest face
        for (pos, axis, face) in [
            ([8.0f32, 11.000_002, 0.5], 1, 11.0),
            ([8.0f32, 4.999_998, 0.5], 1, 5.0),
            ([13.999_99f32, 12.0, 0.5], 0, 14.0),
            ([6.000_01f32, 3.0, 0.5], 0, 6.0),
        ] {
            assert!(p.signed_distance(pos.map(|c| c as f64)) < 0.0);
            let q = p.keep_inside(pos);
            assert!(p.signed_distance(q.map(|c| c as f64)) >= 0.0, "{q:?}");
            assert!((q[axis] - face).abs() < 1e-5, "{q:?}");
        }
        assert_eq!(p.keep_inside([3.0, 3.0, 1.0]), [3.0, 3.0, 1.0]);
    }
}
