//! The fluid on the CPU cut into y slabs of whole cell layers: several slabs in this process
//! (`tuning.slabs`), spread over processes (MPI ranks through `ranks::Transport`), or both.
//!
//! Each slab is a [`CpuBackend`] in slab mode (`backend::cpu::slab`): it holds the particles
//! whose cell on the step's shifted grid lies in its layers. A step streams every slab, sends
//! each particle that streamed into another slab's cells to it (within the process by moving
//! the packet, to another process through the transport, routed there by the cell it lands
//! in: any distance, any number of layers), then collides every slab. Step reports, moments
//! and field sums are summed over slabs and processes; a download gathers the particles to
//! their global indices, so any cut of the box returns the same state as the whole box does.
//! Draws are keyed by the global cell: every cut collides with the same numbers, and differs
//! from the whole box only by the order of the sums inside a cell (to rounding).

use std::sync::Arc;

mod collect;
mod solutes;

pub(crate) use collect::{gather_particles, pack_particles, sum_moments};
pub use solutes::SoluteMode;
pub(crate) use solutes::{return_solute_velocities, route_solutes};

use super::cpu::slab::PACKET_WORDS;
use super::cpu::{worker_pool, CpuBackend};
use super::{slab_bounds_for, Backend, FluidMoments, SoluteBatch, StepReport};
use crate::error::{ConfigError, MpcError, Result};
use crate::fluid_parts::FluidSource;
use crate::physics::{Physics, StepPlan, WallMomentum};
use crate::ranks::Transport;
use crate::state::FluidState;

/// The rank holding each of `slabs` slabs over `ranks` processes: contiguous blocks, slab k on
/// rank k R / S (as GPUs get slabs, `backend::slab_gpus`).
pub fn slab_ranks(slabs: usize, ranks: usize) -> Vec<usize> {
    (0..slabs).map(|k| k * ranks / slabs).collect()
}

pub struct SlabbedCpuBackend {
    phys: Physics,
    /// This process's slabs, in global order from `first`.
    slabs: Vec<CpuBackend>,
    first: usize,
    /// First layer of each slab of the box, then Ly.
    bounds: Vec<u32>,
    /// The rank holding each slab of the box.
    slab_rank: Vec<usize>,
    transport: Box<dyn Transport>,
    n_total: usize,
    threads: usize,
    solute_mode: SoluteMode,
}

impl SlabbedCpuBackend {
    /// The box of `phys` cut into `slabs` y slabs over the transport's ranks; `source` is the
    /// whole fluid or the config's initial state, of which each process keeps (or generates
    /// only) the particles in its slabs' layers.
    pub fn new(
        phys: Physics,
        source: FluidSource<'_>,
        slabs: usize,
        threads: usize,
        transport: Box<dyn Transport>,
    ) -> Result<SlabbedCpuBackend> {
        let (ranks, me) = (transport.ranks(), transport.rank());
        let ly = phys.cells[1] as usize;
        if slabs < ranks || slabs > ly {
            return Err(MpcError::Config(ConfigError {
                field: "tuning.slabs".into(),
                problem: format!(
                    "{slabs} y slabs over {ranks} processes of a box with cells[1] = {ly}"
                ),
                fix: format!("between {ranks} (one per process) and {ly} (one cell layer each)"),
            }));
        }
        if let FluidSource::State(state) = source {
            state
                .validate(&phys)
                .map_err(|e| MpcError::Device(format!("initial fluid state: {e}")))?;
        }
        let bounds = slab_bounds_for(&phys, slabs);
        let slab_rank = slab_ranks(slabs, ranks);
        let first = slab_rank.partition_point(|&r| r < me);
        let count = slab_rank.iter().filter(|&&r| r == me).count();
        let pool = worker_pool(threads)?;
        let mut b = SlabbedCpuBackend {
            slabs: Vec::with_capacity(count),
            first,
            bounds,
            slab_rank,
            n_total: source.len(),
            threads: pool.current_num_threads(),
            solute_mode: SoluteMode::default(),
            transport,
            phys,
        };
        b.slabs = b.cut(source, &pool)?;
        Ok(b)
    }

