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
    pub device: String,
    /// The collision rule ("SRD", "SRD+a", "MPC-AT", "MPC-AT+a"), whose theory `viscosity` quotes.
    pub collision_rule: String,
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
}

/// A series' mean with its block-average standard error (None without samples).
pub(crate) fn with_error(s: &crate::stats::Series) -> Option<ValueWithError> {
    s.mean().map(|value| ValueWithError {
        value,
        error: s.std_error(),
    })
}
