//! Helpers shared by the integration tests: set-ups, comparisons with the CPU reference, and
//! the platform matrix ([`Platform`], [`backend_tests!`]).
#![allow(dead_code, unused_imports, unused_macros)]

mod md;
mod platform;
mod solutes;
mod walls;

pub use md::{dpd_fluid_system, md_settings, MdEngine};
pub(crate) use platform::backend_tests;
pub use platform::{GpuVariant, Platform};
pub use solutes::*;
pub use walls::{
    assert_in_fluid, assert_never_in_solid, assert_walls_follow_the_cpu, shaped, solutes_in_fluid,
    step_with_balanced_momentum,
};

use mpcbox::config::{Config, DeviceChoice, Thermostat};
use mpcbox::Solvent;

/// The `mpcbox` command these tests run: `MPCBOX_BIN` where set (a GPU machine running the
/// packed test binary, whose build directory is not there), else the one cargo built.
pub fn mpcbox_bin() -> std::path::PathBuf {
    std::env::var_os("MPCBOX_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_mpcbox").into())
}

/// A small CPU config; tests change what they need.
pub fn small_config(cells: [u32; 3], m: u32) -> Config {
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({}, {}, {}), particles_per_cell: {m}, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), steps: 100, device: Cpu)",
        cells[0], cells[1], cells[2]
    ))
    .expect("test config is valid");
    cfg.device = DeviceChoice::Cpu;
    cfg.thermostat = Thermostat::None;
    cfg.output.observable_interval = 0;
    cfg
}

/// [`small_config`] with Lees-Edwards shear 0.05, the MBS thermostat and the random grid shift.
pub fn sheared_config(cells: [u32; 3], seed: u64) -> Config {
    let mut cfg = small_config(cells, 10);
    cfg.shear_rate = 0.05;
    cfg.thermostat = Thermostat::Mbs;
    cfg.grid_shift = true;
    cfg.seed = seed;
    cfg
}

pub fn total_momentum(st: &mpcbox::state::FluidState, m: f64) -> [f64; 3] {
    std::array::from_fn(|k| st.vel[k].iter().sum::<f64>() * m)
}

/// Momentum of the fluid (the backend's moments) plus that of the solutes.
pub fn fluid_and_solute_momentum(s: &mut Solvent, vel: &[[f64; 3]], mass: &[f64]) -> [f64; 3] {
    let mut p = s.moments().unwrap().momentum;
    for (v, m) in vel.iter().zip(mass) {
        for k in 0..3 {
            p[k] += m * v[k];
        }
    }
    p
}

/// Fluid + bead momentum of a coupled run (the fluid downloaded, the beads from the engine).
pub fn coupled_momentum(s: &mut Solvent, c: &mut mpcbox::md::coupled::Coupling) -> [f64; 3] {
    let m = s.config().mass;
    let mut p = total_momentum(&s.fluid_state().unwrap(), m);
    let sys = c.system().unwrap();
    for (m, v) in sys.masses().iter().zip(&sys.vel) {
        for (pk, vk) in p.iter_mut().zip(v) {
            *pk += m * vk;
        }
    }
    p
}

/// The solvent's fluid survives download → upload, and a state one particle short is refused
/// with a message that names the particles.
pub fn assert_state_round_trips(s: &mut Solvent, what: &str) {
    let st = s.fluid_state().unwrap();
    s.set_fluid_state(&st).unwrap();
    let again = s.fluid_state().unwrap();
    assert!(
        st == again,
        "{what}: the state changed through download → upload"
    );
    let mut short = st.clone();
    for k in 0..3 {
        short.pos[k].pop();
        short.vel[k].pop();
    }
    let e = s.set_fluid_state(&short).unwrap_err().to_string();
    assert!(e.contains("particles"), "{what}: {e}");
}

