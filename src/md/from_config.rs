//! The bundled MD engine built from the `md` section of a run config (the section's types and
//! its file-free checks are `config::md`): what the solutes are, how they interact, and how
//! often the MPC collision couples them to the fluid.
//!
//! ```ron
//! md: (
//!     steps_per_collision: 20,   // MD steps per MPC collision: dt = time_step / 20
//!     system: Chains(n_chains: 8, chain_length: 32, bead_mass: 5.0),
//!     pair: Wca(epsilon: 1.0, sigma: 1.0),
//!     bonds: [Fene(k: 30.0, r0: 1.5)],
//! )
//! ```

use super::build::{maxwell_velocities, polymer_chains_in};
use super::data::read_data_file;
use super::engine::{Md, MdSettings};
use super::forcefield::{DpdParams, ForceField, LjTable, PairStyle};
use super::settings::ShearFlow;
use super::system::System;
use super::walls::{pad_box, WallPotential};
use crate::config::md::err;
pub use crate::config::md::{MdConfig, PairSpec, SystemSpec, TrajectoryFormat};
use crate::config::Config;
use crate::error::{ConfigError, Result};

impl MdConfig {
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
        let allowed = |p: [f64; 3]| walls.as_ref().is_none_or(|w| w.admits(p, w.cutoff));
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
        self.build_with(cfg, self.system(cfg)?)
    }

    /// [`MdConfig::build`] from `sys`, this config's [`MdConfig::system`] made once (a
    /// benchmark that needs several engines of one large system places its chains once).
    pub fn build_with(&self, cfg: &Config, mut sys: System) -> Result<Md> {
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
