//! Several GPUs of one host: the box is cut along y into one slab of whole cell layers per GPU,
//! driven by one host thread.
//!
//! Each GPU runs the single-GPU kernels on its own layers ([`CudaBackend`] in slab mode: its
//! cell buffer holds only its layers, its draws are keyed by the global cell index). A particle
//! always sits on the GPU that owns its cell on the current (shifted) grid, so cell sums never
//! need to be combined across GPUs and both sides of a slab border rotate with one set of
//! numbers. The price is migration every step: the pass-1 kernel packs each particle whose new
//! cell lies outside the slab (40 B: velocity, position, global id) into a send buffer for the
//! nearer neighbour and frees its slot; the buffers go to the neighbours by copy-engine
//! transfers (peer copies, or through pinned host memory: `MPCBOX_MULTI_TRANSFER=peer|host`),
//! and `mpc_immigrate` unpacks them into free slots (or appends), bins them with the same plan
//! and adds them to the sums before the cell pass. No kernel reads another GPU's memory.
//!
//! The y boundary (Lees-Edwards under shear) needs nothing special: a particle's crossing is
//! applied by the stream kernel wherever it runs, and the wrapped particle then migrates from
//! the top slab to the bottom one like any other.
//!
//! Solutes from outside (device arrays on one of the run's GPUs, or host arrays) are routed:
//! each reaches the GPU owning its cell once, that slab bins and collides it, its velocity
//! comes back (`solute_routes.rs`). The bundled MD engine hands each slab its own copy.
//!
//! Over MPI ranks (`ranks.rs`) each process holds a contiguous block of the box's slabs on its
//! own GPUs. A link between two slabs of one process is a peer copy as above; a link to a slab
//! of another process is staged: the sender's packets go to pinned host memory, cross by the
//! run's [`Transport`] (one exchange per step, every rank's packets in it), and are copied up
//! to the receiver's GPU. Solutes are routed to the ranks owning their cells
//! (`backend::slabbed::route_solutes`); reports, moments and fields are summed over the ranks.
//!
//! Free slots are reused by arrivals and removed by the reorder (they sort last), which also
//! carries the ids along; a download puts every particle back at its global id.
//!
//! | module | role |
//! |---|---|
//! | `slab` | how the box is cut; a slab's state, buffers, upload and download |
//! | `step` | one step of all slabs as a sequence (pass 1, exchange, the rest), reports |
//! | `migrate` | packing counts, the exchange, `mpc_immigrate` (`kernels/migrate.cu`) |
//! | `ranks` | packets to and from other MPI ranks' slabs through the transport |
//! | `rank_peers` | packets between ranks of one host, GPU to GPU (CUDA IPC) |
//! | `transfer` | peer access and pool grants, the raw copies, transfer rates |
//! | `solutes` | which solutes a step takes, their checks, and over ranks their routing to ranks |
//! | `solute_routes` | outside solutes routed to their slabs' GPUs and back (`kernels/solute_routes.cu`) |

mod migrate;
mod open;
mod rank_peers;
mod rank_split;
mod ranks;
mod slab;
mod solute_routes;
mod solutes;
mod step;
pub mod transfer;

pub(in crate::backend::cuda) use slab::Slab;
pub use slab::{largest_cube, min_slab_layers, slab_bounds, slab_bytes};
pub use step::{MULTI_PHASE_NAMES, SOLUTE_PHASE_NAMES};
pub use transfer::{measure_transfer, Transfer, TransferRates};

use super::CudaBackend;
use crate::backend::{
    Backend, DeviceSolutes, FluidMoments, HostHandover, SlabPlace, SlabSolutes, SoluteBatch,
    StepReport,
};
use crate::config::Config;
use crate::error::{MpcError, Result};
use crate::fluid_parts::FluidSource;
use crate::physics::{Physics, StepPlan};
use crate::ranks::{Alone, Transport};
use crate::state::FluidState;
use rank_peers::{RankPeers, SlabRing};
use ranks::RankMessages;
use slab::split_slabs;
use solute_routes::SoluteRoutes;
use step::StepSolutes;

