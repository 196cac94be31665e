//! How bytes cross between the GPUs of one host. [`Transfer`]: peer copies (NVLink or PCIe
//! peer-to-peer) or staging through pinned host memory; peer access between contexts and the
//! grants that open each GPU's stream-ordered memory pool to its peers (without them the
//! driver stages peer copies of pool memory through the host); the raw asynchronous copies
//! the migration uses; and [`measure_transfer`], the rates of each way.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaEvent, CudaStream, DevicePtr};

use crate::backend::cuda::device::drv;
use crate::backend::cuda::{CudaBackend, CudaDevice};
use crate::error::{MpcError, Result};

/// Staged transfers move in chunks of this many u64 (2 MiB), pipelining the two PCIe legs.
const STAGING_CHUNK_WORDS: usize = 1 << 18;

/// How packed particles cross between GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transfer {
    /// `cuMemcpyPeerAsync` on the sender's stream (peer access enabled where the GPUs allow).
    Peer,
    /// Device → pinned host on the sender's stream, host → device on the receiver's.
    Host,
}

impl Transfer {
    /// `MPCBOX_MULTI_TRANSFER=peer|host`; unset: peer copies where every pair of
    /// neighbouring GPUs has peer access (with the pools opened to the peers they run at
    /// NVLink speed), host staging otherwise.
    pub fn from_env_or(peer_possible: bool) -> Transfer {
        match crate::knobs::knobs().get("MPCBOX_MULTI_TRANSFER") {
            Some("peer") => Transfer::Peer,
            Some("host") => Transfer::Host,
            _ if peer_possible => Transfer::Peer,
            _ => Transfer::Host,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Transfer::Peer => "peer copies",
            Transfer::Host => "pinned host staging",
        }
    }
}

/// Let every GPU of the run read and write the stream-ordered memory pool of every other
/// (where the hardware allows peer access). cudarc allocates from the device's current pool
/// (`cuMemAllocAsync`), and a pool grants peers nothing by default: a peer copy of pool memory
/// is then staged through the host by the driver (at host-copy speed, a tenth of NVLink's:
/// `mpcbox-bench multi` records the peer copy rate) and a kernel dereferencing it faults. Peer *context* access
/// (`cuCtxEnablePeerAccess`) does not cover pool memory; `cuMemPoolSetAccess` does.
pub(crate) fn grant_pool_access(devices: &[&CudaDevice]) -> Result<Vec<(usize, usize)>> {
    use cudarc::driver::sys;
    let mut granted = Vec::new();
    for owner in devices {
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: `pool` is a valid out-pointer; the device handle comes from a live context.
        let r = unsafe { sys::cuDeviceGetMemPool(&mut pool, owner.ctx.cu_device()) };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(MpcError::Device(format!(
                "cuDeviceGetMemPool on cuda:{} failed ({r:?})",
                owner.ordinal
            )));
        }
        for peer in devices {
            if peer.ordinal == owner.ordinal || !can_access_peer(peer, owner) {
                continue;
            }
            let desc = sys::CUmemAccessDesc {
                location: sys::CUmemLocation {
                    type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                    id: peer.ordinal as i32,
                },
                flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            };
            // SAFETY: `desc` is one valid access descriptor and lives across the call; `pool`
            // was returned by the driver above.
            let r = unsafe { sys::cuMemPoolSetAccess(pool, &desc, 1) };
            if r != sys::CUresult::CUDA_SUCCESS {
                return Err(MpcError::Device(format!(
                    "cuMemPoolSetAccess (cuda:{} memory for cuda:{}) failed ({r:?}); fix: set \
                     MPCBOX_MULTI_TRANSFER=host to stage transfers through host memory",
                    owner.ordinal, peer.ordinal
                )));
            }
            granted.push((owner.ordinal, peer.ordinal));
        }
    }
    Ok(granted)
}

