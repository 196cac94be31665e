//! The fluid on GPUs as a checkpoint's block (`crate::checkpoint::BlockSource`): read from the
//! live buffers a chunk at a time while the run waits, or copied into spare device memory (a
//! device-to-device copy: milliseconds) and read from there by the checkpoint writer's thread,
//! on a stream of its own, while the run steps on. Either way each GPU copies through two
//! slots of pinned staging: the copy of chunk k + 1 is queued on the copying stream while the
//! host keeps and encodes chunk k (`checkpoint::read_chunked`); the host reads a slot only once
//! the event recorded behind its copies has completed, and queues the next copy into it only
//! once it has finished reading it. A block lists every GPU's live particles in slot order, as
//! a download does (a slab's free slots skipped and its particles' global ids from `ids`; one
//! GPU: every slot, listed by place), so its bytes are those of a checkpoint written from a
//! download.

use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaEvent, CudaSlice, CudaStream, CudaView, DeviceRepr, PinnedHostSlice,
    ValidAsZeroBits,
};

use super::buffers::RESERVE_BYTES;
use super::device::drv;
use super::CudaBackend;
use crate::checkpoint::{read_chunked, BlockSource, BlockStream, Chunk, ChunkFetch, Fetched, Kept};
use crate::error::{MpcError, Result};

/// One GPU's particle arrays as a block reads them (the first `slots` of each).
struct PartArrays<'a> {
    pos: [CudaView<'a, f32>; 3],
    vel: [CudaView<'a, f64>; 3],
    /// Cell words: free slots hold `MPC_DEAD` (None: every slot is live).
    cellw: Option<CudaView<'a, u32>>,
    /// Global ids (None: particles are listed by place).
    ids: Option<CudaView<'a, u32>>,
    slots: usize,
    live: u64,
}

/// Pinned host memory of one GPU's context that one chunk of a section is copied into (a
/// staging slot; the copying stream must be of the memory's context), and the event recorded
/// on that stream behind the chunk's copies.
struct Slot {
    /// Cell words (only for a part with free slots).
    words: Option<PinnedHostSlice<u32>>,
    /// Global ids (only for a part that has them).
    ids: Option<PinnedHostSlice<u32>>,
    f32s: PinnedHostSlice<f32>,
    f64s: PinnedHostSlice<f64>,
    copied: CudaEvent,
    /// The chunk queued into the slot and not yet waited for: its section and slot count.
    queued: Option<(usize, usize)>,
}

/// `n` values of zeroed pinned host memory of `ctx` (cached, not write-combined: the host
/// reads it).
fn pinned<T: DeviceRepr + ValidAsZeroBits + Default + Copy>(
    ctx: &Arc<CudaContext>,
    n: usize,
) -> Result<PinnedHostSlice<T>> {
    // SAFETY: the memory is uninitialised; it is zeroed here, before any copy into it is
    // queued, so the host never reads bytes that nothing wrote. Later the host reads it only in
    // `GpuFetch::wait`, once the event recorded behind the copies into it has completed.
    let buf = unsafe { ctx.alloc_pinned_with_flags::<T>(n, 0) };
    let mut buf = buf.map_err(drv("pinned staging"))?;
    buf.as_mut_slice()
        .map_err(drv("pinned staging"))?
        .fill(T::default());
    Ok(buf)
}

impl Slot {
    fn new(ctx: &Arc<CudaContext>, chunk: usize, words: bool, ids: bool) -> Result<Slot> {
        Ok(Slot {
            words: words.then(|| pinned(ctx, chunk)).transpose()?,
            ids: ids.then(|| pinned(ctx, chunk)).transpose()?,
            f32s: pinned(ctx, chunk)?,
            f64s: pinned(ctx, chunk)?,
            copied: ctx.new_event(None).map_err(drv("checkpoint copy"))?,
            queued: None,
        })
    }

    /// The chunk queued into the slot, if any, once its copies are complete.
    fn settle(&mut self) -> Result<Option<(usize, usize)>> {
        let queued = self.queued.take();
        if queued.is_some() {
            self.copied.synchronize().map_err(drv("checkpoint copy"))?;
        }
        Ok(queued)
    }
}

/// One GPU's two staging slots and the values kept from them (made at its first piece).
struct Staging {
    slots: [Slot; 2],
    kept: Kept,
    /// Slots of the part per chunk.
    chunk: usize,
    /// The stream the copies into the slots are queued on.
    stream: Arc<CudaStream>,
}

impl Staging {
    /// Staging of `part`, copied on `stream`, for one of `parts` GPUs: two slots of
    /// `piece_bytes / 16 / parts` values (at most 20 bytes a value: word, id, f32, f64), so
    /// that all GPUs' slots together take at most 2.5 pieces, and the values kept from them
    /// (16 bytes a value) one more: the window holds them beside the block's pieces, whatever
    /// the GPU count.
    fn new(
        part: &PartArrays<'_>,
        stream: &Arc<CudaStream>,
        piece_bytes: usize,
        parts: usize,
    ) -> Result<Staging> {
        let chunk = (piece_bytes / 16 / parts.max(1)).max(1024);
        let ctx = stream.context();
        let slot = || Slot::new(ctx, chunk, part.cellw.is_some(), part.ids.is_some());
        Ok(Staging {
            slots: [slot()?, slot()?],
            kept: Kept::default(),
            chunk,
            stream: stream.clone(),
        })
    }

    /// Section `section` of `part` into `out` through the two slots (the next chunk's copy in
    /// flight while the host keeps and encodes this one).
    fn read(
        &mut self,
        part: &PartArrays<'_>,
        section: usize,
        first_id: u64,
        out: &mut BlockStream<'_>,
    ) -> Result<()> {
        let mut fetch = GpuFetch {
            part,
            stream: &self.stream,
            slots: &mut self.slots,
            chunk: self.chunk,
        };
        read_chunked(&mut fetch, section, first_id, &mut self.kept, out)
    }
}

impl Drop for Staging {
    /// No copy into the slots is in flight when their memory is freed (an error may leave one
    /// queued): the stream they are queued on is waited for.
    fn drop(&mut self) {
        let _ = self.stream.synchronize();
    }
}

/// A part's chunks copied on `stream` into two staging slots.
struct GpuFetch<'s, 'a> {
    part: &'s PartArrays<'a>,
    stream: &'s Arc<CudaStream>,
    slots: &'s mut [Slot; 2],
    chunk: usize,
}

/// Queue the copy of `src[lo..hi]` into the start of `buf` on `stream`.
fn queue_copy<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    src: &CudaView<'_, T>,
    lo: usize,
    hi: usize,
    buf: &mut PinnedHostSlice<T>,
) -> Result<()> {
    // exactly `hi - lo` values: cudarc copies as many as the destination holds, so the whole
    // staging would read past the source's allocation. Given a plain slice of pinned memory,
    // cudarc queues the copy and records no event: the copy may still run when this returns,
    // so the slot's event is recorded behind it and waited for before the host reads the slot
    let dst = buf.as_mut_slice().map_err(drv("checkpoint copy"))?;
    let dst = dst.get_mut(..hi - lo).ok_or_else(too_large)?;
    stream
        .memcpy_dtoh(&src.slice(lo..hi), dst)
        .map_err(drv("checkpoint copy"))
}

