//! Walls given as data (`walls: DistanceField(file: ..., spacing: ...)`, a `.npy` file that
//! each test writes): a plane channel sampled as a distance flows as the analytic slit, a voxel
//! sphere drags as the analytic sphere, no particle ever enters a random porous medium, the
//! GPUs follow the CPU between data walls, and every bad file is refused by name and problem.

use std::path::{Path, PathBuf};

use crate::common;

use common::{backend_tests, Platform};
use mpcbox::config::Config;
use mpcbox::npy::write_bytes;
use mpcbox::physics::walls::profile::fit_profile;
use mpcbox::physics::walls::theory::slit_viscosity_from_curvature;
use mpcbox::physics::walls::{Shape, Slit, SlitNormal, WallShape};
use mpcbox::walls_report::{summarize, WallsSummary};
use mpcbox::Solvent;

backend_tests!(
    [cpu gpu multi_gpu slabs]
    a_channel_given_as_data_flows_as_the_slit,
    a_voxel_sphere_drags_as_the_sphere,
);
backend_tests!([cpu gpu multi_gpu slabs cpu_slabs] no_particle_ever_enters_a_porous_medium);
backend_tests!([gpu multi_gpu slabs cpu_slabs] data_walls_follow_the_cpu_trajectory);

/// Grid spacing of every test's field (cells).
const SPACING: f64 = 0.5;

/// `values` (C order, `shape`) written as `name` in `dir` with element type `descr`.
fn write_npy(dir: &Path, name: &str, descr: &str, shape: [usize; 3], values: &[f64]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, write_bytes(descr, &shape, values)).unwrap();
    path
}

/// Nodes of a box of `cells` at [`SPACING`].
fn nodes(cells: [u32; 3]) -> [usize; 3] {
    cells.map(|c| (c as f64 / SPACING) as usize)
}

/// `f` at every node (x, y, z) of a box of `cells`, C order.
fn sample(cells: [u32; 3], f: impl Fn([f64; 3]) -> f64) -> Vec<f64> {
    let n = nodes(cells);
    let at = |i: usize| (i as f64 + 0.5) * SPACING;
    let mut v = Vec::with_capacity(n[0] * n[1] * n[2]);
    for i in 0..n[0] {
        for j in 0..n[1] {
            for k in 0..n[2] {
                v.push(f([at(i), at(j), at(k)]));
            }
        }
    }
    v
}

/// SRD with MBS, the rule of most tests.
const SRD: (&str, &str) = ("Srd(angle_deg: 130.0)", "Mbs");

/// A config of a `cells` box with `walls` (RON), SRD + MBS, a body force along x.
fn config(cells: [u32; 3], walls: &str, force: f64, seed: u64) -> Config {
    config_with(cells, walls, force, seed, SRD)
}

/// [`config`] under the collision rule and thermostat `rule` (RON).
fn config_with(cells: [u32; 3], walls: &str, force: f64, seed: u64, rule: (&str, &str)) -> Config {
    let (collision, thermostat) = rule;
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({}, {}, {}), particles_per_cell: 10, time_step: 0.1, \
          collision: {collision}, thermostat: {thermostat}, steps: 100, device: Cpu, \
          walls: {walls}, body_force: ({force}, 0.0, 0.0), seed: {seed}, \
          tuning: (reorder_interval: Some(0)))",
        cells[0], cells[1], cells[2]
    ))
    .unwrap_or_else(|e| panic!("{walls}, {collision}: {e}"));
    cfg.output.sample_interval = 5;
    cfg
}

/// The walls of a distance field in `file` (RON).
fn field_walls(file: &Path, extra: &str) -> String {
    format!(
        "DistanceField(file: \"{}\", spacing: {SPACING}{extra})",
        file.display()
    )
}

/// Runs `cfg` on `p` for `eq` steps, then `steps` sampled ones: the solvent and its summary.
fn run(p: Platform, cfg: &Config, eq: u64, steps: u64) -> Option<(Solvent, WallsSummary)> {
    let mut cfg = cfg.clone();
    cfg.output.equilibration_steps = eq;
    let mut s: Solvent = p.solvent(&cfg)?;
    for _ in 0..eq + steps {
        s.step().unwrap();
    }
    let w = summarize(&s).unwrap();
    Some((s, w))
}

