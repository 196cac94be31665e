//! Confined flows: walls with bounce-back and virtual particles.
//!
//! * [`shapes`]: the geometries ([`WallShape`]: signed distance, normal, wall velocity, time
//!   of impact of a straight path; [`Slit`] with plates normal to y or z, [`Pipe`]), and
//!   the shapes of files of their own: [`sphere`], [`pore`] (a slit of finite length between
//!   reservoirs), [`cosine`] (a wavy channel, an expansion-contraction);
//!   the `walls` config section is [`crate::config::walls`], its form in checkpoints
//!   [`crate::config::walls_stored`].
//! * Streaming ([`Physics::stream_walled`]): a particle moves ballistically until its path
//!   reaches the wall at the exact time of impact t* within the step; there its velocity
//!   relative to the wall is reversed (no-slip) or its normal component is (slip), and it
//!   moves on for the rest of the step. With a body force, which the config allows only along
//!   the walls, the motion across the channel stays straight, so t* is exact; the force acts
//!   on the parallel components before and after the impact (r(t*) and v(t*) of the
//!   parabola). The position is then stored as f32 and, if that rounding put it a hair inside
//!   the wall, moved back ([`WallShape::keep_inside`]): no particle is ever inside a wall.
//! * Collision ([`Walls::fill_cell`]): a cell the wall cuts gets the M − n particles it lacks
//!   as virtual particles moving with the wall at the fluid's temperature (Lamura, Gompper,
//!   Ihle & Kroll, Europhys. Lett. 56, 319 (2001)): their total momentum is one Gaussian draw
//!   of mean (M − n) m u_wall and variance (M − n) m kT per component, added to the cell sums
//!   before the cell parameters, so the cell velocity (and hence the collision) sees the wall.
//!   With the MBS thermostat their Σ m v² is added as well: the part of the mean velocity plus
//!   kT·χ²(3(M − n − 1)) for the spread about it (a second draw, 2 kT·Gamma(3(M − n − 1)/2)),
//!   the statistics of M − n Maxwell-Boltzmann particles, and the target energy is drawn for
//!   the n + (M − n) particles of the filled cell. Draws come from the Philox stream keyed by
//!   (seed, step, global cell, [`crate::rng::CellStreamPurpose::WallFill`]); `kernels/walls.cuh` mirrors
//!   them, so every backend and GPU count draws the same numbers. Under the other collision
//!   rules [`rule_fill`] adds what each needs of the virtual particles (MPC-AT their draws, the
//!   +a rules their positions).
//! * Momentum given to the walls (bounce-backs, and what the real particles of filled cells
//!   exchange with the virtual ones) is summed per surface into the step's report.
//! * The grid: every shape leaves half a cell between the wall and the box faces across the
//!   channel, so the shifted grid (shift in [−a/2, a/2)) bins every fluid particle without
//!   wrapping across a wall. The box's extra layer is the layer the shifted grid needs; global
//!   cell indices, draws and multi-GPU y slabs are those of the box. Across y walls no particle
//!   ever crosses between the top and bottom slab; between plates normal to z, y is periodic
//!   and the cut cells lie in every slab (each cell still has one owner).

pub mod cell_clearance;
pub mod cosine;
pub mod cut_cells;
pub mod field;
pub mod field_load;
pub mod geometry;
pub mod pore;
pub mod profile;
pub mod rule_fill;
pub mod shapes;
pub mod sphere;
pub mod theory;

#[cfg(test)]
mod reach_tests;

pub use crate::config::walls::{WallBoundary, WallsConfig};
pub use shapes::{CosineWalls, Pipe, PlanarPore, Shape, Slit, SlitNormal, Sphere, WallShape};

use super::{wrap_coordinate, CellParams, CellSums, Physics, StepPlan};
use crate::config::Config;
use crate::fixed_sums::GlobalKind;
use crate::physics::rules::theory::rule_viscosity;
use crate::rng::CellStream;
use geometry::REACH_MARGIN;