fn too_large() -> MpcError {
    MpcError::Device("a checkpoint chunk larger than its staging (please report it)".into())
}

/// The first `n` values of `buf` (its copies complete).
fn first<T: ValidAsZeroBits>(buf: &PinnedHostSlice<T>, n: usize) -> Result<&[T]> {
    let all = buf.as_slice().map_err(drv("checkpoint copy"))?;
    all.get(..n).ok_or_else(too_large)
}

impl ChunkFetch for GpuFetch<'_, '_> {
    fn slots(&self) -> usize {
        self.part.slots
    }

    fn chunk(&self) -> usize {
        self.chunk
    }

    fn queue(&mut self, slot: usize, section: usize, lo: usize, hi: usize) -> Result<()> {
        let (p, stream) = (self.part, self.stream);
        let s = self.slots.get_mut(slot).ok_or_else(too_large)?;
        // a chunk still queued into the slot (an error left it) completes before the next
        // copy into it
        s.settle()?;
        if let (Some(w), Some(buf)) = (&p.cellw, &mut s.words) {
            queue_copy(stream, w, lo, hi, buf)?;
        }
        match section {
            0 => {
                if let (Some(ids), Some(buf)) = (&p.ids, &mut s.ids) {
                    queue_copy(stream, ids, lo, hi, buf)?;
                }
            }
            1..=3 => queue_copy(stream, &p.pos[section - 1], lo, hi, &mut s.f32s)?,
            _ => queue_copy(stream, &p.vel[section - 4], lo, hi, &mut s.f64s)?,
        }
        // behind the copies: the host reads the slot only once this has completed
        s.copied.record(stream).map_err(drv("checkpoint copy"))?;
        s.queued = Some((section, hi - lo));
        Ok(())
    }

