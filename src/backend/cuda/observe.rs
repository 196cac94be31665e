//! What comes back from the GPU (`kernels/observe.cu`): [`Observables`], the device state
//! of what a run observes and its operations: the step's report (every pass adds into it),
//! the fluid's moments and velocity profile reduced on the device, and the flow-field sums.
//! Each operation takes what it reads (the device, the kernels' parameters, the fluid's
//! buffers, the field window) from its caller, `CudaBackend`'s thin delegations in `mod.rs`.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig};

use super::buffers::FluidBuffers;
use super::device::OnAllocError;
use super::device::{drv, grid, CudaDevice};
use super::params::KernelParams;
use crate::backend::{FluidMoments, StepReport};
use crate::error::{MpcError, Result};

pub(super) use super::params::{REPORT_COPIES, REPORT_WALL_OFFSET, REPORT_WORDS};

/// Words of the moments' sums (Σ m v, Σ ½ m v²), each spread over [`REPORT_COPIES`] copies
/// as the report's are.
const MOMENT_WORDS: usize = 4;

/// `words`-word sums from their copies on the device (copy k at k · words), added up.
fn add_copies<const W: usize>(copies: &[f64]) -> [f64; W] {
    let mut r = [0.0; W];
    for c in copies.chunks(W) {
        for (a, x) in r.iter_mut().zip(c) {
            *a += x;
        }
    }
    r
}

/// The moments' reduction targets.
struct MomentBuffers {
    /// [Σ m vx, Σ m vy, Σ m vz, Σ ½ m v²], in [`REPORT_COPIES`] copies.
    sums: CudaSlice<f64>,
    /// Σ vx and count per profile bin (`Physics::profile_bins`: y layers of one cell, z
    /// layers between plates normal to z).
    profile_sum: CudaSlice<f64>,
    profile_count: CudaSlice<u64>,
}

impl MomentBuffers {
    /// Zeroed buffers for a profile of `bins` bins.
    fn alloc(s: &Arc<CudaStream>, bins: usize, oom: OnAllocError<'_>) -> Result<MomentBuffers> {
        Ok(MomentBuffers {
            sums: s
                .alloc_zeros::<f64>(MOMENT_WORDS * REPORT_COPIES)
                .map_err(oom)?,
            profile_sum: s.alloc_zeros::<f64>(bins).map_err(oom)?,
            profile_count: s.alloc_zeros::<u64>(bins).map_err(oom)?,
        })
    }
}

/// A step report from the report buffer (its copies added up; one GPU's, or the sum over
/// slabs).
pub(super) fn report_from_words(copies: &[f64]) -> StepReport {
    let r = add_copies::<REPORT_WORDS>(copies);
    let w = REPORT_WALL_OFFSET;
    StepReport {
        relative_energy: r[0],
        relative_dof: r[1],
        kinetic_stress_sum: r[2],
        collisional_stress_sum: r[3],
        wall_momentum: [[r[w], r[w + 1], r[w + 2]], [r[w + 3], r[w + 4], r[w + 5]]],
    }
}

/// Blocks of the moments' reduction at most: enough to fill any current GPU's multiprocessors
/// many times over, few enough that each block's fixed costs are paid once per tens of
/// thousands of particles.
const MOMENT_BLOCKS: usize = 2048;

/// The moments' launch over `n` particles and the particles per block (a multiple of the
/// block size).
fn moments_grid(n: usize) -> (LaunchConfig, u32) {
    let one = grid(1);
    let block = one.block_dim.0 as usize;
    let per_block = n.div_ceil(MOMENT_BLOCKS).next_multiple_of(block).max(block);
    let blocks = n.div_ceil(per_block).max(1) as u32;
    let cfg = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        ..one
    };
    (cfg, per_block as u32)
}

/// Where a GPU's flow-field sums sit: (first global y layer of its own cells, layers in the
/// buffer, halo layers on each side), for a box of `cells` of which the GPU holds `ncells`
/// from global cell `cell_offset` (None: one GPU, the whole box). One GPU: every layer, no
/// halo; a slab: its layers and one more on each side (periodic in y).
pub(super) fn field_window(
    cells: [u32; 3],
    ncells: usize,
    cell_offset: Option<u32>,
) -> (u32, u32, u32) {
    let [lx, ly, lz] = cells;
    match cell_offset {
        None => (0, ly, 0),
        Some(offset) => {
            let layer = lx * lz;
            let own = ncells as u32 / layer;
            (offset / layer, (own + 2).min(ly), 1)
        }
    }
}

/// What one GPU observes, on the device: the step's report, the moments' sums and profile,
/// and the flow-field sums.
pub(super) struct Observables {
    /// The step's report: [Σ E_rel, Σ (Nc − 1), kinetic stress sum, collisional stress sum,
    /// the walls' momentum], in [`REPORT_COPIES`] copies. Every pass of the step adds into it
    /// (pass 1 zeroes it).
    pub(super) report: CudaSlice<f64>,
    moments: MomentBuffers,
    /// Flow-field sums (`crate::fields`), allocated at the first sample.
    fields: Option<CudaSlice<f64>>,
}

impl Observables {
    /// The zeroed report and moments' buffers (a profile of `bins` bins); the field sums come
    /// at the first sample.
    pub(super) fn alloc(
        s: &Arc<CudaStream>,
        bins: usize,
        oom: OnAllocError<'_>,
    ) -> Result<Observables> {
        let report = s
            .alloc_zeros::<f64>(REPORT_WORDS * REPORT_COPIES)
            .map_err(oom)?;
        let moments = MomentBuffers::alloc(s, bins, oom)?;
        Ok(Observables {
            report,
            moments,
            fields: None,
        })
    }

