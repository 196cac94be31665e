//! Host solutes' way to and from the routing: pinned staging filled on the host pool, one
//! asynchronous copy per array to the home GPU on the routing stream, and the velocities back.

use cudarc::driver::{CudaSlice, PinnedHostSlice};

use super::{addr, alloc, SoluteRoutes};
use crate::backend::cuda::device::drv;
use crate::backend::cuda::CudaBackend;
use crate::backend::DeviceSolutes;
use crate::error::{MpcError, Result};

/// Host arrays' way to the home GPU: pinned staging (write-combined going up, cached coming
/// down) and their device copies, the arrays the routing then reads.
pub(super) struct HostArrays {
    pub(super) capacity: usize,
    pub(super) pos_up: PinnedHostSlice<f64>,
    pub(super) vel_up: PinnedHostSlice<f64>,
    pub(super) mass_up: PinnedHostSlice<f64>,
    pub(super) vel_down: PinnedHostSlice<f64>,
    pub(super) pos: CudaSlice<f64>,
    pub(super) vel: CudaSlice<f64>,
    pub(super) mass: CudaSlice<f64>,
    /// One event per piece coming down (`queue_host_download`).
    pub(super) arrived: Vec<cudarc::driver::CudaEvent>,
}

/// Solutes per piece of the host pipeline: the host checks and stages one piece while the
/// previous one crosses PCIe (and, coming down, copies one out while the next arrives).
const PIECE: usize = 1 << 19;

/// The pieces of `n` solutes.
fn pieces(n: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..n).step_by(PIECE).map(move |a| a..(a + PIECE).min(n))
}

/// Piece `r` of pinned staging.
fn piece(b: &PinnedHostSlice<f64>, r: std::ops::Range<usize>) -> Result<&[f64]> {
    Ok(&b.as_slice().map_err(drv("pinned"))?[r])
}

impl SoluteRoutes {
    /// Host arrays up to the home GPU on the routing stream, piece by piece: each piece's
    /// values checked (with `check`; a bad one is an error before anything but these staging
    /// buffers changed) and copied into pinned staging on the host pool, then queued up while
    /// the host goes on with the next. Returns the device arrays the routing then reads.
    pub(in crate::backend::cuda::multi) fn upload_host(
        &mut self,
        home: &CudaBackend,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
        check: bool,
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
                arrived: Vec::new(),
            });
            self.stream.synchronize().map_err(drv("solute routing"))?;
        }
        let s = self.stream.clone();
        let h = self.host.as_mut().expect("made above");
        let (pos_dev, vel_dev, mass_dev) = (addr(&h.pos, &s), addr(&h.vel, &s), addr(&h.mass, &s));
        for r in pieces(n) {
            if check {
                if let Err(e) = crate::backend::check_host_solutes(pos, vel, mass, r.clone()) {
                    // the pieces queued so far read the staging: let them pass
                    s.synchronize().map_err(drv("solute upload"))?;
                    return Err(e);
                }
            }
            // the previous step's copies out of the staging have passed: the host waited for
            // its velocities (or for the failed upload above)
            let (p3, m1) = (3 * r.start..3 * r.end, r.clone());
            let pos_up = &mut h.pos_up.as_mut_slice().map_err(drv("pinned"))?[p3.clone()];
            crate::host::copy(pos_up, &pos.as_flattened()[p3.clone()]);
            let vel_up = &mut h.vel_up.as_mut_slice().map_err(drv("pinned"))?[p3.clone()];
            crate::host::copy(vel_up, &vel.as_flattened()[p3.clone()]);
            let mass_up = &mut h.mass_up.as_mut_slice().map_err(drv("pinned"))?[m1.clone()];
            crate::host::copy(mass_up, &mass[m1.clone()]);
            for (src, dst) in [
                (piece(&h.pos_up, p3.clone())?, pos_dev + 8 * p3.start as u64),
                (piece(&h.vel_up, p3.clone())?, vel_dev + 8 * p3.start as u64),
                (
                    piece(&h.mass_up, m1.clone())?,
                    mass_dev + 8 * m1.start as u64,
                ),
            ] {
                // SAFETY: one piece of pinned staging (filled above, refilled only after the
                // host waited for this step's velocities) into the same piece of device
                // buffers of capacity >= n, on the routing stream that then reads them.
                unsafe {
                    cudarc::driver::result::memcpy_htod_async(dst, src, s.cu_stream())
                        .map_err(drv("solute upload"))?;
                }
            }
        }
        Ok(DeviceSolutes {
            pos: pos_dev,
            vel: vel_dev,
            mass: mass_dev,
            n,
            stream: s.cu_stream() as u64,
        })
    }

    /// Host arrays: their `n` velocities down to the pinned staging on the routing stream,
    /// piece by piece with an event after each, queued as soon as the return has written them
    /// (the copies run while the fluid collides); [`SoluteRoutes::download_host`] takes them.
    pub(super) fn queue_host_download(&mut self, n: usize) -> Result<()> {
        let s = self.stream.clone();
        let h = self
            .host
            .as_mut()
            .ok_or_else(|| MpcError::Device("host solutes were not uploaded".into()))?;
        let vel_dev = addr(&h.vel, &s);
        for (c, r) in pieces(n).enumerate() {
            let p3 = 3 * r.start..3 * r.end;
            let down = &mut h.vel_down.as_mut_slice().map_err(drv("pinned"))?[p3.clone()];
            // SAFETY: one piece of the device velocities (written by the return queued before
            // on this stream) into the same piece of the pinned staging, which the host reads
            // only after this piece's event.
            unsafe {
                cudarc::driver::result::memcpy_dtoh_async(
                    down,
                    vel_dev + 8 * p3.start as u64,
                    s.cu_stream(),
                )
                .map_err(drv("solute download"))?;
            }
            if h.arrived.len() <= c {
                h.arrived
                    .push(s.context().new_event(None).map_err(drv("event"))?);
            }
            h.arrived[c].record(&s).map_err(drv("event"))?;
        }
        Ok(())
    }

    /// Host arrays: the velocities queued down by the return, copied into `out` piece by
    /// piece as each arrives.
    pub(in crate::backend::cuda::multi) fn download_host(
        &mut self,
        out: &mut [[f64; 3]],
    ) -> Result<()> {
        let n = out.len();
        let h = self
            .host
            .as_ref()
            .ok_or_else(|| MpcError::Device("host solutes were not uploaded".into()))?;
        let staged = h.vel_down.as_slice().map_err(drv("pinned"))?;
        for (c, r) in pieces(n).enumerate() {
            h.arrived[c].synchronize().map_err(drv("solute download"))?;
            let p3 = 3 * r.start..3 * r.end;
            crate::host::copy(&mut out.as_flattened_mut()[p3.clone()], &staged[p3]);
        }
        Ok(())
    }
}
