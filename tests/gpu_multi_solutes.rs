//! Solutes on several GPUs: held on the first GPU and read/written by every GPU over peer
//! access (NVLink), device-resident or uploaded once; and the peer grants that make that and
//! the particle migration run at NVLink speed. Every test needs two or more CUDA GPUs.

mod common;

use mpcbox::backend::cuda::multi::{MultiCudaBackend, Transfer};
use mpcbox::backend::cuda::{self, transfer, DeviceSoluteArrays};
use mpcbox::backend::{Backend, SoluteBatch};
use mpcbox::config::{Config, DeviceChoice, Thermostat};
use mpcbox::physics::Physics;
use mpcbox::rng::CellStream;
use mpcbox::Solvent;

fn gpu_count() -> usize {
    let n = cuda::probe().expect("these tests need CUDA GPUs");
    assert!(n >= 2, "these tests need at least two CUDA GPUs, found {n}");
    n.min(4)
}

fn config(g: usize) -> Config {
    let mut cfg = common::small_config([8, 8 * g as u32, 8], 10);
    cfg.shear_rate = 0.05;
    cfg.thermostat = Thermostat::Mbs;
    cfg.tuning.reorder_interval = Some(4);
    cfg.device = DeviceChoice::Cuda((0..g as u32).collect());
    cfg
}

fn solutes(n: usize, cells: [u32; 3]) -> (Vec<[f64; 3]>, Vec<[f64; 3]>, Vec<f64>) {
    let mut r = CellStream::for_particle(17, 0);
    let pos = (0..n)
        .map(|_| {
            [
                r.uniform() * cells[0] as f64,
                (2.0 * r.uniform() - 0.5) * cells[1] as f64,
                r.uniform() * cells[2] as f64,
            ]
        })
        .collect();
    let vel = (0..n)
        .map(|_| [0.3 * r.normal(), 0.3 * r.normal(), 0.3 * r.normal()])
        .collect();
    let mass = (0..n).map(|i| [1.0, 10.0][i % 2]).collect();
    (pos, vel, mass)
}

/// Every buffer another GPU touches (receive buffers, the home GPU's solute buffers) is open
/// to that GPU, and peer copies are the default transfer where the GPUs allow it.
#[test]
#[ignore = "needs a CUDA GPU"]
fn peer_access_covers_every_buffer_another_gpu_touches() {
    let g = gpu_count();
    let cfg = config(g);
    let phys = Physics::from_config(&cfg);
    let ordinals: Vec<usize> = (0..g).collect();
    let mut be = MultiCudaBackend::open(&cfg, &phys, None, &ordinals).unwrap();
    let (pos, mut vel, mass) = solutes(500, cfg.cells);
    let mut batch = SoluteBatch {
        pos: &pos,
        vel: &mut vel,
        mass: &mass,
    };
    be.step(&phys.plan(0, false, false), Some(&mut batch))
        .unwrap();
    let touched = be.peer_touched_buffers();
    assert!(touched.len() >= 2 * g, "{touched:?}");
    let devices: Vec<_> = ordinals
        .iter()
        .map(|&o| cuda::CudaDevice::open(o).unwrap())
        .collect();
    let all_peer = devices.iter().all(|a| {
        devices
            .iter()
            .all(|b| a.ordinal() == b.ordinal() || transfer::can_access_peer(a, b))
    });
    println!(
        "{} buffers touched by peers; peer access everywhere: {all_peer}",
        touched.len()
    );
    if !all_peer {
        eprintln!("these GPUs lack peer access: host staging, nothing to grant");
        assert_eq!(be.transfer(), Transfer::Host);
        return;
    }
    if std::env::var_os("MPCBOX_MULTI_TRANSFER").is_none() {
        assert_eq!(be.transfer(), Transfer::Peer);
    }
    for (ptr, owner, reader) in touched {
        assert!(
            transfer::peer_can_access(ptr, reader).unwrap(),
            "buffer {ptr:#x} of GPU {owner} is not open to GPU {reader}"
        );
    }
}

/// Device-resident solutes on several GPUs (read from the first GPU by all) give the one-GPU
/// host-path collision to rounding; so do host solutes through the home GPU.
#[test]
#[ignore = "needs a CUDA GPU"]
fn solutes_on_several_gpus_collide_as_on_one() {
    let g = gpu_count();
    let multi_cfg = config(g);
    let mut one_cfg = multi_cfg.clone();
    one_cfg.device = DeviceChoice::Cuda(vec![0]);
    // the multi-GPU download returns particles in their initial order; a one-GPU run that
    // reorders returns them by cell, so the reference does not reorder (same physics)
    one_cfg.tuning.reorder_interval = Some(0);
    let (pos, vel0, mass) = solutes(2000, multi_cfg.cells);
    let mut one = Solvent::new(one_cfg).unwrap();
    let mut host_multi = Solvent::new(multi_cfg.clone()).unwrap();
    let mut dev_multi = Solvent::new(multi_cfg).unwrap();
    for step in 0..6 {
        let mut v_one = vel0.clone();
        let mut v_host = vel0.clone();
        one.step_with_solutes(&pos, &mut v_one, &mass).unwrap();
        host_multi
            .step_with_solutes(&pos, &mut v_host, &mass)
            .unwrap();
        let arrays = DeviceSoluteArrays::upload(0, &pos, &vel0, &mass).unwrap();
        dev_multi
            .step_with_device_solutes(&arrays.solutes())
            .unwrap();
        let v_dev = arrays.velocities().unwrap();
        let what = format!("step {step}, {g} GPUs");
        common::assert_solute_velocities_close(&v_one, &v_host, 1e-12, &format!("{what}, host"));
        common::assert_solute_velocities_close(&v_one, &v_dev, 1e-12, &format!("{what}, device"));
    }
    let a = one.fluid_state().unwrap();
    common::compare_states(
        &a,
        &host_multi.fluid_state().unwrap(),
        1e-12,
        "host path fluid",
    );
    common::compare_states(
        &a,
        &dev_multi.fluid_state().unwrap(),
        1e-12,
        "device path fluid",
    );
}
