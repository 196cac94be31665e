//! A dilute bead-spring polymer solution in the MPC solvent under Lees-Edwards shear, end to
//! end: chains stretch and align as the Weissenberg number grows and raise the solution's
//! viscosity above the solvent's; a coupled run under shear follows the CPU on one and on
//! several GPUs; a coupled checkpoint resumes bit for bit on the CPU (checked to rounding on
//! GPUs, which `MPCBOX_CELL_SUMS=float` leaves unordered); the GSD trajectory of a coupled run reads back with
//! the `gsd` package; bad resumes and output paths are refused before the run starts.
//!
//! Sizes: 10³ cells at M = 5 with 8 chains of 16 beads (about one bead per eight cells: dilute,
//! yet enough chains to average conformations over a few thousand collisions in seconds).

use crate::common;

use std::path::Path;
use std::process::Command;

use common::Platform;
use mpcbox::config::Config;
use mpcbox::md::coupled::Coupling;
use mpcbox::run::{run_job_steps, Silent};
use mpcbox::{Checkpoint, Solvent};

common::backend_tests!(
    [gpu gpu_variants multi_gpu slabs cpu_slabs]
    coupled_shear_run_follows_the_cpu,
);
common::backend_tests!(
    [cpu gpu multi_gpu slabs cpu_slabs]
    coupled_checkpoint_resumes_as_if_never_stopped
);

fn solution(shear_rate: f64, chains: usize, extra: &str) -> Config {
    Config::from_ron_str(&format!(
        "(cells: (10, 10, 10), particles_per_cell: 5, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), thermostat: Mbs, shear_rate: {shear_rate}, seed: 7, \
          steps: 10, device: Cpu, tuning: (reorder_interval: 0), \
          output: (observable_interval: 0, sample_interval: 2, equilibration_steps: 300{extra}), \
          md: (steps_per_collision: 5, \
          system: Chains(n_chains: {chains}, chain_length: 16, bead_mass: 5.0), \
          pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [Fene(k: 30.0, r0: 1.5)], backend: Auto, \
          observable_interval: 0))"
    ))
    .expect("valid config")
}

/// (mean G_xx, χ from the mean gyration tensor, solution η, solvent η, solute η) after
/// `steps` collisions at `rate`.
fn sheared_solution(rate: f64, steps: u64) -> [f64; 5] {
    let cfg = solution(rate, 8, "");
    let mut solvent = Solvent::new(cfg.clone()).unwrap();
    let mut c = Coupling::new(cfg.md.as_ref().unwrap(), &solvent).unwrap();
    for _ in 0..steps {
        c.step(&mut solvent).unwrap();
    }
    let s = c.solution_summary(&solvent).unwrap();
    let v = |x: &Option<mpcbox::run::ValueWithError>| x.as_ref().unwrap().value;
    [
        v(&s.gyration[0]),
        s.orientation_angle_deg.unwrap(),
        v(&s.solution_viscosity),
        v(&s.solvent_viscosity),
        v(&s.solute_viscosity),
    ]
}

#[test]
fn chains_stretch_and_align_and_raise_the_viscosity_as_wi_grows() {
    let low = sheared_solution(0.02, 3300);
    let high = sheared_solution(0.3, 3300);
    for (rate, r) in [(0.02, low), (0.3, high)] {
        println!(
            "γ̇ = {rate}: G_xx = {:.3}, χ = {:.1}°, η_solution = {:.3}, solvent {:.3}, solute {:.3}",
            r[0], r[1], r[2], r[3], r[4]
        );
    }
    assert!(high[0] > 1.3 * low[0], "G_xx {} -> {}", low[0], high[0]);
    assert!(high[1] < low[1] - 10.0, "χ {} -> {}", low[1], high[1]);
    assert!(high[1] < 30.0, "aligned with the flow: χ = {}", high[1]);
    for r in [low, high] {
        assert!(r[2] > r[3], "solution {} above the solvent {}", r[2], r[3]);
        assert!(r[4] > 0.0, "solute part {}", r[4]);
    }
}

