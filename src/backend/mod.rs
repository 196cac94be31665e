//! The backend seam: one trait, implemented by the CPU reference backend and the CUDA backend.
//!
//! A backend owns the fluid particles (they never leave it during a run) and executes steps
//! planned by [`crate::physics::Physics::plan`]. Everything a backend returns is a reduction;
//! the whole state comes back only for checkpoints and tests ([`Backend::download`]).

pub mod cpu;
pub mod cuda;
pub mod slabbed;
mod solutes;

pub use solutes::{
    check_host_solutes, DeviceSolutes, SlabSolutes, SoluteBatch, SoluteSubset,
    MAX_SOLUTE_COORDINATE,
};

use crate::error::Result;
use crate::fluid_parts::FluidSource;
use crate::physics::StepPlan;
use crate::state::FluidState;
use crate::timing::phase;

/// One y slab of a fluid cut over GPUs: its GPU, its cell layers `[lo, hi)` (cells are the
/// unit of length, so these are also its y range) and the MPI rank holding it (0 in one
/// process). `ordinal` names a GPU of the rank holding the slab: only this process's slabs
/// are opened here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlabPlace {
    pub ordinal: usize,
    pub layers: [u32; 2],
    pub rank: usize,
}

/// Raw sums of one step, normalised by the caller.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepReport {
    /// Σ over cells of the kinetic energy relative to the cell velocity, before the collision.
    pub relative_energy: f64,
    /// Σ over cells of (Nc − 1) for occupied cells: 3/2 of it are the degrees of freedom.
    pub relative_dof: f64,
    /// Σ m vy (vx − u(ȳ)) over fluid particles during streaming (when measured).
    pub kinetic_stress_sum: f64,
    /// Σ Δpx · (y − y_cell) over the particles in the collision, fluid and solutes (when
    /// measured).
    pub collisional_stress_sum: f64,
    /// Momentum the fluid (and solutes) gave each wall surface during the step: bounce-backs
    /// and the collisions with virtual wall particles (`physics::walls`); zero without walls.
    pub wall_momentum: crate::physics::WallMomentum,
}

/// Instantaneous fluid moments, reduced on the backend.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FluidMoments {
    pub particles: u64,
    pub momentum: [f64; 3],
    pub kinetic_energy: f64,
    /// Σ vx and count per y layer of one cell (Ly bins).
    pub profile_sum: Vec<f64>,
    pub profile_count: Vec<u64>,
}

pub trait Backend: Send {
    /// A short description, e.g. "cpu (2 threads)" or "cuda:0 NVIDIA H200".
    fn describe(&self) -> String;

    fn n_fluid(&self) -> usize;

    /// One MPC step: stream the fluid, bin fluid and solutes on the shifted grid, collide,
    /// update solute velocities in place.
    fn step(
        &mut self,
        plan: &StepPlan,
        solutes: Option<&mut SoluteBatch<'_>>,
    ) -> Result<StepReport>;

    /// Momentum, kinetic energy and the vx(y) profile of the fluid as it is now.
    fn moments(&mut self) -> Result<FluidMoments>;

    /// A copy of the whole fluid state (checkpoints, tests).
    fn download(&mut self) -> Result<FluidState>;

    /// This process's particles (its slabs' parts with their global ids): its block of a
    /// checkpoint that every MPI rank writes, so no rank ever holds the whole box. In one
    /// process without slabs, the whole fluid.
    fn local_fluid(&mut self) -> Result<crate::checkpoint::LocalFluid> {
        Ok(crate::checkpoint::LocalFluid::Whole(self.download()?))
    }

