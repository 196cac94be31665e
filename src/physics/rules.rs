//! Collision rules beside plain SRD: MPC-AT and the angular-momentum-conserving variants.
//!
//! * **SRD+a**: `v_i' = u + f R(v_i − u) + Δω × (r_i − C)`: the SRD rotation (and MBS factor f)
//!   followed by the rigid rotation that gives the cell back its angular momentum about its
//!   centre of mass C. The correction changes the kinetic energy (by zero on average in
//!   equilibrium), so with MBS the cell's relative energy after the collision is the MBS draw
//!   only up to that change; the thermostat still holds kT (measured under shear: 1.0002).
//! * **MPC-AT** (Andersen thermostat rule, Allahyarov & Gompper 2002; Noguchi, Kikuchi &
//!   Gompper 2007): `v_i' = u + ξ_i − Σ_j m_j ξ_j / Σ_j m_j`, with `ξ_i` a Maxwell-Boltzmann draw
//!   at kT for the particle's mass. Momentum is conserved, energy is not: the rule is its own
//!   thermostat.
//! * **MPC-AT+a** (Noguchi, Kikuchi & Gompper 2007): MPC-AT plus `Δω × (r_i − C)`.
//!
//! In both +a rules `Δω = I_C⁻¹ [L_C(v) − L_C(v_new)]`, with I_C the cell's moment-of-inertia
//! tensor and L_C angular momenta about C (Gompper, Ihle, Kroll & Winkler, Adv. Polym. Sci. 221
//! (2009), Sect. 2.5): the correction adds no momentum (Σ m (r − C) = 0) and makes the cell's
//! angular momentum after the collision equal to the one before.
//!
//! Everything a cell needs comes from sums over its particles, formed while binning exactly like
//! the plain SRD sums ([`crate::physics::CellSums`]): positions relative to the centre of the
//! (shifted) cell, velocities with their Lees-Edwards image offset, solutes with their masses.
//! [`RuleSums`] holds them in the layout the kernels use (`kernels/rules.cuh` mirrors this file
//! operation by operation). MPC-AT draws three normals per particle from a Philox stream keyed
//! by (seed, step, global cell) and the particle's position bits
//! ([`crate::rng::CellStream::for_particle_in_cell`]), so every backend and every GPU count
//! draws the same numbers, and the binning pass and the collision draw them alike.

pub mod theory;

use super::{CellSums, Physics};
use crate::config::CollisionRule;
use crate::fixed_sums::SumKind;
use crate::rng::{self, CellStream};

/// The collision rule of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Rule {
    /// Plain SRD (`Physics::cell_params`, `Physics::collide`).
    #[default]
    Srd,
    /// SRD with angular-momentum conservation (SRD+a).
    SrdAngular,
    /// MPC-AT.
    At,
    /// MPC-AT with angular-momentum conservation (MPC-AT+a).
    AtAngular,
}

/// Doubles of [`RuleSums`] the largest rule uses (SRD+a).
pub const RULE_SUMS: usize = 18;

// Layout of RuleSums (and of the kernels' extended cell sums), by rule:
//   SRD+a:    [0..3) Σ m r, [3..9) Σ m r⊗r (xx, yy, zz, xy, xz, yz), [9..18) Σ m r⊗v (row r_a)
//   MPC-AT+a: [0..3) Σ m r, [3..9) Σ m r⊗r, [9..12) Σ m r × (v − ξ), [12..15) Σ m ξ
//   MPC-AT:   [0..3) Σ m ξ
// r: position relative to the cell centre; v: velocity with the LE image offset; ξ: the draw.
pub(crate) const MASS_MOMENT: usize = 0;
const SECOND_MOMENT: usize = 3;
const POSITION_VELOCITY: usize = 9;
const ANGULAR: usize = 9;

impl Rule {
    pub fn from_config(c: &CollisionRule) -> Rule {
        match *c {
            CollisionRule::Srd {
                angular_momentum: false,
                ..
            } => Rule::Srd,
            CollisionRule::Srd {
                angular_momentum: true,
                ..
            } => Rule::SrdAngular,
            CollisionRule::MpcAt {
                angular_momentum: false,
            } => Rule::At,
            CollisionRule::MpcAt {
                angular_momentum: true,
            } => Rule::AtAngular,
        }
    }