/// The whole coupled state: fluid, MD particles in tag order (positions, velocities,
/// images), and the solutes' averages.
fn coupled_state(
    s: &mut Solvent,
    c: &mut Coupling,
) -> (mpcbox::state::FluidState, mpcbox::md::System) {
    (s.fluid_state().unwrap(), c.system().unwrap().clone())
}

fn by_tag(sys: &mpcbox::md::System) -> Vec<([f64; 3], [f64; 3], [i32; 3])> {
    let mut o: Vec<usize> = (0..sys.len()).collect();
    o.sort_unstable_by_key(|&i| sys.tag[i]);
    o.into_iter()
        .map(|i| (sys.pos[i], sys.vel[i], sys.image[i]))
        .collect()
}

fn assert_md_close(a: &mpcbox::md::System, b: &mpcbox::md::System, tol: f64, what: &str) {
    let (a, b) = (by_tag(a), by_tag(b));
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x.2, y.2, "{what}: images of bead {i}");
        for k in 0..3 {
            assert!(
                (x.0[k] - y.0[k]).abs() <= tol * 10.0,
                "{what}: position of bead {i}"
            );
            assert!(
                (x.1[k] - y.1[k]).abs() <= tol * (1.0 + y.1[k].abs()),
                "{what}: velocity of bead {i}"
            );
        }
    }
}

/// 30 coupled steps under shear on GPUs (fluid on one or several, MD engine on the GPUs) or on
/// the CPU's slabs, against the CPU run of the same config.
fn coupled_shear_run_follows_the_cpu(p: Platform) {
    let cfg = solution(0.1, 4, "");
    let Some(gcfg) = p.config(&cfg) else { return };
    let run = |cfg: Config| {
        let mut s = Solvent::new(cfg.clone()).unwrap();
        let mut c = Coupling::new(cfg.md.as_ref().unwrap(), &s).unwrap();
        println!("{}: {}", s.backend_description(), c.path_description());
        for _ in 0..30 {
            c.step(&mut s).unwrap();
        }
        coupled_state(&mut s, &mut c)
    };
    let (fa, ma) = run(gcfg);
    let (fb, mb) = run(p.reference(&cfg));
    common::compare_states(&fa, &fb, 1e-8, &format!("{p}: fluid"));
    assert_md_close(&ma, &mb, 1e-8, &format!("{p}: MD"));
}

/// A coupled run under shear stopped at a checkpoint and resumed equals the run that never
/// stopped: bit for bit on the CPU, to rounding on GPUs.
fn coupled_checkpoint_resumes_as_if_never_stopped(p: Platform) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = solution(0.1, 4, ", checkpoint_interval: 12");
    cfg.md.as_mut().unwrap().thermostat = mpcbox::md::MdThermostat::Dpd {
        gamma: 1.0,
        cutoff: 1.12,
        exponent: 1.0,
    };
    cfg.output.equilibration_steps = 0;
    let Some(cfg) = p.config(&cfg) else { return };
    let ck_path = dir.path().join("a").join(mpcbox::run::CHECKPOINT_FILE);
    // the uninterrupted run, with a checkpoint at step 12 on its way
    let mut s = Solvent::new(cfg.clone()).unwrap();
    let mut c = Coupling::new(cfg.md.as_ref().unwrap(), &s).unwrap();
    run_job_steps(&mut s, 12, &dir.path().join("a"), &mut Silent, &mut c).unwrap();
    let ck = Checkpoint::load(&ck_path).unwrap();
    run_job_steps(&mut s, 24, &dir.path().join("a"), &mut Silent, &mut c).unwrap();
    let (fa, ma) = coupled_state(&mut s, &mut c);
    let stats_a = c.solute_stats().clone();
    // resumed from the checkpoint
    assert_eq!(ck.step, 12);
    let md_ck = ck
        .md
        .clone()
        .expect("a coupled checkpoint holds the MD state");
    let mut s = Solvent::from_checkpoint(ck, None).unwrap();
    let mut c = Coupling::resume(cfg.md.as_ref().unwrap(), &s, &md_ck).unwrap();
    run_job_steps(&mut s, 24, &dir.path().join("b"), &mut Silent, &mut c).unwrap();
    let (fb, mb) = coupled_state(&mut s, &mut c);
    if p == Platform::Cpu {
        assert!(fa == fb, "the resumed fluid differs");
        assert_eq!(ma, mb, "the resumed MD system differs");
        assert_eq!(&stats_a, c.solute_stats(), "the resumed averages differ");
    } else {
        common::compare_states(&fa, &fb, 1e-9, &format!("{p}: resumed fluid"));
        assert_md_close(&ma, &mb, 1e-9, &format!("{p}: resumed MD"));
    }
}