    /// This process's particles as its checkpoint block, read from the live fluid while the
    /// run waits: a backend that can, hands them over a window at a time (the default: its
    /// [`Backend::local_fluid`], whole in host memory).
    fn fluid_source(&mut self) -> Result<Box<dyn crate::checkpoint::BlockSource + '_>> {
        Ok(Box::new(self.local_fluid()?))
    }

    /// A copy of this process's particles that the checkpoint writer's thread reads while the
    /// run steps on: in spare device memory, or in host memory if it takes at most
    /// `host_bytes`. None: no room for one (the checkpoint is then written from the live
    /// fluid, [`Backend::fluid_source`]). The default copies [`Backend::local_fluid`] when
    /// the whole box fits `host_bytes`.
    fn fluid_snapshot(
        &mut self,
        host_bytes: u64,
    ) -> Result<Option<Box<dyn crate::checkpoint::BlockSource + Send>>> {
        let bytes = self.n_fluid() as u64 * crate::checkpoint::PARTICLE_BYTES;
        if !crate::checkpoint::copy_fits(bytes, host_bytes) {
            return Ok(None);
        }
        Ok(Some(Box::new(self.local_fluid()?)))
    }

    /// Replace the fluid state (resume, tests).
    fn upload(&mut self, state: &FluidState) -> Result<()>;

    /// Add the fluid as it is now into the flow-field sums ([`crate::fields`]): per cell of the
    /// unshifted grid, [`crate::fields::FIELD_SUMS`] values (N, Σv, Σv²), kept on the backend.
    fn accumulate_fields(&mut self) -> Result<()>;

    /// The flow-field sums accumulated since the last call (cells in the global order), which
    /// then start again from zero.
    fn take_field_sums(&mut self) -> Result<Vec<f64>>;

    /// Steps between reorderings of the fluid by cell when the config leaves it unset: the
    /// interval measured fastest on this kind of backend.
    fn preferred_reorder_interval(&self) -> u64 {
        4
    }

    /// Over MPI ranks: each rank hands over its own solutes, wherever they are (routed to the
    /// rank that owns their cells and back), instead of every rank the same ones. A backend of
    /// one process has nothing to route.
    fn set_solutes_per_rank(&mut self, _on: bool) -> Result<()> {
        Ok(())
    }

    /// First half of a coupled step: a backend may start streaming the fluid and uploading the
    /// solutes asynchronously here. The default does nothing; the work happens in
    /// [`Backend::finish_coupled`].
    fn begin_coupled(
        &mut self,
        _plan: &StepPlan,
        _pos: &[[f64; 3]],
        _vel: &[[f64; 3]],
        _mass: &[f64],
    ) -> Result<()> {
        Ok(())
    }

    /// Queue the fluid's part of step `plan` that needs no solutes (the deferred collision of
    /// the fluid, streaming, binning) without waiting for it, so that device-resident solutes
    /// can be moved meanwhile on other streams; the next `step_device_solutes` or
    /// `step_slab_solutes` with the same plan finishes the step. Returns whether it was
    /// begun; the default does nothing (false) and the finishing call does the whole step.
    fn begin_fluid_step(&mut self, _plan: &StepPlan, _n_solutes: usize) -> Result<bool> {
        Ok(false)
    }

    /// Whether `begin_coupled` takes its own copy of the solutes (then `finish_coupled` gets
    /// only the velocity array to write, with empty `pos` and `mass`). The default backend
    /// does its work in `finish_coupled` and needs the inputs there.
    fn keeps_coupled_inputs(&self) -> bool {
        false
    }

    /// The CUDA GPU this backend's fluid lives on (the first of several), None on the CPU.
    fn cuda_ordinal(&self) -> Option<usize> {
        None
    }

    /// Check device-resident solutes before anything changes: the pointers are device memory of
    /// this backend's GPU(s), large enough for `n`, and the values are valid (finite positions
    /// within the coordinate limit, finite velocities, masses > 0). The default refuses: the
    /// backend holds no GPU memory.
    fn check_device_solutes(&mut self, _solutes: &DeviceSolutes) -> Result<()> {
        Err(crate::error::MpcError::Device(format!(
            "{} takes no device-resident solutes; fix: hand the solutes over as host arrays \
             (step_with_solutes) or run the fluid on a CUDA GPU (device: Cuda([0]))",
            self.describe()
        )))
    }

    /// One MPC step with device-resident solutes, checked with
    /// [`Backend::check_device_solutes`]: their velocities are collided in place on the GPU.
    fn step_device_solutes(
        &mut self,
        _plan: &StepPlan,
        solutes: &DeviceSolutes,
    ) -> Result<StepReport> {
        self.check_device_solutes(solutes)?;
        Err(crate::error::MpcError::Device(
            "device-resident solutes are not implemented by this backend".into(),
        ))
    }

    /// The y slabs of a fluid cut over GPUs (None: the fluid is one piece).
    fn slab_places(&self) -> Option<Vec<SlabPlace>> {
        None
    }

    /// One MPC step with device-resident solutes held once per slab of this process
    /// ([`Backend::slab_places`] order, those of this rank), each copy on its slab's GPU and current for the solutes in and near the slab:
    /// each slab bins and collides the solutes in its own cells from its own copy and writes
    /// their velocities there (no GPU reads another's solutes). The copies are checked as
    /// [`Backend::check_device_solutes`] does before anything changes. The default refuses:
    /// the fluid is one piece.
    fn step_slab_solutes(
        &mut self,
        _plan: &StepPlan,
        _solutes: &[SlabSolutes],
    ) -> Result<StepReport> {
        Err(crate::error::MpcError::Device(format!(
            "{} is not cut into slabs: it takes one set of device solutes \
             (step_with_device_solutes)",
            self.describe()
        )))
    }

    /// Second half of a coupled step begun with [`Backend::begin_coupled`] with the same plan
    /// and solutes: finish the step and write the solute velocities into `solutes.vel`.
    fn finish_coupled(
        &mut self,
        plan: &StepPlan,
        solutes: &mut SoluteBatch<'_>,
    ) -> Result<StepReport> {
        self.step(plan, Some(solutes))
    }
}

