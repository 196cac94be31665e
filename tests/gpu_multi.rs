//! The multi-GPU backend (y slabs, one per GPU, particles migrating between them) against the
//! CPU reference and against physics. Every test needs two or more CUDA GPUs and uses up to
//! four; they are ignored by default (`cargo test -- --include-ignored` on such a machine).

mod common;

use mpcbox::backend::cpu::CpuBackend;
use mpcbox::backend::cuda::multi::MultiCudaBackend;
use mpcbox::backend::cuda::{self, CudaBackend};
use mpcbox::backend::Backend;
use mpcbox::config::{Config, DeviceChoice, Thermostat};
use mpcbox::physics::{theory, Physics};
use mpcbox::rng::CellStream;
use mpcbox::state::FluidState;
use mpcbox::Solvent;

/// GPUs to use: all present, at most four; the tests need two.
fn gpu_count() -> usize {
    let n = cuda::probe().expect("these tests need CUDA GPUs");
    assert!(n >= 2, "these tests need at least two CUDA GPUs, found {n}");
    n.min(4)
}

fn gpus(g: usize) -> DeviceChoice {
    DeviceChoice::Cuda((0..g as u32).collect())
}

fn sheared_config(cells: [u32; 3]) -> Config {
    let mut cfg = common::small_config(cells, 10);
    cfg.shear_rate = 0.05;
    cfg.thermostat = Thermostat::Mbs;
    cfg.grid_shift = true;
    cfg.seed = 99;
    cfg
}

/// The same seed on 1, 2, 3 and 4 GPUs gives the CPU's trajectory to ≤ 1e-12 (relative, in
/// the velocities) after 10 steps: shear, MBS, grid shift, stress measured on some steps (the
/// unfused path) and reorders on the multi-GPU runs (free slots dropped, ids carried).
#[test]
#[ignore = "needs two or more CUDA GPUs"]
fn same_trajectory_on_one_to_four_gpus() {
    let max_g = gpu_count();
    let mut cfg = sheared_config([8, 24, 8]);
    cfg.tuning.reorder_interval = Some(0);
    let phys = Physics::from_config(&cfg);
    let st0 = FluidState::initial(&cfg);
    let steps = 10u64;
    let mut cpu = CpuBackend::new(phys.clone(), st0.clone(), 2).unwrap();
    let mut cpu_reports = Vec::new();
    for s in 0..steps {
        cpu_reports.push(cpu.step(&phys.plan(s, s % 4 == 3, false), None).unwrap());
    }
    let reference = cpu.download().unwrap();
    for g in 1..=max_g {
        let mut be: Box<dyn Backend> = if g == 1 {
            Box::new(CudaBackend::new(phys.clone(), &st0, 0).unwrap())
        } else {
            let ords: Vec<usize> = (0..g).collect();
            Box::new(MultiCudaBackend::open(&cfg, &phys, Some(&st0), &ords).unwrap())
        };
        for s in 0..steps {
            // the order of particles on a GPU does not change the physics: reorder on slabs
            let reorder = g > 1 && s % 3 == 2;
            let r = be.step(&phys.plan(s, s % 4 == 3, reorder), None).unwrap();
            common::compare_reports(
                &cpu_reports[s as usize],
                &r,
                1e-12,
                1e-10,
                &format!("{g} GPUs, step {s}"),
            );
        }
        let st = be.download().unwrap();
        let (w, d) = common::compare_states(&reference, &st, 1e-12, &format!("{g} GPUs"));
        eprintln!(
            "{g} GPU(s) ({}): after {steps} steps max relative velocity difference to the CPU \
             {w:e}, {d} position components differ",
            be.describe()
        );
    }
}

/// Under strong shear (γ̇ Ly h = 0.48 cells per step, near the config's limit of 0.5) with
/// the random grid shift, every particle stays accounted for: the backend checks the count every
/// step, a download finds every id exactly once, the moments count them all.
#[test]
#[ignore = "needs two or more CUDA GPUs"]
fn particle_count_is_conserved_under_strong_shear() {
    let g = gpu_count();
    let mut cfg = sheared_config([8, 32, 8]);
    cfg.shear_rate = 0.15;
    cfg.device = gpus(g);
    cfg.output.sample_interval = 1;
    cfg.output.equilibration_steps = 50;
    let mut s = Solvent::new(cfg.clone()).unwrap();
    assert!(
        s.backend_description().contains("slabs"),
        "{}",
        s.backend_description()
    );
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
    eprintln!("{g} GPUs, shear rate 0.15: {n} particles kept, kT {temp:.4}");
    assert!((temp - 1.0).abs() < 0.02, "temperature {temp}");
}

