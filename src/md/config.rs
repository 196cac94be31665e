//! The `md` section of a run config: what the solutes are, how they interact, and how often
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

use super::build::{maxwell_velocities, polymer_chains_in};
use super::data::{read_data_file, AtomStyle};
use super::engine::{Md, MdSettings};
use super::forcefield::{BondStyle, DpdParams, ForceField, LjTable, MdThermostat, PairStyle};
use super::gpu::MdBackend;
use super::integrate::check_langevin_damping;
use super::neighbor::NeighborMode;
use super::settings::{check_skin, ShearFlow};
use super::system::System;
use super::walls::{pad_box, WallPotential};
use crate::config::Config;
use crate::error::{ConfigError, Result};

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

fn err(field: &str, problem: String, fix: &str) -> ConfigError {
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

    fn force_field(&self, n_types: usize) -> std::result::Result<ForceField, ConfigError> {
        let pair = match &self.pair {
            PairSpec::None => PairStyle::None,
            PairSpec::Wca { epsilon, sigma } => {
                PairStyle::Lj(LjTable::wca(n_types, *epsilon, *sigma))
            }
            PairSpec::Lj { coeffs, shift } => {
                let mut entries = Vec::with_capacity(coeffs.len());
                for &(i, j, e, s, rc) in coeffs {
                    if i == 0 || j == 0 {
                        return Err(err(
                            "md.pair.Lj.coeffs",
                            format!("type ({i}, {j}): types are 1-based"),
                            "number types from 1 as in LAMMPS",
                        ));
                    }
                    entries.push((i - 1, j - 1, e, s, rc));
                }
                PairStyle::Lj(LjTable::from_entries(n_types, &entries, *shift)?)
            }
            PairSpec::Dpd {
                a,
                gamma,
                cutoff,
                exponent,
            } => {
                let mut p = DpdParams::uniform(n_types, f64::NAN, *gamma, *cutoff, *exponent);
                for &(i, j, aij) in a {
                    if i == 0 || j == 0 || i > n_types || j > n_types {
                        return Err(err(
                            "md.pair.Dpd.a",
                            format!("type pair ({i}, {j}) outside 1..={n_types}"),
                            "use 1-based types that exist in the system",
                        ));
                    }
                    p.a[(i - 1) * n_types + (j - 1)] = aij;
                    p.a[(j - 1) * n_types + (i - 1)] = aij;
                }
                if let Some(k) = p.a.iter().position(|v| !v.is_finite()) {
                    return Err(err(
                        "md.pair.Dpd.a",
                        format!(
                            "no finite a_ij for type pair ({}, {})",
                            k / n_types + 1,
                            k % n_types + 1
                        ),
                        "give (i, j, a_ij) for every type pair",
                    ));
                }
                PairStyle::Dpd(p)
            }
        };
        Ok(ForceField {
            pair,
            bond_styles: self.bonds.clone(),
        })
    }

    /// The solute system of this config (box = the MPC box; between walls, chains start at
    /// least the wall cutoff away from the walls).
    pub fn system(&self, cfg: &Config) -> std::result::Result<System, ConfigError> {
        let box_len = cfg.cells.map(|c| c as f64);
        let walls = WallPotential::from_config(cfg);
        let allowed = |p: [f64; 3]| walls.as_ref().map_or(true, |w| w.admits(p, w.cutoff));
        let mut sys = match &self.system {
            SystemSpec::Chains {
                n_chains,
                chain_length,
                bead_mass,
                bond_length,
            } => polymer_chains_in(
                box_len,
                *n_chains,
                *chain_length,
                *bead_mass,
                *bond_length,
                0.9 * bond_length.min(1.0),
                cfg.seed,
                &allowed,
            )?,
            SystemSpec::DataFile { path, atom_style } => {
                let s = read_data_file(path, *atom_style)?;
                for k in 0..3 {
                    if (s.box_len[k] - box_len[k]).abs() > 1e-9 * box_len[k] {
                        return Err(err(
                            "md.system.DataFile.path",
                            format!(
                                "the data file box {:?} differs from the MPC box {:?} (cells)",
                                s.box_len, box_len
                            ),
                            "make xlo xhi etc. span exactly the MPC box, or change `cells`",
                        ));
                    }
                }
                s
            }
        };
        if sys.vel.iter().all(|v| *v == [0.0; 3]) {
            maxwell_velocities(&mut sys, cfg.kt, cfg.seed);
        }
        Ok(sys)
    }

    /// The fields a resumed run may not change (everything but the outputs, the backend and
    /// the relaxation time used only in the summary), named as in the config.
    pub fn resume_differences(&self, other: &MdConfig) -> Vec<String> {
        let mut out = Vec::new();
        let mut check = |name: &str, differs: bool| {
            if differs {
                out.push(format!("md.{name}"));
            }
        };
        check(
            "steps_per_collision",
            self.steps_per_collision != other.steps_per_collision,
        );
        check("system", self.system != other.system);
        check("pair", self.pair != other.pair);
        check("bonds", self.bonds != other.bonds);
        check("thermostat", self.thermostat != other.thermostat);
        check("skin", self.skin != other.skin);
        check("neighbor", self.neighbor != other.neighbor);
        check("reorder_every", self.reorder_every != other.reorder_every);
        out
    }

    /// The MD engine of this config, with initial forces computed (between walls: the wall
    /// potential on, the box padded across the channel, see `md::walls`).
    pub fn build(&self, cfg: &Config) -> Result<Md> {
        let mut sys = self.system(cfg)?;
        let ff = self.force_field(sys.n_types().max(1))?;
        let walls = WallPotential::from_config(cfg);
        if let Some(w) = &walls {
            check_inside_walls(&sys, w)?;
            pad_box(
                &mut sys,
                w,
                ff.cutoff_with(self.thermostat) + self.skin + 1.0,
            );
        }
        let settings = MdSettings {
            dt: cfg.time_step / self.steps_per_collision as f64,
            kt: cfg.kt,
            seed: cfg.seed,
            skin: self.skin,
            neighbor: self.neighbor,
            reorder_every: self.reorder_every,
            threads: cfg.tuning.cpu_threads,
            shear: (cfg.shear_rate != 0.0).then_some(ShearFlow {
                rate: cfg.shear_rate,
                collision_time: cfg.time_step,
                steps_per_collision: self.steps_per_collision as u64,
            }),
        };
        let mut md = Md::new(sys, ff, self.thermostat, settings)?;
        if walls.is_some() {
            md.set_walls(walls)?;
        }
        Ok(md)
    }
}