/// The multi-GPU backend: one [`CudaBackend`] in slab mode per slab of this process.
pub struct MultiCudaBackend {
    /// This process's slabs, the box's slabs `first..first + slabs.len()`.
    slabs: Vec<CudaBackend>,
    first: usize,
    /// The rank holding each slab of the box (all 0 in one process).
    slab_rank: Vec<usize>,
    /// The run's processes (`Alone` in one process).
    transport: Box<dyn Transport>,
    /// Solutes routed to the ranks of their cells: each rank passes its own (true) or all
    /// ranks pass the same ones (see `backend::slabbed::SoluteMode`).
    solutes_per_rank: bool,
    /// Solutes from outside routed to the slabs of their cells (made at the first such step).
    routes: Option<SoluteRoutes>,
    /// Over ranks: the host copy of this rank's device-resident solutes (made at the first
    /// such step, grown as needed).
    rank_copy: Option<solutes::RankSoluteCopy>,
    /// Over ranks: the split of this rank's own device solutes on its GPU (`rank_split.rs`).
    rank_split: Option<rank_split::RankSplit>,
    /// Over ranks: the address and count of host solutes taken up to the split and tested
    /// (`take_host_solutes_tested`): consumed by the next step, forgotten if the ranks disagree.
    rank_host_taken: std::cell::Cell<Option<(usize, usize)>>,
    /// First layer of each slab of the box, then Ly.
    bounds: Vec<u32>,
    phys: Physics,
    n_total: usize,
    transfer: Transfer,
    profiling: bool,
    /// Seconds in [pass 1, exchange (counts, transfers, unpack), cells + collide + reorder].
    phase_seconds: [f64; 3],
    /// Seconds of the solutes' phases (see [`SOLUTE_PHASE_NAMES`]) since profiling was on.
    solute_phase_seconds: [f64; step::SOLUTE_PHASES],
    /// Particles sent between GPUs since profiling was switched on.
    migrated: u64,
    /// Seconds of the exchange spent crossing between ranks: [waiting for the packets' copies
    /// to the host, headers and parsing, the ranks' skew (first collective), the transport's
    /// transfer].
    rank_seconds: [f64; 4],
    /// The pinned messages to and from other ranks' slabs (None in one process).
    rank_messages: Option<RankMessages>,
    /// Inboxes shared with ranks of this host (None: every packet goes by the transport).
    rank_peers: Option<RankPeers>,
    /// The step whose pass 1 is queued on every slab (`begin_fluid_step`), not yet finished.
    fluid_begun: Option<u64>,
}

impl MultiCudaBackend {
    /// Open one slab per GPU in `ordinals` holding `state` (None: the config's initial state,
    /// drawn on the GPUs, or on the host between walls: the same particles for any GPU
    /// count).
    pub fn open(
        cfg: &Config,
        phys: &Physics,
        state: Option<&FluidState>,
        ordinals: &[usize],
    ) -> Result<MultiCudaBackend> {
        let slab_rank = vec![0; ordinals.len()];
        let source = state.map(FluidSource::State);
        Self::open_slabs(cfg, phys, source, ordinals, slab_rank, Box::new(Alone))
    }

    /// This process's share of a box cut over MPI ranks: the slabs that `slab_rank` gives to
    /// `transport`'s rank, spread over this rank's GPUs `gpus` in contiguous blocks. Every
    /// rank calls it (collective); `state` is the fluid (None: the config's initial).
    pub fn open_over_ranks(
        cfg: &Config,
        phys: &Physics,
        state: Option<FluidSource<'_>>,
        gpus: &[usize],
        slab_rank: Vec<usize>,
        transport: Box<dyn Transport>,
    ) -> Result<MultiCudaBackend> {
        let me = transport.rank();
        let mine = slab_rank.iter().filter(|&&r| r == me).count();
        let ordinals = crate::backend::slab_gpus(gpus, mine);
        Self::open_slabs(cfg, phys, state, &ordinals, slab_rank, transport)
    }

    /// Slabs (GPUs, or slabs sharing GPUs) of this process.
    pub fn gpus(&self) -> usize {
        self.slabs.len()
    }

    /// The processes (MPI ranks) the box is cut over.
    pub fn ranks(&self) -> usize {
        self.transport.ranks()
    }

    pub fn transfer(&self) -> Transfer {
        self.transfer
    }

