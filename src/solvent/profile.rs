//! `MPCBOX_TIME_PHASES=N`: a profile of the steps for codes that cannot ask for one (a C or
//! Fortran MD code, LAMMPS's `fix mpcbox`). From the solvent's N-th step on, every phase of a
//! step is waited for and timed (`Solvent::time_phases`); when the solvent is dropped, the
//! milliseconds per step of each phase go to stderr, one line per process (its MPI rank named).
//! The waits slow the profiled steps: the sum of the phases is not the step's time unprofiled.

use super::Solvent;
use crate::error::{ConfigError, MpcError, Result};

const VARIABLE: &str = "MPCBOX_TIME_PHASES";

/// The steps profiled: from `from` on; `since` is the step count when timing was switched on.
pub(super) struct PhaseProfile {
    from: u64,
    since: Option<u64>,
}

impl PhaseProfile {
    /// The profile the environment asks for (None: unset or empty), from the knobs read
    /// once per process (`crate::knobs`).
    pub(super) fn from_env() -> Result<Option<PhaseProfile>> {
        let Some(text) = crate::knobs::knobs().get(VARIABLE) else {
            return Ok(None);
        };
        if text.trim().is_empty() {
            return Ok(None);
        }
        let from = text.trim().parse::<u64>().map_err(|_| {
            MpcError::Config(ConfigError {
                field: format!("environment variable {VARIABLE}"),
                problem: format!("`{text}` is not a step count"),
                fix: "the step from which to time the phases (0: every step), or unset it".into(),
            })
        })?;
        Ok(Some(PhaseProfile { from, since: None }))
    }
}

impl Solvent {
    /// After a step: switch the phase timing on once the profile's first step is reached.
    pub(super) fn profile_tick(&mut self) {
        let step = self.step;
        if let Some(p) = self
            .profile
            .as_mut()
            .filter(|p| p.since.is_none() && step >= p.from)
        {
            p.since = Some(step);
            self.backend.time_phases(true);
        }
    }

    /// The profile's line: ms per step of each timed phase since timing was switched on.
    fn profile_line(&self) -> Option<String> {
        let since = self.profile.as_ref()?.since?;
        let steps = self.step.saturating_sub(since);
        if steps == 0 {
            return None;
        }
        let phases: Vec<String> = self
            .timed_phases()
            .into_iter()
            .filter(|&(_, secs)| secs > 0.0)
            .map(|(name, secs)| format!("{name} {:.3}", secs * 1e3 / steps as f64))
            .collect();
        if phases.is_empty() {
            return None; // a backend without timed phases (the CPU)
        }
        Some(format!(
            "mpcbox phases (rank {} of {}, {steps} steps from step {since}, ms per step, each \
             waited for): {}",
            crate::ranks::rank(),
            crate::ranks::size(),
            phases.join(", ")
        ))
    }
}

impl Drop for Solvent {
    fn drop(&mut self) {
        if let Some(line) = self.profile_line() {
            eprintln!("{line}");
        }
    }
}
