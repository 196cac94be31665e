//! The `mpcbox` command: `mpcbox run <config.ron>` and `mpcbox check <config.ron>`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use mpcbox::checkpoint::MdCheckpoint;
use mpcbox::config::{Config, DeviceChoice};
use mpcbox::md::coupled::Coupling;
use mpcbox::md::MdConfig;
use mpcbox::run::{run_job, run_job_steps, Progress, Summary};
use mpcbox::{Checkpoint, MpcError, Solvent};

#[derive(Parser)]
#[command(
    name = "mpcbox",
    version,
    about = "MPC-SRD fluid solver: a black-box hydrodynamic solvent"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a job: steps, observables CSV, checkpoints, summary JSON and profile plot.
    Run {
        /// RON config (optional with --resume: the checkpoint carries its config).
        config: Option<PathBuf>,
        /// Total number of steps of the run (overrides `steps` of the config).
        #[arg(long)]
        steps: Option<u64>,
        /// auto | cpu | cuda:0[,1,...] | all
        #[arg(long)]
        device: Option<String>,
        /// Output directory (overrides `output.directory`).
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Continue from this checkpoint.
        #[arg(long)]
        resume: Option<PathBuf>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
    /// Validate a config and print the particle count and memory estimate.
    Check { config: PathBuf },
}

struct Bar {
    bar: Option<ProgressBar>,
    particles: u64,
    from: u64,
    t0: Instant,
}

impl Bar {
    /// A progress bar on stderr when it is a terminal and not `quiet`.
    fn new(total: u64, quiet: bool) -> Bar {
        let show = !quiet && std::io::stderr().is_terminal();
        let bar = show.then(|| {
            let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("{bar:40} {pos}/{len} steps, ETA {eta} | {msg}")
                    .expect("valid template"),
            );
            b
        });
        Bar {
            bar,
            particles: 0,
            from: 0,
            t0: Instant::now(),
        }
    }
}

