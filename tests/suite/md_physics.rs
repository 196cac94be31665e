//! Physics of the MD engine: LJ potential energy against NIST, DPD pressure against
//! Groot–Warren, momentum conservation with DPD, NVE energy conservation (on the CPU and the
//! GPU engine, tests/suite/common/platform.rs), and bitwise determinism across thread counts.

use crate::common;

use common::{MdEngine, Platform};
use mpcbox::md::build::{fcc_lattice, maxwell_velocities};
use mpcbox::md::{ForceField, LjTable, Md, MdSettings, MdThermostat, PairStyle, System};

common::backend_tests!(
    [cpu gpu]
    lj_nvt_potential_energy_matches_nist_truncated_value,
    dpd_pressure_matches_groot_warren,
    dpd_conserves_total_momentum,
    nve_lj_energy_is_conserved,
);

/// An MD system with its force field, thermostat and settings, for either engine.
struct MdSetup {
    sys: System,
    ff: ForceField,
    thermostat: MdThermostat,
    settings: MdSettings,
}

impl MdSetup {
    fn on(self, p: Platform) -> MdEngine {
        MdEngine::new(p, self.sys, self.ff, self.thermostat, self.settings)
    }

    fn cpu(self) -> Md {
        Md::new(self.sys, self.ff, self.thermostat, self.settings).expect("valid MD system")
    }
}

#[allow(clippy::too_many_arguments)]
fn lj_liquid(
    cells: usize,
    density: f64,
    kt: f64,
    cutoff: f64,
    shifted: bool,
    thermostat: MdThermostat,
    dt: f64,
    threads: usize,
) -> MdSetup {
    let mut sys = fcc_lattice([cells; 3], density, 1.0);
    maxwell_velocities(&mut sys, kt, 11);
    let ff = ForceField {
        pair: PairStyle::Lj(LjTable::uniform(1, 1.0, 1.0, cutoff, shifted)),
        bond_styles: vec![],
    };
    MdSetup {
        sys,
        ff,
        thermostat,
        settings: common::md_settings(dt, kt, 2024, threads),
    }
}

/// NIST SRSW (https://www.nist.gov/mml/csd/chemical-informatics-group/sat-tmmc-liquid-vapor-coexistence-properties-long-range)
/// LJ at T* = 0.85, ρ* = 0.776, truncated at 3σ: U/N = −5.2714 without the long-range
/// correction (−5.5121 with it). MD with the truncated (unshifted) potential; the energy is
/// measured with the truncated potential, no tail correction, so we compare with −5.2714.
fn lj_nvt_potential_energy_matches_nist_truncated_value(p: Platform) {
    // 6³ FCC cells = 864 atoms
    let mut md = lj_liquid(
        6,
        0.776,
        0.85,
        3.0,
        false,
        MdThermostat::Langevin { damping: 1.0 },
        0.005,
        0,
    )
    .on(p);
    let n = md.len() as f64;
    md.run(2000);
    let (mut sum, mut t_sum, mut samples) = (0.0, 0.0, 0);
    for _ in 0..800 {
        md.run(10);
        sum += md.potential_energy() / n;
        t_sum += md.temperature();
        samples += 1;
    }
    let u = sum / samples as f64;
    let t = t_sum / samples as f64;
    println!("{p} LJ NVT: U/N = {u:.5} (NIST −5.2714), T = {t:.4}");
    assert!((t - 0.85).abs() < 0.02, "{p}: temperature {t}");
    assert!(
        ((u - -5.2714) / 5.2714).abs() < 0.01,
        "{p}: U/N = {u}, NIST −5.2714"
    );
}

fn dpd_fluid(l: f64, rho: f64, threads: usize, dt: f64) -> MdSetup {
    let (sys, ff) = common::dpd_fluid_system(l, rho);
    MdSetup {
        sys,
        ff,
        thermostat: MdThermostat::None,
        settings: common::md_settings(dt, 1.0, 99, threads),
    }
}

/// Groot & Warren (1997): ρ = 3, a = 25, γ = 4.5, kT = 1, rc = 1, w_R = 1 − r/rc:
/// virial pressure 23.65.
fn dpd_pressure_matches_groot_warren(p: Platform) {
    let mut md = dpd_fluid(8.0, 3.0, 0, 0.01).on(p);
    md.run(1000);
    let (mut pressure, mut t, mut k) = (0.0, 0.0, 0);
    for _ in 0..600 {
        md.run(5);
        pressure += md.pressure();
        t += md.temperature();
        k += 1;
    }
    let (pressure, t) = (pressure / k as f64, t / k as f64);
    println!("{p} DPD: p = {pressure:.4} (23.65), kT = {t:.4}");
    assert!((t - 1.0).abs() < 0.02, "{p}: DPD temperature {t}");
    assert!(
        ((pressure - 23.65) / 23.65).abs() < 0.01,
        "{p}: DPD pressure {pressure}"
    );
}

