//! `md-drift` and `md-crossover`: the bundled MD engine's precision and its neighbour-list
//! crossover, on the LJ liquid of `md`.
//!
//! * `md-drift`: relative total-energy drift per 10⁶ steps of an NVE LJ liquid for dt = 0.001
//!   and 0.005 (a linear fit, extrapolated from the steps run).
//! * `md-crossover`: all-pairs against Verlet-list time per step for small N (what
//!   `neighbor::ALL_PAIRS_CROSSOVER` is set from).

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use mpcbox::config::DeviceChoice;
use mpcbox::md::NeighborMode;

use super::md::lj_system;
use super::{err, recorder};
use crate::Res;

#[derive(clap::Args)]
pub struct DriftArgs {
    /// Steps of each drift run.
    #[arg(long, default_value_t = 100_000)]
    steps: u64,
    /// FCC cells per edge of the system (4 n³ atoms).
    #[arg(long, default_value_t = 8)]
    cells: usize,
}

#[derive(clap::Args)]
pub struct CrossoverArgs {
    /// Timed steps per system.
    #[arg(long, default_value_t = 400)]
    steps: u64,
}

pub fn drift(a: DriftArgs, records: Option<&Path>) -> Res<()> {
    let mut rec = recorder("md-drift", &DeviceChoice::Cpu, records);
    for dt in [0.001, 0.005] {
        let mut md = lj_system(a.cells, 0, dt, NeighborMode::Verlet, 2.5)?;
        // melt the lattice before measuring
        md.run((5.0 / dt) as u64).map_err(err)?;
        let e0 = md.total_energy();
        let every = (a.steps / 1000).max(1);
        let (mut ts, mut es) = (vec![], vec![]);
        let mut worst: f64 = 0.0;
        let mut done = 0;
        while done < a.steps {
            md.run(every).map_err(err)?;
            done += every;
            let e = md.total_energy();
            worst = worst.max(((e - e0) / e0).abs());
            ts.push(done as f64);
            es.push(e);
        }
        let n = ts.len() as f64;
        let (mt, me) = (ts.iter().sum::<f64>() / n, es.iter().sum::<f64>() / n);
        let slope = ts
            .iter()
            .zip(&es)
            .map(|(t, e)| (t - mt) * (e - me))
            .sum::<f64>()
            / ts.iter().map(|t| (t - mt).powi(2)).sum::<f64>();
        rec.row(
            &[
                ("atoms", json!(md.sys.len())),
                ("dt", json!(dt)),
                ("steps", json!(done)),
            ],
            &[
                ("E/N at start", e0 / md.sys.len() as f64),
                ("max |ΔE/E|", worst),
                ("drift of E/|E0| per 10⁶ steps", slope * 1e6 / e0.abs()),
            ],
        )?;
    }
    Ok(())
}

pub fn crossover(a: CrossoverArgs, records: Option<&Path>) -> Res<()> {
    let mut rec = recorder("md-crossover", &DeviceChoice::Cpu, records);
    for (rc, cells_list) in [(1.5, vec![3usize, 4, 5, 6]), (2.5, vec![4, 5, 6, 7, 8])] {
        let per = 4.0 / 3.0 * std::f64::consts::PI * (rc + 0.3f64).powi(3) * 0.8442;
        for cells in cells_list {
            let mut t = [0.0; 2];
            let mut n = 0;
            for (k, mode) in [NeighborMode::AllPairs, NeighborMode::Verlet]
                .into_iter()
                .enumerate()
            {
                let mut md = lj_system(cells, 0, 0.005, mode, rc)?;
                md.run(20).map_err(err)?;
                let t0 = Instant::now();
                md.run(a.steps).map_err(err)?;
                t[k] = t0.elapsed().as_secs_f64() / a.steps.max(1) as f64 * 1e6;
                n = md.sys.len();
                if k == 1 && !md.uses_verlet_list() {
                    t[k] = f64::NAN; // the box is too small for lists
                }
            }
            rec.row(
                &[("rc", json!(rc)), ("atoms", json!(n))],
                &[
                    ("N / list neighbours", n as f64 / per),
                    ("all pairs µs/step", t[0]),
                    ("Verlet µs/step", t[1]),
                ],
            )?;
        }
    }
    Ok(())
}
