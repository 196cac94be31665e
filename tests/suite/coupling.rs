//! The coupled step: solutes embedded in the collision through the public Solvent API, on
//! every platform (tests/suite/common/platform.rs): conservation, thermalisation, the split form,
//! wrapping, bad input, restore, and the same solute and fluid velocities as the CPU.

use crate::common;

use common::Platform;
use mpcbox::config::Thermostat;
use mpcbox::{MpcError, Solvent};

common::backend_tests!(
    [cpu gpu gpu_variants multi_gpu slabs cpu_slabs]
    coupled_steps_with_solutes_follow_the_cpu,
);
common::backend_tests!(
    [gpu multi_gpu slabs]
    page_locked_solute_arrays_collide_as_pageable_ones,
    solutes_in_many_staging_pieces_collide_as_page_locked_ones,
);
common::backend_tests!(
    fluid_plus_solute_momentum_is_conserved_by_each_coupled_step,
    solutes_thermalize_to_kt_with_mbs,
    zero_solutes_is_exactly_the_plain_step,
    split_form_equals_one_call_form,
    positions_outside_the_box_are_wrapped_consistently_with_lees_edwards,
    bad_solute_input_is_rejected_and_leaves_the_solvent_untouched,
    fluid_restore_repeats_a_coupled_step_exactly,
    split_coupled_steps_with_unwrapped_solutes_follow_the_cpu,
);

fn fluid_plus_solute_momentum_is_conserved_by_each_coupled_step(p: Platform) {
    let cfg = common::small_config([10, 10, 10], 10);
    let Some(mut s) = p.solvent(&cfg) else { return };
    let (pos, mut vel, mut mass) = common::thermal_solutes(700, [10.0; 3], 5.0, 1);
    for (i, m) in mass.iter_mut().enumerate() {
        *m = 1.0 + (i % 7) as f64; // mixed masses
    }
    for v in vel.iter_mut() {
        v[0] += 1.0; // net solute drift, so momentum flows between solutes and fluid
    }
    let scale: f64 = 10_000.0 + mass.iter().sum::<f64>();
    for _ in 0..20 {
        let before = common::fluid_and_solute_momentum(&mut s, &vel, &mass);
        s.step_with_solutes(&pos, &mut vel, &mass).unwrap();
        let after = common::fluid_and_solute_momentum(&mut s, &vel, &mass);
        common::assert_momentum_kept(before, after, scale, &p.to_string());
    }
}

