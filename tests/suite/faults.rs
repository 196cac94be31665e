//! Fault injection on the `mpcbox` command: two runs on one output directory, a fresh
//! run over another run's results, SIGINT and SIGTERM mid-run (graceful stop, then a
//! resume that gives the uninterrupted run's files bit for bit), kill -9 after a periodic
//! checkpoint (the resume drops the rows written past it), and resumes with changed physics
//! (refused naming the field, or allowed by name and recorded). CPU backend, small boxes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub(crate) fn mpcbox() -> Command {
    let mut c = Command::new(crate::common::mpcbox_bin());
    c.env("RUST_LOG", "warn");
    c
}

/// A 12³ MBS fluid under shear on the CPU, writing into `out`; `extra` adds RON fields.
pub(crate) fn config(dir: &Path, name: &str, out: &Path, steps: u64, extra: &str) -> PathBuf {
    let text = format!(
        "(cells: (12, 12, 12), particles_per_cell: 10, time_step: 0.1, \
         collision: Srd(angle_deg: 130.0), thermostat: Mbs, shear_rate: 0.05, seed: 3, \
         steps: {steps}, device: Cpu, output: (observable_interval: 5, sample_interval: 5, \
         directory: \"{}\"{extra}))",
        out.display()
    );
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

pub(crate) fn run(args: &[&str]) -> Output {
    mpcbox().args(args).output().unwrap()
}

pub(crate) fn spawn(args: &[&str]) -> Child {
    mpcbox()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `mpcbox run [config] --resume <ck> --steps <steps> [extra…] --quiet`.
pub(crate) fn resume(config: Option<&Path>, ck: &Path, steps: u64, extra: &[&str]) -> Output {
    let mut args = vec!["run".to_string()];
    args.extend(config.map(|c| c.display().to_string()));
    args.extend([
        "--resume".into(),
        ck.display().to_string(),
        "--steps".into(),
        steps.to_string(),
    ]);
    args.extend(extra.iter().map(|e| e.to_string()));
    args.push("--quiet".into());
    mpcbox().args(&args).output().unwrap()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Wait until `file` has at least `lines` lines (the run is under way), at most 60 s.
fn wait_for_lines(file: &Path, lines: usize) {
    let t = Instant::now();
    while std::fs::read_to_string(file).map_or(0, |s| s.lines().count()) < lines {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{} never grew",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn signal(child: &Child, sig: &str) {
    let st = Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn a_second_run_on_the_same_directory_is_refused_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("same");
    let a = config(dir.path(), "a.ron", &out, 1_000_000, "");
    let b = config(dir.path(), "b.ron", &out, 50, "");
    let first = spawn(&["run", a.to_str().unwrap(), "--quiet"]);
    wait_for_lines(&out.join("observables.csv"), 2);
    let second = run(&["run", b.to_str().unwrap(), "--quiet", "--overwrite"]);
    assert!(!second.status.success());
    let e = stderr(&second);
    // the holder named with its start as a date, not a raw unix time
    assert!(
        e.contains("in use by another run")
            && e.contains(&format!("pid {}", first.id()))
            && e.contains(" UTC")
            && !e.contains("unix time"),
        "{e}"
    );
    // the first run's files are its own: every row has the full set of columns
    signal(&first, "INT");
    let o = first.wait_with_output().unwrap();
    assert!(!o.status.success(), "a stopped run exits non-zero");
    let csv = std::fs::read_to_string(out.join("observables.csv")).unwrap();
    assert!(csv.lines().all(|l| l.split(',').count() == 9), "{csv}");
}

#[test]
fn a_fresh_run_does_not_overwrite_another_runs_results_without_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    let c = config(dir.path(), "c.ron", &out, 20, "");
    assert!(run(&["run", c.to_str().unwrap(), "--quiet"])
        .status
        .success());
    let before = std::fs::read(out.join("checkpoint.mpcbox")).unwrap();
    let again = run(&["run", c.to_str().unwrap(), "--quiet"]);
    assert!(!again.status.success());
    let e = stderr(&again);
    assert!(e.contains("--overwrite") && e.contains("--resume"), "{e}");
    assert_eq!(
        std::fs::read(out.join("checkpoint.mpcbox")).unwrap(),
        before
    );
    assert!(run(&["run", c.to_str().unwrap(), "--quiet", "--overwrite"])
        .status
        .success());
}

/// The uninterrupted run's observables and summary steps.
fn reference(dir: &Path, steps: u64) -> String {
    let out = dir.join("ref");
    let c = config(dir, "ref.ron", &out, steps, "");
    assert!(run(&["run", c.to_str().unwrap(), "--quiet"])
        .status
        .success());
    std::fs::read_to_string(out.join("observables.csv")).unwrap()
}

/// SIGINT and SIGTERM at random moments: the run stops after the step in progress with a
/// checkpoint and a summary, exit non-zero, and its resume writes the uninterrupted run's
/// observables bit for bit.
#[test]
fn sigint_and_sigterm_stop_with_a_checkpoint_and_the_resume_equals_the_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let steps = 400;
    let want = reference(dir.path(), steps);
    // each signal twice, at moments drawn from a fixed seed: after 2-40 rows, then 0-9 ms more
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut draw = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for (k, sig) in ["INT", "TERM", "INT", "TERM"].into_iter().enumerate() {
        let out = dir.path().join(format!("{sig}{k}"));
        // no periodic checkpoints: everything rests on the one written at the stop
        let c = config(dir.path(), &format!("{sig}{k}.ron"), &out, steps, "");
        let child = spawn(&["run", c.to_str().unwrap(), "--quiet"]);
        wait_for_lines(&out.join("observables.csv"), 2 + draw(39) as usize);
        std::thread::sleep(Duration::from_millis(draw(10)));
        signal(&child, sig);
        let o = child.wait_with_output().unwrap();
        let e = stderr(&o);
        assert!(!o.status.success(), "SIG{sig}: exit status 0");
        assert!(e.contains("stopped by request after step"), "SIG{sig}: {e}");
        // the summary of the steps done is printed, as a finished run's is
        let printed = String::from_utf8_lossy(&o.stdout);
        assert!(
            printed.contains("\"interrupted\": true"),
            "SIG{sig}: {printed}"
        );
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap())
                .unwrap();
        assert_eq!(summary["interrupted"], true);
        let at = summary["steps"].as_u64().unwrap();
        assert!(at < steps, "SIG{sig}: the run was not stopped early ({at})");
        let ck = out.join("checkpoint.mpcbox");
        let resumed = resume(None, &ck, steps, &[]);
        assert!(resumed.status.success(), "{}", stderr(&resumed));
        let got = std::fs::read_to_string(out.join("observables.csv")).unwrap();
        assert!(
            got == want,
            "SIG{sig} at step {at}: the resumed files differ"
        );
    }
}

#[test]
fn kill_9_after_a_checkpoint_then_resume_drops_the_rows_written_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let steps = 400;
    let want = reference(dir.path(), steps);
    let out = dir.path().join("killed");
    let c = config(
        dir.path(),
        "k.ron",
        &out,
        steps,
        ", checkpoint_interval: 50",
    );
    let mut child = spawn(&["run", c.to_str().unwrap(), "--quiet"]);
    let ck = out.join("checkpoint.mpcbox");
    // past the first checkpoint (step 50: 11 rows with the header; written in the background,
    // so on disk a little later) and some rows beyond
    let t = Instant::now();
    while !ck.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no checkpoint written"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    wait_for_lines(&out.join("observables.csv"), 15);
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    let before = std::fs::read_to_string(out.join("observables.csv")).unwrap();
    let resumed = resume(None, &ck, steps, &[]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    let got = std::fs::read_to_string(out.join("observables.csv")).unwrap();
    assert!(
        got == want,
        "after kill -9 ({} rows then) and resume the files differ",
        before.lines().count()
    );
}

#[test]
fn a_resume_with_changed_physics_is_refused_naming_the_field_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let c = config(dir.path(), "base.ron", &out, 20, "");
    assert!(run(&["run", c.to_str().unwrap(), "--quiet"])
        .status
        .success());
    let ck = out.join("checkpoint.mpcbox");
    let base = std::fs::read_to_string(&c).unwrap();
    for (field, from, to) in [
        ("time_step", "time_step: 0.1", "time_step: 0.05"),
        ("seed", "seed: 3", "seed: 4"),
        ("collision", "angle_deg: 130.0", "angle_deg: 120.0"),
        ("shear_rate", "shear_rate: 0.05", "shear_rate: 0.02"),
        ("thermostat", "thermostat: Mbs", "thermostat: None"),
        ("kT", "seed: 3", "seed: 3, kT: 2.0"),
        ("mass", "seed: 3", "seed: 3, mass: 2.0"),
        (
            "body_force",
            "seed: 3",
            "seed: 3, body_force: (0.01, 0.0, 0.0)",
        ),
        ("grid_shift", "seed: 3", "seed: 3, grid_shift: false"),
        ("cells", "cells: (12, 12, 12)", "cells: (12, 16, 12)"),
    ] {
        let p = dir.path().join(format!("{field}.ron"));
        std::fs::write(&p, base.replace(from, to)).unwrap();
        let o = resume(Some(&p), &ck, 40, &[]);
        let e = stderr(&o);
        assert!(!o.status.success(), "{field}: a changed config resumed");
        // the config is named as the config, the checkpoint as the checkpoint
        assert!(
            e.contains(&format!("config field `{field}`"))
                && e.contains(&format!(
                    "the config {} differs from the one checkpoint {} was written with",
                    p.display(),
                    ck.display()
                ))
                && e.contains(&format!("--allow-change {field}")),
            "{field}: {e}"
        );
    }
    // a deliberate change, named: runs and is recorded
    let p = dir.path().join("shear_rate.ron");
    let o = resume(Some(&p), &ck, 40, &["--allow-change", "shear_rate"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        summary["changed_on_resume"],
        serde_json::json!(["shear_rate"])
    );
    assert_eq!(summary["shear_rate"], 0.02);
    // naming a field that does not change is a mistake too (the checkpoint now has γ̇ = 0.02)
    let o = resume(Some(&p), &ck, 60, &["--allow-change", "seed"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("`seed` does not differ"),
        "{}",
        stderr(&o)
    );
}

/// `check` refuses what `run` would refuse before running: a box that does not fit this
/// machine's memory (the CPU backend), a missing MD data file; and it warns of a run too short
/// to sample. A negative count in RON names its field.
#[test]
fn check_agrees_with_run() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let base = "cells: (8, 8, 8), particles_per_cell: 10, time_step: 0.1, \
                collision: Srd(angle_deg: 130.0), device: Cpu";
    // 3.4e9 particles: ~307 GiB on the CPU backend, more than any CI machine has
    let huge = write(
        "huge.ron",
        &format!(
            "({}, steps: 10)",
            base.replace("(8, 8, 8)", "(700, 700, 700)")
        ),
    );
    let nodata = write(
        "nodata.ron",
        &format!(
            "({base}, steps: 10, md: (steps_per_collision: 5, \
             system: DataFile(path: \"/nonexistent/polymer.data\"), \
             pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [Fene(k: 30.0, r0: 1.5)]))"
        ),
    );
    for (p, what) in [
        (&huge, "out of memory"),
        (&nodata, "md.system.DataFile.path"),
    ] {
        for cmd in ["check", "run"] {
            let o = run(&[cmd, p.to_str().unwrap()]);
            assert!(!o.status.success(), "{cmd} accepted {}", p.display());
            assert!(stderr(&o).contains(what), "{cmd}: {}", stderr(&o));
        }
    }
    let short = write(
        "short.ron",
        &format!("({base}, steps: 10, output: (equilibration_steps: 50))"),
    );
    let o = run(&["check", short.to_str().unwrap()]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("takes no samples"));
    let neg = write(
        "neg.ron",
        &format!(
            "({}, steps: 10)",
            base.replace("particles_per_cell: 10", "particles_per_cell: -5")
        ),
    );
    let o = run(&["check", neg.to_str().unwrap()]);
    assert!(
        stderr(&o).contains("config field `particles_per_cell`"),
        "{}",
        stderr(&o)
    );
}
