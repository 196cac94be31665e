//! `polymer`: a polymer solution end to end, the coupled run against its parts. Kremer-Grest
//! chains (FENE + WCA, bead mass 10) in an SRD solvent (M = 10, h = 0.1, MBS), 10 MD steps per
//! collision. Three timings on the same system: the fluid alone (MPC steps), the MD engine
//! alone (MD steps), and the coupled run (`md::coupled::Coupling`, as `mpcbox run` does it).
//! Default: 128³ cells, 4096 chains of 50 beads (0.1 beads per cell), 200 collisions.
//! `--shear-rate` runs all three under Lees-Edwards shear, and `--sample-interval k` measures
//! the stress (fluid and solutes) every k collisions as a sheared `mpcbox run` does.
//! `--device cpu` runs fluid and MD on the CPU (small boxes only).
//!
//! Built with `--features mpi` it runs under `mpirun -np R` too: the fluid and the decomposed
//! MD over the ranks' slabs (rank 0 records; the MD alone is not timed over ranks).

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use mpcbox::config::{Config, DeviceChoice};
use mpcbox::md::coupled::Coupling;
use mpcbox::md::{GpuMd, Md, MdConfig};
use mpcbox::Solvent;

use super::{cube, err, recorder};
use crate::Res;

#[derive(clap::Args)]
pub struct Args {
    /// Box edge in cells.
    #[arg(long, default_value_t = 128)]
    pub cells: u32,
    #[arg(long, default_value_t = 4096)]
    pub chains: u32,
    #[arg(long, default_value_t = 50)]
    pub chain_length: u32,
    /// Bead diameter σ in cells (WCA σ; bond length 0.97 σ, FENE k = 30/σ², r0 = 1.5 σ):
    /// below 1 for dense solutions (0.7 beads per cell places at σ = 0.5, not at 1).
    #[arg(long, default_value_t = 1.0)]
    pub bead_size: f64,
    /// Timed collisions (MPC steps); MD steps are 10 per collision.
    #[arg(long, default_value_t = 200)]
    pub collisions: u64,
    /// Untimed collisions first (kernel compilation, first reorders).
    #[arg(long, default_value_t = 20)]
    pub warmup: u64,
    /// Fluid device: cuda:0, cuda:0,1, all, cpu (the MD engine follows: GPU or CPU).
    #[arg(long, default_value = "cuda:0")]
    pub device: String,
    /// Lees-Edwards shear rate of fluid and chains (0: no shear).
    #[arg(long, default_value_t = 0.0)]
    pub shear_rate: f64,
    /// Collisions between stress samples under shear (0: none, as without shear).
    #[arg(long, default_value_t = 0)]
    pub sample_interval: u64,
    /// y slabs of the fluid (and of the decomposed MD) over the GPUs (0: one per GPU); more
    /// slabs than GPUs put several on one GPU.
    #[arg(long, default_value_t = 0)]
    pub slabs: u32,
    /// Also record the MD steps of the coupled loop timed phase by phase (each phase waited
    /// for), where the engine times them (the GPU engine).
    #[arg(long)]
    pub profile_md: bool,
    /// Also record where the host's time goes in the MD steps of the coupled loop, where the
    /// engine times it (the decomposed GPU engine).
    #[arg(long)]
    pub host_md: bool,
    /// Time the coupled run only (the fluid alone and the MD alone are not timed): for A/B
    /// runs of one setting, at a third of the set-up time.
    #[arg(long)]
    pub only_coupled: bool,
    /// Also record what a stress sample costs, part by part, in the coupled loop driven by
    /// hand (each part waited for). Needs --sample-interval.
    #[arg(long)]
    pub sample_parts: bool,
}

pub const STEPS_PER_COLLISION: u64 = 10;

fn config(a: &Args, device: DeviceChoice) -> Res<Config> {
    let l = a.cells;
    let backend = if device == DeviceChoice::Cpu {
        "Cpu"
    } else {
        "Cuda"
    };
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({l}, {l}, {l}), particles_per_cell: 10, time_step: 0.1, \
         collision: Srd(angle_deg: 130.0), thermostat: Mbs, seed: 3, steps: 1, \
         md: (steps_per_collision: {STEPS_PER_COLLISION}, \
              system: Chains(n_chains: {}, chain_length: {}, bead_mass: 10.0, bond_length: {:?}), \
              pair: Wca(epsilon: 1.0, sigma: {:?}), bonds: [Fene(k: {:?}, r0: {:?})], \
              thermostat: None, skin: 0.3, neighbor: Auto, reorder_every: 20, \
              backend: {backend}, trajectory_interval: 0, observable_interval: 0))",
        a.chains,
        a.chain_length,
        0.97 * a.bead_size,
        a.bead_size,
        30.0 / (a.bead_size * a.bead_size),
        1.5 * a.bead_size
    ))
    .map_err(|e| format!("config: {e}"))?;
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
    Ok(cfg)
}

