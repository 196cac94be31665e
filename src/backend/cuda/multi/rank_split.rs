//! Over MPI ranks, each rank's own solutes (device arrays, or host arrays uploaded to its GPU
//! first: `host.rs`) split on its GPU by the routing kernels of `kernels/solute_routes.cu`
//! over three pseudo-slabs: the layers below this rank's slabs, its own layers, and those
//! above. Its own solutes stay on the GPU and are routed to
//! its slabs as one process routes device solutes (`solute_routes.rs`); only the others (for
//! an MD code decomposed as the fluid is, those near a face) go down to the host and through
//! the transport to the ranks of their cells (`slabbed::route_solutes`), which collide them
//! with their own and send the velocities back (`slabbed::return_solute_velocities`).
//!
//! One step, on a stream of this rank's GPU ordered after the caller's:
//! 1. count (every value checked) in [below | own | above]; the counts and the check come
//!    down (the host waits);
//! 2. every rank agrees on the check; pass 1 of the fluid is queued (unless begun), and beside
//!    it the solutes are packed into [below | own | above] of the staging, the foreign ones come
//!    down and cross the ranks;
//! 3. those that arrived here are uploaded after this rank's own, and the step routes and
//!    collides [own | arrived] as one set of device solutes;
//! 4. the own solutes' velocities are scattered into the caller's array, the arrived ones' go
//!    back to their ranks, and the velocities that come back are scattered in too; the
//!    caller's stream waits for the scatters.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{
    CudaEvent, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PinnedHostSlice, PushKernelArg,
};

mod host;

use super::solute_routes::returns::{caller_stream_error, record_on_raw, wait_on_raw};
use super::solute_routes::{
    first_bad_indices, launch_route_count, launch_route_pack, RouteBuffers,
};
use super::step::StepSolutes;
use super::step::{RANK_SPLIT_COUNTED, RANK_SPLIT_CROSSED, RANK_SPLIT_RETURNED};
use super::MultiCudaBackend;
use crate::backend::cuda::device::drv;
use crate::backend::cuda::CudaBackend;
use crate::backend::slabbed::{return_solute_velocities, route_solutes, SoluteMode};
use crate::backend::{Backend, DeviceSolutes, SlabSolutes, SoluteBatch, StepReport};
use crate::error::Result;
use crate::physics::StepPlan;

/// Whether the split is switched off (`MPCBOX_RANK_SOLUTE_SPLIT=off`): every solute is then
/// routed on the host (device arrays copied down first, `MultiCudaBackend::step_device_over_ranks`),
/// the reference the split is tested against.
pub(super) fn off() -> bool {
    crate::knobs::knobs().is("MPCBOX_RANK_SOLUTE_SPLIT", "off")
}

/// `MPCBOX_RANK_SOLUTE_SPLIT=route-twice`: a rank of one slab routes [own | arrived] to it a
/// second time, as any device solutes, instead of colliding them there as they lie (the
/// form before that shortcut: for A/B runs and as a reference in the tests).
fn route_again() -> bool {
    crate::knobs::knobs().is("MPCBOX_RANK_SOLUTE_SPLIT", "route-twice")
}

/// The pseudo-slabs of the split: below this rank's layers, its own, above.
const PARTS: usize = 3;

/// A rank's split of its solutes: the staging on its GPU and the foreign solutes on the host (made at the first split step; remade when the solutes move to another GPU).
pub(super) struct RankSplit {
    ordinal: usize,
    stream: Arc<CudaStream>,
    capacity: usize,
    rpos: CudaSlice<f64>,
    rvel: CudaSlice<f64>,
    rmass: CudaSlice<f64>,
    rindex: CudaSlice<u32>,
    counts: CudaSlice<u32>,
    cursor: CudaSlice<u32>,
    first_bad: CudaSlice<u32>,
    /// [0, this rank's first layer, its end, Ly]
    bounds: CudaSlice<u32>,
    /// [the parts' counts, the four first bad indices]
    readback: PinnedHostSlice<u32>,
    caller_ready: CudaEvent,
    scattered: CudaEvent,
    /// This step's parts: [below, own, above] solute counts.
    parts: [usize; PARTS],
    foreign: Foreign,
    /// Host solutes of this rank uploaded to its GPU (made at the first such step).
    host: Option<host::HostInput>,
    /// The foreign solutes' returned velocities and indices, uploaded for the scatter.
    back_vel: CudaSlice<f64>,
    back_index: CudaSlice<u32>,
}

