//! The fluid over MPI ranks from Python: a script started by `mpirun` hands mpcbox its mpi4py
//! communicator (`mpcbox.use_mpi_comm(MPI.COMM_WORLD)`) before building the first solvent;
//! every rank then builds the same solvent, holds its y slabs of the box and, after
//! `Solvent.set_solutes_per_rank(True)`, steps it with the solutes it holds. Needs the module
//! built with the crate's `mpi` feature; without it `use_mpi_comm` raises ConfigError.

use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};

use ::mpcbox::ConfigError as FieldError;

/// Set once a solvent exists in this process: it runs alone, so adopting a communicator after
/// it would leave this rank's solvents disagreeing about who holds the box.
static SOLVENT_BUILT: AtomicBool = AtomicBool::new(false);
/// Set once a communicator was adopted (the library refuses a second one too, with the C name).
static ADOPTED: AtomicBool = AtomicBool::new(false);

/// Record that this process built a solvent (every constructor calls this).
pub fn solvent_built() {
    SOLVENT_BUILT.store(true, Ordering::Relaxed);
}

const USAGE: &str = "from mpi4py import MPI; mpcbox.use_mpi_comm(MPI.COMM_WORLD)";

fn comm_error(py: Python<'_>, problem: &str, fix: &str) -> PyErr {
    crate::config::config_error(
        py,
        &FieldError {
            field: "(MPI communicator)".into(),
            problem: problem.into(),
            fix: fix.into(),
        },
    )
}

/// The communicator's Fortran handle: `comm.py2f()` of an mpi4py communicator, or the int
/// itself.
fn fortran_handle(comm: &Bound<'_, PyAny>) -> PyResult<i32> {
    let kind = comm.get_type().name()?;
    let handle = if comm.is_instance_of::<PyBool>() {
        None
    } else if comm.hasattr("py2f")? {
        Some(comm.call_method0("py2f")?)
    } else if comm.is_instance_of::<PyInt>() {
        Some(comm.clone())
    } else {
        None
    };
    let Some(handle) = handle else {
        return Err(PyTypeError::new_err(format!(
            "`comm` must be an mpi4py communicator or its Fortran handle (an int from \
             comm.py2f()), got {kind}; fix: {USAGE}"
        )));
    };
    let wide: i64 = handle.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "`comm`: {kind}.py2f() did not return an int; fix: pass an mpi4py communicator \
             ({USAGE})"
        ))
    })?;
    i32::try_from(wide).map_err(|_| {
        PyValueError::new_err(format!(
            "`comm` handle {wide} does not fit a Fortran integer (MPI_Fint); fix: pass the \
             mpi4py communicator itself or its comm.py2f()"
        ))
    })
}

/// What mpi4py, when the script uses it, can tell about the communicator before mpcbox
/// touches it: not COMM_NULL, not an intercommunicator, and MPI initialised with a thread
/// level that lets `mpcbox.run`'s worker thread make the calls (SERIALIZED or MULTIPLE).
fn check_with_mpi4py(comm: &Bound<'_, PyAny>, handle: i32) -> PyResult<()> {
    let py = comm.py();
    // only when the script imported it: importing mpi4py.MPI would initialise MPI
    let Ok(mpi) = py.import("sys")?.getattr("modules")?.get_item("mpi4py.MPI") else {
        return Ok(());
    };
    let initialised: bool = mpi.call_method0("Is_initialized")?.extract()?;
    let finalised: bool = mpi.call_method0("Is_finalized")?.extract()?;
    if !initialised || finalised {
        return Ok(()); // the library refuses it with its message
    }
    let null: i64 = mpi.getattr("COMM_NULL")?.call_method0("py2f")?.extract()?;
    if i64::from(handle) == null {
        return Err(PyValueError::new_err(format!(
            "`comm` is MPI.COMM_NULL; fix: pass a live communicator ({USAGE})"
        )));
    }
    if comm.hasattr("Is_inter")? && comm.call_method0("Is_inter")?.extract::<bool>()? {
        return Err(PyValueError::new_err(
            "`comm` is an intercommunicator; fix: pass an intracommunicator such as \
             MPI.COMM_WORLD (or comm.Merge())",
        ));
    }
    let level: i64 = mpi.call_method0("Query_thread")?.extract()?;
    let serialized: i64 = mpi.getattr("THREAD_SERIALIZED")?.extract()?;
    if level < serialized {
        return Err(comm_error(
            py,
            &format!(
                "MPI was initialised at thread level {level}, below MPI_THREAD_SERIALIZED \
                 ({serialized}); mpcbox.run makes its MPI calls from a worker thread"
            ),
            "leave mpi4py.rc.thread_level at its default (\"multiple\") or set it to \
             \"serialized\" before `from mpi4py import MPI`",
        ));
    }
    Ok(())
}

