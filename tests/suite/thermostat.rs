//! The MBS cell thermostat: temperature held under shear, a hot fluid brought back to kT with
//! equipartition and momentum conserved; on every platform (tests/suite/common/platform.rs).

use crate::common;

use common::Platform;
use mpcbox::config::Thermostat;

common::backend_tests!(
    mbs_holds_the_temperature_under_strong_shear,
    without_thermostat_shear_heats_the_fluid,
    mbs_relaxes_a_hot_fluid_to_kt_with_equipartition,
    thermostat_conserves_momentum_and_holds_temperature,
);

fn mbs_holds_the_temperature_under_strong_shear(p: Platform) {
    let mut cfg = common::small_config([12, 12, 12], 10);
    cfg.shear_rate = 0.1;
    cfg.thermostat = Thermostat::Mbs;
    cfg.kt = 1.5;
    cfg.output.equilibration_steps = 50;
    let Some(mut s) = p.solvent(&cfg) else { return };
    for _ in 0..800 {
        s.step().unwrap();
    }
    let t = s.stats().temperature.mean().unwrap();
    assert!((t / 1.5 - 1.0).abs() < 0.01, "{p}: kT = {t}, target 1.5");
}

fn without_thermostat_shear_heats_the_fluid(p: Platform) {
    // The counter-check: the same shear without MBS must heat up (viscous heating).
    let mut cfg = common::small_config([12, 12, 12], 10);
    cfg.shear_rate = 0.1;
    cfg.thermostat = Thermostat::None;
    let Some(mut s) = p.solvent(&cfg) else { return };
    for _ in 0..800 {
        s.step().unwrap();
    }
    let t = s.observables().unwrap().temperature;
    assert!(
        t > 1.2,
        "{p}: kT = {t}: shear without a thermostat should heat the fluid"
    );
}

fn mbs_relaxes_a_hot_fluid_to_kt_with_equipartition(p: Platform) {
    let mut cfg = common::small_config([10, 10, 10], 10);
    cfg.thermostat = Thermostat::Mbs;
    cfg.output.equilibration_steps = 30;
    let Some(mut s) = p.solvent(&cfg) else { return };
    let mut st = s.fluid_state().unwrap();
    for v in st.vel[2].iter_mut() {
        *v *= 2.0; // z twice as hot as x and y
    }
    s.set_fluid_state(&st).unwrap();
    for _ in 0..300 {
        s.step().unwrap();
    }
    let t = s.stats().temperature.mean().unwrap();
    assert!((t - 1.0).abs() < 0.01, "{p}: kT = {t}");
    let st = s.fluid_state().unwrap();
    let n = st.len() as f64;
    for k in 0..3 {
        let mean = st.vel[k].iter().sum::<f64>() / n;
        let t_k = st.vel[k]
            .iter()
            .map(|v| (v - mean) * (v - mean))
            .sum::<f64>()
            / n;
        assert!(
            (t_k - 1.0).abs() < 0.03,
            "{p}: component {k}: <v^2> = {t_k}"
        );
    }
}

/// A fluid started 44% too hot is brought back to kT, its momentum conserved throughout.
fn thermostat_conserves_momentum_and_holds_temperature(p: Platform) {
    let mut cfg = common::small_config([16, 16, 16], 10);
    cfg.thermostat = Thermostat::Mbs;
    cfg.kt = 1.0;
    cfg.seed = 11;
    cfg.output.equilibration_steps = 20;
    let Some(mut s) = p.solvent(&cfg) else { return };
    // start hot: the thermostat must bring it back
    let mut st = s.fluid_state().unwrap();
    for k in 0..3 {
        for v in st.vel[k].iter_mut() {
            *v *= 1.2;
        }
    }
    s.set_fluid_state(&st).unwrap();
    let p0h = common::total_momentum(&st, 1.0);
    for _ in 0..400 {
        s.step().unwrap();
    }
    let p1 = common::total_momentum(&s.fluid_state().unwrap(), 1.0);
    common::assert_momentum_kept(p0h, p1, s.n_fluid() as f64, &p.to_string());
    let temp = s.stats().temperature.mean().unwrap();
    eprintln!("{p}: MBS temperature {temp}");
    assert!((temp - 1.0).abs() < 0.01, "{p}: temperature {temp}");
}
