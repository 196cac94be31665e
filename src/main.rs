//! The `mpcbox` command: `mpcbox run <config.ron>` and `mpcbox check <config.ron>`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use mpcbox::checkpoint::{CheckpointFile, MdCheckpoint};
use mpcbox::config::{Config, DeviceChoice};
use mpcbox::md::coupled::Coupling;
use mpcbox::md::MdConfig;
use mpcbox::output_dir::OutputLock;
use mpcbox::progress::Bar;
use mpcbox::run::{run_job, run_job_steps, Summary};
use mpcbox::{MpcError, Solvent};

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
        /// Output directory (overrides `output.directory`; with --resume, the default is the
        /// directory holding the checkpoint).
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Continue from this checkpoint.
        #[arg(long)]
        resume: Option<PathBuf>,
        /// No progress bar (nor progress lines in batch jobs).
        #[arg(long)]
        quiet: bool,
        /// Write into an output directory that holds another run's files (results,
        /// checkpoint), removing them first (refused otherwise). Also with --resume.
        #[arg(long)]
        overwrite: bool,
        /// With --resume: config fields that may differ from the checkpoint's on purpose,
        /// comma separated (e.g. `shear_rate` after equilibration); recorded in summary.json.
        #[arg(long, value_delimiter = ',')]
        allow_change: Vec<String>,
    },
    /// Validate a config and print the particle count and memory estimate.
    Check {
        /// The RON config file to check.
        config: PathBuf,
    },
}

/// What `mpcbox run` was asked for.
struct RunArgs {
    config: Option<PathBuf>,
    steps: Option<u64>,
    device: Option<String>,
    output: Option<PathBuf>,
    resume: Option<PathBuf>,
    quiet: bool,
    overwrite: bool,
    allow_change: Vec<String>,
}

fn run(a: RunArgs) -> Result<(), MpcError> {
    let RunArgs {
        config,
        steps,
        device,
        output,
        resume,
        quiet,
        overwrite,
        allow_change,
    } = a;
    let device = device.as_deref().map(DeviceChoice::parse_cli).transpose()?;
    if resume.is_none() && !allow_change.is_empty() {
        return Err(MpcError::Config(mpcbox::ConfigError {
            field: "--allow-change".into(),
            problem: "given without --resume".into(),
            fix: "use --allow-change only to resume a checkpoint with a changed config".into(),
        }));
    }
    let (mut solvent, md_ck, _lock) =
        match (&resume, &config) {
            (Some(ck), _) => resume_solvent(
                ck,
                config.as_deref(),
                device,
                output.as_deref(),
                steps,
                &allow_change,
                overwrite,
            )?,
            (None, Some(c)) => {
                let (s, lock) = new_solvent(c, device, output.as_deref(), overwrite)?;
                (s, None, lock)
            }
            (None, None) => return Err(MpcError::Config(mpcbox::ConfigError {
                field: "(command line)".into(),
                problem: "no config given".into(),
                fix:
                    "run `mpcbox run examples/quickstart.ron` or `mpcbox run --resume <checkpoint>`"
                        .into(),
            })),
        };
    let total = steps.unwrap_or(solvent.config().steps);
    let dir = solvent.config().output.directory.clone();
    let equilibration = solvent.config().output.equilibration_steps;
    if total <= equilibration {
        tracing::warn!(
            "the run ends at step {total}, before output.equilibration_steps = {equilibration}: \
             it takes no samples, and the summary's averages stay empty"
        );
    }
    tracing::info!(
        device = %solvent.backend_description(),
        particles = solvent.n_fluid(),
        from = solvent.step_count(),
        to = total,
        output = %dir.display(),
        "starting run"
    );
    let mut progress = Bar::new(total, quiet || !mpcbox::ranks::is_root());
    let result = match solvent.config().md.clone() {
        None => claim(&solvent, &dir, overwrite)
            .and_then(|_| run_job(&mut solvent, total, &dir, &mut progress)),
        Some(md) => {
            let resumed = resume.is_some();
            run_coupled(
                &mut solvent,
                &md,
                md_ck,
                (resumed, overwrite),
                total,
                &dir,
                &mut progress,
            )
        }
    };
    if let Err(MpcError::Interrupted { .. }) = &result {
        // the summary of the steps done, as a finished run prints it
        if mpcbox::ranks::is_root() {
            if let Ok(text) = std::fs::read_to_string(dir.join(mpcbox::run::SUMMARY_JSON)) {
                print!("{text}");
            }
        }
    }
    let summary = result?;
    tracing::info!(
        particle_steps_per_second = format!("{:.3e}", summary.particle_steps_per_second),
        "run finished"
    );
    if mpcbox::ranks::is_root() {
        println!(
            "{}",
            serde_json::to_string_pretty(&summary).expect("summary serialises")
        );
    }
    Ok(())
}

