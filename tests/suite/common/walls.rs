//! Checks shared by the wall tests (`walls`, `walls_rules`, `walls_shapes`): the GPUs against
//! the CPU step by step between walls, and the momentum balance of a step with the walls.

use mpcbox::config::Config;
use mpcbox::physics::walls::{Shape, WallShape};
use mpcbox::physics::Physics;
use mpcbox::state::FluidState;
use mpcbox::Solvent;

use super::Platform;

/// Every decomposition of `p` follows the CPU trajectory of `cfg` (reordering off) for `steps`
/// steps to rounding: the same reports, the same momentum given to the walls, the same final
/// state. `what` names the case in messages.
pub fn assert_walls_follow_the_cpu(p: Platform, cfg: &Config, steps: u64, what: &str) {
    let mut cfg = cfg.clone();
    cfg.tuning.reorder_interval = Some(0);
    let phys = Physics::from_config(&cfg);
    let st0 = FluidState::initial(&cfg);
    let mut cpu = mpcbox::backend::factory::open(&cfg, &phys, Some(&st0)).unwrap();
    let cpu_reports: Vec<_> = (0..steps)
        .map(|s| cpu.step(&phys.plan(s, false, false), None).unwrap())
        .collect();
    let reference = cpu.download().unwrap();
    for q in p.with_fewer_gpus() {
        let Some(q_cfg) = q.config(&cfg) else {
            continue;
        };
        let what = format!("{q}, {what}");
        let mut be = mpcbox::backend::factory::open(&q_cfg, &phys, Some(&st0)).unwrap();
        q.check_backend(&be.describe());
        for s in 0..steps {
            let reorder = q.is_multi_gpu() && s % 3 == 2;
            let r = be.step(&phys.plan(s, false, reorder), None).unwrap();
            let c = &cpu_reports[s as usize];
            super::compare_reports(c, &r, 1e-12, 1e-10, &format!("{what}, step {s}"));
            for (a, b) in c.wall_momentum.iter().zip(&r.wall_momentum) {
                for k in 0..3 {
                    assert!(
                        (a[k] - b[k]).abs() <= 1e-10 * a[k].abs().max(1.0),
                        "{what}, step {s}: wall momentum {:?} vs {:?}",
                        c.wall_momentum,
                        r.wall_momentum
                    );
                }
            }
        }
        let st = be.download().unwrap();
        let (w, d) = super::compare_states(&reference, &st, 1e-12, &what);
        eprintln!(
            "{what}, {steps} steps: max relative velocity difference {w:e}, {d} positions differ"
        );
    }
}

/// One step of `s` with the solutes (`pos`, `vel`, `mass`): the fluid's and solutes' momentum
/// changes by the body force less what they gave the walls, to 10⁻¹² of the thermal momentum
/// scale. Returns the step's momentum given to the walls (both surfaces summed).
pub fn step_with_balanced_momentum(
    s: &mut Solvent,
    pos: &[[f64; 3]],
    vel: &mut [[f64; 3]],
    mass: &[f64],
    what: &str,
) -> [f64; 3] {
    let phys = s.physics().clone();
    let n = s.n_fluid() as f64;
    let scale = n * phys.mass * (phys.kt / phys.mass).sqrt();
    let before = super::fluid_and_solute_momentum(s, vel, mass);
    let r = s.step_with_solutes(pos, vel, mass).unwrap();
    let after = super::fluid_and_solute_momentum(s, vel, mass);
    let mut given = [0.0; 3];
    for k in 0..3 {
        given[k] = r.wall_momentum[0][k] + r.wall_momentum[1][k];
        let push = n * phys.mass * phys.acceleration[k] * phys.h;
        let balance = after[k] - before[k] - push + given[k];
        assert!(
            balance.abs() / scale <= 1e-12,
            "{what}, component {k}: momentum {} -> {}, body force {push}, to the walls {}: \
             {balance:e} unaccounted",
            before[k],
            after[k],
            given[k]
        );
    }
    given
}

/// A CPU config of a `cells` box with `walls` (RON), `rule` (collision, thermostat) and further
/// fields `extra` (RON, each with a leading comma).
pub fn shaped(cells: [u32; 3], walls: &str, rule: (&str, &str), extra: &str) -> Config {
    let (collision, thermostat) = rule;
    let h = if extra.contains("time_step") {
        ""
    } else {
        ", time_step: 0.1"
    };
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({}, {}, {}), particles_per_cell: 10, collision: {collision}, \
          thermostat: {thermostat}, steps: 100, device: Cpu, walls: {walls}{h}{extra})",
        cells[0], cells[1], cells[2]
    ))
    .expect("test config is valid");
    cfg.output.observable_interval = 0;
    cfg
}

/// Every stored position of `st` is in the fluid of `shape` (signed distance ≥ 0).
pub fn assert_in_fluid(shape: &Shape, st: &FluidState, what: &str) {
    for i in 0..st.len() {
        let p = st.position(i).map(|c| c as f64);
        let d = shape.signed_distance(p);
        assert!(
            d >= 0.0,
            "{what}: particle {i} at {p:?} is inside the wall ({d:e})"
        );
    }
}

/// `steps` steps of `s`: after each, no particle is inside its walls' solid and none is lost.
pub fn assert_never_in_solid(s: &mut Solvent, steps: u64, what: &str) {
    let shape = s.physics().walls.clone().expect("walls").shape;
    let n = s.n_fluid();
    for step in 0..steps {
        s.step().unwrap();
        let st = s.fluid_state().unwrap();
        assert_eq!(st.len(), n, "{what}, step {step}: particles");
        assert_in_fluid(&shape, &st, &format!("{what}, step {step}"));
    }
}

/// Solutes at those of `points` that lie in the fluid of `shape`: masses 1, 2, 3, … and
/// velocities (0.1 i, −0.2, 0.3), as (positions, velocities, masses).
pub fn solutes_in_fluid(
    shape: &Shape,
    points: impl Iterator<Item = [f64; 3]>,
) -> (Vec<[f64; 3]>, Vec<[f64; 3]>, Vec<f64>) {
    let pos: Vec<[f64; 3]> = points.filter(|q| shape.signed_distance(*q) > 0.0).collect();
    let vel = (0..pos.len())
        .map(|i| [0.1 * i as f64, -0.2, 0.3])
        .collect();
    let mass = (0..pos.len()).map(|i| 1.0 + i as f64).collect();
    (pos, vel, mass)
}
