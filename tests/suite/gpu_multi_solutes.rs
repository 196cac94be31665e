//! The peer grants that let the GPUs' peer copies (particle migration, solute routing) run at
//! NVLink speed. Needs two or more CUDA GPUs. (Solutes on several GPUs colliding as on the
//! CPU: tests/suite/device_solutes.rs, tests/suite/routed_solutes.rs.)

use crate::common;

use common::Platform;
use mpcbox::backend::cuda::multi::{MultiCudaBackend, Transfer};
use mpcbox::backend::cuda::{self, transfer};
use mpcbox::backend::{Backend, SoluteBatch};
use mpcbox::config::Thermostat;
use mpcbox::physics::Physics;

/// Every buffer another GPU touches (receive buffers, the solute routing's buffers) is open
/// to that GPU, and peer copies are the default transfer where the GPUs allow it.
#[test]
#[ignore = "needs two or more CUDA GPUs"]
fn peer_access_covers_every_buffer_another_gpu_touches() {
    let Some(Platform::MultiGpu(g)) = Platform::multi_gpu() else {
        return;
    };
    let mut cfg = common::small_config([8, 8 * g as u32, 8], 10);
    cfg.shear_rate = 0.05;
    cfg.thermostat = Thermostat::Mbs;
    cfg.tuning.reorder_interval = Some(4);
    let cfg = Platform::MultiGpu(g).config(&cfg).unwrap();
    let phys = Physics::from_config(&cfg);
    let ordinals: Vec<usize> = (0..g).collect();
    let mut be = MultiCudaBackend::open(&cfg, &phys, None, &ordinals).unwrap();
    let (pos, mut vel, mass) = common::solutes_over_two_y_periods(500, cfg.cells);
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