/// Build the backend a config asks for, with `state` as the fluid (a fresh initial state if None).
/// `Auto` takes a CUDA GPU when one is usable and falls back to the CPU otherwise.
pub fn open(
    cfg: &crate::config::Config,
    phys: &crate::physics::Physics,
    state: Option<&FluidState>,
) -> Result<Box<dyn Backend>> {
    open_from(cfg, phys, state.map(FluidSource::State))
}

/// [`open`] with the fluid from `source` (a checkpoint's file: over MPI ranks each rank reads
/// only the blocks of its layers).
pub fn open_from(
    cfg: &crate::config::Config,
    phys: &crate::physics::Physics,
    state: Option<FluidSource<'_>>,
) -> Result<Box<dyn Backend>> {
    use crate::config::DeviceChoice;
    // the environment's knobs, checked before anything is allocated
    crate::knobs::check()?;
    // from here this process's solvents hold the box over the ranks it has now
    crate::ranks::fix_layout();
    let ranks = crate::ranks::size();
    if ranks > 1 {
        check_ranks(cfg, ranks)?;
    }
    let cpu = |state: Option<FluidSource<'_>>| -> Result<Box<dyn Backend>> {
        cpu::check_fits(cfg)?;
        let ranks = crate::ranks::size();
        let slabs = (cfg.tuning.slabs as usize).max(ranks);
        if slabs > 1 {
            // the box cut into y slabs, in this process and over MPI ranks: over ranks each
            // process generates only its layers of a fresh initial state
            let whole;
            let source = match state {
                Some(s) => s,
                None if ranks > 1 => FluidSource::Initial(cfg),
                None => {
                    whole = phase("draw the fluid on the host", || FluidState::initial(cfg));
                    FluidSource::State(&whole)
                }
            };
            return Ok(Box::new(slabbed::SlabbedCpuBackend::new(
                phys.clone(),
                source,
                slabs,
                cfg.tuning.cpu_threads,
                crate::ranks::transport(),
            )?));
        }
        let st = match state {
            Some(s) => phase("read the fluid", || s.whole())?.into_owned(),
            None => phase("draw the fluid on the host", || FluidState::initial(cfg)),
        };
        Ok(Box::new(cpu::CpuBackend::new(
            phys.clone(),
            st,
            cfg.tuning.cpu_threads,
        )?))
    };
    match &cfg.device {
        DeviceChoice::Cpu => cpu(state),
        _ if ranks > 1 => match gpus_over_ranks(cfg)? {
            Some(gpus) => open_cuda_over_ranks(cfg, phys, state, &gpus),
            None => cpu(state),
        },
        DeviceChoice::Auto => match cuda::probe() {
            Ok(_) => match open_cuda(cfg, phys, state, &[0]) {
                Ok(b) => Ok(b),
                Err(e @ crate::error::MpcError::OutOfMemory { .. }) => {
                    tracing::warn!(
                        "device Auto: the system does not fit GPU 0 ({e}); using the CPU backend"
                    );
                    cpu(state)
                }
                Err(e) => {
                    tracing::info!("device Auto: CUDA GPU 0 unusable ({e}), using the CPU backend");
                    cpu(state)
                }
            },
            Err(why) => {
                tracing::info!("device Auto: no usable CUDA GPU ({why}), using the CPU backend");
                cpu(state)
            }
        },
        DeviceChoice::Cuda(ids) if ids.is_empty() => Err(crate::error::MpcError::Device(
            "device: Cuda([]) names no GPU; fix: name one, e.g. Cuda([0]), or use Auto".into(),
        )),
        DeviceChoice::Cuda(ids) => {
            let ordinals: Vec<usize> = ids.iter().map(|&i| i as usize).collect();
            open_cuda(cfg, phys, state, &ordinals)
        }
        DeviceChoice::AllGpus => {
            let count = cuda::probe().map_err(|why| {
                crate::error::MpcError::Device(format!(
                    "device: AllGpus needs CUDA GPUs, but {why}; fix: use Auto or Cpu"
                ))
            })?;
            open_cuda(cfg, phys, state, &(0..count).collect::<Vec<_>>())
        }
    }
}