/// Momentum given by the fluid to each wall surface (slit: bottom, top; pipe: the wall, 0).
pub type WallMomentum = [[f64; 3]; 2];

/// Most wall impacts of one particle in one step (a slip reflection grazing the pipe can
/// bounce along the wall in short chords); after the last one it stays at the impact point
/// for the rest of the step.
pub const MAX_BOUNCES: u32 = 32;

/// The walls of a run, as the step uses them.
#[derive(Clone, Debug, PartialEq)]
pub struct Walls {
    pub shape: Shape,
    /// No-slip (bounce-back and virtual particles) or slip (specular, no virtual particles).
    pub no_slip: bool,
    /// Particles a cell cut by the wall is filled up to (particles_per_cell, M).
    pub fill: u32,
}

impl Walls {
    /// The walls of a config, if it has any.
    pub fn from_config(cfg: &Config) -> Option<Walls> {
        cfg.walls.as_ref().map(|w| Walls {
            shape: w.shape(cfg),
            no_slip: w.boundary() == WallBoundary::NoSlip,
            fill: cfg.particles_per_cell,
        })
    }

    /// Fluid particles of a config with walls: M per unit volume of the fluid region.
    pub fn fluid_particles(&self, cfg: &Config) -> u64 {
        cfg.n_fluid()
    }

    /// Initial position and thermal velocity (before momentum removal) of fluid particle
    /// `index`: uniform in the fluid region (rejection in the pipe's square, in the box about
    /// an obstacle or a pore, in the band of the cosine walls' reach), from the particle's own
    /// Philox stream.
    pub fn initial_particle(
        &self,
        seed: u64,
        index: u64,
        len: [f64; 3],
        sigma: f64,
    ) -> ([f32; 3], [f64; 3]) {
        let mut s = CellStream::for_particle(seed, index);
        let p = match &self.shape {
            Shape::Slit(sl) => {
                // the draws in the order x, y, z whichever axis the plates close
                let mut p = [0.0f32; 3];
                for (k, c) in p.iter_mut().enumerate() {
                    let u = s.uniform();
                    *c = if k == sl.axis() {
                        (sl.bottom + u * sl.height()) as f32
                    } else {
                        wrap_coordinate(u * len[k], len[k])
                    };
                }
                p
            }
            Shape::Pipe(pi) => {
                let (dy, dz) = loop {
                    let dy = (2.0 * s.uniform() - 1.0) * pi.radius;
                    let dz = (2.0 * s.uniform() - 1.0) * pi.radius;
                    if dy * dy + dz * dz < pi.radius * pi.radius {
                        break (dy, dz);
                    }
                };
                let x = wrap_coordinate(s.uniform() * len[0], len[0]);
                [x, (pi.centre[0] + dy) as f32, (pi.centre[1] + dz) as f32]
            }
            Shape::Sphere(sp) => loop {
                // uniform in the sphere's cube (inside) or the box (outside), until in the fluid
                let mut p = [0.0f32; 3];
                for (k, c) in p.iter_mut().enumerate() {
                    let u = s.uniform();
                    *c = if sp.fluid_inside && !(sp.along_z && k == 2) {
                        (sp.centre[k] + (2.0 * u - 1.0) * sp.radius) as f32
                    } else {
                        wrap_coordinate(u * len[k], len[k])
                    };
                }
                if sp.signed_distance(p.map(|c| c as f64)) > 0.0 {
                    break p;
                }
            },
            Shape::PlanarPore(po) => loop {
                let mut p = [0.0f32; 3];
                for (k, c) in p.iter_mut().enumerate() {
                    *c = wrap_coordinate(s.uniform() * len[k], len[k]);
                }
                if po.signed_distance(p.map(|c| c as f64)) > 0.0 {
                    break p;
                }
            },
            Shape::Cosine(co) => loop {
                // y in the band the walls reach, x and z in the box
                let reach = co.half_height + co.amplitude;
                let mut p = [0.0f32; 3];
                for (k, c) in p.iter_mut().enumerate() {
                    let u = s.uniform();
                    *c = if k == 1 {
                        (co.yc + (2.0 * u - 1.0) * reach) as f32
                    } else {
                        wrap_coordinate(u * len[k], len[k])
                    };
                }
                if co.signed_distance(p.map(|c| c as f64)) > 0.0 {
                    break p;
                }
            },
            // uniform in the box until in the fluid
            Shape::Field(f) => loop {
                let mut p = [0.0f32; 3];
                for (k, c) in p.iter_mut().enumerate() {
                    *c = wrap_coordinate(s.uniform() * len[k], len[k]);
                }
                if f.signed_distance(p.map(|c| c as f64)) > 0.0 {
                    break p;
                }
            },
        };
        let v = [sigma * s.normal(), sigma * s.normal(), sigma * s.normal()];
        (self.shape.keep_inside(p), v)
    }

