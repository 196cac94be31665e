//! Multi-GPU scaling of the slab decomposition: strong scaling (one box, 1 → 2 → 4 GPUs) and
//! weak scaling (a 256³ × 10 slab per GPU, stacked in y), particle-steps per second through
//! `Backend::step` (which waits for each step, as a coupled MD loop does), efficiency, and the
//! time in the exchange phase (counts, transfers, unpacking) from a profiled run; plus the
//! GPU-to-GPU copy bandwidth by peer copy and through pinned host memory.
//!
//! Usage: mpcbox-bench-multi [--gpus 1,2,4] [--size 256] [--weak 256] [--steps 50]
//!        [--transfers peer,host]

use std::time::Instant;

use clap::Parser;
use mpcbox::backend::cuda::multi::{measure_transfer, MultiCudaBackend, MULTI_PHASE_NAMES};
use mpcbox::backend::cuda::{CellSumMethod, CudaBackend};
use mpcbox::backend::Backend;
use mpcbox::config::{Config, Thermostat};
use mpcbox::physics::Physics;

#[derive(Parser)]
struct Args {
    /// GPU counts to measure (each uses GPUs 0..g).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    gpus: Vec<usize>,
    /// Strong scaling: edge of the cubic box in cells (0: skip).
    #[arg(long, default_value_t = 256)]
    size: u32,
    /// Weak scaling: edge of each GPU's cubic slab in cells (0: skip).
    #[arg(long, default_value_t = 256)]
    weak: u32,
    /// Particles per cell.
    #[arg(long, default_value_t = 10)]
    m: u32,
    /// Timed steps.
    #[arg(long, default_value_t = 50)]
    steps: u64,
    /// Untimed steps first (at least one reorder).
    #[arg(long, default_value_t = 20)]
    warmup: u64,
    /// Transfer modes for the multi-GPU runs (MPCBOX_MULTI_TRANSFER).
    #[arg(long, value_delimiter = ',', default_value = "peer")]
    transfers: Vec<String>,
    /// Bytes of the copy-bandwidth test (0: skip).
    #[arg(long, default_value_t = 256 << 20)]
    copy_bytes: usize,
}

fn config(cells: [u32; 3], m: u32) -> Config {
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({}, {}, {}), particles_per_cell: {m}, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), steps: 100, device: Cuda([0]))",
        cells[0], cells[1], cells[2]
    ))
    .expect("bench config is valid");
    cfg.thermostat = Thermostat::Mbs;
    cfg.shear_rate = 0.0;
    cfg.grid_shift = true;
    cfg.seed = 12345;
    cfg
}

/// Steps per second through `Backend::step`, then (multi-GPU) the profiled phase split.
#[allow(clippy::manual_is_multiple_of)] // rust-version 1.80
fn measure(be: &mut dyn Backend, phys: &Physics, warmup: u64, steps: u64) -> f64 {
    let plan = |s: u64| phys.plan(s, false, (s + 1) % 20 == 0);
    for s in 0..warmup {
        be.step(&plan(s), None).unwrap();
    }
    let t = Instant::now();
    for s in warmup..warmup + steps {
        be.step(&plan(s), None).unwrap();
    }
    steps as f64 / t.elapsed().as_secs_f64()
}

struct Row {
    gpus: usize,
    cells: [u32; 3],
    n: u64,
    rate: f64,
    phases: Option<([f64; 3], u64, u64)>,
}

fn run(g: usize, cells: [u32; 3], args: &Args, transfer: &str) -> Option<Row> {
    let cfg = config(cells, args.m);
    let phys = Physics::from_config(&cfg);
    let n = cfg.n_fluid();
    let t0 = Instant::now();
    if g == 1 {
        let mut be = match CudaBackend::open(&cfg, &phys, None, 0, CellSumMethod::DEFAULT) {
            Ok(b) => b,
            Err(e) => {
                println!("<!-- 1 GPU {cells:?}: {e} -->");
                return None;
            }
        };
        eprintln!(
            "1 GPU {cells:?}: opened in {:.1} s",
            t0.elapsed().as_secs_f64()
        );
        let sps = measure(&mut be, &phys, args.warmup, args.steps);
        return Some(Row {
            gpus: 1,
            cells,
            n,
            rate: sps * n as f64,
            phases: None,
        });
    }
    std::env::set_var("MPCBOX_MULTI_TRANSFER", transfer);
    let ords: Vec<usize> = (0..g).collect();
    let mut be = match MultiCudaBackend::open(&cfg, &phys, None, &ords) {
        Ok(b) => b,
        Err(e) => {
            println!("<!-- {g} GPUs {cells:?}: {e} -->");
            return None;
        }
    };
    eprintln!(
        "{g} GPUs {cells:?}: {} opened in {:.1} s",
        be.describe(),
        t0.elapsed().as_secs_f64()
    );
    let sps = measure(&mut be, &phys, args.warmup, args.steps);
    // the phase split, synchronised after each phase (slower than the timed run)
    let prof_steps = args.steps.min(20);
    be.set_profiling(true);
    let base = args.warmup + args.steps;
    for s in base..base + prof_steps {
        be.step(&phys.plan(s, false, (s + 1) % 20 == 0), None)
            .unwrap();
    }
    let (ph, migrated) = be.phase_seconds();
    Some(Row {
        gpus: g,
        cells,
        n,
        rate: sps * n as f64,
        phases: Some((ph, migrated, prof_steps)),
    })
}

