//! Graceful stops, as GROMACS's mdrun does: the first SIGINT or SIGTERM asks the
//! run to stop after the step in progress; the job loop then writes a checkpoint and the
//! summary so far and ends with [`MpcError::Interrupted`] (a non-zero exit with a message);
//! a second signal ends the process at once. Library users (Python, C) ask for a stop with
//! [`request_stop`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use crate::error::{MpcError, Result};

/// Shared with the signal handlers, which set it.
static REQUESTED: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// Ask the running job to stop after its current step.
pub fn request_stop() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Whether a stop was asked for (by a signal or [`request_stop`]).
pub fn stop_requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// Forget a stop request (before a new job in the same process).
pub fn clear_stop() {
    REQUESTED.store(false, Ordering::SeqCst);
}

/// SIGINT and SIGTERM: the first sets the stop request, a second exits at once (status 130).
pub fn install_signal_handlers() -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM] {
        // order matters: the conditional shutdown sees the flag an earlier signal set
        signal_hook::flag::register_conditional_shutdown(sig, 130, REQUESTED.clone())
            .and_then(|_| signal_hook::flag::register(sig, REQUESTED.clone()))
            .map_err(|e| MpcError::Device(format!("cannot install the signal handlers: {e}")))?;
    }
    Ok(())
}
