//! A rank's own host solutes through the split: uploaded to its GPU beside pass 1 (their values
//! checked on the host and agreed over the ranks before), split there as device solutes are,
//! and their velocities copied back into the caller's array. Page-locked arrays go up by DMA
//! before the ranks agree and are tested on the GPU instead of on the host
//! (`take_rank_host_solutes`): one read of the caller's memory, by the DMA engine.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, DevicePtr, PinnedHostSlice};

use super::RankSplit;
use crate::backend::cuda::device::drv;
use crate::backend::cuda::multi::MultiCudaBackend;
use crate::backend::cuda::CudaBackend;
use crate::backend::{DeviceSolutes, SoluteBatch, StepReport};
use crate::error::Result;
use crate::physics::StepPlan;

/// A rank's own host solutes on its GPU: device arrays the split reads and the collision's
/// velocities land in, and the pinned staging they go up and down through (unused for
/// page-locked caller arrays, which go by DMA straight).
pub(super) struct HostInput {
    capacity: usize,
    pos: CudaSlice<f64>,
    vel: CudaSlice<f64>,
    mass: CudaSlice<f64>,
    pos_up: PinnedHostSlice<f64>,
    vel_up: PinnedHostSlice<f64>,
    mass_up: PinnedHostSlice<f64>,
    vel_down: PinnedHostSlice<f64>,
    arrived: Vec<CudaEvent>,
}

impl HostInput {
    fn new(stream: &Arc<CudaStream>, n: usize) -> Result<HostInput> {
        let capacity = n.next_power_of_two().max(1024);
        let ctx = stream.context();
        let dev = |len: usize| stream.alloc_zeros::<f64>(len).map_err(drv("rank split"));
        let pin = |len: usize, host_reads: bool| {
            let flags = if host_reads {
                0
            } else {
                crate::backend::cuda::pieces::up_staging_flags()
            };
            // SAFETY: pinned host memory, uninitialised: filled on the host before each copy
            // up, or read only after the copy down into it has completed (`pieces::take`).
            unsafe { ctx.alloc_pinned_with_flags::<f64>(len, flags) }.map_err(drv("pinned"))
        };
        Ok(HostInput {
            capacity,
            pos: dev(3 * capacity)?,
            vel: dev(3 * capacity)?,
            mass: dev(capacity)?,
            pos_up: pin(3 * capacity, false)?,
            vel_up: pin(3 * capacity, false)?,
            mass_up: pin(capacity, false)?,
            vel_down: pin(3 * capacity, true)?,
            arrived: Vec::new(),
        })
    }

    /// The first `n` uploaded solutes as device solutes on `stream`.
    fn device_solutes(&self, stream: &Arc<CudaStream>, n: usize) -> DeviceSolutes {
        DeviceSolutes {
            pos: self.pos.device_ptr(stream).0,
            vel: self.vel.device_ptr(stream).0,
            mass: self.mass.device_ptr(stream).0,
            n,
            stream: stream.cu_stream() as u64,
        }
    }
}

