//! `mpcbox-bench-polymer`: a polymer solution end to end, the coupled run against its parts.
//! Kremer-Grest chains (FENE + WCA, bead mass 10) in an SRD solvent (M = 10, h = 0.1, MBS),
//! 10 MD steps per collision. Three timings on the same system: the fluid alone (MPC steps),
//! the GPU MD engine alone (MD steps), and the coupled run (`md::coupled::Coupling`, as
//! `mpcbox run` does it). Default: 128³ cells, 4096 chains of 50 beads (0.1 beads per cell),
//! 200 collisions — the system of the coupling issue. `--shear-rate` runs all three under
//! Lees-Edwards shear (compare with the same command without it for the shear's cost), and
//! `--sample-interval k` measures the stress (fluid and solutes) every k collisions as a
//! sheared `mpcbox run` does (default 10 there; 0 here: never).
//!
//! Built with `--features mpi` it runs under `mpirun -np R` too: the fluid and the decomposed
//! MD over the ranks' slabs (rank 0 prints; the MD alone is not timed over ranks).

use std::time::Instant;

use clap::Parser;
use mpcbox::config::{Config, DeviceChoice};
use mpcbox::md::coupled::Coupling;
use mpcbox::md::{GpuMd, Md, MdConfig};
use mpcbox::Solvent;

#[derive(Parser)]
#[command(about = "Polymer solution: coupled run vs fluid alone and MD alone")]
struct Args {
    /// Box edge in cells.
    #[arg(long, default_value_t = 128)]
    cells: u32,
    #[arg(long, default_value_t = 4096)]
    chains: u32,
    #[arg(long, default_value_t = 50)]
    chain_length: u32,
    /// Bead diameter σ in cells (WCA σ; bond length 0.97 σ, FENE k = 30/σ², r0 = 1.5 σ):
    /// below 1 for dense solutions (0.7 beads per cell places at σ = 0.5, not at 1).
    #[arg(long, default_value_t = 1.0)]
    bead_size: f64,
    /// Timed collisions (MPC steps); MD steps are 10 per collision.
    #[arg(long, default_value_t = 200)]
    collisions: u64,
    /// Untimed collisions first (kernel compilation, first reorders).
    #[arg(long, default_value_t = 20)]
    warmup: u64,
    /// Fluid device: cuda:0, cuda:0,1, all, cpu.
    #[arg(long, default_value = "cuda:0")]
    device: String,
    /// Lees-Edwards shear rate of fluid and chains (0: no shear).
    #[arg(long, default_value_t = 0.0)]
    shear_rate: f64,
    /// Collisions between stress samples under shear (0: none, as without shear).
    #[arg(long, default_value_t = 0)]
    sample_interval: u64,
    /// y slabs of the fluid (and of the decomposed MD) over the GPUs (0: one per GPU); more
    /// slabs than GPUs put several on one GPU.
    #[arg(long, default_value_t = 0)]
    slabs: u32,
    /// After the tables: the MD steps of the coupled loop timed phase by phase (each phase
    /// waited for, so the sum exceeds the MD part above), where the engine times them (the
    /// GPU engine, on one GPU or decomposed over slabs).
    #[arg(long)]
    profile_md: bool,
    /// After the tables: where the host's time goes in the MD steps of the coupled loop (not
    /// profiled phase by phase, so nothing extra waits), where the engine times it (the
    /// decomposed GPU engine).
    #[arg(long)]
    host_md: bool,
    /// Time the coupled run only (the fluid alone, the MD alone and the breakdown print NaN):
    /// for A/B runs of one setting, at a third of the set-up time.
    #[arg(long)]
    only_coupled: bool,
    /// After the tables: what a stress sample costs, part by part, in the coupled loop driven
    /// by hand (each part waited for): the MD steps with and without energies, the solutes'
    /// pressure (first call, then again), their conformation, the collision of a measured
    /// step against an unmeasured one, and the fluid's moments. Needs --sample-interval.
    #[arg(long)]
    sample_parts: bool,
}

const STEPS_PER_COLLISION: u64 = 10;

