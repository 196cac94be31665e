//! `rules`: per-step cost of the collision rules relative to plain SRD (the goals at 256³ × 10
//! on a GPU: MPC-AT ≤ 1.15 ×, the +a rules ≤ 1.25 ×): SRD 130°, SRD with MBS, SRD+a with MBS,
//! MPC-AT and MPC-AT+a, h = 0.1, grid shift, without and with Lees-Edwards shear (the stress
//! measured every tenth step, as a run samples it); on a GPU the default (fused) cell-sum
//! method unless MPCBOX_CUDA_METHOD says otherwise.
//!
//! Tuning knobs of the rule kernels, recorded with the run when set: `MPCBOX_RULES_KERNELS=
//! per-rule|generic`, and through `MPCBOX_NVRTC_OPTIONS`: `-DMPC_RULE_FLUSH=0|1|2`,
//! `-DMPC_AT_NORMALS=0|1`, `-DMPC_RULES_LAZY_VELOCITY=0|1`, `-DMPC_RULES_MIN_BLOCKS=n` (see
//! `kernels/rule_sums.cuh`, `kernels/rng.cuh`, `kernels/rules.cuh`, `kernels/rules.cu`).

use std::path::Path;

use serde_json::json;

use mpcbox::config::{CollisionRule, Config, DeviceChoice, Thermostat};
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
    /// Timed steps per rule.
    #[arg(long, default_value_t = 40)]
    steps: u64,
    /// Untimed steps before timing (at least one reorder).
    #[arg(long, default_value_t = 20)]
    warmup: u64,
    /// auto | cpu | cuda:N
    #[arg(long, default_value = "cuda:0")]
    device: String,
    /// Without Lees-Edwards shear, with it, or both.
    #[arg(long, default_value = "both", value_parser = ["both", "no", "yes"])]
    shear: String,
}

/// The variants measured: name, rule, thermostat.
fn variants() -> Vec<(&'static str, CollisionRule, Thermostat)> {
    let srd = |a| CollisionRule::Srd {
        angle_deg: 130.0,
        angular_momentum: a,
    };
    let at = |a| CollisionRule::MpcAt {
        angular_momentum: a,
    };
    vec![
        ("SRD", srd(false), Thermostat::None),
        ("SRD + MBS", srd(false), Thermostat::Mbs),
        ("SRD+a + MBS", srd(true), Thermostat::Mbs),
        ("MPC-AT", at(false), Thermostat::None),
        ("MPC-AT+a", at(true), Thermostat::None),
    ]
}

fn config(
    l: u32,
    a: &Args,
    rule: CollisionRule,
    t: Thermostat,
    shear: bool,
    device: &DeviceChoice,
) -> Res<Config> {
    let m = a.m;
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({l}, {l}, {l}), particles_per_cell: {m}, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), steps: 100)"
    ))
    .map_err(err)?;
    cfg.collision = rule;
    cfg.thermostat = t;
    cfg.shear_rate = if shear { 0.01 } else { 0.0 };
    cfg.seed = 12345;
    cfg.device = device.clone();
    cfg.validate().map_err(err)?;
    Ok(cfg)
}

pub fn run(a: Args, records: Option<&Path>) -> Res<()> {
    let device = super::device(&a.device)?;
    let mut rec = recorder("rules", &device, records);
    let knobs: Vec<String> = [
        "MPCBOX_RULES_KERNELS",
        "MPCBOX_NVRTC_OPTIONS",
        "MPCBOX_CUDA_METHOD",
    ]
    .iter()
    .filter_map(|k| std::env::var(k).ok().map(|v| format!("{k}={v}")))
    .collect();
    let shears: &[bool] = match a.shear.as_str() {
        "no" => &[false],
        "yes" => &[true],
        _ => &[false, true],
    };
    for &l in &a.sizes {
        for &shear in shears {
            let mut srd_time = None;
            for (name, rule, thermostat) in variants() {
                let cfg = config(l, &a, rule, thermostat, shear, &device)?;
                let phys = Physics::from_config(&cfg);
                let mut be = mpcbox::backend::factory::open(&cfg, &phys, None).map_err(err)?;
                let dt =
                    seconds_per_step(be.as_mut(), &phys, a.warmup, a.steps, shear as u64 * 10)?;
                let reference = *srd_time.get_or_insert(dt);
                rec.row(
                    &[
                        ("cells", cube(l)),
                        ("M", json!(a.m)),
                        ("rule", json!(name)),
                        ("shear", json!(shear)),
                        ("knobs", json!(knobs.join(" "))),
                    ],
                    &[
                        ("ms/step", dt * 1e3),
                        ("× SRD", dt / reference),
                        ("Gparticle-steps/s", cfg.n_fluid() as f64 / dt / 1e9),
                    ],
                )?;
            }
        }
    }
    Ok(())
}
