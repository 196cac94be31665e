//! Flow fields: the time-averaged density, velocity and temperature per cell of a Lees-Edwards
//! run, written as VTK image data and read back by an independent reader (the `vtk` Python
//! package; CI installs it, elsewhere that half skips without it), agree with the imposed
//! linear profile; every platform computes the same fields as the CPU.

use crate::common;

use std::process::Command;

use common::{backend_tests, Platform};
use mpcbox::run::{run_job, Silent};
use mpcbox::Solvent;

fn sheared(cells: [u32; 3]) -> mpcbox::Config {
    let mut cfg = common::small_config(cells, 10);
    cfg.shear_rate = 0.05;
    cfg.thermostat = mpcbox::config::Thermostat::Mbs;
    cfg.output.sample_interval = 5;
    cfg.output.field_interval = 400;
    cfg.tuning.reorder_interval = Some(4);
    cfg
}

/// The file as VTK reads it: dimensions, then per cell (x fastest) density, vx, temperature.
fn read_with_vtk(path: &std::path::Path) -> (Vec<usize>, Vec<[f64; 3]>) {
    let script = r#"
import sys, vtk
r = vtk.vtkXMLImageDataReader(); r.SetFileName(sys.argv[1]); r.Update()
img = r.GetOutput(); cd = img.GetCellData()
print(*[d - 1 for d in img.GetDimensions()])
rho, vel, kt = cd.GetArray("density"), cd.GetArray("velocity"), cd.GetArray("temperature")
for c in range(img.GetNumberOfCells()):
    print(rho.GetValue(c), vel.GetTuple3(c)[0], kt.GetValue(c))
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "vtk could not read {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let dims = lines
        .next()
        .unwrap()
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect();
    let cells = lines
        .map(|l| {
            let v: Vec<f64> = l.split_whitespace().map(|w| w.parse().unwrap()).collect();
            [v[0], v[1], v[2]]
        })
        .collect();
    (dims, cells)
}

/// A 800-step Lees-Edwards run writes two field files and their collection; VTK reads the
/// last one: 10 particles per cell on average, the layer means of vx on the imposed line
/// γ̇ (y + ½ − Ly/2) (slope within 5 %), the temperature within 3 % of kT.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs the vtk Python package (python3 -m pip install vtk); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn field_files_show_the_imposed_shear_profile_to_an_independent_reader() {
    let cells = [8, 16, 8];
    let mut s = Solvent::new(sheared(cells)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    run_job(&mut s, 800, dir.path(), &mut Silent).unwrap();
    let pvd = std::fs::read_to_string(dir.path().join("fields.pvd")).unwrap();
    for step in [400, 800] {
        let name = mpcbox::fields::field_file_name(step);
        assert!(pvd.contains(&name), "{pvd}");
        assert!(dir.path().join(&name).exists());
    }
    common::require_python("vtk", "vtk");
    let (dims, data) = read_with_vtk(&dir.path().join(mpcbox::fields::field_file_name(800)));
    assert_eq!(dims, vec![8, 16, 8]);
    let [lx, ly, lz] = cells.map(|c| c as usize);
    assert_eq!(data.len(), lx * ly * lz);
    let mean_density = data.iter().map(|d| d[0]).sum::<f64>() / data.len() as f64;
    assert!((mean_density - 10.0).abs() < 1e-9, "{mean_density}");
    // layer means of vx (VTK order: x fastest, then y, then z)
    let layer_vx: Vec<f64> = (0..ly)
        .map(|iy| {
            let mut sum = 0.0;
            for iz in 0..lz {
                for ix in 0..lx {
                    sum += data[(iz * ly + iy) * lx + ix][1];
                }
            }
            sum / (lx * lz) as f64
        })
        .collect();
    let ys: Vec<f64> = (0..ly)
        .map(|iy| iy as f64 + 0.5 - ly as f64 / 2.0)
        .collect();
    let (sxy, sxx) = ys
        .iter()
        .zip(&layer_vx)
        .fold((0.0, 0.0), |(a, b), (y, v)| (a + y * v, b + y * y));
    let slope = sxy / sxx;
    assert!(
        (slope - 0.05).abs() < 0.05 * 0.05,
        "slope {slope}, layers {layer_vx:?}"
    );
    let kt = data.iter().map(|d| d[2]).sum::<f64>() / data.len() as f64;
    assert!((kt - 1.0).abs() < 0.03, "temperature {kt}");
}

