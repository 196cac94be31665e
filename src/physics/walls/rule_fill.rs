//! Virtual particles of cut cells under every collision rule (`kernels/wall_rules.cuh`
//! mirrors this file operation by operation).
//!
//! A no-slip wall fills each cell it cuts with the M − n particles the cell lacks (Lamura et
//! al. 2001), moving with the wall at the fluid's temperature. What a rule needs of them:
//!
//! * **SRD** (with or without MBS): their momentum (and Σ m v² for MBS), one Gaussian draw for
//!   all of them ([`Walls::fill_cell`]).
//! * **MPC-AT**: the same momentum, and the sum of their own Maxwell-Boltzmann draws Σ m ξ,
//!   which the rule removes from every particle's draw: one more Gaussian, mean 0 and variance
//!   (M − n) m kT per component. Their individual velocities and draws never enter the real
//!   particles' collision otherwise.
//! * **SRD+a, MPC-AT+a**: the cell's angular momentum about its centre of mass is restored with
//!   the virtual particles included, so each one needs a position, a velocity (and a draw under
//!   MPC-AT+a): they are drawn one by one. The position is uniform in the part of the cell that
//!   lies inside the wall (rejection: up to [`PLACEMENT_TRIES`] uniform points of the cell; if
//!   none falls in the wall, which needs a sliver of wall in the cell, the last point is moved
//!   onto the surface along the normal), the velocity u_wall + a Maxwell-Boltzmann draw at kT.
//!
//! Draws come from the cell's `WallFill` Philox stream in a fixed order, so every backend and
//! GPU count draws the same numbers. The momentum the real particles gain in the collision is
//! what the wall loses ([`Walls::rule_collision_exchange`]).

use super::{WallShape, Walls};
use crate::physics::rules::{cross, rotate, Rule, RuleCellParams, RuleSums, MASS_MOMENT};
use crate::physics::{CellSums, Physics, StepPlan};
use crate::rng::{CellStream, CellStreamPurpose};

/// Uniform points of a cut cell tried for one virtual particle's place in the wall.
pub const PLACEMENT_TRIES: u32 = 32;

impl Walls {
    /// Under `phys.rule`: add the virtual particles of global cell `cell` to its plain sums
    /// `sums` and its extended sums `ext` when the walls are no-slip, the wall cuts the cell and
    /// it holds 1 ≤ n < M particles. Returns the surface they move with, or None if the cell
    /// is unchanged. Under plain SRD this is [`Walls::fill_cell`].
    pub fn fill_rule_cell(
        &self,
        phys: &Physics,
        plan: &StepPlan,
        cell: u32,
        sums: &mut CellSums,
        ext: &mut RuleSums,
    ) -> Option<usize> {
        let rule = phys.rule;
        match rule {
            Rule::Srd => self.fill_cell(phys, plan, cell, sums),
            Rule::At => {
                let lo = self.cut_cell(phys, plan, cell, sums.count)?;
                let nv = self.fill - sums.count;
                let mut s = self.fill_stream(phys, plan, cell);
                let surface = self.fill_bulk(phys, lo, &mut s, sums);
                // Σ m ξ after the momentum's draws (MBS, which draws more, is refused with AT)
                let spread = (nv as f64 * phys.mass * phys.kt).sqrt();
                let d = rule.draw_momentum();
                for k in 0..3 {
                    ext.0[d + k] += spread * s.normal();
                }
                Some(surface)
            }
            Rule::SrdAngular | Rule::AtAngular => {
                let lo = self.cut_cell(phys, plan, cell, sums.count)?;
                let centre = [lo[0] + 0.5, lo[1] + 0.5, lo[2] + 0.5];
                let uw = self.shape.wall_velocity(centre);
                let sigma = (phys.kt / phys.mass).sqrt();
                let mut s = self.fill_stream(phys, plan, cell);
                for _ in 0..self.fill - sums.count {
                    let r = self.virtual_position(lo, &mut s);
                    let rel = [r[0] - centre[0], r[1] - centre[1], r[2] - centre[2]];
                    let v = [
                        uw[0] + sigma * s.normal(),
                        uw[1] + sigma * s.normal(),
                        uw[2] + sigma * s.normal(),
                    ];
                    let xi = if rule.draws_velocities() {
                        [sigma * s.normal(), sigma * s.normal(), sigma * s.normal()]
                    } else {
                        [0.0; 3]
                    };
                    sums.add(phys.mass, v);
                    ext.add(rule, phys.mass, v, rel, xi);
                }
                Some(self.shape.surface(centre))
            }
        }
    }

    /// The lower corner of global cell `cell` if it gets virtual particles: no-slip walls cut
    /// it and it holds 1 ≤ `n` < M particles.
    pub(super) fn cut_cell(
        &self,
        phys: &Physics,
        plan: &StepPlan,
        cell: u32,
        n: u32,
    ) -> Option<[f64; 3]> {
        if !self.no_slip || n == 0 || n >= self.fill {
            return None;
        }
        let lo = Walls::cell_corner(phys, plan, cell);
        self.shape.cuts_cell(lo).then_some(lo)
    }

