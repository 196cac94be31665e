//! The CUDA backend against the CPU reference where it is GPU-specific: random draws bit for
//! bit, the initial state, memory refusal, device
//! selection; and the platform matrix's own set-up (tests/suite/common/platform.rs). Physics and
//! behaviour on every platform: the matrix tests (conservation, thermostat, shear_viscosity,
//! coupling, reproducibility, device_solutes); every cell-sum method's steps against the CPU
//! are their `gpu_variants` instances (coupling, rules_steps). Tests that need a GPU are ignored by default
//! (`cargo test -- --include-ignored` on a machine with one); the rest run everywhere.

use crate::common;

use common::Platform;
use mpcbox::backend::cuda::{self, CellSumMethod, CudaBackend, CudaDevice};
use mpcbox::backend::Backend;
use mpcbox::config::{Config, DeviceChoice};
use mpcbox::error::MpcError;
use mpcbox::physics::Physics;
use mpcbox::rng::{self, CellStream};
use mpcbox::state::{initial_particle, FluidState};

// ---------- no GPU needed ----------

#[test]
fn cuda_footprint_is_within_50_bytes_per_particle() {
    let cfg = common::small_config([64, 64, 64], 10);
    let f = mpcbox::backend::cuda::footprint_default(&cfg);
    assert!(f.bytes_per_particle <= 50, "{f:?}");
    assert_eq!(
        f.total_bytes,
        cfg.n_fluid() * f.bytes_per_particle + cfg.n_cells() * f.bytes_per_cell
    );
    // leaner than the CPU backend per particle
    assert!(f.bytes_per_particle <= mpcbox::backend::cpu::footprint(&cfg).bytes_per_particle);
}

#[test]
fn auto_uses_the_gpu_when_usable_and_the_cpu_otherwise() {
    let mut cfg = common::small_config([6, 6, 6], 5);
    cfg.device = DeviceChoice::Auto;
    let phys = Physics::from_config(&cfg);
    let be = mpcbox::backend::factory::open(&cfg, &phys, None).unwrap();
    match cuda::probe() {
        Ok(_) => assert!(be.describe().starts_with("cuda"), "{}", be.describe()),
        Err(why) => {
            eprintln!("no CUDA here: {why}");
            assert!(be.describe().starts_with("cpu"), "{}", be.describe());
        }
    }
}

