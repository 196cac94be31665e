//! One box over MPI ranks (`mpirun -np N mpcbox run`, the `mpi` feature): the same fluid on
//! 1, 2, 3 and 4 ranks to rounding (shear, walls, body force), momentum conserved across
//! ranks, a checkpoint of 4 ranks resumed on 2 and on 1, the coupled polymer run (bundled MD)
//! on 2 and 4 ranks against 1, and clear errors from bad rank counts and mismatched configs
//! (solutes handed over per rank: `mpi_solutes.rs`).
//!
//! The test builds `mpcbox` with `--features mpi` into `target/mpi` (its own target directory:
//! the one of `cargo test` is locked while the tests run) and starts it with OpenMPI's
//! `mpirun --oversubscribe`. They run where MPCBOX_REQUIRE_EXTERNAL is set (CI installs OpenMPI
//! and libclang; a missing one fails them with the install line) and are ignored elsewhere.
//! MPCBOX_MPI_BIN names a prebuilt MPI `mpcbox` instead (the GPU machine has no cargo; its
//! `examples/ranks_solutes` lies beside it). `mpi_gpu.rs` runs the same on GPUs.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use mpcbox::Checkpoint;

/// The MPI build of `mpcbox`, built once per test process (a missing MPI fails the test,
/// naming what to install).
pub(super) fn mpi_mpcbox() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(prebuilt) = std::env::var_os("MPCBOX_MPI_BIN") {
            return PathBuf::from(prebuilt);
        }
        assert!(
            Command::new("mpirun").arg("--version").output().is_ok(),
            "mpirun is missing; fix: apt-get install openmpi-bin libopenmpi-dev"
        );
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let target = root.join("target").join("mpi");
        let out = Command::new(env!("CARGO"))
            .current_dir(root)
            .args(["build", "--quiet", "--features", "mpi", "--bin", "mpcbox"])
            .args(["--example", "ranks_solutes"])
            .arg("--target-dir")
            .arg(&target)
            .output()
            .expect("cargo runs");
        assert!(
            out.status.success(),
            "cargo build --features mpi failed; fix: apt-get install libopenmpi-dev \
             libclang-dev:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        target.join("debug").join("mpcbox")
    })
}

/// `mpirun -np ranks mpcbox args…` in `dir`, with a time limit (a hang fails the test).
pub(super) fn mpirun(bin: &Path, ranks: usize, dir: &Path, args: &[&str]) -> Output {
    mpirun_with(bin, ranks, dir, args, &[])
}

/// [`mpirun`] with environment variables `envs` set on every rank.
pub(super) fn mpirun_with(
    bin: &Path,
    ranks: usize,
    dir: &Path,
    args: &[&str],
    envs: &[(&str, &str)],
) -> Output {
    let mut cmd = Command::new("timeout");
    cmd.current_dir(dir)
        .args([
            "120",
            "mpirun",
            "--oversubscribe",
            "--allow-run-as-root",
            "-np",
        ])
        .arg(ranks.to_string());
    for (k, v) in envs {
        cmd.arg("-x").arg(format!("{k}={v}"));
    }
    cmd.arg(bin)
        .args(args)
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .output()
        .expect("mpirun starts")
}

pub(super) fn run_ok(bin: &Path, ranks: usize, dir: &Path, args: &[&str]) {
    run_ok_with(bin, ranks, dir, args, &[]);
}

