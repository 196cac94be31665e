//! `mpcbox-bench-coupling`: overhead of the coupled step (solutes handed over, embedded in the
//! collision, velocities handed back) over the plain fluid step, at several solute densities.
//! Each step the solutes stream ballistically on the host first, as an MD code would move them;
//! only the time inside the solvent's calls is counted.

use std::time::Instant;

use clap::Parser;
use mpcbox::config::{Config, DeviceChoice, Thermostat};
use mpcbox::rng::CellStream;
use mpcbox::Solvent;

#[derive(Parser)]
#[command(about = "Coupled-step overhead over the plain MPC step")]
struct Args {
    /// Box edges in cells (cubic), comma separated.
    #[arg(long, default_value = "32", value_delimiter = ',')]
    sizes: Vec<u32>,
    /// Solutes per cell, comma separated.
    #[arg(long, default_value = "0.1,0.7", value_delimiter = ',')]
    densities: Vec<f64>,
    #[arg(long, default_value_t = 20)]
    steps: u64,
    /// auto | cpu | cuda:N
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Use the split form (begin_step / finish_step) instead of one call.
    #[arg(long)]
    split: bool,
    /// Hand the solutes over as device arrays on the fluid's GPU (no PCIe traffic);
    /// the solutes do not move between steps in this mode.
    #[arg(long)]
    device_resident: bool,
    /// With --device-resident: begin each step before handing the solutes over
    /// (`Solvent::begin_device_step`), so the fluid streams while the solutes are routed, as
    /// an MD loop does while its steps run.
    #[arg(long)]
    overlap: bool,
    /// Plain steps before timing (past the first reorders).
    #[arg(long, default_value_t = 45)]
    warmup: u64,
    /// The solutes' order in memory: `random` (worst case), or `cells`, sorted by collision
    /// cell as MD codes keep their particles (HOOMD-blue's space-filling-curve sort, LAMMPS's
    /// `atom_modify sort`) and as the bundled engine's chains lie.
    #[arg(long, default_value = "random")]
    solute_order: String,
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
    println!("| cells | fluid | solutes/cell | solutes | device | path | host threads | plain ms/step | coupled ms/step | coupled / plain | PCIe floor ms | extra / floor |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &l in &args.sizes {
        let mut s = match solvent(l, device.clone()) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{l}^3: {e}");
                continue;
            }
        };
        // Start from a fluid sorted by cell, as in a long run (the initial state is random in
        // memory and steps are slower until the first reorder).
        for _ in 0..args.warmup {
            s.step().expect("step");
        }
        let mut plain_step = |s: &mut Solvent| {
            let t0 = Instant::now();
            s.step().expect("step");
            t0.elapsed().as_secs_f64()
        };
        let plain = ms_per_step(&args, &mut s, &mut plain_step);
        // the PCIe reference of host arrays, measured now on the GPU they go to
        let rates = s.cuda_ordinal().and_then(|o| {
            let dev = mpcbox::backend::cuda::CudaDevice::open(o).ok()?;
            dev.pinned_copy_rates(256 << 20, 5).ok()
        });
        if let Some((up, down)) = rates {
            eprintln!(
                "pinned host copies: {:.1} GB/s up, {:.1} GB/s down",
                up / 1e9,
                down / 1e9
            );
        }
        for &rho in &args.densities {
            let n = (rho * (l as f64).powi(3)) as usize;
            let coupled = coupled_ms_per_step(&args, &mut s, l, n);
            let mode = if args.device_resident && args.overlap {
                "device-resident, begun"
            } else if args.device_resident {
                "device-resident"
            } else if args.split {
                "host, split"
            } else {
                "host"
            };
            // host arrays: 56 bytes a solute up (position, velocity, mass), 24 down
            let floor = match rates {
                Some((up, down)) if !args.device_resident => {
                    1e3 * (56.0 * n as f64 / up + 24.0 * n as f64 / down)
                }
                _ => f64::NAN,
            };
            println!(
                "| {l}³ | {} | {rho} | {n} | {} | {mode}, {} order | {} | {plain:.3} | {coupled:.3} | {:.3} | {floor:.3} | {:.2} |",
                s.n_fluid(),
                s.backend_description(),
                args.solute_order,
                mpcbox::host::host_threads(),
                coupled / plain,
                (coupled - plain) / floor
            );
        }
    }
}