fn solutes_thermalize_to_kt_with_mbs(p: Platform) {
    let mut cfg = common::small_config([12, 12, 12], 10);
    cfg.thermostat = Thermostat::Mbs;
    cfg.kt = 1.0;
    let Some(mut s) = p.solvent(&cfg) else { return };
    let n = 1200; // ~0.7 solutes per cell
    let (mut pos, mut vel, mass) = common::thermal_solutes(n, [12.0; 3], 5.0, 2);
    for v in vel.iter_mut() {
        *v = [0.0; 3]; // start cold
    }
    let mut sum = [0.0; 3];
    let mut samples = 0.0;
    for step in 0..600 {
        // free flight between collisions, as an MD code without forces would do
        common::stream_solutes(&mut pos, &vel);
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
    for (k, s_k) in sum.iter().enumerate() {
        let t = s_k / samples;
        assert!(
            (t - 1.0).abs() < 0.02,
            "{p}: solute <m v_{k}^2> = {t}, expected kT = 1"
        );
    }
}

/// (Bit for bit on the CPU; to rounding on GPUs, see `Platform::assert_same_fluid`.)
fn zero_solutes_is_exactly_the_plain_step(p: Platform) {
    let mut cfg = common::small_config([8, 8, 8], 10);
    cfg.thermostat = Thermostat::Mbs;
    cfg.shear_rate = 0.05;
    let Some(cfg) = p.config(&cfg) else { return };
    let mut plain = Solvent::new(cfg.clone()).unwrap();
    let mut coupled = Solvent::new(cfg.clone()).unwrap();
    let mut split = Solvent::new(cfg).unwrap();
    p.check_backend(&plain.backend_description());
    for _ in 0..10 {
        plain.step().unwrap();
        coupled.step_with_solutes(&[], &mut [], &[]).unwrap();
        split.begin_step(&[], &[], &[]).unwrap();
        split.finish_step(&mut []).unwrap();
    }
    let a = plain.fluid_state().unwrap();
    p.assert_same_fluid(&a, &coupled.fluid_state().unwrap(), "coupled");
    p.assert_same_fluid(&a, &split.fluid_state().unwrap(), "split");
}

/// (Bit for bit on the CPU; to rounding on GPUs, see `Platform::assert_same_fluid`.)
fn split_form_equals_one_call_form(p: Platform) {
    let mut cfg = common::small_config([8, 8, 8], 10);
    cfg.thermostat = Thermostat::Mbs;
    let Some(cfg) = p.config(&cfg) else { return };
    let mut one = Solvent::new(cfg.clone()).unwrap();
    let mut two = Solvent::new(cfg).unwrap();
    p.check_backend(&two.backend_description());
    let (pos, vel0, mass) = common::thermal_solutes(300, [8.0; 3], 3.0, 4);
    let mut v1 = vel0.clone();
    let mut v2 = vel0.clone();
    for _ in 0..5 {
        one.step_with_solutes(&pos, &mut v1, &mass).unwrap();
        two.begin_step(&pos, &v2, &mass).unwrap();
        let mut out = vec![[0.0; 3]; v2.len()];
        two.finish_step(&mut out).unwrap();
        v2 = out;
    }
    p.assert_same_solutes(&v1, &v2, "solute velocities");
    let fluid = two.fluid_state().unwrap();
    p.assert_same_fluid(&one.fluid_state().unwrap(), &fluid, "fluid");
    // misuse is an error, not a panic
    two.begin_step(&pos, &v2, &mass).unwrap();
    assert!(two.begin_step(&pos, &v2, &mass).is_err());
    assert!(two.step().is_err());
    let mut short = vec![[0.0; 3]; 3];
    assert!(two.finish_step(&mut short).is_err());
}

/// Host solutes in page-locked memory (`PinnedSoluteArrays`: sent by DMA straight from and
/// into them) collide as the same solutes in ordinary vectors, in the one-call and the split
/// form; in the split form the caller overwrites its page-locked positions with NaN as soon as
/// `begin_step` returns (as an MD loop moves them), and the step still used the values it was
/// handed.
fn page_locked_solute_arrays_collide_as_pageable_ones(p: Platform) {
    let mut cfg = common::small_config([8, 8, 8], 10);
    cfg.thermostat = Thermostat::Mbs;
    let Some(cfg) = p.config(&cfg) else { return };
    let mut pageable = Solvent::new(cfg.clone()).unwrap();
    let mut locked = Solvent::new(cfg).unwrap();
    p.check_backend(&locked.backend_description());
    let (pos, vel0, mass) = common::thermal_solutes(300, [8.0; 3], 3.0, 4);
    let mut arrays = page_locked_copy(&locked, &pos, &vel0, &mass);
    let (lp, lv, lm) = arrays.arrays_mut().unwrap();
    let mut v = vel0.clone();
    for _ in 0..4 {
        pageable.step_with_solutes(&pos, &mut v, &mass).unwrap();
        locked.step_with_solutes(lp, lv, lm).unwrap();
    }
    p.assert_same_solutes(&v, lv, "one call: solute velocities");
    // the arrays are what the driver calls page-locked, ordinary vectors are not, and so is the
    // C ABI's memory (`mpcbox_host_alloc`) where a GPU is usable
    use mpcbox::backend::cuda::{alloc_page_locked, free_page_locked, page_locked};
    assert!(page_locked(lp) && page_locked(lv) && page_locked(lm));
    assert!(!page_locked(&pos) && !page_locked(&v));
    let block = alloc_page_locked(1 << 20).expect("page-locked memory on a GPU machine");
    // SAFETY: 1 MiB just allocated, aligned for f64 by the driver (page-aligned).
    let doubles = unsafe { std::slice::from_raw_parts(block.as_ptr().cast::<f64>(), 1 << 17) };
    assert!(page_locked(doubles));
    // SAFETY: allocated above, not used after.
    unsafe { free_page_locked(block) };
    for _ in 0..3 {
        pageable.begin_step(&pos, &v, &mass).unwrap();
        pageable.finish_step(&mut v).unwrap();
        lp.copy_from_slice(&pos);
        locked.begin_step(lp, lv, lm).unwrap();
        lp.fill([f64::NAN; 3]);
        locked.finish_step(lv).unwrap();
    }
    p.assert_same_solutes(&v, lv, "split form: solute velocities");
    let fluid = locked.fluid_state().unwrap();
    p.assert_same_fluid(&pageable.fluid_state().unwrap(), &fluid, "fluid");
    // a NaN in page-locked positions (which cross without the host's staging test) is refused
    // naming the array, and nothing changes
    lp.copy_from_slice(&pos);
    lp[7][1] = f64::NAN;
    let before = lv.to_vec();
    match locked.step_with_solutes(lp, lv, lm) {
        Err(MpcError::Solute { field, .. }) => assert_eq!(field, "positions"),
        other => panic!("a NaN position was not refused: {other:?}"),
    }
    assert_eq!(lv, &before[..], "velocities after the refused step");
    let after = locked.fluid_state().unwrap();
    assert!(
        fluid.pos == after.pos && fluid.vel == after.vel,
        "the fluid after the refused step"
    );
}

/// Three million host solutes, more than the staging's largest piece holds, so ordinary
/// vectors go up and come down in several pieces (`backend/cuda/pieces.rs`) while page-locked
/// arrays cross whole by DMA: every solute's velocity is the same bits either way, in the
/// one-call and the split form.
fn solutes_in_many_staging_pieces_collide_as_page_locked_ones(p: Platform) {
    let cfg = common::small_config([128, 128, 128], 1);
    let Some(cfg) = p.config(&cfg) else { return };
    let mut pageable = Solvent::new(cfg.clone()).unwrap();
    let mut locked = Solvent::new(cfg).unwrap();
    let (pos, vel0, mass) = common::thermal_solutes(3_000_000, [128.0; 3], 2.0, 9);
    let mut arrays = page_locked_copy(&locked, &pos, &vel0, &mass);
    let (lp, lv, lm) = arrays.arrays_mut().unwrap();
    let mut v = vel0.clone();
    for _ in 0..2 {
        pageable.step_with_solutes(&pos, &mut v, &mass).unwrap();
        locked.step_with_solutes(lp, lv, lm).unwrap();
    }
    assert_eq!(
        differing(&v, lv),
        0,
        "{p}, one call: solutes whose velocities differ"
    );
    assert!(v != vel0, "the solutes collided");
    pageable.begin_step(&pos, &v, &mass).unwrap();
    pageable.finish_step(&mut v).unwrap();
    locked.begin_step(lp, lv, lm).unwrap();
    locked.finish_step(lv).unwrap();
    assert_eq!(
        differing(&v, lv),
        0,
        "{p}, split form: solutes whose velocities differ"
    );
}

/// The solutes copied into page-locked arrays of the solvent's GPU.
fn page_locked_copy(
    s: &Solvent,
    pos: &[[f64; 3]],
    vel: &[[f64; 3]],
    mass: &[f64],
) -> mpcbox::backend::cuda::PinnedSoluteArrays {
    let ordinal = s.cuda_ordinal().expect("a GPU platform");
    let mut arrays = mpcbox::backend::cuda::PinnedSoluteArrays::new(ordinal, pos.len()).unwrap();
    let (lp, lv, lm) = arrays.arrays_mut().unwrap();
    lp.copy_from_slice(pos);
    lv.copy_from_slice(vel);
    lm.copy_from_slice(mass);
    arrays
}

fn differing(a: &[[f64; 3]], b: &[[f64; 3]]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x != y).count()
}

