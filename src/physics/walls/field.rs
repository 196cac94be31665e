//! A wall geometry given as data: a signed distance sampled on a periodic grid spanning the
//! box (node (i, j, k) at ((i + ½) s, (j + ½) s, (k + ½) s), spacing s), interpolated
//! trilinearly. The surface is the zero level of the interpolant; every answer of
//! [`WallShape`] is about that interpolant, so that they agree with each other exactly.
//! `kernels/walls.cuh` mirrors every function operation by operation. Files are read and
//! checked by [`super::field_load`].

use std::sync::Arc;

use super::geometry::WallShape;
use crate::physics::wrap_coordinate;

/// Steps of a path sampled per grid spacing when looking for its impact.
pub const SAMPLES_PER_SPACING: f64 = 4.0;
/// Most steps of the root search of a time of impact (it ends in about ten).
pub const MAX_ROOT_STEPS: u32 = 100;
/// The root search ends once the time of impact is bracketed this tightly, relative to the
/// step: a position error of |v| dt 1e-12, far below the f32 position's rounding.
pub const ROOT_TOLERANCE: f64 = 1e-12;
/// Most projections of a stored position back into the fluid.
pub const MAX_PROJECTIONS: u32 = 8;
/// Sub-samples per axis of a grid box the surface crosses (the fluid volume).
const VOLUME_SUBSAMPLES: usize = 8;

/// A signed distance on a periodic grid (positive in the fluid, in cells).
#[derive(Clone, Debug, PartialEq)]
pub struct DistanceField {
    /// Nodes along x, y, z (nodes · spacing = the box edge).
    pub nodes: [usize; 3],
    pub spacing: f64,
    /// 1 / spacing: points are located by a product, on the GPU as here (a division is
    /// dozens of instructions there).
    pub inv_spacing: f64,
    /// The distance at node (i, j, k), index (i ny + j) nz + k (C order).
    pub values: Arc<[f32]>,
    /// A bound on |∇d| of the interpolant (the largest node difference per spacing along each
    /// axis, combined): the distance changes by at most `slope` per cell.
    pub slope: f64,
    /// Volume of the region where the interpolant is positive.
    pub fluid: f64,
}

/// The 8 node values about a point (index dx·4 + dy·2 + dz) and its fractions within them.
struct Stencil {
    v: [f64; 8],
    f: [f64; 3],
}

#[inline]
fn lerp(a: f64, b: f64, t: f64) -> f64 {
    a + (b - a) * t
}

/// Trilinear interpolation of the corner values `v` at fractions `f`.
#[inline]
fn trilinear(v: &[f64; 8], f: [f64; 3]) -> f64 {
    let c00 = lerp(v[0], v[4], f[0]);
    let c10 = lerp(v[2], v[6], f[0]);
    let c01 = lerp(v[1], v[5], f[0]);
    let c11 = lerp(v[3], v[7], f[0]);
    let c0 = lerp(c00, c10, f[1]);
    let c1 = lerp(c01, c11, f[1]);
    lerp(c0, c1, f[2])
}

impl DistanceField {
    /// Whether `stop` holds for the distance at some vertex of the partition of the cell
    /// [lo, lo + 1) by the grid planes (where a trilinear interpolant has its extremes), the
    /// vertices visited x-major and the visit ended at the first that holds.
    fn any_partition_vertex(&self, lo: [f64; 3], mut stop: impl FnMut(f64) -> bool) -> bool {
        let mut a = 0;
        while let Some(x) = self.partition_coordinate(lo[0], a) {
            let mut b = 0;
            while let Some(y) = self.partition_coordinate(lo[1], b) {
                let mut c = 0;
                while let Some(z) = self.partition_coordinate(lo[2], c) {
                    if stop(self.signed_distance([x, y, z])) {
                        return true;
                    }
                    c += 1;
                }
                b += 1;
            }
            a += 1;
        }
        false
    }

