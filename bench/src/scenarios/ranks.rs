//! `ranks` (built with `--features mpi`): the fluid over MPI ranks against one process: the same
//! box (a `--weak`³ × M slab per GPU, stacked in y) run by `mpirun -np R mpcbox-bench ranks`
//! (each rank its GPUs, packets to other ranks through pinned host memory and MPI, or GPU to
//! GPU on one host) and by `mpcbox-bench ranks --slabs S` alone (all slabs in one process,
//! peer copies). One row per run: particle-steps per second through `Backend::step`, the
//! profiled phases, the part of the exchange spent crossing between ranks, and beside it the
//! hardware's reference, an MPI ping-pong of one link's packets per step (rank 0 ↔ 1).

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use mpcbox::backend::cuda::multi::{MultiCudaBackend, MULTI_PHASE_NAMES};
use mpcbox::backend::Backend;
use mpcbox::config::{Config, DeviceChoice, Thermostat};
use mpcbox::physics::Physics;

use super::err;
use crate::machine::Machine;
use crate::record::Recorder;
use crate::Res;

#[derive(clap::Args)]
pub struct Args {
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

pub fn run(a: Args, records: Option<&Path>) -> Res<()> {
    let (rank, ranks) = (mpcbox::ranks::rank(), mpcbox::ranks::size());
    let gpus_of_run = if ranks > 1 { ranks } else { a.gpus.len() };
    let slabs = if a.slabs > 0 {
        a.slabs
    } else {
        gpus_of_run.max(2)
    };
    let cells = [a.weak, a.weak * slabs as u32, a.weak];
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({}, {}, {}), particles_per_cell: {}, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), steps: 100)",
        cells[0], cells[1], cells[2], a.m
    ))
    .map_err(err)?;
    cfg.thermostat = Thermostat::Mbs;
    cfg.grid_shift = true;
    cfg.seed = 12345;
    let device = DeviceChoice::Cuda(a.gpus.iter().map(|&g| g as u32).collect());
    cfg.device = device.clone();
    cfg.tuning.slabs = slabs as u32;
    let phys = Physics::from_config(&cfg);
    let n = cfg.n_fluid();
    let t0 = Instant::now();
    // every process builds the whole initial state (timed apart from the opening)
    let state = mpcbox::state::FluidState::initial(&cfg);
    let t_state = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    let opened = if ranks > 1 {
        let source = Some(mpcbox::fluid_parts::FluidSource::State(&state));
        mpcbox::backend::factory::open_gpus_over_ranks(&cfg, &phys, source, &a.gpus)
    } else {
        let ords = mpcbox::backend::slab_gpus(&a.gpus, slabs);
        MultiCudaBackend::open(&cfg, &phys, Some(&state), &ords)
    };
    drop(state);
    let mut be = match opened {
        Ok(b) => b,
        Err(e) => {
            eprintln!("rank {rank}: error: {e}");
            mpcbox::ranks::abort_all(1);
            return Err(e.to_string());
        }
    };
    eprintln!(
        "rank {rank}: initial state in {t_state:.1} s, then {} opened in {:.1} s",
        be.describe(),
        t0.elapsed().as_secs_f64()
    );
    let seconds = super::seconds_per_step(&mut be, &phys, a.warmup, a.steps, 0)? * a.steps as f64;
    // the phase split, synchronised after each phase (slower than the timed run)
    let prof = a.steps.min(20);
    be.set_profiling(true);
    let base = a.warmup.max(20) + a.steps;
    for s in base..base + prof {
        be.step(&phys.plan(s, false, (s + 1).is_multiple_of(20)), None)
            .map_err(err)?;
    }
    let (ph, migrated) = be.phase_seconds();
    let crossing = be.rank_exchange_seconds();
    // one link's packets per step: arrivals at this process / its links (two per slab face)
    let link_bytes = (migrated as f64 / prof as f64 / (2.0 * be.gpus() as f64) * 40.0) as usize;
    let ping = mpcbox::ranks::measure_ping_pong(link_bytes, 50);
    if rank != 0 {
        return Ok(());
    }
    let mut rec = Recorder::new("ranks", Machine::detect(&device, gpus_of_run), records);
    if let Some(t) = ping {
        rec.reference(
            "MPI ping-pong of one link's packets GB/s",
            Ok(link_bytes as f64 / t / 1e9),
        );
    }
    let how = if ranks > 1 {
        format!(
            "{ranks} ranks × {} GPU(s)",
            a.gpus.len().div_ceil(ranks).max(1)
        )
    } else {
        format!("1 process, GPUs {:?}", a.gpus)
    };
    let per = |t: f64| t * 1e3 / prof as f64;
    let mut figures = vec![
        (
            "Gparticle-steps/s",
            n as f64 * a.steps as f64 / seconds / 1e9,
        ),
        ("ms/step", seconds * 1e3 / a.steps as f64),
    ];
    for (name, t) in MULTI_PHASE_NAMES.iter().zip(ph) {
        figures.push((name, per(t)));
    }
    let between = [
        "between ranks: copy-out wait",
        "headers+parse",
        "rank skew",
        "MPI transfer",
    ];
    for (name, t) in between.iter().zip(crossing) {
        figures.push((name, per(t)));
    }
    figures.push(("migrated/step (rank 0)", migrated as f64 / prof as f64));
    figures.push(("MPI ping-pong µs", ping.map_or(f64::NAN, |t| t * 1e6)));
    rec.row(
        &[
            ("run", json!(how)),
            ("slabs", json!(slabs)),
            (
                "cells",
                json!(format!("{}×{}×{}", cells[0], cells[1], cells[2])),
            ),
            ("particles", json!(n)),
            ("link bytes", json!(link_bytes)),
        ],
        &figures,
    )
}
