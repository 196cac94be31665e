//! Python module `mpcbox`: the solvent on numpy arrays, configured from Python or RON, and the
//! whole `mpcbox run` job.
//!
//! ```python
//! import numpy as np, mpcbox
//! s = mpcbox.Solvent(cells=(16, 16, 16), particles_per_cell=10, time_step=0.1,
//!                    collision={"Srd": {"angle_deg": 130.0}}, thermostat="Mbs")
//! s.step(pos, vel, mass)        # pos, vel: float64 (n, 3); mass: float64 (n,); vel updated in place
//! summary = mpcbox.run("examples/quickstart.ron", steps=500, output="out/q")
//! ```
//!
//! Over MPI ranks (built with `--features mpi`; `ranks.rs`): `mpcbox.use_mpi_comm(MPI.COMM_WORLD)`
//! before the first solvent, then `s.set_solutes_per_rank(True)` and each rank's own solutes.

use std::path::PathBuf;

use numpy::{
    IntoPyArray, PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray2,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use ::mpcbox::{Checkpoint, Config, MpcError};

mod config;
mod cuda_arrays;
mod host_arrays;
mod job;
mod ranks;
mod signals;

pub(crate) fn py_err(e: MpcError) -> PyErr {
    match e {
        MpcError::Config(c) => Python::attach(|py| config::config_error(py, &c)),
        MpcError::Solute { .. } => PyValueError::new_err(e.to_string()),
        MpcError::Checkpoint { .. } | MpcError::Io { .. } => PyOSError::new_err(e.to_string()),
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

/// Refuse, naming the argument and the fix, what is not the numpy array it must be: a
/// float64 `ndarray` of `ndim` dimensions in C order, writeable where the result is written
/// into it. (Extracting a wrong dtype gives numpy's "'ndarray' object cannot be cast as
/// 'ndarray'", a read-only array would panic when borrowed for writing, and a Fortran-ordered
/// or transposed array holds its rows in another order than the one read.)
fn check_array(obj: &Bound<'_, PyAny>, name: &str, ndim: usize, writeable: bool) -> PyResult<()> {
    use pyo3::exceptions::PyTypeError;
    let shape = if ndim == 2 { "(n, 3)" } else { "(n,)" };
    let np = obj.py().import("numpy")?;
    if !obj.is_instance(&np.getattr("ndarray")?)? {
        return Err(PyTypeError::new_err(format!(
            "`{name}` must be a numpy float64 array of shape {shape}, got {}; fix: \
             np.asarray({name}, dtype=np.float64)",
            obj.get_type().name()?
        )));
    }
    let dtype = obj.getattr("dtype")?.str()?.to_string();
    if dtype != "float64" {
        return Err(PyTypeError::new_err(format!(
            "`{name}` has dtype {dtype}; fix: pass a float64 array ({name}.astype(np.float64))"
        )));
    }
    let dims: usize = obj.getattr("ndim")?.extract()?;
    if dims != ndim {
        return Err(PyValueError::new_err(format!(
            "`{name}` has {dims} dimensions; fix: pass an array of shape {shape}"
        )));
    }
    let dims: Vec<usize> = obj.getattr("shape")?.extract()?;
    if ndim == 2 && dims[1] != 3 {
        return Err(PyValueError::new_err(format!(
            "`{name}` has shape {dims:?}; fix: pass an (n, 3) float64 array"
        )));
    }
    let flags = obj.getattr("flags")?;
    if !flags.getattr("c_contiguous")?.extract::<bool>()? {
        let order = match flags.getattr("f_contiguous")?.extract::<bool>()? {
            true => "Fortran-ordered (np.asfortranarray, a transpose)",
            false => "strided (a slice or a view)",
        };
        // a copy taken here would leave the caller's array without the new velocities
        let fix = match writeable {
            true => format!(
                "make it C-ordered once, before the loop ({name} = np.ascontiguousarray({name})), \
                 and pass that array: the new velocities are written into it in place"
            ),
            false => format!("pass np.ascontiguousarray({name})"),
        };
        return Err(PyValueError::new_err(format!(
            "`{name}` is {order}, not C-contiguous: its rows would be read in another order; \
             fix: {fix}"
        )));
    }
    if writeable && !flags.getattr("writeable")?.extract::<bool>()? {
        return Err(PyValueError::new_err(format!(
            "`{name}` is read-only, and the new velocities are written into it; fix: pass a \
             writeable array ({name}.copy())"
        )));
    }
    Ok(())
}

/// A count argument from Python: negative values are refused naming the argument (instead of
/// a bare OverflowError).
fn count(value: i64, name: &str) -> PyResult<u64> {
    u64::try_from(value)
        .map_err(|_| PyValueError::new_err(format!("`{name}` is {value}; fix: give a count ≥ 0")))
}

fn triples<'a>(a: &'a PyReadonlyArray2<'_, f64>, name: &str) -> PyResult<&'a [[f64; 3]]> {
    let shape = a.shape();
    if shape[1] != 3 {
        return Err(PyValueError::new_err(format!(
            "`{name}` has shape {shape:?}; fix: pass an (n, 3) float64 array"
        )));
    }
    // as_slice also takes Fortran order (another order of the same values): C order only
    let flat = a
        .as_slice()
        .ok()
        .filter(|_| a.is_c_contiguous())
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "`{name}` is not C-contiguous; fix: pass np.ascontiguousarray({name})"
            ))
        })?;
    Ok(flat.as_chunks::<3>().0)
}

