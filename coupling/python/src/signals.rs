//! SIGINT and SIGTERM while a job runs from Python, as `mpcbox run` takes them: the first asks
//! the job to stop after its step (it writes its checkpoint and summary), a second ends the
//! process at once. Python's own handling would not do: SIGTERM's default kills the
//! interpreter on the spot (no checkpoint), and a SIGINT inherited as ignored (nohup, `&` in
//! scripts) leaves a run that cannot be stopped. The handlers are Python's (`signal.signal`,
//! run when the interpreter's thread checks for signals) and are put back when the job ends;
//! a handler of the program's own is left in place.

use std::sync::atomic::{AtomicI32, Ordering};

use pyo3::prelude::*;

/// The signal that asked the running job to stop (0: none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);

/// Exit status of a second signal, as the command's.
const SECOND_SIGNAL_EXIT: i32 = 130;

#[pyfunction]
fn stop_on_signal(signum: i32, _frame: &Bound<'_, PyAny>) {
    if RECEIVED
        .compare_exchange(0, signum, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        eprintln!("mpcbox: second signal, exiting at once");
        std::process::exit(SECOND_SIGNAL_EXIT);
    }
    eprintln!("mpcbox: signal {signum}: stopping after this step (a second one exits at once)");
    ::mpcbox::stop::request_stop();
}

/// The handlers replaced for the duration of a job.
pub struct Installed {
    previous: Vec<(Py<PyAny>, Py<PyAny>)>,
}

/// Put the job's handlers on SIGINT and SIGTERM where they hold Python's defaults (the
/// default action, ignored, or `default_int_handler`). Nothing where this is not the main
/// thread (only it may set handlers; its signals are then the program's to handle).
pub fn install(py: Python<'_>) -> PyResult<Installed> {
    RECEIVED.store(0, Ordering::SeqCst);
    let mut previous = Vec::new();
    let threading = py.import("threading")?;
    let main = threading.call_method0("main_thread")?;
    if !threading.call_method0("current_thread")?.is(&main) {
        return Ok(Installed { previous });
    }
    let signal = py.import("signal")?;
    let defaults = [
        signal.getattr("SIG_DFL")?,
        signal.getattr("SIG_IGN")?,
        signal.getattr("default_int_handler")?,
    ];
    let handler = wrap_pyfunction!(stop_on_signal, py)?;
    for name in ["SIGINT", "SIGTERM"] {
        let num = signal.getattr(name)?;
        let current = signal.call_method1("getsignal", (&num,))?;
        // None: a handler set outside Python, which cannot be put back from here
        if defaults.iter().any(|d| current.eq(d).unwrap_or(false)) {
            signal.call_method1("signal", (&num, &handler))?;
            previous.push((num.unbind(), current.unbind()));
        }
    }
    Ok(Installed { previous })
}

impl Installed {
    /// Put the handlers found back.
    pub fn restore(self, py: Python<'_>) -> PyResult<()> {
        let signal = py.import("signal")?;
        for (num, handler) in self.previous {
            signal.call_method1("signal", (num, handler))?;
        }
        Ok(())
    }
}

/// The signal that stopped the job, if one did.
pub fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The exception a job stopped by `signum` ends in: KeyboardInterrupt for SIGINT (as Python
/// ends on Ctrl-C), SystemExit for SIGTERM (the interpreter then exits with status 1 and the
/// message, as `mpcbox run` does); both pass `except Exception`.
pub fn stopped(py: Python<'_>, signum: i32, message: String) -> PyErr {
    let sigterm = py
        .import("signal")
        .and_then(|s| s.getattr("SIGTERM"))
        .and_then(|s| s.extract::<i32>())
        .unwrap_or(15);
    if signum == sigterm {
        pyo3::exceptions::PySystemExit::new_err(message)
    } else {
        pyo3::exceptions::PyKeyboardInterrupt::new_err(message)
    }
}
