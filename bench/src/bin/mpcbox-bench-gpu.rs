//! GPU throughput of the CUDA backend: particle-steps per second for cubic boxes (default 64³,
//! 128³, 256³ cells × 10 particles, SRD 130°, h = 0.1, grid shift), with and without the MBS
//! thermostat and Lees-Edwards shear, for each cell-sum method; plus the device-to-device copy
//! bandwidth and the achieved fraction of the roofline given the bytes each particle-step moves.
//!
//! Usage: mpcbox-bench-gpu [--sizes 64,128,256] [--steps 20] [--warmup 5] [--methods atomics,list]

use std::time::Instant;

use clap::Parser;
use mpcbox::backend::cuda::{CellSumMethod, CudaBackend, CudaDevice, PHASE_NAMES};
use mpcbox::backend::Backend;
use mpcbox::config::{Config, Thermostat};
use mpcbox::physics::Physics;

#[derive(Parser)]
struct Args {
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
    /// Also print a per-phase time breakdown (synchronised phases) at this box edge.
    #[arg(long, default_value_t = 128)]
    profile_size: u32,
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

fn config(l: u32, m: u32, mbs: bool, shear: bool) -> Config {
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({l}, {l}, {l}), particles_per_cell: {m}, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), steps: 100, device: Cuda([0]))"
    ))
    .expect("bench config is valid");
    cfg.thermostat = if mbs {
        Thermostat::Mbs
    } else {
        Thermostat::None
    };
    cfg.shear_rate = if shear { 0.01 } else { 0.0 };
    cfg.grid_shift = true;
    cfg.seed = 12345;
    cfg
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

fn main() {
    let args = Args::parse();
    let methods: Vec<CellSumMethod> = args
        .methods
        .iter()
        .map(|s| CellSumMethod::parse(s).unwrap_or_else(|| panic!("unknown method {s}")))
        .collect();
    let bw = print_device(args.device);
    let mut profiles: Vec<String> = Vec::new();
    println!(
        "default method: {} (MPCBOX_CUDA_METHOD selects another)",
        CellSumMethod::DEFAULT.name()
    );
    println!();
    println!("| cells | particles | method | MBS | shear | Mparticle-steps/s | ms/step | bytes/particle-step | roofline Mp-steps/s | achieved/roofline | Mp-steps/s via Backend::step (sync each step) |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for &l in &args.sizes {
        for &method in &methods {
            bench_method(&args, l, method, bw, &mut profiles);
        }
    }
    if !profiles.is_empty() {
        println!();
        println!("Per-phase time, ms per step (each phase synchronised):");
        println!();
        println!("| cells | method | MBS | shear | phases |");
        println!("|---|---|---|---|---|");
        for p in profiles {
            println!("{p}");
        }
    }
}

/// Prints the GPU and its device-to-device copy bandwidth (bytes/s, returned); exits when the
/// GPU cannot be opened.
fn print_device(ordinal: usize) -> f64 {
    let dev = match CudaDevice::open(ordinal) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let device = dev.describe();
    let bw = dev
        .copy_bandwidth(1 << 30, 20)
        .expect("device-to-device copy");
    drop(dev);
    println!("device: {device}");
    println!(
        "device-to-device copy: {:.0} GB/s (bytes read + written, 1 GiB buffers)",
        bw / 1e9
    );
    println!();
    bw
}

