//! The kernels' parameters of one step ([`KernelParams`], the run constants plus the step's
//! plan), passed by value to every step kernel; the mirror of `struct MpcParams` in
//! `kernels/mpc.cuh`.

use cudarc::driver::{DevicePtr, DeviceRepr};

use super::contract::wall_kind;
use super::CudaBackend;
use crate::fixed_sums::{CELL_KINDS, GLOBAL_KINDS};
use crate::physics::walls::{Shape, Walls};
use crate::physics::StepPlan;

/// Doubles in the step report: Σ E_rel, Σ (Nc − 1), kinetic and collisional stress sums, then
/// the momentum given to each wall surface ([2][3]).
pub(super) const REPORT_WORDS: usize = 10;
/// Where the wall momentum starts in the report.
pub(super) const REPORT_WALL_OFFSET: usize = 4;
/// Copies of the report on the device (`MPC_SPREAD`): block b of a kernel adds its sums into
/// copy b % REPORT_COPIES, so that hundreds of thousands of blocks do not serialise on one
/// address; the host adds the copies. The walls' momentum goes into copy 0.
pub(super) const REPORT_COPIES: usize = 32;

/// Kernel parameters, passed by value; mirrors `struct MpcParams` in `kernels/mpc.cuh`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct KernelParams {
    length: [f64; 3],
    h: f64,
    mass: f64,
    kt: f64,
    cos_angle: f64,
    sin_angle: f64,
    accel: [f64; 3],
    shear_rate: f64,
    le_velocity: f64,
    shift: [f64; 3],
    le_offset: f64,
    seed: u64,
    step: u64,
    cells: [u32; 3],
    thermostat: u32,
    measure_stress: u32,
    n_fluid: u32,
    n_solutes: u32,
    n_cells: u32,
    cell_offset: u32,
    slab: u32,
    walls: WallParams,
    /// The fixed-point sums' scales and their inverses (`crate::fixed_sums`; `fixed` = 0: f64).
    fix_scale: [f64; CELL_KINDS],
    fix_inv: [f64; CELL_KINDS],
    global_scale: [f64; GLOBAL_KINDS],
    global_inv: [f64; GLOBAL_KINDS],
    fixed: u32,
    fixed_pad: u32,
    /// The heaviest solute the cell sums hold ([`solute_mass_cap`]).
    solute_mass_cap: f64,
}

/// The walls of a step; mirrors `struct MpcWalls` in `kernels/walls.cuh` (a tagged union:
/// `kind` says which shape `shape` holds).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WallParams {
    /// `contract::WALLS_*` (`MPC_WALLS_*`).
    kind: u32,
    no_slip: u32,
    /// Particles per cell M (virtual particles fill cut cells up to it).
    fill: u32,
    pad: u32,
    /// Device address of the report's momentum given to each surface (6 doubles).
    momentum: u64,
    /// Device address of a distance field's node values (f32, in the cells' order:
    /// `wall_data`), 0 for other shapes.
    grid: u64,
    /// Device address of the clearance per cell (`Walls::cell_clearances`, a byte per global
    /// cell), 0 where the kernels compute each particle's own.
    clearance: u64,
    /// Slit (either normal, told apart by `kind`): bottom, top, u_bottom, u_top, bottom_f32,
    /// top_f32; pipe: yc, zc, radius, u, 0, 0; sphere (inside or outside, told apart by
    /// `kind`): xc, yc, zc, radius, along_z (1 for a cylinder along z), 0; planar pore: xc, yc,
    /// half_length, half_height, 0, 0; cosine walls: yc, half_height, amplitude, period,
    /// expansion (1 for an expansion-contraction), 0; distance field: spacing, nx, ny, nz,
    /// slope bound, 0.
    shape: [f64; 6],
}

impl WallParams {
    /// The kernels' form of `walls`, adding to the report at device address `momentum`; a
    /// distance field's nodes at device address `grid`.
    fn new(walls: Option<&Walls>, momentum: u64, grid: u64, clearance: u64) -> WallParams {
        let Some(w) = walls else {
            return WallParams::default();
        };
        WallParams {
            no_slip: w.no_slip as u32,
            fill: w.fill,
            momentum,
            grid,
            clearance,
            ..WallParams::of_shape(&w.shape)
        }
    }

