//! Solutes from an outside MD code on a fluid cut into slabs (several GPUs, or several slabs on
//! one): each step they are routed to the slab owning their cell, collided there, and their
//! velocities come back into the caller's arrays (`backend/cuda/multi/solute_routes.rs`).
//! Every case runs on 2, 3 and 4 slabs and follows the CPU reference to 1e-12 relative: the
//! only difference is the order of the f64 atomic cell sums on the GPUs (a relative rounding
//! of ~1e-16 per term, well inside 1e-12 over a few steps with the velocities re-synchronised
//! every step). GPU tests are ignored without a GPU.

use crate::common;

use common::{Platform, Solutes};
use mpcbox::backend::cuda::DeviceSoluteArrays;
use mpcbox::config::{Config, Thermostat};
use mpcbox::Solvent;

common::backend_tests!(
    [multi_gpu slabs]
    routed_solutes_follow_the_cpu,
    routed_steps_conserve_momentum,
    a_begun_step_routes_as_a_plain_one,
    bad_routed_input_changes_nothing,
);

common::backend_tests!([gpu multi_gpu slabs] bad_host_input_is_named_before_the_fluid_moves);

/// One step's solutes (positions and masses; velocities are carried from the CPU run).
struct StepInput {
    pos: Vec<[f64; 3]>,
    mass: Vec<f64>,
}

fn sheared(cells: [u32; 3]) -> Config {
    let mut cfg = common::small_config(cells, 10);
    cfg.thermostat = Thermostat::Mbs;
    cfg.shear_rate = 0.05;
    cfg.tuning.reorder_interval = Some(3);
    cfg
}

/// Velocities of `n` solutes, the same for a given `seed`.
fn velocities(n: usize, seed: u64) -> Vec<[f64; 3]> {
    common::thermal_solutes(n, [1.0; 3], 1.0, seed).1
}

/// `cfg` run with the given steps' solutes on `p` (device arrays on GPU `gpu`) and on the CPU
/// (host arrays): the solute velocities after every step and the fluid at the end agree.
fn follow_the_cpu(p: Platform, cfg: &Config, gpu: usize, steps: &[StepInput], what: &str) {
    let Some(on_p) = p.config(cfg) else { return };
    let mut cpu = Solvent::new(p.reference(cfg)).unwrap();
    let mut dev = Solvent::new(on_p).unwrap();
    p.check_backend(&dev.backend_description());
    let mut vel = Vec::new();
    for (k, input) in steps.iter().enumerate() {
        let what = format!("{p}, {what}, step {k} ({} solutes)", input.pos.len());
        // carried where the count is unchanged, else fresh
        if vel.len() != input.pos.len() {
            vel = velocities(input.pos.len(), 7 + k as u64);
        }
        let mut v_cpu = vel.clone();
        cpu.step_with_solutes(&input.pos, &mut v_cpu, &input.mass)
            .unwrap();
        let arrays = DeviceSoluteArrays::upload(gpu, &input.pos, &vel, &input.mass).unwrap();
        dev.step_with_device_solutes(&arrays.solutes()).unwrap();
        common::assert_solute_velocities_close(&v_cpu, &arrays.velocities().unwrap(), 1e-12, &what);
        vel = v_cpu;
    }
    let (a, b) = (cpu.fluid_state().unwrap(), dev.fluid_state().unwrap());
    common::compare_states(&a, &b, 1e-12, &format!("{p}, {what}, fluid"));
}