    /// The virtual particles' Philox stream of global cell `cell`.
    pub(super) fn fill_stream(&self, phys: &Physics, plan: &StepPlan, cell: u32) -> CellStream {
        CellStream::new(phys.seed, plan.step, cell, CellStreamPurpose::WallFill)
    }

    /// A point of the cell `[lo, lo + 1)` inside the wall (see the module docs).
    fn virtual_position(&self, lo: [f64; 3], s: &mut CellStream) -> [f64; 3] {
        let mut r = lo;
        for _ in 0..PLACEMENT_TRIES {
            r = [
                lo[0] + s.uniform(),
                lo[1] + s.uniform(),
                lo[2] + s.uniform(),
            ];
            if self.shape.signed_distance(r) < 0.0 {
                return r;
            }
        }
        // a sliver of wall in the cell: the last point onto the surface
        let d = self.shape.signed_distance(r);
        let n = self.shape.normal(r);
        [r[0] - d * n[0], r[1] - d * n[1], r[2] - d * n[2]]
    }

    /// Momentum the real particles (plain sums `real`, extended sums `real_ext`, before the
    /// fill) of a filled cell gain in its collision `cp` under a rule beside plain SRD: each
    /// rule's collision is affine in the particle's velocity, draw and position, so their
    /// total after it follows from their sums. The wall loses as much.
    pub fn rule_collision_exchange(
        phys: &Physics,
        cp: &RuleCellParams,
        real: &CellSums,
        real_ext: &RuleSums,
    ) -> [f64; 3] {
        if !cp.active {
            return [0.0; 3];
        }
        let rule = phys.rule;
        let (m, p, u, e) = (real.mass, real.momentum, cp.velocity, &real_ext.0);
        let mut after = if rule.draws_velocities() {
            // Σ m (u + ξ − ⟨ξ⟩)
            let d = rule.draw_momentum();
            [
                m * (u[0] - cp.mean_draw[0]) + e[d],
                m * (u[1] - cp.mean_draw[1]) + e[d + 1],
                m * (u[2] - cp.mean_draw[2]) + e[d + 2],
            ]
        } else {
            // Σ m (u + f R (v − u)) = M u + f R (P − M u)
            let rel = [p[0] - m * u[0], p[1] - m * u[1], p[2] - m * u[2]];
            let rot = rotate(cp.axis, phys.cos_angle, phys.sin_angle, rel);
            let f = cp.scale;
            [
                m * u[0] + f * rot[0],
                m * u[1] + f * rot[1],
                m * u[2] + f * rot[2],
            ]
        };
        if rule.conserves_angular_momentum() {
            // Σ m Δω × (r − C) = Δω × (Σ m r − M C)
            let arm = [
                e[MASS_MOMENT] - m * cp.com[0],
                e[MASS_MOMENT + 1] - m * cp.com[1],
                e[MASS_MOMENT + 2] - m * cp.com[2],
            ];
            let k = cross(cp.omega, arm);
            after = [after[0] + k[0], after[1] + k[1], after[2] + k[2]];
        }
        [after[0] - p[0], after[1] - p[1], after[2] - p[2]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// Physics of a slit of 9 cells under `collision` (RON), its walls, and the global cells
    /// the bottom plate cuts at step 3.
    fn slit(collision: &str, thermostat: &str) -> (Physics, Walls, StepPlan, Vec<u32>) {
        let cfg = Config::from_ron_str(&format!(
            "(cells: (4, 10, 4), particles_per_cell: 10, time_step: 0.1, collision: {collision}, \
             thermostat: {thermostat}, steps: 1, walls: Slit(bottom_velocity: 0.3))"
        ))
        .expect("valid config");
        let phys = Physics::from_config(&cfg);
        let walls = phys.walls.clone().expect("walls");
        let plan = phys.plan(3, false, false);
        let cut: Vec<u32> = (0..phys.n_cells() as u32)
            .filter(|&c| {
                let lo = Walls::cell_corner(&phys, &plan, c);
                walls.shape.cuts_cell(lo) && lo[1] < 5.0
            })
            .collect();
        assert!(!cut.is_empty());
        (phys, walls, plan, cut)
    }

    const RULES: [(&str, &str); 4] = [
        ("Srd(angle_deg: 130.0, angular_momentum: true)", "Mbs"),
        ("Srd(angle_deg: 130.0, angular_momentum: true)", "None"),
        ("MpcAt()", "None"),
        ("MpcAt(angular_momentum: true)", "None"),
    ];

    /// The momentum the real particles of a filled cell gain, collided one by one, is what
    /// `rule_collision_exchange` computes from their sums, under every rule.
    #[test]
    fn the_exchange_with_the_wall_is_the_real_particles_momentum_change() {
        for (collision, thermostat) in RULES {
            let (phys, walls, plan, cut) = slit(collision, thermostat);
            let bottom = 0.5;
            for (k, &cell) in cut.iter().enumerate() {
                let lo = Walls::cell_corner(&phys, &plan, cell);
                let centre = [lo[0] + 0.5, lo[1] + 0.5, lo[2] + 0.5];
                let mut s = CellStream::for_particle(99, k as u64);
                let (mut sums, mut ext) = (CellSums::default(), RuleSums::default());
                let mut parts = Vec::new();
                for _ in 0..4 {
                    let mut r = [0.0; 3];
                    for (a, x) in r.iter_mut().enumerate() {
                        *x = lo[a] + s.uniform();
                    }
                    r[1] = bottom + (lo[1] + 1.0 - bottom) * s.uniform();
                    let rel = [r[0] - centre[0], r[1] - centre[1], r[2] - centre[2]];
                    let v = [s.normal() + 0.2, s.normal(), s.normal()];
                    let xi = phys.fluid_draw(plan.step, cell, r.map(|c| c as f32));
                    sums.add(phys.mass, v);
                    ext.add(phys.rule, phys.mass, v, rel, xi);
                    parts.push((v, rel, xi));
                }
                let (mut fs, mut fe) = (sums, ext);
                let surface = walls.fill_rule_cell(&phys, &plan, cell, &mut fs, &mut fe);
                assert_eq!(surface, Some(0), "{collision}");
                assert_eq!(fs.count, 10);
                let cp = phys.rule_cell_params(plan.step, cell, &fs, &fe);
                let mut direct = [0.0; 3];
                for (v, rel, xi) in parts {
                    let w = phys.rule_collide(&cp, 0, v, rel, xi);
                    for a in 0..3 {
                        direct[a] += phys.mass * (w[a] - v[a]);
                    }
                }
                let exchange = Walls::rule_collision_exchange(&phys, &cp, &sums, &ext);
                for a in 0..3 {
                    assert!(
                        (direct[a] - exchange[a]).abs() < 1e-12,
                        "{collision}: {direct:?} vs {exchange:?}"
                    );
                }
            }
        }
    }

    /// The +a rules place every virtual particle inside the wall part of its cell and draw its
    /// velocity at the wall's speed and the fluid's temperature; MPC-AT's Σ m ξ of the virtual
    /// particles has mean 0 and variance (M − n) m kT.
    #[test]
    fn virtual_particles_sit_in_the_wall_and_move_with_it() {
        for (collision, thermostat) in RULES {
            let (phys, walls, _, _) = slit(collision, thermostat);
            let rule = phys.rule;
            let (mut n, mut mom, mut mom2, mut draw2) = (0.0, 0.0, 0.0, 0.0);
            for step in 0..300 {
                let plan = phys.plan(step, false, false);
                for cell in 0..phys.n_cells() as u32 {
                    let mut sums = CellSums::default();
                    sums.add(phys.mass, [0.0; 3]);
                    let mut ext = RuleSums::default();
                    if walls.fill_rule_cell(&phys, &plan, cell, &mut sums, &mut ext) != Some(0) {
                        continue;
                    }
                    let lo = Walls::cell_corner(&phys, &plan, cell);
                    if rule.conserves_angular_momentum() {
                        // the virtual particles' centre of mass (all but the one real at the
                        // centre) lies in the wall, as each of them does (on its surface where
                        // the wall part of the cell is a sliver no uniform point hit)
                        let com: Vec<f64> = (0..3)
                            .map(|a| lo[a] + 0.5 + ext.0[MASS_MOMENT + a] / (9.0 * phys.mass))
                            .collect();
                        assert!(
                            walls.shape.signed_distance([com[0], com[1], com[2]]) <= 1e-12,
                            "{collision}: {com:?}"
                        );
                    }
                    // per virtual particle: x velocity 0.3 ± sqrt(kT/m)/3 (mean of 9)
                    let u = sums.momentum[0] / 9.0;
                    n += 1.0;
                    mom += u;
                    mom2 += (u - 0.3) * (u - 0.3);
                    if rule.draws_velocities() {
                        draw2 += ext.0[rule.draw_momentum()].powi(2) / 9.0;
                    }
                }
            }
            let mean = mom / n;
            assert!(n > 500.0, "{collision}: {n} cut cells");
            assert!(
                (mean - 0.3).abs() < 4.0 * (1.0 / 9.0 / n).sqrt(),
                "{collision}: {mean}"
            );
            assert!(
                ((mom2 / n) * 9.0 - 1.0).abs() < 0.15,
                "{collision}: {}",
                mom2 / n
            );
            if rule.draws_velocities() {
                assert!((draw2 / n - 1.0).abs() < 0.15, "{collision}: {}", draw2 / n);
            }
        }
    }
}
