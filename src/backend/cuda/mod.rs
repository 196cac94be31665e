//! The CUDA backend: the whole MPC step on one GPU, mirroring [`crate::backend::cpu`].
//!
//! Fluid particles live on the GPU for the whole run (positions 3×f32, velocities 3×f64, one
//! packed cell word per particle: cell index in the low 30 bits, Lees-Edwards image + 1 in the
//! top 2). One step, all on the device, with only the four numbers of the [`StepReport`] copied
//! back:
//!
//! 1. zero the cell buffer (8 doubles per cell);
//! 2. **stream + bin + sum** (one thread per particle): stream, bin on the shifted grid, store
//!    the cell word, add `m v`, `m v²` and 1 to the cell with f64 `atomicAdd` (five atomics: the
//!    fluid mass is m × count; solutes add their mass and count to separate slots)
//!    ([`CellSumMethod::Atomics`], the simplest); or first add within each warp
//!    the lanes that share a cell ([`CellSumMethod::Warp`]); or push the particle onto a
//!    linked cell list with `atomicExch` and sum the lists one thread per cell
//!    ([`CellSumMethod::List`]); or ([`CellSumMethod::Fused`]) do the previous step's
//!    collision in the same pass (rotation(n) + streaming(n+1), two cell buffers alternating);
//! 3. solutes (uploaded each step) are binned and added with atomics;
//! 4. **cell pass** (one thread per cell): sums → cell velocity, Philox rotation axis, MBS
//!    factor, written over the sums in place; Σ E_rel and Σ (Nc − 1) reduced per block;
//! 5. **collide** (one thread per particle), collisional stress reduced per block; solutes too,
//!    their velocities copied back;
//! 6. optionally **reorder** by cell: counting sort (count, scan, scatter), each cell's segment
//!    sorted so that the permutation equals the CPU backend's, then a gather per array.
//!
//! A fresh fluid is generated on the GPU (`mpc_init_particles`, then the CPU's chunked mean and
//! energy sums reproduced chunk by chunk), equal bit for bit to `FluidState::initial`; a given
//! state (resume, tests) is uploaded.
//!
//! The kernels (`kernels/*.cu`, `*.cuh`) mirror `physics.rs` and `rng.rs` operation by
//! operation and are compiled by NVRTC with `--fmad=false`: per-cell draws equal the CPU's bit
//! for bit, and velocities differ from the CPU backend only by the summation order of the cell
//! sums (atomics), i.e. at the rounding level.
//!
//! ## Modules
//!
//! Each step of the algorithm is a module that launches the kernels of the `kernels/` file of
//! the same name (`stream.rs` → `kernels/stream.cu`, ...; the kernel tables in
//! `fluid_kernels.rs` and `rule_kernels.rs` list them by file). ARCHITECTURE.md's
//! `backend::cuda` table gives each module's role.

mod buffers;
mod cell_sums;
mod cells;
mod collide;
pub mod contract;
mod debug;
mod device;
mod device_solutes;
mod fluid_kernels;
mod fluid_view;
mod host_staging;
mod init;
pub mod kernel_cache;
pub mod kernel_units;
pub mod kernels;
pub(crate) mod launch;
pub mod multi;
mod observe;
mod open;
mod params;
mod pieces;
mod pinned_solutes;
mod reorder;
mod rule_kernels;
mod rules;
mod snapshot;
mod solute_coupling;
mod solutes;
mod step;
mod stream;
mod upload_slots;
mod wall_data;

pub use buffers::{
    device_bytes, footprint, footprint_default, rule_bytes_per_cell, BYTES_PER_CELL,
    BYTES_PER_PARTICLE, MAX_CUDA_CELLS, MAX_CUDA_PARTICLES, RESERVE_BYTES,
};
pub use cell_sums::CellSumMethod;
pub use device::{device_memory, driver_present, nvrtc_present, probe, CudaDevice};
pub(crate) use device::{drv, kernel, load_module};
pub use device_solutes::{page_locked, DeviceSoluteArrays};
pub use host_staging::SoluteTransfer;
pub use multi::transfer;
pub use open::{open_backend, open_backend_from};
pub(crate) use params::WallParams;
pub use pieces::{staged_copy_rates, StagedRates};
pub use pinned_solutes::{alloc_page_locked, free_page_locked, PinnedSoluteArrays};
pub use step::PHASE_NAMES;

use cudarc::driver::DriverError;

