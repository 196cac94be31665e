//! The GPU MD engine (`mpcbox::md::GpuMd`) against the CPU engine: forces, positions and
//! velocities after N steps for an LJ liquid (two types), a DPD fluid and a bead-spring polymer
//! with a Langevin thermostat. (The NIST LJ energy, the DPD pressure and momentum conservation
//! and NVE energy conservation run on both engines in tests/suite/md_physics.rs.)
//! Tests that need a GPU are ignored by default (`cargo test -- --include-ignored` on a machine
//! with one); the backend selection tests run everywhere.

use crate::common;

use std::collections::HashMap;

use mpcbox::backend::cuda;
use mpcbox::md::build::{fcc_lattice, maxwell_velocities, polymer_chains};
use mpcbox::md::{
    BondStyle, ForceField, GpuMd, LjTable, Md, MdBackend, MdSettings, MdThermostat, PairStyle,
    System,
};

/// max |a − b| / max |a| over all components.
fn rel_diff(a: &[[f64; 3]], b: &[[f64; 3]]) -> f64 {
    let mut num: f64 = 0.0;
    let mut den: f64 = 0.0;
    for (x, y) in a.iter().zip(b) {
        for k in 0..3 {
            num = num.max((x[k] - y[k]).abs());
            den = den.max(x[k].abs());
        }
    }
    num / den.max(f64::MIN_POSITIVE)
}

/// Per-particle arrays of `sys` in the particle order of `reference` (matched by tag).
fn by_tag(reference: &System, sys: &System, v: &[[f64; 3]]) -> Vec<[f64; 3]> {
    let at: HashMap<u32, usize> = sys.tag.iter().enumerate().map(|(i, &t)| (t, i)).collect();
    reference.tag.iter().map(|t| v[at[t]]).collect()
}

fn unwrapped(sys: &System) -> Vec<[f64; 3]> {
    (0..sys.len()).map(|i| sys.unwrapped(i)).collect()
}

fn settings(dt: f64, kt: f64, seed: u64) -> MdSettings {
    common::md_settings(dt, kt, seed, 0)
}

/// Build both engines on the same system, compare forces, run `steps`, compare the state and
/// the energies; returns the worst relative difference.
fn compare(
    sys: System,
    ff: ForceField,
    th: MdThermostat,
    st: MdSettings,
    steps: u64,
    what: &str,
) -> f64 {
    let mut cpu = Md::new(sys, ff.clone(), th, st.clone()).expect("valid system");
    let mut gpu = GpuMd::new(cpu.sys.clone(), ff, th, st, 0).expect("GPU engine");
    let gf = gpu.forces().unwrap();
    let df = rel_diff(cpu.forces(), &by_tag(&cpu.sys, gpu.system().unwrap(), &gf));
    let de0 = ((cpu.potential_energy() - gpu.potential_energy())
        / cpu.potential_energy().abs().max(1e-300))
    .abs();
    cpu.run(steps).unwrap();
    gpu.run(steps).unwrap();
    let gs = gpu.system().unwrap().clone();
    let dp = rel_diff(
        &unwrapped(&cpu.sys),
        &by_tag(&cpu.sys, &gs, &unwrapped(&gs)),
    );
    let dv = rel_diff(&cpu.sys.vel, &by_tag(&cpu.sys, &gs, &gs.vel));
    let gf = gpu.forces().unwrap();
    let df2 = rel_diff(cpu.forces(), &by_tag(&cpu.sys, &gs, &gf));
    let de = ((cpu.potential_energy() - gpu.potential_energy())
        / cpu.potential_energy().abs().max(1e-300))
    .abs();
    let dk = ((cpu.kinetic_energy() - gpu.kinetic_energy().unwrap()) / cpu.kinetic_energy()).abs();
    println!(
        "{what} ({} particles, {steps} steps, GPU list builds {}): forces at start {df:.2e}, \
         potential energy at start {de0:.2e}; after: positions {dp:.2e}, velocities {dv:.2e}, \
         forces {df2:.2e}, potential energy {de:.2e}, kinetic energy {dk:.2e}",
        cpu.sys.len(),
        gpu.list_builds()
    );
    assert!(gpu.list_builds() > 1, "the GPU list was never rebuilt");
    let worst = [df, de0, dp, dv, df2, de, dk]
        .into_iter()
        .fold(0.0f64, f64::max);
    assert!(worst <= 1e-9, "{what}: CPU and GPU differ by {worst:e}");
    worst
}