/// A run over `ranks` MPI ranks: at most one rank per cell layer in y, and the same config on
/// every rank (its hash gathered).
fn check_ranks(cfg: &crate::config::Config, ranks: usize) -> Result<()> {
    use crate::error::{ConfigError, MpcError};
    let ly = cfg.cells[1] as usize;
    if ranks > ly {
        return Err(MpcError::Config(ConfigError {
            field: "mpirun -np".into(),
            problem: format!("{ranks} MPI ranks for a box of {ly} cell layers in y"),
            fix: format!("at most {ly} ranks (each holds whole layers), or a taller box"),
        }));
    }
    let md_on_gpu = cfg.md.as_ref().map(|m| m.backend) == Some(crate::md::MdBackend::Cuda);
    if md_on_gpu && cfg.device == crate::config::DeviceChoice::Cpu {
        return Err(MpcError::Config(ConfigError {
            field: "md.backend".into(),
            problem: format!(
                "Cuda over {ranks} MPI ranks with the fluid on the CPU: the bundled MD runs on \
                 GPUs over ranks only decomposed with the fluid's GPU slabs"
            ),
            fix: "device: Cuda([..]) or AllGpus (the MD then runs decomposed over the ranks' \
                  GPU slabs), or md.backend: Cpu or Auto (the MD runs whole on every rank's CPU)"
                .into(),
        }));
    }
    use std::hash::{Hash, Hasher};
    let text = ron::to_string(cfg).unwrap_or_default();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    let h = h.finish();
    let mine = [(h >> 32) as f64, (h & 0xffff_ffff) as f64];
    let all = crate::ranks::transport().gather(&mine)?;
    if let Some(r) = all.chunks_exact(2).position(|x| x != mine) {
        return Err(MpcError::Config(ConfigError {
            field: "(config)".into(),
            problem: format!(
                "rank {} and rank {r} were given different configs",
                crate::ranks::rank()
            ),
            fix: "start every rank with the same config file and command line".into(),
        }));
    }
    Ok(())
}

