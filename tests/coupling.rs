//! The coupled step: solutes embedded in the collision through the public Solvent API.

mod common;

use mpcbox::config::Thermostat;
use mpcbox::rng::CellStream;
use mpcbox::{MpcError, Solvent};

fn solutes(
    n: usize,
    box_len: [f64; 3],
    mass: f64,
    seed: u64,
) -> (Vec<[f64; 3]>, Vec<[f64; 3]>, Vec<f64>) {
    let mut r = CellStream::for_particle(seed, 0);
    let pos = (0..n)
        .map(|_| {
            [
                r.uniform() * box_len[0],
                r.uniform() * box_len[1],
                r.uniform() * box_len[2],
            ]
        })
        .collect();
    let s = (1.0 / mass).sqrt();
    let vel = (0..n)
        .map(|_| [s * r.normal(), s * r.normal(), s * r.normal()])
        .collect();
    (pos, vel, vec![mass; n])
}

fn total_momentum(s: &mut Solvent, vel: &[[f64; 3]], mass: &[f64]) -> [f64; 3] {
    let mut p = s.moments().unwrap().momentum;
    for (v, m) in vel.iter().zip(mass) {
        for k in 0..3 {
            p[k] += m * v[k];
        }
    }
    p
}

#[test]
fn fluid_plus_solute_momentum_is_conserved_by_each_coupled_step() {
    let cfg = common::small_config([10, 10, 10], 10);
    let mut s = Solvent::new(cfg).unwrap();
    let (pos, mut vel, mut mass) = solutes(700, [10.0; 3], 5.0, 1);
    for (i, m) in mass.iter_mut().enumerate() {
        *m = 1.0 + (i % 7) as f64; // mixed masses
    }
    for v in vel.iter_mut() {
        v[0] += 1.0; // net solute drift, so momentum flows between solutes and fluid
    }
    let scale: f64 = 10_000.0 + mass.iter().sum::<f64>();
    for _ in 0..20 {
        let before = total_momentum(&mut s, &vel, &mass);
        s.step_with_solutes(&pos, &mut vel, &mass).unwrap();
        let after = total_momentum(&mut s, &vel, &mass);
        for k in 0..3 {
            assert!(
                (after[k] - before[k]).abs() / scale <= 1e-12,
                "component {k}: {} -> {}",
                before[k],
                after[k]
            );
        }
    }
}

#[test]
fn solutes_thermalize_to_kt_with_mbs() {
    let mut cfg = common::small_config([12, 12, 12], 10);
    cfg.thermostat = Thermostat::Mbs;
    cfg.kt = 1.0;
    let mut s = Solvent::new(cfg).unwrap();
    let n = 1200; // ~0.7 solutes per cell
    let (mut pos, mut vel, mass) = solutes(n, [12.0; 3], 5.0, 2);
    for v in vel.iter_mut() {
        *v = [0.0; 3]; // start cold
    }
    let h = 0.1;
    let mut sum = [0.0; 3];
    let mut samples = 0.0;
    for step in 0..600 {
        // free flight between collisions, as an MD code without forces would do
        for (p, v) in pos.iter_mut().zip(&vel) {
            for k in 0..3 {
                p[k] += v[k] * h;
            }
        }
        s.step_with_solutes(&pos, &mut vel, &mass).unwrap();
        if step >= 150 {
            for (v, m) in vel.iter().zip(&mass) {
                for k in 0..3 {
                    sum[k] += m * v[k] * v[k];
                }
            }
            samples += n as f64;
        }
    }
    for k in 0..3 {
        let t = sum[k] / samples;
        assert!(
            (t - 1.0).abs() < 0.02,
            "solute <m v_{k}^2> = {t}, expected kT = 1"
        );
    }
}

#[test]
fn zero_solutes_is_exactly_the_plain_step() {
    let mut cfg = common::small_config([8, 8, 8], 10);
    cfg.thermostat = Thermostat::Mbs;
    cfg.shear_rate = 0.05;
    let mut plain = Solvent::new(cfg.clone()).unwrap();
    let mut coupled = Solvent::new(cfg.clone()).unwrap();
    let mut split = Solvent::new(cfg).unwrap();
    for _ in 0..10 {
        plain.step().unwrap();
        coupled.step_with_solutes(&[], &mut [], &[]).unwrap();
        split.begin_step(&[], &[], &[]).unwrap();
        split.finish_step(&mut []).unwrap();
    }
    let a = plain.fluid_state().unwrap();
    assert!(a == coupled.fluid_state().unwrap());
    assert!(a == split.fluid_state().unwrap());
}

#[test]
fn split_form_equals_one_call_form() {
    let mut cfg = common::small_config([8, 8, 8], 10);
    cfg.thermostat = Thermostat::Mbs;
    let mut one = Solvent::new(cfg.clone()).unwrap();
    let mut two = Solvent::new(cfg).unwrap();
    let (pos, vel0, mass) = solutes(300, [8.0; 3], 3.0, 4);
    let mut v1 = vel0.clone();
    let mut v2 = vel0.clone();
    for _ in 0..5 {
        one.step_with_solutes(&pos, &mut v1, &mass).unwrap();
        two.begin_step(&pos, &v2, &mass).unwrap();
        let mut out = vec![[0.0; 3]; v2.len()];
        two.finish_step(&mut out).unwrap();
        v2 = out;
    }
    assert_eq!(v1, v2);
    assert!(one.fluid_state().unwrap() == two.fluid_state().unwrap());
    // misuse is an error, not a panic
    two.begin_step(&pos, &v2, &mass).unwrap();
    assert!(two.begin_step(&pos, &v2, &mass).is_err());
    assert!(two.step().is_err());
    let mut short = vec![[0.0; 3]; 3];
    assert!(two.finish_step(&mut short).is_err());
}

