//! What both engines ([`super::Md`] on the CPU, [`super::GpuMd`] on a GPU) take and give:
//! the run parameters and the sums of a force evaluation.

use super::boundary::LeesEdwards;
use super::neighbor::NeighborMode;
use crate::error::ConfigError;

/// Run parameters of the engine.
#[derive(Clone, Debug, PartialEq)]
pub struct MdSettings {
    pub dt: f64,
    /// kT of thermostats (Langevin, DPD).
    pub kt: f64,
    pub seed: u64,
    /// Verlet skin: lists hold pairs within cutoff + skin and are rebuilt when some particle
    /// has moved more than skin/2 since the last build.
    pub skin: f64,
    pub neighbor: NeighborMode,
    /// Reorder particles along the Morton curve every this many list builds (0: never).
    pub reorder_every: u64,
    /// Worker threads (0: all cores).
    pub threads: usize,
    /// Lees-Edwards shear of the box (None: plain periodic).
    pub shear: Option<ShearFlow>,
}

/// Lees-Edwards shear of the MD box on the clock of the MPC fluid it is coupled to: flow along
/// x, gradient along y, offset D(t) = γ̇ Ly t. MD step s is at time
/// t = ⌊s/N⌋ h + (s mod N) dt, so at every hand-over (s = n N) t is n h bit for bit, as the
/// fluid computes it, and the offsets agree exactly.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ShearFlow {
    /// γ̇.
    pub rate: f64,
    /// The fluid's collision time h (dt for the MD engine alone).
    pub collision_time: f64,
    /// MD steps per collision N (1 for the MD engine alone).
    pub steps_per_collision: u64,
}

impl ShearFlow {
    /// Shear of the MD engine alone (its own clock: h = dt, N = 1).
    pub fn standalone(rate: f64, dt: f64) -> ShearFlow {
        ShearFlow {
            rate,
            collision_time: dt,
            steps_per_collision: 1,
        }
    }

    /// The time of MD step `step`.
    pub fn time_at(&self, step: u64, dt: f64) -> f64 {
        let n = self.steps_per_collision.max(1);
        (step / n) as f64 * self.collision_time + (step % n) as f64 * dt
    }

    /// The strain γ̇ τ since a Verlet list build at offset `built_offset`, from the offset's
    /// motion in the direction of the shear (δ moves at γ̇ Ly); None once it has moved half a
    /// box length, where the motion modulo Lx would be ambiguous (the list is then rebuilt).
    pub fn strain_since(&self, offset: f64, built_offset: f64, box_len: [f64; 3]) -> Option<f64> {
        let lx = box_len[0];
        let moved = if self.rate >= 0.0 {
            (offset - built_offset).rem_euclid(lx)
        } else {
            -(built_offset - offset).rem_euclid(lx)
        };
        (moved.abs() <= 0.5 * lx).then(|| moved / box_len[1])
    }

    /// The Lees-Edwards state of a box of `box_len` at MD step `step`.
    pub fn lees_edwards_at(&self, step: u64, dt: f64, box_len: [f64; 3]) -> LeesEdwards {
        let v = self.rate * box_len[1];
        LeesEdwards::at(v * self.time_at(step, dt), v, box_len[0])
    }

    /// The imposed flow along x at height y: γ̇ (y − Ly/2).
    pub fn flow_velocity(&self, y: f64, ly: f64) -> f64 {
        self.rate * (y - 0.5 * ly)
    }
}

impl Default for MdSettings {
    fn default() -> Self {
        MdSettings {
            dt: 0.005,
            kt: 1.0,
            seed: 1,
            skin: 0.3,
            neighbor: NeighborMode::Auto,
            reorder_every: 20,
            threads: 0,
            shear: None,
        }
    }
}

/// The check of a Verlet skin (config and engine give the same message).
pub(crate) fn check_skin(skin: f64) -> Result<(), ConfigError> {
    if !(skin.is_finite() && skin >= 0.0) {
        return Err(ConfigError {
            field: "md.skin".into(),
            problem: format!("must be finite and ≥ 0 (got {skin})"),
            fix: "use a Verlet skin such as 0.3".into(),
        });
    }
    Ok(())
}

/// Sums of the last force evaluation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ForceReport {
    pub pair_energy: f64,
    pub bond_energy: f64,
    /// Σ over pairs and bonds of r_ij · F_ij (conservative forces only).
    pub virial: f64,
    /// Σ over pairs and bonds of r_ij,a F_ij,b, every pair force (conservative, and the DPD
    /// dissipative and random ones) and bond force: xx, yy, zz, xy, xz, yz.
    pub virial_tensor: [f64; 6],
    /// The solutes' energy in the walls' potential (`md::walls`).
    pub wall_energy: f64,
}

/// The tensor components (xx, yy, zz, xy, xz, yz) of a ⊗ (s a) added into `t`: the virial of a
/// pair force s·d at separation d, or the kinetic term of a velocity.
#[inline(always)]
pub fn add_outer(t: &mut [f64; 6], s: f64, d: &[f64; 3]) {
    t[0] += s * d[0] * d[0];
    t[1] += s * d[1] * d[1];
    t[2] += s * d[2] * d[2];
    t[3] += s * d[0] * d[1];
    t[4] += s * d[0] * d[2];
    t[5] += s * d[1] * d[2];
}

impl ForceReport {
    pub fn potential_energy(&self) -> f64 {
        self.pair_energy + self.bond_energy + self.wall_energy
    }
}
