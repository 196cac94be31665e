//! What a run reports (`summary.json`): the summary types, a leaf module that imports no
//! producer (only `stats`' series). `run` fills the fluid's figures, `walls_report` contributes
//! the walls section and the MD coupling (`md::coupled`) the solution section, each from its
//! own module as JSON.

use std::path::PathBuf;

use serde::Serialize;

/// File names inside the output directory.
pub const OBSERVABLES_CSV: &str = "observables.csv";
pub const SUMMARY_JSON: &str = "summary.json";
pub const PROFILE_CSV: &str = "profile.csv";
pub const PROFILE_SVG: &str = "profile.svg";
pub const CHECKPOINT_FILE: &str = "checkpoint.mpcbox";

#[derive(Clone, Debug, Serialize)]
pub struct ValueWithError {
    pub value: f64,
    /// Standard error from block averages (None when too few samples).
    pub error: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ViscositySummary {
    pub total: ValueWithError,
    pub kinetic: ValueWithError,
    pub collisional: ValueWithError,
    pub theory_total: f64,
    pub theory_kinetic: f64,
    pub theory_collisional: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// The run these results belong to (recorded in the output directory and checkpoints).
    pub run_id: String,
    pub device: String,
    /// The collision rule ("SRD", "SRD+a", "MPC-AT", "MPC-AT+a"), whose theory `viscosity` quotes.
    pub collision_rule: String,
    /// Whether the run's sums were fixed point (`crate::fixed_sums`): the same bits on any
    /// number of threads, slabs, GPUs and ranks. False with `MPCBOX_CELL_SUMS=float`.
    pub deterministic: bool,
    pub steps: u64,
    pub steps_this_run: u64,
    pub fluid_particles: u64,
    pub wall_seconds: f64,
    pub particle_steps_per_second: f64,
    pub temperature: Option<ValueWithError>,
    pub target_kt: f64,
    pub momentum: [f64; 3],
    pub kinetic_energy: f64,
    pub shear_rate: f64,
    pub profile_slope: Option<ValueWithError>,
    pub viscosity: Option<ViscositySummary>,
    /// A coupled run under shear: the solution's viscosity and its parts (the MD section,
    /// `md::coupled::SolutionSummary`, serialised by the MD module that contributes it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub solution: Option<serde_json::Value>,
    /// Between walls: the profile fit, viscosity from its curvature, slip, wall forces
    /// (`walls_report::WallsSummary`, serialised by the module that contributes it).
    pub walls: Option<serde_json::Value>,
    pub output_directory: PathBuf,
    /// Config fields a resume was allowed to change from the checkpoint's (`--allow-change`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changed_on_resume: Vec<String>,
    /// The run stopped early on a signal (the summary of the steps done).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// The environment's tuning knobs this run was given (`crate::knobs`), if any.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub tuning_knobs: std::collections::BTreeMap<String, String>,
    /// Where the run's time went: start-up, stepping, checkpoints and output.
    pub timing: Timing,
}

/// Where a run's time went, in seconds (`summary.json` → `timing`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Timing {
    /// From the start of the process to the first step (None: not started by `mpcbox run`).
    pub startup_seconds: Option<f64>,
    /// The start-up's phases in the order they ended (kernels, devices, fluid, ...); phases
    /// of several GPUs taken at once overlap.
    pub startup_phases: Vec<Phase>,
    /// The steps themselves: the loop's time less what checkpoints and output held it.
    pub stepping_seconds: f64,
    pub checkpoints: CheckpointTimes,
    pub output: OutputTimes,
    /// The most host memory the process held (its peak resident set; None where the system
    /// does not say).
    pub peak_host_memory_bytes: Option<u64>,
    /// Resident host memory when the first step began.
    pub host_memory_at_first_step_bytes: Option<u64>,
    /// A resume: the host memory its read of the checkpoint's fluid took (None: a fresh run,
    /// or a fluid read whole).
    pub fluid_read: Option<FluidRead>,
}

/// What reading a checkpoint's fluid into the backend took of host memory
/// (`timing.fluid_read`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FluidRead {
    /// The window it was read in (`MPCBOX_CHECKPOINT_WINDOW`, or the default).
    pub window_bytes: u64,
    /// The most the resident host memory grew while the fluid was read, beyond the buffers
    /// the backend keeps (allocated before; on the CPU the fluid itself): the pieces in
    /// flight and, over several parts, the map of each particle's part (None where the
    /// system does not say).
    pub peak_host_memory_growth_bytes: Option<u64>,
}

/// One named phase of the start-up.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Phase {
    pub name: String,
    pub seconds: f64,
}

/// What a run's checkpoints cost (`timing.checkpoints`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CheckpointTimes {
    /// Checkpoints written, and of them those that failed.
    pub written: u64,
    pub failed: u64,
    /// Seconds the stepping thread was held: copies out, waits for a write still in flight,
    /// and writes it did itself.
    pub blocking_seconds: f64,
    pub longest_blocking_seconds: f64,
    /// Seconds the writer thread spent writing while the run stepped on.
    pub background_seconds: f64,
    /// Fluid bytes written (this process's blocks).
    pub bytes: u64,
    /// The most the resident host memory grew while a checkpoint held the steps (a copy of
    /// the fluid, or the pieces of a write from the live fluid; None where the system does
    /// not say).
    pub peak_host_memory_growth_bytes: Option<u64>,
}

/// What the other output files (flow fields, GSD frames) cost (`timing.output`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OutputTimes {
    pub files: u64,
    /// Seconds the stepping thread was held: reductions, copies and waits for the writer.
    pub blocking_seconds: f64,
    /// Seconds the writer thread spent writing.
    pub background_seconds: f64,
}

/// A series' mean with its block-average standard error (None without samples).
pub(crate) fn with_error(s: &crate::stats::Series) -> Option<ValueWithError> {
    s.mean().map(|value| ValueWithError {
        value,
        error: s.std_error(),
    })
}
