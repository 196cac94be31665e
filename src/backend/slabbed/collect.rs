//! What every y-slab backend sums or gathers over the processes of a run, whatever holds its
//! slabs (CPU threads here, GPUs in `backend::cuda::multi`): fluid moments summed, and the
//! particles gathered back to their global indices.

use crate::backend::FluidMoments;
use crate::error::{MpcError, Result};
use crate::ranks::Transport;
use crate::state::FluidState;

/// f64 words of one gathered particle: position (3), velocity (3), global index (bits).
pub const PARTICLE_WORDS: usize = 7;

/// The moments of the whole fluid from this process's `mine` (the same profile length on
/// every process).
pub fn sum_moments(transport: &dyn Transport, mine: FluidMoments) -> Result<FluidMoments> {
    if transport.ranks() == 1 {
        return Ok(mine);
    }
    let bins = mine.profile_sum.len();
    // [particles, px, py, pz, E, profile sums (bins), profile counts (bins)]
    let mut v = vec![mine.particles as f64];
    v.extend(mine.momentum);
    v.push(mine.kinetic_energy);
    v.extend(&mine.profile_sum);
    v.extend(mine.profile_count.iter().map(|&c| c as f64));
    transport.sum(&mut v)?;
    Ok(FluidMoments {
        particles: v[0] as u64,
        momentum: [v[1], v[2], v[3]],
        kinetic_energy: v[4],
        profile_sum: v[5..5 + bins].to_vec(),
        profile_count: v[5 + bins..].iter().map(|&c| c as u64).collect(),
    })
}

/// Append the particles of `part` with their global indices `ids` to `out` as
/// [`PARTICLE_WORDS`] each.
pub fn pack_particles(part: &FluidState, ids: impl Iterator<Item = u64>, out: &mut Vec<f64>) {
    for (i, id) in ids.enumerate() {
        let (p, v) = (part.position(i), part.velocity(i));
        out.extend([p[0] as f64, p[1] as f64, p[2] as f64, v[0], v[1], v[2]]);
        out.push(f64::from_bits(id));
    }
}

/// The whole fluid of `n` particles from every process's packed particles (`mine` here): each
/// at its global index; an error if one is missing or comes twice.
pub fn gather_particles(transport: &dyn Transport, n: usize, mine: &[f64]) -> Result<FluidState> {
    place_particles(n, &transport.gather(mine)?)
}

/// Packed particles of all processes placed at their global indices.
fn place_particles(n: usize, all: &[f64]) -> Result<FluidState> {
    let mut out = FluidState {
        pos: [vec![0.0; n], vec![0.0; n], vec![0.0; n]],
        vel: [vec![0.0; n], vec![0.0; n], vec![0.0; n]],
    };
    let mut seen = vec![false; n];
    for p in all.chunks_exact(PARTICLE_WORDS) {
        let id = p[6].to_bits() as usize;
        if id >= n || std::mem::replace(&mut seen[id], true) {
            return Err(MpcError::Device(format!(
                "gathering the slabs: fluid particle {id} is not one of {n} or came twice \
                 (please report it)"
            )));
        }
        for k in 0..3 {
            out.pos[k][id] = p[k] as f32;
            out.vel[k][id] = p[3 + k];
        }
    }
    if let Some(missing) = seen.iter().position(|&s| !s) {
        return Err(MpcError::Device(format!(
            "gathering the slabs: fluid particle {missing} is missing (please report it)"
        )));
    }
    Ok(out)
}
