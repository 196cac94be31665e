//! One GPU's share of a multi-GPU run: a y slab of whole cell layers. How the box is cut
//! ([`slab_bounds`], [`min_slab_layers`], [`SlabLayout`]), the slab-mode state of a
//! [`CudaBackend`] ([`Slab`]: global ids, free slots, migration buffers and streams), and a
//! slab's particles in and out (split by owner on upload, put back at their ids on download).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, PinnedHostSlice};

use crate::backend::cuda::buffers::RESERVE_BYTES;
use crate::backend::cuda::contract::MPC_RECORD_WORDS;
use crate::backend::cuda::device::drv;
use crate::backend::cuda::observe::{REPORT_COPIES, REPORT_WORDS};
use crate::backend::cuda::params::MigrationArgs;
use crate::backend::cuda::{device_bytes, CellSumMethod, CudaBackend, CudaDevice};
use crate::error::{MpcError, Result};
use crate::fluid_parts::FluidSource;
use crate::physics::Physics;
use crate::state::FluidState;

/// The slab-mode state of one GPU's [`CudaBackend`].
pub(in crate::backend::cuda) struct Slab {
    /// Global index of this slab's first cell (its first layer × cells per layer).
    pub(in crate::backend::cuda) cell_offset: u32,
    /// Particle slots allocated (live particles + free slots + room for arrivals).
    pub(super) capacity: usize,
    /// Particles one send buffer holds.
    pub(super) send_capacity: usize,
    /// Global id of the particle in each slot.
    pub(in crate::backend::cuda) ids: CudaSlice<u32>,
    /// Stack of free slots (their cell word is `MPC_DEAD`).
    pub(super) holes: CudaSlice<u32>,
    /// Packed emigrants to the lower / upper neighbour.
    pub(super) send: [CudaSlice<u64>; 2],
    /// Arrivals from the lower / upper neighbour.
    pub(super) recv: [CudaSlice<u64>; 2],
    /// [sent down, sent up, free-slot stack top, overflow flags] on the device...
    pub(super) counters: CudaSlice<u32>,
    /// ... their copy after pass 1 (and after the step) ...
    pub(super) counters_host: PinnedHostSlice<u32>,
    /// ... and their initial values, sent before pass 1.
    pub(super) counters_init: PinnedHostSlice<u32>,
    /// The step's report, copied after the step.
    pub(super) report_host: PinnedHostSlice<f64>,
    /// Copy-engine streams for outgoing and incoming particles, so that the GPUs' transfers
    /// run in parallel and never wait behind another GPU's kernels.
    pub(super) copy_out: Arc<CudaStream>,
    pub(super) copy_in: Arc<CudaStream>,
    /// Free slots below `n` (the stack height).
    pub(in crate::backend::cuda) free_slots: usize,
    pub(super) args: MigrationArgs,
    /// Host staging of the two send buffers (`Transfer::Host`), portable pinned memory.
    pub(super) staging: Option<[PinnedHostSlice<u64>; 2]>,
}

pub use crate::backend::slab_bounds;

/// The fewest layers a slab may have: a particle must never cross a whole neighbour slab in
/// one step (streaming by up to 12 thermal speeds, body force, and one cell of grid shift).
pub fn min_slab_layers(phys: &Physics) -> u32 {
    let sigma = (phys.kt / phys.mass).sqrt();
    let reach = 12.0 * sigma * phys.h + 0.5 * phys.acceleration[1].abs() * phys.h * phys.h;
    (reach.ceil() as u32 + 2).max(3)
}

/// The slab that owns global layer `iy`.
pub(super) fn owner(bounds: &[u32], iy: u32) -> usize {
    bounds.partition_point(|&b| b <= iy) - 1
}

/// How the box is cut into slabs, and the sizes of each slab's buffers.
pub(super) struct SlabLayout {
    /// First layer of each slab, then Ly.
    pub(super) bounds: Vec<u32>,
    /// Cells per y layer.
    layer: usize,
    /// Fluid particles in one layer at the mean density (rounded up).
    layer_particles: usize,
}

impl SlabLayout {
    /// `g` slabs for `n_fluid` particles in the box of `phys`.
    pub(super) fn new(phys: &Physics, n_fluid: usize, g: usize) -> SlabLayout {
        let layer = (phys.cells[0] * phys.cells[2]) as usize;
        let density = n_fluid as f64 / phys.n_cells().max(1) as f64;
        SlabLayout {
            bounds: slab_bounds(phys.cells[1], g),
            layer,
            layer_particles: (density * layer as f64).ceil() as usize,
        }
    }