    /// Whether the rule is plain SRD (the original path, no extended sums).
    pub fn is_plain_srd(self) -> bool {
        self == Rule::Srd
    }

    /// Whether every particle draws a Maxwell-Boltzmann velocity (MPC-AT).
    pub fn draws_velocities(self) -> bool {
        matches!(self, Rule::At | Rule::AtAngular)
    }

    /// Whether the rule conserves each cell's angular momentum (the "+a" rules).
    pub fn conserves_angular_momentum(self) -> bool {
        matches!(self, Rule::SrdAngular | Rule::AtAngular)
    }

    /// Extended sums per cell (the kernels' stride; 0 for plain SRD).
    pub fn sums_len(self) -> usize {
        match self {
            Rule::Srd => 0,
            Rule::SrdAngular => 18,
            Rule::At => 3,
            Rule::AtAngular => 15,
        }
    }

    /// What value `k` of the extended sums adds (its fixed-point scale; the kernels'
    /// `mpc_rule_sum_kind`, generated from this).
    pub fn sum_kind(self, k: usize) -> SumKind {
        match self {
            Rule::Srd | Rule::At => SumKind::Momentum,
            Rule::SrdAngular | Rule::AtAngular => match k {
                0..SECOND_MOMENT => SumKind::Moment,
                SECOND_MOMENT..POSITION_VELOCITY => SumKind::Second,
                _ if k >= self.draw_momentum() && self == Rule::AtAngular => SumKind::Momentum,
                _ => SumKind::Angular,
            },
        }
    }

    /// The rule's code in the kernels (`MPC_RULE_*` in `kernels/rules.cuh`).
    pub fn code(self) -> u32 {
        match self {
            Rule::Srd => 0,
            Rule::SrdAngular => 1,
            Rule::At => 2,
            Rule::AtAngular => 3,
        }
    }

    /// Where Σ m ξ starts in the extended sums (MPC-AT rules).
    pub(crate) fn draw_momentum(self) -> usize {
        if self == Rule::AtAngular {
            12
        } else {
            0
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Rule::Srd => "SRD",
            Rule::SrdAngular => "SRD+a",
            Rule::At => "MPC-AT",
            Rule::AtAngular => "MPC-AT+a",
        }
    }
}

/// The extended sums of one cell (layout above); zero for the doubles a rule does not use.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RuleSums(pub [f64; RULE_SUMS]);

impl RuleSums {
    /// Add one particle of mass `m`, velocity `v` (LE image offset included), position `r`
    /// relative to the cell centre and draw `xi` (MPC-AT; ignored otherwise).
    #[inline]
    pub fn add(&mut self, rule: Rule, m: f64, v: [f64; 3], r: [f64; 3], xi: [f64; 3]) {
        let t = rule_terms(rule, m, v, r, xi);
        for (s, x) in self.0.iter_mut().zip(t).take(rule.sums_len()) {
            *s += x;
        }
    }
}

/// One particle's terms of the extended sums, in their layout (`mpc_rule_terms` in
/// `kernels/rules.cuh` computes the same numbers in the same order).
#[inline]
pub fn rule_terms(rule: Rule, m: f64, v: [f64; 3], r: [f64; 3], xi: [f64; 3]) -> [f64; RULE_SUMS] {
    let mut t = [0.0; RULE_SUMS];
    let mr = [m * r[0], m * r[1], m * r[2]];
    if rule.conserves_angular_momentum() {
        t[MASS_MOMENT..MASS_MOMENT + 3].copy_from_slice(&mr);
        t[SECOND_MOMENT] = mr[0] * r[0];
        t[SECOND_MOMENT + 1] = mr[1] * r[1];
        t[SECOND_MOMENT + 2] = mr[2] * r[2];
        t[SECOND_MOMENT + 3] = mr[0] * r[1];
        t[SECOND_MOMENT + 4] = mr[0] * r[2];
        t[SECOND_MOMENT + 5] = mr[1] * r[2];
    }
    match rule {
        Rule::Srd => {}
        Rule::SrdAngular => {
            for a in 0..3 {
                for b in 0..3 {
                    t[POSITION_VELOCITY + 3 * a + b] = mr[a] * v[b];
                }
            }
        }
        Rule::At | Rule::AtAngular => {
            let d = rule.draw_momentum();
            t[d] = m * xi[0];
            t[d + 1] = m * xi[1];
            t[d + 2] = m * xi[2];
            if rule == Rule::AtAngular {
                let w = [v[0] - xi[0], v[1] - xi[1], v[2] - xi[2]];
                t[ANGULAR..ANGULAR + 3].copy_from_slice(&cross(mr, w));
            }
        }
    }
    t
}

