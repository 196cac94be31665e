//! Device-resident solutes (`Solvent::step_with_device_solutes`): the same collision as the
//! host path and the CPU's on one GPU and on several (tests/suite/common/platform.rs), conservation,
//! bad device input refused with nothing changed, and the bundled GPU MD engine coupled without
//! a host round trip. GPU tests are ignored without a GPU.

use crate::common;

use common::{Platform, Solutes};
use mpcbox::backend::cuda::DeviceSoluteArrays;
use mpcbox::backend::DeviceSolutes;
use mpcbox::config::{Config, DeviceChoice, Thermostat};
use mpcbox::error::MpcError;
use mpcbox::Solvent;

common::backend_tests!(
    [gpu multi_gpu slabs]
    device_solutes_collide_as_host_solutes,
    device_coupled_steps_conserve_momentum,
);

fn device_config(cells: [u32; 3], shear: f64) -> Config {
    let mut cfg = common::small_config(cells, 10);
    cfg.thermostat = Thermostat::Mbs;
    cfg.shear_rate = shear;
    cfg.tuning.reorder_interval = Some(3);
    cfg
}

fn one_gpu(cfg: Config) -> Config {
    Platform::Gpu.config(&cfg).expect("one GPU runs any box")
}

// ---------- no GPU needed ----------

#[test]
fn a_cpu_fluid_refuses_device_solutes_and_stays_unchanged() {
    let mut s = Solvent::new(common::small_config([6, 6, 6], 5)).unwrap();
    let before = s.fluid_state().unwrap();
    let fake = DeviceSolutes {
        pos: 0x1000,
        vel: 0x2000,
        mass: 0x3000,
        n: 4,
        stream: 0,
    };
    match s.step_with_device_solutes(&fake) {
        Err(MpcError::Device(m)) => {
            assert!(
                m.contains("step_with_solutes"),
                "the message names the fix: {m}"
            )
        }
        other => panic!("expected a device error, got {other:?}"),
    }
    assert_eq!(s.step_count(), 0);
    assert_eq!(s.fluid_state().unwrap(), before);
    // zero solutes is the plain step, on any backend
    let none = DeviceSolutes::default();
    s.step_with_device_solutes(&none).unwrap();
    assert_eq!(s.step_count(), 1);
}

// ---------- GPU ----------

/// A set-up of the device-solute collision test.
struct DeviceCase {
    cfg: Config,
    solutes: Solutes,
    steps: usize,
    /// Each step starts from the last step's velocities (else from the initial ones).
    carry_velocities: bool,
}

/// Host arrays and the same arrays on the device (on several GPUs: held by the first GPU and
/// read by all) give the same step to rounding, and the CPU's (only the order of the f64
/// atomic cell sums differs), with shear, MBS, reorders and wrapped solutes: 700 solutes, every
/// seventh far outside the box, carried from step to step; 2000 solutes over two y periods,
/// the same velocities every step, eight layers per GPU.
fn device_solutes_collide_as_host_solutes(p: Platform) {
    let carried = device_config([8, 12, 8], 0.05);
    let mut repeated = device_config([8, 8 * p.gpus() as u32, 8], 0.05);
    repeated.tuning.reorder_interval = Some(4);
    let cases = [
        DeviceCase {
            solutes: common::solutes_partly_outside(700, carried.cells, 5),
            cfg: carried,
            steps: 8,
            carry_velocities: true,
        },
        DeviceCase {
            solutes: common::solutes_over_two_y_periods(2000, repeated.cells),
            cfg: repeated,
            steps: 6,
            carry_velocities: false,
        },
    ];
    for case in cases {
        device_and_host_solutes_follow_the_cpu(p, case);
    }
}

fn device_and_host_solutes_follow_the_cpu(p: Platform, case: DeviceCase) {
    let Some(on_p) = p.config(&case.cfg) else {
        return;
    };
    let (pos, vel0, mass) = case.solutes;
    let mut cpu = Solvent::new(p.reference(&case.cfg)).unwrap();
    let mut host = Solvent::new(on_p.clone()).unwrap();
    let mut dev = Solvent::new(on_p).unwrap();
    p.check_backend(&dev.backend_description());
    let mut vel = vel0.clone();
    for step in 0..case.steps {
        let what = format!("{p}, {:?}, step {step}", case.cfg.cells);
        let mut v_cpu = vel.clone();
        cpu.step_with_solutes(&pos, &mut v_cpu, &mass).unwrap();
        let mut v_host = vel.clone();
        host.step_with_solutes(&pos, &mut v_host, &mass).unwrap();
        let arrays = DeviceSoluteArrays::upload(0, &pos, &vel, &mass).unwrap();
        dev.step_with_device_solutes(&arrays.solutes()).unwrap();
        let v_dev = arrays.velocities().unwrap();
        common::assert_solute_velocities_close(&v_host, &v_dev, 1e-12, &format!("{what}, device"));
        common::assert_solute_velocities_close(&v_cpu, &v_host, 1e-12, &format!("{what}, host"));
        common::assert_solute_velocities_close(&v_cpu, &v_dev, 1e-12, &format!("{what}, CPU"));
        // keep the runs on one trajectory (rounding would otherwise grow)
        if case.carry_velocities {
            vel = v_cpu;
        }
    }
    let (a, b, c) = (
        cpu.fluid_state().unwrap(),
        host.fluid_state().unwrap(),
        dev.fluid_state().unwrap(),
    );
    common::compare_states(&b, &c, 1e-12, &format!("{p}, device path fluid"));
    common::compare_states(&a, &b, 1e-12, &format!("{p}, host path fluid"));
    common::compare_states(&a, &c, 1e-12, &format!("{p}, device path fluid vs CPU"));
}

