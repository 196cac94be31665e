//! The collision rules beside SRD (MPC-AT, MPC-AT+a, SRD+a) cell by cell, through the public
//! per-cell functions: momentum conserved with solutes of other masses and Lees-Edwards
//! images, each cell's angular momentum about its centre of mass conserved by the +a rules,
//! Galilean invariance, and the draws keyed by position (not by storage order).

use crate::common;

use mpcbox::config::{CollisionRule, Config, Thermostat};
use mpcbox::physics::rules::RuleSums;
use mpcbox::physics::{CellSums, Physics};
use mpcbox::rng::{self, CellStream};

/// One particle of a test cell: mass, velocity, LE image, position relative to the cell
/// centre, the key of its draws.
#[derive(Clone, Copy)]
struct Part {
    m: f64,
    v: [f64; 3],
    image: i32,
    r: [f64; 3],
    key: u64,
}

fn config(rule: CollisionRule, thermostat: Thermostat) -> Config {
    let mut cfg = common::small_config([8, 8, 8], 10);
    cfg.collision = rule;
    cfg.thermostat = thermostat;
    cfg.shear_rate = 0.02;
    cfg.kt = 1.3;
    cfg.validate().unwrap();
    cfg
}

pub fn all_rules() -> Vec<(CollisionRule, Thermostat)> {
    let srd = |a| CollisionRule::Srd {
        angle_deg: 130.0,
        angular_momentum: a,
    };
    let at = |a| CollisionRule::MpcAt {
        angular_momentum: a,
    };
    vec![
        (srd(true), Thermostat::None),
        (srd(true), Thermostat::Mbs),
        (at(false), Thermostat::None),
        (at(true), Thermostat::None),
    ]
}

/// A random cell: 2 to 15 particles, every fourth a solute of mass 1 to 10, LE images −1..1.
fn random_cell(rng: &mut CellStream) -> Vec<Part> {
    let n = 2 + (rng.next_u32() % 14) as usize;
    (0..n)
        .map(|k| Part {
            m: if k % 4 == 3 {
                1.0 + 9.0 * rng.uniform()
            } else {
                1.0
            },
            v: [rng.normal() + 2.0, rng.normal(), rng.normal() - 1.0],
            image: (rng.next_u32() % 3) as i32 - 1,
            r: [
                rng.uniform() - 0.5,
                rng.uniform() - 0.5,
                rng.uniform() - 0.5,
            ],
            key: ((rng.next_u32() as u64) << 32) | rng.next_u32() as u64,
        })
        .collect()
}

/// Collide the cell's particles with the public per-cell functions of `phys.rule`.
fn collide_cell(phys: &Physics, step: u64, cell: u32, parts: &[Part]) -> Vec<[f64; 3]> {
    let draws: Vec<[f64; 3]> = parts
        .iter()
        .map(|p| {
            if phys.rule.draws_velocities() {
                phys.rule_draw(step, cell, p.key, p.m)
            } else {
                [0.0; 3]
            }
        })
        .collect();
    let mut sums = CellSums::default();
    let mut ext = RuleSums::default();
    for (p, xi) in parts.iter().zip(&draws) {
        let v = [p.v[0] + phys.image_velocity(p.image), p.v[1], p.v[2]];
        sums.add(p.m, v);
        ext.add(phys.rule, p.m, v, p.r, *xi);
    }
    let cp = phys.rule_cell_params(step, cell, &sums, &ext);
    parts
        .iter()
        .zip(&draws)
        .map(|(p, xi)| phys.rule_collide(&cp, p.image, p.v, p.r, *xi))
        .collect()
}

/// Momentum and angular momentum about the centre of mass (velocities in the cell's frame,
/// LE offsets included), and the scales Σ m|v| and Σ m |r − C| |v|.
fn moments(phys: &Physics, parts: &[Part], vel: &[[f64; 3]]) -> ([f64; 3], [f64; 3], f64, f64) {
    let mass: f64 = parts.iter().map(|p| p.m).sum();
    let com: [f64; 3] =
        std::array::from_fn(|k| parts.iter().map(|p| p.m * p.r[k]).sum::<f64>() / mass);
    let (mut pm, mut l, mut ps, mut ls) = ([0.0; 3], [0.0; 3], 0.0, 0.0);
    for (p, w) in parts.iter().zip(vel) {
        let v = [w[0] + phys.image_velocity(p.image), w[1], w[2]];
        let rc = [p.r[0] - com[0], p.r[1] - com[1], p.r[2] - com[2]];
        let c = mpcbox::physics::rules::cross(rc, v);
        let speed = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
        let dist = (rc[0] * rc[0] + rc[1] * rc[1] + rc[2] * rc[2]).sqrt();
        for k in 0..3 {
            pm[k] += p.m * v[k];
            l[k] += p.m * c[k];
        }
        ps += p.m * speed;
        ls += p.m * dist * speed;
    }
    (pm, l, ps, ls)
}