/// The foreign solutes (below, then above) on the host and their indices in the caller's
/// arrays.
#[derive(Default)]
struct Foreign {
    pos: Vec<[f64; 3]>,
    vel: Vec<[f64; 3]>,
    mass: Vec<f64>,
    index: Vec<u32>,
}

impl RankSplit {
    fn new(home: &CudaBackend, bounds: [u32; PARTS + 1]) -> Result<RankSplit> {
        let ctx = &home.dev.ctx;
        ctx.bind_to_thread().map_err(drv("bind"))?;
        // of the highest priority, so that the packing runs beside the fluid's long pass 1
        let stream = crate::backend::cuda::device::priority_stream(ctx)?;
        let zeros = |len: usize| stream.alloc_zeros::<u32>(len).map_err(drv("rank split"));
        // SAFETY: pinned host memory, uninitialised; read only after the device-to-host copy
        // into it that the host waited for.
        let readback =
            unsafe { ctx.alloc_pinned_with_flags::<u32>(PARTS + 4, 0) }.map_err(drv("pinned"))?;
        let split = RankSplit {
            ordinal: home.dev.ordinal,
            capacity: 0,
            rpos: stream.alloc_zeros(1).map_err(drv("rank split"))?,
            rvel: stream.alloc_zeros(1).map_err(drv("rank split"))?,
            rmass: stream.alloc_zeros(1).map_err(drv("rank split"))?,
            rindex: zeros(1)?,
            counts: zeros(PARTS)?,
            cursor: zeros(PARTS)?,
            first_bad: zeros(4)?,
            bounds: stream.clone_htod(&bounds).map_err(drv("rank split"))?,
            readback,
            caller_ready: ctx.new_event(None).map_err(drv("event"))?,
            scattered: ctx.new_event(None).map_err(drv("event"))?,
            parts: [0; PARTS],
            foreign: Foreign::default(),
            host: None,
            back_vel: stream.alloc_zeros(1).map_err(drv("rank split"))?,
            back_index: zeros(1)?,
            stream,
        };
        split.stream.synchronize().map_err(drv("rank split"))?;
        Ok(split)
    }

    /// Staging for `n` solutes, keeping the first `keep` slots (grown, never shrunk).
    fn ensure_capacity(&mut self, n: usize, keep: usize) -> Result<()> {
        if n <= self.capacity {
            return Ok(());
        }
        let cap = n.next_power_of_two().max(1024);
        let s = self.stream.clone();
        let grow = |old: &CudaSlice<f64>, width: usize| -> Result<CudaSlice<f64>> {
            let mut new = s
                .alloc_zeros::<f64>(width * cap)
                .map_err(drv("rank split"))?;
            if keep > 0 {
                s.memcpy_dtod(
                    &old.slice(..width * keep),
                    &mut new.slice_mut(..width * keep),
                )
                .map_err(drv("rank split"))?;
            }
            Ok(new)
        };
        let (p, v, m) = (
            grow(&self.rpos, 3)?,
            grow(&self.rvel, 3)?,
            grow(&self.rmass, 1)?,
        );
        let mut index = s.alloc_zeros::<u32>(cap).map_err(drv("rank split"))?;
        if keep > 0 {
            s.memcpy_dtod(&self.rindex.slice(..keep), &mut index.slice_mut(..keep))
                .map_err(drv("rank split"))?;
        }
        // the old buffers are freed only after the copies out of them have passed
        s.synchronize().map_err(drv("rank split"))?;
        (self.rpos, self.rvel, self.rmass, self.rindex) = (p, v, m, index);
        self.capacity = cap;
        Ok(())
    }