fn print_rows(rows: &[Row]) {
    println!("| GPUs | cells | particles | G particle-steps/s | ms/step | speed-up | efficiency | profiled ms/step: {} | particles migrated/step |", MULTI_PHASE_NAMES.join(" / "));
    println!("|---|---|---|---|---|---|---|---|---|");
    let base = rows.iter().find(|r| r.gpus == 1).map(|r| r.rate);
    for r in rows {
        let ms = r.n as f64 / r.rate * 1e3;
        let (speedup, eff) = match base {
            Some(b) => {
                // particle-steps/s against one GPU's, per GPU: the efficiency of strong
                // scaling (same box) and of weak scaling (a slab per GPU) alike
                let s = r.rate / b;
                (s, s / r.gpus as f64)
            }
            None => (f64::NAN, f64::NAN),
        };
        let (phases, mig) = match &r.phases {
            Some((ph, m, k)) => (
                ph.iter()
                    .map(|t| format!("{:.3}", t * 1e3 / *k as f64))
                    .collect::<Vec<_>>()
                    .join(" / "),
                format!("{:.0}", *m as f64 / *k as f64),
            ),
            None => ("-".into(), "-".into()),
        };
        println!(
            "| {} | {}×{}×{} | {} | {:.2} | {:.2} | {:.2}× | {:.0}% | {} | {} |",
            r.gpus,
            r.cells[0],
            r.cells[1],
            r.cells[2],
            r.n,
            r.rate / 1e9,
            ms,
            speedup,
            100.0 * eff,
            phases,
            mig
        );
    }
}

fn main() {
    let args = Args::parse();
    let count = match mpcbox::backend::cuda::probe() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    println!("GPUs present: {count}");
    if args.copy_bytes > 0 && count >= 2 {
        println!();
        println!("| copy | GB/s ({} MiB) |", args.copy_bytes >> 20);
        println!("|---|---|");
        for b in 1..count.min(4) {
            match measure_transfer(0, b, args.copy_bytes, 5) {
                Ok(r) => {
                    println!(
                        "| GPU 0 → {b}, peer copy, pool memory not opened to the peer | {:.1} |",
                        r.peer_pool_closed / 1e9
                    );
                    println!(
                        "| GPU 0 → {b}, peer copy, pool opened (mpcbox) | {:.1} |",
                        r.peer_pool_open / 1e9
                    );
                    println!(
                        "| GPU 0 → {b}, peer copy, cuMemAlloc memory (hardware reference) | {:.1} |",
                        r.peer_plain_alloc / 1e9
                    );
                    println!("| GPU 0 → {b}, via pinned host | {:.1} |", r.via_host / 1e9);
                }
                Err(e) => println!("| GPU 0 → {b} | error: {e} |"),
            }
        }
    }
    let gpus: Vec<usize> = args.gpus.iter().copied().filter(|&g| g <= count).collect();
    for transfer in &args.transfers {
        if args.size > 0 {
            println!();
            println!(
                "strong scaling, {}³ × {} (MBS, grid shift, reorder every 20), transfers: {transfer}",
                args.size, args.m
            );
            let rows: Vec<Row> = gpus
                .iter()
                .filter_map(|&g| run(g, [args.size; 3], &args, transfer))
                .collect();
            print_rows(&rows);
        }
        if args.weak > 0 {
            println!();
            println!(
                "weak scaling, {}³ × {} per GPU (stacked in y), transfers: {transfer}",
                args.weak, args.m
            );
            let rows: Vec<Row> = gpus
                .iter()
                .filter_map(|&g| {
                    run(
                        g,
                        [args.weak, args.weak * g as u32, args.weak],
                        &args,
                        transfer,
                    )
                })
                .collect();
            print_rows(&rows);
        }
    }
}
