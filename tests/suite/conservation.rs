//! Conservation laws of the collision and of whole steps, and Galilean invariance. The
//! whole-step tests run on every platform (tests/suite/common/platform.rs).

use crate::common;

use common::Platform;
use mpcbox::config::Thermostat;
use mpcbox::physics::{CellSums, Physics};
use mpcbox::rng::CellStream;
use mpcbox::Solvent;

common::backend_tests!(
    [cpu gpu multi_gpu slabs cpu_slabs]
    full_steps_conserve_momentum_and_energy,
    thermostat_conserves_momentum,
    shear_conserves_transverse_momentum_and_particle_count,
    particle_count_is_conserved_under_strong_shear,
    body_force_adds_momentum_at_the_applied_rate,
);

fn rel(a: f64, b: f64, scale: f64) -> f64 {
    (a - b).abs() / scale
}

/// Random cells (fluid plus solutes of other masses, some LE images) collided with the
/// public per-cell functions: momentum and energy conserved, and a boost only adds the boost.
#[test]
fn collision_conserves_momentum_and_energy_and_is_galilean_invariant() {
    let mut cfg = common::small_config([8, 8, 8], 10);
    cfg.shear_rate = 0.02;
    let phys = Physics::from_config(&cfg);
    let mut rng = CellStream::for_particle(5, 1);
    let boost = [3.7, -1.25, 0.5];
    for cell in 0..2000u32 {
        let n = 2 + (rng.next_u32() % 14) as usize;
        let parts: Vec<(f64, [f64; 3], i32)> = (0..n)
            .map(|k| {
                let m = if k % 4 == 3 {
                    1.0 + 9.0 * rng.uniform()
                } else {
                    1.0
                };
                let v = [rng.normal() + 2.0, rng.normal(), rng.normal() - 1.0];
                let image = (rng.next_u32() % 3) as i32 - 1;
                (m, v, image)
            })
            .collect();
        let collide_all = |parts: &[(f64, [f64; 3], i32)]| -> Vec<[f64; 3]> {
            let mut sums = CellSums::default();
            for (m, v, img) in parts {
                sums.add(*m, [v[0] + phys.image_velocity(*img), v[1], v[2]]);
            }
            let cp = phys.cell_params(17, cell, &sums);
            parts
                .iter()
                .map(|(_, v, img)| phys.collide(&cp, *img, *v))
                .collect()
        };
        let after = collide_all(&parts);
        let (mut p0, mut p1, mut e0, mut e1, mut pabs) = ([0.0; 3], [0.0; 3], 0.0, 0.0, 0.0);
        for ((m, v, img), w) in parts.iter().zip(&after) {
            let off = phys.image_velocity(*img);
            let (vi, wi) = ([v[0] + off, v[1], v[2]], [w[0] + off, w[1], w[2]]);
            for k in 0..3 {
                p0[k] += m * vi[k];
                p1[k] += m * wi[k];
                pabs += m * vi[k].abs();
            }
            e0 += 0.5 * m * (vi[0] * vi[0] + vi[1] * vi[1] + vi[2] * vi[2]);
            e1 += 0.5 * m * (wi[0] * wi[0] + wi[1] * wi[1] + wi[2] * wi[2]);
        }
        for k in 0..3 {
            assert!(
                rel(p0[k], p1[k], pabs) <= 1e-12,
                "cell {cell}: momentum {k}: {} vs {}",
                p0[k],
                p1[k]
            );
        }
        assert!(rel(e0, e1, e0) <= 1e-12, "cell {cell}: energy {e0} vs {e1}");
        let boosted: Vec<_> = parts
            .iter()
            .map(|(m, v, i)| (*m, [v[0] + boost[0], v[1] + boost[1], v[2] + boost[2]], *i))
            .collect();
        let after_b = collide_all(&boosted);
        for (w, wb) in after.iter().zip(&after_b) {
            for k in 0..3 {
                assert!(
                    (wb[k] - boost[k] - w[k]).abs() <= 1e-12 * (1.0 + w[k].abs()),
                    "Galilean invariance broken"
                );
            }
        }
    }
}