/// Over MPI ranks: the GPUs of this rank's host the config's `device` names (None: the CPU).
/// Every rank must have them: `Cuda`/`AllGpus` stop every rank with an error naming the ranks
/// without a usable GPU; `Auto` takes the GPUs only if every rank has one. Collective.
fn gpus_over_ranks(cfg: &crate::config::Config) -> Result<Option<Vec<usize>>> {
    use crate::config::DeviceChoice;
    use crate::error::{ConfigError, MpcError};
    let probed = cuda::probe();
    let host: Vec<usize> = match (&cfg.device, &probed) {
        // every GPU named, or none: a rank never runs on fewer than the config says
        (DeviceChoice::Cuda(ids), Ok(count)) if ids.iter().all(|&i| (i as usize) < *count) => {
            ids.iter().map(|&i| i as usize).collect()
        }
        (DeviceChoice::Cuda(_), Ok(_)) => Vec::new(),
        (_, Ok(count)) => (0..*count).collect(),
        (_, Err(_)) => Vec::new(),
    };
    let all = crate::ranks::transport().gather(&[host.len() as f64])?;
    let without: Vec<usize> = (0..all.len()).filter(|&r| all[r] == 0.0).collect();
    if without.is_empty() {
        return Ok(Some(host));
    }
    match &cfg.device {
        DeviceChoice::Auto => {
            tracing::info!("device Auto: ranks {without:?} have no usable CUDA GPU: the CPU");
            Ok(None)
        }
        DeviceChoice::Cuda(ids) if ids.is_empty() => Err(MpcError::Device(
            "device: Cuda([]) names no GPU; fix: name one, e.g. Cuda([0]), or use Auto".into(),
        )),
        d => Err(MpcError::Config(ConfigError {
            field: "device".into(),
            problem: format!(
                "{d:?} over {} MPI ranks, but ranks {without:?} have no usable CUDA GPU, or \
                 not every one named (this rank: {})",
                all.len(),
                match &probed {
                    Ok(n) => format!("{n} GPUs"),
                    Err(why) => why.clone(),
                }
            ),
            fix: "start the ranks on hosts with GPUs (one rank per GPU is usual), name GPUs \
                  every host has, or use device: Cpu"
                .into(),
        })),
    }
}

/// The GPUs of a host's `gpus` that its `local` rank of `on_host` takes: a contiguous block
/// of them when the host has at least as many GPUs as ranks, else one shared round robin.
pub fn rank_gpus(gpus: &[usize], local: usize, on_host: usize) -> Vec<usize> {
    let (g, l) = (gpus.len(), on_host.max(1));
    if g >= l {
        gpus[local * g / l..(local + 1) * g / l].to_vec()
    } else {
        vec![gpus[local % g]]
    }
}

/// The rank holding each of `slabs` slabs, each rank r taking a contiguous block in
/// proportion to `weights[r]` (its GPUs; every weight ≥ 1 and `slabs` ≥ their sum, so each
/// rank gets at least its weight).
pub fn weighted_slab_ranks(slabs: usize, weights: &[usize]) -> Vec<usize> {
    let total: usize = weights.iter().sum();
    let mut out = Vec::with_capacity(slabs);
    let mut before = 0;
    for (r, &w) in weights.iter().enumerate() {
        let (lo, hi) = (slabs * before / total, slabs * (before + w) / total);
        out.extend(std::iter::repeat_n(r, hi - lo));
        before += w;
    }
    out
}

/// The fluid over MPI ranks on GPUs: this rank takes its block of its host's `gpus` (by its
/// place among the host's ranks), and the box's slabs (`tuning.slabs`, at least one per
/// GPU of the run) are dealt to the ranks in proportion to their GPUs.
fn open_cuda_over_ranks(
    cfg: &crate::config::Config,
    phys: &crate::physics::Physics,
    state: Option<FluidSource<'_>>,
    gpus: &[usize],
) -> Result<Box<dyn Backend>> {
    let be = open_gpus_over_ranks(cfg, phys, state, gpus)?;
    tracing::info!("rank {}: {}", crate::ranks::rank(), be.describe());
    Ok(Box::new(be))
}

/// [`open_cuda_over_ranks`] as the multi-GPU backend itself (benchmarks profile it).
pub fn open_gpus_over_ranks(
    cfg: &crate::config::Config,
    phys: &crate::physics::Physics,
    state: Option<FluidSource<'_>>,
    gpus: &[usize],
) -> Result<cuda::multi::MultiCudaBackend> {
    let (local, on_host) = crate::ranks::local();
    let mine = rank_gpus(gpus, local, on_host);
    let transport = crate::ranks::transport();
    let counts: Vec<usize> = transport
        .gather(&[mine.len() as f64])?
        .iter()
        .map(|&c| c as usize)
        .collect();
    let slabs = (cfg.tuning.slabs as usize).max(counts.iter().sum());
    let slab_rank = weighted_slab_ranks(slabs, &counts);
    cuda::multi::MultiCudaBackend::open_over_ranks(cfg, phys, state, &mine, slab_rank, transport)
}