    /// The split's buffers for a pass over the three parts.
    fn buffers(&mut self) -> RouteBuffers<'_> {
        RouteBuffers {
            bounds: &self.bounds,
            g: PARTS as u32,
            counts: &mut self.counts,
            cursor: &mut self.cursor,
            first_bad: &mut self.first_bad,
            rpos: &mut self.rpos,
            rvel: &mut self.rvel,
            rmass: &mut self.rmass,
            rindex: &mut self.rindex,
            rslot: None,
        }
    }

    /// Count and check the caller's `s` in [below | own | above] on step `plan`'s grid (the
    /// host waits for the counts and the check: a bad value is an error here).
    fn count(&mut self, home: &CudaBackend, plan: &StepPlan, s: &DeviceSolutes) -> Result<()> {
        home.dev.ctx.bind_to_thread().map_err(drv("bind"))?;
        self.ensure_capacity(s.n, 0)?;
        record_on_raw(&self.caller_ready, s.stream)
            .map_err(|e| caller_stream_error(e, self.ordinal))?;
        let st = self.stream.clone();
        st.wait(&self.caller_ready).map_err(drv("event"))?;
        let p = home.params(plan, s.n);
        st.memset_zeros(&mut self.counts)
            .map_err(drv("rank split"))?;
        st.memset_zeros(&mut self.cursor)
            .map_err(drv("rank split"))?;
        st.memset_zeros(&mut self.first_bad)
            .map_err(drv("rank split"))?;
        // SAFETY: the caller's n solutes (the pointers checked, or this split's upload), after
        // the caller's work (waited for above); the parts' bounds, counters and first-bad
        // indices zeroed above.
        unsafe { launch_route_count(&st, home, &p, s, &mut self.buffers())? };
        let back = self.readback.as_mut_slice().map_err(drv("pinned"))?;
        st.memcpy_dtoh(&self.counts, &mut back[..PARTS])
            .map_err(drv("rank split"))?;
        st.memcpy_dtoh(&self.first_bad, &mut back[PARTS..])
            .map_err(drv("rank split"))?;
        st.synchronize().map_err(drv("rank split"))?;
        let back = self.readback.as_slice().map_err(drv("pinned"))?;
        let first_bad = first_bad_indices(&back[PARTS..]);
        crate::backend::cuda::device_solutes::first_bad_to_error(&first_bad, p.solute_mass_cap())?;
        self.parts = std::array::from_fn(|k| back[k] as usize);
        Ok(())
    }

    /// Pack the counted `s` into [below | own | above] of the staging and bring the foreign
    /// solutes to the host.
    fn pack(&mut self, home: &CudaBackend, plan: &StepPlan, s: &DeviceSolutes) -> Result<()> {
        home.dev.ctx.bind_to_thread().map_err(drv("bind"))?;
        let st = self.stream.clone();
        let p = home.params(plan, s.n);
        // SAFETY: the arrays `count` counted and checked (every value good), their counts and
        // the cursors zeroed there on this stream, the staging of capacity >= n.
        unsafe { launch_route_pack(&st, home, &p, s, &mut self.buffers())? };
        self.take_foreign()
    }

    /// The solutes below and above this rank's layers (and their caller indices) to the host.
    fn take_foreign(&mut self) -> Result<()> {
        let [below, own, above] = self.parts;
        let ranges = [0..below, below + own..below + own + above];
        let nf = below + above;
        let f = &mut self.foreign;
        f.pos.resize(nf, [0.0; 3]);
        f.vel.resize(nf, [0.0; 3]);
        f.mass.resize(nf, 0.0);
        f.index.resize(nf, 0);
        let st = &self.stream;
        let mut at = 0;
        for r in ranges {
            let (a, b, len) = (r.start, r.end, r.len());
            if len == 0 {
                continue;
            }
            let to = at..at + len;
            st.memcpy_dtoh(
                &self.rpos.slice(3 * a..3 * b),
                f.pos[to.clone()].as_flattened_mut(),
            )
            .map_err(drv("rank split"))?;
            st.memcpy_dtoh(
                &self.rvel.slice(3 * a..3 * b),
                f.vel[to.clone()].as_flattened_mut(),
            )
            .map_err(drv("rank split"))?;
            st.memcpy_dtoh(&self.rmass.slice(a..b), &mut f.mass[to.clone()])
                .map_err(drv("rank split"))?;
            st.memcpy_dtoh(&self.rindex.slice(a..b), &mut f.index[to])
                .map_err(drv("rank split"))?;
            at += len;
        }
        st.synchronize().map_err(drv("rank split"))
    }

    /// The solutes that arrived here, uploaded after this rank's own: [own | arrived] as one
    /// set of device solutes, on this split's stream.
    fn merge(&mut self, arrived: Option<&SoluteBatch<'_>>) -> Result<DeviceSolutes> {
        let [below, own, _] = self.parts;
        let na = arrived.map_or(0, |a| a.len());
        self.ensure_capacity(below + own + na, below + own)?;
        let at = below + own;
        if let Some(a) = arrived {
            let st = &self.stream;
            st.memcpy_htod(
                a.pos.as_flattened(),
                &mut self.rpos.slice_mut(3 * at..3 * (at + na)),
            )
            .map_err(drv("rank split"))?;
            st.memcpy_htod(
                a.vel.as_flattened(),
                &mut self.rvel.slice_mut(3 * at..3 * (at + na)),
            )
            .map_err(drv("rank split"))?;
            st.memcpy_htod(a.mass, &mut self.rmass.slice_mut(at..at + na))
                .map_err(drv("rank split"))?;
        }
        let st = &self.stream;
        Ok(DeviceSolutes {
            pos: self.rpos.device_ptr(st).0 + 24 * below as u64,
            vel: self.rvel.device_ptr(st).0 + 24 * below as u64,
            mass: self.rmass.device_ptr(st).0 + 8 * below as u64,
            n: own + na,
            stream: st.cu_stream() as u64,
        })
    }

    /// After the step: the own solutes' velocities scattered into the caller's `s.vel`, the
    /// arrived ones' copied into `arrived` (to go back to their ranks).
    fn scatter_own(
        &mut self,
        home: &CudaBackend,
        s: &DeviceSolutes,
        arrived: Option<&mut SoluteBatch<'_>>,
    ) -> Result<()> {
        let [below, own, _] = self.parts;
        let st = self.stream.clone();
        self.scatter(home, &st, below, own, s.vel, None)?;
        if let Some(a) = arrived {
            let at = below + own;
            let na = a.len();
            st.memcpy_dtoh(
                &self.rvel.slice(3 * at..3 * (at + na)),
                a.vel.as_flattened_mut(),
            )
            .map_err(drv("rank split"))?;
            st.synchronize().map_err(drv("rank split"))?;
        }
        Ok(())
    }

    /// The foreign solutes' returned velocities (`out_vel`) scattered into the caller's
    /// `s.vel`; then the caller's stream waits for every scatter.
    fn scatter_returned(
        &mut self,
        home: &CudaBackend,
        s: &DeviceSolutes,
        f: &Foreign,
    ) -> Result<()> {
        let nf = f.index.len();
        let st = self.stream.clone();
        if nf > 0 {
            if self.back_index.len() < nf || self.back_vel.len() < 3 * nf {
                let cap = nf.next_power_of_two();
                st.synchronize().map_err(drv("rank split"))?;
                self.back_vel = st.alloc_zeros(3 * cap).map_err(drv("rank split"))?;
                self.back_index = st.alloc_zeros(cap).map_err(drv("rank split"))?;
            }
            st.memcpy_htod(f.vel.as_flattened(), &mut self.back_vel.slice_mut(..3 * nf))
                .map_err(drv("rank split"))?;
            st.memcpy_htod(&f.index, &mut self.back_index.slice_mut(..nf))
                .map_err(drv("rank split"))?;
            self.scatter(home, &st, 0, nf, s.vel, Some(()))?;
            // the host vectors are refilled next step: the uploads must have read them
            st.synchronize().map_err(drv("rank split"))?;
        }
        self.scattered.record(&st).map_err(drv("event"))?;
        wait_on_raw(s.stream, &self.scattered).map_err(|e| caller_stream_error(e, self.ordinal))
    }

    /// `mpc_route_scatter` of `count` velocities from slot `first` of the staging (or of the
    /// returned buffers, with `returned`) into the caller's array at `out`.
    fn scatter(
        &mut self,
        home: &CudaBackend,
        st: &Arc<CudaStream>,
        first: usize,
        count: usize,
        out: u64,
        returned: Option<()>,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let (vel, index) = match returned {
            None => (&self.rvel, &self.rindex),
            Some(()) => (&self.back_vel, &self.back_index),
        };
        let vel_at = vel.device_ptr(st).0 + 24 * first as u64;
        let index_at = index.device_ptr(st).0 + 4 * first as u64;
        let total = count as u32;
        // SAFETY: mpc_route_scatter(const double *rvel, const u32 *rindex, u32 total, double
        // *svel): `count` velocities and caller indices from slot `first` (within the buffers'
        // lengths), each index < the caller's n (from the packing), into the caller's
        // velocities (3n doubles, checked); one thread per solute.
        unsafe {
            st.launch_builder(&home.dev.k.route_scatter)
                .arg(&vel_at)
                .arg(&index_at)
                .arg(&total)
                .arg(&out)
                .launch(LaunchConfig {
                    grid_dim: (count.div_ceil(256) as u32, 1, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                })
                .map_err(drv("rank split"))?;
        }
        Ok(())
    }
}

