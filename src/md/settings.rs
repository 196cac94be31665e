//! What both engines ([`super::Md`] on the CPU, [`super::GpuMd`] on a GPU) take and give:
//! the run parameters and the sums of a force evaluation.

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
    /// The solutes' energy in the walls' potential (`md::walls`).
    pub wall_energy: f64,
}

impl ForceReport {
    pub fn potential_energy(&self) -> f64 {
        self.pair_energy + self.bond_energy + self.wall_energy
    }
}