    /// This process's slabs holding the particles of `source` in their layers.
    fn cut(
        &self,
        source: FluidSource<'_>,
        pool: &Arc<rayon::ThreadPool>,
    ) -> Result<Vec<CpuBackend>> {
        let (top, first, bounds) = (self.phys.cells[1] - 1, self.first, &self.bounds);
        let mine = first..first + self.local_count();
        let y_range = crate::fluid_parts::slabs_y_range(bounds, mine.clone());
        let parts = source.parts(mine.len(), y_range, |y| {
            let iy = (y.floor() as u32).min(top);
            (bounds.partition_point(|&b| b <= iy) - 1).checked_sub(first)
        })?;
        parts
            .into_iter()
            .enumerate()
            .map(|(j, (st, ids))| {
                let k = self.first + j;
                let layers = [self.bounds[k], self.bounds[k + 1]];
                CpuBackend::new_slab(self.phys.clone(), st, ids, pool.clone(), layers)
            })
            .collect()
    }

    /// This process's particles, packed with their global indices for a gather.
    fn packed_particles(&self) -> Vec<f64> {
        let mut mine = Vec::new();
        for s in &self.slabs {
            let (st, ids) = s.particles();
            pack_particles(st, ids.iter().copied(), &mut mine);
        }
        mine
    }

    fn local_count(&self) -> usize {
        let me = self.transport.rank();
        self.slab_rank.iter().filter(|&&r| r == me).count()
    }

    fn slab_of_layer(&self, iy: u32) -> usize {
        self.bounds.partition_point(|&b| b <= iy) - 1
    }

    fn layer_of_cell(&self, cell: u32) -> u32 {
        cell / (self.phys.cells[0] * self.phys.cells[2])
    }

    /// The whole fluid's sums of `values` (the same length on every process).
    fn summed(&self, mut values: Vec<f64>) -> Result<Vec<f64>> {
        self.transport.sum(&mut values)?;
        Ok(values)
    }
}

/// The figures of a step report as one vector (to be summed over processes), and back.
pub(crate) fn report_to_vec(r: &StepReport) -> Vec<f64> {
    let mut v = vec![
        r.relative_energy,
        r.relative_dof,
        r.kinetic_stress_sum,
        r.collisional_stress_sum,
    ];
    v.extend(r.wall_momentum.iter().flatten());
    v
}

pub(crate) fn report_from_vec(v: &[f64]) -> StepReport {
    let mut wall = WallMomentum::default();
    for (s, w) in wall.iter_mut().enumerate() {
        w.copy_from_slice(&v[4 + 3 * s..7 + 3 * s]);
    }
    StepReport {
        relative_energy: v[0],
        relative_dof: v[1],
        kinetic_stress_sum: v[2],
        collisional_stress_sum: v[3],
        wall_momentum: wall,
    }
}

impl Backend for SlabbedCpuBackend {
    fn describe(&self) -> String {
        let slabs = self.bounds.len() - 1;
        match self.transport.ranks() {
            1 => format!("cpu, {slabs} y slabs ({} threads)", self.threads),
            r => format!(
                "cpu, {slabs} y slabs over {r} MPI ranks ({} threads per rank)",
                self.threads
            ),
        }
    }

    fn n_fluid(&self) -> usize {
        self.n_total
    }

