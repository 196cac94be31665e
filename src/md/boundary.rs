//! The periodic box: the one place that knows how a separation between two particles is taken
//! (minimum image) and how a particle that left the box comes back (wrapping, image counts).
//! Pair and bond forces, neighbour lists and the integrators ask a [`PeriodicBox`] instead of
//! doing this arithmetic themselves.
//!
//! Lees-Edwards shear uses the fluid's convention (`crate::physics`): flow along x, gradient
//! along y; the image of the box above is displaced by the offset δ(t) = γ̇ Ly t along x and
//! moves with γ̇ Ly. A particle leaving through the top re-enters at the bottom with
//! x −= δ, vx −= γ̇ Ly (the reverse through the bottom), and a separation across the y
//! boundary is taken to the sheared image (x ∓ δ). Images are counted so that the unwrapped
//! position x + ix Lx + iy D(t), with D(t) = γ̇ Ly t not reduced modulo Lx, is continuous.

/// Minimum-image difference along one axis (|d| ≤ L/2 for inputs with |d| < 3L/2).
/// Symmetric: mi(−d) = −mi(d) exactly, so pair forces are exactly antisymmetric.
#[inline(always)]
pub fn min_image(mut d: f64, l: f64, half: f64) -> f64 {
    if d > half {
        d -= l;
    } else if d < -half {
        d += l;
    }
    d
}

/// The Lees-Edwards state of a box at one time.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LeesEdwards {
    /// δ = D mod Lx in [0, Lx): the x shift of a particle crossing the top (the fluid's
    /// `Physics::le_offset_at`, bit for bit at the same time).
    pub offset: f64,
    /// Whole periods in D = offset + periods · Lx (the image count correction on a crossing).
    pub periods: i64,
    /// γ̇ Ly: the velocity jump across the y boundary.
    pub velocity: f64,
}

impl LeesEdwards {
    /// The state at total offset `d` = γ̇ Ly t for a box of x length `lx`.
    pub fn at(total_offset: f64, velocity: f64, lx: f64) -> LeesEdwards {
        let offset = total_offset.rem_euclid(lx);
        LeesEdwards {
            offset,
            periods: ((total_offset - offset) / lx).round() as i64,
            velocity,
        }
    }

    /// The total offset D this state stands for.
    pub fn total(&self, lx: f64) -> f64 {
        self.offset + self.periods as f64 * lx
    }
}

/// An orthorhombic periodic box [0, L) in each direction, sheared (Lees-Edwards) or not.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeriodicBox {
    len: [f64; 3],
    half: [f64; 3],
    le: LeesEdwards,
    /// δ reduced to (−Lx/2, Lx/2]: the same image lattice, and separations stay within the
    /// reach of one `min_image` correction.
    mi_offset: f64,
}

impl PeriodicBox {
    pub fn new(len: [f64; 3]) -> PeriodicBox {
        PeriodicBox::sheared(len, LeesEdwards::default())
    }

    /// A box whose y images are displaced as `le` says.
    pub fn sheared(len: [f64; 3], le: LeesEdwards) -> PeriodicBox {
        let mi_offset = if le.offset > 0.5 * len[0] {
            le.offset - len[0]
        } else {
            le.offset
        };
        PeriodicBox {
            len,
            half: [len[0] / 2.0, len[1] / 2.0, len[2] / 2.0],
            le,
            mi_offset,
        }
    }

    /// The edge lengths.
    #[inline(always)]
    pub fn lengths(&self) -> [f64; 3] {
        self.len
    }

    /// The Lees-Edwards state (all zero without shear).
    #[inline(always)]
    pub fn lees_edwards(&self) -> LeesEdwards {
        self.le
    }

    /// The offset used for separations, in (−Lx/2, Lx/2].
    #[inline(always)]
    pub fn image_offset(&self) -> f64 {
        self.mi_offset
    }

    /// The minimum-image separation a − b of two wrapped positions and the y image of b it
    /// was taken to (+1: b's image above, −1: below, 0: none), whose velocity differs from b's
    /// by image · γ̇ Ly along x.
    #[inline(always)]
    pub fn delta_image(&self, a: [f64; 3], b: [f64; 3]) -> ([f64; 3], f64) {
        let mut dx = a[0] - b[0];
        let mut dy = a[1] - b[1];
        let mut image = 0.0;
        if dy > self.half[1] {
            dy -= self.len[1];
            dx -= self.mi_offset;
            image = 1.0;
        } else if dy < -self.half[1] {
            dy += self.len[1];
            dx += self.mi_offset;
            image = -1.0;
        }
        let d = [
            min_image(dx, self.len[0], self.half[0]),
            dy,
            min_image(a[2] - b[2], self.len[2], self.half[2]),
        ];
        (d, image)
    }

    /// The minimum-image separation a − b of two wrapped positions (sheared image across y).
    #[inline(always)]
    pub fn delta(&self, a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
        self.delta_image(a, b).0
    }

