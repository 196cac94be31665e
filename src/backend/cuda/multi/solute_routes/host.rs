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
}

impl SoluteRoutes {
    /// Host arrays up to the home GPU (on the routing stream): the device arrays the routing
    /// then reads, as [`DeviceSolutes`].
    pub(in crate::backend::cuda::multi) fn upload_host(
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

    /// Host arrays: their `n` velocities down to the pinned staging on the routing stream,
    /// queued as soon as the return has written them (the copy runs while the fluid
    /// collides); [`SoluteRoutes::download_host`] waits for it.
    pub(super) fn queue_host_download(&mut self, n: usize) -> Result<()> {
        let h = self
            .host
            .as_mut()
            .ok_or_else(|| MpcError::Device("host solutes were not uploaded".into()))?;
        self.stream
            .memcpy_dtoh(&h.vel.slice(..3 * n), &mut h.vel_down)
            .map_err(drv("solute download"))
    }

    /// Host arrays: the velocities queued down by the return, copied into `out` once there.
    pub(in crate::backend::cuda::multi) fn download_host(
        &mut self,
        out: &mut [[f64; 3]],
    ) -> Result<()> {
        let n = out.len();
        let h = self
            .host
            .as_ref()
            .ok_or_else(|| MpcError::Device("host solutes were not uploaded".into()))?;
        self.stream.synchronize().map_err(drv("solute download"))?;
        let staged = h.vel_down.as_slice().map_err(drv("pinned"))?;
        crate::host::copy(out.as_flattened_mut(), &staged[..3 * n]);
        Ok(())
    }
}
