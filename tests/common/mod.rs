//! Helpers shared by the integration tests.
#![allow(dead_code)]

use mpcbox::config::{Config, DeviceChoice, Thermostat};

/// A small CPU config; tests change what they need.
pub fn small_config(cells: [u32; 3], m: u32) -> Config {
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({}, {}, {}), particles_per_cell: {m}, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), steps: 100, device: Cpu)",
        cells[0], cells[1], cells[2]
    ))
    .expect("test config is valid");
    cfg.device = DeviceChoice::Cpu;
    cfg.thermostat = Thermostat::None;
    cfg.output.observable_interval = 0;
    cfg
}

pub fn total_momentum(st: &mpcbox::state::FluidState, m: f64) -> [f64; 3] {
    let mut p = [0.0; 3];
    for k in 0..3 {
        p[k] = st.vel[k].iter().sum::<f64>() * m;
    }
    p
}

pub fn kinetic_energy(st: &mpcbox::state::FluidState, m: f64) -> f64 {
    (0..3)
        .map(|k| st.vel[k].iter().map(|v| 0.5 * m * v * v).sum::<f64>())
        .sum()
}
