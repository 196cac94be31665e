//! `WallsConfig::validate`: the checks of the `walls` section: each shape's size against the
//! box, the wall speeds, the body force's direction and the solutes' wall potential; every error
//! names the field and the fix.

use super::walls::{SoluteWall, WallsConfig, MIN_CHANNEL_CELLS};
use super::Config;
use crate::error::ConfigError;
use crate::physics::walls::shapes::SlitNormal;

impl WallsConfig {
    /// Every check of the walls against the rest of the config.
    pub fn validate(&self, cfg: &Config) -> Result<(), ConfigError> {
        let z_plates = matches!(
            self,
            WallsConfig::Slit {
                normal: SlitNormal::Z,
                ..
            }
        );
        if cfg.shear_rate != 0.0 && z_plates {
            // Lees-Edwards shears along y: no-slip plates normal to z would have to move with
            // the sheared flow γ̇ (y − Ly/2), which no rigid plate does
            return err(
                "walls",
                format!(
                    "walls cannot be combined with Lees-Edwards shear (shear_rate = {}): plates \
                     normal to z would have to move with the sheared flow along y",
                    cfg.shear_rate
                ),
                "set shear_rate: 0.0 and shear the fluid with the moving plates themselves \
                 (Slit(normal: Z, bottom_velocity: ..., top_velocity: ...): vx varies along z) \
                 or drive it with body_force along x or y",
            );
        }
        if cfg.shear_rate != 0.0 {
            return err(
                "walls",
                format!(
                    "walls cannot be combined with Lees-Edwards shear (shear_rate = {})",
                    cfg.shear_rate
                ),
                "set shear_rate: 0.0 and shear the fluid with moving plates \
                 (Slit(bottom_velocity: ..., top_velocity: ...)) or drive it with body_force",
            );
        }
        match *self {
            WallsConfig::Slit {
                height,
                normal,
                bottom_velocity,
                top_velocity,
                ..
            } => {
                check_slit(cfg, height, normal)?;
                check_speed(cfg, "walls.bottom_velocity", bottom_velocity)?;
                check_speed(cfg, "walls.top_velocity", top_velocity)?;
            }
            WallsConfig::Pipe {
                radius, velocity, ..
            } => {
                check_pipe(cfg, radius)?;
                check_speed(cfg, "walls.velocity", velocity)?;
            }
            WallsConfig::Sphere { radius, .. } => check_round(cfg, radius, 3, 1.0)?,
            WallsConfig::SphereObstacle { radius, .. } => check_round(cfg, radius, 3, 2.0)?,
            WallsConfig::CylinderObstacle { radius, .. } => check_round(cfg, radius, 2, 2.0)?,
            WallsConfig::PlanarPore { height, length, .. } => check_pore(cfg, height, length)?,
            WallsConfig::CosineChannel {
                height, amplitude, ..
            } => check_cosine(cfg, height, amplitude, false)?,
            WallsConfig::CosineExpansion {
                height, amplitude, ..
            } => check_cosine(cfg, height, amplitude, true)?,
            WallsConfig::DistanceField {
                ref file,
                spacing,
                kind,
                ref loaded,
                ..
            } => {
                loaded.get(file, spacing, kind, cfg.cells)?;
            }
        }
        check_body_force(cfg, self)?;
        check_solute_wall(self.solute_wall())
    }
}

fn err(field: &str, problem: String, fix: &str) -> Result<(), ConfigError> {
    Err(ConfigError {
        field: field.into(),
        problem,
        fix: fix.into(),
    })
}

fn check_slit(cfg: &Config, height: Option<f64>, normal: SlitNormal) -> Result<(), ConfigError> {
    let a = normal.axis();
    let (axis, len) = (normal.name(), cfg.cells[a] as f64);
    let h = height.unwrap_or(len - 1.0);
    if !h.is_finite() || h < MIN_CHANNEL_CELLS {
        return err(
            "walls.height",
            format!(
                "a slit {h} cells high is thinner than {MIN_CHANNEL_CELLS} cells (cells.{a} = {len})"
            ),
            &format!(
                "make the slit at least 4 cells high: cells.{a} ≥ 5 (the default height is \
                 cells.{a} − 1)"
            ),
        );
    }
    if h > len - 1.0 {
        return err(
            "walls.height",
            format!(
                "a slit {h} cells high needs a box of at least {} cells in {axis} (cells.{a} = {len})",
                h + 1.0
            ),
            &format!(
                "leave one cell layer more than the slit height (the shifted grid reaches half a \
                 cell beyond each plate): set cells.{a} ≥ height + 1, or leave height unset \
                 (cells.{a} − 1)"
            ),
        );
    }
    Ok(())
}