/// What every particle of a cell needs to collide under a rule other than plain SRD.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RuleCellParams {
    /// Centre-of-mass velocity u.
    pub velocity: [f64; 3],
    /// SRD+a: the rotation axis.
    pub axis: [f64; 3],
    /// MPC-AT: the mass-weighted mean draw, removed from every draw.
    pub mean_draw: [f64; 3],
    /// SRD+a: the MBS factor (1 without thermostat).
    pub scale: f64,
    /// +a rules: the angular-velocity correction Δω.
    pub omega: [f64; 3],
    /// +a rules: the centre of mass relative to the cell centre.
    pub com: [f64; 3],
    /// False for cells with fewer than two particles.
    pub active: bool,
}

#[inline]
pub fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// `r` rotated by the angle (cos c, sin s) about the unit axis `n`, as in `Physics::collide`.
#[inline]
pub fn rotate(n: [f64; 3], c: f64, s: f64, r: [f64; 3]) -> [f64; 3] {
    let d = n[0] * r[0] + n[1] * r[1] + n[2] * r[2];
    let par = [d * n[0], d * n[1], d * n[2]];
    let cr = cross(n, r);
    [
        par[0] + c * (r[0] - par[0]) + s * cr[0],
        par[1] + c * (r[1] - par[1]) + s * cr[1],
        par[2] + c * (r[2] - par[2]) + s * cr[2],
    ]
}

/// Below this value of det(I) / (tr(I)/3)³ the inertia tensor counts as singular: the cell's
/// particles lie on a line through the centre of mass (always so for two particles).
pub const SINGULAR_INERTIA: f64 = 1e-6;

/// Δω = I⁻¹ ΔL for the symmetric inertia tensor `i` = [xx, yy, zz, xy, xz, yz] (cofactors over
/// the determinant). For particles on a line (two particles, or coincident ones) I has the
/// double eigenvalue tr(I)/2 on the plane normal to the line and 0 along it, and ΔL lies in
/// that plane: Δω = 2 ΔL / tr(I), the pseudo-inverse, conserves the angular momentum there too.
#[inline]
pub fn solve_inertia(i: [f64; 6], dl: [f64; 3]) -> [f64; 3] {
    let [a, b, c, d, e, f] = i;
    let c00 = b * c - f * f;
    let c11 = a * c - e * e;
    let c22 = a * b - d * d;
    let c01 = e * f - d * c;
    let c02 = d * f - e * b;
    let c12 = d * e - a * f;
    let det = a * c00 + d * c01 + e * c02;
    let tr = a + b + c;
    let third = tr / 3.0;
    if det > SINGULAR_INERTIA * (third * third * third) {
        [
            (c00 * dl[0] + c01 * dl[1] + c02 * dl[2]) / det,
            (c01 * dl[0] + c11 * dl[1] + c12 * dl[2]) / det,
            (c02 * dl[0] + c12 * dl[1] + c22 * dl[2]) / det,
        ]
    } else if tr > 0.0 {
        let k = 2.0 / tr;
        [k * dl[0], k * dl[1], k * dl[2]]
    } else {
        [0.0; 3]
    }
}

/// The centre of mass C (relative to the cell centre) and the inertia tensor about it,
/// [xx, yy, zz, xy, xz, yz], from Σ m, Σ m r and Σ m r⊗r.
#[inline]
fn inertia_about_com(mass: f64, ext: &[f64; RULE_SUMS]) -> ([f64; 3], [f64; 6]) {
    let inv_m = 1.0 / mass;
    let mr = [ext[MASS_MOMENT], ext[MASS_MOMENT + 1], ext[MASS_MOMENT + 2]];
    let com = [mr[0] * inv_m, mr[1] * inv_m, mr[2] * inv_m];
    // second moment about C: Σ m r_a r_b − C_a Σ m r_b
    let s = &ext[SECOND_MOMENT..SECOND_MOMENT + 6];
    let sxx = s[0] - com[0] * mr[0];
    let syy = s[1] - com[1] * mr[1];
    let szz = s[2] - com[2] * mr[2];
    let sxy = s[3] - com[0] * mr[1];
    let sxz = s[4] - com[0] * mr[2];
    let syz = s[5] - com[1] * mr[2];
    let tr = sxx + syy + szz;
    (com, [tr - sxx, tr - syy, tr - szz, -sxy, -sxz, -syz])
}

