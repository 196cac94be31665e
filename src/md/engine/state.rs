//! The engine's state for checkpoints: everything the next step needs, so that a run resumed
//! from it continues bit for bit as if it had never stopped. Forces are kept (they are what
//! the next kick uses), and the Verlet list is rebuilt from the positions of its last build
//! in the stored particle order, which gives back the same list and so the same summation
//! order; random numbers are keyed by (seed, tag, step) and need no state.

use serde::{Deserialize, Serialize};

use super::{cfg_err, ForceReport, Md};
use crate::error::Result;
use crate::md::system::System;

/// The engine at one MD step (CPU or GPU engine; the GPU engine keeps its input order).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MdState {
    pub step: u64,
    /// The system in the engine's current particle order.
    pub system: System,
    pub force: Vec<[f64; 3]>,
    /// Positions at the last Verlet list build (empty without a list).
    pub built_at: Vec<[f64; 3]>,
    pub list_builds: u64,
    /// The Lees-Edwards offset δ at the last build (`VerletList::built_offset`).
    pub built_offset: f64,
    /// The last energy evaluation: pair and bond energy, virial, virial tensor, wall energy.
    pub report: [f64; 10],
}

impl MdState {
    pub fn report(&self) -> ForceReport {
        Self::report_from_words(&self.report)
    }

    /// The inverse of [`MdState::report_words`].
    pub fn report_from_words(r: &[f64; 10]) -> ForceReport {
        ForceReport {
            pair_energy: r[0],
            bond_energy: r[1],
            virial: r[2],
            virial_tensor: [r[3], r[4], r[5], r[6], r[7], r[8]],
            wall_energy: r[9],
        }
    }

    pub fn report_words(r: &ForceReport) -> [f64; 10] {
        let t = r.virial_tensor;
        [
            r.pair_energy,
            r.bond_energy,
            r.virial,
            t[0],
            t[1],
            t[2],
            t[3],
            t[4],
            t[5],
            r.wall_energy,
        ]
    }
}

impl Md {
    /// Put the engine at MD step `step` (its clock: random streams and the Lees-Edwards
    /// offset) without moving particles, and recompute the lists and forces there.
    pub fn set_step(&mut self, step: u64) -> Result<()> {
        self.step = step;
        if let Some(shear) = self.settings.shear {
            self.sys.lees_edwards = shear.lees_edwards_at(step, self.settings.dt, self.sys.box_len);
        }
        if self.use_list {
            self.build_lists();
        }
        self.compute_forces()
    }

    /// The state for a checkpoint.
    pub fn state(&self) -> MdState {
        MdState {
            step: self.step,
            system: self.sys.clone(),
            force: self.force.clone(),
            built_at: self.verlet.built_at.clone(),
            list_builds: self.verlet.builds,
            built_offset: self.verlet.built_offset,
            report: MdState::report_words(&self.report),
        }
    }

    /// Continue from `st` (an engine built from the same config): particles in the stored
    /// order, forces, step and the Verlet list of the last build.
    pub fn restore(&mut self, st: &MdState) -> Result<()> {
        let same = st.system.len() == self.sys.len()
            && st.system.box_len == self.sys.box_len
            && st.system.type_mass == self.sys.type_mass
            && st.force.len() == st.system.len();
        if !same {
            return Err(cfg_err(
                "md",
                format!(
                    "the checkpoint holds {} MD particles in a {:?} box, this config {} in {:?}",
                    st.system.len(),
                    st.system.box_len,
                    self.sys.len(),
                    self.sys.box_len
                ),
                "resume with the config the checkpoint was written with",
            ));
        }
        self.sys = st.system.clone();
        self.force = st.force.clone();
        self.step = st.step;
        self.report = st.report();
        self.refresh_per_particle();
        if self.use_list && !st.built_at.is_empty() {
            // the list of the last build, from the positions it was built at
            let now = std::mem::replace(&mut self.sys.pos, st.built_at.clone());
            let le = self.sys.lees_edwards;
            self.sys.lees_edwards = self.lees_edwards_at_offset(st.built_offset);
            self.build_lists();
            self.sys.pos = now;
            self.sys.lees_edwards = le;
            self.verlet.builds = st.list_builds;
        }
        Ok(())
    }

    /// The Lees-Edwards state with offset δ = `offset` (for rebuilding a list at the offset
    /// it was built at; only the separations matter there).
    fn lees_edwards_at_offset(&self, offset: f64) -> crate::md::boundary::LeesEdwards {
        let mut le = self.sys.lees_edwards;
        le.offset = offset;
        le
    }
}
