//! The coupled step with host solutes on one GPU, split in two: `begin_coupled` queues pass 1
//! and sends the solutes up on an upload stream (pinned staging filled on the host pool) while
//! the fluid streams; `finish_coupled` bins and collides the solutes as soon as they are up,
//! then sends their velocities down on a download stream while the fluid collides. The
//! streams are ordered with explicit events and synchronisations (cudarc's per-buffer event
//! tracking is off).

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, PinnedHostSlice};

use super::device::drv;
use super::pieces;
use super::CudaBackend;
use crate::backend::{SoluteBatch, StepReport};
use crate::error::{MpcError, Result};
use crate::physics::StepPlan;

/// The split coupled step's transfer machinery: its own non-blocking streams, so the solute
/// upload overlaps the fluid streaming and the download overlaps the fluid collision, and
/// pinned host buffers of exactly the solute count (a copy from pageable memory would block).
pub(super) struct CoupledIo {
    upload: Arc<CudaStream>,
    download: Arc<CudaStream>,
    n: usize,
    pub(super) pos: PinnedHostSlice<f64>,
    pub(super) vel: PinnedHostSlice<f64>,
    pub(super) mass: PinnedHostSlice<f64>,
    pub(super) out: PinnedHostSlice<f64>,
    /// One event per piece of the velocities coming down (`pieces::download`).
    arrived: Vec<cudarc::driver::CudaEvent>,
}

/// How solutes cross PCIe in a coupled step (`MPCBOX_CUDA_SOLUTE_IO=pinned|pageable`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoluteTransfer {
    /// Host copy (all cores) into pinned staging, then asynchronous DMA on the upload stream.
    Pinned,
    /// Direct copies from the caller's (pageable) arrays on the upload/download streams; the
    /// host waits for each, while the fluid kernels run on the main stream.
    Pageable,
}

impl SoluteTransfer {
    pub fn from_env() -> SoluteTransfer {
        // Pinned is the default: it was faster in `mpcbox-bench coupling` (pageable copies are
        // staged by the driver through its own pinned buffer).
        if crate::knobs::knobs().is("MPCBOX_CUDA_SOLUTE_IO", "pageable") {
            SoluteTransfer::Pageable
        } else {
            SoluteTransfer::Pinned
        }
    }
}

impl CudaBackend {
    /// Streams and exact-size pinned buffers for `ns` solutes.
    pub(super) fn ensure_coupled_io(&mut self, ns: usize) -> Result<()> {
        if self.solutes.host_io.as_ref().is_some_and(|c| c.n == ns) {
            return Ok(());
        }
        let ctx = self.dev.ctx.clone();
        let (upload, download) = match self.solutes.host_io.take() {
            Some(c) => (c.upload, c.download),
            None => (
                ctx.new_stream().map_err(drv("stream"))?,
                ctx.new_stream().map_err(drv("stream"))?,
            ),
        };
        let pin = |len: usize, host_reads: bool| {
            // write-combined pages are fast to fill and to send, slow for the host to read
            let flags = if host_reads {
                0
            } else {
                pieces::up_staging_flags()
            };
            // SAFETY: pinned host memory, uninitialised: each buffer is filled on the host
            // (inputs) or by a device-to-host copy that the host waits for (`out`) before it
            // is read.
            unsafe { ctx.alloc_pinned_with_flags::<f64>(len.max(1), flags) }
                .map_err(drv("pinned host memory"))
        };
        self.solutes.host_io = Some(CoupledIo {
            upload,
            download,
            n: ns,
            pos: pin(3 * ns, false)?,
            vel: pin(3 * ns, false)?,
            mass: pin(ns, false)?,
            out: pin(3 * ns, true)?,
            arrived: Vec::new(),
        });
        Ok(())
    }

