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