fn positions_outside_the_box_are_wrapped_consistently_with_lees_edwards(p: Platform) {
    let mut cfg = common::small_config([8, 8, 8], 10);
    cfg.shear_rate = 0.05;
    cfg.grid_shift = true;
    let Some(cfg) = p.config(&cfg) else { return };
    let phys = mpcbox::physics::Physics::from_config(&cfg);
    let (pos, vel, mass) = common::thermal_solutes(200, [8.0; 3], 2.0, 5);
    let run = |pos: &[[f64; 3]], vel: &[[f64; 3]]| -> Vec<[f64; 3]> {
        let mut s = Solvent::new(cfg.clone()).unwrap();
        p.check_backend(&s.backend_description());
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
            assert!(
                (a[k] - b[k]).abs() < 1e-12,
                "{p}: x/z periodic images differ"
            );
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
            "{p}: LE image vx {} vs {}",
            b[0],
            a[0]
        );
        assert!((a[1] - b[1]).abs() < 1e-9 && (a[2] - b[2]).abs() < 1e-9);
    }
}

/// Solute arrays the collision must refuse: (field named, the solute named if one is,
/// positions, velocities, masses).
type BadSolutes = (
    &'static str,
    Option<usize>,
    Vec<[f64; 3]>,
    Vec<[f64; 3]>,
    Vec<f64>,
);

