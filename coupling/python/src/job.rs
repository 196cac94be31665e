//! The whole `mpcbox run` job from Python: `mpcbox.run(config, steps=..., output=...)` (config
//! a dict of RON fields or a RON file) and `Solvent.run(steps, output=...)`. The same outputs
//! as the command (observables.csv, summary.json, profile.csv/.svg, checkpoint.mpcbox; with an
//! `md` section also md.csv, trajectory.xyz, md_summary.json), and the summary returned as a
//! dict with the time series and the profile as numpy arrays. The output directory follows the
//! command's rule: one holding another run's files is refused unless `overwrite=True`.
//! Progress shows as a bar on a terminal and as lines on stderr otherwise (`progress=`);
//! SIGINT and SIGTERM stop the job as they stop the command (`signals`).

use std::path::{Path, PathBuf};

use numpy::{IntoPyArray, PyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use ::mpcbox::checkpoint::CheckpointFile;
use ::mpcbox::checkpoint::MdCheckpoint;
use ::mpcbox::config::DeviceChoice;
use ::mpcbox::md::coupled::Coupling;
use ::mpcbox::output_dir::{OutputLock, Standing};
use ::mpcbox::progress::Bar;
use ::mpcbox::run::{run_job, run_job_steps, OBSERVABLES_CSV};
use ::mpcbox::{Config, MpcError, Solvent};

use crate::config::{config_error, config_from_dict};
use crate::{py_err, signals};

/// How a job is run: its step count, output directory, whether it may replace another run's
/// files, and the progress display.
pub struct JobArgs {
    pub steps: Option<u64>,
    pub output: Option<PathBuf>,
    pub overwrite: bool,
    pub progress: Progress,
}

/// `progress=`: None (off), or the seconds between progress lines where stderr is no terminal.
pub type Progress = Option<f64>;

/// Seconds between progress lines by default, as the command's.
const LINE_SECONDS: f64 = 30.0;

/// The `progress` argument: True (a bar on a terminal, a line every 30 s otherwise), False
/// (nothing), or the seconds between lines.
pub fn progress_arg(arg: &Bound<'_, PyAny>) -> PyResult<Progress> {
    if let Ok(on) = arg.cast::<pyo3::types::PyBool>() {
        return Ok(on.is_true().then_some(LINE_SECONDS));
    }
    match arg.extract::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(Some(s)),
        _ => Err(PyValueError::new_err(format!(
            "`progress` is {}; fix: True, False, or the seconds between progress lines (≥ 0)",
            arg.repr()?
        ))),
    }
}

/// What the job returns besides the summary: the chain observables of an MD job.
struct JobResult {
    summary: ::mpcbox::run::Summary,
    chains: Option<::mpcbox::md::observe::ChainSample>,
}

/// Run `solvent` to `total` steps into `dir`, with the bundled MD engine when the config has
/// an `md` section (as `mpcbox run` does; `md_ck`: the MD state of a resumed coupled run).
fn run_to(
    solvent: &mut Solvent,
    total: u64,
    dir: &Path,
    md_ck: Option<MdCheckpoint>,
    overwrite: bool,
    bar: &mut Bar,
) -> Result<JobResult, MpcError> {
    let _lock = OutputLock::acquire(dir)?;
    // the directory's owner once all is set up, before any file is written (another run's
    // files: refused, or removed where `overwrite`)
    let claim = |s: &Solvent| ::mpcbox::output_dir::claim(dir, "output", s.run_id(), overwrite);
    let Some(md) = solvent.config().md.clone() else {
        claim(solvent)?;
        let summary = run_job(solvent, total, dir, bar)?;
        return Ok(JobResult {
            summary,
            chains: None,
        });
    };
    let mut coupling = match md_ck {
        Some(ck) => {
            let c = Coupling::resume(&md, solvent, &ck)?;
            claim(solvent)?;
            c.with_output_from(dir, Some(solvent.step_count()))?
        }
        None if solvent.step_count() > 0 => {
            return Err(MpcError::Config(::mpcbox::ConfigError {
                field: "md".into(),
                problem: "the checkpoint holds only the fluid, not the MD solutes".into(),
                fix: "resume from a checkpoint of the coupled run".into(),
            }))
        }
        None => {
            let c = Coupling::new(&md, solvent)?;
            claim(solvent)?;
            c.with_output(dir)?
        }
    };
    let summary = run_job_steps(solvent, total, dir, bar, &mut coupling)?;
    let chains = Some(coupling.finish(dir)?);
    Ok(JobResult { summary, chains })
}