/// `use_mpi_comm(comm)`: run this process's solvents over an MPI communicator, one box over
/// all its ranks. `comm` is an mpi4py communicator (`MPI.COMM_WORLD`) or its Fortran handle
/// (`comm.py2f()`, an int). Call it once, after `from mpi4py import MPI` and before the first
/// Solvent; then every rank builds the same solvent and calls its methods in the same order
/// (they are collective), e.g. `s.set_solutes_per_rank(True)` and `s.step(pos, vel, mass)`
/// with the solutes each rank holds. mpcbox communicates on a duplicate of `comm`. Do not
/// call `MPI.Finalize()` while a solvent lives (mpi4py finalises at exit by itself).
/// Raises ConfigError when the module was built without MPI (the crate's `mpi` feature),
/// when called twice or after a Solvent was built; TypeError for anything but a
/// communicator or an int.
#[pyfunction]
pub fn use_mpi_comm(comm: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = comm.py();
    let handle = fortran_handle(comm)?;
    if !cfg!(feature = "mpi") {
        // the library's message names the cargo feature; a Python user rebuilds the wheel
        return Err(comm_error(
            py,
            "this mpcbox module was built without MPI",
            "rebuild it with the `mpi` feature: MATURIN_PEP517_ARGS=\"--features mpi\" pip \
             install ./coupling/python (Debian: apt-get install libopenmpi-dev libclang-dev \
             python3-mpi4py)",
        ));
    }
    if ADOPTED.load(Ordering::Relaxed) {
        return Err(comm_error(
            py,
            "this process already runs over a communicator",
            "call mpcbox.use_mpi_comm once, before the first Solvent",
        ));
    }
    if SOLVENT_BUILT.load(Ordering::Relaxed) {
        return Err(comm_error(
            py,
            "a Solvent was built in this process before it (that one runs on this rank \
             alone)",
            "call mpcbox.use_mpi_comm(comm) first, right after `from mpi4py import MPI`",
        ));
    }
    check_with_mpi4py(comm, handle)?;
    // SAFETY: `handle` is the Fortran form of a live communicator: mpi4py's py2f() of the
    // communicator object the caller passed (when mpi4py is loaded, checked above not to be
    // COMM_NULL or an intercommunicator), or an int the caller took from one (their promise,
    // as in C). The library refuses it unless MPI is initialised and not finalised, and only
    // duplicates it. mpi4py initialised MPI on import and keeps it initialised until the
    // interpreter exits (it finalises in Py_AtExit, after the interpreter's objects are torn
    // down); a dropped solvent makes no MPI call (the duplicate lives in a static), so only
    // stepping after a script's own MPI.Finalize() would break this, which the docstring
    // forbids.
    unsafe { ::mpcbox::ranks::adopt_fortran_comm(handle) }.map_err(crate::py_err)?;
    ADOPTED.store(true, Ordering::Relaxed);
    Ok(())
}

/// This process's rank among the solvent's MPI ranks (0 without MPI).
#[pyfunction]
pub fn rank() -> usize {
    ::mpcbox::ranks::rank()
}

/// The number of MPI ranks the solvent runs over (1 without MPI).
#[pyfunction]
pub fn size() -> usize {
    ::mpcbox::ranks::size()
}

/// `Solvent.set_solutes_per_rank(on)`'s argument: True or False, named in the error.
pub fn flag(on: &Bound<'_, PyAny>) -> PyResult<bool> {
    if !on.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "`on` must be True or False, got {}; fix: s.set_solutes_per_rank(True)",
            on.get_type().name()?
        )));
    }
    on.extract()
}
