//! Solutes from outside (an MD code's device arrays on one of the run's GPUs, or host arrays)
//! decomposed with the slabs: each solute reaches the GPU that owns its cell once, each slab
//! bins and collides only its own, and the velocities come back into the caller's array.
//!
//! On the GPU holding the solutes (the *home* of the routing; slab 0's for host arrays), on a
//! stream of the highest priority so that it runs beside the fluid's long pass 1:
//! 1. `mpc_route_count` checks every value, locates every solute on the step's shifted grid
//!    (Lees-Edwards images included) and counts those of each slab;
//! 2. the counts and the check come back to the host (the only wait): a bad value stops the
//!    step before the fluid moves (unless the step was begun) and before any solute is
//!    collided; then pass 1 is queued on every slab;
//! 3. `mpc_route_pack`, beside pass 1, writes each solute into its slab's region of the
//!    staging (positions, velocities, masses and the caller's index);
//! 4. each slab on another GPU gets its region by one peer copy per array (the indices stay
//!    home); a slab on the home GPU reads its region in place.
//!
//! A slab's collision writes its solutes' velocities into its region: on the home GPU the
//! staging itself, on another GPU its copy, which one peer copy brings back to the staging.
//! Then `mpc_route_gather` writes every velocity from its slot (kept by the packing, in the
//! caller's order) into the caller's array in order: each sector of the array written whole
//! once, where scattering each slab's share by the caller's indices read and wrote every
//! sector once per slab (`MPCBOX_ROUTE_RETURN=scatter` keeps that form). The caller's stream
//! waits for the gather (device arrays) or the host copies the velocities out (host arrays);
//! the host does not wait for device arrays: the next step's routing is queued behind the
//! return on the routing stream.
//!
//! Stream order, which makes every buffer's reuse safe without host waits:
//! count(n) → pack(n) → forward copies(n) → slab binning and collision(n) → [return copies] →
//! gather(n) on the routing stream → pack(n+1); each arrow is an event or the order of one
//! stream.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, DevicePtr, PinnedHostSlice, PushKernelArg};

mod host;
pub(super) mod returns;

use super::transfer::peer_copy_async;
use crate::backend::cuda::device::{drv, priority_stream};
use crate::backend::cuda::params::KernelParams;
use crate::backend::cuda::CudaBackend;
use crate::backend::{DeviceSolutes, MAX_SOLUTE_COORDINATE};
use crate::error::{MpcError, Result};
use crate::physics::StepPlan;
use host::HostArrays;
use returns::{caller_stream_error, record_on_raw};

/// The most slabs one routing serves (`MPC_ROUTE_MAX_SLABS` in `kernels/solute_routes.cu`).
pub const MAX_ROUTED_SLABS: usize = 64;

/// Solutes one thread of the packing takes per tile (`MPC_ROUTE_TILE_ITEMS`).
const TILE_ITEMS: usize = 4;
/// The routing kernels' grids: at most this many blocks, each looping over its share (a few
/// per multiprocessor; more would only add global atomics on the same few counters).
const COUNT_BLOCKS: usize = 1024;
const PACK_BLOCKS: usize = 2048;
const ROUTE_THREADS: u32 = 256;

/// The grid of a routing kernel over `n` solutes, `items` per thread per pass, at most
/// `max_blocks` blocks (the kernels loop over the rest).
fn strided(n: usize, max_blocks: usize, items: usize) -> cudarc::driver::LaunchConfig {
    let per_block = ROUTE_THREADS as usize * items;
    cudarc::driver::LaunchConfig {
        grid_dim: (n.div_ceil(per_block).clamp(1, max_blocks) as u32, 1, 1),
        block_dim: (ROUTE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Where one step's solutes come from.
pub(super) enum RouteSource<'a> {
    /// The caller's device arrays, on the GPU of slab `home`'s device.
    Device(DeviceSolutes),
    /// Host arrays, their values tested as they are staged (masses at most `mass_cap`, the
    /// fixed-point cell sums' cap, if any), uploaded to slab 0's GPU first.
    Host {
        pos: &'a [[f64; 3]],
        vel: &'a [[f64; 3]],
        mass: &'a [f64],
        mass_cap: Option<f64>,
    },
}

/// A slab's region of the staging this step: its first slot and its count.
#[derive(Clone, Copy, Debug, Default)]
struct Region {
    first: usize,
    count: usize,
}

/// The copy of a region on a slab of another GPU (the caller's indices stay home, where the
/// returned velocities are scattered).
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
    /// Recorded on the slab's main stream after its solutes collided (and were scattered).
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
    /// Each solute's slot in the caller's order, for the gather of the velocities.
    rslot: CudaSlice<u32>,
    /// The velocities go back by the gather (`MPCBOX_ROUTE_RETURN`, default), not scattered.
    gather: bool,
    counts: CudaSlice<u32>,
    cursor: CudaSlice<u32>,
    first_bad: CudaSlice<u32>,
    bounds: CudaSlice<u32>,
    /// [counts of the slabs, then the four first bad indices], read after the routing.
    readback: PinnedHostSlice<u32>,
    caller_ready: CudaEvent,
    /// Recorded after the counts' copy to the host (which the host waits for).
    counted: CudaEvent,
    /// Recorded after the packing (the forward copies and home's slabs wait for it).
    routed: CudaEvent,
    scattered: CudaEvent,
    links: Vec<SlabLink>,
    regions: Vec<Region>,
    host: Option<HostArrays>,
}

fn alloc<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    len: usize,
) -> Result<CudaSlice<T>> {
    stream
        .alloc_zeros::<T>(len.max(1))
        .map_err(drv("solute routing alloc"))
}