/// Without shear, fluid + solute momentum is conserved by every device-resident step.
fn device_coupled_steps_conserve_momentum(p: Platform) {
    let mut cfg = device_config([10, 10, 10], 0.0);
    cfg.thermostat = Thermostat::None;
    let (pos, vel, mass) = common::solutes_partly_outside(3000, cfg.cells, 9);
    let Some(mut s) = p.solvent(&cfg) else { return };
    let arrays = DeviceSoluteArrays::upload(0, &pos, &vel, &mass).unwrap();
    let mut p0 = common::fluid_and_solute_momentum(&mut s, &vel, &mass);
    let scale = mass.iter().sum::<f64>() + s.n_fluid() as f64;
    for _ in 0..20 {
        s.step_with_device_solutes(&arrays.solutes()).unwrap();
        let v = arrays.velocities().unwrap();
        let p1 = common::fluid_and_solute_momentum(&mut s, &v, &mass);
        common::assert_momentum_kept(p0, p1, scale, &p.to_string());
        p0 = p1;
    }
}

/// The caller's device arrays (read and written in place) and the same solutes as host arrays
/// (staged, uploaded, downloaded) give the same bits: the cell sums are integers (fixed point),
/// so nothing may differ. 0.7 solutes per cell moving through a 32³ box under shear and MBS, in
/// steps begun before the solutes are handed over and in steps that are not, with reorders,
/// for 12 steps.
#[test]
#[ignore = "needs a CUDA GPU"]
fn device_solutes_give_the_host_paths_bits_begun_or_not() {
    let mut cfg = one_gpu(device_config([32, 32, 32], 0.02));
    cfg.tuning.reorder_interval = Some(5);
    let (mut pos, mut vel, mass) = common::solutes_partly_outside(22_937, cfg.cells, 11);
    let mut host = Solvent::new(cfg.clone()).unwrap();
    let mut dev = Solvent::new(cfg).unwrap();
    for step in 0..12 {
        let arrays = DeviceSoluteArrays::upload(0, &pos, &vel, &mass).unwrap();
        if step % 2 == 1 {
            assert!(
                dev.begin_device_step(pos.len()).unwrap(),
                "step {step}: begun"
            );
        }
        dev.step_with_device_solutes(&arrays.solutes()).unwrap();
        host.step_with_solutes(&pos, &mut vel, &mass).unwrap();
        assert_eq!(
            common::velocity_bits(&arrays.velocities().unwrap()),
            common::velocity_bits(&vel),
            "step {step}: solute velocities"
        );
        common::stream_solutes(&mut pos, &vel);
    }
    assert_eq!(
        host.fluid_state().unwrap(),
        dev.fluid_state().unwrap(),
        "the fluid"
    );
}

