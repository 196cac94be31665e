//! The CPU reference backend (rayon). Every other backend is checked against this one.
//!
//! One step, in passes (the same split the CUDA backend uses):
//! 1. **stream + bin** (per particle): move, apply Lees-Edwards and periodic wrapping, then bin
//!    on the shifted grid: cell index and LE image per particle (solutes are binned too).
//! 2. **cell lists**: counting sort of particle indices by cell (atomic counts, prefix sum,
//!    scatter, then each cell's list sorted so the summation order is deterministic).
//! 3. **cell pass** (per cell): mass-weighted sums, cell velocity, random axis, MBS factor.
//! 4. **collide** (per particle): rotate relative velocity, scale, write back; solutes too.
//! 5. optionally **reorder** fluid particles by cell, for memory locality.
//!
//! Reductions are done over fixed-length chunks and added in chunk order, so results are
//! bitwise identical for any number of threads.

mod collide;
mod memory;
mod resume;
mod rules;
pub(crate) mod slab;

pub use memory::{check_fits, check_fits_in, footprint};

use std::sync::atomic::{AtomicU32, Ordering};

use rayon::prelude::*;

use super::{Backend, FluidMoments, SoluteBatch, StepReport};
use crate::error::{MpcError, Result};
use crate::fixed_sums::GlobalKind;
use crate::physics::sums::CellAccumulator;
use crate::physics::{CellParams, CellSums, Physics, StepPlan, WallMomentum, Walls};
use crate::state::{FluidState, REDUCTION_CHUNK};

/// A raw pointer shared by rayon workers that write disjoint elements.
#[derive(Clone, Copy)]
struct DisjointWriter<T>(*mut T);
// SAFETY: used only where every index is written by exactly one worker (see each use).
unsafe impl<T: Send> Send for DisjointWriter<T> {}
// SAFETY: as for Send: shared between workers only where their writes are disjoint.
unsafe impl<T: Send> Sync for DisjointWriter<T> {}

impl<T> DisjointWriter<T> {
    /// Through a method, so closures capture the wrapper (Send + Sync), not the bare pointer.
    #[inline(always)]
    fn at(&self, i: usize) -> *mut T {
        // SAFETY: callers stay inside the allocation the pointer came from.
        unsafe { self.0.add(i) }
    }
}

pub struct CpuBackend {
    phys: Physics,
    state: FluidState,
    pool: std::sync::Arc<rayon::ThreadPool>,
    /// Cell of each particle: fluid first, then solutes.
    cell_of: Vec<u32>,
    /// Lees-Edwards image of each fluid particle at binning.
    image_of: Vec<i8>,
    /// Lees-Edwards image of each solute (any number of periods away).
    solute_image: Vec<i32>,
    cell_start: Vec<u32>,
    cell_fill: Vec<AtomicU32>,
    /// Particle indices grouped by cell, ascending within a cell.
    order: Vec<u32>,
    params: Vec<CellParams>,
    /// Buffers the reorder gathers into (then swapped with `state`).
    spare: FluidState,
    /// Collision rules other than plain SRD: per-cell parameters, per-particle inputs.
    rules: Option<rules::RuleState>,
    /// Flow-field sums per cell (`crate::fields`), allocated at the first sample.
    field_sums: Vec<f64>,
    /// First global cell held: 0 for the whole box; a y slab of a box cut over processes
    /// ([`slab`]) holds the cells `[cell_lo, cell_lo + params.len())`, and `cell_of` then holds
    /// cells relative to it from the migration on.
    cell_lo: usize,
    /// Global particle index of each particle of a slab (travels with it); empty for the box.
    ids: Vec<u64>,
}

impl CpuBackend {
    pub fn new(phys: Physics, state: FluidState, threads: usize) -> Result<CpuBackend> {
        state
            .validate(&phys)
            .map_err(|e| MpcError::Device(format!("initial fluid state: {e}")))?;
        let ncells = phys.n_cells();
        Self::with_cells(phys, state, worker_pool(threads)?, 0, ncells)
    }

