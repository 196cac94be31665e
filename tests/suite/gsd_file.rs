//! GSD trajectories written by mpcbox read back by the independent reader, the `gsd` Python
//! package (`gsd.hoomd.open`), with the same positions, velocities, images, types, masses and
//! bonds; appending after a resume drops the frames written after the checkpoint. CI installs
//! the package and runs them (MPCBOX_REQUIRE_EXTERNAL=1); elsewhere they are ignored.

use crate::common;

use std::path::Path;
use std::process::Command;

use mpcbox::gsd::{GsdBonds, GsdFrame, GsdTopology, GsdWriter};

fn topology(n: usize) -> GsdTopology {
    GsdTopology {
        types: vec!["bead".into(), "end".into()],
        typeid: (0..n).map(|i| u32::from(i % 5 == 0)).collect(),
        mass: (0..n).map(|i| 1.0 + i as f32 * 0.5).collect(),
        bonds: GsdBonds {
            types: vec!["fene".into()],
            typeid: vec![0; n - 1],
            group: (0..n as u32 - 1).map(|i| [i, i + 1]).collect(),
        },
    }
}

/// Positions, velocities and images of one frame.
type FrameData = (Vec<[f64; 3]>, Vec<[f64; 3]>, Vec<[i32; 3]>);

/// Frame `k` of a small test trajectory: positions wrapped into [0, L), images, velocities.
fn frame_data(k: u64, n: usize) -> FrameData {
    let pos = (0..n)
        .map(|i| {
            let t = (i as f64 + 0.37 * k as f64) * 0.61;
            [t % 8.0, (2.0 * t) % 6.0, (0.5 * t + 1.0) % 4.0]
        })
        .collect();
    let vel = (0..n)
        .map(|i| [0.1 * i as f64 - 1.0, k as f64 * 0.01, -0.25])
        .collect();
    let img = (0..n)
        .map(|i| [i as i32 % 3 - 1, k as i32, -(i as i32 % 2)])
        .collect();
    (pos, vel, img)
}

fn write_frames(w: &mut GsdWriter, steps: impl Iterator<Item = u64>, n: usize) {
    for k in steps {
        let (pos, vel, img) = frame_data(k, n);
        w.write_frame(&GsdFrame {
            step: 10 * k,
            box_lengths: [8.0, 6.0, 4.0],
            shear_offset: 0.3 * k as f64,
            positions: &pos,
            velocities: &vel,
            images: &img,
        })
        .unwrap();
    }
}

