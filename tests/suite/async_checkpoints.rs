//! Checkpoints written by the writer thread while the run steps on (`checkpoint::background`)
//! hold the bytes that the stepping thread writes itself, on every platform: with a copy of
//! the fluid, and with a window too small for one (then streamed from the live fluid); the
//! runs resumed from them are the same run.

use crate::common;

use common::Platform;
use mpcbox::checkpoint::{CheckpointFile, CheckpointMode, CheckpointWriter, WriterSettings};
use mpcbox::config::Config;
use mpcbox::Solvent;

common::backend_tests!(
    [cpu cpu_slabs gpu multi_gpu slabs]
    background_checkpoints_hold_the_blocking_bytes,
);

fn config() -> Config {
    let mut cfg = common::sheared_config([10, 24, 8], 31);
    cfg.tuning.reorder_interval = Some(3);
    cfg
}

fn writer(mode: CheckpointMode, window_mib: u64) -> CheckpointWriter {
    CheckpointWriter::new(WriterSettings {
        mode,
        window: Some(window_mib << 20),
    })
}

/// One checkpoint written by `writer` at the solvent's step, every outcome Ok.
fn write(s: &mut Solvent, w: &mut CheckpointWriter, path: &std::path::Path) {
    s.write_checkpoint(w, path, None).unwrap();
}

fn settle(w: &mut CheckpointWriter) -> Vec<mpcbox::checkpoint::Written> {
    w.wait();
    let done = w.take_finished();
    for d in &done {
        assert!(d.result.is_ok(), "{:?}", d.result);
    }
    done
}

fn background_checkpoints_hold_the_blocking_bytes(p: Platform) {
    let Some(mut s) = p.solvent(&config()) else {
        return;
    };
    for _ in 0..5 {
        s.step().unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let [blocking, copied, streamed] = ["blocking", "copied", "streamed"].map(|n| {
        let d = dir.path().join(n);
        std::fs::create_dir_all(&d).unwrap();
        d.join("checkpoint.mpcbox")
    });
    let at_five = s.fluid_state().unwrap();
    let mut wb = writer(CheckpointMode::Blocking, 64);
    write(&mut s, &mut wb, &blocking);
    let done = settle(&mut wb);
    assert!(done.len() == 1 && !done[0].background);
    // a copy out, then steps while the thread writes it
    let mut wc = writer(CheckpointMode::Background, 64);
    write(&mut s, &mut wc, &copied);
    for _ in 0..3 {
        s.step().unwrap();
    }
    let done = settle(&mut wc);
    assert!(done.len() == 1 && done[0].background && done[0].step == 5);
    // the next checkpoint waits for nothing: the first is done
    write(&mut s, &mut wc, &copied.with_extension("next"));
    assert_eq!(settle(&mut wc)[0].step, 8);
    // a window of 1 MiB holds no copy of the fluid: written now, streamed a window at a time
    let mut s2 = p.solvent(&config()).unwrap();
    for _ in 0..5 {
        s2.step().unwrap();
    }
    let mut ws = writer(CheckpointMode::Background, 1);
    write(&mut s2, &mut ws, &streamed);
    let done = settle(&mut ws);
    // GPUs copy their fluid into spare device memory (or, told to, download it whole), which
    // the host window does not bound: written in the background; the CPU streams it now
    let on_gpu = !matches!(p, Platform::Cpu | Platform::CpuSlabs(_));
    assert!(
        done.len() == 1 && done[0].background == on_gpu,
        "{:?}",
        done[0]
    );
    let bytes = std::fs::read(&blocking).unwrap();
    assert_eq!(
        std::fs::read(&copied).unwrap(),
        bytes,
        "{p}: a background checkpoint differs from the blocking one"
    );
    let loaded = mpcbox::Checkpoint::load(&blocking).unwrap();
    assert_eq!(loaded.step, 5);
    p.assert_same_fluid(&loaded.fluid, &at_five, "the checkpoint's fluid");
    if p == Platform::Cpu || matches!(p, Platform::CpuSlabs(_)) {
        // the CPU steps the same bits in a second solvent, a run of its own: all but its run
        // id is the blocking checkpoint's (the bytes differ in the id and its checksum)
        let mut other = mpcbox::Checkpoint::load(&streamed).unwrap();
        assert_eq!(other.run_id.as_deref(), Some(s2.run_id()));
        other.run_id = loaded.run_id.clone();
        assert_eq!(other, loaded, "{p}: streamed");
    }
    // both resume into the same run
    let resumed = |path: &std::path::Path| {
        let file = CheckpointFile::open(path).unwrap();
        let mut r = Solvent::from_checkpoint_file(&file, None).unwrap();
        for _ in 0..4 {
            r.step().unwrap();
        }
        r.fluid_state().unwrap()
    };
    p.assert_same_fluid(
        &resumed(&blocking),
        &resumed(&copied),
        "runs resumed from a blocking and a background checkpoint",
    );
}

/// A window too small for a copy of the fluid on the CPU: the checkpoint's blocks are written
/// from the live state without one, and a window that holds a copy takes it.
#[test]
fn the_window_decides_between_a_copy_and_a_stream() {
    let mut s = Solvent::new(common::small_config([12, 12, 12], 10)).unwrap();
    s.step().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ck.mpcbox");
    for (mib, background) in [(1, false), (256, true)] {
        let mut w = writer(CheckpointMode::Background, mib);
        write(&mut s, &mut w, &path);
        let done = settle(&mut w);
        assert_eq!(done[0].background, background, "window {mib} MiB");
        assert_eq!(done[0].bytes, 17_280 * 44);
        let t = w.times();
        assert_eq!((t.written, t.failed), (1, 0));
        assert!(t.blocking_seconds > 0.0);
        assert_eq!(t.background_seconds > 0.0, background);
    }
    assert_eq!(mpcbox::Checkpoint::load(&path).unwrap().step, 1);
}
