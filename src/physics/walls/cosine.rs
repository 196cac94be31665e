//! Walls at rest shaped as one period of a cosine over the box length Lx, across y:
//! the upper wall at y = Ly/2 + H/2 + A cos(2πx/Lx), the lower one at
//! Ly/2 − H/2 + A cos(2πx/Lx) (a wavy channel of constant vertical width H) or at
//! Ly/2 − H/2 − A cos(2πx/Lx) (an expansion-contraction, width H + 2A cos(2πx/Lx)).
//! `kernels/walls.cuh` mirrors every formula operation by operation; the cosine is a
//! polynomial of our own ([`cos_sin_turns`]), so that both sides compute the same bits.
//!
//! What is exact: which side of a wall a point is on (the sign of the vertical gap
//! y_top(x) − y or y − y_bottom(x)), and the time of impact, the first root of the gap along a
//! straight path, found from the fluid side by steps that never pass it and stopped within
//! [`CONTACT_TOLERANCE`] of the wall. The signed distance is the vertical gap scaled by
//! 1/√(1 + y_wall′(x)²), the normal distance to first order in the gap (exact where the wall is
//! straight, at its crests and troughs), and the normal is the gap's gradient, exact on the
//! surface: bounce-back needs only the impact point, specular slip its normal there.

use super::geometry::{f32_step_towards, WallShape};

/// 2π (the kernels' `MPC_TWO_PI` is the same double).
pub const TWO_PI: f64 = std::f64::consts::TAU;

/// The gap of an impact point: the root search stops there (cells).
pub const CONTACT_TOLERANCE: f64 = 1e-12;

/// Most root-search steps of one time of impact (a transversal crossing takes a handful; a
/// path grazing a crest takes more, and one that has not met the wall after these steps is
/// taken to miss it: `keep_inside` then catches the rare grazing path that did).
pub const MAX_CONTACT_STEPS: u32 = 64;

/// Taylor coefficients of cos r and sin r / r in r² (to r¹⁶ and r¹⁷: below 10⁻¹⁷ for
/// |r| ≤ π/4), as the shortest decimals of the doubles (the same literals in `walls.cuh`).
const COS: [f64; 9] = [
    1.0,
    -0.5,
    0.041666666666666664,
    -0.001388888888888889,
    2.48015873015873e-05,
    -2.755731922398589e-07,
    2.08767569878681e-09,
    -1.1470745597729725e-11,
    4.779477332387385e-14,
];
const SIN: [f64; 9] = [
    1.0,
    -0.16666666666666666,
    0.008333333333333333,
    -0.0001984126984126984,
    2.7557319223985893e-06,
    -2.505210838544172e-08,
    1.6059043836821613e-10,
    -7.647163731819816e-13,
    2.8114572543455206e-15,
];

/// Σ c_k z^k by Horner's rule, from the highest power.
#[inline]
fn horner(c: &[f64; 9], z: f64) -> f64 {
    let mut p = c[8];
    for k in (0..8).rev() {
        p = p * z + c[k];
    }
    p
}

/// (cos 2πu, sin 2πu): u reduced to the nearest quarter turn q/4 and r = 2π(u − q/4) in
/// [−π/4, π/4], then the quadrant's polynomial.
#[inline]
pub fn cos_sin_turns(u: f64) -> (f64, f64) {
    let q = (4.0 * u + 0.5).floor();
    let r = (u - 0.25 * q) * TWO_PI;
    let r2 = r * r;
    let c = horner(&COS, r2);
    let s = r * horner(&SIN, r2);
    match (q as i64) & 3 {
        0 => (c, s),
        1 => (-s, c),
        2 => (-c, -s),
        _ => (s, -c),
    }
}

/// The two cosine walls of a box with mid-height `yc` and length `period` along x.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CosineWalls {
    pub yc: f64,
    pub half_height: f64,
    pub amplitude: f64,
    pub period: f64,
    /// The lower wall moves against the upper one (expansion-contraction), not with it.
    pub expansion: bool,
}

/// One wall's vertical gap along a path at time t, and its rate.
#[derive(Clone, Copy, Debug)]
struct Gap {
    value: f64,
    rate: f64,
}

