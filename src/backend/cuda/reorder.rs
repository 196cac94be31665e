//! Reordering the fluid by cell (`kernels/reorder.cu`): a counting sort (count per cell, scan,
//! scatter), each cell's segment sorted so that the permutation equals the CPU backend's, then
//! a gather per array through the 8-byte-per-particle scratch. In slab mode the global ids
//! travel along and the free slots, sorted last, are dropped.

use cudarc::driver::{CudaSlice, LaunchConfig};

use super::buffers::SCAN_CHUNKS;
use super::device::{drv, grid};
use super::CudaBackend;
use crate::error::{MpcError, Result};
use crate::physics::StepPlan;

/// 4-byte types for which every bit pattern is a valid value: what the scratch holds.
trait AnyBits32 {}
impl AnyBits32 for u32 {}
impl AnyBits32 for f32 {}

/// The scratch buffer's first `n` slots viewed as `T`, for a permutation or one f32 or u32
/// array.
fn scratch_as<T: AnyBits32>(
    temp: &CudaSlice<f64>,
    n: usize,
) -> Result<cudarc::driver::CudaView<'_, T>> {
    // SAFETY: `transmute` checks that n values of T fit in `temp` (n f64 slots, 8 bytes each,
    // hold n 4-byte values); every bit pattern is a valid T (`AnyBits32`); the view borrows
    // `temp`, so it cannot outlive it.
    unsafe { temp.transmute::<T>(n) }
        .ok_or_else(|| MpcError::Device("reorder scratch too small".into()))
}

/// The scratch (n f64 slots) written as `n` values of a 4-byte type by a kernel (the
/// permutation as u32, gathered f32 positions or ids).
fn scratch_as_mut<T: AnyBits32>(
    temp: &mut CudaSlice<f64>,
    n: usize,
) -> Result<cudarc::driver::CudaViewMut<'_, T>> {
    // SAFETY: as `scratch_as`: `transmute_mut` checks the size, every bit pattern is a valid T,
    // and the view borrows `temp` mutably.
    unsafe { temp.transmute_mut::<T>(n) }
        .ok_or_else(|| MpcError::Device("reorder scratch too small".into()))
}

impl CudaBackend {
    /// Step 6: reorder the fluid by cell when the plan asks.
    pub(super) fn reorder_if(&mut self, plan: &StepPlan) -> Result<()> {
        if plan.reorder && self.n > 0 {
            self.reorder()?;
        }
        Ok(())
    }

    /// Reorder fluid particles by cell (stable: ascending old index within a cell, as on CPU).
    fn reorder(&mut self) -> Result<()> {
        self.count_cells()?;
        self.scan_counter()?;
        self.build_permutation()?;
        self.gather_velocities()?;
        self.gather_positions()?;
        if self.slab.is_some() {
            self.gather_ids()?;
        }
        Ok(())
    }

    /// Particles per cell (free slots in bin `ncells`) into `counter`.
    fn count_cells(&mut self) -> Result<()> {
        let s = self.dev.stream.clone();
        let (nu, ncu) = (self.n as u32, self.ncells as u32);
        s.memset_zeros(&mut self.cell.counter)
            .map_err(drv("memset"))?;
        // SAFETY: cellw holds n = self.n words, counts ncells + 1 bins (a free slot counts into bin
        // ncells); one thread per slot.
        unsafe {
            self.dev
                .k
                .count_cells(
                    &s,
                    grid(self.n),
                    &self.fluid.cellw,
                    &mut self.cell.counter,
                    &nu,
                    &ncu,
                )
                .map_err(drv("reorder"))?;
        }
        Ok(())
    }

    /// Exclusive prefix sum of `counter[0..=ncells]` in place.
    fn scan_counter(&mut self) -> Result<()> {
        let s = self.dev.stream.clone();
        let nc = self.ncells + 1;
        let chunk = nc.div_ceil(SCAN_CHUNKS).max(1);
        let nchunks = nc.div_ceil(chunk);
        let (ncu, chu, nchu) = (nc as u32, chunk as u32, nchunks as u32);
        let k = &self.dev.k;
        let c = &mut self.cell;
        // SAFETY: three kernels in order on the main stream over `counter` (nc = ncells + 1
        // values) and `scan_partial` (SCAN_CHUNKS values >= nchunks, since chunk >= nc /
        // SCAN_CHUNKS): mpc_scan_chunk_sums(const u32 *in, u32 *partial, u32 n, u32 chunk, u32
        // nchunks), mpc_scan_partials(u32 *partial, u32 nchunks) as one block of 1024 threads
        // (its shared array), mpc_scan_apply(u32 *inout, const u32 *partial, u32 n, u32 chunk,
        // u32 nchunks); every index is checked against n and nchunks in the kernels.
        unsafe {
            k.scan_chunk_sums(
                &s,
                grid(nchunks),
                &c.counter,
                &mut c.scan_partial,
                &ncu,
                &chu,
                &nchu,
            )
            .map_err(drv("scan"))?;
            k.scan_partials(
                &s,
                LaunchConfig {
                    grid_dim: (1, 1, 1),
                    block_dim: (1024, 1, 1),
                    shared_mem_bytes: 0,
                },
                &mut c.scan_partial,
                &nchu,
            )
            .map_err(drv("scan"))?;
            k.scan_apply(
                &s,
                grid(nchunks),
                &mut c.counter,
                &c.scan_partial,
                &ncu,
                &chu,
                &nchu,
            )
            .map_err(drv("scan"))?;
        }
        Ok(())
    }