impl MultiCudaBackend {
    /// One step over MPI ranks with this rank's own device solutes `s`, split on its GPU (see
    /// the module). Collective over the ranks in the same order as the host path
    /// (`step_over_ranks`): the check agreed, the route, the step, the return.
    pub(super) fn step_device_split(
        &mut self,
        plan: &StepPlan,
        s: &DeviceSolutes,
    ) -> Result<StepReport> {
        let mut t = Instant::now();
        let mine = self.split_rank_solutes(plan, s);
        self.agree_on_input(mine)?;
        self.lap_rank_split(RANK_SPLIT_COUNTED, &mut t);
        // the fluid streams while the solutes are packed and the foreign ones cross the ranks
        if self.fluid_begun.is_none() {
            self.begin_pass_one(plan, s.n)?;
        }
        let mut split = self.rank_split.take().expect("made by split_rank_solutes");
        let done = self.step_split(plan, s, &mut split, None);
        self.rank_split = Some(split);
        done
    }

    /// The split on slab `home`'s GPU (made, or remade when the solutes moved to another GPU).
    fn split_at(&mut self, home: usize) -> Result<()> {
        let ordinal = self.slabs[home].dev.ordinal;
        if self
            .rank_split
            .as_ref()
            .is_some_and(|sp| sp.ordinal == ordinal)
        {
            return Ok(());
        }
        if let Some(old) = self.rank_split.take() {
            old.stream.synchronize().map_err(drv("rank split"))?;
        }
        let lo = self.bounds[self.first];
        let hi = self.bounds[self.first + self.slabs.len()];
        let split = RankSplit::new(&self.slabs[home], [0, lo, hi, self.phys.cells[1]])?;
        self.rank_split = Some(split);
        Ok(())
    }

