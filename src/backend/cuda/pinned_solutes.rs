//! Solute arrays in page-locked host memory, owned by mpcbox: an MD code that keeps its solutes
//! (or the copies it hands over) in them has them sent to the GPU and back by DMA straight from
//! and into its arrays, without the staging copy pageable arrays need (`pieces.rs`). Any
//! page-locked memory does the same (`cudaHostAlloc`, `cudaHostRegister`, PyTorch's
//! `pin_memory()`, CuPy's pinned arrays); these are for callers without a CUDA runtime of
//! their own.

use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaContext, PinnedHostSlice};

use super::device::drv;
use crate::error::Result;

/// `n` solutes' positions, velocities and masses in page-locked host memory.
pub struct PinnedSoluteArrays {
    n: usize,
    pos: PinnedHostSlice<f64>,
    vel: PinnedHostSlice<f64>,
    mass: PinnedHostSlice<f64>,
}

impl PinnedSoluteArrays {
    /// Zeroed arrays for `n` solutes, page-locked through GPU `ordinal`'s context (every GPU of
    /// the host reaches them: CUDA's unified addressing).
    pub fn new(ordinal: usize, n: usize) -> Result<PinnedSoluteArrays> {
        let ctx: Arc<CudaContext> = CudaContext::new(ordinal).map_err(drv("context"))?;
        let pin = |len: usize| -> Result<PinnedHostSlice<f64>> {
            // SAFETY: pinned host memory, uninitialised; zeroed below before anything reads it.
            let mut b = unsafe { ctx.alloc_pinned::<f64>(len.max(1)) }.map_err(drv("pinned"))?;
            b.as_mut_slice().map_err(drv("pinned"))?.fill(0.0);
            Ok(b)
        };
        Ok(PinnedSoluteArrays {
            n,
            pos: pin(3 * n)?,
            vel: pin(3 * n)?,
            mass: pin(n)?,
        })
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The positions, velocities and masses, to fill and to hand to `step_with_solutes`.
    pub fn arrays_mut(&mut self) -> Result<SoluteArraysMut<'_>> {
        let n = self.n;
        let pos = &mut self.pos.as_mut_slice().map_err(drv("pinned"))?[..3 * n];
        let vel = &mut self.vel.as_mut_slice().map_err(drv("pinned"))?[..3 * n];
        let mass = &mut self.mass.as_mut_slice().map_err(drv("pinned"))?[..n];
        Ok((pos.as_chunks_mut::<3>().0, vel.as_chunks_mut::<3>().0, mass))
    }
}

/// Positions, velocities and masses of solutes, writable.
pub type SoluteArraysMut<'a> = (&'a mut [[f64; 3]], &'a mut [[f64; 3]], &'a mut [f64]);

/// The context page-locked allocations are made in (GPU 0's primary context), or None without a
/// usable CUDA driver and GPU.
fn host_alloc_context() -> Option<&'static Arc<CudaContext>> {
    static CONTEXT: OnceLock<Option<Arc<CudaContext>>> = OnceLock::new();
    CONTEXT
        .get_or_init(|| {
            if !super::device::driver_present() {
                return None;
            }
            CudaContext::new(0).ok()
        })
        .as_ref()
}

/// `bytes` of page-locked host memory from the CUDA driver, reachable by DMA from every GPU of
/// the process (portable), or None without a usable CUDA driver and GPU, for 0 bytes, or when
/// the driver refuses (too much locked memory). Free it with [`free_page_locked`].
pub fn alloc_page_locked(bytes: usize) -> Option<std::ptr::NonNull<u8>> {
    let ctx = host_alloc_context()?;
    if bytes == 0 || ctx.bind_to_thread().is_err() {
        return None;
    }
    let flags = cudarc::driver::sys::CU_MEMHOSTALLOC_PORTABLE;
    // SAFETY: a context is current on this thread (bound above); the driver returns memory of
    // `bytes` bytes or an error.
    let p = unsafe { cudarc::driver::result::malloc_host(bytes, flags) }.ok()?;
    std::ptr::NonNull::new(p.cast::<u8>())
}

/// Give back memory from [`alloc_page_locked`].
///
/// # Safety
/// `ptr` must come from [`alloc_page_locked`] and not have been freed, and no copy may still be
/// reading or writing it.
pub unsafe fn free_page_locked(ptr: std::ptr::NonNull<u8>) {
    if let Some(ctx) = host_alloc_context() {
        if ctx.bind_to_thread().is_ok() {
            // SAFETY: the caller's promise above; the context that allocated it is current.
            let _ = unsafe { cudarc::driver::result::free_host(ptr.as_ptr().cast()) };
        }
    }
}