impl RankSplit {
    /// This rank's host solutes up to its GPU on the split's stream (their values checked on
    /// the host and agreed over the ranks, or tested next on the GPU): the device solutes the
    /// split takes.
    fn upload_host(
        &mut self,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<DeviceSolutes> {
        use crate::backend::cuda::pieces::{self, Bound, Up};
        let n = pos.len();
        let st = self.stream.clone();
        // the previous step's copies out of the staging have passed (the host waited for the
        // velocities at its end); new buffers only when the count outgrows them
        if self.host.as_ref().is_none_or(|h| h.capacity < n) {
            st.synchronize().map_err(drv("rank split"))?;
            self.host = Some(HostInput::new(&st, n)?);
        }
        let h = self.host.as_mut().expect("made above");
        let (pos_at, vel_at, mass_at) = (
            h.pos.device_ptr(&st).0,
            h.vel.device_ptr(&st).0,
            h.mass.device_ptr(&st).0,
        );
        let mut arrays = [
            Up {
                src: pos.as_flattened(),
                staging: &mut h.pos_up,
                dst: pos_at,
                width: 3,
                bound: Bound::Any,
            },
            Up {
                src: vel.as_flattened(),
                staging: &mut h.vel_up,
                dst: vel_at,
                width: 3,
                bound: Bound::Any,
            },
            Up {
                src: mass,
                staging: &mut h.mass_up,
                dst: mass_at,
                width: 1,
                bound: Bound::Any,
            },
        ];
        // SAFETY: the device arrays hold capacity >= n solutes, read next by the split's count
        // (or test) on this stream; the staging's previous copies have passed (above);
        // page-locked caller arrays are read until the stream passes the copies, and the
        // host waits for the stream before the caller gets them back (the test's verdict, or
        // the end of the step).
        unsafe { pieces::upload(&st, &mut arrays, n) }?;
        Ok(h.device_solutes(&st, n))
    }

    /// This rank's page-locked host solutes up to its GPU by DMA, then every value tested there
    /// (finite, within the coordinate limit, masses > 0 and within `mass_cap`); the host waits
    /// for the verdict, so the caller's memory is no longer read when this returns. A bad
    /// value is named as the host check names it; only the split's buffers were written.
    fn upload_tested(
        &mut self,
        home: &CudaBackend,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
        mass_cap: f64,
    ) -> Result<()> {
        use crate::backend::cuda::device_solutes::values_good;
        home.dev.ctx.bind_to_thread().map_err(drv("bind"))?;
        let uploaded = self.upload_host(pos, vel, mass);
        let st = self.stream.clone();
        // SAFETY: the split's own device arrays of capacity >= n, filled by the copies queued
        // before on this stream, read next by the step's count on this stream.
        let tested = uploaded.and_then(|d| unsafe {
            values_good(&st, &home.dev, &d, mass_cap, &mut self.first_bad)
        });
        crate::backend::cuda::host_staging::verdict_on_upload(tested, &st, pos, vel, mass, mass_cap)
    }

    /// Queue the collided velocities of the uploaded host solutes (after every scatter queued
    /// before on the split's stream) down towards `out` (3 per solute): by DMA straight into
    /// it when it is page-locked, else into the pinned staging piece by piece. The host goes
    /// on (the foreign solutes' velocities cross the ranks meanwhile);
    /// [`RankSplit::finish_download`] waits and fills `out`.
    ///
    /// # Safety
    /// `out` must be neither read nor written, nor its memory freed, until
    /// [`RankSplit::finish_download`] has returned for it: a page-locked `out` is written by
    /// the copy engine until then.
    unsafe fn queue_download(&mut self, out: &mut [[f64; 3]]) -> Result<DownloadQueued> {
        use crate::backend::cuda::pieces;
        let st = self.stream.clone();
        let h = self.host.as_mut().expect("uploaded this step");
        let src = h.vel.device_ptr(&st).0;
        let out = out.as_flattened_mut();
        if crate::backend::cuda::device_solutes::page_locked(out) {
            // SAFETY: the uploaded solutes' velocities (3n doubles, written by the scatters
            // queued before on this stream) straight into the caller's page-locked array,
            // which nothing touches until `finish_download` has waited for this stream
            // (this function's contract).
            unsafe { cudarc::driver::result::memcpy_dtoh_async(out, src, st.cu_stream()) }
                .map_err(drv("solute download"))?;
            return Ok(DownloadQueued::Straight);
        }
        let n = out.len() / 3;
        // SAFETY: as above, into the pinned staging, read only through `take`, which waits
        // for each piece's event.
        unsafe { pieces::download(&st, src, &mut h.vel_down, 3, n, &mut h.arrived)? };
        Ok(DownloadQueued::Staged)
    }

    /// The download [`RankSplit::queue_download`] queued for `out`, waited for (and for
    /// ordinary memory copied out of the staging piece by piece as it arrives).
    fn finish_download(&self, out: &mut [[f64; 3]], queued: DownloadQueued) -> Result<()> {
        let h = self.host.as_ref().expect("uploaded this step");
        match queued {
            DownloadQueued::Straight => self.stream.synchronize().map_err(drv("solute download")),
            DownloadQueued::Staged => crate::backend::cuda::pieces::take(
                &h.vel_down,
                3,
                out.as_flattened_mut(),
                &h.arrived,
            ),
        }
    }

    /// After the step: the velocities of this rank's own host solutes on their way down into
    /// `out` while `back` runs (the foreign ones' return across the ranks); the caller then
    /// writes the foreign solutes' velocities over their slots. The copy down is waited for
    /// even when `back` fails, so that no copy writes into the caller's memory after this
    /// returns.
    pub(super) fn return_host_velocities(
        &mut self,
        out: &mut [[f64; 3]],
        back: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        // SAFETY: `out` is not touched between the queue and `finish_download`, which runs
        // on every path below before this function returns.
        let queued = unsafe { self.queue_download(out) };
        let returned = back();
        match queued {
            Ok(q) => self.finish_download(out, q)?,
            Err(e) => {
                self.stream.synchronize().map_err(drv("solute download"))?;
                return Err(e);
            }
        }
        returned
    }
}

/// How [`RankSplit::queue_download`] sends the velocities down.
enum DownloadQueued {
    /// By DMA straight into the caller's page-locked array.
    Straight,
    /// Into the pinned staging, piece by piece.
    Staged,
}

impl MultiCudaBackend {
    /// Over ranks that each pass their own solutes (split on their GPUs): page-locked host
    /// arrays up to this rank's first GPU by DMA and tested there, before the ranks agree on
    /// the input (`Backend::take_host_solutes_tested`); false for other arrays, which the
    /// host checks. Nothing of the fluid changes.
    pub(in crate::backend::cuda::multi) fn take_rank_host_solutes(
        &mut self,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<bool> {
        self.rank_host_taken.set(None);
        let split_here = self.transport.ranks() > 1 && self.solutes_per_rank && !super::off();
        if !split_here
            || pos.is_empty()
            || !crate::backend::cuda::host_staging::tested_on_the_gpu(pos, vel, mass)
        {
            return Ok(false);
        }
        self.split_at(0)?;
        let cap = self
            .phys
            .sums
            .as_ref()
            .map_or(f64::INFINITY, |s| s.max_solute_mass);
        let split = self.rank_split.as_mut().expect("made by split_at");
        split.upload_tested(&self.slabs[0], pos, vel, mass, cap)?;
        self.rank_host_taken
            .set(Some((pos.as_ptr() as usize, pos.len())));
        Ok(true)
    }

    /// One step over MPI ranks with this rank's own host solutes `b` (checked on the host, or
    /// taken and tested on its GPU, and agreed over the ranks before): uploaded to its first
    /// GPU and split there as device solutes are, the velocities copied back into `b`.
    /// Collective in the same order as `step_over_ranks`: the route, the step, the return.
    pub(in crate::backend::cuda::multi) fn step_host_split(
        &mut self,
        plan: &StepPlan,
        b: &mut SoluteBatch<'_>,
    ) -> Result<StepReport> {
        self.split_at(0)?;
        let mut split = self.rank_split.take().expect("made by split_at");
        let done = (|| {
            // the values were checked (on the host, or on the GPU once taken) and agreed: the
            // fluid streams at once, while the solutes go up (unless taken) and are split
            if self.fluid_begun.is_none() {
                self.begin_pass_one(plan, b.len())?;
            }
            // the arrays taken and tested before the agreement are on the GPU already
            let taken = self.rank_host_taken.take() == Some((b.pos.as_ptr() as usize, b.len()));
            let d = match (taken, split.host.as_ref()) {
                (true, Some(h)) => h.device_solutes(&split.stream, b.len()),
                _ => split.upload_host(b.pos, b.vel, b.mass)?,
            };
            split.count(&self.slabs[0], plan, &d)?;
            self.step_split(plan, &d, &mut split, Some(&mut *b.vel))
        })();
        self.rank_split = Some(split);
        done
    }
}