/// Run and hand back the summary dict (GIL released while the job runs).
pub fn run_solvent<'py>(
    py: Python<'py>,
    solvent: &mut Solvent,
    args: JobArgs,
) -> PyResult<Bound<'py, PyDict>> {
    let dir = args
        .output
        .clone()
        .unwrap_or_else(|| solvent.config().output.directory.clone());
    let standing =
        ::mpcbox::output_dir::check(&dir, "output", Some(solvent.run_id()), args.overwrite)
            .map_err(py_err)?;
    if standing != Standing::Own {
        // a solvent that wrote (or was continued) elsewhere starts a run of its own here
        solvent.start_new_run();
    }
    run_resumed(py, solvent, None, dir, args)
}

/// [`run_solvent`] into `dir`, continuing the MD state `md_ck` of a coupled checkpoint.
fn run_resumed<'py>(
    py: Python<'py>,
    solvent: &mut Solvent,
    md_ck: Option<MdCheckpoint>,
    dir: PathBuf,
    args: JobArgs,
) -> PyResult<Bound<'py, PyDict>> {
    let total = args.steps.unwrap_or(solvent.config().steps);
    let show = args.progress.filter(|_| ::mpcbox::ranks::is_root());
    let mut bar = Bar::new(total, show.is_none()).with_plain_lines(show.unwrap_or(LINE_SECONDS));
    let overwrite = args.overwrite;
    let result = run_interruptible(py, || {
        run_to(solvent, total, &dir, md_ck, overwrite, &mut bar)
    })?;
    let out = pythonize::pythonize(py, &result.summary)?.cast_into::<PyDict>()?;
    if let Some(c) = result.chains {
        out.set_item("chains", pythonize::pythonize(py, &c)?)?;
    }
    out.set_item("observables", series(py, &dir.join(OBSERVABLES_CSV))?)?;
    out.set_item("profile", solvent.stats().profile().into_pyarray(py))?;
    Ok(out)
}

/// Run `job` on a worker thread while this thread, the interpreter's, checks for signals:
/// SIGINT and SIGTERM ask the job to stop after its current step (it writes its checkpoint
/// and summary), and the job then ends in KeyboardInterrupt (SIGINT) or SystemExit (SIGTERM)
/// naming the checkpoint, instead of running on or dying without one (`signals`).
fn run_interruptible<T: Send>(
    py: Python<'_>,
    job: impl FnOnce() -> Result<T, MpcError> + Send,
) -> PyResult<T> {
    ::mpcbox::stop::clear_stop();
    let handlers = signals::install(py)?;
    let (interrupt, result) = std::thread::scope(|scope| {
        let worker = scope.spawn(job);
        let mut interrupt = None;
        while !worker.is_finished() {
            py.detach(|| std::thread::sleep(std::time::Duration::from_millis(20)));
            if interrupt.is_none() {
                // the job's handlers run here; a handler of the program's own may raise
                if let Err(e) = py.check_signals() {
                    ::mpcbox::stop::request_stop();
                    interrupt = Some(e);
                }
            }
        }
        (interrupt, worker.join())
    });
    handlers.restore(py)?;
    ::mpcbox::stop::clear_stop();
    let result = result.map_err(|_| {
        pyo3::exceptions::PyRuntimeError::new_err("the run's worker thread panicked")
    })?;
    match (interrupt, signals::received(), result) {
        (Some(e), _, _) => Err(e),
        (None, Some(sig), Err(e @ MpcError::Interrupted { .. })) => {
            Err(signals::stopped(py, sig, e.to_string()))
        }
        (None, Some(sig), Ok(_)) => Err(signals::stopped(
            py,
            sig,
            format!("signal {sig} came as the run ended: its files are complete"),
        )),
        (None, _, r) => r.map_err(py_err),
    }
}

/// The columns of observables.csv as numpy arrays (momentum as (n, 3); stress NaN where it
/// was not measured).
fn series<'py>(py: Python<'py>, csv: &Path) -> PyResult<Bound<'py, PyDict>> {
    let text = std::fs::read_to_string(csv)
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(format!("{}: {e}", csv.display())))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let mut columns: Vec<Vec<f64>> = vec![Vec::new(); header.len()];
    for line in lines {
        for (col, cell) in columns.iter_mut().zip(line.split(',')) {
            col.push(cell.trim().parse().unwrap_or(f64::NAN));
        }
    }
    let d = PyDict::new(py);
    let mut momentum = Vec::new();
    for (name, col) in header.iter().zip(columns) {
        match name.strip_prefix("momentum_") {
            Some(_) => momentum.push(col),
            None => d.set_item(*name, col.into_pyarray(py))?,
        }
    }
    let rows: Vec<Vec<f64>> = (0..momentum.first().map_or(0, Vec::len))
        .map(|i| momentum.iter().map(|c| c[i]).collect())
        .collect();
    let p = PyArray2::from_vec2(py, &rows).map_err(|e| PyValueError::new_err(e.to_string()))?;
    d.set_item("momentum", p)?;
    Ok(d)
}