    /// The steady flow vx at stored position `p` of a config with these walls: plane Couette +
    /// Poiseuille flow in a slit (across its normal, y or z), Hagen-Poiseuille flow in a pipe,
    /// with the rule's theory viscosity and the body force along x at M particles per unit
    /// volume (the initial flow `Steady`); at rest around or in a sphere, in a pore and
    /// between cosine walls (no closed form).
    pub fn steady_flow(&self, cfg: &Config, p: [f32; 3]) -> f64 {
        let m = cfg.particles_per_cell as f64;
        let (kinetic, collisional) = rule_viscosity(cfg);
        let eta = kinetic + collisional;
        let force_density = m * cfg.body_force[0];
        match &self.shape {
            Shape::Slit(s) => theory::slit_velocity(
                p[s.axis()] as f64,
                s.bottom,
                s.top,
                s.velocity[0],
                s.velocity[1],
                force_density,
                eta,
            ),
            Shape::Pipe(q) => {
                let (dy, dz) = (p[1] as f64 - q.centre[0], p[2] as f64 - q.centre[1]);
                let r = (dy * dy + dz * dz).sqrt();
                theory::pipe_velocity(r, q.radius, q.velocity, force_density, eta)
            }
            Shape::Sphere(_) | Shape::PlanarPore(_) | Shape::Cosine(_) | Shape::Field(_) => 0.0,
        }
    }

    /// Whether a solute at `pos` (any periodic image along the open axes) lies inside the
    /// wall. Across the channel positions are taken as they are.
    pub fn solute_in_wall(&self, phys: &Physics, pos: [f64; 3]) -> bool {
        let closed = self.shape.closed_axes();
        let mut r = pos;
        for k in 0..3 {
            if !closed[k] {
                r[k] = super::wrap_f64(r[k], phys.length[k]);
            }
        }
        self.shape.signed_distance(r) < 0.0
    }

    /// The lower corner (unshifted coordinates) of global cell `cell` on the grid of `plan`.
    #[inline]
    pub fn cell_corner(phys: &Physics, plan: &StepPlan, cell: u32) -> [f64; 3] {
        let [nx, _, nz] = phys.cells;
        let ix = cell % nx;
        let rest = cell / nx;
        let iz = rest % nz;
        let iy = rest / nz;
        [
            ix as f64 - plan.shift[0],
            iy as f64 - plan.shift[1],
            iz as f64 - plan.shift[2],
        ]
    }

    /// Add the virtual particles of global cell `cell` to its sums `sums` (fluid and solutes)
    /// when the walls are no-slip, the wall cuts the cell and it holds 1 ≤ n < M particles.
    /// Returns the surface the virtual particles move with, or None if the cell is unchanged.
    pub fn fill_cell(
        &self,
        phys: &Physics,
        plan: &StepPlan,
        cell: u32,
        sums: &mut CellSums,
    ) -> Option<usize> {
        let lo = self.cut_cell(phys, plan, cell, sums.count)?;
        let mut s = self.fill_stream(phys, plan, cell);
        Some(self.fill_bulk(phys, lo, &mut s, sums))
    }

