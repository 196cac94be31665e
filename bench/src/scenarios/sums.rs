//! `sums`: the cost of fixed-point sums (`mpcbox::fixed_sums`, the default: the same bits on any
//! number of threads, slabs, GPUs and ranks) against f64 sums in the backend's order
//! (`MPCBOX_CELL_SUMS=float`), per step, for SRD 130°, SRD with MBS, MPC-AT+a and a slit (SRD
//! with MBS, no-slip walls, body force), h = 0.1, grid shift, the stress measured every tenth
//! step of the sheared variants. Both arithmetics run in the same process, one after the
//! other per variant (the physics' `sums` set or cleared), so they share the machine's state.
//! The goal: fixed point ≤ 1.03 × f64 everywhere (then it stays the default).

use std::path::Path;

use serde_json::json;

use mpcbox::config::Config;
use mpcbox::physics::Physics;

use super::{cube, err, recorder, seconds_per_step};
use crate::Res;

#[derive(clap::Args)]
pub struct Args {
    /// Edge lengths of the cubic boxes, in cells.
    #[arg(long, value_delimiter = ',', default_value = "256")]
    sizes: Vec<u32>,
    /// Particles per cell.
    #[arg(long, default_value_t = 10)]
    m: u32,
    /// Timed steps per variant and arithmetic.
    #[arg(long, default_value_t = 40)]
    steps: u64,
    /// Untimed steps before timing (at least one reorder).
    #[arg(long, default_value_t = 20)]
    warmup: u64,
    /// auto | cpu | cuda:N[,M...] (several: slabs over those GPUs)
    #[arg(long, default_value = "cuda:0")]
    device: String,
}

/// The variants measured: name, the config's fields (RON) and whether the stress is measured.
fn variants() -> Vec<(&'static str, &'static str, bool)> {
    vec![
        (
            "SRD",
            "collision: Srd(angle_deg: 130.0), shear_rate: 0.01",
            true,
        ),
        (
            "SRD + MBS",
            "collision: Srd(angle_deg: 130.0), thermostat: Mbs, shear_rate: 0.01",
            true,
        ),
        (
            "MPC-AT+a",
            "collision: MpcAt(angular_momentum: true), shear_rate: 0.01",
            true,
        ),
        (
            "slit + MBS",
            "collision: Srd(angle_deg: 130.0), thermostat: Mbs, walls: Slit(), \
             body_force: (0.001, 0.0, 0.0)",
            false,
        ),
    ]
}

pub fn run(a: Args, records: Option<&Path>) -> Res<()> {
    let device = super::device(&a.device)?;
    let gpus = super::gpus_of(&device).map_or(0, |g| g.len());
    let mut rec = recorder("sums", &device, records);
    for &l in &a.sizes {
        for (name, fields, sheared) in variants() {
            let mut cfg = Config::from_ron_str(&format!(
                "(cells: ({l}, {l}, {l}), particles_per_cell: {}, time_step: 0.1, steps: 100, \
                  seed: 12345, {fields})",
                a.m
            ))
            .map_err(err)?;
            cfg.device = device.clone();
            cfg.validate().map_err(err)?;
            let fixed = Physics::from_config(&cfg);
            let Some(scales) = fixed.sums else {
                return Err("run without MPCBOX_CELL_SUMS=float: this compares both".into());
            };
            let mut float = fixed.clone();
            float.sums = None;
            let mut times = Vec::new();
            for phys in [&float, &fixed] {
                let mut be = mpcbox::backend::factory::open(&cfg, phys, None).map_err(err)?;
                let every = if sheared { 10 } else { 0 };
                times.push(seconds_per_step(
                    be.as_mut(),
                    phys,
                    a.warmup,
                    a.steps,
                    every,
                )?);
            }
            for (sums, dt) in ["f64", "fixed"].iter().zip(&times) {
                rec.row(
                    &[
                        ("cells", cube(l)),
                        ("M", json!(a.m)),
                        ("GPUs", json!(gpus)),
                        ("variant", json!(name)),
                        ("sums", json!(sums)),
                    ],
                    &[
                        ("ms/step", dt * 1e3),
                        ("× f64", dt / times[0]),
                        (
                            "momentum resolution",
                            scales.resolution(mpcbox::fixed_sums::SumKind::Momentum),
                        ),
                    ],
                )?;
            }
        }
    }
    Ok(())
}