/// Solutes crossing slabs between calls, all in one slab, none, outside the box (wrapped
/// through Lees-Edwards images), arrays changing length between steps, and (with two GPUs)
/// arrays on a GPU that is not the first: on every slab count.
fn routed_solutes_follow_the_cpu(p: Platform) {
    for p in p.with_fewer_gpus() {
        let cfg = sheared([8, 8 * p.gpus() as u32, 8]);
        let cells = cfg.cells;
        let ly = cells[1] as f64;
        // crossing: every step the solutes jump a third of the box in y (over slab borders)
        let (pos0, _, mass) = common::solutes_partly_outside(600, cells, 11);
        let crossing: Vec<StepInput> = (0..5)
            .map(|k| StepInput {
                pos: pos0
                    .iter()
                    .map(|r| [r[0] + 0.7 * k as f64, r[1] + ly * k as f64 / 3.0, r[2]])
                    .collect(),
                mass: mass.clone(),
            })
            .collect();
        follow_the_cpu(p, &cfg, 0, &crossing, "crossing slabs");
        // all in one slab (the first layer or two, wherever the grid shift puts them)
        let one_slab =
            common::thermal_solutes(400, [cells[0] as f64, 1.0, cells[2] as f64], 5.0, 3);
        let in_one: Vec<StepInput> = (0..3)
            .map(|_| StepInput {
                pos: one_slab
                    .0
                    .iter()
                    .map(|r| [r[0], 1.0 + r[1], r[2]])
                    .collect(),
                mass: one_slab.2.clone(),
            })
            .collect();
        follow_the_cpu(p, &cfg, 0, &in_one, "all in one slab");
        // wrapped: over two y periods (Lees-Edwards images), and far outside the box
        let (wide, _, wide_mass): Solutes = common::solutes_over_two_y_periods(900, cells);
        let wrapped: Vec<StepInput> = (0..3)
            .map(|k| StepInput {
                pos: wide
                    .iter()
                    .map(|r| {
                        [
                            r[0] - 3.0 * ly * k as f64,
                            r[1] - 2.0 * ly * k as f64,
                            r[2] + 40.0,
                        ]
                    })
                    .collect(),
                mass: wide_mass.clone(),
            })
            .collect();
        follow_the_cpu(p, &cfg, 0, &wrapped, "wrapped through images");
        // the count changes between steps, through zero
        let (many, _, many_mass) = common::solutes_partly_outside(1500, cells, 21);
        let lengths: Vec<StepInput> = [300usize, 50, 1500, 0, 700]
            .iter()
            .map(|&n| StepInput {
                pos: many[..n].to_vec(),
                mass: many_mass[..n].to_vec(),
            })
            .collect();
        follow_the_cpu(p, &cfg, 0, &lengths, "changing lengths");
        // arrays on the second GPU: the routing starts there
        if matches!(p, Platform::MultiGpu(_)) {
            follow_the_cpu(p, &cfg, 1, &crossing, "arrays on GPU 1");
        }
    }
}

/// Without shear, fluid + solute momentum is conserved by every routed step, on every slab
/// count.
fn routed_steps_conserve_momentum(p: Platform) {
    for p in p.with_fewer_gpus() {
        let mut cfg = common::small_config([8, 8 * p.gpus() as u32, 8], 10);
        cfg.tuning.reorder_interval = Some(3);
        let (pos, vel, mass) = common::solutes_partly_outside(2000, cfg.cells, 9);
        let Some(mut s) = p.solvent(&cfg) else {
            continue;
        };
        let arrays = DeviceSoluteArrays::upload(0, &pos, &vel, &mass).unwrap();
        let mut p0 = common::fluid_and_solute_momentum(&mut s, &vel, &mass);
        let scale = mass.iter().sum::<f64>() + s.n_fluid() as f64;
        for step in 0..10 {
            s.step_with_device_solutes(&arrays.solutes()).unwrap();
            let v = arrays.velocities().unwrap();
            let p1 = common::fluid_and_solute_momentum(&mut s, &v, &mass);
            common::assert_momentum_kept(p0, p1, scale, &format!("{p}, step {step}"));
            p0 = p1;
        }
    }
}

/// A step begun before the solutes are handed over (the fluid streams while the caller's MD
/// runs; the routing then runs beside it) gives what a plain step gives.
fn a_begun_step_routes_as_a_plain_one(p: Platform) {
    let cfg = sheared([8, 8 * p.gpus() as u32, 8]);
    let Some(on_p) = p.config(&cfg) else { return };
    let (pos, vel, mass) = common::solutes_over_two_y_periods(1200, cfg.cells);
    let mut plain = Solvent::new(on_p.clone()).unwrap();
    let mut begun = Solvent::new(on_p).unwrap();
    let a = DeviceSoluteArrays::upload(0, &pos, &vel, &mass).unwrap();
    let b = DeviceSoluteArrays::upload(0, &pos, &vel, &mass).unwrap();
    for step in 0..6 {
        plain.step_with_device_solutes(&a.solutes()).unwrap();
        assert!(begun.begin_device_step(pos.len()).unwrap(), "{p}: begun");
        begun.step_with_device_solutes(&b.solutes()).unwrap();
        common::assert_solute_velocities_close(
            &a.velocities().unwrap(),
            &b.velocities().unwrap(),
            1e-12,
            &format!("{p}, step {step}"),
        );
    }
    common::compare_states(
        &plain.fluid_state().unwrap(),
        &begun.fluid_state().unwrap(),
        1e-12,
        &format!("{p}, fluid"),
    );
}

