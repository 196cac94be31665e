//! The `md` section of a run config (the types and the checks that need no files; building the
//! engine from it is `md::from_config`): what the solutes are, how they interact, and how often
//! the MPC collision couples them to the fluid.
//!
//! ```ron
//! md: (
//!     steps_per_collision: 20,   // MD steps per MPC collision: dt = time_step / 20
//!     system: Chains(n_chains: 8, chain_length: 32, bead_mass: 5.0),
//!     pair: Wca(epsilon: 1.0, sigma: 1.0),
//!     bonds: [Fene(k: 30.0, r0: 1.5)],
//! )
//! ```

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Config;
use crate::error::ConfigError;
use crate::md::data::AtomStyle;
use crate::md::forcefield::{BondStyle, MdThermostat};
use crate::md::gpu::MdBackend;
use crate::md::integrate::check_langevin_damping;
use crate::md::neighbor::NeighborMode;
use crate::md::settings::check_skin;

/// Where the solute particles come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum SystemSpec {
    /// Linear bead-spring chains placed as self-avoiding random walks; bond type 1 along each
    /// chain, one particle type.
    Chains {
        n_chains: usize,
        chain_length: usize,
        #[serde(default = "one")]
        bead_mass: f64,
        /// Initial bond length (must be below a FENE R0).
        #[serde(default = "bond_length")]
        bond_length: f64,
    },
    /// A LAMMPS data file (Masses, Atoms, optional Velocities and Bonds). Its box must be the
    /// MPC box: 0..Lx etc. in units of the cell size.
    DataFile {
        path: PathBuf,
        /// Used when the `Atoms` line has no `# style` comment.
        #[serde(default)]
        atom_style: Option<AtomStyle>,
    },
}

/// The non-bonded interaction. Types are 1-based as in LAMMPS.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum PairSpec {
    None,
    /// LJ with (type i, type j, epsilon, sigma, cutoff) for every type pair; `shift` subtracts
    /// U(rc) so the energy is continuous.
    Lj {
        coeffs: Vec<(usize, usize, f64, f64, f64)>,
        #[serde(default)]
        shift: bool,
    },
    /// Purely repulsive LJ (rc = 2^(1/6) σ, shifted) between all types.
    Wca {
        epsilon: f64,
        sigma: f64,
    },
    /// DPD with (type i, type j, a_ij) for every type pair; DPD thermostats itself.
    Dpd {
        a: Vec<(usize, usize, f64)>,
        gamma: f64,
        #[serde(default = "one")]
        cutoff: f64,
        /// s of w_R = (1 − r/rc)^s.
        #[serde(default = "one")]
        exponent: f64,
    },
}

/// The file format of MD trajectory frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum TrajectoryFormat {
    /// Extended XYZ, `trajectory.xyz` (appended on resume).
    #[default]
    Xyz,
    /// GSD (HOOMD schema), `trajectory.gsd`; continued on resume (frames after the
    /// checkpoint are dropped).
    Gsd,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MdConfig {
    /// MD steps per MPC collision N: the MD time step is dt = time_step / N.
    pub steps_per_collision: u32,
    pub system: SystemSpec,
    pub pair: PairSpec,
    /// Bond styles by bond type (entry 0 is bond type 1).
    #[serde(default)]
    pub bonds: Vec<BondStyle>,
    /// Extra thermostat on the MD particles (the MPC fluid thermostats them already through
    /// the collisions).
    #[serde(default)]
    pub thermostat: MdThermostat,
    #[serde(default = "skin")]
    pub skin: f64,
    #[serde(default)]
    pub neighbor: NeighborMode,
    /// Morton reordering every this many list builds (0: never).
    #[serde(default = "twenty")]
    pub reorder_every: u64,
    /// MPC steps between trajectory frames (0: none).
    #[serde(default)]
    pub trajectory_interval: u64,
    /// `Xyz` (`trajectory.xyz`, extended XYZ, the default) or `Gsd` (`trajectory.gsd`, HOOMD
    /// schema: OVITO, freud, `gsd.hoomd`).
    #[serde(default)]
    pub trajectory_format: TrajectoryFormat,
    /// The chains' longest relaxation time at rest τ, when known: the summary then reports
    /// the Weissenberg number Wi = γ̇ τ and the orientation resistance m = Wi tan 2χ.
    #[serde(default)]
    pub relaxation_time: Option<f64>,
    /// MPC steps between rows of `md.csv` (0: none).
    #[serde(default = "ten")]
    pub observable_interval: u64,
    /// Which engine runs the MD: `Auto` (the GPU engine when a CUDA GPU is usable, else the
    /// CPU), `Cpu` or `Cuda` (an error when no GPU is usable).
    #[serde(default)]
    pub backend: MdBackend,
}

fn one() -> f64 {
    1.0
}
fn bond_length() -> f64 {
    0.97
}
fn skin() -> f64 {
    0.3
}
fn twenty() -> u64 {
    20
}
fn ten() -> u64 {
    10
}

pub(crate) fn err(field: &str, problem: String, fix: &str) -> ConfigError {
    ConfigError {
        field: field.into(),
        problem,
        fix: fix.into(),
    }
}