    /// The M − n virtual particles of the cut cell `[lo, lo + 1)` as one Gaussian momentum
    /// (and, with MBS, their Σ m v²) from `s`, added to `sums`; returns their surface.
    pub(super) fn fill_bulk(
        &self,
        phys: &Physics,
        lo: [f64; 3],
        s: &mut CellStream,
        sums: &mut CellSums,
    ) -> usize {
        let centre = [lo[0] + 0.5, lo[1] + 0.5, lo[2] + 0.5];
        let uw = self.shape.wall_velocity(centre);
        let nv = self.fill - sums.count;
        let mv = nv as f64 * phys.mass;
        let spread = (mv * phys.kt).sqrt();
        let p = [
            mv * uw[0] + spread * s.normal(),
            mv * uw[1] + spread * s.normal(),
            mv * uw[2] + spread * s.normal(),
        ];
        sums.momentum[0] += p[0];
        sums.momentum[1] += p[1];
        sums.momentum[2] += p[2];
        sums.mass += mv;
        sums.count += nv;
        if phys.thermostat {
            let mut mv2 = (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]) / mv;
            if nv >= 2 {
                mv2 += 2.0 * phys.kt * s.gamma(1.5 * (nv - 1) as f64);
            }
            sums.mv2 += mv2;
        }
        self.shape.surface(centre)
    }

    /// Momentum the real particles (sums `real`, before the fill) of a filled cell gain in its
    /// collision `cp`: the collision is affine in each particle's velocity, so their total
    /// after it is M_real times the collided mean velocity. The wall (through the virtual
    /// particles) loses as much.
    #[inline]
    pub fn collision_exchange(phys: &Physics, cp: &CellParams, real: &CellSums) -> [f64; 3] {
        let inv = 1.0 / real.mass;
        let mean = [
            real.momentum[0] * inv,
            real.momentum[1] * inv,
            real.momentum[2] * inv,
        ];
        let w = phys.collide(cp, 0, mean);
        [
            real.mass * w[0] - real.momentum[0],
            real.mass * w[1] - real.momentum[1],
            real.mass * w[2] - real.momentum[2],
        ]
    }
}

/// r += v t + ½ a t², v += a t.
#[inline]
fn advance(r: &mut [f64; 3], v: &mut [f64; 3], a: [f64; 3], t: f64) {
    let tt = 0.5 * t * t;
    for k in 0..3 {
        r[k] = r[k] + v[k] * t + a[k] * tt;
        v[k] += a[k] * t;
    }
}

impl Physics {
    /// Stream one fluid particle over one step between `walls` (see the module docs): the
    /// new stored position and velocity; the momentum given to each surface is added to
    /// `wall`.
    #[inline]
    pub fn stream_walled(
        &self,
        walls: &Walls,
        pos: [f32; 3],
        vel: [f64; 3],
        wall: &mut WallMomentum,
    ) -> ([f32; 3], [f64; 3]) {
        let shape = &walls.shape;
        let a = self.acceleration;
        let r = [pos[0] as f64, pos[1] as f64, pos[2] as f64];
        let norm = |x: [f64; 3]| (x[0] * x[0] + x[1] * x[1] + x[2] * x[2]).sqrt();
        let reach = norm(vel) * self.h + 0.5 * norm(a) * self.h * self.h + REACH_MARGIN;
        if shape.clearance(r).is_some_and(|c| c > reach) {
            // out of reach: the path below without an impact, ending in the fluid (the same
            // bits, as the GPU's mpc_stream computes them)
            let (mut r, mut v) = (r, vel);
            advance(&mut r, &mut v, a, self.h);
            return (self.stored_position(shape, r), v);
        }
        self.stream_walled_path(walls, pos, vel, wall)
    }

