//! The MD engine on a CUDA GPU ([`GpuMd`]): the same forces and integrators as the CPU engine
//! [`Md`](crate::md::Md) (LJ / WCA, DPD pair style and DPD thermostat with the same Philox pair
//! noise, harmonic and FENE bonds, velocity Verlet and BAOAB Langevin), in f64, with kernels
//! from `kernels/md.cu` compiled by NVRTC with `--fmad=false`.
//!
//! Every per-pair and per-particle expression rounds exactly as in the CPU engine; a particle
//! sums its neighbours in the order of the GPU list (cells in order, members sorted by index),
//! which differs from the CPU list order, so forces agree with the CPU engine to rounding. The
//! cell members are sorted after binning, so a GPU run is deterministic run to run.
//!
//! Particles stay in their input order on the GPU (no Morton reordering). Positions and
//! velocities live on the device; [`GpuMd::system`] downloads them on demand and
//! [`GpuMd::set_velocities`] uploads velocities changed from outside (MPC coupling).
//!
//! Layout (the scheme of the whole MD engine: a CPU compute in `md/<name>`, its GPU
//! counterpart in `md/gpu/<name>.rs`, its kernels in a section of `kernels/md.cu` that names
//! the Rust file): `setup` (device, kernels, uploads: the builder of [`GpuMd::new`]), `params`
//! (force-field tables on the device), `neighbor` (cell binning and Verlet lists, for
//! `md::neighbor`), `forces` (pair, DPD thermostat and bond forces in one kernel, for
//! `md::pair` + `md::bond`), `integrate` (the two half steps, for `md::integrate`, with the
//! Lees-Edwards wrap), `observe` (energies, stress and chain conformation reduced on the
//! device, for `md::rheology`) and `state` (checkpoints, for `md::engine::state`).

mod forces;
mod integrate;
mod neighbor;
mod observe;
mod params;
mod setup;
mod slabs;
mod state;

pub use slabs::{SlabMd, MD_HOST_NAMES};

/// The phases of an MD step as [`GpuMd::set_profiling`] and [`SlabMd::set_profiling`] time
/// them; on one GPU the second is the wait for the step's flags, decomposed it is the exchange
/// between slabs (which includes that wait).
pub const MD_PHASE_NAMES: [&str; 5] = [
    "first half (with the last step's closing kick)",
    "exchange + flags",
    "list builds",
    "forces",
    "second half (a run's last step)",
];

use std::sync::Arc;

use cudarc::driver::{
    CudaEvent, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchArgs, LaunchConfig,
    PinnedHostSlice, PushKernelArg,
};

use super::engine::{ForceReport, MdSettings};
use super::forcefield::{ForceField, MdThermostat};
use super::system::System;
use crate::backend::cuda::{CudaDevice, WallParams};
use crate::backend::{DeviceSolutes, SlabSolutes, SoluteSubset};
use crate::error::{ConfigError, MpcError, Result};
use crate::md::walls::WallPotential;

use neighbor::DeviceLists;
use params::Params;
use setup::{DeviceParticles, EnergyTerms, MdKernels};

/// Which engine runs the MD of a run config (`md.backend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum MdBackend {
    /// The GPU engine when a CUDA GPU is usable, else the CPU engine.
    #[default]
    Auto,
    Cpu,
    Cuda,
}

impl MdBackend {
    /// Whether a GPU engine should be used: `Cuda` fails with a clear error when no GPU is
    /// usable; `Auto` falls back to the CPU.
    pub fn use_gpu(self) -> Result<bool> {
        match self {
            MdBackend::Cpu => Ok(false),
            MdBackend::Auto => Ok(crate::backend::cuda::probe().is_ok()),
            MdBackend::Cuda => match crate::backend::cuda::probe() {
                Ok(_) => Ok(true),
                Err(why) => Err(MpcError::Config(ConfigError {
                    field: "md.backend".into(),
                    problem: format!("Cuda was requested but no CUDA GPU is usable: {why}"),
                    fix: "use md.backend: Auto (falls back to the CPU) or Cpu".into(),
                })),
            },
        }
    }
}

/// Threads per block.
const BLOCK: u32 = 128;

