//! The flow through a domain with walls, for any shape: the volumetric flow rate along x and
//! the superficial (Darcy) velocity, from the time-averaged velocity profile weighted by each
//! profile bin's fluid volume; and, around an obstacle, its drag against the Stokes-flow theory
//! of periodic arrays (`summary.json` → `walls` → `flow`, `drag`).

use serde::Serialize;

use crate::fields::solid_fraction;
use crate::physics::walls::profile::bin_moments;
use crate::physics::walls::{Shape, Sphere};
use crate::physics::Physics;

/// `summary.json` → `walls` → `flow`: the time-averaged flow along x.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct FlowThrough {
    /// Volume of fluid per unit time through a cross-section normal to x (averaged along x).
    pub flow_rate: f64,
    /// The flow rate over the whole cross-section, walls included (Ly Lz): the mean velocity
    /// over the box volume, Darcy's velocity in a porous medium.
    pub superficial_velocity: f64,
    /// The fluid's part of the box volume.
    pub porosity: f64,
}

/// The fluid volume of each profile bin ([`Physics::profile_bins`]): a slit's layers across it
/// and a pipe's annuli exactly, the y layers about any other shape from the solid fraction of
/// their cells (None where the shape's bins are not y layers).
pub fn bin_fluid_volumes(phys: &Physics, shape: &Shape) -> Option<Vec<f64>> {
    let len = phys.length;
    let bins = phys.profile_bins();
    match shape {
        Shape::Slit(s) => {
            let across = len[3 - s.axis()];
            let weights = (0..bins).map(|i| bin_moments(shape, i).map_or(0.0, |m| m.weight));
            Some(weights.map(|w| w * len[0] * across).collect())
        }
        Shape::Pipe(_) => {
            let weights = (0..bins).map(|i| bin_moments(shape, i).map_or(0.0, |m| m.weight));
            Some(weights.map(|w| std::f64::consts::PI * w * len[0]).collect())
        }
        _ if bins == phys.cells[1] as usize => {
            let solid = solid_fraction(shape, phys.cells);
            let per_layer = (phys.cells[0] * phys.cells[2]) as usize;
            Some(
                solid
                    .chunks_exact(per_layer)
                    .map(|layer| layer.iter().map(|s| 1.0 - s).sum())
                    .collect(),
            )
        }
        _ => None,
    }
}

/// The flow through the box from `profile` (the time-averaged mean vx per profile bin).
pub fn flow_through(phys: &Physics, shape: &Shape, profile: &[f64]) -> Option<FlowThrough> {
    let volumes = bin_fluid_volumes(phys, shape)?;
    let [lx, ly, lz] = phys.length;
    let flux: f64 = profile
        .iter()
        .zip(&volumes)
        .filter(|(v, _)| v.is_finite())
        .map(|(v, vol)| v * vol)
        .sum();
    let flow_rate = flux / lx;
    Some(FlowThrough {
        flow_rate,
        superficial_velocity: flow_rate / (ly * lz),
        porosity: volumes.iter().sum::<f64>() / (lx * ly * lz),
    })
}

/// `summary.json` → `walls` → `drag`: the drag on an obstacle of a periodic array (one per box)
/// against Stokes-flow theory: a simple cubic array of spheres or a square array of cylinders.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ObstacleDrag {
    /// The solid's volume fraction.
    pub solid_fraction: f64,
    /// The mean x force of the fluid on the obstacle (per unit length for a cylinder).
    pub force: f64,
    /// The drag over Stokes' drag of a lone obstacle at the superficial velocity U:
    /// F / (6π η R U) for a sphere, F / (4π η U) per length for a cylinder.
    pub drag_factor: f64,
    /// The theory's factor at this solid fraction (Hasimoto's expansion as extended by Sangani
    /// and Acrivos, 1982; the theory viscosity of the run's rule).
    pub drag_factor_theory: f64,
    /// The radius the theory needs for the measured drag (sphere; None for a cylinder): MPC's
    /// hydrodynamic radius of the obstacle.
    pub hydrodynamic_radius: Option<f64>,
}