    /// The report of the last step enqueued on `s` (waits for it).
    pub(super) fn read_report(&self, s: &Arc<CudaStream>) -> Result<StepReport> {
        let mut r = [0.0f64; REPORT_WORDS * REPORT_COPIES];
        s.memcpy_dtoh(&self.report, &mut r)
            .map_err(drv("report copy"))?;
        Ok(report_from_words(&r))
    }

    /// The moments' reduction over the `n` particle slots of `fluid` queued on `dev`'s stream
    /// with parameters `p` (a profile of `bins` = `Physics::profile_bins` bins), not waited
    /// for: several slabs queue theirs before any is read, so their kernels run at once. The
    /// caller applied any pending collision first.
    pub(super) fn queue_moments(
        &mut self,
        dev: &CudaDevice,
        p: &KernelParams,
        bins: usize,
        fluid: &FluidBuffers,
        n: usize,
    ) -> Result<()> {
        let s = dev.stream.clone();
        let shared = (bins * 16) as u32;
        let use_shared: u32 = (shared <= 40 * 1024) as u32;
        let (mut cfg, per_block) = moments_grid(n);
        if use_shared == 1 {
            cfg.shared_mem_bytes = shared;
        }
        let (f, m) = (fluid, &mut self.moments);
        s.memset_zeros(&mut m.sums).map_err(drv("memset"))?;
        s.memset_zeros(&mut m.profile_sum).map_err(drv("memset"))?;
        s.memset_zeros(&mut m.profile_count)
            .map_err(drv("memset"))?;
        // SAFETY: the particle arrays hold p.n_fluid = n slots (each block reads its per_block
        // slots, bounded by n_fluid), out MOMENT_WORDS × REPORT_COPIES doubles (block b adds into
        // copy b % REPORT_COPIES), the profiles `bins` = Physics::profile_bins =
        // mpc_profile_bins(p) bins, and the dynamic shared memory (when used) is exactly that many
        // doubles + u64. All on the main stream, after the caller's flush.
        unsafe {
            dev.k
                .moments(
                    &s,
                    cfg,
                    p,
                    &f.pos[1],
                    &f.pos[2],
                    &f.vel[0],
                    &f.vel[1],
                    &f.vel[2],
                    &f.cellw,
                    &mut m.sums,
                    &mut m.profile_sum,
                    &mut m.profile_count,
                    &use_shared,
                    &per_block,
                )
                .map_err(drv("moments"))?;
        }
        Ok(())
    }

    /// The sums of the last [`Observables::queue_moments`] on `s` (waits for them), of
    /// `particles` live particles.
    pub(super) fn read_moments(
        &self,
        s: &Arc<CudaStream>,
        particles: usize,
    ) -> Result<FluidMoments> {
        let m = &self.moments;
        let sums = add_copies::<MOMENT_WORDS>(&s.clone_dtoh(&m.sums).map_err(drv("copy"))?);
        let profile_sum = s.clone_dtoh(&m.profile_sum).map_err(drv("copy"))?;
        let profile_count = s.clone_dtoh(&m.profile_count).map_err(drv("copy"))?;
        Ok(FluidMoments {
            particles: particles as u64,
            momentum: [sums[0], sums[1], sums[2]],
            kinetic_energy: sums[3],
            profile_sum,
            profile_count,
        })
    }

    /// One kernel over the `n` particle slots of `fluid` adds into the field buffer (allocated
    /// at first use) of the window `(first, layers, halo)` ([`field_window`]) of a box of
    /// `cells`, on `dev`'s stream with parameters `p`. The caller applied any pending
    /// collision first.
    pub(super) fn accumulate_fields(
        &mut self,
        dev: &CudaDevice,
        p: &KernelParams,
        window: (u32, u32, u32),
        cells: [u32; 3],
        fluid: &FluidBuffers,
        n: usize,
    ) -> Result<()> {
        let (first, layers, halo) = window;
        let [lx, _, lz] = cells;
        let len = crate::fields::FIELD_SUMS * (layers * lx * lz) as usize;
        let s = dev.stream.clone();
        if self.fields.is_none() {
            let what = dev.describe();
            self.fields = Some(
                s.alloc_zeros::<f64>(len)
                    .map_err(|e| MpcError::OutOfMemory {
                        device: what,
                        needed_bytes: 8 * len as u64,
                        available_bytes: 0,
                        fix: format!(
                            "the flow-field sums do not fit ({e}); set output.field_interval: 0"
                        ),
                    })?,
            );
        }
        let fields = self.fields.as_mut().expect("allocated above");
        let [px, py, pz] = &fluid.pos;
        let [vx, vy, vz] = &fluid.vel;
        // SAFETY: the particle arrays hold p.n_fluid = n slots (free slots skipped by their cell
        // word), `fields` 5 doubles for each of the layers × lx × lz cells the kernel indexes
        // (layer offsets reduced modulo Ly and checked against `layers`). Main stream.
        unsafe {
            dev.k
                .accumulate_fields(
                    &s,
                    grid(n),
                    p,
                    px,
                    py,
                    pz,
                    vx,
                    vy,
                    vz,
                    &fluid.cellw,
                    fields,
                    &first,
                    &layers,
                    &halo,
                )
                .map_err(drv("field sums"))?;
        }
        Ok(())
    }

    /// The field sums as they are in their window, then zeroed (on `s`); empty before the
    /// first sample.
    pub(super) fn take_field_sums(&mut self, s: &Arc<CudaStream>) -> Result<Vec<f64>> {
        let Some(fields) = self.fields.as_mut() else {
            return Ok(Vec::new());
        };
        let sums = s.clone_dtoh(fields).map_err(drv("field sums copy"))?;
        s.memset_zeros(fields).map_err(drv("memset"))?;
        Ok(sums)
    }
}
