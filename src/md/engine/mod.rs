//! The CPU engine [`Md`]: it owns the system and composes the computes: the neighbour list
//! (`md::neighbor`), pair forces (`md::pair`), bond forces (`md::bond`) and the integrator
//! (`md::integrate`): velocity Verlet, BAOAB when a Langevin thermostat is on. Everything is
//! f64, rayon parallel over fixed chunks, and bitwise identical for any number of threads
//! (random numbers are addressed by tags and step). `setup` builds and checks an engine.

mod setup;
mod state;

pub use state::MdState;

use std::sync::Arc;

use rayon::prelude::*;

pub use super::settings::{ForceReport, MdSettings};

use super::bond::{bond_pass, BondSums, BondTopology};
use super::forcefield::{DpdParams, ForceField, MdThermostat, PairStyle};
use super::integrate::{self, OuStep};
use super::neighbor::{morton_order, CellList, NeighborSource, VerletList, CHUNK};
use super::pair::{dpd::dpd_pass, lj::lj_pass, PairSums};
use super::system::System;
use super::walls::{wall_pass, WallPotential};
use crate::error::{ConfigError, MpcError, Result};

#[derive(Clone)]
pub struct Md {
    pub sys: System,
    pub ff: ForceField,
    pub thermostat: MdThermostat,
    settings: MdSettings,
    step: u64,
    force: Vec<[f64; 3]>,
    inv_mass: Vec<f64>,
    cells: CellList,
    verlet: VerletList,
    use_list: bool,
    /// Bonded partners of each particle in the current order.
    bonds: BondTopology,
    report: ForceReport,
    pool: Arc<rayon::ThreadPool>,
    /// The fluid's walls, as the solutes feel them (`md::walls`).
    walls: Option<WallPotential>,
}

fn cfg_err(field: &str, problem: String, fix: &str) -> MpcError {
    MpcError::Config(ConfigError {
        field: field.into(),
        problem,
        fix: fix.into(),
    })
}

impl Md {
    /// The largest pair cutoff (pair style and DPD thermostat).
    pub fn cutoff(&self) -> f64 {
        self.ff.cutoff_with(self.thermostat)
    }

    /// Whether forces come from cell + Verlet lists (false: all pairs).
    pub fn uses_verlet_list(&self) -> bool {
        self.use_list
    }

    pub fn settings(&self) -> &MdSettings {
        &self.settings
    }

    pub fn step_count(&self) -> u64 {
        self.step
    }

    /// Number of Verlet list builds so far.
    pub fn list_builds(&self) -> u64 {
        self.verlet.builds
    }

    /// The Verlet-list neighbours of particle i in the current order (empty with all pairs).
    pub fn neighbors(&self, i: usize) -> &[u32] {
        if self.use_list {
            self.verlet.neighbors(i)
        } else {
            &[]
        }
    }

    /// Forces of the current configuration, in the current particle order.
    pub fn forces(&self) -> &[[f64; 3]] {
        &self.force
    }

    pub fn report(&self) -> ForceReport {
        self.report
    }

    pub fn potential_energy(&self) -> f64 {
        self.report.potential_energy()
    }

    pub fn kinetic_energy(&self) -> f64 {
        let (v, im) = (&self.sys.vel, &self.inv_mass);
        let parts: Vec<f64> = self.pool.install(|| {
            (0..v.len().div_ceil(CHUNK))
                .into_par_iter()
                .map(|c| integrate::chunk_kinetic_energy(v, im, c))
                .collect()
        });
        parts.iter().sum()
    }

    pub fn total_energy(&self) -> f64 {
        self.kinetic_energy() + self.potential_energy()
    }

    /// Kinetic temperature with 3N − 3 degrees of freedom.
    pub fn temperature(&self) -> f64 {
        let dof = (3 * self.sys.len()).saturating_sub(3).max(1) as f64;
        2.0 * self.kinetic_energy() / dof
    }

    /// Virial pressure (2 KE + W) / (3V), conservative forces only.
    pub fn pressure(&self) -> f64 {
        (2.0 * self.kinetic_energy() + self.report.virial) / (3.0 * self.sys.volume())
    }

    /// Total momentum Σ m v (fixed-chunk reduction).
    pub fn momentum(&self) -> [f64; 3] {
        let (v, im) = (&self.sys.vel, &self.inv_mass);
        let parts: Vec<[f64; 3]> = self.pool.install(|| {
            (0..v.len().div_ceil(CHUNK))
                .into_par_iter()
                .map(|c| integrate::chunk_momentum(v, im, c))
                .collect()
        });
        parts
            .iter()
            .fold([0.0; 3], |a, b| [a[0] + b[0], a[1] + b[1], a[2] + b[2]])
    }

