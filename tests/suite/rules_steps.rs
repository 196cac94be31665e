//! Whole steps under the collision rules beside SRD (MPC-AT, MPC-AT+a, SRD+a) on every
//! platform (tests/suite/common/platform.rs): the CPU trajectory to rounding (shear, grid shift,
//! solutes of two masses in unwrapped coordinates, stress measured on some steps so that the
//! fused and the unfused collision both run, reorders on several GPUs; every cell-sum method on
//! one GPU), fluid + solute momentum conserved by every coupled step, each cell's angular
//! momentum about its centre of mass conserved by the +a rules (recomputed from the backend's
//! own state), MPC-AT holding the temperature from a hot start, and device-resident solutes
//! colliding as host solutes.

use crate::common;

use common::{Platform, Solutes};
use mpcbox::backend::cpu::CpuBackend;
use mpcbox::backend::cuda::{CellSumMethod, CudaBackend, DeviceSoluteArrays};
use mpcbox::backend::{Backend, SoluteBatch};
use mpcbox::config::{CollisionRule, Config, Thermostat};
use mpcbox::physics::rules::cross;
use mpcbox::physics::Physics;
use mpcbox::state::FluidState;

common::backend_tests!(
    [cpu gpu gpu_variants multi_gpu slabs cpu_slabs]
    every_rule_follows_the_cpu_trajectory,
);

common::backend_tests!(
    [cpu gpu multi_gpu slabs cpu_slabs]
    rules_conserve_momentum_in_coupled_steps,
    plus_a_rules_conserve_each_cells_angular_momentum,
    mpc_at_holds_the_temperature,
);

common::backend_tests!(
    [gpu multi_gpu slabs]
    device_resident_solutes_collide_as_host_solutes_under_every_rule,
);

/// The rules beside plain SRD, with the thermostats that make sense for each.
fn rules() -> Vec<(CollisionRule, Thermostat)> {
    let srd_a = CollisionRule::Srd {
        angle_deg: 130.0,
        angular_momentum: true,
    };
    let at = |a| CollisionRule::MpcAt {
        angular_momentum: a,
    };
    vec![
        (at(false), Thermostat::None),
        (at(true), Thermostat::None),
        (srd_a.clone(), Thermostat::None),
        (srd_a, Thermostat::Mbs),
    ]
}

/// 8 × 24 × 8 cells (up to four GPUs), M = 10, shear 0.05 unless changed, grid shift.
fn config(rule: CollisionRule, thermostat: Thermostat) -> Config {
    let mut cfg = common::small_config([8, 24, 8], 10);
    cfg.collision = rule;
    cfg.thermostat = thermostat;
    cfg.shear_rate = 0.05;
    cfg.seed = 77;
    cfg.tuning.reorder_interval = Some(3);
    cfg.validate().unwrap();
    cfg
}

/// A quarter of a solute per cell, masses 1 and 10, half of them outside the box in y.
fn solutes(cfg: &Config) -> Solutes {
    common::solutes_over_two_y_periods((cfg.n_cells() / 4) as usize, cfg.cells)
}