#[test]
fn every_rule_conserves_momentum_and_the_plus_a_rules_angular_momentum_per_collision() {
    for (rule, thermostat) in all_rules() {
        let phys = Physics::from_config(&config(rule.clone(), thermostat));
        let mut rng = CellStream::for_particle(5, 1);
        let boost = [3.7, -1.25, 0.5];
        let (mut worst_p, mut worst_l) = (0.0f64, 0.0f64);
        for cell in 0..3000u32 {
            let parts = random_cell(&mut rng);
            let after = collide_cell(&phys, 17, cell, &parts);
            let before: Vec<[f64; 3]> = parts.iter().map(|p| p.v).collect();
            let (p0, l0, ps, ls) = moments(&phys, &parts, &before);
            let (p1, l1, _, _) = moments(&phys, &parts, &after);
            for k in 0..3 {
                worst_p = worst_p.max((p1[k] - p0[k]).abs() / ps);
                if phys.rule.conserves_angular_momentum() {
                    worst_l = worst_l.max((l1[k] - l0[k]).abs() / ls);
                }
            }
            // a boost of every particle only boosts the result
            let boosted: Vec<Part> = parts
                .iter()
                .map(|p| Part {
                    v: [p.v[0] + boost[0], p.v[1] + boost[1], p.v[2] + boost[2]],
                    ..*p
                })
                .collect();
            let after_b = collide_cell(&phys, 17, cell, &boosted);
            for (w, wb) in after.iter().zip(&after_b) {
                for k in 0..3 {
                    assert!(
                        (wb[k] - boost[k] - w[k]).abs() <= 1e-12 * (1.0 + w[k].abs()),
                        "{rule:?}: Galilean invariance broken in cell {cell}"
                    );
                }
            }
        }
        println!(
            "{} ({thermostat:?}): worst relative change per collision: momentum {worst_p:.1e}, \
             angular momentum {worst_l:.1e}",
            phys.rule.name()
        );
        assert!(worst_p <= 1e-12, "{rule:?}: momentum {worst_p:e}");
        assert!(worst_l <= 1e-12, "{rule:?}: angular momentum {worst_l:e}");
    }
}

/// Without the +a correction the MPC-AT collision changes a cell's angular momentum: the test
/// above measures something.
#[test]
fn plain_mpc_at_does_not_conserve_angular_momentum() {
    let phys = Physics::from_config(&config(
        CollisionRule::MpcAt {
            angular_momentum: false,
        },
        Thermostat::None,
    ));
    let mut rng = CellStream::for_particle(6, 2);
    let mut changed = 0;
    for cell in 0..200u32 {
        let parts = random_cell(&mut rng);
        let after = collide_cell(&phys, 3, cell, &parts);
        let before: Vec<[f64; 3]> = parts.iter().map(|p| p.v).collect();
        let (_, l0, _, ls) = moments(&phys, &parts, &before);
        let (_, l1, _, _) = moments(&phys, &parts, &after);
        if (0..3).any(|k| (l1[k] - l0[k]).abs() / ls > 1e-3) {
            changed += 1;
        }
    }
    assert!(changed > 150, "only {changed} of 200 cells changed");
}

/// The MPC-AT draws are Maxwell-Boltzmann at kT/m, independent per particle, and depend on the
/// particle's position bits, the cell, the step and the seed, not on where it is stored.
#[test]
fn mpc_at_draws_are_maxwell_boltzmann_and_keyed_by_position() {
    let phys = Physics::from_config(&config(
        CollisionRule::MpcAt {
            angular_momentum: false,
        },
        Thermostat::None,
    ));
    let (mut s1, mut s2, mut s12) = (0.0, 0.0, 0.0);
    let n = 60_000;
    let mut rng = CellStream::for_particle(8, 8);
    for i in 0..n {
        let pos = [
            (8.0 * rng.uniform()) as f32,
            (8.0 * rng.uniform()) as f32,
            (8.0 * rng.uniform()) as f32,
        ];
        let xi = phys.fluid_draw(11, i % 512, pos);
        s1 += xi[0] + xi[1] + xi[2];
        s2 += xi[0] * xi[0] + xi[1] * xi[1] + xi[2] * xi[2];
        s12 += xi[0] * xi[1] + xi[1] * xi[2];
        assert_eq!(
            xi,
            phys.fluid_draw(11, i % 512, pos),
            "draws are repeatable"
        );
        assert_ne!(xi, phys.fluid_draw(12, i % 512, pos));
        assert_ne!(xi, phys.fluid_draw(11, i % 512 + 1, pos));
    }
    let var = s2 / (3.0 * n as f64);
    assert!((var / phys.kt - 1.0).abs() < 0.02, "variance {var}");
    assert!((s1 / (3.0 * n as f64)).abs() < 0.02);
    assert!((s12 / (2.0 * n as f64)).abs() < 0.02);
    // solutes: variance kT/m, keyed by their f64 position bits
    let pos = [1.25, -3.5, 40.0];
    let heavy = phys.solute_draw(11, 7, pos, 10.0);
    let light = phys.solute_draw(11, 7, pos, 1.0);
    for k in 0..3 {
        assert!((heavy[k] * 10f64.sqrt() - light[k]).abs() < 1e-14);
    }
    assert_ne!(
        rng::solute_particle_key(pos),
        rng::fluid_particle_key([1.25, 0.5, 0.0])
    );
}
