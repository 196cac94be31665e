//! Solutes from outside (an MD code's device arrays on one of the run's GPUs, or host arrays)
//! decomposed with the slabs: each solute reaches the GPU that owns its cell once, each slab
//! bins and collides only its own, and the velocities come back into the caller's array.
//!
//! On the GPU holding the solutes (the *home* of the routing; slab 0's for host arrays), on a
//! stream of the highest priority so that it runs beside the fluid's long pass 1:
//! 1. `mpc_route_count` locates every solute on the step's shifted grid (Lees-Edwards images
//!    included) and counts those of each slab, recording bad positions;
//! 2. `mpc_route_pack` writes each solute into its slab's region of the staging (positions,
//!    velocities, masses and the caller's index), recording bad velocities and masses;
//! 3. the counts and the check come back to the host (the only wait, while pass 1 runs):
//!    a bad value stops the step before any solute is collided;
//! 4. each slab on another GPU gets its region by one peer copy per array; a slab on the home
//!    GPU reads its region in place.
//!
//! After the collision each remote slab's velocities go back to its region by a peer copy,
//! and `mpc_route_scatter` writes every velocity into the caller's array; the caller's stream
//! waits for that (device arrays) or the host copies them out (host arrays). The host does not
//! wait for the return: the next step's routing is queued behind it on the same stream.
//!
//! Stream order, which makes every buffer's reuse safe without host waits:
//! pack(n) → forward copies(n) → slab binning and collision(n) → return copies(n) →
//! scatter(n) → pack(n+1); each arrow is an event or the order of one stream.

use std::sync::Arc;

use cudarc::driver::{
    sys, CudaEvent, CudaSlice, CudaStream, DevicePtr, DriverError, PinnedHostSlice, PushKernelArg,
};

use super::transfer::peer_copy_async;
use crate::backend::cuda::device::{drv, grid};
use crate::backend::cuda::CudaBackend;
use crate::backend::{DeviceSolutes, MAX_SOLUTE_COORDINATE};
use crate::error::{MpcError, Result};
use crate::physics::StepPlan;

/// The most slabs one routing serves (`MPC_ROUTE_MAX_SLABS` in `kernels/solute_routes.cu`).
pub const MAX_ROUTED_SLABS: usize = 64;

/// Where one step's solutes come from.
pub(super) enum RouteSource<'a> {
    /// The caller's device arrays, on the GPU of slab `home`'s device.
    Device(DeviceSolutes),
    /// Host arrays, uploaded to slab 0's GPU first.
    Host {
        pos: &'a [[f64; 3]],
        vel: &'a [[f64; 3]],
        mass: &'a [f64],
    },
}

/// A slab's region of the staging this step: its first slot and its count.
#[derive(Clone, Copy, Debug, Default)]
struct Region {
    first: usize,
    count: usize,
}

/// The copy of a region on a slab of another GPU.
struct RemoteRegion {
    capacity: usize,
    pos: CudaSlice<f64>,
    vel: CudaSlice<f64>,
    mass: CudaSlice<f64>,
}

/// What links the home GPU to one slab.
struct SlabLink {
    /// On another GPU than home: the copy of its region (None until the first solute) and the
    /// streams and events of the two peer copies. None for a slab on the home GPU.
    remote: Option<RemoteLink>,
    /// Recorded on the slab's main stream after its solutes collided.
    collided: CudaEvent,
}

struct RemoteLink {
    region: Option<RemoteRegion>,
    /// A stream of the home GPU: the forward copy.
    forward: Arc<CudaStream>,
    /// A stream of the slab's GPU: the return copy.
    back: Arc<CudaStream>,
    arrived: CudaEvent,
    returned: CudaEvent,
}

/// Host arrays' way to the home GPU: pinned staging (write-combined going up, cached coming
/// down) and their device copies, the arrays the routing then reads.
struct HostArrays {
    capacity: usize,
    pos_up: PinnedHostSlice<f64>,
    vel_up: PinnedHostSlice<f64>,
    mass_up: PinnedHostSlice<f64>,
    vel_down: PinnedHostSlice<f64>,
    pos: CudaSlice<f64>,
    vel: CudaSlice<f64>,
    mass: CudaSlice<f64>,
}

