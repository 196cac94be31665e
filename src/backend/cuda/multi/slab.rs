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
use crate::backend::cuda::{
    device_bytes, CellSumMethod, CudaBackend, CudaDevice, MAX_CUDA_PARTICLES,
};
use crate::error::{MpcError, Result};
use crate::fluid_parts::{FluidPart, FluidSource};
use crate::physics::Physics;
use crate::state::FluidState;

/// The slab-mode state of one GPU's [`CudaBackend`].
pub(in crate::backend::cuda) struct Slab {
    /// Global index of this slab's first cell (its first layer × cells per layer).
    pub(in crate::backend::cuda) cell_offset: u32,
    /// Particle slots allocated (live particles + free slots + room for arrivals).
    pub(in crate::backend::cuda) capacity: usize,
    /// Particles one send buffer holds.
    pub(super) send_capacity: usize,
    /// Global id (label) of the particle in each slot; None in a box of more particles than
    /// 32-bit labels number (or `MPCBOX_SLAB_IDS=places`): particles are then identified by
    /// their place, slab by slab in slot order, in downloads and checkpoints.
    pub(in crate::backend::cuda) ids: Option<CudaSlice<u32>>,
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
    pub(in crate::backend::cuda) args: MigrationArgs,
    /// Host staging of the two send buffers (`Transfer::Host`), portable pinned memory.
    pub(super) staging: Option<[PinnedHostSlice<u64>; 2]>,
}

pub use crate::backend::{min_slab_layers, slab_bounds};

/// The flow-field sums of every slab of this process added into the whole box of `cells`:
/// each slab's window (its layers and a halo layer on each side) at its place, periodic in y.
pub(super) fn box_field_sums(slabs: &mut [CudaBackend], cells: [u32; 3]) -> Result<Vec<f64>> {
    use crate::fields::FIELD_SUMS;
    let [lx, ly, lz] = cells;
    let per_layer = FIELD_SUMS * (lx * lz) as usize;
    let mut total = vec![0.0; per_layer * ly as usize];
    for s in slabs {
        let (first, layers, halo) = s.field_window();
        let window = s.take_window_field_sums()?;
        for (r, layer) in window
            .chunks_exact(per_layer)
            .take(layers as usize)
            .enumerate()
        {
            let g = ((first + ly - halo) as usize + r) % ly as usize;
            let out = &mut total[g * per_layer..(g + 1) * per_layer];
            for (o, x) in out.iter_mut().zip(layer) {
                *o += x;
            }
        }
    }
    Ok(total)
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
    /// Every particle keeps its global id as a 32-bit label (see [`Slab::ids`]).
    pub(super) labels: bool,
}

