//! Host arrays through pinned staging piece by piece: the host copies one piece (on the
//! bounded host pool) while the previous one crosses PCIe, and on the way down copies a piece
//! out as soon as it has arrived. Used by the coupled step's host solutes on one GPU
//! (`host_staging.rs`), on several (`multi/solute_routes/host.rs`) and over ranks
//! (`multi/rank_split/host.rs`); [`staged_copy_rates`] times the staging's own way.

use std::time::Instant;

use cudarc::driver::{CudaEvent, CudaStream, DevicePtr, PinnedHostSlice};

use super::device::{drv, CudaDevice};
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

/// Solutes per piece: at most this many, so that the first piece crosses PCIe early...
const MOST_PER_PIECE: usize = 1 << 21;
/// ...and at least this many, so that a piece's copies cost far more than their launch.
const FEWEST_PER_PIECE: usize = 1 << 19;
/// Pieces wanted at least, so that the host's copies overlap the DMA.
const PIECES_WANTED: usize = 4;

/// The pieces of `n` solutes. Large pieces cross faster (each piece pays for waking the host
/// pool and launching its copies, and small ones left the staged way at half its rate), but one
/// piece overlaps nothing, so smaller inputs keep several (docs/coupling-costs.md, "Pageable host
/// arrays").
fn pieces(n: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let piece = n
        .div_ceil(PIECES_WANTED)
        .clamp(FEWEST_PER_PIECE, MOST_PER_PIECE);
    (0..n).step_by(piece).map(move |a| a..(a + piece).min(n))
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

/// How fast host arrays in ordinary memory can cross through the staging on this machine,
/// bytes/s: the host pool's copy into the pinned staging alone, and the whole way up and down
/// as a coupled step does it (each piece copied on the host while the previous one crosses
/// PCIe). What bounds pageable solute arrays, beside the PCIe copy of page-locked memory.
#[derive(Clone, Copy, Debug)]
pub struct StagedRates {
    pub host_copy: f64,
    pub up: f64,
    pub down: f64,
}

/// [`StagedRates`] on GPU `dev` of `bytes` in ordinary memory, each the best of `reps`
/// transfers: the references of a coupled step whose host arrays are staged.
pub fn staged_copy_rates(dev: &CudaDevice, bytes: usize, reps: usize) -> Result<StagedRates> {
    let (ctx, stream) = (&dev.ctx, &dev.stream);
    let n = bytes / 8;
    let mut src: Vec<f64> = (0..n).map(|i| i as f64).collect();
    // SAFETY: pinned host memory, uninitialised: written by the host copies and by the
    // downloads (whose events `take` waits for) before anything reads it.
    let mut up_staging = unsafe { ctx.alloc_pinned_with_flags::<f64>(n, up_staging_flags()) }
        .map_err(drv("pinned"))?;
    // SAFETY: as above.
    let mut down_staging =
        unsafe { ctx.alloc_pinned_with_flags::<f64>(n, 0) }.map_err(drv("pinned"))?;
    let on_gpu = stream.alloc_zeros::<f64>(n).map_err(drv("alloc"))?;
    let dst = on_gpu.device_ptr(stream).0;
    let moved = (8 * n) as f64;
    let best = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        let mut rate = 0.0f64;
        for _ in 0..reps + 1 {
            let t0 = Instant::now();
            f()?;
            rate = rate.max(moved / t0.elapsed().as_secs_f64());
        }
        Ok(rate)
    };
    let host_copy = best(&mut || {
        let staged = up_staging.as_mut_slice().map_err(drv("pinned"))?;
        crate::host_pool::copy(staged, &src);
        Ok(())
    })?;
    let up = best(&mut || {
        let mut arrays = [Up {
            src: &src,
            staging: &mut up_staging,
            dst,
            width: 1,
            bound: Bound::Any,
        }];
        // SAFETY: `on_gpu` holds n doubles and nothing else touches it; the staging's previous
        // copies have passed (each transfer is waited for).
        unsafe { upload(stream, &mut arrays, n) }?;
        stream.synchronize().map_err(drv("sync"))
    })?;
    let mut arrived = Vec::new();
    let down = best(&mut || {
        // SAFETY: `on_gpu` holds n doubles, written by the uploads before (waited for); `take`
        // reads each piece of the staging only after its event.
        unsafe { download(stream, dst, &mut down_staging, 1, n, &mut arrived) }?;
        take(&down_staging, 1, &mut src, &arrived)
    })?;
    drop(on_gpu);
    // what came back is what went up: the measurement timed the real way, not a short cut
    if let Some(i) = (0..n).find(|&i| src[i] != i as f64) {
        return Err(crate::error::MpcError::Device(format!(
            "the staged round trip changed value {i} ({} came back)",
            src[i]
        )));
    }
    Ok(StagedRates {
        host_copy,
        up,
        down,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_every_solute_once_in_order_and_overlap_large_inputs() {
        for n in [
            0,
            1,
            FEWEST_PER_PIECE - 1,
            FEWEST_PER_PIECE + 1,
            3 * FEWEST_PER_PIECE,
            PIECES_WANTED * FEWEST_PER_PIECE + 5,
            PIECES_WANTED * MOST_PER_PIECE,
            11_744_051,
        ] {
            let all: Vec<_> = pieces(n).collect();
            let mut next = 0;
            for r in &all {
                assert_eq!(r.start, next, "pieces of {n} are contiguous");
                assert!(r.end > r.start && r.len() <= MOST_PER_PIECE, "{r:?} of {n}");
                next = r.end;
            }
            assert_eq!(next, n, "pieces of {n} end at n");
            if n >= PIECES_WANTED * FEWEST_PER_PIECE {
                assert!(
                    all.len() >= PIECES_WANTED,
                    "{n} solutes in {} pieces",
                    all.len()
                );
            }
            let short = all.iter().filter(|r| r.len() < FEWEST_PER_PIECE).count();
            assert!(short <= 1, "only the last of {n}'s pieces may be short");
        }
    }
}
