//! Solutes in a collision of a fluid cut into y slabs over processes (CPU slabs here, GPU slabs
//! in `backend::cuda::multi`). Each solute is collided by the slab that owns its cell on the
//! step's grid, so first it goes to that slab's process ([`route_solutes`]), and its new
//! velocity comes back ([`return_solute_velocities`]). Two ways to hand them over
//! ([`SoluteMode`]):
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
use crate::ranks::Transport;

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

/// The solutes one process (or one slab) collides: where each came from (rank, index there)
/// and copies of its data; the collision writes `vel`.
#[derive(Default)]
pub struct HeldSolutes {
    origin: Vec<(usize, usize)>,
    pos: Vec<[f64; 3]>,
    vel: Vec<[f64; 3]>,
    mass: Vec<f64>,
}

impl HeldSolutes {
    /// Them as a batch to collide (None when there are none).
    pub fn batch(&mut self) -> Option<SoluteBatch<'_>> {
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

/// The solutes this process collides this step: those of `s` whose cell (`rank_of` their
/// position) is on this rank, and with `mode` PerRank those the other ranks route here.
/// Collective over the transport's ranks in PerRank mode.
pub fn route_solutes(
    transport: &dyn Transport,
    mode: SoluteMode,
    s: Option<&SoluteBatch<'_>>,
    rank_of: impl Fn([f64; 3]) -> usize,
) -> Result<HeldSolutes> {
    let me = transport.rank();
    let mut held = HeldSolutes::default();
    let mut out: Vec<Vec<f64>> = vec![Vec::new(); transport.ranks()];
    for j in 0..s.map_or(0, |s| s.len()) {
        let s = s.expect("non-empty");
        let (p, v) = (s.pos[j], s.vel[j]);
        let r = rank_of(p);
        if r == me {
            held.push((me, j), p, v, s.mass[j]);
        } else if mode == SoluteMode::PerRank {
            let (idx, origin) = (f64::from_bits(j as u64), me as f64);
            out[r].extend([p[0], p[1], p[2], v[0], v[1], v[2], s.mass[j], idx, origin]);
        } // Replicated: the rank of its cell collides it
    }
    if mode == SoluteMode::PerRank && transport.ranks() > 1 {
        for w in transport.exchange(&out)?.chunks_exact(SOLUTE_WORDS) {
            let pos = [w[0], w[1], w[2]];
            let r = rank_of(pos);
            if r != me {
                return Err(MpcError::Device(format!(
                    "a solute arrived at rank {me} for a cell of rank {r} (a routing error: \
                     please report it)"
                )));
            }
            let origin = (w[8] as usize, w[7].to_bits() as usize);
            held.push(origin, pos, [w[3], w[4], w[5]], w[6]);
        }
    }
    Ok(held)
}

/// The collided velocities of `held` back into the callers' batches (see [`SoluteMode`]).
/// Collective over the transport's ranks.
pub fn return_solute_velocities(
    transport: &dyn Transport,
    mode: SoluteMode,
    held: &HeldSolutes,
    s: Option<&mut SoluteBatch<'_>>,
) -> Result<()> {
    let me = transport.rank();
    let ranks = transport.ranks();
    match mode {
        _ if ranks == 1 => {
            if let Some(s) = s {
                for (&(_, j), v) in held.origin.iter().zip(&held.vel) {
                    s.vel[j] = *v;
                }
            }
            Ok(())
        }
        SoluteMode::Replicated => {
            let Some(s) = s else { return Ok(()) };
            let mut v = vec![0.0; 3 * s.len()];
            for (&(_, j), w) in held.origin.iter().zip(&held.vel) {
                v[3 * j..3 * j + 3].copy_from_slice(w);
            }
            transport.sum(&mut v)?;
            for (j, w) in v.chunks_exact(3).enumerate() {
                s.vel[j] = [w[0], w[1], w[2]];
            }
            Ok(())
        }
        SoluteMode::PerRank => {
            let mut out: Vec<Vec<f64>> = vec![Vec::new(); ranks];
            let mut mine = Vec::new();
            for (&(rank, j), w) in held.origin.iter().zip(&held.vel) {
                if rank == me {
                    mine.push((j, *w));
                } else {
                    out[rank].extend([f64::from_bits(j as u64), w[0], w[1], w[2]]);
                }
            }
            let replies = transport.exchange(&out)?;
            let Some(s) = s else {
                return if replies.is_empty() && mine.is_empty() {
                    Ok(())
                } else {
                    Err(MpcError::Device(
                        "solute velocities came back to a rank that passed none (a routing \
                         error: please report it)"
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

impl SlabbedCpuBackend {
    /// The local slab (index into `self.slabs`) owning the cell of a solute at `pos`, and the
    /// slab of the box.
    fn local_slab_of_solute(&self, plan: &StepPlan, pos: [f64; 3]) -> (usize, Option<usize>) {
        let loc = self.phys.locate_solute(plan, pos);
        let k = self.slab_of_layer(self.layer_of_cell(loc.cell));
        (
            k,
            k.checked_sub(self.first).filter(|&j| j < self.slabs.len()),
        )
    }

    /// This process's solutes of the step (routed), and each of its slabs' share of them as
    /// indices into those.
    pub(super) fn solutes_by_slab(
        &self,
        plan: &StepPlan,
        s: Option<&SoluteBatch<'_>>,
    ) -> Result<(HeldSolutes, Vec<Vec<usize>>)> {
        let held = route_solutes(&*self.transport, self.solute_mode, s, |p| {
            self.slab_rank[self.local_slab_of_solute(plan, p).0]
        })?;
        let mut by_slab = vec![Vec::new(); self.slabs.len()];
        for (i, &p) in held.pos.iter().enumerate() {
            let j = self.local_slab_of_solute(plan, p).1.expect("routed here");
            by_slab[j].push(i);
        }
        Ok((held, by_slab))
    }
}

/// The solutes of `held` at `idx`, as their own set (to collide in one slab).
pub(super) fn subset(held: &HeldSolutes, idx: &[usize]) -> HeldSolutes {
    let mut out = HeldSolutes::default();
    for &i in idx {
        out.push(held.origin[i], held.pos[i], held.vel[i], held.mass[i]);
    }
    out
}

/// Write the velocities of a `subset` back into `held`.
pub(super) fn write_back(held: &mut HeldSolutes, idx: &[usize], part: &HeldSolutes) {
    for (&i, v) in idx.iter().zip(&part.vel) {
        held.vel[i] = *v;
    }
}