    /// The time of impact within [lo, hi] of the path r + v t, where the distance is d_lo ≥ 0
    /// (or the start, in the solid and leaving it) and d_hi < 0: the Illinois variant of
    /// regula falsi (a bisection where the secant leaves the bracket or d_lo is not positive),
    /// down to [`ROOT_TOLERANCE`] of the step; the fluid-side end. Bisection to the last bit
    /// took ~54 reads of the field per impact, each waiting on the one before, and held whole
    /// warps of a GPU; this takes about ten.
    #[allow(clippy::too_many_arguments)]
    fn last_time_in_fluid(
        &self,
        r: [f64; 3],
        v: [f64; 3],
        dt: f64,
        mut lo: f64,
        mut d_lo: f64,
        mut hi: f64,
        mut d_hi: f64,
    ) -> f64 {
        let tolerance = ROOT_TOLERANCE * dt;
        // which end the last step moved: 1 lo, -1 hi (Illinois: halve the other's value when
        // the same end moves twice)
        let mut moved = 0;
        for _ in 0..MAX_ROOT_STEPS {
            // negated so that a NaN width stops the search too, as wall_field.cuh's mirror does
            #[allow(clippy::neg_cmp_op_on_partial_ord)]
            if !(hi - lo > tolerance) {
                break;
            }
            let mut t = if d_lo > 0.0 {
                (lo * d_hi - hi * d_lo) / (d_hi - d_lo)
            } else {
                0.5 * (lo + hi)
            };
            if !(t > lo && t < hi) {
                t = 0.5 * (lo + hi);
                if !(t > lo && t < hi) {
                    break;
                }
            }
            let d = self.signed_distance([r[0] + v[0] * t, r[1] + v[1] * t, r[2] + v[2] * t]);
            if d < 0.0 {
                (hi, d_hi) = (t, d);
                if moved == -1 {
                    d_lo *= 0.5;
                }
                moved = -1;
            } else {
                (lo, d_lo) = (t, d);
                if moved == 1 {
                    d_hi *= 0.5;
                }
                moved = 1;
            }
        }
        lo
    }

    /// The field of `values` (C order) on `nodes` nodes `spacing` apart; its slope bound and
    /// fluid volume computed once here.
    pub fn new(nodes: [usize; 3], spacing: f64, values: Vec<f32>) -> DistanceField {
        assert_eq!(values.len(), nodes[0] * nodes[1] * nodes[2]);
        let mut field = DistanceField {
            nodes,
            spacing,
            inv_spacing: 1.0 / spacing,
            values: values.into(),
            slope: 0.0,
            fluid: 0.0,
        };
        field.slope = field.slope_bound();
        field.fluid = field.integrate_fluid();
        field
    }

    /// Edges of the box the grid spans.
    pub fn length(&self) -> [f64; 3] {
        self.nodes.map(|n| n as f64 * self.spacing)
    }

    #[inline]
    fn node(&self, i: usize, j: usize, k: usize) -> f64 {
        let [_, ny, nz] = self.nodes;
        self.values[(i * ny + j) * nz + k] as f64
    }

    /// The lower node index along one axis of `x`, the next one (periodic) and the fraction.
    #[inline]
    fn locate(&self, x: f64, n: usize) -> (usize, usize, f64) {
        let u = x * self.inv_spacing - 0.5;
        let fl = u.floor();
        let f = u - fl;
        let i = (fl as i64).rem_euclid(n as i64) as usize;
        let j = if i + 1 == n { 0 } else { i + 1 };
        (i, j, f)
    }

    #[inline]
    fn stencil(&self, r: [f64; 3]) -> Stencil {
        let (i0, i1, fx) = self.locate(r[0], self.nodes[0]);
        let (j0, j1, fy) = self.locate(r[1], self.nodes[1]);
        let (k0, k1, fz) = self.locate(r[2], self.nodes[2]);
        Stencil {
            v: [
                self.node(i0, j0, k0),
                self.node(i0, j0, k1),
                self.node(i0, j1, k0),
                self.node(i0, j1, k1),
                self.node(i1, j0, k0),
                self.node(i1, j0, k1),
                self.node(i1, j1, k0),
                self.node(i1, j1, k1),
            ],
            f: [fx, fy, fz],
        }
    }