    /// A backend holding the cells `[cell_lo, cell_lo + ncells)`.
    fn with_cells(
        phys: Physics,
        state: FluidState,
        pool: std::sync::Arc<rayon::ThreadPool>,
        cell_lo: usize,
        ncells: usize,
    ) -> Result<CpuBackend> {
        Ok(CpuBackend {
            cell_start: vec![0; ncells + 1],
            cell_fill: (0..ncells).map(|_| AtomicU32::new(0)).collect(),
            params: vec![CellParams::default(); ncells],
            spare: FluidState::default(),
            field_sums: Vec::new(),
            rules: None,
            cell_of: Vec::new(),
            image_of: Vec::new(),
            solute_image: Vec::new(),
            order: Vec::new(),
            phys,
            state,
            pool,
            cell_lo,
            ids: Vec::new(),
        })
    }

    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Pass 1: stream the fluid and bin it; returns the kinetic stress sum when measured and
    /// the momentum given to walls.
    fn stream_and_bin(&mut self, plan: &StepPlan) -> (f64, WallMomentum) {
        let phys = &self.phys;
        let nf = self.state.len();
        let [px, py, pz] = &mut self.state.pos;
        let [vx, vy, vz] = &mut self.state.vel;
        let ch = REDUCTION_CHUNK;
        let parts: Vec<(f64, WallMomentum)> = (
            px.par_chunks_mut(ch),
            py.par_chunks_mut(ch),
            pz.par_chunks_mut(ch),
            vx.par_chunks_mut(ch),
            vy.par_chunks_mut(ch),
            vz.par_chunks_mut(ch),
            self.cell_of[..nf].par_chunks_mut(ch),
            self.image_of[..nf].par_chunks_mut(ch),
        )
            .into_par_iter()
            .map(|(x, y, z, ux, uy, uz, cell, image)| {
                let mut kin = 0.0;
                let mut wall = WallMomentum::default();
                for i in 0..x.len() {
                    let v = [ux[i], uy[i], uz[i]];
                    if plan.measure_stress {
                        let k = phys.kinetic_stress(y[i] as f64, v);
                        kin += phys.global_term(GlobalKind::Energy, k);
                    }
                    let (p, v) = phys.stream_accounted(plan, [x[i], y[i], z[i]], v, &mut wall);
                    (x[i], y[i], z[i]) = (p[0], p[1], p[2]);
                    (ux[i], uy[i], uz[i]) = (v[0], v[1], v[2]);
                    let loc = phys.locate(plan, [p[0] as f64, p[1] as f64, p[2] as f64]);
                    cell[i] = loc.cell;
                    image[i] = loc.image as i8;
                }
                (kin, wall)
            })
            .collect();
        let mut wall = WallMomentum::default();
        for (_, w) in &parts {
            add_wall_momentum(&mut wall, w);
        }
        (parts.iter().map(|p| p.0).sum(), wall)
    }

    /// Pass 2: counting sort of all particle indices by cell.
    fn build_cell_lists(&mut self) {
        let ncells = self.params.len();
        let np = self.cell_of.len();
        self.cell_fill
            .par_iter()
            .for_each(|c| c.store(0, Ordering::Relaxed));
        self.cell_of.par_iter().for_each(|&c| {
            self.cell_fill[c as usize].fetch_add(1, Ordering::Relaxed);
        });
        let mut acc = 0u32;
        for c in 0..ncells {
            self.cell_start[c] = acc;
            acc += self.cell_fill[c].swap(acc, Ordering::Relaxed);
        }
        self.cell_start[ncells] = acc;
        self.order.resize(np, 0);
        let out = DisjointWriter(self.order.as_mut_ptr());
        let fill = &self.cell_fill;
        self.cell_of.par_iter().enumerate().for_each(|(i, &c)| {
            let slot = fill[c as usize].fetch_add(1, Ordering::Relaxed) as usize;
            // SAFETY: each slot is handed out once by the atomic cursor and lies in 0..np.
            unsafe { *out.at(slot) = i as u32 };
        });
        let starts = &self.cell_start;
        let out = DisjointWriter(self.order.as_mut_ptr());
        (0..ncells)
            .into_par_iter()
            .with_min_len(4096)
            .for_each(|c| {
                let (lo, hi) = (starts[c] as usize, starts[c + 1] as usize);
                if hi - lo > 1 {
                    // SAFETY: cell segments [lo, hi) are disjoint and inside `order`.
                    let seg = unsafe { std::slice::from_raw_parts_mut(out.at(lo), hi - lo) };
                    seg.sort_unstable();
                }
            });
    }

