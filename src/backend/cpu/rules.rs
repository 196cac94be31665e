//! The CPU backend's cell pass and collision for the rules beside plain SRD
//! ([`crate::physics::rules`]): MPC-AT, MPC-AT+a, SRD+a. Streaming, binning and the cell lists
//! are the plain path's; then
//!
//! 1. per particle (fluid, then solutes): its position relative to its cell's centre (+a) and
//!    its Maxwell-Boltzmann draw (MPC-AT), kept for the collision;
//! 2. per cell: the plain sums and the rule's extended sums in ascending particle order (so a
//!    run is bitwise identical for any thread count), then the collision parameters;
//! 3. per particle: the collision, and the collisional stress when measured.

use rayon::prelude::*;

use super::{add_wall_momentum, CpuBackend, SoluteBatch};
use crate::fixed_sums::GlobalKind;
use crate::physics::rules::{RuleCellParams, RuleSums};
use crate::physics::sums::CellAccumulator;
use crate::physics::{CellSums, Physics, StepPlan, WallMomentum, Walls};
use crate::state::REDUCTION_CHUNK;

/// Per-cell parameters and per-particle inputs of the rule's collision.
#[derive(Default)]
pub(super) struct RuleState {
    params: Vec<RuleCellParams>,
    /// Position relative to the cell centre, per particle (+a rules; empty otherwise).
    rel: Vec<[f64; 3]>,
    /// Maxwell-Boltzmann draw, per particle (MPC-AT rules; empty otherwise).
    xi: Vec<[f64; 3]>,
}

/// Element `i` of a per-particle array the rule may not use (zeros then).
#[inline]
fn at(v: &[[f64; 3]], i: usize) -> [f64; 3] {
    v.get(i).copied().unwrap_or([0.0; 3])
}

impl CpuBackend {
    /// Steps 3-4 under a rule other than plain SRD: per-particle inputs, cell pass, collision.
    /// Returns ((Σ E_rel, Σ (Nc − 1)), collisional stress sum, momentum the real particles
    /// gave the walls' virtual particles).
    pub(super) fn rules_step(
        &mut self,
        plan: &StepPlan,
        solutes: Option<&mut SoluteBatch<'_>>,
    ) -> ((f64, f64), f64, WallMomentum) {
        let mut st = self.rules.take().unwrap_or_default();
        self.rules_particle_inputs(plan, solutes.as_deref(), &mut st);
        let (e_rel, dof, wall) = self.rules_cell_pass(plan, solutes.as_deref(), &mut st);
        let collisional = self.rules_collide(plan, solutes, &st);
        self.rules = Some(st);
        ((e_rel, dof), collisional, wall)
    }

    /// Step 1: positions relative to the cell centre (+a) and draws (MPC-AT) of every particle.
    fn rules_particle_inputs(
        &self,
        plan: &StepPlan,
        solutes: Option<&SoluteBatch<'_>>,
        st: &mut RuleState,
    ) {
        let phys = &self.phys;
        let rule = phys.rule;
        let nf = self.state.len();
        let np = self.cell_of.len();
        let (want_rel, want_xi) = (rule.conserves_angular_momentum(), rule.draws_velocities());
        st.rel.resize(if want_rel { np } else { 0 }, [0.0; 3]);
        st.xi.resize(if want_xi { np } else { 0 }, [0.0; 3]);
        let pos = &self.state.pos;
        let cells = &self.cell_of;
        let cell_lo = self.cell_lo as u32;
        let ch = REDUCTION_CHUNK;
        let fill = |k: usize, rel: &mut [[f64; 3]], xi: &mut [[f64; 3]]| {
            for j in 0..rel.len().max(xi.len()) {
                let i = k * ch + j;
                let p = [pos[0][i], pos[1][i], pos[2][i]];
                if want_rel {
                    let loc = phys.locate(plan, [p[0] as f64, p[1] as f64, p[2] as f64]);
                    rel[j] = [loc.x_in_cell, loc.y_in_cell, loc.z_in_cell];
                }
                if want_xi {
                    // keyed by the global cell (`cell_of` is slab-relative in a slab)
                    xi[j] = phys.fluid_draw(plan.step, cells[i] + cell_lo, p);
                }
            }
        };
        let (rel_f, xi_f) = (
            &mut st.rel[..if want_rel { nf } else { 0 }],
            &mut st.xi[..if want_xi { nf } else { 0 }],
        );
        match (want_rel, want_xi) {
            (true, true) => rel_f
                .par_chunks_mut(ch)
                .zip(xi_f.par_chunks_mut(ch))
                .enumerate()
                .for_each(|(k, (r, x))| fill(k, r, x)),
            (true, false) => rel_f
                .par_chunks_mut(ch)
                .enumerate()
                .for_each(|(k, r)| fill(k, r, &mut [])),
            (false, true) => xi_f
                .par_chunks_mut(ch)
                .enumerate()
                .for_each(|(k, x)| fill(k, &mut [], x)),
            (false, false) => {}
        }
        if let Some(s) = solutes {
            for j in 0..s.len() {
                let loc = phys.locate_solute(plan, s.pos[j]);
                if want_rel {
                    st.rel[nf + j] = [loc.x_in_cell, loc.y_in_cell, loc.z_in_cell];
                }
                if want_xi {
                    st.xi[nf + j] = phys.solute_draw(plan.step, loc.cell, s.pos[j], s.mass[j]);
                }
            }
        }
    }