pub fn run(a: Args, records: Option<&Path>) -> Res<()> {
    let device = super::device(&a.device)?;
    let cfg = config(&a, device.clone())?;
    let md_cfg = cfg.md.clone().ok_or("the config has no md section")?;
    let mut rec = recorder("polymer", &device, records);
    let (fluid_s, fluid_desc) = match a.only_coupled {
        true => (f64::NAN, "not timed alone".to_string()),
        false => time_fluid_alone(&a, &cfg)?,
    };
    // the chains placed and the engine built once, then cloned for each timing (millions of
    // beads take tens of seconds to place and to build on the host)
    let sys = md_cfg.system(&cfg).map_err(err)?;
    let md = md_cfg.build_with(&cfg, sys).map_err(err)?;
    let gpu = super::gpus_of(&device).map(|g| g[0]);
    let md_s = if mpcbox::ranks::size() > 1 || a.only_coupled {
        f64::NAN
    } else {
        time_md_alone(&a, &md, gpu)?
    };
    let (coupled_s, n_fluid, path) = time_coupled(&a, &cfg, &md_cfg, md.clone())?;
    // where the coupled time goes: the same loop by hand, MD and collision timed apart (each
    // followed by a synchronisation, never overlapped, so the sum exceeds the plain loop)
    let (md_part, fluid_part) = match a.only_coupled {
        true => (f64::NAN, f64::NAN),
        false => super::polymer_parts::breakdown(&a, &cfg, &md, &mut rec)?,
    };
    let parts = match a.sample_parts && a.sample_interval > 0 {
        true => Some(super::polymer_parts::sample_parts(&a, &cfg, &md)?),
        false => None,
    };
    if !mpcbox::ranks::is_root() {
        return Ok(());
    }
    let case = [
        ("cells", cube(a.cells)),
        ("fluid particles", json!(n_fluid)),
        ("beads", json!(md.sys.len())),
        ("collisions", json!(a.collisions)),
        ("shear rate", json!(a.shear_rate)),
        ("sample interval", json!(a.sample_interval)),
        ("ranks", json!(mpcbox::ranks::size())),
        ("fluid", json!(fluid_desc)),
        ("path", json!(path)),
    ];
    rec.row(
        &case,
        &[
            ("fluid alone s", fluid_s),
            ("MD alone s", md_s),
            ("coupled s", coupled_s),
            ("coupled / (fluid + MD)", coupled_s / (fluid_s + md_s)),
            ("in coupled: MD s", md_part),
            ("in coupled: collision s", fluid_part),
        ],
    )?;
    for (name, [plain, sampled]) in parts.unwrap_or_default() {
        rec.row(
            &[
                ("cells", cube(a.cells)),
                ("beads", json!(md.sys.len())),
                ("part of the coupled step", json!(name)),
            ],
            &[("unsampled ms", plain), ("sampled ms", sampled)],
        )?;
    }
    Ok(())
}

/// Seconds of the timed collisions of the fluid alone, and its backend.
fn time_fluid_alone(a: &Args, cfg: &Config) -> Res<(f64, String)> {
    let mut fluid = Solvent::new(cfg.clone()).map_err(err)?;
    for _ in 0..a.warmup {
        fluid.step().map_err(err)?;
    }
    let t = Instant::now();
    for _ in 0..a.collisions {
        fluid.step().map_err(err)?;
    }
    fluid.moments().map_err(err)?;
    Ok((t.elapsed().as_secs_f64(), fluid.backend_description()))
}

/// Seconds of the timed MD steps of the engine alone: the GPU engine on GPU `gpu` (the one
/// the fluid uses first), or the CPU engine.
fn time_md_alone(a: &Args, md: &Md, gpu: Option<usize>) -> Res<f64> {
    let (warm, timed) = (
        a.warmup * STEPS_PER_COLLISION,
        a.collisions * STEPS_PER_COLLISION,
    );
    let Some(ordinal) = gpu else {
        let mut cpu = md.clone();
        cpu.run(warm).map_err(err)?;
        let t = Instant::now();
        cpu.run(timed).map_err(err)?;
        return Ok(t.elapsed().as_secs_f64());
    };
    let s = md.settings().clone();
    let mut g =
        GpuMd::new(md.sys.clone(), md.ff.clone(), md.thermostat, s, ordinal).map_err(err)?;
    g.run(warm).map_err(err)?;
    g.synchronize().map_err(err)?;
    let t = Instant::now();
    g.run(timed).map_err(err)?;
    g.synchronize().map_err(err)?;
    Ok(t.elapsed().as_secs_f64())
}

/// Seconds of the timed collisions of the coupled run, the fluid particle count and the
/// coupling path.
fn time_coupled(a: &Args, cfg: &Config, md_cfg: &MdConfig, md: Md) -> Res<(f64, usize, String)> {
    let mut solvent = Solvent::new(cfg.clone()).map_err(err)?;
    let mut coupling = Coupling::with_md(md_cfg, &solvent, md).map_err(err)?;
    for _ in 0..a.warmup {
        coupling.step(&mut solvent).map_err(err)?;
    }
    solvent.moments().map_err(err)?;
    let (builds0, steps0) = (coupling.engine().list_builds(), coupling.md_steps());
    let t = Instant::now();
    for _ in 0..a.collisions {
        coupling.step(&mut solvent).map_err(err)?;
    }
    solvent.moments().map_err(err)?;
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
    Ok((coupled_s, solvent.n_fluid(), path))
}