fn rel_momentum_change(md: &mut MdEngine, p0: [f64; 3]) -> f64 {
    let p = md.momentum();
    let sys = md.system();
    let scale: f64 = (0..sys.len())
        .map(|i| sys.mass(i) * sys.vel[i].iter().map(|c| c.abs()).sum::<f64>())
        .sum();
    let d = ((p[0] - p0[0]).powi(2) + (p[1] - p0[1]).powi(2) + (p[2] - p0[2]).powi(2)).sqrt();
    d / scale
}

fn dpd_conserves_total_momentum(p: Platform) {
    let mut md = dpd_fluid(6.0, 3.0, 0, 0.02).on(p);
    let p0 = md.momentum();
    let mut worst: f64 = 0.0;
    for _ in 0..20 {
        md.run(10);
        worst = worst.max(rel_momentum_change(&mut md, p0));
    }
    println!("{p} DPD relative momentum change: {worst:e}");
    assert!(worst <= 1e-12, "{p}: momentum drift {worst}");
    // and with the DPD thermostat on top of LJ
    let mut lj = lj_liquid(
        4,
        0.8442,
        1.0,
        2.5,
        true,
        MdThermostat::Dpd {
            gamma: 4.5,
            cutoff: 1.5,
            exponent: 1.0,
        },
        0.005,
        0,
    )
    .on(p);
    let p0 = lj.momentum();
    lj.run(200);
    let d = rel_momentum_change(&mut lj, p0);
    assert!(d <= 1e-12, "{p}: LJ + DPD thermostat momentum drift {d}");
}

/// NVE LJ liquid (ρ* = 0.8442, T* ≈ 0.72, rc = 2.5, energy-shifted): the total energy stays
/// within a small band and its linear drift is tiny.
fn nve_lj_energy_is_conserved(p: Platform) {
    let mut md = lj_liquid(5, 0.8442, 0.72, 2.5, true, MdThermostat::None, 0.005, 0).on(p);
    let n = md.len() as f64;
    md.run(200);
    let e0 = md.total_energy();
    let (mut worst, mut ts, mut es) = (0.0f64, vec![], vec![]);
    for k in 0..100 {
        md.run(40);
        let e = md.total_energy();
        worst = worst.max(((e - e0) / e0).abs());
        ts.push(k as f64 * 40.0);
        es.push(e);
    }
    let mt = ts.iter().sum::<f64>() / ts.len() as f64;
    let me = es.iter().sum::<f64>() / es.len() as f64;
    let slope = ts
        .iter()
        .zip(&es)
        .map(|(t, e)| (t - mt) * (e - me))
        .sum::<f64>()
        / ts.iter().map(|t| (t - mt).powi(2)).sum::<f64>();
    let per_million = slope * 1e6 / e0.abs();
    println!(
        "{p} NVE: E0/N = {:.5}, max |ΔE/E| = {worst:e}, drift {per_million:e} per 1e6 steps",
        e0 / n
    );
    assert!(worst < 2e-4, "{p}: energy fluctuation {worst}");
    assert!(
        per_million.abs() < 1e-2,
        "{p}: drift {per_million} per 1e6 steps"
    );
}

fn bits(md: &Md) -> Vec<u64> {
    md.sys
        .pos
        .iter()
        .chain(md.sys.vel.iter())
        .flat_map(|v| v.iter().map(|c| c.to_bits()))
        .collect()
}

#[test]
fn runs_are_bitwise_identical_for_any_thread_count() {
    let run_dpd = |threads| {
        let mut md = dpd_fluid(6.0, 3.0, threads, 0.02).cpu();
        md.run(150).unwrap();
        (bits(&md), md.pressure().to_bits())
    };
    let a = run_dpd(1);
    assert_eq!(a, run_dpd(2));
    assert_eq!(a, run_dpd(3));
    let run_lj = |threads| {
        let mut md = lj_liquid(
            5,
            0.8442,
            0.72,
            2.5,
            false,
            MdThermostat::Langevin { damping: 1.0 },
            0.005,
            threads,
        )
        .cpu();
        md.run(150).unwrap();
        (bits(&md), md.potential_energy().to_bits())
    };
    let b = run_lj(1);
    assert_eq!(b, run_lj(2));
    assert_eq!(b, run_lj(4));
}
