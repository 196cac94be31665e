//! The fluid on GPUs as a checkpoint's block (`crate::checkpoint::BlockSource`): read from the
//! live buffers a piece at a time while the run waits, or copied into spare device memory (a
//! device-to-device copy: milliseconds) and read from there by the checkpoint writer's thread,
//! on a stream of its own, while the run steps on. Either way only a piece is on the host at
//! once. A block lists every GPU's live particles in slot order, as a download does (a slab's
//! free slots skipped and its particles' global ids from `ids`; one GPU: every slot, listed by
//! place), so its bytes are those of a checkpoint written from a download.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView, DeviceRepr, PinnedHostSlice};

use super::buffers::RESERVE_BYTES;
use super::device::drv;
use super::CudaBackend;
use crate::checkpoint::{BlockSource, BlockStream};
use crate::error::Result;

/// The cell word of a free slot (`MPC_DEAD`).
const DEAD: u32 = u32::MAX;

/// One GPU's particle arrays as a block reads them (the first `slots` of each).
struct PartArrays<'a> {
    pos: [CudaView<'a, f32>; 3],
    vel: [CudaView<'a, f64>; 3],
    /// Cell words: free slots hold [`DEAD`] (None: every slot is live).
    cellw: Option<CudaView<'a, u32>>,
    /// Global ids (None: particles are listed by place).
    ids: Option<CudaView<'a, u32>>,
    slots: usize,
    live: u64,
}

/// Pinned host memory of one GPU's context that a piece of one section is copied into (a
/// copy records its event on the copying stream, which must be of the memory's context), and
/// the values kept from it.
struct Staging {
    words: PinnedHostSlice<u32>,
    ids: PinnedHostSlice<u32>,
    f32s: PinnedHostSlice<f32>,
    f64s: PinnedHostSlice<f64>,
    kept_ids: Vec<u64>,
    kept_f32: Vec<f32>,
    kept_f64: Vec<f64>,
    /// Values per piece.
    chunk: usize,
}

impl Staging {
    /// Staging of `ctx` for one of `parts` GPUs: together they hold about a piece of
    /// `piece_bytes` per width of value (so the window bounds them whatever the GPU count).
    fn new(
        ctx: &Arc<cudarc::driver::CudaContext>,
        piece_bytes: usize,
        parts: usize,
    ) -> Result<Staging> {
        let chunk = (piece_bytes / 8 / parts.max(1)).max(4096);
        // cached host memory (not write-combined: the host reads it)
        let flags = 0;
        // SAFETY: uninitialised pinned host memory (this and the next three), read only after
        // a device-to-host copy into it that the host waited for (`PinnedHostSlice::as_slice`
        // synchronises on the copy's event), and only as far as the copy wrote.
        let words = unsafe { ctx.alloc_pinned_with_flags::<u32>(chunk, flags) };
        // SAFETY: as above.
        let ids = unsafe { ctx.alloc_pinned_with_flags::<u32>(chunk, flags) };
        // SAFETY: as above.
        let f32s = unsafe { ctx.alloc_pinned_with_flags::<f32>(chunk, flags) };
        // SAFETY: as above.
        let f64s = unsafe { ctx.alloc_pinned_with_flags::<f64>(chunk, flags) };
        Ok(Staging {
            words: words.map_err(drv("pinned staging"))?,
            ids: ids.map_err(drv("pinned staging"))?,
            f32s: f32s.map_err(drv("pinned staging"))?,
            f64s: f64s.map_err(drv("pinned staging"))?,
            kept_ids: Vec::new(),
            kept_f32: Vec::new(),
            kept_f64: Vec::new(),
            chunk,
        })
    }
}

/// `src[lo..hi]` copied into `buf` on `stream`, once the copy is done.
fn fetch<'b, T: DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    src: &CudaView<'_, T>,
    lo: usize,
    hi: usize,
    buf: &'b mut PinnedHostSlice<T>,
) -> Result<&'b [T]> {
    // exactly `hi - lo` values: cudarc copies as many as the destination holds, so the whole
    // staging would read past the source's allocation. cudarc takes a plain slice for pageable
    // memory and neither waits nor records an event; into pinned memory the copy is truly
    // asynchronous, so the stream is waited for before the host reads it.
    let n = hi - lo;
    let dst = &mut buf.as_mut_slice().map_err(drv("checkpoint copy"))?[..n];
    stream
        .memcpy_dtoh(&src.slice(lo..hi), dst)
        .map_err(drv("checkpoint copy"))?;
    stream.synchronize().map_err(drv("checkpoint copy"))?;
    Ok(&buf.as_slice().map_err(drv("checkpoint copy"))?[..n])
}