/// Plane Poiseuille flow between plates 14 apart in 8 × 16 × 8 cells, once as
/// `Slit(height: 14.0)` and once as the distance min(y − 1, 15 − y) sampled on the grid: the
/// two flow rates and the viscosities from the profiles' curvature agree within their
/// statistics (the field's walls and cut cells are the slit's exactly, and from one state both
/// follow the same trajectory to rounding; the runs differ in their initial states). The force
/// (centre velocity about 0.55) keeps the thermal fluctuation of the channel's slowest mode,
/// about 13% of the mean flow at a fifth of it, to about 1% over the run.
fn a_channel_given_as_data_flows_as_the_slit(p: Platform) {
    let cells = [8, 16, 8];
    let dir = tempfile::tempdir().unwrap();
    let d = sample(cells, |r| (r[1] - 1.0).min(15.0 - r[1]));
    let file = write_npy(dir.path(), "channel.npy", "<f8", nodes(cells), &d);
    let slit_cfg = config(cells, "Slit(height: 14.0)", 0.02, 3);
    let field_cfg = config(cells, &field_walls(&file, ""), 0.02, 3);
    let Some((_, slit)) = run(p, &slit_cfg, 1000, 4000) else {
        return;
    };
    let Some((s, field)) = run(p, &field_cfg, 1000, 4000) else {
        return;
    };
    assert_eq!(field.geometry, "distance field");
    let (q_slit, q_field) = (slit.flow.unwrap().flow_rate, field.flow.unwrap().flow_rate);
    let eta_slit = slit.viscosity_from_curvature.unwrap();
    let plates = Shape::Slit(Slit::centred(14.0, SlitNormal::Y, 16.0, [0.0; 2]));
    let fit = fit_profile(&plates, &s.stats().profile(), false).unwrap();
    let eta_field = slit_viscosity_from_curvature(fit.c2, field.force_density);
    eprintln!(
        "{p}: flow rate slit {q_slit:.4}, field {q_field:.4} ({:+.2}%); η from the curvature \
         slit {eta_slit:.4}, field {eta_field:.4} ({:+.2}%); porosity {:.4}",
        100.0 * (q_field / q_slit - 1.0),
        100.0 * (eta_field / eta_slit - 1.0),
        field.flow.unwrap().porosity
    );
    assert!((field.flow.unwrap().porosity - 14.0 / 16.0).abs() < 1e-3);
    assert!(
        (q_field / q_slit - 1.0).abs() < 0.04,
        "{p}: {q_field} vs {q_slit}"
    );
    assert!(
        (eta_field / eta_slit - 1.0).abs() < 0.06,
        "{p}: {eta_field} vs {eta_slit}"
    );
}

/// The voxel mask of a sphere of radius 3 (voxels of ½ cell whose centre lies within 3 of the
/// box centre) in 16³ cells against `SphereObstacle(radius: 3.0)`, the same body force: each
/// takes the whole body force, and the superficial velocities (hence the drag factors
/// F / (6π η R U)) agree within statistics and the voxel sphere's slightly other shape.
fn a_voxel_sphere_drags_as_the_sphere(p: Platform) {
    let cells = [16, 16, 16];
    let dir = tempfile::tempdir().unwrap();
    let mask = sample(cells, |r| {
        let d2: f64 = r.iter().map(|c| (c - 8.0) * (c - 8.0)).sum();
        if d2 < 9.0 {
            1.0
        } else {
            0.0
        }
    });
    let file = write_npy(dir.path(), "ball.npy", "|u1", nodes(cells), &mask);
    let sphere_cfg = config(cells, "SphereObstacle(radius: 3.0)", 0.002, 5);
    let field_cfg = config(cells, &field_walls(&file, ", kind: Mask"), 0.002, 5);
    let Some((_, sphere)) = run(p, &sphere_cfg, 1000, 3000) else {
        return;
    };
    let Some((_, field)) = run(p, &field_cfg, 1000, 3000) else {
        return;
    };
    let drag = sphere.drag.unwrap();
    let (u_s, u_f) = (
        sphere.flow.unwrap().superficial_velocity,
        field.flow.unwrap().superficial_velocity,
    );
    let (n_s, n_f) = (sphere.body_force_total[0], field.body_force_total[0]);
    let factor_field = drag.drag_factor * (n_f / n_s) * (u_s / u_f);
    eprintln!(
        "{p}: superficial velocity sphere {u_s:.5}, voxel sphere {u_f:.5} ({:+.2}%); drag factor \
         sphere {:.3}, voxel sphere {factor_field:.3} (theory {:.3}); porosity {:.4} vs {:.4}",
        100.0 * (u_f / u_s - 1.0),
        drag.drag_factor,
        drag.drag_factor_theory,
        field.flow.unwrap().porosity,
        sphere.flow.unwrap().porosity,
    );
    for w in [&sphere, &field] {
        let fx = &w.wall_force[0][0];
        let err = fx.error.unwrap();
        let body = w.body_force_total[0];
        assert!(
            (fx.value - body).abs() < 4.0 * err && err < 0.05 * body,
            "{p}: {}: force {fx:?}, body force {body}",
            w.geometry
        );
    }
    assert!((factor_field / drag.drag_factor - 1.0).abs() < 0.1, "{p}");
}

