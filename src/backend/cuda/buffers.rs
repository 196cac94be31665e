//! Device memory of one GPU: the footprint per particle and per cell, the refusal of a system
//! that cannot fit (before anything is allocated), and the fluid, cell and solute buffers (the
//! fluid's copied back and forth whole: download, upload).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::device::drv;
use super::CellSumMethod;
use crate::config::Config;
use crate::error::{MpcError, Result};
use crate::memory::Footprint;
use crate::state::FluidState;

/// Largest cell count: the cell index takes 30 bits of the packed cell word.
pub const MAX_CUDA_CELLS: u64 = 1 << 30;
/// Largest particle count: indices (and thread indices rounded up to a block) are 32-bit, and
/// u32::MAX ends a cell list.
pub const MAX_CUDA_PARTICLES: u64 = u32::MAX as u64 - 1024;
/// Device memory kept free beside the footprint (context, modules, driver pools).
pub const RESERVE_BYTES: u64 = 512 << 20;
/// Threads of the scan over cells (each handles a contiguous chunk).
pub(super) const SCAN_CHUNKS: usize = 65_536;

/// Bytes per particle of the CUDA backend: position 3×4, velocity 3×8, cell word 4, and an
/// 8-byte scratch slot used by the reorder (permutation, then one array at a time).
pub const BYTES_PER_PARTICLE: u64 = 12 + 24 + 4 + 8;
/// Bytes per cell common to every method: 8 doubles (sums, then collision parameters in
/// place) and a u32 counter (reorder counts/offsets; list heads). The fused methods add a
/// second 64-byte cell buffer.
pub const BYTES_PER_CELL: u64 = 8 * 8 + 4;

/// Device bytes for `n` particles and `ncells` cells with a method (without the reserve).
pub fn device_bytes(n: u64, ncells: u64, method: CellSumMethod) -> u64 {
    let (ep, ec) = method.extra_bytes();
    n * (BYTES_PER_PARTICLE + ep) + ncells * (BYTES_PER_CELL + ec) + SCAN_CHUNKS as u64 * 4
}

/// Refuse a system that cannot fit (before any allocation, host or device).
pub(super) fn check_fits(
    device: &str,
    n: u64,
    ncells: u64,
    method: CellSumMethod,
    free: u64,
) -> Result<u64> {
    if ncells > MAX_CUDA_CELLS {
        return Err(MpcError::Device(format!(
            "{ncells} cells exceed the CUDA backend's limit of {MAX_CUDA_CELLS} (30-bit cell \
             index); fix: use a smaller box or device: Cpu"
        )));
    }
    if n > MAX_CUDA_PARTICLES {
        return Err(MpcError::Device(format!(
            "{n} fluid particles exceed the CUDA backend's limit of {MAX_CUDA_PARTICLES} (32-bit \
             indices); fix: use a smaller box or fewer particles per cell"
        )));
    }
    let needed = device_bytes(n, ncells, method);
    if needed + RESERVE_BYTES > free {
        let (bp, bc) = method.bytes_per_particle_and_cell();
        let fit = free.saturating_sub(RESERVE_BYTES + ncells * bc) / bp;
        return Err(MpcError::OutOfMemory {
            device: device.to_string(),
            needed_bytes: needed + RESERVE_BYTES,
            available_bytes: free,
            fix: format!(
                "this GPU holds about {fit} fluid particles with this box ({} B/particle, {} \
                 B/cell, {} MiB reserve); use fewer cells or particles per cell, or device: Cpu",
                bp,
                bc,
                RESERVE_BYTES >> 20
            ),
        });
    }
    Ok(needed)
}

pub(super) use super::device::OnAllocError;

/// Per-particle buffers: the fluid's state and its per-particle scratch.
pub(super) struct FluidBuffers {
    pub(super) pos: [CudaSlice<f32>; 3],
    pub(super) vel: [CudaSlice<f64>; 3],
    /// Packed cell word per fluid particle.
    pub(super) cellw: CudaSlice<u32>,
    /// 8 bytes per particle: reorder scratch.
    pub(super) temp: CudaSlice<f64>,
    /// List method: next particle in the cell (u32::MAX ends a list).
    pub(super) next: Option<CudaSlice<u32>>,
}

