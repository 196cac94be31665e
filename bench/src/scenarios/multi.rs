//! `multi`: multi-GPU scaling of the slab decomposition: strong scaling (one box, 1 → 2 → 4
//! GPUs) and weak scaling (a slab of `--weak`³ × M per GPU, stacked in y), particle-steps per
//! second through `Backend::step` (which waits for each step, as a coupled MD loop does),
//! efficiency, and the time in each phase from a profiled run; the GPU-to-GPU copy rates by
//! peer copy and through pinned host memory first (the run's references).

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use mpcbox::backend::cuda::multi::{measure_transfer, MultiCudaBackend, MULTI_PHASE_NAMES};
use mpcbox::backend::cuda::{CellSumMethod, CudaBackend};
use mpcbox::backend::Backend;
use mpcbox::config::{Config, DeviceChoice, Thermostat};
use mpcbox::physics::Physics;

use super::{err, seconds_per_step};
use crate::machine::{self, Machine};
use crate::record::Recorder;
use crate::Res;

#[derive(clap::Args)]
pub struct Args {
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
    /// Bytes of the copy-rate test (0: skip).
    #[arg(long, default_value_t = 256 << 20)]
    copy_bytes: usize,
}

fn config(cells: [u32; 3], m: u32) -> Res<Config> {
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({}, {}, {}), particles_per_cell: {m}, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), steps: 100, device: Cuda([0]))",
        cells[0], cells[1], cells[2]
    ))
    .map_err(err)?;
    cfg.thermostat = Thermostat::Mbs;
    cfg.grid_shift = true;
    cfg.seed = 12345;
    Ok(cfg)
}

/// One measured configuration: particle-steps/s, and (several GPUs) the profiled phases in
/// ms per step and the particles migrated per step.
struct Row {
    rate: f64,
    phases: Option<(Vec<f64>, f64)>,
}

fn measure(g: usize, cells: [u32; 3], a: &Args, transfer: &str) -> Res<Row> {
    let cfg = config(cells, a.m)?;
    let phys = Physics::from_config(&cfg);
    let n = cfg.n_fluid() as f64;
    let t0 = Instant::now();
    if g == 1 {
        let mut be =
            CudaBackend::open(&cfg, &phys, None, 0, CellSumMethod::DEFAULT).map_err(err)?;
        eprintln!(
            "1 GPU {cells:?}: opened in {:.1} s",
            t0.elapsed().as_secs_f64()
        );
        let dt = seconds_per_step(&mut be, &phys, a.warmup, a.steps, 0)?;
        return Ok(Row {
            rate: n / dt,
            phases: None,
        });
    }
    std::env::set_var("MPCBOX_MULTI_TRANSFER", transfer);
    let ords: Vec<usize> = (0..g).collect();
    let mut be = MultiCudaBackend::open(&cfg, &phys, None, &ords).map_err(err)?;
    eprintln!(
        "{g} GPUs {cells:?}: {} opened in {:.1} s",
        be.describe(),
        t0.elapsed().as_secs_f64()
    );
    let dt = seconds_per_step(&mut be, &phys, a.warmup, a.steps, 0)?;
    // the phase split, synchronised after each phase (slower than the timed run)
    let k = a.steps.min(20);
    be.set_profiling(true);
    let base = a.warmup.max(20) + a.steps;
    for s in base..base + k {
        be.step(&phys.plan(s, false, (s + 1).is_multiple_of(20)), None)
            .map_err(err)?;
    }
    let (ph, migrated) = be.phase_seconds();
    let per_step = ph.iter().map(|t| t * 1e3 / k as f64).collect();
    Ok(Row {
        rate: n / dt,
        phases: Some((per_step, migrated as f64 / k as f64)),
    })
}

pub fn run(a: Args, records: Option<&Path>) -> Res<()> {
    let count = mpcbox::backend::cuda::probe()
        .map_err(|e| format!("the multi scenario needs CUDA GPUs: {e}"))?;
    let most = a
        .gpus
        .iter()
        .copied()
        .filter(|&g| g <= count)
        .max()
        .unwrap_or(1);
    let device = DeviceChoice::Cuda((0..most as u32).collect());
    let mut rec = Recorder::new("multi", Machine::detect(&device, most), records);
    rec.reference("device copy GB/s", machine::device_copy_gbps(0));
    if a.copy_bytes > 0 && count >= 2 {
        for b in 1..count.min(4) {
            let r = measure_transfer(0, b, a.copy_bytes, 5).map_err(err)?;
            if b == 1 {
                rec.reference("peer copy GB/s", Ok(r.peer_plain_alloc / 1e9));
                rec.reference("pinned host copy GB/s (GPU to GPU)", Ok(r.via_host / 1e9));
            }
            rec.row(
                &[
                    ("copy", json!(format!("GPU 0 → {b}"))),
                    ("MiB", json!(a.copy_bytes >> 20)),
                ],
                &[
                    ("peer, pool not opened GB/s", r.peer_pool_closed / 1e9),
                    ("peer, pool opened (mpcbox) GB/s", r.peer_pool_open / 1e9),
                    ("peer, cuMemAlloc (hardware) GB/s", r.peer_plain_alloc / 1e9),
                    ("via pinned host GB/s", r.via_host / 1e9),
                ],
            )?;
        }
    }
    let gpus: Vec<usize> = a.gpus.iter().copied().filter(|&g| g <= count).collect();
    for transfer in &a.transfers {
        for (scaling, edge) in [("strong", a.size), ("weak", a.weak)] {
            if edge == 0 {
                continue;
            }
            let mut one = None;
            for &g in &gpus {
                let cells = match scaling {
                    "strong" => [edge; 3],
                    _ => [edge, edge * g as u32, edge],
                };
                let r = match measure(g, cells, &a, transfer) {
                    Ok(r) => r,
                    Err(e) => {
                        eprintln!("{g} GPUs {cells:?}: {e}");
                        continue;
                    }
                };
                let base = *one.get_or_insert(r.rate);
                let speedup = if g == 1 { 1.0 } else { r.rate / base };
                let n = cells.iter().map(|&c| c as f64).product::<f64>() * a.m as f64;
                let mut figures = vec![
                    ("Gparticle-steps/s", r.rate / 1e9),
                    ("ms/step", n / r.rate * 1e3),
                    ("speed-up", speedup),
                    ("efficiency %", 100.0 * speedup / g as f64),
                ];
                let (phases, migrated) = r
                    .phases
                    .unwrap_or((vec![f64::NAN; MULTI_PHASE_NAMES.len()], f64::NAN));
                for (name, ms) in MULTI_PHASE_NAMES.iter().zip(&phases) {
                    figures.push((name, *ms));
                }
                figures.push(("migrated/step", migrated));
                rec.row(
                    &[
                        ("scaling", json!(scaling)),
                        ("GPUs", json!(g)),
                        (
                            "cells",
                            json!(format!("{}×{}×{}", cells[0], cells[1], cells[2])),
                        ),
                        ("M", json!(a.m)),
                        ("transfers", json!(transfer)),
                    ],
                    &figures,
                )?;
            }
        }
    }
    Ok(())
}