/// A fluid without shear, force or thermostat, given a net drift.
struct FreeFluid {
    cells: [u32; 3],
    seed: u64,
    grid_shift: bool,
    reorder: Option<u64>,
    steps: usize,
}

/// Without shear, force or thermostat a full step (streaming + collision) conserves total
/// momentum and kinetic energy of the whole fluid, and the backend's moments agree with the
/// downloaded state. The small box with and without grid shift, and a box of four slabs of
/// six layers with reorders.
fn full_steps_conserve_momentum_and_energy(p: Platform) {
    for case in [
        FreeFluid {
            cells: [12, 10, 8],
            seed: 3,
            grid_shift: false,
            reorder: None,
            steps: 20,
        },
        FreeFluid {
            cells: [12, 10, 8],
            seed: 3,
            grid_shift: true,
            reorder: None,
            steps: 20,
        },
        FreeFluid {
            cells: [12, 24, 8],
            seed: 5,
            grid_shift: true,
            reorder: Some(7),
            steps: 30,
        },
    ] {
        let mut cfg = common::small_config(case.cells, 10);
        cfg.grid_shift = case.grid_shift;
        cfg.seed = case.seed;
        cfg.tuning.reorder_interval = case.reorder;
        if let Some(s) = p.solvent(&cfg) {
            let what = format!("{p}, {:?}, grid shift {}", case.cells, case.grid_shift);
            free_fluid_conserves_momentum_and_energy(s, case.steps, &what);
        }
    }
}

fn free_fluid_conserves_momentum_and_energy(mut s: Solvent, steps: usize, what: &str) {
    let mut st = s.fluid_state().unwrap();
    // Give the fluid a net momentum so "relative" has a meaningful scale.
    for v in st.vel[0].iter_mut() {
        *v += 0.3;
    }
    s.set_fluid_state(&st).unwrap();
    let p0 = common::total_momentum(&st, 1.0);
    let e0 = common::kinetic_energy(&st, 1.0);
    let scale = st.len() as f64; // N·m·sqrt(kT/m)
    let mut before = st;
    for _ in 0..steps {
        s.step().unwrap();
        let after = s.fluid_state().unwrap();
        let (pb, pa) = (
            common::total_momentum(&before, 1.0),
            common::total_momentum(&after, 1.0),
        );
        let eb = common::kinetic_energy(&before, 1.0);
        let ea = common::kinetic_energy(&after, 1.0);
        common::assert_momentum_kept(pb, pa, scale, &format!("{what}, step"));
        assert!(
            (ea - eb).abs() / eb <= 1e-12,
            "{what}: step energy {eb} -> {ea}"
        );
        before = after;
    }
    let p1 = common::total_momentum(&before, 1.0);
    assert!(
        (p1[0] - p0[0]).abs() / p0[0].abs() < 1e-11,
        "{what}: x momentum drift {} -> {}",
        p0[0],
        p1[0]
    );
    let e1 = common::kinetic_energy(&before, 1.0);
    assert!(
        (e1 - e0).abs() / e0 < 1e-11,
        "{what}: energy drift {e0} -> {e1}"
    );
    // the backend's moments agree with the downloaded state
    let m = s.moments().unwrap();
    for (a, b) in m.momentum.iter().zip(p1) {
        assert!((a - b).abs() <= 1e-9 * scale, "{what}: moments {a} vs {b}");
    }
    assert!(
        (m.kinetic_energy - e1).abs() <= 1e-12 * e1,
        "{what}: moments energy {} vs {e1}",
        m.kinetic_energy
    );
    assert_eq!(
        m.profile_count.iter().sum::<u64>(),
        before.len() as u64,
        "{what}"
    );
}

