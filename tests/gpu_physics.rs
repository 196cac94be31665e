//! Physics on the CUDA backend: conservation laws, the MBS temperature and the Lees-Edwards
//! viscosity against SRD theory (as tests/conservation.rs and tests/shear_viscosity.rs do on the
//! CPU). All need a GPU.

mod common;

use mpcbox::config::{Config, DeviceChoice, Thermostat};
use mpcbox::physics::theory;
use mpcbox::Solvent;

fn on_gpu(mut cfg: Config) -> Config {
    cfg.device = DeviceChoice::Cuda(vec![0]);
    cfg
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_full_steps_conserve_momentum_and_energy() {
    for grid_shift in [false, true] {
        let mut cfg = on_gpu(common::small_config([12, 10, 8], 10));
        cfg.grid_shift = grid_shift;
        cfg.seed = 3;
        let mut s = Solvent::new(cfg.clone()).unwrap();
        assert!(s.backend_description().starts_with("cuda"));
        let mut st = s.fluid_state().unwrap();
        for v in st.vel[0].iter_mut() {
            *v += 0.3;
        }
        s.set_fluid_state(&st).unwrap();
        let p0 = common::total_momentum(&st, 1.0);
        let e0 = common::kinetic_energy(&st, 1.0);
        for _ in 0..20 {
            let before = s.fluid_state().unwrap();
            s.step().unwrap();
            let after = s.fluid_state().unwrap();
            let (pb, pa) = (
                common::total_momentum(&before, 1.0),
                common::total_momentum(&after, 1.0),
            );
            let eb = common::kinetic_energy(&before, 1.0);
            let ea = common::kinetic_energy(&after, 1.0);
            let scale = st.len() as f64;
            for k in 0..3 {
                assert!(
                    (pa[k] - pb[k]).abs() / scale <= 1e-12,
                    "step momentum {k}: {} -> {}",
                    pb[k],
                    pa[k]
                );
            }
            assert!((ea - eb).abs() / eb <= 1e-12, "step energy {eb} -> {ea}");
        }
        let after = s.fluid_state().unwrap();
        let p1 = common::total_momentum(&after, 1.0);
        assert!((p1[0] - p0[0]).abs() / p0[0].abs() < 1e-11);
        let e1 = common::kinetic_energy(&after, 1.0);
        assert!((e1 - e0).abs() / e0 < 1e-11, "energy drift {e0} -> {e1}");
        // the GPU moments agree with the downloaded state
        let m = s.moments().unwrap();
        for (a, b) in m.momentum.iter().zip(p1) {
            assert!((a - b).abs() <= 1e-9 * st.len() as f64);
        }
        assert!((m.kinetic_energy - e1).abs() <= 1e-12 * e1);
        assert_eq!(m.profile_count.iter().sum::<u64>(), st.len() as u64);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_thermostat_conserves_momentum_and_holds_temperature() {
    let mut cfg = on_gpu(common::small_config([16, 16, 16], 10));
    cfg.thermostat = Thermostat::Mbs;
    cfg.kt = 1.0;
    cfg.seed = 11;
    cfg.output.equilibration_steps = 20;
    let mut s = Solvent::new(cfg).unwrap();
    let p0 = common::total_momentum(&s.fluid_state().unwrap(), 1.0);
    // start hot: the thermostat must bring it back
    let mut st = s.fluid_state().unwrap();
    for k in 0..3 {
        for v in st.vel[k].iter_mut() {
            *v *= 1.2;
        }
    }
    s.set_fluid_state(&st).unwrap();
    let p0h = common::total_momentum(&st, 1.0);
    for _ in 0..400 {
        s.step().unwrap();
    }
    let p1 = common::total_momentum(&s.fluid_state().unwrap(), 1.0);
    let n = s.n_fluid() as f64;
    for k in 0..3 {
        assert!(
            (p1[k] - p0h[k]).abs() / n <= 1e-12,
            "momentum {k}: {} -> {}",
            p0[k],
            p1[k]
        );
    }
    let temp = s.stats().temperature.mean().unwrap();
    eprintln!("MBS temperature on the GPU: {temp}");
    assert!((temp - 1.0).abs() < 0.01, "temperature {temp}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_lees_edwards_viscosity_matches_srd_theory() {
    let mut cfg = on_gpu(common::small_config([16, 16, 16], 10));
    cfg.shear_rate = 0.05;
    cfg.thermostat = Thermostat::Mbs;
    cfg.kt = 1.0;
    cfg.seed = 2024;
    cfg.output.equilibration_steps = 100;
    cfg.output.sample_interval = 1;
    let steps = 3100;
    let mut s = Solvent::new(cfg.clone()).unwrap();
    assert!(s.backend_description().starts_with("cuda"));
    for _ in 0..steps {
        s.step().unwrap();
    }
    let st = s.stats();
    let angle = 130f64.to_radians();
    let eta_kin_th = theory::srd_viscosity_kinetic(10.0, 1.0, 0.1, 1.0, angle);
    let eta_col_th = theory::srd_viscosity_collisional(10.0, 0.1, 1.0, angle);
    let eta_th = eta_kin_th + eta_col_th;
    let eta_kin = st.viscosity_kinetic.mean().unwrap();
    let eta_col = st.viscosity_collisional.mean().unwrap();
    let eta = eta_kin + eta_col;
    let (slope, slope_err) = st.profile_slope().unwrap();
    let temp = st.temperature.mean().unwrap();
    eprintln!(
        "GPU: eta = {eta:.4} (kin {eta_kin:.4}, coll {eta_col:.4}); theory {eta_th:.4}; \
         slope {slope:.5} ± {slope_err:.5}; kT {temp:.5}"
    );
    assert!(
        (slope / 0.05 - 1.0).abs() < 0.02,
        "profile slope {slope} vs imposed 0.05"
    );
    assert!(
        (eta / eta_th - 1.0).abs() < 0.03,
        "viscosity {eta} vs theory {eta_th}"
    );
    assert!((temp - 1.0).abs() < 0.01, "temperature {temp}");
}

/// A CPU run checkpointed and resumed on the GPU continues as the CPU run does (to rounding).
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_resumes_a_cpu_checkpoint() {
    let mut cfg = common::small_config([10, 12, 8], 10);
    cfg.shear_rate = 0.05;
    cfg.thermostat = Thermostat::Mbs;
    cfg.seed = 99;
    cfg.tuning.reorder_interval = Some(7);
    let mut cpu = Solvent::new(cfg.clone()).unwrap();
    for _ in 0..15 {
        cpu.step().unwrap();
    }
    let ck = cpu.checkpoint().unwrap();
    let mut gpu = Solvent::from_checkpoint(ck, Some(DeviceChoice::Cuda(vec![0]))).unwrap();
    assert!(gpu.backend_description().starts_with("cuda"));
    assert_eq!(gpu.step_count(), 15);
    for _ in 0..10 {
        let a = cpu.step().unwrap();
        let b = gpu.step().unwrap();
        assert!((a.relative_energy - b.relative_energy).abs() <= 1e-9 * a.relative_energy);
        assert_eq!(a.relative_dof, b.relative_dof);
    }
    let (sc, sg) = (cpu.fluid_state().unwrap(), gpu.fluid_state().unwrap());
    for k in 0..3 {
        for (a, b) in sc.vel[k].iter().zip(&sg.vel[k]) {
            assert!((a - b).abs() <= 1e-9 * a.abs().max(1.0), "{a} vs {b}");
        }
    }
    let (oc, og) = (cpu.observables().unwrap(), gpu.observables().unwrap());
    assert!((oc.kinetic_energy - og.kinetic_energy).abs() <= 1e-9 * oc.kinetic_energy);
    assert!((oc.temperature - og.temperature).abs() <= 1e-9);
}