/// The last frame of a GSD file as the gsd package reads it (JSON).
fn last_gsd_frame(path: &Path) -> serde_json::Value {
    let script = r#"
import sys, json, gsd.hoomd
with gsd.hoomd.open(sys.argv[1], 'r') as t:
    f = t[-1]
    p = f.particles
    print(json.dumps({'frames': len(t), 'step': int(f.configuration.step),
        'box': [float(x) for x in f.configuration.box],
        'position': p.position.astype(float).tolist(), 'velocity': p.velocity.astype(float).tolist(),
        'image': p.image.tolist(), 'typeid': p.typeid.tolist(), 'types': list(p.types),
        'bonds': f.bonds.group.tolist()}))
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A coupled run under shear writes `trajectory.gsd`; the gsd package reads the same
/// positions, velocities, types and bonds as the final MD system, and the unwrapped
/// positions through the box tilt.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs the gsd Python package (python3 -m pip install gsd); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn coupled_run_writes_gsd_that_gsd_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = solution(0.2, 3, "");
    let md = cfg.md.as_mut().unwrap();
    md.trajectory_interval = 10;
    md.trajectory_format = mpcbox::md::from_config::TrajectoryFormat::Gsd;
    md.backend = mpcbox::md::MdBackend::Cpu;
    let mut s = Solvent::new(cfg.clone()).unwrap();
    let mut c = Coupling::new(cfg.md.as_ref().unwrap(), &s)
        .unwrap()
        .with_output(dir.path())
        .unwrap();
    run_job_steps(&mut s, 40, dir.path(), &mut Silent, &mut c).unwrap();
    c.finish(dir.path()).unwrap();
    let sys = c.system().unwrap().clone();
    common::require_python("gsd.hoomd", "gsd");
    let f = last_gsd_frame(&dir.path().join("trajectory.gsd"));
    assert_eq!(f["frames"], 5);
    assert_eq!(f["step"], 40);
    let mut order: Vec<usize> = (0..sys.len()).collect();
    order.sort_unstable_by_key(|&i| sys.tag[i]);
    let pos: Vec<[f64; 3]> = serde_json::from_value(f["position"].clone()).unwrap();
    let vel: Vec<[f64; 3]> = serde_json::from_value(f["velocity"].clone()).unwrap();
    let img: Vec<[i64; 3]> = serde_json::from_value(f["image"].clone()).unwrap();
    let typeid: Vec<u32> = serde_json::from_value(f["typeid"].clone()).unwrap();
    let bonds: Vec<[usize; 2]> = serde_json::from_value(f["bonds"].clone()).unwrap();
    let b: Vec<f64> = serde_json::from_value(f["box"].clone()).unwrap();
    assert_eq!(pos.len(), sys.len());
    for (k, &i) in order.iter().enumerate() {
        let u = sys.unwrapped(i);
        for d in 0..3 {
            let l = sys.box_len[d];
            assert!(
                (pos[k][d] + 0.5 * l - sys.pos[i][d]).abs() < 1e-4,
                "position"
            );
            assert!((vel[k][d] - sys.vel[i][d]).abs() < 1e-5, "velocity");
        }
        // unwrapped through the tilt, as GSD readers do: x + ix Lx + iy xy Ly
        let ux = pos[k][0] + 0.5 * b[0] + img[k][0] as f64 * b[0] + img[k][1] as f64 * b[3] * b[1];
        assert!(
            (ux - u[0]).abs() < 1e-3 * (1.0 + u[0].abs()),
            "unwrapped x {ux} vs {}",
            u[0]
        );
        assert_eq!(typeid[k], sys.typ[i]);
    }
    let tag_rank = |t: u32| order.iter().position(|&i| sys.tag[i] == t).unwrap();
    let want: Vec<[usize; 2]> = sys
        .bonds
        .iter()
        .map(|b| [tag_rank(b.a), tag_rank(b.b)])
        .collect();
    assert_eq!(bonds, want);
}