/// Whether `reader` may access memory of `owner` directly (NVLink or PCIe peer-to-peer).
pub fn can_access_peer(reader: &CudaDevice, owner: &CudaDevice) -> bool {
    let mut can = 0;
    // SAFETY: `can` is a valid out-pointer; both device handles come from live contexts.
    let r = unsafe {
        cudarc::driver::sys::cuDeviceCanAccessPeer(
            &mut can,
            reader.ctx.cu_device(),
            owner.ctx.cu_device(),
        )
    };
    r == cudarc::driver::sys::CUresult::CUDA_SUCCESS && can != 0
}

/// Whether `reader` may access memory of `owner` directly: the same GPU (several slabs on one
/// GPU share its memory), or peer access.
pub fn reaches(reader: &CudaDevice, owner: &CudaDevice) -> bool {
    reader.ordinal == owner.ordinal || can_access_peer(reader, owner)
}

/// Whether GPU `reader` has read-write access to the memory behind device pointer `ptr`
/// (which lives on another GPU's pool): the check the tests make for every buffer that
/// another GPU touches.
pub fn peer_can_access(ptr: u64, reader_ordinal: usize) -> Result<bool> {
    use cudarc::driver::sys;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: MEMPOOL_HANDLE writes one CUmemoryPool into `pool`.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            &mut pool as *mut _ as *mut std::ffi::c_void,
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
            ptr,
        )
    };
    if r != sys::CUresult::CUDA_SUCCESS || pool.is_null() {
        return Err(MpcError::Device(format!(
            "pointer {ptr:#x} is not memory of a CUDA pool ({r:?})"
        )));
    }
    let mut loc = sys::CUmemLocation {
        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: reader_ordinal as i32,
    };
    let mut flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_NONE;
    // SAFETY: valid out-pointer and location; `pool` returned by the driver above.
    let r = unsafe { sys::cuMemPoolGetAccess(&mut flags, pool, &mut loc) };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(MpcError::Device(format!(
            "cuMemPoolGetAccess failed ({r:?})"
        )));
    }
    Ok(flags == sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
}

/// Whether every GPU may access the memory of its neighbours above and below (periodically),
/// in both directions: then peer copies are the default.
pub(super) fn neighbours_have_peer_access(devices: &[CudaDevice]) -> bool {
    let g = devices.len();
    (0..g).all(|k| {
        let up = (k + 1) % g;
        reaches(&devices[k], &devices[up]) && reaches(&devices[up], &devices[k])
    })
}

/// Let the GPUs of the run access each other's memory where the hardware allows (peer copies
/// of migrating particles; peer loads and stores of the solutes on the first GPU).
pub(super) fn enable_peer_access(devices: &[&CudaDevice]) -> Result<()> {
    use cudarc::driver::sys;
    for a in devices {
        for b in devices {
            if a.ordinal == b.ordinal || !can_access_peer(a, b) {
                continue;
            }
            a.ctx.bind_to_thread().map_err(drv("bind"))?;
            // SAFETY: both contexts are live (held by their devices) and `a`'s is current;
            // enabling access twice returns an error code, handled below, not UB.
            let r = unsafe { sys::cuCtxEnablePeerAccess(b.ctx.cu_ctx(), 0) };
            match r {
                sys::CUresult::CUDA_SUCCESS
                | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                e => tracing::warn!(
                    "peer access {} -> {} not enabled ({e:?}); peer copies go through the host",
                    a.ordinal,
                    b.ordinal
                ),
            }
        }
    }
    Ok(())
}

/// Queue a copy of `bytes` from `src_ptr` (memory of `src_ctx`'s GPU) to `dst_ptr` (of
/// `dst_ctx`'s GPU) on `stream`, a stream of `src_ctx`.
///
/// # Safety
/// Both addresses must be live device allocations holding at least `bytes` bytes, and stay
/// alive and untouched by other work until `stream` has passed the copy.
pub(super) unsafe fn peer_copy_async(
    src_ctx: &Arc<CudaContext>,
    src_ptr: u64,
    dst_ctx: &Arc<CudaContext>,
    dst_ptr: u64,
    bytes: usize,
    stream: &CudaStream,
) -> Result<()> {
    src_ctx.bind_to_thread().map_err(drv("bind"))?;
    // SAFETY: both contexts are live, `stream` belongs to the current one (`src_ctx`), and the
    // caller guarantees the two ranges of `bytes` bytes and their lifetime.
    unsafe {
        cudarc::driver::result::memcpy_peer_async(
            dst_ctx.cu_ctx(),
            dst_ptr,
            src_ctx.cu_ctx(),
            src_ptr,
            bytes,
            stream.cu_stream(),
        )
        .map_err(drv("peer copy"))
    }
}