    /// Step 2: per cell, the plain and the extended sums in ascending particle order, then the
    /// collision parameters (cells cut by a wall filled with virtual particles). Returns
    /// (Σ E_rel, Σ (Nc − 1)) of the real particles and the momentum they gave the walls.
    fn rules_cell_pass(
        &self,
        plan: &StepPlan,
        solutes: Option<&SoluteBatch<'_>>,
        st: &mut RuleState,
    ) -> (f64, f64, WallMomentum) {
        let phys = &self.phys;
        let ncells = self.cell_start.len() - 1;
        st.params.resize(ncells, RuleCellParams::default());
        let (rel, xi) = (&st.rel, &st.xi);
        let ch = 4096;
        let parts: Vec<(f64, f64, WallMomentum)> = st
            .params
            .par_chunks_mut(ch)
            .enumerate()
            .map(|(k, chunk)| {
                let (mut e_rel, mut dof) = (0.0, 0.0);
                let mut wall = WallMomentum::default();
                for (j, out) in chunk.iter_mut().enumerate() {
                    let c = k * ch + j;
                    let (sums, ext) = self.rules_cell_sums(c, solutes, rel, xi);
                    // draws are keyed by the global cell
                    let g = (c + self.cell_lo) as u32;
                    *out = match &phys.walls {
                        Some(w) => rule_fill_and_params(phys, w, plan, g, (&sums, &ext), &mut wall),
                        None => phys.rule_cell_params(plan.step, g, &sums, &ext),
                    };
                    if sums.count >= 2 {
                        e_rel += phys.global_term(GlobalKind::Energy, sums.relative_energy());
                        dof += (sums.count - 1) as f64;
                    }
                }
                (e_rel, dof, wall)
            })
            .collect();
        let mut total = (0.0, 0.0, WallMomentum::default());
        for (e, d, w) in &parts {
            total.0 += e;
            total.1 += d;
            add_wall_momentum(&mut total.2, w);
        }
        total
    }

    /// The plain and extended sums of cell `c` over its particles in ascending index order.
    fn rules_cell_sums(
        &self,
        c: usize,
        solutes: Option<&SoluteBatch<'_>>,
        rel: &[[f64; 3]],
        xi: &[[f64; 3]],
    ) -> (CellSums, RuleSums) {
        let phys = &self.phys;
        let nf = self.state.len();
        let mut acc = CellAccumulator::new(phys.sums.as_ref(), phys.rule);
        let list = &self.order[self.cell_start[c] as usize..self.cell_start[c + 1] as usize];
        for &idx in list {
            let idx = idx as usize;
            let (m, mut v, image) = if idx < nf {
                (
                    phys.mass,
                    self.state.velocity(idx),
                    self.image_of[idx] as i32,
                )
            } else {
                let s = solutes.expect("solute index without solutes");
                (
                    s.mass[idx - nf],
                    s.vel[idx - nf],
                    self.solute_image[idx - nf],
                )
            };
            v[0] += phys.image_velocity(image);
            acc.add(m, v, idx >= nf);
            acc.add_rule(m, v, at(rel, idx), at(xi, idx));
        }
        (acc.sums(phys.mass), acc.rule_sums())
    }

    /// Step 3: collide every particle. Returns the collisional stress sum when measured.
    fn rules_collide(
        &mut self,
        plan: &StepPlan,
        solutes: Option<&mut SoluteBatch<'_>>,
        st: &RuleState,
    ) -> f64 {
        let (rel, xi) = (&st.rel, &st.xi);
        let (c, _) = self.collision(plan);
        let phys = c.phys;
        super::collide::collide_particles(
            c,
            solutes,
            &st.params,
            |cp| cp.active,
            |cp, image, v, g| phys.rule_collide(cp, image, v, at(rel, g), at(xi, g)),
        )
    }
}

/// The rule's collision parameters of global cell `c` between walls: its sums `real` (plain,
/// extended) with the virtual particles of a cut cell added; what the real particles then
/// exchange with the wall in the collision is added to `wall` (as `cpu.rs`'s
/// `fill_and_params` for plain SRD).
fn rule_fill_and_params(
    phys: &Physics,
    walls: &Walls,
    plan: &StepPlan,
    c: u32,
    real: (&CellSums, &RuleSums),
    wall: &mut WallMomentum,
) -> RuleCellParams {
    let (mut sums, mut ext) = (*real.0, *real.1);
    let surface = walls.fill_rule_cell(phys, plan, c, &mut sums, &mut ext);
    let cp = phys.rule_cell_params(plan.step, c, &sums, &ext);
    if let Some(s) = surface {
        let gained = Walls::rule_collision_exchange(phys, &cp, real.0, real.1);
        for k in 0..3 {
            wall[s][k] -= phys.global_term(GlobalKind::Momentum, gained[k]);
        }
    }
    cp
}
