//! Particle data of an MD system: positions (wrapped into the box), velocities, image counts,
//! types, tags, molecule ids, per-type masses and bonds (by tag, so that reordering particles
//! never touches them).

use super::boundary::{LeesEdwards, PeriodicBox};
use crate::error::ConfigError;

/// One bond between the particles tagged `a` and `b`, of bond type `kind` (0-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Bond {
    pub a: u32,
    pub b: u32,
    pub kind: u32,
}

/// An orthorhombic periodic box [0, L) in each direction, sheared or not.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct System {
    pub box_len: [f64; 3],
    /// Positions wrapped into [0, L).
    pub pos: Vec<[f64; 3]>,
    pub vel: Vec<[f64; 3]>,
    /// Periodic image counts: the unwrapped position is pos + image · L, plus
    /// image_y · D(t) along x under Lees-Edwards shear ([`System::unwrapped`]).
    pub image: Vec<[i32; 3]>,
    /// Particle type, 0-based (LAMMPS type − 1).
    pub typ: Vec<u32>,
    /// Unique particle id (LAMMPS atom id).
    pub tag: Vec<u32>,
    /// Molecule id (0: none).
    pub mol: Vec<u32>,
    /// Mass of each type.
    pub type_mass: Vec<f64>,
    pub bonds: Vec<Bond>,
    /// The Lees-Edwards state at the current time (zero without shear).
    pub lees_edwards: LeesEdwards,
}

fn cfg_err(field: &str, problem: String, fix: &str) -> ConfigError {
    ConfigError {
        field: field.into(),
        problem,
        fix: fix.into(),
    }
}

impl System {
    pub fn len(&self) -> usize {
        self.pos.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pos.is_empty()
    }

    pub fn n_types(&self) -> usize {
        self.type_mass.len()
    }

    pub fn volume(&self) -> f64 {
        self.box_len.iter().product()
    }

    /// The boundary conditions: minimum images and wrapping.
    pub fn periodic_box(&self) -> PeriodicBox {
        PeriodicBox::sheared(self.box_len, self.lees_edwards)
    }

    pub fn mass(&self, i: usize) -> f64 {
        self.type_mass[self.typ[i] as usize]
    }

    /// Per-particle masses (the layout `Solvent::step_with_solutes` takes).
    pub fn masses(&self) -> Vec<f64> {
        self.typ
            .iter()
            .map(|&t| self.type_mass[t as usize])
            .collect()
    }

    /// The unwrapped position of particle i: continuous in time, also across the sheared
    /// y boundary (each y period adds the total offset D(t) along x).
    pub fn unwrapped(&self, i: usize) -> [f64; 3] {
        let mut u = self.pos[i];
        for (k, c) in u.iter_mut().enumerate() {
            *c += self.image[i][k] as f64 * self.box_len[k];
        }
        if self.lees_edwards != LeesEdwards::default() {
            u[0] += self.image[i][1] as f64 * self.lees_edwards.total(self.box_len[0]);
        }
        u
    }

    /// Append a particle; the position is wrapped into the box (image counts follow).
    pub fn push(&mut self, pos: [f64; 3], vel: [f64; 3], typ: u32, tag: u32, mol: u32) {
        let mut p = pos;
        let mut img = [0i32; 3];
        for k in 0..3 {
            let l = self.box_len[k];
            if l > 0.0 && p[k].is_finite() {
                let s = (p[k] / l).floor();
                p[k] -= s * l;
                if p[k] >= l {
                    p[k] -= l;
                }
                img[k] = s as i32;
            }
        }
        self.pos.push(p);
        self.vel.push(vel);
        self.image.push(img);
        self.typ.push(typ);
        self.tag.push(tag);
        self.mol.push(mol);
    }

    /// Total momentum Σ m v.
    pub fn momentum(&self) -> [f64; 3] {
        let mut p = [0.0; 3];
        for i in 0..self.len() {
            let m = self.mass(i);
            for (k, pk) in p.iter_mut().enumerate() {
                *pk += m * self.vel[i][k];
            }
        }
        p
    }