/// The MBS fluid of an `l`³ box (10 particles per cell) on `device`, without sampling.
fn solvent(l: u32, device: DeviceChoice) -> mpcbox::Result<Solvent> {
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({l}, {l}, {l}), particles_per_cell: 10, time_step: 0.1, \
         collision: Srd(angle_deg: 130.0), thermostat: Mbs, steps: 1)"
    ))
    .expect("valid config");
    cfg.thermostat = Thermostat::Mbs;
    cfg.device = device;
    cfg.output.observable_interval = 0;
    cfg.output.equilibration_steps = u64::MAX;
    Solvent::new(cfg)
}

/// Milliseconds per step inside the solvent: `step` returns the seconds it spent in the
/// solvent's calls (host-side MD work excluded); one untimed step first, and the device work
/// still queued at the end is counted.
fn ms_per_step(args: &Args, s: &mut Solvent, step: &mut dyn FnMut(&mut Solvent) -> f64) -> f64 {
    step(s);
    let _ = s.moments();
    let mut inside = 0.0;
    for _ in 0..args.steps {
        inside += step(s);
    }
    let t0 = Instant::now();
    let _ = s.moments();
    inside += t0.elapsed().as_secs_f64();
    inside * 1e3 / args.steps as f64
}

/// Milliseconds per coupled step with `n` solutes of mass 10 in the `l`³ box, handed over as
/// the arguments ask (host arrays in one call or split, or device arrays).
fn coupled_ms_per_step(args: &Args, s: &mut Solvent, l: u32, n: usize) -> f64 {
    let mut r = CellStream::for_particle(99, 0);
    let mut pos: Vec<[f64; 3]> = (0..n)
        .map(|_| {
            [
                r.uniform() * l as f64,
                r.uniform() * l as f64,
                r.uniform() * l as f64,
            ]
        })
        .collect();
    let mut vel: Vec<[f64; 3]> = (0..n)
        .map(|_| [0.3 * r.normal(), 0.3 * r.normal(), 0.3 * r.normal()])
        .collect();
    if args.solute_order == "cells" {
        // by cell: y, then z, then x (the fluid's cell index order, `Physics::locate`)
        let cell = |p: &[f64; 3]| {
            let c = p.map(|x| (x as u64).min(l as u64 - 1));
            (c[1] * l as u64 + c[2]) * l as u64 + c[0]
        };
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| cell(&pos[i]));
        pos = order.iter().map(|&i| pos[i]).collect();
        vel = order.iter().map(|&i| vel[i]).collect();
    } else if args.solute_order != "random" {
        eprintln!("error: --solute-order must be random or cells");
        std::process::exit(2);
    }
    let mass = vec![10.0; n];
    let split = args.split;
    if args.device_resident {
        let arrays = match mpcbox::backend::cuda::DeviceSoluteArrays::upload(
            s.cuda_ordinal().unwrap_or(0),
            &pos,
            &vel,
            &mass,
        ) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("device-resident solutes need the fluid on a GPU: {e}");
                std::process::exit(2);
            }
        };
        let solutes = arrays.solutes();
        let overlap = args.overlap;
        ms_per_step(args, s, &mut |s: &mut Solvent| {
            let t0 = Instant::now();
            if overlap {
                s.begin_device_step(solutes.n).expect("begin");
            }
            s.step_with_device_solutes(&solutes)
                .expect("device-resident coupled step");
            t0.elapsed().as_secs_f64()
        })
    } else {
        // the host-side validation alone (part of every host-array step)
        let t0 = Instant::now();
        for _ in 0..5 {
            s.check_solutes(&pos, &vel, &mass).expect("valid solutes");
        }
        eprintln!(
            "{n} host solutes: validation {:.3} ms",
            t0.elapsed().as_secs_f64() * 1e3 / 5.0
        );
        ms_per_step(args, s, &mut |s: &mut Solvent| {
            for (p, v) in pos.iter_mut().zip(&vel) {
                for k in 0..3 {
                    p[k] += 0.1 * v[k];
                }
            }
            let t0 = Instant::now();
            if split {
                s.begin_step(&pos, &vel, &mass).expect("begin");
                s.finish_step(&mut vel).expect("finish");
            } else {
                s.step_with_solutes(&pos, &mut vel, &mass)
                    .expect("coupled step");
            }
            t0.elapsed().as_secs_f64()
        })
    }
}