    /// The permutation (new slot → old slot), built in the scratch as u32 and sorted within
    /// each cell, then copied into `cellw` (the cell words are no longer needed: the next
    /// pass 1 rewrites them).
    fn build_permutation(&mut self) -> Result<()> {
        let s = self.dev.stream.clone();
        let n = self.n;
        let (nu, ncu) = (n as u32, self.ncells as u32);
        let k = &self.dev.k;
        let mut perm = scratch_as_mut::<u32>(&mut self.fluid.temp, n)?;
        // SAFETY: mpc_scatter(const u32 *cellw, u32 *cursor, u32 *perm, u32 n, u32 ncells) and
        // mpc_sort_segments(const u32 *ends, u32 *perm, u32 ncells): the cursor/ends are the
        // scanned counts (ncells + 1 values summing to n), so every slot written or sorted
        // lies in perm[0..n); perm is the scratch, n f64 slots seen by the kernels as >= n
        // u32. One thread per particle, then one per cell, in order on the main stream.
        unsafe {
            k.scatter(
                &s,
                grid(n),
                &self.fluid.cellw,
                &mut self.cell.counter,
                &mut perm,
                &nu,
                &ncu,
            )
            .map_err(drv("reorder"))?;
            k.sort_segments(&s, grid(self.ncells), &self.cell.counter, &mut perm, &ncu)
                .map_err(drv("reorder"))?;
        }
        let perm = scratch_as::<u32>(&self.fluid.temp, n)?;
        s.memcpy_dtod(&perm, &mut self.fluid.cellw.slice_mut(..n))
            .map_err(drv("reorder copy"))?;
        Ok(())
    }

    /// Velocities gathered into the scratch, which then swaps places with each component.
    fn gather_velocities(&mut self) -> Result<()> {
        let s = self.dev.stream.clone();
        let nu = self.n as u32;
        for c in 0..3 {
            // SAFETY: perm (in cellw) holds a permutation of 0..n, src and the scratch dst n
            // doubles each, distinct buffers.
            unsafe {
                self.dev
                    .k
                    .gather_f64(
                        &s,
                        grid(self.n),
                        &self.fluid.cellw,
                        &self.fluid.vel[c],
                        &mut self.fluid.temp,
                        &nu,
                    )
                    .map_err(drv("reorder"))?;
            }
            std::mem::swap(&mut self.fluid.vel[c], &mut self.fluid.temp);
        }
        Ok(())
    }

    /// Positions (f32) gathered into the scratch and copied back.
    fn gather_positions(&mut self) -> Result<()> {
        let s = self.dev.stream.clone();
        let n = self.n;
        let nu = n as u32;
        for c in 0..3 {
            let mut dst = scratch_as_mut::<f32>(&mut self.fluid.temp, n)?;
            // SAFETY: perm as in `gather_velocities`, src n floats, the scratch dst at least n
            // floats.
            unsafe {
                self.dev
                    .k
                    .gather_f32(
                        &s,
                        grid(n),
                        &self.fluid.cellw,
                        &self.fluid.pos[c],
                        &mut dst,
                        &nu,
                    )
                    .map_err(drv("reorder"))?;
            }
            let src = scratch_as::<f32>(&self.fluid.temp, n)?;
            s.memcpy_dtod(&src, &mut self.fluid.pos[c].slice_mut(..n))
                .map_err(drv("reorder copy"))?;
        }
        Ok(())
    }

    /// Slab mode: the global ids travel with their particles; the free slots, sorted last,
    /// are dropped.
    fn gather_ids(&mut self) -> Result<()> {
        let s = self.dev.stream.clone();
        let n = self.n;
        let nu = n as u32;
        let sl = self.slab.as_mut().expect("slab mode");
        if let Some(labels) = sl.ids.as_mut() {
            // SAFETY: the ids are n u32 slots viewed as f32 (4 bytes, any bit pattern valid)
            // for the f32 gather, which only moves them; the view borrows `sl.ids`.
            let ids = unsafe { labels.transmute::<f32>(n) }
                .ok_or_else(|| MpcError::Device("slab id buffer too small".into()))?;
            let mut dst = scratch_as_mut::<f32>(&mut self.fluid.temp, n)?;
            // SAFETY: mpc_gather_f32 as in `gather_positions`, on the ids.
            unsafe {
                self.dev
                    .k
                    .gather_f32(&s, grid(n), &self.fluid.cellw, &ids, &mut dst, &nu)
                    .map_err(drv("reorder"))?;
            }
            let src = scratch_as::<u32>(&self.fluid.temp, n)?;
            s.memcpy_dtod(&src, &mut labels.slice_mut(..n))
                .map_err(drv("reorder copy"))?;
        }
        self.n -= sl.free_slots;
        sl.free_slots = 0;
        Ok(())
    }
}
