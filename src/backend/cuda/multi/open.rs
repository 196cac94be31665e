//! Opening a process's slabs, each phase timed for the run's start-up report
//! (`crate::timing`): the GPUs opened (context, kernels) and the slabs allocated one thread per
//! GPU; each slab filled from a given state (split on the host, uploaded one thread per GPU),
//! from a checkpoint (streamed a window at a time, each piece straight to its GPU), or with the
//! config's initial state drawn on the GPUs themselves (a box without walls: nothing of the
//! fluid on the host); then peer access and the links to other ranks.

use super::rank_peers::{RankPeers, SlabRing};
use super::ranks::RankMessages;
use super::slab::{check_gpu_count, slab_part_of, split_slabs, SlabLayout};
use super::transfer::{self, Transfer};
use super::MultiCudaBackend;
use crate::backend::cuda::init::{count_initial, draw_slabs, InitialCount};
use crate::backend::cuda::{CellSumMethod, CudaBackend, CudaDevice};
use crate::checkpoint::PartedFile;
use crate::config::Config;
use crate::error::{MpcError, Result};
use crate::fluid_parts::{FluidPart, FluidSource};
use crate::physics::Physics;
use crate::ranks::Transport;
use crate::state::FluidState;
use crate::timing::phase;

/// `f` on each of `items` at once, one thread each (a GPU's work); the results in order, or the
/// first error.
pub(in crate::backend::cuda) fn each_at_once<T: Send, R: Send>(
    items: Vec<T>,
    f: impl Fn(usize, T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    if items.len() <= 1 {
        return items
            .into_iter()
            .enumerate()
            .map(|(k, t)| f(k, t))
            .collect();
    }
    std::thread::scope(|scope| {
        let f = &f;
        let handles: Vec<_> = items
            .into_iter()
            .enumerate()
            .map(|(k, t)| scope.spawn(move || f(k, t)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(MpcError::Device(
                        "a thread opening a GPU stopped on an internal error (please report it)"
                            .into(),
                    ))
                })
            })
            .collect()
    })
}

/// Where a process's slabs take their particles from.
enum Fill<'a> {
    /// Parts on the host (a given state, or an initial state between walls).
    Parts(Vec<FluidPart>),
    /// A checkpoint's blocks, streamed.
    Stored(&'a PartedFile),
    /// The config's initial state, drawn on the GPUs.
    Draw,
}