/// Queue copies of `host.len()` words from `src_ptr` (memory of `ctx`'s GPU) into the pinned
/// `host`, in chunks on `stream` (a stream of `ctx`), recording one event after each chunk
/// into `events` so the receiver can start on a chunk as soon as it is down.
///
/// # Safety
/// `src_ptr` must hold `host.len()` words; `host` must be pinned memory that stays alive and
/// is neither read nor written by the host until the events have completed.
pub(super) unsafe fn stage_to_host_async(
    ctx: &Arc<CudaContext>,
    src_ptr: u64,
    host: &mut [u64],
    stream: &CudaStream,
    events: &mut Vec<CudaEvent>,
) -> Result<()> {
    ctx.bind_to_thread().map_err(drv("bind"))?;
    for (c, chunk) in host.chunks_mut(STAGING_CHUNK_WORDS).enumerate() {
        let at = src_ptr + (c * STAGING_CHUNK_WORDS * 8) as u64;
        // SAFETY: chunk c of the caller's range (inside `src_ptr`'s words) into the matching
        // chunk of `host`, pinned and kept alive and untouched by the caller until the copy is
        // done; `stream` belongs to the current context.
        unsafe {
            cudarc::driver::result::memcpy_dtoh_async(chunk, at, stream.cu_stream())
                .map_err(drv("staging copy"))?;
        }
        events.push(stream.record_event(None).map_err(drv("event"))?);
    }
    Ok(())
}

/// Queue copies of the pinned `host` words to `dst_ptr` (memory of `ctx`'s GPU) on `stream`
/// (a stream of `ctx`), chunk c after `events[c]` (from [`stage_to_host_async`]).
///
/// # Safety
/// `dst_ptr` must hold `host.len()` words; `host` must be pinned memory that stays alive and
/// unmodified until `stream` has passed the copies.
pub(super) unsafe fn stage_to_device_async(
    ctx: &Arc<CudaContext>,
    host: &[u64],
    dst_ptr: u64,
    stream: &CudaStream,
    events: &[CudaEvent],
) -> Result<()> {
    ctx.bind_to_thread().map_err(drv("bind"))?;
    for (c, chunk) in host.chunks(STAGING_CHUNK_WORDS).enumerate() {
        stream.wait(&events[c]).map_err(drv("event"))?;
        let at = dst_ptr + (c * STAGING_CHUNK_WORDS * 8) as u64;
        // SAFETY: chunk c of `host` (written by the copy `events[c]` follows, which this
        // stream waited for just now) into the matching chunk of the caller's device range;
        // `stream` belongs to the current context.
        unsafe {
            cudarc::driver::result::memcpy_htod_async(at, chunk, stream.cu_stream())
                .map_err(drv("staging copy"))?;
        }
    }
    Ok(())
}

/// Queue one copy of the pinned `host` words to `dst_ptr` (memory of `ctx`'s GPU) on `stream`
/// (a stream of `ctx`); returns at once.
///
/// # Safety
/// `dst_ptr` must hold `host.len()` words; `host` must be pinned memory that stays alive and
/// unmodified until `stream` has passed the copy.
pub(super) unsafe fn upload_pinned_async(
    ctx: &Arc<CudaContext>,
    host: &[u64],
    dst_ptr: u64,
    stream: &CudaStream,
) -> Result<()> {
    ctx.bind_to_thread().map_err(drv("bind"))?;
    // SAFETY: the caller's words into the caller's device range; `stream` belongs to the
    // current context.
    unsafe {
        cudarc::driver::result::memcpy_htod_async(dst_ptr, host, stream.cu_stream())
            .map_err(drv("upload"))?;
    }
    Ok(())
}

