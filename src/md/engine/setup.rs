//! Building a CPU engine: [`Md::new`] as a sequence of named checks (settings, pair style,
//! thermostat, bonds, box) and set-up steps (thread pool, neighbour mode, per-particle data,
//! initial forces). The GPU engine runs the same checks by building a CPU engine first.

use std::sync::Arc;

use super::{cfg_err, Md};
use crate::error::{MpcError, Result};
use crate::md::bond::BondTopology;
use crate::md::forcefield::{ForceField, MdThermostat, PairStyle};
use crate::md::integrate::check_langevin_damping;
use crate::md::neighbor::{use_verlet_list, CellList, VerletList};
use crate::md::settings::{check_skin, ForceReport, MdSettings};
use crate::md::system::System;

impl Md {
    /// Validate the system and force field, build lists and compute the initial forces.
    pub fn new(
        mut sys: System,
        ff: ForceField,
        thermostat: MdThermostat,
        settings: MdSettings,
    ) -> Result<Md> {
        sys.validate()?;
        if let Some(shear) = settings.shear {
            check_shear(shear.rate)?;
            sys.lees_edwards = shear.lees_edwards_at(0, settings.dt, sys.box_len);
        }
        check_settings(&settings)?;
        check_pair(&ff.pair, &sys)?;
        check_thermostat(thermostat)?;
        check_bonds(&ff, &sys)?;
        check_box(&sys, ff.cutoff_with(thermostat))?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(settings.threads)
            .build()
            .map_err(|e| MpcError::Device(format!("thread pool: {e}")))?;
        let n = sys.len();
        let mut md = Md {
            inv_mass: Vec::new(),
            force: vec![[0.0; 3]; n],
            sys,
            ff,
            thermostat,
            settings,
            step: 0,
            cells: CellList::default(),
            verlet: VerletList::default(),
            use_list: false,
            bonds: BondTopology::default(),
            report: ForceReport::default(),
            pool: Arc::new(pool),
            walls: None,
        };
        md.use_list = use_verlet_list(
            md.settings.neighbor,
            md.sys.len(),
            md.sys.box_len,
            md.cutoff(),
            md.settings.skin,
        );
        md.refresh_per_particle();
        md.initial_forces()?;
        Ok(md)
    }

    /// The first force evaluation; a FENE bond broken at the start is a problem of the
    /// input (the data file or the chain builder), so the error says so.
    fn initial_forces(&mut self) -> Result<()> {
        self.compute_forces().map_err(|e| match e {
            // a torn bond before any step: the input's, not the dynamics'
            MpcError::Unstable { what, .. } if what.contains("FENE") => {
                MpcError::Config(crate::error::ConfigError {
                    field: "Bonds".into(),
                    problem: what
                        .trim_start_matches("md.bonds: ")
                        .replace(" (MD step)", "")
                        + " at the start",
                    fix: "start FENE bonds shorter than R0 (md.bonds r0), e.g. place bonded \
                          beads about 0.97 σ apart"
                        .into(),
                })
            }
            other => other,
        })
    }
}

fn check_shear(rate: f64) -> Result<()> {
    if !rate.is_finite() {
        return Err(cfg_err(
            "shear_rate",
            format!("must be finite (got {rate})"),
            "give a finite shear rate such as 0.05",
        ));
    }
    Ok(())
}

fn check_settings(s: &MdSettings) -> Result<()> {
    if !(s.dt.is_finite() && s.dt > 0.0) {
        return Err(cfg_err(
            "md.dt",
            format!("must be finite and > 0 (got {})", s.dt),
            "set an MD time step such as 0.005 (or raise md.steps_per_collision)",
        ));
    }
    if !(s.kt.is_finite() && s.kt > 0.0) {
        return Err(cfg_err(
            "kT",
            format!("must be finite and > 0 (got {})", s.kt),
            "set a positive thermal energy such as 1.0",
        ));
    }
    Ok(check_skin(s.skin)?)
}

/// The pair coefficients cover every type of the system; DPD parameters are sane.
fn check_pair(pair: &PairStyle, sys: &System) -> Result<()> {
    match pair {
        PairStyle::Lj(t) if t.n < sys.n_types() => Err(cfg_err(
            "md.pair",
            format!(
                "LJ coefficients for {} type(s), the system has {}",
                t.n,
                sys.n_types()
            ),
            "give coefficients for every type pair",
        )),
        PairStyle::Dpd(d) => {
            if d.n < sys.n_types() {
                return Err(cfg_err(
                    "md.pair",
                    format!(
                        "DPD a_ij for {} type(s), the system has {}",
                        d.n,
                        sys.n_types()
                    ),
                    "give a_ij for every type pair",
                ));
            }
            check_dpd(d.gamma, d.cutoff, d.exponent, "md.pair.Dpd")?;
            if d.a.iter().any(|a| !a.is_finite()) {
                return Err(cfg_err(
                    "md.pair.Dpd.a",
                    "a_ij must be finite".into(),
                    "give finite conservative amplitudes such as 25.0",
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn check_thermostat(thermostat: MdThermostat) -> Result<()> {
    match thermostat {
        MdThermostat::Langevin { damping } => Ok(check_langevin_damping(damping)?),
        MdThermostat::Dpd {
            gamma,
            cutoff,
            exponent,
        } => check_dpd(gamma, cutoff, exponent, "md.thermostat.Dpd"),
        MdThermostat::None => Ok(()),
    }
}

/// Every bond style is sane and every bond has a style.
fn check_bonds(ff: &ForceField, sys: &System) -> Result<()> {
    for (k, b) in ff.bond_styles.iter().enumerate() {
        b.validate(k)?;
    }
    for b in &sys.bonds {
        if b.kind as usize >= ff.bond_styles.len() {
            return Err(cfg_err(
                "Bonds",
                format!(
                    "bond {}-{} has bond type {} but {} bond style(s) are defined",
                    b.a,
                    b.b,
                    b.kind + 1,
                    ff.bond_styles.len()
                ),
                "define a style for every bond type in md.bonds",
            ));
        }
    }
    Ok(())
}

/// The minimum image needs every box edge at least twice the pair cutoff.
fn check_box(sys: &System, cutoff: f64) -> Result<()> {
    for (k, &l) in sys.box_len.iter().enumerate() {
        if l < 2.0 * cutoff {
            return Err(cfg_err(
                "md box",
                format!("box edge {k} = {l} is shorter than twice the pair cutoff {cutoff}"),
                "use a larger box or a shorter cutoff",
            ));
        }
    }
    Ok(())
}

fn check_dpd(gamma: f64, cutoff: f64, exponent: f64, field: &str) -> Result<()> {
    if !(gamma.is_finite() && gamma >= 0.0) {
        return Err(cfg_err(
            &format!("{field}.gamma"),
            format!("must be finite and ≥ 0 (got {gamma})"),
            "give a friction such as 4.5",
        ));
    }
    if !(cutoff.is_finite() && cutoff > 0.0) {
        return Err(cfg_err(
            &format!("{field}.cutoff"),
            format!("must be finite and > 0 (got {cutoff})"),
            "give a cutoff such as 1.0",
        ));
    }
    if !(exponent.is_finite() && exponent > 0.0) {
        return Err(cfg_err(
            &format!("{field}.exponent"),
            format!("must be finite and > 0 (got {exponent})"),
            "use 1.0 for the standard Groot–Warren weight (0.5 or 0.25 for softer ones)",
        ));
    }
    Ok(())
}