fn addr<T>(b: &CudaSlice<T>, s: &CudaStream) -> u64 {
    b.device_ptr(s).0
}

/// The buffers of one routing pass over `g` parts (slabs, or a rank's pseudo-slabs): the parts'
/// first layers then Ly, their counters and cursors, the four first-bad indices, and the
/// staging the packing writes (positions, velocities, masses, caller indices).
pub(super) struct RouteBuffers<'a> {
    pub(super) bounds: &'a CudaSlice<u32>,
    pub(super) g: u32,
    pub(super) counts: &'a mut CudaSlice<u32>,
    pub(super) cursor: &'a mut CudaSlice<u32>,
    pub(super) first_bad: &'a mut CudaSlice<u32>,
    pub(super) rpos: &'a mut CudaSlice<f64>,
    pub(super) rvel: &'a mut CudaSlice<f64>,
    pub(super) rmass: &'a mut CudaSlice<f64>,
    pub(super) rindex: &'a mut CudaSlice<u32>,
    /// Each solute's slot, in the caller's order (for the gather; None: not kept).
    pub(super) rslot: Option<&'a mut CudaSlice<u32>>,
}

/// Queue `mpc_route_count` over `s` on `stream`: every value tested, every solute located on
/// the grid of `p` and counted in its part.
///
/// # Safety
/// `s` holds 3n, 3n and n doubles of device memory of `stream`'s GPU (checked pointers, or an
/// upload), not written until the count has passed; `b.bounds` holds g + 1 layers, `b.counts` g
/// counters and `b.first_bad` 4 indices, zeroed on this stream before.
pub(super) unsafe fn launch_route_count(
    stream: &CudaStream,
    home: &CudaBackend,
    p: &KernelParams,
    s: &DeviceSolutes,
    b: &mut RouteBuffers<'_>,
) -> Result<()> {
    let n32 = s.n as u32;
    // SAFETY: mpc_route_count(MpcParams, const double *spos, *svel, *smass, u32 n, double
    // limit, const u32 *bounds, u32 g, u32 *counts, u32 *first_bad) with the buffers the
    // caller vouches for; a grid-stride loop over any grid.
    unsafe {
        stream
            .launch_builder(&home.dev.k.route_count)
            .arg(p)
            .arg(&s.pos)
            .arg(&s.vel)
            .arg(&s.mass)
            .arg(&n32)
            .arg(&MAX_SOLUTE_COORDINATE)
            .arg(b.bounds)
            .arg(&b.g)
            .arg(&mut *b.counts)
            .arg(&mut *b.first_bad)
            .launch(strided(s.n, COUNT_BLOCKS, 1))
            .map_err(drv("solute routing"))?;
    }
    Ok(())
}