    /// Layers of each slab of the box.
    pub fn slab_layers(&self) -> Vec<u32> {
        self.bounds.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// Live particles on each of this process's slabs.
    pub fn slab_particles(&self) -> Vec<usize> {
        self.slabs.iter().map(|s| s.live()).collect()
    }

    /// Time every phase (synchronising all GPUs after each; slower) or not; resets the timers.
    pub fn set_profiling(&mut self, on: bool) {
        self.profiling = on;
        self.phase_seconds = [0.0; 3];
        self.solute_phase_seconds = [0.0; step::SOLUTE_PHASES];
        self.migrated = 0;
        self.rank_seconds = [0.0; 4];
    }

    /// Seconds per phase (see [`MULTI_PHASE_NAMES`]) and particles migrated (arrivals at
    /// this process's slabs) since profiling was switched on.
    pub fn phase_seconds(&self) -> ([f64; 3], u64) {
        (self.phase_seconds, self.migrated)
    }

    /// Seconds per phase of the solutes' routing (see [`SOLUTE_PHASE_NAMES`]) since profiling
    /// was switched on; zero without routed solutes.
    pub fn solute_phase_seconds(&self) -> [f64; step::SOLUTE_PHASES] {
        self.solute_phase_seconds
    }

    /// Seconds of the exchange phase spent crossing between ranks since profiling was
    /// switched on: [waiting for the packets' copies to the host, headers and parsing, the
    /// ranks' skew (the first collective waits for the slowest), the transport's transfer].
    pub fn rank_exchange_seconds(&self) -> [f64; 4] {
        self.rank_seconds
    }

    /// The box's slabs as this process holds them.
    fn ring(&self) -> SlabRing<'_> {
        SlabRing {
            slabs: &self.slabs,
            first: self.first,
            slab_rank: &self.slab_rank,
        }
    }

    /// The slab of the box below (dir 0) or above (dir 1) slab k, periodically.
    fn neighbour(&self, k: usize, dir: usize) -> usize {
        self.ring().neighbour(k, dir)
    }

    /// Slab k of the box as an index into this process's slabs (None: another rank's).
    fn local(&self, k: usize) -> Option<usize> {
        self.ring().local(k)
    }

    /// This process's particles, packed with their global indices for a gather over ranks
    /// (without labels: their places, this rank's after the ranks before it).
    fn packed_particles(&mut self) -> Result<Vec<f64>> {
        let parts = self
            .slabs
            .iter_mut()
            .map(|s| s.download_slab())
            .collect::<Result<Vec<_>>>()?;
        let count: usize = parts.iter().map(|(st, _)| st.len()).sum();
        let counts = self.transport.gather(&[count as f64])?;
        let mut place: u64 = counts[..self.transport.rank()]
            .iter()
            .map(|&c| c as u64)
            .sum();
        let mut mine = Vec::new();
        for (part, ids) in parts {
            let n = part.len() as u64;
            match ids {
                Some(ids) => crate::backend::slabbed::pack_particles(
                    &part,
                    ids.iter().map(|&i| i as u64),
                    &mut mine,
                ),
                None => crate::backend::slabbed::pack_particles(&part, place..place + n, &mut mine),
            }
            place += n;
        }
        Ok(mine)
    }

    /// This process's j-th slab.
    fn slab_of(&self, j: usize) -> &Slab {
        self.slabs[j].slab()
    }
}

impl Backend for MultiCudaBackend {
    /// In one process host solutes are tested as they are staged (`solute_routes/host.rs`);
    /// over ranks each rank's check is agreed before the step (`Backend::agree_on_input`).
    fn tests_host_solute_values(
        &self,
        h: HostHandover,
        _: &[[f64; 3]],
        _: &[[f64; 3]],
        _: &[f64],
    ) -> bool {
        // the split form stages at the finish
        h == HostHandover::OneCall && self.transport.ranks() == 1
    }

    fn time_phases(&mut self, on: bool) {
        self.set_profiling(on);
    }

    fn timed_phases(&self) -> Vec<(&'static str, f64)> {
        let names = MULTI_PHASE_NAMES.iter().chain(&SOLUTE_PHASE_NAMES);
        let secs = self.phase_seconds.iter().chain(&self.solute_phase_seconds);
        names.copied().zip(secs.copied()).collect()
    }

    fn describe(&self) -> String {
        let ids: Vec<String> = self
            .slabs
            .iter()
            .map(|s| s.dev.ordinal.to_string())
            .collect();
        let ranks = match self.transport.ranks() {
            1 => String::new(),
            r => format!(
                ", rank {} of {r} MPI ranks, {}",
                self.transport.rank(),
                match self.rank_peers {
                    Some(_) => "GPU-to-GPU packets with ranks of this host",
                    None => "packets between ranks by MPI",
                }
            ),
        };
        format!(
            "cuda:{} {} × {} ({} cell sums, y slabs {:?}, {}{ranks})",
            ids.join(","),
            self.slabs.len(),
            self.slabs[0].dev.name,
            self.slabs[0].method.name(),
            self.slab_layers(),
            self.transfer.name()
        )
    }

    fn n_fluid(&self) -> usize {
        self.n_total
    }

    fn preferred_reorder_interval(&self) -> u64 {
        20
    }