fn config(a: &Args, device: DeviceChoice) -> Config {
    let l = a.cells;
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({l}, {l}, {l}), particles_per_cell: 10, time_step: 0.1, \
         collision: Srd(angle_deg: 130.0), thermostat: Mbs, seed: 3, steps: 1, \
         md: (steps_per_collision: {STEPS_PER_COLLISION}, \
              system: Chains(n_chains: {}, chain_length: {}, bead_mass: 10.0, bond_length: {:?}), \
              pair: Wca(epsilon: 1.0, sigma: {:?}), bonds: [Fene(k: {:?}, r0: {:?})], \
              thermostat: None, skin: 0.3, neighbor: Auto, reorder_every: 20, \
              backend: Cuda, trajectory_interval: 0, observable_interval: 0))",
        a.chains,
        a.chain_length,
        0.97 * a.bead_size,
        a.bead_size,
        30.0 / (a.bead_size * a.bead_size),
        1.5 * a.bead_size
    ))
    .unwrap_or_else(|e| fail(&format!("config: {e}")));
    cfg.device = device;
    cfg.shear_rate = a.shear_rate;
    cfg.tuning.slabs = a.slabs;
    cfg.output.observable_interval = 0;
    if a.sample_interval > 0 {
        cfg.output.equilibration_steps = 0;
        cfg.output.sample_interval = a.sample_interval;
    } else {
        cfg.output.equilibration_steps = u64::MAX;
    }
    cfg
}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(2)
}

/// The coupled loop's engine (one GPU, or decomposed over the slabs) driven by hand, without
/// observables: seconds in the MD steps and in the collisions.
fn breakdown(a: &Args, cfg: &Config, md: &Md) -> Option<(f64, f64)> {
    let md_cfg = cfg.md.clone()?;
    let mut solvent = Solvent::new(cfg.clone()).ok()?;
    let mut coupling = Coupling::with_md(&md_cfg, &solvent, md.clone()).ok()?;
    let g = coupling.engine_mut();
    let (mut t_md, mut t_fluid) = (0.0, 0.0);
    for k in 0..a.warmup + a.collisions {
        if k == a.warmup && (a.profile_md || a.host_md) {
            // switching starts the host's timers afresh
            g.set_profiling(a.profile_md);
        }
        let t = Instant::now();
        g.advance(STEPS_PER_COLLISION, false).ok()?;
        g.synchronize().ok()?;
        let t1 = Instant::now();
        g.collide(&mut solvent).ok()?;
        if k >= a.warmup {
            t_md += (t1 - t).as_secs_f64();
            t_fluid += t1.elapsed().as_secs_f64();
        }
    }
    if a.profile_md && mpcbox::ranks::is_root() {
        let phases = g.phase_seconds();
        if phases.is_empty() {
            println!("\nMD phases: this engine does not time them");
        } else {
            let steps = (a.collisions * STEPS_PER_COLLISION) as f64;
            println!("\n| MD phase | s | µs per MD step |\n|---|---|---|");
            for (name, sec) in phases {
                println!("| {name} | {sec:.3} | {:.1} |", 1e6 * sec / steps);
            }
        }
    }
    if a.host_md && mpcbox::ranks::is_root() {
        let steps = (a.collisions * STEPS_PER_COLLISION) as f64;
        let host = g.host_seconds();
        if host.is_empty() {
            println!("\nMD host times: this engine does not take them");
        } else {
            println!("\n| MD, host's time | s | µs per MD step |\n|---|---|---|");
            for (name, sec) in host {
                println!("| {name} | {sec:.3} | {:.1} |", 1e6 * sec / steps);
            }
        }
    }
    Some((t_md, t_fluid))
}