/// Take `dir` for the run of `solvent` once everything is set up, just before the first file is
/// written (a run that fails to start leaves the directory as it was); another run's files
/// there were refused before the set-up unless `overwrite`, which now removes them.
fn claim(solvent: &Solvent, dir: &Path, overwrite: bool) -> Result<(), MpcError> {
    mpcbox::output_dir::claim(dir, "output.directory", solvent.run_id(), overwrite).map(|_| ())
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
/// (which must agree with the checkpoint's) and the command line's output directory (by
/// default the one holding the checkpoint) and device. `steps` must lie beyond the checkpoint;
/// the output directory must hold nothing of another run unless `overwrite`.
fn resume_solvent(
    checkpoint: &Path,
    config: Option<&Path>,
    device: Option<DeviceChoice>,
    output: Option<&Path>,
    steps: Option<u64>,
    allow_change: &[String],
    overwrite: bool,
) -> Result<(Solvent, Option<MdCheckpoint>, OutputLock), MpcError> {
    // the head now; the fluid's blocks when the backend opens (each rank reads its layers')
    let mut file = CheckpointFile::open(checkpoint)?;
    let ck = &mut file.head;
    let mut changed = Vec::new();
    if let Some(c) = config {
        let given = Config::from_file(c)?;
        let differs = ck.config.resume_differences(&given, ck.md.is_some());
        let refused: Vec<&String> = differs
            .iter()
            .filter(|d| !allow_change.iter().any(|a| a == *d))
            .collect();
        if !refused.is_empty() {
            let names: Vec<&str> = refused.iter().map(|s| s.as_str()).collect();
            return Err(MpcError::Config(mpcbox::ConfigError {
                field: names.join(", "),
                problem: format!(
                    "the config {} differs from the one checkpoint {} was written with",
                    c.display(),
                    checkpoint.display()
                ),
                fix: format!(
                    "resume with the config the checkpoint was written with (or none), or, \
                     for a deliberate change, name the fields: --allow-change {}",
                    names.join(",")
                ),
            }));
        }
        if !differs.is_empty() {
            tracing::warn!(
                "resuming with changed {} (--allow-change)",
                differs.join(", ")
            );
        }
        changed = differs;
        ck.config = given;
    }
    if let Some(unknown) = allow_change.iter().find(|a| !changed.contains(a)) {
        return Err(MpcError::Config(mpcbox::ConfigError {
            field: "--allow-change".into(),
            problem: format!("`{unknown}` does not differ between the config and the checkpoint"),
            fix: "name only fields that this resume changes (and give the changed config)".into(),
        }));
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
    // the run continues where its checkpoint lies, unless told otherwise
    let (dir, field) = match output {
        Some(o) => (o.to_path_buf(), "--output"),
        None => (checkpoint_directory(checkpoint), "--resume"),
    };
    check_output_directory(&dir, field)?;
    ck.config.output.directory = dir.clone();
    let lock = OutputLock::acquire(&dir)?;
    // a directory of another run is refused before the fluid is set up
    let standing = mpcbox::output_dir::check(&dir, field, ck.run_id.as_deref(), overwrite)?;
    if standing != mpcbox::output_dir::Standing::Own {
        // continued elsewhere than in its run's directory, the checkpoint starts a branch: a
        // run of its own, so the two histories can never be joined in one directory
        ck.run_id = Some(mpcbox::output_dir::new_run_id());
    }
    let md = ck.md.take();
    let mut solvent = Solvent::from_checkpoint_file(&file, device)?;
    solvent.set_changed_on_resume(changed);
    Ok((solvent, md, lock))
}

/// The directory holding `checkpoint` ("." for a bare file name).
fn checkpoint_directory(checkpoint: &Path) -> PathBuf {
    checkpoint
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// A fresh solvent from a config file, with the command line's device and output directory.
fn new_solvent(
    config: &Path,
    device: Option<DeviceChoice>,
    output: Option<&Path>,
    overwrite: bool,
) -> Result<(Solvent, OutputLock), MpcError> {
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
    // the directory's owner before anything is allocated or written
    let dir = cfg.output.directory.clone();
    let field = if output.is_some() {
        "--output"
    } else {
        "output.directory"
    };
    let lock = OutputLock::acquire(&dir)?;
    mpcbox::output_dir::check(&dir, field, None, overwrite)?;
    Ok((Solvent::new(cfg)?, lock))
}

/// The run with the config's MD solutes coupled through the collision; a resumed run
/// continues the MD state of its checkpoint and its output files.
fn run_coupled(
    solvent: &mut Solvent,
    md: &MdConfig,
    md_ck: Option<MdCheckpoint>,
    (resumed, overwrite): (bool, bool),
    total: u64,
    dir: &Path,
    progress: &mut Bar,
) -> Result<Summary, MpcError> {
    let mut coupling = match (md_ck, resumed) {
        (Some(ck), _) => {
            let c = Coupling::resume(md, solvent, &ck)?;
            claim(solvent, dir, overwrite)?;
            c.with_output_from(dir, Some(solvent.step_count()))?
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
        (None, false) => {
            let c = Coupling::new(md, solvent)?;
            claim(solvent, dir, overwrite)?;
            c.with_output(dir)?
        }
    };
    tracing::info!(
        md_particles = coupling.engine().len(),
        md_dt = coupling.engine().settings().dt,
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
    // what `run` refuses first: the environment's tuning knobs
    mpcbox::knobs::check()?;
    let cpu = mpcbox::backend::cpu::footprint(&cfg);
    println!("config {} parses and its fields are valid", path.display());
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
    let mut gpu_fits = Vec::new();
    match mpcbox::backend::cuda::probe() {
        Ok(count) => {
            for k in 0..count {
                match mpcbox::backend::cuda::device_memory(k) {
                    Ok((free, total)) => {
                        let fits = gpu.total_bytes + mpcbox::backend::cuda::RESERVE_BYTES <= free;
                        gpu_fits.push(fits);
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
    print_largest_box(&cfg);
    // what `run` would refuse, refused here too: the MD section's files and particles, and a
    // box that fits neither the chosen GPU nor (where the CPU may run it) this machine's RAM
    if let Some(md) = &cfg.md {
        let engine = md.build(&cfg)?;
        println!("  MD particles: {}", engine.sys.len());
    }
    let gpu0_fits = gpu_fits.first().copied().unwrap_or(false);
    match &cfg.device {
        DeviceChoice::Cpu => mpcbox::backend::cpu::check_fits(&cfg)?,
        DeviceChoice::Auto if !gpu0_fits => mpcbox::backend::cpu::check_fits(&cfg)?,
        DeviceChoice::Cuda(list)
            if list.len() == 1
                && !gpu_fits.is_empty()
                && !gpu_fits.get(list[0] as usize).copied().unwrap_or(false) =>
        {
            return Err(MpcError::Config(mpcbox::ConfigError {
                field: "device".into(),
                problem: format!(
                    "the box needs {} on GPU {}, which does not have it free",
                    mpcbox::memory::human_bytes(gpu.total_bytes),
                    list[0]
                ),
                fix: "use a smaller box, several GPUs (Cuda([0, 1])), or another GPU".into(),
            }));
        }
        _ => {}
    }
    if cfg.output.equilibration_steps >= cfg.steps {
        println!(
            "  warning: steps ({}) do not pass output.equilibration_steps ({}): the run takes no \
             samples and its summary has no averages",
            cfg.steps, cfg.output.equilibration_steps
        );
    }
    let gpus = match &cfg.device {
        mpcbox::config::DeviceChoice::Cuda(list) if list.len() > 1 => Some(list.len()),
        mpcbox::config::DeviceChoice::AllGpus => mpcbox::backend::cuda::probe().ok(),
        _ => None,
    };
    if let Some(g) = gpus.filter(|&g| g > 1) {
        let phys = mpcbox::physics::Physics::from_config(&cfg);
        let need = mpcbox::backend::min_slab_layers(&phys);
        let bounds = mpcbox::backend::slab_bounds_for(&phys, g);
        let layers: Vec<u32> = bounds.windows(2).map(|w| w[1] - w[0]).collect();
        println!(
            "  {g} GPUs: y slabs of {layers:?} layers (at least {need} needed), about {} per GPU \
             plus 10% slack for arriving particles",
            mpcbox::memory::human_bytes(gpu.total_bytes / g as u64)
        );
    }
    Ok(())
}

/// The largest cubic box at the config's density that the GPUs present hold together.
fn print_largest_box(cfg: &Config) {
    use mpcbox::backend::cuda;
    let Ok(count) = cuda::probe() else {
        return;
    };
    let free: Vec<u64> = (0..count)
        .filter_map(|k| cuda::device_memory(k).ok().map(|(f, _)| f))
        .collect();
    let method = cuda::CellSumMethod::from_env();
    let ppc = cfg.particles_per_cell;
    for gpus in [1, free.len()] {
        if gpus == 0 || (gpus == 1 && free.len() == 1 && count > 1) {
            continue;
        }
        match cuda::multi::largest_cube(&free[..gpus], ppc, method) {
            Some((l, n)) => println!(
                "  largest box on {gpus} GPU(s) here: {l}³ cells × {ppc} = {n} particles ({:.2e})",
                n as f64
            ),
            None => println!("  largest box on {gpus} GPU(s) here: none fits"),
        }
        if free.len() == 1 {
            break;
        }
    }
}

fn main() -> ExitCode {
    mpcbox::timing::mark_process_start();
    // MPI (with `--features mpi`): kept initialised until main returns
    let _mpi = mpcbox::ranks::init();
    // a bug that panics on one rank must not leave the others waiting in a collective call
    let report_panic = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report_panic(info);
        if mpcbox::ranks::size() > 1 {
            eprintln!(
                "rank {} stopped on an internal error: stopping every rank (please report it)",
                mpcbox::ranks::rank()
            );
            mpcbox::ranks::abort_all(101);
        }
    }));
    // over MPI ranks, rank 0 speaks for the run; the others only warn
    let level = if mpcbox::ranks::is_root() {
        "info"
    } else {
        "warn"
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| level.into()),
        )
        .with_writer(std::io::stderr)
        // colour only on a terminal, and never with NO_COLOR set (no-color.org)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
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
            overwrite,
            allow_change,
        } => mpcbox::stop::install_signal_handlers().and_then(|_| {
            run(RunArgs {
                config,
                steps,
                device,
                output,
                resume,
                quiet,
                overwrite,
                allow_change,
            })
        }),
        Command::Check { config } => check(&config),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let agreed = matches!(e, MpcError::Interrupted { .. });
            if mpcbox::ranks::size() > 1 && !agreed {
                eprintln!("error (rank {}): {e}", mpcbox::ranks::rank());
                // the other ranks may wait in a collective call: stop them all, no hang
                mpcbox::ranks::abort_all(1);
            }
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
