//! Everything that defines the forces: the pair style and the bond styles, plus the questions
//! both engines ask of them together with the thermostat (cutoff, velocity dependence). The
//! parameter types live with their computes (`pair`, `bond`, `integrate`, `random`) and are
//! re-exported here under their old paths.

pub use super::bond::{BondEval, BondStyle};
pub use super::integrate::MdThermostat;
pub use super::pair::{DpdParams, LjPair, LjTable, PairStyle};
pub use super::random::{dpd_key, dpd_theta, langevin_normals, velocity_normals};

/// Everything that defines the forces.
#[derive(Clone, Debug, PartialEq)]
pub struct ForceField {
    pub pair: PairStyle,
    /// Bond styles, indexed by bond type (0-based).
    pub bond_styles: Vec<BondStyle>,
}

impl ForceField {
    /// The largest pair cutoff: the pair style's, or the DPD thermostat's when larger.
    pub fn cutoff_with(&self, thermostat: MdThermostat) -> f64 {
        let mut rc = self.pair.cutoff();
        if let MdThermostat::Dpd { cutoff, .. } = thermostat {
            rc = rc.max(cutoff);
        }
        rc
    }

    /// Whether forces depend on velocities (DPD pair style or thermostat), so that they must
    /// be recomputed when velocities change from outside (an MPC collision).
    pub fn velocity_dependent(&self, thermostat: MdThermostat) -> bool {
        matches!(self.pair, PairStyle::Dpd(_)) || matches!(thermostat, MdThermostat::Dpd { .. })
    }
}
