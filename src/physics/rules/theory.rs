//! Shear viscosities of the collision rules (3D, random grid shift, ideal gas of M particles per
//! cell on average, cell size a = 1), for validation and for the run summary.
//!
//! **MPC-AT** (Andersen thermostat rule without angular-momentum conservation): Noguchi, Kikuchi
//! & Gompper, EPL 78, 10005 (2007); Noguchi & Gompper, PRE 78, 016706 (2008); reviewed in
//! Gompper, Ihle, Kroll & Winkler, Adv. Polym. Sci. 221, 1 (2009):
//!
//! ```text
//! η_kin  = n kT h [ M / (M − 1 + e^{−M}) − 1/2 ]
//! η_coll = m (M − 1 + e^{−M}) / (12 a h)
//! ```
//!
//! Both follow from the arguments the review uses for SRD: a particle keeps the fraction
//! λ = 1/N of its momentum flux in a collision (the part carried by the cell velocity), so
//! `η_kin = n kT h [1/⟨1 − λ⟩ − 1/2]` with ⟨(N−1)/N⟩ = (M − 1 + e^{−M})/M over the cell of a
//! given particle; and in a linear shear flow the collision replaces every relative velocity by
//! a random one, which moves the momentum `m γ̇ Σ (y_i − ȳ)²` across the cell per collision,
//! ⟨Σ (y_i − ȳ)²⟩ = (N − 1) a²/12.
//!
//! **The +a rules.** The angular-momentum correction keeps the rigid rotation of the cell's
//! relative velocities, v_i → … + ω × (r_i − C) with ω = I⁻¹ L. The review (Sect. 2.5) states
//! the consequence: the collisional viscosity drops (by about one half for MPC-AT, whose
//! shear-flow rotation part ω = −γ̇/2 now survives the collision) and the stress becomes
//! symmetric. We evaluate the same two arguments for the +a rules exactly for N particles
//! placed uniformly in a cubic cell (Monte Carlo over positions, 10⁶ cells per N; the tables
//! below, statistical errors below 0.3%), in terms of the projection P of the relative
//! velocities on rigid rotations:
//!
//! ```text
//! collisional, MPC-AT+a: η_coll = m/(12 a h) Σ_N P_M(N) k_N,  k_N = (12/a²) ⟨Σ y_i'² − cᵀ I⁻¹ c⟩,
//!     c = Σ r_i' × (y_i' e_x) (primes: relative to C); k_N = N − 1 without +a; k_N ≈ (N − 1.92)/2
//! collisional, SRD+a:   (2/3)(1 − cos α) times the MPC-AT+a value (⟨R⟩ = (1 + 2 cos α)/3)
//! kinetic: 1 − λ_N = [N − 1 − 2t − 4c_α(u − t) − κ(N − 1 − 4u + 2t)] / N
//!     t = tr(P B P B), u = tr(P B²), B the xy flux form; κ = (1 + 2cos α + 2cos 2α)/5,
//!     c_α = (1 + 2 cos α)/3 for SRD+a; κ = c_α = 0 for MPC-AT+a
//! ```
//!
//! (κ and c_α are the rotation averages of a traceless symmetric tensor and of a vector; with
//! t = u = 0 and k_N = N − 1 the formulas give the SRD and MPC-AT results above.) For MPC-AT+a
//! at M = 10, h = 0.1 this gives η = 4.04 against 8.11 for MPC-AT: the collisional part falls
//! from 7.50 to 3.37.

/// ⟨k_N⟩ for N = 2..=8 (Monte Carlo, uniform positions in a cube); larger N: (N − 1.92)/2.
const K_SMALL: [f64; 7] = [0.2143, 0.5981, 1.0593, 1.5436, 2.0401, 2.5377, 3.0388];
/// ⟨t_N⟩ for N = 2..=8; larger N: 1/8 + 0.45/N.
const T_SMALL: [f64; 7] = [0.2344, 0.2793, 0.2418, 0.2186, 0.2025, 0.1911, 0.1824];

fn k_n(n: u32) -> f64 {
    match n {
        0 | 1 => 0.0,
        2..=8 => K_SMALL[n as usize - 2],
        _ => 0.5 * (n as f64 - 1.92),
    }
}

fn t_n(n: u32) -> f64 {
    match n {
        0 | 1 => 0.0,
        2..=8 => T_SMALL[n as usize - 2],
        _ => 0.125 + 0.45 / n as f64,
    }
}

