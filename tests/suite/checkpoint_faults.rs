//! The `mpcbox` command with checkpoints written in the background (the default): kill -9 at
//! random moments of a write never leaves a torn or missing checkpoint, SIGTERM during a write
//! finishes it and then stops, a checkpoint that cannot be written (a file-size limit in place
//! of a full disk) is reported while the previous one stays and the run goes on, and the host
//! memory a checkpoint takes, and a resume's read of one, stays within its window
//! (`MPCBOX_CHECKPOINT_WINDOW`). CPU backend.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::faults::{mpcbox, stderr};

/// A `cells`³ × 10 fluid on the CPU writing into `out`, a checkpoint every `every` steps.
fn config(dir: &Path, cells: u32, out: &Path, steps: u64, every: u64) -> PathBuf {
    let text = format!(
        "(cells: ({cells}, {cells}, {cells}), particles_per_cell: 10, time_step: 0.1, \
         collision: Srd(angle_deg: 130.0), seed: 5, steps: {steps}, device: Cpu, \
         output: (observable_interval: 1, checkpoint_interval: {every}, \
         directory: \"{}\"))",
        out.display()
    );
    let p = dir.join(format!("c{cells}.ron"));
    std::fs::write(&p, text).unwrap();
    p
}

/// The temporary files of checkpoint writes in `out`.
fn temporaries(out: &Path) -> Vec<String> {
    std::fs::read_dir(out)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(".checkpoint.mpcbox.tmp."))
                .collect()
        })
        .unwrap_or_default()
}

