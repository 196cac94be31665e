//! Walls under every collision rule (SRD, SRD+a, MPC-AT, MPC-AT+a, with and without MBS where
//! the rule allows it): plane Poiseuille flow against each rule's theory viscosity with no slip
//! and the temperature held, the momentum the walls take, no particle in a wall, and the GPUs
//! against the CPU step by step; on every platform (tests/suite/common/platform.rs).

use crate::common;

use common::Platform;
use mpcbox::config::Config;
use mpcbox::walls_report::{summarize, WallsSummary};
use mpcbox::Solvent;

common::backend_tests!(
    [cpu gpu multi_gpu slabs cpu_slabs]
    walls_take_the_momentum_under_every_rule,
);
common::backend_tests!([gpu multi_gpu slabs cpu_slabs] walls_under_every_rule_follow_the_cpu);
// One profile test per rule (they run in parallel); several slabs follow the CPU step by step
// (walls_under_every_rule_follow_the_cpu), so they add no other realisation here.
common::backend_tests!(
    [cpu gpu multi_gpu]
    poiseuille_flow_under_srd,
    poiseuille_flow_under_srd_with_mbs,
    poiseuille_flow_under_srd_a_with_mbs,
    poiseuille_flow_under_mpc_at,
    poiseuille_flow_under_mpc_at_a,
);

/// Every rule and thermostat a run between walls may use: (name, collision, thermostat).
const RULES: [(&str, &str, &str); 6] = [
    ("SRD", "Srd(angle_deg: 130.0)", "None"),
    ("SRD + MBS", "Srd(angle_deg: 130.0)", "Mbs"),
    (
        "SRD+a",
        "Srd(angle_deg: 130.0, angular_momentum: true)",
        "None",
    ),
    (
        "SRD+a + MBS",
        "Srd(angle_deg: 130.0, angular_momentum: true)",
        "Mbs",
    ),
    ("MPC-AT", "MpcAt()", "None"),
    ("MPC-AT+a", "MpcAt(angular_momentum: true)", "None"),
];

/// A CPU config of `cells` between `walls` (RON) under rule `RULES[rule]`, with further fields
/// `extra` (RON, each with a leading comma).
fn walled(rule: usize, cells: [u32; 3], walls: &str, extra: &str) -> Config {
    let (_, collision, thermostat) = RULES[rule];
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({}, {}, {}), particles_per_cell: 10, time_step: 0.1, collision: {collision}, \
          thermostat: {thermostat}, steps: 100, device: Cpu, walls: {walls}{extra})",
        cells[0], cells[1], cells[2]
    ))
    .expect("test config is valid");
    cfg.output.observable_interval = 0;
    cfg
}

/// Under every rule, each step the fluid's momentum (with solutes in the collision) changes by
/// the body force less what it gave the walls, to rounding; no particle enters a wall.
fn walls_take_the_momentum_under_every_rule(p: Platform) {
    for (rule, (name, ..)) in RULES.iter().enumerate() {
        for walls in [
            "Slit(bottom_velocity: -0.2, top_velocity: 0.1)",
            "Pipe(radius: 4.5, velocity: 0.1)",
            "PlanarPore(height: 6.0, length: 4.0)",
            "CosineExpansion(height: 5.0, amplitude: 1.0)",
        ] {
            let cfg = walled(
                rule,
                [6, 10, 10],
                walls,
                ", body_force: (0.03, 0.0, 0.0), seed: 21",
            );
            let Some(mut s) = p.solvent(&cfg) else {
                return;
            };
            let shape = s.physics().walls.clone().expect("walls").shape;
            // solutes of other masses across the channel, some in the cells the wall cuts
            let (pos, mut vel, mass) = common::solutes_in_fluid(
                &shape,
                (0..12).map(|i| [0.5 * i as f64, 0.9 + 0.7 * i as f64, 5.0]),
            );
            let mut given = 0.0;
            for step in 0..15 {
                let what = format!("{p}, {name}, {walls}, step {step}");
                let wall =
                    common::step_with_balanced_momentum(&mut s, &pos, &mut vel, &mass, &what);
                given += wall.iter().map(|w| w.abs()).sum::<f64>();
                common::assert_in_fluid(&shape, &s.fluid_state().unwrap(), &what);
            }
            assert!(given > 0.0, "{p}, {name}: no wall contact");
        }
    }
}

/// Under every rule, between walls every GPU count follows the CPU trajectory to rounding:
/// the same virtual particles (positions, velocities and draws keyed by the global cell), the
/// same momentum given to the walls.
fn walls_under_every_rule_follow_the_cpu(p: Platform) {
    for (rule, (name, ..)) in RULES.iter().enumerate() {
        for (walls, force) in [
            (
                "Slit(bottom_velocity: -0.1, top_velocity: 0.2)",
                "0.02, 0.0",
            ),
            ("Pipe(radius: 9.5)", "0.02, 0.0"),
            ("Slit(normal: Z, top_velocity: -0.1)", "0.02, 0.01"),
            ("PlanarPore(height: 16.0, length: 5.0)", "0.02, 0.01"),
            ("CosineChannel(height: 14.0, amplitude: 2.0)", "0.02, 0.0"),
        ] {
            let cfg = walled(
                rule,
                [8, 24, 20],
                walls,
                &format!(", body_force: ({force}, 0.0), seed: {}", 30 + rule),
            );
            common::assert_walls_follow_the_cpu(p, &cfg, 8, &format!("{name}, {walls}"));
        }
    }
}

