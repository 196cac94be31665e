//! The scenarios: each a subcommand with its own options, measuring one thing and recording
//! one row per case. Those that name `cpu` run on the CPU backend at small sizes too, so the
//! runner itself is tested without a GPU (`bench/tests/smoke.rs`).

mod checkpoint;
mod coupling;
mod fluid;
mod gpu;
mod lammps;
mod md;
mod md_checks;
mod multi;
mod polymer;
mod polymer_parts;
mod production;
#[cfg(feature = "mpi")]
mod ranks;
mod rules;
mod sums;
mod walls;

use std::path::Path;
use std::time::Instant;

use clap::Subcommand;
use serde_json::{json, Value};

use mpcbox::backend::Backend;
use mpcbox::config::DeviceChoice;
use mpcbox::physics::Physics;

use crate::machine::{self, Machine};
use crate::record::Recorder;
use crate::Res;

/// Every scenario: name, what it measures, where it runs.
pub const LIST: &[(&str, &str, &str)] = &[
    (
        "fluid",
        "the MPC step through the Solvent API, without and with shear",
        "cpu, gpu",
    ),
    (
        "gpu",
        "the CUDA backend's cell-sum methods against the copy roofline; phases",
        "gpu",
    ),
    (
        "rules",
        "the collision rules' cost per step relative to SRD",
        "cpu, gpu",
    ),
    (
        "walls",
        "walls' cost per step relative to the same box without walls",
        "cpu, gpu",
    ),
    (
        "sums",
        "fixed-point sums (the same bits on any decomposition) against f64 sums",
        "cpu, gpu",
    ),
    (
        "multi",
        "GPU-to-GPU copies; strong and weak scaling over GPUs",
        "gpus",
    ),
    (
        "coupling",
        "the coupled step's overhead over the plain step, per solute density",
        "cpu, gpu",
    ),
    (
        "md",
        "the bundled MD engine on an LJ liquid (LAMMPS beside it where `lmp` runs)",
        "cpu, gpu",
    ),
    (
        "md-drift",
        "energy drift of an NVE LJ liquid per 10⁶ steps",
        "cpu",
    ),
    (
        "md-crossover",
        "all pairs against Verlet lists for small systems",
        "cpu",
    ),
    (
        "polymer",
        "a polymer solution: coupled run against the fluid alone and the MD alone",
        "cpu, gpu",
    ),
    (
        "lammps",
        "LAMMPS with fix mpcbox: a collision split into MD, exchange and fluid",
        "cpu, gpu, mpi",
    ),
    (
        "checkpoint",
        "a checkpoint's write and a resume's read against the disk's direct-I/O rates",
        "cpu, gpu",
    ),
    (
        "production",
        "the mpcbox command's runs: start-up, stepping with checkpoints, resumes, beside the disk",
        "cpu, gpus",
    ),
    (
        "ranks",
        "the fluid over MPI ranks against one process (built with --features mpi)",
        "gpus, mpi",
    ),
];

#[derive(Subcommand)]
pub enum Scenario {
    /// The MPC step through the Solvent API (particle-steps/s), without and with shear.
    Fluid(fluid::Args),
    /// The CUDA backend's cell-sum methods: particle-steps/s, the copy roofline, phases.
    Gpu(gpu::Args),
    /// The collision rules' cost per step relative to SRD.
    Rules(rules::Args),
    /// Walls' cost per step relative to the same box without walls.
    Walls(walls::Args),
    /// Fixed-point sums against f64 sums, per rule and a slit.
    Sums(sums::Args),
    /// GPU-to-GPU copy rates; strong and weak scaling of the slab decomposition.
    Multi(multi::Args),
    /// The coupled step's overhead over the plain fluid step, per solute density.
    Coupling(coupling::Args),
    /// The bundled MD engine on an LJ liquid: atom-steps/s (LAMMPS beside it on the CPU).
    Md(md::Args),
    /// Energy drift of an NVE LJ liquid per 10⁶ steps.
    MdDrift(md_checks::DriftArgs),
    /// All pairs against Verlet lists for small systems (`neighbor::ALL_PAIRS_CROSSOVER`).
    MdCrossover(md_checks::CrossoverArgs),
    /// A polymer solution end to end: the coupled run against its parts.
    Polymer(polymer::Args),
    /// LAMMPS with fix mpcbox (lmp_mpcbox): a collision split into MD, exchange and fluid.
    Lammps(lammps::Args),
    /// A checkpoint's write and a resume's read against the disk's direct-I/O rates.
    Checkpoint(checkpoint::Args),
    /// Production runs of the `mpcbox` command: start-up, stepping with and without
    /// checkpoints, resumes, the largest boxes, beside the disk's direct-I/O rates.
    Production(production::Args),
    /// The fluid over MPI ranks against one process (`mpirun -np R mpcbox-bench ranks`).
    #[cfg(feature = "mpi")]
    Ranks(ranks::Args),
}