pub(super) fn run_ok_with(
    bin: &Path,
    ranks: usize,
    dir: &Path,
    args: &[&str],
    envs: &[(&str, &str)],
) {
    let out = mpirun_with(bin, ranks, dir, args, envs);
    assert!(
        out.status.success(),
        "{ranks} ranks, mpcbox {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `mpcbox run <config> -o <out>` on `ranks` ranks in `dir`: its observables rows and final
/// checkpoint.
pub(super) fn run_config(
    bin: &Path,
    ranks: usize,
    dir: &Path,
    config: &str,
    out: &str,
) -> (Vec<Vec<f64>>, Checkpoint) {
    run_config_with(bin, ranks, dir, config, out, &[])
}

/// [`run_config`] with environment variables `envs` on every rank.
pub(super) fn run_config_with(
    bin: &Path,
    ranks: usize,
    dir: &Path,
    config: &str,
    out: &str,
    envs: &[(&str, &str)],
) -> (Vec<Vec<f64>>, Checkpoint) {
    let args = ["run", config, "-o", out, "--quiet"];
    run_ok_with(bin, ranks, dir, &args, envs);
    let out = dir.join(out);
    let ck = Checkpoint::load(&out.join("checkpoint.mpcbox")).unwrap();
    (rows(&out.join("observables.csv")), ck)
}

/// The rows of a CSV file of numbers (empty fields, e.g. unsampled stress, as NaN).
pub(super) fn rows(path: &Path) -> Vec<Vec<f64>> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .skip(1)
        .map(|l| {
            l.split(',')
                .map(|x| x.parse().unwrap_or(f64::NAN))
                .collect()
        })
        .collect()
}

/// Two observables files agree row by row: step and time exactly, every other figure to
/// `tol` relative (momenta, which are near zero, absolute against the kinetic energy's scale).
pub(super) fn assert_rows_close(a: &[Vec<f64>], b: &[Vec<f64>], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: rows");
    assert!(!a.is_empty(), "{what}: no rows");
    for (ra, rb) in a.iter().zip(b) {
        assert_eq!(ra[..2], rb[..2], "{what}: step/time");
        for (k, (x, y)) in ra.iter().zip(rb).enumerate().skip(2) {
            if x.is_nan() && y.is_nan() {
                continue;
            }
            let scale = if (3..=5).contains(&k) {
                1.0
            } else {
                x.abs().max(1e-12)
            };
            assert!(
                (x - y).abs() <= tol * scale,
                "{what}, step {}: column {k}: {x:e} vs {y:e}",
                ra[0]
            );
        }
    }
}

pub(super) fn write_config(dir: &Path, name: &str, body: &str) {
    std::fs::write(dir.join(name), body).unwrap();
}

pub(super) const SHEARED: &str = "(cells: (8, 16, 8), particles_per_cell: 5, time_step: 0.1, \
    collision: Srd(angle_deg: 130.0), thermostat: Mbs, shear_rate: 0.05, seed: 7, steps: 50, \
    body_force: (0.0, 0.0, 0.001), device: Cpu, tuning: (reorder_interval: Some(0)), \
    output: (observable_interval: 1, sample_interval: 1, equilibration_steps: 10, \
             checkpoint_interval: 25, directory: \"out\"))";

pub(super) const SLIT: &str = "(cells: (8, 12, 8), particles_per_cell: 6, time_step: 0.1, \
    collision: Srd(angle_deg: 120.0), thermostat: Mbs, seed: 11, steps: 50, \
    body_force: (0.002, 0.0, 0.0), walls: Slit(height: 10.0), device: Cpu, tuning: (reorder_interval: Some(0)), \
    output: (observable_interval: 1, sample_interval: 1, equilibration_steps: 10, \
             directory: \"out\"))";

/// 50 steps on 1, 2, 3 and 4 ranks (no reordering: the one process's download returns the
/// particles in storage order, the ranks' by global index): every observable row and the
/// final fluid agree to rounding (the draws are keyed by the global cell; only the order of sums in a cell
/// differs), and the momentum across all ranks is conserved: y and z to rounding under shear
/// (z gains exactly the body force's impulse), as on one process.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs OpenMPI and libclang (apt-get install openmpi-bin libopenmpi-dev libclang-dev); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn the_fluid_is_the_same_on_one_to_four_ranks() {
    let bin = mpi_mpcbox();
    for (name, body) in [("sheared", SHEARED), ("slit", SLIT)] {
        let dir = tempfile::tempdir().unwrap();
        write_config(dir.path(), "c.ron", body);
        let mut reference = None;
        for ranks in 1..=4 {
            let out = format!("r{ranks}");
            let (r, ck) = run_config(bin, ranks, dir.path(), "c.ron", &out);
            let summary =
                std::fs::read_to_string(dir.path().join(&out).join("summary.json")).unwrap();
            if ranks > 1 {
                assert!(
                    summary.contains(&format!("over {ranks} MPI ranks")),
                    "{name}: {summary}"
                );
            }
            if name == "sheared" {
                assert_sheared_momentum(&r, ck.fluid.len(), &format!("{name}, {ranks} ranks"));
            }
            match &reference {
                None => reference = Some((r, ck)),
                Some((r1, ck1)) => {
                    let what = format!("{name}: {ranks} ranks against 1");
                    assert_rows_close(r1, &r, 1e-9, &what);
                    common::compare_states(&ck1.fluid, &ck.fluid, 1e-9, &what);
                }
            }
        }
    }
}