    /// The stored (f32) position of the unwrapped `r` after streaming: the open axes wrapped.
    #[inline]
    fn stored_position(&self, shape: &Shape, r: [f64; 3]) -> [f32; 3] {
        let closed = shape.closed_axes();
        let mut p = [0.0f32; 3];
        for k in 0..3 {
            p[k] = if closed[k] {
                r[k] as f32
            } else {
                wrap_coordinate(r[k], self.length[k])
            };
        }
        p
    }

    /// [`Physics::stream_walled`] the long way, for every particle: the bounce-back path
    /// (the exact times of impact) and the stored position kept in the fluid.
    pub(crate) fn stream_walled_path(
        &self,
        walls: &Walls,
        pos: [f32; 3],
        vel: [f64; 3],
        wall: &mut WallMomentum,
    ) -> ([f32; 3], [f64; 3]) {
        let shape = &walls.shape;
        let a = self.acceleration;
        let mut r = [pos[0] as f64, pos[1] as f64, pos[2] as f64];
        let mut v = vel;
        let mut left = self.h;
        let mut bounces = 0;
        while let Some(t) = shape.time_of_impact(r, v, left) {
            advance(&mut r, &mut v, a, t);
            let uw = shape.wall_velocity(r);
            let w = if walls.no_slip {
                [2.0 * uw[0] - v[0], 2.0 * uw[1] - v[1], 2.0 * uw[2] - v[2]]
            } else {
                let n = shape.normal(r);
                let d = (v[0] - uw[0]) * n[0] + (v[1] - uw[1]) * n[1] + (v[2] - uw[2]) * n[2];
                [
                    v[0] - 2.0 * d * n[0],
                    v[1] - 2.0 * d * n[1],
                    v[2] - 2.0 * d * n[2],
                ]
            };
            let s = shape.surface(r);
            for k in 0..3 {
                wall[s][k] += self.global_term(GlobalKind::Momentum, self.mass * (v[k] - w[k]));
            }
            v = w;
            left -= t;
            bounces += 1;
            if bounces == MAX_BOUNCES {
                left = 0.0;
                break;
            }
        }
        advance(&mut r, &mut v, a, left);
        (shape.keep_inside(self.stored_position(shape, r)), v)
    }

    /// Bins of the velocity profile: the cells along the slit's normal, Ly otherwise (y layers
    /// of a periodic box, about a sphere, across a pore or cosine walls; whole cells of the
    /// distance from a pipe's axis).
    pub fn profile_bins(&self) -> usize {
        let axis = match &self.walls {
            Some(Walls {
                shape: Shape::Slit(s),
                ..
            }) => s.axis(),
            Some(Walls {
                shape:
                    Shape::Pipe(_)
                    | Shape::Sphere(_)
                    | Shape::PlanarPore(_)
                    | Shape::Cosine(_)
                    | Shape::Field(_),
                ..
            })
            | None => 1,
        };
        self.cells[axis] as usize
    }

    /// The profile bin of a stored position: its layer across a slit (y or z) or of a periodic
    /// box or about a sphere (y), or in a pipe its distance from the axis in whole cells
    /// ([`Physics::profile_bins`] bins, the last one taking the rest).
    #[inline]
    pub fn profile_bin(&self, pos: [f32; 3]) -> usize {
        let bins = self.profile_bins();
        let c = match &self.walls {
            Some(Walls {
                shape: Shape::Pipe(p),
                ..
            }) => {
                let dy = pos[1] as f64 - p.centre[0];
                let dz = pos[2] as f64 - p.centre[1];
                (dy * dy + dz * dz).sqrt()
            }
            Some(Walls {
                shape: Shape::Slit(s),
                ..
            }) => pos[s.axis()] as f64,
            Some(Walls {
                shape: Shape::Sphere(_) | Shape::PlanarPore(_) | Shape::Cosine(_) | Shape::Field(_),
                ..
            })
            | None => pos[1] as f64,
        };
        (c as usize).min(bins - 1)
    }
}