// The flag words the kernels raise, and the links' counts after them (the contract with
// kernels/md*.cu, defined once in `backend::cuda::contract`).
use crate::backend::cuda::contract::{
    MD_FLAG_BROKEN, MD_FLAG_CELL_MAX, MD_FLAG_COLLIDERS, MD_FLAG_COUNTS, MD_FLAG_HALO,
    MD_FLAG_NEIGH_MAX, MD_FLAG_REBUILD, MD_FLAG_WALL, MD_FLAG_WORK, MD_MAX_LINKS, MD_NFLAGS,
};

/// The part of the box an engine integrates: everything, or one y slab of a [`SlabMd`].
#[derive(Clone, Copy, Debug)]
pub(super) struct SlabRole {
    /// The y range owned, whole cell layers of the fluid's slab: [lo, hi).
    own: [f64; 2],
    /// The band whose particles get neighbour lists: `own` ± skin/2 (a particle further away
    /// cannot become this slab's before the next build).
    candidates: [f64; 2],
    /// The halo in y: a bond longer than this might see a stale partner and is refused.
    bond_reach: f64,
    /// The band binned for list builds: `own` ± the halo (the candidates' neighbours).
    band: [f64; 2],
    /// The band whose particles may lie in the slab's collision cells before the next build:
    /// `own` ± (a cell for the grid shift + skin/2).
    colliders: [f64; 2],
}

impl SlabRole {
    /// Whether this is one slab of a decomposed engine (not the whole box).
    fn is_slab(&self) -> bool {
        self.own[1] - self.own[0] < f64::INFINITY
    }

    const WHOLE: SlabRole = SlabRole {
        own: [f64::NEG_INFINITY, f64::INFINITY],
        candidates: [f64::NEG_INFINITY, f64::INFINITY],
        bond_reach: f64::INFINITY,
        band: [f64::NEG_INFINITY, f64::INFINITY],
        colliders: [f64::NEG_INFINITY, f64::INFINITY],
    };
}

fn drv(what: &str) -> impl FnOnce(cudarc::driver::DriverError) -> MpcError + '_ {
    move |e| MpcError::Device(format!("CUDA {what} failed (MD engine): {e:?}"))
}

/// A slab's work list: the particles within skin/2 of its layers at the last list build
/// (`md_build_list` appends them), the only ones it can own before the next build. The kernels
/// of every MD step run over it instead of over all n particles (most of which other slabs own).
struct WorkList {
    idx: CudaSlice<u32>,
    /// Entries the last build wrote (read with the build's flags).
    len: u32,
}

/// A null device pointer for an absent optional kernel argument.
static NULL_DEVICE_PTR: u64 = 0;

/// `m, work` of a per-particle kernel: the work list when there is one and `use_work`, else all
/// `n` particles (work null).
fn push_items<'a>(
    b: &mut LaunchArgs<'a>,
    work: Option<&'a WorkList>,
    use_work: bool,
    all: &'a u32,
) {
    match work.filter(|_| use_work) {
        Some(w) => b.arg(&w.len).arg(&w.idx),
        None => b.arg(all).arg(&NULL_DEVICE_PTR),
    };
}

/// The launch size of a per-particle kernel (as [`push_items`] chose).
fn items(work: Option<&WorkList>, use_work: bool, n: usize) -> usize {
    match work.filter(|_| use_work) {
        Some(w) => w.len as usize,
        None => n,
    }
}

