//! The whole `mpcbox run` job from Python: `mpcbox.run(config, steps=..., output=...)` (config
//! a dict of RON fields or a RON file) and `Solvent.run(steps, output=...)`. The same outputs
//! as the command (observables.csv, summary.json, profile.csv/.svg, checkpoint.mpcbox; with an
//! `md` section also md.csv, trajectory.xyz, md_summary.json), and the summary returned as a
//! dict with the time series and the profile as numpy arrays.

use std::path::{Path, PathBuf};

use numpy::{IntoPyArray, PyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use ::mpcbox::checkpoint::MdCheckpoint;
use ::mpcbox::config::DeviceChoice;
use ::mpcbox::md::coupled::Coupling;
use ::mpcbox::run::{run_job, run_job_steps, Silent, OBSERVABLES_CSV};
use ::mpcbox::{Checkpoint, Config, MpcError, Solvent};

use crate::config::{config_error, config_from_dict};
use crate::py_err;

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
) -> Result<JobResult, MpcError> {
    let Some(md) = solvent.config().md.clone() else {
        let summary = run_job(solvent, total, dir, &mut Silent)?;
        return Ok(JobResult {
            summary,
            chains: None,
        });
    };
    let mut coupling = match md_ck {
        Some(ck) => Coupling::resume(&md, solvent, &ck)?
            .with_output_from(dir, Some(solvent.step_count()))?,
        None if solvent.step_count() > 0 => {
            return Err(MpcError::Config(::mpcbox::ConfigError {
                field: "md".into(),
                problem: "the checkpoint holds only the fluid, not the MD solutes".into(),
                fix: "resume from a checkpoint of the coupled run".into(),
            }))
        }
        None => Coupling::new(&md, solvent)?.with_output(dir)?,
    };
    let summary = run_job_steps(solvent, total, dir, &mut Silent, &mut coupling)?;
    let chains = Some(coupling.finish(dir)?);
    Ok(JobResult { summary, chains })
}

/// Run and hand back the summary dict (GIL released while the job runs).
pub fn run_solvent<'py>(
    py: Python<'py>,
    solvent: &mut Solvent,
    steps: Option<u64>,
    output: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    run_resumed(py, solvent, None, steps, output)
}

/// [`run_solvent`] continuing the MD state `md_ck` of a coupled checkpoint.
fn run_resumed<'py>(
    py: Python<'py>,
    solvent: &mut Solvent,
    md_ck: Option<MdCheckpoint>,
    steps: Option<u64>,
    output: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let total = steps.unwrap_or(solvent.config().steps);
    let dir = output.unwrap_or_else(|| solvent.config().output.directory.clone());
    let result = run_interruptible(py, || run_to(solvent, total, &dir, md_ck))?;
    let out = pythonize::pythonize(py, &result.summary)?.cast_into::<PyDict>()?;
    if let Some(c) = result.chains {
        out.set_item("chains", pythonize::pythonize(py, &c)?)?;
    }
    out.set_item("observables", series(py, &dir.join(OBSERVABLES_CSV))?)?;
    out.set_item("profile", solvent.stats().profile().into_pyarray(py))?;
    Ok(out)
}

/// The columns of observables.csv as numpy arrays (momentum as (n, 3); stress NaN where it
/// was not measured).
/// Run `job` on a worker thread while this thread, the interpreter's, checks for signals:
/// Ctrl-C asks the job to stop after its current step (it writes its checkpoint and summary)
/// and then surfaces as `KeyboardInterrupt`, instead of waiting for the run to end.
fn run_interruptible<T: Send>(
    py: Python<'_>,
    job: impl FnOnce() -> Result<T, MpcError> + Send,
) -> PyResult<T> {
    ::mpcbox::stop::clear_stop();
    std::thread::scope(|scope| {
        let worker = scope.spawn(job);
        let mut interrupt = None;
        while !worker.is_finished() {
            py.detach(|| std::thread::sleep(std::time::Duration::from_millis(20)));
            if interrupt.is_none() {
                if let Err(e) = py.check_signals() {
                    ::mpcbox::stop::request_stop();
                    interrupt = Some(e);
                }
            }
        }
        let result = worker.join().map_err(|_| {
            pyo3::exceptions::PyRuntimeError::new_err("the run's worker thread panicked")
        })?;
        ::mpcbox::stop::clear_stop();
        match (interrupt, result) {
            (Some(e), _) => Err(e),
            (None, r) => r.map_err(py_err),
        }
    })
}

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

/// The solvent `mpcbox.run` starts from: a config dict, a RON file, or (`resume`) a checkpoint.
fn open(
    py: Python<'_>,
    config: Option<&Bound<'_, PyAny>>,
    steps: Option<u64>,
    device: Option<&str>,
    resume: Option<PathBuf>,
) -> PyResult<(Solvent, Option<MdCheckpoint>)> {
    let device = device
        .map(DeviceChoice::parse_cli)
        .transpose()
        .map_err(|e| config_error(py, &e))?;
    if let Some(path) = resume {
        let mut ck = Checkpoint::load(&path).map_err(py_err)?;
        let md = ck.md.take();
        let solvent = py
            .detach(|| Solvent::from_checkpoint(ck, device))
            .map_err(py_err)?;
        crate::ranks::solvent_built();
        return Ok((solvent, md));
    }
    let config = config.ok_or_else(|| {
        PyValueError::new_err("no config; fix: pass a dict of config fields, a RON file or resume=")
    })?;
    let mut cfg: Config = if let Ok(d) = config.cast::<PyDict>() {
        config_from_dict(py, d, steps)?
    } else {
        let path: PathBuf = config.extract()?;
        Config::from_file(&path).map_err(|e| config_error(py, &e))?
    };
    if let Some(d) = device {
        cfg.device = d;
    }
    let solvent = py.detach(|| Solvent::new(cfg)).map_err(py_err)?;
    crate::ranks::solvent_built();
    Ok((solvent, None))
}

/// `mpcbox.run(config=None, steps=None, output=None, device=None, resume=None)`: the
/// `mpcbox run` job. `config`: a dict of config fields or the path of a RON file; `steps`: the
/// total step count (default: the config's); `output`: the output directory (default: the
/// config's `output.directory`); `device`: "auto", "cpu", "cuda:0", "cuda:0,1" or "all";
/// `resume`: a checkpoint to continue. Returns the summary (as summary.json) with
/// `observables` (numpy time series) and `profile` (numpy vx(y)).
#[pyfunction]
#[pyo3(signature = (config = None, steps = None, output = None, device = None, resume = None))]
pub fn run<'py>(
    py: Python<'py>,
    config: Option<&Bound<'py, PyAny>>,
    steps: Option<i64>,
    output: Option<PathBuf>,
    device: Option<&str>,
    resume: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let steps = steps
        .map(|s| {
            u64::try_from(s).map_err(|_| {
                PyValueError::new_err(format!("`steps` is {s}; fix: give a step count ≥ 0"))
            })
        })
        .transpose()?;
    let (mut solvent, md) = open(py, config, steps, device, resume)?;
    run_resumed(py, &mut solvent, md, steps, output)
}
