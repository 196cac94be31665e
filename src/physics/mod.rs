//! The MPC-SRD step as small pure functions on one particle or one cell.
//!
//! The CPU backend calls these directly; `kernels/mpc.cuh` mirrors them operation by operation
//! (compiled with `--fmad=false`), so both backends stream, bin and rotate identically. Changing
//! the order of operations here means changing it there too.
//!
//! Conventions (lengths in cells, a = 1):
//! * The box is `[0, Lx) × [0, Ly) × [0, Lz)`; fluid positions are stored as f32, velocities f64.
//! * Lees-Edwards: flow along x, gradient along y, steady profile `vx = γ̇ (y − Ly/2)`. A particle
//!   leaving through the top (y ≥ Ly) re-enters at the bottom shifted by `x −= δ` and
//!   `vx −= γ̇ Ly`, with `δ = γ̇ Ly t mod Lx` taken at the end of the streaming step.
//! * Grid shift: a particle at `r` is binned at `r + s`. If that crosses the y boundary it is
//!   binned as its Lees-Edwards image (x moved by ∓δ, vx offset by ∓γ̇ Ly for the collision,
//!   offset removed afterwards): its `image` is −1 above the box, +1 below it.
//! * Global cell index `(iy · Lz + iz) · Lx + ix`: y-major, so a y-slab is one index range.

pub mod rules;
pub mod sums;
pub mod theory;

use crate::config::{Config, Thermostat};
use crate::fixed_sums::{FixedScales, GlobalKind};
use crate::rng;
pub use rules::Rule;

pub mod walls;
pub use walls::{WallMomentum, Walls};

/// Run constants of the MPC step, derived once from the config.
#[derive(Clone, Debug, PartialEq)]
pub struct Physics {
    pub cells: [u32; 3],
    pub length: [f64; 3],
    pub mass: f64,
    pub kt: f64,
    pub h: f64,
    pub cos_angle: f64,
    pub sin_angle: f64,
    pub thermostat: bool,
    pub grid_shift: bool,
    /// Acceleration of fluid particles by the body force (force / mass).
    pub acceleration: [f64; 3],
    pub shear_rate: f64,
    /// Velocity jump across the Lees-Edwards plane, γ̇·Ly.
    pub le_velocity: f64,
    pub seed: u64,
    /// The collision rule (SRD, MPC-AT, with or without angular-momentum conservation).
    pub rule: Rule,
    /// Walls confining the fluid (`walls` module), None for a periodic (or sheared) box.
    pub walls: Option<Walls>,
    /// The scales of the fixed-point sums (`crate::fixed_sums`), None for f64 sums in the
    /// backend's order (`MPCBOX_CELL_SUMS=float`).
    pub sums: Option<FixedScales>,
}

/// What differs from one step to the next; the same for every backend and every GPU.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepPlan {
    pub step: u64,
    pub shift: [f64; 3],
    /// Lees-Edwards offset δ at the end of this step's streaming.
    pub le_offset: f64,
    /// Accumulate the xy stress (kinetic and collisional parts) during this step.
    pub measure_stress: bool,
    /// Reorder fluid particles by cell after this step's collision.
    pub reorder: bool,
}

/// Where a particle is binned for the collision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Location {
    pub cell: u32,
    /// Lees-Edwards image used for binning: −1 above the box, +1 below, 0 inside.
    pub image: i32,
    /// y of the shifted position relative to the centre of its cell (for the collisional stress).
    pub y_in_cell: f64,
    /// x and z of the shifted position relative to the centre of its cell (the angular-momentum
    /// rules, `rules.rs`).
    pub x_in_cell: f64,
    pub z_in_cell: f64,
}

/// Per-cell result of the cell pass: what every particle of the cell needs to collide.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CellParams {
    pub velocity: [f64; 3],
    pub axis: [f64; 3],
    /// Thermostat factor on relative velocities (1 without thermostat).
    pub scale: f64,
    /// False for cells with fewer than two particles: nothing to collide.
    pub active: bool,
}

/// Mass-weighted sums over the particles of one cell (velocities including the LE image offset).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CellSums {
    pub momentum: [f64; 3],
    pub mass: f64,
    /// Σ m v² (twice the kinetic energy).
    pub mv2: f64,
    pub count: u32,
}

