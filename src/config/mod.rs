//! Run configuration: RON text, deserialised with serde and then validated.
//!
//! Lengths are in units of the collision cell size a, masses in units of the fluid particle
//! mass scale, energies in units of kT as given. Every rejection names the field and the fix.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::error::ConfigError;

pub mod md;
mod resume;
mod sums;
pub mod tuning;
pub mod walls;
mod walls_checks;
pub mod walls_stored;

pub use tuning::{CellSumMethod, SumArithmetic, TuningConfig};

/// The collision rule of the MPC step (physics in `crate::physics::rules`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum CollisionRule {
    /// Stochastic rotation dynamics: relative velocities rotated by `angle_deg` about a random
    /// axis. `angular_momentum: true` (SRD+a) adds the rigid rotation that restores each cell's
    /// angular momentum about its centre of mass.
    Srd {
        angle_deg: f64,
        #[serde(default)]
        angular_momentum: bool,
    },
    /// MPC-AT (Andersen thermostat rule): relative velocities replaced by Maxwell-Boltzmann
    /// draws at kT whose mass-weighted cell mean is removed; a thermostat of its own.
    /// `angular_momentum: true` (MPC-AT+a) also restores each cell's angular momentum.
    MpcAt {
        #[serde(default)]
        angular_momentum: bool,
    },
}

/// Cell-level thermostat.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Thermostat {
    #[default]
    None,
    /// Maxwell-Boltzmann scaling: each cell's relative kinetic energy is rescaled to a draw from
    /// Gamma(3(Nc−1)/2, kT).
    Mbs,
}

/// Where the fluid lives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum DeviceChoice {
    /// A CUDA GPU when the driver, NVRTC and a device are present, otherwise the CPU backend.
    #[default]
    Auto,
    /// The rayon CPU backend.
    Cpu,
    /// These CUDA devices (one slab each when more than one).
    Cuda(Vec<u32>),
    /// Every CUDA device of the host.
    AllGpus,
}

impl DeviceChoice {
    /// The command-line spelling: `auto`, `cpu`, `all`, `cuda:0` or `cuda:0,1,2,3`.
    pub fn parse_cli(text: &str) -> Result<DeviceChoice, ConfigError> {
        let t = text.trim().to_ascii_lowercase();
        let bad = || ConfigError {
            field: "--device".into(),
            problem: format!("`{text}` is not a device"),
            fix: "use auto, cpu, all, or cuda:0 / cuda:0,1,2,3".into(),
        };
        match t.as_str() {
            "auto" => Ok(DeviceChoice::Auto),
            "cpu" => Ok(DeviceChoice::Cpu),
            "all" => Ok(DeviceChoice::AllGpus),
            _ => {
                let list = t.strip_prefix("cuda:").ok_or_else(bad)?;
                let ids: Result<Vec<u32>, _> =
                    list.split(',').map(|s| s.trim().parse::<u32>()).collect();
                ids.map(DeviceChoice::Cuda).map_err(|_| bad())
            }
        }
    }
}

/// Initial fluid flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum InitialFlow {
    /// The steady-state profile: linear shear flow when a shear rate is set; between walls the
    /// Couette / Poiseuille profile with the SRD viscosity (`physics::walls::theory`);
    /// otherwise at rest.
    #[default]
    Steady,
    /// Fluid at rest (zero mean velocity everywhere).
    Rest,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    /// Steps between rows of `observables.csv` (0: none).
    pub observable_interval: u64,
    /// Steps between samples that enter the time averages (profile, stress, temperature).
    pub sample_interval: u64,
    /// Steps excluded from the time averages at the start of a run.
    pub equilibration_steps: u64,
    /// Steps between checkpoints (0: only at the end).
    pub checkpoint_interval: u64,
    /// Directory for CSV, summary, plot and checkpoints.
    pub directory: PathBuf,
    /// Steps between flow-field files (`fields_<step>.vti`: density, velocity and temperature
    /// per cell averaged over the samples since the previous file; 0: none).
    pub field_interval: u64,
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            observable_interval: 100,
            sample_interval: 10,
            equilibration_steps: 0,
            checkpoint_interval: 0,
            directory: PathBuf::from("out"),
            field_interval: 0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Box size in collision cells (Lx, Ly, Lz); the cell size a is the unit of length.
    pub cells: [u32; 3],
    /// Mean number of fluid particles per cell, M.
    pub particles_per_cell: u32,
    /// Fluid particle mass m.
    #[serde(default = "one")]
    pub mass: f64,
    /// Thermal energy kT.
    #[serde(default = "one", rename = "kT")]
    pub kt: f64,
    /// Collision time step h.
    pub time_step: f64,
    pub collision: CollisionRule,
    #[serde(default = "yes")]
    pub grid_shift: bool,
    #[serde(default)]
    pub thermostat: Thermostat,
    /// Constant acceleration-producing force on every fluid particle.
    #[serde(default)]
    pub body_force: [f64; 3],
    /// Lees-Edwards shear rate γ̇: flow along x, gradient along y.
    #[serde(default)]
    pub shear_rate: f64,
    #[serde(default)]
    pub initial_flow: InitialFlow,
    #[serde(default = "one_u64")]
    pub seed: u64,
    /// Number of MPC steps of the run.
    pub steps: u64,
    #[serde(default)]
    pub output: OutputConfig,
    #[serde(default)]
    pub device: DeviceChoice,
    #[serde(default)]
    pub tuning: TuningConfig,
    /// Solutes simulated by the bundled MD engine and coupled through the collision.
    #[serde(default)]
    pub md: Option<md::MdConfig>,
    /// Walls confining the fluid (a slit or a pipe; `physics::walls`), None for a periodic box.
    /// Checkpoints store it in the binary form of `config::walls_stored`.
    #[serde(default, with = "walls_stored")]
    pub walls: Option<walls::WallsConfig>,
}

