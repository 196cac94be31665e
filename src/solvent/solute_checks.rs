//! The checks of solute arrays handed over from the host: lengths, values (finite, within
//! the coordinate limit, masses > 0 and within the fixed-point sums' cap) and walls, all
//! before anything changes.

use super::Solvent;
use crate::error::Result;

impl Solvent {
    /// Reject solute arrays that the collision cannot take.
    pub fn check_solutes(&self, pos: &[[f64; 3]], vel: &[[f64; 3]], mass: &[f64]) -> Result<()> {
        crate::backend::check_solute_lengths(pos.len(), vel.len(), mass.len())?;
        crate::backend::check_host_solutes(pos, vel, mass, 0..pos.len())?;
        let cap = self.phys.sums.as_ref().map(|s| s.max_solute_mass);
        crate::backend::check_solute_masses_fit(mass, cap)?;
        crate::backend::check_solutes_outside_walls(&self.phys, pos)
    }

    /// The checks of [`Solvent::check_solutes`] a one-call step makes on the host: all of them, or,
    /// where the backend tests the values itself before anything changes
    /// (`Backend::checks_host_solute_values`) and there are no walls, the lengths only.
    pub(super) fn check_host_input(
        &self,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<()> {
        let backend_tests = self.backend.checks_host_solute_values(pos, vel, mass);
        self.check_unless_tested(backend_tests, pos, vel, mass)
    }

    /// The checks `begin_step` makes on the host: as [`Solvent::check_host_input`], where the
    /// backend's `begin_coupled` itself tests the values (`Backend::begin_coupled_tests_values`;
    /// a backend that tests them as it stages them may stage only at the finish).
    pub(super) fn check_begin_input(
        &self,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<()> {
        let backend_tests = self.backend.begin_coupled_tests_values(pos, vel, mass);
        self.check_unless_tested(backend_tests, pos, vel, mass)
    }

    /// Every check, or the lengths only where there are no walls and `backend_tests`.
    fn check_unless_tested(
        &self,
        backend_tests: bool,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<()> {
        // with walls the values first: a NaN position is not "inside the wall"
        let lengths_only = self.phys.walls.is_none()
            && vel.len() == pos.len()
            && mass.len() == pos.len()
            && backend_tests;
        if lengths_only {
            return Ok(());
        }
        self.check_solutes(pos, vel, mass)
    }
}
