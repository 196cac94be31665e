//! mpcbox: a Multi-Particle Collision Dynamics (stochastic rotation dynamics) fluid that serves
//! as a black-box hydrodynamic solvent for molecular dynamics.
//!
//! Start at [`Solvent`]: build it from a [`Config`], call [`Solvent::step`] (or
//! [`Solvent::step_with_solutes`] from an MD loop), read [`Solvent::observables`].
//! `ARCHITECTURE.md` maps the modules.

pub mod backend;
pub mod background;
pub mod checkpoint;
pub mod config;
pub mod error;
pub mod fields;
pub mod fixed_sums;
pub mod fluid_parts;
pub mod gsd;
pub mod host_pool;
pub mod knobs;
pub mod md;
pub mod memory;
pub mod npy;
pub mod output_dir;
pub mod physics;
pub mod progress;
pub mod ranks;
pub mod report;
pub mod rng;
pub mod run;
pub mod solvent;
pub mod state;
pub mod stats;
pub mod stop;
pub mod timing;
pub mod walls_flow;
pub mod walls_report;

pub use checkpoint::Checkpoint;
pub use config::Config;
pub use error::{ConfigError, MpcError, Result};
pub use solvent::{Observables, Solvent};
