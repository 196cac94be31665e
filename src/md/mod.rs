//! The bundled molecular-dynamics engine: solutes (bead-spring polymers, LJ or DPD particles)
//! for the MPC solvent, or a standalone MD code. Laid out as HOOMD-blue and OpenMM separate an
//! engine: the system, the computes (neighbour lists, pair and bond forces, integrators and
//! thermostats), and the engines that compose them, each GPU piece beside its CPU one.
//!
//! System and set-up:
//! * [`system`]: particles (types, masses, tags, molecules, image counts) and bonds;
//!   [`boundary`]: the periodic box (minimum image, wrapping) every compute asks.
//! * [`build`], [`data`]: FCC lattices, random gases, polymer chains, LAMMPS data files;
//!   [`config`]: the `md` section of a run config.
//!
//! Computes (CPU):
//! * [`neighbor`]: cell lists (counting sort + prefix sum), full Verlet lists with a skin,
//!   Morton reordering, all-pairs for small systems.
//! * [`pair`]: LJ / WCA and DPD pair styles (DPD also as a thermostat); [`bond`]: harmonic and
//!   FENE bonds; [`forcefield`]: the pair and bond styles of a run.
//! * [`integrate`]: velocity Verlet, the BAOAB Langevin O step, the thermostat choice;
//!   [`random`]: the Philox-based DPD, Langevin and initial-velocity streams.
//!
//! Engines:
//! * [`engine`]: [`Md`], the CPU engine (rayon parallel, bitwise deterministic for any thread
//!   count); [`settings`]: what both engines take ([`MdSettings`]) and report ([`ForceReport`]).
//! * [`gpu`]: [`GpuMd`], the same engine on a CUDA GPU (kernels in `kernels/md.cu`), with one
//!   file per CPU compute (`gpu::neighbor`, `gpu::forces`, `gpu::integrate`); `md.backend`
//!   selects it.
//! * [`walls`]: the fluid's walls for the solutes (a WCA wall potential, CPU; the GPU engine's
//!   `md_wall_forces`).
//! * [`coupled`]: MD + MPC through [`crate::Solvent::step_with_solutes`] (or device-resident
//!   solutes on the GPU), with coupled checkpoints; [`observe`]: Rg, chain MSD, extended XYZ
//!   and GSD frames; [`rheology`]: the solutes' stress tensor and the chains' conformation
//!   (gyration tensor, orientation angle, end-to-end vector) under shear.
//!
//! Lees-Edwards shear (`MdSettings::shear`, the fluid's convention and clock) lives in
//! [`boundary`]: the sheared minimum image, the wrap with its x and vx jumps, image counts.

pub mod bond;
pub mod boundary;
pub mod build;
pub mod coupled;
pub mod data;
pub mod engine;
pub mod forcefield;
pub mod from_config;
pub mod gpu;
pub mod integrate;
pub mod neighbor;
pub mod observe;
pub mod pair;
pub mod random;
pub mod rheology;
pub mod settings;
pub mod system;
pub mod walls;

pub use boundary::PeriodicBox;
pub use engine::{ForceReport, Md, MdSettings, MdState};
pub use forcefield::{BondStyle, DpdParams, ForceField, LjTable, MdThermostat, PairStyle};
pub use from_config::MdConfig;
pub use gpu::{GpuMd, MdBackend};
pub use neighbor::NeighborMode;
pub use settings::ShearFlow;
pub use system::{Bond, System};