fn bad_solute_cases(pos: &[[f64; 3]], vel: &[[f64; 3]], mass: &[f64]) -> Vec<BadSolutes> {
    let (pos, vel, mass) = (pos.to_vec(), vel.to_vec(), mass.to_vec());
    let with_pos = |i: usize, k: usize, x: f64| {
        let mut p = pos.clone();
        p[i][k] = x;
        p
    };
    let with_vel = |i: usize, k: usize, x: f64| {
        let mut v = vel.clone();
        v[i][k] = x;
        v
    };
    let with_mass = |i: usize, x: f64| {
        let mut m = mass.clone();
        m[i] = x;
        m
    };
    // two bad values: the lower index is named, whichever array it is in
    let vel_and_later_pos = with_pos(8, 2, f64::INFINITY);
    vec![
        (
            "lengths",
            None,
            pos.clone(),
            vel[..9].to_vec(),
            mass.clone(),
        ),
        (
            "lengths",
            None,
            pos.clone(),
            vel.clone(),
            mass[..3].to_vec(),
        ),
        (
            "positions",
            Some(3),
            with_pos(3, 1, f64::NAN),
            vel.clone(),
            mass.clone(),
        ),
        (
            "positions",
            Some(0),
            with_pos(0, 0, 1e12),
            vel.clone(),
            mass.clone(),
        ),
        (
            "velocities",
            Some(2),
            pos.clone(),
            with_vel(2, 0, f64::INFINITY),
            mass.clone(),
        ),
        (
            "velocities",
            Some(2),
            vel_and_later_pos,
            with_vel(2, 1, f64::NAN),
            mass.clone(),
        ),
        (
            "masses",
            Some(1),
            pos.clone(),
            vel.clone(),
            with_mass(1, -1.0),
        ),
        (
            "masses",
            Some(4),
            pos.clone(),
            vel.clone(),
            with_mass(4, 0.0),
        ),
        (
            "masses",
            Some(5),
            pos.clone(),
            vel.clone(),
            with_mass(5, f64::NAN),
        ),
        // beyond the fixed-point cell sums' cap
        (
            "masses",
            Some(6),
            pos.clone(),
            vel.clone(),
            with_mass(6, 1e300),
        ),
    ]
}