    /// Pass 3: per-cell sums and collision parameters (cells cut by a wall filled with
    /// virtual particles). Returns (Σ E_rel, Σ (Nc − 1)) of the real particles and the
    /// momentum they gave the walls in the collision.
    fn cell_pass(
        &mut self,
        plan: &StepPlan,
        solutes: Option<&SoluteBatch<'_>>,
    ) -> (f64, f64, WallMomentum) {
        let phys = &self.phys;
        let nf = self.state.len();
        let st = &self.state;
        let order = &self.order;
        let starts = &self.cell_start;
        let images = &self.image_of;
        let solute_images = &self.solute_image;
        let cell_lo = self.cell_lo;
        let ch = 4096;
        let parts: Vec<(f64, f64, WallMomentum)> = self
            .params
            .par_chunks_mut(ch)
            .enumerate()
            .map(|(k, chunk)| {
                let mut e_rel = 0.0;
                let mut dof = 0.0;
                let mut wall = WallMomentum::default();
                for (j, out) in chunk.iter_mut().enumerate() {
                    let c = k * ch + j;
                    let mut acc = CellAccumulator::new(phys.sums.as_ref(), phys.rule);
                    for &idx in &order[starts[c] as usize..starts[c + 1] as usize] {
                        let idx = idx as usize;
                        let (m, mut v, image) = if idx < nf {
                            (phys.mass, st.velocity(idx), images[idx] as i32)
                        } else {
                            let s = solutes.expect("solute index without solutes");
                            (s.mass[idx - nf], s.vel[idx - nf], solute_images[idx - nf])
                        };
                        v[0] += phys.image_velocity(image);
                        acc.add(m, v, idx >= nf);
                    }
                    let sums = acc.sums(phys.mass);
                    if sums.count >= 2 {
                        e_rel += phys.global_term(GlobalKind::Energy, sums.relative_energy());
                        dof += (sums.count - 1) as f64;
                    }
                    // draws are keyed by the global cell
                    let g = (c + cell_lo) as u32;
                    *out = match &phys.walls {
                        Some(w) => fill_and_params(phys, w, plan, g, &sums, &mut wall),
                        None => phys.cell_params(plan.step, g, &sums),
                    };
                }
                (e_rel, dof, wall)
            })
            .collect();
        let mut total = (0.0, 0.0, WallMomentum::default());
        for (e, d, w) in &parts {
            total.0 += e;
            total.1 += d;
            add_wall_momentum(&mut total.2, w);
        }
        total
    }

    /// Pass 4: collide every particle. Returns the collisional stress sum when measured, over
    /// every particle of the collision: fluid, then solutes.
    fn collide(&mut self, plan: &StepPlan, solutes: Option<&mut SoluteBatch<'_>>) -> f64 {
        let (c, params) = self.collision(plan);
        let phys = c.phys;
        let rule = |cp: &CellParams, image: i32, v: [f64; 3], _: usize| phys.collide(cp, image, v);
        collide::collide_particles(c, solutes, params, |cp| cp.active, rule)
    }