/// Every frame as the gsd package reads it, as JSON lines.
fn read_with_gsd(path: &Path) -> Vec<serde_json::Value> {
    let script = r#"
import sys, json, gsd.hoomd
with gsd.hoomd.open(sys.argv[1], 'r') as t:
    for f in t:
        p, c = f.particles, f.configuration
        print(json.dumps({
            'step': int(c.step), 'box': [float(x) for x in c.box], 'N': int(p.N),
            'position': p.position.astype(float).tolist(), 'velocity': p.velocity.astype(float).tolist(),
            'image': p.image.tolist(), 'typeid': p.typeid.tolist(), 'types': list(p.types),
            'mass': p.mass.astype(float).tolist(), 'bonds_N': int(f.bonds.N),
            'bond_types': list(f.bonds.types), 'bond_group': f.bonds.group.tolist()}))
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gsd could not read {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn assert_frame_matches(f: &serde_json::Value, k: u64, n: usize, topo: &GsdTopology) {
    let (pos, vel, img) = frame_data(k, n);
    let lengths = [8.0, 6.0, 4.0];
    assert_eq!(f["step"], 10 * k);
    let b: Vec<f64> = serde_json::from_value(f["box"].clone()).unwrap();
    let tilt = (0.3 * k as f64 - 8.0 * (0.3 * k as f64 / 8.0).round()) / 6.0;
    assert!(
        (b[3] - tilt).abs() < 1e-6,
        "frame {k}: tilt {} vs {tilt}",
        b[3]
    );
    assert_eq!(&b[..3], &lengths);
    let rp: Vec<[f64; 3]> = serde_json::from_value(f["position"].clone()).unwrap();
    let rv: Vec<[f64; 3]> = serde_json::from_value(f["velocity"].clone()).unwrap();
    let ri: Vec<[i32; 3]> = serde_json::from_value(f["image"].clone()).unwrap();
    for i in 0..n {
        for d in 0..3 {
            // stored as f32, centred on the box
            assert!((rp[i][d] + 0.5 * lengths[d] - pos[i][d]).abs() < 1e-5);
            assert!((rv[i][d] - vel[i][d]).abs() < 1e-6);
        }
        assert_eq!(ri[i], img[i]);
    }
    let typeid: Vec<u32> = serde_json::from_value(f["typeid"].clone()).unwrap();
    let types: Vec<String> = serde_json::from_value(f["types"].clone()).unwrap();
    let mass: Vec<f32> = serde_json::from_value(f["mass"].clone()).unwrap();
    let group: Vec<[u32; 2]> = serde_json::from_value(f["bond_group"].clone()).unwrap();
    assert_eq!(typeid, topo.typeid);
    assert_eq!(types, topo.types);
    assert_eq!(mass, topo.mass);
    assert_eq!(f["bonds_N"], n - 1);
    assert_eq!(group, topo.bonds.group);
}

#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs the gsd Python package (python3 -m pip install gsd); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn gsd_reader_reads_back_what_mpcbox_wrote() {
    let n = 12;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("traj.gsd");
    let topo = topology(n);
    // 80 frames of 5 chunks (+ 8 in frame 0): the 256-entry index grows twice
    let mut w = GsdWriter::create(&path, topo.clone()).unwrap();
    write_frames(&mut w, 0..80, n);
    assert_eq!(w.frames(), 80);
    drop(w);
    common::require_python("gsd.hoomd", "gsd");
    let frames = read_with_gsd(&path);
    assert_eq!(frames.len(), 80);
    for (k, f) in frames.iter().enumerate() {
        assert_frame_matches(f, k as u64, n, &topo);
    }
}

#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs the gsd Python package (python3 -m pip install gsd); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn appending_after_a_resume_drops_the_frames_after_the_checkpoint() {
    let n = 7;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("traj.gsd");
    let topo = topology(n);
    let mut w = GsdWriter::create(&path, topo.clone()).unwrap();
    write_frames(&mut w, 0..70, n); // steps 0..690; the index has grown once
    drop(w);
    // resumed from a checkpoint at step 400: frames of steps ≤ 400 stay, the rest is rewritten
    let mut w = GsdWriter::append(&path, topo.clone(), 400).unwrap();
    assert_eq!(w.frames(), 41);
    write_frames(&mut w, 41..75, n);
    assert_eq!(w.frames(), 75);
    drop(w);
    common::require_python("gsd.hoomd", "gsd");
    let frames = read_with_gsd(&path);
    assert_eq!(frames.len(), 75);
    for (k, f) in frames.iter().enumerate() {
        assert_frame_matches(f, k as u64, n, &topo);
    }
}

#[test]
fn bad_frames_and_foreign_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("traj.gsd");
    let mut topo = topology(4);
    topo.mass.pop();
    let e = GsdWriter::create(&path, topo).err().unwrap().to_string();
    assert!(e.contains("3 masses for 4 particles"), "{e}");
    let mut w = GsdWriter::create(&path, topology(4)).unwrap();
    let (pos, vel, img) = frame_data(0, 3);
    let e = w
        .write_frame(&GsdFrame {
            step: 0,
            box_lengths: [8.0, 6.0, 4.0],
            shear_offset: 0.0,
            positions: &pos,
            velocities: &vel,
            images: &img,
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("3 positions"), "{e}");
    let other = dir.path().join("other.gsd");
    std::fs::write(&other, vec![7u8; 600]).unwrap();
    let e = GsdWriter::append(&other, topology(4), 0)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not a GSD trajectory written by mpcbox"), "{e}");
}