/// The routing state of a multi-GPU backend (made at the first routed step; remade when the
/// caller's arrays move to another GPU).
pub(super) struct SoluteRoutes {
    /// The slab whose GPU holds the solutes and the staging.
    home: usize,
    stream: Arc<CudaStream>,
    capacity: usize,
    rpos: CudaSlice<f64>,
    rvel: CudaSlice<f64>,
    rmass: CudaSlice<f64>,
    rindex: CudaSlice<u32>,
    counts: CudaSlice<u32>,
    cursor: CudaSlice<u32>,
    first_bad: CudaSlice<u32>,
    bounds: CudaSlice<u32>,
    /// [counts of the slabs, then the four first bad indices], read after the routing.
    readback: PinnedHostSlice<u32>,
    caller_ready: CudaEvent,
    routed: CudaEvent,
    scattered: CudaEvent,
    links: Vec<SlabLink>,
    regions: Vec<Region>,
    host: Option<HostArrays>,
    /// Solutes routed this step (until its velocities are returned).
    n: usize,
}

fn alloc<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    len: usize,
) -> Result<CudaSlice<T>> {
    stream
        .alloc_zeros::<T>(len.max(1))
        .map_err(drv("solute routing alloc"))
}

/// A non-blocking stream of the highest priority on `ctx`.
fn priority_stream(ctx: &Arc<cudarc::driver::CudaContext>) -> Result<Arc<CudaStream>> {
    ctx.bind_to_thread().map_err(drv("bind"))?;
    let (_, highest) =
        cudarc::driver::result::stream::get_priority_range().map_err(drv("stream priorities"))?;
    ctx.new_stream_with_priority(highest).map_err(drv("stream"))
}

fn addr<T>(b: &CudaSlice<T>, s: &CudaStream) -> u64 {
    b.device_ptr(s).0
}

impl SoluteRoutes {
    /// The routing for `slabs` (this process's, cut at `bounds`, first layer of each then Ly)
    /// with its staging on slab `home`'s GPU.
    pub(super) fn new(slabs: &[CudaBackend], home: usize, bounds: &[u32]) -> Result<SoluteRoutes> {
        let g = slabs.len();
        if g > MAX_ROUTED_SLABS || bounds.len() != g + 1 {
            return Err(MpcError::Device(format!(
                "solutes over {g} slabs: at most {MAX_ROUTED_SLABS} are routed; fix: use fewer \
                 slabs (tuning.slabs, or GPUs)"
            )));
        }
        let hdev = &slabs[home].dev;
        let stream = priority_stream(&hdev.ctx)?;
        let mut links = Vec::with_capacity(g);
        for s in slabs {
            let remote = if s.dev.ordinal == hdev.ordinal {
                None
            } else {
                Some(RemoteLink {
                    region: None,
                    forward: hdev.ctx.new_stream().map_err(drv("stream"))?,
                    back: s.dev.ctx.new_stream().map_err(drv("stream"))?,
                    arrived: hdev.ctx.new_event(None).map_err(drv("event"))?,
                    returned: s.dev.ctx.new_event(None).map_err(drv("event"))?,
                })
            };
            links.push(SlabLink {
                remote,
                collided: s.dev.ctx.new_event(None).map_err(drv("event"))?,
            });
        }
        let bounds_dev = stream.clone_htod(bounds).map_err(drv("solute routing"))?;
        // SAFETY: pinned host memory, uninitialised; read by the host only after the
        // device-to-host copy into it that the host waited for.
        let readback =
            unsafe { hdev.ctx.alloc_pinned_with_flags::<u32>(g + 4, 0) }.map_err(drv("pinned"))?;
        let routes = SoluteRoutes {
            home,
            capacity: 0,
            rpos: alloc(&stream, 0)?,
            rvel: alloc(&stream, 0)?,
            rmass: alloc(&stream, 0)?,
            rindex: alloc(&stream, 0)?,
            counts: alloc(&stream, g)?,
            cursor: alloc(&stream, g)?,
            first_bad: alloc(&stream, 4)?,
            bounds: bounds_dev,
            readback,
            caller_ready: hdev.ctx.new_event(None).map_err(drv("event"))?,
            routed: hdev.ctx.new_event(None).map_err(drv("event"))?,
            scattered: hdev.ctx.new_event(None).map_err(drv("event"))?,
            links,
            regions: vec![Region::default(); g],
            host: None,
            n: 0,
            stream,
        };
        routes.stream.synchronize().map_err(drv("solute routing"))?;
        Ok(routes)
    }

