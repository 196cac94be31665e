//! Opening the fluid on one GPU ([`CudaBackend`]) as the run's backend: a fresh fluid, a given
//! state, or a checkpoint's blocks streamed straight to the GPU.

use super::CudaBackend;
use crate::backend::Backend;
use crate::config::Config;
use crate::error::Result;
use crate::physics::Physics;
use crate::state::FluidState;

/// [`open_backend`] with the fluid from `source`: a checkpoint's blocks are streamed straight
/// to the GPU, a window at a time, never whole on the host.
pub fn open_backend_from(
    cfg: &Config,
    phys: &Physics,
    source: Option<crate::fluid_parts::FluidSource<'_>>,
    ordinal: usize,
) -> Result<Box<dyn Backend>> {
    if let Some(crate::fluid_parts::FluidSource::Stored(file)) = source {
        let method = cfg.tuning.cuda_method();
        let be = CudaBackend::open_stored(cfg, phys, file, ordinal, method)?;
        tracing::info!("CUDA backend on {} from a checkpoint", be.dev.describe());
        return Ok(Box::new(be));
    }
    let whole = match &source {
        Some(s) => Some(s.whole()?),
        None => None,
    };
    open_backend(cfg, phys, whole.as_deref(), ordinal)
}

/// Open the CUDA backend for `device` (already resolved to one ordinal).
pub fn open_backend(
    cfg: &Config,
    phys: &Physics,
    state: Option<&FluidState>,
    ordinal: usize,
) -> Result<Box<dyn Backend>> {
    let method = cfg.tuning.cuda_method();
    let be = CudaBackend::open(cfg, phys, state, ordinal, method)?;
    tracing::info!(
        "CUDA backend on {} ({} cell sums, {} particles, {} device bytes)",
        be.dev.describe(),
        method.name(),
        be.n,
        be.device_bytes
    );
    Ok(Box::new(be))
}
