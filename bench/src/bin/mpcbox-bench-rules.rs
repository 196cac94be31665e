//! Per-step cost of the collision rules on one GPU relative to plain SRD (the goals at
//! 256³ × 10: MPC-AT ≤ 1.15 ×, the +a rules ≤ 1.25 ×): SRD 130°, SRD with MBS, SRD+a with MBS,
//! MPC-AT and MPC-AT+a, h = 0.1, grid shift, without and with Lees-Edwards shear (stress
//! measured every tenth step, as a run samples it), the default (fused) cell-sum method unless
//! MPCBOX_CUDA_METHOD says otherwise.
//!
//! Usage: mpcbox-bench-rules [--sizes 128,256] [--steps 40] [--warmup 20] [--device 0]
//! [--shear both|no|yes]
//!
//! Tuning knobs of the rule kernels (`bench/rules-variants.sh` measures them side by side):
//! `MPCBOX_RULES_KERNELS=per-rule|generic`, and through `MPCBOX_NVRTC_OPTIONS`:
//! `-DMPC_RULE_FLUSH=0|1|2`, `-DMPC_AT_NORMALS=0|1`, `-DMPC_RULES_LAZY_VELOCITY=0|1`,
//! `-DMPC_RULES_MIN_BLOCKS=n` (see `kernels/rule_sums.cuh`, `kernels/rng.cuh`,
//! `kernels/rules.cuh`, `kernels/rules.cu`).

use std::time::Instant;

use clap::Parser;
use mpcbox::backend::cuda::{CellSumMethod, CudaBackend};
use mpcbox::config::{CollisionRule, Config, Thermostat};
use mpcbox::physics::Physics;

#[derive(Parser)]
struct Args {
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
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
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

fn config(l: u32, m: u32, rule: CollisionRule, thermostat: Thermostat, shear: bool) -> Config {
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({l}, {l}, {l}), particles_per_cell: {m}, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), steps: 100, device: Cuda([0]))"
    ))
    .expect("bench config is valid");
    cfg.collision = rule;
    cfg.thermostat = thermostat;
    cfg.shear_rate = if shear { 0.01 } else { 0.0 };
    cfg.seed = 12345;
    cfg.validate().expect("bench variant is valid");
    cfg
}

/// Seconds per step of `phys` on `be` (reorder every 20 steps, stress every 10th under shear).
#[allow(clippy::manual_is_multiple_of)] // rust-version 1.80
fn time_steps(be: &mut CudaBackend, phys: &Physics, shear: bool, args: &Args) -> f64 {
    let plan = |step: u64| phys.plan(step, shear && step % 10 == 0, (step + 1) % 20 == 0);
    let warmup = args.warmup.max(20);
    for step in 0..warmup {
        be.enqueue_step(&plan(step)).unwrap();
    }
    be.synchronize().unwrap();
    let t = Instant::now();
    for step in warmup..warmup + args.steps {
        be.enqueue_step(&plan(step)).unwrap();
    }
    be.synchronize().unwrap();
    let r = be.read_report().unwrap();
    assert!(r.relative_energy.is_finite() && r.relative_dof > 0.0);
    t.elapsed().as_secs_f64() / args.steps as f64
}

fn main() {
    let args = Args::parse();
    let method = CellSumMethod::from_env();
    println!("cell-sum method: {}", method.name());
    let knob = |k: &str| std::env::var(k).unwrap_or_default();
    println!(
        "MPCBOX_RULES_KERNELS={:?} MPCBOX_NVRTC_OPTIONS={:?}",
        knob("MPCBOX_RULES_KERNELS"),
        knob("MPCBOX_NVRTC_OPTIONS")
    );
    println!();
    println!("| cells | rule | shear | ms/step | × SRD | 10⁹ particle-steps/s |");
    println!("|---|---|---|---|---|---|");
    for &l in &args.sizes {
        let shears: &[bool] = match args.shear.as_str() {
            "no" => &[false],
            "yes" => &[true],
            _ => &[false, true],
        };
        for &shear in shears {
            let base = config(l, args.m, variants()[0].1.clone(), Thermostat::None, shear);
            let phys = Physics::from_config(&base);
            let mut be = match CudaBackend::open(&base, &phys, None, args.device, method) {
                Ok(b) => b,
                Err(e) => {
                    println!("| {l}³ | - | - | error: {e} | | |");
                    continue;
                }
            };
            let mut srd_time = None;
            for (name, rule, thermostat) in variants() {
                let cfg = config(l, args.m, rule, thermostat, shear);
                let phys = Physics::from_config(&cfg);
                be.set_physics(phys.clone()).unwrap();
                let dt = time_steps(&mut be, &phys, shear, &args);
                let reference = *srd_time.get_or_insert(dt);
                println!(
                    "| {l}³ × {} | {name} | {} | {:.3} | {:.3} | {:.2} |",
                    args.m,
                    if shear { "yes" } else { "no" },
                    dt * 1e3,
                    dt / reference,
                    base.n_fluid() as f64 / dt / 1e9
                );
            }
        }
    }
}