fn main() {
    let _mpi = mpcbox::ranks::init();
    let a = Args::parse();
    let device = DeviceChoice::parse_cli(&a.device).unwrap_or_else(|e| fail(&e.to_string()));
    let cfg = config(&a, device);
    let md_cfg = cfg.md.clone().unwrap_or_else(|| fail("no md section"));
    let (fluid_s, fluid_desc) = match a.only_coupled {
        true => (f64::NAN, "not timed alone".to_string()),
        false => time_fluid_alone(&a, &cfg),
    };
    let ordinal = match &cfg.device {
        DeviceChoice::Cuda(ids) if !ids.is_empty() => ids[0] as usize,
        _ => 0,
    };
    // the chains placed and the engine built once, then cloned for each timing (11.5 M beads
    // took ~40 s to place and ~45 s per build on the host)
    let sys = md_cfg.system(&cfg).unwrap_or_else(|e| fail(&e.to_string()));
    let md = md_cfg
        .build_with(&cfg, sys)
        .unwrap_or_else(|e| fail(&e.to_string()));
    let (md_s, beads) = if mpcbox::ranks::size() > 1 || a.only_coupled {
        (f64::NAN, md.sys.len())
    } else {
        time_md_alone(&a, &md, ordinal)
    };
    let (coupled_s, n_fluid, path) = time_coupled(&a, &cfg, &md_cfg, md.clone());

    // Where the coupled time goes: the same loop by hand, MD and collision timed apart (each
    // followed by a synchronisation, and never overlapped, so the sum exceeds the plain loop).
    let (md_part, fluid_part) = match a.only_coupled {
        true => (f64::NAN, f64::NAN),
        false => breakdown(&a, &cfg, &md).unwrap_or((f64::NAN, f64::NAN)),
    };
    let parts = match a.sample_parts && a.sample_interval > 0 {
        true => sample_parts(&a, &cfg, &md),
        false => None,
    };
    if !mpcbox::ranks::is_root() {
        return;
    }

    println!(
        "| cells | fluid particles | beads | collisions | fluid alone s | MD alone s | coupled s | coupled / (fluid + MD) | in coupled: MD s, collision s | path |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {0}³ | {n_fluid} | {beads} | {1} | {fluid_s:.3} | {md_s:.3} | {coupled_s:.3} | {2:.2} | {md_part:.3}, {fluid_part:.3} | {path} |",
        a.cells,
        a.collisions,
        coupled_s / (fluid_s + md_s),
    );
    println!(
        "\nfluid: {fluid_desc}; {} MPI rank(s); shear rate {}, stress sampled every {} \
         collisions",
        mpcbox::ranks::size(),
        a.shear_rate,
        if a.sample_interval > 0 {
            a.sample_interval.to_string()
        } else {
            "∞".into()
        }
    );
    if let Some(p) = parts {
        println!("\n| part of the coupled step (each waited for) | unsampled ms | sampled ms |");
        println!("|---|---|---|");
        for (name, [plain, sampled]) in p {
            println!("| {name} | {plain:.3} | {sampled:.3} |");
        }
    }
}

/// Milliseconds per call of each part of the coupled step on unsampled and sampled steps (the
/// loop of `Coupling::step` by hand, without the overlap, each part waited for).
fn sample_parts(a: &Args, cfg: &Config, md: &Md) -> Option<Vec<(&'static str, [f64; 2])>> {
    let md_cfg = cfg.md.clone()?;
    let mut solvent = Solvent::new(cfg.clone()).ok()?;
    let mut coupling = Coupling::with_md(&md_cfg, &solvent, md.clone()).ok()?;
    let g = coupling.engine_mut();
    const NAMES: [&str; 6] = [
        "MD steps of one collision",
        "solutes' conformation (decomposed: after a gather)",
        "solutes' pressure (decomposed: from the gathered slab)",
        "solutes' pressure alone (decomposed: per slab, no gather)",
        "collision (fluid step with the solutes)",
        "fluid moments (after the collision)",
    ];
    let mut sums = [[0.0f64; 2]; 6];
    let mut calls = [0u32; 2];
    let ms = |t: Instant| 1e3 * t.elapsed().as_secs_f64();
    for k in 0..a.warmup + a.collisions {
        let sampled = solvent.sampled_next() && solvent.stress_measured_next();
        let measure = solvent.stress_measured_next();
        let mut t = [0.0f64; 6];
        let t0 = Instant::now();
        g.advance(STEPS_PER_COLLISION, measure).ok()?;
        g.synchronize().ok()?;
        t[0] = ms(t0);
        if sampled {
            // as a measured step that is not sampled takes it: the pressure alone (decomposed:
            // per slab); then in `Coupling::step`'s order on a sample, the conformation and
            // the pressure
            let t3 = Instant::now();
            g.solute_pressure(a.shear_rate).ok()?;
            t[3] = ms(t3);
            let t1 = Instant::now();
            g.conformation().ok()?;
            t[1] = ms(t1);
            let t2 = Instant::now();
            g.solute_pressure(a.shear_rate).ok()?;
            t[2] = ms(t2);
        }
        let t4 = Instant::now();
        g.collide(&mut solvent).ok()?;
        g.synchronize().ok()?;
        t[4] = ms(t4);
        let t5 = Instant::now();
        solvent.moments().ok()?;
        t[5] = ms(t5);
        if k >= a.warmup {
            let c = sampled as usize;
            calls[c] += 1;
            for (s, x) in sums.iter_mut().zip(t) {
                s[c] += x;
            }
        }
    }
    Some(
        NAMES
            .iter()
            .zip(sums)
            .map(|(&n, s)| (n, [0, 1].map(|c| s[c] / calls[c].max(1) as f64)))
            .collect(),
    )
}