    /// The shape alone (the MD engine's wall potential: no fill, no momentum account).
    pub(crate) fn of_shape(shape: &Shape) -> WallParams {
        let (kind, shape) = match shape {
            Shape::Slit(s) => (
                wall_kind(shape),
                [
                    s.bottom,
                    s.top,
                    s.velocity[0],
                    s.velocity[1],
                    s.bottom_f32 as f64,
                    s.top_f32 as f64,
                ],
            ),
            Shape::Pipe(p) => (
                wall_kind(shape),
                [p.centre[0], p.centre[1], p.radius, p.velocity, 0.0, 0.0],
            ),
            Shape::Sphere(s) => (
                wall_kind(shape),
                [
                    s.centre[0],
                    s.centre[1],
                    s.centre[2],
                    s.radius,
                    if s.along_z { 1.0 } else { 0.0 },
                    0.0,
                ],
            ),
            Shape::PlanarPore(p) => (
                wall_kind(shape),
                [p.xc, p.yc, p.half_length, p.half_height, 0.0, 0.0],
            ),
            Shape::Cosine(c) => (
                wall_kind(shape),
                [
                    c.yc,
                    c.half_height,
                    c.amplitude,
                    c.period,
                    if c.expansion { 1.0 } else { 0.0 },
                    0.0,
                ],
            ),
            Shape::Field(f) => (
                wall_kind(shape),
                [
                    f.spacing,
                    f.nodes[0] as f64,
                    f.nodes[1] as f64,
                    f.nodes[2] as f64,
                    f.slope,
                    f.inv_spacing,
                ],
            ),
        };
        WallParams {
            kind,
            shape,
            ..WallParams::default()
        }
    }
}

// SAFETY: `#[repr(C)]` plain old data (u32 words, three u64 device addresses, f64s; 88 bytes,
// no padding, checked below) with the layout of `struct MpcWalls` in kernels/walls.cuh; the MD
// engine passes it with zero addresses, which its kernel never dereferences (it refuses a
// distance field, whose grid it does not hold). A fluid backend's `grid` and `clearance` point
// at its uploads (`wall_data.rs`), which live as long as the backend or until set_physics
// replaces them after a flush, in this stream's order.
unsafe impl DeviceRepr for WallParams {}

// SAFETY: plain old data with the C layout of `MpcParams` (f64, u64 and u32 fields and
// arrays, no padding between fields: 488 bytes, checked below), which the kernels take by
// value. The one address in it, `walls.momentum`, points into this backend's report buffer,
// which lives as long as the backend and is only written by its own kernels' atomics.
unsafe impl DeviceRepr for KernelParams {}

const _: () = assert!(std::mem::size_of::<WallParams>() == 88);
const _: () = assert!(std::mem::size_of::<KernelParams>() == 488);

impl KernelParams {
    /// The same parameters for `n` solutes (a slab's listed share of them).
    pub(super) fn with_solutes(mut self, n: usize) -> KernelParams {
        self.n_solutes = n as u32;
        self
    }

    /// Whether `other` is the same step (count, grid shift, solutes) as these parameters.
    pub(super) fn same_step(&self, other: &KernelParams) -> bool {
        self.step == other.step && self.shift == other.shift && self.n_solutes == other.n_solutes
    }
}

impl CudaBackend {
    /// The kernels' parameters for the step `plan` with `n_solutes` solutes, on this GPU's
    /// particles and cells (slab mode: its layers, draws keyed by the global cell).
    pub(super) fn params(&self, plan: &StepPlan, n_solutes: usize) -> KernelParams {
        let p = &self.phys;
        KernelParams {
            length: p.length,
            h: p.h,
            mass: p.mass,
            kt: p.kt,
            cos_angle: p.cos_angle,
            sin_angle: p.sin_angle,
            accel: p.acceleration,
            shear_rate: p.shear_rate,
            le_velocity: p.le_velocity,
            shift: plan.shift,
            le_offset: plan.le_offset,
            seed: p.seed,
            step: plan.step,
            cells: p.cells,
            thermostat: p.thermostat as u32,
            measure_stress: plan.measure_stress as u32,
            n_fluid: self.n as u32,
            n_solutes: n_solutes as u32,
            n_cells: self.ncells as u32,
            cell_offset: self.slab.as_ref().map_or(0, |sl| sl.cell_offset),
            slab: self.slab.is_some() as u32,
            walls: WallParams::new(
                p.walls.as_ref(),
                self.wall_report_address(),
                self.walls.grid_address(&self.dev.stream),
                self.walls.clearance_address(&self.dev.stream),
            ),
            fix_scale: p.sums.map_or([1.0; CELL_KINDS], |s| s.cell),
            fix_inv: p.sums.map_or([1.0; CELL_KINDS], |s| s.cell_inv),
            global_scale: p.sums.map_or([1.0; GLOBAL_KINDS], |s| s.global),
            global_inv: p.sums.map_or([1.0; GLOBAL_KINDS], |s| s.global_inv),
            fixed: p.sums.is_some() as u32,
            fixed_pad: 0,
            solute_mass_cap: solute_mass_cap(p),
        }
    }

