//! A sphere at rest: the fluid inside it (a spherical container) or outside it (an obstacle;
//! with the periodic box around it, a lattice of spheres of the box's period); or, with
//! `along_z`, a cylinder along z (the distance taken in x and y only: an obstacle across a
//! flow along x). The formulas are the pipe's in three (or two) dimensions;
//! `kernels/walls.cuh` mirrors them operation by operation.
//!
//! An obstacle's radius leaves at least one cell to the box faces, so a straight path of one
//! step (under half a cell) and every collision cell (shifted by under half a cell) meet at
//! most the sphere of the box itself, never a periodic image: coordinates beyond the box faces
//! are taken as they are.

use super::geometry::{cell_extent_distances, f32_step_away, f32_step_towards, WallShape};

/// A sphere of `radius` about `centre` (a cylinder along z through it if `along_z`); the fluid
/// inside it when `fluid_inside`, else outside.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sphere {
    pub centre: [f64; 3],
    pub radius: f64,
    pub fluid_inside: bool,
    pub along_z: bool,
}

impl Sphere {
    /// Offset of `r` from the centre (from the axis along z: no z component).
    #[inline]
    fn offset(&self, r: [f64; 3]) -> [f64; 3] {
        [
            r[0] - self.centre[0],
            r[1] - self.centre[1],
            if self.along_z {
                0.0
            } else {
                r[2] - self.centre[2]
            },
        ]
    }

    /// The axes the distance is taken along: x, y (and z for a sphere).
    #[inline]
    fn round_axes(&self) -> usize {
        if self.along_z {
            2
        } else {
            3
        }
    }

    /// Squared distance from the centre minus R².
    #[inline]
    fn excess(&self, d: [f64; 3]) -> f64 {
        d[0] * d[0] + d[1] * d[1] + d[2] * d[2] - self.radius * self.radius
    }

    /// Whether the offset `d` from the centre lies in the fluid (on the surface counts).
    #[inline]
    fn in_fluid(&self, d: [f64; 3]) -> bool {
        let e = self.excess(d);
        if self.fluid_inside {
            e <= 0.0
        } else {
            e >= 0.0
        }
    }
}

impl WallShape for Sphere {
    #[inline]
    fn signed_distance(&self, r: [f64; 3]) -> f64 {
        let d = self.offset(r);
        let rho = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
        if self.fluid_inside {
            self.radius - rho
        } else {
            rho - self.radius
        }
    }

    #[inline]
    fn normal(&self, r: [f64; 3]) -> [f64; 3] {
        let d = self.offset(r);
        let rho = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
        let s = if self.fluid_inside { -1.0 } else { 1.0 };
        if rho > 0.0 {
            [s * d[0] / rho, s * d[1] / rho, s * d[2] / rho]
        } else {
            [0.0, s, 0.0]
        }
    }

    #[inline]
    fn wall_velocity(&self, _r: [f64; 3]) -> [f64; 3] {
        [0.0; 3]
    }

    #[inline]
    fn surface(&self, _r: [f64; 3]) -> usize {
        0
    }

