//! The CPU backend's memory footprint, checked against free host memory before allocation.

use crate::config::Config;
use crate::memory::{host_available_bytes, human_bytes, Footprint};

/// The CPU backend: positions 3×4 B, velocities 3×8 B, cell index 4 B, LE image 1 B, cell-list
/// slot 4 B per particle (plus a transient copy of one component while reordering); per cell the
/// collision parameters (7×8 B + flag), list start and fill counter. A checkpoint copies the
/// state once more (36 B per particle), so that is counted too. A collision rule beside plain
/// SRD keeps its cell parameters and, per particle, the position in the cell (+a) and the draw
/// (MPC-AT).
pub fn footprint(cfg: &Config) -> Footprint {
    use crate::physics::rules::{Rule, RuleCellParams};
    let rule = Rule::from_config(&cfg.collision);
    let (rule_particle, rule_cell) = if rule.is_plain_srd() {
        (0, 0)
    } else {
        let per = 24 * (rule.conserves_angular_momentum() as u64 + rule.draws_velocities() as u64);
        (per, std::mem::size_of::<RuleCellParams>() as u64)
    };
    Footprint::new(
        cfg.n_fluid(),
        cfg.n_cells(),
        12 + 24 + 4 + 1 + 4 + 8 + CHECKPOINT_COPY_BYTES + rule_particle,
        std::mem::size_of::<crate::physics::CellParams>() as u64 + 8 + rule_cell,
    )
}

/// The copy of the fluid state (f32 positions, f64 velocities) a checkpoint makes.
const CHECKPOINT_COPY_BYTES: u64 = 12 + 24;

/// Refuse, before anything is allocated, a fluid the CPU backend cannot hold in host memory.
pub fn check_fits(cfg: &Config) -> crate::error::Result<()> {
    let Some(available) = host_available_bytes() else {
        return Ok(());
    };
    check_fits_in(cfg, available)
}

/// [`check_fits`] against a given amount of free host memory.
pub fn check_fits_in(cfg: &Config, available: u64) -> crate::error::Result<()> {
    if cfg.n_fluid() > u32::MAX as u64 {
        return Err(crate::error::MpcError::Config(crate::error::ConfigError {
            field: "device".into(),
            problem: format!(
                "{} fluid particles: the CPU backend indexes them with 32 bits (at most {})",
                cfg.n_fluid(),
                u32::MAX
            ),
            fix: "run on several GPUs (device: AllGpus), each holding its own slab, or use a \
                  smaller box"
                .into(),
        }));
    }
    let f = footprint(cfg);
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
