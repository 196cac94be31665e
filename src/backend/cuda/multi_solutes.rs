//! Solutes in a multi-GPU run, held on the *home* GPU (the run's first): the caller's device
//! arrays, or host arrays uploaded once. Every GPU bins the solutes straight from the home
//! GPU's memory (peer reads over NVLink) and adds those in its own cells; the GPU owning a
//! solute's cell collides it and writes the velocity back into the home array (peer write),
//! the others leave it alone. Host solutes cross PCIe once each way instead of once per GPU,
//! and device solutes not at all. Needs peer access from every GPU to the home GPU; without
//! it, host solutes go to every GPU through the host (the older path) and device solutes are
//! refused.

use cudarc::driver::DevicePtr;

use super::multi::MultiCudaBackend;
use crate::backend::DeviceSolutes;
use crate::error::{MpcError, Result};

impl MultiCudaBackend {
    /// Check device-resident solutes: on the home GPU, like one GPU's check; their pool (if
    /// they come from a stream-ordered pool) is opened to the other GPUs.
    pub(super) fn check_device_solutes_multi(&mut self, s: &DeviceSolutes) -> Result<()> {
        if !self.home_reachable {
            return Err(MpcError::Device(
                "device-resident solutes on several GPUs need peer access from every GPU to the \
                 first (NVLink or PCIe peer-to-peer), which these GPUs lack; fix: hand the \
                 solutes over as host arrays, or run the fluid on one GPU"
                    .into(),
            ));
        }
        self.slabs[0].check_device_solutes_here(s)?;
        let readers: Vec<usize> = self.slabs[1..].iter().map(|b| b.dev.ordinal).collect();
        for ptr in [s.pos, s.vel, s.mass] {
            super::transfer::open_pool_of(ptr, &readers)?;
        }
        Ok(())
    }

    /// The home GPU's solute buffers holding `pos`, `vel`, `mass` (uploaded now, one PCIe
    /// transfer), as device solutes every GPU reads.
    pub(super) fn upload_solutes_home(
        &mut self,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<DeviceSolutes> {
        let home = &mut self.slabs[0];
        home.upload_solutes_blocking(pos, vel, mass)?;
        let stream = home.dev.stream.clone();
        let sb = home
            .solutes
            .as_ref()
            .ok_or_else(|| MpcError::Device("solute buffers missing".into()))?;
        let addr = |b: &cudarc::driver::CudaSlice<f64>| b.device_ptr(&stream).0;
        Ok(DeviceSolutes {
            pos: addr(&sb.pos),
            vel: addr(&sb.vel),
            mass: addr(&sb.mass),
            n: pos.len(),
            stream: 0,
        })
    }

    /// After every GPU has finished the step: the collided velocities from the home buffers.
    pub(super) fn download_solutes_home(&mut self, out: &mut [[f64; 3]]) -> Result<()> {
        let ns = out.len();
        let home = &mut self.slabs[0];
        let sb = home
            .solutes
            .as_ref()
            .ok_or_else(|| MpcError::Device("solute buffers missing".into()))?;
        home.dev
            .stream
            .memcpy_dtoh(&sb.vel.slice(..3 * ns), out.as_flattened_mut())
            .map_err(super::drv("solute download"))
    }
}