    fn step(
        &mut self,
        plan: &StepPlan,
        solutes: Option<&mut SoluteBatch<'_>>,
    ) -> Result<StepReport> {
        if self.transport.ranks() > 1 {
            let split = self.solutes_per_rank && !rank_split::off();
            return match solutes.filter(|b| !b.is_empty()) {
                Some(b) if split => self.step_host_split(plan, b),
                s => self.step_over_ranks(plan, s),
            };
        }
        match solutes.filter(|b| !b.is_empty()) {
            Some(b) => self.run_step(plan, StepSolutes::Host(b)),
            None => self.run_step(plan, StepSolutes::None),
        }
    }

    fn set_solutes_per_rank(&mut self, on: bool) -> Result<()> {
        self.solutes_per_rank = on;
        Ok(())
    }

    fn agree_on_input(&self, mine: Result<()>) -> Result<()> {
        let agreed = if self.transport.ranks() > 1 && self.solutes_per_rank {
            crate::ranks::agree_on_input(&*self.transport, mine)
        } else {
            mine
        };
        if agreed.is_err() {
            // no step follows: what was taken for it must not stand in for a later call's
            self.rank_host_taken.set(None);
        }
        agreed
    }

    fn take_host_solutes_tested(
        &mut self,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<bool> {
        self.take_rank_host_solutes(pos, vel, mass)
    }

    fn cuda_ordinal(&self) -> Option<usize> {
        Some(self.slabs[0].dev.ordinal)
    }

    fn check_device_solutes(&mut self, solutes: &DeviceSolutes) -> Result<()> {
        if self.transport.ranks() > 1 {
            // over ranks the step checks them and agrees with every rank (a rank that stopped
            // here alone would leave the others waiting in the step's collectives)
            return Ok(());
        }
        self.check_device_solutes_multi(solutes)
    }

    fn step_device_solutes(
        &mut self,
        plan: &StepPlan,
        solutes: &DeviceSolutes,
    ) -> Result<StepReport> {
        if self.transport.ranks() > 1 && self.solutes_per_rank && !rank_split::off() {
            return self.step_device_split(plan, solutes);
        }
        if self.transport.ranks() > 1 {
            return self.step_device_over_ranks(plan, solutes);
        }
        self.run_step(plan, StepSolutes::Device(*solutes))
    }

    fn slab_places(&self) -> Option<Vec<SlabPlace>> {
        // every slab of the box; over ranks only this process's GPUs are known
        Some(
            self.bounds
                .windows(2)
                .zip(&self.slab_rank)
                .enumerate()
                .map(|(k, (b, &rank))| SlabPlace {
                    ordinal: self.local(k).map_or(0, |j| self.slabs[j].dev.ordinal),
                    layers: [b[0], b[1]],
                    rank,
                })
                .collect(),
        )
    }

    fn step_slab_solutes(
        &mut self,
        plan: &StepPlan,
        solutes: &[SlabSolutes],
    ) -> Result<StepReport> {
        self.step_with_slab_copies(plan, solutes)
    }

    fn begin_fluid_step(&mut self, plan: &StepPlan, n_solutes: usize) -> Result<bool> {
        self.begin_pass_one(plan, n_solutes)
    }

    fn fluid_is_begun(&self) -> bool {
        self.fluid_begun.is_some()
    }

    fn accumulate_fields(&mut self) -> Result<()> {
        for s in &mut self.slabs {
            s.accumulate_field_sums()?;
        }
        Ok(())
    }

    /// Each slab's window (its layers and a halo layer on each side) added into the whole box.
    fn take_field_sums(&mut self) -> Result<Vec<f64>> {
        let mut total = slab::box_field_sums(&mut self.slabs, self.phys.cells)?;
        if self.transport.ranks() > 1 {
            self.transport.sum(&mut total)?;
        }
        Ok(total)
    }

    fn moments(&mut self) -> Result<FluidMoments> {
        let mut total = FluidMoments::default();
        // every slab's reduction queued before any is read: the GPUs reduce at once
        for s in &mut self.slabs {
            s.queue_moments()?;
        }
        for s in &mut self.slabs {
            let m = s.read_moments()?;
            total.particles += m.particles;
            for k in 0..3 {
                total.momentum[k] += m.momentum[k];
            }
            total.kinetic_energy += m.kinetic_energy;
            if total.profile_sum.is_empty() {
                total.profile_sum = m.profile_sum;
                total.profile_count = m.profile_count;
            } else {
                for (a, b) in total.profile_sum.iter_mut().zip(&m.profile_sum) {
                    *a += b;
                }
                for (a, b) in total.profile_count.iter_mut().zip(&m.profile_count) {
                    *a += b;
                }
            }
        }
        crate::backend::slabbed::sum_moments(&*self.transport, total)
    }

    fn download(&mut self) -> Result<FluidState> {
        if self.transport.ranks() > 1 {
            let mine = self.packed_particles()?;
            return crate::backend::slabbed::gather_particles(
                &*self.transport,
                self.n_total,
                &mine,
            );
        }
        let n = self.n_total;
        let mut st = FluidState {
            pos: [vec![0.0; n], vec![0.0; n], vec![0.0; n]],
            vel: [vec![0.0; n], vec![0.0; n], vec![0.0; n]],
        };
        let mut seen = vec![false; n];
        let mut place = 0usize;
        for s in &mut self.slabs {
            let (part, ids) = s.download_slab()?;
            // without labels, particles by place: slab by slab in slot order
            let ids: Vec<usize> = match ids {
                Some(ids) => ids.into_iter().map(|i| i as usize).collect(),
                None => (place..place + part.len()).collect(),
            };
            place += part.len();
            for (j, &i) in ids.iter().enumerate() {
                if i >= n || seen[i] {
                    return Err(MpcError::Device(format!(
                        "multi-GPU download: particle id {i} is out of range or held twice"
                    )));
                }
                seen[i] = true;
                for k in 0..3 {
                    st.pos[k][i] = part.pos[k][j];
                    st.vel[k][i] = part.vel[k][j];
                }
            }
        }
        if let Some(i) = seen.iter().position(|&x| !x) {
            return Err(MpcError::Device(format!(
                "multi-GPU download: particle id {i} is on no GPU"
            )));
        }
        Ok(st)
    }

    fn local_fluid(&mut self) -> Result<crate::checkpoint::LocalFluid> {
        super::snapshot::local_fluid(&mut self.slabs)
    }

    fn fluid_source(&mut self) -> Result<Box<dyn crate::checkpoint::BlockSource + '_>> {
        if !super::snapshot::by_pieces() {
            return Ok(Box::new(super::snapshot::local_fluid(&mut self.slabs)?));
        }
        Ok(Box::new(super::snapshot::live_source(&mut self.slabs)?))
    }