/// The rows of an (n, 3) array written in place, in C order ([`check_array`] refused others).
fn c_ordered_mut<'a>(
    a: &'a mut PyReadwriteArray2<'_, f64>,
    name: &str,
) -> PyResult<&'a mut [[f64; 3]]> {
    let c_order = a.is_c_contiguous();
    let flat = a.as_slice_mut().ok().filter(|_| c_order).ok_or_else(|| {
        PyValueError::new_err(format!(
            "`{name}` is not C-contiguous; fix: {name} = np.ascontiguousarray({name}) before \
             the loop (the new velocities are written into it in place)"
        ))
    })?;
    Ok(flat.as_chunks_mut::<3>().0)
}

/// The values of a (n,) array ([`check_array`] refused a strided one).
fn values<'a>(a: &'a PyReadonlyArray1<'_, f64>, name: &str) -> PyResult<&'a [f64]> {
    a.as_slice().map_err(|_| {
        PyValueError::new_err(format!(
            "`{name}` is not contiguous; fix: pass np.ascontiguousarray({name})"
        ))
    })
}

/// The MPC fluid, living on the CPU or a GPU; solutes are handed over each step.
#[pyclass(module = "mpcbox")]
struct Solvent {
    // A Mutex makes the class Sync, as pyo3 requires; calls take `&mut self`, so it is never
    // contended (get_mut), and the GIL is released while the solvent works.
    inner: std::sync::Mutex<::mpcbox::Solvent>,
}

impl Solvent {
    fn new(inner: ::mpcbox::Solvent) -> Solvent {
        ranks::solvent_built();
        Solvent {
            inner: std::sync::Mutex::new(inner),
        }
    }

    fn get(&mut self) -> PyResult<&mut ::mpcbox::Solvent> {
        self.inner.get_mut().map_err(|_| {
            PyRuntimeError::new_err("the solvent is unusable after an earlier internal error")
        })
    }

    fn read<T>(&self, f: impl FnOnce(&::mpcbox::Solvent) -> T) -> PyResult<T> {
        let g = self.inner.lock().map_err(|_| {
            PyRuntimeError::new_err("the solvent is unusable after an earlier internal error")
        })?;
        Ok(f(&g))
    }
}