/// The solvent `mpcbox.run` starts from (a config dict, a RON file, or (`resume`) a
/// checkpoint) and the directory it writes into (`output`; by default the config's, or the
/// one holding the checkpoint), refused before the fluid is set up when that directory holds
/// another run's files and `overwrite` is off.
fn open(
    py: Python<'_>,
    config: Option<&Bound<'_, PyAny>>,
    device: Option<&str>,
    resume: Option<PathBuf>,
    args: &JobArgs,
) -> PyResult<(Solvent, Option<MdCheckpoint>, PathBuf)> {
    let device = device
        .map(DeviceChoice::parse_cli)
        .transpose()
        .map_err(|e| config_error(py, &e))?;
    let check = |dir: &Path, field: &str, run: Option<&str>| {
        ::mpcbox::output_dir::check(dir, field, run, args.overwrite).map_err(py_err)
    };
    if let Some(path) = resume {
        // the head now (the directory is checked before the fluid is read or set up); the
        // fluid's blocks when the backend opens
        let mut file = CheckpointFile::open(&path).map_err(py_err)?;
        let ck = &mut file.head;
        // the run continues where its checkpoint lies, unless told otherwise
        let (dir, field) = match &args.output {
            Some(o) => (o.clone(), "output"),
            None => (
                path.parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
                "resume",
            ),
        };
        if check(&dir, field, ck.run_id.as_deref())? != Standing::Own {
            // continued elsewhere than in its run's directory: a branch, a run of its own
            ck.run_id = Some(::mpcbox::output_dir::new_run_id());
        }
        ck.config.output.directory = dir.clone();
        let md = ck.md.take();
        let solvent = py
            .detach(|| Solvent::from_checkpoint_file(&file, device))
            .map_err(py_err)?;
        crate::ranks::solvent_built();
        return Ok((solvent, md, dir));
    }
    let config = config.ok_or_else(|| {
        PyValueError::new_err("no config; fix: pass a dict of config fields, a RON file or resume=")
    })?;
    let mut cfg: Config = if let Ok(d) = config.cast::<PyDict>() {
        config_from_dict(py, d, args.steps)?
    } else {
        let path: PathBuf = config.extract()?;
        Config::from_file(&path).map_err(|e| config_error(py, &e))?
    };
    if let Some(d) = device {
        cfg.device = d;
    }
    let (dir, field) = match &args.output {
        Some(o) => (o.clone(), "output"),
        None => (cfg.output.directory.clone(), "output.directory"),
    };
    check(&dir, field, None)?;
    let solvent = py.detach(|| Solvent::new(cfg)).map_err(py_err)?;
    crate::ranks::solvent_built();
    Ok((solvent, None, dir))
}

/// `mpcbox.run(config=None, steps=None, output=None, device=None, resume=None,
/// overwrite=False, progress=True)`: the `mpcbox run` job. `config`: a dict of config fields
/// or the path of a RON file; `steps`: the total step count (default: the config's);
/// `output`: the output directory (default: the config's `output.directory`, or with `resume`
/// the directory holding the checkpoint); `device`: "auto", "cpu", "cuda:0", "cuda:0,1" or
/// "all"; `resume`: a checkpoint to continue; `overwrite`: replace the files of another run
/// in `output` (refused otherwise); `progress`: a bar on a terminal and lines on stderr
/// otherwise (True), nothing (False), or the seconds between lines. Returns the summary (as
/// summary.json) with `observables` (numpy time series) and `profile` (numpy vx(y)).
#[pyfunction]
#[pyo3(signature = (config = None, steps = None, output = None, device = None, resume = None,
                    overwrite = false, progress = None))]
#[allow(clippy::too_many_arguments)]
pub fn run<'py>(
    py: Python<'py>,
    config: Option<&Bound<'py, PyAny>>,
    steps: Option<i64>,
    output: Option<PathBuf>,
    device: Option<&str>,
    resume: Option<PathBuf>,
    overwrite: bool,
    progress: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let steps = steps
        .map(|s| {
            u64::try_from(s).map_err(|_| {
                PyValueError::new_err(format!("`steps` is {s}; fix: give a step count ≥ 0"))
            })
        })
        .transpose()?;
    let args = JobArgs {
        steps,
        output,
        overwrite,
        progress: progress.map_or(Ok(Some(LINE_SECONDS)), progress_arg)?,
    };
    let (mut solvent, md, dir) = open(py, config, device, resume, &args)?;
    run_resumed(py, &mut solvent, md, dir, args)
}