/// A small deterministic generator (xorshift64*) for the test's geometry.
struct Draws(u64);

impl Draws {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A voxel mask (1 solid) of overlapping spheres of radius 1.6 at random centres in a periodic
/// box of `cells`, added until `solid` of the voxels are solid; fluid voxels outside the
/// largest connected pore (faces shared, periodic) are made solid, so that the pore space is
/// one piece.
fn porous_mask(cells: [u32; 3], solid: f64, seed: u64) -> Vec<f64> {
    let n = nodes(cells);
    let len = cells.map(|c| c as f64);
    let total = n[0] * n[1] * n[2];
    let mut mask = vec![0.0; total];
    let mut draws = Draws(seed | 1);
    let at = |i: usize| (i as f64 + 0.5) * SPACING;
    let idx = |i: usize, j: usize, k: usize| (i * n[1] + j) * n[2] + k;
    while mask.iter().sum::<f64>() < solid * total as f64 {
        let c = [0, 1, 2].map(|k| draws.uniform() * len[k]);
        for i in 0..n[0] {
            for j in 0..n[1] {
                for k in 0..n[2] {
                    let r = [at(i), at(j), at(k)];
                    let d2: f64 = (0..3)
                        .map(|a| {
                            let d = (r[a] - c[a]).abs();
                            let d = d.min(len[a] - d);
                            d * d
                        })
                        .sum();
                    if d2 < 1.6 * 1.6 {
                        mask[idx(i, j, k)] = 1.0;
                    }
                }
            }
        }
    }
    // the connected pores, the largest kept
    let mut label = vec![usize::MAX; total];
    let mut sizes = Vec::new();
    for start in 0..total {
        if mask[start] != 0.0 || label[start] != usize::MAX {
            continue;
        }
        let id = sizes.len();
        let mut stack = vec![start];
        label[start] = id;
        let mut size = 0;
        while let Some(v) = stack.pop() {
            size += 1;
            let (i, j, k) = (v / (n[1] * n[2]), v / n[2] % n[1], v % n[2]);
            for (a, b, c) in [(1, 0, 0), (0, 1, 0), (0, 0, 1)] {
                for sign in [1, -1] {
                    let step = |x: usize, d: usize, m: usize| {
                        (x as i64 + sign * d as i64).rem_euclid(m as i64) as usize
                    };
                    let w = idx(step(i, a, n[0]), step(j, b, n[1]), step(k, c, n[2]));
                    if mask[w] == 0.0 && label[w] == usize::MAX {
                        label[w] = id;
                        stack.push(w);
                    }
                }
            }
        }
        sizes.push(size);
    }
    let largest = (0..sizes.len()).max_by_key(|&i| sizes[i]).unwrap();
    for v in 0..total {
        if mask[v] == 0.0 && label[v] != largest {
            mask[v] = 1.0;
        }
    }
    mask
}

/// A random porous medium of 12³ cells at 40% solid (a voxel mask), flow driven through it
/// along x under SRD + MBS and MPC-AT+a (whose virtual particles are placed by rejection
/// against the distance): after every step no particle is in the solid (signed distance < 0)
/// and none is lost, with the grid shift.
fn no_particle_ever_enters_a_porous_medium(p: Platform) {
    let cells = [12, 12, 12];
    let dir = tempfile::tempdir().unwrap();
    let mask = porous_mask(cells, 0.4, 11);
    let file = write_npy(dir.path(), "pores.npy", "|u1", nodes(cells), &mask);
    for rule in [SRD, ("MpcAt(angular_momentum: true)", "None")] {
        let collision = rule.0;
        let cfg = config_with(cells, &field_walls(&file, ", kind: Mask"), 0.02, 4, rule);
        let Some(mut s) = p.solvent(&cfg) else {
            return;
        };
        let shape = s.physics().walls.clone().expect("walls").shape;
        let porosity = shape.fluid_volume([12.0; 3]) / 1728.0;
        assert!((0.5..0.65).contains(&porosity), "porosity {porosity}");
        let n = s.n_fluid();
        common::assert_never_in_solid(&mut s, 300, &format!("{p}, {collision}"));
        let w = summarize(&s).unwrap();
        eprintln!(
            "{p}: {collision}: porosity {porosity:.3}, {n} particles, superficial velocity {:?}",
            w.flow.map(|f| f.superficial_velocity)
        );
    }
}

/// Between data walls every GPU count follows the CPU trajectory to rounding (the same
/// samples and bisections, cut cells and projections), under SRD + MBS and MPC-AT+a.
fn data_walls_follow_the_cpu_trajectory(p: Platform) {
    let cells = [12, 16, 12];
    let dir = tempfile::tempdir().unwrap();
    let mask = porous_mask(cells, 0.3, 7);
    let file = write_npy(dir.path(), "pores.npy", "|u1", nodes(cells), &mask);
    let d = sample(cells, |r| (r[1] - 1.0).min(15.0 - r[1]));
    let channel = write_npy(dir.path(), "channel.npy", "<f4", nodes(cells), &d);
    for rule in [SRD, ("MpcAt(angular_momentum: true)", "None")] {
        for walls in [
            field_walls(&file, ", kind: Mask"),
            field_walls(&channel, ""),
        ] {
            let cfg = config_with(cells, &walls, 0.02, 6, rule);
            common::assert_walls_follow_the_cpu(p, &cfg, 8, &format!("{walls}, {}", rule.0));
        }
    }
}

/// Each bad file is refused when the config is read, naming the file and the problem.
#[test]
fn bad_files_are_refused_by_name_and_problem() {
    let cells = [8, 8, 8];
    let n = nodes(cells);
    let dir = tempfile::tempdir().unwrap();
    let good = sample(cells, |r| (r[1] - 1.0).min(7.0 - r[1]));
    let mut nan = good.clone();
    nan[5] = f64::NAN;
    let not_npy = dir.path().join("text.npy");
    std::fs::write(&not_npy, "x, y, z\n1, 2, 3\n").unwrap();
    let cases: Vec<(PathBuf, &str, &str)> = vec![
        (dir.path().join("missing.npy"), "", "cannot read it"),
        (not_npy, "", "not a .npy file"),
        (
            write_npy(dir.path(), "ints.npy", "|u1", n, &vec![0.0; good.len()]),
            "",
            "a signed distance is float32 or float64",
        ),
        (
            write_npy(
                dir.path(),
                "shape.npy",
                "<f8",
                [16, 16, 8],
                &[good.clone(), good.clone()].concat(),
            ),
            "",
            "has shape [16, 16, 8], but a box of cells [8, 8, 8] at spacing 0.5 needs [16, 16, 16]",
        ),
        (
            write_npy(dir.path(), "nan.npy", "<f4", n, &nan),
            "",
            "NaN or infinite",
        ),
        (
            write_npy(dir.path(), "solid.npy", "<f8", n, &vec![-1.0; good.len()]),
            "",
            "no fluid at all",
        ),
        (
            write_npy(dir.path(), "fluid.npy", "|b1", n, &vec![0.0; good.len()]),
            ", kind: Mask",
            "use no walls",
        ),
        (
            write_npy(dir.path(), "twos.npy", "|u1", n, &vec![2.0; good.len()]),
            ", kind: Mask",
            "a mask holds 0 (fluid) or 1 (solid)",
        ),
    ];
    for (file, extra, problem) in cases {
        let text = format!(
            "(cells: (8, 8, 8), particles_per_cell: 10, time_step: 0.1, \
              collision: Srd(angle_deg: 130.0), steps: 10, walls: {})",
            field_walls(&file, extra)
        );
        let e = Config::from_ron_str(&text).expect_err(problem).to_string();
        assert!(e.contains(&file.display().to_string()), "{e}");
        assert!(e.contains(problem), "{problem}: {e}");
    }
    // a Fortran-order file
    let mut bytes = write_bytes("<f8", &n, &good);
    let at = bytes.windows(5).position(|w| w == b"False").unwrap();
    bytes[at..at + 5].copy_from_slice(b"True ");
    let fortran = dir.path().join("fortran.npy");
    std::fs::write(&fortran, bytes).unwrap();
    let e = Config::from_ron_str(&format!(
        "(cells: (8, 8, 8), particles_per_cell: 10, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), steps: 10, walls: {})",
        field_walls(&fortran, "")
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("fortran.npy") && e.contains("Fortran order"),
        "{e}"
    );
    // a spacing that does not divide the box
    let e = Config::from_ron_str(
        "(cells: (8, 8, 8), particles_per_cell: 10, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), steps: 10, \
          walls: DistanceField(file: \"x.npy\", spacing: 0.3))",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("walls.spacing"), "{e}");
    // a good file reads, and the config is written back with its file
    let file = write_npy(dir.path(), "good.npy", "<f4", n, &good);
    let text = format!(
        "(cells: (8, 8, 8), particles_per_cell: 10, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), steps: 10, walls: {})",
        field_walls(&file, "")
    );
    let cfg = Config::from_ron_str(&text).unwrap();
    assert_eq!(Config::from_ron_str(&cfg.to_ron_string()).unwrap(), cfg);
    assert_eq!(cfg.n_fluid(), 8 * 6 * 8 * 10);
}

/// The example bed of spheres (a mask numpy saved) reads, with the porosity of its two
/// spheres of radius 4.5 in 16³.
#[test]
fn the_example_bed_of_spheres_reads() {
    let cfg = Config::from_file(Path::new("examples/sphere_bed.ron")).unwrap();
    let shape = cfg.walls.as_ref().unwrap().shape(&cfg);
    let porosity = shape.fluid_volume([16.0; 3]) / 4096.0;
    let theory = 1.0 - 2.0 * 4.0 / 3.0 * std::f64::consts::PI * 4.5f64.powi(3) / 4096.0;
    eprintln!("sphere bed: porosity {porosity:.4} (spheres {theory:.4})");
    assert!((porosity - theory).abs() < 0.02, "{porosity} vs {theory}");
}

/// The MD engine's solutes feel a plane channel given as data as they feel the slit: the WCA
/// wall force and energy agree at points near either plate (the interpolation is exact for a
/// linear distance and the normal is the plate's).
#[test]
fn solutes_feel_a_data_channel_as_the_slit() {
    use mpcbox::md::walls::WallPotential;
    let cells = [8, 16, 8];
    let dir = tempfile::tempdir().unwrap();
    let d = sample(cells, |r| (r[1] - 1.0).min(15.0 - r[1]));
    let file = write_npy(dir.path(), "channel.npy", "<f8", nodes(cells), &d);
    let slit = WallPotential::from_config(&config(cells, "Slit(height: 14.0)", 0.0, 1)).unwrap();
    let field =
        WallPotential::from_config(&config(cells, &field_walls(&file, ""), 0.0, 1)).unwrap();
    for p in [
        [1.3, 1.2, 4.1],
        [7.9, 1.05, 0.2],
        [3.0, 14.5, 6.6],
        [0.1, 14.99, 7.9],
        [4.0, 8.0, 4.0],
    ] {
        match (slit.force(p), field.force(p)) {
            (Ok(Some((fa, ea))), Ok(Some((fb, eb)))) => {
                for k in 0..3 {
                    assert!(
                        (fa[k] - fb[k]).abs() <= 1e-9 * fa[k].abs().max(1.0),
                        "{p:?}: {fa:?} vs {fb:?}"
                    );
                }
                assert!((ea - eb).abs() <= 1e-9 * ea.abs().max(1.0), "{p:?}");
            }
            (a, b) => assert_eq!(a, b, "{p:?}"),
        }
    }
}