    /// Copies in the GPUs' spare memory, else in host memory within the window.
    fn fluid_snapshot(
        &mut self,
        host_bytes: u64,
    ) -> Result<Option<Box<dyn crate::checkpoint::BlockSource + Send>>> {
        super::snapshot::snapshot_or_host_copy(&mut self.slabs, host_bytes)
    }

    fn upload(&mut self, state: &FluidState) -> Result<()> {
        state
            .validate(&self.phys)
            .map_err(|e| MpcError::Device(format!("uploaded fluid state: {e}")))?;
        if state.len() != self.n_total {
            return Err(MpcError::Device(format!(
                "uploaded fluid state has {} particles, the GPUs hold {}; fix: upload a state \
                 of the same size or open a new backend",
                state.len(),
                self.n_total
            )));
        }
        let mine = self.first..self.first + self.slabs.len();
        let parts = split_slabs(FluidSource::State(state), &self.bounds, mine)?;
        for (s, (part, ids)) in self.slabs.iter_mut().zip(parts) {
            s.upload_slab(&part, &ids)?;
        }
        Ok(())
    }
}

/// Open the multi-GPU backend on `ordinals` (two or more).
pub fn open_backend(
    cfg: &Config,
    phys: &Physics,
    state: Option<FluidSource<'_>>,
    ordinals: &[usize],
) -> Result<Box<dyn Backend>> {
    let slab_rank = vec![0; ordinals.len()];
    let be = MultiCudaBackend::open_slabs(cfg, phys, state, ordinals, slab_rank, Box::new(Alone))?;
    tracing::info!("multi-GPU backend: {}", be.describe());
    Ok(Box::new(be))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thin_slabs_are_refused() {
        let cfg = crate::config::Config::from_ron_str(
            "(cells: (4, 8, 4), particles_per_cell: 5, seed: 3, time_step: 0.1, steps: 10, collision: Srd(angle_deg: 130.0))",
        )
        .unwrap();
        let phys = Physics::from_config(&cfg);
        assert!(min_slab_layers(&phys) >= 3);
        match MultiCudaBackend::open(&cfg, &phys, None, &[0, 1, 2, 3]) {
            Err(MpcError::Device(m)) => assert!(m.contains("at most"), "{m}"),
            Err(e) => panic!("unexpected {e}"),
            Ok(_) => panic!("slabs of 2 layers must be refused"),
        }
    }
}