impl SlabLayout {
    /// `g` slabs for `n_fluid` particles in the box of `phys`.
    pub(super) fn new(phys: &Physics, n_fluid: usize, g: usize) -> SlabLayout {
        let layer = (phys.cells[0] * phys.cells[2]) as usize;
        let density = n_fluid as f64 / phys.n_cells().max(1) as f64;
        SlabLayout {
            bounds: crate::backend::slab_bounds_for(phys, g),
            layer,
            layer_particles: (density * layer as f64).ceil() as usize,
            labels: labels_wanted(n_fluid as u64),
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

/// Whether the particles of a box of `n_fluid` keep 32-bit labels: where they number them all,
/// unless `MPCBOX_SLAB_IDS=places` asks for none (the path of larger boxes, on small ones).
pub fn labels_wanted(n_fluid: u64) -> bool {
    n_fluid <= u32::MAX as u64 && !crate::knobs::knobs().is("MPCBOX_SLAB_IDS", "places")
}

/// Device bytes of a slab of `capacity` particle slots and `ncells` cells: the single-GPU
/// footprint, the free-slot stack and labels (4 bytes each per slot) and the four migration
/// buffers.
pub fn slab_bytes(
    capacity: u64,
    ncells: u64,
    send_capacity: usize,
    labels: bool,
    method: CellSumMethod,
) -> u64 {
    let per_slot = if labels { 8 } else { 4 };
    device_bytes(capacity, ncells, method)
        + per_slot * capacity
        + 4 * (send_capacity * MPC_RECORD_WORDS * 8) as u64
}

/// The edge L of the largest cubic box of L³ cells and `ppc` particles per cell that GPUs with
/// `free` bytes free each hold (one slab each, several; the whole box, one), and its particle
/// count; None if not even 2³ cells fit.
pub fn largest_cube(free: &[u64], ppc: u32, method: CellSumMethod) -> Option<(u32, u64)> {
    let g = free.len().max(1) as u64;
    let least = free.iter().copied().min().unwrap_or(0);
    let m = u64::from(ppc);
    let fits = |l: u64| {
        let (layer, n) = (l * l, l * l * l * m);
        if l * l * l > crate::config::MAX_CELLS {
            return false;
        }
        if g == 1 {
            return n <= MAX_CUDA_PARTICLES
                && l * l * l <= crate::backend::cuda::MAX_CUDA_CELLS
                && device_bytes(n, l * l * l, method) + RESERVE_BYTES <= least;
        }
        let layers = l.div_ceil(g);
        let live = layers * layer * m;
        let capacity = live + (live / 10).max(2 * layer * m) + 1024;
        let send = (5 * layer * m / 2 + 1024) as usize;
        capacity <= MAX_CUDA_PARTICLES
            && layers * layer <= crate::backend::cuda::MAX_CUDA_CELLS
            && slab_bytes(capacity, layers * layer, send, n <= u32::MAX as u64, method)
                + RESERVE_BYTES
                <= least
    };
    if !fits(2) {
        return None;
    }
    let (mut lo, mut hi) = (2u64, 2u64);
    while fits(hi) {
        lo = hi;
        hi *= 2;
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some((lo as u32, lo * lo * lo * m))
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

/// The slab (an index into `wanted`, a process's own) owning a particle at height `y`: None
/// for another process's.
pub(super) fn slab_part_of(
    bounds: &[u32],
    wanted: std::ops::Range<usize>,
) -> impl Fn(f32) -> Option<usize> + Sync + '_ {
    let ly = bounds[bounds.len() - 1];
    move |y| owner(bounds, (y.max(0.0) as u32).min(ly - 1)).checked_sub(wanted.start)
}

/// The parts of slabs `wanted` (a process's own) of a fluid split by the slab owning each
/// particle's layer, in order; with each part its global ids. From a config, only these parts
/// of its initial state are generated (`FluidSource`).
pub(super) fn split_slabs(
    source: FluidSource<'_>,
    bounds: &[u32],
    wanted: std::ops::Range<usize>,
) -> Result<Vec<FluidPart>> {
    let y_range = crate::fluid_parts::slabs_y_range(bounds, wanted.clone());
    source.parts(wanted.len(), y_range, slab_part_of(bounds, wanted))
}

impl CudaBackend {
    /// Slab `k` of `layout` on `dev`, for `live` particles (none held yet: an upload, a stream
    /// from a checkpoint or the initial draw fills it), after checking that its buffers fit;
    /// `staged`: its packets go through pinned host memory (host transfers, or a neighbour on
    /// another rank).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn open_slab(
        dev: CudaDevice,
        phys: &Physics,
        method: CellSumMethod,
        staged: bool,
        layout: &SlabLayout,
        k: usize,
        live: usize,
    ) -> Result<CudaBackend> {
        let layers = layout.layers(k);
        let ncells = layers * layout.layer;
        let capacity = layout.capacity(live);
        if capacity as u64 > MAX_CUDA_PARTICLES {
            return Err(MpcError::Device(format!(
                "slab {k} needs {capacity} particle slots, more than a GPU indexes                  ({MAX_CUDA_PARTICLES}); fix: more GPUs or slabs (tuning.slabs), or a smaller box"
            )));
        }
        let send_capacity = layout.send_capacity();
        let (free, _) = dev.free_memory()?;
        let needed = slab_bytes(
            capacity as u64,
            ncells as u64,
            send_capacity,
            layout.labels,
            method,
        );
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
        be.attach_slab(cell_offset, capacity, send_capacity, staged, layout.labels)?;
        be.n = 0;
        Ok(be)
    }

    /// Turn this backend into one slab of a multi-GPU run: global cells from `cell_offset`;
    /// `labels`: each particle's global id kept beside it.
    fn attach_slab(
        &mut self,
        cell_offset: u32,
        capacity: usize,
        send_capacity: usize,
        staged: bool,
        labels: bool,
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
        let ids = match labels {
            true => Some(s.alloc_zeros::<u32>(capacity).map_err(alloc)?),
            false => None,
        };
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
            ids: ids.as_ref().map_or(0, |i| i.device_ptr(&s).0),
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

    /// Slab mode: replace this slab's particles (`ids` their global indices, kept as its
    /// labels when it has them).
    pub(super) fn upload_slab(&mut self, part: &FluidState, ids: &[u64]) -> Result<()> {
        let n = part.len();
        self.check_slots(n)?;
        let s = self.dev.stream.clone();
        if n > 0 {
            use crate::backend::cuda::upload_slots::{bytes_of, UploadSlots};
            let mut staging = UploadSlots::new(&self.dev.ctx)?;
            for k in 0..3 {
                let pos = self.fluid.pos[k].device_ptr(&s).0;
                let vel = self.fluid.vel[k].device_ptr(&s).0;
                // SAFETY: the first n slots of this slab's buffers (n within its slots, checked
                // above), which nothing else uses while the slab is filled; the staging's
                // copies complete before it is dropped.
                unsafe {
                    staging.put(&s, bytes_of(&part.pos[k][..n]), pos)?;
                    staging.put(&s, bytes_of(&part.vel[k][..n]), vel)?;
                }
            }
            self.upload_labels(&mut staging, 0, ids)?;
            staging.finish()?;
        }
        self.set_slab_particles(n)
    }

    /// Slab mode: an error unless `n` particles fit the slab's slots.
    pub(in crate::backend::cuda) fn check_slots(&self, n: usize) -> Result<()> {
        let sl = self.slab.as_ref().expect("slab mode");
        if n > sl.capacity {
            return Err(MpcError::Device(format!(
                "{}: {n} particles exceed the slab's {} slots; fix: fewer GPUs or a smaller box",
                self.dev.describe(),
                sl.capacity
            )));
        }
        Ok(())
    }

    /// Slab mode: `ids` as the labels of slots `first..` (nothing without labels).
    pub(in crate::backend::cuda) fn upload_labels(
        &mut self,
        staging: &mut crate::backend::cuda::upload_slots::UploadSlots,
        first: usize,
        ids: &[u64],
    ) -> Result<()> {
        use rayon::prelude::*;
        let s = self.dev.stream.clone();
        let sl = self.slab.as_mut().expect("slab mode");
        let Some(labels) = sl.ids.as_mut() else {
            return Ok(());
        };
        if first + ids.len() > labels.len() {
            return Err(MpcError::Device(
                "a checkpoint holds more labels than the slab's slots (corrupted?)".into(),
            ));
        }
        // narrowed into the staging's reused memory (no fresh pages per piece)
        if ids.par_iter().any(|&i| i > u64::from(u32::MAX)) {
            return Err(MpcError::Device(
                "a particle id past the 32-bit labels (please report it)".into(),
            ));
        }
        let mut narrow = std::mem::take(&mut staging.scratch);
        narrow.clear();
        narrow.par_extend(ids.par_iter().map(|&i| i as u32));
        let dst = labels.device_ptr(&s).0 + 4 * first as u64;
        let bytes = crate::backend::cuda::upload_slots::bytes_of(&narrow);
        // SAFETY: labels first..first + ids.len() of this slab (checked above), which nothing
        // else uses while a checkpoint is read into it; the staging copies `narrow` before
        // returning.
        let put = unsafe { staging.put(&s, bytes, dst) };
        staging.scratch = narrow;
        put
    }

    /// Slab mode: the first `n` slots hold this slab's particles (an upload, a stream from a
    /// checkpoint or the initial draw wrote them): no free slots, no collision pending.
    pub(in crate::backend::cuda) fn set_slab_particles(&mut self, n: usize) -> Result<()> {
        self.check_slots(n)?;
        self.pending = None;
        let s = self.dev.stream.clone();
        if n > 0 {
            // any live word (not MPC_DEAD): pass 1 overwrites it
            s.memset_zeros(&mut self.fluid.cellw.slice_mut(..n))
                .map_err(drv("upload"))?;
        }
        self.slab.as_mut().expect("slab mode").free_slots = 0;
        self.n = n;
        s.synchronize().map_err(drv("upload"))
    }

    /// Slab mode: live particles with their global ids (None without labels: the particles
    /// are then in slot order).
    pub(in crate::backend::cuda) fn download_slab(
        &mut self,
    ) -> Result<(FluidState, Option<Vec<u32>>)> {
        self.flush()?;
        let s = self.dev.stream.clone();
        let n = self.n;
        let mut all = FluidState::default();
        if n == 0 {
            return Ok((all, self.slab().ids.as_ref().map(|_| Vec::new())));
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
        let ids = match self.slab().ids.as_ref() {
            Some(labels) => {
                let mut ids = vec![0u32; n];
                s.memcpy_dtoh(&labels.slice(..n), &mut ids[..])
                    .map_err(drv("download"))?;
                Some(ids)
            }
            None => None,
        };
        let keep: Vec<usize> = (0..n).filter(|&i| words[i] != u32::MAX).collect();
        let mut out = FluidState::default();
        for k in 0..3 {
            out.pos[k] = keep.iter().map(|&i| all.pos[k][i]).collect();
            out.vel[k] = keep.iter().map(|&i| all.vel[k][i]).collect();
        }
        Ok((out, ids.map(|ids| keep.iter().map(|&i| ids[i]).collect())))
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

    /// 768³ × 10 (4.5 × 10⁹ particles, past 32-bit labels) fits four GPUs of 85 GB free each
    /// (a GPU of 80 GB), one larger cube does not; one GPU holds a cube a quarter of the volume.
    #[test]
    fn the_largest_cube_of_four_gpus_is_768_cubed_at_ten_per_cell() {
        let free = [85_000_000_000u64; 4];
        let (l, n) = largest_cube(&free, 10, CellSumMethod::Fused).unwrap();
        assert!((768..800).contains(&l), "{l}");
        assert_eq!(n, u64::from(l).pow(3) * 10);
        let (one, _) = largest_cube(&free[..1], 10, CellSumMethod::Fused).unwrap();
        assert!((480..560).contains(&one), "{one}");
        assert_eq!(largest_cube(&[1 << 20], 10, CellSumMethod::Fused), None);
    }

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