    fn wait(&mut self, slot: usize) -> Result<Chunk<'_>> {
        let p = self.part;
        let s = self.slots.get_mut(slot).ok_or_else(too_large)?;
        let Some((section, n)) = s.settle()? else {
            return Err(MpcError::Device(
                "a checkpoint chunk waited for before it was queued (please report it)".into(),
            ));
        };
        // the copies into the slot are complete: its first `n` values are the chunk's
        let words = match (&p.cellw, &s.words) {
            (Some(_), Some(w)) => Some(first(w, n)?),
            _ => None,
        };
        let values = match section {
            0 => match (&p.ids, &s.ids) {
                (Some(_), Some(ids)) => Fetched::Ids(first(ids, n)?),
                _ => Fetched::Places(n),
            },
            1..=3 => Fetched::F32(first(&s.f32s, n)?),
            _ => Fetched::F64(first(&s.f64s, n)?),
        };
        Ok(Chunk { words, values })
    }
}

/// The live fluid of one or more GPUs (a process's slabs), read while the run waits.
pub(crate) struct LiveSource<'a> {
    parts: Vec<(PartArrays<'a>, Arc<CudaStream>)>,
    /// Each GPU's staging, made at its first piece.
    staging: Vec<Option<Staging>>,
}

impl CudaBackend {
    /// This GPU's arrays as a block reads them; the pending collision applied first.
    fn part_arrays(&self) -> PartArrays<'_> {
        let n = self.n;
        let slab = self.slab.as_ref();
        PartArrays {
            pos: self.fluid.pos.each_ref().map(|a| a.slice(..n)),
            vel: self.fluid.vel.each_ref().map(|a| a.slice(..n)),
            // without free slots every slot is live: nothing to filter
            cellw: slab
                .filter(|s| s.free_slots > 0)
                .map(|_| self.fluid.cellw.slice(..n)),
            ids: slab.and_then(|s| s.ids.as_ref()).map(|ids| ids.slice(..n)),
            slots: n,
            live: self.live() as u64,
        }
    }

    /// Device bytes of a copy of this GPU's particles.
    fn copy_bytes(&self) -> u64 {
        let per_slot = 36 + if self.slab.is_some() { 8 } else { 0 };
        self.n as u64 * per_slot
    }

    /// A copy of this GPU's particles in spare device memory (None: not enough free), read on
    /// a stream of its own.
    fn copy_part(&mut self) -> Result<Option<GpuCopy>> {
        self.flush()?;
        let (free, _) = self.dev.free_memory()?;
        if self.copy_bytes() + RESERVE_BYTES > free {
            return Ok(None);
        }
        let s = self.dev.stream.clone();
        let a = self.part_arrays();
        let out = GpuCopy {
            pos: [
                dup(&s, &a.pos[0])?,
                dup(&s, &a.pos[1])?,
                dup(&s, &a.pos[2])?,
            ],
            vel: [
                dup(&s, &a.vel[0])?,
                dup(&s, &a.vel[1])?,
                dup(&s, &a.vel[2])?,
            ],
            cellw: a.cellw.as_ref().map(|v| dup(&s, v)).transpose()?,
            ids: a.ids.as_ref().map(|v| dup(&s, v)).transpose()?,
            slots: a.slots,
            live: a.live,
            stream: self.dev.ctx.new_stream().map_err(drv("stream"))?,
        };
        // the copy is complete before the writer's stream reads it
        s.synchronize().map_err(drv("checkpoint copy"))?;
        Ok(Some(out))
    }
}

/// A device copy of `v` on `s` (one slot for an empty `v`: no allocation is empty).
fn dup<T: DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    s: &Arc<CudaStream>,
    v: &CudaView<'_, T>,
) -> Result<CudaSlice<T>> {
    let copy = |e| crate::error::MpcError::Device(format!("checkpoint copy: {e:?}"));
    if v.is_empty() {
        return s.alloc_zeros::<T>(1).map_err(copy);
    }
    s.clone_dtod(v).map_err(copy)
}

/// One GPU's particles copied for a checkpoint, and the stream the writer reads them on.
struct GpuCopy {
    pos: [CudaSlice<f32>; 3],
    vel: [CudaSlice<f64>; 3],
    cellw: Option<CudaSlice<u32>>,
    ids: Option<CudaSlice<u32>>,
    slots: usize,
    live: u64,
    stream: Arc<CudaStream>,
}

impl GpuCopy {
    fn arrays(&self) -> PartArrays<'_> {
        PartArrays {
            pos: self.pos.each_ref().map(|a| a.slice(..self.slots)),
            vel: self.vel.each_ref().map(|a| a.slice(..self.slots)),
            cellw: self.cellw.as_ref().map(|a| a.slice(..self.slots)),
            ids: self.ids.as_ref().map(|a| a.slice(..self.slots)),
            slots: self.slots,
            live: self.live,
        }
    }
}