impl CellSums {
    #[inline]
    pub fn add(&mut self, m: f64, v: [f64; 3]) {
        self.momentum[0] += m * v[0];
        self.momentum[1] += m * v[1];
        self.momentum[2] += m * v[2];
        self.mass += m;
        self.mv2 += m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        self.count += 1;
    }

    /// Kinetic energy relative to the cell's centre-of-mass velocity.
    #[inline]
    pub fn relative_energy(&self) -> f64 {
        if self.count < 2 {
            return 0.0;
        }
        let p = self.momentum;
        let p2 = p[0] * p[0] + p[1] * p[1] + p[2] * p[2];
        0.5 * (self.mv2 - p2 / self.mass)
    }
}

impl Physics {
    pub fn from_config(cfg: &Config) -> Physics {
        let angle = cfg.rotation_angle();
        let length = [
            cfg.cells[0] as f64,
            cfg.cells[1] as f64,
            cfg.cells[2] as f64,
        ];
        Physics {
            cells: cfg.cells,
            length,
            mass: cfg.mass,
            kt: cfg.kt,
            h: cfg.time_step,
            cos_angle: angle.cos(),
            sin_angle: angle.sin(),
            thermostat: cfg.thermostat == Thermostat::Mbs,
            grid_shift: cfg.grid_shift,
            acceleration: [
                cfg.body_force[0] / cfg.mass,
                cfg.body_force[1] / cfg.mass,
                cfg.body_force[2] / cfg.mass,
            ],
            shear_rate: cfg.shear_rate,
            le_velocity: cfg.shear_rate * length[1],
            seed: cfg.seed,
            rule: Rule::from_config(&cfg.collision),
            walls: Walls::from_config(cfg),
            sums: cfg.fixed_scales(),
        }
    }

    /// A term of a global sum (report, moments) of `kind`: on its fixed-point grid when the
    /// run sums in fixed point (then f64 sums of such terms are exact in any order).
    #[inline]
    pub fn global_term(&self, kind: GlobalKind, x: f64) -> f64 {
        match &self.sums {
            Some(s) => s.global_term(kind, x),
            None => x,
        }
    }

    pub fn n_cells(&self) -> usize {
        self.cells.iter().map(|&l| l as usize).product()
    }

    pub fn volume(&self) -> f64 {
        self.length[0] * self.length[1] * self.length[2]
    }

    /// Lees-Edwards offset at time t = n·h.
    pub fn le_offset_at(&self, n: u64) -> f64 {
        (self.le_velocity * (n as f64 * self.h)).rem_euclid(self.length[0])
    }

    /// The plan of step `step` (0-based): streaming from t = step·h to (step+1)·h, then collision.
    pub fn plan(&self, step: u64, measure_stress: bool, reorder: bool) -> StepPlan {
        let shift = if self.grid_shift {
            rng::grid_shift(self.seed, step)
        } else {
            [0.0; 3]
        };
        StepPlan {
            step,
            shift,
            le_offset: self.le_offset_at(step + 1),
            measure_stress,
            reorder,
        }
    }

    /// Steady-state flow velocity along x at height y.
    #[inline]
    pub fn flow_velocity(&self, y: f64) -> f64 {
        self.shear_rate * (y - 0.5 * self.length[1])
    }

    /// [`Physics::stream`], adding the momentum given to walls (if any) to `wall`.
    #[inline]
    pub fn stream_accounted(
        &self,
        plan: &StepPlan,
        pos: [f32; 3],
        vel: [f64; 3],
        wall: &mut WallMomentum,
    ) -> ([f32; 3], [f64; 3]) {
        match &self.walls {
            Some(w) => self.stream_walled(w, pos, vel, wall),
            None => self.stream(plan, pos, vel),
        }
    }