/// One box edge and cell-sum method: a table row per thermostat and shear variant (the
/// per-phase split into `profiles` at the profiling size).
fn bench_method(args: &Args, l: u32, method: CellSumMethod, bw: f64, profiles: &mut Vec<String>) {
    let base = config(l, args.m, false, false);
    let n_fluid = base.n_fluid();
    let phys = Physics::from_config(&base);
    // the initial state is generated on the GPU (bit-equal to FluidState::initial)
    let t0 = Instant::now();
    let mut be = match CudaBackend::open(&base, &phys, None, args.device, method) {
        Ok(b) => b,
        Err(e) => {
            println!(
                "| {l}³ | {n_fluid} | {} | - | - | error: {e} | | | | | |",
                method.name()
            );
            return;
        }
    };
    eprintln!(
        "{l}^3 {}: opened with a GPU-generated initial state of {n_fluid} particles in {:.2} s",
        method.name(),
        t0.elapsed().as_secs_f64()
    );
    for (mbs, shear) in [(false, false), (true, false), (false, true), (true, true)] {
        let cfg = config(l, args.m, mbs, shear);
        let phys = Physics::from_config(&cfg);
        be.set_physics(phys.clone()).unwrap();
        let t = time_variant(args, &mut be, &phys, shear, l == args.profile_size);
        let yes_no = |on: bool| if on { "yes" } else { "no" };
        if let Some(ph) = t.phases {
            let parts: Vec<String> = PHASE_NAMES
                .iter()
                .zip(ph)
                .map(|(name, t)| format!("{name} {:.3}", t * 1e3 / args.steps as f64))
                .collect();
            profiles.push(format!(
                "| {l}³ | {} | {} | {} | {} |",
                method.name(),
                yes_no(mbs),
                yes_no(shear),
                parts.join(" · ")
            ));
        }
        let n = n_fluid as f64;
        let rate = n * args.steps as f64 / t.queued_s;
        let bytes = bytes_per_particle_step(method, shear, args.m, args.reorder);
        let roof = bw / bytes;
        println!(
            "| {l}³ | {} | {} | {} | {} | {:.0} | {:.3} | {:.0} | {:.0} | {:.2} | {:.0} |",
            n_fluid,
            method.name(),
            yes_no(mbs),
            yes_no(shear),
            rate / 1e6,
            t.queued_s * 1e3 / args.steps as f64,
            bytes,
            roof / 1e6,
            rate / roof,
            n * args.steps as f64 / t.synced_s / 1e6
        );
    }
}

/// Seconds for `args.steps` steps of one variant.
struct VariantTimes {
    /// Steps enqueued back to back, one synchronisation at the end.
    queued_s: f64,
    /// Through `Backend::step`, which waits for each step's report.
    synced_s: f64,
    /// Per-phase seconds of a profiled repeat, when asked for.
    phases: Option<Vec<f64>>,
}

#[allow(clippy::manual_is_multiple_of)] // rust-version 1.80
fn time_variant(
    args: &Args,
    be: &mut CudaBackend,
    phys: &Physics,
    shear: bool,
    profile: bool,
) -> VariantTimes {
    let plan = |step: u64| {
        let reorder = args.reorder > 0 && (step + 1) % args.reorder == 0;
        // under shear the stress is measured on sampled steps, as Solvent does
        // with the default output.sample_interval
        let measure = shear && args.stress_every > 0 && step % args.stress_every == 0;
        phys.plan(step, measure, reorder)
    };
    // warm up past at least one reorder, so every variant starts cell-ordered
    let warmup = args.warmup.max(args.reorder);
    for step in 0..warmup {
        be.enqueue_step(&plan(step)).unwrap();
    }
    be.synchronize().unwrap();
    let t = Instant::now();
    for step in warmup..warmup + args.steps {
        be.enqueue_step(&plan(step)).unwrap();
    }
    be.synchronize().unwrap();
    let queued_s = t.elapsed().as_secs_f64();
    let r = be.read_report().unwrap();
    let p1 = warmup + args.steps;
    let t = Instant::now();
    for step in p1..p1 + args.steps {
        Backend::step(be, &plan(step), None).unwrap();
    }
    let synced_s = t.elapsed().as_secs_f64();
    let phases = profile.then(|| {
        be.set_profiling(true);
        let p0 = warmup + 2 * args.steps;
        for step in p0..p0 + args.steps {
            be.enqueue_step(&plan(step)).unwrap();
        }
        be.synchronize().unwrap();
        let ph = be.phase_seconds();
        be.set_profiling(false);
        ph.to_vec()
    });
    assert!(r.relative_energy.is_finite() && r.relative_dof > 0.0);
    VariantTimes {
        queued_s,
        synced_s,
        phases,
    }
}