fn check_pipe(cfg: &Config, radius: f64) -> Result<(), ConfigError> {
    let room = cfg.cells[1].min(cfg.cells[2]) as f64 - 1.0;
    if !radius.is_finite() || 2.0 * radius < MIN_CHANNEL_CELLS {
        return err(
            "walls.radius",
            format!("a pipe of radius {radius} is thinner than {MIN_CHANNEL_CELLS} cells across"),
            "give the pipe a radius of at least 2 cells",
        );
    }
    if 2.0 * radius > room {
        return err(
            "walls.radius",
            format!(
                "a pipe of diameter {} is wider than the box allows ({room} cells: cells.1 and \
                 cells.2 less one)",
                2.0 * radius
            ),
            "use a radius ≤ (min(cells.1, cells.2) − 1) / 2, or a larger box (the shifted grid \
             reaches half a cell beyond the wall)",
        );
    }
    Ok(())
}

/// A sphere (cylinder along z: `axes` = 2, x and y) of `radius` centred in the box: at least
/// 4 cells across, and `room` cells between it and the box faces along its first `axes` axes
/// (inside: the shifted grid's layer; an obstacle: one cell, so that no step or collision
/// cell reaches a periodic image of it).
fn check_round(cfg: &Config, radius: f64, axes: usize, room: f64) -> Result<(), ConfigError> {
    let short = cfg.cells[..axes].iter().copied().min().unwrap_or(0) as f64;
    let what = if axes == 3 { "sphere" } else { "cylinder" };
    if !radius.is_finite() || 2.0 * radius < MIN_CHANNEL_CELLS {
        return err(
            "walls.radius",
            format!("a {what} of radius {radius} is smaller than {MIN_CHANNEL_CELLS} cells across"),
            &format!("give the {what} a radius of at least 2 cells"),
        );
    }
    if 2.0 * radius > short - room {
        return err(
            "walls.radius",
            format!(
                "a {what} of diameter {} leaves less than {room} cell(s) to the box faces (the \
                 shortest edge across it is {short} cells)",
                2.0 * radius
            ),
            &format!(
                "use a radius ≤ (shortest edge − {room}) / 2 = {}, or a larger box",
                0.5 * (short - room)
            ),
        );
    }
    Ok(())
}

/// A pore at least [`MIN_CHANNEL_CELLS`] high with a plate at least a cell thick across the
/// periodic y boundary, and at least a cell of reservoir along x: a step's path or a shifted
/// collision cell then meets no other period's block than the formulas take.
fn check_pore(cfg: &Config, height: f64, length: f64) -> Result<(), ConfigError> {
    let (lx, ly) = (cfg.cells[0] as f64, cfg.cells[1] as f64);
    if !height.is_finite() || height < MIN_CHANNEL_CELLS {
        return err(
            "walls.height",
            format!("a pore {height} cells high is thinner than {MIN_CHANNEL_CELLS} cells"),
            "make the pore at least 4 cells high",
        );
    }
    if height > ly - 1.0 {
        return err(
            "walls.height",
            format!(
                "a pore {height} cells high leaves less than a cell of solid in a box {ly} \
                 cells high (cells.1)"
            ),
            &format!("use height ≤ cells.1 − 1 = {}, or a taller box", ly - 1.0),
        );
    }
    if !length.is_finite() || length <= 0.0 {
        return err(
            "walls.length",
            format!("a pore's length must be finite and > 0 (got {length})"),
            "give the pore's length along x, e.g. length: 8.0",
        );
    }
    if length > lx - 1.0 {
        return err(
            "walls.length",
            format!(
                "a pore {length} cells long leaves less than a cell of reservoir in a box {lx} \
                 cells long (cells.0)"
            ),
            &format!(
                "use length ≤ cells.0 − 1 = {} (for a pore through the whole box use Slit)",
                lx - 1.0
            ),
        );
    }
    Ok(())
}

