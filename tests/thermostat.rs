//! The MBS cell thermostat: temperature held under shear, equipartition at rest.

mod common;

use mpcbox::config::Thermostat;
use mpcbox::Solvent;

#[test]
fn mbs_holds_the_temperature_under_strong_shear() {
    let mut cfg = common::small_config([12, 12, 12], 10);
    cfg.shear_rate = 0.1;
    cfg.thermostat = Thermostat::Mbs;
    cfg.kt = 1.5;
    cfg.output.equilibration_steps = 50;
    let mut s = Solvent::new(cfg).unwrap();
    for _ in 0..800 {
        s.step().unwrap();
    }
    let t = s.stats().temperature.mean().unwrap();
    assert!((t / 1.5 - 1.0).abs() < 0.01, "kT = {t}, target 1.5");
}

#[test]
fn without_thermostat_shear_heats_the_fluid() {
    // The counter-check: the same shear without MBS must heat up (viscous heating).
    let mut cfg = common::small_config([12, 12, 12], 10);
    cfg.shear_rate = 0.1;
    cfg.thermostat = Thermostat::None;
    let mut s = Solvent::new(cfg).unwrap();
    for _ in 0..800 {
        s.step().unwrap();
    }
    let t = s.observables().unwrap().temperature;
    assert!(
        t > 1.2,
        "kT = {t}: shear without a thermostat should heat the fluid"
    );
}

#[test]
fn mbs_relaxes_a_hot_fluid_to_kt_with_equipartition() {
    let mut cfg = common::small_config([10, 10, 10], 10);
    cfg.thermostat = Thermostat::Mbs;
    cfg.output.equilibration_steps = 30;
    let mut s = Solvent::new(cfg).unwrap();
    let mut st = s.fluid_state().unwrap();
    for v in st.vel[2].iter_mut() {
        *v *= 2.0; // z twice as hot as x and y
    }
    s.set_fluid_state(&st).unwrap();
    for _ in 0..300 {
        s.step().unwrap();
    }
    let t = s.stats().temperature.mean().unwrap();
    assert!((t - 1.0).abs() < 0.01, "kT = {t}");
    let st = s.fluid_state().unwrap();
    let n = st.len() as f64;
    for k in 0..3 {
        let mean = st.vel[k].iter().sum::<f64>() / n;
        let t_k = st.vel[k]
            .iter()
            .map(|v| (v - mean) * (v - mean))
            .sum::<f64>()
            / n;
        assert!((t_k - 1.0).abs() < 0.03, "component {k}: <v^2> = {t_k}");
    }
}
