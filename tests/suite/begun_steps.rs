//! Steps begun before their solutes are known (`Solvent::begin_fluid_step`, `solvent/begun.rs`):
//! the fluid streams while the MD code moves the solutes, and the call that hands them over
//! finishes the step. A begun step gives the bits of a step made in one call, whatever form
//! the solutes come in (host arrays, page-locked or not; device arrays), on one GPU and on
//! several slabs; the CPU begins nothing and steps as before. A finish that refuses its solutes
//! leaves the step begun (to be finished with good ones, still with the same bits), and
//! nothing may read, step or checkpoint the fluid in between.

use crate::common;

use common::Platform;
use mpcbox::backend::cuda::{DeviceSoluteArrays, PinnedSoluteArrays};
use mpcbox::config::Config;

common::backend_tests!(
    [cpu cpu_slabs gpu multi_gpu slabs]
    a_begun_host_step_gives_the_bits_of_one_call,
    a_refused_finish_leaves_the_step_begun,
);

/// Sheared, thermostatted, the grid shifted, reordered every third step.
fn sheared(cells: [u32; 3]) -> Config {
    let mut cfg = common::sheared_config(cells, 17);
    cfg.tuning.reorder_interval = Some(3);
    cfg
}

fn on_a_gpu(p: Platform) -> bool {
    !matches!(p, Platform::Cpu | Platform::CpuSlabs(_))
}

/// The solutes of step `k`: moved along a third of the box in y each step (across slabs).
fn moved(pos: &[[f64; 3]], cells: [u32; 3], k: usize) -> Vec<[f64; 3]> {
    let ly = cells[1] as f64;
    pos.iter()
        .map(|r| [r[0] + 0.3 * k as f64, r[1] + ly * k as f64 / 3.0, r[2]])
        .collect()
}

/// Host arrays, pageable and (on a GPU) page-locked: five steps begun before the solutes are
/// handed over give the solute velocities and the fluid of five steps made in one call, bit
/// for bit. A GPU begins every step; the CPU none.
fn a_begun_host_step_gives_the_bits_of_one_call(p: Platform) {
    let cfg = sheared([8, 8 * p.gpus().max(1) as u32, 8]);
    let (pos, vel, mass) = common::solutes_partly_outside(700, cfg.cells, 5);
    let page_locked: &[bool] = if on_a_gpu(p) {
        &[false, true]
    } else {
        &[false]
    };
    for &locked in page_locked {
        let what = if locked { "page-locked" } else { "pageable" };
        let (Some(mut plain), Some(mut begun)) = (p.solvent(&cfg), p.solvent(&cfg)) else {
            return;
        };
        let mut held = locked.then(|| PinnedSoluteArrays::new(0, pos.len()).unwrap());
        let mut va = vel.clone();
        let mut vb = vel.clone();
        for k in 0..5 {
            let r = moved(&pos, cfg.cells, k);
            plain.step_with_solutes(&r, &mut va, &mass).unwrap();
            let began = begun.begin_fluid_step(r.len()).unwrap();
            assert_eq!(began, on_a_gpu(p), "{p}, {what}: begun on a GPU only");
            match held.as_mut() {
                Some(h) => {
                    let (hp, hv, hm) = h.arrays_mut().unwrap();
                    hp.copy_from_slice(&r);
                    hv.copy_from_slice(&vb);
                    hm.copy_from_slice(&mass);
                    begun.step_with_solutes(hp, hv, hm).unwrap();
                    vb.copy_from_slice(hv);
                }
                None => {
                    begun.step_with_solutes(&r, &mut vb, &mass).unwrap();
                }
            }
            assert_eq!(
                common::velocity_bits(&va),
                common::velocity_bits(&vb),
                "{p}, {what}, step {k}: solute velocities"
            );
        }
        assert_eq!(begun.step_count(), 5);
        assert_eq!(
            plain.fluid_state().unwrap(),
            begun.fluid_state().unwrap(),
            "{p}, {what}: the fluid"
        );
    }
}