/// Every component of a momentum changed by at most 1e-12 of `scale` (N·m·sqrt(kT/m) or a
/// like sum of |m v|).
pub fn assert_momentum_kept(before: [f64; 3], after: [f64; 3], scale: f64, what: &str) {
    for k in 0..3 {
        assert!(
            (after[k] - before[k]).abs() / scale <= 1e-12,
            "{what}: momentum {k}: {} -> {}",
            before[k],
            after[k]
        );
    }
}

pub fn kinetic_energy(st: &mpcbox::state::FluidState, m: f64) -> f64 {
    (0..3)
        .map(|k| st.vel[k].iter().map(|v| 0.5 * m * v * v).sum::<f64>())
        .sum()
}

pub fn rel_close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * a.abs().max(b.abs()).max(1.0)
}

/// Two states of the same particles: asserts velocities agree to `vel_tol` (relative) and at
/// most one position component in 1000 differs (by ≤ 1e-5, f32 rounding of a velocity that
/// differs in its last bits); returns the worst relative velocity difference and the count of
/// differing position components.
pub fn compare_states(
    reference: &mpcbox::state::FluidState,
    other: &mpcbox::state::FluidState,
    vel_tol: f64,
    what: &str,
) -> (f64, usize) {
    assert_eq!(reference.len(), other.len(), "{what}: particle count");
    let mut worst = 0.0f64;
    let mut pos_diff = 0usize;
    let mut max_dpos = 0.0f32;
    for i in 0..reference.len() {
        for k in 0..3 {
            let (a, b) = (reference.vel[k][i], other.vel[k][i]);
            worst = worst.max((a - b).abs() / a.abs().max(b.abs()).max(1.0));
            if reference.pos[k][i] != other.pos[k][i] {
                pos_diff += 1;
                max_dpos = max_dpos.max((reference.pos[k][i] - other.pos[k][i]).abs());
            }
        }
    }
    assert!(
        worst <= vel_tol,
        "{what}: velocity relative difference {worst:e}"
    );
    assert!(
        pos_diff * 1000 <= reference.len() && max_dpos <= 1e-5,
        "{what}: {pos_diff} position components differ (max {max_dpos})"
    );
    (worst, pos_diff)
}

/// Two backends' reports of the same step: relative energy to `energy_tol` (relative), the
/// same degrees of freedom, stresses to `stress_tol` relative to max(1, |reference|).
pub fn compare_reports(
    c: &mpcbox::backend::StepReport,
    g: &mpcbox::backend::StepReport,
    energy_tol: f64,
    stress_tol: f64,
    what: &str,
) {
    assert!(
        rel_close(c.relative_energy, g.relative_energy, energy_tol),
        "{what}: {c:?} vs {g:?}"
    );
    assert_eq!(c.relative_dof, g.relative_dof, "{what}");
    for (a, b) in [
        (c.kinetic_stress_sum, g.kinetic_stress_sum),
        (c.collisional_stress_sum, g.collisional_stress_sum),
    ] {
        assert!(
            (a - b).abs() <= stress_tol * a.abs().max(1.0),
            "{what}: stress {c:?} vs {g:?}"
        );
    }
}

/// Solute velocities of two backends after the same coupled step agree to `tol` (relative).
pub fn assert_solute_velocities_close(
    reference: &[[f64; 3]],
    other: &[[f64; 3]],
    tol: f64,
    what: &str,
) {
    assert_eq!(reference.len(), other.len(), "{what}: solute count");
    for (a, b) in reference.iter().zip(other) {
        for k in 0..3 {
            assert!(
                rel_close(a[k], b[k], tol),
                "{what}: solute velocity {a:?} vs {b:?}"
            );
        }
    }
}

/// `python3` must import `module` (an independent reader a test checks our files with): a
/// test that needs it runs where MPCBOX_REQUIRE_EXTERNAL is set and is ignored elsewhere, so a
/// missing package fails it with the install line instead of letting it pass unchecked.
pub fn require_python(module: &str, package: &str) {
    let ok = std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "python3 -c 'import {module}' failed: the {package} Python package is missing; fix: \
         python3 -m pip install {package}"
    );
}
