//! `gpu`: throughput of the CUDA backend for cubic boxes (default 64³, 128³, 256³ cells × 10,
//! SRD 130°, h = 0.1, grid shift), with and without the MBS thermostat and Lees-Edwards shear,
//! for each cell-sum method; the achieved fraction of the roofline given the bytes each
//! particle-step moves over the device copy bandwidth measured in the same run; and a
//! per-phase split at one size.

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use mpcbox::backend::cuda::{CellSumMethod, CudaBackend, PHASE_NAMES};
use mpcbox::backend::Backend;
use mpcbox::config::{Config, DeviceChoice, Thermostat};
use mpcbox::physics::Physics;

use super::{cube, err};
use crate::machine::{self, Machine};
use crate::record::Recorder;
use crate::Res;

#[derive(clap::Args)]
pub struct Args {
    /// Edge lengths of the cubic boxes, in cells.
    #[arg(long, value_delimiter = ',', default_value = "64,128,256")]
    sizes: Vec<u32>,
    /// Particles per cell.
    #[arg(long, default_value_t = 10)]
    m: u32,
    /// Timed steps per variant.
    #[arg(long, default_value_t = 20)]
    steps: u64,
    /// Untimed steps before timing.
    #[arg(long, default_value_t = 5)]
    warmup: u64,
    /// Cell-sum methods to measure.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "atomics,warp,shared,list,fused,fused-shared"
    )]
    methods: Vec<String>,
    /// Steps between reorderings (as tuning.reorder_interval; 0: never).
    #[arg(long, default_value_t = 20)]
    reorder: u64,
    /// Under shear, measure the xy stress every this many steps (1: every step, which
    /// prevents the fused pass on every step; 10: Solvent's default sampling).
    #[arg(long, default_value_t = 10)]
    stress_every: u64,
    /// Also record a per-phase time split (synchronised phases) at this box edge.
    #[arg(long, default_value_t = 128)]
    profile_size: u32,
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

fn config(l: u32, m: u32, mbs: bool, shear: bool) -> Res<Config> {
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({l}, {l}, {l}), particles_per_cell: {m}, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), steps: 100, device: Cuda([0]))"
    ))
    .map_err(err)?;
    cfg.thermostat = if mbs {
        Thermostat::Mbs
    } else {
        Thermostat::None
    };
    cfg.shear_rate = if shear { 0.01 } else { 0.0 };
    cfg.grid_shift = true;
    cfg.seed = 12345;
    Ok(cfg)
}

/// DRAM bytes one particle-step moves at least, as counted for the roofline: particle arrays
/// (stream+bin: read/write 36 B, write the 4-B cell word; collide: read the cell word, read and
/// write 24 B of velocity, and 12 B of position when the stress is measured), the cell buffer
/// (zero 64 B, read 48 B of sums, write 64 B of parameters, read 64 B in the collision: 240 B
/// per cell over M particles), the amortised reorder (about 150 B per particle), and for the
/// list method the list (4 B next written, 36 B of random reads per particle); the fused
/// method saves the second pass over the particles when the stress is not measured.
fn bytes_per_particle_step(method: CellSumMethod, stress: bool, m: u32, reorder: u64) -> f64 {
    let mut b = 76.0 + 52.0;
    if stress {
        b += 12.0;
    }
    let cell = match method {
        CellSumMethod::List => 8.0 + 48.0 + 48.0 + 64.0 + 64.0,
        _ => 240.0,
    };
    b += cell / m as f64;
    if method == CellSumMethod::List {
        b += 40.0;
    }
    // fused (when the stress is not measured): one pass reads pos, vel and the cell word and
    // writes them once (80 B) instead of the separate collision pass (52 B more)
    let fused = matches!(method, CellSumMethod::Fused | CellSumMethod::FusedShared);
    if fused && !stress {
        b -= 48.0;
    }
    if reorder > 0 {
        b += 150.0 / reorder as f64;
    }
    b
}

pub fn run(a: Args, records: Option<&Path>) -> Res<()> {
    let methods: Vec<CellSumMethod> = a
        .methods
        .iter()
        .map(|s| {
            CellSumMethod::parse(s).ok_or_else(|| {
                format!("--methods: `{s}` is no cell-sum method; fix: atomics, warp, shared, list, fused or fused-shared")
            })
        })
        .collect::<Res<_>>()?;
    mpcbox::backend::cuda::probe()
        .map_err(|why| format!("the gpu scenario needs a CUDA GPU: {why}"))?;
    let device = DeviceChoice::Cuda(vec![a.device as u32]);
    let mut rec = Recorder::new("gpu", Machine::detect(&device, 1), records);
    let bw = machine::device_copy_gbps(a.device);
    rec.reference("device copy GB/s", bw.clone());
    let bw = bw? * 1e9;
    for &l in &a.sizes {
        for &method in &methods {
            bench_method(&a, l, method, bw, &mut rec)?;
        }
    }
    Ok(())
}

