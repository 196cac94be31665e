//! `walls`: per-step cost of walls relative to the same box without walls (the goal at 256³ ×
//! 10 on a GPU: walls ≤ 1.10 ×): SRD 130° with MBS by default (`--collision` names another
//! rule: MPC-AT runs without MBS), h = 0.1, grid shift, reorder every 20 steps; a slit of height L − 1 (no-slip, body force along x) and a pipe of radius (L − 1)/2
//! (no-slip, body force). The pipe holds π/4 of the box's particles: its per-particle rate is
//! the comparable figure. On a GPU the default (fused) cell-sum method unless
//! MPCBOX_CUDA_METHOD says otherwise.

use std::path::Path;

use serde_json::json;

use mpcbox::config::Config;
use mpcbox::physics::Physics;

use super::{cube, err, recorder, seconds_per_step};
use crate::Res;

#[derive(clap::Args)]
pub struct Args {
    /// Edge lengths of the cubic boxes, in cells.
    #[arg(long, value_delimiter = ',', default_value = "128,256")]
    sizes: Vec<u32>,
    /// Particles per cell.
    #[arg(long, default_value_t = 10)]
    m: u32,
    /// Timed steps per variant.
    #[arg(long, default_value_t = 40)]
    steps: u64,
    /// Untimed steps before timing (at least one reorder).
    #[arg(long, default_value_t = 20)]
    warmup: u64,
    /// auto | cpu | cuda:N
    #[arg(long, default_value = "cuda:0")]
    device: String,
    /// The collision rule (RON), e.g. "MpcAt()" or "Srd(angle_deg: 130.0, angular_momentum:
    /// true)"; SRD rules run with MBS, MPC-AT rules (their own thermostat) without.
    #[arg(long, default_value = "Srd(angle_deg: 130.0)")]
    collision: String,
}

/// The variants measured: name and the `walls` and `body_force` fields (RON).
fn variants(l: u32) -> Vec<(&'static str, String)> {
    vec![
        ("no walls", String::new()),
        (
            "slit",
            ", walls: Slit(), body_force: (0.001, 0.0, 0.0)".to_string(),
        ),
        (
            "pipe",
            format!(
                ", walls: Pipe(radius: {}), body_force: (0.001, 0.0, 0.0)",
                0.5 * (l as f64 - 1.0)
            ),
        ),
    ]
}

pub fn run(a: Args, records: Option<&Path>) -> Res<()> {
    let device = super::device(&a.device)?;
    let mut rec = recorder("walls", &device, records);
    let thermostat = if a.collision.starts_with("MpcAt") {
        "None"
    } else {
        "Mbs"
    };
    for &l in &a.sizes {
        let mut reference = None;
        for (name, extra) in variants(l) {
            let mut cfg = Config::from_ron_str(&format!(
                "(cells: ({l}, {l}, {l}), particles_per_cell: {}, time_step: 0.1, \
                  thermostat: {thermostat}, collision: {}, steps: 100, seed: 12345{extra})",
                a.m, a.collision
            ))
            .map_err(err)?;
            cfg.device = device.clone();
            let phys = Physics::from_config(&cfg);
            let mut be = mpcbox::backend::factory::open(&cfg, &phys, None).map_err(err)?;
            let dt = seconds_per_step(be.as_mut(), &phys, a.warmup, a.steps, 0)?;
            let base = *reference.get_or_insert(dt);
            let n = cfg.n_fluid() as f64;
            rec.row(
                &[
                    ("cells", cube(l)),
                    ("M", json!(a.m)),
                    ("walls", json!(name)),
                    ("collision", json!(a.collision)),
                    ("particles", json!(cfg.n_fluid())),
                ],
                &[
                    ("ms/step", dt * 1e3),
                    ("× no walls", dt / base),
                    ("Gparticle-steps/s", n / dt / 1e9),
                ],
            )?;
        }
    }
    Ok(())
}