/// tr(P B²): 1/3 for two particles (a line), 1/2 otherwise (Monte Carlo, to 10⁻⁴).
fn u_n(n: u32) -> f64 {
    match n {
        0 | 1 => 0.0,
        2 => 1.0 / 3.0,
        _ => 0.5,
    }
}

/// Poisson weights P_M(N), N = 0.. until they fall below 1e-16 past the mean.
fn poisson(m: f64) -> Vec<f64> {
    let mut w = vec![(-m).exp()];
    let mut n = 0u32;
    while (n as f64) < m + 10.0 || *w.last().unwrap() > 1e-16 {
        n += 1;
        let next = w.last().unwrap() * m / n as f64;
        w.push(next);
        if n > 100_000 {
            break;
        }
    }
    w
}

/// The particle-averaged ⟨1 − λ⟩ (a particle's cell holds it and Poisson(M) others).
fn mean_decorrelation(m: f64, one_minus_lambda: impl Fn(u32) -> f64) -> f64 {
    poisson(m)
        .iter()
        .enumerate()
        .map(|(k, w)| w * one_minus_lambda(k as u32 + 1))
        .sum()
}

/// n kT h [1/⟨1 − λ⟩ − 1/2].
fn kinetic(m: f64, kt: f64, h: f64, decorrelation: f64) -> f64 {
    m * kt * h * (1.0 / decorrelation - 0.5)
}

/// MPC-AT kinetic viscosity n kT h [M/(M − 1 + e^{−M}) − 1/2] (number density n = M/a³).
pub fn at_viscosity_kinetic(m_per_cell: f64, kt: f64, h: f64) -> f64 {
    let e = m_per_cell - 1.0 + (-m_per_cell).exp();
    m_per_cell * kt * h * (m_per_cell / e - 0.5)
}

/// MPC-AT collisional viscosity m (M − 1 + e^{−M}) / (12 a h).
pub fn at_viscosity_collisional(m_per_cell: f64, h: f64, mass: f64) -> f64 {
    let e = m_per_cell - 1.0 + (-m_per_cell).exp();
    mass * e / (12.0 * h)
}

/// MPC-AT+a kinetic viscosity (the λ_N of the module comment with κ = c_α = 0).
pub fn at_angular_viscosity_kinetic(m_per_cell: f64, kt: f64, h: f64) -> f64 {
    let d = mean_decorrelation(m_per_cell, |n| {
        (n as f64 - 1.0 - 2.0 * t_n(n)).max(0.0) / n as f64
    });
    kinetic(m_per_cell, kt, h, d)
}

/// MPC-AT+a collisional viscosity m/(12 a h) Σ_N P_M(N) k_N.
pub fn at_angular_viscosity_collisional(m_per_cell: f64, h: f64, mass: f64) -> f64 {
    let k: f64 = poisson(m_per_cell)
        .iter()
        .enumerate()
        .map(|(n, w)| w * k_n(n as u32))
        .sum();
    mass * k / (12.0 * h)
}

/// SRD+a kinetic viscosity (the λ_N of the module comment).
pub fn srd_angular_viscosity_kinetic(m_per_cell: f64, kt: f64, h: f64, angle: f64) -> f64 {
    let kappa = (1.0 + 2.0 * angle.cos() + 2.0 * (2.0 * angle).cos()) / 5.0;
    let c = (1.0 + 2.0 * angle.cos()) / 3.0;
    let d = mean_decorrelation(m_per_cell, |n| {
        let (nf, t, u) = (n as f64, t_n(n), u_n(n));
        let kept = 1.0 + 2.0 * t + 4.0 * c * (u - t) + kappa * (nf - 1.0 - 4.0 * u + 2.0 * t);
        (nf - kept).max(0.0) / nf
    });
    kinetic(m_per_cell, kt, h, d)
}

/// SRD+a collisional viscosity: (2/3)(1 − cos α) times the MPC-AT+a value.
pub fn srd_angular_viscosity_collisional(m_per_cell: f64, h: f64, mass: f64, angle: f64) -> f64 {
    2.0 / 3.0 * (1.0 - angle.cos()) * at_angular_viscosity_collisional(m_per_cell, h, mass)
}