/// One box edge and cell-sum method: a row per thermostat and shear variant (and the
/// per-phase split at the profiling size).
fn bench_method(a: &Args, l: u32, method: CellSumMethod, bw: f64, rec: &mut Recorder) -> Res<()> {
    let base = config(l, a.m, false, false)?;
    let n_fluid = base.n_fluid();
    let phys = Physics::from_config(&base);
    // the initial state is generated on the GPU (bit-equal to FluidState::initial)
    let t0 = Instant::now();
    let mut be = CudaBackend::open(&base, &phys, None, a.device, method).map_err(err)?;
    eprintln!(
        "{l}^3 {}: opened with a GPU-generated initial state of {n_fluid} particles in {:.2} s",
        method.name(),
        t0.elapsed().as_secs_f64()
    );
    for (mbs, shear) in [(false, false), (true, false), (false, true), (true, true)] {
        let cfg = config(l, a.m, mbs, shear)?;
        let phys = Physics::from_config(&cfg);
        be.set_physics(phys.clone()).map_err(err)?;
        let t = time_variant(a, &mut be, &phys, shear, l == a.profile_size)?;
        let case = [
            ("cells", cube(l)),
            ("particles", json!(n_fluid)),
            ("method", json!(method.name())),
            ("MBS", json!(mbs)),
            ("shear", json!(shear)),
        ];
        let n = n_fluid as f64;
        let rate = n * a.steps as f64 / t.queued_s;
        let bytes = bytes_per_particle_step(method, shear, a.m, a.reorder);
        let roof = bw / bytes;
        rec.row(
            &case,
            &[
                ("Mparticle-steps/s", rate / 1e6),
                ("ms/step", t.queued_s * 1e3 / a.steps as f64),
                ("bytes/particle-step", bytes),
                ("roofline Mparticle-steps/s", roof / 1e6),
                ("achieved/roofline", rate / roof),
                (
                    "Mparticle-steps/s, synchronised each step",
                    n * a.steps as f64 / t.synced_s / 1e6,
                ),
            ],
        )?;
        if let Some(ph) = t.phases {
            let figures: Vec<(&str, f64)> = PHASE_NAMES
                .iter()
                .zip(ph)
                .map(|(name, s)| (*name, s * 1e3 / a.steps as f64))
                .collect();
            let mut case = case.to_vec();
            case.push(("split", json!("ms/step per phase")));
            rec.row(&case, &figures)?;
        }
    }
    Ok(())
}

/// Seconds for `steps` steps of one variant.
struct VariantTimes {
    /// Steps enqueued back to back, one synchronisation at the end.
    queued_s: f64,
    /// Through `Backend::step`, which waits for each step's report.
    synced_s: f64,
    /// Per-phase seconds of a profiled repeat, when asked for.
    phases: Option<Vec<f64>>,
}

fn time_variant(
    a: &Args,
    be: &mut CudaBackend,
    phys: &Physics,
    shear: bool,
    profile: bool,
) -> Res<VariantTimes> {
    let plan = |step: u64| {
        let reorder = a.reorder > 0 && (step + 1).is_multiple_of(a.reorder);
        // under shear the stress is measured on sampled steps, as Solvent does with the
        // default output.sample_interval
        let measure = shear && a.stress_every > 0 && step.is_multiple_of(a.stress_every);
        phys.plan(step, measure, reorder)
    };
    // warm up past at least one reorder, so every variant starts cell-ordered
    let warmup = a.warmup.max(a.reorder);
    for step in 0..warmup {
        be.enqueue_step(&plan(step)).map_err(err)?;
    }
    be.synchronize().map_err(err)?;
    let t = Instant::now();
    for step in warmup..warmup + a.steps {
        be.enqueue_step(&plan(step)).map_err(err)?;
    }
    be.synchronize().map_err(err)?;
    let queued_s = t.elapsed().as_secs_f64();
    let r = be.read_report().map_err(err)?;
    let p1 = warmup + a.steps;
    let t = Instant::now();
    for step in p1..p1 + a.steps {
        Backend::step(be, &plan(step), None).map_err(err)?;
    }
    let synced_s = t.elapsed().as_secs_f64();
    let phases = if profile {
        be.set_profiling(true);
        let p0 = warmup + 2 * a.steps;
        for step in p0..p0 + a.steps {
            be.enqueue_step(&plan(step)).map_err(err)?;
        }
        be.synchronize().map_err(err)?;
        let ph = be.phase_seconds().to_vec();
        be.set_profiling(false);
        Some(ph)
    } else {
        None
    };
    if !(r.relative_energy.is_finite() && r.relative_dof > 0.0) {
        return Err(format!("the step's report is not finite: {r:?}"));
    }
    Ok(VariantTimes {
        queued_s,
        synced_s,
        phases,
    })
}