fn two_type_lj_liquid() -> (System, ForceField) {
    let mut sys = fcc_lattice([6; 3], 0.8442, 1.0);
    sys.type_mass = vec![1.0, 1.5];
    for i in 0..sys.len() {
        sys.typ[i] = (i % 3 == 0) as u32;
    }
    maxwell_velocities(&mut sys, 1.0, 11);
    let table = LjTable::from_entries(
        2,
        &[
            (0, 0, 1.0, 1.0, 2.5),
            (0, 1, 1.2, 0.95, 2.4),
            (1, 1, 0.8, 1.05, 2.2),
        ],
        true,
    )
    .unwrap();
    let ff = ForceField {
        pair: PairStyle::Lj(table),
        bond_styles: vec![],
    };
    (sys, ff)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_lj_liquid_matches_cpu() {
    let (sys, ff) = two_type_lj_liquid();
    compare(
        sys,
        ff,
        MdThermostat::None,
        settings(0.005, 1.0, 7),
        200,
        "LJ liquid (two types)",
    );
    // one type: the specialised kernel (coefficients loaded once)
    let mut sys = fcc_lattice([6; 3], 0.8442, 1.0);
    maxwell_velocities(&mut sys, 0.72, 11);
    let ff = ForceField {
        pair: PairStyle::Lj(LjTable::uniform(1, 1.0, 1.0, 2.5, true)),
        bond_styles: vec![],
    };
    compare(
        sys,
        ff,
        MdThermostat::None,
        settings(0.005, 0.72, 7),
        200,
        "LJ liquid (one type)",
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_dpd_fluid_matches_cpu() {
    let (sys, ff) = common::dpd_fluid_system(6.0, 3.0);
    compare(
        sys,
        ff,
        MdThermostat::None,
        settings(0.01, 1.0, 99),
        100,
        "DPD fluid",
    );
}

fn polymer(langevin: bool) -> (System, ForceField, MdThermostat) {
    let mut sys = polymer_chains([12.0; 3], 12, 24, 1.0, 0.97, 0.9, 3).unwrap();
    maxwell_velocities(&mut sys, 1.0, 4);
    // half the chains with harmonic bonds (type 2), half FENE (type 1)
    let nb = sys.bonds.len();
    for b in sys.bonds[nb / 2..].iter_mut() {
        b.kind = 1;
    }
    let ff = ForceField {
        pair: PairStyle::Lj(LjTable::wca(1, 1.0, 1.0)),
        bond_styles: vec![
            BondStyle::Fene { k: 30.0, r0: 1.5 },
            BondStyle::Harmonic { k: 100.0, r0: 0.97 },
        ],
    };
    let th = if langevin {
        MdThermostat::Langevin { damping: 1.0 }
    } else {
        MdThermostat::None
    };
    (sys, ff, th)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_bead_spring_polymer_matches_cpu() {
    let (sys, ff, th) = polymer(false);
    compare(sys, ff, th, settings(0.005, 1.0, 5), 300, "polymer NVE");
    let (sys, ff, th) = polymer(true);
    compare(
        sys,
        ff,
        th,
        settings(0.005, 1.0, 5),
        300,
        "polymer Langevin",
    );
    // LJ with a DPD thermostat on top
    let (sys, ff) = two_type_lj_liquid();
    compare(
        sys,
        ff,
        MdThermostat::Dpd {
            gamma: 4.5,
            cutoff: 1.5,
            exponent: 1.0,
        },
        settings(0.005, 1.0, 5),
        100,
        "LJ + DPD thermostat",
    );
}

/// The stress sample's reductions on the device equal the CPU's functions applied to
/// the same state, bit for bit: the kinetic tensor (per chunk of 512 beads in index order), the
/// conformation (per chain, in chain order), the md.csv columns (kinetic energy and momentum
/// per chunk; each chain's centre of mass and Rg², the largest bond; the MSD against the start)
/// and the energy report (per chunk), here for polymer chains under Lees-Edwards shear after beads crossed the sheared
/// boundary.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_stress_sample_reductions_equal_the_cpu_functions() {
    use mpcbox::md::rheology::{conformation, kinetic_tensor, pressure_tensor};
    use mpcbox::md::ShearFlow;
    let (sys, ff, th) = polymer(true);
    let rate = 0.2;
    let mut st = settings(0.005, 1.0, 5);
    st.shear = Some(ShearFlow::standalone(rate, 0.005));
    let observer = mpcbox::md::observe::ChainObserver::new(&sys);
    let mut md = GpuMd::new(sys, ff, th, st, 0).unwrap();
    md.run(2000).unwrap();
    let crossed = md
        .system()
        .unwrap()
        .image
        .iter()
        .filter(|im| im[1] != 0)
        .count();
    assert!(crossed > 0, "no bead crossed the sheared boundary");
    let (p, kin) = md.solute_pressure(rate).unwrap();
    let k_gpu = md.kinetic_tensor(rate).unwrap();
    let c_gpu = md.conformation().unwrap();
    let chains_gpu = md.chain_sample(&observer).unwrap();
    let report = md.report();
    let sys = md.system().unwrap().clone();
    let chains_cpu = observer.sample(&sys);
    assert_eq!(chains_gpu, chains_cpu);
    assert!(
        chains_cpu.com_msd > 0.0 && chains_cpu.max_bond > 0.5,
        "{chains_cpu:?}"
    );
    assert_eq!(k_gpu, kinetic_tensor(&sys, rate));
    assert_eq!(p, pressure_tensor(&sys, rate, report.virial_tensor));
    assert_eq!(kin, pressure_tensor(&sys, rate, [0.0; 6]));
    assert_eq!(c_gpu, conformation(&sys));
    // the energy report summed on the device equals the CPU engine's at the same state
    let cpu = Md::new(
        sys.clone(),
        md.ff.clone(),
        md.thermostat,
        md.settings().clone(),
    )
    .unwrap();
    // kinetic energy and momentum, per chunk on the device: the CPU's chunked sums over the
    // same particle order bit for bit (the CPU engine, which sorts its particles in space,
    // adds its chunks in another order: to rounding)
    use mpcbox::md::integrate::{chunk_kinetic_energy, chunk_momentum};
    use mpcbox::md::neighbor::CHUNK;
    let inv_mass: Vec<f64> = (0..sys.len()).map(|i| 1.0 / sys.mass(i)).collect();
    let chunks = 0..sys.len().div_ceil(CHUNK);
    let mut e = 0.0;
    let mut mom = [0.0; 3];
    for c in chunks {
        e += chunk_kinetic_energy(&sys.vel, &inv_mass, c);
        let q = chunk_momentum(&sys.vel, &inv_mass, c);
        for k in 0..3 {
            mom[k] += q[k];
        }
    }
    assert_eq!(md.kinetic_energy().unwrap(), e);
    assert_eq!(md.momentum().unwrap(), mom);
    let ke_cpu = cpu.kinetic_energy();
    assert!((e - ke_cpu).abs() <= 1e-12 * ke_cpu, "{e} vs {ke_cpu}");
    let pm = cpu.momentum();
    let scale = ke_cpu.max(1.0);
    for k in 0..3 {
        assert!((mom[k] - pm[k]).abs() <= 1e-12 * scale, "{mom:?} vs {pm:?}");
    }
    let (a, b) = (report, cpu.report());
    let close = |x: f64, y: f64| (x - y).abs() <= 1e-11 * y.abs().max(1.0);
    assert!(close(a.pair_energy, b.pair_energy), "{a:?} vs {b:?}");
    assert!(close(a.bond_energy, b.bond_energy), "{a:?} vs {b:?}");
    assert!(close(a.virial, b.virial), "{a:?} vs {b:?}");
    for k in 0..6 {
        assert!(
            close(a.virial_tensor[k], b.virial_tensor[k]),
            "{a:?} vs {b:?}"
        );
    }
    println!(
        "{crossed} beads crossed; P_xy {:.6e}, Rg² {:.4}",
        p[3],
        c_gpu.rg2()
    );
}

/// Two GPU runs of the same system are bitwise identical (cell members are sorted).
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_runs_are_bitwise_reproducible() {
    let run = || {
        let (sys, ff) = common::dpd_fluid_system(6.0, 3.0);
        let mut md = GpuMd::new(sys, ff, MdThermostat::None, settings(0.01, 1.0, 1), 0).unwrap();
        md.run(50).unwrap();
        state_bits(&mut md)
    };
    assert!(run() == run());
}

/// The bits of the positions and velocities of `md` now.
fn state_bits(md: &mut GpuMd) -> Vec<u64> {
    let s = md.system().unwrap();
    s.pos
        .iter()
        .chain(&s.vel)
        .flat_map(|a| a.iter().map(|x| x.to_bits()))
        .collect()
}

/// The forces and list kernels launched over a few blocks (each thread then taking every
/// grid-th particle, as beside the fluid's streaming) give the same bits as one thread per
/// particle: positions and velocities after 200 steps, for the polymer (NVE and Langevin) and
/// the LJ liquid with the DPD thermostat (the general force kernel).
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_steps_over_few_blocks_are_the_same_bits() {
    let bits = |sys: System, ff: ForceField, th: MdThermostat, blocks: u32| {
        let mut md = GpuMd::new(sys, ff, th, settings(0.005, 1.0, 5), 0).unwrap();
        md.set_launch_blocks(blocks);
        md.run(200).unwrap();
        assert!(
            md.list_builds() > 1,
            "the lists were rebuilt within the run"
        );
        state_bits(&mut md)
    };
    let dpd = MdThermostat::Dpd {
        gamma: 4.5,
        cutoff: 1.5,
        exponent: 1.0,
    };
    let cases: Vec<(&str, System, ForceField, MdThermostat)> = vec![
        (
            "polymer NVE",
            polymer(false).0,
            polymer(false).1,
            polymer(false).2,
        ),
        (
            "polymer Langevin",
            polymer(true).0,
            polymer(true).1,
            polymer(true).2,
        ),
        (
            "LJ + DPD thermostat",
            two_type_lj_liquid().0,
            two_type_lj_liquid().1,
            dpd,
        ),
    ];
    for (name, sys, ff, th) in cases {
        let reference = bits(sys.clone(), ff.clone(), th, 0);
        assert!(
            sys.len() > 2 * 128,
            "{name}: more particles than one block's threads"
        );
        for blocks in [1, 3] {
            assert!(
                bits(sys.clone(), ff.clone(), th, blocks) == reference,
                "{name}: {blocks} blocks differ from one thread per particle"
            );
        }
    }
}

/// A FENE bond stretched beyond R0 on the GPU is a clear error, not NaNs.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_broken_fene_bond_is_an_error() {
    let (sys, ff, th) = polymer(false);
    let mut md = GpuMd::new(sys, ff, th, settings(0.5, 1.0, 5), 0).unwrap();
    let e = md.run(200).unwrap_err().to_string();
    assert!(e.contains("FENE"), "{e}");
}

/// The same on the CPU engine: a typed instability (`MpcError::Unstable`) naming the MD step
/// and the bond, with the usual causes as the fix.
#[test]
fn cpu_broken_fene_bond_is_an_instability() {
    let (sys, ff, th) = polymer(false);
    let mut md = mpcbox::md::Md::new(sys, ff, th, settings(0.5, 1.0, 5)).unwrap();
    match md.run(200) {
        Err(mpcbox::MpcError::Unstable { step, what, fix }) => {
            assert!(step > 0 && step <= 200, "step {step}");
            assert!(what.contains("FENE") && what.contains("md.bonds"), "{what}");
            assert!(fix.contains("time step"), "{fix}");
        }
        other => panic!("a torn bond must be an instability: {other:?}"),
    }
}

/// `md.backend`: Auto uses the GPU exactly when one is usable (the CPU otherwise), Cpu never,
/// Cuda without a GPU is a clear config error.
#[test]
fn md_backend_auto_falls_back_to_the_cpu_without_a_gpu() {
    assert!(!MdBackend::Cpu.use_gpu().unwrap());
    let usable = cuda::probe().is_ok();
    assert_eq!(MdBackend::Auto.use_gpu().unwrap(), usable);
    match MdBackend::Cuda.use_gpu() {
        Ok(on) => assert!(usable && on),
        Err(e) => {
            assert!(!usable);
            let msg = e.to_string();
            assert!(msg.contains("md.backend"), "{msg}");
        }
    }
    assert_eq!(MdBackend::default(), MdBackend::Auto);
}

/// A coupled run with `md.backend: Auto` works on any machine (GPU engine or CPU fallback),
/// and the config field parses.
#[test]
fn coupled_run_with_auto_backend() {
    use mpcbox::md::coupled::Coupling;
    use mpcbox::{Config, Solvent};
    let cfg = Config::from_file(std::path::Path::new("examples/polymer_in_solvent.ron")).unwrap();
    let md = cfg.md.clone().unwrap();
    assert_eq!(md.backend, MdBackend::Auto);
    let mut cfg = cfg;
    cfg.md = Some(mpcbox::md::MdConfig {
        system: mpcbox::md::from_config::SystemSpec::DataFile {
            path: "examples/two_chains.data".into(),
            atom_style: None,
        },
        ..md
    });
    cfg.particles_per_cell = 3;
    let mut solvent = Solvent::new(cfg.clone()).unwrap();
    let mut c = Coupling::new(cfg.md.as_ref().unwrap(), &solvent).unwrap();
    assert_eq!(c.md_on_gpu(), cuda::probe().is_ok());
    for _ in 0..5 {
        c.step(&mut solvent).unwrap();
    }
    assert_eq!(c.md_steps(), 5 * c.steps_per_collision as u64);
    let p: mpcbox::md::MdConfig = ron::from_str(
        "(steps_per_collision: 10, system: Chains(n_chains: 1, chain_length: 4), pair: None, \
         backend: Cuda)",
    )
    .unwrap();
    assert_eq!(p.backend, MdBackend::Cuda);
    assert!(ron::from_str::<mpcbox::md::MdConfig>(
        "(steps_per_collision: 10, system: Chains(n_chains: 1, chain_length: 4), pair: None, \
         backend: Gpu)"
    )
    .is_err());
}

/// The MD kernels compile with NVRTC (where the library is loadable, no GPU needed) and, with
/// --fmad=false, contain no fused multiply-add.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs NVRTC (pip install nvidia-cuda-nvrtc, its nvidia/cu13/lib on LD_LIBRARY_PATH); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn md_kernels_compile_without_fma_when_nvrtc_available() {
    cuda::kernels::require_nvrtc_for_tests();
    let mut opts = cuda::kernels::compile_options(9, 0);
    opts[0] = "--gpu-architecture=compute_90".into();
    // leaves out libdevice's pow (general DPD exponents only), which uses FMA internally
    opts.push("-DMD_FMA_CHECK".into());
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(
        cuda::kernels::md_source(),
        cudarc::nvrtc::CompileOptions {
            options: opts,
            ..Default::default()
        },
    )
    .expect("MD kernels compile to PTX")
    .to_src();
    for k in [
        "md_forces",
        "md_forces_lj1",
        "md_first_half",
        "md_build_list",
        "md_wall_forces",
        "md_chunk_energy",
        "md_chunk_kinetic",
        "md_chain_conformation",
        "md_chain_geometry",
        "md_bond_max2",
        "md_chunk_ke_momentum",
    ] {
        assert!(ptx.contains(k), "{k} missing");
    }
    assert!(!ptx.contains("fma.rn.f64"), "PTX contains f64 FMA");
}

/// A coupled MD + MPC run (CPU fluid) with the GPU MD engine follows the CPU MD engine: bead
/// positions and velocities after 10 MPC steps (100 MD steps) agree to ≤ 1e-9 relative.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_coupled_run_matches_cpu() {
    use mpcbox::config::DeviceChoice;
    use mpcbox::md::coupled::Coupling;
    use mpcbox::{Config, Solvent};
    let run = |backend: MdBackend| {
        let mut cfg =
            Config::from_file(std::path::Path::new("examples/polymer_in_solvent.ron")).unwrap();
        cfg.device = DeviceChoice::Cpu;
        cfg.particles_per_cell = 3;
        let md = cfg.md.clone().unwrap();
        cfg.md = Some(mpcbox::md::MdConfig { backend, ..md });
        let mut solvent = Solvent::new(cfg.clone()).unwrap();
        let mut c = Coupling::new(cfg.md.as_ref().unwrap(), &solvent).unwrap();
        assert_eq!(c.md_on_gpu(), backend == MdBackend::Cuda);
        for _ in 0..10 {
            c.step(&mut solvent).unwrap();
        }
        (c.system().unwrap().clone(), c.potential_energy())
    };
    let (cpu, ecpu) = run(MdBackend::Cpu);
    let (gpu, egpu) = run(MdBackend::Cuda);
    let dp = rel_diff(&unwrapped(&cpu), &by_tag(&cpu, &gpu, &unwrapped(&gpu)));
    let dv = rel_diff(&cpu.vel, &by_tag(&cpu, &gpu, &gpu.vel));
    let de = ((ecpu - egpu) / ecpu).abs();
    println!(
        "coupled ({} beads): positions {dp:.2e}, velocities {dv:.2e}, energy {de:.2e}",
        cpu.len()
    );
    assert!(dp <= 1e-9 && dv <= 1e-9 && de <= 1e-9);
}