/// Host pointers, NULL, short buffers, NaN and bad masses (zero, or heavier than the fixed-point
/// cell sums hold) are refused, naming the array, and neither the fluid nor the solutes change;
/// a begun step refuses the heavy mass too and is then finished with good solutes.
#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_device_input_is_refused_and_changes_nothing() {
    let cfg = one_gpu(device_config([6, 6, 6], 0.0));
    let (pos, vel, mass) = common::solutes_partly_outside(100, cfg.cells, 3);
    let mut s = Solvent::new(cfg).unwrap();
    s.step().unwrap();
    let before = s.fluid_state().unwrap();
    let good = DeviceSoluteArrays::upload(0, &pos, &vel, &mass).unwrap();
    let host_vel = vel.clone();
    let cases: Vec<(&str, DeviceSolutes, &str)> = vec![
        (
            "host array",
            DeviceSolutes {
                pos: pos.as_ptr() as u64,
                ..good.solutes()
            },
            "positions",
        ),
        (
            "NULL",
            DeviceSolutes {
                mass: 0,
                ..good.solutes()
            },
            "masses",
        ),
        (
            "too short",
            DeviceSolutes {
                n: 100_000,
                ..good.solutes()
            },
            "positions",
        ),
    ];
    for (what, bad, field) in cases {
        match s.step_with_device_solutes(&bad) {
            Err(MpcError::Solute { field: f, .. }) => assert_eq!(f, field, "{what}"),
            other => panic!("{what}: expected a solute error, got {other:?}"),
        }
    }
    let mut nan_pos = pos.clone();
    nan_pos[42][1] = f64::NAN;
    let mut bad_mass = mass.clone();
    bad_mass[17] = 0.0;
    // the cap is 64 fluid masses without an md config naming heavier beads
    let mut heavy = mass.clone();
    heavy[63] = 1e6;
    for (what, p, m, field, index) in [
        ("NaN position", &nan_pos, &mass, "positions", 42),
        ("zero mass", &pos, &bad_mass, "masses", 17),
        ("mass past the cell sums' cap", &pos, &heavy, "masses", 63),
    ] {
        let arrays = DeviceSoluteArrays::upload(0, p, &vel, m).unwrap();
        common::assert_names_solute(
            s.step_with_device_solutes(&arrays.solutes()),
            field,
            index,
            what,
        );
        assert_eq!(
            arrays.velocities().unwrap(),
            host_vel,
            "{what}: solutes changed"
        );
    }
    assert_eq!(s.step_count(), 1, "no step was counted");
    assert_eq!(s.fluid_state().unwrap(), before, "the fluid changed");
    assert_eq!(good.velocities().unwrap(), host_vel);
    // and the good arrays still work afterwards
    s.step_with_device_solutes(&good.solutes()).unwrap();
    assert_eq!(s.step_count(), 2);
    // a begun step tests the values by the check kernel: the same refusal, then it finishes
    let heavy = DeviceSoluteArrays::upload(0, &pos, &vel, &heavy).unwrap();
    assert!(s.begin_device_step(pos.len()).unwrap());
    match s.step_with_device_solutes(&heavy.solutes()) {
        Err(MpcError::Solute { field, problem, .. }) => {
            assert_eq!(field, "masses", "begun: {problem}");
            assert!(problem.contains("solute 63 "), "begun: {problem}");
            assert!(
                problem.contains("at most 64"),
                "begun, the cap named: {problem}"
            );
        }
        other => panic!("begun: expected a solute error, got {other:?}"),
    }
    assert_eq!(s.step_count(), 2);
    s.step_with_device_solutes(&good.solutes()).unwrap();
    assert_eq!(s.step_count(), 3);
}

/// Solutes on another GPU than the fluid's are refused (needs two GPUs; passes with a message
/// on one).
#[test]
#[ignore = "needs a CUDA GPU"]
fn solutes_on_another_gpu_are_refused() {
    let gpus = mpcbox::backend::cuda::probe().unwrap();
    if gpus < 2 {
        eprintln!("one GPU: nothing to check");
        return;
    }
    let cfg = one_gpu(device_config([6, 6, 6], 0.0));
    let (pos, vel, mass) = common::solutes_partly_outside(50, cfg.cells, 4);
    let mut s = Solvent::new(cfg).unwrap();
    let elsewhere = DeviceSoluteArrays::upload(1, &pos, &vel, &mass).unwrap();
    match s.step_with_device_solutes(&elsewhere.solutes()) {
        Err(MpcError::Solute { problem, fix, .. }) => {
            assert!(problem.contains("GPU 1"), "{problem}");
            assert!(fix.contains("cuda:0"), "{fix}");
        }
        other => panic!("expected a solute error, got {other:?}"),
    }
    assert_eq!(s.step_count(), 0);
}

/// The bundled GPU MD engine with the fluid on the same GPU hands its beads over as device
/// pointers, and follows the host round trip to rounding (10 collisions, 100 MD steps).
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_md_engine_couples_without_a_host_round_trip() {
    use mpcbox::md::coupled::Coupling;
    use mpcbox::md::MdBackend;
    let run = |device_resident: bool| {
        let mut cfg =
            Config::from_file(std::path::Path::new("examples/polymer_in_solvent.ron")).unwrap();
        cfg.device = DeviceChoice::Cuda(vec![0]);
        let md = cfg.md.clone().unwrap();
        cfg.md = Some(mpcbox::md::MdConfig {
            backend: MdBackend::Cuda,
            ..md
        });
        let mut solvent = Solvent::new(cfg.clone()).unwrap();
        let mut c = Coupling::new(cfg.md.as_ref().unwrap(), &solvent).unwrap();
        if !device_resident {
            c.use_host_round_trip();
        }
        let path = c.path_description();
        assert_eq!(
            path.starts_with("device-resident"),
            device_resident,
            "{path}"
        );
        for _ in 0..10 {
            c.step(&mut solvent).unwrap();
        }
        let sys = c.system().unwrap().clone();
        (sys, solvent.fluid_state().unwrap())
    };
    let (host_sys, host_fluid) = run(false);
    let (dev_sys, dev_fluid) = run(true);
    common::assert_solute_velocities_close(&host_sys.vel, &dev_sys.vel, 1e-9, "bead velocities");
    common::assert_solute_velocities_close(&host_sys.pos, &dev_sys.pos, 1e-9, "bead positions");
    common::compare_states(&host_fluid, &dev_fluid, 1e-9, "fluid");
}
