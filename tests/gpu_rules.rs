//! The collision rules beside SRD (MPC-AT, MPC-AT+a, SRD+a) on GPUs against the CPU
//! reference: the same trajectory to rounding on one GPU and on two to four GPUs (shear, grid
//! shift, solutes of two masses in unwrapped coordinates, stress measured on some steps so that
//! both the fused and the unfused collision run, reorders on the slabs), device-resident
//! solutes as host solutes, and the viscosities of tests/rules_viscosity.rs on a GPU. Every
//! test needs a CUDA GPU (the multi-GPU ones two or more) and is ignored by default.

mod common;

use mpcbox::backend::cpu::CpuBackend;
use mpcbox::backend::cuda::multi::MultiCudaBackend;
use mpcbox::backend::cuda::{self, CudaBackend, DeviceSoluteArrays};
use mpcbox::backend::{Backend, SoluteBatch};
use mpcbox::config::{CollisionRule, Config, DeviceChoice, Thermostat};
use mpcbox::physics::{theory, Physics};
use mpcbox::rng::CellStream;
use mpcbox::state::FluidState;
use mpcbox::Solvent;

fn rules() -> Vec<(CollisionRule, Thermostat)> {
    let srd_a = CollisionRule::Srd {
        angle_deg: 130.0,
        angular_momentum: true,
    };
    vec![
        (
            CollisionRule::MpcAt {
                angular_momentum: false,
            },
            Thermostat::None,
        ),
        (
            CollisionRule::MpcAt {
                angular_momentum: true,
            },
            Thermostat::None,
        ),
        (srd_a.clone(), Thermostat::None),
        (srd_a, Thermostat::Mbs),
    ]
}

fn sheared(cells: [u32; 3], rule: CollisionRule, thermostat: Thermostat) -> Config {
    let mut cfg = common::small_config(cells, 10);
    cfg.collision = rule;
    cfg.thermostat = thermostat;
    cfg.shear_rate = 0.05;
    cfg.grid_shift = true;
    cfg.seed = 99;
    cfg.tuning.reorder_interval = Some(0);
    cfg.validate().unwrap();
    cfg
}

/// Solutes of masses 1 and 10, a quarter of a solute per cell, in unwrapped coordinates (up
/// to two periods away in y, so their LE images span several periods).
fn solutes(cells: [u32; 3], seed: u64) -> (Vec<[f64; 3]>, Vec<[f64; 3]>, Vec<f64>) {
    let n = (cells.iter().product::<u32>() / 4) as usize;
    let mut r = CellStream::for_particle(seed, 1);
    let pos = (0..n)
        .map(|_| {
            std::array::from_fn(|k| {
                let l = cells[k] as f64;
                r.uniform() * l + ((r.next_u32() % 5) as f64 - 2.0) * l
            })
        })
        .collect();
    let vel = (0..n)
        .map(|_| [0.4 * r.normal(), 0.4 * r.normal(), 0.4 * r.normal()])
        .collect();
    let mass = (0..n).map(|i| [1.0, 10.0][i % 2]).collect();
    (pos, vel, mass)
}

/// GPUs present, at most four.
fn gpu_count() -> usize {
    cuda::probe().expect("these tests need CUDA GPUs").min(4)
}

/// 10 coupled steps of the CPU reference and of `be`: reports and solute velocities compared
/// every step, the fluid at the end (velocities 1e-12 relative). Stress is measured every
/// fourth step (the unfused collision), reorders on several GPUs every third.
fn compare_with_cpu(cfg: &Config, mut be: Box<dyn Backend>, reorder: bool, what: &str) {
    let phys = Physics::from_config(cfg);
    let st0 = FluidState::initial(cfg);
    let mut cpu = CpuBackend::new(phys.clone(), st0, 2).unwrap();
    let (pos, vel0, mass) = solutes(cfg.cells, 5);
    let (mut vc, mut vg) = (vel0.clone(), vel0.clone());
    for s in 0..10u64 {
        let plan = phys.plan(s, s % 4 == 3, false);
        let mut bc = SoluteBatch {
            pos: &pos,
            vel: &mut vc,
            mass: &mass,
        };
        let rc = cpu.step(&plan, Some(&mut bc)).unwrap();
        let gplan = phys.plan(s, s % 4 == 3, reorder && s % 3 == 2);
        let mut bg = SoluteBatch {
            pos: &pos,
            vel: &mut vg,
            mass: &mass,
        };
        let rg = be.step(&gplan, Some(&mut bg)).unwrap();
        let at = format!("{what}, step {s}");
        common::compare_reports(&rc, &rg, 1e-12, 1e-10, &at);
        common::assert_solute_velocities_close(&vc, &vg, 1e-12, &at);
    }
    let (w, d) = common::compare_states(
        &cpu.download().unwrap(),
        &be.download().unwrap(),
        1e-12,
        what,
    );
    eprintln!(
        "{what} ({}): max relative velocity difference to the CPU {w:e}, {d} position \
         components differ",
        be.describe()
    );
}