/// The ranks' packets as point-to-point messages with their neighbours
/// (`MPCBOX_MPI_EXCHANGE=neighbours`) instead of one all-to-all: the sheared fluid on 3 ranks
/// follows one rank to rounding, as with the default, and the summary records the knob.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs OpenMPI and libclang (apt-get install openmpi-bin libopenmpi-dev libclang-dev); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn the_neighbour_exchange_gives_the_same_fluid() {
    let bin = mpi_mpcbox();
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "c.ron", SHEARED);
    let (one, ck1) = run_config(bin, 1, dir.path(), "c.ron", "r1");
    let args = ["run", "c.ron", "-o", "r3", "--quiet"];
    let knob = [("MPCBOX_MPI_EXCHANGE", "neighbours")];
    let out = mpirun_with(bin, 3, dir.path(), &args, &knob);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r3 = dir.path().join("r3");
    let three = rows(&r3.join("observables.csv"));
    let ck3 = Checkpoint::load(&r3.join("checkpoint.mpcbox")).unwrap();
    assert_rows_close(&one, &three, 1e-9, "neighbour exchange, 3 ranks against 1");
    common::compare_states(&ck1.fluid, &ck3.fluid, 1e-9, "neighbour exchange");
    assert_sheared_momentum(&three, ck3.fluid.len(), "neighbour exchange, 3 ranks");
    let summary = std::fs::read_to_string(r3.join("summary.json")).unwrap();
    assert!(
        summary.contains("\"MPCBOX_MPI_EXCHANGE\": \"neighbours\""),
        "{summary}"
    );
}

/// A run of 4 ranks checkpointed at step 25 continues on 2 ranks and on 1 as the
/// uninterrupted run of one rank does (to rounding), and the resumed files hold each step
/// once.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs OpenMPI and libclang (apt-get install openmpi-bin libopenmpi-dev libclang-dev); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn a_checkpoint_of_four_ranks_resumes_on_two_and_on_one() {
    let bin = mpi_mpcbox();
    assert_checkpoint_resumes(bin, SHEARED, 4, "CPU");
}

/// The momentum rows of a `SHEARED` run of `n` particles: p_y stays 0 to rounding and p_z
/// gains exactly the body force's impulse, n m g per unit time. "Rounding" is the fixed-point
/// grids' (docs/determinism.md): the moments are summed on a grid sized for the body force's
/// speed bound (about 4·10⁻¹⁰ per term here), so p_y is held to 10⁻¹¹ per particle, a
/// hundred-thousandth of one particle's thermal momentum over the whole box.
pub(super) fn assert_sheared_momentum(rows: &[Vec<f64>], n: usize, what: &str) {
    let n = n as f64;
    for row in rows {
        assert!(row[4].abs() < 1e-11 * n, "{what}: py = {}", row[4]);
        let pz = n * 0.001 * row[1];
        assert!(
            (row[5] - pz).abs() < 1e-9 * n,
            "{what}, step {}: pz {} vs {pz}",
            row[0],
            row[5]
        );
    }
}

