//! Solutes in a collision of the slabbed fluid. Each is collided by the slab that owns its cell
//! on the step's grid. Two ways to hand them over ([`SoluteMode`]):
//! - `Replicated`: every process passes the same solutes (the bundled MD engine, run on every
//!   rank); each keeps those in its slabs, and the new velocities are summed over processes
//!   (every other process adds zero), so every process returns all of them;
//! - `PerRank`: each process passes the solutes it holds, wherever they are (an MD code with its
//!   own decomposition, e.g. LAMMPS); each solute travels to the rank owning its cell and its new
//!   velocity back to the rank that passed it (two exchanges per step).

use super::SlabbedCpuBackend;
use crate::backend::SoluteBatch;
use crate::error::{MpcError, Result};
use crate::physics::StepPlan;

/// How the processes of a slabbed fluid hand over their solutes (see the module).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SoluteMode {
    #[default]
    Replicated,
    PerRank,
}

/// f64 words of a routed solute: position (3), velocity (3), mass, index at its origin (bits),
/// origin rank.
const SOLUTE_WORDS: usize = 9;
/// f64 words of a routed reply: index at the origin (bits), velocity (3).
const REPLY_WORDS: usize = 4;

/// The solutes one slab collides: where each came from (rank, index there) and copies of its
/// data.
#[derive(Default)]
pub(super) struct HeldSolutes {
    origin: Vec<(usize, usize)>,
    pos: Vec<[f64; 3]>,
    vel: Vec<[f64; 3]>,
    mass: Vec<f64>,
}

impl HeldSolutes {
    pub(super) fn batch(&mut self) -> Option<SoluteBatch<'_>> {
        (!self.origin.is_empty()).then(|| SoluteBatch {
            pos: &self.pos,
            vel: &mut self.vel,
            mass: &self.mass,
        })
    }

    fn push(&mut self, origin: (usize, usize), pos: [f64; 3], vel: [f64; 3], mass: f64) {
        self.origin.push(origin);
        self.pos.push(pos);
        self.vel.push(vel);
        self.mass.push(mass);
    }
}

impl SlabbedCpuBackend {
    /// The local slab (index into `self.slabs`) owning the cell of a solute at `pos`, if any.
    fn local_slab_of_solute(&self, plan: &StepPlan, pos: [f64; 3]) -> (usize, Option<usize>) {
        let loc = self.phys.locate_solute(plan, pos);
        let k = self.slab_of_layer(self.layer_of_cell(loc.cell));
        (
            k,
            k.checked_sub(self.first).filter(|&j| j < self.slabs.len()),
        )
    }

    /// Each of this process's slabs' share of this step's solutes.
    pub(super) fn solutes_by_slab(
        &self,
        plan: &StepPlan,
        s: Option<&SoluteBatch<'_>>,
    ) -> Result<Vec<HeldSolutes>> {
        let me = self.transport.rank();
        let mut held: Vec<HeldSolutes> =
            (0..self.slabs.len()).map(|_| Default::default()).collect();
        let mut out: Vec<Vec<f64>> = vec![Vec::new(); self.transport.ranks()];
        if let Some(s) = s {
            for j in 0..s.len() {
                let (k, local) = self.local_slab_of_solute(plan, s.pos[j]);
                match (local, self.solute_mode) {
                    (Some(l), _) => held[l].push((me, j), s.pos[j], s.vel[j], s.mass[j]),
                    (None, SoluteMode::Replicated) => {} // another process collides it
                    (None, SoluteMode::PerRank) => {
                        let (p, v) = (s.pos[j], s.vel[j]);
                        out[self.slab_rank[k]].extend([
                            p[0],
                            p[1],
                            p[2],
                            v[0],
                            v[1],
                            v[2],
                            s.mass[j],
                            f64::from_bits(j as u64),
                            me as f64,
                        ]);
                    }
                }
            }
        }
        if self.solute_mode == SoluteMode::PerRank && self.transport.ranks() > 1 {
            for w in self.transport.exchange(&out)?.chunks_exact(SOLUTE_WORDS) {
                let pos = [w[0], w[1], w[2]];
                let (k, local) = self.local_slab_of_solute(plan, pos);
                let Some(l) = local else {
                    return Err(MpcError::Device(format!(
                        "a solute arrived at rank {me} for slab {k} of rank {} (a routing \
                         error: please report it)",
                        self.slab_rank[k]
                    )));
                };
                let origin = (w[8] as usize, w[7].to_bits() as usize);
                held[l].push(origin, pos, [w[3], w[4], w[5]], w[6]);
            }
        }
        Ok(held)
    }

    /// The collided velocities into the caller's batch (see [`SoluteMode`]).
    pub(super) fn return_solute_velocities(
        &self,
        held: &[HeldSolutes],
        s: Option<&mut SoluteBatch<'_>>,
    ) -> Result<()> {
        let me = self.transport.rank();
        let ranks = self.transport.ranks();
        match self.solute_mode {
            _ if ranks == 1 => {
                if let Some(s) = s {
                    for h in held {
                        for (&(_, j), v) in h.origin.iter().zip(&h.vel) {
                            s.vel[j] = *v;
                        }
                    }
                }
                Ok(())
            }
            SoluteMode::Replicated => {
                let Some(s) = s else { return Ok(()) };
                let mut v = vec![0.0; 3 * s.len()];
                for h in held {
                    for (&(_, j), w) in h.origin.iter().zip(&h.vel) {
                        v[3 * j..3 * j + 3].copy_from_slice(w);
                    }
                }
                self.transport.sum(&mut v)?;
                for (j, w) in v.chunks_exact(3).enumerate() {
                    s.vel[j] = [w[0], w[1], w[2]];
                }
                Ok(())
            }
            SoluteMode::PerRank => {
                let mut out: Vec<Vec<f64>> = vec![Vec::new(); ranks];
                let mut mine = Vec::new();
                for h in held {
                    for (&(rank, j), w) in h.origin.iter().zip(&h.vel) {
                        if rank == me {
                            mine.push((j, *w));
                        } else {
                            out[rank].extend([f64::from_bits(j as u64), w[0], w[1], w[2]]);
                        }
                    }
                }
                let replies = self.transport.exchange(&out)?;
                let Some(s) = s else {
                    return if replies.is_empty() && mine.is_empty() {
                        Ok(())
                    } else {
                        Err(MpcError::Device(
                            "solute velocities came back to a rank that passed none (a \
                             routing error: please report it)"
                                .into(),
                        ))
                    };
                };
                for (j, w) in mine {
                    s.vel[j] = w;
                }
                for r in replies.chunks_exact(REPLY_WORDS) {
                    s.vel[r[0].to_bits() as usize] = [r[1], r[2], r[3]];
                }
                Ok(())
            }
        }
    }
}