    /// Per-particle inverse masses and bond partners (after any reordering).
    fn refresh_per_particle(&mut self) {
        let sys = &self.sys;
        self.inv_mass = (0..sys.len()).map(|i| 1.0 / sys.mass(i)).collect();
        self.bonds = BondTopology::new(sys);
    }

    /// Permute every per-particle array: new particle k is old particle perm[k].
    fn permute(&mut self, perm: &[u32]) {
        fn apply<T: Copy + Send + Sync>(v: &mut Vec<T>, perm: &[u32]) {
            let out: Vec<T> = perm.par_iter().map(|&i| v[i as usize]).collect();
            *v = out;
        }
        let s = &mut self.sys;
        apply(&mut s.pos, perm);
        apply(&mut s.vel, perm);
        apply(&mut s.image, perm);
        apply(&mut s.typ, perm);
        apply(&mut s.tag, perm);
        apply(&mut s.mol, perm);
        apply(&mut self.force, perm);
        self.refresh_per_particle();
    }

    /// Whether the Verlet list must be rebuilt: some particle moved more than skin/2 since
    /// the last build; under shear, displacements are taken relative to the imposed flow
    /// (`PeriodicBox::flow_displacement2`, exact for particles that crossed the y boundary),
    /// and the strain γ̇ τ since the build tilts pairs by at most |γ̇ τ| r_cut, so
    /// 2 max|Δρ| + |γ̇ τ| r_cut is held against the skin.
    fn list_is_stale(&self) -> bool {
        let skin = self.settings.skin;
        let bx = self.sys.periodic_box();
        let Some(shear) = self.settings.shear else {
            let d2 = self.verlet.max_displacement2_in(&self.sys.pos, &bx);
            return d2 > 0.25 * skin * skin;
        };
        let offset = bx.lees_edwards().offset;
        let Some(strain) = shear.strain_since(offset, self.verlet.built_offset, self.sys.box_len)
        else {
            return true;
        };
        let d2 = self
            .verlet
            .max_flow_displacement2(&self.sys.pos, &bx, strain);
        2.0 * d2.sqrt() + strain.abs() * self.cutoff() > skin
    }

    /// Rebuild the Verlet list when needed, reordering along the Morton curve every
    /// `reorder_every` builds.
    fn update_neighbors(&mut self) {
        if !self.use_list {
            return;
        }
        if self.verlet.builds > 0 && !self.list_is_stale() {
            return;
        }
        let k = self.settings.reorder_every;
        if k > 0 && self.verlet.builds.is_multiple_of(k) {
            let perm = morton_order(&self.sys.pos, self.sys.box_len);
            self.permute(&perm);
        }
        self.build_lists();
    }

    /// Cell and Verlet lists from the current positions.
    fn build_lists(&mut self) {
        let l = self.sys.box_len;
        let r_list = self.cutoff() + self.settings.skin;
        let dims =
            CellList::dims_for_list(l, r_list).expect("checked when the list mode was chosen");
        self.cells.build(&self.sys.pos, l, dims);
        let bx = self.sys.periodic_box();
        let sheared = self.settings.shear.is_some();
        self.verlet
            .build_in(&self.sys.pos, &bx, sheared, &self.cells, r_list);
    }

    /// All forces at the current positions (and velocities, for DPD) and step.
    pub fn compute_forces(&mut self) -> Result<()> {
        let pool = self.pool.clone();
        pool.install(|| self.compute_forces_inner(true))
    }

    /// Forces in the order pair style, DPD thermostat, bonds; pair energy and virial only when
    /// `energy` (the report keeps the last values otherwise).
    fn compute_forces_inner(&mut self, energy: bool) -> Result<()> {
        self.update_neighbors();
        let neigh = if self.use_list {
            NeighborSource::List(&self.verlet)
        } else {
            NeighborSource::All(self.sys.len())
        };
        self.force
            .par_chunks_mut(CHUNK * 8)
            .for_each(|c| c.fill([0.0; 3]));
        let (st, sys, step) = (&self.settings, &self.sys, self.step);
        let mut rep = ForceReport::default();
        let pair = match &self.ff.pair {
            PairStyle::None => PairSums::default(),
            PairStyle::Lj(t) => lj_pass(&mut self.force, neigh, sys, t, energy),
            PairStyle::Dpd(p) => dpd_pass(&mut self.force, neigh, sys, p, true, st, step),
        };
        rep.pair_energy = pair.energy;
        rep.virial = pair.virial;
        rep.virial_tensor = pair.tensor;
        if let MdThermostat::Dpd {
            gamma,
            cutoff,
            exponent,
        } = self.thermostat
        {
            let p = DpdParams::uniform(1, 0.0, gamma, cutoff, exponent);
            let th = dpd_pass(&mut self.force, neigh, sys, &p, false, st, step);
            for k in 0..6 {
                rep.virial_tensor[k] += th.tensor[k];
            }
        }
        if !self.bonds.is_empty() {
            let (e, w, t) = self.bond_forces()?;
            rep.bond_energy = e;
            rep.virial += w;
            for (a, b) in rep.virial_tensor.iter_mut().zip(t) {
                *a += b;
            }
        }
        if let Some(walls) = &self.walls {
            rep.wall_energy = wall_pass(&mut self.force, &self.sys, walls)
                .map_err(|c| wall_crossed(self.sys.tag[c.index], c.distance, self.step, "CPU"))?;
        }
        if energy {
            self.report = rep;
        }
        Ok(())
    }

