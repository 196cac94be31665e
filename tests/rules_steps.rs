//! Whole steps under the collision rules beside SRD (MPC-AT, MPC-AT+a, SRD+a) on every
//! backend: momentum of fluid and solutes conserved by every step (with and without shear),
//! each cell's angular momentum about its centre of mass conserved by the +a rules' collision
//! (recomputed from the backend's own state), and MPC-AT holding the temperature from a hot
//! start. Each test is written once over a device; the GPU instances are ignored by default.

mod common;

use mpcbox::backend::SoluteBatch;
use mpcbox::config::{CollisionRule, Config, DeviceChoice, Thermostat};
use mpcbox::physics::rules::cross;
use mpcbox::physics::Physics;
use mpcbox::rng::CellStream;
use mpcbox::state::FluidState;
use mpcbox::Solvent;

/// The rules beside plain SRD, with the thermostats that make sense for each.
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

fn config(
    cells: [u32; 3],
    rule: CollisionRule,
    thermostat: Thermostat,
    device: &DeviceChoice,
) -> Config {
    let mut cfg = common::small_config(cells, 10);
    cfg.collision = rule;
    cfg.thermostat = thermostat;
    cfg.device = device.clone();
    cfg.seed = 77;
    cfg.tuning.reorder_interval = Some(3);
    cfg.validate().unwrap();
    cfg
}

/// `n` solutes of masses 1 and 10, some outside the box (unwrapped MD coordinates).
fn solutes(n: usize, cells: [u32; 3], seed: u64) -> (Vec<[f64; 3]>, Vec<[f64; 3]>, Vec<f64>) {
    let mut r = CellStream::for_particle(seed, 0);
    let pos = (0..n)
        .map(|_| {
            [
                (1.5 * r.uniform() - 0.25) * cells[0] as f64,
                (2.0 * r.uniform() - 0.5) * cells[1] as f64,
                r.uniform() * cells[2] as f64,
            ]
        })
        .collect();
    let vel = (0..n)
        .map(|_| [0.3 * r.normal() + 0.2, 0.3 * r.normal(), 0.3 * r.normal()])
        .collect();
    let mass = (0..n).map(|i| [1.0, 10.0][i % 2]).collect();
    (pos, vel, mass)
}

fn momentum_of(s: &mut Solvent, vel: &[[f64; 3]], mass: &[f64]) -> [f64; 3] {
    let mut p = s.moments().unwrap().momentum;
    for (v, m) in vel.iter().zip(mass) {
        for k in 0..3 {
            p[k] += m * v[k];
        }
    }
    p
}

/// Fluid plus solute momentum is conserved by every coupled step: all components without
/// shear, y and z under Lees-Edwards shear (x changes through the boundary).
fn rules_conserve_momentum_in_coupled_steps(device: DeviceChoice) {
    for (rule, thermostat) in rules() {
        for shear in [0.0, 0.05] {
            let mut cfg = config([8, 24, 8], rule.clone(), thermostat, &device);
            cfg.shear_rate = shear;
            let mut s = Solvent::new(cfg.clone()).unwrap();
            let (pos, mut vel, mass) = solutes(300, cfg.cells, 3);
            let scale = s.n_fluid() as f64 + 10.0 * mass.len() as f64;
            for step in 0..8 {
                let before = momentum_of(&mut s, &vel, &mass);
                s.step_with_solutes(&pos, &mut vel, &mass).unwrap();
                let after = momentum_of(&mut s, &vel, &mass);
                let first = if shear == 0.0 { 0 } else { 1 };
                for k in first..3 {
                    assert!(
                        (after[k] - before[k]).abs() / scale <= 1e-12,
                        "{rule:?} {thermostat:?}, shear {shear}, step {step}: momentum {k}: \
                         {} -> {}",
                        before[k],
                        after[k]
                    );
                }
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
fn plus_a_rules_conserve_each_cells_angular_momentum(device: DeviceChoice) {
    for (rule, thermostat) in rules() {
        let cfg = config([8, 24, 8], rule.clone(), thermostat, &device);
        let phys = Physics::from_config(&cfg);
        if !phys.rule.conserves_angular_momentum() {
            continue;
        }
        let mut be = mpcbox::backend::open(&cfg, &phys, None).unwrap();
        let (pos, vel0, mass) = solutes(400, cfg.cells, 9);
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
                let p = [after.pos[0][i], after.pos[1][i], after.pos[2][i]];
                let loc = phys.locate(&plan, [p[0] as f64, p[1] as f64, p[2] as f64]);
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
            println!(
                "{} ({thermostat:?}), step {step}: worst cell {worst:.1e}",
                phys.rule.name()
            );
            assert!(
                worst <= 1e-12,
                "{rule:?}: angular momentum changed by {worst:e}"
            );
        }
    }
}

/// MPC-AT brings a fluid started 20% too hot to kT within a few steps and holds it, every
/// rule's momentum conserved meanwhile.
fn mpc_at_holds_the_temperature(device: DeviceChoice) {
    for angular_momentum in [false, true] {
        let rule = CollisionRule::MpcAt { angular_momentum };
        let mut cfg = config([16, 16, 16], rule, Thermostat::None, &device);
        cfg.kt = 1.3;
        cfg.output.equilibration_steps = 20;
        let mut s = Solvent::new(cfg.clone()).unwrap();
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
        println!("MPC-AT (angular momentum {angular_momentum}): kT {temp:.5} (target 1.3)");
        assert!((temp / 1.3 - 1.0).abs() < 0.01, "temperature {temp}");
    }
}

mod cpu {
    use super::*;

    #[test]
    fn rules_conserve_momentum_in_coupled_steps() {
        super::rules_conserve_momentum_in_coupled_steps(DeviceChoice::Cpu);
    }

    #[test]
    fn plus_a_rules_conserve_each_cells_angular_momentum() {
        super::plus_a_rules_conserve_each_cells_angular_momentum(DeviceChoice::Cpu);
    }

    #[test]
    fn mpc_at_holds_the_temperature() {
        super::mpc_at_holds_the_temperature(DeviceChoice::Cpu);
    }
}

mod gpu {
    use super::*;

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn rules_conserve_momentum_in_coupled_steps() {
        super::rules_conserve_momentum_in_coupled_steps(DeviceChoice::Cuda(vec![0]));
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn plus_a_rules_conserve_each_cells_angular_momentum() {
        super::plus_a_rules_conserve_each_cells_angular_momentum(DeviceChoice::Cuda(vec![0]));
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn mpc_at_holds_the_temperature() {
        super::mpc_at_holds_the_temperature(DeviceChoice::Cuda(vec![0]));
    }
}

mod multi_gpu {
    use super::*;

    /// Two GPUs: the 24-layer box holds slabs of the minimum thickness for at most that many.
    fn two_gpus() -> DeviceChoice {
        DeviceChoice::Cuda(vec![0, 1])
    }

    #[test]
    #[ignore = "needs two or more CUDA GPUs"]
    fn rules_conserve_momentum_in_coupled_steps() {
        super::rules_conserve_momentum_in_coupled_steps(two_gpus());
    }

    #[test]
    #[ignore = "needs two or more CUDA GPUs"]
    fn plus_a_rules_conserve_each_cells_angular_momentum() {
        super::plus_a_rules_conserve_each_cells_angular_momentum(two_gpus());
    }

    #[test]
    #[ignore = "needs two or more CUDA GPUs"]
    fn mpc_at_holds_the_temperature() {
        super::mpc_at_holds_the_temperature(two_gpus());
    }
}
