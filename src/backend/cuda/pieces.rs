//! Host arrays through pinned staging piece by piece: the host copies one piece (on the
//! bounded host pool) while the previous one crosses PCIe, and on the way down copies a piece
//! out as soon as it has arrived. Used by the coupled step's host solutes on one GPU
//! (`coupled.rs`) and on several (`multi/solute_routes/host.rs`).

use cudarc::driver::{CudaEvent, CudaStream, PinnedHostSlice};

use super::device::drv;
use crate::error::Result;

/// The flags of the pinned host memory that solutes go up through (`MPCBOX_SOLUTE_STAGING`):
/// write-combined by default, or ordinary cached pages.
pub(super) fn up_staging_flags() -> u32 {
    if crate::knobs::knobs().is("MPCBOX_SOLUTE_STAGING", "cached") {
        0
    } else {
        cudarc::driver::sys::CU_MEMHOSTALLOC_WRITECOMBINED
    }
}

/// Solutes per piece: large enough that a piece's copies cost far more than their launch,
/// small enough that the first crosses PCIe early.
const PIECE: usize = 1 << 19;

/// The pieces of `n` solutes.
fn pieces(n: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..n).step_by(PIECE).map(move |a| a..(a + PIECE).min(n))
}

/// One host array going up: `width` doubles per solute from `src` through `staging` (pinned,
/// at least as long) into the device buffer at `dst`, each value tested against `bound` as
/// it is staged.
pub(super) struct Up<'a> {
    pub(super) src: &'a [f64],
    pub(super) staging: &'a mut PinnedHostSlice<f64>,
    pub(super) dst: u64,
    pub(super) width: usize,
    pub(super) bound: Bound,
}

/// What every value of an array going up must be (a NaN fails every bound but `Any`).
#[derive(Clone, Copy, Debug)]
pub(super) enum Bound {
    /// Not tested here (checked before).
    Any,
    /// |v| ≤ the bound (finite when the bound is f64::MAX).
    Abs(f64),
    /// 0 < v ≤ the bound.
    Positive(f64),
}

impl Bound {
    /// `dst` ← `src`, true when every value is within the bound.
    fn copy(self, dst: &mut [f64], src: &[f64]) -> bool {
        match self {
            Bound::Any => {
                crate::host_pool::copy(dst, src);
                true
            }
            Bound::Abs(h) => crate::host_pool::copy_checked(dst, src, |v| v.abs() <= h),
            Bound::Positive(h) => crate::host_pool::copy_checked(dst, src, |v| v > 0.0 && v <= h),
        }
    }
}

/// Queue `n` solutes of every array up on `stream`, piece by piece (each piece copied into its
/// staging on the host and tested against its array's bound, then its copy queued while the
/// host goes on with the next). An array in page-locked memory that needs no test goes up
/// straight from the caller's memory by DMA (no staging). False when a value failed its
/// bound: the copies are queued all the same (into the caller's buffers only), and the caller
/// says which value. Returns whether any array went up straight (then the caller's memory is
/// read until `stream` has passed the copies).
///
/// # Safety
/// Each `dst` must be device memory of `stream`'s context holding `width * n` doubles, not
/// touched by other work until `stream` has passed the copies; the staging must not be read
/// by earlier copies still in flight (the caller waited for them).
pub(super) unsafe fn upload(
    stream: &CudaStream,
    arrays: &mut [Up<'_>],
    n: usize,
) -> Result<(bool, bool)> {
    let mut good = true;
    let direct: Vec<bool> = arrays
        .iter()
        .map(|a| matches!(a.bound, Bound::Any) && super::device_solutes::page_locked(a.src))
        .collect();
    for (a, _) in arrays.iter().zip(&direct).filter(|(_, &d)| d) {
        let all = &a.src[..a.width * n];
        // SAFETY: the caller's page-locked memory (its lifetime covers the call, and the
        // caller waits for `stream` before it may change it) into the whole device buffer.
        unsafe {
            cudarc::driver::result::memcpy_htod_async(a.dst, all, stream.cu_stream())
                .map_err(drv("solute upload"))?;
        }
    }
    for r in pieces(n) {
        for (a, _) in arrays.iter_mut().zip(&direct).filter(|(_, &d)| !d) {
            let w = a.width * r.start..a.width * r.end;
            let staged = &mut a.staging.as_mut_slice().map_err(drv("pinned"))?[w.clone()];
            good &= a.bound.copy(staged, &a.src[w.clone()]);
            // SAFETY: the piece just staged (pinned, so the copy is asynchronous) into the same
            // piece of the caller's device buffer (its size and lifetime guaranteed above).
            unsafe {
                cudarc::driver::result::memcpy_htod_async(
                    a.dst + 8 * w.start as u64,
                    staged,
                    stream.cu_stream(),
                )
                .map_err(drv("solute upload"))?;
            }
        }
    }
    Ok((good, direct.contains(&true)))
}

/// Queue `width * n` doubles from the device buffer at `src` down into `staging` on `stream`,
/// piece by piece, recording one of `arrived` (grown as needed) after each piece.
///
/// # Safety
/// `src` must be device memory of `stream`'s context holding `width * n` doubles, written
/// by work queued before on `stream`; `staging` (pinned, at least as long) must not be read
/// until the pieces' events have completed ([`take`] waits for them).
pub(super) unsafe fn download(
    stream: &CudaStream,
    src: u64,
    staging: &mut PinnedHostSlice<f64>,
    width: usize,
    n: usize,
    arrived: &mut Vec<CudaEvent>,
) -> Result<()> {
    for (c, r) in pieces(n).enumerate() {
        let w = width * r.start..width * r.end;
        let down = &mut staging.as_mut_slice().map_err(drv("pinned"))?[w.clone()];
        // SAFETY: the caller's device piece into the same piece of pinned staging, read by the
        // host only after this piece's event.
        unsafe {
            cudarc::driver::result::memcpy_dtoh_async(
                down,
                src + 8 * w.start as u64,
                stream.cu_stream(),
            )
            .map_err(drv("solute download"))?;
        }
        if arrived.len() <= c {
            arrived.push(stream.context().new_event(None).map_err(drv("event"))?);
        }
        arrived[c].record(stream).map_err(drv("event"))?;
    }
    Ok(())
}

/// The pieces [`download`] queued, copied from `staging` into `out` (`width` doubles per
/// solute) each as soon as it has arrived.
pub(super) fn take(
    staging: &PinnedHostSlice<f64>,
    width: usize,
    out: &mut [f64],
    arrived: &[CudaEvent],
) -> Result<()> {
    let staged = staging.as_slice().map_err(drv("pinned"))?;
    for (c, r) in pieces(out.len() / width).enumerate() {
        arrived[c].synchronize().map_err(drv("solute download"))?;
        let w = width * r.start..width * r.end;
        crate::host_pool::copy(&mut out[w.clone()], &staged[w]);
    }
    Ok(())
}
