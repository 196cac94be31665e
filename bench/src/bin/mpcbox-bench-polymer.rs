//! `mpcbox-bench-polymer`: a polymer solution end to end, the coupled run against its parts.
//! Kremer-Grest chains (FENE + WCA, bead mass 10) in an SRD solvent (M = 10, h = 0.1, MBS),
//! 10 MD steps per collision. Three timings on the same system: the fluid alone (MPC steps),
//! the GPU MD engine alone (MD steps), and the coupled run (`md::coupled::Coupling`, as
//! `mpcbox run` does it). Default: 128³ cells, 4096 chains of 50 beads (0.1 beads per cell),
//! 200 collisions — the system of the coupling issue.

use std::time::Instant;

use clap::Parser;
use mpcbox::config::{Config, DeviceChoice};
use mpcbox::md::coupled::Coupling;
use mpcbox::md::GpuMd;
use mpcbox::Solvent;

#[derive(Parser)]
#[command(about = "Polymer solution: coupled run vs fluid alone and MD alone")]
struct Args {
    /// Box edge in cells.
    #[arg(long, default_value_t = 128)]
    cells: u32,
    #[arg(long, default_value_t = 4096)]
    chains: u32,
    #[arg(long, default_value_t = 50)]
    chain_length: u32,
    /// Timed collisions (MPC steps); MD steps are 10 per collision.
    #[arg(long, default_value_t = 200)]
    collisions: u64,
    /// Untimed collisions first (kernel compilation, first reorders).
    #[arg(long, default_value_t = 20)]
    warmup: u64,
    /// Fluid device: cuda:0, cuda:0,1, all, cpu.
    #[arg(long, default_value = "cuda:0")]
    device: String,
}

const STEPS_PER_COLLISION: u64 = 10;

fn config(a: &Args, device: DeviceChoice) -> Config {
    let l = a.cells;
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({l}, {l}, {l}), particles_per_cell: 10, time_step: 0.1, \
         collision: Srd(angle_deg: 130.0), thermostat: Mbs, seed: 3, steps: 1, \
         md: (steps_per_collision: {STEPS_PER_COLLISION}, \
              system: Chains(n_chains: {}, chain_length: {}, bead_mass: 10.0, bond_length: 0.97), \
              pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [Fene(k: 30.0, r0: 1.5)], \
              thermostat: None, skin: 0.3, neighbor: Auto, reorder_every: 20, \
              backend: Cuda, trajectory_interval: 0, observable_interval: 0))",
        a.chains, a.chain_length
    ))
    .unwrap_or_else(|e| fail(&format!("config: {e}")));
    cfg.device = device;
    cfg.output.observable_interval = 0;
    cfg.output.equilibration_steps = u64::MAX;
    cfg
}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(2)
}

fn main() {
    let a = Args::parse();
    let device = DeviceChoice::parse_cli(&a.device).unwrap_or_else(|e| fail(&e.to_string()));
    let cfg = config(&a, device);
    let md_cfg = cfg.md.clone().unwrap_or_else(|| fail("no md section"));

    // Fluid alone.
    let mut fluid = Solvent::new(cfg.clone()).unwrap_or_else(|e| fail(&e.to_string()));
    for _ in 0..a.warmup {
        fluid.step().unwrap_or_else(|e| fail(&e.to_string()));
    }
    let t = Instant::now();
    for _ in 0..a.collisions {
        fluid.step().unwrap_or_else(|e| fail(&e.to_string()));
    }
    let _ = fluid.moments();
    let fluid_s = t.elapsed().as_secs_f64();
    let fluid_desc = fluid.backend_description();
    drop(fluid);

    // MD alone, on the GPU the fluid uses first.
    let md = md_cfg.build(&cfg).unwrap_or_else(|e| fail(&e.to_string()));
    let beads = md.sys.len();
    let ordinal = match &cfg.device {
        DeviceChoice::Cuda(ids) if !ids.is_empty() => ids[0] as usize,
        _ => 0,
    };
    let mut gpu = GpuMd::new(
        md.sys.clone(),
        md.ff.clone(),
        md.thermostat,
        md.settings().clone(),
        ordinal,
    )
    .unwrap_or_else(|e| fail(&e.to_string()));
    gpu.run(a.warmup * STEPS_PER_COLLISION)
        .unwrap_or_else(|e| fail(&e.to_string()));
    gpu.synchronize().unwrap_or_else(|e| fail(&e.to_string()));
    let t = Instant::now();
    gpu.run(a.collisions * STEPS_PER_COLLISION)
        .unwrap_or_else(|e| fail(&e.to_string()));
    gpu.synchronize().unwrap_or_else(|e| fail(&e.to_string()));
    let md_s = t.elapsed().as_secs_f64();
    drop(gpu);

    // Coupled.
    let mut solvent = Solvent::new(cfg.clone()).unwrap_or_else(|e| fail(&e.to_string()));
    let mut coupling = Coupling::new(&md_cfg, &solvent).unwrap_or_else(|e| fail(&e.to_string()));
    for _ in 0..a.warmup {
        coupling
            .step(&mut solvent)
            .unwrap_or_else(|e| fail(&e.to_string()));
    }
    let _ = solvent.moments();
    let t = Instant::now();
    for _ in 0..a.collisions {
        coupling
            .step(&mut solvent)
            .unwrap_or_else(|e| fail(&e.to_string()));
    }
    let _ = solvent.moments();
    let coupled_s = t.elapsed().as_secs_f64();

    println!(
        "| cells | fluid particles | beads | collisions | fluid alone s | MD alone s | coupled s | coupled / (fluid + MD) | path |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {0}³ | {1} | {beads} | {2} | {fluid_s:.3} | {md_s:.3} | {coupled_s:.3} | {3:.2} | {4} |",
        a.cells,
        solvent.n_fluid(),
        a.collisions,
        coupled_s / (fluid_s + md_s),
        coupling.path_description(),
    );
    println!("\nfluid: {fluid_desc}");
}