    /// With A = |v|², B = d·v, C = |d|² − R², D = B² − A C (d the offset from the centre):
    /// inside, the larger root of |d + v t|² = R² as for the pipe; outside, the smaller one,
    /// C/(−B + √D), for a path moving towards the centre (B < 0), in forms without
    /// cancellation.
    #[inline]
    fn time_of_impact(&self, r: [f64; 3], v: [f64; 3], dt: f64) -> Option<f64> {
        let d = self.offset(r);
        // the velocity across the axis of a cylinder
        let vz = if self.along_z { 0.0 } else { v[2] };
        let a = v[0] * v[0] + v[1] * v[1] + vz * vz;
        if a == 0.0 {
            return None;
        }
        let b = d[0] * v[0] + d[1] * v[1] + d[2] * vz;
        if !self.fluid_inside && b >= 0.0 {
            return None;
        }
        let c = self.excess(d);
        let disc = b * b - a * c;
        if disc < 0.0 {
            return None;
        }
        let sd = disc.sqrt();
        let t = if !self.fluid_inside {
            c / (sd - b)
        } else if b <= 0.0 {
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

    /// The cube [lo, lo + 1) is cut when the sphere passes between its nearest and its
    /// farthest point from the centre.
    #[inline]
    fn cuts_cell(&self, lo: [f64; 3]) -> bool {
        let d0 = self.offset(lo);
        let (mut near, mut far) = (0.0, 0.0);
        for &d in &d0[..self.round_axes()] {
            let (n, f) = cell_extent_distances(d);
            near += n * n;
            far += f * f;
        }
        let r2 = self.radius * self.radius;
        near < r2 && r2 < far
    }

    /// A stored position in the sphere's solid side (rounding, or the body force's bend of a
    /// path against the straight chord's time of impact) is put on the surface, rounded to
    /// f32, and stepped one f32 at a time into the fluid (at most 8 steps).
    #[inline]
    fn keep_inside(&self, p: [f32; 3]) -> [f32; 3] {
        let mut q = p;
        let d = self.offset(q.map(|c| c as f64));
        if self.in_fluid(d) {
            return q;
        }
        let rho = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
        if rho > 0.0 {
            let k = self.radius / rho;
            for (a, c) in q.iter_mut().enumerate().take(self.round_axes()) {
                *c = (self.centre[a] + d[a] * k) as f32;
            }
        }
        for _ in 0..8 {
            if self.in_fluid(self.offset(q.map(|c| c as f64))) {
                break;
            }
            let n = self.round_axes();
            for (c, &centre) in q.iter_mut().zip(&self.centre).take(n) {
                *c = if self.fluid_inside {
                    f32_step_towards(*c, centre)
                } else {
                    f32_step_away(*c, centre)
                };
            }
        }
        q
    }

    fn fluid_volume(&self, len: [f64; 3]) -> f64 {
        let pi = std::f64::consts::PI;
        let ball = if self.along_z {
            pi * self.radius * self.radius * len[2]
        } else {
            4.0 / 3.0 * pi * self.radius.powi(3)
        };
        if self.fluid_inside {
            ball
        } else {
            len[0] * len[1] * len[2] - ball
        }
    }

    fn closed_axes(&self) -> [bool; 3] {
        let i = self.fluid_inside;
        [i, i, i && !self.along_z]
    }

    /// The signed distance: Euclidean.
    fn clearance(&self, r: [f64; 3]) -> Option<f64> {
        Some(self.signed_distance(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sphere(fluid_inside: bool) -> Sphere {
        Sphere {
            centre: [5.0, 5.0, 5.0],
            radius: 3.0,
            fluid_inside,
            along_z: false,
        }
    }

    /// A cylinder along z is the sphere's cross-section at the centre's z, at every z.
    #[test]
    fn a_cylinder_is_the_central_disc_at_every_z() {
        let ball = sphere(false);
        let rod = Sphere {
            along_z: true,
            ..ball
        };
        for (r, v) in [
            ([1.0, 6.0, 5.0], [1.0, -0.2, 0.0]),
            ([7.5, 7.9, 5.0], [-0.3, -0.1, 0.0]),
            ([2.2, 3.1, 5.0], [0.8, 0.5, 0.0]),
        ] {
            for z in [-3.0, 0.2, 5.0, 11.7] {
                let rz = [r[0], r[1], z];
                assert_eq!(rod.signed_distance(rz), ball.signed_distance(r));
                assert_eq!(rod.normal(rz), ball.normal(r));
                // a velocity along the axis changes nothing across it
                let vz = [v[0], v[1], 0.9];
                assert_eq!(
                    rod.time_of_impact(rz, vz, 9.0),
                    ball.time_of_impact(r, v, 9.0)
                );
            }
        }
        for z in [-0.5, 3.2, 9.9] {
            assert!(rod.cuts_cell([7.5, 4.5, z])); // straddles x = 8
            assert!(!rod.cuts_cell([4.5, 4.5, z])); // around the axis
            assert!(!rod.cuts_cell([0.0, 0.0, z])); // a corner, all fluid
        }
        let q = rod.keep_inside([5.0, 7.99, 11.25]);
        assert!(rod.signed_distance(q.map(|c| c as f64)) >= 0.0);
        assert_eq!(q[2], 11.25, "z is left alone");
        let v = rod.fluid_volume([10.0, 10.0, 4.0]);
        assert!((v - (400.0 - std::f64::consts::PI * 9.0 * 4.0)).abs() < 1e-9);
        assert_eq!(rod.closed_axes(), [false; 3]);
    }

    #[test]
    fn distances_and_normals_point_into_the_fluid() {
        for inside in [true, false] {
            let s = sphere(inside);
            let sign = if inside { 1.0 } else { -1.0 };
            assert_eq!(s.signed_distance([5.0, 6.0, 5.0]), sign * 2.0);
            assert_eq!(s.signed_distance([5.0, 5.0, 9.0]), -sign * 1.0);
            // a step along the normal goes into the fluid
            let r = [6.1, 7.3, 4.2];
            let n = s.normal(r);
            let step = [r[0] + 1e-3 * n[0], r[1] + 1e-3 * n[1], r[2] + 1e-3 * n[2]];
            assert!(s.signed_distance(step) > s.signed_distance(r));
            assert_eq!(s.closed_axes(), [inside; 3]);
        }
    }

    #[test]
    fn time_of_impact_is_the_root_out_of_the_fluid() {
        let inner = sphere(true);
        // from the centre along x: hits at x = 8 after 3 / 2
        assert_eq!(
            inner.time_of_impact([5.0, 5.0, 5.0], [2.0, 0.0, 0.0], 5.0),
            Some(1.5)
        );
        let outer = sphere(false);
        // from x = 0 towards the centre: hits the obstacle at x = 2 after 2
        assert_eq!(
            outer.time_of_impact([0.0, 5.0, 5.0], [1.0, 0.0, 0.0], 5.0),
            Some(2.0)
        );
        // moving away, or passing beside it: never
        assert_eq!(
            outer.time_of_impact([0.0, 5.0, 5.0], [-1.0, 0.0, 0.0], 50.0),
            None
        );
        assert_eq!(
            outer.time_of_impact([0.0, 8.5, 5.0], [1.0, 0.0, 0.0], 50.0),
            None
        );
        // a general path lands on the surface
        for (s, r, v) in [
            (inner, [6.3, 3.9, 5.5], [0.7, -1.3, 0.4]),
            (outer, [0.5, 1.2, 2.0], [1.0, 0.9, 0.8]),
        ] {
            let t = s.time_of_impact(r, v, 100.0).unwrap();
            let hit = [r[0] + v[0] * t, r[1] + v[1] * t, r[2] + v[2] * t];
            assert!(s.signed_distance(hit).abs() < 1e-14, "{hit:?}");
        }
        // a rounding error inside the obstacle, moving further in: now
        assert_eq!(
            outer.time_of_impact([2.0 + 1e-12, 5.0, 5.0], [1.0, 0.0, 0.0], 1.0),
            Some(0.0)
        );
    }

    #[test]
    fn cut_cells_and_rounding() {
        for inside in [true, false] {
            let s = sphere(inside);
            assert!(!s.cuts_cell([4.5, 4.5, 4.5])); // around the centre
            assert!(s.cuts_cell([7.5, 4.5, 4.5])); // straddles x = 8
            assert!(!s.cuts_cell([0.0, 0.0, 0.0])); // a corner of the box
                                                    // a point rounded onto the wrong side comes back, at most a hair away
            for p in [[8.000_001f32, 5.0, 5.0], [7.999_999f32, 5.0, 5.0]] {
                let q = s.keep_inside(p);
                assert!(
                    s.signed_distance(q.map(|c| c as f64)) >= 0.0,
                    "{inside}: {q:?}"
                );
                assert!((q[0] - 8.0).abs() < 1e-5);
            }
            // deeper in the wall (a body force's bend): onto the surface
            let q = s.keep_inside([5.0, 5.0, if inside { 8.01 } else { 7.99 }]);
            assert!(s.signed_distance(q.map(|c| c as f64)) >= 0.0);
            assert!((q[2] - 8.0).abs() < 1e-5, "{q:?}");
            assert_eq!(s.keep_inside([5.0, 6.5, 5.0]) == [5.0, 6.5, 5.0], inside);
        }
    }
}
