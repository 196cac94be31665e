//! The same run, bit for bit, on any decomposition (`crate::fixed_sums`: the cell sums and the
//! reductions in fixed point): coupled runs under shear (SRD with MBS, MPC-AT+a) and between
//! walls (a moving plate, MBS; MPC-AT+a around a sphere driven by a body force) give identical `observables.csv`, checkpoint fluid and bead
//! velocities on the CPU with 1 or 3 threads and 1, 2 or 4 slabs; on one GPU run twice, on
//! 2, 3 and 4 slabs of one GPU and on 2, 3 and 4 GPUs; over 1, 2 and 3 MPI ranks on the CPU and
//! on GPUs. The CPU-GPU contract: the fluid and host
//! solutes (no MD engine: the GPU's MD sums its forces in another order than the CPU's) agree
//! bit for bit. `summary.json` records that the run was deterministic.

use crate::common;

use std::path::Path;

use mpcbox::config::walls::WallsConfig;
use mpcbox::config::{Config, DeviceChoice};
use mpcbox::md::coupled::Coupling;
use mpcbox::run::{run_job_steps, Silent, CHECKPOINT_FILE};
use mpcbox::state::FluidState;
use mpcbox::{Checkpoint, Solvent};

/// Collisions per run: enough for every particle to cross several slabs (CI time kept small).
const STEPS: u64 = 120;

/// A coupled run: fluid `collision`, `extra` config fields, 4 chains of 12 beads.
fn coupled(collision: &str, extra: &str) -> Config {
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: (8, 16, 8), particles_per_cell: 5, time_step: 0.1, collision: {collision}, \
          seed: 17, steps: {STEPS}, device: Cpu, tuning: (reorder_interval: Some(0)){extra}, \
          output: (observable_interval: 10, sample_interval: 2, equilibration_steps: 20, \
          checkpoint_interval: {STEPS}), \
          md: (steps_per_collision: 4, \
          system: Chains(n_chains: 4, chain_length: 12, bead_mass: 5.0), \
          pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [Fene(k: 30.0, r0: 1.5)], backend: Auto, \
          observable_interval: 0))"
    ))
    .expect("valid config");
    cfg.output.observable_interval = 10;
    cfg
}

/// The three runs every platform repeats.
fn cases() -> Vec<(&'static str, Config)> {
    vec![
        (
            "SRD + MBS under shear",
            coupled(
                "Srd(angle_deg: 130.0)",
                ", thermostat: Mbs, shear_rate: 0.1",
            ),
        ),
        (
            "MPC-AT+a under shear",
            coupled("MpcAt(angular_momentum: true)", ", shear_rate: 0.05"),
        ),
        (
            "walls: a moving plate, MBS",
            coupled(
                "Srd(angle_deg: 120.0)",
                ", thermostat: Mbs, walls: Slit(top_velocity: 0.2)",
            ),
        ),
        (
            "MPC-AT+a around a sphere, body force",
            coupled(
                "MpcAt(angular_momentum: true)",
                ", body_force: (0.002, 0.0, 0.0), walls: SphereObstacle(radius: 2.5)",
            ),
        ),
    ]
}

/// What a run leaves: its observables file, its checkpoint's fluid, its beads' velocities by
/// tag, and whether its summary says it was deterministic.
#[derive(PartialEq)]
struct Outcome {
    observables: String,
    fluid: FluidState,
    beads: Vec<[f64; 3]>,
    deterministic: bool,
}

fn run(cfg: &Config, dir: &Path) -> Outcome {
    let mut s = Solvent::new(cfg.clone()).unwrap();
    let mut c = Coupling::new(cfg.md.as_ref().unwrap(), &s).unwrap();
    let summary = run_job_steps(&mut s, STEPS, dir, &mut Silent, &mut c).unwrap();
    let ck = Checkpoint::load(&dir.join(CHECKPOINT_FILE)).unwrap();
    let sys = c.system().unwrap();
    let mut order: Vec<usize> = (0..sys.len()).collect();
    order.sort_unstable_by_key(|&i| sys.tag[i]);
    Outcome {
        observables: std::fs::read_to_string(dir.join(mpcbox::run::OBSERVABLES_CSV)).unwrap(),
        fluid: ck.fluid,
        beads: order.iter().map(|&i| sys.vel[i]).collect(),
        deterministic: summary.deterministic,
    }
}

/// `cfg` on `device` with `slabs` slabs and `threads` CPU threads.
fn on(cfg: &Config, device: DeviceChoice, slabs: u32, threads: usize) -> Config {
    let mut c = cfg.clone();
    c.device = device;
    c.tuning.slabs = slabs;
    c.tuning.cpu_threads = threads;
    c
}