/// Every rule on one GPU follows the CPU trajectory to rounding, with every cell-sum method
/// that sums in pass 1 (the list method refuses the rules with a clear error).
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_rule_on_one_gpu_follows_the_cpu() {
    use mpcbox::backend::cuda::CellSumMethod as M;
    for (rule, thermostat) in rules() {
        let cfg = sheared([8, 12, 8], rule.clone(), thermostat);
        let phys = Physics::from_config(&cfg);
        let st0 = FluidState::initial(&cfg);
        for method in [M::Fused, M::FusedShared, M::Warp, M::Shared, M::Atomics] {
            let be = CudaBackend::with_method(phys.clone(), &st0, 0, method).unwrap();
            let what = format!("{rule:?} {thermostat:?}, 1 GPU, {}", method.name());
            compare_with_cpu(&cfg, Box::new(be), false, &what);
        }
        let mut list = CudaBackend::with_method(phys.clone(), &st0, 0, M::List).unwrap();
        let e = list
            .step(&phys.plan(0, false, false), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("list") && e.contains("fix"), "{e}");
    }
}

/// Every rule on two to four GPUs (y slabs, particles migrating, solutes read from the first
/// GPU) follows the CPU trajectory to rounding, with reorders on the slabs.
#[test]
#[ignore = "needs two or more CUDA GPUs"]
fn every_rule_on_several_gpus_follows_the_cpu() {
    let max_g = gpu_count();
    assert!(max_g >= 2, "this test needs two or more CUDA GPUs");
    for (rule, thermostat) in rules() {
        let cfg = sheared([8, 24, 8], rule.clone(), thermostat);
        let phys = Physics::from_config(&cfg);
        for g in 2..=max_g {
            let ords: Vec<usize> = (0..g).collect();
            let st0 = FluidState::initial(&cfg);
            let be = MultiCudaBackend::open(&cfg, &phys, Some(&st0), &ords).unwrap();
            let what = format!("{rule:?} {thermostat:?}, {g} GPUs");
            compare_with_cpu(&cfg, Box::new(be), true, &what);
        }
    }
}

/// Device-resident solutes collide as host solutes under every rule, on one GPU and (where
/// there are two or more) on all GPUs.
#[test]
#[ignore = "needs a CUDA GPU"]
fn device_resident_solutes_collide_as_host_solutes_under_every_rule() {
    let g = gpu_count();
    for (rule, thermostat) in rules() {
        let mut devices = vec![DeviceChoice::Cuda(vec![0])];
        if g >= 2 {
            devices.push(DeviceChoice::Cuda((0..g.min(2) as u32).collect()));
        }
        for device in devices {
            let mut cfg = sheared([8, 24, 8], rule.clone(), thermostat);
            cfg.device = device.clone();
            let (pos, vel0, mass) = solutes(cfg.cells, 6);
            let mut host = Solvent::new(cfg.clone()).unwrap();
            let mut dev = Solvent::new(cfg.clone()).unwrap();
            for step in 0..5 {
                let mut vh = vel0.clone();
                host.step_with_solutes(&pos, &mut vh, &mass).unwrap();
                let arrays = DeviceSoluteArrays::upload(0, &pos, &vel0, &mass).unwrap();
                dev.step_with_device_solutes(&arrays.solutes()).unwrap();
                let vd = arrays.velocities().unwrap();
                let what = format!("{rule:?} {thermostat:?} on {device:?}, step {step}");
                common::assert_solute_velocities_close(&vh, &vd, 1e-12, &what);
            }
            let what = format!("{rule:?} on {device:?}");
            common::compare_states(
                &host.fluid_state().unwrap(),
                &dev.fluid_state().unwrap(),
                1e-12,
                &what,
            );
        }
    }
}

/// The viscosities of tests/rules_viscosity.rs on one GPU: MPC-AT within 4% of its formula at
/// h = 0.1 and 0.5, the +a rules within 5% of theirs.
#[test]
#[ignore = "needs a CUDA GPU"]
fn rule_viscosities_on_a_gpu_match_theory() {
    let at = |a| CollisionRule::MpcAt {
        angular_momentum: a,
    };
    let srd_a = CollisionRule::Srd {
        angle_deg: 130.0,
        angular_momentum: true,
    };
    let cases = [
        (at(false), Thermostat::None, 0.1, 0.04),
        (at(false), Thermostat::None, 0.5, 0.04),
        (at(true), Thermostat::None, 0.1, 0.05),
        (srd_a, Thermostat::Mbs, 0.1, 0.05),
    ];
    for (rule, thermostat, h, tol) in cases {
        let mut cfg = sheared([16, 16, 16], rule.clone(), thermostat);
        cfg.time_step = h;
        cfg.device = DeviceChoice::Cuda(vec![0]);
        cfg.tuning.reorder_interval = None;
        cfg.output.equilibration_steps = 100;
        cfg.output.sample_interval = 1;
        let th = theory::rule_viscosity(&cfg);
        let mut s = Solvent::new(cfg).unwrap();
        for _ in 0..3100 {
            s.step().unwrap();
        }
        let st = s.stats();
        let eta = st.viscosity_kinetic.mean().unwrap() + st.viscosity_collisional.mean().unwrap();
        let temp = st.temperature.mean().unwrap();
        let eta_th = th.0 + th.1;
        eprintln!(
            "GPU {rule:?}, h = {h}: eta = {eta:.4}, theory {eta_th:.4} ({:+.2}%); kT {temp:.5}",
            100.0 * (eta / eta_th - 1.0)
        );
        assert!(
            (eta / eta_th - 1.0).abs() < tol,
            "{rule:?}, h = {h}: {eta} vs {eta_th}"
        );
        assert!((temp - 1.0).abs() < 0.01, "{rule:?}: temperature {temp}");
    }
}