impl Physics {
    /// MPC-AT: the Maxwell-Boltzmann draw of a particle of mass `m` with key `key` in global
    /// cell `cell` at `step`: three normals times sqrt(kT/m).
    #[inline]
    pub fn rule_draw(&self, step: u64, cell: u32, key: u64, m: f64) -> [f64; 3] {
        let g = CellStream::for_particle_in_cell(self.seed, step, cell, key).normal3();
        let s = (self.kt / m).sqrt();
        [s * g[0], s * g[1], s * g[2]]
    }

    /// The draw of fluid particle at stored position `pos` (see [`rng::fluid_particle_key`]).
    #[inline]
    pub fn fluid_draw(&self, step: u64, cell: u32, pos: [f32; 3]) -> [f64; 3] {
        self.rule_draw(step, cell, rng::fluid_particle_key(pos), self.mass)
    }

    /// The draw of a solute at the position `pos` handed over by the caller, of mass `m`.
    #[inline]
    pub fn solute_draw(&self, step: u64, cell: u32, pos: [f64; 3], m: f64) -> [f64; 3] {
        self.rule_draw(step, cell, rng::solute_particle_key(pos), m)
    }

    /// The collision parameters of global cell `cell` under `self.rule` (not plain SRD) from
    /// its plain sums and its extended sums.
    pub fn rule_cell_params(
        &self,
        step: u64,
        cell: u32,
        sums: &CellSums,
        ext: &RuleSums,
    ) -> RuleCellParams {
        if sums.count < 2 {
            return RuleCellParams::default();
        }
        let e = &ext.0;
        let inv_m = 1.0 / sums.mass;
        let p = sums.momentum;
        let mut cp = RuleCellParams {
            velocity: [p[0] * inv_m, p[1] * inv_m, p[2] * inv_m],
            scale: 1.0,
            active: true,
            ..RuleCellParams::default()
        };
        let rule = self.rule;
        if rule.draws_velocities() {
            let d = rule.draw_momentum();
            cp.mean_draw = [e[d] * inv_m, e[d + 1] * inv_m, e[d + 2] * inv_m];
        } else {
            let base = self.cell_params(step, cell, sums);
            cp.axis = base.axis;
            cp.scale = base.scale;
        }
        if !rule.conserves_angular_momentum() {
            return cp;
        }
        let (com, inertia) = inertia_about_com(sums.mass, e);
        let dl = if rule == Rule::AtAngular {
            // L_C(v − ξ) = Σ m r × (v − ξ) − C × Σ m (v − ξ)
            let d = rule.draw_momentum();
            let q = [p[0] - e[d], p[1] - e[d + 1], p[2] - e[d + 2]];
            let cq = cross(com, q);
            [
                e[ANGULAR] - cq[0],
                e[ANGULAR + 1] - cq[1],
                e[ANGULAR + 2] - cq[2],
            ]
        } else {
            self.srd_angular_change(&cp, com, p, e)
        };
        cp.com = com;
        cp.omega = solve_inertia(inertia, dl);
        cp
    }

    /// SRD+a: L_C(v) − f L_C(R w), with T = Σ m (r − C)⊗v: L_C(v)_a = ε_abc T_bc and, since
    /// Σ m (r − C) = 0, L_C(R w)_a = ε_abc (R T_b)_c with T_b the rows of T.
    fn srd_angular_change(
        &self,
        cp: &RuleCellParams,
        com: [f64; 3],
        p: [f64; 3],
        e: &[f64; RULE_SUMS],
    ) -> [f64; 3] {
        let row = |b: usize| {
            let s = &e[POSITION_VELOCITY + 3 * b..POSITION_VELOCITY + 3 * b + 3];
            [
                s[0] - com[b] * p[0],
                s[1] - com[b] * p[1],
                s[2] - com[b] * p[2],
            ]
        };
        let t = [row(0), row(1), row(2)];
        let (c, s) = (self.cos_angle, self.sin_angle);
        let rt = [
            rotate(cp.axis, c, s, t[0]),
            rotate(cp.axis, c, s, t[1]),
            rotate(cp.axis, c, s, t[2]),
        ];
        let lv = [t[1][2] - t[2][1], t[2][0] - t[0][2], t[0][1] - t[1][0]];
        let lr = [
            rt[1][2] - rt[2][1],
            rt[2][0] - rt[0][2],
            rt[0][1] - rt[1][0],
        ];
        let f = cp.scale;
        [lv[0] - f * lr[0], lv[1] - f * lr[1], lv[2] - f * lr[2]]
    }

