//! Same seed, same bits: across runs, thread counts, and checkpoint/resume.

mod common;

use mpcbox::backend::cpu::CpuBackend;
use mpcbox::config::Thermostat;
use mpcbox::physics::Physics;
use mpcbox::state::FluidState;
use mpcbox::{Checkpoint, Config, Solvent};

fn config() -> Config {
    let mut cfg = common::small_config([10, 12, 8], 10);
    cfg.shear_rate = 0.05;
    cfg.thermostat = Thermostat::Mbs;
    cfg.seed = 99;
    cfg.tuning.reorder_interval = Some(7);
    cfg
}

fn run(cfg: &Config, steps: u64, threads: usize) -> (FluidState, mpcbox::stats::RunStats) {
    let phys = Physics::from_config(cfg);
    let backend = CpuBackend::new(phys, FluidState::initial(cfg), threads).unwrap();
    let mut s = Solvent::with_backend(cfg.clone(), Box::new(backend)).unwrap();
    for _ in 0..steps {
        s.step().unwrap();
    }
    (s.fluid_state().unwrap(), s.stats().clone())
}

#[test]
fn same_seed_gives_identical_bits_for_any_thread_count() {
    let cfg = config();
    let (a, sa) = run(&cfg, 30, 1);
    let (b, sb) = run(&cfg, 30, 2);
    let (c, sc) = run(&cfg, 30, 3);
    assert!(a == b && b == c, "fluid state depends on the thread count");
    assert!(
        sa == sb && sb == sc,
        "statistics depend on the thread count"
    );
    let mut other = cfg.clone();
    other.seed = 100;
    let (d, _) = run(&other, 30, 2);
    assert!(a != d, "a different seed must give a different trajectory");
}

#[test]
fn resume_from_checkpoint_is_bitwise_identical() {
    let cfg = config();
    let n = 25;
    let mut straight = Solvent::new(cfg.clone()).unwrap();
    for _ in 0..2 * n {
        straight.step().unwrap();
    }
    let mut first = Solvent::new(cfg.clone()).unwrap();
    for _ in 0..n {
        first.step().unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ck.mpcbox");
    first.checkpoint().unwrap().save(&path).unwrap();
    drop(first);
    let mut resumed = Solvent::from_checkpoint(Checkpoint::load(&path).unwrap(), None).unwrap();
    assert_eq!(resumed.step_count(), n);
    for _ in 0..n {
        resumed.step().unwrap();
    }
    assert_eq!(
        straight.fluid_state().unwrap(),
        resumed.fluid_state().unwrap()
    );
    assert_eq!(straight.stats(), resumed.stats());
    assert_eq!(
        straight.observables().unwrap(),
        resumed.observables().unwrap()
    );
}

#[test]
fn corrupted_or_truncated_checkpoints_are_rejected() {
    let cfg = config();
    let mut s = Solvent::new(cfg).unwrap();
    s.step().unwrap();
    let bytes = s.checkpoint().unwrap().to_bytes().unwrap();
    let err = Checkpoint::from_bytes(&bytes[..bytes.len() / 2], "half")
        .unwrap_err()
        .to_string();
    assert!(err.contains("truncated or corrupted"), "{err}");
    let mut flipped = bytes.clone();
    let k = flipped.len() - 10;
    flipped[k] ^= 0x40;
    assert!(Checkpoint::from_bytes(&flipped, "flipped").is_err());
    let err = Checkpoint::from_bytes(b"not a checkpoint at all", "junk")
        .unwrap_err()
        .to_string();
    assert!(err.contains("bad header"), "{err}");
    assert!(Checkpoint::from_bytes(&bytes, "ok").is_ok());
}

#[test]
fn checkpoint_write_replaces_atomically_and_leaves_no_temporary_files() {
    let cfg = config();
    let mut s = Solvent::new(cfg).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ck.mpcbox");
    s.checkpoint().unwrap().save(&path).unwrap();
    s.step().unwrap();
    s.checkpoint().unwrap().save(&path).unwrap();
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "left behind: {names:?}");
    assert_eq!(Checkpoint::load(&path).unwrap().step, 1);
}