/// Every bad array is refused naming the array and the first bad solute (on several GPUs the
/// values are tested as they are staged, with the host check's messages), and nothing changes.
fn bad_solute_input_is_rejected_and_leaves_the_solvent_untouched(p: Platform) {
    let cfg = common::small_config([6, 6, 6], 10);
    let Some(mut s) = p.solvent(&cfg) else { return };
    s.step().unwrap();
    let before = s.fluid_state().unwrap();
    let (pos, vel, mass) = common::thermal_solutes(10, [6.0; 3], 1.0, 6);
    for (field, index, bad_pos, mut v, m) in bad_solute_cases(&pos, &vel, &mass) {
        let v_in = v.clone();
        match s.step_with_solutes(&bad_pos, &mut v, &m) {
            Err(MpcError::Solute {
                field: f,
                problem,
                fix,
            }) => {
                assert_eq!(f, field, "{p}: {problem}");
                if let Some(i) = index {
                    assert!(problem.contains(&format!("solute {i} ")), "{p}: {problem}");
                }
                assert!(!fix.is_empty());
            }
            other => panic!("{p}, {field}: expected a solute error, got {other:?}"),
        }
        // bit for bit (a NaN handed over is not equal to itself)
        assert_eq!(
            common::velocity_bits(&v),
            common::velocity_bits(&v_in),
            "{p}: velocities changed on error"
        );
        assert!(s.begin_step(&bad_pos, &v, &m).is_err());
    }
    assert_eq!(s.step_count(), 1);
    assert!(
        s.fluid_state().unwrap() == before,
        "{p}: fluid changed on error"
    );
}

/// (Bit for bit on the CPU; to rounding on GPUs, see `Platform::assert_same_solutes`.)
fn fluid_restore_repeats_a_coupled_step_exactly(p: Platform) {
    let mut cfg = common::small_config([8, 8, 8], 10);
    cfg.thermostat = Thermostat::Mbs;
    let Some(mut s) = p.solvent(&cfg) else { return };
    let (pos, vel, mass) = common::thermal_solutes(100, [8.0; 3], 4.0, 7);
    s.step().unwrap();
    let ck = s.checkpoint().unwrap();
    let mut v1 = vel.clone();
    s.step_with_solutes(&pos, &mut v1, &mass).unwrap();
    s.restore(&ck).unwrap();
    let mut v2 = vel.clone();
    s.step_with_solutes(&pos, &mut v2, &mass).unwrap();
    p.assert_same_solutes(&v1, &v2, "after restore");
}

/// The coupled step in its split form (begin/finish, with the transfers on their own streams
/// on a GPU) against the CPU's one-call form: solutes at 0.7 per cell with unwrapped
/// coordinates several periods outside the box (Lees-Edwards images in y), shear, MBS and
/// reorders on. Solute and fluid velocities agree to rounding.
fn split_coupled_steps_with_unwrapped_solutes_follow_the_cpu(p: Platform) {
    let mut cfg = common::sheared_config([12, 10, 8], 4242);
    cfg.tuning.reorder_interval = Some(4);
    let Some(on_p) = p.config(&cfg) else { return };
    let mut cpu = Solvent::new(p.reference(&cfg)).unwrap();
    let mut other = Solvent::new(on_p).unwrap();
    p.check_backend(&other.backend_description());
    let (mut pos, mut vc, mass) = common::unwrapped_solutes_three_periods([12.0, 10.0, 8.0]);
    let mut vo = vc.clone();
    for step in 0..10 {
        cpu.step_with_solutes(&pos, &mut vc, &mass).unwrap();
        other.begin_step(&pos, &vo, &mass).unwrap();
        let mut out = vec![[0.0; 3]; vo.len()];
        other.finish_step(&mut out).unwrap();
        vo = out;
        common::assert_solute_velocities_close(&vc, &vo, 1e-9, &format!("{p}, step {step}"));
        common::stream_solutes(&mut pos, &vc); // unwrapped, as an MD code may keep them
    }
    let (w, d) = common::compare_states(
        &cpu.fluid_state().unwrap(),
        &other.fluid_state().unwrap(),
        1e-9,
        &format!("{p}, split coupled"),
    );
    eprintln!(
        "{p}, split coupled, 10 steps: max relative fluid velocity difference {w:e}, \
         {d} position components differ"
    );
    assert!(w <= 1e-9);
}

