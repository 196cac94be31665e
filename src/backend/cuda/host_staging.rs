//! Host solutes' transfers on one GPU, passes of [`SoluteCoupling`]: the coupled step is split
//! in two (`step.rs`): `begin_coupled` queues pass 1 and sends the solutes up on an upload
//! stream (pinned staging filled on the host pool) while the fluid streams, or, page-locked
//! arrays, sends them up by DMA and tests them on the GPU before pass 1; `finish_coupled`
//! bins and collides the solutes as soon as they are up, then sends their velocities down on
//! a download stream while the fluid collides. The streams are ordered with explicit events
//! and synchronisations (cudarc's per-buffer event tracking is off).

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};

use super::device::{drv, CudaDevice};
use super::device_solutes::{page_locked, values_good};
use super::pieces;
use super::solute_coupling::{CoupledIo, SoluteCoupling};
use crate::backend::DeviceSolutes;
use crate::error::{MpcError, Result};

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

impl SoluteCoupling {
    /// Streams and exact-size pinned buffers for `ns` solutes.
    pub(super) fn ensure_host_io(&mut self, ctx: &Arc<CudaContext>, ns: usize) -> Result<()> {
        if self.host_io.as_ref().is_some_and(|c| c.n == ns) {
            return Ok(());
        }
        let (upload, download) = match self.host_io.take() {
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
        let first_bad = upload.alloc_zeros::<u32>(4).map_err(drv("solute check"))?;
        self.host_io = Some(CoupledIo {
            upload,
            download,
            n: ns,
            pos: pin(3 * ns, false)?,
            vel: pin(3 * ns, false)?,
            mass: pin(ns, false)?,
            out: pin(3 * ns, true)?,
            arrived: Vec::new(),
            first_bad,
        });
        Ok(())
    }

    /// `main` waits for the solutes' upload that `begin_coupled_step` queued.
    pub(super) fn main_waits_for_upload(&mut self, main: &Arc<CudaStream>) -> Result<()> {
        let (io, _) = self.staged()?;
        main.join(&io.upload).map_err(drv("event"))
    }

    /// The download stream waits for what `main` has queued so far (the solutes' collision),
    /// without blocking the host.
    pub(super) fn download_waits_for(&mut self, main: &Arc<CudaStream>) -> Result<()> {
        let done = main.record_event(None).map_err(drv("event"))?;
        let (io, _) = self.staged()?;
        io.download.wait(&done).map_err(drv("event"))
    }

    /// Host copies into the pinned staging (bounded host pool) and asynchronous copies up on
    /// the upload stream, piece by piece (`pieces.rs`); an array in page-locked memory goes up
    /// straight by DMA. The values were tested before.
    pub(super) fn upload_pinned(
        &mut self,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<()> {
        let ns = pos.len();
        let (io, sb) = self.staged()?;
        // The pinned buffers' own events are not recorded while event tracking is off:
        // wait for the previous upload explicitly before refilling them.
        io.upload.synchronize().map_err(drv("upload stream"))?;
        let up = io.upload.clone();
        let ptr = |b: &CudaSlice<f64>| b.device_ptr(&up).0;
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

    /// Page-locked host arrays (all three: [`tested_on_the_gpu`]) up by DMA straight from the
    /// caller's memory, then their values tested by the check kernel before this returns and
    /// before the fluid moves; the host waits for it, so the caller may change its arrays once
    /// this returns. A bad value's error names it as the host check does; only mpcbox's own
    /// buffers were written. One read of the caller's arrays instead of a host check and a copy.
    pub(super) fn upload_page_locked(
        &mut self,
        dev: &CudaDevice,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
        mass_cap: f64,
    ) -> Result<()> {
        let ns = pos.len();
        let (io, sb) = self.staged()?;
        let up = io.upload.clone();
        let ptr = |b: &CudaSlice<f64>| b.device_ptr(&up).0;
        let copies = [
            (pos.as_flattened(), ptr(&sb.pos)),
            (vel.as_flattened(), ptr(&sb.vel)),
            (mass, ptr(&sb.mass)),
        ];
        let queued = copies.into_iter().try_for_each(|(src, dst)| {
            // SAFETY: the caller's page-locked memory (borrowed for this call, which waits for
            // the copies below, or on an error) into mpcbox's solute buffer of capacity >= ns
            // solutes, read next by the check on this stream and by the binning, which waits
            // for this stream.
            unsafe { cudarc::driver::result::memcpy_htod_async(dst, src, up.cu_stream()) }
                .map_err(drv("solute upload"))
        });
        let tested = queued.and_then(|()| self.uploaded_values_good(dev, ns, mass_cap));
        verdict_on_upload(tested, &up, pos, vel, mass, mass_cap)
    }

    /// The check kernel over the `ns` solutes just queued up on the upload stream (after the
    /// copies on that stream): true when every value is good. The host waits for it, and so
    /// for the copies out of the caller's memory.
    fn uploaded_values_good(&mut self, dev: &CudaDevice, ns: usize, mass_cap: f64) -> Result<bool> {
        let (io, sb) = self.staged()?;
        let up = io.upload.clone();
        let uploaded = DeviceSolutes {
            pos: sb.pos.device_ptr(&up).0,
            vel: sb.vel.device_ptr(&up).0,
            mass: sb.mass.device_ptr(&up).0,
            n: ns,
            stream: up.cu_stream() as u64,
        };
        // SAFETY: mpcbox's solute buffers (capacity >= ns on this GPU), filled by the copies
        // queued before on this stream and read next by the binning, which waits for it.
        unsafe { values_good(&up, dev, &uploaded, mass_cap, &mut io.first_bad) }
    }

    /// Copies straight from the caller's arrays on the upload stream; each returns when done,
    /// while the fluid kernels run on.
    pub(super) fn upload_pageable(
        &mut self,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<()> {
        let ns = pos.len();
        let (io, sb) = self.staged()?;
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

    /// The collided solute velocities into `out` (3 per solute) on the download stream, which
    /// already waits for the solute collision.
    pub(super) fn download_velocities_into(&mut self, out: &mut [f64]) -> Result<()> {
        let ns3 = out.len();
        let (io, sb) = self.staged()?;
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

/// Whether a coupled step sends these host arrays up straight by DMA and tests them on the GPU
/// before the fluid moves (`upload_page_locked`): all three page-locked, and the pinned way
/// ([`SoluteTransfer::Pinned`]). Other arrays are checked on the host first.
pub(super) fn tested_on_the_gpu(pos: &[[f64; 3]], vel: &[[f64; 3]], mass: &[f64]) -> bool {
    SoluteTransfer::from_env() == SoluteTransfer::Pinned
        && page_locked(pos)
        && page_locked(vel)
        && page_locked(mass)
}

/// What the GPU's test of host arrays just copied up by DMA on `stream` (`tested`: every value
/// good, or an error of the copies or the test) means for the caller: nothing, a bad value named
/// as the host check names it, or the error once the copies no longer read the caller's arrays.
pub(super) fn verdict_on_upload(
    tested: Result<bool>,
    stream: &CudaStream,
    pos: &[[f64; 3]],
    vel: &[[f64; 3]],
    mass: &[f64],
    mass_cap: f64,
) -> Result<()> {
    match tested {
        Ok(true) => Ok(()),
        Ok(false) => name_bad_host_value(pos, vel, mass, mass_cap),
        Err(e) => {
            // the copies may still read the caller's arrays: wait for them before they go
            // back to the caller (an error of the wait adds nothing to this one)
            let _ = stream.synchronize();
            Err(e)
        }
    }
}

/// The error for host arrays whose test found a bad value, naming the first as the host check
/// does (`check_host_solutes`, then the masses against the cells sums' cap).
fn name_bad_host_value(
    pos: &[[f64; 3]],
    vel: &[[f64; 3]],
    mass: &[f64],
    mass_cap: f64,
) -> Result<()> {
    crate::backend::check_host_solutes(pos, vel, mass, 0..pos.len())?;
    crate::backend::check_solute_masses_fit(mass, mass_cap.is_finite().then_some(mass_cap))?;
    Err(MpcError::Device(
        "a solute value failed the upload's test and no check (please report it)".into(),
    ))
}