impl CosineWalls {
    /// The lower wall's displacement relative to the upper one's: +1 or −1.
    #[inline]
    fn lower_sign(&self) -> f64 {
        if self.expansion {
            -1.0
        } else {
            1.0
        }
    }

    /// The walls at `x`: (y_bottom, y_top, y_bottom′, y_top′).
    #[inline]
    fn walls_at(&self, x: f64) -> (f64, f64, f64, f64) {
        let (c, s) = cos_sin_turns(x / self.period);
        let k = TWO_PI / self.period;
        let sb = self.lower_sign();
        let wave = self.amplitude * c;
        let slope = -(self.amplitude * k) * s;
        (
            self.yc - self.half_height + sb * wave,
            self.yc + self.half_height + wave,
            sb * slope,
            slope,
        )
    }

    /// The vertical gaps (y − y_bottom, y_top − y) at `r`, positive in the fluid, with the
    /// walls' slopes.
    #[inline]
    fn gaps(&self, r: [f64; 3]) -> (f64, f64, f64, f64) {
        let (yb, yt, db, dt) = self.walls_at(r[0]);
        (r[1] - yb, yt - r[1], db, dt)
    }

    /// The gaps scaled to distances, and which wall is nearer (0 lower, 1 upper).
    #[inline]
    fn distances(&self, r: [f64; 3]) -> (f64, f64, usize, f64, f64) {
        let (gb, gt, db, dt) = self.gaps(r);
        let b = gb / (1.0 + db * db).sqrt();
        let t = gt / (1.0 + dt * dt).sqrt();
        (b, t, if b < t { 0 } else { 1 }, db, dt)
    }

    /// Wall `wall`'s gap along the path r + v t at time t.
    #[inline]
    fn gap_along(&self, wall: usize, r: [f64; 3], v: [f64; 3], t: f64) -> Gap {
        let x = r[0] + v[0] * t;
        let y = r[1] + v[1] * t;
        let (yb, yt, db, dt) = self.walls_at(x);
        if wall == 0 {
            Gap {
                value: y - yb,
                rate: v[1] - db * v[0],
            }
        } else {
            Gap {
                value: yt - y,
                rate: dt * v[0] - v[1],
            }
        }
    }

    /// The first time in [0, dt] at which wall `wall`'s gap along the path reaches zero. With
    /// |gap″| ≤ M = A k² vx², gap(t + s) ≥ g + g′s − M s²/2, whose positive root s is a step
    /// that never passes the first zero; near a transversal crossing it is a Newton step
    /// shortened by the curvature bound (quadratic convergence from the fluid side).
    fn first_contact(&self, wall: usize, r: [f64; 3], v: [f64; 3], dt: f64) -> Option<f64> {
        let k = TWO_PI / self.period;
        let m = self.amplitude * k * k * (v[0] * v[0]);
        let mut t = 0.0;
        let mut g = self.gap_along(wall, r, v, t);
        if g.value <= 0.0 {
            // a rounding error on the wall side: bounce if moving further in
            return if g.rate < 0.0 { Some(0.0) } else { None };
        }
        for _ in 0..MAX_CONTACT_STEPS {
            if g.value < CONTACT_TOLERANCE && g.rate < 0.0 {
                return Some(t);
            }
            let root = (g.rate * g.rate + 2.0 * m * g.value).sqrt();
            let s = if g.rate <= 0.0 {
                2.0 * g.value / (root - g.rate)
            } else if m > 0.0 {
                (g.rate + root) / m
            } else {
                return None;
            };
            t += s;
            // past the step, or not a number: no impact
            if t.partial_cmp(&dt).is_none_or(|o| o.is_gt()) {
                return None;
            }
            g = self.gap_along(wall, r, v, t);
            if g.value <= 0.0 {
                return Some(t);
            }
        }
        None
    }