use super::{Backend, DeviceSolutes, FluidMoments, HostHandover, SoluteBatch, StepReport};
use crate::config::Config;
use crate::error::{MpcError, Result};
use crate::physics::{Physics, StepPlan};
use crate::state::FluidState;
use buffers::{check_fits, CellBuffers, FluidBuffers};
use fluid_view::FluidView;
use observe::Observables;
use params::KernelParams;
use step::PhaseTimer;

/// The MPC fluid on one GPU; in a multi-GPU run, one slab of it ([`multi::MultiCudaBackend`]
/// holds one per GPU).
pub struct CudaBackend {
    dev: CudaDevice,
    phys: Physics,
    method: CellSumMethod,
    /// Particle slots in use (slab mode: live particles and free slots).
    n: usize,
    /// Cells in the cell buffers (slab mode: this GPU's layers only).
    ncells: usize,
    fluid: FluidBuffers,
    cell: CellBuffers,
    /// The step's report, the moments' and the flow fields' sums (`observe.rs`).
    obs: Observables,
    /// Fused method: the parameters of the step whose fluid collision is still pending (its
    /// cell parameters are in `cell.sums`).
    pending: Option<KernelParams>,
    /// The buffer the next pass 1 sums into is zeroed and holds the step's solutes already
    /// (`step.rs`, device solutes binned before pass 1): pass 1 adds to it without zeroing.
    sums_prebinned: bool,
    /// The solutes' buffers and the state of a coupled step (`solutes.rs`).
    solutes: solute_coupling::SoluteCoupling,
    device_bytes: u64,
    /// Slab mode (one of several GPUs): layers held, migration buffers, particle ids.
    slab: Option<multi::Slab>,
    /// The extended cell sums of a collision rule beside plain SRD (`rules.rs`).
    rules: Option<rules::RuleBuffers>,
    /// The walls' data (a distance field's nodes, the clearance per cell), uploaded once.
    walls: wall_data::WallData,
    /// The cells a no-slip wall may cut (`cells.rs`), made at the first cell pass.
    cut_cells: Option<cells::CutCells>,
    timer: PhaseTimer,
}

impl CudaBackend {
    /// Open GPU `ordinal` for the config `cfg`; the fluid is `state`, or the initial state of
    /// `cfg` generated on the GPU (equal bit for bit to `FluidState::initial(cfg)`), after the
    /// memory check passed.
    pub fn open(
        cfg: &Config,
        phys: &Physics,
        state: Option<&FluidState>,
        ordinal: usize,
        method: CellSumMethod,
    ) -> Result<CudaBackend> {
        let dev = crate::timing::phase("open the GPU", || CudaDevice::open_for(ordinal, phys))?;
        let n = state.map_or(cfg.n_fluid(), |s| s.len() as u64);
        let (free, _) = dev.free_memory()?;
        check_fits(&dev.describe(), n, cfg.n_cells(), method, free)?;
        // between walls the initial state is made on the host (`mpc_init_particles` fills
        // the whole box) and uploaded
        let walled = match (state, &phys.walls) {
            (None, Some(_)) => Some(FluidState::initial(cfg)),
            _ => None,
        };
        match state.or(walled.as_ref()) {
            Some(s) => CudaBackend::with_device(dev, phys.clone(), s, method),
            None => {
                let mut be = CudaBackend::allocate(dev, phys.clone(), n as usize, method)?;
                crate::timing::phase("draw the fluid on the GPU", || {
                    be.generate_initial_state(cfg)
                })?;
                Ok(be)
            }
        }
    }

    /// A backend on GPU `ordinal` holding `state`, default cell-sum method.
    pub fn new(phys: Physics, state: &FluidState, ordinal: usize) -> Result<CudaBackend> {
        let dev = CudaDevice::open_for(ordinal, &phys)?;
        CudaBackend::with_device(dev, phys, state, CellSumMethod::from_env())
    }

    pub fn with_method(
        phys: Physics,
        state: &FluidState,
        ordinal: usize,
        method: CellSumMethod,
    ) -> Result<CudaBackend> {
        let dev = CudaDevice::open_for(ordinal, &phys)?;
        CudaBackend::with_device(dev, phys, state, method)
    }

    fn with_device(
        dev: CudaDevice,
        phys: Physics,
        state: &FluidState,
        method: CellSumMethod,
    ) -> Result<CudaBackend> {
        state
            .validate(&phys)
            .map_err(|e| MpcError::Device(format!("initial fluid state: {e}")))?;
        let mut be = CudaBackend::allocate(dev, phys, state.len(), method)?;
        be.upload_state(state)?;
        Ok(be)
    }