/// The values of `vals` whose slot is live (`words` not [`DEAD`]), as `U`, into `kept`: in
/// parallel runs of slots, joined in order (the host's filtering otherwise bounds the rate).
fn keep_live<T: Copy + Send + Sync, U: From<T> + Send>(
    vals: &[T],
    words: Option<&[u32]>,
    kept: &mut Vec<U>,
) {
    use rayon::prelude::*;
    const RUN: usize = 1 << 16;
    kept.clear();
    match words {
        Some(w) => {
            let runs: Vec<Vec<U>> = vals
                .par_chunks(RUN)
                .zip(w.par_chunks(RUN))
                .map(|(v, w)| {
                    v.iter()
                        .zip(w)
                        .filter(|(_, &c)| c != DEAD)
                        .map(|(&v, _)| U::from(v))
                        .collect()
                })
                .collect();
            for r in runs {
                kept.extend(r);
            }
        }
        None => {
            kept.reserve(vals.len());
            kept.extend(vals.iter().map(|&v| U::from(v)));
        }
    }
}

/// Section `section` of `part`, a piece at a time, into `out` (see [`BlockSource::section`]).
fn read_section(
    part: &PartArrays<'_>,
    stream: &Arc<CudaStream>,
    section: usize,
    first_id: u64,
    st: &mut Staging,
    out: &mut BlockStream<'_>,
) -> Result<()> {
    let mut listed = 0u64;
    let mut lo = 0;
    while lo < part.slots {
        let hi = (lo + st.chunk).min(part.slots);
        let words = match &part.cellw {
            Some(w) => Some(fetch(stream, w, lo, hi, &mut st.words)?),
            None => None,
        };
        match section {
            0 => match &part.ids {
                Some(ids) => {
                    let v = fetch(stream, ids, lo, hi, &mut st.ids)?;
                    keep_live(v, words, &mut st.kept_ids);
                    out.put(&st.kept_ids, u64::to_le_bytes)?;
                }
                None => {
                    let k = words.map_or(hi - lo, |w| w.iter().filter(|&&c| c != DEAD).count());
                    out.put_range(first_id + listed, k as u64)?;
                    listed += k as u64;
                }
            },
            1..=3 => {
                let v = fetch(stream, &part.pos[section - 1], lo, hi, &mut st.f32s)?;
                keep_live(v, words, &mut st.kept_f32);
                out.put(&st.kept_f32, f32::to_le_bytes)?;
            }
            _ => {
                let v = fetch(stream, &part.vel[section - 4], lo, hi, &mut st.f64s)?;
                keep_live(v, words, &mut st.kept_f64);
                out.put(&st.kept_f64, f64::to_le_bytes)?;
            }
        }
        lo = hi;
    }
    Ok(())
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
    parts: Vec<GpuCopy>,
    /// Each GPU's staging, made at its first piece.
    staging: Vec<Option<Staging>>,
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
        let p = &self.parts[part];
        let parts = self.parts.len();
        let st = match &mut self.staging[part] {
            Some(st) => st,
            slot => slot.insert(Staging::new(p.stream.context(), out.piece_bytes(), parts)?),
        };
        read_section(&p.arrays(), &p.stream, section, first_id, st, out)
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
        let (p, stream) = &self.parts[part];
        let parts = self.parts.len();
        let st = match &mut self.staging[part] {
            Some(st) => st,
            slot => slot.insert(Staging::new(stream.context(), out.piece_bytes(), parts)?),
        };
        read_section(p, stream, section, first_id, st, out)
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
        let counts = phase("read the checkpoint", || {
            file.stream_parts(1, all, |_| Some(0), window, &mut |_, s, at, v| {
                be.put_values(s, at as usize, v)
            })
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
    /// by place).
    pub(in crate::backend::cuda) fn put_values(
        &mut self,
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
        match values {
            Values::Ids(ids) if self.slab.is_some() => self.upload_labels(at, ids),
            Values::Ids(_) => Ok(()),
            Values::F32(x) => s
                .memcpy_htod(x, &mut self.fluid.pos[section - 1].slice_mut(at..at + len))
                .map_err(drv("upload")),
            Values::F64(v) => s
                .memcpy_htod(v, &mut self.fluid.vel[section - 4].slice_mut(at..at + len))
                .map_err(drv("upload")),
        }
    }
}
