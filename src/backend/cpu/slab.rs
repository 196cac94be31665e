//! The CPU backend as one y slab of a box cut into slabs (`backend::slabbed`: in one process or
//! over MPI ranks).
//!
//! A slab holds the particles whose cell on the step's shifted grid lies in its layers, and the
//! parameters of those cells only. A step splits where particles that streamed into another
//! slab's cells leave ([`CpuBackend::stream_and_pack`]) and the arrivals join
//! ([`CpuBackend::unpack_and_collide`]); the caller carries the packets between processes.
//! Draws are keyed by the global cell, so every cut of the box collides with the same numbers;
//! only the order of the sums inside a cell (ascending local index) differs, to rounding.

use super::{CpuBackend, Result, SoluteBatch, StepReport, WallMomentum};
use crate::error::MpcError;
use crate::physics::{Physics, StepPlan};
use crate::state::FluidState;

/// f64 words per migrating particle: position (3, the exact f32 values), velocity (3) and the
/// global index (its bits).
pub const PACKET_WORDS: usize = 7;

impl CpuBackend {
    /// The slab of the cell layers `layers = [lo, hi)` working on `pool`: `state` holds its
    /// particles and `ids` their global indices (any particles; the first step sends each where
    /// its cell is).
    pub(crate) fn new_slab(
        phys: Physics,
        state: FluidState,
        ids: Vec<u64>,
        pool: std::sync::Arc<rayon::ThreadPool>,
        layers: [u32; 2],
    ) -> Result<CpuBackend> {
        let layer_cells = (phys.cells[0] * phys.cells[2]) as usize;
        let lo = layers[0] as usize * layer_cells;
        let n = (layers[1] - layers[0]) as usize * layer_cells;
        let mut b = CpuBackend::with_cells(phys, FluidState::default(), pool, lo, n)?;
        b.replace_particles(state, ids)?;
        Ok(b)
    }

    fn layer_cells(&self) -> usize {
        (self.phys.cells[0] * self.phys.cells[2]) as usize
    }

    /// The slab's particles and their global indices (resume, a new cut of the box).
    pub(crate) fn replace_particles(&mut self, state: FluidState, ids: Vec<u64>) -> Result<()> {
        state
            .validate(&self.phys)
            .map_err(|e| MpcError::Device(format!("fluid state of a slab: {e}")))?;
        if ids.len() != state.len() {
            return Err(MpcError::Device(format!(
                "a slab got {} particles but {} global indices",
                state.len(),
                ids.len()
            )));
        }
        self.state = state;
        self.ids = ids;
        Ok(())
    }

    /// The slab's particles and their global indices.
    pub(crate) fn particles(&self) -> (&FluidState, &[u64]) {
        (&self.state, &self.ids)
    }

    /// Stream and bin every particle; a particle whose new cell belongs to another slab is
    /// appended to `out[owner(layer)]` as a packet and leaves. The particles that stay keep
    /// their order. Returns the kinetic stress sum and the momentum given to walls.
    pub(crate) fn stream_and_pack(
        &mut self,
        plan: &StepPlan,
        owner: &dyn Fn(u32) -> usize,
        out: &mut [Vec<f64>],
    ) -> (f64, WallMomentum) {
        let nf = self.state.len();
        self.cell_of.resize(nf, 0);
        self.image_of.resize(nf, 0);
        self.solute_image.clear();
        let pool = self.pool.clone();
        let streamed = pool.install(|| self.stream_and_bin(plan));
        let layer_cells = self.layer_cells();
        let (lo, hi) = (self.cell_lo, self.cell_lo + self.params.len());
        let mut keep = 0;
        for i in 0..nf {
            let c = self.cell_of[i] as usize;
            if (lo..hi).contains(&c) {
                for k in 0..3 {
                    self.state.pos[k][keep] = self.state.pos[k][i];
                    self.state.vel[k][keep] = self.state.vel[k][i];
                }
                self.ids[keep] = self.ids[i];
                self.cell_of[keep] = (c - lo) as u32;
                self.image_of[keep] = self.image_of[i];
                keep += 1;
            } else {
                let dest = &mut out[owner((c / layer_cells) as u32)];
                let p = self.state.position(i);
                let v = self.state.velocity(i);
                dest.extend([p[0] as f64, p[1] as f64, p[2] as f64, v[0], v[1], v[2]]);
                dest.push(f64::from_bits(self.ids[i]));
            }
        }
        self.truncate(keep);
        streamed
    }

    fn truncate(&mut self, n: usize) {
        for k in 0..3 {
            self.state.pos[k].truncate(n);
            self.state.vel[k].truncate(n);
        }
        self.ids.truncate(n);
        self.cell_of.truncate(n);
        self.image_of.truncate(n);
    }

    /// Take in the particles that arrived (packets of [`CpuBackend::stream_and_pack`], binned
    /// here with the same plan), bin the solutes (all in this slab's cells), then collide: the
    /// rest of the step.
    pub(crate) fn unpack_and_collide(
        &mut self,
        plan: &StepPlan,
        arrivals: &[f64],
        solutes: Option<&mut SoluteBatch<'_>>,
        kinetic: f64,
        wall_momentum: WallMomentum,
    ) -> Result<StepReport> {
        let (lo, hi) = (self.cell_lo, self.cell_lo + self.params.len());
        for p in arrivals.chunks_exact(PACKET_WORDS) {
            let pos = [p[0] as f32, p[1] as f32, p[2] as f32];
            let loc = self
                .phys
                .locate(plan, [p[0], p[1], p[2]].map(|x| x as f32 as f64));
            let id = p[6].to_bits();
            if !(lo..hi).contains(&(loc.cell as usize)) {
                return Err(MpcError::Device(format!(
                    "fluid particle {id} arrived in cell {} outside this slab's cells {lo}..{hi} \
                     (a migration error: please report it)",
                    loc.cell
                )));
            }
            for k in 0..3 {
                self.state.pos[k].push(pos[k]);
                self.state.vel[k].push(p[3 + k]);
            }
            self.ids.push(id);
            self.cell_of.push(loc.cell - lo as u32);
            self.image_of.push(loc.image as i8);
        }
        self.solute_image.clear();
        if let Some(s) = solutes.as_deref() {
            for p in s.pos {
                let loc = self.phys.locate_solute(plan, *p);
                debug_assert!((lo..hi).contains(&(loc.cell as usize)));
                self.cell_of.push(loc.cell - lo as u32);
                self.solute_image.push(loc.image);
            }
        }
        let pool = self.pool.clone();
        Ok(pool.install(|| self.finish_step(plan, solutes, kinetic, wall_momentum)))
    }
}