/// The fluid on CUDA GPUs `gpus` as y slabs: one per GPU, or `tuning.slabs` of them spread over
/// the GPUs in contiguous blocks (slab k on `gpus[k G / S]`, so most neighbours share a GPU);
/// one slab is the single-GPU backend.
fn open_cuda(
    cfg: &crate::config::Config,
    phys: &crate::physics::Physics,
    state: Option<FluidSource<'_>>,
    gpus: &[usize],
) -> Result<Box<dyn Backend>> {
    let ordinals = slab_gpus(gpus, cfg.tuning.slabs as usize);
    if ordinals.len() == 1 {
        return cuda::open_backend_from(cfg, phys, state, ordinals[0]);
    }
    cuda::multi::open_backend(cfg, phys, state, &ordinals)
}

/// The first layer of each of `g` slabs of `ly` layers (as even as possible), then `ly`.
pub fn slab_bounds(ly: u32, g: usize) -> Vec<u32> {
    (0..=g)
        .map(|k| (k as u64 * ly as u64 / g as u64) as u32)
        .collect()
}

/// The GPU of each y slab: `slabs` (0: one per GPU; at least one per GPU) over `gpus` in
/// contiguous blocks, slab k on `gpus[k G / S]`.
pub fn slab_gpus(gpus: &[usize], slabs: usize) -> Vec<usize> {
    let s = slabs.max(gpus.len());
    (0..s).map(|k| gpus[k * gpus.len() / s]).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn slabs_spread_over_the_gpus_in_contiguous_blocks() {
        use super::slab_gpus;
        assert_eq!(slab_gpus(&[0], 0), [0]);
        assert_eq!(slab_gpus(&[0, 1], 0), [0, 1]);
        assert_eq!(slab_gpus(&[0], 4), [0, 0, 0, 0]);
        assert_eq!(slab_gpus(&[0, 1], 4), [0, 0, 1, 1]);
        assert_eq!(slab_gpus(&[2, 3], 3), [2, 2, 3]);
        assert_eq!(slab_gpus(&[0, 1, 2, 3], 8), [0, 0, 1, 1, 2, 2, 3, 3]);
        assert_eq!(slab_gpus(&[0, 1, 2], 2), [0, 1, 2]);
    }

    /// Ranks on one host share its GPUs: blocks when there are enough, else round robin.
    #[test]
    fn ranks_take_their_hosts_gpus_in_blocks_or_share_them() {
        use super::rank_gpus;
        let four = [0, 1, 2, 3];
        assert_eq!(rank_gpus(&four, 0, 1), four);
        assert_eq!(rank_gpus(&four, 1, 2), [2, 3]);
        assert_eq!(
            (0..4).map(|l| rank_gpus(&four, l, 4)).collect::<Vec<_>>(),
            [[0], [1], [2], [3]]
        );
        assert_eq!(rank_gpus(&[0, 1, 2], 1, 2), [1, 2]);
        assert_eq!(rank_gpus(&[5], 2, 3), [5]);
        assert_eq!(rank_gpus(&[0, 1], 2, 3), [0]);
    }

    /// Slabs are dealt in proportion to the ranks' GPUs, contiguously, each rank at least its
    /// weight; equal weights give the CPU's contiguous blocks.
    #[test]
    fn slabs_are_dealt_to_ranks_by_their_gpus() {
        use super::weighted_slab_ranks;
        assert_eq!(weighted_slab_ranks(2, &[1, 1]), [0, 1]);
        assert_eq!(weighted_slab_ranks(3, &[1, 2]), [0, 1, 1]);
        assert_eq!(weighted_slab_ranks(8, &[1, 1]), [0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(weighted_slab_ranks(5, &[2, 1, 1]), [0, 0, 1, 2, 2]);
        for (slabs, w) in [
            (7usize, vec![1usize, 2, 1]),
            (4, vec![1, 1, 1, 1]),
            (9, vec![3, 1]),
        ] {
            let r = weighted_slab_ranks(slabs, &w);
            assert_eq!(r.len(), slabs);
            assert!(r.windows(2).all(|p| p[0] <= p[1]), "{r:?}");
            for (rank, &wt) in w.iter().enumerate() {
                assert!(r.iter().filter(|&&x| x == rank).count() >= wt, "{r:?}");
            }
        }
        assert_eq!(
            weighted_slab_ranks(6, &[1, 1, 1]),
            crate::backend::slabbed::slab_ranks(6, 3)
        );
    }
}