    /// Allocate every buffer for `n` fluid particles (contents unset) after the memory check.
    fn allocate(
        dev: CudaDevice,
        phys: Physics,
        n: usize,
        method: CellSumMethod,
    ) -> Result<CudaBackend> {
        let ncells = phys.n_cells();
        CudaBackend::allocate_cells(dev, phys, n, ncells, method)
    }

    /// As `allocate` with `ncells` cells in the cell buffer (a slab's layers in slab mode).
    fn allocate_cells(
        dev: CudaDevice,
        phys: Physics,
        n: usize,
        ncells: usize,
        method: CellSumMethod,
    ) -> Result<CudaBackend> {
        if device::wall_kernels_for(&phys) != dev.walls {
            return Err(MpcError::Device(
                "the GPU's kernels were compiled for other walls than the run's; fix: open the \
                 device with CudaDevice::open_for(ordinal, &physics)"
                    .into(),
            ));
        }
        let (free, _) = dev.free_memory()?;
        let needed = check_fits(&dev.describe(), n as u64, ncells as u64, method, free)?;
        let needed = rules::check_rule_fits(
            &dev.describe(),
            needed,
            phys.rule,
            ncells as u64,
            method,
            free,
        )?;
        let wall_data = wall_data::WallDataOnHost::of(&phys);
        let needed = needed + wall_data.bytes() + cells::cut_cells_bytes(&phys, ncells);
        if needed > free {
            return Err(MpcError::OutOfMemory {
                device: dev.describe(),
                needed_bytes: needed,
                available_bytes: free,
                fix: "use a coarser distance field (walls.spacing), a smaller system or \
                      device: Cpu"
                    .into(),
            });
        }
        let s = dev.stream.clone();
        let oom = |e: DriverError| MpcError::OutOfMemory {
            device: dev.describe(),
            needed_bytes: needed,
            available_bytes: free,
            fix: format!("allocation failed ({e:?}); use a smaller system or device: Cpu"),
        };
        let fluid = FluidBuffers::alloc(&s, n, method, &oom)?;
        let cell = CellBuffers::alloc(&s, ncells, method, &oom)?;
        let rules = rules::RuleBuffers::alloc(&dev, phys.rule, ncells, method, &oom)?;
        let obs = Observables::alloc(&s, phys.profile_bins(), &oom)?;
        let walls = wall_data.upload(&s, oom)?;
        Ok(CudaBackend {
            dev,
            phys,
            method,
            n,
            ncells,
            fluid,
            cell,
            obs,
            pending: None,
            sums_prebinned: false,
            solutes: Default::default(),
            device_bytes: needed,
            slab: None,
            rules,
            walls,
            cut_cells: None,
            timer: PhaseTimer::default(),
        })
    }

    /// Change the run constants (thermostat, shear, force, ...) keeping the fluid; the box
    /// must stay the same (benchmarks switch variants this way).
    pub fn set_physics(&mut self, phys: Physics) -> Result<()> {
        if phys.cells != self.phys.cells || phys.walls.is_some() != self.phys.walls.is_some() {
            return Err(MpcError::Device(
                "set_physics cannot change the box or add or remove walls; fix: open a new \
                 backend"
                    .into(),
            ));
        }
        let grid = |p: &Physics| match p.walls.as_ref().map(|w| &w.shape) {
            Some(crate::physics::walls::Shape::Field(f)) => Some(f.values.clone()),
            _ => None,
        };
        if grid(&phys) != grid(&self.phys) {
            // the uploaded grid is this backend's for its life
            return Err(MpcError::Device(
                "set_physics cannot change walls given as data; fix: open a new backend".into(),
            ));
        }
        self.flush()?;
        if phys.walls != self.phys.walls {
            // the walls may have moved: their clearance and cut cells with them
            let s = self.dev.stream.clone();
            let upload = |e| MpcError::Device(format!("upload of the walls' data: {e:?}"));
            self.walls = wall_data::WallDataOnHost::of(&phys).upload(&s, upload)?;
            self.cut_cells = None;
        }
        self.phys = phys;
        let (rule, ncells, method) = (self.phys.rule, self.ncells, self.method);
        rules::RuleBuffers::sync(&mut self.rules, &self.dev, rule, ncells, method)
    }

    pub fn physics(&self) -> &Physics {
        &self.phys
    }

    pub fn method(&self) -> CellSumMethod {
        self.method
    }

