//! Wall shapes beyond the channels: the fluid in a sphere (`Sphere`) and around one
//! (`SphereObstacle`, with the periodic box a lattice of spheres) or around a cylinder along z
//! (`CylinderObstacle`, across a flow along x). No particle ever enters the
//! solid under any rule, flow past the obstacles keeps every particle and gives the spheres
//! the body force, the sphere's wall brings a hot fluid back to kT, and the GPUs follow the CPU;
//! on every platform (tests/suite/common/platform.rs).

use crate::common;

use common::shaped;
use common::Platform;
use mpcbox::walls_report::summarize;

common::backend_tests!(
    [cpu gpu multi_gpu slabs cpu_slabs]
    no_particle_ever_enters_a_sphere,
    flow_past_spheres_keeps_the_fluid_and_its_momentum,
);
common::backend_tests!([gpu multi_gpu slabs cpu_slabs] spheres_follow_the_cpu_trajectory);
common::backend_tests!(
    [cpu gpu multi_gpu]
    a_sphere_brings_a_hot_fluid_back_to_kt,
    the_obstacles_take_the_body_force,
);

/// Every collision rule (with MBS where it takes one).
const RULES: [(&str, &str); 4] = [
    ("Srd(angle_deg: 130.0)", "Mbs"),
    ("Srd(angle_deg: 130.0, angular_momentum: true)", "Mbs"),
    ("MpcAt()", "None"),
    ("MpcAt(angular_momentum: true)", "None"),
];

/// The sphere set-ups: (what, walls, extra fields).
const SPHERES: [(&str, &str, &str); 5] = [
    ("sphere, no slip", "Sphere(radius: 4.5)", ""),
    (
        "sphere, slip, h = 0.2",
        "Sphere(radius: 4.2, boundary: Slip)",
        ", time_step: 0.2",
    ),
    (
        "obstacle, no slip, oblique force",
        "SphereObstacle(radius: 3.0)",
        ", body_force: (0.05, 0.02, -0.01), kT: 2.0",
    ),
    (
        "obstacle, slip",
        "SphereObstacle(radius: 2.6, boundary: Slip)",
        ", body_force: (0.05, 0.0, 0.0)",
    ),
    (
        "cylinder across the flow, no slip, oblique force",
        "CylinderObstacle(radius: 2.8)",
        ", body_force: (0.05, 0.01, 0.03)",
    ),
];

/// No fluid particle is ever inside a sphere's solid (checked after every step, every rule,
/// with the grid shift) and none is lost.
fn no_particle_ever_enters_a_sphere(p: Platform) {
    for rule in RULES {
        for (what, walls, extra) in SPHERES {
            let cfg = shaped([10, 10, 10], walls, rule, extra);
            let Some(mut s) = p.solvent(&cfg) else {
                return;
            };
            common::assert_never_in_solid(&mut s, 40, &format!("{p}, {what}, {}", rule.0));
        }
    }
}

/// Flow past a lattice of spheres (with solutes in the collision): every step the fluid's
/// momentum changes by the body force less what it gave the sphere, to rounding, and the
/// number of particles stays.
fn flow_past_spheres_keeps_the_fluid_and_its_momentum(p: Platform) {
    for (rule, walls) in RULES.iter().flat_map(|&r| {
        [
            (r, "SphereObstacle(radius: 3.0)"),
            (r, "CylinderObstacle(radius: 3.0)"),
        ]
    }) {
        let cfg = shaped(
            [10, 10, 10],
            walls,
            rule,
            ", body_force: (0.03, 0.01, 0.0), seed: 5",
        );
        let Some(mut s) = p.solvent(&cfg) else {
            return;
        };
        let shape = s.physics().walls.clone().expect("walls").shape;
        let n = s.n_fluid();
        let (pos, mut vel, mass) = common::solutes_in_fluid(
            &shape,
            (0..10).map(|i| [0.9 * i as f64, 2.1 + 0.6 * i as f64, 5.0]),
        );
        let mut given = 0.0;
        for step in 0..15 {
            let what = format!("{p}, {walls}, {}, step {step}", rule.0);
            let wall = common::step_with_balanced_momentum(&mut s, &pos, &mut vel, &mass, &what);
            given += wall.iter().map(|w| w.abs()).sum::<f64>();
            assert_eq!(s.fluid_state().unwrap().len(), n, "{what}");
        }
        assert!(given > 0.0, "{p}, {}: no contact with the sphere", rule.0);
    }
}