    /// The displacement² of a particle since a list build relative to the imposed shear flow:
    /// with unwrapped positions R (continuous across the sheared boundary) and the affine map
    /// A = 1 − s ŷ-to-x̂ of the strain s = γ̇ τ since the build, ρ = A R − R_b. For any pair,
    /// A (separation now) − separation at the build = ρ_j − ρ_i, and pairs across the y
    /// boundary need no offset term (the images move with the flow), so a list is exact while
    /// 2 max|ρ| + |s| r_cut ≤ skin. Only wrapped positions are needed: a y jump of more than
    /// Ly/2 is a crossing (the particle then moved in x by the build's offset), and x is taken
    /// modulo Lx. `built_offset`: δ at the build; mirrored by `md_flow_displacement2`.
    #[inline(always)]
    pub fn flow_displacement2(
        &self,
        now: [f64; 3],
        built: [f64; 3],
        built_offset: f64,
        strain: f64,
    ) -> f64 {
        let mut dx = now[0] - built[0];
        let mut dy = now[1] - built[1];
        if dy > self.half[1] {
            dy -= self.len[1];
            dx -= built_offset;
        } else if dy < -self.half[1] {
            dy += self.len[1];
            dx += built_offset;
        }
        dx -= strain * (now[1] - self.half[1]);
        dx -= self.len[0] * (dx / self.len[0] + 0.5).floor();
        let dz = min_image(now[2] - built[2], self.len[2], self.half[2]);
        dx * dx + dy * dy + dz * dz
    }

    /// |a − b|² under the minimum image.
    #[inline(always)]
    pub fn distance2(&self, a: [f64; 3], b: [f64; 3]) -> f64 {
        let d = self.delta(a, b);
        d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
    }

    /// Bring a position that has moved out of [0, L) back in, counting the periods crossed
    /// in `image` (the unwrapped position stays pos + image · L without shear). A y crossing
    /// moves x by ∓δ and the velocity by ∓γ̇ Ly, y first, then x and z.
    #[inline(always)]
    pub fn wrap(&self, p: &mut [f64; 3], v: &mut [f64; 3], image: &mut [i32; 3]) {
        let l = self.len;
        if p[1] >= l[1] || p[1] < 0.0 {
            let sh = wrap_axis(&mut p[1], l[1]);
            image[1] += sh as i32;
            if sh != 0.0 {
                p[0] -= sh * self.le.offset;
                v[0] -= sh * self.le.velocity;
                image[0] -= (sh as i64 * self.le.periods) as i32;
            }
        }
        for k in [0, 2] {
            if p[k] >= l[k] || p[k] < 0.0 {
                image[k] += wrap_axis(&mut p[k], l[k]) as i32;
            }
        }
    }
}

/// Wrap one coordinate into [0, l); returns the periods removed.
#[inline(always)]
fn wrap_axis(x: &mut f64, l: f64) -> f64 {
    let sh = (*x / l).floor();
    *x -= sh * l;
    if *x >= l {
        *x -= l;
    }
    if *x < 0.0 {
        *x = 0.0;
    }
    sh
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_image_is_antisymmetric() {
        for d in [-4.9, -2.5, -0.1, 0.0, 0.3, 2.5, 4.99] {
            assert_eq!(min_image(-d, 5.0, 2.5), -min_image(d, 5.0, 2.5));
        }
    }

    #[test]
    fn wrap_counts_images() {
        let b = PeriodicBox::new([2.0, 3.0, 4.0]);
        let mut p = [-0.5, 3.5, 9.0];
        let mut v = [0.0; 3];
        let mut img = [0; 3];
        b.wrap(&mut p, &mut v, &mut img);
        assert_eq!(p, [1.5, 0.5, 1.0]);
        assert_eq!(img, [-1, 1, 2]);
    }

    #[test]
    fn sheared_separation_is_antisymmetric_and_continuous_unwrapped() {
        let le = LeesEdwards::at(13.7, 0.8, 5.0);
        let b = PeriodicBox::sheared([5.0, 4.0, 3.0], le);
        let (p, q) = ([0.3, 3.9, 1.0], [4.6, 0.1, 2.9]);
        let (d, img) = b.delta_image(p, q);
        let (e, jmg) = b.delta_image(q, p);
        assert_eq!(d, [-e[0], -e[1], -e[2]]);
        assert_eq!((img, jmg), (1.0, -1.0));
        // a crossing keeps x + ix Lx + iy D
        let mut r = [1.0, 4.2, 1.0];
        let mut v = [0.0; 3];
        let mut i = [0; 3];
        let before = r[0];
        b.wrap(&mut r, &mut v, &mut i);
        let after = r[0] + i[0] as f64 * 5.0 + i[1] as f64 * le.total(5.0);
        assert!((after - before).abs() < 1e-12, "{after} vs {before}");
        assert_eq!(v[0], -0.8);
    }
}