    /// Stream one fluid particle over one step: ballistic motion (with body force), Lees-Edwards
    /// and periodic wrapping (between walls: [`Physics::stream_walled`]). Returns the new stored
    /// position and velocity.
    #[inline]
    pub fn stream(&self, plan: &StepPlan, pos: [f32; 3], vel: [f64; 3]) -> ([f32; 3], [f64; 3]) {
        if let Some(w) = &self.walls {
            return self.stream_walled(w, pos, vel, &mut [[0.0; 3]; 2]);
        }
        let h = self.h;
        let a = self.acceleration;
        let hh = 0.5 * h * h;
        let mut x = pos[0] as f64 + vel[0] * h + a[0] * hh;
        let y = pos[1] as f64 + vel[1] * h + a[1] * hh;
        let z = pos[2] as f64 + vel[2] * h + a[2] * hh;
        let mut v = [vel[0] + a[0] * h, vel[1] + a[1] * h, vel[2] + a[2] * h];
        let ly = self.length[1];
        // Number of times the particle crossed the top plane (negative: the bottom one).
        let mut crossings: i32 = 0;
        let mut yw = y;
        if y >= ly {
            crossings = 1;
            yw = y - ly;
        } else if y < 0.0 {
            crossings = -1;
            yw = y + ly;
        }
        let mut yf = yw as f32;
        if yf >= ly as f32 {
            // Rounded onto the top plane: that is y = 0 of the box above.
            crossings += 1;
            yf = 0.0;
        }
        if crossings != 0 {
            let c = crossings as f64;
            x -= c * plan.le_offset;
            v[0] -= c * self.le_velocity;
        }
        (
            [
                wrap_coordinate(x, self.length[0]),
                yf,
                wrap_coordinate(z, self.length[2]),
            ],
            v,
        )
    }

    /// Bin a particle at `pos` for the collision of `plan` (grid shift and Lees-Edwards image).
    #[inline]
    pub fn locate(&self, plan: &StepPlan, pos: [f64; 3]) -> Location {
        let [lx, ly, lz] = self.length;
        let mut ys = pos[1] + plan.shift[1];
        let mut image = 0i32;
        if ys >= ly {
            ys -= ly;
            image = -1;
        } else if ys < 0.0 {
            ys += ly;
            image = 1;
        }
        let xs = wrap_f64(pos[0] + plan.shift[0] + image as f64 * plan.le_offset, lx);
        let zs = wrap_f64(pos[2] + plan.shift[2], lz);
        let ix = clamp_index(xs, self.cells[0]);
        let iy = clamp_index(ys, self.cells[1]);
        let iz = clamp_index(zs, self.cells[2]);
        let cell = (iy * self.cells[2] + iz) * self.cells[0] + ix;
        Location {
            cell,
            image,
            y_in_cell: ys - (iy as f64 + 0.5),
            x_in_cell: xs - (ix as f64 + 0.5),
            z_in_cell: zs - (iz as f64 + 0.5),
        }
    }

    /// Bin a solute, whose position may lie outside the box (MD codes often keep unwrapped
    /// coordinates). It is first brought into the box through whole periods in y, as its
    /// Lees-Edwards image (x moved by the offset per period), then binned like a fluid particle.
    /// The returned image counts every period crossed, so its velocity offset during the
    /// collision is consistent and removed again afterwards.
    #[inline]
    pub fn locate_solute(&self, plan: &StepPlan, pos: [f64; 3]) -> Location {
        let ly = self.length[1];
        let periods = (pos[1] / ly).floor();
        let y = pos[1] - periods * ly;
        let x = pos[0] - periods * plan.le_offset;
        let mut loc = self.locate(plan, [x, y, pos[2]]);
        loc.image -= periods as i32;
        loc
    }

    /// The collision parameters of one cell from its sums.
    #[inline]
    pub fn cell_params(&self, step: u64, cell: u32, sums: &CellSums) -> CellParams {
        if sums.count < 2 {
            return CellParams::default();
        }
        let inv_m = 1.0 / sums.mass;
        let u = [
            sums.momentum[0] * inv_m,
            sums.momentum[1] * inv_m,
            sums.momentum[2] * inv_m,
        ];
        let axis = rng::cell_rotation_axis(self.seed, step, cell);
        let mut scale = 1.0;
        if self.thermostat {
            let e_rel = sums.relative_energy();
            if e_rel > 0.0 {
                let target =
                    rng::cell_thermostat_energy(self.seed, step, cell, sums.count, self.kt);
                scale = (target / e_rel).sqrt();
            }
        }
        CellParams {
            velocity: u,
            axis,
            scale,
            active: true,
        }
    }