    fn step(
        &mut self,
        plan: &StepPlan,
        solutes: Option<&mut SoluteBatch<'_>>,
    ) -> Result<StepReport> {
        let me = self.transport.rank();
        let slabs = self.bounds.len() - 1;
        let bounds = self.bounds.clone();
        let owner = move |iy: u32| bounds.partition_point(|&b| b <= iy) - 1;
        let mut out: Vec<Vec<f64>> = vec![Vec::new(); slabs];
        let streamed: Vec<(f64, WallMomentum)> = self
            .slabs
            .iter_mut()
            .map(|s| s.stream_and_pack(plan, &owner, &mut out))
            .collect();
        let mut to_rank: Vec<Vec<f64>> = vec![Vec::new(); self.transport.ranks()];
        for (k, packets) in out.iter_mut().enumerate() {
            if self.slab_rank[k] != me {
                to_rank[self.slab_rank[k]].append(packets);
            }
        }
        for p in self
            .transport
            .exchange(&to_rank)?
            .chunks_exact(PACKET_WORDS)
        {
            let loc = self.phys.locate(plan, [p[0], p[1], p[2]]);
            let k = self.slab_of_layer(self.layer_of_cell(loc.cell));
            if self.slab_rank[k] != me {
                return Err(MpcError::Device(format!(
                    "a fluid particle arrived at rank {me} for slab {k} of rank {} (a migration \
                     error: please report it)",
                    self.slab_rank[k]
                )));
            }
            out[k].extend_from_slice(p);
        }
        let (mut held, by_slab) = self.solutes_by_slab(plan, solutes.as_deref())?;
        let mut total = vec![0.0; 10];
        for (j, (slab, (kinetic, wall))) in self.slabs.iter_mut().zip(streamed).enumerate() {
            let mut part = solutes::subset(&held, &by_slab[j]);
            let mut batch = part.batch();
            let r =
                slab.unpack_and_collide(plan, &out[self.first + j], batch.as_mut(), kinetic, wall)?;
            solutes::write_back(&mut held, &by_slab[j], &part);
            for (t, x) in total.iter_mut().zip(report_to_vec(&r)) {
                *t += x;
            }
        }
        return_solute_velocities(&*self.transport, self.solute_mode, &held, solutes)?;
        Ok(report_from_vec(&self.summed(total)?))
    }

    fn moments(&mut self) -> Result<FluidMoments> {
        let mut mine = FluidMoments {
            profile_sum: vec![0.0; self.phys.profile_bins()],
            profile_count: vec![0; self.phys.profile_bins()],
            ..Default::default()
        };
        for s in &mut self.slabs {
            let m = s.moments()?;
            mine.particles += m.particles;
            for k in 0..3 {
                mine.momentum[k] += m.momentum[k];
            }
            mine.kinetic_energy += m.kinetic_energy;
            for (a, b) in mine.profile_sum.iter_mut().zip(&m.profile_sum) {
                *a += b;
            }
            for (a, b) in mine.profile_count.iter_mut().zip(&m.profile_count) {
                *a += b;
            }
        }
        sum_moments(&*self.transport, mine)
    }

    fn download(&mut self) -> Result<FluidState> {
        let mine = self.packed_particles();
        gather_particles(&*self.transport, self.n_total, &mine)
    }

    fn local_fluid(&mut self) -> Result<crate::checkpoint::LocalFluid> {
        let parts = self
            .slabs
            .iter()
            .map(|s| {
                let (st, ids) = s.particles();
                (st.clone(), ids.to_vec())
            })
            .collect();
        Ok(crate::checkpoint::LocalFluid::Parts(parts))
    }

    fn upload(&mut self, state: &FluidState) -> Result<()> {
        state
            .validate(&self.phys)
            .map_err(|e| MpcError::Device(format!("uploaded fluid state: {e}")))?;
        let pool = worker_pool(self.threads)?;
        self.slabs = self.cut(FluidSource::State(state), &pool)?;
        self.n_total = state.len();
        Ok(())
    }

    fn accumulate_fields(&mut self) -> Result<()> {
        self.slabs
            .iter_mut()
            .try_for_each(|s| s.accumulate_fields())
    }

    fn take_field_sums(&mut self) -> Result<Vec<f64>> {
        let mut total = vec![0.0; crate::fields::FIELD_SUMS * self.phys.n_cells()];
        for s in &mut self.slabs {
            for (t, x) in total.iter_mut().zip(s.take_field_sums()?) {
                *t += x;
            }
        }
        self.summed(total)
    }

    fn agree_on_input(&self, mine: Result<()>) -> Result<()> {
        if self.transport.ranks() > 1 && self.solute_mode == SoluteMode::PerRank {
            return crate::ranks::agree_on_input(&*self.transport, mine);
        }
        mine
    }

    fn set_solutes_per_rank(&mut self, on: bool) -> Result<()> {
        self.solute_mode = if on {
            SoluteMode::PerRank
        } else {
            SoluteMode::Replicated
        };
        Ok(())
    }

    fn preferred_reorder_interval(&self) -> u64 {
        self.slabs
            .first()
            .map_or(4, |s| s.preferred_reorder_interval())
    }
}
