//! The fluid streaming while a GPU MD engine steps (`Solvent::begin_device_step`,
//! `Coupling::set_fluid_overlap`, `MPCBOX_MD_OVERLAP`): the coupled run with the two overlapped
//! follows the same run stepped one after the other (one GPU, and the engine decomposed over
//! slabs), fluid + bead momentum is kept, and a begun step refuses everything but its own
//! finish with errors that name the fix. GPU tests are ignored without a GPU.

use crate::common;

use mpcbox::backend::cuda::DeviceSoluteArrays;
use mpcbox::config::{Config, DeviceChoice, Thermostat};
use mpcbox::md::coupled::Coupling;
use mpcbox::Solvent;

/// 16 chains of 24 beads (WCA + FENE, no MD thermostat) in a 12 × 24 × 12 box of SRD fluid
/// without thermostat: fluid + beads conserve momentum.
fn polymer_solution() -> Config {
    let mut cfg = Config::from_ron_str(
        "(cells: (12, 24, 12), particles_per_cell: 5, time_step: 0.1, thermostat: Mbs, \
          collision: Srd(angle_deg: 130.0), steps: 10, seed: 9, device: Cpu, \
          tuning: (reorder_interval: 0), output: (observable_interval: 0), \
          md: (steps_per_collision: 10, \
          system: Chains(n_chains: 16, chain_length: 24, bead_mass: 5.0), \
          pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [Fene(k: 30.0, r0: 1.5)], \
          backend: Cuda, observable_interval: 0))",
    )
    .expect("valid test config");
    cfg.thermostat = Thermostat::None;
    cfg
}

/// 20 collisions (200 MD steps) of `cfg`, overlapped or not: the path, the fluid and the beads.
fn run(cfg: &Config, overlap: bool) -> (String, mpcbox::state::FluidState, mpcbox::md::System) {
    let mut s = Solvent::new(cfg.clone()).unwrap();
    let mut c = Coupling::new(cfg.md.as_ref().unwrap(), &s).unwrap();
    c.set_fluid_overlap(overlap);
    assert_eq!(
        c.overlaps_fluid(),
        overlap,
        "the GPU engine on the fluid's GPU overlaps unless told not to (is MPCBOX_MD_OVERLAP=off \
         set?)"
    );
    let path = c.path_description();
    let mut p = common::coupled_momentum(&mut s, &mut c);
    let scale = 12.0 * 24.0 * 12.0 * 5.0 + 16.0 * 24.0 * 5.0;
    for step in 0..20 {
        c.step(&mut s).unwrap();
        let q = common::coupled_momentum(&mut s, &mut c);
        common::assert_momentum_kept(p, q, scale, &format!("{path}, collision {step}"));
        p = q;
    }
    (path, s.fluid_state().unwrap(), c.system().unwrap().clone())
}

/// The overlapped coupled run follows the sequential one: beads and fluid to 1e-9 after 20
/// collisions (the same arithmetic; only the fluid's cell sums add in another order, which the
/// melt's chaos amplifies from the last bit), on one GPU and decomposed over 2 and 3 slabs (of
/// one GPU, and of two where present).
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_overlapped_coupled_run_follows_the_sequential_one() {
    let n = mpcbox::backend::cuda::probe().expect("needs CUDA GPUs");
    let mut cases = vec![(vec![0u32], 0u32), (vec![0], 2), (vec![0], 3)];
    if n >= 2 {
        cases.push((vec![0, 1], 2));
        cases.push((vec![0, 1], 3));
    }
    for (gpus, slabs) in cases {
        let mut cfg = polymer_solution();
        cfg.device = DeviceChoice::Cuda(gpus.clone());
        cfg.tuning.slabs = slabs;
        let (path, fa, ma) = run(&cfg, false);
        let (path_b, fb, mb) = run(&cfg, true);
        assert_eq!(path, path_b);
        let what = format!("GPUs {gpus:?}, {slabs} slabs ({path})");
        common::compare_states(&fa, &fb, 1e-9, &format!("{what}: fluid"));
        common::assert_solute_velocities_close(&ma.vel, &mb.vel, 1e-9, &what);
        common::assert_solute_velocities_close(&ma.pos, &mb.pos, 1e-9, &what);
        println!("{what}: overlapped follows sequential");
    }
}

/// A begun step refuses every other step and every read of the fluid, and a finish with
/// another solute count, each naming the fix; the right finish completes it.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_begun_device_step_refuses_everything_but_its_finish() {
    let mut cfg = common::small_config([8, 8, 8], 5);
    cfg.device = DeviceChoice::Cuda(vec![0]);
    let mut s = Solvent::new(cfg).unwrap();
    let pos = vec![[1.5, 2.5, 3.5], [4.0, 5.0, 6.0], [7.5, 0.5, 2.0]];
    let vel = vec![[0.1, 0.0, -0.2], [0.0, 0.3, 0.0], [-0.1, 0.1, 0.1]];
    let arrays = DeviceSoluteArrays::upload(0, &pos, &vel, &[5.0; 3]).unwrap();
    assert!(s.begin_device_step(3).unwrap(), "a GPU fluid begins");
    let names_fix = |e: mpcbox::error::MpcError, what: &str| {
        let m = e.to_string();
        assert!(m.contains("step_with_device_solutes"), "{what}: {m}");
    };
    names_fix(s.step().unwrap_err(), "step");
    names_fix(s.fluid_state().unwrap_err(), "fluid_state");
    names_fix(s.observables().unwrap_err(), "observables");
    names_fix(s.begin_device_step(3).unwrap_err(), "a second begin");
    let two = mpcbox::backend::DeviceSolutes {
        n: 2,
        ..arrays.solutes()
    };
    let e = s.step_with_device_solutes(&two).unwrap_err().to_string();
    assert!(e.contains("begun for 3"), "{e}");
    // the begun step is still there: the right finish completes it
    s.step_with_device_solutes(&arrays.solutes()).unwrap();
    assert_eq!(s.step_count(), 1);
    s.step().unwrap();
    assert_eq!(s.step_count(), 2);
}

/// A backend that does the whole step at the finish (the CPU's) begins nothing: later steps
/// run as before.
#[test]
fn a_cpu_fluid_begins_nothing() {
    let mut s = Solvent::new(common::small_config([6, 6, 6], 5)).unwrap();
    assert!(!s.begin_device_step(10).unwrap());
    assert!(
        !s.begin_device_step(0).unwrap(),
        "nothing to begin without solutes"
    );
    s.step().unwrap();
    assert_eq!(s.step_count(), 1);
    s.fluid_state().unwrap();
}