/// Seconds of the timed collisions of the fluid alone, and its backend.
fn time_fluid_alone(a: &Args, cfg: &Config) -> (f64, String) {
    let mut fluid = Solvent::new(cfg.clone()).unwrap_or_else(|e| fail(&e.to_string()));
    for _ in 0..a.warmup {
        fluid.step().unwrap_or_else(|e| fail(&e.to_string()));
    }
    let t = Instant::now();
    for _ in 0..a.collisions {
        fluid.step().unwrap_or_else(|e| fail(&e.to_string()));
    }
    let _ = fluid.moments();
    (t.elapsed().as_secs_f64(), fluid.backend_description())
}

/// Seconds of the timed MD steps of the GPU engine alone on GPU `ordinal` (the one the fluid
/// uses first), and the bead count.
fn time_md_alone(a: &Args, md: &Md, ordinal: usize) -> (f64, usize) {
    let beads = md.sys.len();
    let mut gpu = GpuMd::new(
        md.sys.clone(),
        md.ff.clone(),
        md.thermostat,
        md.settings().clone(),
        ordinal,
    )
    .unwrap_or_else(|e| fail(&e.to_string()));
    gpu.run(a.warmup * STEPS_PER_COLLISION)
        .unwrap_or_else(|e| fail(&e.to_string()));
    gpu.synchronize().unwrap_or_else(|e| fail(&e.to_string()));
    let t = Instant::now();
    gpu.run(a.collisions * STEPS_PER_COLLISION)
        .unwrap_or_else(|e| fail(&e.to_string()));
    gpu.synchronize().unwrap_or_else(|e| fail(&e.to_string()));
    (t.elapsed().as_secs_f64(), beads)
}

/// Seconds of the timed collisions of the coupled run, the fluid particle count and the
/// coupling path.
fn time_coupled(a: &Args, cfg: &Config, md_cfg: &MdConfig, md: Md) -> (f64, usize, String) {
    let mut solvent = Solvent::new(cfg.clone()).unwrap_or_else(|e| fail(&e.to_string()));
    let mut coupling =
        Coupling::with_md(md_cfg, &solvent, md).unwrap_or_else(|e| fail(&e.to_string()));
    for _ in 0..a.warmup {
        coupling
            .step(&mut solvent)
            .unwrap_or_else(|e| fail(&e.to_string()));
    }
    let _ = solvent.moments();
    let (builds0, steps0) = (coupling.engine().list_builds(), coupling.md_steps());
    let t = Instant::now();
    for _ in 0..a.collisions {
        coupling
            .step(&mut solvent)
            .unwrap_or_else(|e| fail(&e.to_string()));
    }
    let _ = solvent.moments();
    let coupled_s = t.elapsed().as_secs_f64();
    let builds = coupling.engine().list_builds() - builds0;
    let per_step = builds as f64 / (coupling.md_steps() - steps0).max(1) as f64;
    let overlap = match coupling.overlaps_fluid() {
        true => "fluid streams during the MD steps",
        false => "fluid and MD one after the other",
    };
    let path = format!(
        "{}; {overlap}; MD list builds per MD step {per_step:.3}",
        coupling.path_description()
    );
    (coupled_s, solvent.n_fluid(), path)
}