    /// The gradient of the interpolant at `r` (within the grid box holding it).
    #[inline]
    pub fn gradient(&self, r: [f64; 3]) -> [f64; 3] {
        let Stencil { v, f } = self.stencil(r);
        let s = self.spacing;
        let gx = lerp(
            lerp(v[4] - v[0], v[6] - v[2], f[1]),
            lerp(v[5] - v[1], v[7] - v[3], f[1]),
            f[2],
        );
        let gy = lerp(
            lerp(v[2] - v[0], v[6] - v[4], f[0]),
            lerp(v[3] - v[1], v[7] - v[5], f[0]),
            f[2],
        );
        let gz = lerp(
            lerp(v[1] - v[0], v[5] - v[4], f[0]),
            lerp(v[3] - v[2], v[7] - v[6], f[0]),
            f[1],
        );
        [gx / s, gy / s, gz / s]
    }

    /// The largest |difference| of neighbouring nodes per spacing along each axis, combined
    /// over the axes (the trilinear gradient's components are averages of those differences),
    /// a hair above for rounding.
    fn slope_bound(&self) -> f64 {
        let [nx, ny, nz] = self.nodes;
        let mut most = [0.0f64; 3];
        for i in 0..nx {
            for j in 0..ny {
                for k in 0..nz {
                    let d = self.node(i, j, k);
                    let next = [
                        self.node((i + 1) % nx, j, k),
                        self.node(i, (j + 1) % ny, k),
                        self.node(i, j, (k + 1) % nz),
                    ];
                    for a in 0..3 {
                        most[a] = most[a].max((next[a] - d).abs());
                    }
                }
            }
        }
        let s = self.spacing;
        let sum: f64 = most.iter().map(|m| (m / s) * (m / s)).sum();
        sum.sqrt() * (1.0 + 1e-9)
    }

    /// The volume where the interpolant is positive: whole grid boxes whose corners are all
    /// positive, and sub-samples of the boxes the surface crosses.
    fn integrate_fluid(&self) -> f64 {
        let [nx, ny, nz] = self.nodes;
        let box_volume = self.spacing.powi(3);
        let m = VOLUME_SUBSAMPLES;
        let mut total = 0.0;
        for i in 0..nx {
            for j in 0..ny {
                for k in 0..nz {
                    let centre = [i, j, k].map(|c| (c as f64 + 1.0) * self.spacing);
                    let Stencil { v, .. } = self.stencil(centre);
                    if v.iter().all(|&d| d > 0.0) {
                        total += box_volume;
                    } else if v.iter().any(|&d| d > 0.0) {
                        let mut inside = 0usize;
                        let at = |a: usize| (a as f64 + 0.5) / m as f64;
                        for a in 0..m {
                            for b in 0..m {
                                for c in 0..m {
                                    if trilinear(&v, [at(a), at(b), at(c)]) > 0.0 {
                                        inside += 1;
                                    }
                                }
                            }
                        }
                        total += box_volume * inside as f64 / (m * m * m) as f64;
                    }
                }
            }
        }
        total
    }

    /// Along one axis of a cell [a, a + 1): the `m`-th of a, the grid planes strictly inside,
    /// a + 1; None past the last.
    #[inline]
    fn partition_coordinate(&self, a: f64, m: u32) -> Option<f64> {
        if m == 0 {
            return Some(a);
        }
        let s = self.spacing;
        let first = (a * self.inv_spacing - 0.5).floor() + 1.0;
        let x = (first + (m - 1) as f64 + 0.5) * s;
        if x < a + 1.0 {
            return Some(x);
        }
        if m == 1 {
            return Some(a + 1.0);
        }
        // the far face follows the last interior plane
        let previous = (first + (m - 2) as f64 + 0.5) * s;
        if previous < a + 1.0 {
            Some(a + 1.0)
        } else {
            None
        }
    }
}

impl WallShape for DistanceField {
    #[inline]
    fn signed_distance(&self, r: [f64; 3]) -> f64 {
        let Stencil { v, f } = self.stencil(r);
        trilinear(&v, f)
    }