/// Copies of a process's GPUs' particles, read by the checkpoint writer's thread.
pub(crate) struct DeviceSnapshot {
    /// Each GPU's staging, made at its first piece (dropped first: the copies into it end
    /// before the device memory they read is freed).
    staging: Vec<Option<Staging>>,
    parts: Vec<GpuCopy>,
}

/// Section `section` of `part`, copied on `stream`, into `out` through its `staging` (made now
/// at its first piece, for one of `parts` GPUs).
fn read_part(
    part: &PartArrays<'_>,
    stream: &Arc<CudaStream>,
    staging: &mut Option<Staging>,
    parts: usize,
    section: usize,
    first_id: u64,
    out: &mut BlockStream<'_>,
) -> Result<()> {
    let st = match staging {
        Some(st) => st,
        slot => slot.insert(Staging::new(part, stream, out.piece_bytes(), parts)?),
    };
    st.read(part, section, first_id, out)
}

impl BlockSource for DeviceSnapshot {
    fn counts(&self) -> Vec<u64> {
        self.parts.iter().map(|p| p.live).collect()
    }

    fn section(
        &mut self,
        part: usize,
        section: usize,
        first_id: u64,
        out: &mut BlockStream<'_>,
    ) -> Result<()> {
        let parts = self.parts.len();
        let p = &self.parts[part];
        let st = &mut self.staging[part];
        read_part(&p.arrays(), &p.stream, st, parts, section, first_id, out)
    }
}

impl BlockSource for LiveSource<'_> {
    fn counts(&self) -> Vec<u64> {
        self.parts.iter().map(|(p, _)| p.live).collect()
    }

    fn section(
        &mut self,
        part: usize,
        section: usize,
        first_id: u64,
        out: &mut BlockStream<'_>,
    ) -> Result<()> {
        let parts = self.parts.len();
        let (p, stream) = &self.parts[part];
        let st = &mut self.staging[part];
        read_part(p, stream, st, parts, section, first_id, out)
    }
}

/// Whether checkpoints read the GPUs' fluid in pieces (device copies, live windows: the
/// default) rather than downloading it whole (`MPCBOX_GPU_CHECKPOINT_SOURCE=download`, which
/// holds the whole fluid in host memory).
pub(crate) fn by_pieces() -> bool {
    !crate::knobs::knobs().is("MPCBOX_GPU_CHECKPOINT_SOURCE", "download")
}

/// The live fluid of `gpus` (each flushed first) as one block, read on their main streams.
pub(crate) fn live_source(gpus: &mut [CudaBackend]) -> Result<LiveSource<'_>> {
    for g in gpus.iter_mut() {
        g.flush()?;
    }
    Ok(LiveSource {
        parts: gpus
            .iter()
            .map(|g| (g.part_arrays(), g.dev.stream.clone()))
            .collect(),
        staging: gpus.iter().map(|_| None).collect(),
    })
}

/// Copies of `gpus`' particles in their spare memory, or None where one does not fit (then
/// none is kept).
pub(crate) fn device_snapshot(gpus: &mut [CudaBackend]) -> Result<Option<DeviceSnapshot>> {
    let mut parts = Vec::with_capacity(gpus.len());
    for g in gpus.iter_mut() {
        match g.copy_part()? {
            Some(c) => parts.push(c),
            None => return Ok(None),
        }
    }
    Ok(Some(DeviceSnapshot {
        staging: parts.iter().map(|_| None).collect(),
        parts,
    }))
}

/// A copy of `gpus`' particles for the checkpoint writer's thread: in their spare memory, else
/// in host memory if it fits the window `host_bytes` (None: neither).
pub(crate) fn snapshot_or_host_copy(
    gpus: &mut [CudaBackend],
    host_bytes: u64,
) -> Result<Option<Box<dyn BlockSource + Send>>> {
    if !by_pieces() {
        return Ok(Some(Box::new(local_fluid(gpus)?)));
    }
    if let Some(s) = device_snapshot(gpus)? {
        return Ok(Some(Box::new(s)));
    }
    let bytes: u64 = gpus.iter().map(|g| g.live() as u64).sum::<u64>() * 44;
    if !crate::checkpoint::copy_fits(bytes, host_bytes) {
        return Ok(None);
    }
    Ok(Some(Box::new(local_fluid(gpus)?)))
}

