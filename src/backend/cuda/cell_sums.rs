//! How the per-cell sums of pass 1 are formed and the passes arranged ([`CellSumMethod`]); its
//! device side (warp, block and atomic aggregation into the cells) is `kernels/cell_sums.cuh`.

use super::buffers::{BYTES_PER_CELL, BYTES_PER_PARTICLE};

/// How the per-cell sums are formed and the passes arranged (selectable with
/// `MPCBOX_CUDA_METHOD=atomics|warp|shared|list|fused|fused-shared`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellSumMethod {
    /// Five f64 atomics per particle into the cell buffer, in the streaming kernel (the simplest
    /// way).
    Atomics,
    /// As `Atomics`, but the lanes of a warp that share a cell first add in registers
    /// (`__match_any_sync` + shuffles), so one lane per cell and warp does the five atomics.
    Warp,
    /// Linked cell lists (`atomicExch` on a head per cell), then one thread per cell sums its
    /// list (no atomics on the sums).
    List,
    /// `Warp`, then the warp leaders add into a per-block hash table of cells in shared memory
    /// (geometry-aware hash: partial cell lists in shared memory, as sums), and each block does one
    /// set of atomics per distinct cell.
    Shared,
    /// `Warp` sums, and the collision of step n fused with the streaming of step n+1 (one pass
    /// over the particles per step) whenever step n's collisional stress is not measured; two
    /// cell buffers alternate.
    Fused,
    /// `Fused` with the `Shared` block aggregation.
    FusedShared,
}

impl CellSumMethod {
    /// Whether the collision of one step is deferred into the next step's pass 1.
    pub(super) fn is_fused(self) -> bool {
        matches!(self, CellSumMethod::Fused | CellSumMethod::FusedShared)
    }

    pub const ALL: [CellSumMethod; 6] = [
        CellSumMethod::Atomics,
        CellSumMethod::Warp,
        CellSumMethod::Shared,
        CellSumMethod::List,
        CellSumMethod::Fused,
        CellSumMethod::FusedShared,
    ];

    /// The default: the fastest in `mpcbox-bench gpu` (64³ to 256³ cells × 10): `Fused`, as
    /// fast as `Warp` when the stress is measured every step (the collision cannot be deferred)
    /// and faster otherwise (one pass over the particles less); `Warp` beats `Atomics` (fewer
    /// atomics on the same addresses).
    pub const DEFAULT: CellSumMethod = CellSumMethod::Fused;

    pub fn name(self) -> &'static str {
        match self {
            CellSumMethod::Atomics => "atomics",
            CellSumMethod::Warp => "warp",
            CellSumMethod::Shared => "shared",
            CellSumMethod::List => "list",
            CellSumMethod::Fused => "fused",
            CellSumMethod::FusedShared => "fused-shared",
        }
    }

    pub fn parse(s: &str) -> Option<CellSumMethod> {
        match s.trim().to_ascii_lowercase().as_str() {
            "atomics" | "atomic" => Some(CellSumMethod::Atomics),
            "warp" => Some(CellSumMethod::Warp),
            "list" | "lists" | "linked" => Some(CellSumMethod::List),
            "shared" => Some(CellSumMethod::Shared),
            "fused" => Some(CellSumMethod::Fused),
            "fused-shared" | "fused_shared" => Some(CellSumMethod::FusedShared),
            _ => None,
        }
    }

    /// The method named by `MPCBOX_CUDA_METHOD` (checked in `crate::knobs`), else the default
    /// (the fastest measured).
    pub fn from_env() -> CellSumMethod {
        crate::knobs::knobs()
            .get("MPCBOX_CUDA_METHOD")
            .and_then(CellSumMethod::parse)
            .unwrap_or(CellSumMethod::DEFAULT)
    }

    /// Device bytes per particle and per cell of this method.
    pub fn bytes_per_particle_and_cell(self) -> (u64, u64) {
        let (ep, ec) = self.extra_bytes();
        (BYTES_PER_PARTICLE + ep, BYTES_PER_CELL + ec)
    }

    /// Extra bytes per particle and per cell beyond the common footprint.
    pub(super) fn extra_bytes(self) -> (u64, u64) {
        match self {
            CellSumMethod::Atomics | CellSumMethod::Warp | CellSumMethod::Shared => (0, 0),
            // next[] per particle; the list heads share the per-cell counter array
            CellSumMethod::List => (4, 0),
            // a second cell buffer
            CellSumMethod::Fused | CellSumMethod::FusedShared => (0, 64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_the_knob_takes_parses() {
        for name in crate::knobs::CUDA_METHODS {
            let m = CellSumMethod::parse(name).expect(name);
            assert_eq!(CellSumMethod::parse(m.name()), Some(m), "{name}");
        }
    }

    #[test]
    fn methods_parse() {
        assert_eq!(CellSumMethod::parse("list"), Some(CellSumMethod::List));
        assert_eq!(
            CellSumMethod::parse(" Atomics"),
            Some(CellSumMethod::Atomics)
        );
        assert_eq!(CellSumMethod::parse("x"), None);
    }
}