    /// What the collision pass of step `plan` works on, and the cells' SRD parameters.
    fn collision<'a>(
        &'a mut self,
        plan: &'a StepPlan,
    ) -> (collide::Collision<'a>, &'a [CellParams]) {
        let c = collide::Collision {
            phys: &self.phys,
            plan,
            state: &mut self.state,
            cell_of: &self.cell_of,
            image_of: &self.image_of,
            solute_image: &self.solute_image,
        };
        (c, &self.params)
    }

    /// Passes 2-5, after streaming and binning: cell lists, cell pass, collision, reorder.
    fn finish_step(
        &mut self,
        plan: &StepPlan,
        mut solutes: Option<&mut SoluteBatch<'_>>,
        kinetic: f64,
        mut wall_momentum: WallMomentum,
    ) -> StepReport {
        self.build_cell_lists();
        let ((relative_energy, relative_dof), collisional) = if self.phys.rule.is_plain_srd() {
            let (e, d, exchanged) = self.cell_pass(plan, solutes.as_deref());
            add_wall_momentum(&mut wall_momentum, &exchanged);
            ((e, d), self.collide(plan, solutes.as_deref_mut()))
        } else {
            let (energy, collisional, exchanged) = self.rules_step(plan, solutes);
            add_wall_momentum(&mut wall_momentum, &exchanged);
            (energy, collisional)
        };
        if plan.reorder {
            self.reorder();
        }
        StepReport {
            relative_energy,
            relative_dof,
            kinetic_stress_sum: kinetic,
            collisional_stress_sum: collisional,
            wall_momentum,
        }
    }

    /// Pass 5: permute fluid particles into cell order (solute entries of the list skipped),
    /// one parallel gather into the spare buffers, which then swap with the live ones.
    fn reorder(&mut self) {
        let nf = self.state.len();
        let perm: Vec<u32> = self
            .order
            .par_iter()
            .copied()
            .filter(|&i| (i as usize) < nf)
            .collect();
        let spare = &mut self.spare;
        for k in 0..3 {
            spare.pos[k].resize(nf, 0.0);
            spare.vel[k].resize(nf, 0.0);
        }
        let src = &self.state;
        let [px, py, pz] = &mut spare.pos;
        let [vx, vy, vz] = &mut spare.vel;
        let ch = REDUCTION_CHUNK;
        (
            px.par_chunks_mut(ch),
            py.par_chunks_mut(ch),
            pz.par_chunks_mut(ch),
            vx.par_chunks_mut(ch),
            vy.par_chunks_mut(ch),
            vz.par_chunks_mut(ch),
            perm.par_chunks(ch),
        )
            .into_par_iter()
            .for_each(|(x, y, z, ux, uy, uz, idx)| {
                for (j, &i) in idx.iter().enumerate() {
                    let i = i as usize;
                    (x[j], y[j], z[j]) = (src.pos[0][i], src.pos[1][i], src.pos[2][i]);
                    (ux[j], uy[j], uz[j]) = (src.vel[0][i], src.vel[1][i], src.vel[2][i]);
                }
            });
        std::mem::swap(&mut self.state, &mut self.spare);
        if !self.ids.is_empty() {
            self.ids = perm.iter().map(|&i| self.ids[i as usize]).collect();
        }
    }
}

impl Backend for CpuBackend {
    fn describe(&self) -> String {
        format!("cpu ({} threads)", self.threads())
    }

    fn accumulate_fields(&mut self) -> Result<()> {
        use crate::fields::{field_cell, FIELD_SUMS};
        let cells = self.phys.cells;
        if self.field_sums.is_empty() {
            self.field_sums = vec![0.0; FIELD_SUMS * self.phys.n_cells()];
        }
        let st = &self.state;
        // in particle order, so the sums do not depend on the thread count
        for i in 0..st.len() {
            let [ix, iy, iz] = field_cell(cells, [st.pos[0][i], st.pos[1][i], st.pos[2][i]]);
            let c = ((iy * cells[2] + iz) * cells[0] + ix) as usize;
            let v = [st.vel[0][i], st.vel[1][i], st.vel[2][i]];
            let f = &mut self.field_sums[FIELD_SUMS * c..FIELD_SUMS * (c + 1)];
            f[0] += 1.0;
            f[1] += v[0];
            f[2] += v[1];
            f[3] += v[2];
            f[4] += v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
        }
        Ok(())
    }

    fn take_field_sums(&mut self) -> Result<Vec<f64>> {
        let n = crate::fields::FIELD_SUMS * self.phys.n_cells();
        let mut sums = std::mem::take(&mut self.field_sums);
        sums.resize(n, 0.0);
        Ok(sums)
    }

    fn n_fluid(&self) -> usize {
        self.state.len()
    }

    fn step(
        &mut self,
        plan: &StepPlan,
        solutes: Option<&mut SoluteBatch<'_>>,
    ) -> Result<StepReport> {
        let nf = self.state.len();
        let ns = solutes.as_ref().map_or(0, |s| s.len());
        self.cell_of.resize(nf + ns, 0);
        self.image_of.resize(nf, 0);
        self.solute_image.resize(ns, 0);
        let pool = self.pool.clone();
        let report = pool.install(|| {
            let (kinetic, wall_momentum) = self.stream_and_bin(plan);
            if let Some(s) = solutes.as_deref() {
                for j in 0..s.len() {
                    let loc = self.phys.locate_solute(plan, s.pos[j]);
                    self.cell_of[nf + j] = loc.cell;
                    self.solute_image[j] = loc.image;
                }
            }
            self.finish_step(plan, solutes, kinetic, wall_momentum)
        });
        Ok(report)
    }

