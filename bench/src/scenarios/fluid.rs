//! `fluid`: the MPC step through the `Solvent` API (one synchronisation per step), SRD 130°,
//! h = 0.1, grid shift, MBS thermostat, M = 10, without and with Lees-Edwards shear.

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use mpcbox::config::{Config, DeviceChoice, Thermostat};
use mpcbox::Solvent;

use super::{cube, err, recorder};
use crate::Res;

#[derive(clap::Args)]
pub struct Args {
    /// Box edges in cells (cubic boxes).
    #[arg(long, default_value = "64", value_delimiter = ',')]
    sizes: Vec<u32>,
    /// Timed steps per case (after the warm-up steps).
    #[arg(long, default_value_t = 20)]
    steps: u64,
    #[arg(long, default_value_t = 3)]
    warmup: u64,
    /// Repetitions per case; the median is recorded.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// auto | cpu | cuda:N
    #[arg(long, default_value = "cpu")]
    device: String,
    /// CPU worker threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Steps between reorderings of particles by cell (default: the backend's).
    #[arg(long)]
    reorder: Option<u64>,
}

fn config(l: u32, shear: bool, device: DeviceChoice, a: &Args) -> Res<Config> {
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({l}, {l}, {l}), particles_per_cell: 10, time_step: 0.1, \
         collision: Srd(angle_deg: 130.0), grid_shift: true, thermostat: Mbs, steps: 1)"
    ))
    .map_err(err)?;
    cfg.thermostat = Thermostat::Mbs;
    cfg.shear_rate = if shear { 0.01 } else { 0.0 };
    cfg.device = device;
    cfg.tuning.cpu_threads = a.threads;
    if let Some(r) = a.reorder {
        cfg.tuning.reorder_interval = Some(r);
    }
    cfg.output.observable_interval = 0;
    cfg.output.equilibration_steps = u64::MAX; // the bare step: no sampling
    Ok(cfg)
}

pub fn run(a: Args, records: Option<&Path>) -> Res<()> {
    let device = super::device(&a.device)?;
    let mut rec = recorder("fluid", &device, records);
    for &l in &a.sizes {
        for shear in [false, true] {
            let mut s = Solvent::new(config(l, shear, device.clone(), &a)?).map_err(err)?;
            for _ in 0..a.warmup {
                s.step().map_err(err)?;
            }
            let mut rates = Vec::new();
            for _ in 0..a.repeats.max(1) {
                let t0 = Instant::now();
                for _ in 0..a.steps {
                    s.step().map_err(err)?;
                }
                // one reduction waits for any queued device work
                s.moments().map_err(err)?;
                rates.push(s.n_fluid() as f64 * a.steps as f64 / t0.elapsed().as_secs_f64());
            }
            rates.sort_by(f64::total_cmp);
            let r = rates[rates.len() / 2];
            rec.row(
                &[
                    ("cells", cube(l)),
                    ("particles", json!(s.n_fluid())),
                    ("shear", json!(shear)),
                    ("backend", json!(s.backend_description())),
                ],
                &[
                    ("particle-steps/s", r),
                    ("ms/step", 1e3 * s.n_fluid() as f64 / r),
                ],
            )?;
        }
    }
    Ok(())
}
