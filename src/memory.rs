//! Memory footprints per backend, reported by `mpcbox check` and checked before allocation.

use crate::config::Config;

/// Bytes a backend needs for a config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Footprint {
    pub bytes_per_particle: u64,
    pub bytes_per_cell: u64,
    pub total_bytes: u64,
}

impl Footprint {
    pub fn new(cfg: &Config, bytes_per_particle: u64, bytes_per_cell: u64) -> Footprint {
        let total = cfg.n_fluid() * bytes_per_particle + cfg.n_cells() * bytes_per_cell;
        Footprint {
            bytes_per_particle,
            bytes_per_cell,
            total_bytes: total,
        }
    }
}

/// The CPU backend: positions 3×4 B, velocities 3×8 B, cell index 4 B, LE image 1 B, cell-list
/// slot 4 B per particle (plus a transient copy of one component while reordering); per cell the
/// collision parameters (7×8 B + flag), list start and fill counter. A checkpoint copies the
/// state once more (36 B per particle), so that is counted too. A collision rule beside plain
/// SRD keeps its cell parameters and, per particle, the position in the cell (+a) and the draw
/// (MPC-AT).
pub fn cpu_footprint(cfg: &Config) -> Footprint {
    use crate::physics::rules::{Rule, RuleCellParams};
    let rule = Rule::from_config(&cfg.collision);
    let (rule_particle, rule_cell) = if rule.is_plain_srd() {
        (0, 0)
    } else {
        let per = 24 * (rule.conserves_angular_momentum() as u64 + rule.draws_velocities() as u64);
        (per, std::mem::size_of::<RuleCellParams>() as u64)
    };
    Footprint::new(
        cfg,
        12 + 24 + 4 + 1 + 4 + 8 + CHECKPOINT_COPY_BYTES + rule_particle,
        std::mem::size_of::<crate::physics::CellParams>() as u64 + 8 + rule_cell,
    )
}

/// The copy of the fluid state (f32 positions, f64 velocities) a checkpoint makes.
const CHECKPOINT_COPY_BYTES: u64 = 12 + 24;

/// Host memory the kernel says a new allocation can get without swapping (`MemAvailable`), or
/// None where /proc/meminfo is not readable.
pub fn host_available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Refuse, before anything is allocated, a fluid the CPU backend cannot hold in host memory.
pub fn check_cpu_fits(cfg: &Config) -> crate::error::Result<()> {
    let Some(available) = host_available_bytes() else {
        return Ok(());
    };
    check_cpu_fits_in(cfg, available)
}

/// [`check_cpu_fits`] against a given amount of free host memory.
pub fn check_cpu_fits_in(cfg: &Config, available: u64) -> crate::error::Result<()> {
    let f = cpu_footprint(cfg);
    if f.total_bytes <= available {
        return Ok(());
    }
    let per_particle =
        f.bytes_per_particle + f.bytes_per_cell / u64::from(cfg.particles_per_cell).max(1);
    let fits = available / per_particle;
    Err(crate::error::MpcError::OutOfMemory {
        device: "the CPU (host memory)".into(),
        needed_bytes: f.total_bytes,
        available_bytes: available,
        fix: format!(
            "the CPU backend holds about {fits} particles in {} ({} needed for {} particles); \
             make `cells` or `particles_per_cell` smaller, or run on a GPU (device: Cuda([0]))",
            human_bytes(available),
            human_bytes(f.total_bytes),
            cfg.n_fluid()
        ),
    })
}

pub fn human_bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2} {}", units[u])
}

/// The CUDA backend with its default method (`MPCBOX_CUDA_METHOD` unset): positions 3×4 B,
/// velocities 3×8 B, packed cell word 4 B, reorder scratch 8 B per particle (48 B); per cell
/// 8 doubles (sums, then collision parameters in place) and a u32 counter (68 B), plus a second
/// 64-B cell buffer for the fused default (132 B). The linked-list method adds 4 B per particle.
pub fn cuda_footprint(cfg: &Config) -> Footprint {
    cuda_footprint_for(cfg, crate::backend::cuda::CellSumMethod::DEFAULT)
}

/// The CUDA backend with a given cell-sum method.
pub fn cuda_footprint_for(cfg: &Config, method: crate::backend::cuda::CellSumMethod) -> Footprint {
    let (bp, bc) = method.bytes_per_particle_and_cell();
    let rule = crate::physics::Rule::from_config(&cfg.collision);
    let rule_bytes = crate::backend::cuda::rule_bytes_per_cell(rule, method);
    Footprint::new(cfg, bp, bc + rule_bytes)
}