/// gamma ≥ 0, cutoff > 0, exponent > 0, all finite (the DPD pair style and thermostat).
fn check_dpd(field: &str, gamma: f64, cutoff: f64, exponent: f64) -> Result<(), ConfigError> {
    if !gamma.is_finite()
        || gamma < 0.0
        || !cutoff.is_finite()
        || cutoff <= 0.0
        || !exponent.is_finite()
        || exponent <= 0.0
    {
        return Err(err(
            field,
            format!("gamma = {gamma}, cutoff = {cutoff}, exponent = {exponent}"),
            "use gamma ≥ 0, cutoff > 0, exponent > 0 (e.g. 4.5, 1.0, 1.0)",
        ));
    }
    Ok(())
}

impl MdConfig {
    /// Checks that need no file access; called from [`Config::validate`].
    pub fn validate(&self, _cfg: &Config) -> std::result::Result<(), ConfigError> {
        self.validate_run()?;
        for (k, b) in self.bonds.iter().enumerate() {
            b.validate(k)?;
        }
        match self.thermostat {
            MdThermostat::Langevin { damping } => check_langevin_damping(damping)?,
            MdThermostat::Dpd {
                gamma,
                cutoff,
                exponent,
            } => check_dpd("md.thermostat.Dpd", gamma, cutoff, exponent)?,
            MdThermostat::None => {}
        }
        self.validate_system()?;
        self.validate_pair()
    }

    /// Steps per collision, the relaxation time, the Verlet skin.
    fn validate_run(&self) -> std::result::Result<(), ConfigError> {
        if self.steps_per_collision == 0 {
            return Err(err(
                "md.steps_per_collision",
                "must be at least 1".into(),
                "set the number of MD steps per MPC collision, e.g. 20 (dt = time_step / N)",
            ));
        }
        if let Some(tau) = self.relaxation_time {
            if !(tau.is_finite() && tau > 0.0) {
                return Err(err(
                    "md.relaxation_time",
                    format!("must be finite and > 0 (got {tau})"),
                    "give the chains' longest relaxation time at rest (for Wi = γ̇ τ), or leave it out",
                ));
            }
        }
        check_skin(self.skin)
    }

    fn validate_system(&self) -> std::result::Result<(), ConfigError> {
        match &self.system {
            SystemSpec::Chains {
                n_chains,
                chain_length,
                bead_mass,
                bond_length,
            } => self.validate_chains(*n_chains, *chain_length, *bead_mass, *bond_length),
            SystemSpec::DataFile { path, .. } => {
                if path.as_os_str().is_empty() {
                    return Err(err(
                        "md.system.DataFile.path",
                        "is empty".into(),
                        "give the path of a LAMMPS data file",
                    ));
                }
                Ok(())
            }
        }
    }

    fn validate_chains(
        &self,
        n_chains: usize,
        chain_length: usize,
        bead_mass: f64,
        bond_length: f64,
    ) -> std::result::Result<(), ConfigError> {
        if n_chains == 0 || chain_length == 0 {
            return Err(err(
                "md.system.Chains",
                format!("n_chains = {n_chains}, chain_length = {chain_length}"),
                "give at least one chain of at least one bead",
            ));
        }
        if !(bead_mass.is_finite() && bead_mass > 0.0) {
            return Err(err(
                "md.system.Chains.bead_mass",
                format!("must be finite and > 0 (got {bead_mass})"),
                "give the bead mass, e.g. 5.0 (in fluid-particle masses)",
            ));
        }
        if !(bond_length.is_finite() && bond_length > 0.0) {
            return Err(err(
                "md.system.Chains.bond_length",
                format!("must be finite and > 0 (got {bond_length})"),
                "use an initial bond length such as 0.97",
            ));
        }
        if chain_length > 1 {
            match self.bonds.first() {
                None => {
                    return Err(err(
                        "md.bonds",
                        "chains need bond type 1 but no bond style is given".into(),
                        "add bonds: [Fene(k: 30.0, r0: 1.5)]",
                    ))
                }
                Some(BondStyle::Fene { r0, .. }) if bond_length >= *r0 => {
                    return Err(err(
                        "md.system.Chains.bond_length",
                        format!(
                            "initial bond length {bond_length} is at or beyond the FENE R0 = {r0}"
                        ),
                        "start bonds shorter than R0, e.g. bond_length: 0.97 with r0: 1.5",
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn validate_pair(&self) -> std::result::Result<(), ConfigError> {
        match &self.pair {
            PairSpec::Wca { epsilon, sigma } => {
                for (name, v) in [("epsilon", epsilon), ("sigma", sigma)] {
                    if !(v.is_finite() && *v > 0.0) {
                        return Err(err(
                            &format!("md.pair.Wca.{name}"),
                            format!("must be finite and > 0 (got {v})"),
                            "use epsilon: 1.0, sigma: 1.0",
                        ));
                    }
                }
                Ok(())
            }
            PairSpec::Dpd {
                gamma,
                cutoff,
                exponent,
                ..
            } => check_dpd("md.pair.Dpd", *gamma, *cutoff, *exponent),
            PairSpec::Lj { coeffs, .. } if coeffs.is_empty() => Err(err(
                "md.pair.Lj.coeffs",
                "is empty".into(),
                "give (i, j, epsilon, sigma, cutoff) for every type pair, e.g. [(1, 1, 1.0, 1.0, 2.5)]",
            )),
            _ => Ok(()),
        }
    }
}
