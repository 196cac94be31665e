//! Host solutes' way to and from the routing: pinned staging filled on the host pool, one
//! asynchronous copy per array to the home GPU on the routing stream, and the velocities back.

use cudarc::driver::{CudaSlice, PinnedHostSlice};

use super::{addr, alloc, SoluteRoutes};
use crate::backend::cuda::device::drv;
use crate::backend::cuda::pieces;
use crate::backend::cuda::CudaBackend;
use crate::backend::{DeviceSolutes, MAX_SOLUTE_COORDINATE};
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
    /// This step's arrays are page-locked: they went up by DMA straight from the caller's
    /// memory (their values not yet tested: the routing's count tests them before pass 1),
    /// and the velocities go straight into the caller's array.
    pub(super) straight: bool,
}

impl SoluteRoutes {
    /// Host arrays up to the home GPU on the routing stream, piece by piece: each piece copied
    /// into pinned staging on the host pool and its values tested on the way (finite, within
    /// the coordinate limit, masses > 0 and at most `mass_cap`), then queued up while the host
    /// goes on with the next. Returns the device arrays the routing then reads, or the error
    /// naming the first bad value (only the staging was written).
    pub(in crate::backend::cuda::multi) fn upload_host(
        &mut self,
        home: &CudaBackend,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
        mass_cap: Option<f64>,
    ) -> Result<DeviceSolutes> {
        let n = pos.len();
        if self.host.as_ref().is_none_or(|h| h.capacity < n) {
            self.quiesce()?;
            let cap = n.next_power_of_two().max(1024);
            let ctx = &home.dev.ctx;
            let wc = pieces::up_staging_flags();
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
                straight: false,
            });
            self.stream.synchronize().map_err(drv("solute routing"))?;
        }
        let s = self.stream.clone();
        let h = self.host.as_mut().expect("made above");
        let (pos_dev, vel_dev, mass_dev) = (addr(&h.pos, &s), addr(&h.vel, &s), addr(&h.mass, &s));
        use crate::backend::cuda::device_solutes::page_locked;
        h.straight = page_locked(pos) && page_locked(vel) && page_locked(mass);
        // page-locked arrays go up untested (`Bound::Any`: straight by DMA); the count on the
        // GPU tests them, the masses' cap included
        let bound = |b: pieces::Bound| if h.straight { pieces::Bound::Any } else { b };
        let mut arrays = [
            pieces::Up {
                src: pos.as_flattened(),
                staging: &mut h.pos_up,
                dst: pos_dev,
                width: 3,
                bound: bound(pieces::Bound::Abs(MAX_SOLUTE_COORDINATE)),
            },
            pieces::Up {
                src: vel.as_flattened(),
                staging: &mut h.vel_up,
                dst: vel_dev,
                width: 3,
                bound: bound(pieces::Bound::Abs(f64::MAX)),
            },
            pieces::Up {
                src: mass,
                staging: &mut h.mass_up,
                dst: mass_dev,
                width: 1,
                bound: bound(pieces::Bound::Positive(mass_cap.unwrap_or(f64::MAX))),
            },
        ];
        // SAFETY: the device buffers hold capacity >= n solutes and are read next by the
        // routing queued after these copies on this stream; the staging's previous copies
        // have passed (the host waited for the previous step's velocities). Page-locked
        // arrays are read by the copies until the host waits for the step's velocities,
        // while the caller's batch is borrowed.
        if !unsafe { pieces::upload(&s, &mut arrays, n)? }.0 {
            // the first bad value named as the host check names it
            crate::backend::check_host_solutes(pos, vel, mass, 0..n)?;
            crate::backend::check_solute_masses_fit(mass, mass_cap)?;
            return Err(MpcError::Device(
                "a solute value failed the staging's test and no check (please report it)".into(),
            ));
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
    /// piece by piece, queued as soon as the return has written them (the copies run while
    /// the fluid collides); [`SoluteRoutes::download_host`] takes them.
    pub(super) fn queue_host_download(&mut self, n: usize) -> Result<()> {
        let s = self.stream.clone();
        let h = self
            .host
            .as_mut()
            .ok_or_else(|| MpcError::Device("host solutes were not uploaded".into()))?;
        if h.straight {
            // straight into the caller's array by `download_host`
            return Ok(());
        }
        let vel_dev = addr(&h.vel, &s);
        // SAFETY: 3n velocities on this GPU (capacity >= n), written by the return queued
        // before on this stream; the staging is read only through `download_host`.
        unsafe { pieces::download(&s, vel_dev, &mut h.vel_down, 3, n, &mut h.arrived) }
    }

    /// Host arrays: the velocities queued down by the return, copied into `out` piece by
    /// piece as each arrives.
    pub(in crate::backend::cuda::multi) fn download_host(
        &mut self,
        out: &mut [[f64; 3]],
    ) -> Result<()> {
        let h = self
            .host
            .as_ref()
            .ok_or_else(|| MpcError::Device("host solutes were not uploaded".into()))?;
        let out = out.as_flattened_mut();
        if h.straight && crate::backend::cuda::device_solutes::page_locked(out) {
            let s = &self.stream;
            // SAFETY: the 3n velocities the return wrote (queued before on this stream) into
            // the caller's page-locked array, which the host waits for below.
            unsafe {
                cudarc::driver::result::memcpy_dtoh_async(out, addr(&h.vel, s), s.cu_stream())
            }
            .map_err(drv("solute download"))?;
            return s.synchronize().map_err(drv("solute download"));
        }
        if h.straight {
            // velocities into a pageable array after page-locked ones went up (not the
            // one-call step's case): through the driver's staging
            let s = &self.stream;
            s.synchronize().map_err(drv("solute download"))?;
            let n = out.len();
            return s
                .memcpy_dtoh(&h.vel.slice(..n), out)
                .map_err(drv("solute download"));
        }
        pieces::take(&h.vel_down, 3, out, &h.arrived)
    }

    /// Whether this step's host arrays went up untested, straight from page-locked memory
    /// (then the routing's count must test them before the fluid moves).
    pub(in crate::backend::cuda::multi) fn host_went_straight(&self) -> bool {
        self.host.as_ref().is_some_and(|h| h.straight)
    }
}