/// Without thermostat or shear, momentum and energy are conserved by every step on all GPUs.
#[test]
#[ignore = "needs two or more CUDA GPUs"]
fn multi_gpu_steps_conserve_momentum_and_energy() {
    let g = gpu_count();
    let mut cfg = common::small_config([12, 24, 8], 10);
    cfg.grid_shift = true;
    cfg.seed = 5;
    cfg.device = gpus(g);
    cfg.tuning.reorder_interval = Some(7);
    let mut s = Solvent::new(cfg).unwrap();
    let mut st = s.fluid_state().unwrap();
    for v in st.vel[0].iter_mut() {
        *v += 0.3;
    }
    s.set_fluid_state(&st).unwrap();
    let n = st.len() as f64;
    let mut before = st;
    for _ in 0..30 {
        s.step().unwrap();
        let after = s.fluid_state().unwrap();
        let (pb, pa) = (
            common::total_momentum(&before, 1.0),
            common::total_momentum(&after, 1.0),
        );
        for k in 0..3 {
            assert!(
                (pa[k] - pb[k]).abs() / n <= 1e-12,
                "momentum {k}: {pb:?} -> {pa:?}"
            );
        }
        let (eb, ea) = (
            common::kinetic_energy(&before, 1.0),
            common::kinetic_energy(&after, 1.0),
        );
        assert!((ea - eb).abs() / eb <= 1e-12, "energy {eb} -> {ea}");
        before = after;
    }
    let m = s.moments().unwrap();
    let p = common::total_momentum(&before, 1.0);
    for k in 0..3 {
        assert!((m.momentum[k] - p[k]).abs() <= 1e-9 * n);
    }
    assert!(common::rel_close(
        m.kinetic_energy,
        common::kinetic_energy(&before, 1.0),
        1e-12
    ));
}

/// Shear viscosity on all GPUs (four on an x4 machine) within 3% of SRD theory.
#[test]
#[ignore = "needs two or more CUDA GPUs"]
fn lees_edwards_viscosity_on_all_gpus_matches_theory() {
    let g = gpu_count();
    let mut cfg = sheared_config([16, 32, 16]);
    cfg.seed = 2024;
    cfg.device = gpus(g);
    cfg.output.equilibration_steps = 100;
    cfg.output.sample_interval = 1;
    let mut s = Solvent::new(cfg).unwrap();
    for _ in 0..3100 {
        s.step().unwrap();
    }
    let st = s.stats();
    let angle = 130f64.to_radians();
    let eta_th = theory::srd_viscosity_kinetic(10.0, 1.0, 0.1, 1.0, angle)
        + theory::srd_viscosity_collisional(10.0, 0.1, 1.0, angle);
    let eta = st.viscosity_kinetic.mean().unwrap() + st.viscosity_collisional.mean().unwrap();
    let (slope, _) = st.profile_slope().unwrap();
    let temp = st.temperature.mean().unwrap();
    eprintln!(
        "{g} GPUs: eta = {eta:.4}, theory {eta_th:.4} ({:+.2}%); slope {slope:.5}; kT {temp:.5}",
        100.0 * (eta / eta_th - 1.0)
    );
    assert!((slope / 0.05 - 1.0).abs() < 0.02, "profile slope {slope}");
    assert!(
        (eta / eta_th - 1.0).abs() < 0.03,
        "eta {eta} vs theory {eta_th}"
    );
    assert!((temp - 1.0).abs() < 0.01, "temperature {temp}");
}

