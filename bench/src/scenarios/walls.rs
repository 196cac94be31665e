//! `walls`: per-step cost of walls relative to the same box without walls (the goal at 256³ ×
//! 10 on a GPU: walls ≤ 1.10 ×): SRD 130° with MBS by default (`--collision` names another
//! rule: MPC-AT runs without MBS), h = 0.1, grid shift, reorder every 20 steps, no-slip, a body
//! force along x; every shape (`--shapes` picks some): a slit of height L − 1, a pipe of
//! radius (L − 1)/2, a spherical obstacle and a cylinder across the flow of radius L/4, a
//! planar pore L/2 high and L/2 long, a wavy channel and an expansion-contraction L/2 high
//! with amplitude L/8, and a porous medium given as data (a 0/1 voxel mask of overlapping
//! random spheres at 40% solid, written to a temporary `.npy`), and a porous bed under an open
//! channel (the same sample with its upper half in y cleared: not symmetric in y, so an even
//! cut into y slabs would leave one GPU the open half). A shape holds fewer particles
//! than the box (the pipe π/4): the cost per particle-step over the box's (`× per particle`)
//! is the comparable figure. On a GPU the
//! default (fused) cell-sum method unless MPCBOX_CUDA_METHOD says otherwise.

use std::path::Path;

use serde_json::json;

use mpcbox::backend::cuda::{CudaBackend, PHASE_NAMES};
use mpcbox::config::{Config, DeviceChoice};
use mpcbox::physics::Physics;

use super::{cube, err, recorder, seconds_per_step};
use crate::Res;

#[derive(clap::Args)]
pub struct Args {
    /// Edge lengths of the cubic boxes, in cells.
    #[arg(long, value_delimiter = ',', default_value = "128,256")]
    sizes: Vec<u32>,
    /// Particles per cell.
    #[arg(long, default_value_t = 10)]
    m: u32,
    /// Timed steps per variant.
    #[arg(long, default_value_t = 40)]
    steps: u64,
    /// Untimed steps before timing (at least one reorder).
    #[arg(long, default_value_t = 20)]
    warmup: u64,
    /// auto | cpu | cuda:N
    #[arg(long, default_value = "cuda:0")]
    device: String,
    /// The collision rule (RON), e.g. "MpcAt()" or "Srd(angle_deg: 130.0, angular_momentum:
    /// true)"; SRD rules run with MBS, MPC-AT rules (their own thermostat) without.
    #[arg(long, default_value = "Srd(angle_deg: 130.0)")]
    collision: String,
    /// The shapes measured beside the box without walls: slit, pipe, sphere, cylinder, pore,
    /// wavy, expansion, porous, bed (or all).
    #[arg(long, value_delimiter = ',', default_value = "all")]
    shapes: Vec<String>,
    /// One GPU only: a second row per variant with the milliseconds per step of each phase
    /// (every phase waited for), to see where walls cost.
    #[arg(long)]
    phases: bool,
}

/// Every shape `--shapes` may name.
const SHAPES: [&str; 9] = [
    "slit",
    "pipe",
    "sphere",
    "cylinder",
    "pore",
    "wavy",
    "expansion",
    "porous",
    "bed",
];

/// The fraction of the porous sample's volume that is solid.
const POROUS_SOLID: f64 = 0.4;

/// A 0/1 voxel mask (one voxel per cell) of an edge-`l` periodic box: overlapping spheres of
/// radius l/16 at random places until `POROUS_SOLID` of the voxels are solid (a fixed seed:
/// every run measures the same sample), as an `.npy` file in `dir`. `bed`: the upper half in y
/// cleared, a porous bed under an open channel (flow over a bed; not symmetric in y).
fn porous_sample(l: u32, dir: &Path, bed: bool) -> Res<std::path::PathBuf> {
    let n = l as usize;
    let r = (l as f64 / 16.0).max(1.5);
    let mut solid = vec![0.0f64; n * n * n];
    let mut count = 0usize;
    let mut rng = mpcbox::rng::CellStream::for_particle(7, 0);
    let mut uniform = || rng.uniform() * l as f64;
    let reach = r.ceil() as i64;
    while (count as f64) < POROUS_SOLID * solid.len() as f64 {
        let c = [uniform(), uniform(), uniform()];
        for dx in -reach..=reach {
            for dy in -reach..=reach {
                for dz in -reach..=reach {
                    let v = [
                        c[0].floor() as i64 + dx,
                        c[1].floor() as i64 + dy,
                        c[2].floor() as i64 + dz,
                    ];
                    let d2: f64 = (0..3).map(|k| (v[k] as f64 + 0.5 - c[k]).powi(2)).sum();
                    if d2 >= r * r {
                        continue;
                    }
                    let w = v.map(|x| x.rem_euclid(n as i64) as usize);
                    let i = (w[0] * n + w[1]) * n + w[2];
                    if solid[i] == 0.0 {
                        solid[i] = 1.0;
                        count += 1;
                    }
                }
            }
        }
    }
    if bed {
        for (i, v) in solid.iter_mut().enumerate() {
            if (i / n) % n >= n / 2 {
                *v = 0.0;
            }
        }
    }
    let name = if bed { "bed" } else { "porous" };
    let path = dir.join(format!("{name}_{l}.npy"));
    let bytes = mpcbox::npy::write_bytes("|u1", &[n, n, n], &solid);
    std::fs::write(&path, bytes).map_err(err)?;
    Ok(path)
}

