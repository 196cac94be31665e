//! `mpcbox-bench`: particle-steps/s of the MPC step on the CPU backend (or any device the
//! config names), printed as a markdown table for the README.
//!
//! Default: 64³ cells × 10 particles, SRD 130°, h = 0.1, grid shift, MBS thermostat, without
//! and with Lees-Edwards shear.

use std::time::Instant;

use clap::Parser;
use mpcbox::config::{Config, DeviceChoice, Thermostat};
use mpcbox::Solvent;

#[derive(Parser)]
#[command(about = "Benchmark the MPC step (particle-steps per second)")]
struct Args {
    /// Box edges in cells (cubic boxes), comma separated.
    #[arg(long, default_value = "64", value_delimiter = ',')]
    sizes: Vec<u32>,
    /// Timed steps per case (after warm-up steps).
    #[arg(long, default_value_t = 20)]
    steps: u64,
    #[arg(long, default_value_t = 3)]
    warmup: u64,
    /// Repetitions per case; the median is reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// auto | cpu | cuda:N
    #[arg(long, default_value = "cpu")]
    device: String,
    /// CPU worker threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Steps between reorderings of particles by cell (default: the config default).
    #[arg(long)]
    reorder: Option<u64>,
}

fn config(
    l: u32,
    shear: bool,
    device: DeviceChoice,
    threads: usize,
    reorder: Option<u64>,
) -> Config {
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({l}, {l}, {l}), particles_per_cell: 10, time_step: 0.1, \
         collision: Srd(angle_deg: 130.0), grid_shift: true, thermostat: Mbs, steps: 1)"
    ))
    .expect("benchmark config is valid");
    cfg.thermostat = Thermostat::Mbs;
    cfg.shear_rate = if shear { 0.01 } else { 0.0 };
    cfg.device = device;
    cfg.tuning.cpu_threads = threads;
    if let Some(r) = reorder {
        cfg.tuning.reorder_interval = Some(r);
    }
    cfg.output.observable_interval = 0;
    cfg.output.equilibration_steps = u64::MAX; // time the bare step: no sampling
    cfg
}

fn main() {
    let args = Args::parse();
    let device = match DeviceChoice::parse_cli(&args.device) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    println!("| cells | particles | shear | device | particle-steps/s | ms/step |");
    println!("|---|---|---|---|---|---|");
    for &l in &args.sizes {
        for shear in [false, true] {
            let cfg = config(l, shear, device.clone(), args.threads, args.reorder);
            let mut s = match Solvent::new(cfg) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("{l}^3: {e}");
                    continue;
                }
            };
            for _ in 0..args.warmup {
                s.step().expect("step");
            }
            let mut rates = Vec::new();
            for _ in 0..args.repeats {
                let t0 = Instant::now();
                for _ in 0..args.steps {
                    s.step().expect("step");
                }
                // one reduction forces any asynchronous device work to finish
                let _ = s.moments().expect("moments");
                let dt = t0.elapsed().as_secs_f64();
                rates.push(s.n_fluid() as f64 * args.steps as f64 / dt);
            }
            rates.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let r = rates[rates.len() / 2];
            println!(
                "| {l}³ | {} | {} | {} | {:.3e} | {:.1} |",
                s.n_fluid(),
                if shear { "0.01" } else { "none" },
                s.backend_description(),
                r,
                1e3 * s.n_fluid() as f64 / r
            );
        }
    }
}
