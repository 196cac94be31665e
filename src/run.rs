//! A whole job as `mpcbox run` performs it: steps, observables CSV, checkpoints, the summary
//! JSON and the plot of the time-averaged velocity profile.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use crate::checkpoint::{CheckpointWriter, MdCheckpoint, WriterSettings};
use crate::error::{MpcError, Result};
use crate::memory::human_bytes;
use crate::physics::theory;
use crate::solvent::Solvent;

pub(crate) use crate::report::with_error;
pub use crate::report::{
    OutputTimes, Summary, Timing, ValueWithError, ViscositySummary, CHECKPOINT_FILE,
    OBSERVABLES_CSV, PROFILE_CSV, PROFILE_SVG, SUMMARY_JSON,
};

/// What a job steps: the fluid alone, or the fluid with coupled solutes (whose state then
/// belongs in checkpoints and whose figures in the summary).
pub trait JobStep {
    /// One MPC step.
    fn advance(&mut self, solvent: &mut Solvent) -> Result<()>;
    /// The MD side of the job's checkpoint now (None: the fluid alone). Every rank calls it;
    /// rank 0's is written.
    fn md_checkpoint(&mut self) -> Result<Option<MdCheckpoint>> {
        Ok(None)
    }
    /// Add this job's figures to the summary.
    fn summarize(&mut self, _solvent: &Solvent, _summary: &mut Summary) -> Result<()> {
        Ok(())
    }
    /// What this job's own output files (trajectory frames) cost so far.
    fn output_times(&self) -> OutputTimes {
        OutputTimes::default()
    }
}

/// A [`JobStep`] from a closure (fluid-only checkpoints).
struct StepFn<'a>(&'a mut dyn FnMut(&mut Solvent) -> Result<()>);

impl JobStep for StepFn<'_> {
    fn advance(&mut self, solvent: &mut Solvent) -> Result<()> {
        (self.0)(solvent)
    }
}

/// How the caller wants progress shown.
pub trait Progress {
    fn start(&mut self, from: u64, to: u64, particles: u64);
    fn advance(&mut self, step: u64);
    fn finish(&mut self);
}

/// No progress display (tests, library use).
pub struct Silent;
impl Progress for Silent {
    fn start(&mut self, _: u64, _: u64, _: u64) {}
    fn advance(&mut self, _: u64) {}
    fn finish(&mut self) {}
}

fn csv_header() -> &'static str {
    "step,time,kinetic_energy,momentum_x,momentum_y,momentum_z,temperature,stress_xy_kinetic,stress_xy_collisional"
}

/// Run `solvent` until it has completed `total_steps`, writing into `dir`.
pub fn run_job(
    solvent: &mut Solvent,
    total_steps: u64,
    dir: &Path,
    progress: &mut dyn Progress,
) -> Result<Summary> {
    run_job_with(
        solvent,
        total_steps,
        dir,
        progress,
        &mut |s: &mut Solvent| s.step().map(|_| ()),
    )
}

/// [`run_job`] with each MPC step taken by `advance` (e.g. MD steps followed by a collision
/// with solutes, see [`crate::md::coupled`]).
pub fn run_job_with(
    solvent: &mut Solvent,
    total_steps: u64,
    dir: &Path,
    progress: &mut dyn Progress,
    advance: &mut dyn FnMut(&mut Solvent) -> Result<()>,
) -> Result<Summary> {
    run_job_steps(solvent, total_steps, dir, progress, &mut StepFn(advance))
}

