//! Fluid particle data (structure of arrays) and the initial state.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::config::{Config, InitialFlow};
use crate::physics::{wrap_coordinate, Physics};
use crate::rng::CellStream;

/// Chunk length of every parallel reduction: fixed, so sums do not depend on the thread count.
pub const REDUCTION_CHUNK: usize = 1 << 14;

/// All fluid particles: positions as f32 (the grid shift randomises them at that scale anyway),
/// velocities as f64 (for momentum and energy conservation).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FluidState {
    pub pos: [Vec<f32>; 3],
    pub vel: [Vec<f64>; 3],
}

impl FluidState {
    pub fn len(&self) -> usize {
        self.pos[0].len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn position(&self, i: usize) -> [f32; 3] {
        [self.pos[0][i], self.pos[1][i], self.pos[2][i]]
    }

    pub fn velocity(&self, i: usize) -> [f64; 3] {
        [self.vel[0][i], self.vel[1][i], self.vel[2][i]]
    }

    /// The initial state of a config: positions uniform in the box, Maxwell-Boltzmann velocities
    /// with zero total momentum and exactly kT per degree of freedom, plus the initial flow.
    /// Each particle's draws come from its own Philox stream, so any backend can generate the
    /// same state in parallel.
    pub fn initial(cfg: &Config) -> FluidState {
        let phys = Physics::from_config(cfg);
        let n = cfg.n_fluid() as usize;
        let mut st = FluidState {
            pos: [vec![0.0; n], vec![0.0; n], vec![0.0; n]],
            vel: [vec![0.0; n], vec![0.0; n], vec![0.0; n]],
        };
        let sigma = (cfg.kt / cfg.mass).sqrt();
        let seed = cfg.seed;
        let len = phys.length;
        {
            let [px, py, pz] = &mut st.pos;
            let [vx, vy, vz] = &mut st.vel;
            (px, py, pz, vx, vy, vz)
                .into_par_iter()
                .enumerate()
                .for_each(|(i, (x, y, z, ux, uy, uz))| {
                    let (p, v) = match &phys.walls {
                        Some(w) => w.initial_particle(seed, i as u64, len, sigma),
                        None => initial_particle(seed, i as u64, len, sigma),
                    };
                    (*x, *y, *z) = (p[0], p[1], p[2]);
                    (*ux, *uy, *uz) = (v[0], v[1], v[2]);
                });
        }
        if n > 1 {
            // Remove the mean velocity, then scale to exactly kT per degree of freedom.
            let (mean, _) = st.mean_velocity_and_energy();
            for (vel, m) in st.vel.iter_mut().zip(mean) {
                vel.par_iter_mut().for_each(|v| *v -= m);
            }
            let (_, ke) = st.mean_velocity_and_energy();
            let target = 1.5 * (n as f64 - 1.0) * cfg.kt / cfg.mass;
            if ke > 0.0 {
                let f = (target / ke).sqrt();
                for k in 0..3 {
                    st.vel[k].par_iter_mut().for_each(|v| *v *= f);
                }
            }
        }
        if cfg.initial_flow == InitialFlow::Steady && cfg.shear_rate != 0.0 {
            let [vx, _, _] = &mut st.vel;
            vx.par_iter_mut()
                .zip(st.pos[1].par_iter())
                .for_each(|(v, &y)| *v += phys.flow_velocity(y as f64));
        }
        if let (InitialFlow::Steady, Some(w)) = (cfg.initial_flow, &phys.walls) {
            let [px, py, pz] = &st.pos;
            st.vel[0]
                .par_iter_mut()
                .enumerate()
                .for_each(|(i, v)| *v += w.steady_flow(cfg, [px[i], py[i], pz[i]]));
        }
        st
    }

    /// Mean velocity and ½Σv² (per unit mass), summed in fixed chunks for reproducibility.
    fn mean_velocity_and_energy(&self) -> ([f64; 3], f64) {
        let n = self.len();
        let t = chunked_sums(n, |i| sums_of(self.velocity(i)));
        let nf = n.max(1) as f64;
        ([t[0] / nf, t[1] / nf, t[2] / nf], t[3])
    }

    /// Check that every value is finite and every position is inside the box.
    pub fn validate(&self, phys: &Physics) -> Result<(), String> {
        let n = self.len();
        for k in 0..3 {
            if self.pos[k].len() != n || self.vel[k].len() != n {
                return Err(format!("array lengths differ (component {k})"));
            }
        }
        for i in 0..n {
            for k in 0..3 {
                let x = self.pos[k][i];
                if !(x >= 0.0 && (x as f64) < phys.length[k]) {
                    return Err(format!(
                        "particle {i}: position component {k} = {x} outside the box"
                    ));
                }
                if !self.vel[k][i].is_finite() {
                    return Err(format!(
                        "particle {i}: velocity component {k} is not finite"
                    ));
                }
            }
        }
        if let Some(w) = &phys.walls {
            use crate::physics::walls::WallShape;
            let inside =
                |i: usize| w.shape.signed_distance(self.position(i).map(|c| c as f64)) < 0.0;
            if let Some(i) = (0..n).find(|&i| inside(i)) {
                return Err(format!(
                    "particle {i} at {:?} is inside the wall",
                    self.position(i)
                ));
            }
        }
        Ok(())
    }
}

/// Position and thermal velocity of fluid particle `index` before momentum removal.
#[inline]
pub fn initial_particle(seed: u64, index: u64, len: [f64; 3], sigma: f64) -> ([f32; 3], [f64; 3]) {
    let mut s = CellStream::for_particle(seed, index);
    let p = [
        wrap_coordinate(s.uniform() * len[0], len[0]),
        wrap_coordinate(s.uniform() * len[1], len[1]),
        wrap_coordinate(s.uniform() * len[2], len[2]),
    ];
    let v = [sigma * s.normal(), sigma * s.normal(), sigma * s.normal()];
    (p, v)
}

/// One part of a fluid cut into parts (`fluid_parts`): its particles in ascending global
/// index, and those indices.
pub type FluidPart = (FluidState, Vec<u64>);

/// Σ over chunks (in chunk order) of each chunk's sums of `term` over its particles: the
/// fixed-chunk reduction of the initial state's mean velocity and energy (also
/// `FluidState::mean_velocity_and_energy`), so its value does not depend on the thread count.
pub(crate) fn chunked_sums(n: usize, term: impl Fn(usize) -> [f64; 4] + Sync) -> [f64; 4] {
    let parts: Vec<[f64; 4]> = (0..n.div_ceil(REDUCTION_CHUNK))
        .into_par_iter()
        .map(|c| {
            let lo = c * REDUCTION_CHUNK;
            let mut s = [0.0; 4];
            for i in lo..(lo + REDUCTION_CHUNK).min(n) {
                let t = term(i);
                for k in 0..4 {
                    s[k] += t[k];
                }
            }
            s
        })
        .collect();
    let mut t = [0.0; 4];
    for p in parts {
        for k in 0..4 {
            t[k] += p[k];
        }
    }
    t
}

/// A velocity's terms of those sums: its components and ½v².
pub(crate) fn sums_of(v: [f64; 3]) -> [f64; 4] {
    [
        v[0],
        v[1],
        v[2],
        0.5 * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]),
    ]
}
