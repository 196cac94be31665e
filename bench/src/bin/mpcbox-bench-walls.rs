//! Per-step cost of walls on one GPU relative to the same box without walls (the goal
//! at 256³ × 10: walls ≤ 1.10 ×): SRD 130° with MBS, h = 0.1, grid shift, reorder every 20
//! steps; a slit of height L − 1 (no-slip, body force along x) and a pipe of radius (L − 1)/2
//! (no-slip, body force). The pipe holds π/4 of the box's particles: its per-particle rate is
//! the comparable figure. The default (fused) cell-sum method unless MPCBOX_CUDA_METHOD says
//! otherwise.
//!
//! Usage: mpcbox-bench-walls [--sizes 128,256] [--steps 40] [--warmup 20] [--device 0]

use std::time::Instant;

use clap::Parser;
use mpcbox::backend::cuda::{CellSumMethod, CudaBackend};
use mpcbox::config::Config;
use mpcbox::physics::Physics;

#[derive(Parser)]
struct Args {
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
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
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

fn config(l: u32, m: u32, extra: &str) -> Config {
    Config::from_ron_str(&format!(
        "(cells: ({l}, {l}, {l}), particles_per_cell: {m}, time_step: 0.1, thermostat: Mbs, \
          collision: Srd(angle_deg: 130.0), steps: 100, seed: 12345, device: Cuda([0]){extra})"
    ))
    .expect("bench config is valid")
}

/// Seconds per step on `be` (reorder every 20 steps).
#[allow(clippy::manual_is_multiple_of)] // rust-version 1.80
fn time_steps(be: &mut CudaBackend, phys: &Physics, args: &Args) -> f64 {
    let plan = |step: u64| phys.plan(step, false, (step + 1) % 20 == 0);
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
    println!();
    println!("| cells | walls | particles | ms/step | × no walls | 10⁹ particle-steps/s |");
    println!("|---|---|---|---|---|---|");
    for &l in &args.sizes {
        let mut reference = None;
        for (name, extra) in variants(l) {
            let cfg = config(l, args.m, &extra);
            let phys = Physics::from_config(&cfg);
            let mut be = match CudaBackend::open(&cfg, &phys, None, args.device, method) {
                Ok(b) => b,
                Err(e) => {
                    println!("| {l}³ | {name} | - | error: {e} | | |");
                    continue;
                }
            };
            let dt = time_steps(&mut be, &phys, &args);
            let base = *reference.get_or_insert(dt);
            let n = cfg.n_fluid() as f64;
            println!(
                "| {l}³ × {} | {name} | {n:.3e} | {:.3} | {:.3} | {:.2} |",
                args.m,
                dt * 1e3,
                dt / base,
                n / dt / 1e9
            );
        }
    }
}