    /// The lowest and highest the wall `wall` gets over x in [x0, x0 + 1]: its ends, and a
    /// crest or trough inside (cos = ±1 at whole and half periods).
    fn wall_range(&self, wall: usize, x0: f64) -> (f64, f64) {
        let (u0, u1) = (x0 / self.period, (x0 + 1.0) / self.period);
        let c0 = cos_sin_turns(u0).0;
        let c1 = cos_sin_turns(u1).0;
        let (mut lo, mut hi) = if c0 < c1 { (c0, c1) } else { (c1, c0) };
        let first = (2.0 * u0).ceil();
        for j in [first, first + 1.0] {
            if j <= 2.0 * u1 {
                if (j as i64) & 1 == 0 {
                    hi = 1.0;
                } else {
                    lo = -1.0;
                }
            }
        }
        let (sign, base) = if wall == 0 {
            (self.lower_sign(), self.yc - self.half_height)
        } else {
            (1.0, self.yc + self.half_height)
        };
        let (a, b) = (
            base + sign * (self.amplitude * lo),
            base + sign * (self.amplitude * hi),
        );
        if a < b {
            (a, b)
        } else {
            (b, a)
        }
    }
}

impl WallShape for CosineWalls {
    #[inline]
    fn signed_distance(&self, r: [f64; 3]) -> f64 {
        let (b, t, ..) = self.distances(r);
        if b < t {
            b
        } else {
            t
        }
    }

    #[inline]
    fn normal(&self, r: [f64; 3]) -> [f64; 3] {
        let (_, _, wall, db, dt) = self.distances(r);
        if wall == 0 {
            let n = (1.0 + db * db).sqrt();
            [-db / n, 1.0 / n, 0.0]
        } else {
            let n = (1.0 + dt * dt).sqrt();
            [dt / n, -1.0 / n, 0.0]
        }
    }

    #[inline]
    fn wall_velocity(&self, _r: [f64; 3]) -> [f64; 3] {
        [0.0; 3]
    }

    #[inline]
    fn surface(&self, r: [f64; 3]) -> usize {
        self.distances(r).2
    }

    /// The earlier of the two walls' first contacts (see `first_contact`).
    #[inline]
    fn time_of_impact(&self, r: [f64; 3], v: [f64; 3], dt: f64) -> Option<f64> {
        let b = self.first_contact(0, r, v, dt);
        let t = self.first_contact(1, r, v, dt);
        match (b, t) {
            (Some(b), Some(t)) => Some(if b < t { b } else { t }),
            (Some(b), None) => Some(b),
            (None, t) => t,
        }
    }

    /// The square [lo, lo + 1) in (x, y) is cut when a wall passes between its lowest and
    /// highest point over the cell's x range.
    #[inline]
    fn cuts_cell(&self, lo: [f64; 3]) -> bool {
        let (y0, y1) = (lo[1], lo[1] + 1.0);
        (0..2).any(|wall| {
            let (low, high) = self.wall_range(wall, lo[0]);
            low < y1 && y0 < high
        })
    }

    /// A stored position beyond a wall is put on the wall above or below it, rounded to f32,
    /// and stepped one f32 at a time towards the channel's mid-line (at most 8 steps).
    #[inline]
    fn keep_inside(&self, p: [f32; 3]) -> [f32; 3] {
        let mut q = p;
        let (gb, gt, ..) = self.gaps(q.map(|c| c as f64));
        if gb >= 0.0 && gt >= 0.0 {
            return q;
        }
        let (yb, yt, ..) = self.walls_at(q[0] as f64);
        let mid = 0.5 * (yb + yt);
        q[1] = (if gb < 0.0 { yb } else { yt }) as f32;
        for _ in 0..8 {
            let (gb, gt, ..) = self.gaps(q.map(|c| c as f64));
            if gb >= 0.0 && gt >= 0.0 {
                break;
            }
            q[1] = f32_step_towards(q[1], mid);
        }
        q
    }

    /// H per unit length along x, whichever way the walls wave (∫ cos over a period is 0).
    fn fluid_volume(&self, len: [f64; 3]) -> f64 {
        len[0] * 2.0 * self.half_height * len[2]
    }

    fn closed_axes(&self) -> [bool; 3] {
        [false, true, false]
    }