/// A fluid started at 1.3 kT in a sphere without a thermostat (plain SRD, which conserves the
/// energy) cools to kT through its wall alone: the virtual particles of the cut cells are the
/// heat bath. MPC-AT, its own thermostat, holds kT there too.
fn a_sphere_brings_a_hot_fluid_back_to_kt(p: Platform) {
    for rule in [("Srd(angle_deg: 130.0)", "None"), ("MpcAt()", "None")] {
        let mut cfg = shaped([12, 12, 12], "Sphere(radius: 5.5)", rule, ", seed: 3");
        cfg.output.equilibration_steps = 1500;
        cfg.output.sample_interval = 2;
        let Some(mut s) = p.solvent(&cfg) else {
            return;
        };
        let mut st = s.fluid_state().unwrap();
        for v in st.vel.iter_mut() {
            for c in v.iter_mut() {
                *c *= 1.3f64.sqrt();
            }
        }
        s.set_fluid_state(&st).unwrap();
        for _ in 0..2500 {
            s.step().unwrap();
        }
        let kt = s.stats().temperature.mean().unwrap();
        eprintln!("{p}: {} in a sphere, started at 1.3 kT: kT {kt:.4}", rule.0);
        assert!((kt - 1.0).abs() < 0.01, "{p}, {}: kT {kt}", rule.0);
    }
}

/// Steady flow through a lattice of spheres and an array of cylinders across it: the
/// obstacles take the whole body force (the summary's force on the walls against N f) and the
/// fluid moves along the force.
fn the_obstacles_take_the_body_force(p: Platform) {
    for (walls, geometry) in [
        ("SphereObstacle(radius: 3.0)", "spherical obstacle"),
        ("CylinderObstacle(radius: 2.5)", "cylinder obstacle along z"),
    ] {
        obstacle_takes_the_body_force(p, walls, geometry);
    }
}

fn obstacle_takes_the_body_force(p: Platform, walls: &str, geometry: &str) {
    let mut cfg = shaped(
        [12, 12, 12],
        walls,
        RULES[0],
        ", body_force: (0.01, 0.0, 0.0), seed: 8",
    );
    cfg.output.equilibration_steps = 500;
    cfg.output.sample_interval = 5;
    let Some(mut s) = p.solvent(&cfg) else {
        return;
    };
    for _ in 0..3500 {
        s.step().unwrap();
    }
    let w = summarize(&s).expect("a walls summary");
    assert_eq!(w.geometry, geometry);
    let f = &w.wall_force[0][0];
    let err = f.error.expect("an error bar");
    let body = w.body_force_total[0];
    let flow: f64 = s.stats().profile().iter().sum::<f64>() / s.stats().profile().len() as f64;
    eprintln!(
        "{p}: {geometry}: force {:.3} ± {err:.3} against the body force {body:.3}; mean vx {flow:.4}",
        f.value
    );
    assert!(
        (f.value - body).abs() < 4.0 * err && err < 0.05 * body,
        "{p}: force {} ± {err}, body force {body}",
        f.value
    );
    assert!(flow > 0.0, "{p}: mean vx {flow}");
    assert!(
        w.wall_force[0][1].value.abs() < 4.0 * w.wall_force[0][1].error.unwrap(),
        "{p}: no force across"
    );
}

/// Between spheres every GPU count follows the CPU trajectory to rounding (the same bounces,
/// virtual particles and momentum given to the sphere), under SRD + MBS and MPC-AT+a.
fn spheres_follow_the_cpu_trajectory(p: Platform) {
    for rule in [RULES[0], RULES[3]] {
        for (walls, force) in [
            ("Sphere(radius: 9.5)", "0.0, 0.0, 0.0"),
            ("SphereObstacle(radius: 6.0)", "0.02, 0.01, 0.0"),
            ("CylinderObstacle(radius: 5.0)", "0.02, 0.0, 0.01"),
        ] {
            let cfg = shaped(
                [20, 24, 20],
                walls,
                rule,
                &format!(", body_force: ({force}), seed: 6"),
            );
            common::assert_walls_follow_the_cpu(p, &cfg, 8, &format!("{walls}, {}", rule.0));
        }
    }
}