    /// The pointers checked, then the split's count (which checks the values) on this rank's
    /// GPU.
    fn split_rank_solutes(&mut self, plan: &StepPlan, s: &DeviceSolutes) -> Result<()> {
        let home = self.solutes_home(s)?;
        let slab = &self.slabs[home];
        slab.solutes.check_pointers(&slab.dev, s)?;
        self.split_at(home)?;
        let split = self.rank_split.as_mut().expect("made by split_at");
        split.count(&self.slabs[home], plan, s)
    }

    /// The split's step on this rank's solutes `s` on its GPU: the caller's device arrays, or
    /// (with `host_out`, the caller's host velocities) its host arrays uploaded, whose
    /// velocities then go down into `host_out`.
    fn step_split(
        &mut self,
        plan: &StepPlan,
        s: &DeviceSolutes,
        split: &mut RankSplit,
        host_out: Option<&mut [[f64; 3]]>,
    ) -> Result<StepReport> {
        let mut t = Instant::now();
        let home = self.solutes_home(s)?;
        split.pack(&self.slabs[home], plan, s)?;
        let (phys, bounds, slab_rank) = (&self.phys, &self.bounds, &self.slab_rank);
        let layer = phys.cells[0] * phys.cells[2];
        let rank_of = |p: [f64; 3]| {
            let cell = phys.locate_solute(plan, p).cell;
            slab_rank[super::slab::owner(bounds, cell / layer)]
        };
        // the foreign solutes out of the split while they travel (refilled every step, so an
        // error that leaves them out loses nothing)
        let mut f = std::mem::take(&mut split.foreign);
        let mut foreign = SoluteBatch {
            pos: &f.pos,
            vel: &mut f.vel,
            mass: &f.mass,
        };
        let sent = (!foreign.is_empty()).then_some(&foreign);
        let mut held = route_solutes(&*self.transport, SoluteMode::PerRank, sent, rank_of)?;
        let mut arrived = held.batch();
        let merged = split.merge(arrived.as_ref())?;
        self.lap_rank_split(RANK_SPLIT_CROSSED, &mut t);
        // a rank with one slab on the split's GPU holds [own | arrived] in that slab's cells:
        // collided there as they lie, not routed a second time
        let one_slab_here = self.slabs.len() == 1 && self.slabs[0].dev.ordinal == split.ordinal;
        let report = if one_slab_here && !route_again() {
            let copy = [SlabSolutes {
                solutes: merged,
                subset: None,
            }];
            self.run_step(plan, StepSolutes::PerSlab(&copy))?
        } else {
            self.run_step(plan, StepSolutes::Device(merged))?
        };
        let mut t = Instant::now();
        split.scatter_own(&self.slabs[home], s, arrived.as_mut())?;
        let transport = &*self.transport;
        match host_out {
            // host arrays: the own velocities go down while the foreign ones come back
            Some(out) => {
                split.return_host_velocities(out, || {
                    let back = Some(&mut foreign);
                    return_solute_velocities(transport, SoluteMode::PerRank, &held, back)
                })?;
                // the download has landed: the foreign solutes' velocities over their slots
                for (&i, v) in f.index.iter().zip(foreign.vel.iter()) {
                    out[i as usize] = *v;
                }
            }
            None => {
                return_solute_velocities(
                    transport,
                    SoluteMode::PerRank,
                    &held,
                    Some(&mut foreign),
                )?;
                split.scatter_returned(&self.slabs[home], s, &f)?;
            }
        }
        split.foreign = f;
        self.lap_rank_split(RANK_SPLIT_RETURNED, &mut t);
        Ok(report)
    }

    /// Profiling: the host's time since `t` (not waiting for the GPUs: the fluid's pass 1
    /// runs beside these phases) into the solutes' `phase`.
    fn lap_rank_split(&mut self, phase: usize, t: &mut Instant) {
        if self.profiling {
            self.solute_phase_seconds[phase] += t.elapsed().as_secs_f64();
            *t = Instant::now();
        }
    }
}