    fn moments(&mut self) -> Result<FluidMoments> {
        let phys = &self.phys;
        let st = &self.state;
        let bins = phys.profile_bins();
        let n = st.len();
        let m = phys.mass;
        use GlobalKind::Momentum;
        let parts: Vec<(Vec<f64>, Vec<u64>, [f64; 4])> = self.pool.install(|| {
            (0..n.div_ceil(REDUCTION_CHUNK))
                .into_par_iter()
                .map(|c| {
                    let mut prof = vec![0.0; bins];
                    let mut cnt = vec![0u64; bins];
                    let mut s = [0.0; 4];
                    for i in c * REDUCTION_CHUNK..((c + 1) * REDUCTION_CHUNK).min(n) {
                        let v = st.velocity(i);
                        let e = 0.5 * m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
                        s[0] += phys.global_term(Momentum, m * v[0]);
                        s[1] += phys.global_term(Momentum, m * v[1]);
                        s[2] += phys.global_term(Momentum, m * v[2]);
                        s[3] += phys.global_term(GlobalKind::Energy, e);
                        let b = phys.profile_bin(st.position(i));
                        prof[b] += phys.global_term(GlobalKind::Velocity, v[0]);
                        cnt[b] += 1;
                    }
                    (prof, cnt, s)
                })
                .collect()
        });
        let mut out = FluidMoments {
            particles: n as u64,
            profile_sum: vec![0.0; bins],
            profile_count: vec![0; bins],
            ..Default::default()
        };
        for (prof, cnt, s) in parts {
            for b in 0..bins {
                out.profile_sum[b] += prof[b];
                out.profile_count[b] += cnt[b];
            }
            for (m, x) in out.momentum.iter_mut().zip(&s[..3]) {
                *m += x;
            }
            out.kinetic_energy += s[3];
        }
        Ok(out)
    }

    fn download(&mut self) -> Result<FluidState> {
        Ok(self.state.clone())
    }

    /// The state itself, borrowed: no copy.
    fn fluid_source(&mut self) -> Result<Box<dyn crate::checkpoint::BlockSource + '_>> {
        Ok(Box::new(crate::checkpoint::FluidView::Whole(&self.state)))
    }

    /// A copy of the state (36 bytes per particle) when the window holds it and the pieces.
    fn fluid_snapshot(
        &mut self,
        host_bytes: u64,
    ) -> Result<Option<Box<dyn crate::checkpoint::BlockSource + Send>>> {
        if !crate::checkpoint::copy_fits(self.state.len() as u64 * 36, host_bytes) {
            return Ok(None);
        }
        Ok(Some(Box::new(crate::checkpoint::LocalFluid::Whole(
            self.state.clone(),
        ))))
    }

    fn upload(&mut self, state: &FluidState) -> Result<()> {
        state
            .validate(&self.phys)
            .map_err(|e| MpcError::Device(format!("uploaded fluid state: {e}")))?;
        self.state = state.clone();
        Ok(())
    }
}

/// The backend's own rayon pool of `threads` workers (0: this rank's share of the cores,
/// `ranks::cores`).
pub(crate) fn worker_pool(threads: usize) -> Result<std::sync::Arc<rayon::ThreadPool>> {
    // 0: this rank's share of the host's cores (all of them in one process)
    let threads = if threads == 0 {
        crate::ranks::cores()
    } else {
        threads
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("mpcbox-cpu-{i}"))
        .build()
        .map_err(|e| MpcError::Device(format!("cannot start CPU worker threads: {e}")))?;
    Ok(std::sync::Arc::new(pool))
}

/// `total += part`, surface by surface.
pub(super) fn add_wall_momentum(total: &mut WallMomentum, part: &WallMomentum) {
    for (t, p) in total.iter_mut().zip(part) {
        for k in 0..3 {
            t[k] += p[k];
        }
    }
}

/// The collision parameters of cell `c` between walls: its sums `real` with the virtual
/// particles of a cut cell added; what the real particles then exchange with the wall in the
/// collision is added to `wall`.
fn fill_and_params(
    phys: &Physics,
    walls: &Walls,
    plan: &StepPlan,
    c: u32,
    real: &CellSums,
    wall: &mut WallMomentum,
) -> CellParams {
    let mut sums = *real;
    let surface = walls.fill_cell(phys, plan, c, &mut sums);
    let cp = phys.cell_params(plan.step, c, &sums);
    if let Some(s) = surface {
        let gained = Walls::collision_exchange(phys, &cp, real);
        for k in 0..3 {
            wall[s][k] -= phys.global_term(GlobalKind::Momentum, gained[k]);
        }
    }
    cp
}