/// Coupled steps with solutes (unwrapped coordinates, mixed masses, 0.7 per cell) agree with
/// the CPU to 1e-12, with and without shear; without shear, fluid + solute momentum is
/// conserved.
/// The coupled step on `p` against the CPU, step by step: the solutes' velocities, the step
/// report (relative energy, degrees of freedom, stress where measured), the final fluid and
/// the moments, with reordering, with and without shear, the stress measured on every third
/// step only (so the fused methods defer the others' collisions). On every cell-sum method
/// (`gpu_variants`), this is the GPU's contract with the CPU.
fn coupled_steps_with_solutes_follow_the_cpu(p: Platform) {
    for shear in [0.0, 0.05] {
        let mut cfg = common::sheared_config([8, 24, 8], 99);
        cfg.shear_rate = shear;
        cfg.tuning.reorder_interval = Some(4);
        cfg.output.observable_interval = 3;
        let Some(on_p) = p.config(&cfg) else { return };
        let mut cpu = Solvent::new(p.reference(&cfg)).unwrap();
        let mut other = Solvent::new(on_p).unwrap();
        p.check_backend(&other.backend_description());
        let (mut pos, mut vc, mass) = common::unwrapped_solutes_two_periods([8.0, 24.0, 8.0]);
        let ns = pos.len();
        let mut vo = vc.clone();
        let p0 = common::fluid_and_solute_momentum(&mut other, &vo, &mass);
        for step in 0..10 {
            let rc = cpu.step_with_solutes(&pos, &mut vc, &mass).unwrap();
            let ro = other.step_with_solutes(&pos, &mut vo, &mass).unwrap();
            let what = format!("{p}, shear {shear}, step {step}");
            common::assert_solute_velocities_close(&vc, &vo, 1e-12, &what);
            common::compare_reports(&rc, &ro, 1e-9, 1e-9, &what);
            common::stream_solutes(&mut pos, &vc);
        }
        let (w, d) = common::compare_states(
            &cpu.fluid_state().unwrap(),
            &other.fluid_state().unwrap(),
            1e-12,
            &format!("{p}, coupled, shear {shear}"),
        );
        eprintln!(
            "{p} coupled (shear {shear}): fluid max relative velocity difference {w:e}, \
             {d} position components differ"
        );
        let (mc, mo) = (cpu.moments().unwrap(), other.moments().unwrap());
        assert_eq!(mc.particles, mo.particles, "{p}");
        let n = mc.particles as f64;
        for k in 0..3 {
            let (a, b) = (mc.momentum[k], mo.momentum[k]);
            assert!((a - b).abs() <= 1e-9 * n, "{p}: momentum {k}: {a} vs {b}");
        }
        assert!(
            common::rel_close(mc.kinetic_energy, mo.kinetic_energy, 1e-9),
            "{p}: kinetic energy {} vs {}",
            mc.kinetic_energy,
            mo.kinetic_energy
        );
        if shear == 0.0 {
            let p1 = common::fluid_and_solute_momentum(&mut other, &vo, &mass);
            let scale = ns as f64 + 1536.0 * 10.0;
            common::assert_momentum_kept(p0, p1, scale, &format!("{p}, fluid + solutes"));
        }
    }
}