impl FluidBuffers {
    /// Buffers for `n` particle slots, contents unset.
    pub(super) fn alloc(
        s: &Arc<CudaStream>,
        n: usize,
        method: CellSumMethod,
        oom: OnAllocError<'_>,
    ) -> Result<FluidBuffers> {
        let nn = n.max(1);
        // SAFETY: uninitialised device memory is only read after it was written: positions
        // and velocities by the state upload or the initial-state kernel before the first
        // step, cell words by pass 1 (or the slab upload), the scratch by each reorder kernel
        // before the gather that reads it, next[] by the list pass before the list sums.
        unsafe {
            Ok(FluidBuffers {
                pos: [
                    s.alloc::<f32>(nn).map_err(oom)?,
                    s.alloc::<f32>(nn).map_err(oom)?,
                    s.alloc::<f32>(nn).map_err(oom)?,
                ],
                vel: [
                    s.alloc::<f64>(nn).map_err(oom)?,
                    s.alloc::<f64>(nn).map_err(oom)?,
                    s.alloc::<f64>(nn).map_err(oom)?,
                ],
                cellw: s.alloc::<u32>(nn).map_err(oom)?,
                temp: s.alloc::<f64>(nn).map_err(oom)?,
                next: match method {
                    CellSumMethod::List => Some(s.alloc::<u32>(nn).map_err(oom)?),
                    _ => None,
                },
            })
        }
    }

    /// The first `n` slots' positions and velocities copied back on `s` (waits for them).
    pub(super) fn download(&self, s: &Arc<CudaStream>, n: usize) -> Result<FluidState> {
        let mut st = FluidState::default();
        for k in 0..3 {
            let mut p = s.clone_dtoh(&self.pos[k]).map_err(drv("download"))?;
            p.truncate(n);
            st.pos[k] = p;
            let mut v = s.clone_dtoh(&self.vel[k]).map_err(drv("download"))?;
            v.truncate(n);
            st.vel[k] = v;
        }
        Ok(st)
    }

    /// `state`'s positions and velocities copied into the first `n` = `state.len()` slots on
    /// `s`, then waited for.
    pub(super) fn upload(
        &mut self,
        s: &Arc<CudaStream>,
        state: &FluidState,
        n: usize,
    ) -> Result<()> {
        for k in 0..3 {
            s.memcpy_htod(&state.pos[k][..], &mut self.pos[k].slice_mut(..n))
                .map_err(drv("upload"))?;
            s.memcpy_htod(&state.vel[k][..], &mut self.vel[k].slice_mut(..n))
                .map_err(drv("upload"))?;
        }
        s.synchronize().map_err(drv("upload"))?;
        Ok(())
    }
}

/// Per-cell buffers.
pub(super) struct CellBuffers {
    /// 8 doubles per cell: sums, then parameters.
    pub(super) sums: CudaSlice<f64>,
    /// Fused method: the other cell buffer (the two alternate).
    pub(super) alt: Option<CudaSlice<f64>>,
    /// One u32 per cell, and one more bin (free slots in slab mode sort last): reorder
    /// counts/offsets, list heads.
    pub(super) counter: CudaSlice<u32>,
    /// The scan's partial sums, one per chunk of cells.
    pub(super) scan_partial: CudaSlice<u32>,
}

impl CellBuffers {
    /// Zeroed buffers for `ncells` cells.
    pub(super) fn alloc(
        s: &Arc<CudaStream>,
        ncells: usize,
        method: CellSumMethod,
        oom: OnAllocError<'_>,
    ) -> Result<CellBuffers> {
        Ok(CellBuffers {
            sums: s.alloc_zeros::<f64>(8 * ncells).map_err(oom)?,
            alt: if method.is_fused() {
                Some(s.alloc_zeros::<f64>(8 * ncells).map_err(oom)?)
            } else {
                None
            },
            counter: s.alloc_zeros::<u32>(ncells + 1).map_err(oom)?,
            scan_partial: s.alloc_zeros::<u32>(SCAN_CHUNKS).map_err(oom)?,
        })
    }
}