/// Coupled steps with solutes (unwrapped coordinates, mixed masses, 0.7 per cell) on all GPUs
/// agree with the CPU backend, and fluid + solute momentum is conserved without shear.
#[test]
#[ignore = "needs two or more CUDA GPUs"]
fn coupled_steps_with_solutes_agree_with_cpu() {
    let g = gpu_count();
    for shear in [0.0, 0.05] {
        let mut cfg = sheared_config([8, 24, 8]);
        cfg.shear_rate = shear;
        cfg.tuning.reorder_interval = Some(4);
        let mut cpu_cfg = cfg.clone();
        cpu_cfg.device = DeviceChoice::Cpu;
        // the CPU keeps the particles in id order (what the multi-GPU download returns)
        cpu_cfg.tuning.reorder_interval = Some(0);
        let mut gpu_cfg = cfg.clone();
        gpu_cfg.device = gpus(g);
        let mut cpu = Solvent::new(cpu_cfg).unwrap();
        let mut gpu = Solvent::new(gpu_cfg).unwrap();
        let len = [8.0, 24.0, 8.0];
        let ns = (0.7 * 8.0 * 24.0 * 8.0) as usize;
        let mut r = CellStream::for_particle(8, 8);
        let mut pos: Vec<[f64; 3]> = (0..ns)
            .map(|_| {
                let mut p = [0.0; 3];
                for k in 0..3 {
                    p[k] = r.uniform() * len[k] + ((r.next_u32() % 5) as f64 - 2.0) * len[k];
                }
                p
            })
            .collect();
        let mass: Vec<f64> = (0..ns).map(|i| 2.0 + (i % 3) as f64).collect();
        let mut vc: Vec<[f64; 3]> = (0..ns)
            .map(|_| [r.normal(), r.normal(), r.normal()])
            .collect();
        let mut vg = vc.clone();
        let total = |s: &mut Solvent, v: &[[f64; 3]]| {
            let f = common::total_momentum(&s.fluid_state().unwrap(), 1.0);
            let mut p = f;
            for (vi, m) in v.iter().zip(&mass) {
                for k in 0..3 {
                    p[k] += m * vi[k];
                }
            }
            p
        };
        let p0 = total(&mut gpu, &vg);
        for step in 0..10 {
            cpu.step_with_solutes(&pos, &mut vc, &mass).unwrap();
            gpu.step_with_solutes(&pos, &mut vg, &mass).unwrap();
            common::assert_solute_velocities_close(
                &vc,
                &vg,
                1e-12,
                &format!("shear {shear}, step {step}"),
            );
            for (p, v) in pos.iter_mut().zip(&vc) {
                for k in 0..3 {
                    p[k] += 0.1 * v[k];
                }
            }
        }
        let (w, d) = common::compare_states(
            &cpu.fluid_state().unwrap(),
            &gpu.fluid_state().unwrap(),
            1e-12,
            &format!("coupled, shear {shear}"),
        );
        eprintln!(
            "{g} GPUs coupled (shear {shear}): fluid max relative velocity difference {w:e}, \
             {d} position components differ"
        );
        if shear == 0.0 {
            let p1 = total(&mut gpu, &vg);
            for k in 0..3 {
                assert!(
                    (p1[k] - p0[k]).abs() <= 1e-12 * (ns as f64 + 1536.0 * 10.0),
                    "fluid + solute momentum {p0:?} -> {p1:?}"
                );
            }
        }
    }
}

/// `device: AllGpus` runs the decomposition; a state survives download → upload.
#[test]
#[ignore = "needs two or more CUDA GPUs"]
fn all_gpus_runs_the_decomposition_and_round_trips_the_state() {
    let g = gpu_count();
    let mut cfg = sheared_config([8, 48, 8]);
    cfg.device = DeviceChoice::AllGpus;
    let mut s = Solvent::new(cfg).unwrap();
    let d = s.backend_description();
    assert!(d.contains("slabs"), "{d}");
    eprintln!("AllGpus with {g}+ GPUs: {d}");
    for _ in 0..25 {
        s.step().unwrap();
    }
    let st = s.fluid_state().unwrap();
    s.set_fluid_state(&st).unwrap();
    let again = s.fluid_state().unwrap();
    assert_eq!(st, again);
    // a wrong-sized state is refused with a clear message
    let mut short = st.clone();
    for k in 0..3 {
        short.pos[k].pop();
        short.vel[k].pop();
    }
    let e = s.set_fluid_state(&short).unwrap_err().to_string();
    assert!(e.contains("particles"), "{e}");
}
