//! `md`: the bundled MD engine on an LJ liquid (ρ* = 0.8442, rc = 2.5, energy-shifted, T* = 0.72
//! start, NVE, dt = 0.005, skin 0.3, list check every step) in atom-steps/s: on the CPU at each
//! thread count, with LAMMPS (serial, best of plain and `-sf opt`) beside it where `lmp` runs;
//! on a GPU the GPU engine (`md::GpuMd`), with its list builds and energy drift.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::json;

use mpcbox::md::build::{fcc_lattice, maxwell_velocities};
use mpcbox::md::{
    ForceField, GpuMd, LjTable, Md, MdSettings, MdThermostat, NeighborMode, PairStyle,
};

use super::{err, recorder};
use crate::Res;

#[derive(clap::Args)]
pub struct Args {
    /// FCC cells per edge (4 n³ atoms): 20 = 32k, 40 = 256k, 64 = 1M.
    #[arg(long, value_delimiter = ',', default_value = "20,40")]
    cells: Vec<usize>,
    /// Timed MD steps for 32k atoms (the CPU scales them down for larger systems).
    #[arg(long, default_value_t = 400)]
    steps: u64,
    /// auto | cpu | cuda:N
    #[arg(long, default_value = "cpu")]
    device: String,
    /// CPU thread counts to time.
    #[arg(long, value_delimiter = ',', default_value = "2,1")]
    threads: Vec<usize>,
    /// Timed repetitions on the CPU; the best is recorded (the machine may be shared).
    #[arg(long, default_value_t = 2)]
    repeat: usize,
    /// Skip LAMMPS even when `lmp` is installed.
    #[arg(long)]
    no_lammps: bool,
}

/// The LJ liquid of `cells`³ FCC cells.
pub fn lj_system(cells: usize, threads: usize, dt: f64, mode: NeighborMode, rc: f64) -> Res<Md> {
    let (sys, ff, settings) = lj_parts(cells, threads, dt, mode, rc);
    Md::new(sys, ff, MdThermostat::None, settings).map_err(err)
}

fn lj_parts(
    cells: usize,
    threads: usize,
    dt: f64,
    mode: NeighborMode,
    rc: f64,
) -> (mpcbox::md::System, ForceField, MdSettings) {
    let mut sys = fcc_lattice([cells; 3], 0.8442, 1.0);
    maxwell_velocities(&mut sys, 0.72, 87287);
    let ff = ForceField {
        pair: PairStyle::Lj(LjTable::uniform(1, 1.0, 1.0, rc, true)),
        bond_styles: vec![],
    };
    let settings = MdSettings {
        dt,
        kt: 0.72,
        seed: 1,
        skin: 0.3,
        neighbor: mode,
        reorder_every: 20,
        threads,
        shear: None,
    };
    (sys, ff, settings)
}

pub fn run(a: Args, records: Option<&Path>) -> Res<()> {
    let device = super::device(&a.device)?;
    let mut rec = recorder("md", &device, records);
    match super::gpus_of(&device) {
        Some(g) => gpu(&a, g[0], &mut rec),
        None => cpu(&a, &mut rec),
    }
}

fn gpu(a: &Args, ordinal: usize, rec: &mut crate::record::Recorder) -> Res<()> {
    for &c in &a.cells {
        let (sys, ff, st) = lj_parts(c, 0, 0.005, NeighborMode::Verlet, 2.5);
        let mut md = GpuMd::new(sys, ff, MdThermostat::None, st, ordinal).map_err(err)?;
        let n = md.len();
        md.run(50).map_err(err)?;
        let e0 = md.total_energy().map_err(err)?;
        let b0 = md.list_builds();
        md.synchronize().map_err(err)?;
        let t0 = Instant::now();
        md.run(a.steps).map_err(err)?;
        md.synchronize().map_err(err)?;
        let dt = t0.elapsed().as_secs_f64();
        let e1 = md.total_energy().map_err(err)?;
        rec.row(
            &[
                ("atoms", json!(n)),
                ("engine", json!(md.describe())),
                ("steps", json!(a.steps)),
            ],
            &[
                ("atom-steps/s", n as f64 * a.steps as f64 / dt),
                ("list builds", (md.list_builds() - b0) as f64),
                ("|ΔE/E|", ((e1 - e0) / e0).abs()),
            ],
        )?;
    }
    Ok(())
}

