//! Flow profiles between walls from the SRD viscosity, for the tests and the run summary.
//!
//! Steady laminar flow of an incompressible fluid of mass density ρ and shear viscosity η,
//! driven by a body force f per particle (force density n f = ρ g along x) with no-slip
//! walls (Landau & Lifshitz, Fluid Mechanics, §17; Batchelor, An Introduction to Fluid
//! Dynamics, §4.2):
//!
//! * plane Poiseuille flow between plates at y0 and y1:
//!   v(y) = n f / (2η) · (y − y0)(y1 − y), plus the Couette part of moving plates,
//!   u0 + (u1 − u0)(y − y0)/(y1 − y0): d²v/dy² = −n f / η;
//! * Hagen-Poiseuille flow in a pipe of radius R: v(r) = n f / (4η) · (R² − r²) + u_wall:
//!   (1/r) d/dr (r dv/dr) = −n f / η.
//!
//! η is the SRD viscosity of [`crate::physics::theory::srd_viscosity`].

/// Plane Poiseuille + Couette flow: vx at height `y` between plates at `y0` (moving with `u0`)
/// and `y1` (`u1`), force density `force_density` = n f along x, viscosity `eta`.
pub fn slit_velocity(
    y: f64,
    y0: f64,
    y1: f64,
    u0: f64,
    u1: f64,
    force_density: f64,
    eta: f64,
) -> f64 {
    let couette = u0 + (u1 - u0) * (y - y0) / (y1 - y0);
    couette + force_density / (2.0 * eta) * (y - y0) * (y1 - y)
}

/// Hagen-Poiseuille flow: vx at distance `r` from the axis of a pipe of radius `radius` whose
/// wall moves with `u_wall`.
pub fn pipe_velocity(r: f64, radius: f64, u_wall: f64, force_density: f64, eta: f64) -> f64 {
    u_wall + force_density / (4.0 * eta) * (radius * radius - r * r)
}

/// The viscosity from the curvature of a fitted slit profile v = c0 + c1 y + c2 y²:
/// η = −n f / (2 c2).
pub fn slit_viscosity_from_curvature(c2: f64, force_density: f64) -> f64 {
    -force_density / (2.0 * c2)
}

/// The viscosity from a fitted pipe profile v = c0 + c2 r²: η = −n f / (4 c2).
pub fn pipe_viscosity_from_curvature(c2: f64, force_density: f64) -> f64 {
    -force_density / (4.0 * c2)
}

/// Centre-line velocity of plane Poiseuille flow with resting plates: n f H² / (8η).
pub fn slit_centre_velocity(height: f64, force_density: f64, eta: f64) -> f64 {
    force_density * height * height / (8.0 * eta)
}

/// Lubrication theory of a channel of slowly varying width w(x) (Reynolds; the local flow
/// plane Poiseuille flow): the flow rate per unit depth under force density n f along x is
/// Q = n f / (12 η) · 1/⟨w⁻³⟩, the mean over one period. A wavy channel of constant vertical
/// width H gives the straight slit's n f H³/(12 η) to first order in its slope.
pub fn lubrication_flow_rate(mean_inverse_cube_width: f64, force_density: f64, eta: f64) -> f64 {
    force_density / (12.0 * eta * mean_inverse_cube_width)
}

/// ⟨w⁻³⟩ over one period of w(x) = H + 2A cos(2πx/L) (a cosine expansion-contraction):
/// (2H² + (2A)²) / (2 (H² − (2A)²)^(5/2)) (the closed form of ∫ dθ/(2π (H + a cos θ)³),
/// a = 2A < H).
pub fn expansion_mean_inverse_cube_width(height: f64, amplitude: f64) -> f64 {
    let a = 2.0 * amplitude;
    let (h2, a2) = (height * height, a * a);
    (2.0 * h2 + a2) / (2.0 * (h2 - a2).powf(2.5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_inverse_cube_width_is_the_quadrature() {
        let (h, a) = (8.0, 2.5);
        let n = 100_000;
        let quad: f64 = (0..n)
            .map(|i| {
                let th = std::f64::consts::TAU * (i as f64 + 0.5) / n as f64;
                (h + 2.0 * a * th.cos()).powi(-3)
            })
            .sum::<f64>()
            / n as f64;
        let exact = expansion_mean_inverse_cube_width(h, a);
        assert!((quad / exact - 1.0).abs() < 1e-12, "{quad} vs {exact}");
        assert!((expansion_mean_inverse_cube_width(h, 0.0) * h.powi(3) - 1.0).abs() < 1e-15);
    }
}
