//! Same seed, same bits: across runs, thread counts, and checkpoint/resume on the CPU; the
//! same trajectory to rounding on every platform (tests/suite/common/platform.rs), from a fresh start
//! or a CPU checkpoint; the fluid state through download and upload.

use crate::common;

use common::Platform;
use mpcbox::backend::cpu::CpuBackend;
use mpcbox::backend::Backend;
use mpcbox::config::Thermostat;
use mpcbox::physics::Physics;
use mpcbox::state::FluidState;
use mpcbox::{Checkpoint, Config, Solvent};

common::backend_tests!(
    [cpu gpu multi_gpu slabs cpu_slabs]
    steps_follow_the_cpu_trajectory,
    resumes_a_cpu_checkpoint,
    fluid_state_round_trips,
);

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

/// The same seed on every platform gives the CPU's trajectory to ≤ 1e-12 (relative, in the
/// velocities) after 10 steps: shear, MBS, grid shift, stress measured on some steps (the
/// unfused path) and, on several GPUs, reorders (the order of particles on a GPU does not
/// change the physics; free slots dropped, ids carried). Several GPUs: every count from two.
fn steps_follow_the_cpu_trajectory(p: Platform) {
    let mut cfg = common::sheared_config([8, 24, 8], 99);
    cfg.tuning.reorder_interval = Some(0);
    let phys = Physics::from_config(&cfg);
    let st0 = FluidState::initial(&cfg);
    let steps = 10u64;
    let mut cpu = CpuBackend::new(phys.clone(), st0.clone(), 2).unwrap();
    let mut cpu_reports = Vec::new();
    for s in 0..steps {
        cpu_reports.push(cpu.step(&phys.plan(s, s % 4 == 3, false), None).unwrap());
    }
    let reference = cpu.download().unwrap();
    for q in p.with_fewer_gpus() {
        let Some(q_cfg) = q.config(&cfg) else {
            continue;
        };
        let mut be = mpcbox::backend::factory::open(&q_cfg, &phys, Some(&st0)).unwrap();
        q.check_backend(&be.describe());
        for s in 0..steps {
            let reorder = q.is_multi_gpu() && s % 3 == 2;
            let r = be.step(&phys.plan(s, s % 4 == 3, reorder), None).unwrap();
            common::compare_reports(
                &cpu_reports[s as usize],
                &r,
                1e-12,
                1e-10,
                &format!("{q}, step {s}"),
            );
        }
        let st = be.download().unwrap();
        let (w, d) = common::compare_states(&reference, &st, 1e-12, &q.to_string());
        eprintln!(
            "{q} ({}): after {steps} steps max relative velocity difference to the CPU \
             {w:e}, {d} position components differ",
            be.describe()
        );
    }
}

/// A CPU run checkpointed and resumed on this platform continues as the CPU run does (to
/// rounding).
fn resumes_a_cpu_checkpoint(p: Platform) {
    let cfg = config();
    let Some(on_p) = p.config(&cfg) else { return };
    let mut cpu = Solvent::new(p.reference(&cfg)).unwrap();
    for _ in 0..15 {
        cpu.step().unwrap();
    }
    let mut ck = cpu.checkpoint().unwrap();
    ck.config.tuning.slabs = on_p.tuning.slabs; // the platform's slab layout (not physics)
    let mut other = Solvent::from_checkpoint(ck, Some(on_p.device)).unwrap();
    p.check_backend(&other.backend_description());
    assert_eq!(other.step_count(), 15);
    for _ in 0..10 {
        let a = cpu.step().unwrap();
        let b = other.step().unwrap();
        assert!(
            (a.relative_energy - b.relative_energy).abs() <= 1e-9 * a.relative_energy,
            "{p}: {a:?} vs {b:?}"
        );
        assert_eq!(a.relative_dof, b.relative_dof, "{p}");
    }
    let (sc, so) = (cpu.fluid_state().unwrap(), other.fluid_state().unwrap());
    for k in 0..3 {
        for (a, b) in sc.vel[k].iter().zip(&so.vel[k]) {
            assert!((a - b).abs() <= 1e-9 * a.abs().max(1.0), "{p}: {a} vs {b}");
        }
    }
    let (oc, oo) = (cpu.observables().unwrap(), other.observables().unwrap());
    assert!(
        (oc.kinetic_energy - oo.kinetic_energy).abs() <= 1e-9 * oc.kinetic_energy,
        "{p}: {oc:?} vs {oo:?}"
    );
    assert!(
        (oc.temperature - oo.temperature).abs() <= 1e-9,
        "{p}: {oc:?} vs {oo:?}"
    );
}

/// The fluid goes down and up unchanged: the initial state (generated where the fluid lives)
/// is `FluidState::initial`, an edited state uploads as it is, a state after 25 sheared steps
/// survives download → upload, and a wrong-sized state is refused with a clear message.
fn fluid_state_round_trips(p: Platform) {
    let mut cfg = common::sheared_config([8, 8, 8], 4242);
    cfg.particles_per_cell = 5;
    if let Some(on_p) = p.config(&cfg) {
        let mut s = Solvent::new(on_p).unwrap();
        p.check_backend(&s.backend_description());
        let st = FluidState::initial(&cfg);
        assert!(s.fluid_state().unwrap() == st, "{p}: initial state");
        let mut st2 = st.clone();
        st2.vel[1][3] = 0.25;
        s.set_fluid_state(&st2).unwrap();
        assert!(s.fluid_state().unwrap() == st2, "{p}: uploaded state");
        assert_eq!(s.n_fluid(), st.len());
    }
    let Some(cfg) = p.config(&common::sheared_config([8, 48, 8], 99)) else {
        return;
    };
    let mut s = Solvent::new(cfg).unwrap();
    for _ in 0..25 {
        s.step().unwrap();
    }
    common::assert_state_round_trips(&mut s, &format!("{p}, after 25 steps"));
}