/// A NaN position or a bad mass (negative, or heavier than the fixed-point cell sums hold)
/// among routed solutes stops the step with the solute named,
/// and neither the fluid, the step count nor the solutes change; the next good step runs.
fn bad_routed_input_changes_nothing(p: Platform) {
    let cfg = sheared([8, 8 * p.gpus() as u32, 8]);
    let Some(mut s) = p.solvent(&cfg) else { return };
    let (pos, vel, mass) = common::solutes_partly_outside(500, cfg.cells, 4);
    s.step().unwrap();
    let before = s.fluid_state().unwrap();
    let mut nan_pos = pos.clone();
    nan_pos[321][0] = f64::NAN;
    let mut bad_mass = mass.clone();
    bad_mass[77] = -1.0;
    let mut nan_vel = vel.clone();
    nan_vel[400][2] = f64::INFINITY;
    let mut heavy = mass.clone();
    heavy[250] = 1e6;
    for (what, r, v, m, field, index) in [
        ("NaN position", &nan_pos, &vel, &mass, "positions", 321),
        ("negative mass", &pos, &vel, &bad_mass, "masses", 77),
        (
            "mass past the cell sums' cap",
            &pos,
            &vel,
            &heavy,
            "masses",
            250,
        ),
        (
            "infinite velocity",
            &pos,
            &nan_vel,
            &mass,
            "velocities",
            400,
        ),
    ] {
        let arrays = DeviceSoluteArrays::upload(0, r, v, m).unwrap();
        common::assert_names_solute(
            s.step_with_device_solutes(&arrays.solutes()),
            field,
            index,
            &format!("{p}, {what}"),
        );
        assert_eq!(
            &arrays.velocities().unwrap(),
            v,
            "{p}, {what}: solutes changed"
        );
    }
    assert_eq!(s.step_count(), 1, "{p}: no step was counted");
    assert_eq!(s.fluid_state().unwrap(), before, "{p}: the fluid changed");
    let good = DeviceSoluteArrays::upload(0, &pos, &vel, &mass).unwrap();
    s.step_with_device_solutes(&good.solutes()).unwrap();
    assert_eq!(s.step_count(), 2);
}

/// Host arrays are tested on their way up, before the fluid moves: as they are staged (one pass
/// over the values, parallel over pieces for this many), or, page-locked, by the GPU once they
/// are up (the split form's begin too). On one GPU and on several slabs, the first bad solute
/// is named as the host check names it, whichever array it is in and wherever the arrays'
/// later bad values are, and nothing changes; then the same solutes, made good, step.
fn bad_host_input_is_named_before_the_fluid_moves(p: Platform) {
    let cfg = sheared([8, 8 * p.gpus() as u32, 8]);
    let Some(mut s) = p.solvent(&cfg) else { return };
    // past the host pool's serial threshold, so the staging's test runs in parallel chunks
    let n = 150_000;
    let (pos, vel, mass) = common::solutes_partly_outside(n, cfg.cells, 8);
    s.step().unwrap();
    let before = s.fluid_state().unwrap();
    let mut late_nan_pos = pos.clone();
    late_nan_pos[140_000][1] = f64::NAN;
    let mut inf_vel = vel.clone();
    inf_vel[149_999][0] = f64::INFINITY;
    let mut zero_mass = mass.clone();
    zero_mass[100_000] = 0.0;
    let mut heavy = mass.clone();
    heavy[7] = 1e300;
    let cases = [
        (
            "NaN position before an infinite velocity",
            &late_nan_pos,
            &inf_vel,
            &mass,
            "positions",
            140_000,
        ),
        (
            "zero mass before a NaN position",
            &late_nan_pos,
            &vel,
            &zero_mass,
            "masses",
            100_000,
        ),
        (
            "infinite velocity",
            &pos,
            &inf_vel,
            &mass,
            "velocities",
            149_999,
        ),
        (
            "mass past the cell sums' cap",
            &pos,
            &vel,
            &heavy,
            "masses",
            7,
        ),
    ];
    let mut pinned = mpcbox::backend::cuda::PinnedSoluteArrays::new(0, n).unwrap();
    for (arrays, split) in [
        ("pageable", false),
        ("page-locked", false),
        ("page-locked", true),
    ] {
        for (what, r, v, m, field, index) in cases {
            let what = format!("{what}, {arrays} arrays, split {split}");
            let (result, out) = if arrays == "page-locked" {
                let (pp, pv, pm) = pinned.arrays_mut().unwrap();
                pp.copy_from_slice(r);
                pv.copy_from_slice(v);
                pm.copy_from_slice(m);
                let result = match split {
                    // the split form's begin refuses it: nothing is begun
                    true => s.begin_step(pp, pv, pm).map(|()| None),
                    false => s.step_with_solutes(pp, pv, pm).map(Some),
                };
                (result, pv.to_vec())
            } else {
                let mut out = v.clone();
                (s.step_with_solutes(r, &mut out, m).map(Some), out)
            };
            common::assert_names_solute(result, field, index, &format!("{p}, {what}"));
            assert_eq!(
                common::velocity_bits(&out),
                common::velocity_bits(v),
                "{p}, {what}: velocities changed"
            );
        }
    }
    assert_eq!(s.step_count(), 1, "{p}: no step was counted");
    assert_eq!(s.fluid_state().unwrap(), before, "{p}: the fluid changed");
    let mut out = vel.clone();
    s.step_with_solutes(&pos, &mut out, &mass).unwrap();
    assert_eq!(s.step_count(), 2);
    assert!(out != vel, "{p}: the good step collided the solutes");
}