    fn layers(&self, k: usize) -> usize {
        (self.bounds[k + 1] - self.bounds[k]) as usize
    }

    /// Particle slots for a slab starting with `live` particles: room for arrivals.
    fn capacity(&self, live: usize) -> usize {
        live + (live / 10).max(2 * self.layer_particles) + 1024
    }

    /// Particles one send buffer holds.
    pub(super) fn send_capacity(&self) -> usize {
        5 * self.layer_particles / 2 + 1024
    }
}

/// Refuse fewer than two slabs, or slabs so thin that a particle could cross one in a step.
pub(super) fn check_gpu_count(phys: &Physics, g: usize) -> Result<()> {
    if g < 2 {
        return Err(MpcError::Device(
            "the multi-GPU backend needs at least two slabs".into(),
        ));
    }
    let ly = phys.cells[1];
    let need = min_slab_layers(phys);
    if ly / (g as u32) < need {
        return Err(MpcError::Device(format!(
            "device: {g} slabs have {} cell layers in y, fewer than the {need} a particle may \
             cross in one step; fix: use at most {} slabs (GPUs, or tuning.slabs) for \
             cells[1] = {ly}, or a taller box",
            ly / g as u32,
            (ly / need).max(1)
        )));
    }
    Ok(())
}

/// The parts of slabs `wanted` (a process's own) of a fluid split by the slab owning each
/// particle's layer, in order; with each part its global ids. From a config, only these parts
/// of its initial state are generated (`FluidSource`).
pub(super) fn split_slabs(
    source: FluidSource<'_>,
    bounds: &[u32],
    wanted: std::ops::Range<usize>,
) -> Result<Vec<(FluidState, Vec<u32>)>> {
    let ly = bounds[bounds.len() - 1];
    let y_range = crate::fluid_parts::slabs_y_range(bounds, wanted.clone());
    let parts = source.parts(wanted.len(), y_range, |y| {
        owner(bounds, (y.max(0.0) as u32).min(ly - 1)).checked_sub(wanted.start)
    })?;
    // the config check keeps every id below 2^32
    Ok(parts
        .into_iter()
        .map(|(st, ids)| (st, ids.into_iter().map(|i| i as u32).collect()))
        .collect())
}