fn cpu(a: &Args, rec: &mut crate::record::Recorder) -> Res<()> {
    let lmp = !a.no_lammps && lammps_available();
    for &cells in &a.cells {
        // larger systems: fewer steps (a quarter per doubling of the edge)
        let steps = (a.steps * 400 / (cells * cells).max(1) as u64).clamp(10, a.steps);
        let reps = if cells >= 64 { 1 } else { a.repeat.max(1) };
        let lammps = lmp.then(|| {
            let best = |suffix: Option<&str>| {
                (0..reps)
                    .filter_map(|_| time_lammps(cells, steps, suffix))
                    .reduce(f64::max)
            };
            best(None)
                .unwrap_or(0.0)
                .max(best(Some("opt")).unwrap_or(0.0))
        });
        for &t in &a.threads {
            let mut rate: f64 = 0.0;
            let mut atoms = 0;
            for _ in 0..reps {
                let mut md = lj_system(cells, t, 0.005, NeighborMode::Verlet, 2.5)?;
                md.run(10).map_err(err)?;
                let t0 = Instant::now();
                md.run(steps).map_err(err)?;
                atoms = md.sys.len();
                rate = rate.max(atoms as f64 * steps as f64 / t0.elapsed().as_secs_f64());
            }
            let lammps = lammps.filter(|&l| l > 0.0).unwrap_or(f64::NAN);
            rec.row(
                &[
                    ("atoms", json!(atoms)),
                    ("threads", json!(t)),
                    ("steps", json!(steps)),
                ],
                &[
                    ("atom-steps/s", rate),
                    ("LAMMPS serial atom-steps/s", lammps),
                    ("× LAMMPS", rate / lammps),
                ],
            )?;
        }
    }
    Ok(())
}

/// Atom-steps/s of LAMMPS, serial (one process, no MPI launcher).
fn time_lammps(cells: usize, steps: u64, suffix: Option<&str>) -> Option<f64> {
    let dir = std::env::temp_dir().join(format!("mpcbox-bench-lmp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let input = format!(
        "units lj\natom_style atomic\nlattice fcc 0.8442\nregion box block 0 {cells} 0 {cells} 0 {cells}\n\
         create_box 1 box\ncreate_atoms 1 box\nmass 1 1.0\nvelocity all create 0.72 87287 loop geom\n\
         pair_style lj/cut 2.5\npair_coeff 1 1 1.0 1.0 2.5\npair_modify shift yes\n\
         neighbor 0.3 bin\nneigh_modify delay 0 every 1 check yes\nfix 1 all nve\ntimestep 0.005\n\
         thermo {steps}\nrun 10\nrun {steps}\n"
    );
    std::fs::write(dir.join("in.lj"), input).ok()?;
    let mut cmd = Command::new("lmp");
    cmd.current_dir(&dir)
        .args(["-in", "in.lj", "-log", "none", "-nocite"]);
    if let Some(s) = suffix {
        cmd.args(["-sf", s]);
    }
    let out = cmd.output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    // "Loop time of 12.3 on 1 procs for 400 steps with 32000 atoms" (the last run)
    let line = text.lines().rfind(|l| l.starts_with("Loop time of"))?;
    let w: Vec<&str> = line.split_whitespace().collect();
    let secs: f64 = w.get(3)?.parse().ok()?;
    let nsteps: f64 = w.get(8)?.parse().ok()?;
    let atoms: f64 = w.get(11)?.parse().ok()?;
    Some(atoms * nsteps / secs)
}

fn lammps_available() -> bool {
    Command::new("lmp")
        .arg("-h")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}