    pub fn device(&self) -> &CudaDevice {
        &self.dev
    }

    /// Device bytes allocated for the fluid and cells.
    pub fn device_bytes(&self) -> u64 {
        self.device_bytes
    }

    /// Wait for all queued work.
    pub fn synchronize(&self) -> Result<()> {
        self.dev.stream.synchronize().map_err(drv("synchronize"))
    }
}

/// The backend's optional features beside the fluid, borrowed together with a [`FluidView`].
pub(in crate::backend::cuda) struct Features<'a> {
    pub(in crate::backend::cuda) solutes: &'a mut solute_coupling::SoluteCoupling,
    /// A collision rule beside plain SRD (None under SRD).
    pub(in crate::backend::cuda) rules: Option<&'a mut rules::RuleBuffers>,
    /// Slab mode (one of several GPUs): layers, migration buffers, labels.
    pub(in crate::backend::cuda) slab: Option<&'a mut multi::Slab>,
}

impl CudaBackend {
    /// The fluid and the features, borrowed apart so that a feature's pass can write both.
    pub(in crate::backend::cuda) fn parts(&mut self) -> (FluidView<'_>, Features<'_>) {
        let view = FluidView {
            dev: &self.dev,
            method: self.method,
            fluid: &mut self.fluid,
            cell: &mut self.cell,
            report: &mut self.obs.report,
            n: self.n,
            ncells: self.ncells,
        };
        let features = Features {
            solutes: &mut self.solutes,
            rules: self.rules.as_mut(),
            slab: self.slab.as_mut(),
        };
        (view, features)
    }
}

/// What comes back: thin delegations to [`Observables`] and to the fluid's buffers, each a
/// pending collision applied first where the fluid is read.
impl CudaBackend {
    /// The report of the last enqueued step (waits for it).
    pub fn read_report(&self) -> Result<StepReport> {
        self.obs.read_report(&self.dev.stream)
    }

    /// The moments' reduction queued on this GPU's stream (a pending collision applied
    /// first), not waited for ([`Observables::queue_moments`]).
    pub(super) fn queue_moments(&mut self) -> Result<()> {
        self.flush()?;
        let bins = self.phys.profile_bins();
        let p = self.params(&self.phys.plan(0, false, false), 0);
        self.obs
            .queue_moments(&self.dev, &p, bins, &self.fluid, self.n)
    }

    /// The sums of the last [`CudaBackend::queue_moments`] (waits for them).
    pub(super) fn read_moments(&mut self) -> Result<FluidMoments> {
        self.obs.read_moments(&self.dev.stream, self.live())
    }

    /// Where this GPU's flow-field sums sit ([`observe::field_window`]).
    pub(in crate::backend::cuda) fn field_window(&self) -> (u32, u32, u32) {
        let offset = self.slab.as_ref().map(|sl| sl.cell_offset);
        observe::field_window(self.phys.cells, self.ncells, offset)
    }

    /// [`crate::backend::Backend::accumulate_fields`]: the pending collision applied, then
    /// [`Observables::accumulate_fields`] over this GPU's window.
    pub(super) fn accumulate_field_sums(&mut self) -> Result<()> {
        self.flush()?;
        let window = self.field_window();
        let p = self.params(&self.phys.plan(0, false, false), 0);
        let cells = self.phys.cells;
        self.obs
            .accumulate_fields(&self.dev, &p, window, cells, &self.fluid, self.n)
    }

    /// This GPU's field sums as they are in its window ([`CudaBackend::field_window`]), then
    /// zeroed; empty before the first sample.
    pub(in crate::backend::cuda) fn take_window_field_sums(&mut self) -> Result<Vec<f64>> {
        self.obs.take_field_sums(&self.dev.stream)
    }

    /// [`crate::backend::Backend::download`]: the fluid as it is now (a pending collision
    /// applied first).
    pub(super) fn download_state(&mut self) -> Result<FluidState> {
        self.flush()?;
        self.fluid.download(&self.dev.stream, self.n)
    }

    /// [`crate::backend::Backend::upload`]: replace the fluid by `state` of the same size.
    pub(super) fn upload_state(&mut self, state: &FluidState) -> Result<()> {
        state
            .validate(&self.phys)
            .map_err(|e| MpcError::Device(format!("uploaded fluid state: {e}")))?;
        if state.len() != self.n {
            return Err(MpcError::Device(format!(
                "uploaded fluid state has {} particles, the CUDA backend holds {}; fix: upload a \
                 state of the same size or open a new backend",
                state.len(),
                self.n
            )));
        }
        // a pending collision belonged to the state being replaced
        self.pending = None;
        self.fluid.upload(&self.dev.stream, state, self.n)
    }
}

