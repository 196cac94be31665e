//! The `tuning` section: choices that change how a run is computed, not what it computes (its
//! results agree to rounding, bit for bit where fixed-point sums are on). Each choice left unset
//! falls back to its knob (`crate::knobs`), then to the measured default, so a config can pin
//! one (tests run every choice in one process) while a user tries another from the shell.

use serde::{Deserialize, Serialize};

/// How the CUDA backend forms the per-cell sums and arranges the passes (`MPCBOX_CUDA_METHOD`;
/// the device side is `kernels/cell_sums.cuh`, the footprints `backend::cuda::cell_sums`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CellSumMethod {
    /// Atomics per particle into the cell buffer, in the streaming kernel (the simplest way).
    Atomics,
    /// As `Atomics`, but the lanes of a warp that share a cell first add in registers
    /// (`__match_any_sync` + shuffles), so one lane per cell and warp does the atomics.
    Warp,
    /// Linked cell lists (`atomicExch` on a head per cell), then one thread per cell sums its
    /// list (no atomics on the sums). One GPU only.
    List,
    /// `Warp`, then the warp leaders add into a per-block hash table of cells in shared memory,
    /// and each block does one set of atomics per distinct cell.
    Shared,
    /// `Warp` sums, and the collision of step n fused with the streaming of step n+1 (one pass
    /// over the particles per step) whenever step n's collisional stress is not measured; two
    /// cell buffers alternate.
    Fused,
    /// `Fused` with the `Shared` block aggregation.
    FusedShared,
}

impl CellSumMethod {
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

    /// The method named by `MPCBOX_CUDA_METHOD` (checked in `crate::knobs`), else the default.
    pub fn from_env() -> CellSumMethod {
        crate::knobs::knobs()
            .get("MPCBOX_CUDA_METHOD")
            .and_then(CellSumMethod::parse)
            .unwrap_or(CellSumMethod::DEFAULT)
    }
}

/// The arithmetic of the cell sums and the reductions (`MPCBOX_CELL_SUMS`, docs/determinism.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SumArithmetic {
    /// 64-bit fixed point: the same bits on any number of threads, slabs, GPUs and ranks.
    Fixed,
    /// f64 in each backend's order: runs agree across decompositions to rounding only.
    Float,
}

impl SumArithmetic {
    pub fn name(self) -> &'static str {
        match self {
            SumArithmetic::Fixed => "fixed",
            SumArithmetic::Float => "float",
        }
    }

    /// The arithmetic `MPCBOX_CELL_SUMS` names, else fixed point.
    pub fn from_env() -> SumArithmetic {
        match crate::knobs::knobs().get("MPCBOX_CELL_SUMS") {
            Some("float") => SumArithmetic::Float,
            _ => SumArithmetic::Fixed,
        }
    }
}

/// Choices that do not change the physics beyond rounding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TuningConfig {
    /// Steps between reorderings of fluid particles by cell (0: never; unset: the backend's
    /// measured best, 4 on the CPU, 20 on a GPU). Unless 0, step 0 reorders too: a fresh
    /// fluid lies in memory in random order.
    pub reorder_interval: Option<u64>,
    /// Worker threads of the CPU backend (0: all cores).
    pub cpu_threads: usize,
    /// y slabs of the fluid on CUDA devices, spread over the GPUs in contiguous blocks (0: one
    /// per GPU). More slabs than GPUs put several on one GPU: the same decomposition as on more
    /// GPUs, so the 4- and 8-slab paths run on one or two (tests; not faster).
    pub slabs: u32,
    /// How the CUDA backend sums the cells (unset: `MPCBOX_CUDA_METHOD`, else `Fused`).
    pub cuda_method: Option<CellSumMethod>,
    /// Fixed-point or f64 cell sums (unset: `MPCBOX_CELL_SUMS`, else `Fixed`).
    pub sums: Option<SumArithmetic>,
}

impl TuningConfig {
    /// The CUDA cell-sum method this run uses.
    pub fn cuda_method(&self) -> CellSumMethod {
        self.cuda_method.unwrap_or_else(CellSumMethod::from_env)
    }

    /// The arithmetic of this run's sums.
    pub fn sums(&self) -> SumArithmetic {
        self.sums.unwrap_or_else(SumArithmetic::from_env)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_the_knob_takes_parses_and_names_itself() {
        for name in crate::knobs::CUDA_METHODS {
            let m = CellSumMethod::parse(name).expect(name);
            assert_eq!(CellSumMethod::parse(m.name()), Some(m), "{name}");
        }
        assert_eq!(
            CellSumMethod::parse(" Atomics"),
            Some(CellSumMethod::Atomics)
        );
        assert_eq!(CellSumMethod::parse("linked"), Some(CellSumMethod::List));
        assert_eq!(CellSumMethod::parse("sorted"), None);
        for a in [SumArithmetic::Fixed, SumArithmetic::Float] {
            assert!(crate::knobs::CELL_SUMS.contains(&a.name()));
        }
    }

    #[test]
    fn a_pinned_choice_reads_from_ron_and_beats_the_default() {
        let t: TuningConfig =
            ron::from_str("(cuda_method: Some(Warp), sums: Some(Float))").unwrap();
        assert_eq!(t.cuda_method(), CellSumMethod::Warp);
        assert_eq!(t.sums(), SumArithmetic::Float);
        let e = ron::from_str::<TuningConfig>("(cuda_method: Some(Sorted))").unwrap_err();
        assert!(e.to_string().contains("Sorted"), "{e}");
    }
}