/// A named set-up: a case's config on a device with some slabs and CPU threads.
type Setup = (String, DeviceChoice, u32, usize);

fn setup(name: &str, device: DeviceChoice, slabs: u32, threads: usize) -> Setup {
    (name.to_string(), device, slabs, threads)
}

/// Every set-up of `setups` gives the first one's outcome, bit for bit.
fn assert_identical(setups: &[Setup]) {
    for (case, cfg) in cases() {
        let dir = tempfile::tempdir().unwrap();
        let mut first: Option<(&str, Outcome)> = None;
        for (k, (name, device, slabs, threads)) in setups.iter().enumerate() {
            let made = on(&cfg, device.clone(), *slabs, *threads);
            let out = run(&made, &dir.path().join(k.to_string()));
            assert!(
                out.deterministic,
                "{case}, {name}: summary says not deterministic"
            );
            match &first {
                None => first = Some((name.as_str(), out)),
                Some((first_name, a)) => {
                    let what = format!("{case}: {name} against {first_name}");
                    assert!(
                        a.observables == out.observables,
                        "{what}: observables.csv differs"
                    );
                    assert!(
                        a.fluid == out.fluid,
                        "{what}: the checkpoint's fluid differs"
                    );
                    assert!(a.beads == out.beads, "{what}: bead velocities differ");
                }
            }
        }
    }
}

#[test]
fn cpu_runs_are_identical_for_any_threads_and_slabs() {
    assert_identical(&[
        setup("CPU, 1 thread", DeviceChoice::Cpu, 0, 1),
        setup("CPU, 3 threads", DeviceChoice::Cpu, 0, 3),
        setup("2 CPU slabs", DeviceChoice::Cpu, 2, 2),
        setup("4 CPU slabs, 1 thread", DeviceChoice::Cpu, 4, 1),
    ]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_runs_are_identical_for_any_slabs_and_twice() {
    let gpu0 = || DeviceChoice::Cuda(vec![0]);
    assert_identical(&[
        setup("1 GPU", gpu0(), 0, 0),
        setup("1 GPU again", gpu0(), 0, 0),
        setup("2 slabs on 1 GPU", gpu0(), 2, 0),
        setup("3 slabs on 1 GPU", gpu0(), 3, 0),
        setup("4 slabs on 1 GPU", gpu0(), 4, 0),
    ]);
}

/// One GPU against every count of GPUs present up to 4 (2, 3, 4), and two slabs on each of
/// two GPUs: the same bits.
#[test]
#[ignore = "needs two or more CUDA GPUs"]
fn any_number_of_gpus_runs_as_one() {
    let present = mpcbox::backend::cuda::probe().unwrap_or(0);
    if present < 2 {
        return;
    }
    let gpus = |n: u32| DeviceChoice::Cuda((0..n).collect());
    let mut setups = vec![
        setup("1 GPU", gpus(1), 0, 0),
        setup("2 GPUs", gpus(2), 0, 0),
        setup("4 slabs on 2 GPUs", gpus(2), 4, 0),
    ];
    for n in 3..=present.min(4) as u32 {
        setups.push(setup(&format!("{n} GPUs"), gpus(n), 0, 0));
    }
    assert_identical(&setups);
}

/// The fluid with host solutes (MPC-AT+a under shear, SRD+MBS between walls), 60 steps: the
/// GPU (one, or 3 slabs) returns the CPU's bits.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_gpu_follows_the_cpu_bit_for_bit() {
    for (case, mut cfg) in cases() {
        cfg.md = None;
        let solutes = common::thermal_solutes(40, [8.0, 16.0, 8.0], 5.0, 3);
        let solutes = match &cfg.walls {
            // keep them off the sphere (radius 2.5 about x = 4): into x in [0, 1)
            Some(WallsConfig::SphereObstacle { .. }) => {
                let (mut p, v, m) = solutes;
                for x in &mut p {
                    x[0] /= 8.0;
                }
                (p, v, m)
            }
            // keep them off the plates (y in [0.5, 15.5) is the channel)
            Some(_) => {
                let (mut p, v, m) = solutes;
                for x in &mut p {
                    x[1] = 1.0 + x[1] * 14.0 / 16.0;
                }
                (p, v, m)
            }
            None => solutes,
        };
        let run = |cfg: Config| {
            let mut s = Solvent::new(cfg).unwrap();
            let (pos, mut vel, mass) = solutes.clone();
            let mut reports = Vec::new();
            for _ in 0..60 {
                reports.push(s.step_with_solutes(&pos, &mut vel, &mass).unwrap());
            }
            (s.fluid_state().unwrap(), vel, format!("{reports:?}"))
        };
        let cpu = run(on(&cfg, DeviceChoice::Cpu, 0, 2));
        for (name, gpu_cfg) in [
            ("1 GPU", on(&cfg, DeviceChoice::Cuda(vec![0]), 0, 0)),
            ("3 slabs", on(&cfg, DeviceChoice::Cuda(vec![0]), 3, 0)),
        ] {
            let gpu = run(gpu_cfg);
            let (w, d) = common::compare_states(&cpu.0, &gpu.0, 1e-6, name);
            eprintln!("{case}, {name}: largest velocity difference {w:e}, {d} positions differ");
            assert!(
                cpu.0 == gpu.0,
                "{case}, {name}: the fluid differs from the CPU's"
            );
            assert!(cpu.1 == gpu.1, "{case}, {name}: solute velocities differ");
            assert!(cpu.2 == gpu.2, "{case}, {name}: step reports differ");
        }
    }
}

/// Over MPI ranks (`mpirun -np N mpcbox run`): the sheared fluid with a body force, the slit,
/// MPC-AT+a through a planar pore, a bed of spheres given as data and the coupled polymer
/// solution on 1, 2 and 3 ranks: identical `observables.csv`,
/// checkpoint fluid and bead velocities.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs OpenMPI and libclang (apt-get install openmpi-bin libopenmpi-dev libclang-dev); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn mpi_ranks_give_the_same_bits() {
    assert_ranks_give_the_same_bits("CPU", |body| body.to_string());
}

