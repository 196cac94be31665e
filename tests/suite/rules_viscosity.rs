//! Shear viscosities of the collision rules under Lees-Edwards shear (as tests/suite/shear_viscosity.rs
//! does for SRD) against `physics::theory`, on every platform (tests/suite/common/platform.rs): MPC-AT
//! at two collision times, and the angular-momentum-conserving rules, whose viscosity must
//! match their own formula and not that of the rule without the correction.

use crate::common;

use common::Platform;
use mpcbox::config::{CollisionRule, Config, Thermostat};
use mpcbox::physics::theory;

common::backend_tests!(
    mpc_at_viscosity_matches_theory_at_two_collision_times,
    angular_momentum_conservation_lowers_the_viscosity_as_predicted,
);

struct Measured {
    eta: f64,
    eta_err: f64,
    kinetic: f64,
    collisional: f64,
    slope: f64,
    temperature: f64,
}

/// 16³ cells × 10 at γ̇ = 0.05. Several GPUs get at least eight layers per slab (32 layers on
/// four GPUs), and a taller box a lower rate with the same velocity difference γ̇ Ly, which the
/// grid check holds below 0.5 cells per step at h = 0.5.
fn sheared(p: Platform, rule: CollisionRule, thermostat: Thermostat, h: f64, seed: u64) -> Config {
    let ly = if p.is_multi_gpu() {
        (8 * p.gpus() as u32).max(16)
    } else {
        16
    };
    let mut cfg = common::small_config([16, ly, 16], 10);
    cfg.collision = rule;
    cfg.thermostat = thermostat;
    cfg.time_step = h;
    cfg.shear_rate = 0.05 * 16.0 / ly as f64;
    cfg.seed = seed;
    cfg.output.equilibration_steps = 100;
    cfg.output.sample_interval = 1;
    cfg.validate().unwrap();
    cfg
}

fn measure(p: Platform, cfg: &Config, steps: u64) -> Option<Measured> {
    let mut s = p.solvent(cfg)?;
    for _ in 0..steps {
        s.step().unwrap();
    }
    let st = s.stats();
    let (k, c) = (&st.viscosity_kinetic, &st.viscosity_collisional);
    let (ke, ce) = (k.std_error().unwrap(), c.std_error().unwrap());
    Some(Measured {
        eta: k.mean().unwrap() + c.mean().unwrap(),
        eta_err: (ke * ke + ce * ce).sqrt(),
        kinetic: k.mean().unwrap(),
        collisional: c.mean().unwrap(),
        slope: st.profile_slope().unwrap().0,
        temperature: st.temperature.mean().unwrap(),
    })
}

fn report(what: &str, m: &Measured, theory: (f64, f64)) {
    println!(
        "{what}: eta = {:.4} ± {:.4} (kin {:.4}, coll {:.4}); theory {:.4} (kin {:.4}, coll \
         {:.4}); slope {:.5}; kT {:.5}",
        m.eta,
        m.eta_err,
        m.kinetic,
        m.collisional,
        theory.0 + theory.1,
        theory.0,
        theory.1,
        m.slope,
        m.temperature
    );
}

fn at(angular_momentum: bool) -> CollisionRule {
    CollisionRule::MpcAt { angular_momentum }
}

/// MPC-AT at M = 10, h = 0.1 and h = 0.5: the viscosity within 4% of the formula, the imposed
/// profile, and the temperature held at kT by the rule itself (no other thermostat).
fn mpc_at_viscosity_matches_theory_at_two_collision_times(p: Platform) {
    for (h, steps) in [(0.1, 1600), (0.5, 800)] {
        let cfg = sheared(p, at(false), Thermostat::None, h, 31);
        let Some(m) = measure(p, &cfg, steps) else {
            return;
        };
        let th = (
            theory::at_viscosity_kinetic(10.0, 1.0, h),
            theory::at_viscosity_collisional(10.0, h, 1.0),
        );
        report(&format!("{p}, MPC-AT, h = {h}"), &m, th);
        let eta_th = th.0 + th.1;
        assert!(
            (m.eta / eta_th - 1.0).abs() < 0.04,
            "h = {h}: viscosity {} vs theory {eta_th}",
            m.eta
        );
        assert!(
            (m.slope / cfg.shear_rate - 1.0).abs() < 0.03,
            "h = {h}: slope {}",
            m.slope
        );
        assert!(
            (m.temperature - 1.0).abs() < 0.01,
            "h = {h}: temperature {}",
            m.temperature
        );
    }
}

/// The +a rules at M = 10, h = 0.1: the viscosity matches the +a formula, not the one without
/// angular-momentum conservation (which is about twice as large for MPC-AT).
fn angular_momentum_conservation_lowers_the_viscosity_as_predicted(p: Platform) {
    let angle = 130f64.to_radians();
    let srd_a = CollisionRule::Srd {
        angle_deg: 130.0,
        angular_momentum: true,
    };
    let cases = [
        (
            "MPC-AT+a",
            sheared(p, at(true), Thermostat::None, 0.1, 32),
            (
                theory::at_angular_viscosity_kinetic(10.0, 1.0, 0.1),
                theory::at_angular_viscosity_collisional(10.0, 0.1, 1.0),
            ),
            theory::at_viscosity_kinetic(10.0, 1.0, 0.1)
                + theory::at_viscosity_collisional(10.0, 0.1, 1.0),
        ),
        (
            "SRD+a (MBS)",
            sheared(p, srd_a, Thermostat::Mbs, 0.1, 33),
            (
                theory::srd_angular_viscosity_kinetic(10.0, 1.0, 0.1, angle),
                theory::srd_angular_viscosity_collisional(10.0, 0.1, 1.0, angle),
            ),
            theory::srd_viscosity(10.0, 1.0, 0.1, 1.0, angle),
        ),
    ];
    for (what, cfg, th, without) in cases {
        let Some(m) = measure(p, &cfg, 1600) else {
            return;
        };
        report(&format!("{p}, {what}"), &m, th);
        println!("{what}: without angular-momentum conservation the theory gives {without:.4}");
        let eta_th = th.0 + th.1;
        assert!(
            (m.eta / eta_th - 1.0).abs() < 0.05,
            "{what}: viscosity {} vs theory {eta_th}",
            m.eta
        );
        assert!(
            (m.eta - eta_th).abs() * 5.0 < (m.eta - without).abs(),
            "{what}: {} is not clearly nearer {eta_th} (+a) than {without} (without)",
            m.eta
        );
        assert!(
            (m.temperature - 1.0).abs() < 0.01,
            "{what}: temperature {}",
            m.temperature
        );
    }
}