    /// The nearer vertical gap over sqrt(1 + L²), L = amplitude 2π / period the walls' largest
    /// slope: the distance to a curve of slope at most L is at least that.
    fn clearance(&self, r: [f64; 3]) -> Option<f64> {
        let (gb, gt, ..) = self.gaps(r);
        let slope = self.amplitude.abs() * (TWO_PI / self.period);
        Some(gb.min(gt) / (1.0 + slope * slope).sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 16-cell period, mid-height 8, H = 6, A = 1.5.
    fn walls(expansion: bool) -> CosineWalls {
        CosineWalls {
            yc: 8.0,
            half_height: 3.0,
            amplitude: 1.5,
            period: 16.0,
            expansion,
        }
    }

    #[test]
    fn the_cosine_is_the_library_cosine_to_rounding() {
        // 2πu rounds in the library's argument: within a period that is below 10⁻¹⁵
        for i in -80..80 {
            let u = i as f64 * 0.01371 + 0.003;
            let (c, s) = cos_sin_turns(u);
            let a = TWO_PI * u;
            assert!((c - a.cos()).abs() < 1e-15, "{u}: {c} vs {}", a.cos());
            assert!((s - a.sin()).abs() < 1e-15, "{u}: {s} vs {}", a.sin());
        }
        assert_eq!(cos_sin_turns(0.0), (1.0, 0.0));
        assert_eq!(cos_sin_turns(0.5).0, -1.0);
    }

    #[test]
    fn walls_signs_and_distances() {
        for expansion in [false, true] {
            let w = walls(expansion);
            // at x = 0 the upper wall is at 12.5, the lower at 6.5 (wavy) or 3.5 (expansion)
            let yb = if expansion { 3.5 } else { 6.5 };
            assert_eq!(w.signed_distance([0.0, 12.0, 0.0]), 0.5);
            assert_eq!(w.signed_distance([0.0, 13.0, 2.0]), -0.5);
            assert_eq!(w.signed_distance([16.0, yb + 0.25, 0.0]), 0.25);
            assert_eq!(w.signed_distance([0.0, yb - 0.25, 0.0]), -0.25);
            assert_eq!(w.surface([0.0, yb + 0.5, 0.0]), 0);
            assert_eq!(w.surface([0.0, 12.0, 0.0]), 1);
            // at a quarter period the walls are steepest: the gap is scaled by the slope
            let slope = 1.5 * TWO_PI / 16.0;
            let d = w.signed_distance([4.0, 10.0, 0.0]);
            assert!(
                (d - 1.0 / (1.0 + slope * slope).sqrt()).abs() < 1e-12,
                "{d}"
            );
            // the normal points into the fluid: a small step along it raises the distance
            for r in [[3.0, 10.5, 0.0], [11.0, 5.5, 0.0], [7.1, 4.9, 0.0]] {
                let n = w.normal(r);
                assert!((n[0] * n[0] + n[1] * n[1] - 1.0).abs() < 1e-15);
                let step = [r[0] + 1e-4 * n[0], r[1] + 1e-4 * n[1], 0.0];
                assert!(w.signed_distance(step) > w.signed_distance(r), "{r:?}");
            }
            assert_eq!(w.closed_axes(), [false, true, false]);
            assert_eq!(w.fluid_volume([16.0, 16.0, 3.0]), 16.0 * 6.0 * 3.0);
        }
    }

    /// The normal at a wall point is perpendicular to the wall's tangent (1, y′).
    #[test]
    fn the_normal_is_perpendicular_to_the_wall() {
        let w = walls(true);
        for x in [0.7, 3.3, 9.0, 13.9] {
            let (yb, yt, db, dt) = w.walls_at(x);
            let nt = w.normal([x, yt - 1e-9, 0.0]);
            let nb = w.normal([x, yb + 1e-9, 0.0]);
            assert!((nt[0] + nt[1] * dt).abs() < 1e-15 && nt[1] < 0.0);
            assert!((nb[0] + nb[1] * db).abs() < 1e-15 && nb[1] > 0.0);
        }
    }

    #[test]
    fn time_of_impact_lands_on_the_wall_first() {
        for expansion in [false, true] {
            let w = walls(expansion);
            // straight up at a crest: the upper wall at 12.5 after 4.5 / 3
            let t = w
                .time_of_impact([0.0, 8.0, 0.0], [0.0, 3.0, 0.0], 5.0)
                .unwrap();
            assert!((t - 1.5).abs() < 1e-12, "{t}");
            // along x in the middle: never
            assert_eq!(
                w.time_of_impact([0.0, 8.0, 0.0], [1.0, 0.0, 0.0], 100.0),
                None
            );
            // general paths: the hit is on a wall (gap below the tolerance) and the path was in
            // the fluid all the way (sampled finely)
            for (r, v) in [
                ([1.0, 9.0, 0.0], [1.3, 0.9, 0.1]),
                ([5.0, 7.0, 0.0], [-0.7, -1.6, 0.0]),
                ([9.5, 7.0, 0.0], [2.5, 0.3, 0.0]),
                ([12.0, 9.0, 0.0], [0.4, 2.2, 0.0]),
                ([2.0, 6.6, 0.0], [3.0, -0.1, 0.0]),
            ] {
                let Some(t) = w.time_of_impact(r, v, 20.0) else {
                    panic!("{expansion}: {r:?} {v:?} misses");
                };
                let at = |t: f64| [r[0] + v[0] * t, r[1] + v[1] * t, r[2] + v[2] * t];
                let (gb, gt, ..) = w.gaps(at(t));
                let g = gb.min(gt);
                assert!(g.abs() <= 1e-11, "{expansion}: {r:?} {v:?}: gap {g}");
                for i in 0..1000 {
                    let s = t * i as f64 / 1000.0;
                    assert!(w.signed_distance(at(s)) > 0.0, "{r:?} {v:?} at {s}");
                }
                // and too short a step misses it
                assert_eq!(w.time_of_impact(r, v, 0.99 * t), None);
                // round trip: bounced back from the hit, the path goes back through the fluid
                let back = [-v[0], -v[1], -v[2]];
                assert_eq!(w.time_of_impact(at(t), back, 0.99 * t), None);
            }
            // a path along x passing a hair above the lower wall's crest misses it, one a
            // hair below hits it
            let crest = if expansion { 8.0 } else { 16.0 };
            let (yb, ..) = w.walls_at(crest);
            for (dy, hits) in [(1e-6, false), (-1e-6, true)] {
                let graze = w.time_of_impact([crest - 2.0, yb + dy, 0.0], [1.0, 0.0, 0.0], 4.0);
                assert_eq!(graze.is_some(), hits, "{expansion}, {dy}: {graze:?}");
            }
            // a rounding error beyond the upper wall moving outwards: now; inwards: not
            assert_eq!(
                w.time_of_impact([0.0, 12.5 + 1e-13, 0.0], [0.0, 1.0, 0.0], 1.0),
                Some(0.0)
            );
            assert_eq!(
                w.time_of_impact([0.0, 12.5 + 1e-13, 0.0], [0.0, -1.0, 0.0], 1.0),
                None
            );
        }
    }

    #[test]
    fn cut_cells_and_rounding() {
        for expansion in [false, true] {
            let w = walls(expansion);
            assert!(w.cuts_cell([-0.5, 12.0, 0.0])); // the upper crest at 12.5
            assert!(!w.cuts_cell([-0.5, 12.6, 0.0])); // above it
            assert!(!w.cuts_cell([0.0, 8.0, 0.0])); // the middle
                                                    // at x = 8 the upper wall is at 9.5 (its trough inside the cell [7.5, 8.5))
            assert!(w.cuts_cell([7.5, 8.6, 0.0]));
            assert!(!w.cuts_cell([7.5, 9.55, 0.0])); // the trough reaches up to 9.529 there
            let yb = w.walls_at(8.0).0;
            assert!(w.cuts_cell([7.5, yb - 0.5, 0.0]));
            // a stored position beyond a wall comes back onto it
            for (p, near) in [([3.0f32, 11.9, 1.0], 1), ([13.0f32, 1.0, 1.0], 0)] {
                let (yb, yt, ..) = w.walls_at(p[0] as f64);
                let wall = if near == 0 { yb } else { yt };
                let out = [
                    p[0],
                    (wall + if near == 0 { -1e-5 } else { 1e-5 }) as f32,
                    p[2],
                ];
                assert!(w.signed_distance(out.map(|c| c as f64)) < 0.0);
                let q = w.keep_inside(out);
                assert!(w.signed_distance(q.map(|c| c as f64)) >= 0.0, "{q:?}");
                assert!((q[1] as f64 - wall).abs() < 1e-5, "{q:?}");
            }
            assert_eq!(w.keep_inside([3.0, 8.0, 1.0]), [3.0, 8.0, 1.0]);
        }
    }
}
