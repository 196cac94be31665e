//! Counter-based random numbers of the MD engine (Philox4x32-10, addressed by particle tags and
//! the step): DPD pair noise, Langevin noise and initial velocities. Each family has its own key
//! derived from the run seed, so the draws never coincide with each other or with the MPC cell
//! streams (which use the bare run seed). The GPU kernels draw the same numbers.

use crate::rng::{det_ln, philox4x32_10, philox_key, splitmix64, u01_from_words};

const DPD_SALT: u64 = 0x4450_445f_5041_4952;
const LANGEVIN_SALT: u64 = 0x4c41_4e47_4556_494e;
const VELOCITY_SALT: u64 = 0x5645_4c4f_4349_5459;

/// The Philox key of the DPD pair streams of a run seed.
#[inline]
pub fn dpd_key(seed: u64) -> [u32; 2] {
    philox_key(splitmix64(seed ^ DPD_SALT))
}

/// The Philox key of the Langevin noise of a run seed.
#[inline]
pub fn langevin_key(seed: u64) -> [u32; 2] {
    philox_key(splitmix64(seed ^ LANGEVIN_SALT))
}

/// θ_ij of the DPD random force: uniform with zero mean and unit variance, from Philox with
/// counter (min tag, max tag, step, 0). Symmetric in (i, j), so both particles of a pair draw
/// the same number and Newton's third law holds exactly; independent of particle order,
/// thread count or backend.
#[inline(always)]
pub fn dpd_theta(key: [u32; 2], tag_i: u32, tag_j: u32, step: u64) -> f64 {
    let (lo, hi) = if tag_i < tag_j {
        (tag_i, tag_j)
    } else {
        (tag_j, tag_i)
    };
    let w = philox4x32_10([lo, hi, step as u32, (step >> 32) as u32], key);
    let u = u01_from_words(w[0], w[1]);
    // uniform on [−√3, √3): variance 1
    3f64.sqrt() * (2.0 * u - 1.0)
}

/// Three standard normal numbers for particle `tag` at `step` in stream `salt`
/// (Marsaglia's polar method on Philox blocks; IEEE-exact operations plus `det_ln`).
fn normals3(seed: u64, salt: u64, tag: u32, step: u64) -> [f64; 3] {
    let key = philox_key(splitmix64(seed ^ salt));
    let mut out = [0.0; 3];
    let mut got = 0;
    let mut attempt = 0u32;
    while got < 3 {
        let w = philox4x32_10([tag, attempt, step as u32, (step >> 32) as u32], key);
        attempt += 1;
        let v1 = 2.0 * u01_from_words(w[0], w[1]) - 1.0;
        let v2 = 2.0 * u01_from_words(w[2], w[3]) - 1.0;
        let s = v1 * v1 + v2 * v2;
        if s < 1.0 && s > 0.0 {
            let f = (-2.0 * det_ln(s) / s).sqrt();
            out[got] = v1 * f;
            got += 1;
            if got < 3 {
                out[got] = v2 * f;
                got += 1;
            }
        }
    }
    out
}

/// Langevin noise of one particle at one step.
#[inline]
pub fn langevin_normals(seed: u64, tag: u32, step: u64) -> [f64; 3] {
    normals3(seed, LANGEVIN_SALT, tag, step)
}

/// Initial-velocity draws of one particle.
#[inline]
pub fn velocity_normals(seed: u64, tag: u32) -> [f64; 3] {
    normals3(seed, VELOCITY_SALT, tag, 0)
}