    pub fn kinetic_energy(&self) -> f64 {
        (0..self.len())
            .map(|i| {
                let v = self.vel[i];
                0.5 * self.mass(i) * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
            })
            .sum()
    }

    /// Check everything a run relies on. Field names are those of the RON config / data file.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_box()?;
        self.check_array_lengths()?;
        self.check_masses()?;
        for i in 0..self.len() {
            self.check_particle(i)?;
        }
        self.check_tags_and_bonds()
    }

    fn check_box(&self) -> Result<(), ConfigError> {
        for (k, &l) in self.box_len.iter().enumerate() {
            if !(l.is_finite() && l > 0.0) {
                return Err(cfg_err(
                    "md box",
                    format!("box edge {k} is {l}"),
                    "give a finite, positive box (the MPC box `cells`, or xlo xhi etc. in the data file)",
                ));
            }
        }
        Ok(())
    }

    fn check_array_lengths(&self) -> Result<(), ConfigError> {
        let n = self.len();
        if self.vel.len() != n
            || self.image.len() != n
            || self.typ.len() != n
            || self.tag.len() != n
            || self.mol.len() != n
        {
            return Err(cfg_err(
                "md particles",
                "per-particle arrays have different lengths".into(),
                "build the system with System::push",
            ));
        }
        Ok(())
    }

    fn check_masses(&self) -> Result<(), ConfigError> {
        if self.type_mass.is_empty() && !self.is_empty() {
            return Err(cfg_err(
                "Masses",
                "no particle type has a mass".into(),
                "give a Masses section in the data file or `masses` in md config",
            ));
        }
        for (t, &m) in self.type_mass.iter().enumerate() {
            if !(m.is_finite() && m > 0.0) {
                return Err(cfg_err(
                    "Masses",
                    format!("type {} has mass {m}", t + 1),
                    "give every particle type a finite mass > 0 (Masses section or `masses`)",
                ));
            }
        }
        Ok(())
    }

    /// Finite position and velocity, a type with a mass.
    fn check_particle(&self, i: usize) -> Result<(), ConfigError> {
        if !self.pos[i].iter().all(|c| c.is_finite()) {
            return Err(cfg_err(
                "Atoms",
                format!(
                    "atom {} has a non-finite position {:?}",
                    self.tag[i], self.pos[i]
                ),
                "give finite coordinates",
            ));
        }
        if !self.vel[i].iter().all(|c| c.is_finite()) {
            return Err(cfg_err(
                "Velocities",
                format!(
                    "atom {} has a non-finite velocity {:?}",
                    self.tag[i], self.vel[i]
                ),
                "give finite velocities",
            ));
        }
        if self.typ[i] as usize >= self.n_types() {
            return Err(cfg_err(
                "Masses",
                format!(
                    "atom {} has type {} but only {} type(s) have a mass",
                    self.tag[i],
                    self.typ[i] + 1,
                    self.n_types()
                ),
                "give a mass for every atom type (Masses section) or fix the atom's type",
            ));
        }
        Ok(())
    }

    /// Unique tags; bonds join two different existing atoms.
    fn check_tags_and_bonds(&self) -> Result<(), ConfigError> {
        let mut tags = self.tag.clone();
        tags.sort_unstable();
        if let Some(w) = tags.windows(2).find(|w| w[0] == w[1]) {
            return Err(cfg_err(
                "Atoms",
                format!("atom id {} appears twice", w[0]),
                "give every atom a unique id",
            ));
        }
        for b in &self.bonds {
            for t in [b.a, b.b] {
                if tags.binary_search(&t).is_err() {
                    return Err(cfg_err(
                        "Bonds",
                        format!("bond {}-{} names atom {t}, which does not exist", b.a, b.b),
                        "bond only existing atom ids",
                    ));
                }
            }
            if b.a == b.b {
                return Err(cfg_err(
                    "Bonds",
                    format!("bond {}-{} joins an atom to itself", b.a, b.b),
                    "bond two different atoms",
                ));
            }
        }
        Ok(())
    }
}
