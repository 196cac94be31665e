//! The routed solutes on their slabs: each slab's share as device arrays, the velocities'
//! way back into the caller's arrays, and the buffers other GPUs touch.

use cudarc::driver::{sys, CudaEvent, DriverError, PushKernelArg};

use super::super::transfer::peer_copy_async;
use super::{addr, SoluteRoutes};
use crate::backend::cuda::device::{drv, grid};
use crate::backend::cuda::launch::DevPtr;
use crate::backend::cuda::CudaBackend;
use crate::backend::DeviceSolutes;
use crate::error::{MpcError, Result};

impl SoluteRoutes {
    /// Slab `k`'s solutes this step as device arrays on its GPU (None when it has none), with
    /// the caller's index of each on the home GPU (None for a slab on another GPU, whose
    /// velocities are scattered at home after their return); its main stream ordered after
    /// their arrival.
    pub(in crate::backend::cuda::multi) fn slab_solutes(
        &self,
        slabs: &[CudaBackend],
        k: usize,
    ) -> Result<Option<(DeviceSolutes, Option<u64>)>> {
        let region = self.regions[k];
        if region.count == 0 {
            return Ok(None);
        }
        let main = &slabs[k].dev.stream;
        let off = region.first as u64;
        let st = &self.stream;
        let solutes = match &self.links[k].remote {
            None => {
                main.wait(&self.routed).map_err(drv("event"))?;
                let d = DeviceSolutes {
                    pos: addr(&self.rpos, st) + 24 * off,
                    vel: addr(&self.rvel, st) + 24 * off,
                    mass: addr(&self.rmass, st) + 8 * off,
                    n: region.count,
                    stream: 0,
                };
                (d, Some(addr(&self.rindex, st) + 4 * off))
            }
            Some(r) => {
                main.wait(&r.arrived).map_err(drv("event"))?;
                let x = r.region.as_ref().expect("sent");
                let d = DeviceSolutes {
                    pos: addr(&x.pos, &r.back),
                    vel: addr(&x.vel, &r.back),
                    mass: addr(&x.mass, &r.back),
                    n: region.count,
                    stream: 0,
                };
                (d, None)
            }
        };
        Ok(Some(solutes))
    }

    /// After slab `k` (`slab`) collided its solutes `d` (indices `index`, from
    /// [`SoluteRoutes::slab_solutes`]): on the home GPU, their velocities into `target` on its
    /// main stream (from another GPU [`SoluteRoutes::return_velocities`] brings them back), and
    /// the event the return waits for. With the gather the velocities stay in the staging,
    /// where the collision wrote them, until the return gathers them all.
    pub(in crate::backend::cuda::multi) fn scatter_slab(
        &self,
        k: usize,
        slab: &CudaBackend,
        d: &DeviceSolutes,
        index: Option<u64>,
        target: &DeviceSolutes,
    ) -> Result<()> {
        let main = &slab.dev.stream;
        if let Some(index) = index.filter(|_| !self.gather) {
            let count = d.n as u32;
            // SAFETY: mpc_route_scatter(const double *rvel, const u32 *rindex, u32 total,
            // double *svel): this slab's `count` collided velocities and their caller's
            // indices (each < n, each solute in one slab only) on its GPU, into `target`'s
            // velocities (3n doubles on this, the home, GPU).
            unsafe {
                main.launch_builder(&slab.dev.k.route_scatter)
                    .arg(&d.vel)
                    .arg(&index)
                    .arg(&count)
                    .arg(&target.vel)
                    .launch(grid(d.n))
                    .map_err(drv("solute scatter"))?;
            }
        }
        self.links[k].collided.record(main).map_err(drv("event"))
    }