impl Scenario {
    pub fn run(self, records: Option<&Path>) -> Res<()> {
        match self {
            Scenario::Fluid(a) => fluid::run(a, records),
            Scenario::Gpu(a) => gpu::run(a, records),
            Scenario::Rules(a) => rules::run(a, records),
            Scenario::Walls(a) => walls::run(a, records),
            Scenario::Sums(a) => sums::run(a, records),
            Scenario::Multi(a) => multi::run(a, records),
            Scenario::Coupling(a) => coupling::run(a, records),
            Scenario::Md(a) => md::run(a, records),
            Scenario::MdDrift(a) => md_checks::drift(a, records),
            Scenario::MdCrossover(a) => md_checks::crossover(a, records),
            Scenario::Polymer(a) => polymer::run(a, records),
            Scenario::Lammps(a) => lammps::run(a, records),
            Scenario::Checkpoint(a) => checkpoint::run(a, records),
            Scenario::Production(a) => production::run(a, records),
            #[cfg(feature = "mpi")]
            Scenario::Ranks(a) => ranks::run(a, records),
        }
    }
}

/// `--device`: auto, cpu, all, cuda:N[,M...].
pub fn device(text: &str) -> Res<DeviceChoice> {
    DeviceChoice::parse_cli(text).map_err(|e| e.to_string())
}

/// The GPUs a device choice names (None: the CPU; `auto` takes GPU 0 where there is one).
pub fn gpus_of(device: &DeviceChoice) -> Option<Vec<usize>> {
    let present = mpcbox::backend::cuda::probe().ok();
    match device {
        DeviceChoice::Cpu => None,
        DeviceChoice::Cuda(ids) => Some(ids.iter().map(|&i| i as usize).collect()),
        DeviceChoice::AllGpus => present.map(|n| (0..n).collect()),
        DeviceChoice::Auto => present.filter(|&n| n > 0).map(|_| vec![0]),
    }
}

/// A recorder for `scenario` on `device`, with the run's hardware references measured: the
/// device copy of its first GPU and, on several GPUs, the peer copy from GPU 0 to GPU 1; or the
/// host memory copy on the CPU.
pub fn recorder(scenario: &str, device: &DeviceChoice, records: Option<&Path>) -> Recorder {
    let gpus = gpus_of(device).unwrap_or_default();
    let mut rec = Recorder::new(scenario, Machine::detect(device, gpus.len()), records);
    if rec.machine().gpus_used > 0 {
        rec.reference("device copy GB/s", machine::device_copy_gbps(gpus[0]));
        if rec.machine().gpus_used > 1 {
            rec.reference("peer copy GB/s", machine::peer_copy_gbps());
        }
    } else {
        rec.reference("host copy GB/s", machine::host_copy_gbps());
    }
    rec
}

/// A cubic box as a table cell: "64³".
pub fn cube(l: u32) -> Value {
    json!(format!("{l}³"))
}

/// Any error as the scenario's message.
pub fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Seconds per step of `phys` on `be` through `Backend::step` (which waits for each step's
/// report, as a coupled MD loop does): reorder every 20 steps, the stress measured every
/// `stress_every`-th step (0: never), after `warmup` steps (at least one reorder).
pub fn seconds_per_step(
    be: &mut dyn Backend,
    phys: &Physics,
    warmup: u64,
    steps: u64,
    stress_every: u64,
) -> Res<f64> {
    let plan = |s: u64| {
        let measure = stress_every > 0 && s.is_multiple_of(stress_every);
        phys.plan(s, measure, (s + 1).is_multiple_of(20))
    };
    let warmup = warmup.max(20);
    for s in 0..warmup {
        be.step(&plan(s), None).map_err(err)?;
    }
    let t = Instant::now();
    let mut last = None;
    for s in warmup..warmup + steps {
        last = Some(be.step(&plan(s), None).map_err(err)?);
    }
    let dt = t.elapsed().as_secs_f64() / steps.max(1) as f64;
    match last {
        Some(r) if !(r.relative_energy.is_finite() && r.relative_dof > 0.0) => {
            Err(format!("the step's report is not finite: {r:?}"))
        }
        _ => Ok(dt),
    }
}