/// [`run_job`] with each MPC step, the checkpoints and the summary's extra figures from `job`.
pub fn run_job_steps(
    solvent: &mut Solvent,
    total_steps: u64,
    dir: &Path,
    progress: &mut dyn Progress,
    job: &mut dyn JobStep,
) -> Result<Summary> {
    // one owner per output directory, before anything is written: no other process, and no
    // other run's files (the caller claims it first where overwriting was asked for)
    let _lock = crate::output_dir::OutputLock::acquire(dir)?;
    crate::output_dir::claim(dir, "output.directory", solvent.run_id(), false)?;
    // over MPI ranks every rank steps and reduces, rank 0 alone writes
    let root = crate::ranks::is_root();
    let csv_path = dir.join(OBSERVABLES_CSV);
    let resuming = solvent.step_count() > 0 && csv_path.exists();
    if resuming && root {
        // rows written after the checkpoint by the run that stopped are written again below
        crate::output_dir::truncate_csv_after(&csv_path, solvent.step_count())?;
    }
    let mut csv: Box<dyn Write> = if root {
        Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(resuming)
                .write(true)
                .truncate(!resuming)
                .open(&csv_path)
                .map_err(|e| MpcError::io(&csv_path, e))?,
        )
    } else {
        Box::new(std::io::sink())
    };
    if !resuming {
        writeln!(csv, "{}", csv_header()).map_err(|e| MpcError::io(&csv_path, e))?;
    }
    let ck_path = dir.join(CHECKPOINT_FILE);
    if root {
        // writers killed mid-write left these; this run owns the directory now
        crate::checkpoint::remove_stale_temporaries(&ck_path);
    }
    let mut checkpoints = CheckpointWriter::new(WriterSettings::from_knobs());
    let ck_interval = solvent.config().output.checkpoint_interval;
    let start_step = solvent.step_count();
    let mut fields = crate::fields::FieldWriter::new(solvent, dir);
    let n = solvent.n_fluid() as u64;
    let mut timing = Timing {
        startup_seconds: crate::timing::since_process_start(),
        startup_phases: crate::timing::take_phases(),
        host_memory_at_first_step_bytes: crate::timing::resident_bytes(),
        fluid_read: crate::timing::take_fluid_read(),
        ..Timing::default()
    };
    if root {
        report_startup(&timing);
    }
    progress.start(start_step, total_steps, n);
    let t0 = Instant::now();
    let mut interrupted = false;
    while solvent.step_count() < total_steps {
        let step = solvent.step_count();
        job.advance(solvent)?;
        if solvent.is_observable_step(step) {
            let o = solvent.observables()?;
            let (sk, sc) = o
                .stress_xy
                .map_or((String::new(), String::new()), |(a, b)| {
                    (format!("{a:e}"), format!("{b:e}"))
                });
            writeln!(
                csv,
                "{},{},{:e},{:e},{:e},{:e},{:.6},{},{}",
                o.step,
                o.time,
                o.kinetic_energy,
                o.momentum[0],
                o.momentum[1],
                o.momentum[2],
                o.temperature,
                sk,
                sc
            )
            .map_err(|e| MpcError::io(&csv_path, e))?;
            if !o.kinetic_energy.is_finite() {
                return Err(MpcError::Unstable {
                    step: o.step,
                    what: format!("the fluid's kinetic energy is {}", o.kinetic_energy),
                    fix: "check body_force and shear_rate (and the MD solutes' forces, if any)"
                        .into(),
                });
            }
        }
        if let Some(f) = fields.as_mut() {
            f.after_step(solvent, solvent.step_count() == total_steps)?;
        }
        if ck_interval > 0 && solvent.step_count().is_multiple_of(ck_interval) {
            // the files of the steps before are on disk first: a resume from this
            // checkpoint lists them (and drops what comes after)
            if let Some(f) = fields.as_mut() {
                f.finish()?;
            }
            // every rank writes its block (collective; the same outcome on every rank)
            let md = job.md_checkpoint()?;
            solvent.write_checkpoint(&mut checkpoints, &ck_path, md)?;
        }
        checkpoints.poll();
        // a failed periodic checkpoint (full disk) loses no data: the previous one stays
        // (atomic writes), and the run goes on to try again at the next
        let _ = report_checkpoints(&mut checkpoints, root);
        progress.advance(solvent.step_count());
        // every rank stops at the same step, whichever the signal reached
        if crate::ranks::any(crate::stop::stop_requested()) {
            interrupted = true;
            break;
        }
    }
    // writes in flight (on a stop by a signal too) are finished first
    if let Some(f) = fields.as_mut() {
        f.finish()?;
    }
    // waiting for a write in flight holds the run as a blocking checkpoint does
    let waited = Instant::now();
    checkpoints.wait();
    checkpoints.held(waited.elapsed().as_secs_f64(), None);
    let _ = report_checkpoints(&mut checkpoints, root);
    let wall = t0.elapsed().as_secs_f64();
    // the loop's time less what held it: the final checkpoint below is not in `wall`
    let held_in_loop = checkpoints.times().blocking_seconds;
    progress.finish();
    csv.flush().map_err(|e| MpcError::io(&csv_path, e))?;
    // the last checkpoint, unless the periodic one of this step is on disk already
    if checkpoints.last_written_step() != Some(solvent.step_count()) {
        let md = job.md_checkpoint()?;
        solvent.write_checkpoint_now(&mut checkpoints, &ck_path, md)?;
        report_checkpoints(&mut checkpoints, root)?;
    }
    let done = solvent.step_count().saturating_sub(start_step);
    timing.checkpoints = checkpoints.times().clone();
    timing.output = job.output_times();
    if let Some(f) = &fields {
        let t = f.times();
        timing.output.files += t.files;
        timing.output.blocking_seconds += t.blocking_seconds;
        timing.output.background_seconds += t.background_seconds;
    }
    timing.stepping_seconds = (wall - held_in_loop - timing.output.blocking_seconds).max(0.0);
    timing.peak_host_memory_bytes = crate::timing::peak_resident_bytes();
    let mut summary = summarize(solvent, done, wall, dir)?;
    summary.interrupted = interrupted;
    summary.timing = timing;
    if root {
        report_timing(&summary.timing, done, n);
    }
    job.summarize(solvent, &mut summary)?;
    if root {
        write_profile(solvent, dir)?;
        let json = serde_json::to_string_pretty(&summary).expect("summary serialises");
        let p = dir.join(SUMMARY_JSON);
        std::fs::write(&p, json + "\n").map_err(|e| MpcError::io(&p, e))?;
    }
    if interrupted {
        return Err(MpcError::Interrupted {
            step: solvent.step_count(),
            checkpoint: ck_path.display().to_string(),
        });
    }
    Ok(summary)
}