#[test]
fn positions_outside_the_box_are_wrapped_consistently_with_lees_edwards() {
    let mut cfg = common::small_config([8, 8, 8], 10);
    cfg.shear_rate = 0.05;
    cfg.grid_shift = true;
    let phys = mpcbox::physics::Physics::from_config(&cfg);
    let (pos, vel, mass) = solutes(200, [8.0; 3], 2.0, 5);
    let run = |pos: &[[f64; 3]], vel: &[[f64; 3]]| -> Vec<[f64; 3]> {
        let mut s = Solvent::new(cfg.clone()).unwrap();
        let mut v = vel.to_vec();
        s.step_with_solutes(pos, &mut v, &mass).unwrap();
        v
    };
    let reference = run(&pos, &vel);
    // whole periods in x and z change nothing
    let shifted: Vec<_> = pos
        .iter()
        .map(|p| [p[0] + 16.0, p[1], p[2] - 24.0])
        .collect();
    let w = run(&shifted, &vel);
    for (a, b) in reference.iter().zip(&w) {
        for k in 0..3 {
            assert!((a[k] - b[k]).abs() < 1e-12, "x/z periodic images differ");
        }
    }
    // one period up in y is the Lees-Edwards image: x moved by +delta, vx by +shear*Ly
    let delta = phys.le_offset_at(1);
    let up: Vec<_> = pos
        .iter()
        .map(|p| [p[0] + delta, p[1] + 8.0, p[2]])
        .collect();
    let vup: Vec<_> = vel
        .iter()
        .map(|v| [v[0] + phys.le_velocity, v[1], v[2]])
        .collect();
    let w = run(&up, &vup);
    for (a, b) in reference.iter().zip(&w) {
        assert!(
            (b[0] - phys.le_velocity - a[0]).abs() < 1e-9,
            "LE image vx {} vs {}",
            b[0],
            a[0]
        );
        assert!((a[1] - b[1]).abs() < 1e-9 && (a[2] - b[2]).abs() < 1e-9);
    }
}

#[test]
fn bad_solute_input_is_rejected_and_leaves_the_solvent_untouched() {
    let cfg = common::small_config([6, 6, 6], 10);
    let mut s = Solvent::new(cfg).unwrap();
    s.step().unwrap();
    let before = s.fluid_state().unwrap();
    let (pos, vel, mass) = solutes(10, [6.0; 3], 1.0, 6);
    let cases: Vec<(&str, Vec<[f64; 3]>, Vec<[f64; 3]>, Vec<f64>)> = vec![
        ("lengths", pos.clone(), vel[..9].to_vec(), mass.clone()),
        ("lengths", pos.clone(), vel.clone(), mass[..3].to_vec()),
        (
            "positions",
            {
                let mut p = pos.clone();
                p[3][1] = f64::NAN;
                p
            },
            vel.clone(),
            mass.clone(),
        ),
        (
            "positions",
            {
                let mut p = pos.clone();
                p[0][0] = 1e12;
                p
            },
            vel.clone(),
            mass.clone(),
        ),
        (
            "velocities",
            pos.clone(),
            {
                let mut v = vel.clone();
                v[2][0] = f64::INFINITY;
                v
            },
            mass.clone(),
        ),
        ("masses", pos.clone(), vel.clone(), {
            let mut m = mass.clone();
            m[1] = -1.0;
            m
        }),
        ("masses", pos.clone(), vel.clone(), {
            let mut m = mass.clone();
            m[4] = 0.0;
            m
        }),
        ("masses", pos.clone(), vel.clone(), {
            let mut m = mass.clone();
            m[5] = f64::NAN;
            m
        }),
    ];
    for (field, p, mut v, m) in cases {
        let v_in = v.clone();
        match s.step_with_solutes(&p, &mut v, &m) {
            Err(MpcError::Solute {
                field: f,
                problem,
                fix,
            }) => {
                assert_eq!(f, field, "{problem}");
                assert!(!fix.is_empty());
            }
            other => panic!("{field}: expected a solute error, got {other:?}"),
        }
        assert_eq!(v, v_in, "velocities changed on error");
        assert!(s.begin_step(&p, &v, &m).is_err());
    }
    assert_eq!(s.step_count(), 1);
    assert!(s.fluid_state().unwrap() == before, "fluid changed on error");
}

#[test]
fn fluid_restore_repeats_a_coupled_step_exactly() {
    let mut cfg = common::small_config([8, 8, 8], 10);
    cfg.thermostat = Thermostat::Mbs;
    let mut s = Solvent::new(cfg).unwrap();
    let (pos, vel, mass) = solutes(100, [8.0; 3], 4.0, 7);
    s.step().unwrap();
    let ck = s.checkpoint().unwrap();
    let mut v1 = vel.clone();
    s.step_with_solutes(&pos, &mut v1, &mass).unwrap();
    s.restore(&ck).unwrap();
    let mut v2 = vel.clone();
    s.step_with_solutes(&pos, &mut v2, &mass).unwrap();
    assert_eq!(v1, v2);
}