    /// The bond pass; a broken FENE bond becomes a config error naming the bond and step.
    fn bond_forces(&mut self) -> Result<BondSums> {
        let styles = &self.ff.bond_styles;
        bond_pass(&mut self.force, &self.sys, &self.bonds, styles).map_err(|b| MpcError::Unstable {
            step: self.step,
            what: format!(
                "md.bonds: FENE bond {}-{} is stretched to r = {:.4}, at or beyond R0 \
                     (MD step)",
                b.tag_a.min(b.tag_b),
                b.tag_a.max(b.tag_b),
                b.length,
            ),
            fix: "use a smaller MD time step (raise md.steps_per_collision), a softer \
                      start, or a larger R0"
                .into(),
        })
    }

    /// The walls the solutes feel (None: a periodic box).
    pub fn walls(&self) -> Option<&WallPotential> {
        self.walls.as_ref()
    }

    /// Put the solutes between walls (or take the walls away) and recompute the forces.
    pub fn set_walls(&mut self, walls: Option<WallPotential>) -> Result<()> {
        self.walls = walls;
        self.compute_forces()
    }

    /// One MD step: velocity Verlet (B A B), or B A O A B with the Langevin thermostat.
    pub fn step(&mut self) -> Result<()> {
        let pool = self.pool.clone();
        pool.install(|| self.step_inner(true))
    }

    /// One step; `energy`: also evaluate the potential energy and virial.
    fn step_inner(&mut self, energy: bool) -> Result<()> {
        let dt = self.settings.dt;
        let s = &mut self.sys;
        integrate::kick(&mut s.vel, &self.force, &self.inv_mass, 0.5 * dt);
        match self.thermostat {
            MdThermostat::Langevin { damping } => {
                integrate::drift(&mut s.pos, &s.vel, 0.5 * dt);
                let o = OuStep {
                    gamma: damping,
                    dt,
                    kt: self.settings.kt,
                    seed: self.settings.seed,
                    step: self.step,
                    inv_mass: &self.inv_mass,
                    tag: &s.tag,
                };
                integrate::ornstein_uhlenbeck(&mut s.vel, &o);
                integrate::drift(&mut s.pos, &s.vel, 0.5 * dt);
            }
            _ => integrate::drift(&mut s.pos, &s.vel, dt),
        }
        if let Some(shear) = self.settings.shear {
            // the offset at the end of the drift, as the fluid takes it at the end of streaming
            s.lees_edwards = shear.lees_edwards_at(self.step + 1, dt, s.box_len);
        }
        let bx = s.periodic_box();
        integrate::wrap(&mut s.pos, &mut s.vel, &mut s.image, &bx);
        self.step += 1;
        self.compute_forces_inner(energy)?;
        integrate::kick(&mut self.sys.vel, &self.force, &self.inv_mass, 0.5 * dt);
        Ok(())
    }

    /// `n` MD steps; energy and virial are evaluated on the last one (for [`Md::report`]).
    pub fn run(&mut self, n: u64) -> Result<()> {
        let pool = self.pool.clone();
        pool.install(|| {
            for k in 0..n {
                self.step_inner(k + 1 == n)?;
            }
            Ok(())
        })
    }

    /// Recompute forces after velocities were changed from outside (e.g. by an MPC collision)
    /// when the forces depend on velocities (DPD); a no-op otherwise.
    pub fn velocities_changed(&mut self) -> Result<()> {
        if self.ff.velocity_dependent(self.thermostat) {
            self.compute_forces()?;
        }
        Ok(())
    }
}

/// The error of a bead that reached a wall surface (CPU or GPU engine).
pub(crate) fn wall_crossed(tag: u32, distance: f64, step: u64, engine: &str) -> MpcError {
    cfg_err(
        "walls.solutes",
        format!(
            "atom {tag} reached the wall (distance {distance:.3e}) at MD step {step} ({engine} \
             engine)"
        ),
        "use a smaller MD time step (raise md.steps_per_collision) or a softer wall \
         (walls.solutes epsilon), and start the solutes away from the walls",
    )
}