fn one() -> f64 {
    1.0
}
fn one_u64() -> u64 {
    1
}
fn yes() -> bool {
    true
}

/// Largest number of cells: the global cell index is a 32-bit word (also in the RNG counter).
pub const MAX_CELLS: u64 = u32::MAX as u64;

/// Largest number of fluid particles: far beyond any backend's memory (each GPU of several
/// holds its own slab; one GPU and the CPU refuse more than they index with 32 bits).
pub const MAX_PARTICLES: u64 = 1 << 40;

/// A rejection of `field`: what is wrong and how to fix it.
fn invalid(field: &str, problem: String, fix: &str) -> Result<(), ConfigError> {
    Err(ConfigError {
        field: field.into(),
        problem,
        fix: fix.into(),
    })
}

impl Config {
    /// Parse and validate RON text.
    pub fn from_ron_str(text: &str) -> Result<Config, ConfigError> {
        let cfg: Config = ron::Options::default()
            .with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME)
            .from_str(text)
            .map_err(|e| ConfigError::from_ron_in(text, e))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Read, parse and validate a RON file.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            field: "(file)".into(),
            problem: format!("cannot read {}: {e}", path.display()),
            fix: "give the path of an existing, readable RON config file".into(),
        })?;
        Self::from_ron_str(&text)
    }

    pub fn to_ron_string(&self) -> String {
        ron::ser::to_string_pretty(self, ron::ser::PrettyConfig::default())
            .expect("a Config always serialises")
    }

    /// Check every field; the first problem found is returned, naming the field and the fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_box()?;
        self.validate_scales()?;
        self.validate_collision()?;
        self.validate_flow()?;
        self.validate_run()?;
        if let Some(walls) = &self.walls {
            walls.validate(self)?;
        }
        if let Some(md) = &self.md {
            md.validate(self)?;
        }
        self.validate_sums()
    }

    /// Box edges, cell count and particle count.
    fn validate_box(&self) -> Result<(), ConfigError> {
        for (k, &l) in self.cells.iter().enumerate() {
            let name = ["cells.0 (Lx)", "cells.1 (Ly)", "cells.2 (Lz)"][k];
            if l < 2 {
                return invalid(
                    name,
                    format!("must be at least 2 cells (got {l})"),
                    "give each box edge 2 or more collision cells",
                );
            }
        }
        let ncells: u64 = self.cells.iter().map(|&l| l as u64).product();
        if ncells > MAX_CELLS {
            return invalid(
                "cells",
                format!("{ncells} cells exceed the limit of {MAX_CELLS}"),
                "use a smaller box (the global cell index is 32 bits)",
            );
        }
        if self.particles_per_cell == 0 {
            return invalid(
                "particles_per_cell",
                "must be at least 1 (got 0)".into(),
                "set the mean number of fluid particles per cell, typically 5 to 20",
            );
        }
        if ncells.saturating_mul(self.particles_per_cell as u64) > MAX_PARTICLES {
            return invalid(
                "particles_per_cell",
                format!(
                    "{} particles exceed the limit of {MAX_PARTICLES} per solvent",
                    ncells as u128 * self.particles_per_cell as u128,
                ),
                "use a smaller box or fewer particles per cell",
            );
        }
        Ok(())
    }

    /// Mass, kT and time step, and how far a particle streams in one step.
    fn validate_scales(&self) -> Result<(), ConfigError> {
        if !(self.mass.is_finite() && self.mass > 0.0) {
            return invalid(
                "mass",
                format!("must be finite and > 0 (got {})", self.mass),
                "set a positive particle mass such as 1.0",
            );
        }
        if !(self.kt.is_finite() && self.kt > 0.0) {
            return invalid(
                "kT",
                format!("must be finite and > 0 (got {})", self.kt),
                "set a positive thermal energy such as 1.0",
            );
        }
        if !(self.time_step.is_finite() && self.time_step > 0.0) {
            return invalid(
                "time_step",
                format!("must be finite and > 0 (got {})", self.time_step),
                "set a positive collision time step h such as 0.1",
            );
        }
        // Streaming more than half a box in y in one step would break the one-image LE wrap.
        let thermal = (self.kt / self.mass).sqrt();
        let max_travel = 10.0 * thermal * self.time_step;
        if max_travel > 0.5 * self.cells.iter().copied().min().unwrap_or(2) as f64 {
            return invalid(
                "time_step",
                format!(
                    "h = {} lets particles stream about {:.2} cells per step",
                    self.time_step, max_travel
                ),
                "reduce time_step so that 10·sqrt(kT/m)·h is below half the smallest box edge",
            );
        }
        Ok(())
    }

    /// The collision rule and its thermostat: the SRD angle in range; MPC-AT draws its relative
    /// velocities at kT, so a second thermostat (MBS) on top is refused.
    fn validate_collision(&self) -> Result<(), ConfigError> {
        match &self.collision {
            CollisionRule::Srd { angle_deg, .. } => {
                if !(angle_deg.is_finite() && *angle_deg > 0.0 && *angle_deg < 180.0) {
                    return invalid(
                        "collision.angle_deg",
                        format!("must lie strictly between 0 and 180 degrees (got {angle_deg})"),
                        "use an SRD rotation angle such as 130.0 or 90.0",
                    );
                }
            }
            CollisionRule::MpcAt { .. } => {
                if self.thermostat != Thermostat::None {
                    return invalid(
                        "thermostat",
                        format!(
                            "{:?} with collision: MpcAt makes no sense: the Andersen rule draws \
                             every relative velocity from the Maxwell-Boltzmann distribution at \
                             kT, it is its own thermostat",
                            self.thermostat
                        ),
                        "remove `thermostat` (or set it to None) with MpcAt; MBS is for Srd",
                    );
                }
            }
        }
        Ok(())
    }

    /// Body force and Lees-Edwards shear.
    fn validate_flow(&self) -> Result<(), ConfigError> {
        for (k, f) in self.body_force.iter().enumerate() {
            if !f.is_finite() {
                return invalid(
                    &format!("body_force.{k}"),
                    format!("must be finite (got {f})"),
                    "give three finite numbers, e.g. (0.0, 0.0, 0.0)",
                );
            }
        }
        if !self.shear_rate.is_finite() {
            return invalid(
                "shear_rate",
                format!("must be finite (got {})", self.shear_rate),
                "give the Lees-Edwards shear rate as a finite number, or 0.0 for none",
            );
        }
        let wall_speed = self.shear_rate.abs() * self.cells[1] as f64;
        if wall_speed * self.time_step > 0.5 {
            return invalid(
                "shear_rate",
                format!(
                    "γ̇·Ly·h = {:.3} cells per step is too strong for the grid",
                    wall_speed * self.time_step
                ),
                "lower shear_rate so that shear_rate·Ly·time_step stays below 0.5",
            );
        }
        Ok(())
    }

    /// Output sampling, the device list and the run length.
    fn validate_run(&self) -> Result<(), ConfigError> {
        if self.output.sample_interval == 0 {
            return invalid(
                "output.sample_interval",
                "must be at least 1".into(),
                "set output.sample_interval to 1 (sample every step) or more",
            );
        }
        let o = &self.output;
        if o.field_interval > 0 && o.field_interval < o.sample_interval {
            return invalid(
                "output.field_interval",
                format!(
                    "{} steps between field files is less than one sample (sample_interval {})",
                    o.field_interval, o.sample_interval
                ),
                "set output.field_interval to a multiple of output.sample_interval, or 0 for no fields",
            );
        }
        if let DeviceChoice::Cuda(list) = &self.device {
            if list.is_empty() {
                return invalid(
                    "device",
                    "Cuda([]) names no GPU".into(),
                    "list GPU ordinals, e.g. Cuda([0]), or use Auto / Cpu / AllGpus",
                );
            }
            let mut sorted = list.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if sorted.len() != list.len() {
                return invalid(
                    "device",
                    format!("Cuda({list:?}) names a GPU twice"),
                    "list each GPU ordinal once",
                );
            }
        }
        // (on the CPU backend the slabs are ignored with a warning: a config may name a GPU
        // layout and still run where there is none)
        if let DeviceChoice::Cuda(list) = &self.device {
            let g = list.len();
            if self.tuning.slabs > 0 && (self.tuning.slabs as usize) < g {
                return invalid(
                    "tuning.slabs",
                    format!("{} slabs for {g} GPUs", self.tuning.slabs),
                    "use at least one slab per GPU, or 0 for one per GPU",
                );
            }
        }
        if self.steps > (1u64 << 47) {
            return invalid(
                "steps",
                format!("{} steps exceed the limit of 2^47", self.steps),
                "run fewer steps per job and resume from checkpoints",
            );
        }
        Ok(())
    }

    pub fn n_cells(&self) -> u64 {
        self.cells.iter().map(|&l| l as u64).product()
    }

    /// Fluid particles: M per cell of the box, or per unit volume of the fluid between walls.
    pub fn n_fluid(&self) -> u64 {
        match &self.walls {
            Some(w) => w.fluid_particles(self),
            None => self.n_cells() * self.particles_per_cell as u64,
        }
    }

    /// The SRD rotation angle in radians (0 for MPC-AT, which rotates nothing).
    pub fn rotation_angle(&self) -> f64 {
        match self.collision {
            CollisionRule::Srd { angle_deg, .. } => angle_deg.to_radians(),
            CollisionRule::MpcAt { .. } => 0.0,
        }
    }
}