/// GPU-to-GPU copy rates (bytes/s, one direction) measured by [`measure_transfer`].
#[derive(Clone, Copy, Debug, Default)]
pub struct TransferRates {
    /// Peer copy of stream-ordered pool memory (what cudarc allocates) before the pool is
    /// opened to the peer: the driver stages it through the host.
    pub peer_pool_closed: f64,
    /// The same memory after `cuMemPoolSetAccess` (what the backend does at open).
    pub peer_pool_open: f64,
    /// Reference: peer copy of plain `cuMemAlloc` memory, the hardware's GPU-to-GPU rate.
    pub peer_plain_alloc: f64,
    /// Through pinned host memory (device → host on a's stream, host → device on b's).
    pub via_host: f64,
}

/// Best of `reps` timed runs of `copy` moving `bytes`, in bytes/s.
fn best_rate(bytes: usize, reps: usize, mut copy: impl FnMut() -> Result<()>) -> Result<f64> {
    copy()?; // warm-up
    let mut best = 0.0f64;
    for _ in 0..reps {
        let t = Instant::now();
        copy()?;
        best = best.max(bytes as f64 / t.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// Copy rates of `bytes` from GPU `a` to GPU `b`, each the best of `reps`: peer copies of pool
/// memory before and after the pool is opened to the peer, of plain allocations (the
/// hardware's reference, same run), and through pinned host memory.
pub fn measure_transfer(a: usize, b: usize, bytes: usize, reps: usize) -> Result<TransferRates> {
    let da = CudaDevice::open(a)?;
    let db = CudaDevice::open(b)?;
    let words = bytes / 8;
    let bytes = words * 8;
    let src = da.stream.alloc_zeros::<u64>(words).map_err(drv("alloc"))?;
    let dst = db.stream.alloc_zeros::<u64>(words).map_err(drv("alloc"))?;
    if !can_access_peer(&da, &db) {
        eprintln!("peer access {a} -> {b}: the driver says it is not possible");
    }
    for (x, y) in [(&da, &db), (&db, &da)] {
        x.ctx.bind_to_thread().map_err(drv("bind"))?;
        // SAFETY: both contexts are live; enabling twice returns an error code, not UB.
        let r = unsafe { cudarc::driver::sys::cuCtxEnablePeerAccess(y.ctx.cu_ctx(), 0) };
        tracing::debug!("peer access {} -> {}: {r:?}", x.ordinal, y.ordinal);
    }
    let peer_copy = |dp: u64, sp: u64| -> Result<()> {
        // SAFETY: `dp`/`sp` are live allocations of `bytes` bytes on b and a; the copy is
        // synchronised before the buffers can be dropped.
        unsafe { peer_copy_async(&da.ctx, sp, &db.ctx, dp, bytes, &da.stream)? };
        da.stream.synchronize().map_err(drv("sync"))
    };
    let sp = src.device_ptr(&da.stream).0;
    let dp = dst.device_ptr(&db.stream).0;
    let mut rates = TransferRates {
        peer_pool_closed: best_rate(bytes, reps, || peer_copy(dp, sp))?,
        ..Default::default()
    };
    grant_pool_access(&[&da, &db])?;
    rates.peer_pool_open = best_rate(bytes, reps, || peer_copy(dp, sp))?;
    rates.peer_plain_alloc = plain_alloc_rate(&da, &db, bytes, reps, &peer_copy)?;
    rates.via_host = via_host_rate(&da, &db, sp, dp, words, reps)?;
    Ok(rates)
}

/// [`measure_transfer`]'s reference: peer copies between plain `cuMemAlloc` allocations.
fn plain_alloc_rate(
    da: &CudaDevice,
    db: &CudaDevice,
    bytes: usize,
    reps: usize,
    peer_copy: &dyn Fn(u64, u64) -> Result<()>,
) -> Result<f64> {
    da.ctx.bind_to_thread().map_err(drv("bind"))?;
    // SAFETY: plain device allocations of `bytes`, freed below after the copies completed.
    let plain_src = unsafe { cudarc::driver::result::malloc_sync(bytes) }.map_err(drv("alloc"))?;
    db.ctx.bind_to_thread().map_err(drv("bind"))?;
    // SAFETY: as above.
    let plain_dst = unsafe { cudarc::driver::result::malloc_sync(bytes) }.map_err(drv("alloc"))?;
    let rate = best_rate(bytes, reps, || peer_copy(plain_dst, plain_src))?;
    for (ctx, ptr) in [(&da.ctx, plain_src), (&db.ctx, plain_dst)] {
        ctx.bind_to_thread().map_err(drv("bind"))?;
        // SAFETY: allocated above by malloc_sync in this context; every copy was synchronised.
        unsafe { cudarc::driver::result::free_sync(ptr) }.map_err(drv("free"))?;
    }
    Ok(rate)
}

/// [`measure_transfer`] through pinned host memory: `words` from `sp` on a to `dp` on b.
fn via_host_rate(
    da: &CudaDevice,
    db: &CudaDevice,
    sp: u64,
    dp: u64,
    words: usize,
    reps: usize,
) -> Result<f64> {
    let flags = cudarc::driver::sys::CU_MEMHOSTALLOC_PORTABLE;
    // SAFETY: pinned host allocation of `words` u64, used only by the copies below.
    let mut stage =
        unsafe { da.ctx.alloc_pinned_with_flags::<u64>(words, flags) }.map_err(drv("pinned"))?;
    best_rate(words * 8, reps, || {
        let h = stage.as_mut_slice().map_err(drv("pinned"))?;
        da.ctx.bind_to_thread().map_err(drv("bind"))?;
        // SAFETY: `h` is pinned memory of `bytes`; each copy is synchronised before the next
        // use of `h`.
        unsafe {
            cudarc::driver::result::memcpy_dtoh_async(&mut *h, sp, da.stream.cu_stream())
                .map_err(drv("staging"))?;
        }
        da.stream.synchronize().map_err(drv("sync"))?;
        db.ctx.bind_to_thread().map_err(drv("bind"))?;
        // SAFETY: as above.
        unsafe {
            cudarc::driver::result::memcpy_htod_async(dp, &*h, db.stream.cu_stream())
                .map_err(drv("staging"))?;
        }
        db.stream.synchronize().map_err(drv("sync"))
    })
}

/// Peer access between the slabs' GPUs where the hardware allows, each GPU's memory pool
/// opened to its peers; whether every GPU reaches the first (home) GPU.
pub(super) fn connect_slabs(slabs: &[CudaBackend]) -> Result<()> {
    let devices: Vec<&CudaDevice> = slabs.iter().map(|s| &s.dev).collect();
    enable_peer_access(&devices)?;
    let granted = grant_pool_access(&devices)?;
    tracing::debug!("memory pools opened to peers: {granted:?}");
    Ok(())
}

impl super::MultiCudaBackend {
    /// Every buffer another GPU touches, as (device address, owning GPU, touching GPU): the
    /// receive buffers (written by the neighbours' peer copies) and the solute routing's
    /// staging and remote regions (read and written by peer copies), once made. Each must be
    /// open to that GPU ([`peer_can_access`]).
    pub fn peer_touched_buffers(&self) -> Vec<(u64, usize, usize)> {
        let mut out = Vec::new();
        for (j, s) in self.slabs.iter().enumerate() {
            let (stream, owner) = (&s.dev.stream, s.dev.ordinal);
            for side in 0..2 {
                // a neighbour on another rank sends through the host
                let Some(n) = self.local(self.neighbour(self.first + j, side)) else {
                    continue;
                };
                let sender = self.slabs[n].dev.ordinal;
                if sender != owner {
                    let ptr = s.slab().recv[side].device_ptr(stream).0;
                    out.push((ptr, owner, sender));
                }
            }
        }
        if let Some(r) = &self.routes {
            out.extend(r.peer_touched(&self.slabs));
        }
        out
    }
}