impl Solvent {
    /// [`Solvent::step`] for CUDA arrays: device pointers handed to the fluid's GPU.
    fn step_cuda(
        &mut self,
        py: Python<'_>,
        pos: &Bound<'_, PyAny>,
        vel: &Bound<'_, PyAny>,
        mass: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let p = cuda_arrays::cuda_array(pos, "pos", Some(3), false)?;
        let v = cuda_arrays::cuda_array(vel, "vel", Some(3), true)?;
        let m = cuda_arrays::cuda_array(mass, "mass", None, false)?;
        if p.rows != v.rows || m.rows != v.rows {
            return Err(PyValueError::new_err(format!(
                "`pos`, `vel`, `mass` have {}, {}, {} rows; fix: pass one row per solute",
                p.rows, v.rows, m.rows
            )));
        }
        let solutes = ::mpcbox::backend::DeviceSolutes {
            pos: p.ptr,
            vel: v.ptr,
            mass: m.ptr,
            n: v.rows,
            stream: v.stream.or(p.stream).unwrap_or(0),
        };
        let inner = self.get()?;
        py.detach(|| inner.step_with_device_solutes(&solutes))
            .map(|_| ())
            .map_err(py_err)
    }
}

#[pymethods]
impl Solvent {
    /// `mpcbox.Solvent(cells=(16, 16, 16), particles_per_cell=10, time_step=0.1, ...)`: the
    /// keywords are the fields of a RON config (same names, defaults and checks; `steps`
    /// defaults to 0 here). An unknown keyword or a bad value raises `mpcbox.ConfigError`
    /// (a ValueError) naming the field.
    #[new]
    #[pyo3(signature = (**config))]
    fn py_new(py: Python<'_>, config: Option<&Bound<'_, PyDict>>) -> PyResult<Solvent> {
        let empty = PyDict::new(py);
        let cfg = config::config_from_dict(py, config.unwrap_or(&empty), Some(0))?;
        let inner = py.detach(|| ::mpcbox::Solvent::new(cfg)).map_err(py_err)?;
        Ok(Solvent::new(inner))
    }

    /// Build from a dict of config fields, as `mpcbox.Solvent(**config)`.
    #[staticmethod]
    fn from_dict(py: Python<'_>, config: &Bound<'_, PyDict>) -> PyResult<Solvent> {
        Self::py_new(py, Some(config))
    }

    /// Build from RON config text.
    #[staticmethod]
    fn from_ron(py: Python<'_>, text: &str) -> PyResult<Solvent> {
        let cfg = Config::from_ron_str(text).map_err(|e| py_err(e.into()))?;
        let inner = py.detach(|| ::mpcbox::Solvent::new(cfg)).map_err(py_err)?;
        Ok(Solvent::new(inner))
    }

    /// Build from a RON config file.
    #[staticmethod]
    fn from_file(py: Python<'_>, path: &str) -> PyResult<Solvent> {
        let cfg = Config::from_file(std::path::Path::new(path)).map_err(|e| py_err(e.into()))?;
        let inner = py.detach(|| ::mpcbox::Solvent::new(cfg)).map_err(py_err)?;
        Ok(Solvent::new(inner))
    }