fn mpcbox(args: &[&str]) -> std::process::Output {
    Command::new(crate::common::mpcbox_bin())
        .args(args)
        .args(["--quiet"])
        .output()
        .unwrap()
}

/// The command line: a coupled run resumed with `--resume` ends where the uninterrupted run
/// ends (same checkpoint bytes); a resume with `--steps` at or below the checkpoint, a config
/// that differs from the checkpoint's, and an output path that is a file are refused before
/// anything runs, naming the field.
#[test]
fn cli_resumes_coupled_runs_and_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).display().to_string();
    let cfg_text = std::fs::read_to_string("examples/polymer_shear.ron").unwrap();
    let small = cfg_text
        .replace("cells: (32, 32, 32)", "cells: (8, 8, 8)")
        .replace("n_chains: 64", "n_chains: 2")
        .replace("equilibration_steps: 500", "equilibration_steps: 0");
    let cfg = dir.path().join("small.ron");
    std::fs::write(&cfg, &small).unwrap();
    let cfg = cfg.display().to_string();
    let ok = |o: &std::process::Output| {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr))
    };
    ok(&mpcbox(&[
        "run",
        &cfg,
        "--device",
        "cpu",
        "--steps",
        "20",
        "-o",
        &d("whole"),
    ]));
    ok(&mpcbox(&[
        "run",
        &cfg,
        "--device",
        "cpu",
        "--steps",
        "12",
        "-o",
        &d("part"),
    ]));
    let ck = format!("{}/checkpoint.mpcbox", d("part"));
    ok(&mpcbox(&[
        "run", "--resume", &ck, "--device", "cpu", "--steps", "20",
    ]));
    let a = Checkpoint::load(&dir.path().join("whole/checkpoint.mpcbox")).unwrap();
    let b = Checkpoint::load(&dir.path().join("part/checkpoint.mpcbox")).unwrap();
    assert_eq!(a.step, 20);
    assert!(a.fluid == b.fluid, "resumed fluid differs");
    assert_eq!(a.md, b.md, "resumed MD state differs");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("part/summary.json")).unwrap())
            .unwrap();
    assert!(
        summary["solution"]["solution_viscosity"].is_object(),
        "{summary}"
    );
    // the GSD trajectory continued: frames of steps 0, 10, 20 once each
    assert!(dir.path().join("part/trajectory.gsd").exists());

    let err = |o: std::process::Output| {
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let e = err(mpcbox(&["run", "--resume", &ck, "--steps", "20"]));
    assert!(e.contains("--steps") && e.contains("step 20"), "{e}");
    let e = err(mpcbox(&["run", "--resume", &ck, "--steps", "5"]));
    assert!(e.contains("--steps"), "{e}");
    let other = dir.path().join("other.ron");
    std::fs::write(
        &other,
        small
            .replace("skin: 0.3", "skin: 0.4")
            .replace("shear_rate: 0.1", "shear_rate: 0.2"),
    )
    .unwrap();
    let e = err(mpcbox(&[
        "run",
        &other.display().to_string(),
        "--resume",
        &ck,
        "--steps",
        "30",
    ]));
    assert!(e.contains("md.skin") && e.contains("shear_rate"), "{e}");
    let file = dir.path().join("a_file");
    std::fs::write(&file, "x").unwrap();
    let e = err(mpcbox(&["run", &cfg, "-o", &file.display().to_string()]));
    assert!(
        e.contains("--output") && e.contains("not a directory"),
        "{e}"
    );
    let e = err(mpcbox(&[
        "run",
        "--resume",
        &ck,
        "--steps",
        "30",
        "-o",
        &file.display().to_string(),
    ]));
    assert!(e.contains("--output"), "{e}");
}