/// The most wall energy a solute may start with (in units of the wall's ε): at 0.85 σ from a
/// WCA wall it has about 18 ε; much closer, the first MD step throws the bead off at a speed
/// that tears its bonds, and the error would blame the bond instead of the start.
pub const MAX_START_WALL_ENERGY: f64 = 20.0;

/// Every solute of a data file between the walls, and outside the walls' repulsive core.
fn check_inside_walls(sys: &System, w: &WallPotential) -> std::result::Result<(), ConfigError> {
    for i in 0..sys.len() {
        let d = crate::physics::walls::WallShape::signed_distance(&w.shape, sys.pos[i]);
        let problem = match w.force(sys.pos[i]) {
            Err(_) => format!(
                "atom {} at {:?} is inside the wall or on its surface",
                sys.tag[i], sys.pos[i]
            ),
            Ok(Some((_, e))) if e > MAX_START_WALL_ENERGY * w.epsilon => format!(
                "atom {} at {:?} is {d:.3} from the wall, inside its repulsive core (sigma \
                 {}): it would start with a wall energy of {:.1} epsilon and be thrown off in \
                 the first MD step",
                sys.tag[i],
                sys.pos[i],
                w.sigma,
                e / w.epsilon
            ),
            _ => continue,
        };
        return Err(err(
            "md.system",
            problem,
            &format!(
                "place the solutes between the walls and at least {:.2} from them (0.85 sigma of \
                 walls.solutes; walls: the fluid's channel, cells in units of a)",
                0.85 * w.sigma
            ),
        ));
    }
    Ok(())
}