/// 10 coupled steps of the CPU reference and of `be`: reports and solute velocities compared
/// every step, the fluid at the end (velocities 1e-12 relative; 1e-10 for the +a rules, whose
/// correction solves with each cell's inertia tensor: in cells of three or four particles
/// nearly on a line that tensor is close to singular and turns the last-bit differences of
/// the GPU's f64 atomic sums into ~1e-11 relative, as measured on a GPU). Stress is measured
/// every fourth step (the unfused collision); `reorder` reorders every third step.
fn compare_with_cpu(cfg: &Config, mut be: Box<dyn Backend>, reorder: bool, what: &str) {
    let phys = Physics::from_config(cfg);
    let tol = if phys.rule.conserves_angular_momentum() {
        1e-10
    } else {
        1e-12
    };
    let mut cpu = CpuBackend::new(phys.clone(), FluidState::initial(cfg), 2).unwrap();
    let (pos, vel0, mass) = solutes(cfg);
    let (mut vc, mut vg) = (vel0.clone(), vel0);
    for s in 0..10u64 {
        let mut bc = SoluteBatch {
            pos: &pos,
            vel: &mut vc,
            mass: &mass,
        };
        let rc = cpu
            .step(&phys.plan(s, s % 4 == 3, false), Some(&mut bc))
            .unwrap();
        let mut bg = SoluteBatch {
            pos: &pos,
            vel: &mut vg,
            mass: &mass,
        };
        let plan = phys.plan(s, s % 4 == 3, reorder && s % 3 == 2);
        let rg = be.step(&plan, Some(&mut bg)).unwrap();
        let at = format!("{what}, step {s}");
        common::compare_reports(&rc, &rg, 1e-12, 1e-10, &at);
        common::assert_solute_velocities_close(&vc, &vg, tol, &at);
    }
    let (a, b) = (cpu.download().unwrap(), be.download().unwrap());
    if be.describe().starts_with("cpu") && !be.describe().contains("slabs") {
        assert!(a == b, "{what}: the CPU fluid depends on the thread count");
    }
    let (w, d) = common::compare_states(&a, &b, tol, what);
    eprintln!(
        "{what} ({}): max relative velocity difference to the CPU {w:e}, {d} position \
         components differ",
        be.describe()
    );
}

/// Every rule follows the CPU trajectory: on the CPU bit for bit with one thread (the
/// reference runs two), on one GPU to rounding with every cell-sum method that sums in pass 1
/// and with f64 sums (`gpu_variants`; the list method refuses the rules with a clear error),
/// on every count of GPUs from two.
fn every_rule_follows_the_cpu_trajectory(p: Platform) {
    for (rule, thermostat) in rules() {
        let cfg = config(rule.clone(), thermostat);
        let phys = Physics::from_config(&cfg);
        let st0 = FluidState::initial(&cfg);
        let name = format!("{} ({thermostat:?})", phys.rule.name());
        match p {
            Platform::Cpu => {
                let one = CpuBackend::new(phys.clone(), st0.clone(), 1).unwrap();
                compare_with_cpu(&cfg, Box::new(one), false, &format!("{name}, 1 thread"));
            }
            Platform::Gpu | Platform::GpuVariant(_) => {
                // the platform's cell-sum method and arithmetic, the CPU reference with the
                // same arithmetic
                let cfg = p.config(&cfg).unwrap();
                let phys = Physics::from_config(&cfg);
                let method = cfg.tuning.cuda_method();
                let mut be = CudaBackend::with_method(phys.clone(), &st0, 0, method).unwrap();
                if method == CellSumMethod::List {
                    // the list method sums after pass 1: it refuses the rules, clearly
                    let plan = phys.plan(0, false, false);
                    let e = be.step(&plan, None).unwrap_err().to_string();
                    assert!(e.contains("list") && e.contains("fix"), "{e}");
                } else {
                    compare_with_cpu(&cfg, Box::new(be), false, &format!("{name}, {p}"));
                }
            }
            Platform::MultiGpu(_) | Platform::Slabs(_) | Platform::CpuSlabs(_) => {
                for q in p.with_fewer_gpus() {
                    let Some(q_cfg) = q.config(&cfg) else {
                        continue;
                    };
                    let be = mpcbox::backend::factory::open(&q_cfg, &phys, Some(&st0)).unwrap();
                    q.check_backend(&be.describe());
                    compare_with_cpu(&cfg, be, true, &format!("{name}, {q}"));
                }
            }
        }
    }
}

/// Fluid plus solute momentum is conserved by every coupled step: all components without
/// shear, y and z under Lees-Edwards shear (x changes through the boundary).
fn rules_conserve_momentum_in_coupled_steps(p: Platform) {
    for (rule, thermostat) in rules() {
        for shear in [0.0, 0.05] {
            let mut cfg = config(rule.clone(), thermostat);
            cfg.shear_rate = shear;
            let Some(mut s) = p.solvent(&cfg) else { return };
            let (pos, mut vel, mass) = solutes(&cfg);
            let scale = s.n_fluid() as f64 + 10.0 * mass.len() as f64;
            for step in 0..8 {
                let before = common::fluid_and_solute_momentum(&mut s, &vel, &mass);
                s.step_with_solutes(&pos, &mut vel, &mass).unwrap();
                let mut after = common::fluid_and_solute_momentum(&mut s, &vel, &mass);
                if shear != 0.0 {
                    after[0] = before[0];
                }
                let what = format!("{p}, {rule:?} {thermostat:?}, shear {shear}, step {step}");
                common::assert_momentum_kept(before, after, scale, &what);
            }
        }
    }
}

