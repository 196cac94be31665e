//! Host values going up to one GPU through two pinned slots: the host copies a chunk into one
//! slot while the other slot's copy crosses PCIe. A copy from pageable memory is staged by the
//! driver and waited for before the call returns, so a resume's values, handed over that way
//! piece after piece, went up at a fraction of the bus's rate and held the reading of the
//! next piece. Used where a checkpoint is streamed into the GPUs (`snapshot.rs`,
//! `multi/open.rs`).

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaEvent, CudaStream, PinnedHostSlice};
use rayon::prelude::*;

use super::device::drv;
use crate::error::Result;

/// Bytes of a slot: a chunk crosses PCIe in a fraction of a millisecond, long beside a
/// copy's launch.
const SLOT_BYTES: usize = 8 << 20;

/// Two pinned slots on one GPU's context, each with the event recorded behind its last copy.
pub(super) struct UploadSlots {
    slots: Vec<(PinnedHostSlice<u8>, CudaEvent)>,
    next: usize,
    /// Reused host memory for values converted before they go up (a slab's 32-bit labels).
    pub(super) scratch: Vec<u32>,
}

/// Plain numbers: no padding, every byte initialised (what [`bytes_of`] may view as bytes).
/// Sealed: implemented here for the numbers the uploads carry, and nowhere else.
pub(super) trait PlainNumber: Copy + sealed::Sealed {}
mod sealed {
    pub trait Sealed {}
}
macro_rules! plain_numbers {
    ($($t:ty),*) => {$(impl sealed::Sealed for $t {} impl PlainNumber for $t {})*};
}
plain_numbers!(f32, f64, u32, u64);

/// The bytes of plain numbers (`f32`, `f64`, `u32`, `u64`), as the GPU holds them.
pub(super) fn bytes_of<T: PlainNumber>(values: &[T]) -> &[u8] {
    // SAFETY: `PlainNumber` is implemented only for primitive numbers, which have no padding
    // and no uninitialised bytes, and any byte is a valid u8; the length in bytes covers
    // exactly the values' memory, borrowed for as long as `values`.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), std::mem::size_of_val(values)) }
}

impl UploadSlots {
    pub(super) fn new(ctx: &Arc<CudaContext>) -> Result<UploadSlots> {
        let mut slots = Vec::with_capacity(2);
        for _ in 0..2 {
            // SAFETY: the memory is written (`put`) before any copy reads it.
            let host = unsafe { ctx.alloc_pinned::<u8>(SLOT_BYTES) }.map_err(drv("pinned"))?;
            let event = ctx.new_event(None).map_err(drv("event"))?;
            slots.push((host, event));
        }
        Ok(UploadSlots {
            slots,
            next: 0,
            scratch: Vec::new(),
        })
    }

    /// `src` into the device memory at `dst` on `stream`, a slot at a time: the host fills a
    /// slot once the copy that last read it has completed.
    ///
    /// # Safety
    /// `dst` must be device memory of the slots' context holding `src.len()` bytes, and no
    /// other work may use it until `stream` has passed the copies.
    pub(super) unsafe fn put(&mut self, stream: &CudaStream, src: &[u8], dst: u64) -> Result<()> {
        for (k, chunk) in src.chunks(SLOT_BYTES).enumerate() {
            let (host, done) = &mut self.slots[self.next];
            self.next = (self.next + 1) % 2;
            done.synchronize().map_err(drv("upload slot"))?;
            let staged = &mut host.as_mut_slice().map_err(drv("pinned"))?[..chunk.len()];
            staged
                .par_chunks_mut(1 << 20)
                .zip(chunk.par_chunks(1 << 20))
                .for_each(|(d, s)| d.copy_from_slice(s));
            let at = dst + (k * SLOT_BYTES) as u64;
            // SAFETY: pinned memory, so the copy is asynchronous; the slot is not written again
            // before its event (recorded behind this copy) has completed, and the destination is
            // the caller's to guarantee.
            unsafe {
                cudarc::driver::result::memcpy_htod_async(at, staged, stream.cu_stream())
                    .map_err(drv("upload"))?;
            }
            done.record(stream).map_err(drv("upload slot"))?;
        }
        Ok(())
    }

    /// Every copy queued so far completed.
    pub(super) fn finish(&self) -> Result<()> {
        for (_, done) in &self.slots {
            done.synchronize().map_err(drv("upload slot"))?;
        }
        Ok(())
    }
}

impl Drop for UploadSlots {
    /// The slots' memory is freed only once no copy reads it.
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