/// The checkpoints finished since the last call, each in a progress line (rank 0); a failed
/// one is a warning, and the first failure is returned.
fn report_checkpoints(checkpoints: &mut CheckpointWriter, root: bool) -> Result<()> {
    let mut first = Ok(());
    for w in checkpoints.take_finished() {
        match w.result {
            Ok(()) if root => tracing::info!(
                "checkpoint of step {} written{}: {} in {:.2} s ({}/s)",
                w.step,
                if w.background {
                    " in the background"
                } else {
                    ""
                },
                human_bytes(w.bytes),
                w.seconds,
                human_bytes((w.bytes as f64 / w.seconds.max(1e-9)) as u64)
            ),
            Ok(()) => {}
            Err(e) => {
                tracing::warn!("checkpoint at step {} not written: {e}", w.step);
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
    }
    first
}

/// The start-up's phases in one progress line.
fn report_startup(t: &Timing) {
    let phases: Vec<String> = t
        .startup_phases
        .iter()
        .map(|p| format!("{} {:.2} s", p.name, p.seconds))
        .collect();
    match t.startup_seconds {
        Some(s) => tracing::info!("start-up took {s:.2} s ({})", phases.join(", ")),
        None if !phases.is_empty() => tracing::info!("start-up: {}", phases.join(", ")),
        None => {}
    }
    if let Some(r) = &t.fluid_read {
        tracing::info!(
            "the checkpoint's fluid was read in a window of {}, growing the host memory by {} \
             beyond the backend's buffers",
            human_bytes(r.window_bytes),
            r.peak_host_memory_growth_bytes
                .map_or("(not measured)".into(), human_bytes)
        );
    }
}

/// Where the run's time went, in one progress line.
fn report_timing(t: &Timing, steps: u64, particles: u64) {
    let c = &t.checkpoints;
    tracing::info!(
        "time: start-up {}, stepping {:.2} s ({:.3e} particle-steps/s); {} checkpoint(s) held \
         the steps {:.2} s (longest {:.2} s) and took {:.2} s in the background; output held \
         them {:.2} s and took {:.2} s in the background",
        t.startup_seconds
            .map_or("(not measured)".into(), |s| format!("{s:.2} s")),
        t.stepping_seconds,
        particles as f64 * steps as f64 / t.stepping_seconds.max(1e-9),
        c.written,
        c.blocking_seconds,
        c.longest_blocking_seconds,
        c.background_seconds,
        t.output.blocking_seconds,
        t.output.background_seconds
    );
}

fn summarize(solvent: &mut Solvent, done: u64, wall: f64, dir: &Path) -> Result<Summary> {
    let o = solvent.observables()?;
    let cfg = solvent.config().clone();
    let st = solvent.stats();
    let viscosity = if cfg.shear_rate != 0.0 && st.viscosity_collisional.n > 0 {
        let k = &st.viscosity_kinetic;
        let c = &st.viscosity_collisional;
        let total_err = match (k.std_error(), c.std_error()) {
            (Some(a), Some(b)) => Some((a * a + b * b).sqrt()),
            _ => None,
        };
        let (theory_kinetic, theory_collisional) = theory::rule_viscosity(&cfg);
        Some(ViscositySummary {
            total: ValueWithError {
                value: k.mean().unwrap() + c.mean().unwrap(),
                error: total_err,
            },
            kinetic: with_error(k).unwrap(),
            collisional: with_error(c).unwrap(),
            theory_total: theory_kinetic + theory_collisional,
            theory_kinetic,
            theory_collisional,
        })
    } else {
        None
    };
    Ok(Summary {
        run_id: solvent.run_id().to_string(),
        device: solvent.backend_description(),
        collision_rule: solvent.physics().rule.name().into(),
        deterministic: solvent.physics().sums.is_some(),
        steps: solvent.step_count(),
        steps_this_run: done,
        fluid_particles: o.particles,
        wall_seconds: wall,
        particle_steps_per_second: if wall > 0.0 {
            o.particles as f64 * done as f64 / wall
        } else {
            0.0
        },
        temperature: with_error(&st.temperature),
        target_kt: cfg.kt,
        momentum: o.momentum,
        kinetic_energy: o.kinetic_energy,
        shear_rate: cfg.shear_rate,
        profile_slope: (cfg.walls.is_none())
            .then(|| st.profile_slope())
            .flatten()
            .map(|(value, e)| ValueWithError {
                value,
                error: Some(e),
            }),
        viscosity,
        solution: None,
        walls: crate::walls_report::summarize(solvent).map(|w| serde_json::json!(w)),
        output_directory: dir.to_path_buf(),
        changed_on_resume: solvent.changed_on_resume().to_vec(),
        interrupted: false,
        tuning_knobs: crate::knobs::knobs().set(),
        timing: Timing::default(),
    })
}

/// profile.csv and profile.svg: the time-averaged vx(y) with the imposed shear line.
fn write_profile(solvent: &Solvent, dir: &Path) -> Result<()> {
    use plotters::prelude::*;
    let st = solvent.stats();
    if st.profile_samples == 0 {
        return Ok(());
    }
    if let Some((name, rows)) = crate::walls_report::profile_rows(solvent) {
        return crate::walls_report::write_profile(dir, name, &rows, st.profile_samples);
    }
    let phys = solvent.physics();
    let prof = st.profile();
    let mut text = String::from("y,vx_measured,vx_imposed\n");
    for (i, v) in prof.iter().enumerate() {
        let y = i as f64 + 0.5;
        text += &format!("{y},{v:e},{:e}\n", phys.flow_velocity(y));
    }
    let p = dir.join(PROFILE_CSV);
    std::fs::write(&p, text).map_err(|e| MpcError::io(&p, e))?;

    let svg = dir.join(PROFILE_SVG);
    let ly = phys.length[1];
    let (lo, hi) = prof
        .iter()
        .chain([phys.flow_velocity(0.0), phys.flow_velocity(ly)].iter())
        .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    let pad = 0.1 * (hi - lo).max(1e-3);
    let draw = || -> std::result::Result<(), Box<dyn std::error::Error>> {
        let root = SVGBackend::new(&svg, (720, 480)).into_drawing_area();
        root.fill(&WHITE)?;
        let title = format!(
            "vx(y), {} samples, shear rate {}",
            st.profile_samples, phys.shear_rate
        );
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..ly, (lo - pad)..(hi + pad))?;
        chart
            .configure_mesh()
            .x_desc("y [a]")
            .y_desc("<vx>")
            .draw()?;
        chart
            .draw_series(LineSeries::new(
                [(0.0, phys.flow_velocity(0.0)), (ly, phys.flow_velocity(ly))],
                RED.stroke_width(2),
            ))?
            .label("imposed (Lees-Edwards)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
        chart
            .draw_series(
                prof.iter()
                    .enumerate()
                    .map(|(i, &v)| Circle::new((i as f64 + 0.5, v), 4, BLUE.filled())),
            )?
            .label("measured")
            .legend(|(x, y)| Circle::new((x + 10, y), 4, BLUE.filled()));
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| MpcError::Io {
        path: svg.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    })
}