/// Queue `mpc_route_pack` of the counted `s` on `stream`: each solute into its part's region of
/// the staging (part k's region starts at the sum of the counts before it).
///
/// # Safety
/// As [`launch_route_count`], after it on the same stream (its counts, every value good), with
/// `b.cursor` zeroed on this stream and a staging of capacity >= n slots.
pub(super) unsafe fn launch_route_pack(
    stream: &CudaStream,
    home: &CudaBackend,
    p: &KernelParams,
    s: &DeviceSolutes,
    b: &mut RouteBuffers<'_>,
) -> Result<()> {
    let n32 = s.n as u32;
    let null = 0u64;
    // SAFETY: mpc_route_pack(MpcParams, const double *spos, *svel, *smass, u32 n, double
    // limit, const u32 *bounds, u32 g, const u32 *counts, u32 *cursor, double *rpos, *rvel,
    // *rmass, u32 *rindex, u32 *rslot) with the buffers the caller vouches for (rslot n slots,
    // or null: not written); the regions add up to n slots; a grid-stride loop over tiles.
    unsafe {
        let mut launch = stream.launch_builder(&home.dev.k.route_pack);
        launch
            .arg(p)
            .arg(&s.pos)
            .arg(&s.vel)
            .arg(&s.mass)
            .arg(&n32)
            .arg(&MAX_SOLUTE_COORDINATE)
            .arg(b.bounds)
            .arg(&b.g)
            .arg(&*b.counts)
            .arg(&mut *b.cursor)
            .arg(&mut *b.rpos)
            .arg(&mut *b.rvel)
            .arg(&mut *b.rmass)
            .arg(&mut *b.rindex);
        match b.rslot.as_deref_mut() {
            Some(slots) => launch.arg(slots),
            None => launch.arg(&null),
        };
        launch
            .launch(strided(s.n, PACK_BLOCKS, TILE_ITEMS))
            .map_err(drv("solute routing"))?;
    }
    Ok(())
}