    /// After every slab's collision: the velocities of the slabs on other GPUs back to the
    /// staging by peer copies, then into `target` on the home GPU: gathered in the caller's
    /// order once every region is back (default), or scattered region by region as each
    /// arrives (`MPCBOX_ROUTE_RETURN=scatter`). For the caller's device arrays their stream
    /// (`target.stream`) then waits for all of it; the host does not.
    pub(in crate::backend::cuda::multi) fn return_velocities(
        &mut self,
        slabs: &[CudaBackend],
        target: &DeviceSolutes,
        callers_arrays: bool,
    ) -> Result<()> {
        let home_ctx = slabs[self.home].dev.ctx.clone();
        let s = self.stream.clone();
        for (k, link) in self.links.iter().enumerate() {
            let region = self.regions[k];
            if region.count == 0 {
                continue;
            }
            let Some(r) = link.remote.as_ref() else {
                s.wait(&link.collided).map_err(drv("event"))?;
                continue;
            };
            let x = r.region.as_ref().expect("sent");
            r.back.wait(&link.collided).map_err(drv("event"))?;
            let at = region.first as u64;
            let dst = addr(&self.rvel, &s) + 24 * at;
            // SAFETY: the remote region's `count` velocities (written by the slab's collision,
            // which `back` waited for) into the staging's slots of this region (inside its
            // capacity); the staging is next written by the next packing, queued on the
            // routing stream after it waits for `returned`.
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
            s.wait(&r.returned).map_err(drv("event"))?;
            if self.gather {
                continue;
            }
            let (rvel, rindex) = (dst, addr(&self.rindex, &s) + 4 * at);
            let count = region.count as u32;
            // SAFETY: mpc_route_scatter as in `scatter_slab`: this region's returned
            // velocities and indices in the staging (slots first..first + count) into
            // `target`'s velocities (3n doubles on this GPU).
            unsafe {
                s.launch_builder(&slabs[self.home].dev.k.route_scatter)
                    .arg(&rvel)
                    .arg(&rindex)
                    .arg(&count)
                    .arg(&target.vel)
                    .launch(grid(region.count))
                    .map_err(drv("solute scatter"))?;
            }
        }
        if self.gather {
            let n = self.regions.iter().map(|r| r.count).sum::<usize>();
            let n32 = n as u32;
            // SAFETY: mpc_route_gather(const double *rvel, const u32 *rslot, u32 n, double
            // *svel): every region's collided velocities are in the staging (the home slabs'
            // collisions and the return copies, which this stream waited for above), rslot
            // holds each of the n solutes' slot (written by this step's packing, earlier on
            // this stream), and `target` holds 3n doubles on this, the home, GPU.
            unsafe {
                slabs[self.home]
                    .dev
                    .k
                    .route_gather(
                        &s,
                        grid(n),
                        &DevPtr::<f64>::new(addr(&self.rvel, &s)),
                        &DevPtr::<u32>::new(addr(&self.rslot, &s)),
                        &n32,
                        &mut DevPtr::<f64>::new(target.vel),
                    )
                    .map_err(drv("solute gather"))?;
            }
        }
        if callers_arrays {
            self.scattered.record(&s).map_err(drv("event"))?;
            wait_on_raw(target.stream, &self.scattered).map_err(drv("event"))?;
        } else {
            self.queue_host_download(target.n)?;
        }
        Ok(())
    }

    /// Every buffer another GPU touches, as (address, owning GPU, touching GPU): the staging
    /// (read and written by the remote slabs' copies) and each remote region (by home's).
    pub(in crate::backend::cuda::multi) fn peer_touched(
        &self,
        slabs: &[CudaBackend],
    ) -> Vec<(u64, usize, usize)> {
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
pub(in crate::backend::cuda::multi) fn record_on_raw(
    event: &CudaEvent,
    raw: u64,
) -> std::result::Result<(), DriverError> {
    // SAFETY: the event is live (owned by the routing) and its context current; the stream is
    // the caller's, whose validity the public API documents (a live stream of the solutes'
    // GPU, or 0).
    unsafe { cudarc::driver::result::event::record(event.cu_event(), raw as sys::CUstream) }
}

/// Make the caller's raw stream handle wait for `event`, without blocking the host.
pub(in crate::backend::cuda::multi) fn wait_on_raw(
    raw: u64,
    event: &CudaEvent,
) -> std::result::Result<(), DriverError> {
    // SAFETY: as `record_on_raw`.
    unsafe {
        cudarc::driver::result::stream::wait_event(
            raw as sys::CUstream,
            event.cu_event(),
            sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
        )
    }
}

pub(in crate::backend::cuda::multi) fn caller_stream_error(
    e: DriverError,
    ordinal: usize,
) -> MpcError {
    MpcError::Device(format!(
        "recording an event on the solutes' stream failed ({e:?}); fix: pass a live CUDA \
         stream of cuda:{ordinal} (the GPU holding the solutes), or 0"
    ))
}