impl CudaBackend {
    /// Slab `k` of `layout` on `dev`, holding `part` (its particles and their global ids),
    /// after checking that its buffers fit; `staged`: its packets go through pinned host
    /// memory (host transfers, or a neighbour on another rank).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn open_slab(
        dev: CudaDevice,
        phys: &Physics,
        method: CellSumMethod,
        staged: bool,
        layout: &SlabLayout,
        k: usize,
        part: &(FluidState, Vec<u32>),
    ) -> Result<CudaBackend> {
        let (sub, ids) = part;
        let layers = layout.layers(k);
        let ncells = layers * layout.layer;
        let live = sub.len();
        let capacity = layout.capacity(live);
        let send_capacity = layout.send_capacity();
        let (free, _) = dev.free_memory()?;
        let extra = 8 * capacity as u64 + 4 * (send_capacity * MPC_RECORD_WORDS * 8) as u64;
        let needed = device_bytes(capacity as u64, ncells as u64, method) + extra;
        if needed + RESERVE_BYTES > free {
            return Err(MpcError::OutOfMemory {
                device: dev.describe(),
                needed_bytes: needed + RESERVE_BYTES,
                available_bytes: free,
                fix: format!(
                    "slab {k} ({layers} layers, {live} particles) does not fit; use more \
                     GPUs, fewer cells or particles per cell"
                ),
            });
        }
        let mut be = CudaBackend::allocate_cells(dev, phys.clone(), capacity, ncells, method)?;
        let cell_offset = (layout.bounds[k] as usize * layout.layer) as u32;
        be.attach_slab(cell_offset, capacity, send_capacity, staged)?;
        be.upload_slab(sub, ids)?;
        Ok(be)
    }

    /// Turn this backend into one slab of a multi-GPU run: global cells from `cell_offset`.
    fn attach_slab(
        &mut self,
        cell_offset: u32,
        capacity: usize,
        send_capacity: usize,
        staged: bool,
    ) -> Result<()> {
        let s = self.dev.stream.clone();
        let ctx = self.dev.ctx.clone();
        let words = send_capacity * MPC_RECORD_WORDS;
        let alloc = |e| MpcError::OutOfMemory {
            device: self.dev.describe(),
            needed_bytes: (8 * capacity + 32 * words) as u64,
            available_bytes: 0,
            fix: format!("migration buffers ({e:?}); use more GPUs or a smaller box"),
        };
        let ids = s.alloc_zeros::<u32>(capacity).map_err(alloc)?;
        let holes = s.alloc_zeros::<u32>(capacity).map_err(alloc)?;
        let send = [
            s.alloc_zeros::<u64>(words).map_err(alloc)?,
            s.alloc_zeros::<u64>(words).map_err(alloc)?,
        ];
        let recv = [
            s.alloc_zeros::<u64>(words).map_err(alloc)?,
            s.alloc_zeros::<u64>(words).map_err(alloc)?,
        ];
        let counters = s.alloc_zeros::<u32>(4).map_err(alloc)?;
        // SAFETY: uninitialised pinned host memory (this and the next two), read only after a
        // device-to-host copy the host waited for (counters_host, report_host) or after the
        // host filled it (counters_init, in begin_migration).
        let counters_host = unsafe { ctx.alloc_pinned::<u32>(4) }.map_err(drv("pinned"))?;
        // SAFETY: as above.
        let counters_init = unsafe { ctx.alloc_pinned::<u32>(4) }.map_err(drv("pinned"))?;
        // SAFETY: as above.
        let report_host = unsafe { ctx.alloc_pinned::<f64>(REPORT_WORDS * REPORT_COPIES) }
            .map_err(drv("pinned"))?;
        let ptr = |b: &CudaSlice<u64>| b.device_ptr(&s).0;
        let args = MigrationArgs {
            send: [ptr(&send[0]), ptr(&send[1])],
            counters: counters.device_ptr(&s).0,
            holes: holes.device_ptr(&s).0,
            ids: ids.device_ptr(&s).0,
            send_capacity: send_capacity as u32,
            pad: 0,
        };
        self.slab = Some(Slab {
            cell_offset,
            capacity,
            send_capacity,
            ids,
            holes,
            send,
            recv,
            counters,
            counters_host,
            counters_init,
            report_host,
            copy_out: ctx.new_stream().map_err(drv("stream"))?,
            copy_in: ctx.new_stream().map_err(drv("stream"))?,
            free_slots: 0,
            args,
            staging: staging_buffers(&ctx, staged, words)?,
        });
        Ok(())
    }

    /// Slab mode: replace this slab's particles (`ids` their global indices).
    pub(super) fn upload_slab(&mut self, part: &FluidState, ids: &[u32]) -> Result<()> {
        let n = part.len();
        let sl = self.slab.as_mut().expect("slab mode");
        if n > sl.capacity {
            return Err(MpcError::Device(format!(
                "{}: {n} particles exceed the slab's {} slots; fix: fewer GPUs or a smaller box",
                self.dev.describe(),
                sl.capacity
            )));
        }
        self.pending = None;
        let s = self.dev.stream.clone();
        if n > 0 {
            for k in 0..3 {
                s.memcpy_htod(&part.pos[k][..], &mut self.fluid.pos[k].slice_mut(..n))
                    .map_err(drv("upload"))?;
                s.memcpy_htod(&part.vel[k][..], &mut self.fluid.vel[k].slice_mut(..n))
                    .map_err(drv("upload"))?;
            }
            s.memcpy_htod(ids, &mut sl.ids.slice_mut(..n))
                .map_err(drv("upload"))?;
            // any live word (not MPC_DEAD): pass 1 overwrites it
            s.memset_zeros(&mut self.fluid.cellw.slice_mut(..n))
                .map_err(drv("upload"))?;
        }
        sl.free_slots = 0;
        self.n = n;
        s.synchronize().map_err(drv("upload"))?;
        Ok(())
    }

    /// Slab mode: live particles with their global ids.
    pub(super) fn download_slab(&mut self) -> Result<(FluidState, Vec<u32>)> {
        self.flush()?;
        let s = self.dev.stream.clone();
        let n = self.n;
        let mut all = FluidState::default();
        if n == 0 {
            return Ok((all, Vec::new()));
        }
        for k in 0..3 {
            all.pos[k] = vec![0.0; n];
            s.memcpy_dtoh(&self.fluid.pos[k].slice(..n), &mut all.pos[k][..])
                .map_err(drv("download"))?;
            all.vel[k] = vec![0.0; n];
            s.memcpy_dtoh(&self.fluid.vel[k].slice(..n), &mut all.vel[k][..])
                .map_err(drv("download"))?;
        }
        let mut words = vec![0u32; n];
        s.memcpy_dtoh(&self.fluid.cellw.slice(..n), &mut words[..])
            .map_err(drv("download"))?;
        let mut ids = vec![0u32; n];
        s.memcpy_dtoh(&self.slab().ids.slice(..n), &mut ids[..])
            .map_err(drv("download"))?;
        let keep: Vec<usize> = (0..n).filter(|&i| words[i] != u32::MAX).collect();
        let mut out = FluidState::default();
        for k in 0..3 {
            out.pos[k] = keep.iter().map(|&i| all.pos[k][i]).collect();
            out.vel[k] = keep.iter().map(|&i| all.vel[k][i]).collect();
        }
        Ok((out, keep.iter().map(|&i| ids[i]).collect()))
    }

    /// Live particles (slots minus free slots).
    pub(in crate::backend::cuda) fn live(&self) -> usize {
        self.n - self.slab.as_ref().map_or(0, |s| s.free_slots)
    }

    pub(super) fn slab(&self) -> &Slab {
        self.slab.as_ref().expect("slab mode")
    }
}

