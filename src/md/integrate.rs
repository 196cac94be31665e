//! Integrators and thermostats: the velocity-Verlet pieces (kick, drift), the exact
//! Ornstein–Uhlenbeck step of BAOAB Langevin, and wrapping into the box. The CPU engine
//! composes them in [`super::Md::step`]; the GPU runs the same arithmetic in
//! `kernels/md.cu` (`md_first_half`, `md_second_half`, launched from `md::gpu::integrate`).
//! The DPD thermostat acts through pair forces (`md::pair::dpd`).

use rayon::prelude::*;

use super::boundary::PeriodicBox;
use super::neighbor::CHUNK;
use super::random::langevin_normals;
use crate::error::ConfigError;

/// How the MD part is thermostatted (besides a DPD pair style, which thermostats itself).
#[derive(Clone, Copy, Debug, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub enum MdThermostat {
    /// Plain velocity Verlet (NVE).
    #[default]
    None,
    /// Langevin with friction rate `damping` (1/time), integrated as BAOAB: the O step
    /// v ← e^{−γ dt} v + √(kT/m (1 − e^{−2γ dt})) ξ is exact for the Ornstein–Uhlenbeck part.
    Langevin { damping: f64 },
    /// DPD dissipative and random pair forces only (LAMMPS `dpd/tstat`), on top of the pair style.
    Dpd {
        gamma: f64,
        cutoff: f64,
        exponent: f64,
    },
}

/// The check of a Langevin friction rate (config and engine give the same message).
pub(crate) fn check_langevin_damping(damping: f64) -> Result<(), ConfigError> {
    if !(damping.is_finite() && damping >= 0.0) {
        return Err(ConfigError {
            field: "md.thermostat.Langevin.damping".into(),
            problem: format!("must be finite and ≥ 0 (got {damping})"),
            fix: "give a friction rate such as 1.0 (1/time)".into(),
        });
    }
    Ok(())
}

/// The coefficients (c1, c2) of the O step: v ← c1 v + √(c2 kT/m) ξ, c1 = e^{−γ dt},
/// c2 = 1 − c1².
#[inline]
pub fn ou_coefficients(gamma: f64, dt: f64) -> (f64, f64) {
    let c1 = (-gamma * dt).exp();
    (c1, (1.0 - c1 * c1).max(0.0))
}

/// B: v += h F/m.
pub fn kick(vel: &mut [[f64; 3]], force: &[[f64; 3]], inv_mass: &[f64], h: f64) {
    vel.par_chunks_mut(CHUNK * 8)
        .enumerate()
        .for_each(|(c, vs)| {
            for (k, v) in vs.iter_mut().enumerate() {
                let i = c * CHUNK * 8 + k;
                let a = h * inv_mass[i];
                v[0] += a * force[i][0];
                v[1] += a * force[i][1];
                v[2] += a * force[i][2];
            }
        });
}

/// A: r += h v (no wrapping).
pub fn drift(pos: &mut [[f64; 3]], vel: &[[f64; 3]], h: f64) {
    pos.par_chunks_mut(CHUNK * 8)
        .enumerate()
        .for_each(|(c, ps)| {
            for (k, p) in ps.iter_mut().enumerate() {
                let i = c * CHUNK * 8 + k;
                p[0] += h * vel[i][0];
                p[1] += h * vel[i][1];
                p[2] += h * vel[i][2];
            }
        });
}

/// What the O step needs besides the velocities.
pub struct OuStep<'a> {
    pub gamma: f64,
    pub dt: f64,
    pub kt: f64,
    pub seed: u64,
    /// The MD step the noise is drawn for.
    pub step: u64,
    pub inv_mass: &'a [f64],
    pub tag: &'a [u32],
}

/// O: the exact Ornstein–Uhlenbeck update with per-(tag, step) Langevin noise.
pub fn ornstein_uhlenbeck(vel: &mut [[f64; 3]], o: &OuStep<'_>) {
    let (c1, c2) = ou_coefficients(o.gamma, o.dt);
    vel.par_chunks_mut(CHUNK).enumerate().for_each(|(c, vs)| {
        for (k, v) in vs.iter_mut().enumerate() {
            let i = c * CHUNK + k;
            let s = (c2 * o.kt * o.inv_mass[i]).sqrt();
            let xi = langevin_normals(o.seed, o.tag[i], o.step);
            for d in 0..3 {
                v[d] = c1 * v[d] + s * xi[d];
            }
        }
    });
}

/// Wrap every position into the box, counting periods in the image counts (a Lees-Edwards
/// crossing also changes vx).
pub fn wrap(pos: &mut [[f64; 3]], vel: &mut [[f64; 3]], image: &mut [[i32; 3]], bx: &PeriodicBox) {
    pos.par_chunks_mut(CHUNK * 8)
        .zip(vel.par_chunks_mut(CHUNK * 8))
        .zip(image.par_chunks_mut(CHUNK * 8))
        .for_each(|((ps, vs), imgs)| {
            for ((p, v), img) in ps.iter_mut().zip(vs).zip(imgs) {
                bx.wrap(p, v, img);
            }
        });
}

/// Σ ½ m v² of particles c·CHUNK.. (c+1)·CHUNK: the fixed chunks both engines reduce over.
#[inline]
pub fn chunk_kinetic_energy(vel: &[[f64; 3]], inv_mass: &[f64], c: usize) -> f64 {
    let mut s = 0.0;
    for i in c * CHUNK..((c + 1) * CHUNK).min(vel.len()) {
        let u = vel[i];
        s += 0.5 / inv_mass[i] * (u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
    }
    s
}

/// Σ m v of particles c·CHUNK.. (c+1)·CHUNK.
#[inline]
pub fn chunk_momentum(vel: &[[f64; 3]], inv_mass: &[f64], c: usize) -> [f64; 3] {
    let mut p = [0.0; 3];
    for i in c * CHUNK..((c + 1) * CHUNK).min(vel.len()) {
        let m = 1.0 / inv_mass[i];
        for k in 0..3 {
            p[k] += m * vel[i][k];
        }
    }
    p
}