/// The variants measured among `shapes`: name and the `walls` and `body_force` fields (RON);
/// the porous sample's file is written into `dir`.
fn variants(l: u32, shapes: &[String], dir: &Path) -> Res<Vec<(&'static str, String)>> {
    let lf = l as f64;
    let force = ", body_force: (0.001, 0.0, 0.0)";
    let all = shapes.iter().any(|s| s == "all");
    let mut out = vec![("no walls", String::new())];
    for name in SHAPES {
        if !all && !shapes.iter().any(|s| s == name) {
            continue;
        }
        let walls = match name {
            "slit" => "Slit()".to_string(),
            "pipe" => format!("Pipe(radius: {})", 0.5 * (lf - 1.0)),
            "sphere" => format!("SphereObstacle(radius: {})", 0.25 * lf),
            "cylinder" => format!("CylinderObstacle(radius: {})", 0.25 * lf),
            "pore" => format!("PlanarPore(height: {}, length: {})", 0.5 * lf, 0.5 * lf),
            "wavy" => format!(
                "CosineChannel(height: {}, amplitude: {})",
                0.5 * lf,
                lf / 8.0
            ),
            "expansion" => format!(
                "CosineExpansion(height: {}, amplitude: {})",
                0.5 * lf,
                lf / 8.0
            ),
            _ => format!(
                "DistanceField(file: {:?}, spacing: 1.0, kind: Mask)",
                porous_sample(l, dir, name == "bed")?
            ),
        };
        out.push((name, format!(", walls: {walls}{force}")));
    }
    for s in shapes {
        if s != "all" && !SHAPES.contains(&s.as_str()) {
            return Err(format!(
                "--shapes: unknown shape {s:?}; fix: name some of {} (or all)",
                SHAPES.join(", ")
            ));
        }
    }
    Ok(out)
}

pub fn run(a: Args, records: Option<&Path>) -> Res<()> {
    let device = super::device(&a.device)?;
    let mut rec = recorder("walls", &device, records);
    let thermostat = if a.collision.starts_with("MpcAt") {
        "None"
    } else {
        "Mbs"
    };
    // the porous samples' files, removed at the end
    let dir = std::env::temp_dir().join(format!("mpcbox-bench-walls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(err)?;
    let measured = measure(&a, &device, &mut rec, thermostat, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    measured
}

/// Every size and variant of `a`, each against the box without walls.
fn measure(
    a: &Args,
    device: &mpcbox::config::DeviceChoice,
    rec: &mut super::Recorder,
    thermostat: &str,
    dir: &Path,
) -> Res<()> {
    for &l in &a.sizes {
        let mut reference = None;
        for (name, extra) in variants(l, &a.shapes, dir)? {
            let mut cfg = Config::from_ron_str(&format!(
                "(cells: ({l}, {l}, {l}), particles_per_cell: {}, time_step: 0.1, \
                  thermostat: {thermostat}, collision: {}, steps: 100, seed: 12345{extra})",
                a.m, a.collision
            ))
            .map_err(err)?;
            cfg.device = device.clone();
            cfg.validate().map_err(err)?;
            let phys = Physics::from_config(&cfg);
            let (dt, phases) = if a.phases {
                let ordinal = match &cfg.device {
                    DeviceChoice::Cuda(ids) if ids.len() == 1 => ids[0] as usize,
                    _ => return Err("--phases: name one GPU, e.g. --device cuda:0".into()),
                };
                let method = cfg.tuning.cuda_method();
                let mut be = CudaBackend::open(&cfg, &phys, None, ordinal, method).map_err(err)?;
                let dt = seconds_per_step(&mut be, &phys, a.warmup, a.steps, 0)?;
                (
                    dt,
                    Some(phase_ms(&mut be, &phys, a.warmup + a.steps, a.steps)?),
                )
            } else {
                let mut be = mpcbox::backend::factory::open(&cfg, &phys, None).map_err(err)?;
                (
                    seconds_per_step(be.as_mut(), &phys, a.warmup, a.steps, 0)?,
                    None,
                )
            };
            let n = cfg.n_fluid() as f64;
            // the box without walls: its time per step and per particle-step
            let (base, base_per_particle) = *reference.get_or_insert((dt, dt / n));
            rec.row(
                &[
                    ("cells", cube(l)),
                    ("M", json!(a.m)),
                    ("walls", json!(name)),
                    ("collision", json!(a.collision)),
                    ("particles", json!(cfg.n_fluid())),
                ],
                &[
                    ("ms/step", dt * 1e3),
                    ("× no walls", dt / base),
                    ("× per particle", dt / n / base_per_particle),
                    ("Gparticle-steps/s", n / dt / 1e9),
                ],
            )?;
            if let Some(ms) = phases {
                let figures: Vec<(&str, f64)> = PHASE_NAMES.iter().copied().zip(ms).collect();
                rec.row(
                    &[
                        ("cells", cube(l)),
                        ("walls", json!(name)),
                        ("collision", json!(a.collision)),
                        ("split", json!("ms/step per phase")),
                    ],
                    &figures,
                )?;
            }
        }
    }
    Ok(())
}

/// Milliseconds per step of each phase (`PHASE_NAMES`) over `steps` steps from `first`, every
/// phase waited for.
fn phase_ms(be: &mut CudaBackend, phys: &Physics, first: u64, steps: u64) -> Res<Vec<f64>> {
    be.set_profiling(true);
    for s in first..first + steps {
        be.enqueue_step(&phys.plan(s, false, (s + 1).is_multiple_of(20)))
            .map_err(err)?;
    }
    be.synchronize().map_err(err)?;
    let ms = be
        .phase_seconds()
        .iter()
        .map(|s| s * 1e3 / steps.max(1) as f64)
        .collect();
    be.set_profiling(false);
    Ok(ms)
}