    /// Continue from a checkpoint file (its run; `run` writes by default into the directory
    /// holding it).
    #[staticmethod]
    fn from_checkpoint(py: Python<'_>, path: PathBuf) -> PyResult<Solvent> {
        let mut ck = Checkpoint::load(&path).map_err(py_err)?;
        ck.config.output.directory = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), std::path::Path::to_path_buf);
        let inner = py
            .detach(|| ::mpcbox::Solvent::from_checkpoint(ck, None))
            .map_err(py_err)?;
        Ok(Solvent::new(inner))
    }

    /// One MPC step with solutes: `vel` (n, 3) is updated in place. On error nothing changes.
    /// numpy arrays go through host memory; CUDA arrays (CuPy, PyTorch: anything with
    /// `__cuda_array_interface__`) on the fluid's GPU stay there (no host round trip), ordered
    /// after the work queued on the arrays' stream.
    fn step(
        &mut self,
        py: Python<'_>,
        pos: &Bound<'_, PyAny>,
        vel: &Bound<'_, PyAny>,
        mass: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        if cuda_arrays::is_cuda_array(vel) || cuda_arrays::is_cuda_array(pos) {
            return self.step_cuda(py, pos, vel, mass);
        }
        check_array(pos, "pos", 2, false)?;
        check_array(vel, "vel", 2, true)?;
        check_array(mass, "mass", 1, false)?;
        let pos: PyReadonlyArray2<'_, f64> = pos.extract()?;
        let mut vel: PyReadwriteArray2<'_, f64> = vel.extract()?;
        let mass: PyReadonlyArray1<'_, f64> = mass.extract()?;
        let p = triples(&pos, "pos")?;
        let m = values(&mass, "mass")?;
        if vel.shape()[1] != 3 {
            return Err(PyValueError::new_err("`vel` must have shape (n, 3)"));
        }
        let v = c_ordered_mut(&mut vel, "vel")?;
        let inner = self.get()?;
        py.detach(|| inner.step_with_solutes(p, v, m))
            .map(|_| ())
            .map_err(py_err)
    }

    /// Over MPI ranks (`mpcbox.use_mpi_comm`): True when each rank passes its own solutes to
    /// `step` (routed to the rank that owns their cells, the new velocities back to the rank
    /// that passed them); False (the default) when every rank passes the same ones. Every
    /// rank must then call `step` every step, with its solutes or with none (n = 0). No
    /// effect on one process.
    fn set_solutes_per_rank(&mut self, on: &Bound<'_, PyAny>) -> PyResult<()> {
        let on = ranks::flag(on)?;
        self.get()?.set_solutes_per_rank(on).map_err(py_err)
    }

    /// `steps` MPC steps of the fluid alone.
    #[pyo3(signature = (steps = 1))]
    fn step_fluid(&mut self, py: Python<'_>, steps: i64) -> PyResult<()> {
        let steps = count(steps, "steps")?;
        let inner = self.get()?;
        py.detach(|| {
            for _ in 0..steps {
                inner.step()?;
            }
            Ok(())
        })
        .map_err(py_err)
    }

    /// Begin the next step before its solutes are known: the fluid streams on its GPU(s) while
    /// the MD code moves its `n` solutes; the next `step` with n solutes (numpy, CuPy or
    /// PyTorch arrays) finishes it. Nothing else may step or read the fluid in between.
    /// Returns whether the step was begun (False on the CPU or for n = 0: `step` then does the
    /// whole step). A `step` that refuses its solutes leaves the step begun.
    fn begin_fluid(&mut self, py: Python<'_>, n: i64) -> PyResult<bool> {
        let n = count(n, "n")? as usize;
        let inner = self.get()?;
        py.detach(|| inner.begin_fluid_step(n)).map_err(py_err)
    }

    /// First half of a split step (the solutes are copied).
    fn begin_step(
        &mut self,
        pos: &Bound<'_, PyAny>,
        vel: &Bound<'_, PyAny>,
        mass: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        check_array(pos, "pos", 2, false)?;
        check_array(vel, "vel", 2, false)?;
        check_array(mass, "mass", 1, false)?;
        let pos: PyReadonlyArray2<'_, f64> = pos.extract()?;
        let vel: PyReadonlyArray2<'_, f64> = vel.extract()?;
        let mass: PyReadonlyArray1<'_, f64> = mass.extract()?;
        let m = values(&mass, "mass")?;
        self.get()?
            .begin_step(triples(&pos, "pos")?, triples(&vel, "vel")?, m)
            .map_err(py_err)
    }

    /// Second half of a split step: new solute velocities written into `vel_out` (n, 3).
    fn finish_step(&mut self, py: Python<'_>, vel_out: &Bound<'_, PyAny>) -> PyResult<()> {
        check_array(vel_out, "vel_out", 2, true)?;
        let mut vel_out: PyReadwriteArray2<'_, f64> = vel_out.extract()?;
        if vel_out.shape()[1] != 3 {
            return Err(PyValueError::new_err("`vel_out` must have shape (n, 3)"));
        }
        let v = c_ordered_mut(&mut vel_out, "vel_out")?;
        let inner = self.get()?;
        py.detach(|| inner.finish_step(v))
            .map(|_| ())
            .map_err(py_err)
    }

    /// Fluid observables as a dict.
    fn observables<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let o = self.get()?.observables().map_err(py_err)?;
        let d = PyDict::new(py);
        d.set_item("step", o.step)?;
        d.set_item("time", o.time)?;
        d.set_item("particles", o.particles)?;
        d.set_item("momentum", o.momentum.to_vec().into_pyarray(py))?;
        d.set_item("kinetic_energy", o.kinetic_energy)?;
        d.set_item("temperature", o.temperature)?;
        d.set_item("stress_xy", o.stress_xy)?;
        Ok(d)
    }

    /// The flow fields averaged over the samples since the last call (sampling is on when the
    /// config's `output.field_interval` > 0), as numpy arrays indexed [ix, iy, iz]: `density`
    /// (particles per cell), `velocity` (…, 3), `temperature`, the number of `samples`, and
    /// between walls `solid` (the part of each cell inside them).
    fn fields<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let f = self.get()?.take_fields().map_err(py_err)?;
        let [lx, ly, lz] = f.cells.map(|c| c as usize);
        let (mut density, mut temperature) = (Vec::new(), Vec::new());
        let mut velocity = Vec::new();
        let mut solid = Vec::new();
        for ix in 0..lx {
            for iy in 0..ly {
                for iz in 0..lz {
                    let c = f.index(ix as u32, iy as u32, iz as u32);
                    density.push(f.density[c]);
                    temperature.push(f.temperature[c]);
                    velocity.extend_from_slice(&f.velocity[c]);
                    if let Some(s) = &f.solid {
                        solid.push(s[c]);
                    }
                }
            }
        }
        let d = PyDict::new(py);
        d.set_item("samples", f.samples)?;
        d.set_item("density", density.into_pyarray(py).reshape([lx, ly, lz])?)?;
        d.set_item(
            "temperature",
            temperature.into_pyarray(py).reshape([lx, ly, lz])?,
        )?;
        d.set_item(
            "velocity",
            velocity.into_pyarray(py).reshape([lx, ly, lz, 3])?,
        )?;
        if f.solid.is_some() {
            d.set_item("solid", solid.into_pyarray(py).reshape([lx, ly, lz])?)?;
        }
        Ok(d)
    }

    /// Write a checkpoint (atomically). Refused where `path` holds another run's checkpoint
    /// (or another file), or its directory another run's files, unless `overwrite`.
    #[pyo3(signature = (path, overwrite = false))]
    fn checkpoint(&mut self, path: PathBuf, overwrite: bool) -> PyResult<()> {
        let s = self.get()?;
        // the fluid first: over MPI ranks every rank takes part, whatever rank 0 then decides
        let ck = s.checkpoint().map_err(py_err)?;
        ::mpcbox::output_dir::check_checkpoint_path(&path, s.run_id(), overwrite)
            .and_then(|_| ck.save(&path))
            .map_err(py_err)
    }

    /// The run this fluid belongs to: a fresh id, or its checkpoint's (recorded in the output
    /// directories and checkpoints it writes).
    #[getter]
    fn run_id(&self) -> PyResult<String> {
        self.read(|s| s.run_id().to_string())
    }

    /// Put the fluid back to a checkpoint of this solvent's box.
    fn restore(&mut self, path: &str) -> PyResult<()> {
        let ck = Checkpoint::load(std::path::Path::new(path)).map_err(py_err)?;
        self.get()?.restore(&ck).map_err(py_err)
    }

    /// Run the `mpcbox run` job on this solvent up to `steps` in total (default: the config's
    /// `steps`), writing the command's outputs into `output` (default: the config's
    /// `output.directory`; refused when it holds another run's files, unless `overwrite`),
    /// showing `progress` as `mpcbox.run` does. Returns the summary with numpy `observables`
    /// and `profile`.
    #[pyo3(signature = (steps = None, output = None, overwrite = false, progress = None))]
    fn run<'py>(
        &mut self,
        py: Python<'py>,
        steps: Option<i64>,
        output: Option<PathBuf>,
        overwrite: bool,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let args = job::JobArgs {
            steps: steps.map(|s| count(s, "steps")).transpose()?,
            output,
            overwrite,
            progress: progress.map_or(Ok(Some(30.0)), job::progress_arg)?,
        };
        job::run_solvent(py, self.get()?, args)
    }

    /// The time-averaged flow profile vx(y) (one value per cell layer), as numpy.
    fn profile<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        Ok(self.read(|s| s.stats().profile())?.into_pyarray(py))
    }

    /// The config as a dict (the keywords `mpcbox.Solvent` takes).
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let cfg = self.read(|s| s.config().clone())?;
        Ok(pythonize::pythonize(py, &cfg)?)
    }

    #[getter]
    fn step_count(&self) -> PyResult<u64> {
        self.read(|s| s.step_count())
    }

    #[getter]
    fn n_fluid(&self) -> PyResult<usize> {
        self.read(|s| s.n_fluid())
    }

    /// Box edge lengths in cells.
    #[getter]
    fn box_lengths(&self) -> PyResult<(f64, f64, f64)> {
        self.read(|s| {
            let l = s.physics().length;
            (l[0], l[1], l[2])
        })
    }

    #[getter]
    fn time_step(&self) -> PyResult<f64> {
        self.read(|s| s.physics().h)
    }

    #[getter]
    fn device(&self) -> PyResult<String> {
        self.read(|s| s.backend_description())
    }
}