/// With the MBS thermostat momentum is still conserved exactly (it scales relative velocities).
fn thermostat_conserves_momentum(p: Platform) {
    let mut cfg = common::small_config([8, 8, 8], 10);
    cfg.thermostat = Thermostat::Mbs;
    let Some(mut s) = p.solvent(&cfg) else { return };
    let p0 = common::total_momentum(&s.fluid_state().unwrap(), 1.0);
    for _ in 0..50 {
        s.step().unwrap();
    }
    let p1 = common::total_momentum(&s.fluid_state().unwrap(), 1.0);
    common::assert_momentum_kept(p0, p1, s.n_fluid() as f64, &p.to_string());
}

/// Momentum along y and z is conserved under Lees-Edwards shear; x momentum changes only
/// through boundary crossings (it is not a conserved quantity there), so it is not asserted.
fn shear_conserves_transverse_momentum_and_particle_count(p: Platform) {
    let mut cfg = common::small_config([8, 8, 8], 10);
    cfg.shear_rate = 0.2;
    cfg.thermostat = Thermostat::Mbs;
    let Some(mut s) = p.solvent(&cfg) else { return };
    let n0 = s.n_fluid();
    let p0 = common::total_momentum(&s.fluid_state().unwrap(), 1.0);
    for _ in 0..100 {
        s.step().unwrap();
    }
    let st = s.fluid_state().unwrap();
    assert_eq!(st.len(), n0);
    st.validate(s.physics()).unwrap();
    let p1 = common::total_momentum(&st, 1.0);
    for k in 1..3 {
        assert!(
            (p1[k] - p0[k]).abs() / n0 as f64 <= 1e-12,
            "{p}: momentum {k}: {} -> {}",
            p0[k],
            p1[k]
        );
    }
}

/// Under strong shear (γ̇ Ly h = 0.48 cells per step, near the config's limit of 0.5) with
/// the random grid shift, every particle stays accounted for: the backend checks the count every
/// step, a download finds every particle, the moments count them all.
fn particle_count_is_conserved_under_strong_shear(p: Platform) {
    let mut cfg = common::sheared_config([8, 32, 8], 99);
    cfg.shear_rate = 0.15;
    cfg.output.sample_interval = 1;
    cfg.output.equilibration_steps = 50;
    let Some(mut s) = p.solvent(&cfg) else { return };
    let n = s.n_fluid();
    for _ in 0..400 {
        s.step().unwrap();
    }
    let st = s.fluid_state().unwrap();
    assert_eq!(st.len(), n);
    let m = s.moments().unwrap();
    assert_eq!(m.particles as usize, n);
    assert_eq!(m.profile_count.iter().sum::<u64>() as usize, n);
    let temp = s.stats().temperature.mean().unwrap();
    eprintln!("{p}, shear rate 0.15: {n} particles kept, kT {temp:.4}");
    assert!((temp - 1.0).abs() < 0.02, "{p}: temperature {temp}");
}

/// A body force adds exactly N·F·h of momentum per step (collisions conserve the rest).
fn body_force_adds_momentum_at_the_applied_rate(p: Platform) {
    let mut cfg = common::small_config([8, 8, 8], 10);
    cfg.body_force = [0.01, 0.0, -0.002];
    cfg.mass = 2.0;
    let Some(mut s) = p.solvent(&cfg) else { return };
    let n = s.n_fluid() as f64;
    let p0 = s.moments().unwrap().momentum;
    let steps = 25;
    for _ in 0..steps {
        s.step().unwrap();
    }
    let p1 = s.moments().unwrap().momentum;
    for k in 0..3 {
        let expected = n * cfg.body_force[k] * cfg.time_step * steps as f64;
        assert!(
            ((p1[k] - p0[k]) - expected).abs() <= 1e-10 * n,
            "{p}: component {k}: gained {} expected {expected}",
            p1[k] - p0[k]
        );
    }
}