/// A run of `config` cut at step 25 by a checkpoint written by `from` ranks, resumed on 2 and
/// on 1 rank, follows the uninterrupted single-rank run to 1e-9 (only the order of sums in a
/// cell differs).
pub(super) fn assert_checkpoint_resumes(bin: &Path, config: &str, from: usize, what: &str) {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "c.ron", config);
    run_ok(
        bin,
        1,
        dir.path(),
        &["run", "c.ron", "-o", "whole", "--quiet"],
    );
    let whole = rows(&dir.path().join("whole/observables.csv"));
    for ranks in [2, 1] {
        let out = format!("from{from}to{ranks}");
        run_ok(
            bin,
            from,
            dir.path(),
            &["run", "c.ron", "-o", &out, "--steps", "25", "--quiet"],
        );
        let ck = format!("{out}/checkpoint.mpcbox");
        // every rank wrote its own block of the fluid into the one file
        let file = mpcbox::checkpoint::CheckpointFile::open(&dir.path().join(&ck)).unwrap();
        assert_eq!(file.fluid_blocks(), from, "{what}: blocks of {from} ranks");
        run_ok(bin, ranks, dir.path(), &["run", "--resume", &ck, "--quiet"]);
        let r = rows(&dir.path().join(&out).join("observables.csv"));
        assert_rows_close(
            &whole,
            &r,
            1e-9,
            &format!("{what}: {from} ranks, then {ranks}"),
        );
    }
}

pub(super) const POLYMER: &str = "(cells: (8, 12, 8), particles_per_cell: 5, time_step: 0.1, \
    collision: Srd(angle_deg: 130.0), thermostat: Mbs, shear_rate: 0.05, seed: 5, steps: 20, \
    device: Cpu, tuning: (reorder_interval: Some(0)), \
    output: (observable_interval: 1, sample_interval: 1, equilibration_steps: 5, \
             directory: \"out\"), \
    md: (steps_per_collision: 10, \
         system: Chains(n_chains: 6, chain_length: 10, bead_mass: 5.0, bond_length: 0.97), \
         pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [Fene(k: 30.0, r0: 1.5)], \
         thermostat: None, skin: 0.3, neighbor: Auto, backend: Cpu, \
         trajectory_interval: 0, observable_interval: 5))";

/// The coupled polymer solution under shear (bundled MD on the CPU of every rank, the fluid
/// and the beads' collision cut over the ranks) on 2 and 4 ranks follows the run of 1: the
/// fluid's rows and the beads' final state to rounding.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs OpenMPI and libclang (apt-get install openmpi-bin libopenmpi-dev libclang-dev); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn the_coupled_polymer_run_on_two_and_four_ranks_follows_one() {
    let bin = mpi_mpcbox();
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "p.ron", POLYMER);
    let mut reference: Option<(Vec<Vec<f64>>, Checkpoint)> = None;
    for ranks in [1, 2, 4] {
        let (r, ck) = run_config(bin, ranks, dir.path(), "p.ron", &format!("p{ranks}"));
        assert!(
            ck.md.is_some(),
            "{ranks} ranks: the checkpoint holds the beads"
        );
        match &reference {
            None => reference = Some((r, ck)),
            Some((r1, ck1)) => {
                let what = format!("polymer: {ranks} ranks against 1");
                assert_rows_close(r1, &r, 1e-8, &what);
                common::compare_states(&ck1.fluid, &ck.fluid, 1e-8, &what);
                let (a, b) = (ck1.md.as_ref().unwrap(), ck.md.as_ref().unwrap());
                let (va, vb) = (&a.state.system.vel, &b.state.system.vel);
                assert_eq!(va.len(), vb.len(), "{what}: beads");
                for (x, y) in va.iter().zip(vb) {
                    for k in 0..3 {
                        assert!((x[k] - y[k]).abs() <= 1e-8, "{what}: bead {x:?} vs {y:?}");
                    }
                }
            }
        }
    }
}