#[test]
fn multi_gpu_without_gpus_and_missing_gpu_give_clear_errors() {
    let mut cfg = common::small_config([6, 24, 6], 5);
    let phys = Physics::from_config(&cfg);
    if cuda::probe().is_err() {
        for d in [
            DeviceChoice::Cuda(vec![0, 1]),
            DeviceChoice::AllGpus,
            DeviceChoice::Cuda(vec![0]),
        ] {
            cfg.device = d.clone();
            match mpcbox::backend::factory::open(&cfg, &phys, None) {
                Err(MpcError::Device(m)) => assert!(m.contains("CUDA"), "{d:?}: {m}"),
                Err(e) => panic!("unexpected error {e}"),
                Ok(_) => panic!("no GPU here, yet {d:?} opened"),
            }
        }
    }
    // slabs thinner than a step's reach are refused before any GPU is touched
    let thin = common::small_config([6, 6, 6], 5);
    let mut t = thin.clone();
    t.device = DeviceChoice::Cuda(vec![0, 1, 2]);
    match mpcbox::backend::factory::open(&t, &Physics::from_config(&thin), None) {
        Err(MpcError::Device(m)) => assert!(m.contains("layers") && m.contains("fix"), "{m}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("slabs of 2 layers must be refused"),
    }
}

/// The matrix runs a box on as many GPUs as it has slabs of the minimum thickness for, and
/// compares several GPUs with a CPU run that keeps the particles in their initial order.
#[test]
fn matrix_platforms_fit_the_box_and_pick_the_cpu_reference() {
    let mut cfg = common::small_config([12, 10, 8], 10);
    assert_eq!(Platform::Cpu.fit(&cfg), Some(Platform::Cpu));
    assert_eq!(Platform::Gpu.fit(&cfg), Some(Platform::Gpu));
    // kT = m = 1, h = 0.1: slabs of at least four layers
    assert_eq!(Platform::MultiGpu(4).fit(&cfg), Some(Platform::MultiGpu(2)));
    cfg.cells = [8, 24, 8];
    assert_eq!(Platform::MultiGpu(4).fit(&cfg), Some(Platform::MultiGpu(4)));
    assert_eq!(
        Platform::MultiGpu(3).config(&cfg).unwrap().device,
        DeviceChoice::Cuda(vec![0, 1, 2])
    );
    cfg.cells = [6, 6, 6];
    assert_eq!(Platform::MultiGpu(2).fit(&cfg), None);
    assert_eq!(
        Platform::Gpu.config(&cfg).unwrap().device,
        DeviceChoice::Cuda(vec![0])
    );
    cfg.tuning.reorder_interval = Some(4);
    for p in [Platform::Cpu, Platform::Gpu, Platform::MultiGpu(2)] {
        let r = p.reference(&cfg);
        assert_eq!(r.device, DeviceChoice::Cpu);
        let order_kept = if p.is_multi_gpu() { 0 } else { 4 };
        assert_eq!(r.tuning.reorder_interval, Some(order_kept), "{p}");
    }
    assert_eq!(
        Platform::MultiGpu(4).with_fewer_gpus(),
        [2, 3, 4].map(Platform::MultiGpu)
    );
    Platform::Cpu.check_backend("cpu (2 threads)");
    Platform::Gpu.check_backend("cuda:0 NVIDIA H200 (fused cell sums)");
    Platform::MultiGpu(2)
        .check_backend("cuda:0,1 2 × NVIDIA H200 (fused cell sums, y slabs [12, 12], peer)");
}

// ---------- GPU ----------

fn gpu_config(cells: [u32; 3]) -> Config {
    common::sheared_config(cells, 4242)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_cell_draws_equal_the_cpu_bit_for_bit() {
    let dev = CudaDevice::open(0).unwrap();
    let n = 50_000usize;
    let cells: Vec<u32> = (0..n as u32)
        .map(|c| c.wrapping_mul(2_654_435_761))
        .collect();
    let counts: Vec<u32> = (0..n as u32).map(|c| c % 41).collect();
    for (seed, step) in [(1u64, 0u64), (4242, 17), (u64::MAX - 5, (1u64 << 40) + 3)] {
        let (axes, energies) = dev.cell_draws(seed, step, &cells, &counts, 1.3).unwrap();
        for i in 0..n {
            let a = rng::cell_rotation_axis(seed, step, cells[i]);
            assert_eq!(
                axes[i], a,
                "axis of cell {} (seed {seed}, step {step})",
                cells[i]
            );
            let e = if counts[i] >= 2 {
                rng::cell_thermostat_energy(seed, step, cells[i], counts[i], 1.3)
            } else {
                0.0
            };
            assert_eq!(
                energies[i].to_bits(),
                e.to_bits(),
                "MBS energy of cell {} with {} particles",
                cells[i],
                counts[i]
            );
        }
    }
    // det_ln over many decades, subnormals included
    let mut xs = vec![4.9e-320, 1e-310, 1.0, 2.0, 0.5, f64::MIN_POSITIVE];
    let mut s = CellStream::for_particle(9, 9);
    for _ in 0..20_000 {
        let u = s.uniform();
        xs.push(u);
        xs.push(u * 1e-200);
        xs.push((u + 1e-3) * 1e250);
    }
    let ys = dev.det_ln(&xs).unwrap();
    for (x, y) in xs.iter().zip(&ys) {
        assert_eq!(y.to_bits(), rng::det_ln(*x).to_bits(), "det_ln({x})");
    }
    // initial particles from their Philox streams
    let len = [13.0, 7.0, 5.0];
    let parts = dev.initial_particles(77, len, 0.8, 20_000).unwrap();
    for (i, (p, v)) in parts.iter().enumerate() {
        let (pc, vc) = initial_particle(77, i as u64, len, 0.8);
        assert_eq!(*p, pc, "initial position {i}");
        assert_eq!(*v, vc, "initial velocity {i}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_mpc_at_draws_equal_the_cpu_bit_for_bit() {
    let dev = CudaDevice::open(0).unwrap();
    let n = 100_000usize;
    let mut s = CellStream::for_particle(5, 5);
    let cells: Vec<u32> = (0..n as u32).map(|c| c.wrapping_mul(40_503)).collect();
    let keys: Vec<u64> = (0..n)
        .map(|i| {
            let p = [
                s.uniform() as f32 * 64.0,
                s.uniform() as f32,
                (i % 97) as f32,
            ];
            if i % 3 == 0 {
                rng::solute_particle_key([p[0] as f64, -3.5, 1e3 * p[1] as f64])
            } else {
                rng::fluid_particle_key(p)
            }
        })
        .collect();
    let masses: Vec<f64> = (0..n).map(|i| [1.0, 2.5, 10.0][i % 3]).collect();
    let mut phys = Physics::from_config(&gpu_config([4, 4, 4]));
    for (seed, step, kt) in [
        (1u64, 0u64, 1.0),
        (4242, 17, 0.3),
        (u64::MAX - 5, 1 << 40, 2.0),
    ] {
        phys.seed = seed;
        phys.kt = kt;
        let gpu = dev
            .at_draws(seed, step, &cells, &keys, &masses, kt)
            .unwrap();
        for i in 0..n {
            let cpu = phys.rule_draw(step, cells[i], keys[i], masses[i]);
            assert_eq!(
                gpu[i].map(f64::to_bits),
                cpu.map(f64::to_bits),
                "MPC-AT draw {i} (seed {seed}, step {step}): GPU {:?}, CPU {cpu:?}",
                gpu[i]
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_generates_the_cpu_initial_state_bit_for_bit() {
    for (cells, shear) in [
        ([12, 10, 8], 0.05),
        ([40, 36, 30], 0.0),
        ([64, 64, 64], 0.02),
    ] {
        let mut cfg = gpu_config(cells);
        cfg.shear_rate = shear;
        let phys = Physics::from_config(&cfg);
        let t0 = std::time::Instant::now();
        let mut gpu = CudaBackend::open(&cfg, &phys, None, 0, CellSumMethod::DEFAULT).unwrap();
        let t_gpu = t0.elapsed().as_secs_f64();
        let g = gpu.download().unwrap();
        let t0 = std::time::Instant::now();
        let c = FluidState::initial(&cfg);
        let t_cpu = t0.elapsed().as_secs_f64();
        let mut differ = 0usize;
        for k in 0..3 {
            differ += c.pos[k]
                .iter()
                .zip(&g.pos[k])
                .filter(|(a, b)| a != b)
                .count();
            differ += c.vel[k]
                .iter()
                .zip(&g.vel[k])
                .filter(|(a, b)| a.to_bits() != b.to_bits())
                .count();
        }
        eprintln!(
            "{cells:?}: {} particles, GPU open+generate {t_gpu:.3} s, CPU generate {t_cpu:.3} s, \
             {differ} components differ",
            c.len()
        );
        assert_eq!(
            differ, 0,
            "GPU initial state differs from FluidState::initial"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_oversize_config_is_refused_before_allocation() {
    let mut cfg = common::small_config([1024, 1024, 300], 10);
    cfg.device = DeviceChoice::Cuda(vec![0]);
    let phys = Physics::from_config(&cfg);
    let t0 = std::time::Instant::now();
    match mpcbox::backend::factory::open(&cfg, &phys, None) {
        Err(MpcError::OutOfMemory {
            needed_bytes,
            available_bytes,
            fix,
            ..
        }) => {
            eprintln!("refused: needs {needed_bytes}, {available_bytes} free; fix: {fix}");
            assert!(needed_bytes > available_bytes);
            assert!(!fix.is_empty());
        }
        Err(e) => panic!("expected OutOfMemory, got {e}"),
        Ok(_) => panic!("a 150 GB system must not fit"),
    }
    // refused before building the 3-billion-particle host state
    assert!(t0.elapsed().as_secs_f64() < 30.0);
}

/// `device: AllGpus` runs the slab decomposition where there are several GPUs; a state
/// survives download → upload.
#[test]
#[ignore = "needs two or more CUDA GPUs"]
fn all_gpus_runs_the_decomposition_and_round_trips_the_state() {
    let Some(p) = Platform::multi_gpu() else {
        return;
    };
    let mut cfg = common::sheared_config([8, 48, 8], 99);
    cfg.device = DeviceChoice::AllGpus;
    let mut s = mpcbox::Solvent::new(cfg).unwrap();
    let d = s.backend_description();
    p.check_backend(&d);
    eprintln!("AllGpus with {p}+: {d}");
    for _ in 0..25 {
        s.step().unwrap();
    }
    common::assert_state_round_trips(&mut s, "AllGpus");
}