/// SRD's kinetic shear viscosity (3D, with random grid shift; Kikuchi et al. 2003; Ihle, Tüzel &
/// Kroll 2005), units m = a = 1 scaled.
pub fn srd_viscosity_kinetic(m_per_cell: f64, kt: f64, h: f64, mass: f64, angle: f64) -> f64 {
    let big_m = m_per_cell;
    let n = big_m; // number density per a³
    let e = big_m - 1.0 + (-big_m).exp();
    let denom = e * (4.0 - 2.0 * angle.cos() - 2.0 * (2.0 * angle).cos());
    let _ = mass;
    n * kt * h * (5.0 * big_m / denom - 0.5)
}

/// SRD's collisional shear viscosity.
pub fn srd_viscosity_collisional(m_per_cell: f64, h: f64, mass: f64, angle: f64) -> f64 {
    let e = m_per_cell - 1.0 + (-m_per_cell).exp();
    mass / (18.0 * h) * e * (1.0 - angle.cos())
}

/// SRD's shear viscosity, kinetic + collisional.
pub fn srd_viscosity(m_per_cell: f64, kt: f64, h: f64, mass: f64, angle: f64) -> f64 {
    srd_viscosity_kinetic(m_per_cell, kt, h, mass, angle)
        + srd_viscosity_collisional(m_per_cell, h, mass, angle)
}

/// The (kinetic, collisional) theory viscosities of a config's rule.
pub fn rule_viscosity(cfg: &crate::config::Config) -> (f64, f64) {
    use super::Rule;
    let m = cfg.particles_per_cell as f64;
    let (kt, h, mass, angle) = (cfg.kt, cfg.time_step, cfg.mass, cfg.rotation_angle());
    match Rule::from_config(&cfg.collision) {
        Rule::Srd => (
            srd_viscosity_kinetic(m, kt, h, mass, angle),
            srd_viscosity_collisional(m, h, mass, angle),
        ),
        Rule::SrdAngular => (
            srd_angular_viscosity_kinetic(m, kt, h, angle),
            srd_angular_viscosity_collisional(m, h, mass, angle),
        ),
        Rule::At => (
            at_viscosity_kinetic(m, kt, h),
            at_viscosity_collisional(m, h, mass),
        ),
        Rule::AtAngular => (
            at_angular_viscosity_kinetic(m, kt, h),
            at_angular_viscosity_collisional(m, h, mass),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_general_formulas_reduce_to_the_known_ones_without_angular_momentum() {
        // the kinetic λ_N with t = u = 0 gives the SRD and MPC-AT formulas
        for (m, h, alpha) in [
            (10.0, 0.1, 130f64.to_radians()),
            (5.0, 0.5, 90f64.to_radians()),
        ] {
            let kappa = (1.0 + 2.0 * alpha.cos() + 2.0 * (2.0 * alpha).cos()) / 5.0;
            let d = mean_decorrelation(m, |n| (1.0 - kappa) * (n as f64 - 1.0) / n as f64);
            let srd = kinetic(m, 1.0, h, d);
            let known = srd_viscosity_kinetic(m, 1.0, h, 1.0, alpha);
            assert!((srd / known - 1.0).abs() < 1e-12, "{srd} vs {known}");
            let d = mean_decorrelation(m, |n| (n as f64 - 1.0) / n as f64);
            let at = kinetic(m, 1.0, h, d);
            assert!((at / at_viscosity_kinetic(m, 1.0, h) - 1.0).abs() < 1e-12);
            // Σ P(N) (N − 1) = M − 1 + e^{−M}
            let k: f64 = poisson(m)
                .iter()
                .enumerate()
                .map(|(n, w)| w * (n as f64 - 1.0).max(0.0))
                .sum();
            assert!((k / (m - 1.0 + (-m).exp()) - 1.0).abs() < 1e-12);
            let srd_coll = 2.0 / 3.0 * (1.0 - alpha.cos()) * at_viscosity_collisional(m, h, 1.0);
            assert!((srd_coll / srd_viscosity_collisional(m, h, 1.0, alpha) - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn angular_momentum_halves_the_at_collisional_viscosity() {
        let (m, h) = (10.0, 0.1);
        let at = at_viscosity_collisional(m, h, 1.0);
        let ata = at_angular_viscosity_collisional(m, h, 1.0);
        assert!((at - 7.5).abs() < 1e-3, "{at}");
        assert!(
            (ata / at - (m - 1.92) / (2.0 * (m - 1.0))).abs() < 0.01,
            "{ata}"
        );
        let total = ata + at_angular_viscosity_kinetic(m, 1.0, h);
        assert!((total - 4.04).abs() < 0.02, "{total}");
    }
}
