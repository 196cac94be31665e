//! The figures of a coupled run under shear: the solution's viscosity and its parts, and the
//! chains' conformation (for `summary.json` and `md_summary.json`).

use serde::Serialize;

use crate::md::rheology::{orientation_angle_deg, SoluteStats};
use crate::report::{with_error, ValueWithError};
use crate::stats::RunStats;

/// The solution viscosity η = −⟨Π_xy⟩/γ̇ and its parts, each with its block-averaged error.
#[derive(Clone, Debug, Serialize)]
pub struct SolutionSummary {
    pub shear_rate: f64,
    /// Fluid streaming + collision (fluid and solutes) + solutes, summed per sample.
    pub solution_viscosity: Option<ValueWithError>,
    /// The solvent part: the fluid's streaming (kinetic) and the MPC collision, in which the
    /// solutes take part (collisional).
    pub solvent_viscosity: Option<ValueWithError>,
    pub solvent_kinetic: Option<ValueWithError>,
    pub solvent_collisional: Option<ValueWithError>,
    /// The solute part: −P_xy/γ̇ of the MD particles (kinetic relative to the flow + virial).
    pub solute_viscosity: Option<ValueWithError>,
    pub solute_kinetic: Option<ValueWithError>,
    /// SRD theory for the pure solvent at this density, for comparison.
    pub pure_solvent_theory: f64,
    /// Time-averaged gyration tensor of a chain: xx, yy, zz, xy.
    pub gyration: [Option<ValueWithError>; 4],
    /// χ of the time-averaged gyration tensor (degrees).
    pub orientation_angle_deg: Option<f64>,
    pub end_to_end2: Option<ValueWithError>,
    /// Wi = γ̇ τ when `md.relaxation_time` τ is given.
    pub weissenberg: Option<f64>,
    /// Wi tan 2χ (the orientation resistance), when Wi is known.
    pub orientation_resistance: Option<f64>,
}

impl SolutionSummary {
    pub fn new(
        shear_rate: f64,
        fluid: &RunStats,
        solutes: &SoluteStats,
        pure_solvent_theory: f64,
        relaxation_time: Option<f64>,
    ) -> SolutionSummary {
        let (k, c) = (&fluid.viscosity_kinetic, &fluid.viscosity_collisional);
        let solvent = match (k.mean(), c.mean()) {
            (Some(a), Some(b)) => Some(ValueWithError {
                value: a + b,
                error: match (k.std_error(), c.std_error()) {
                    (Some(x), Some(y)) => Some((x * x + y * y).sqrt()),
                    _ => None,
                },
            }),
            _ => None,
        };
        let gyration = [0, 1, 2, 3].map(|a| with_error(&solutes.gyration[a]));
        let g_mean = [0, 1, 2, 3].map(|a| solutes.gyration[a].mean());
        let chi = match g_mean {
            [Some(xx), Some(yy), Some(zz), Some(xy)] => {
                Some(orientation_angle_deg(&[xx, yy, zz, xy, 0.0, 0.0]))
            }
            _ => None,
        };
        let wi = relaxation_time.map(|tau| shear_rate * tau);
        let resistance = match (wi, chi) {
            (Some(w), Some(x)) => Some(w * (2.0 * x).to_radians().tan()),
            _ => None,
        };
        SolutionSummary {
            shear_rate,
            solution_viscosity: with_error(&solutes.viscosity_solution),
            solvent_viscosity: solvent,
            solvent_kinetic: with_error(k),
            solvent_collisional: with_error(c),
            solute_viscosity: with_error(&solutes.viscosity_solute),
            solute_kinetic: with_error(&solutes.viscosity_solute_kinetic),
            pure_solvent_theory,
            gyration,
            orientation_angle_deg: chi,
            end_to_end2: with_error(&solutes.end_to_end2),
            weissenberg: wi,
            orientation_resistance: resistance,
        }
    }
}
