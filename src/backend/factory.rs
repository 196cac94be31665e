//! Which backend a config gets: `open` reads the device choice (`Auto` falls back to the CPU),
//! the MPI ranks and the slabs, and builds the CPU, slabbed CPU, one-GPU or multi-GPU backend.
//! The factory sits above the implementations and the `Backend` seam below them, so neither
//! imports the other back.

use super::{cpu, cuda, slab_gpus, slabbed, Backend};
use crate::error::Result;
use crate::fluid_parts::FluidSource;
use crate::state::FluidState;
use crate::timing::phase;

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
            // a checkpoint file streamed into the backend's buffers, a window at a time
            Some(FluidSource::Stored(f)) => {
                let window = crate::checkpoint::WriterSettings::from_knobs().window_bytes();
                let threads = cfg.tuning.cpu_threads;
                return Ok(Box::new(phase("read the fluid", || {
                    cpu::CpuBackend::from_stored(phys.clone(), f, threads, window)
                })?));
            }
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

#[cfg(test)]
mod tests {
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