impl MultiCudaBackend {
    /// `ordinals`: the GPU of each of this process's slabs, in order.
    pub(super) fn open_slabs(
        cfg: &Config,
        phys: &Physics,
        state: Option<FluidSource<'_>>,
        ordinals: &[usize],
        slab_rank: Vec<usize>,
        transport: Box<dyn Transport>,
    ) -> Result<MultiCudaBackend> {
        let g = slab_rank.len();
        check_gpu_count(phys, g)?;
        let me = transport.rank();
        let first = slab_rank.partition_point(|&r| r < me);
        if slab_rank.iter().filter(|&&r| r == me).count() != ordinals.len() {
            return Err(MpcError::Device(format!(
                "rank {me}: {} GPUs named for its slabs {slab_rank:?} (please report it)",
                ordinals.len()
            )));
        }
        let method = cfg.tuning.cuda_method();
        if method == CellSumMethod::List {
            return Err(MpcError::Device(
                "the List cell-sum method (tuning.cuda_method or MPCBOX_CUDA_METHOD=list) runs \
                 on one GPU only; fix: choose Fused (the default) or Warp"
                    .into(),
            ));
        }
        let n_total = state.map_or(cfg.n_fluid() as usize, |s| s.len());
        let layout = SlabLayout::new(phys, n_total, g);
        let mine = first..first + ordinals.len();
        let window = crate::checkpoint::WriterSettings::from_knobs().window_bytes();
        let fill = match state {
            Some(FluidSource::State(s)) => {
                s.validate(phys)
                    .map_err(|e| MpcError::Device(format!("fluid state: {e}")))?;
                let parts = phase("split the fluid", || {
                    split_slabs(FluidSource::State(s), &layout.bounds, mine.clone())
                })?;
                Fill::Parts(parts)
            }
            // a checkpoint's values are checked as they are read
            Some(FluidSource::Stored(f)) => Fill::Stored(f),
            _ if phys.walls.is_none() => Fill::Draw,
            // between walls the initial state is drawn on the host: over ranks this process's
            // layers only, in one process whole (one pass, not three)
            Some(FluidSource::Initial(c)) => {
                Fill::Parts(phase("draw the fluid on the host", || {
                    split_slabs(FluidSource::Initial(c), &layout.bounds, mine.clone())
                })?)
            }
            None => Fill::Parts(phase("draw the fluid on the host", || {
                let whole = FluidState::initial(cfg);
                split_slabs(FluidSource::State(&whole), &layout.bounds, mine.clone())
            })?),
        };
        let devices = phase("open the GPUs", || {
            each_at_once(ordinals.to_vec(), |_, ord| CudaDevice::open_for(ord, phys))
        })?;
        let mut draws: Vec<InitialCount> = Vec::new();
        // the slab of each stored particle, kept from the count for the read
        let mut part_map = None;
        let counts: Vec<usize> = match &fill {
            Fill::Parts(parts) => parts.iter().map(|(st, _)| st.len()).collect(),
            Fill::Stored(f) => {
                let (counts, map) = phase("count the checkpoint's particles", || {
                    let y_range = crate::fluid_parts::slabs_y_range(&layout.bounds, mine.clone());
                    let part_of = slab_part_of(&layout.bounds, mine.clone());
                    f.count_parts(mine.len(), y_range, part_of, window)
                })?;
                part_map = map;
                counts.into_iter().map(|c| c as usize).collect()
            }
            Fill::Draw => {
                draws = phase("count the initial particles", || {
                    devices
                        .iter()
                        .zip(mine.clone())
                        .map(|(dev, k)| {
                            let layers = [layout.bounds[k], layout.bounds[k + 1]];
                            count_initial(dev, cfg, phys, layers)
                        })
                        .collect::<Result<Vec<_>>>()
                })?;
                draws.iter().map(|c| c.kept as usize).collect()
            }
        };
        let transfer = Transfer::from_env_or(transfer::neighbours_have_peer_access(&devices));
        let staged = transfer == Transfer::Host;
        let mut slabs = phase("allocate the slabs", || {
            let items: Vec<(CudaDevice, usize)> = devices.into_iter().zip(counts).collect();
            each_at_once(items, |j, (dev, live)| {
                CudaBackend::open_slab(dev, phys, method, staged, &layout, first + j, live)
            })
        })?;
        match fill {
            Fill::Parts(parts) => phase("upload the fluid", || {
                let items: Vec<_> = slabs.iter_mut().zip(parts).collect();
                each_at_once(items, |_, (s, (part, ids))| s.upload_slab(&part, &ids))
            })
            .map(drop)?,
            Fill::Stored(f) => phase("read the checkpoint", || {
                let map = part_map.as_ref();
                read_slabs(&mut slabs, f, &layout.bounds, mine.clone(), window, map)
            })?,
            Fill::Draw => phase("draw the fluid on the GPUs", || {
                draw_slabs(&mut slabs, cfg, &draws)
            })?,
        }
        phase("open peer access", || transfer::connect_slabs(&slabs))?;
        // links from this process's slabs to slabs of other ranks (their packets cross in
        // pinned messages; as many come in as go out)
        let remote_links = (first..first + slabs.len())
            .flat_map(|k| [(k + g - 1) % g, (k + 1) % g])
            .filter(|&n| slab_rank[n] != me)
            .count();
        let rank_messages = match remote_links {
            0 => None,
            links => Some(RankMessages::new(
                &slabs[0].dev.ctx,
                links,
                layout.send_capacity(),
                transport.ranks(),
            )?),
        };
        let rank_peers = if transport.ranks() > 1 {
            let ring = SlabRing {
                slabs: &slabs,
                first,
                slab_rank: &slab_rank,
            };
            RankPeers::open(&ring, transport.as_ref(), layout.send_capacity())?
        } else {
            None
        };
        Ok(MultiCudaBackend {
            slabs,
            first,
            slab_rank,
            transport,
            solutes_per_rank: false,
            routes: None,
            rank_copy: None,
            rank_split: None,
            rank_host_taken: std::cell::Cell::new(None),
            bounds: layout.bounds,
            phys: phys.clone(),
            n_total,
            transfer,
            profiling: false,
            phase_seconds: [0.0; 3],
            solute_phase_seconds: [0.0; super::step::SOLUTE_PHASES],
            migrated: 0,
            rank_seconds: [0.0; 4],
            rank_messages,
            rank_peers,
            fluid_begun: None,
        })
    }
}

/// Slabs `mine` of the box (this process's `slabs`) filled from the checkpoint `f`, a window at
/// a time: each piece of each section goes straight to its slab's GPU (each particle's slab
/// from `map`, the count's, where it kept one).
fn read_slabs(
    slabs: &mut [CudaBackend],
    f: &PartedFile,
    bounds: &[u32],
    mine: std::ops::Range<usize>,
    window: u64,
    map: Option<&crate::checkpoint::PartMap>,
) -> Result<()> {
    let y_range = crate::fluid_parts::slabs_y_range(bounds, mine.clone());
    let part_of = slab_part_of(bounds, mine.clone());
    let mut staging = slabs
        .iter()
        .map(|s| super::super::upload_slots::UploadSlots::new(&s.dev.ctx))
        .collect::<Result<Vec<_>>>()?;
    let counts = f.stream_parts(
        slabs.len(),
        y_range,
        part_of,
        window,
        map,
        &mut |j, s, at, v| slabs[j].put_values(&mut staging[j], s, at as usize, v),
    )?;
    for slots in &staging {
        slots.finish()?;
    }
    for (s, n) in slabs.iter_mut().zip(counts) {
        s.set_slab_particles(n as usize)?;
    }
    Ok(())
}