    /// [`crate::backend::Backend::begin_coupled`]: send the solutes up on the upload stream
    /// while the fluid streams on the main stream; see [`SoluteTransfer`] for the two ways.
    pub(super) fn begin_coupled_step(
        &mut self,
        plan: &StepPlan,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<()> {
        if self.solutes.in_flight.is_some() {
            return Err(MpcError::Device(
                "begin_coupled twice without finish_coupled".into(),
            ));
        }
        let ns = pos.len();
        let p = self.params(plan, ns);
        if ns > 0 {
            self.ensure_solute_capacity(ns)?;
            self.ensure_coupled_io(ns)?;
        }
        // fluid kernels first (asynchronous): the GPU streams the fluid while the host feeds
        // the copy engine. The previous step's solute kernels are finished (finish_coupled read
        // the report), so the device buffers may be overwritten.
        self.fluid_pass(&p)?;
        if ns > 0 {
            match SoluteTransfer::from_env() {
                SoluteTransfer::Pinned => self.upload_solutes_pinned(pos, vel, mass)?,
                SoluteTransfer::Pageable => self.upload_solutes_pageable(pos, vel, mass)?,
            }
        }
        self.solutes.in_flight = Some((p, ns));
        Ok(())
    }

    /// Host copies into the pinned staging (bounded host pool) and asynchronous copies up on
    /// the upload stream, piece by piece (`pieces.rs`).
    fn upload_solutes_pinned(
        &mut self,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<()> {
        let ns = pos.len();
        let (io, sb) = self.solutes.staged()?;
        // The pinned buffers' own events are not recorded while event tracking is off:
        // wait for the previous upload explicitly before refilling them.
        io.upload.synchronize().map_err(drv("upload stream"))?;
        let up = io.upload.clone();
        let ptr = |b: &cudarc::driver::CudaSlice<f64>| b.device_ptr(&up).0;
        let mut arrays = [
            pieces::Up {
                src: pos.as_flattened(),
                staging: &mut io.pos,
                dst: ptr(&sb.pos),
                width: 3,
                bound: pieces::Bound::Any,
            },
            pieces::Up {
                src: vel.as_flattened(),
                staging: &mut io.vel,
                dst: ptr(&sb.vel),
                width: 3,
                bound: pieces::Bound::Any,
            },
            pieces::Up {
                src: mass,
                staging: &mut io.mass,
                dst: ptr(&sb.mass),
                width: 1,
                bound: pieces::Bound::Any,
            },
        ];
        // SAFETY: the solute buffers hold capacity >= ns solutes and are read next by the
        // binning, which waits for the upload stream (finish_coupled_step); the staging's
        // previous copies have passed (synchronised above). The values were checked before.
        let (_, straight) = unsafe { pieces::upload(&up, &mut arrays, ns) }?;
        if straight {
            // the caller may change its arrays once begin_coupled returns (the split form):
            // the copies out of its page-locked memory must be done by then (the fluid's pass
            // runs on meanwhile)
            up.synchronize().map_err(drv("upload stream"))?;
        }
        Ok(())
    }

    /// Copies straight from the caller's arrays on the upload stream; each returns when done,
    /// while the fluid kernels run on.
    fn upload_solutes_pageable(
        &mut self,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<()> {
        let ns = pos.len();
        let (io, sb) = self.solutes.staged()?;
        io.upload
            .memcpy_htod(pos.as_flattened(), &mut sb.pos.slice_mut(..3 * ns))
            .map_err(drv("solute upload"))?;
        io.upload
            .memcpy_htod(vel.as_flattened(), &mut sb.vel.slice_mut(..3 * ns))
            .map_err(drv("solute upload"))?;
        io.upload
            .memcpy_htod(mass, &mut sb.mass.slice_mut(..ns))
            .map_err(drv("solute upload"))?;
        Ok(())
    }

    /// [`crate::backend::Backend::finish_coupled`]: bin and collide the solutes as soon as
    /// they are up; their velocities go down on the download stream while the fluid collides
    /// on the main stream.
    pub(super) fn finish_coupled_step(
        &mut self,
        plan: &StepPlan,
        solutes: &mut SoluteBatch<'_>,
    ) -> Result<StepReport> {
        let Some((p, ns)) = self.solutes.in_flight.take() else {
            return Err(MpcError::Device(
                "finish_coupled without begin_coupled".into(),
            ));
        };
        if ns != solutes.vel.len() {
            return Err(MpcError::Device(format!(
                "finish_coupled for {} solutes, begun with {ns}",
                solutes.vel.len()
            )));
        }
        if ns > 0 {
            let io = self
                .solutes
                .host_io
                .as_ref()
                .expect("made in begin_coupled");
            self.dev.stream.join(&io.upload).map_err(drv("event"))?;
        }
        self.solute_bin(&p, ns)?;
        self.cell_pass(&p)?;
        if ns == 0 {
            self.fluid_collide(plan, &p)?;
            self.reorder_if(plan)?;
            return self.read_report();
        }
        self.solute_collide(&p, ns)?;
        let solutes_done = self.dev.stream.record_event(None).map_err(drv("event"))?;
        self.fluid_collide(plan, &p)?;
        self.reorder_if(plan)?;
        let io = self
            .solutes
            .host_io
            .as_ref()
            .expect("made in begin_coupled");
        io.download.wait(&solutes_done).map_err(drv("event"))?;
        self.download_solute_velocities_into(solutes.vel.as_flattened_mut())?;
        self.read_report()
    }

    /// The collided solute velocities into `out` (3 per solute) on the download stream, which
    /// already waits for the solute collision.
    fn download_solute_velocities_into(&mut self, out: &mut [f64]) -> Result<()> {
        let ns3 = out.len();
        let (io, sb) = self.solutes.staged()?;
        match SoluteTransfer::from_env() {
            SoluteTransfer::Pinned if super::device_solutes::page_locked(out) => {
                // straight into the caller's page-locked array by DMA, no staging
                let down = io.download.clone();
                let src = sb.vel.device_ptr(&down).0;
                // SAFETY: ns velocities of the solute buffers, written by the collision the
                // download stream waits for, into the caller's array of as many, which the
                // host does not return to the caller before the stream has passed the copy.
                unsafe { cudarc::driver::result::memcpy_dtoh_async(out, src, down.cu_stream()) }
                    .map_err(drv("solute download"))?;
                down.synchronize().map_err(drv("solute download"))?;
            }
            SoluteTransfer::Pinned => {
                let down = io.download.clone();
                let src = sb.vel.device_ptr(&down).0;
                // SAFETY: ns velocities of the solute buffers, written by the collision the
                // download stream waits for; the staging is read only through `take`, which
                // waits for each piece's event.
                unsafe { pieces::download(&down, src, &mut io.out, 3, ns3 / 3, &mut io.arrived)? };
                pieces::take(&io.out, 3, out, &io.arrived)?;
            }
            SoluteTransfer::Pageable => {
                // returns when the copy is done, while the fluid collision runs on
                io.download
                    .memcpy_dtoh(&sb.vel.slice(..ns3), out)
                    .map_err(drv("solute download"))?;
            }
        }
        Ok(())
    }
}