/// A particle's mass, velocity before and after the collision, and position as binned.
struct Binned {
    cell: u32,
    m: f64,
    r: [f64; 3],
    before: [f64; 3],
    after: [f64; 3],
}

/// Per cell: the change of angular momentum about the centre of mass, over Σ m |r − C| |v|.
fn worst_angular_momentum_change(parts: &[Binned]) -> f64 {
    let mut by_cell: std::collections::BTreeMap<u32, Vec<&Binned>> = Default::default();
    for p in parts {
        by_cell.entry(p.cell).or_default().push(p);
    }
    let mut worst = 0.0f64;
    for list in by_cell.values().filter(|l| l.len() >= 2) {
        let mass: f64 = list.iter().map(|p| p.m).sum();
        let com: [f64; 3] =
            std::array::from_fn(|k| list.iter().map(|p| p.m * p.r[k]).sum::<f64>() / mass);
        let (mut l0, mut l1, mut scale) = ([0.0; 3], [0.0; 3], 0.0);
        for p in list {
            let rc = [p.r[0] - com[0], p.r[1] - com[1], p.r[2] - com[2]];
            let (a, b) = (cross(rc, p.before), cross(rc, p.after));
            let dist = (rc[0] * rc[0] + rc[1] * rc[1] + rc[2] * rc[2]).sqrt();
            let speed = p.before.iter().map(|x| x * x).sum::<f64>().sqrt();
            for k in 0..3 {
                l0[k] += p.m * a[k];
                l1[k] += p.m * b[k];
            }
            scale += p.m * dist * speed;
        }
        for k in 0..3 {
            worst = worst.max((l1[k] - l0[k]).abs() / scale);
        }
    }
    worst
}

/// The +a rules keep each cell's angular momentum about its centre of mass (1e-12 relative),
/// fluid and solutes together, checked from the backend's own state: without force or shear
/// the collision is the only change of velocity, and it moves no particle.
fn plus_a_rules_conserve_each_cells_angular_momentum(p: Platform) {
    for (rule, thermostat) in rules() {
        let mut cfg = config(rule.clone(), thermostat);
        cfg.shear_rate = 0.0;
        let phys = Physics::from_config(&cfg);
        if !phys.rule.conserves_angular_momentum() {
            continue;
        }
        let Some(on_p) = p.config(&cfg) else { return };
        let mut be = mpcbox::backend::factory::open(&on_p, &phys, None).unwrap();
        let (pos, vel0, mass) = solutes(&cfg);
        for step in 0..4 {
            let before: FluidState = be.download().unwrap();
            let plan = phys.plan(step, false, false);
            let mut vel = vel0.clone();
            let mut batch = SoluteBatch {
                pos: &pos,
                vel: &mut vel,
                mass: &mass,
            };
            be.step(&plan, Some(&mut batch)).unwrap();
            let after = be.download().unwrap();
            let mut parts = Vec::with_capacity(after.len() + pos.len());
            for i in 0..after.len() {
                let x = [after.pos[0][i], after.pos[1][i], after.pos[2][i]];
                let loc = phys.locate(&plan, [x[0] as f64, x[1] as f64, x[2] as f64]);
                parts.push(Binned {
                    cell: loc.cell,
                    m: phys.mass,
                    r: [loc.x_in_cell, loc.y_in_cell, loc.z_in_cell],
                    before: before.velocity(i),
                    after: after.velocity(i),
                });
            }
            for j in 0..pos.len() {
                let loc = phys.locate_solute(&plan, pos[j]);
                parts.push(Binned {
                    cell: loc.cell,
                    m: mass[j],
                    r: [loc.x_in_cell, loc.y_in_cell, loc.z_in_cell],
                    before: vel0[j],
                    after: vel[j],
                });
            }
            let worst = worst_angular_momentum_change(&parts);
            let name = phys.rule.name();
            println!("{p}, {name} ({thermostat:?}), step {step}: worst cell {worst:.1e}");
            assert!(
                worst <= 1e-12,
                "{p}, {rule:?}: angular momentum changed by {worst:e}"
            );
        }
    }
}