/// The lowest bad index of each kind from the count's four first-bad words (recorded as
/// u32::MAX - index, 0: none; see `kernels/solute_routes.cu`), u32::MAX where none.
pub(super) fn first_bad_indices(words: &[u32]) -> [u32; 4] {
    std::array::from_fn(|k| match words[k] {
        0 => u32::MAX,
        v => u32::MAX - v,
    })
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
            rslot: alloc(&stream, 0)?,
            gather: !crate::knobs::knobs().is("MPCBOX_ROUTE_RETURN", "scatter"),
            counts: alloc(&stream, g)?,
            cursor: alloc(&stream, g)?,
            first_bad: alloc(&stream, 4)?,
            bounds: bounds_dev,
            readback,
            caller_ready: hdev.ctx.new_event(None).map_err(drv("event"))?,
            counted: hdev.ctx.new_event(None).map_err(drv("event"))?,
            routed: hdev.ctx.new_event(None).map_err(drv("event"))?,
            scattered: hdev.ctx.new_event(None).map_err(drv("event"))?,
            links,
            regions: vec![Region::default(); g],
            host: None,
            stream,
        };
        routes.stream.synchronize().map_err(drv("solute routing"))?;
        Ok(routes)
    }

    /// The slab whose GPU holds the staging.
    pub(super) fn home(&self) -> usize {
        self.home
    }

    /// This routing's buffers for a pass over its `g` slabs.
    fn buffers(&mut self, g: u32) -> RouteBuffers<'_> {
        RouteBuffers {
            bounds: &self.bounds,
            g,
            counts: &mut self.counts,
            cursor: &mut self.cursor,
            first_bad: &mut self.first_bad,
            rpos: &mut self.rpos,
            rvel: &mut self.rvel,
            rmass: &mut self.rmass,
            rindex: &mut self.rindex,
            rslot: self.gather.then_some(&mut self.rslot),
        }
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
        self.rslot = alloc(&self.stream, cap)?;
        self.stream.synchronize().map_err(drv("solute routing"))?;
        self.capacity = cap;
        Ok(())
    }

    /// This step's solutes where the routing reads them, the returned arrays (the caller's,
    /// ordered after the caller's queued work, or host arrays uploaded), which the return then
    /// writes.
    pub(super) fn stage(
        &mut self,
        slabs: &[CudaBackend],
        source: RouteSource<'_>,
    ) -> Result<DeviceSolutes> {
        let home = &slabs[self.home];
        home.dev.ctx.bind_to_thread().map_err(drv("bind"))?;
        match source {
            RouteSource::Device(d) => {
                self.ensure_capacity(d.n)?;
                record_on_raw(&self.caller_ready, d.stream)
                    .map_err(|e| caller_stream_error(e, home.dev.ordinal))?;
                self.stream.wait(&self.caller_ready).map_err(drv("event"))?;
                Ok(d)
            }
            RouteSource::Host {
                pos,
                vel,
                mass,
                mass_cap,
            } => {
                self.ensure_capacity(pos.len())?;
                self.upload_host(home, pos, vel, mass, mass_cap)
            }
        }
    }

    /// The home slab, its context bound, the routing stream and step `plan`'s parameters for
    /// `n` solutes: what every routing kernel launches with.
    fn launch_on_home<'s>(
        &self,
        slabs: &'s [CudaBackend],
        plan: &StepPlan,
        n: usize,
    ) -> Result<(&'s CudaBackend, Arc<CudaStream>, KernelParams)> {
        let home = &slabs[self.home];
        home.dev.ctx.bind_to_thread().map_err(drv("bind"))?;
        Ok((home, self.stream.clone(), home.params(plan, n)))
    }

    /// Check, locate and count the staged `solutes` on the home GPU and wait for the counts: a
    /// bad value is an error here, before the fluid moves (when the step was not begun) and
    /// before any solute is collided. Sets this step's regions.
    pub(super) fn check_and_count(
        &mut self,
        slabs: &[CudaBackend],
        plan: &StepPlan,
        solutes: &DeviceSolutes,
    ) -> Result<()> {
        let (home, s, p) = self.launch_on_home(slabs, plan, solutes.n)?;
        let g = slabs.len() as u32;
        s.memset_zeros(&mut self.counts).map_err(drv("routing"))?;
        s.memset_zeros(&mut self.first_bad)
            .map_err(drv("routing"))?;
        // SAFETY: the solutes are the caller's (checked by the pointer checks) or the uploaded
        // copy, n of them on this GPU; the slabs' g + 1 bounds, g counters and 4 first-bad
        // indices zeroed above.
        unsafe { launch_route_count(&s, home, &p, solutes, &mut self.buffers(g))? };
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
        self.counted.record(&s).map_err(drv("event"))?;
        self.counted.synchronize().map_err(drv("solute routing"))?;
        let back = self.readback.as_slice().map_err(drv("pinned"))?;
        let first_bad = first_bad_indices(&back[gl..gl + 4]);
        crate::backend::cuda::device_solutes::first_bad_to_error(&first_bad, p.solute_mass_cap())?;
        let mut first = 0;
        for (r, &c) in self.regions.iter_mut().zip(&back[..gl]) {
            *r = Region {
                first,
                count: c as usize,
            };
            first += c as usize;
        }
        if first != solutes.n {
            return Err(MpcError::Device(format!(
                "solute routing placed {first} of {} solutes (please report it)",
                solutes.n
            )));
        }
        Ok(())
    }

    /// Pack the counted `solutes` into their slabs' regions on the home GPU and queue each
    /// remote slab's copy of its region; the host does not wait (this runs beside pass 1).
    pub(super) fn pack_and_send(
        &mut self,
        slabs: &[CudaBackend],
        plan: &StepPlan,
        solutes: &DeviceSolutes,
    ) -> Result<()> {
        let (home, s, p) = self.launch_on_home(slabs, plan, solutes.n)?;
        let g = slabs.len() as u32;
        s.memset_zeros(&mut self.cursor).map_err(drv("routing"))?;
        // SAFETY: the arrays `check_and_count` read, its counts on this stream, g cursors
        // zeroed above, and the staging of capacity >= n slots.
        unsafe { launch_route_pack(&s, home, &p, solutes, &mut self.buffers(g))? };
        self.routed.record(&s).map_err(drv("event"))?;
        self.send_regions(slabs)
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
            let at = region.first as u64;
            let st = &self.stream;
            let copies = [
                (
                    addr(&self.rpos, st) + 24 * at,
                    addr(&remote.pos, &r.back),
                    24,
                ),
                (
                    addr(&self.rvel, st) + 24 * at,
                    addr(&remote.vel, &r.back),
                    24,
                ),
                (
                    addr(&self.rmass, st) + 8 * at,
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
}

#[cfg(test)]
mod tests {
    use super::MAX_ROUTED_SLABS;

    /// The kernels' bound on the slabs (the size of their shared table of region starts) is
    /// the one the host checks.
    #[test]
    fn the_kernels_serve_as_many_slabs_as_the_host_allows() {
        let src = include_str!("../../../../kernels/solute_routes.cu");
        for line in [
            format!("#define MPC_ROUTE_MAX_SLABS {MAX_ROUTED_SLABS}"),
            format!("#define MPC_ROUTE_TILE_ITEMS {}", super::TILE_ITEMS),
        ] {
            assert!(
                src.lines().any(|l| l.trim() == line),
                "{line} in solute_routes.cu"
            );
        }
    }
}