    #[inline]
    fn normal(&self, r: [f64; 3]) -> [f64; 3] {
        let g = self.gradient(r);
        let m = (g[0] * g[0] + g[1] * g[1] + g[2] * g[2]).sqrt();
        if m > 0.0 {
            [g[0] / m, g[1] / m, g[2] / m]
        } else {
            [0.0, 1.0, 0.0]
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

    /// A path that cannot fall by its start's distance within `dt` (the slope bound) never
    /// reaches the surface. Otherwise: at or over the surface and moving out, now; else the
    /// path is sampled at steps of at most a quarter spacing up to `dt`, and the first sample
    /// in the wall brackets the impact with the last one before it, which bisection narrows
    /// until f64 runs out. The impact returned is the fluid end of the bracket.
    #[inline]
    fn time_of_impact(&self, r: [f64; 3], v: [f64; 3], dt: f64) -> Option<f64> {
        let speed = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
        if speed == 0.0 {
            return None;
        }
        let d0 = self.signed_distance(r);
        if d0 > self.slope * speed * dt + 1e-9 {
            return None;
        }
        if d0 <= 0.0 {
            let g = self.gradient(r);
            if g[0] * v[0] + g[1] * v[1] + g[2] * v[2] < 0.0 {
                return Some(0.0);
            }
        }
        let at = |t: f64| [r[0] + v[0] * t, r[1] + v[1] * t, r[2] + v[2] * t];
        let steps = (speed * dt * SAMPLES_PER_SPACING / self.spacing)
            .ceil()
            .max(1.0) as u32;
        let (mut lo, mut d_lo) = (0.0, d0);
        for k in 1..=steps {
            let t = if k == steps {
                dt
            } else {
                dt * k as f64 / steps as f64
            };
            let d = self.signed_distance(at(t));
            if d < 0.0 {
                return Some(self.last_time_in_fluid(r, v, dt, lo, d_lo, t, d));
            }
            (lo, d_lo) = (t, d);
        }
        None
    }

    /// Cut when the interpolant takes both signs on the cell. It is trilinear in each grid
    /// box, so its extremes over the cell lie at the vertices of the cell's partition by the
    /// grid planes; a cell whose centre is farther from zero than the slope bound times the
    /// half diagonal is skipped without looking.
    #[inline]
    fn cuts_cell(&self, lo: [f64; 3]) -> bool {
        let centre = [lo[0] + 0.5, lo[1] + 0.5, lo[2] + 0.5];
        let dc = self.signed_distance(centre);
        if dc.abs() > self.slope * 0.75f64.sqrt() {
            return false;
        }
        let (mut neg, mut pos) = (false, false);
        self.any_partition_vertex(lo, |d| {
            neg |= d < 0.0;
            pos |= d > 0.0;
            neg && pos
        })
    }

    /// A stored position in the wall (rounding, or a body force's bend of a path against the
    /// straight chord's time of impact) is moved along the normal onto the surface and a few
    /// f32 steps of the box edge beyond it, wrapped into the box, until it is in the fluid.
    #[inline]
    fn keep_inside(&self, p: [f32; 3]) -> [f32; 3] {
        let len = self.length();
        let longest = len[0].max(len[1]).max(len[2]);
        let hair = 4.0 * f32::EPSILON as f64 * longest;
        let mut q = p;
        for _ in 0..MAX_PROJECTIONS {
            let r = q.map(|c| c as f64);
            let d = self.signed_distance(r);
            if d >= 0.0 {
                break;
            }
            let n = self.normal(r);
            let step = hair - d;
            for k in 0..3 {
                q[k] = wrap_coordinate(r[k] + n[k] * step, len[k]);
            }
        }
        q
    }

    fn fluid_volume(&self, _len: [f64; 3]) -> f64 {
        self.fluid
    }

    fn closed_axes(&self) -> [bool; 3] {
        [false; 3]
    }

    /// The interpolated distance over the slope bound (the distance falls by at most `slope`
    /// per unit length).
    fn clearance(&self, r: [f64; 3]) -> Option<f64> {
        Some(self.signed_distance(r) / self.slope)
    }

    /// Exact: the interpolant is trilinear in each grid box, so its least value over the cell
    /// is at a vertex of the cell's partition by the grid planes (as in `cuts_cell`).
    fn cell_clearance(&self, lo: [f64; 3]) -> Option<f64> {
        let mut least = f64::INFINITY;
        self.any_partition_vertex(lo, |d| {
            least = least.min(d);
            false
        });
        Some(least / self.slope)
    }
}

#[cfg(test)]
#[path = "field_tests.rs"]
mod tests;
