//! The fluid over MPI ranks against one process: the same box (a `--weak`³ × m slab per GPU,
//! stacked in y) run by `mpirun -np R mpcbox-bench-ranks` (each rank its GPUs, packets to
//! other ranks through pinned host memory and MPI) and by `mpcbox-bench-ranks --slabs S` alone
//! (all slabs in one process, peer copies). Prints one markdown row per run: particle-steps
//! per second through `Backend::step`, the profiled phases, the part of the exchange spent
//! crossing between ranks, and beside it the hardware's reference, an MPI ping-pong of one
//! link's packets per step (rank 0 ↔ 1).
//!
//! Usage: [mpirun -np R] mpcbox-bench-ranks [--weak 256] [--m 10] [--slabs S] [--steps 50]
//!        (built with `--features mpi`; `bench/scripts/ranks.sh` runs both ways)

use std::time::Instant;

use clap::Parser;
use mpcbox::backend::cuda::multi::{MultiCudaBackend, MULTI_PHASE_NAMES};
use mpcbox::backend::Backend;
use mpcbox::config::{Config, DeviceChoice, Thermostat};
use mpcbox::physics::Physics;

#[derive(Parser)]
struct Args {
    /// Edge of each slab's cubic block in cells (the box is weak × slabs·weak × weak).
    #[arg(long, default_value_t = 256)]
    weak: u32,
    /// Particles per cell.
    #[arg(long, default_value_t = 10)]
    m: u32,
    /// Slabs of the box (default: one per GPU of the run).
    #[arg(long, default_value_t = 0)]
    slabs: usize,
    /// GPUs of one process (alone), or each rank's share of the host's (under mpirun).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    gpus: Vec<usize>,
    /// Timed steps.
    #[arg(long, default_value_t = 50)]
    steps: u64,
    /// Untimed steps first (at least one reorder).
    #[arg(long, default_value_t = 20)]
    warmup: u64,
}

fn config(cells: [u32; 3], m: u32, gpus: &[usize], slabs: usize) -> Config {
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({}, {}, {}), particles_per_cell: {m}, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), steps: 100)",
        cells[0], cells[1], cells[2]
    ))
    .expect("bench config is valid");
    cfg.thermostat = Thermostat::Mbs;
    cfg.grid_shift = true;
    cfg.seed = 12345;
    cfg.device = DeviceChoice::Cuda(gpus.iter().map(|&g| g as u32).collect());
    cfg.tuning.slabs = slabs as u32;
    cfg
}

#[allow(clippy::manual_is_multiple_of)] // rust-version 1.80
fn main() {
    let _mpi = mpcbox::ranks::init();
    let args = Args::parse();
    let (rank, ranks) = (mpcbox::ranks::rank(), mpcbox::ranks::size());
    let gpus_of_run = if ranks > 1 { ranks } else { args.gpus.len() };
    let slabs = if args.slabs > 0 {
        args.slabs
    } else {
        gpus_of_run.max(2)
    };
    let cells = [args.weak, args.weak * slabs as u32, args.weak];
    let cfg = config(cells, args.m, &args.gpus, slabs);
    let phys = Physics::from_config(&cfg);
    let n = cfg.n_fluid();
    let t0 = Instant::now();
    // every process builds the whole initial state (timed apart from the opening)
    let state = mpcbox::state::FluidState::initial(&cfg);
    let t_state = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    let opened = if ranks > 1 {
        mpcbox::backend::factory::open_gpus_over_ranks(
            &cfg,
            &phys,
            Some(mpcbox::fluid_parts::FluidSource::State(&state)),
            &args.gpus,
        )
    } else {
        let ords = mpcbox::backend::slab_gpus(&args.gpus, slabs);
        MultiCudaBackend::open(&cfg, &phys, Some(&state), &ords)
    };
    drop(state);
    let mut be = match opened {
        Ok(b) => b,
        Err(e) => {
            eprintln!("rank {rank}: error: {e}");
            mpcbox::ranks::abort_all(1);
            std::process::exit(1);
        }
    };
    eprintln!(
        "rank {rank}: initial state in {t_state:.1} s, then {} opened in {:.1} s",
        be.describe(),
        t0.elapsed().as_secs_f64()
    );
    let plan = |s: u64| phys.plan(s, false, (s + 1) % 20 == 0);
    for s in 0..args.warmup {
        be.step(&plan(s), None).unwrap();
    }
    let t = Instant::now();
    for s in args.warmup..args.warmup + args.steps {
        be.step(&plan(s), None).unwrap();
    }
    let seconds = t.elapsed().as_secs_f64();
    // the phase split, synchronised after each phase (slower than the timed run)
    let prof = args.steps.min(20);
    be.set_profiling(true);
    let base = args.warmup + args.steps;
    for s in base..base + prof {
        be.step(&plan(s), None).unwrap();
    }
    let (ph, migrated) = be.phase_seconds();
    let crossing = be.rank_exchange_seconds();
    let crossing_ms: Vec<String> = crossing
        .iter()
        .map(|t| format!("{:.3}", t * 1e3 / prof as f64))
        .collect();
    // one link's packets per step: arrivals at this process / its links (two per slab face)
    let link_bytes = (migrated as f64 / prof as f64 / (2.0 * be.gpus() as f64) * 40.0) as usize;
    let ping = mpcbox::ranks::measure_ping_pong(link_bytes, 50);
    if rank != 0 {
        return;
    }
    let ms = seconds * 1e3 / args.steps as f64;
    let how = if ranks > 1 {
        format!(
            "{ranks} ranks × {} GPU(s)",
            args.gpus.len().div_ceil(ranks).max(1)
        )
    } else {
        format!("1 process, GPUs {:?}", args.gpus)
    };
    println!(
        "| run | slabs | cells | particles | G particle-steps/s | ms/step | profiled ms/step: {} | of the exchange, between ranks: copy-out wait / headers+parse / rank skew / MPI transfer (ms) | particles migrated/step (rank 0) | MPI ping-pong of one link's packets (hardware) |",
        MULTI_PHASE_NAMES.join(" / ")
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let phases: Vec<String> = ph
        .iter()
        .map(|t| format!("{:.3}", t * 1e3 / prof as f64))
        .collect();
    let ping = match ping {
        Some(t) => format!(
            "{link_bytes} B: {:.1} µs ({:.2} GB/s)",
            t * 1e6,
            link_bytes as f64 / t / 1e9
        ),
        None => "-".into(),
    };
    println!(
        "| {how} | {slabs} | {}×{}×{} | {n} | {:.2} | {:.3} | {} | {} | {:.0} | {ping} |",
        cells[0],
        cells[1],
        cells[2],
        n as f64 * args.steps as f64 / seconds / 1e9,
        ms,
        phases.join(" / "),
        crossing_ms.join(" / "),
        migrated as f64 / prof as f64,
    );
}