#[pymodule]
#[pyo3(name = "mpcbox")]
fn mpcbox_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add(
        "__doc__",
        "mpcbox: a Multi-Particle Collision Dynamics (SRD) fluid as a black-box solvent for \
         molecular dynamics. `Solvent(cells=..., particles_per_cell=..., time_step=..., \
         collision=...)` holds the fluid (CPU or GPU); `Solvent.step(pos, vel, mass)` collides \
         your solutes with it (numpy float64 arrays, or CuPy/PyTorch CUDA arrays on the \
         fluid's GPU; `host_arrays(n)` gives numpy arrays in page-locked memory, which a GPU \
         reads and writes by DMA); `run(config, steps=..., output=...)` is the `mpcbox run` job; bad \
         config values raise `ConfigError` naming the field. Under `mpirun` (module built \
         with the `mpi` feature), `use_mpi_comm(MPI.COMM_WORLD)` before the first Solvent \
         runs one box over the ranks, each stepping it with its own solutes after \
         `Solvent.set_solutes_per_rank(True)`. Tutorial: docs/python.md.",
    )?;
    m.add_class::<Solvent>()?;
    m.add_function(wrap_pyfunction!(job::run, m)?)?;
    m.add_function(wrap_pyfunction!(host_arrays::host_arrays, m)?)?;
    m.add_function(wrap_pyfunction!(ranks::use_mpi_comm, m)?)?;
    m.add_function(wrap_pyfunction!(ranks::rank, m)?)?;
    m.add_function(wrap_pyfunction!(ranks::size, m)?)?;
    m.add("ConfigError", m.py().get_type::<config::ConfigError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