    /// The velocity offset a particle of LE image `image` carries during the collision.
    #[inline]
    pub fn image_velocity(&self, image: i32) -> f64 {
        image as f64 * self.le_velocity
    }

    /// Collide one particle: rotate its velocity relative to the cell velocity about the cell
    /// axis by the SRD angle, scale by the thermostat factor, add the cell velocity back.
    #[inline]
    pub fn collide(&self, cp: &CellParams, image: i32, v: [f64; 3]) -> [f64; 3] {
        if !cp.active {
            return v;
        }
        let off = self.image_velocity(image);
        let u = cp.velocity;
        let n = cp.axis;
        let r = [v[0] + off - u[0], v[1] - u[1], v[2] - u[2]];
        let d = n[0] * r[0] + n[1] * r[1] + n[2] * r[2];
        let par = [d * n[0], d * n[1], d * n[2]];
        let cross = [
            n[1] * r[2] - n[2] * r[1],
            n[2] * r[0] - n[0] * r[2],
            n[0] * r[1] - n[1] * r[0],
        ];
        let (c, s, f) = (self.cos_angle, self.sin_angle, cp.scale);
        let rot = [
            par[0] + c * (r[0] - par[0]) + s * cross[0],
            par[1] + c * (r[1] - par[1]) + s * cross[1],
            par[2] + c * (r[2] - par[2]) + s * cross[2],
        ];
        [
            u[0] + f * rot[0] - off,
            u[1] + f * rot[1],
            u[2] + f * rot[2],
        ]
    }

    /// Kinetic xy momentum flux of one particle over a streaming step, m·vy·(vx − u(ȳ)) with ȳ
    /// the midpoint of its (unwrapped) path: the flux the particle carries across y planes.
    #[inline]
    pub fn kinetic_stress(&self, y_start: f64, v: [f64; 3]) -> f64 {
        let y_mid = y_start + 0.5 * v[1] * self.h;
        self.mass * v[1] * (v[0] - self.flow_velocity(y_mid))
    }
}

/// `x` wrapped into [0, l) in f64.
#[inline]
pub fn wrap_f64(x: f64, l: f64) -> f64 {
    // already inside: as it is (the common case; no division on the GPU's twin)
    if (0.0..l).contains(&x) {
        return x;
    }
    let mut r = x - l * (x / l).floor();
    if r < 0.0 {
        r += l;
    }
    if r >= l {
        r -= l;
    }
    r
}

/// `x` wrapped into [0, l) and stored as f32 (a value that rounds up to l becomes 0).
#[inline]
pub fn wrap_coordinate(x: f64, l: f64) -> f32 {
    let f = wrap_f64(x, l) as f32;
    if f >= l as f32 {
        0.0
    } else {
        f
    }
}

#[inline]
fn clamp_index(s: f64, n: u32) -> u32 {
    let i = s.floor();
    if i < 0.0 {
        0
    } else if i >= n as f64 {
        n - 1
    } else {
        i as u32
    }
}

#[cfg(test)]
mod wrap_tests {
    use super::{wrap_coordinate, wrap_f64};

    /// A coordinate in [0, L) comes back as it is (the shortcut); any other lands in [0, L)
    /// one whole number of periods away.
    #[test]
    fn wrapping_keeps_a_coordinate_inside_and_moves_the_others_by_whole_periods() {
        let l = 37.5;
        for x in [0.0, -0.0, 1e-300, 3.25, 37.499999999, l - l * f64::EPSILON] {
            assert_eq!(wrap_f64(x, l).to_bits(), x.to_bits(), "{x}");
        }
        for x in [-1e-12, -3.25, -37.5, -100.0, 37.5, 40.0, 75.0, 1e6 + 0.125] {
            let w = wrap_f64(x, l);
            assert!((0.0..l).contains(&w), "{x} → {w}");
            let periods = (x - w) / l;
            assert!((periods - periods.round()).abs() < 1e-9, "{x} → {w}");
        }
        assert_eq!(wrap_coordinate(-1e-9, 16.0), 0.0);
        assert!(wrap_coordinate(15.999999999, 16.0) < 16.0);
    }
}
