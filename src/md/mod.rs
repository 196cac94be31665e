//! The bundled molecular-dynamics engine: solutes (bead-spring polymers, LJ or DPD particles)
//! for the MPC solvent, or a standalone MD code.
//!
//! * [`system`]: particles (types, masses, tags, molecules, image counts) and bonds.
//! * [`forcefield`]: LJ / WCA / DPD pair styles, harmonic and FENE bonds, thermostats, and the
//!   Philox-based DPD and Langevin random numbers.
//! * [`neighbor`]: cell lists (counting sort + prefix sum), full Verlet lists with a skin,
//!   Morton reordering, all-pairs for small systems.
//! * [`engine`]: [`Md`], forces and integration (velocity Verlet, BAOAB Langevin), rayon
//!   parallel and bitwise deterministic for any thread count.
//! * [`gpu`]: [`gpu::GpuMd`], the same engine on a CUDA GPU; `md.backend` selects it.
//! * [`build`], [`data`]: FCC lattices, polymer chains, LAMMPS data files.
//! * [`config`]: the `md` section of a run config; [`coupled`]: MD + MPC through
//!   [`crate::Solvent::step_with_solutes`]; [`observe`]: Rg, chain MSD, extended XYZ.

pub mod build;
pub mod config;
pub mod coupled;
pub mod data;
pub mod engine;
pub mod forcefield;
pub mod gpu;
pub mod neighbor;
pub mod observe;
pub mod system;

pub use config::MdConfig;
pub use engine::{ForceReport, Md, MdSettings};
pub use forcefield::{BondStyle, DpdParams, ForceField, LjTable, MdThermostat, PairStyle};
pub use gpu::{GpuMd, MdBackend};
pub use neighbor::NeighborMode;
pub use system::{Bond, System};