/// Wait (at most 60 s) until a checkpoint write is in flight in `out`.
fn wait_for_a_write(out: &Path, child: &mut Child) {
    let t = Instant::now();
    while temporaries(out).is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no checkpoint write seen"
        );
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn spawn(args: &[&str]) -> Child {
    mpcbox()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn kill_9_during_background_writes_never_leaves_a_torn_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // 1.1 M particles: a 49 MB checkpoint every 2 steps, most of the run spent writing one
    let c = config(dir.path(), 48, &out, 100_000, 2);
    let ck = out.join("checkpoint.mpcbox");
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for round in 0..4 {
        let mut child = match round {
            0 => spawn(&["run", c.to_str().unwrap(), "--quiet"]),
            _ => spawn(&["run", "--resume", ck.to_str().unwrap(), "--quiet"]),
        };
        let t = Instant::now();
        while !ck.exists() {
            assert!(t.elapsed() < Duration::from_secs(120), "no checkpoint");
            std::thread::sleep(Duration::from_millis(5));
        }
        wait_for_a_write(&out, &mut child);
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(seed % 40));
        child.kill().unwrap();
        child.wait().unwrap();
        let loaded = mpcbox::Checkpoint::load(&ck)
            .unwrap_or_else(|e| panic!("round {round}: the checkpoint is torn: {e}"));
        assert!(
            loaded.step > 0 && loaded.step.is_multiple_of(2),
            "round {round}"
        );
    }
    // the resume clears what the killed writers left, and goes on
    let step = mpcbox::Checkpoint::load(&ck).unwrap().step;
    let o = mpcbox()
        .args(["run", "--resume", ck.to_str().unwrap(), "--quiet"])
        .args(["--steps", &(step + 1).to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(temporaries(&out).is_empty(), "{:?}", temporaries(&out));
}

#[test]
fn sigterm_during_a_background_write_finishes_it_then_stops() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let c = config(dir.path(), 48, &out, 100_000, 3);
    let mut child = mpcbox()
        .args(["run", c.to_str().unwrap(), "--quiet"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_a_write(&out, &mut child);
    let st = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert!(!o.status.success(), "a stopped run exited 0");
    assert!(err.contains("stopped by request"), "{err}");
    // the write in flight was finished, then the checkpoint of the last step written
    let first: u64 = err
        .lines()
        .find_map(|l| {
            let rest = l.split("checkpoint of step ").nth(1)?;
            rest.contains("written in the background")
                .then(|| rest.split_whitespace().next()?.parse().ok())?
        })
        .unwrap_or_else(|| panic!("no background checkpoint finished: {err}"));
    let ck = mpcbox::Checkpoint::load(&out.join("checkpoint.mpcbox")).unwrap();
    assert!(ck.step >= first, "{} < {first}", ck.step);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let t = &summary["timing"]["checkpoints"];
    assert_eq!(t["failed"], 0, "{summary}");
    assert!(t["written"].as_u64().unwrap() >= 1, "{summary}");
    assert!(temporaries(&out).is_empty(), "{:?}", temporaries(&out));
}

/// A file-size limit (`ulimit -f`, SIGXFSZ ignored) stands in for a full disk: a checkpoint
/// grows past it, the small observables file does not.
#[test]
fn a_checkpoint_that_cannot_be_written_is_reported_and_the_previous_one_stays() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let c = config(dir.path(), 24, &out, 10, 5);
    let o = mpcbox()
        .args(["run", c.to_str().unwrap(), "--quiet"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let ck = out.join("checkpoint.mpcbox");
    let before = std::fs::read(&ck).unwrap();
    let bin = crate::common::mpcbox_bin();
    let bin = bin.display();
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -f 1024; exec '{bin}' run --resume '{}' --steps 20 --quiet",
            ck.display()
        ))
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(
        !o.status.success(),
        "the last checkpoint failed, yet exit 0"
    );
    assert!(err.contains("checkpoint at step 15 not written"), "{err}");
    assert!(err.contains("File too large"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // the run went on past the failed checkpoint to its last step
    let csv = std::fs::read_to_string(out.join("observables.csv")).unwrap();
    assert!(csv.lines().any(|l| l.starts_with("20,")), "{csv}");
    assert_eq!(
        std::fs::read(&ck).unwrap(),
        before,
        "the previous checkpoint changed"
    );
    assert_eq!(mpcbox::Checkpoint::load(&ck).unwrap().step, 10);
    assert!(temporaries(&out).is_empty(), "{:?}", temporaries(&out));
}

/// The most a checkpoint of the run in `out` grew the resident memory, from `summary.json`.
fn growth(out: &Path) -> u64 {
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    s["timing"]["checkpoints"]["peak_host_memory_growth_bytes"]
        .as_u64()
        .expect("measured")
}

#[test]
fn a_checkpoint_holds_at_most_its_window_of_host_memory() {
    let dir = tempfile::tempdir().unwrap();
    // 2.6 M particles: a block of 115 MB, a copy of the fluid 94 MB
    let n = 64u64 * 64 * 64 * 10;
    let run = |name: &str, window: &str| {
        let out = dir.path().join(name);
        let c = config(dir.path(), 64, &out, 4, 2);
        let o = mpcbox()
            .args(["run", c.to_str().unwrap(), "--quiet"])
            .env("MPCBOX_CHECKPOINT_WINDOW", window)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        growth(&out)
    };
    let window = 8u64 << 20;
    let small = run("small", "8");
    let constant = 8u64 << 20;
    assert!(
        small <= window + constant,
        "a checkpoint of {n} particles in a window of 8 MiB took {} MiB",
        small >> 20
    );
    // a window that holds a copy takes one (36 bytes a particle): the measure sees most of
    // it (pages the first step's reorder freed are reused by the copy)
    let large = run("large", "4096");
    assert!(large >= 30 * n, "{} MiB with a copy", large >> 20);
}

/// `summary.json` of the run in `out`.
fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// The rows of `out`'s observables.csv past step `after`.
fn rows_after(out: &Path, after: u64) -> Vec<String> {
    std::fs::read_to_string(out.join("observables.csv"))
        .unwrap()
        .lines()
        .filter(|l| l.split(',').next().and_then(|s| s.parse::<u64>().ok()) > Some(after))
        .map(str::to_string)
        .collect()
}

/// A resume streams the checkpoint into the CPU backend's buffers a piece at a time: beyond
/// the fluid the backend keeps, its read holds at most 10.5 pieces of a sixteenth of the
/// window (reader lanes, aligned direct-read buffers, the split of a piece;
/// `checkpoint/parted/stream.rs`), within the window whatever the box, where reading the
/// fluid whole held it once more and its ids beside. A window that holds whole sections reads
/// them whole: the measure sees them. Either way the resumed run continues the uninterrupted
/// one bit for bit.
#[test]
fn a_resume_reads_its_checkpoint_within_its_window_and_continues_the_run() {
    let dir = tempfile::tempdir().unwrap();
    // 2.6 M particles: a block of 115 MB, the fluid 94 MB
    let n = 64u64 * 64 * 64 * 10;
    let run = |out: &Path, args: &[&str], window: &str| {
        let o = mpcbox()
            .args(args)
            .args(["--quiet", "--output", out.to_str().unwrap()])
            .env("MPCBOX_CHECKPOINT_WINDOW", window)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    };
    // the uninterrupted run, and one stopped at step 2 with its checkpoint
    let (whole, half) = (dir.path().join("whole"), dir.path().join("half"));
    let c = config(dir.path(), 64, &whole, 4, 2);
    let c = c.to_str().unwrap();
    run(&whole, &["run", c], "8");
    run(&half, &["run", c, "--steps", "2"], "8");
    let ck = half.join("checkpoint.mpcbox");
    let ck = ck.to_str().unwrap();
    let want = mpcbox::Checkpoint::load(&whole.join("checkpoint.mpcbox")).unwrap();
    assert_eq!(want.step, 4);
    let resume = |name: &str, window: &str| {
        let out = dir.path().join(name);
        run(&out, &["run", "--resume", ck, "--steps", "4"], window);
        // the same steps, observables and fluid as the run never stopped
        let s = summary(&out);
        assert_eq!(
            (s["steps"].as_u64(), s["steps_this_run"].as_u64()),
            (Some(4), Some(2))
        );
        assert_eq!(rows_after(&out, 2), rows_after(&whole, 2), "{name}");
        assert_eq!(rows_after(&out, 2).len(), 2, "{name}");
        let got = mpcbox::Checkpoint::load(&out.join("checkpoint.mpcbox")).unwrap();
        assert_eq!(got.step, 4, "{name}");
        assert!(got.fluid == want.fluid, "{name}: the resumed fluid differs");
        let read = &s["timing"]["fluid_read"];
        assert_eq!(
            read["window_bytes"].as_u64(),
            Some(window.parse::<u64>().unwrap() << 20)
        );
        read["peak_host_memory_growth_bytes"]
            .as_u64()
            .expect("measured")
    };
    let window = 8u64 << 20;
    let small = resume("small", "8");
    // 10.5 pieces of window / 16, and the reader threads' stacks
    let (bound, constant) = (window * 21 / 32, 2u64 << 20);
    assert!(
        small <= bound + constant && small < window,
        "the resume of {n} particles in a window of 8 MiB grew the host memory by {:.2} MiB",
        small as f64 / (1u64 << 20) as f64
    );
    // pieces of whole sections: the split alone holds 20 bytes per particle
    let large = resume("large", "4096");
    assert!(large >= 16 * n, "{} MiB in whole sections", large >> 20);
}