/// The trait, each method in the module of its work.
impl Backend for CudaBackend {
    /// Page-locked host solutes go up first and are tested on the GPU before the fluid moves
    /// (`begin_coupled_step`, either call); others are checked on the host first, by the caller.
    fn tests_host_solute_values(
        &self,
        _: HostHandover,
        p: &[[f64; 3]],
        v: &[[f64; 3]],
        m: &[f64],
    ) -> bool {
        host_staging::tested_on_the_gpu(p, v, m)
    }

    fn time_phases(&mut self, on: bool) {
        self.set_profiling(on);
    }

    fn timed_phases(&self) -> Vec<(&'static str, f64)> {
        step::PHASE_NAMES
            .iter()
            .copied()
            .zip(self.phase_seconds())
            .collect()
    }

    fn describe(&self) -> String {
        format!("{} ({} cell sums)", self.dev.describe(), self.method.name())
    }

    fn n_fluid(&self) -> usize {
        self.n
    }

    /// Reordering every 20 steps was the fastest of 5, 10 and 20 in `mpcbox-bench gpu`: the sort
    /// costs more than the locality it buys back in fewer steps.
    fn preferred_reorder_interval(&self) -> u64 {
        20
    }

    fn step(
        &mut self,
        plan: &StepPlan,
        solutes: Option<&mut SoluteBatch<'_>>,
    ) -> Result<StepReport> {
        self.run_step(plan, solutes)
    }

    fn cuda_ordinal(&self) -> Option<usize> {
        Some(self.dev.ordinal)
    }

    fn check_device_solutes(&mut self, solutes: &DeviceSolutes) -> Result<()> {
        self.check_device_solutes_here(solutes)
    }

    fn step_device_solutes(
        &mut self,
        plan: &StepPlan,
        solutes: &DeviceSolutes,
    ) -> Result<StepReport> {
        self.step_device_solutes_here(plan, solutes)
    }

    fn begin_fluid_step(&mut self, plan: &StepPlan, n_solutes: usize) -> Result<bool> {
        self.begin_fluid_here(plan, n_solutes)
    }

    fn fluid_is_begun(&self) -> bool {
        self.solutes.fluid_begun.is_some()
    }

    /// The solutes go to the GPU here (their copy), so `finish_coupled` needs only the
    /// velocity array to fill.
    fn keeps_coupled_inputs(&self) -> bool {
        true
    }

    fn begin_coupled(
        &mut self,
        plan: &StepPlan,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<()> {
        self.begin_coupled_step(plan, pos, vel, mass)
    }

    fn finish_coupled(
        &mut self,
        plan: &StepPlan,
        solutes: &mut SoluteBatch<'_>,
    ) -> Result<StepReport> {
        self.finish_coupled_step(plan, solutes)
    }

    /// One kernel over the particles (a pending collision applied first), the sums read back.
    fn moments(&mut self) -> Result<FluidMoments> {
        self.queue_moments()?;
        self.read_moments()
    }

    fn accumulate_fields(&mut self) -> Result<()> {
        self.accumulate_field_sums()
    }

    fn take_field_sums(&mut self) -> Result<Vec<f64>> {
        let n = crate::fields::FIELD_SUMS * self.ncells;
        let mut sums = self.take_window_field_sums()?;
        sums.resize(n, 0.0);
        Ok(sums)
    }

    fn download(&mut self) -> Result<FluidState> {
        self.download_state()
    }

    fn fluid_source(&mut self) -> Result<Box<dyn crate::checkpoint::BlockSource + '_>> {
        if !snapshot::by_pieces() {
            return Ok(Box::new(snapshot::local_fluid(std::slice::from_mut(self))?));
        }
        Ok(Box::new(snapshot::live_source(std::slice::from_mut(self))?))
    }

    /// A copy in spare device memory, else in host memory within the window.
    fn fluid_snapshot(
        &mut self,
        host_bytes: u64,
    ) -> Result<Option<Box<dyn crate::checkpoint::BlockSource + Send>>> {
        snapshot::snapshot_or_host_copy(std::slice::from_mut(self), host_bytes)
    }

    fn upload(&mut self, state: &FluidState) -> Result<()> {
        self.upload_state(state)
    }
}
