//! What comes back from the GPU (`kernels/observe.cu`): the step's report, the fluid's moments
//! and velocity profile reduced on the device, and the whole state for checkpoints and tests
//! (download, upload).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig};

use super::device::OnAllocError;
use super::device::{drv, grid};
use super::CudaBackend;
use crate::backend::{FluidMoments, StepReport};
use crate::error::{MpcError, Result};
use crate::state::FluidState;

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
pub(super) struct MomentBuffers {
    /// [Σ m vx, Σ m vy, Σ m vz, Σ ½ m v²], in [`REPORT_COPIES`] copies.
    sums: CudaSlice<f64>,
    /// Σ vx and count per profile bin (`Physics::profile_bins`: y layers of one cell, z
    /// layers between plates normal to z).
    profile_sum: CudaSlice<f64>,
    profile_count: CudaSlice<u64>,
}

impl MomentBuffers {
    /// Zeroed buffers for a profile of `bins` bins.
    pub(super) fn alloc(
        s: &Arc<CudaStream>,
        bins: usize,
        oom: OnAllocError<'_>,
    ) -> Result<MomentBuffers> {
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

impl CudaBackend {
    /// The report of the last enqueued step (waits for it).
    pub fn read_report(&self) -> Result<StepReport> {
        let mut r = [0.0f64; REPORT_WORDS * REPORT_COPIES];
        self.dev
            .stream
            .memcpy_dtoh(&self.report, &mut r)
            .map_err(drv("report copy"))?;
        Ok(report_from_words(&r))
    }

    /// [`crate::backend::Backend::moments`]: one kernel over the particles (a pending
    /// collision applied first), the sums read back.
    pub(super) fn reduce_moments(&mut self) -> Result<FluidMoments> {
        self.queue_moments()?;
        self.read_moments()
    }

    /// The moments' reduction queued on this GPU's stream (a pending collision applied
    /// first), not waited for: several slabs queue theirs before any is read, so their
    /// kernels run at once.
    pub(super) fn queue_moments(&mut self) -> Result<()> {
        self.flush()?;
        let s = self.dev.stream.clone();
        let bins = self.phys.profile_bins();
        let shared = (bins * 16) as u32;
        let use_shared: u32 = (shared <= 40 * 1024) as u32;
        let (mut cfg, per_block) = moments_grid(self.n);
        if use_shared == 1 {
            cfg.shared_mem_bytes = shared;
        }
        let p = self.params(&self.phys.plan(0, false, false), 0);
        let (f, m) = (&self.fluid, &mut self.moments);
        s.memset_zeros(&mut m.sums).map_err(drv("memset"))?;
        s.memset_zeros(&mut m.profile_sum).map_err(drv("memset"))?;
        s.memset_zeros(&mut m.profile_count)
            .map_err(drv("memset"))?;
        // SAFETY: the particle arrays hold p.n_fluid = self.n slots (each block reads its per_block
        // slots, bounded by n_fluid), out MOMENT_WORDS × REPORT_COPIES doubles (block b adds into
        // copy b % REPORT_COPIES), the profiles `bins` = Physics::profile_bins =
        // mpc_profile_bins(p) bins, and the dynamic shared memory (when used) is exactly that many
        // doubles + u64. All on the main stream, after the flush.
        unsafe {
            self.dev
                .k
                .moments(
                    &s,
                    cfg,
                    &p,
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

    /// The sums of the last [`CudaBackend::queue_moments`] (waits for them).
    pub(super) fn read_moments(&mut self) -> Result<FluidMoments> {
        let (s, m) = (&self.dev.stream, &self.moments);
        let sums = add_copies::<MOMENT_WORDS>(&s.clone_dtoh(&m.sums).map_err(drv("copy"))?);
        let profile_sum = s.clone_dtoh(&m.profile_sum).map_err(drv("copy"))?;
        let profile_count = s.clone_dtoh(&m.profile_count).map_err(drv("copy"))?;
        Ok(FluidMoments {
            particles: self.live() as u64,
            momentum: [sums[0], sums[1], sums[2]],
            kinetic_energy: sums[3],
            profile_sum,
            profile_count,
        })
    }

    /// [`crate::backend::Backend::download`]: the fluid as it is now (a pending collision
    /// applied first).
    pub(super) fn download_state(&mut self) -> Result<FluidState> {
        self.flush()?;
        let s = &self.dev.stream;
        let n = self.n;
        let mut st = FluidState::default();
        for k in 0..3 {
            let mut p = s.clone_dtoh(&self.fluid.pos[k]).map_err(drv("download"))?;
            p.truncate(n);
            st.pos[k] = p;
            let mut v = s.clone_dtoh(&self.fluid.vel[k]).map_err(drv("download"))?;
            v.truncate(n);
            st.vel[k] = v;
        }
        Ok(st)
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
        let s = &self.dev.stream;
        let n = self.n;
        for k in 0..3 {
            s.memcpy_htod(&state.pos[k][..], &mut self.fluid.pos[k].slice_mut(..n))
                .map_err(drv("upload"))?;
            s.memcpy_htod(&state.vel[k][..], &mut self.fluid.vel[k].slice_mut(..n))
                .map_err(drv("upload"))?;
        }
        s.synchronize().map_err(drv("upload"))?;
        Ok(())
    }
}

impl CudaBackend {
    /// Where this GPU's flow-field sums sit: (first global y layer of its own cells, layers in
    /// the buffer, halo layers on each side). One GPU: every layer, no halo; a slab: its
    /// layers and one more on each side (periodic in y).
    pub(in crate::backend::cuda) fn field_window(&self) -> (u32, u32, u32) {
        let [lx, ly, lz] = self.phys.cells;
        match &self.slab {
            None => (0, ly, 0),
            Some(sl) => {
                let layer = lx * lz;
                let own = self.ncells as u32 / layer;
                (sl.cell_offset / layer, (own + 2).min(ly), 1)
            }
        }
    }

    /// [`crate::backend::Backend::accumulate_fields`]: the pending collision applied, then one
    /// kernel over the particles adds into this GPU's field buffer (allocated at first use).
    pub(super) fn accumulate_field_sums(&mut self) -> Result<()> {
        self.flush()?;
        let (first, layers, halo) = self.field_window();
        let [lx, _, lz] = self.phys.cells;
        let len = crate::fields::FIELD_SUMS * (layers * lx * lz) as usize;
        let s = self.dev.stream.clone();
        if self.fields.is_none() {
            let what = self.dev.describe();
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
        let p = self.params(&self.phys.plan(0, false, false), 0);
        let fields = self.fields.as_mut().expect("allocated above");
        let [px, py, pz] = &self.fluid.pos;
        let [vx, vy, vz] = &self.fluid.vel;
        // SAFETY: the particle arrays hold p.n_fluid = self.n slots (free slots skipped by their
        // cell word), `fields` 5 doubles for each of the layers × lx × lz cells the kernel indexes
        // (layer offsets reduced modulo Ly and checked against `layers`). Main stream.
        unsafe {
            self.dev
                .k
                .accumulate_fields(
                    &s,
                    grid(self.n),
                    &p,
                    px,
                    py,
                    pz,
                    vx,
                    vy,
                    vz,
                    &self.fluid.cellw,
                    fields,
                    &first,
                    &layers,
                    &halo,
                )
                .map_err(drv("field sums"))?;
        }
        Ok(())
    }

    /// This GPU's field sums as they are in its window ([`CudaBackend::field_window`]), then
    /// zeroed; empty before the first sample.
    pub(in crate::backend::cuda) fn take_window_field_sums(&mut self) -> Result<Vec<f64>> {
        let s = self.dev.stream.clone();
        let Some(fields) = self.fields.as_mut() else {
            return Ok(Vec::new());
        };
        let sums = s.clone_dtoh(fields).map_err(drv("field sums copy"))?;
        s.memset_zeros(fields).map_err(drv("memset"))?;
        Ok(sums)
    }
}
