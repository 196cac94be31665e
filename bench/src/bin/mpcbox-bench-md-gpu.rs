//! GPU MD benchmark: LJ liquid (ρ* = 0.8442, rc = 2.5, energy-shifted, T* = 0.72 start, NVE,
//! skin 0.3, list check every step) on the GPU engine (`mpcbox::md::GpuMd`), in atom-steps/s
//! for 32k, 256k and 1M atoms. Markdown table.

use std::time::Instant;

use clap::Parser;
use mpcbox::md::build::{fcc_lattice, maxwell_velocities};
use mpcbox::md::{ForceField, GpuMd, LjTable, MdSettings, MdThermostat, NeighborMode, PairStyle};

#[derive(Parser)]
#[command(about = "GPU MD benchmark: LJ liquid atom-steps/s")]
struct Args {
    /// FCC cells per edge (4 n³ atoms): 20 = 32k, 40 = 256k, 64 = 1M.
    #[arg(long, value_delimiter = ',', default_value = "20,40,64")]
    cells: Vec<usize>,
    /// Timed MD steps per system.
    #[arg(long, default_value_t = 500)]
    steps: u64,
    /// Untimed warm-up steps.
    #[arg(long, default_value_t = 50)]
    warmup: u64,
    /// CUDA device.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

fn main() {
    let a = Args::parse();
    println!("| atoms | steps | list builds | s/step | atom-steps/s | E drift (rel) |");
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut device = String::new();
    for &c in &a.cells {
        let mut sys = fcc_lattice([c; 3], 0.8442, 1.0);
        maxwell_velocities(&mut sys, 0.72, 87287);
        let ff = ForceField {
            pair: PairStyle::Lj(LjTable::uniform(1, 1.0, 1.0, 2.5, true)),
            bond_styles: vec![],
        };
        let st = MdSettings {
            dt: 0.005,
            kt: 0.72,
            seed: 1,
            skin: 0.3,
            neighbor: NeighborMode::Verlet,
            reorder_every: 20,
            threads: 0,
            shear: None,
        };
        let mut md = match GpuMd::new(sys, ff, MdThermostat::None, st, a.device) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("GPU MD engine unavailable: {e}");
                std::process::exit(2);
            }
        };
        device = md.describe();
        let n = md.len();
        md.run(a.warmup).unwrap();
        let e0 = md.total_energy().unwrap();
        let b0 = md.list_builds();
        md.synchronize().unwrap();
        let t0 = Instant::now();
        md.run(a.steps).unwrap();
        md.synchronize().unwrap();
        let dt = t0.elapsed().as_secs_f64();
        let e1 = md.total_energy().unwrap();
        println!(
            "| {n} | {} | {} | {:.3e} | {:.3e} | {:.1e} |",
            a.steps,
            md.list_builds() - b0,
            dt / a.steps as f64,
            n as f64 * a.steps as f64 / dt,
            ((e1 - e0) / e0).abs()
        );
    }
    println!("\ndevice: {device}");
}