/// `gpus`' particles in host memory, as a block lists them.
pub(crate) fn local_fluid(gpus: &mut [CudaBackend]) -> Result<crate::checkpoint::LocalFluid> {
    use crate::checkpoint::LocalFluid;
    if let [one] = gpus {
        if one.slab.is_none() {
            return Ok(LocalFluid::Whole(one.download_state()?));
        }
    }
    let parts = gpus
        .iter_mut()
        .map(|g| g.download_slab())
        .collect::<Result<Vec<_>>>()?;
    if parts.iter().any(|(_, ids)| ids.is_none()) {
        return Ok(LocalFluid::Placed(
            parts.into_iter().map(|(st, _)| st).collect(),
        ));
    }
    Ok(LocalFluid::Parts(
        parts
            .into_iter()
            .map(|(st, ids)| {
                (
                    st,
                    ids.unwrap_or_default().into_iter().map(u64::from).collect(),
                )
            })
            .collect(),
    ))
}

impl CudaBackend {
    /// Open GPU `ordinal` with the fluid of the checkpoint `file`, streamed straight to the
    /// GPU a window at a time (its particles in the file's order).
    pub(super) fn open_stored(
        cfg: &crate::config::Config,
        phys: &crate::physics::Physics,
        file: &crate::checkpoint::PartedFile,
        ordinal: usize,
        method: super::CellSumMethod,
    ) -> Result<CudaBackend> {
        use crate::timing::phase;
        let dev = phase("open the GPU", || {
            super::CudaDevice::open_for(ordinal, phys)
        })?;
        let n = file.len();
        let (free, _) = dev.free_memory()?;
        super::buffers::check_fits(&dev.describe(), n as u64, cfg.n_cells(), method, free)?;
        let mut be = CudaBackend::allocate(dev, phys.clone(), n, method)?;
        let window = crate::checkpoint::WriterSettings::from_knobs().window_bytes();
        let all = [f32::NEG_INFINITY, f32::INFINITY];
        let mut slots = super::upload_slots::UploadSlots::new(&be.dev.ctx)?;
        let counts = phase("read the checkpoint", || {
            // one GPU keeps every particle
            let map = crate::checkpoint::PartMap::one();
            let counts = file.stream_parts(
                1,
                all,
                |_| Some(0),
                window,
                Some(&map),
                &mut |_, s, at, v| be.put_values(&mut slots, s, at as usize, v),
            )?;
            slots.finish()?;
            Ok::<_, crate::error::MpcError>(counts)
        })?;
        if counts != [n as u64] {
            return Err(crate::error::MpcError::Device(format!(
                "the checkpoint gave {counts:?} of its {n} particles (corrupted?)"
            )));
        }
        be.pending = None;
        be.synchronize()?;
        Ok(be)
    }

    /// A piece of a checkpoint's section `section` (see `PartedFile::stream_parts`) into slots
    /// `at..` (ids into the labels of a slab that has them; a single GPU lists its particles
    /// by place), through the pinned `staging` (the copies complete once it is finished).
    pub(in crate::backend::cuda) fn put_values(
        &mut self,
        staging: &mut super::upload_slots::UploadSlots,
        section: usize,
        at: usize,
        values: crate::checkpoint::Values<'_>,
    ) -> Result<()> {
        use crate::checkpoint::Values;
        let s = self.dev.stream.clone();
        let len = match &values {
            Values::Ids(v) => v.len(),
            Values::F32(v) => v.len(),
            Values::F64(v) => v.len(),
        };
        let slots = if self.slab.is_some() {
            self.slab.as_ref().map_or(0, |sl| sl.capacity)
        } else {
            self.n
        };
        if at + len > slots {
            return Err(crate::error::MpcError::Device(format!(
                "{}: a checkpoint holds more particles for it than its {slots} slots (corrupted?)",
                self.dev.describe()
            )));
        }
        use super::upload_slots::bytes_of;
        use cudarc::driver::DevicePtr;
        match values {
            Values::Ids(ids) if self.slab.is_some() => self.upload_labels(staging, at, ids),
            Values::Ids(_) => Ok(()),
            Values::F32(x) => {
                let dst = self.fluid.pos[section - 1].device_ptr(&s).0 + 4 * at as u64;
                // SAFETY: slots at..at + len of this GPU's position buffer (checked above),
                // which nothing else uses while a checkpoint is read into it.
                unsafe { staging.put(&s, bytes_of(x), dst) }
            }
            Values::F64(v) => {
                let dst = self.fluid.vel[section - 4].device_ptr(&s).0 + 8 * at as u64;
                // SAFETY: as above, in the velocity buffer.
                unsafe { staging.put(&s, bytes_of(v), dst) }
            }
        }
    }
}