/// Host staging of the two send buffers of `words` u64 each when packets go through the
/// host (`staged`); none for peer copies.
fn staging_buffers(
    ctx: &Arc<cudarc::driver::CudaContext>,
    staged: bool,
    words: usize,
) -> Result<Option<[PinnedHostSlice<u64>; 2]>> {
    match staged {
        false => Ok(None),
        true => {
            // portable: the receiving GPU's context copies from it too
            let flags = cudarc::driver::sys::CU_MEMHOSTALLOC_PORTABLE;
            // SAFETY: uninitialised pinned host memory (this and the next), written by the
            // sender's device-to-host copy before the receiver's copy (ordered by an event)
            // reads it.
            let down = unsafe { ctx.alloc_pinned_with_flags::<u64>(words, flags) }
                .map_err(drv("pinned staging"))?;
            // SAFETY: as above.
            let up = unsafe { ctx.alloc_pinned_with_flags::<u64>(words, flags) }
                .map_err(drv("pinned staging"))?;
            Ok(Some([down, up]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slabs_cover_the_box_evenly() {
        assert_eq!(slab_bounds(256, 4), vec![0, 64, 128, 192, 256]);
        assert_eq!(slab_bounds(16, 3), vec![0, 5, 10, 16]);
        let b = slab_bounds(17, 3);
        for iy in 0..17 {
            let k = owner(&b, iy);
            assert!(b[k] <= iy && iy < b[k + 1]);
        }
    }

    #[test]
    fn split_keeps_every_particle_once_with_its_id() {
        let cfg = crate::config::Config::from_ron_str(
            "(cells: (4, 12, 4), particles_per_cell: 5, seed: 3, time_step: 0.1, steps: 10, collision: Srd(angle_deg: 130.0))",
        )
        .unwrap();
        let st = FluidState::initial(&cfg);
        let b = slab_bounds(12, 3);
        let parts = split_slabs(FluidSource::State(&st), &b, 0..3).unwrap();
        let upper = split_slabs(FluidSource::State(&st), &b, 1..3).unwrap();
        assert_eq!(upper[1].1, parts[2].1, "a sub-range gives the same parts");
        let generated = split_slabs(FluidSource::Initial(&cfg), &b, 1..3).unwrap();
        assert_eq!(
            generated, upper,
            "generated parts equal the parts of the whole"
        );
        let mut seen = vec![0u8; st.len()];
        for (k, (part, ids)) in parts.iter().enumerate() {
            for (j, &id) in ids.iter().enumerate() {
                seen[id as usize] += 1;
                assert_eq!(part.pos[1][j], st.pos[1][id as usize]);
                let iy = part.pos[1][j] as u32;
                assert!(b[k] <= iy && iy < b[k + 1]);
            }
        }
        assert!(seen.iter().all(|&c| c == 1));
    }
}