    /// The slab whose GPU holds the staging.
    pub(super) fn home(&self) -> usize {
        self.home
    }

    /// Wait for every copy and kernel of the routing (before buffers are replaced or freed).
    pub(super) fn quiesce(&self) -> Result<()> {
        self.stream.synchronize().map_err(drv("solute routing"))?;
        for l in &self.links {
            if let Some(r) = &l.remote {
                r.forward.synchronize().map_err(drv("solute routing"))?;
                r.back.synchronize().map_err(drv("solute routing"))?;
            }
        }
        Ok(())
    }

    /// Staging for `n` solutes (grown, never shrunk; the old buffers are freed after every
    /// copy that used them has passed).
    fn ensure_capacity(&mut self, n: usize) -> Result<()> {
        if n <= self.capacity {
            return Ok(());
        }
        self.quiesce()?;
        let cap = n.next_power_of_two().max(1024);
        self.rpos = alloc(&self.stream, 3 * cap)?;
        self.rvel = alloc(&self.stream, 3 * cap)?;
        self.rmass = alloc(&self.stream, cap)?;
        self.rindex = alloc(&self.stream, cap)?;
        self.stream.synchronize().map_err(drv("solute routing"))?;
        self.capacity = cap;
        Ok(())
    }

    /// Host arrays up to the home GPU (on the routing stream): the device arrays the routing
    /// then reads, as [`DeviceSolutes`].
    fn upload_host(
        &mut self,
        home: &CudaBackend,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<DeviceSolutes> {
        let n = pos.len();
        if self.host.as_ref().is_none_or(|h| h.capacity < n) {
            self.quiesce()?;
            let cap = n.next_power_of_two().max(1024);
            let ctx = &home.dev.ctx;
            let wc = cudarc::driver::sys::CU_MEMHOSTALLOC_WRITECOMBINED;
            // SAFETY: pinned host memory, uninitialised (these four calls): the `_up` buffers
            // are filled by the host before the copies that read them are queued, `vel_down`
            // is read only after the copy into it that the host waited for.
            let pin = |len: usize, flags: u32| unsafe {
                ctx.alloc_pinned_with_flags::<f64>(len, flags)
                    .map_err(drv("pinned"))
            };
            self.host = Some(HostArrays {
                capacity: cap,
                pos_up: pin(3 * cap, wc)?,
                vel_up: pin(3 * cap, wc)?,
                mass_up: pin(cap, wc)?,
                vel_down: pin(3 * cap, 0)?,
                pos: alloc(&self.stream, 3 * cap)?,
                vel: alloc(&self.stream, 3 * cap)?,
                mass: alloc(&self.stream, cap)?,
            });
            self.stream.synchronize().map_err(drv("solute routing"))?;
        }
        let h = self.host.as_mut().expect("made above");
        // the previous step's copies out of these buffers have passed: the host waited for
        // its velocities
        let up = |dst: &mut PinnedHostSlice<f64>, src: &[f64]| -> Result<()> {
            crate::host::copy(
                &mut dst.as_mut_slice().map_err(drv("pinned"))?[..src.len()],
                src,
            );
            Ok(())
        };
        up(&mut h.pos_up, pos.as_flattened())?;
        up(&mut h.vel_up, vel.as_flattened())?;
        up(&mut h.mass_up, mass)?;
        let s = &self.stream;
        let pinned = |b: &PinnedHostSlice<f64>, len: usize| -> Result<*const f64> {
            Ok(b.as_slice().map_err(drv("pinned"))?[..len].as_ptr())
        };
        for (src, dst, len) in [
            (pinned(&h.pos_up, 3 * n)?, addr(&h.pos, s), 3 * n),
            (pinned(&h.vel_up, 3 * n)?, addr(&h.vel, s), 3 * n),
            (pinned(&h.mass_up, n)?, addr(&h.mass, s), n),
        ] {
            // SAFETY: `len` doubles of pinned staging (filled above, refilled only after the
            // host waited for this step's velocities) into device buffers of at least that
            // many (capacity >= n), on the routing stream that then reads them.
            unsafe {
                cudarc::driver::result::memcpy_htod_async(
                    dst,
                    std::slice::from_raw_parts(src, len),
                    s.cu_stream(),
                )
                .map_err(drv("solute upload"))?;
            }
        }
        Ok(DeviceSolutes {
            pos: addr(&h.pos, s),
            vel: addr(&h.vel, s),
            mass: addr(&h.mass, s),
            n,
            stream: self.stream.cu_stream() as u64,
        })
    }

    /// Route this step's solutes: check, locate, count and pack them on the home GPU, wait for
    /// the counts (a bad value is an error here, before any solute is collided), and queue each
    /// remote slab's copy of its region. Returns the arrays the routing read (the caller's, or
    /// the uploaded host arrays), which the return writes.
    pub(super) fn route(
        &mut self,
        slabs: &[CudaBackend],
        plan: &StepPlan,
        source: RouteSource<'_>,
    ) -> Result<DeviceSolutes> {
        let home = &slabs[self.home];
        home.dev.ctx.bind_to_thread().map_err(drv("bind"))?;
        let n = match &source {
            RouteSource::Device(d) => d.n,
            RouteSource::Host { pos, .. } => pos.len(),
        };
        self.ensure_capacity(n)?;
        let solutes = match source {
            RouteSource::Device(d) => {
                // the routing reads the arrays after the caller's queued work
                record_on_raw(&self.caller_ready, d.stream)
                    .map_err(|e| caller_stream_error(e, home.dev.ordinal))?;
                self.stream.wait(&self.caller_ready).map_err(drv("event"))?;
                d
            }
            RouteSource::Host { pos, vel, mass } => self.upload_host(home, pos, vel, mass)?,
        };
        let g = slabs.len() as u32;
        let s = self.stream.clone();
        s.memset_zeros(&mut self.counts).map_err(drv("routing"))?;
        s.memset_zeros(&mut self.cursor).map_err(drv("routing"))?;
        s.memset_zeros(&mut self.first_bad)
            .map_err(drv("routing"))?;
        let p = home.params(plan, n);
        let n32 = n as u32;
        // SAFETY: mpc_route_count(MpcParams, const double *spos, u32 n, double limit, const u32
        // *bounds, u32 g, u32 *counts, u32 *first_bad): the step's parameters, positions of n
        // solutes (3n doubles on this GPU: the caller's, checked by the pointer checks, or the
        // uploaded copy), the slabs' g + 1 bounds, g counters zeroed above and 4 first-bad
        // indices; one thread per solute.
        unsafe {
            s.launch_builder(&home.dev.k.route_count)
                .arg(&p)
                .arg(&solutes.pos)
                .arg(&n32)
                .arg(&MAX_SOLUTE_COORDINATE)
                .arg(&self.bounds)
                .arg(&g)
                .arg(&mut self.counts)
                .arg(&mut self.first_bad)
                .launch(grid(n))
                .map_err(drv("solute routing"))?;
        }
        // SAFETY: mpc_route_pack(MpcParams, const double *spos, *svel, *smass, u32 n, double
        // limit, const u32 *bounds, u32 g, const u32 *counts, u32 *cursor, u32 *first_bad,
        // double *rpos, *rvel, *rmass, u32 *rindex): the arrays above (3n, 3n, n doubles), the
        // counts of the count pass on this stream, g cursors zeroed above, and the staging of
        // capacity >= n slots (3 doubles, 3 doubles, 1 double, 1 index each); the regions add
        // up to at most n slots.
        unsafe {
            s.launch_builder(&home.dev.k.route_pack)
                .arg(&p)
                .arg(&solutes.pos)
                .arg(&solutes.vel)
                .arg(&solutes.mass)
                .arg(&n32)
                .arg(&MAX_SOLUTE_COORDINATE)
                .arg(&self.bounds)
                .arg(&g)
                .arg(&self.counts)
                .arg(&mut self.cursor)
                .arg(&mut self.first_bad)
                .arg(&mut self.rpos)
                .arg(&mut self.rvel)
                .arg(&mut self.rmass)
                .arg(&mut self.rindex)
                .launch(grid(n))
                .map_err(drv("solute routing"))?;
        }
        let gl = g as usize;
        s.memcpy_dtoh(
            &self.counts,
            &mut self.readback.as_mut_slice().map_err(drv("pinned"))?[..gl],
        )
        .map_err(drv("routing"))?;
        s.memcpy_dtoh(
            &self.first_bad,
            &mut self.readback.as_mut_slice().map_err(drv("pinned"))?[gl..gl + 4],
        )
        .map_err(drv("routing"))?;
        self.routed.record(&s).map_err(drv("event"))?;
        self.routed.synchronize().map_err(drv("solute routing"))?;
        let back = self.readback.as_slice().map_err(drv("pinned"))?;
        // recorded as u32::MAX - index (0: none), see `kernels/solute_routes.cu`
        let mut first_bad = [u32::MAX; 4];
        for (f, &v) in first_bad.iter_mut().zip(&back[gl..gl + 4]) {
            if v != 0 {
                *f = u32::MAX - v;
            }
        }
        crate::backend::cuda::device_solutes::first_bad_to_error(&first_bad)?;
        let mut first = 0;
        for (r, &c) in self.regions.iter_mut().zip(&back[..gl]) {
            *r = Region {
                first,
                count: c as usize,
            };
            first += c as usize;
        }
        if first != n {
            return Err(MpcError::Device(format!(
                "solute routing placed {first} of {n} solutes (please report it)"
            )));
        }
        self.n = n;
        self.send_regions(slabs)?;
        Ok(solutes)
    }

    /// Each remote slab's region to its GPU, on the link's forward stream after the packing.
    fn send_regions(&mut self, slabs: &[CudaBackend]) -> Result<()> {
        let home_ctx = slabs[self.home].dev.ctx.clone();
        for (k, link) in self.links.iter_mut().enumerate() {
            let (Some(r), region) = (link.remote.as_mut(), self.regions[k]) else {
                continue;
            };
            if region.count == 0 {
                continue;
            }
            let dev = &slabs[k].dev;
            if r.region.as_ref().is_none_or(|x| x.capacity < region.count) {
                // the previous step's copies out of the old buffers have passed: the return
                // copy on `back`, which the scatter waited for before this step's packing
                r.back.synchronize().map_err(drv("solute routing"))?;
                let cap = (region.count + region.count / 4)
                    .next_power_of_two()
                    .max(1024);
                r.region = Some(RemoteRegion {
                    capacity: cap,
                    pos: alloc(&r.back, 3 * cap)?,
                    vel: alloc(&r.back, 3 * cap)?,
                    mass: alloc(&r.back, cap)?,
                });
                r.back.synchronize().map_err(drv("solute routing"))?;
            }
            let remote = r.region.as_ref().expect("made above");
            r.forward.wait(&self.routed).map_err(drv("event"))?;
            let copies = [
                (
                    addr(&self.rpos, &self.stream) + 24 * region.first as u64,
                    addr(&remote.pos, &r.back),
                    24,
                ),
                (
                    addr(&self.rvel, &self.stream) + 24 * region.first as u64,
                    addr(&remote.vel, &r.back),
                    24,
                ),
                (
                    addr(&self.rmass, &self.stream) + 8 * region.first as u64,
                    addr(&remote.mass, &r.back),
                    8,
                ),
            ];
            for (src, dst, width) in copies {
                // SAFETY: `region.count` solutes of `width` bytes each from the staging (slots
                // first..first + count < capacity, written by the packing this stream waited
                // for) into the remote region (capacity >= count); neither is touched by other
                // work until the slab's main stream, which waits for `arrived`, has used them
                // and the return copy has passed (stream order above).
                unsafe {
                    peer_copy_async(
                        &home_ctx,
                        src,
                        &dev.ctx,
                        dst,
                        width * region.count,
                        &r.forward,
                    )?;
                }
            }
            r.arrived.record(&r.forward).map_err(drv("event"))?;
        }
        Ok(())
    }

    /// Slab `k`'s solutes this step as device arrays on its GPU (None when it has none), its
    /// main stream ordered after their arrival.
    pub(super) fn slab_solutes(
        &self,
        slabs: &[CudaBackend],
        k: usize,
    ) -> Result<Option<DeviceSolutes>> {
        let region = self.regions[k];
        if region.count == 0 {
            return Ok(None);
        }
        let main = &slabs[k].dev.stream;
        let off = region.first as u64;
        let solutes = match &self.links[k].remote {
            None => {
                main.wait(&self.routed).map_err(drv("event"))?;
                DeviceSolutes {
                    pos: addr(&self.rpos, &self.stream) + 24 * off,
                    vel: addr(&self.rvel, &self.stream) + 24 * off,
                    mass: addr(&self.rmass, &self.stream) + 8 * off,
                    n: region.count,
                    stream: 0,
                }
            }
            Some(r) => {
                main.wait(&r.arrived).map_err(drv("event"))?;
                let x = r.region.as_ref().expect("sent");
                DeviceSolutes {
                    pos: addr(&x.pos, &r.back),
                    vel: addr(&x.vel, &r.back),
                    mass: addr(&x.mass, &r.back),
                    n: region.count,
                    stream: 0,
                }
            }
        };
        Ok(Some(solutes))
    }

    /// Slab `k` (`slab`) has collided its solutes (queued on its main stream).
    pub(super) fn mark_collided(&self, k: usize, slab: &CudaBackend) -> Result<()> {
        if self.regions[k].count > 0 {
            self.links[k]
                .collided
                .record(&slab.dev.stream)
                .map_err(drv("event"))?;
        }
        Ok(())
    }

    /// Every slab's velocities back to the staging (peer copies from remote slabs) and then
    /// into `target` (the arrays [`SoluteRoutes::route`] returned), on the routing stream;
    /// for the caller's device arrays their stream (`target.stream`) waits for that, the host
    /// does not.
    pub(super) fn return_velocities(
        &mut self,
        slabs: &[CudaBackend],
        target: &DeviceSolutes,
        callers_arrays: bool,
    ) -> Result<()> {
        let home_ctx = slabs[self.home].dev.ctx.clone();
        for (k, link) in self.links.iter().enumerate() {
            let region = self.regions[k];
            if region.count == 0 {
                continue;
            }
            match &link.remote {
                None => self.stream.wait(&link.collided).map_err(drv("event"))?,
                Some(r) => {
                    let x = r.region.as_ref().expect("sent");
                    r.back.wait(&link.collided).map_err(drv("event"))?;
                    let dst = addr(&self.rvel, &self.stream) + 24 * region.first as u64;
                    // SAFETY: the remote region's `count` velocities (written by the slab's
                    // collision, which `back` waited for) into the staging's slots of this
                    // region (inside its capacity); the staging is next written by the next
                    // packing, queued after the scatter, which waits for `returned`.
                    unsafe {
                        peer_copy_async(
                            &slabs[k].dev.ctx,
                            addr(&x.vel, &r.back),
                            &home_ctx,
                            dst,
                            24 * region.count,
                            &r.back,
                        )?;
                    }
                    r.returned.record(&r.back).map_err(drv("event"))?;
                    self.stream.wait(&r.returned).map_err(drv("event"))?;
                }
            }
        }
        let s = self.stream.clone();
        let total = self.n as u32;
        if total > 0 {
            // SAFETY: mpc_route_scatter(const double *rvel, const u32 *rindex, u32 total, double
            // *svel): the staging's first `total` slots (velocities returned above, the indices
            // of the packing: each < n, every solute once) into `target`'s velocities, 3n
            // doubles on this GPU (the caller's, checked by the pointer checks, or the uploaded
            // copy).
            unsafe {
                s.launch_builder(&slabs[self.home].dev.k.route_scatter)
                    .arg(&self.rvel)
                    .arg(&self.rindex)
                    .arg(&total)
                    .arg(&target.vel)
                    .launch(grid(self.n))
                    .map_err(drv("solute scatter"))?;
            }
        }
        if callers_arrays {
            self.scattered.record(&s).map_err(drv("event"))?;
            wait_on_raw(target.stream, &self.scattered).map_err(drv("event"))?;
        }
        Ok(())
    }

    /// Host arrays: the velocities the return wrote, copied into `out` (waits for them).
    pub(super) fn download_host(&mut self, out: &mut [[f64; 3]]) -> Result<()> {
        let n = out.len();
        let h = self
            .host
            .as_mut()
            .ok_or_else(|| MpcError::Device("host solutes were not uploaded".into()))?;
        self.stream
            .memcpy_dtoh(&h.vel.slice(..3 * n), &mut h.vel_down)
            .map_err(drv("solute download"))?;
        self.stream.synchronize().map_err(drv("solute download"))?;
        let staged = h.vel_down.as_slice().map_err(drv("pinned"))?;
        crate::host::copy(out.as_flattened_mut(), &staged[..3 * n]);
        Ok(())
    }

    /// Every buffer another GPU touches, as (address, owning GPU, touching GPU): the staging
    /// (read and written by the remote slabs' copies) and each remote region (by home's).
    pub(super) fn peer_touched(&self, slabs: &[CudaBackend]) -> Vec<(u64, usize, usize)> {
        let home = slabs[self.home].dev.ordinal;
        let mut out = Vec::new();
        for (k, l) in self.links.iter().enumerate() {
            let Some(r) = &l.remote else { continue };
            let there = slabs[k].dev.ordinal;
            for b in [&self.rpos, &self.rvel, &self.rmass] {
                out.push((addr(b, &self.stream), home, there));
            }
            if let Some(x) = &r.region {
                for b in [&x.pos, &x.vel, &x.mass] {
                    out.push((addr(b, &r.back), there, home));
                }
            }
        }
        out
    }
}

/// Record `event` on the caller's raw stream handle (a `CUstream`; 0 the legacy default).
fn record_on_raw(event: &CudaEvent, raw: u64) -> std::result::Result<(), DriverError> {
    // SAFETY: the event is live (owned by the routing) and its context current; the stream is
    // the caller's, whose validity the public API documents (a live stream of the solutes'
    // GPU, or 0).
    unsafe { cudarc::driver::result::event::record(event.cu_event(), raw as sys::CUstream) }
}

/// Make the caller's raw stream handle wait for `event`, without blocking the host.
fn wait_on_raw(raw: u64, event: &CudaEvent) -> std::result::Result<(), DriverError> {
    // SAFETY: as `record_on_raw`.
    unsafe {
        cudarc::driver::result::stream::wait_event(
            raw as sys::CUstream,
            event.cu_event(),
            sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
        )
    }
}

fn caller_stream_error(e: DriverError, ordinal: usize) -> MpcError {
    MpcError::Device(format!(
        "recording an event on the solutes' stream failed ({e:?}); fix: pass a live CUDA \
         stream of cuda:{ordinal} (the GPU holding the solutes), or 0"
    ))
}
