//! Where a run's time goes before its first step: the code that takes a start-up phase
//! (kernel compilation, opening GPUs, drawing or reading the fluid) records it here by name,
//! and `run` reports the phases in its progress lines and `summary.json` (`timing`). Also the
//! process's resident memory, now and at its peak, from `/proc/self/status`, and how much a
//! checkpoint's fluid grew it while it was read (a resume).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use crate::report::{FluidRead, Phase};

static START: OnceLock<Instant> = OnceLock::new();
static PHASES: Mutex<Vec<Phase>> = Mutex::new(Vec::new());
static FLUID_READ: Mutex<Option<FluidRead>> = Mutex::new(None);

/// Mark the start of the process (`mpcbox run` calls it first): start-up is measured from here.
pub fn mark_process_start() {
    START.get_or_init(Instant::now);
}

/// Seconds since [`mark_process_start`] (None if it was never called).
pub fn since_process_start() -> Option<f64> {
    START.get().map(|t| t.elapsed().as_secs_f64())
}

/// Record a phase of `seconds`.
pub fn record(name: impl Into<String>, seconds: f64) {
    if let Ok(mut p) = PHASES.lock() {
        p.push(Phase {
            name: name.into(),
            seconds,
        });
    }
}

/// Run `f` as the phase `name`.
pub fn phase<T>(name: impl Into<String>, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = f();
    record(name, t.elapsed().as_secs_f64());
    out
}

/// The phases recorded so far (they are then forgotten).
pub fn take_phases() -> Vec<Phase> {
    PHASES
        .lock()
        .map(|mut p| std::mem::take(&mut *p))
        .unwrap_or_default()
}

/// A `kB` line of `/proc/self/status` in bytes.
fn status_bytes(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Resident host memory now (VmRSS).
pub fn resident_bytes() -> Option<u64> {
    status_bytes("VmRSS:")
}

/// The largest peak seen before a [`reset_peak`].
static FOLDED: AtomicU64 = AtomicU64::new(0);

/// The most resident host memory the process held so far (VmHWM, and any peak before a
/// [`reset_peak`]).
pub fn peak_resident_bytes() -> Option<u64> {
    status_bytes("VmHWM:").map(|p| p.max(FOLDED.load(Ordering::Relaxed)))
}

/// The most resident host memory since the last [`reset_peak`].
pub fn peak_since_reset() -> Option<u64> {
    status_bytes("VmHWM:")
}

/// Start the peak over from the resident memory now (Linux: `5` into `/proc/self/clear_refs`),
/// keeping the process's peak for [`peak_resident_bytes`]; false where that is not possible.
pub fn reset_peak() -> bool {
    if let Some(p) = status_bytes("VmHWM:") {
        FOLDED.fetch_max(p, Ordering::Relaxed);
    }
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// `f`'s result and the most the resident memory grew while it ran: the peak since a
/// [`reset_peak`] at its start less the resident memory then (None where the system does not
/// say).
pub fn growth_over<T>(f: impl FnOnce() -> T) -> (T, Option<u64>) {
    let before = resident_bytes();
    let measured = reset_peak();
    let out = f();
    let growth = match (measured, before, peak_since_reset()) {
        (true, Some(b), Some(p)) => Some(p.saturating_sub(b)),
        _ => None,
    };
    (out, growth)
}

/// A read of a checkpoint's fluid in a window of `window_bytes` that grew the resident memory
/// by `growth` bytes beyond the buffers the backend keeps; of several reads (the count, then
/// the read) the largest growth is kept.
pub fn record_fluid_read(window_bytes: u64, growth: Option<u64>) {
    if let Ok(mut r) = FLUID_READ.lock() {
        let most = r
            .as_ref()
            .and_then(|r| r.peak_host_memory_growth_bytes)
            .max(growth);
        *r = Some(FluidRead {
            window_bytes,
            peak_host_memory_growth_bytes: most,
        });
    }
}

/// The reads of a checkpoint's fluid recorded so far, if any (then forgotten).
pub fn take_fluid_read() -> Option<FluidRead> {
    FLUID_READ.lock().ok().and_then(|mut r| r.take())
}