/// Device bytes per cell of a rule's extended sums (`rules.rs`; two buffers with the fused
/// methods).
pub fn rule_bytes_per_cell(rule: crate::physics::Rule, method: CellSumMethod) -> u64 {
    let buffers = if method.is_fused() { 2 } else { 1 };
    8 * super::contract::ext_stride(rule) as u64 * buffers
}

/// The CUDA backend with its default method (`MPCBOX_CUDA_METHOD` unset): positions 3×4 B,
/// velocities 3×8 B, packed cell word 4 B, reorder scratch 8 B per particle (48 B); per cell
/// 8 doubles (sums, then collision parameters in place) and a u32 counter (68 B), plus a second
/// 64-B cell buffer for the fused default (132 B). The linked-list method adds 4 B per particle.
pub fn footprint_default(cfg: &Config) -> Footprint {
    footprint(cfg, CellSumMethod::DEFAULT)
}

/// The CUDA backend with a given cell-sum method.
pub fn footprint(cfg: &Config, method: CellSumMethod) -> Footprint {
    let (bp, bc) = method.bytes_per_particle_and_cell();
    let rule = crate::physics::Rule::from_config(&cfg.collision);
    let rule_bytes = rule_bytes_per_cell(rule, method);
    let mut f = Footprint::new(cfg.n_fluid(), cfg.n_cells(), bp, bc + rule_bytes);
    // walls given as data: the grid's f32 nodes and a byte of clearance per cell of the box,
    // whole on every GPU (backend::cuda::wall_data)
    if let Some(crate::config::walls::WallsConfig::DistanceField { spacing, .. }) = &cfg.walls {
        if let Ok(nodes) = crate::physics::walls::field_load::grid_nodes(cfg.cells, *spacing) {
            f.total_bytes += 4 * nodes.iter().map(|&n| n as u64).product::<u64>();
            f.total_bytes += cfg.n_cells();
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footprint_is_at_most_50_bytes_per_particle() {
        assert_eq!(BYTES_PER_PARTICLE, 48);
        assert_eq!(BYTES_PER_CELL, 68);
        assert!(
            device_bytes(10, 1, CellSumMethod::List) > device_bytes(10, 1, CellSumMethod::Atomics)
        );
        for m in CellSumMethod::ALL {
            let (bp, bc) = m.bytes_per_particle_and_cell();
            assert!(bp <= 52 && bc <= 132, "{m:?}: {bp} B/particle, {bc} B/cell");
            assert_eq!(CellSumMethod::parse(m.name()), Some(m));
        }
        assert_eq!(
            CellSumMethod::DEFAULT.bytes_per_particle_and_cell(),
            (48, 132)
        );
    }

    #[test]
    fn oversize_is_refused_with_a_fix() {
        let e = check_fits(
            "test gpu",
            3_000_000_000,
            300_000_000,
            CellSumMethod::Atomics,
            80 << 30,
        )
        .unwrap_err();
        match e {
            MpcError::OutOfMemory {
                fix, needed_bytes, ..
            } => {
                assert!(needed_bytes > 80 << 30);
                assert!(fix.contains("fewer"), "{fix}");
            }
            other => panic!("expected OutOfMemory, got {other:?}"),
        }
        assert!(check_fits("g", 1000, 100, CellSumMethod::Atomics, 80 << 30).is_ok());
        assert!(matches!(
            check_fits("g", 10, (1 << 30) + 1, CellSumMethod::Atomics, u64::MAX),
            Err(MpcError::Device(_))
        ));
        assert!(matches!(
            check_fits("g", 1 << 33, 1 << 20, CellSumMethod::Atomics, u64::MAX),
            Err(MpcError::Device(_))
        ));
    }
}