/// With a step begun, a finish with a NaN position, with a mass past the cell sums' cap or
/// with another solute count is refused, naming what is wrong, and the step stays begun: the
/// fluid cannot be read, stepped or checkpointed until good solutes finish it, and then it is
/// the step a plain run makes, bit for bit. Host arrays everywhere; device arrays on the GPUs
/// too (routed over slabs, where the values are tested after the begun pass was queued).
fn a_refused_finish_leaves_the_step_begun(p: Platform) {
    let cfg = sheared([8, 8 * p.gpus().max(1) as u32, 8]);
    let (pos, vel, mass) = common::solutes_partly_outside(600, cfg.cells, 8);
    let mut nan = pos.clone();
    nan[123][1] = f64::NAN;
    let mut heavy = mass.clone();
    heavy[45] = 1e9;
    let forms: &[&str] = if on_a_gpu(p) {
        &["host", "device"]
    } else {
        &["host"]
    };
    for &form in forms {
        let (Some(mut plain), Some(mut begun)) = (p.solvent(&cfg), p.solvent(&cfg)) else {
            return;
        };
        plain.step().unwrap();
        begun.step().unwrap();
        let mut va = vel.clone();
        plain.step_with_solutes(&pos, &mut va, &mass).unwrap();
        if !begun.begin_fluid_step(pos.len()).unwrap() {
            // the CPU does the whole step in the finishing call: nothing stays begun
            assert!(!on_a_gpu(p), "{p}: a GPU begins");
            let mut vb = vel.clone();
            assert!(begun.step_with_solutes(&nan, &mut vb, &mass).is_err());
            assert_eq!(
                begun.step_count(),
                1,
                "{p}: the refused step was not counted"
            );
            begun.step_with_solutes(&pos, &mut vb, &mass).unwrap();
            assert_eq!(
                common::velocity_bits(&va),
                common::velocity_bits(&vb),
                "{p}"
            );
            continue;
        }
        let bad = [
            ("a NaN position", &nan, &mass, "positions", 123),
            ("a mass past the cap", &pos, &heavy, "masses", 45),
        ];
        for (what, r, m, field, index) in bad {
            let refused = match form {
                "host" => {
                    let mut v = vel.clone();
                    let e = begun.step_with_solutes(r, &mut v, m);
                    assert_eq!(
                        common::velocity_bits(&v),
                        common::velocity_bits(&vel),
                        "{p}, {form}, {what}: velocities changed"
                    );
                    e
                }
                _ => {
                    let a = DeviceSoluteArrays::upload(0, r, &vel, m).unwrap();
                    let e = begun.step_with_device_solutes(&a.solutes());
                    assert_eq!(a.velocities().unwrap(), vel, "{p}, {form}, {what}");
                    e
                }
            };
            common::assert_names_solute(refused, field, index, &format!("{p}, {form}, {what}"));
        }
        let mut short = vel[..10].to_vec();
        let e = begun
            .step_with_solutes(&pos[..10], &mut short, &mass[..10])
            .unwrap_err()
            .to_string();
        assert!(e.contains("begun for 600"), "{p}, {form}: {e}");
        // still begun: nothing else may touch the fluid
        for (what, e) in [
            ("a read", begun.fluid_state().err()),
            ("a plain step", begun.step().err()),
            ("a checkpoint", begun.checkpoint().err()),
            ("a second begin", begun.begin_fluid_step(600).err()),
        ] {
            let e = e.unwrap_or_else(|| panic!("{p}, {form}: {what} of a begun step ran"));
            assert!(
                e.to_string().contains("begin_fluid_step"),
                "{p}, {form}, {what}: {e}"
            );
        }
        assert_eq!(begun.step_count(), 1, "{p}, {form}: no step was counted");
        let mut vb = vel.clone();
        match form {
            "host" => {
                begun.step_with_solutes(&pos, &mut vb, &mass).unwrap();
            }
            _ => {
                let a = DeviceSoluteArrays::upload(0, &pos, &vel, &mass).unwrap();
                begun.step_with_device_solutes(&a.solutes()).unwrap();
                vb = a.velocities().unwrap();
            }
        }
        assert_eq!(begun.step_count(), 2);
        assert_eq!(
            common::velocity_bits(&va),
            common::velocity_bits(&vb),
            "{p}, {form}: the finished step's solutes"
        );
        assert_eq!(
            plain.fluid_state().unwrap(),
            begun.fluid_state().unwrap(),
            "{p}, {form}: the finished step's fluid"
        );
    }
}