impl Progress for Bar {
    fn start(&mut self, from: u64, to: u64, particles: u64) {
        self.particles = particles;
        self.from = from;
        self.t0 = Instant::now();
        if let Some(b) = &self.bar {
            b.set_length(to);
            b.set_position(from);
        }
    }
    fn advance(&mut self, step: u64) {
        if let Some(b) = &self.bar {
            b.set_position(step);
            if step % 16 == 0 {
                let dt = self.t0.elapsed().as_secs_f64().max(1e-9);
                let sps = (step - self.from) as f64 / dt;
                b.set_message(format!(
                    "{sps:.1} steps/s, {:.3e} particle-steps/s",
                    sps * self.particles as f64
                ));
            }
        }
    }
    fn finish(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

fn run(
    config: Option<PathBuf>,
    steps: Option<u64>,
    device: Option<String>,
    output: Option<PathBuf>,
    resume: Option<PathBuf>,
    quiet: bool,
) -> Result<(), MpcError> {
    let device = device.as_deref().map(DeviceChoice::parse_cli).transpose()?;
    let (mut solvent, md_ck) = match (&resume, &config) {
        (Some(ck), _) => resume_solvent(ck, config.as_deref(), device, output.as_deref(), steps)?,
        (None, Some(c)) => (new_solvent(c, device, output.as_deref())?, None),
        (None, None) => {
            return Err(MpcError::Config(mpcbox::ConfigError {
                field: "(command line)".into(),
                problem: "no config given".into(),
                fix:
                    "run `mpcbox run examples/quickstart.ron` or `mpcbox run --resume <checkpoint>`"
                        .into(),
            }))
        }
    };
    let total = steps.unwrap_or(solvent.config().steps);
    let dir = solvent.config().output.directory.clone();
    tracing::info!(
        device = %solvent.backend_description(),
        particles = solvent.n_fluid(),
        from = solvent.step_count(),
        to = total,
        output = %dir.display(),
        "starting run"
    );
    let mut progress = Bar::new(total, quiet);
    let summary = match solvent.config().md.clone() {
        None => run_job(&mut solvent, total, &dir, &mut progress)?,
        Some(md) => {
            let resumed = resume.is_some();
            run_coupled(
                &mut solvent,
                &md,
                md_ck,
                resumed,
                total,
                &dir,
                &mut progress,
            )?
        }
    };
    tracing::info!(
        particle_steps_per_second = format!("{:.3e}", summary.particle_steps_per_second),
        "run finished"
    );
    println!(
        "{}",
        serde_json::to_string_pretty(&summary).expect("summary serialises")
    );
    Ok(())
}

/// The output directory must be a directory (or not exist yet): checked before anything is
/// set up, naming where the path came from.
fn check_output_directory(dir: &Path, field: &str) -> Result<(), MpcError> {
    if dir.exists() && !dir.is_dir() {
        return Err(MpcError::Config(mpcbox::ConfigError {
            field: field.into(),
            problem: format!("{} exists and is not a directory", dir.display()),
            fix: "give a directory for the run's outputs (a new path is created)".into(),
        }));
    }
    Ok(())
}

/// The solvent of a checkpoint (and the MD state it holds), with the config given beside it
/// (which must agree with the checkpoint's) and the command line's output directory and
/// device. `steps` must lie beyond the checkpoint.
fn resume_solvent(
    checkpoint: &Path,
    config: Option<&Path>,
    device: Option<DeviceChoice>,
    output: Option<&Path>,
    steps: Option<u64>,
) -> Result<(Solvent, Option<MdCheckpoint>), MpcError> {
    let mut ck = Checkpoint::load(checkpoint)?;
    if let Some(c) = config {
        let given = Config::from_file(c)?;
        let differs = resume_differences(&ck.config, &given, ck.md.is_some());
        if !differs.is_empty() {
            return Err(MpcError::Checkpoint {
                path: c.display().to_string(),
                problem: format!(
                    "this config differs from the checkpoint's in {}; fix: resume with the \
                     config the checkpoint was written with (or none)",
                    differs.join(", ")
                ),
            });
        }
        ck.config = given;
    }
    let total = steps.unwrap_or(ck.config.steps);
    if total <= ck.step {
        return Err(MpcError::Config(mpcbox::ConfigError {
            field: if steps.is_some() { "--steps" } else { "steps" }.into(),
            problem: format!(
                "the run would end at step {total}, and the checkpoint is at step {}: nothing to run",
                ck.step
            ),
            fix: format!(
                "give the total step count to reach, beyond the checkpoint (e.g. --steps {})",
                ck.step + ck.step.max(1000)
            ),
        }));
    }
    match output {
        Some(o) => {
            check_output_directory(o, "--output")?;
            ck.config.output.directory = o.to_path_buf();
        }
        None => check_output_directory(&ck.config.output.directory, "output.directory")?,
    }
    let md = ck.md.take();
    Ok((Solvent::from_checkpoint(ck, device)?, md))
}

/// What a resumed run's config may not change: the box, the fluid's physics and, for coupled
/// runs, everything of the MD section but its outputs and backend. Names the fields that
/// differ.
fn resume_differences(ck: &Config, given: &Config, coupled: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |name: &str, differs: bool| {
        if differs {
            out.push(name.to_string());
        }
    };
    check("cells", ck.cells != given.cells);
    check(
        "particles_per_cell",
        ck.particles_per_cell != given.particles_per_cell,
    );
    if !coupled {
        return out;
    }
    check("mass", ck.mass != given.mass);
    check("kT", ck.kt != given.kt);
    check("time_step", ck.time_step != given.time_step);
    check("collision", ck.collision != given.collision);
    check("shear_rate", ck.shear_rate != given.shear_rate);
    check("seed", ck.seed != given.seed);
    match (&ck.md, &given.md) {
        (Some(a), Some(b)) => out.extend(a.resume_differences(b)),
        (Some(_), None) => out.push("md (the checkpoint has solutes, this config none)".into()),
        _ => {}
    }
    out
}
/// A fresh solvent from a config file, with the command line's device and output directory.
fn new_solvent(
    config: &Path,
    device: Option<DeviceChoice>,
    output: Option<&Path>,
) -> Result<Solvent, MpcError> {
    let mut cfg = Config::from_file(config)?;
    if let Some(d) = device {
        cfg.device = d;
    }
    match output {
        Some(o) => {
            check_output_directory(o, "--output")?;
            cfg.output.directory = o.to_path_buf();
        }
        None => check_output_directory(&cfg.output.directory, "output.directory")?,
    }
    Solvent::new(cfg)
}

/// The run with the config's MD solutes coupled through the collision; a resumed run
/// continues the MD state of its checkpoint and its output files.
fn run_coupled(
    solvent: &mut Solvent,
    md: &MdConfig,
    md_ck: Option<MdCheckpoint>,
    resumed: bool,
    total: u64,
    dir: &Path,
    progress: &mut Bar,
) -> Result<Summary, MpcError> {
    let mut coupling = match (md_ck, resumed) {
        (Some(ck), _) => {
            Coupling::resume(md, solvent, &ck)?.with_output_from(dir, Some(solvent.step_count()))?
        }
        (None, true) => {
            return Err(MpcError::Config(mpcbox::ConfigError {
                field: "md".into(),
                problem: "the checkpoint holds only the fluid, not the MD solutes (it was \
                          written by a run without them, or by a build before coupled \
                          checkpoints)"
                    .into(),
                fix: "resume from a checkpoint of the coupled run, or start it from the config"
                    .into(),
            }))
        }
        (None, false) => Coupling::new(md, solvent)?.with_output(dir)?,
    };
    tracing::info!(
        md_particles = coupling.md.sys.len(),
        md_dt = coupling.md.settings().dt,
        steps_per_collision = md.steps_per_collision,
        from = coupling.md_steps(),
        "MD solutes coupled through the MPC collision"
    );
    let s = run_job_steps(solvent, total, dir, progress, &mut coupling)?;
    let chains = coupling.finish(dir)?;
    tracing::info!(
        rg_mean = chains.rg_mean,
        com_msd = chains.com_msd,
        max_bond = chains.max_bond,
        "chains"
    );
    Ok(s)
}

fn check(path: &Path) -> Result<(), MpcError> {
    let cfg = Config::from_file(path)?;
    let cpu = mpcbox::backend::cpu::footprint(&cfg);
    println!("config {} is valid", path.display());
    println!(
        "  box: {} x {} x {} cells = {} cells",
        cfg.cells[0],
        cfg.cells[1],
        cfg.cells[2],
        cfg.n_cells()
    );
    println!("  fluid particles: {}", cfg.n_fluid());
    println!(
        "  CPU backend memory: {} ({} B/particle, {} B/cell)",
        mpcbox::memory::human_bytes(cpu.total_bytes),
        cpu.bytes_per_particle,
        cpu.bytes_per_cell
    );
    let gpu =
        mpcbox::backend::cuda::footprint(&cfg, mpcbox::backend::cuda::CellSumMethod::from_env());
    println!(
        "  CUDA backend memory ({} method): {} ({} B/particle, {} B/cell, plus {} reserve)",
        mpcbox::backend::cuda::CellSumMethod::from_env().name(),
        mpcbox::memory::human_bytes(gpu.total_bytes),
        gpu.bytes_per_particle,
        gpu.bytes_per_cell,
        mpcbox::memory::human_bytes(mpcbox::backend::cuda::RESERVE_BYTES)
    );
    match mpcbox::backend::cuda::probe() {
        Ok(count) => {
            for k in 0..count {
                match mpcbox::backend::cuda::device_memory(k) {
                    Ok((free, total)) => {
                        let fits = gpu.total_bytes + mpcbox::backend::cuda::RESERVE_BYTES <= free;
                        println!(
                            "  GPU {k}: {} free of {} -> {}",
                            mpcbox::memory::human_bytes(free),
                            mpcbox::memory::human_bytes(total),
                            if fits { "fits" } else { "does NOT fit" }
                        );
                    }
                    Err(e) => println!("  GPU {k}: cannot read its memory ({e})"),
                }
            }
        }
        Err(why) => println!("  no usable CUDA GPU here ({why})"),
    }
    let gpus = match &cfg.device {
        mpcbox::config::DeviceChoice::Cuda(list) if list.len() > 1 => Some(list.len()),
        mpcbox::config::DeviceChoice::AllGpus => mpcbox::backend::cuda::probe().ok(),
        _ => None,
    };
    if let Some(g) = gpus.filter(|&g| g > 1) {
        let phys = mpcbox::physics::Physics::from_config(&cfg);
        let bounds = mpcbox::backend::cuda::multi::slab_bounds(cfg.cells[1], g);
        let layers: Vec<u32> = bounds.windows(2).map(|w| w[1] - w[0]).collect();
        let need = mpcbox::backend::cuda::multi::min_slab_layers(&phys);
        println!(
            "  {g} GPUs: y slabs of {layers:?} layers (at least {need} needed), about {} per GPU \
             plus 10% slack for arriving particles",
            mpcbox::memory::human_bytes(gpu.total_bytes / g as u64)
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            config,
            steps,
            device,
            output,
            resume,
            quiet,
        } => run(config, steps, device, output, resume, quiet),
        Command::Check { config } => check(&config),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