    /// Device address of the report's wall momentum (report words 4..10).
    fn wall_report_address(&self) -> u64 {
        let (base, _sync) = self.obs.report.device_ptr(&self.dev.stream);
        base + (REPORT_WALL_OFFSET * std::mem::size_of::<f64>()) as u64
    }
}

impl KernelParams {
    /// The heaviest solute the step's cell sums hold ([`solute_mass_cap`]).
    pub(super) fn solute_mass_cap(&self) -> f64 {
        self.solute_mass_cap
    }
}

impl CudaBackend {
    /// The heaviest solute this fluid's cell sums hold ([`solute_mass_cap`]).
    pub(super) fn solute_mass_cap(&self) -> f64 {
        solute_mass_cap(&self.phys)
    }
}

/// The heaviest solute `phys`'s cell sums hold: the fixed-point sums' cap
/// (`FixedScales::max_solute_mass`), or infinity for f64 sums. The device tests of solute values
/// refuse a heavier one, as `check_solute_masses_fit` does on the host.
pub(super) fn solute_mass_cap(phys: &crate::physics::Physics) -> f64 {
    phys.sums.map_or(f64::INFINITY, |s| s.max_solute_mass)
}

/// `static_assert`s of the parameter structs' layouts against the Rust structs, appended after
/// the sources (`with_params`: the fluid kernels, which define `MpcParams` and the report's
/// layout, `MPC_REPORT_WORDS` words in `MPC_SPREAD` copies; the MD kernels define only
/// `MpcWalls`).
pub fn layout_checks(with_params: bool) -> String {
    use std::mem::size_of;
    // sizes only: the GPU machine's NVRTC (CUDA 13, driver 580) rejects __builtin_offsetof in
    // a static_assert, and offsetof needs a header NVRTC does not have
    let mut checks = vec![("sizeof(MpcWalls)", size_of::<WallParams>())];
    if with_params {
        checks.push(("sizeof(MpcParams)", size_of::<KernelParams>()));
        checks.push(("MPC_REPORT_WORDS", REPORT_WORDS));
        checks.push(("MPC_SPREAD", REPORT_COPIES));
    }
    let mut s = String::from("#line 1 \"layout checks (src/backend/cuda/params.rs)\"\n");
    for (expr, value) in checks {
        s.push_str(&format!(
            "static_assert({expr} == {value}, \"{expr} differs from the Rust side\");\n"
        ));
    }
    s
}

/// Where emigrating particles go (slab mode); mirrors `struct MpcMigration` in `kernels/migrate.cuh`.
/// Zero on one GPU. Raw device addresses: the buffers live as long as the backend.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MigrationArgs {
    pub(crate) send: [u64; 2],
    pub(crate) counters: u64,
    pub(crate) holes: u64,
    pub(crate) ids: u64,
    pub(crate) send_capacity: u32,
    pub(crate) pad: u32,
}

// SAFETY: plain-old-data (u64 and u32 fields, no padding: 48 bytes, checked here) with the C
// layout of `MpcMigration`; the addresses are only dereferenced by the kernels, and only in
// slab mode, where they point at buffers of the slab that live as long as the backend.
unsafe impl DeviceRepr for MigrationArgs {}

const _: () = assert!(std::mem::size_of::<MigrationArgs>() == 48);

impl super::launch::CudaType for KernelParams {
    const NAME: &'static str = "MpcParams";
}

impl super::launch::CudaType for WallParams {
    const NAME: &'static str = "MpcWalls";
}

impl super::launch::CudaType for MigrationArgs {
    const NAME: &'static str = "MpcMigration";
}