/// The time-averaged plane Poiseuille flow of rule `RULES[rule]` between plates normal to y,
/// 23 cells apart, driven to a centre velocity of about 0.4 with the rule's theory viscosity
/// (the signal against the noise of the slow lowest mode): 500 steps from the theory profile,
/// then samples every 5th step (twice as many on the GPUs, where every run is another noise
/// realisation).
fn developed_poiseuille(p: Platform, rule: usize) -> Option<(Solvent, WallsSummary)> {
    let probe = walled(rule, [8, 24, 8], "Slit()", "");
    let (kinetic, collisional) = mpcbox::physics::theory::rule_viscosity(&probe);
    let eta = kinetic + collisional;
    let force = 0.4 * 8.0 * eta / (10.0 * 23.0f64.powi(2));
    let cfg = walled(
        rule,
        [8, 24, 8],
        "Slit()",
        &format!(
            ", body_force: ({force}, 0.0, 0.0), seed: {}, initial_flow: Steady",
            40 + rule
        ),
    );
    let (eq, steps) = match p {
        Platform::Cpu | Platform::CpuSlabs(_) => (500, 6000),
        Platform::Gpu | Platform::GpuVariant(_) | Platform::MultiGpu(_) | Platform::Slabs(_) => {
            (500, 12000)
        }
    };
    let mut cfg = cfg;
    cfg.output.equilibration_steps = eq;
    cfg.output.sample_interval = 5;
    let mut s = p.solvent(&cfg)?;
    for _ in 0..eq + steps {
        s.step().unwrap();
    }
    let summary = summarize(&s).expect("a walls summary");
    Some((s, summary))
}

/// Plane Poiseuille flow under rule `RULES[rule]`: η from the curvature within 4% of the rule's
/// theory (8% for MPC-AT+a, see below), the fitted profile at the plates within 6% of the
/// centre velocity (no slip), the
/// plates take the body force, kT held at 1 by the thermostat (MBS, or MPC-AT's own). Plain
/// SRD without a thermostat warms by viscous heating, the virtual particles of the cut cells
/// its only heat sink: its kT may rise by up to 10%. (SRD+a without a thermostat is left out:
/// its rule does not conserve energy and warms even at rest in a periodic box.)
fn check_poiseuille(p: Platform, rule: usize) {
    let Some((s, w)) = developed_poiseuille(p, rule) else {
        return;
    };
    let name = RULES[rule].0;
    let fit = w.fit.expect("profile fit");
    let eta = w
        .viscosity_from_curvature
        .expect("viscosity from the curvature");
    let vc = w.centre_velocity.unwrap();
    let kt = s.stats().temperature.mean().unwrap();
    let force: f64 = w.wall_force.iter().map(|f| f[0].value).sum();
    let force_err = w
        .wall_force
        .iter()
        .map(|f| f[0].error.unwrap().powi(2))
        .sum::<f64>()
        .sqrt();
    let mean_slip = w.slip_velocity.iter().sum::<f64>() / 2.0 / vc;
    eprintln!(
        "{p}: {name} Poiseuille: eta {eta:.4} (theory {:.4}, {:+.2}%), centre {vc:.4}, slip \
         {:?} (mean {:.2}% of the centre), fit rms {:.1e}; wall force {force:.4} ± {force_err:.4} \
         vs body force {:.4}; kT {kt:.4}",
        w.viscosity_theory,
        100.0 * (eta / w.viscosity_theory - 1.0),
        w.slip_velocity,
        100.0 * mean_slip,
        fit.rms_residual,
        w.body_force_total[0]
    );
    // The curvature's η scatters from seed to seed: MPC-AT+a (the lowest viscosity, the
    // fastest flow) gave +0.5%, +6.2%, +2.9% and -4.1% over four trajectories of this run (f64
    // and fixed-point sums, seeds 45 and 55), a spread of about 4%; the other rules stayed
    // within 2%. Its bound is two such spreads; the theory values of the rules differ by 2x.
    let eta_tol = if rule == 5 { 0.08 } else { 0.04 };
    assert!(
        (eta / w.viscosity_theory - 1.0).abs() < eta_tol,
        "{p}, {name}: eta {eta} vs theory {}",
        w.viscosity_theory
    );
    // the fitted profile's ends scatter as much: up to 4.7% of the centre over the same runs
    assert!(
        mean_slip.abs() < 0.06,
        "{p}, {name}: slip {:?} vs centre {vc}",
        w.slip_velocity
    );
    let body = w.body_force_total[0];
    assert!(
        (force - body).abs() < 4.0 * force_err && force_err < 0.05 * body,
        "{p}, {name}: wall force {force} ± {force_err}, body force {body}"
    );
    let warming = if RULES[rule].2 == "None" && rule < 2 {
        0.1
    } else {
        0.0
    };
    assert!(kt > 0.99 && kt < 1.01 + warming, "{p}, {name}: kT {kt}");
}

fn poiseuille_flow_under_srd(p: Platform) {
    check_poiseuille(p, 0);
}

fn poiseuille_flow_under_srd_with_mbs(p: Platform) {
    check_poiseuille(p, 1);
}

fn poiseuille_flow_under_srd_a_with_mbs(p: Platform) {
    check_poiseuille(p, 3);
}

fn poiseuille_flow_under_mpc_at(p: Platform) {
    check_poiseuille(p, 4);
}

fn poiseuille_flow_under_mpc_at_a(p: Platform) {
    check_poiseuille(p, 5);
}