/// One thread per item.
fn grid(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: ((n as u32).div_ceil(BLOCK).max(1), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One thread per item, or at most `blocks` blocks (0: no limit) whose threads take every
/// grid-th item (the kernels' `MD_FOR_ITEMS` loop).
fn items_grid(n: usize, blocks: u32) -> LaunchConfig {
    let mut g = grid(n);
    if blocks > 0 {
        g.grid_dim.0 = g.grid_dim.0.min(blocks);
    }
    g
}

/// Blocks per multiprocessor of the forces and list kernels while the fluid streams beside
/// the MD steps (`MPCBOX_MD_BLOCKS_PER_SM`; more than fit at once hold every multiprocessor, as
/// one thread per particle does). The fluid's pass 1 holds every register of a multiprocessor,
/// and an MD kernel of one thread per particle takes them all as the pass's blocks end, so the
/// two ran one after the other. Four
/// MD blocks leave room for one of the pass's four (the best of the counts scanned in
/// docs/scaling.md, "The MD beside the fluid's pass"). Only the engine on one GPU does this: a
/// slab of the decomposed engine holds a fraction of the beads, and its steps, already short
/// of warps, were slower so on four GPUs (measured in the same document).
pub const BLOCKS_PER_SM_BESIDE_FLUID: u32 = 4;

/// [`BLOCKS_PER_SM_BESIDE_FLUID`], or what `MPCBOX_MD_BLOCKS_PER_SM` says.
pub fn blocks_per_sm_beside_fluid() -> u32 {
    crate::knobs::knobs()
        .get("MPCBOX_MD_BLOCKS_PER_SM")
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(BLOCKS_PER_SM_BESIDE_FLUID)
}

/// The MD engine on one CUDA GPU. Same step API as [`Md`](crate::md::Md).
pub struct GpuMd {
    dev: CudaDevice,
    stream: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    k: MdKernels,
    /// Host copy of the system; positions, velocities and images are current only after
    /// [`GpuMd::system`].
    sys: System,
    host_current: bool,
    pub ff: ForceField,
    pub thermostat: MdThermostat,
    settings: MdSettings,
    step: u64,
    n: usize,
    parts: DeviceParticles,
    /// The `MD_FLAG_*` words.
    flags: CudaSlice<u32>,
    /// Their host copy (pinned: read every MD step).
    flags_host: PinnedHostSlice<u32>,
    /// Recorded after each copy of the flags: the host waits for it, not for the stream (work
    /// queued behind the copy, such as a step's speculative forces, runs on meanwhile).
    flags_ready: CudaEvent,
    lists: DeviceLists,
    energy: EnergyTerms,
    p: Params,
    report: ForceReport,
    /// The fluid's walls as the solutes feel them (`md::walls`), with their kernel form.
    walls: Option<(WallPotential, WallParams)>,
    /// Scratch of the on-device reductions (energies, stress, conformation).
    reduce: observe::ReductionScratch,
    /// What this engine integrates ([`SlabRole::WHOLE`] unless it is a slab of a [`SlabMd`]).
    role: SlabRole,
    /// Decomposed: each particle's y at the start of the step (who sends it on).
    y_prev: Option<CudaSlice<f64>>,
    /// Decomposed: the particles this slab's steps run over.
    work: Option<WorkList>,
    /// Decomposed: the particles that may lie in this slab's collision cells (the fluid's
    /// collision and the collision's exchange run over them).
    colliders: Option<WorkList>,
    /// The last step's closing kick is owed to the next step's first half (within a run of
    /// steps, [`GpuMd::close_step`]).
    kick_owed: bool,
    /// Decomposed: the drift's exchange for the next first half to pack (then emptied).
    fused_sends: integrate::MdSends,
    /// The GPU's multiprocessors.
    multiprocessors: u32,
    /// The most blocks the forces and list kernels are launched over (0: one thread per
    /// particle; [`GpuMd::set_blocks_per_multiprocessor`]).
    item_blocks: u32,
    /// Benchmarks: seconds per phase of [`GpuMd::step`] ([`MD_PHASE_NAMES`]), each waited
    /// for; None when not profiling.
    phase_seconds: Option<[f64; 5]>,
}

impl GpuMd {
    /// A short description of the device.
    pub fn describe(&self) -> String {
        self.dev.describe()
    }

    pub fn settings(&self) -> &MdSettings {
        &self.settings
    }

    pub fn step_count(&self) -> u64 {
        self.step
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Launch the forces and list kernels over `k` blocks per multiprocessor, each thread
    /// taking every grid-th particle (0: one thread per particle, the default). The results
    /// are the same bits either way; fewer blocks leave room to kernels of other streams.
    pub fn set_blocks_per_multiprocessor(&mut self, k: u32) {
        self.set_launch_blocks(k.saturating_mul(self.multiprocessors));
    }

    /// Launch the forces and list kernels over at most `blocks` blocks (0: no limit).
    pub fn set_launch_blocks(&mut self, blocks: u32) {
        self.item_blocks = blocks;
    }

    /// Number of neighbour list builds so far.
    pub fn list_builds(&self) -> u64 {
        self.lists.builds
    }

    pub fn cutoff(&self) -> f64 {
        self.ff.cutoff_with(self.thermostat)
    }

    pub fn report(&self) -> ForceReport {
        self.report
    }

    pub fn potential_energy(&self) -> f64 {
        self.report.potential_energy()
    }

    /// The system with current positions, velocities and images (downloaded when stale).
    pub fn system(&mut self) -> Result<&System> {
        if !self.host_current {
            // straight into the host system's arrays: no fresh allocation to fault in per call
            // (a sample of 1.6 M beads otherwise touched ~100 MB of new pages)
            let s = self.stream.clone();
            let sys = &mut self.sys;
            s.memcpy_dtoh(&self.parts.pos, sys.pos.as_flattened_mut())
                .map_err(drv("download"))?;
            s.memcpy_dtoh(&self.parts.vel, sys.vel.as_flattened_mut())
                .map_err(drv("download"))?;
            s.memcpy_dtoh(&self.parts.image, sys.image.as_flattened_mut())
                .map_err(drv("download"))?;
            s.synchronize().map_err(drv("synchronize"))?;
            self.host_current = true;
        }
        Ok(&self.sys)
    }

    /// Replace the velocities (e.g. after an MPC collision) and recompute velocity-dependent
    /// forces (DPD).
    pub fn set_velocities(&mut self, vel: &[[f64; 3]]) -> Result<()> {
        assert_eq!(vel.len(), self.n, "one velocity per particle");
        self.system()?;
        self.sys.vel.copy_from_slice(vel);
        let flat: Vec<f64> = vel.iter().flat_map(|a| a.iter().copied()).collect();
        self.stream
            .memcpy_htod(&flat, &mut self.parts.vel)
            .map_err(drv("upload"))?;
        self.velocities_changed()
    }

    /// Forces of the current configuration (downloaded), in the input particle order.
    pub fn forces(&self) -> Result<Vec<[f64; 3]>> {
        let f = self
            .stream
            .clone_dtoh(&self.parts.force)
            .map_err(drv("download"))?;
        Ok((0..self.n)
            .map(|i| [f[3 * i], f[3 * i + 1], f[3 * i + 2]])
            .collect())
    }

    /// Kinetic energy (the same chunked sum as
    /// [`Md::kinetic_energy`](crate::md::Md::kinetic_energy), reduced on the device).
    pub fn kinetic_energy(&mut self) -> Result<f64> {
        Ok(self.kinetic_energy_and_momentum()?.0)
    }

    pub fn total_energy(&mut self) -> Result<f64> {
        Ok(self.kinetic_energy()? + self.potential_energy())
    }

    /// Kinetic temperature with 3N − 3 degrees of freedom.
    pub fn temperature(&mut self) -> Result<f64> {
        let dof = (3 * self.n).saturating_sub(3).max(1) as f64;
        Ok(2.0 * self.kinetic_energy()? / dof)
    }

    /// Virial pressure (2 KE + W) / (3V), conservative forces only.
    pub fn pressure(&mut self) -> Result<f64> {
        Ok((2.0 * self.kinetic_energy()? + self.report.virial) / (3.0 * self.sys.volume()))
    }

    /// Total momentum Σ m v (chunked as [`Md::momentum`](crate::md::Md::momentum), reduced on
    /// the device).
    pub fn momentum(&mut self) -> Result<[f64; 3]> {
        Ok(self.kinetic_energy_and_momentum()?.1)
    }

    /// The flag words, copied into pinned memory and waited for.
    fn read_flags(&mut self) -> Result<Vec<u32>> {
        self.queue_flags()?;
        self.queued_flags()
    }

    /// Queue the copy of the flag words behind this stream's work (no wait), so that several
    /// slabs' copies overlap before [`GpuMd::queued_flags`] waits for each.
    fn queue_flags(&mut self) -> Result<()> {
        self.stream
            .memcpy_dtoh(&self.flags, &mut self.flags_host)
            .map_err(drv("download"))?;
        self.flags_ready.record(&self.stream).map_err(drv("event"))
    }

    /// The flag words of the last [`GpuMd::queue_flags`] (waits for the event after that copy,
    /// so for everything queued before it: with cudarc's event tracking off, the pinned slice
    /// records no event of its own).
    fn queued_flags(&self) -> Result<Vec<u32>> {
        self.flags_ready.synchronize().map_err(drv("sync"))?;
        Ok(self
            .flags_host
            .as_slice()
            .map_err(drv("download"))?
            .to_vec())
    }

    /// An error when a kernel has flagged a broken FENE bond.
    fn check_bonds_intact(&self, f: &[u32]) -> Result<()> {
        if f[MD_FLAG_BROKEN] == 0 {
            return Ok(());
        }
        let (a, b) = (f[MD_FLAG_BROKEN + 1], f[MD_FLAG_BROKEN + 2]);
        Err(MpcError::Unstable {
            step: self.step,
            what: format!(
                "md.bonds: FENE bond {}-{} is stretched at or beyond R0 (MD step, GPU engine)",
                a.min(b),
                a.max(b),
            ),
            fix: "use a smaller MD time step (raise md.steps_per_collision), a softer start, or \
                  a larger R0"
                .into(),
        })
    }

    /// An error when a slab of a decomposed engine met a bond longer in y than its halo.
    fn check_halo(&self, f: &[u32]) -> Result<()> {
        if f[MD_FLAG_HALO] == 0 {
            return Ok(());
        }
        let (a, b) = (f[MD_FLAG_HALO + 1], f[MD_FLAG_HALO + 2]);
        Err(MpcError::Config(ConfigError {
            field: "md.bonds".into(),
            problem: format!(
                "bond {}-{} spans {:.3} or more in y at MD step {}, more than the halo of the MD \
                 engine decomposed over the fluid's slabs",
                a.min(b),
                a.max(b),
                self.role.bond_reach,
                self.step
            ),
            fix: "use FENE bonds (their length is bounded by R0) or stiffer bonds, or run with \
                  MPCBOX_MD_SLABS=off (the MD engine on the first GPU)"
                .into(),
        }))
    }

    /// An error when a kernel has flagged a bead on or beyond a wall surface.
    fn check_walls(&self, f: &[u32]) -> Result<()> {
        if f[MD_FLAG_WALL] == 0 {
            return Ok(());
        }
        Err(crate::md::engine::wall_crossed(
            f[MD_FLAG_WALL + 1],
            0.0,
            self.step,
            "GPU",
        ))
    }

    /// The walls the solutes feel (None: a periodic box).
    pub fn walls(&self) -> Option<&WallPotential> {
        self.walls.as_ref().map(|w| &w.0)
    }

    /// Put the solutes between walls (or take the walls away) and recompute the forces.
    pub fn set_walls(&mut self, walls: Option<WallPotential>) -> Result<()> {
        if walls
            .as_ref()
            .is_some_and(|w| matches!(w.shape, crate::physics::walls::Shape::Field(_)))
        {
            // its kernel would need the grid on this GPU as well
            return Err(crate::MpcError::Config(crate::ConfigError {
                field: "walls".into(),
                problem: "solutes between walls given as data (DistanceField) are not run by \
                          the GPU MD engine"
                    .into(),
                fix: "let the solutes run on the CPU MD engine (the coupled run falls back to it)"
                    .into(),
            }));
        }
        self.walls = walls.map(|w| {
            let params = WallParams::of_shape(&w.shape);
            (w, params)
        });
        self.compute_forces()
    }

    /// Recompute forces after velocities changed (DPD); a no-op otherwise.
    pub fn velocities_changed(&mut self) -> Result<()> {
        if self.ff.velocity_dependent(self.thermostat) {
            self.compute_forces()?;
        }
        Ok(())
    }

    /// The GPU this engine runs on.
    pub fn ordinal(&self) -> usize {
        self.dev.context().ordinal()
    }

    /// The particles as device-resident solutes of an MPC collision on the same GPU
    /// ([`crate::Solvent::step_with_device_solutes`]): positions, velocities and masses stay
    /// where they are, ordered on this engine's stream. The collision overwrites the
    /// velocities, so the host copy is marked stale; call [`GpuMd::velocities_changed`] after
    /// the collision (velocity-dependent forces).
    pub fn device_solutes(&mut self) -> DeviceSolutes {
        self.host_current = false;
        let addr = |b: &CudaSlice<f64>| {
            let (ptr, _sync) = b.device_ptr(&self.stream);
            ptr
        };
        DeviceSolutes {
            pos: addr(&self.parts.pos),
            vel: addr(&self.parts.vel),
            mass: addr(&self.parts.mass),
            n: self.n,
            stream: self.stream.cu_stream() as u64,
        }
    }

    /// [`GpuMd::device_solutes`] with, for a slab of a decomposed engine, the list of the
    /// particles that may lie in its collision cells (filled by the last list build).
    pub(super) fn slab_solutes(&mut self) -> SlabSolutes {
        let solutes = self.device_solutes();
        let subset = self.colliders.as_ref().map(|c| {
            let (ptr, _sync) = c.idx.device_ptr(&self.stream);
            SoluteSubset {
                index: ptr,
                len: c.len as usize,
            }
        });
        SlabSolutes { solutes, subset }
    }

    /// Wait for the GPU.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(drv("sync"))
    }
}