/// The same with the fluid of every rank on a GPU (packets between the ranks GPU to GPU
/// through CUDA IPC; the bundled MD on the ranks' CPUs).
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_ranks_give_the_same_bits() {
    assert_ranks_give_the_same_bits("GPU", crate::mpi_gpu::on_gpu);
}

/// The three configs of `mpi_ranks.rs`, each made by `on` (the platform), on 1, 2 and 3
/// ranks: the same bits.
fn assert_ranks_give_the_same_bits(platform: &str, on: fn(&str) -> String) {
    use crate::mpi_ranks::{mpi_mpcbox, run_config, write_config, POLYMER, SHEARED, SLIT};
    let bin = mpi_mpcbox();
    // the slit's run between other walls: MPC-AT+a through a planar pore, and a bed of
    // spheres given as data (every rank reads the file)
    let pore = SLIT
        .replace(
            "Srd(angle_deg: 120.0), thermostat: Mbs",
            "MpcAt(angular_momentum: true)",
        )
        .replace("Slit(height: 10.0)", "PlanarPore(height: 6.0, length: 4.0)");
    let bed = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sphere_bed.npy");
    let data = SLIT.replace("(8, 12, 8)", "(16, 16, 16)").replace(
        "Slit(height: 10.0)",
        &format!("DistanceField(file: {bed:?}, spacing: 1.0, kind: Mask)"),
    );
    let cases = [
        ("sheared", SHEARED),
        ("slit", SLIT),
        ("polymer", POLYMER),
        ("MPC-AT+a through a pore", pore.as_str()),
        ("a bed of spheres given as data", data.as_str()),
    ];
    for (name, body) in cases {
        let dir = tempfile::tempdir().unwrap();
        write_config(dir.path(), "c.ron", &on(body));
        let mut first: Option<(String, Checkpoint)> = None;
        for ranks in 1..=3 {
            let out = format!("r{ranks}");
            let (_, ck) = run_config(bin, ranks, dir.path(), "c.ron", &out);
            let csv = dir.path().join(&out).join(mpcbox::run::OBSERVABLES_CSV);
            let csv = std::fs::read_to_string(csv).unwrap();
            let summary = dir.path().join(&out).join(mpcbox::run::SUMMARY_JSON);
            let summary = std::fs::read_to_string(summary).unwrap();
            assert!(
                summary.contains("\"deterministic\": true"),
                "{platform}, {name}: {summary}"
            );
            match &first {
                None => first = Some((csv, ck)),
                Some((csv1, ck1)) => {
                    let what = format!("{platform}, {name}: {ranks} ranks against 1");
                    assert!(csv1 == &csv, "{what}: observables.csv differs");
                    assert!(ck1.fluid == ck.fluid, "{what}: the fluid differs");
                    let beads = |c: &Checkpoint| c.md.as_ref().map(|m| m.state.system.vel.clone());
                    assert!(beads(ck1) == beads(&ck), "{what}: bead velocities differ");
                }
            }
        }
    }
}