/// The drag factor of a simple cubic array of spheres at solid fraction φ (Stokes flow):
/// K = 1 / (1 − 1.7601 φ^⅓ + φ − 1.5593 φ² + 3.9799 φ^{8/3}), Hasimoto's (1959) series with
/// the further terms of Sangani and Acrivos (1982), cut after φ^{8/3} (meant for dilute
/// arrays: φ up to about 0.2).
pub fn cubic_array_drag_factor(phi: f64) -> f64 {
    1.0 / (1.0 - 1.7601 * phi.cbrt() + phi - 1.5593 * phi * phi + 3.9799 * phi.powf(8.0 / 3.0))
}

/// The drag factor per unit length of a square array of cylinders across the flow at solid
/// fraction φ: F / (4π η U) = 1 / (−½ ln φ − 0.738 + φ − 0.887 φ² + 2.039 φ³) (Hasimoto's
/// expansion with the terms of Sangani and Acrivos, 1982).
pub fn square_array_drag_factor(phi: f64) -> f64 {
    1.0 / (-0.5 * phi.ln() - 0.738 + phi - 0.887 * phi * phi + 2.039 * phi.powi(3))
}

/// The drag on a sphere or a cylinder across the flow (fluid outside, one per periodic box)
/// with the mean x force `force` on it and the flow `flow`; None for other shapes, for a box
/// that is not a cube (sphere) or whose x-y section is not a square (cylinder), or without flow.
pub fn obstacle_drag(
    phys: &Physics,
    shape: &Shape,
    viscosity: f64,
    force: f64,
    flow: &FlowThrough,
) -> Option<ObstacleDrag> {
    let Shape::Sphere(Sphere {
        radius,
        fluid_inside: false,
        along_z,
        ..
    }) = *shape
    else {
        return None;
    };
    let [lx, ly, lz] = phys.length;
    let u = flow.superficial_velocity;
    if u == 0.0 || viscosity <= 0.0 {
        return None;
    }
    let pi = std::f64::consts::PI;
    if along_z {
        if lx != ly {
            return None;
        }
        let phi = pi * radius * radius / (lx * ly);
        let per_length = force / lz;
        return Some(ObstacleDrag {
            solid_fraction: phi,
            force: per_length,
            drag_factor: per_length / (4.0 * pi * viscosity * u),
            drag_factor_theory: square_array_drag_factor(phi),
            hydrodynamic_radius: None,
        });
    }
    if lx != ly || ly != lz {
        return None;
    }
    let phi = 4.0 / 3.0 * pi * radius.powi(3) / (lx * ly * lz);
    let theory = cubic_array_drag_factor(phi);
    // the radius R_h with F = 6π η R_h U K(φ(R_h)): a fixed point, K varies slowly with R
    let mut r_h = radius;
    for _ in 0..50 {
        let phi_h = 4.0 / 3.0 * pi * r_h.powi(3) / (lx * ly * lz);
        r_h = force / (6.0 * pi * viscosity * u * cubic_array_drag_factor(phi_h));
    }
    Some(ObstacleDrag {
        solid_fraction: phi,
        force,
        drag_factor: force / (6.0 * pi * viscosity * radius * u),
        drag_factor_theory: theory,
        hydrodynamic_radius: r_h.is_finite().then_some(r_h),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The series tend to the lone obstacle and, at small φ, to their leading terms: Hasimoto's
    /// 1 + 1.7601 φ^⅓ for spheres and 1 / (½ ln(1/φ) − 0.738) for cylinders; the drag grows
    /// with the solid fraction over the range they are meant for.
    #[test]
    fn array_drag_factors_have_their_limits_and_grow_with_the_solid() {
        let phi: f64 = 1e-6;
        let leading = 1.0 + 1.7601 * phi.cbrt();
        assert!((cubic_array_drag_factor(phi) / leading - 1.0).abs() < 1e-3);
        let lone = 1.0 / (-0.5 * phi.ln() - 0.738);
        assert!((square_array_drag_factor(phi) / lone - 1.0).abs() < 1e-5);
        let grid: Vec<f64> = (1..=40).map(|i| i as f64 * 0.005).collect();
        for w in grid.windows(2) {
            assert!(cubic_array_drag_factor(w[1]) > cubic_array_drag_factor(w[0]));
            assert!(square_array_drag_factor(w[1]) > square_array_drag_factor(w[0]));
        }
    }
}