    /// Collide one particle (LE image `image`, velocity `v`, position `r` relative to the cell
    /// centre, draw `xi` for MPC-AT) under `self.rule` (not plain SRD).
    #[inline]
    pub fn rule_collide(
        &self,
        cp: &RuleCellParams,
        image: i32,
        v: [f64; 3],
        r: [f64; 3],
        xi: [f64; 3],
    ) -> [f64; 3] {
        if !cp.active {
            return v;
        }
        let off = self.image_velocity(image);
        let u = cp.velocity;
        let mut w = if self.rule.draws_velocities() {
            let m = cp.mean_draw;
            [
                u[0] + (xi[0] - m[0]),
                u[1] + (xi[1] - m[1]),
                u[2] + (xi[2] - m[2]),
            ]
        } else {
            let rel = [v[0] + off - u[0], v[1] - u[1], v[2] - u[2]];
            let rot = rotate(cp.axis, self.cos_angle, self.sin_angle, rel);
            let f = cp.scale;
            [u[0] + f * rot[0], u[1] + f * rot[1], u[2] + f * rot[2]]
        };
        if self.rule.conserves_angular_momentum() {
            let rc = [r[0] - cp.com[0], r[1] - cp.com[1], r[2] - cp.com[2]];
            let k = cross(cp.omega, rc);
            w = [w[0] + k[0], w[1] + k[1], w[2] + k[2]];
        }
        [w[0] - off, w[1], w[2]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inertia_solve_inverts_and_handles_a_line() {
        // a diagonal-dominant tensor: I ω = ΔL
        let i = [2.0, 3.0, 4.0, 0.1, -0.2, 0.3];
        let dl = [0.7, -1.1, 0.4];
        let w = solve_inertia(i, dl);
        let back = [
            i[0] * w[0] + i[3] * w[1] + i[4] * w[2],
            i[3] * w[0] + i[1] * w[1] + i[5] * w[2],
            i[4] * w[0] + i[5] * w[1] + i[2] * w[2],
        ];
        for k in 0..3 {
            assert!((back[k] - dl[k]).abs() < 1e-14, "{back:?}");
        }
        // two unit masses at ±(1, 1, 0)/2: I = (Id − n nᵀ) |d|²/2, ΔL ⟂ n
        let n = [
            std::f64::consts::FRAC_1_SQRT_2,
            std::f64::consts::FRAC_1_SQRT_2,
            0.0,
        ];
        let lam = 1.0; // μ d² = (1/2) · 2
        let i = [
            lam * (1.0 - n[0] * n[0]),
            lam * (1.0 - n[1] * n[1]),
            lam,
            -lam * n[0] * n[1],
            0.0,
            0.0,
        ];
        let dl = [0.3, -0.3, 0.8];
        let w = solve_inertia(i, dl);
        for k in 0..3 {
            assert!((w[k] - dl[k] / lam).abs() < 1e-14, "{w:?}");
        }
        assert_eq!(solve_inertia([0.0; 6], dl), [0.0; 3]);
    }

    #[test]
    fn rules_come_from_the_config_and_name_their_sums() {
        let rules = [
            (
                CollisionRule::Srd {
                    angle_deg: 130.0,
                    angular_momentum: false,
                },
                Rule::Srd,
            ),
            (
                CollisionRule::Srd {
                    angle_deg: 130.0,
                    angular_momentum: true,
                },
                Rule::SrdAngular,
            ),
            (
                CollisionRule::MpcAt {
                    angular_momentum: false,
                },
                Rule::At,
            ),
            (
                CollisionRule::MpcAt {
                    angular_momentum: true,
                },
                Rule::AtAngular,
            ),
        ];
        for (c, r) in rules {
            assert_eq!(Rule::from_config(&c), r);
            assert!(r.sums_len() <= RULE_SUMS);
        }
        assert!(Rule::Srd.is_plain_srd() && Rule::Srd.sums_len() == 0);
    }
}
