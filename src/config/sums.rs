//! The range of a run's fixed-point sums (`crate::fixed_sums`) from its config, and the check
//! that refuses a run whose sums would not fit (before anything is allocated).

use super::md::SystemSpec;
use super::walls::WallsConfig;
use super::Config;
use crate::error::ConfigError;
use crate::fixed_sums::{FixedScales, SumKind, SumRange, SOLUTE_MASS_RATIO};

impl Config {
    /// Whether this run sums in fixed point (`tuning.sums`, else `MPCBOX_CELL_SUMS`, else
    /// fixed).
    pub fn fixed_sums_wanted(&self) -> bool {
        self.tuning.sums() == crate::config::SumArithmetic::Fixed
    }

    /// The parameters that bound this run's sums.
    pub fn sum_range(&self) -> SumRange {
        let wall_speed = self.walls.as_ref().map_or(0.0, WallsConfig::fastest_speed);
        // a body force's flow is bounded by the grid: a particle streaming half the box per
        // step breaks the streaming (and the imposed speeds are held below it by their checks)
        let body = if self.body_force.iter().any(|&f| f != 0.0) {
            let edge = self.cells.iter().copied().min().unwrap_or(2) as f64;
            edge / (2.0 * self.time_step)
        } else {
            0.0
        };
        let bead_mass = match self.md.as_ref().map(|md| &md.system) {
            Some(SystemSpec::Chains { bead_mass, .. }) => *bead_mass,
            _ => 0.0,
        };
        SumRange {
            mass: self.mass,
            kt: self.kt,
            particles_per_cell: self.particles_per_cell,
            cells: self.cells,
            solute_mass: bead_mass.max(SOLUTE_MASS_RATIO * self.mass),
            flow_speed: 1.5 * self.shear_rate.abs() * self.cells[1] as f64 + wall_speed + body,
            imposed_speed: 1.5 * self.shear_rate.abs() * self.cells[1] as f64 + wall_speed,
        }
    }

    /// The scales of this run's fixed-point sums, None where the process sums in f64.
    pub fn fixed_scales(&self) -> Option<FixedScales> {
        if !self.fixed_sums_wanted() {
            return None;
        }
        FixedScales::new(&self.sum_range()).ok()
    }

    /// Refuses a run whose fixed-point sums would be coarser than the promised resolution,
    /// naming the parameter that stretches the range most.
    pub(super) fn validate_sums(&self) -> Result<(), ConfigError> {
        if !self.fixed_sums_wanted() {
            return Ok(());
        }
        let range = self.sum_range();
        let Err(e) = FixedScales::new(&range) else {
            return Ok(());
        };
        let thermal = crate::fixed_sums::THERMAL_SIGMAS * (self.kt / self.mass).sqrt();
        let field = if range.flow_speed > thermal {
            if self.body_force.iter().any(|&f| f != 0.0) {
                "body_force"
            } else if self.walls.is_some() {
                "walls"
            } else {
                "shear_rate"
            }
        } else if range.solute_mass > SOLUTE_MASS_RATIO * self.mass {
            "md.system.Chains.bead_mass"
        } else {
            "particles_per_cell"
        };
        let what = match e.kind {
            SumKind::Momentum => "momentum",
            SumKind::Energy => "kinetic energy",
            SumKind::Mass => "mass",
            SumKind::Count => "count",
            SumKind::Moment | SumKind::Second => "mass moment",
            SumKind::Angular => "angular momentum",
        };
        Err(ConfigError {
            field: field.into(),
            problem: format!(
                "the cells' {what} sums would resolve only {:.3e} of their thermal unit in \
                 64-bit fixed point (2^-{} is needed): speeds up to {:.3e} and {:.3e} fluid \
                 masses per cell must fit",
                e.resolution,
                crate::fixed_sums::MIN_RESOLUTION_BITS,
                range.max_speed(),
                range.cell_mass() / self.mass
            ),
            fix: "lower the imposed flow (shear_rate, wall speeds, body_force with a larger \
                  time_step), the solute masses or particles_per_cell; or sum in f64 with \
                  MPCBOX_CELL_SUMS=float (then runs agree only to rounding across thread, slab \
                  and GPU counts)"
                .into(),
        })
    }
}
