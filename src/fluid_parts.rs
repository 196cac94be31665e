//! A fluid cut into parts (the slabs of a process) without the whole box in memory:
//! [`FluidSource`] is a whole [`FluidState`], a checkpoint file of which each process reads
//! only the blocks of its layers, or a config whose initial state each process generates part
//! by part. Every particle has its own Philox stream, so a process can
//! draw any particle; the mean velocity and the energy that [`FluidState::initial`] removes and
//! rescales are summed over every particle in the same fixed chunks, so each part is bit for bit
//! the corresponding particles of the whole initial state, while only the kept ones are stored
//! (over MPI ranks a process holds just its layers: a box of 2 × 10⁹ particles needs ~100 GB
//! whole, which no rank of a 4-rank host could build).

use rayon::prelude::*;

use crate::checkpoint::{PartedFile, StoredFluid};
use crate::config::{Config, InitialFlow};
use crate::error::Result;
use crate::physics::Physics;
pub use crate::state::FluidPart;
use crate::state::{chunked_sums, initial_particle, sums_of, FluidState, REDUCTION_CHUNK};

/// Where a fluid cut into parts comes from.
#[derive(Clone, Copy)]
pub enum FluidSource<'a> {
    /// A whole state (a caller's, or an older checkpoint's).
    State(&'a FluidState),
    /// A checkpoint's fluid (a resume): only the blocks a process needs are read.
    Stored(&'a PartedFile),
    /// The config's initial state, generated part by part.
    Initial(&'a Config),
}

impl<'a> From<&'a StoredFluid> for FluidSource<'a> {
    /// A checkpoint file's fluid ([`crate::checkpoint::CheckpointFile::fluid`]).
    fn from(fluid: &'a StoredFluid) -> FluidSource<'a> {
        match fluid {
            StoredFluid::Whole(s) => FluidSource::State(s),
            StoredFluid::Parted(p) => FluidSource::Stored(p),
        }
    }
}

impl FluidSource<'_> {
    /// Particles of the whole fluid.
    pub fn len(&self) -> usize {
        match self {
            FluidSource::State(s) => s.len(),
            FluidSource::Stored(f) => f.len(),
            FluidSource::Initial(cfg) => cfg.n_fluid() as usize,
        }
    }

    /// The whole fluid (one process holding every particle).
    pub fn whole(&self) -> Result<std::borrow::Cow<'_, FluidState>> {
        use std::borrow::Cow;
        Ok(match self {
            FluidSource::State(s) => Cow::Borrowed(*s),
            FluidSource::Stored(f) => Cow::Owned(f.whole_fluid()?),
            FluidSource::Initial(cfg) => Cow::Owned(FluidState::initial(cfg)),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `parts` parts: particle i goes to `part_of(its y)` (None: kept by no part here);
    /// `y_range` holds every y that `part_of` keeps (a checkpoint reads only the blocks that
    /// meet it).
    pub fn parts(
        &self,
        parts: usize,
        y_range: [f32; 2],
        part_of: impl Fn(f32) -> Option<usize> + Sync,
    ) -> Result<Vec<FluidPart>> {
        Ok(match self {
            FluidSource::State(s) => cut_state(s, parts, part_of),
            FluidSource::Stored(f) => f.fluid_parts(parts, y_range, part_of)?,
            FluidSource::Initial(cfg) => initial_parts(cfg, parts, part_of),
        })
    }
}

/// The y range of slabs `slabs` of a box cut at layers `bounds` (slab k: layers bounds[k] to
/// bounds[k + 1]), open beyond the box's first and last layer (a particle there belongs to
/// the first or last slab): the `y_range` of [`FluidSource::parts`].
pub fn slabs_y_range(bounds: &[u32], slabs: std::ops::Range<usize>) -> [f32; 2] {
    let lo = match slabs.start {
        0 => f32::NEG_INFINITY,
        k => bounds[k] as f32,
    };
    let hi = if slabs.end + 1 >= bounds.len() {
        f32::INFINITY
    } else {
        bounds[slabs.end] as f32
    };
    [lo, hi]
}

fn cut_state(
    state: &FluidState,
    parts: usize,
    part_of: impl Fn(f32) -> Option<usize> + Sync,
) -> Vec<FluidPart> {
    let owners: Vec<Option<usize>> = state.pos[1].par_iter().map(|&y| part_of(y)).collect();
    (0..parts)
        .into_par_iter()
        .map(|k| {
            let ids: Vec<u64> = (0..state.len() as u64)
                .filter(|&i| owners[i as usize] == Some(k))
                .collect();
            let mut part = FluidState::default();
            for c in 0..3 {
                part.pos[c] = ids.iter().map(|&i| state.pos[c][i as usize]).collect();
                part.vel[c] = ids.iter().map(|&i| state.vel[c][i as usize]).collect();
            }
            (part, ids)
        })
        .collect()
}

/// Particle i's position and thermal velocity, as [`FluidState::initial`] draws them.
fn thermal(cfg: &Config, phys: &Physics, sigma: f64, i: usize) -> ([f32; 3], [f64; 3]) {
    match &phys.walls {
        Some(w) => w.initial_particle(cfg.seed, i as u64, phys.length, sigma),
        None => initial_particle(cfg.seed, i as u64, phys.length, sigma),
    }
}

/// A kept particle: its part, global index, position and velocity.
type Kept = (usize, u64, [f32; 3], [f64; 3]);

/// [`FluidSource::parts`] of the config's initial state (three passes over every particle's
/// draws: the mean, the energy after removing it, then the kept particles).
fn initial_parts(
    cfg: &Config,
    parts: usize,
    part_of: impl Fn(f32) -> Option<usize> + Sync,
) -> Vec<FluidPart> {
    let phys = Physics::from_config(cfg);
    let n = cfg.n_fluid() as usize;
    let sigma = (cfg.kt / cfg.mass).sqrt();
    let (mut mean, mut scale) = ([0.0; 3], 1.0);
    if n > 1 {
        let t = chunked_sums(n, |i| sums_of(thermal(cfg, &phys, sigma, i).1));
        let nf = n as f64;
        mean = [t[0] / nf, t[1] / nf, t[2] / nf];
        let ke = chunked_sums(n, |i| {
            let v = thermal(cfg, &phys, sigma, i).1;
            sums_of([v[0] - mean[0], v[1] - mean[1], v[2] - mean[2]])
        })[3];
        let target = 1.5 * (nf - 1.0) * cfg.kt / cfg.mass;
        if ke > 0.0 {
            scale = (target / ke).sqrt();
        }
    }
    let steady = cfg.initial_flow == InitialFlow::Steady;
    let particle = |i: usize| {
        let (p, v) = thermal(cfg, &phys, sigma, i);
        let mut v = if n > 1 {
            [
                (v[0] - mean[0]) * scale,
                (v[1] - mean[1]) * scale,
                (v[2] - mean[2]) * scale,
            ]
        } else {
            v
        };
        if steady && cfg.shear_rate != 0.0 {
            v[0] += phys.flow_velocity(p[1] as f64);
        }
        if let (true, Some(w)) = (steady, &phys.walls) {
            v[0] += w.steady_flow(cfg, p);
        }
        (p, v)
    };
    // the kept particles of each chunk, then appended chunk by chunk (ascending index)
    let kept: Vec<Vec<Kept>> = (0..n.div_ceil(REDUCTION_CHUNK))
        .into_par_iter()
        .map(|c| {
            let lo = c * REDUCTION_CHUNK;
            let mut out = Vec::new();
            for i in lo..(lo + REDUCTION_CHUNK).min(n) {
                let (p, v) = particle(i);
                if let Some(k) = part_of(p[1]).filter(|&k| k < parts) {
                    out.push((k, i as u64, p, v));
                }
            }
            out
        })
        .collect();
    let mut out: Vec<FluidPart> = (0..parts).map(|_| Default::default()).collect();
    for (k, i, p, v) in kept.into_iter().flatten() {
        let (st, ids) = &mut out[k];
        for c in 0..3 {
            st.pos[c].push(p[c]);
            st.vel[c].push(v[c]);
        }
        ids.push(i);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parts generated from the config equal, bit for bit, the same parts cut from the whole
    /// initial state, for a periodic box, a sheared one with a steady initial profile, and a
    /// slit channel with a body force; particles that no part keeps are left out.
    #[test]
    fn generated_parts_equal_the_whole_initial_state_cut() {
        for body in [
            "(cells: (6, 10, 5), particles_per_cell: 7, time_step: 0.1, seed: 11, steps: 1, \
              collision: Srd(angle_deg: 130.0))",
            "(cells: (6, 10, 5), particles_per_cell: 7, time_step: 0.1, seed: 12, steps: 1, \
              collision: Srd(angle_deg: 130.0), \
              shear_rate: 0.05, initial_flow: Steady)",
            "(cells: (6, 12, 5), particles_per_cell: 7, time_step: 0.1, seed: 13, steps: 1, \
              collision: Srd(angle_deg: 130.0), \
              body_force: (0.001, 0.0, 0.0), initial_flow: Steady, walls: Slit(height: 10.0))",
        ] {
            let cfg = Config::from_ron_str(body).unwrap_or_else(|e| panic!("{body}: {e}"));
            let whole = FluidState::initial(&cfg);
            // layers 0-2 → part 0, 3-6 → part 1, the rest kept by none
            let part_of = |y: f32| match y.floor() as u32 {
                0..=2 => Some(0),
                3..=6 => Some(1),
                _ => None,
            };
            let all = [f32::NEG_INFINITY, f32::INFINITY];
            let generated = FluidSource::Initial(&cfg).parts(2, all, part_of).unwrap();
            let cut = FluidSource::State(&whole).parts(2, all, part_of).unwrap();
            assert_eq!(generated, cut, "{body}");
            let kept: usize = generated.iter().map(|p| p.1.len()).sum();
            assert!(kept > 0 && kept < whole.len(), "{body}: {kept} kept");
            assert!(generated
                .iter()
                .all(|(_, ids)| ids.windows(2).all(|w| w[0] < w[1])));
        }
    }
}