/// More ranks than cell layers, ranks given different configs, GPUs a rank lacks and the
/// bundled MD on every rank's GPU: each stops every rank with an error naming the cause,
/// non-zero and without a hang.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs OpenMPI and libclang (apt-get install openmpi-bin libopenmpi-dev libclang-dev); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn bad_rank_counts_and_mismatched_configs_stop_with_a_clear_error() {
    let bin = mpi_mpcbox();
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        "thin.ron",
        &SHEARED.replace("cells: (8, 16, 8)", "cells: (8, 3, 8)"),
    );
    let out = mpirun(bin, 4, dir.path(), &["run", "thin.ron", "--quiet"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "4 ranks on 3 layers ran");
    assert!(
        err.contains("mpirun -np") && err.contains("at most 3 ranks"),
        "{err}"
    );
    // rank 1 reads another seed: the launcher's per-rank environment picks the file
    write_config(dir.path(), "c0.ron", SHEARED);
    write_config(dir.path(), "c1.ron", &SHEARED.replace("seed: 7", "seed: 8"));
    let script = dir.path().join("by_rank.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec {} run c$OMPI_COMM_WORLD_RANK.ron --quiet\n",
            bin.display()
        ),
    )
    .unwrap();
    let out = Command::new("timeout")
        .current_dir(dir.path())
        .args([
            "120",
            "mpirun",
            "--oversubscribe",
            "--allow-run-as-root",
            "-np",
            "2",
            "sh",
        ])
        .arg(&script)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "mismatched configs ran");
    assert!(err.contains("different configs"), "{err}");
    // a GPU no host has, and the bundled MD on the GPU of every rank: refused by every rank
    // before the fluid is built
    for (name, body, says) in [
        (
            "gpu7.ron",
            SHEARED.replace("device: Cpu", "device: Cuda([7])"),
            "have no usable CUDA GPU",
        ),
        (
            "mdgpu.ron",
            POLYMER.replace("backend: Cpu", "backend: Cuda"),
            "md.backend",
        ),
    ] {
        write_config(dir.path(), name, &body);
        let out = mpirun(bin, 2, dir.path(), &["run", name, "--quiet"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} ran");
        assert!(err.contains(says) && err.contains("fix"), "{name}: {err}");
    }
}

/// A rank that dies (SIGKILL in the middle of a run) ends the whole run promptly with a failing
/// status (mpirun stops the other ranks; none waits forever in a collective), and the
/// checkpoint left in the output directory is whole: it loads.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs OpenMPI and libclang (apt-get install openmpi-bin libopenmpi-dev libclang-dev); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn a_rank_that_dies_ends_the_run_without_a_hang_or_a_torn_checkpoint() {
    let bin = mpi_mpcbox();
    let dir = tempfile::tempdir().unwrap();
    let long = SHEARED.replace("steps: 50", "steps: 100000000");
    write_config(dir.path(), "c.ron", &long);
    let out = format!("dies{}", std::process::id());
    let mut run = Command::new("mpirun")
        .current_dir(dir.path())
        .args(["--oversubscribe", "--allow-run-as-root", "-np", "2"])
        .arg(bin)
        .args(["run", "c.ron", "-o", &out, "--quiet"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mpirun starts");
    let checkpoint = dir.path().join(&out).join("checkpoint.mpcbox");
    let started = std::time::Instant::now();
    let waited = |what: &str, run: &mut std::process::Child| {
        if started.elapsed().as_secs() > 120 {
            let _ = run.kill();
            panic!("{what} within 120 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    while !checkpoint.exists() {
        assert!(
            run.try_wait().unwrap().is_none(),
            "the run ended before its first checkpoint"
        );
        waited("no checkpoint", &mut run);
    }
    // the ranks: processes running this output's command line, other than mpirun itself
    let pattern = format!("-o {out} --quiet");
    let listed = Command::new("pgrep")
        .args(["-f", "--", &pattern])
        .output()
        .unwrap();
    let ranks: Vec<u32> = String::from_utf8_lossy(&listed.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|&p| p != run.id())
        .collect();
    assert_eq!(ranks.len(), 2, "two ranks running: {ranks:?}");
    let killed = Command::new("kill")
        .args(["-9", &ranks[1].to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let killed_at = std::time::Instant::now();
    let status = loop {
        if let Some(s) = run.try_wait().unwrap() {
            break s;
        }
        waited("the run did not end after a rank died", &mut run);
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut run.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "a run with a dead rank must fail: {err}");
    assert!(
        killed_at.elapsed().as_secs() < 60,
        "the run took > 60 s to end: {err}"
    );
    let ck = Checkpoint::load(&checkpoint).unwrap_or_else(|e| panic!("torn checkpoint: {e}"));
    assert!(ck.step > 0, "checkpoint at step {}", ck.step);
}