/// MPC-AT brings a fluid started 20% too hot to kT and holds it (no other thermostat).
fn mpc_at_holds_the_temperature(p: Platform) {
    for angular_momentum in [false, true] {
        let rule = CollisionRule::MpcAt { angular_momentum };
        let mut cfg = config(rule, Thermostat::None);
        cfg.cells = [16, 16, 16];
        cfg.shear_rate = 0.0;
        cfg.kt = 1.3;
        cfg.output.equilibration_steps = 20;
        let Some(mut s) = p.solvent(&cfg) else { return };
        let mut st = s.fluid_state().unwrap();
        for k in 0..3 {
            for v in st.vel[k].iter_mut() {
                *v *= 1.2;
            }
        }
        s.set_fluid_state(&st).unwrap();
        for _ in 0..200 {
            s.step().unwrap();
        }
        let temp = s.stats().temperature.mean().unwrap();
        println!("{p}, MPC-AT (angular momentum {angular_momentum}): kT {temp:.5} (target 1.3)");
        assert!((temp / 1.3 - 1.0).abs() < 0.01, "{p}: temperature {temp}");
    }
}

/// Device-resident solutes collide as host solutes under every rule (the draws of a solute are
/// keyed by its position bits, the same in both paths).
fn device_resident_solutes_collide_as_host_solutes_under_every_rule(p: Platform) {
    for (rule, thermostat) in rules() {
        let cfg = config(rule.clone(), thermostat);
        let Some(mut host) = p.solvent(&cfg) else {
            return;
        };
        let mut dev = p.solvent(&cfg).unwrap();
        let (pos, vel0, mass) = solutes(&cfg);
        for step in 0..5 {
            let mut vh = vel0.clone();
            host.step_with_solutes(&pos, &mut vh, &mass).unwrap();
            let arrays = DeviceSoluteArrays::upload(0, &pos, &vel0, &mass).unwrap();
            dev.step_with_device_solutes(&arrays.solutes()).unwrap();
            let vd = arrays.velocities().unwrap();
            let what = format!("{p}, {rule:?} {thermostat:?}, step {step}");
            p.assert_same_solutes(&vh, &vd, &what);
        }
        let what = format!("{p}, {rule:?}");
        p.assert_same_fluid(
            &host.fluid_state().unwrap(),
            &dev.fluid_state().unwrap(),
            &what,
        );
    }
}

/// A run under each rule resumed from a checkpoint is bitwise identical to the uninterrupted
/// run on the CPU (nothing of a rule outlives a step but the fluid).
#[test]
fn rules_resume_bitwise_from_a_checkpoint() {
    for (rule, thermostat) in rules() {
        let cfg = config(rule.clone(), thermostat);
        let mut whole = mpcbox::Solvent::new(cfg.clone()).unwrap();
        let mut first = mpcbox::Solvent::new(cfg).unwrap();
        for _ in 0..7 {
            whole.step().unwrap();
            first.step().unwrap();
        }
        let ck = first.checkpoint().unwrap();
        let bytes = ck.to_bytes().unwrap();
        let ck = mpcbox::Checkpoint::from_bytes(&bytes, "memory").unwrap();
        let mut resumed = mpcbox::Solvent::from_checkpoint(ck, None).unwrap();
        for _ in 0..6 {
            whole.step().unwrap();
            resumed.step().unwrap();
        }
        let (a, b) = (whole.fluid_state().unwrap(), resumed.fluid_state().unwrap());
        assert!(a == b, "{rule:?} {thermostat:?}: the resumed run differs");
    }
}
