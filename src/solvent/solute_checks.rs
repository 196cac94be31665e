//! The checks of solute arrays handed over from the host: lengths, values (finite, within
//! the coordinate limit, masses > 0 and within the fixed-point sums' cap) and walls, all
//! before anything changes.

use super::Solvent;
use crate::backend::HostHandover;
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

    /// The checks of [`Solvent::check_solutes`] the call of `handover` makes on the host: all of
    /// them, or, where the backend tests the values itself before anything changes
    /// (`Backend::tests_host_solute_values` in that call, or, over ranks, one call's solutes
    /// taken and tested now: `Backend::take_host_solutes_tested`) and there are no walls, the
    /// lengths only.
    pub(super) fn check_host_input(
        &mut self,
        handover: HostHandover,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<()> {
        // with walls the values first: a NaN position is not "inside the wall"
        let plain = self.phys.walls.is_none() && vel.len() == pos.len() && mass.len() == pos.len();
        if plain
            && self
                .backend
                .tests_host_solute_values(handover, pos, vel, mass)
        {
            return Ok(());
        }
        if plain
            && handover == HostHandover::OneCall
            && self.backend.take_host_solutes_tested(pos, vel, mass)?
        {
            return Ok(());
        }
        self.check_solutes(pos, vel, mass)
    }
}
