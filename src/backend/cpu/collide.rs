//! The CPU backend's collision pass, shared by plain SRD (`cpu.rs`) and the rules beside it
//! (`cpu/rules.rs`): every particle at its cell's parameters, the collisional stress summed
//! when measured.

use rayon::prelude::*;

use super::SoluteBatch;
use crate::fixed_sums::GlobalKind;
use crate::physics::{Physics, StepPlan};
use crate::state::{FluidState, REDUCTION_CHUNK};

/// What the collision pass reads and writes of a CPU backend.
pub(crate) struct Collision<'a> {
    pub phys: &'a Physics,
    pub plan: &'a StepPlan,
    pub state: &'a mut FluidState,
    pub cell_of: &'a [u32],
    pub image_of: &'a [i8],
    pub solute_image: &'a [i32],
}

/// Collide every particle of `c` (fluid, then solutes; particle g of the collision at its
/// cell's parameters in `params`) by `collide(params, image, v, g)`; `active` says whether a
/// cell's collision exchanges momentum. Returns the collisional stress sum when measured.
pub(crate) fn collide_particles<P: Sync>(
    c: Collision<'_>,
    solutes: Option<&mut SoluteBatch<'_>>,
    params: &[P],
    active: impl Fn(&P) -> bool + Sync,
    collide: impl Fn(&P, i32, [f64; 3], usize) -> [f64; 3] + Sync,
) -> f64 {
    let (phys, plan) = (c.phys, c.plan);
    let nf = c.state.len();
    let ch = REDUCTION_CHUNK;
    let [px, py, pz] = &c.state.pos;
    let [vx, vy, vz] = &mut c.state.vel;
    let parts: Vec<f64> = (
        vx.par_chunks_mut(ch),
        vy.par_chunks_mut(ch),
        vz.par_chunks_mut(ch),
        c.cell_of[..nf].par_chunks(ch),
        c.image_of[..nf].par_chunks(ch),
    )
        .into_par_iter()
        .enumerate()
        .map(|(k, (ux, uy, uz, cell, image))| {
            let mut coll = 0.0;
            for i in 0..ux.len() {
                let g = k * ch + i;
                let cp = &params[cell[i] as usize];
                let v = [ux[i], uy[i], uz[i]];
                let w = collide(cp, image[i] as i32, v, g);
                if plan.measure_stress && active(cp) {
                    let loc = phys.locate(plan, [px[g] as f64, py[g] as f64, pz[g] as f64]);
                    let d = phys.mass * (w[0] - v[0]) * loc.y_in_cell;
                    coll += phys.global_term(GlobalKind::Momentum, d);
                }
                (ux[i], uy[i], uz[i]) = (w[0], w[1], w[2]);
            }
            coll
        })
        .collect();
    let mut total: f64 = parts.iter().sum();
    if let Some(s) = solutes {
        // the solutes exchange momentum in the same collision: their share of the flux
        let mut coll = 0.0;
        for j in 0..s.len() {
            let cp = &params[c.cell_of[nf + j] as usize];
            let v = s.vel[j];
            s.vel[j] = collide(cp, c.solute_image[j], v, nf + j);
            if plan.measure_stress && active(cp) {
                let loc = phys.locate_solute(plan, s.pos[j]);
                let d = s.mass[j] * (s.vel[j][0] - v[0]) * loc.y_in_cell;
                coll += phys.global_term(GlobalKind::Momentum, d);
            }
        }
        if plan.measure_stress {
            total += coll;
        }
    }
    total
}
