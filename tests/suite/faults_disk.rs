//! Fault injection on the run's files: kill -9 at random moments while a checkpoint
//! is written every step (the checkpoint on disk always loads and resumes: never torn), a full
//! disk (the run stops naming the file and the cause, exit non-zero, no panic) and an output
//! directory the run may not write (refused before anything is set up, naming the directory).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::faults::{config, mpcbox, resume, run, spawn, stderr};

/// A small deterministic generator for the kill moments (xorshift64*).
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[test]
fn kill_9_at_random_moments_of_checkpoint_writes_never_leaves_a_torn_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // a checkpoint after every step: most of the run's time is spent writing one
    let c = config(
        dir.path(),
        "k.ron",
        &out,
        100_000,
        ", checkpoint_interval: 1",
    );
    let ck = out.join("checkpoint.mpcbox");
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..5 {
        let mut child = if round == 0 {
            spawn(&["run", c.to_str().unwrap(), "--quiet"])
        } else {
            spawn(&["run", "--resume", ck.to_str().unwrap(), "--quiet"])
        };
        // wait for a checkpoint, then a random 20-300 ms more
        let t = std::time::Instant::now();
        while !ck.exists() {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "no checkpoint written"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(20 + next(&mut seed) % 280));
        child.kill().unwrap(); // SIGKILL: mid-write, as likely as not
        child.wait().unwrap();
        let loaded = mpcbox::Checkpoint::load(&ck)
            .unwrap_or_else(|e| panic!("round {round}: the checkpoint is torn: {e}"));
        assert!(loaded.step > 0, "round {round}");
    }
    // the last checkpoint continues (a few steps more) as a run does
    let ck_step = mpcbox::Checkpoint::load(&ck).unwrap().step;
    let o = resume(None, &ck, ck_step + 3, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A disk that fills up mid-run (the observables file on /dev/full): the run stops with the
/// file and "No space left" named, exit non-zero, and no panic.
#[test]
fn a_full_disk_stops_the_run_naming_the_file() {
    assert!(
        Path::new("/dev/full").exists(),
        "this test needs /dev/full (a Linux device that is always full)"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::os::unix::fs::symlink("/dev/full", out.join("observables.csv")).unwrap();
    let c = config(dir.path(), "f.ron", &out, 20, "");
    let o = run(&["run", c.to_str().unwrap(), "--quiet"]);
    let err = stderr(&o);
    assert!(!o.status.success(), "a run on a full disk exited 0");
    assert!(
        err.contains("observables.csv") && err.contains("No space left"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// An output directory the run may not write: refused before the fluid is set up, naming the
/// directory and the cause. (As root every directory is writable, so the run then drops to the
/// `nobody` user for this one command.)
#[test]
fn an_unwritable_output_directory_is_refused_before_the_run_starts() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.path().join("readonly");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o555)).unwrap();
    // a box too large to set up quickly: a refusal after set-up would take seconds
    let c = dir.path().join("r.ron");
    std::fs::write(
        &c,
        format!(
            "(cells: (96, 96, 96), particles_per_cell: 10, time_step: 0.1, \
             collision: Srd(angle_deg: 130.0), steps: 10, device: Cpu, \
             output: (directory: \"{}\"))",
            out.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&c, std::fs::Permissions::from_mode(0o644)).unwrap();
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let bin = crate::common::mpcbox_bin();
    let mut cmd = if is_root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin);
        c
    } else {
        mpcbox()
    };
    let t = std::time::Instant::now();
    let o = cmd
        .args(["run", c.to_str().unwrap(), "--quiet"])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(
        !(is_root && err.contains("setpriv")),
        "as root this test drops to `nobody` with setpriv, which failed; fix: apt-get install \
         util-linux, or run the tests as a user other than root: {err}"
    );
    assert!(
        !o.status.success(),
        "a run into a read-only directory exited 0"
    );
    assert!(
        err.contains("readonly") && err.contains("Permission denied"),
        "{err}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "refused only after {:?} (after set-up?)",
        t.elapsed()
    );
}