/// Around a spherical obstacle the field file carries the solid: VTK reads a `solid` array
/// that is 1 at the sphere's centre, 0 in the corners, sums to the sphere's volume (within 1%),
/// and no fluid particle was ever counted in a cell wholly inside it.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs the vtk Python package (python3 -m pip install vtk); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn field_files_carry_the_solid_to_an_independent_reader() {
    let cells = [8usize, 16, 8];
    let mut cfg = common::small_config([8, 16, 8], 10);
    cfg.walls = Some(mpcbox::config::walls::WallsConfig::SphereObstacle {
        radius: 2.7,
        boundary: Default::default(),
        solutes: Default::default(),
    });
    cfg.thermostat = mpcbox::config::Thermostat::Mbs;
    cfg.output.sample_interval = 5;
    cfg.output.field_interval = 100;
    let mut s = Solvent::new(cfg).unwrap();
    let dir = tempfile::tempdir().unwrap();
    run_job(&mut s, 100, dir.path(), &mut Silent).unwrap();
    common::require_python("vtk", "vtk");
    let script = r#"
import sys, vtk
r = vtk.vtkXMLImageDataReader(); r.SetFileName(sys.argv[1]); r.Update()
cd = r.GetOutput().GetCellData()
rho, solid = cd.GetArray("density"), cd.GetArray("solid")
for c in range(r.GetOutput().GetNumberOfCells()):
    print(rho.GetValue(c), solid.GetValue(c))
"#;
    let path = dir.path().join(mpcbox::fields::field_file_name(100));
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<[f64; 2]> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Vec<f64> = l.split_whitespace().map(|w| w.parse().unwrap()).collect();
            [v[0], v[1]]
        })
        .collect();
    let [lx, ly, _] = cells;
    assert_eq!(rows.len(), cells.iter().product::<usize>());
    // VTK order: x fastest, then y, then z; the sphere is centred at (4, 8, 4)
    let at = |ix: usize, iy: usize, iz: usize| rows[(iz * ly + iy) * lx + ix];
    assert_eq!(at(3, 7, 3)[1], 1.0);
    assert_eq!(at(0, 0, 0)[1], 0.0);
    let volume: f64 = rows.iter().map(|r| r[1]).sum();
    let sphere = 4.0 / 3.0 * std::f64::consts::PI * 2.7f64.powi(3);
    assert!(
        (volume / sphere - 1.0).abs() < 0.01,
        "solid {volume} vs {sphere}"
    );
    for r in &rows {
        if r[1] == 1.0 {
            assert_eq!(r[0], 0.0, "a particle counted inside the sphere");
        }
    }
}

/// The fields of 60 steps (12 samples) on this platform equal the CPU's: the same particle
/// counts per cell (a position rounded differently in its last bit may move one particle
/// sample to a neighbouring cell: at most two cells may differ), velocities and temperatures
/// to rounding. On several GPUs the sums of the slabs' halo layers are added on the host.
fn fields_follow_the_cpu(p: Platform) {
    let base = sheared([8, 12, 8]);
    let Some(cfg) = p.config(&base) else {
        return;
    };
    let q = p.fit(&base).expect("fits");
    let mut reference = Solvent::new(p.reference(&base)).unwrap();
    let mut other = Solvent::new(cfg).unwrap();
    for _ in 0..60 {
        reference.step().unwrap();
        other.step().unwrap();
    }
    let (a, b) = (
        reference.take_fields().unwrap(),
        other.take_fields().unwrap(),
    );
    assert_eq!(a.samples, 12);
    assert_eq!(b.samples, 12);
    let differ = (0..a.density.len())
        .filter(|&c| a.density[c] != b.density[c])
        .count();
    assert!(
        differ <= 2,
        "{q:?}: {differ} cells with other particle counts"
    );
    for c in (0..a.density.len()).filter(|&c| a.density[c] == b.density[c]) {
        for k in 0..3 {
            let (x, y) = (a.velocity[c][k], b.velocity[c][k]);
            assert!(
                (x - y).abs() <= 1e-12 * x.abs().max(1.0),
                "{q:?} cell {c}: {x} vs {y}"
            );
        }
        let (x, y) = (a.temperature[c], b.temperature[c]);
        assert!(
            (x - y).abs() <= 1e-11 * x.abs().max(1.0),
            "{q:?} cell {c}: kT {x} vs {y}"
        );
    }
    // taken: the next average starts empty
    assert_eq!(other.take_fields().unwrap().samples, 0);
}

backend_tests!([cpu gpu multi_gpu slabs cpu_slabs] fields_follow_the_cpu);

#[test]
fn a_field_interval_shorter_than_a_sample_is_refused() {
    let mut cfg = common::small_config([8, 8, 8], 10);
    cfg.output.sample_interval = 10;
    cfg.output.field_interval = 5;
    let e = cfg.validate().unwrap_err().to_string();
    assert!(e.contains("output.field_interval"), "{e}");
}