/// Cosine walls: a mean width of at least [`MIN_CHANNEL_CELLS`], a non-negative amplitude,
/// walls at least a cell apart where an expansion is narrowest, and half a cell between the
/// walls' farthest reach and the box faces (the shifted grid's layer).
fn check_cosine(
    cfg: &Config,
    height: f64,
    amplitude: f64,
    expansion: bool,
) -> Result<(), ConfigError> {
    let ly = cfg.cells[1] as f64;
    if !height.is_finite() || height < MIN_CHANNEL_CELLS {
        return err(
            "walls.height",
            format!("cosine walls {height} cells apart are closer than {MIN_CHANNEL_CELLS} cells"),
            "make the channel at least 4 cells high",
        );
    }
    if !amplitude.is_finite() || amplitude < 0.0 {
        return err(
            "walls.amplitude",
            format!("must be finite and ≥ 0 (got {amplitude})"),
            "give the walls' amplitude in cells, e.g. amplitude: 1.0 (0: a straight slit)",
        );
    }
    if expansion && height - 2.0 * amplitude < 1.0 {
        return err(
            "walls.amplitude",
            format!(
                "walls {height} cells apart waving against each other by {amplitude} come \
                 within {} cells of each other (less than a cell)",
                height - 2.0 * amplitude
            ),
            &format!(
                "keep amplitude ≤ (height − 1) / 2 = {}",
                0.5 * (height - 1.0)
            ),
        );
    }
    if height + 2.0 * amplitude > ly - 1.0 {
        return err(
            "walls.amplitude",
            format!(
                "walls reaching {} cells across (height + 2 amplitude) leave less than half a \
                 cell to the box faces (cells.1 = {ly})",
                height + 2.0 * amplitude
            ),
            "keep height + 2 amplitude ≤ cells.1 − 1 (the shifted grid reaches half a cell \
             beyond the walls), or a taller box",
        );
    }
    Ok(())
}

fn check_speed(cfg: &Config, field: &str, u: f64) -> Result<(), ConfigError> {
    if !u.is_finite() {
        return err(
            field,
            format!("must be finite (got {u})"),
            "give a wall speed such as 0.1",
        );
    }
    if u.abs() * cfg.time_step > 0.5 {
        return err(
            field,
            format!(
                "|u|·h = {:.3} cells per step is too fast for the grid",
                u.abs() * cfg.time_step
            ),
            "keep |wall velocity| · time_step below 0.5",
        );
    }
    Ok(())
}

/// The time of impact is exact for paths that are straight across the channel: a body force
/// may only push along the walls (around a spherical obstacle in any direction; in a sphere
/// in none).
fn check_body_force(cfg: &Config, walls: &WallsConfig) -> Result<(), ConfigError> {
    let (closed, along): (&[usize], &str) = match walls {
        WallsConfig::Slit {
            normal: SlitNormal::Y,
            ..
        } => (&[1], "body_force: (fx, 0.0, fz) between plates normal to y"),
        WallsConfig::Slit {
            normal: SlitNormal::Z,
            ..
        } => (&[2], "body_force: (fx, fy, 0.0) between plates normal to z"),
        WallsConfig::Pipe { .. } => (&[1, 2], "body_force: (fx, 0.0, 0.0) in a pipe"),
        // a closed container: a body force would only build up a pressure gradient, and the
        // paths it bends would meet the curved wall away from the straight chord's time
        WallsConfig::Sphere { .. } => (&[0, 1, 2], "body_force: (0.0, 0.0, 0.0) in a sphere"),
        // around an obstacle, through a pore or a geometry from data any direction: the chord's
        // time of impact misses the bent path by at most |a| h² / 2 (kept out of the solid by
        // keep_inside); between cosine walls along them (their slope sees the same bend along x)
        WallsConfig::SphereObstacle { .. }
        | WallsConfig::CylinderObstacle { .. }
        | WallsConfig::PlanarPore { .. }
        | WallsConfig::DistanceField { .. } => (&[], ""),
        WallsConfig::CosineChannel { .. } | WallsConfig::CosineExpansion { .. } => {
            (&[1], "body_force: (fx, 0.0, fz) between cosine walls")
        }
    };
    for &k in closed {
        if cfg.body_force[k] != 0.0 {
            return err(
                &format!("body_force.{k}"),
                format!(
                    "a body force across the walls ({}) is not supported: bounce-back is exact \
                     for motion that is straight across the channel",
                    cfg.body_force[k]
                ),
                &format!("push along the walls only ({along})"),
            );
        }
    }
    Ok(())
}

fn check_solute_wall(w: SoluteWall) -> Result<(), ConfigError> {
    for (name, v) in [("epsilon", w.epsilon), ("sigma", w.sigma)] {
        if !(v.is_finite() && v > 0.0) {
            return err(
                &format!("walls.solutes.{name}"),
                format!("must be finite and > 0 (got {v})"),
                "give the solutes' WCA wall potential, e.g. solutes: (epsilon: 1.0, sigma: 1.0)",
            );
        }
    }
    Ok(())
}
